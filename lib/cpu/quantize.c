/*
 * quantize.c - BitNet b1.58 quantization on the CPU: the exact |w| sum
 * (see quantize.h), the scalar definitions (bitnet_*_ref), the scalar
 * kernels, and the threaded CPU implementations that pick SIMD kernels by
 * the level found at run time.
 *
 * Work split: per-row and per-group scales are computed and applied row by
 * row while the row is in cache (one pass over memory); a per-tensor scale
 * (or rows too long for the cache) needs two passes: exact partial sums
 * over fixed pieces in parallel, merged exactly, then quantize+pack over
 * row blocks in parallel.
 */
#include "quantize.h"

#include <stdlib.h>

/* ---- exact sums ----------------------------------------------------------- */

void bn_xsum_add(bn_xsum *a, uint64_t v, unsigned shift)
{
    unsigned limb = shift / 64, b = shift % 64;
    uint64_t lo = v << b, hi = b ? v >> (64 - b) : 0;
    uint64_t old = a->w[limb];
    a->w[limb] = old + lo;
    uint64_t carry = hi + (a->w[limb] < old); /* hi < 2^63 when b > 0, so no wrap */
    for (unsigned i = limb + 1; carry && i < BN_XSUM_LIMBS; i++) {
        old = a->w[i];
        a->w[i] = old + carry;
        carry = a->w[i] < old;
    }
}

void bn_xsum_merge(bn_xsum *a, const bn_xsum *b)
{
    uint64_t carry = 0;
    for (int i = 0; i < BN_XSUM_LIMBS; i++) {
        uint64_t s = a->w[i] + b->w[i];
        uint64_t c1 = s < a->w[i];
        uint64_t t = s + carry;
        carry = c1 | (t < s);
        a->w[i] = t;
    }
}

void bn_xsum_add_float(bn_xsum *a, float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t e = (u >> 23) & 0xff, m = u & 0x7fffff;
    if (e == 0) {
        if (m) bn_xsum_add(a, m, 0); /* subnormal: m * 2^-149 */
        return;
    }
    bn_xsum_add(a, m | 0x800000u, e - 1); /* (m + 2^23) * 2^(e - 150) */
}

double bn_xsum_to_double(const bn_xsum *a)
{
    int top = BN_XSUM_LIMBS - 1;
    while (top >= 0 && a->w[top] == 0) top--;
    if (top < 0) return 0.0;
    int lz = __builtin_clzll(a->w[top]);
    int p = top * 64 + 63 - lz; /* index of the highest set bit */
    if (p < 64) return ldexp((double)a->w[0], -149); /* one rounding (or none) */
    /* The 64 bits from p down, with a sticky bit for everything below, then
     * one rounding to 53 bits by the integer -> double conversion. */
    int lo = p - 63; /* bit index of the window's lowest bit */
    unsigned limb = (unsigned)lo / 64, b = (unsigned)lo % 64;
    uint64_t win = a->w[limb] >> b;
    if (b) win |= a->w[limb + 1] << (64 - b);
    int sticky = b ? (a->w[limb] & ((1ull << b) - 1)) != 0 : 0;
    for (unsigned i = 0; i < limb && !sticky; i++) sticky = a->w[i] != 0;
    win |= (uint64_t)sticky;
    return ldexp((double)win, lo - 149);
}

int bn_xchunk_scalar(const float *w, size_t n, uint64_t *sum, unsigned *shift)
{
    uint32_t maxb = 0, minm1 = UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &w[i], 4);
        u &= 0x7fffffffu;
        if (u > maxb) maxb = u;
        if (u - 1 < minm1) minm1 = u - 1; /* zero wraps to UINT32_MAX: ignored */
    }
    if (maxb >= 0x7f800000u) return 2;
    if (minm1 == UINT32_MAX) { /* all zero */
        *sum = 0;
        *shift = 0;
        return 0;
    }
    uint32_t emin = (minm1 + 1) >> 23, emax = maxb >> 23;
    if (emin == 0 || emax - emin > BN_XSPAN) return 1;
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &w[i], 4);
        uint32_t e = (u >> 23) & 0xff;
        if (e) s += (uint64_t)((u & 0x7fffff) | 0x800000u) << (e - emin);
    }
    *sum = s;
    *shift = emin - 1;
    return 0;
}

