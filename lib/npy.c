/*
 * npy.c - NumPy .npy arrays: read (format versions 1, 2, 3) and write (1, or
 * 2 when the header needs it).  The header is a Python dict literal, parsed
 * strictly: exactly the keys 'descr', 'fortran_order' and 'shape'.
 */
#include "internal.h"
#include "prefix_io.h"

#include <inttypes.h>
#include <stdlib.h>

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
#define NPY_MAX_HEADER (1u << 20) /* far above any header of rank <= 8 */
#define NPY_ALIGN 64               /* data offset alignment numpy uses */
#define NPY_NAME "array"           /* .npy holds no name */

/* ---- descr <-> dtype ------------------------------------------------------ */

static const struct {
    char kind;  /* numpy kind letter */
    int size;
    bitnet_dtype dtype;
} npy_types[] = {
    {'f', 4, BITNET_F32}, {'f', 2, BITNET_F16}, {'f', 8, BITNET_F64}, {'i', 1, BITNET_I8}, {'u', 1, BITNET_U8},
    {'i', 2, BITNET_I16}, {'i', 4, BITNET_I32}, {'i', 8, BITNET_I64},
};

/* Maps a descr such as "<f4" to a dtype; *swap is set for big-endian data. */
static bitnet_status descr_to_dtype(const char *d, bitnet_dtype *out, int *swap)
{
    size_t n = strlen(d);
    *swap = 0;
    if (n >= 2 && d[1] == 'O')
        return bn_fail(BITNET_E_UNSUPPORTED, "npy: object arrays (descr '%s') hold pickled Python objects; not supported", d);
    if (n == 3 && (d[0] == '<' || d[0] == '>' || d[0] == '|') && d[2] >= '1' && d[2] <= '8') {
        int size = d[2] - '0';
        for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
            if (npy_types[i].kind != d[1] || npy_types[i].size != size) continue;
            /* '|' (no byte order) only makes sense for one-byte types */
            if (d[0] == '|' && size != 1) break;
            *out = npy_types[i].dtype;
            *swap = d[0] == '>' && size > 1 && bn_host_is_le();
            if (d[0] == '<' && size > 1 && !bn_host_is_le()) *swap = 1;
            return BITNET_OK;
        }
    }
    return bn_fail(BITNET_E_UNSUPPORTED,
                   "npy: dtype descr '%s' not supported (supported: <f4 <f2 <f8 |i1 |u1 <i2 <i4 <i8, or big-endian '>')",
                   d);
}

static const char *dtype_to_descr(bitnet_dtype t)
{
    switch (t) {
    case BITNET_F32: return "<f4";
    case BITNET_F16: return "<f2";
    case BITNET_F64: return "<f8";
    case BITNET_I8: return "|i1";
    case BITNET_U8: return "|u1";
    case BITNET_I16: return "<i2";
    case BITNET_I32: return "<i4";
    case BITNET_I64: return "<i8";
    default: return NULL;
    }
}

/* ---- the header dict -------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t n, pos;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->pos < c->n && (c->s[c->pos] == ' ' || c->s[c->pos] == '\t' || c->s[c->pos] == '\n' || c->s[c->pos] == '\r'))
        c->pos++;
}

static int peek(cursor *c) { skip_ws(c); return c->pos < c->n ? (unsigned char)c->s[c->pos] : -1; }

static bitnet_status expect(cursor *c, char ch)
{
    if (peek(c) != ch)
        return bn_fail(BITNET_E_FORMAT, "npy header: expected '%c' at byte %zu", ch, c->pos);
    c->pos++;
    return BITNET_OK;
}

/* A Python string literal without escapes ('...' or "..."). */
static bitnet_status parse_string(cursor *c, char *out, size_t size)
{
    int q = peek(c);
    if (q != '\'' && q != '"') return bn_fail(BITNET_E_FORMAT, "npy header: expected a string at byte %zu", c->pos);
    size_t start = ++c->pos, len;
    while (c->pos < c->n && c->s[c->pos] != q) {
        if (c->s[c->pos] == '\\' || c->s[c->pos] == '\n' || c->s[c->pos] == 0)
            return bn_fail(BITNET_E_FORMAT, "npy header: unsupported character in string at byte %zu", c->pos);
        c->pos++;
    }
    if (c->pos >= c->n) return bn_fail(BITNET_E_FORMAT, "npy header: unterminated string");
    len = c->pos - start;
    c->pos++;
    if (len >= size) return bn_fail(BITNET_E_FORMAT, "npy header: string too long at byte %zu", start);
    memcpy(out, c->s + start, len);
    out[len] = 0;
    return BITNET_OK;
}

