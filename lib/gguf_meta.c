/*
 * gguf_meta.c - GGUF metadata values as text, so that they can travel in the
 * string key/value metadata of .bnt and come back byte for byte.
 *
 * A value is "TYPE:TEXT" (bnt(5), GGUF metadata):
 *   u8 i8 u16 i16 u32 i32 u64 i64   decimal
 *   f32 f64                         %.9g / %.17g (both read back exactly)
 *   bool                            true | false
 *   str                             the string itself
 *   arr:T:N:                        N elements of type T: numbers and bools
 *                                   separated by ',', strings as a JSON array
 *   hex:                            the GGUF v3 bytes of the value (type code
 *                                   first), for what the forms above cannot
 *                                   carry exactly: NaN/Inf, bool bytes other
 *                                   than 0/1, strings that are not UTF-8 or
 *                                   hold NUL, nested arrays.
 */
#include "bnt_format.h"
#include "gguf_internal.h"
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const type_names[GGUF_T_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
};
static const uint8_t fixed_size[GGUF_T_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

int bn_buf_reserve(bn_buf *b, size_t n)
{
    size_t need;
    if (bn_add_size(b->len, n, &need)) return -1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) return -1;
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int bn_buf_add(bn_buf *b, const void *src, size_t n)
{
    if (bn_buf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

bitnet_status bn_buf_put32(bn_buf *b, uint32_t v)
{
    uint8_t x[4];
    bn_st32(x, v);
    return bn_buf_add(b, x, 4) ? bn_fail(BITNET_E_NOMEM, "gguf") : BITNET_OK;
}

bitnet_status bn_buf_put64(bn_buf *b, uint64_t v)
{
    uint8_t x[8];
    bn_st64(x, v);
    return bn_buf_add(b, x, 8) ? bn_fail(BITNET_E_NOMEM, "gguf") : BITNET_OK;
}

void bn_buf_free(bn_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* Bytes of the body (no type code) of a value of type t at p[0..len); 0
 * when malformed (no valid body is empty). */
static size_t body_size(uint32_t t, const uint8_t *p, size_t len, int depth)
{
    if (t >= GGUF_T_COUNT) return 0;
    if (fixed_size[t]) return len >= fixed_size[t] ? fixed_size[t] : 0;
    if (len < 8) return 0;
    if (t == GGUF_T_STR) {
        uint64_t n = bn_ld64(p);
        return n <= len - 8 ? 8 + (size_t)n : 0;
    }
    /* array: u32 element type, u64 count, element bodies */
    if (depth >= GGUF_MAX_DEPTH || len < 12) return 0;
    uint32_t et = bn_ld32(p);
    uint64_t n = bn_ld64(p + 4), bytes;
    size_t at = 12;
    if (et >= GGUF_T_COUNT) return 0;
    if (fixed_size[et]) {
        if (bn_mul_u64(n, fixed_size[et], &bytes) || bytes > len - at) return 0;
        return at + (size_t)bytes;
    }
    if (n > len - at) return 0; /* every element takes at least a byte */
    for (uint64_t i = 0; i < n; i++) {
        size_t k = body_size(et, p + at, len - at, depth + 1);
        if (!k) return 0;
        at += k;
    }
    return at;
}

size_t bn_gguf_raw_size(const uint8_t *raw, size_t len, int depth)
{
    if (len < 4) return 0;
    size_t k = body_size(bn_ld32(raw), raw + 4, len - 4, depth);
    return k ? 4 + k : 0;
}

/* ---- encoding ------------------------------------------------------------------ */

static int put_text(bn_buf *o, const char *s) { return bn_buf_add(o, s, strlen(s)); }

/* One scalar of type t at p as text; 1 when it has no exact text form. */
static int scalar_text(uint32_t t, const uint8_t *p, char *s, size_t n)
{
    switch (t) {
    case GGUF_T_U8: snprintf(s, n, "%u", p[0]); return 0;
    case GGUF_T_I8: snprintf(s, n, "%d", (int8_t)p[0]); return 0;
    case GGUF_T_U16: snprintf(s, n, "%u", bn_ld16(p)); return 0;
    case GGUF_T_I16: snprintf(s, n, "%d", (int16_t)bn_ld16(p)); return 0;
    case GGUF_T_U32: snprintf(s, n, "%" PRIu32, bn_ld32(p)); return 0;
    case GGUF_T_I32: snprintf(s, n, "%" PRId32, (int32_t)bn_ld32(p)); return 0;
    case GGUF_T_U64: snprintf(s, n, "%" PRIu64, bn_ld64(p)); return 0;
    case GGUF_T_I64: snprintf(s, n, "%" PRId64, (int64_t)bn_ld64(p)); return 0;
    case GGUF_T_BOOL:
        if (p[0] > 1) return 1;
        snprintf(s, n, "%s", p[0] ? "true" : "false");
        return 0;
    case GGUF_T_F32: {
        float f;
        uint32_t u = bn_ld32(p);
        memcpy(&f, &u, 4);
        if (!isfinite(f)) return 1;
        snprintf(s, n, "%.9g", (double)f);
        return 0;
    }
    case GGUF_T_F64: {
        double d;
        uint64_t u = bn_ld64(p);
        memcpy(&d, &u, 8);
        if (!isfinite(d)) return 1;
        snprintf(s, n, "%.17g", d);
        return 0;
    }
    default: return 1;
    }
}

/* 0 ok, 1 no exact text form (use hex), -1 out of memory */
static int encode_text(const uint8_t *raw, size_t len, bn_buf *o)
{
    char s[64];
    uint32_t t = bn_ld32(raw);
    if (t == GGUF_T_STR) {
        uint64_t n = bn_ld64(raw + 4);
        const uint8_t *p = raw + 12;
        if (memchr(p, 0, (size_t)n) || !bn_bnt_utf8_ok(p, (size_t)n)) return 1;
        return put_text(o, "str:") || bn_buf_add(o, p, (size_t)n) ? -1 : 0;
    }
    if (t != GGUF_T_ARR) {
        if (scalar_text(t, raw + 4, s, sizeof s)) return 1;
        return put_text(o, type_names[t]) || put_text(o, ":") || put_text(o, s) ? -1 : 0;
    }
    uint32_t et = bn_ld32(raw + 4);
    uint64_t n = bn_ld64(raw + 8);
    if (et == GGUF_T_ARR) return 1;
    snprintf(s, sizeof s, "arr:%s:%" PRIu64 ":", type_names[et], n);
    if (put_text(o, s)) return -1;
    const uint8_t *p = raw + 16;
    if (et != GGUF_T_STR) {
        for (uint64_t i = 0; i < n; i++, p += fixed_size[et]) {
            if (scalar_text(et, p, s, sizeof s)) return 1;
            if ((i && put_text(o, ",")) || put_text(o, s)) return -1;
        }
        return 0;
    }
    json_t *a = json_array();
    if (!a) return -1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t sl = bn_ld64(p);
        json_t *js = memchr(p + 8, 0, (size_t)sl) ? NULL : json_stringn((const char *)p + 8, (size_t)sl);
        if (!js || json_array_append_new(a, js)) {
            json_decref(a);
            return 1; /* not UTF-8 (or out of memory: hex is then tried and fails too) */
        }
        p += 8 + sl;
    }
    char *j = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    if (!j) return -1;
    int rc = put_text(o, j) ? -1 : 0;
    free(j);
    (void)len;
    return rc;
}

bitnet_status bn_gguf_meta_encode(const uint8_t *raw, size_t len, char **text)
{
    bn_buf o = {0};
    *text = NULL;
    if (bn_gguf_raw_size(raw, len, 0) != len) return bn_fail(BITNET_E_FORMAT, "gguf: malformed metadata value");
    int rc = encode_text(raw, len, &o);
    if (rc == 1) {
        static const char hex[] = "0123456789abcdef";
        o.len = 0;
        if (put_text(&o, "hex:") || bn_buf_reserve(&o, len * 2)) rc = -1;
        else {
            for (size_t i = 0; i < len; i++) {
                o.p[o.len++] = (uint8_t)hex[raw[i] >> 4];
                o.p[o.len++] = (uint8_t)hex[raw[i] & 15];
            }
            rc = 0;
        }
    }
    if (rc || bn_buf_add(&o, "", 1)) {
        bn_buf_free(&o);
        return bn_fail(BITNET_E_NOMEM, "gguf: metadata text");
    }
    *text = (char *)o.p;
    return BITNET_OK;
}

/* ---- decoding ------------------------------------------------------------------ */

static int type_by_name(const char *s, size_t n)
{
    for (int t = 0; t < GGUF_T_COUNT; t++)
        if (strlen(type_names[t]) == n && memcmp(type_names[t], s, n) == 0) return t;
    return -1;
}

/* Parses token s[0..n) as a scalar of type t, appending its bytes. */
static int scalar_parse(uint32_t t, const char *s, size_t n, bn_buf *o)
{
    char tok[64], *end;
    uint8_t b[8];
    if (n == 0 || n >= sizeof tok) return -1;
    memcpy(tok, s, n);
    tok[n] = 0;
    errno = 0;
    if (t == GGUF_T_BOOL) {
        if (strcmp(tok, "true") && strcmp(tok, "false")) return -1;
        b[0] = tok[0] == 't';
        return bn_buf_add(o, b, 1);
    }
    if (t == GGUF_T_F32 || t == GGUF_T_F64) {
        if (t == GGUF_T_F32) {
            float f = strtof(tok, &end);
            uint32_t u;
            memcpy(&u, &f, 4);
            bn_st32(b, u);
        } else {
            double d = strtod(tok, &end);
            uint64_t u;
            memcpy(&u, &d, 8);
            bn_st64(b, u);
        }
        if (*end || errno) return -1;
        return bn_buf_add(o, b, fixed_size[t]);
    }
    int is_signed = t == GGUF_T_I8 || t == GGUF_T_I16 || t == GGUF_T_I32 || t == GGUF_T_I64;
    uint64_t u;
    if (is_signed) {
        long long v = strtoll(tok, &end, 10);
        int64_t lo = t == GGUF_T_I8 ? INT8_MIN : t == GGUF_T_I16 ? INT16_MIN : t == GGUF_T_I32 ? INT32_MIN : INT64_MIN;
        int64_t hi = t == GGUF_T_I8 ? INT8_MAX : t == GGUF_T_I16 ? INT16_MAX : t == GGUF_T_I32 ? INT32_MAX : INT64_MAX;
        if (*end || errno || v < lo || v > hi) return -1;
        u = (uint64_t)(int64_t)v;
    } else {
        if (tok[0] == '-' || tok[0] == '+' || tok[0] == ' ') return -1;
        unsigned long long v = strtoull(tok, &end, 10);
        uint64_t hi = t == GGUF_T_U8 ? UINT8_MAX : t == GGUF_T_U16 ? UINT16_MAX : t == GGUF_T_U32 ? UINT32_MAX : UINT64_MAX;
        if (*end || errno || v > hi) return -1;
        u = v;
    }
    bn_st64(b, u); /* little-endian: the low fixed_size bytes */
    return bn_buf_add(o, b, fixed_size[t]);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bitnet_status bad(const char *text, const char *why)
{
    return bn_fail(BITNET_E_FORMAT, "gguf metadata value \"%.40s%s\": %s", text, strlen(text) > 40 ? "..." : "", why);
}

bitnet_status bn_gguf_meta_decode(const char *text, bn_buf *o)
{
    uint8_t b[8];
    o->len = 0;
    const char *colon = strchr(text, ':');
    if (!colon) return bad(text, "no TYPE: prefix");
    if ((size_t)(colon - text) == 3 && memcmp(text, "hex", 3) == 0) {
        const char *h = colon + 1;
        size_t n = strlen(h);
        if (n % 2 || bn_buf_reserve(o, n / 2)) return bad(text, "odd hex length");
        for (size_t i = 0; i < n; i += 2) {
            int a = hexval(h[i]), c = hexval(h[i + 1]);
            if (a < 0 || c < 0) return bad(text, "not hex");
            o->p[o->len++] = (uint8_t)(a << 4 | c);
        }
        if (bn_gguf_raw_size(o->p, o->len, 0) != o->len) return bad(text, "hex bytes are not one GGUF value");
        return BITNET_OK;
    }
    int t = type_by_name(text, (size_t)(colon - text));
    if (t < 0) return bad(text, "unknown type");
    const char *v = colon + 1;
    bn_st32(b, (uint32_t)t);
    if (bn_buf_add(o, b, 4)) return bn_fail(BITNET_E_NOMEM, "gguf metadata");
    if (t == GGUF_T_STR) {
        size_t n = strlen(v);
        bn_st64(b, n);
        if (bn_buf_add(o, b, 8) || bn_buf_add(o, v, n)) return bn_fail(BITNET_E_NOMEM, "gguf metadata");
        return BITNET_OK;
    }
    if (t != GGUF_T_ARR) {
        if (scalar_parse((uint32_t)t, v, strlen(v), o)) return bad(text, "value does not parse as its type");
        return BITNET_OK;
    }
    /* arr:T:N:ELEMENTS */
    const char *c2 = strchr(v, ':');
    int et = c2 ? type_by_name(v, (size_t)(c2 - v)) : -1;
    if (et < 0 || et == GGUF_T_ARR) return bad(text, "bad array element type");
    char *end;
    errno = 0;
    if (c2[1] < '0' || c2[1] > '9') return bad(text, "bad array count");
    unsigned long long n = strtoull(c2 + 1, &end, 10);
    if (errno || *end != ':') return bad(text, "bad array count");
    const char *e = end + 1;
    bn_st32(b, (uint32_t)et);
    if (bn_buf_add(o, b, 4)) return bn_fail(BITNET_E_NOMEM, "gguf metadata");
    bn_st64(b, (uint64_t)n);
    if (bn_buf_add(o, b, 8)) return bn_fail(BITNET_E_NOMEM, "gguf metadata");
    if (et != GGUF_T_STR) {
        uint64_t k = 0;
        while (*e) {
            const char *comma = strchr(e, ',');
            size_t tl = comma ? (size_t)(comma - e) : strlen(e);
            if (scalar_parse((uint32_t)et, e, tl, o)) return bad(text, "array element does not parse as its type");
            k++;
            e += tl + (comma ? 1 : 0);
            if (comma && !*e) return bad(text, "trailing ','");
        }
        if (k != n) return bad(text, "array count does not match its elements");
        return BITNET_OK;
    }
    json_error_t jerr;
    json_t *a = json_loads(e, JSON_ALLOW_NUL, &jerr);
    if (!a || !json_is_array(a) || json_array_size(a) != n) {
        json_decref(a);
        return bad(text, "string array is not a JSON array of its count");
    }
    bitnet_status st = BITNET_OK;
    for (size_t i = 0; i < json_array_size(a) && !st; i++) {
        json_t *js = json_array_get(a, i);
        if (!json_is_string(js)) {
            st = bad(text, "string array holds a non-string");
            break;
        }
        size_t sl = json_string_length(js);
        bn_st64(b, sl);
        if (bn_buf_add(o, b, 8) || bn_buf_add(o, json_string_value(js), sl)) st = bn_fail(BITNET_E_NOMEM, "gguf metadata");
    }
    json_decref(a);
    return st;
}