static size_t first_nonfinite(const float *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(w[i])) return i;
    return n;
}

size_t bn_absum(bn_xchunk_fn fn, const float *w, size_t n, bn_xsum *acc)
{
    for (size_t i = 0; i < n; i += BN_XCHUNK) {
        size_t len = n - i < BN_XCHUNK ? n - i : BN_XCHUNK;
        uint64_t s;
        unsigned sh;
        int r = fn(w + i, len, &s, &sh);
        if (r == 0) {
            bn_xsum_add(acc, s, sh);
        } else if (r == 1) {
            for (size_t j = 0; j < len; j++) bn_xsum_add_float(acc, w[i + j]);
        } else {
            return i + first_nonfinite(w + i, len);
        }
    }
    return n;
}

size_t bn_absum_small(bn_xchunk_fn fn, const float *w, size_t n, double *sum)
{
    uint64_t s;
    unsigned sh;
    int r = n <= BN_XCHUNK ? fn(w, n, &s, &sh) : 1;
    if (r == 0) {
        *sum = ldexp((double)s, (int)sh - 149); /* one rounding, then exact */
        return n;
    }
    if (r == 2) return first_nonfinite(w, n);
    bn_xsum acc;
    bn_xsum_zero(&acc);
    size_t bad = bn_absum(fn, w, n, &acc);
    *sum = bn_xsum_to_double(&acc);
    return bad;
}

/* ---- argument checks -------------------------------------------------------- */

bitnet_status bn_quant_check(const char *op, uint64_t rows, uint64_t cols, bitnet_scale_kind kind, uint32_t group,
                             uint64_t *n_scales)
{
    uint64_t n, bytes;
    if (bn_mul_u64(rows, cols, &n) || n > BITNET_MAX_ELEMENTS)
        return bn_fail(BITNET_E_LIMIT, "%s: %llu x %llu exceeds 2^48 elements", op, (unsigned long long)rows,
                       (unsigned long long)cols);
    if (bn_mul_u64(rows, (uint64_t)bitnet_t2_row_bytes(cols), &bytes) || bytes > SIZE_MAX / 4)
        return bn_fail(BITNET_E_OVERFLOW, "%s: output size overflows", op);
    switch (kind) {
    case BITNET_SCALE_TENSOR:
        *n_scales = 1;
        break;
    case BITNET_SCALE_ROW:
        *n_scales = rows;
        break;
    case BITNET_SCALE_GROUP:
        if (group < 32 || (group & (group - 1)) != 0)
            return bn_fail(BITNET_E_INVALID, "%s: group size %u is not a power of two >= 32", op, group);
        *n_scales = rows * ((cols + group - 1) / group);
        break;
    default:
        return bn_fail(BITNET_E_INVALID, "%s: scale kind %d is not tensor, row or group", op, (int)kind);
    }
    return BITNET_OK;
}

unsigned bn_quant_gshift(bitnet_scale_kind kind, uint32_t group)
{
    if (kind != BITNET_SCALE_GROUP) return 63; /* one scale for the whole row */
    return (unsigned)__builtin_ctz(group) - 5;  /* group / 32 sub-blocks per scale */
}

bitnet_status bn_quant_nonfinite(const char *op, const float *x, uint64_t cols, uint64_t i)
{
    uint64_t r = cols ? i / cols : 0, c = cols ? i % cols : 0;
    return bn_fail(BITNET_E_NUMERIC, "%s: element %llu (row %llu, column %llu) is %s", op, (unsigned long long)i,
                   (unsigned long long)r, (unsigned long long)c, isnan(x[i]) ? "NaN" : "Inf");
}

/* ---- the definitions ---------------------------------------------------------- */

static inline uint8_t code_of(float w, float s)
{
    float q = rintf(w * s);
    if (q < -1.0f) q = -1.0f;
    if (q > 1.0f) q = 1.0f;
    return (uint8_t)((int)q + 1);
}

static inline void t2_put(uint8_t *row, uint64_t c, uint8_t code)
{
    uint64_t b = c / BITNET_T2_BLOCK, k = (c % BITNET_T2_BLOCK) / 32, j = c % 32;
    uint8_t *p = row + b * BITNET_T2_BLOCK_BYTES + j;
    *p = (uint8_t)((*p & ~(3u << (2 * k))) | ((unsigned)code << (2 * k)));
}