static int word_at(cursor *c, const char *w)
{
    size_t n = strlen(w);
    if (c->n - c->pos < n || memcmp(c->s + c->pos, w, n) != 0) return 0;
    /* the word must end there: True, not Truex */
    if (c->pos + n < c->n) {
        char nx = c->s[c->pos + n];
        if ((nx >= 'a' && nx <= 'z') || (nx >= 'A' && nx <= 'Z') || (nx >= '0' && nx <= '9') || nx == '_') return 0;
    }
    c->pos += n;
    return 1;
}

static bitnet_status parse_bool(cursor *c, int *out)
{
    skip_ws(c);
    if (word_at(c, "True")) *out = 1;
    else if (word_at(c, "False")) *out = 0;
    else return bn_fail(BITNET_E_FORMAT, "npy header: 'fortran_order' must be True or False (byte %zu)", c->pos);
    return BITNET_OK;
}

/* A tuple of non-negative integers: (), (n,), (a, b), (a, b,). */
static bitnet_status parse_shape(cursor *c, uint32_t *rank, uint64_t *dims)
{
    bitnet_status st;
    uint32_t r = 0;
    if ((st = expect(c, '('))) return st;
    for (;;) {
        int ch = peek(c);
        if (ch == ')') {
            c->pos++;
            break;
        }
        if (ch < '0' || ch > '9')
            return bn_fail(BITNET_E_FORMAT, "npy header: expected a dimension at byte %zu", c->pos);
        uint64_t v = 0;
        while (c->pos < c->n && c->s[c->pos] >= '0' && c->s[c->pos] <= '9') {
            if (bn_mul_u64(v, 10, &v) || bn_add_u64(v, (uint64_t)(c->s[c->pos] - '0'), &v))
                return bn_fail(BITNET_E_LIMIT, "npy header: dimension too large at byte %zu", c->pos);
            c->pos++;
        }
        if (r >= BITNET_MAX_RANK)
            return bn_fail(BITNET_E_LIMIT, "npy: shape has more than %d dimensions", BITNET_MAX_RANK);
        dims[r++] = v;
        ch = peek(c);
        if (ch == ',') {
            c->pos++;
            continue;
        }
        if (ch != ')') return bn_fail(BITNET_E_FORMAT, "npy header: expected ',' or ')' in shape at byte %zu", c->pos);
        /* "(3)" is the integer 3 in Python, not a tuple */
        if (r == 1) return bn_fail(BITNET_E_FORMAT, "npy header: shape (n) is not a tuple; expected (n,)");
        c->pos++;
        break;
    }
    *rank = r;
    return BITNET_OK;
}

typedef struct {
    char descr[64];
    int fortran;
    uint32_t rank;
    uint64_t dims[BITNET_MAX_RANK];
} npy_header;

