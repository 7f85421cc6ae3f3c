/* dtype.c - the dtype traits table, half/bfloat conversions and casts. */
#include "internal.h"

#include <math.h>
#include <string.h>

typedef struct {
    const char *name;
    size_t size;        /* bytes per element, 0 for packed ternary */
    char kind;          /* 'f' float, 'i' integer, 't' ternary */
} dtype_traits;

static const dtype_traits traits[] = {
    [BITNET_F32] = {"f32", 4, 'f'},  [BITNET_F16] = {"f16", 2, 'f'}, [BITNET_BF16] = {"bf16", 2, 'f'},
    [BITNET_F64] = {"f64", 8, 'f'},  [BITNET_I8] = {"i8", 1, 'i'},   [BITNET_I16] = {"i16", 2, 'i'},
    [BITNET_I32] = {"i32", 4, 'i'},  [BITNET_U8] = {"u8", 1, 'i'},   [BITNET_I64] = {"i64", 8, 'i'},
    [BITNET_T2] = {"t2", 0, 't'},    [BITNET_T3] = {"t3", 0, 't'},
};
#define N_TRAITS (sizeof traits / sizeof traits[0])

static const dtype_traits *get(bitnet_dtype t)
{
    if ((unsigned)t >= N_TRAITS || !traits[t].name) return NULL;
    return &traits[t];
}

int bitnet_dtype_valid(bitnet_dtype t) { return get(t) != NULL; }
const char *bitnet_dtype_name(bitnet_dtype t) { const dtype_traits *d = get(t); return d ? d->name : NULL; }
int bitnet_dtype_is_float(bitnet_dtype t) { const dtype_traits *d = get(t); return d && d->kind == 'f'; }
int bitnet_dtype_is_int(bitnet_dtype t) { const dtype_traits *d = get(t); return d && d->kind == 'i'; }
int bitnet_dtype_is_ternary(bitnet_dtype t) { const dtype_traits *d = get(t); return d && d->kind == 't'; }
size_t bitnet_dtype_size(bitnet_dtype t) { const dtype_traits *d = get(t); return d ? d->size : 0; }

bitnet_status bitnet_dtype_parse(const char *name, bitnet_dtype *out)
{
    for (unsigned i = 0; i < N_TRAITS; i++)
        if (traits[i].name && name && strcmp(traits[i].name, name) == 0) {
            *out = (bitnet_dtype)i;
            return BITNET_OK;
        }
    return bn_fail(BITNET_E_INVALID, "unknown dtype '%s' (f32 f16 bf16 f64 i8 i16 i32 i64 u8 t2 t3)",
                   name ? name : "(null)");
}

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint64_t d2u(double f) { uint64_t u; memcpy(&u, &f, 8); return u; }

float bitnet_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13));       /* Inf/NaN */
    if (exp == 0) {                                                       /* zero/subnormal */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

/* Rounds a double to the nearest f16, ties to even (one rounding step). */
uint16_t bitnet_f64_to_f16(double d)
{
    uint64_t u = d2u(d);
    uint16_t sign = (uint16_t)((u >> 48) & 0x8000);
    double a = fabs(d);
    if (isnan(d)) return (uint16_t)(sign | 0x7e00);
    if (a >= 65520.0) return (uint16_t)(sign | 0x7c00);                 /* rounds to Inf */
    if (a < 0x1p-14) {                                                    /* subnormal range */
        double m = nearbyint(a * 0x1p24);                                 /* current mode: nearest even */
        return (uint16_t)(sign | (uint16_t)m);                            /* m == 1024 gives min normal */
    }
    int e;
    double fr = frexp(a, &e);                                             /* a = fr * 2^e, fr in [0.5,1) */
    double m = nearbyint(fr * 2048.0);                                    /* 11 significant bits */
    if (m == 2048.0) { m = 1024.0; e++; }
    unsigned exp = (unsigned)(e - 1 + 15);
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    return (uint16_t)(sign | (exp << 10) | ((unsigned)m - 1024u));
}

uint16_t bitnet_f32_to_f16(float f) { return bitnet_f64_to_f16((double)f); }

float bitnet_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t bitnet_f32_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

uint16_t bitnet_f64_to_bf16(double d)
{
    if (isnan(d)) return (uint16_t)(signbit(d) ? 0xffc0 : 0x7fc0);
    /* Round once: keep 8 significant bits from the double directly. */
    double a = fabs(d);
    uint16_t sign = signbit(d) ? 0x8000 : 0;
    if (a == 0) return sign;
    if (a >= 0x1.ffp127 + 0x1p119) return (uint16_t)(sign | 0x7f80);    /* rounds past max */
    int e;
    double fr = frexp(a, &e);
    double m;
    if (e - 1 < -126) {                                                   /* subnormal bf16 */
        m = nearbyint(a * 0x1p133);
        return (uint16_t)(sign | (uint16_t)m);
    }
    m = nearbyint(fr * 256.0);
    if (m == 256.0) { m = 128.0; e++; }
    unsigned exp = (unsigned)(e - 1 + 127);
    if (exp >= 255) return (uint16_t)(sign | 0x7f80);
    return (uint16_t)(sign | (exp << 7) | ((unsigned)m - 128u));
}

static double load(bitnet_dtype t, const void *src, size_t i)
{
    const uint8_t *p = (const uint8_t *)src;
    switch (t) {
    case BITNET_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case BITNET_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case BITNET_F16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return bitnet_f16_to_f32(v); }
    case BITNET_BF16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return bitnet_bf16_to_f32(v); }
    case BITNET_I8: return (int8_t)p[i];
    case BITNET_U8: return p[i];
    case BITNET_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case BITNET_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    default: return 0;
    }
}