bitnet_status bitnet_quantize_weights_ref(const float *w, uint64_t rows, uint64_t cols, bitnet_scale_kind kind,
                                          uint32_t group, uint8_t *out_t2, float *d)
{
    uint64_t nsc;
    bitnet_status st = bn_quant_check("quantize_weights", rows, cols, kind, group, &nsc);
    if (st) return st;
    uint64_t n = rows * cols;
    if ((n && (!w || !out_t2)) || (nsc && !d)) return bn_fail(BITNET_E_INVALID, "quantize_weights: NULL buffer");
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(w[i])) return bn_quant_nonfinite("quantize_weights", w, cols, i);
    /* The scales: exact sum of |w| over each slice, rounded once. */
    uint64_t slice = kind == BITNET_SCALE_TENSOR ? n : kind == BITNET_SCALE_ROW ? cols : group;
    for (uint64_t si = 0; si < nsc; si++) {
        bn_xsum acc;
        bn_xsum_zero(&acc);
        uint64_t count = 0;
        if (kind == BITNET_SCALE_GROUP) {
            uint64_t ng = (cols + group - 1) / group, r = si / ng, c0 = (si % ng) * group;
            uint64_t c1 = c0 + group < cols ? c0 + group : cols;
            for (uint64_t c = c0; c < c1; c++) bn_xsum_add_float(&acc, w[r * cols + c]);
            count = c1 - c0;
        } else {
            for (uint64_t i = si * slice; i < (si + 1) * slice; i++) bn_xsum_add_float(&acc, w[i]);
            count = slice;
        }
        d[si] = bn_absmean_scale(bn_xsum_to_double(&acc), count);
    }
    /* The codes: q = clamp(rint(w * (1/d)), -1, 1), stored as q + 1. */
    size_t rb = bitnet_t2_row_bytes(cols);
    memset(out_t2, 0x55, rows * rb); /* every code 1: q = 0, the padding */
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) {
            float s = 1.0f / d[bn_scale_index(kind, group, cols, r, c)];
            t2_put(out_t2 + r * rb, c, code_of(w[r * cols + c], s));
        }
    return BITNET_OK;
}

bitnet_status bitnet_quantize_acts_ref(const float *x, uint64_t rows, uint64_t cols, int8_t *q, float *s)
{
    uint64_t nsc, n;
    bitnet_status st = bn_quant_check("quantize_acts", rows, cols, BITNET_SCALE_ROW, 0, &nsc);
    if (st) return st;
    n = rows * cols;
    if ((n && (!x || !q)) || (rows && !s)) return bn_fail(BITNET_E_INVALID, "quantize_acts: NULL buffer");
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return bn_quant_nonfinite("quantize_acts", x, cols, i);
    for (uint64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float m = 0.0f;
        for (uint64_t c = 0; c < cols; c++) m = fabsf(xr[c]) > m ? fabsf(xr[c]) : m;
        float sc = bn_absmax_scale(m);
        s[r] = sc;
        for (uint64_t c = 0; c < cols; c++) {
            float v = rintf(xr[c] * sc);
            v = v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v;
            q[r * cols + c] = (int8_t)v;
        }
    }
    return BITNET_OK;
}

/* Scales given to dequantization must be finite (and, for s, positive). */
static bitnet_status check_scales(const char *op, const float *sc, uint64_t n, int positive)
{
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(sc[i]) || (positive && !(sc[i] > 0.0f)))
            return bn_fail(BITNET_E_NUMERIC, "%s: scale %llu is %g (must be finite%s)", op, (unsigned long long)i,
                           (double)sc[i], positive ? " and > 0" : "");
    return BITNET_OK;
}

bitnet_status bn_dequant_check_scales(const char *op, const float *sc, uint64_t n, int positive)
{
    return check_scales(op, sc, n, positive);
}