static bitnet_status parse_header(const char *s, size_t n, npy_header *h)
{
    cursor c = {s, n, 0};
    bitnet_status st;
    int seen_descr = 0, seen_fortran = 0, seen_shape = 0;
    char key[64];
    if ((st = expect(&c, '{'))) return st;
    for (;;) {
        if (peek(&c) == '}') {
            c.pos++;
            break;
        }
        if ((st = parse_string(&c, key, sizeof key))) return st;
        if ((st = expect(&c, ':'))) return st;
        if (strcmp(key, "descr") == 0 && !seen_descr) {
            if (peek(&c) == '[')
                return bn_fail(BITNET_E_UNSUPPORTED, "npy: structured dtypes (descr is a list) are not supported");
            if ((st = parse_string(&c, h->descr, sizeof h->descr))) return st;
            seen_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0 && !seen_fortran) {
            if ((st = parse_bool(&c, &h->fortran))) return st;
            seen_fortran = 1;
        } else if (strcmp(key, "shape") == 0 && !seen_shape) {
            if ((st = parse_shape(&c, &h->rank, h->dims))) return st;
            seen_shape = 1;
        } else {
            return bn_fail(BITNET_E_FORMAT, "npy header: unexpected or repeated key '%s'", key);
        }
        int ch = peek(&c);
        if (ch == ',') {
            c.pos++;
            continue;
        }
        if (ch == '}') {
            c.pos++;
            break;
        }
        return bn_fail(BITNET_E_FORMAT, "npy header: expected ',' or '}' at byte %zu", c.pos);
    }
    if (peek(&c) != -1) return bn_fail(BITNET_E_FORMAT, "npy header: unexpected text after the dict at byte %zu", c.pos);
    if (!seen_descr || !seen_fortran || !seen_shape)
        return bn_fail(BITNET_E_FORMAT, "npy header: missing key '%s'",
                       !seen_descr ? "descr" : !seen_fortran ? "fortran_order" : "shape");
    return BITNET_OK;
}

/* ---- reading ------------------------------------------------------------------ */