static double clamp_round(double v, double lo, double hi)
{
    if (isnan(v)) return 0;
    v = nearbyint(v);
    return v < lo ? lo : v > hi ? hi : v;
}

static void store(bitnet_dtype t, void *dst, size_t i, double v)
{
    uint8_t *p = (uint8_t *)dst;
    switch (t) {
    case BITNET_F32: { float f = (float)v; memcpy(p + 4 * i, &f, 4); break; }
    case BITNET_F64: memcpy(p + 8 * i, &v, 8); break;
    case BITNET_F16: { uint16_t h = bitnet_f64_to_f16(v); memcpy(p + 2 * i, &h, 2); break; }
    case BITNET_BF16: { uint16_t h = bitnet_f64_to_bf16(v); memcpy(p + 2 * i, &h, 2); break; }
    case BITNET_I8: p[i] = (uint8_t)(int8_t)clamp_round(v, -128, 127); break;
    case BITNET_U8: p[i] = (uint8_t)clamp_round(v, 0, 255); break;
    case BITNET_I16: { int16_t x = (int16_t)clamp_round(v, -32768, 32767); memcpy(p + 2 * i, &x, 2); break; }
    case BITNET_I32: { int32_t x = (int32_t)clamp_round(v, -2147483648.0, 2147483647.0); memcpy(p + 4 * i, &x, 4); break; }
    default: break;
    }
}

bitnet_status bitnet_cast(bitnet_dtype from, const void *src, bitnet_dtype to, void *dst, size_t n)
{
    if (!get(from) || !get(to) || bitnet_dtype_is_ternary(from) || bitnet_dtype_is_ternary(to))
        return bn_fail(BITNET_E_DTYPE, "cannot cast %s to %s element-wise",
                       get(from) ? traits[from].name : "?", get(to) ? traits[to].name : "?");
    if (from == to) {
        memmove(dst, src, n * traits[from].size);
        return BITNET_OK;
    }
    if (from == BITNET_I64 || to == BITNET_I64) {
        /* i64 does not fit a double exactly: handle it on its own. */
        for (size_t i = 0; i < n; i++) {
            if (from == BITNET_I64) {
                int64_t v;
                memcpy(&v, (const uint8_t *)src + 8 * i, 8);
                if (to == BITNET_F32) { float f = (float)v; memcpy((uint8_t *)dst + 4 * i, &f, 4); }
                else store(to, dst, i, (double)v);
            } else {
                double v = load(from, src, i);
                int64_t x = isnan(v) ? 0 : v <= -0x1p63 ? INT64_MIN : v >= 0x1p63 ? INT64_MAX : (int64_t)nearbyint(v);
                memcpy((uint8_t *)dst + 8 * i, &x, 8);
            }
        }
        return BITNET_OK;
    }
    if (from == BITNET_F32 && to == BITNET_F16) {
        const float *s = src;
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = bitnet_f32_to_f16(s[i]);
        return BITNET_OK;
    }
    if (from == BITNET_F32 && to == BITNET_BF16) {
        const float *s = src;
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = bitnet_f32_to_bf16(s[i]);
        return BITNET_OK;
    }
    /* Every value of the other source types is exact in a double, so one
     * rounding happens in store(). */
    if (dst == src && traits[to].size > traits[from].size) {
        for (size_t i = n; i-- > 0;) store(to, dst, i, load(from, src, i));
    } else {
        for (size_t i = 0; i < n; i++) store(to, dst, i, load(from, src, i));
    }
    return BITNET_OK;
}