bitnet_status bitnet_dequantize_weights_ref(const uint8_t *t2, uint64_t rows, uint64_t cols, bitnet_scale_kind kind,
                                            uint32_t group, const float *d, float *w)
{
    uint64_t nsc;
    bitnet_status st = bn_quant_check("dequantize_weights", rows, cols, kind, group, &nsc);
    if (st) return st;
    if (((rows && cols) && (!t2 || !w)) || (nsc && !d)) return bn_fail(BITNET_E_INVALID, "dequantize_weights: NULL buffer");
    if ((st = check_scales("dequantize_weights", d, nsc, 0))) return st;
    size_t rb = bitnet_t2_row_bytes(cols);
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) {
            uint64_t b = c / BITNET_T2_BLOCK, k = (c % BITNET_T2_BLOCK) / 32, j = c % 32;
            unsigned code = (t2[r * rb + b * BITNET_T2_BLOCK_BYTES + j] >> (2 * k)) & 3;
            if (code == 3)
                return bn_fail(BITNET_E_FORMAT, "dequantize_weights: invalid code 3 at row %llu, column %llu",
                               (unsigned long long)r, (unsigned long long)c);
            w[r * cols + c] = (float)((int)code - 1) * d[bn_scale_index(kind, group, cols, r, c)];
        }
    return BITNET_OK;
}

bitnet_status bitnet_dequantize_acts_ref(const int8_t *q, uint64_t rows, uint64_t cols, const float *s, float *x)
{
    uint64_t nsc;
    bitnet_status st = bn_quant_check("dequantize_acts", rows, cols, BITNET_SCALE_ROW, 0, &nsc);
    if (st) return st;
    if (((rows && cols) && (!q || !x)) || (rows && !s)) return bn_fail(BITNET_E_INVALID, "dequantize_acts: NULL buffer");
    if ((st = check_scales("dequantize_acts", s, rows, 1))) return st;
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) x[r * cols + c] = (float)q[r * cols + c] / s[r];
    return BITNET_OK;
}

/* ---- exact division from integers (the algorithm of the OpenCL kernels) ---------- */

/* Rounds (N + f) * 2^X, 0 <= f < 1 (f > 0 iff sticky), N > 0, to a float. */
static uint32_t round_bits(uint64_t N, int sticky, int X)
{
    int p = 63 - __builtin_clzll(N); /* value in [2^(p+X), 2^(p+X+1)) */
    int E = p + X;                    /* unbiased exponent of the result */
    int keep = E >= -126 ? 24 : 24 - (-126 - E); /* significant bits kept (subnormal: fewer) */
    if (keep < 0) keep = -1;          /* below half the smallest subnormal: rounds to 0 */
    int drop = p + 1 - keep;          /* low bits of N rounded off */
    uint64_t m;
    if (drop <= 0) {
        m = N << -drop;
    } else if (drop > 63) {
        m = 0;
        sticky = 1;
    } else {
        uint64_t rem = N & ((1ull << drop) - 1), half = 1ull << (drop - 1);
        m = N >> drop;
        if (rem > half || (rem == half && (sticky || (m & 1)))) m++; /* nearest, ties to even */
    }
    /* m * 2^(X + drop) now; normal results have m in [2^23, 2^24], maybe 2^24. */
    if (E >= -126) {
        if (m == (1ull << 24)) { m >>= 1; E++; }
        if (E > 127) return 0x7f800000u;
        return ((uint32_t)(E + 127) << 23) | ((uint32_t)m & 0x7fffff);
    }
    return (uint32_t)m; /* subnormal (or the smallest normal when m reached 2^23) */
}

uint32_t bn_div_rn_bits(int32_t a, float b)
{
    uint32_t sign = a < 0 ? 0x80000000u : 0;
    uint32_t ua = (uint32_t)(a < 0 ? -a : a);
    if (ua == 0) return 0; /* 0 / b = +0 for b > 0 */
    uint32_t ub;
    memcpy(&ub, &b, 4);
    int eb = (int)((ub >> 23) & 0xff);
    uint64_t mb = ub & 0x7fffff;
    if (eb) mb |= 0x800000;
    else eb = 1;
    /* b = mb * 2^(eb - 150);  a / b = (a * 2^50 / mb) * 2^(150 - eb - 50), and
     * a * 2^50 / mb >= 2^26 keeps two bits beyond the 24 to round. */
    uint64_t num = (uint64_t)ua << 50;
    uint64_t N = num / mb, rem = num % mb;
    return sign | round_bits(N, rem != 0, 100 - eb);
}