static void swap_bytes(uint8_t *p, uint64_t n, size_t size)
{
    for (uint64_t i = 0; i < n; i++, p += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* Column-major (Fortran) src to row-major dst. */
static void fortran_to_c(const uint8_t *src, uint8_t *dst, uint32_t rank, const uint64_t *dims, uint64_t n, size_t es)
{
    uint64_t stride[BITNET_MAX_RANK], idx[BITNET_MAX_RANK] = {0}, off = 0;
    uint64_t s = 1;
    for (uint32_t i = 0; i < rank; i++) {
        stride[i] = s;
        s *= dims[i];
    }
    for (uint64_t k = 0; k < n; k++) {
        memcpy(dst + k * es, src + off * es, es);
        /* advance the C-order index (last axis fastest) */
        for (uint32_t a = rank; a-- > 0;) {
            if (++idx[a] < dims[a]) {
                off += stride[a];
                break;
            }
            off -= stride[a] * (dims[a] - 1);
            idx[a] = 0;
        }
    }
}

bitnet_status bitnet_npy_read(FILE *f, const uint8_t *prefix, size_t prefix_len, bitnet_tensor *t)
{
    bn_pfx in;
    uint8_t head[12];
    npy_header h;
    bitnet_status st;
    uint64_t n, bytes, got;
    uint8_t *data = NULL;
    int swap;

    if (!f || !t || (prefix_len && !prefix)) return bn_fail(BITNET_E_INVALID, "npy: no input");
    memset(t, 0, sizeof *t);
    memset(&h, 0, sizeof h);
    if (bn_pfx_init(&in, f, prefix, prefix_len)) return bn_fail(BITNET_E_INVALID, "npy: prefix too long");
    size_t r = bn_pfx_read(&in, head, 8);
    if (r >= 6 && memcmp(head, npy_magic, 6) != 0) return bn_fail(BITNET_E_FORMAT, "npy: bad magic (not a .npy file)");
    if (r < 8) {
        if (ferror(f)) return bn_fail(BITNET_E_IO, "npy: read error");
        if (r < 6 && memcmp(head, npy_magic, r) != 0) return bn_fail(BITNET_E_FORMAT, "npy: bad magic (not a .npy file)");
        return bn_fail(BITNET_E_TRUNCATED, "npy: file ends inside the magic (%zu bytes)", r);
    }
    uint8_t major = head[6], minor = head[7];
    if (major < 1 || major > 3 || minor != 0)
        return bn_fail(BITNET_E_VERSION, "npy: format version %u.%u not supported (1.0, 2.0, 3.0)", major, minor);
    size_t lenbytes = major == 1 ? 2 : 4;
    if (bn_pfx_read(&in, head + 8, lenbytes) != lenbytes)
        return ferror(f) ? bn_fail(BITNET_E_IO, "npy: read error") : bn_fail(BITNET_E_TRUNCATED, "npy: file ends inside the header length");
    uint32_t hlen = major == 1 ? bn_ld16(head + 8) : bn_ld32(head + 8);
    if (hlen > NPY_MAX_HEADER)
        return bn_fail(BITNET_E_LIMIT, "npy: header of %" PRIu32 " bytes exceeds %u", hlen, NPY_MAX_HEADER);
    char *hs = malloc(hlen + 1u);
    if (!hs) return bn_fail(BITNET_E_NOMEM, "npy: header of %" PRIu32 " bytes", hlen);
    if (bn_pfx_read(&in, hs, hlen) != hlen) {
        free(hs);
        return ferror(f) ? bn_fail(BITNET_E_IO, "npy: read error")
                         : bn_fail(BITNET_E_TRUNCATED, "npy: file ends inside the %" PRIu32 "-byte header", hlen);
    }
    hs[hlen] = 0;
    if (memchr(hs, 0, hlen)) st = bn_fail(BITNET_E_FORMAT, "npy header: NUL byte in the header");
    else st = parse_header(hs, hlen, &h);
    free(hs);
    if (st) return st;
    if ((st = descr_to_dtype(h.descr, &t->info.dtype, &swap))) return st;

    snprintf(t->info.name, sizeof t->info.name, "%s", NPY_NAME);
    t->info.rank = h.rank;
    memcpy(t->info.dims, h.dims, sizeof h.dims);
    if ((st = bitnet_tensor_elements(&t->info, &n)) || (st = bitnet_tensor_data_bytes(&t->info, &bytes))) {
        bn_detail_prefix("npy");
        return st;
    }
    int64_t left = bn_file_remaining(f);
    if (left >= 0 && (uint64_t)left + (in.pre_len - in.pre_pos) < bytes)
        return bn_fail(BITNET_E_TRUNCATED, "npy: data needs %" PRIu64 " bytes, file has %" PRIu64, bytes,
                       (uint64_t)left + (in.pre_len - in.pre_pos));
    size_t bytes_sz;
    if (bn_u64_to_size(bytes, &bytes_sz)) return bn_fail(BITNET_E_OVERFLOW, "npy: array does not fit in memory");
    if (bn_pfx_read_alloc(&in, bytes, &data, &got)) return bn_fail(BITNET_E_NOMEM, "npy: cannot allocate the data");
    if (got < bytes) {
        free(data);
        if (ferror(f)) return bn_fail(BITNET_E_IO, "npy: read error");
        return bn_fail(BITNET_E_TRUNCATED, "npy: data needs %" PRIu64 " bytes, only %" PRIu64 " present", bytes, got);
    }
    size_t es = bitnet_dtype_size(t->info.dtype);
    if (swap) swap_bytes(data, n, es);
    if (h.fortran && h.rank > 1 && n > 1) {
        uint8_t *c = malloc(bytes_sz ? bytes_sz : 1);
        if (!c) {
            free(data);
            return bn_fail(BITNET_E_NOMEM, "npy: cannot allocate %zu bytes", bytes_sz);
        }
        fortran_to_c(data, c, h.rank, h.dims, n, es);
        free(data);
        data = c;
    }
    t->data = data;
    t->scales = NULL;
    return BITNET_OK;
}

/* ---- writing ------------------------------------------------------------------- */

bitnet_status bn_write_le(FILE *f, const void *p, uint64_t n, size_t es)
{
    const uint8_t *b = p;
    uint64_t bytes = n * es;
    if (bn_host_is_le() || es < 2) {
        while (bytes) {
            size_t k = bytes > (1u << 30) ? (1u << 30) : (size_t)bytes;
            if (fwrite(b, 1, k, f) != k) return bn_fail(BITNET_E_IO, "write failed");
            b += k;
            bytes -= k;
        }
        return BITNET_OK;
    }
    uint8_t tmp[4096];
    size_t per = sizeof tmp / es;
    while (n) {
        size_t k = n > per ? per : (size_t)n;
        memcpy(tmp, b, k * es);
        bn_to_le(tmp, k, es);
        if (fwrite(tmp, es, k, f) != k) return bn_fail(BITNET_E_IO, "write failed");
        b += k * es;
        n -= k;
    }
    return BITNET_OK;
}

bitnet_status bn_check_plain_tensor(const bitnet_tensor *t, const char *fmt)
{
    bitnet_status st = bitnet_tensor_info_check(&t->info);
    if (st) return st;
    if (bitnet_dtype_is_ternary(t->info.dtype))
        return bn_fail(BITNET_E_DTYPE, "tensor '%s': %s cannot hold ternary (%s) tensors; dequantize first "
                       "(bitnet-convert --dtype f32)", t->info.name, fmt, bitnet_dtype_name(t->info.dtype));
    if (t->info.scale_kind != BITNET_SCALE_NONE)
        return bn_fail(BITNET_E_DTYPE, "tensor '%s': %s cannot hold scales; dequantize first (bitnet-convert --dtype f32)",
                       t->info.name, fmt);
    return BITNET_OK;
}

bitnet_status bitnet_npy_write(FILE *f, const bitnet_tensor *t)
{
    char h[256 + BITNET_MAX_RANK * 24];
    uint64_t n;
    bitnet_status st;
    if (!f || !t) return bn_fail(BITNET_E_INVALID, "npy: no output or tensor");
    if ((st = bn_check_plain_tensor(t, ".npy"))) return st;
    const char *descr = dtype_to_descr(t->info.dtype);
    if (!descr)
        return bn_fail(BITNET_E_DTYPE, "tensor '%s': .npy has no %s dtype; cast it (bitnet-convert --dtype f32)",
                       t->info.name, bitnet_dtype_name(t->info.dtype));
    if ((st = bitnet_tensor_elements(&t->info, &n))) return st;
    if (n && !t->data) return bn_fail(BITNET_E_INVALID, "tensor '%s': no data", t->info.name);
    int len = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (uint32_t i = 0; i < t->info.rank; i++)
        len += snprintf(h + len, sizeof h - (size_t)len, "%s%" PRIu64, i ? ", " : "", t->info.dims[i]);
    len += snprintf(h + len, sizeof h - (size_t)len, "%s), }", t->info.rank == 1 ? "," : "");
    /* pad with spaces and a final newline so that the data starts aligned */
    /* version 1 stores the header length in 16 bits; version 2 in 32 */
    size_t pre = 10, total = (pre + (size_t)len + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
    if (total - pre > 65535) {
        pre = 12;
        total = (pre + (size_t)len + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
    }
    size_t hlen = total - pre;
    uint8_t head[12 + sizeof h + NPY_ALIGN];
    memcpy(head, npy_magic, 6);
    head[6] = pre == 10 ? 1 : 2;
    head[7] = 0;
    if (pre == 10) bn_st16(head + 8, (uint16_t)hlen);
    else bn_st32(head + 8, (uint32_t)hlen);
    memcpy(head + pre, h, (size_t)len);
    memset(head + pre + len, ' ', hlen - (size_t)len - 1);
    head[total - 1] = '\n';
    if (fwrite(head, 1, total, f) != total) return bn_fail(BITNET_E_IO, "npy: write failed");
    if ((st = bn_write_le(f, t->data, n, bitnet_dtype_size(t->info.dtype)))) return st;
    return BITNET_OK;
}
