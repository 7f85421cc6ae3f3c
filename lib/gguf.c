/*
 * gguf.c - the GGUF reader (versions 1 to 3); the writer is gguf_write.c.
 *
 * A GGUF file is "GGUF", a u32 version, the tensor and key/value counts, the
 * key/value pairs, one info per tensor (name, dims, ggml type, offset into
 * the data section), padding to the alignment (general.alignment, default
 * 32), then the data section.  Version 1 has u32 counts, string lengths and
 * dims where later versions have u64.
 *
 * Reading streams: only the header is held in memory, then one tensor at a
 * time.  Every count, length, dim product and offset is checked before use:
 * against hard limits, for overflow, and against the file size when the
 * input is a regular file (on a pipe, buffers grow only as bytes arrive, so
 * a lying count ends in "truncated", not in a huge allocation).  On a
 * regular file tensors are read in info order (seeking); on a pipe in the
 * order of their offsets, skipping the gaps, because what has gone by
 * cannot be read again.
 *
 * A tensor of a type this reader cannot size (a code missing from ggml's
 * table, such as bitnet.cpp's TL1, 38) is sized from the layout: the gap up
 * to the next tensor's data, or to the end of the file.  Code 39 is MXFP4 in
 * ggml but TL2 in bitnet.cpp; it is sized as MXFP4 where that fits the
 * layout, else from the layout too.  Such tensors can be listed, not read.
 */
#include "gguf_internal.h"
#include "internal.h"
#include "prefix_io.h"

#include <inttypes.h>
#include <stdlib.h>

#define GGUF_MAX_KEY 65536
#define CHUNK (1u << 20)

/* ---- ggml types ------------------------------------------------------------------ */

typedef struct {
    const char *name;
    uint32_t block, size; /* weights per block, bytes per block; 0: no longer defined */
} ggml_traits;

/* Codes, names and block sizes as in ggml's type table (ggml.h, ggml.c);
 * 36 is bitnet.cpp's I2_S (sized specially: n/4 + 32 bytes).  39 is ggml's
 * MXFP4, bitnet.cpp's TL2 (see the file header); bitnet.cpp's 37 and 38
 * (I8_S, TL1) are unknown codes here. */
static const ggml_traits ggml_types[] = {
    [0] = {"f32", 1, 4},       [1] = {"f16", 1, 2},        [2] = {"q4_0", 32, 18},     [3] = {"q4_1", 32, 20},
    [6] = {"q5_0", 32, 22},    [7] = {"q5_1", 32, 24},     [8] = {"q8_0", 32, 34},     [9] = {"q8_1", 32, 36},
    [10] = {"q2_K", 256, 84},  [11] = {"q3_K", 256, 110},  [12] = {"q4_K", 256, 144},  [13] = {"q5_K", 256, 176},
    [14] = {"q6_K", 256, 210}, [15] = {"q8_K", 256, 292},  [16] = {"iq2_xxs", 256, 66}, [17] = {"iq2_xs", 256, 74},
    [18] = {"iq3_xxs", 256, 98}, [19] = {"iq1_s", 256, 50}, [20] = {"iq4_nl", 32, 18}, [21] = {"iq3_s", 256, 110},
    [22] = {"iq2_s", 256, 82}, [23] = {"iq4_xs", 256, 136}, [24] = {"i8", 1, 1},       [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},      [27] = {"i64", 1, 8},       [28] = {"f64", 1, 8},       [29] = {"iq1_m", 256, 56},
    [30] = {"bf16", 1, 2},     [34] = {"tq1_0", 256, GGUF_TQ1_BYTES}, [35] = {"tq2_0", 256, GGUF_TQ2_BYTES},
    [36] = {"i2_s", 1, 1},     [39] = {"mxfp4", 32, 17},    [40] = {"nvfp4", 64, 36},   [41] = {"q1_0", 128, 18},
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof ggml_types[0])

const char *bitnet_gguf_type_name(uint32_t type) { return type < N_GGML_TYPES ? ggml_types[type].name : NULL; }

static bitnet_dtype plain_dtype(uint32_t type)
{
    switch (type) {
    case GGML_F32: return BITNET_F32;
    case GGML_F16: return BITNET_F16;
    case GGML_BF16: return BITNET_BF16;
    case GGML_F64: return BITNET_F64;
    case GGML_I8: return BITNET_I8;
    case GGML_I16: return BITNET_I16;
    case GGML_I32: return BITNET_I32;
    case GGML_I64: return BITNET_I64;
    default: return BITNET_DTYPE_INVALID;
    }
}

uint32_t bn_ggml_of(bitnet_dtype d)
{
    static const uint32_t codes[] = {
        [BITNET_F32] = GGML_F32, [BITNET_F16] = GGML_F16, [BITNET_BF16] = GGML_BF16, [BITNET_F64] = GGML_F64,
        [BITNET_I8] = GGML_I8,   [BITNET_I16] = GGML_I16, [BITNET_I32] = GGML_I32,   [BITNET_U8] = UINT32_MAX,
        [BITNET_I64] = GGML_I64, [BITNET_T2] = GGML_TQ2_0, [BITNET_T3] = GGML_TQ1_0,
    };
    if ((unsigned)d >= sizeof codes / sizeof codes[0] || (!codes[d] && d != BITNET_F32)) return UINT32_MAX;
    return codes[d];
}

/* Bytes of a tensor of `type` with n_dims dims ne; 0 ok.  *from_layout is
 * set (and *out 0) for a type whose size must come from the layout. */
static bitnet_status tensor_bytes(const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne, uint64_t *out,
                                  uint32_t *from_layout)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] > (uint64_t)INT64_MAX || bn_mul_u64(n, ne[d], &n) || n > BITNET_MAX_ELEMENTS)
            return bn_fail(BITNET_E_LIMIT, "gguf: tensor '%s': more than 2^48 elements", name);
    *out = 0;
    *from_layout = 0;
    if (type >= N_GGML_TYPES || !ggml_types[type].name ||
        (type == GGML_MXFP4_OR_TL2 && n_dims && ne[0] % ggml_types[type].block)) {
        *from_layout = 1;
        return BITNET_OK;
    }
    const ggml_traits *tt = &ggml_types[type];
    if (type == GGML_I2_S) {
        if (n % GGUF_I2S_BLOCK)
            return bn_fail(BITNET_E_FORMAT, "gguf: tensor '%s': i2_s needs a multiple of %d weights, has %" PRIu64,
                           name, GGUF_I2S_BLOCK, n);
        *out = n / 4 + 32;
        return BITNET_OK;
    }
    if (n_dims && ne[0] % tt->block)
        return bn_fail(BITNET_E_FORMAT, "gguf: tensor '%s': row length %" PRIu64 " is not a multiple of the %s block (%u)",
                       name, ne[0], tt->name, tt->block);
    *out = n / tt->block * tt->size; /* <= 2^48 * 292: no overflow */
    return BITNET_OK;
}

/* ---- reader ------------------------------------------------------------------------ */

struct bitnet_gguf_reader {
    bn_pfx in;
    int seekable;
    int64_t file_start;   /* ftello offset of the file's byte 0 (seekable) */
    uint64_t file_size;   /* seekable only */
    uint32_t version, alignment;
    char **keys, **values; /* keys with BITNET_GGUF_META_PREFIX in front */
    uint64_t *key_at;      /* file offset of each key (for messages) */
    size_t n_kv;
    bitnet_gguf_tensor_desc *t;
    size_t n, next, *order;
    uint64_t data_start, header_bytes;
    bitnet_status err;    /* sticky: the stream position is lost */
    int at_end;
    int open_end;         /* on a pipe, the last tensor's size is taken from the end of the input */
};

uint32_t bitnet_gguf_reader_version(const bitnet_gguf_reader *r) { return r ? r->version : 0; }
uint32_t bitnet_gguf_reader_alignment(const bitnet_gguf_reader *r) { return r ? r->alignment : 0; }
uint64_t bitnet_gguf_reader_data_offset(const bitnet_gguf_reader *r) { return r ? r->data_start : 0; }
size_t bitnet_gguf_reader_meta_count(const bitnet_gguf_reader *r) { return r ? r->n_kv : 0; }
const char *bitnet_gguf_reader_meta_key(const bitnet_gguf_reader *r, size_t i)
{
    return r && i < r->n_kv ? r->keys[i] + strlen(BITNET_GGUF_META_PREFIX) : NULL;
}
const char *bitnet_gguf_reader_meta_value(const bitnet_gguf_reader *r, size_t i) { return r && i < r->n_kv ? r->values[i] : NULL; }
size_t bitnet_gguf_reader_tensor_count(const bitnet_gguf_reader *r) { return r ? r->n : 0; }
const bitnet_gguf_tensor_desc *bitnet_gguf_reader_tensor(const bitnet_gguf_reader *r, size_t i)
{
    return r && i < r->n ? &r->t[i] : NULL;
}
const char *bn_gguf_reader_prefixed_key(const bitnet_gguf_reader *r, size_t i) { return r && i < r->n_kv ? r->keys[i] : NULL; }

void bitnet_gguf_reader_free(bitnet_gguf_reader *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_kv; i++) {
        free(r->keys[i]);
        free(r->values[i]);
    }
    free(r->keys);
    free(r->values);
    free(r->key_at);
    free(r->t);
    free(r->order);
    free(r);
}

/* Bytes known to remain in the input (UINT64_MAX on a pipe). */
static uint64_t remaining(const bitnet_gguf_reader *r)
{
    if (!r->seekable) return UINT64_MAX;
    return r->in.consumed <= r->file_size ? r->file_size - r->in.consumed : 0;
}

static bitnet_status rd(bitnet_gguf_reader *r, void *buf, size_t n, const char *what)
{
    uint64_t at = r->in.consumed;
    size_t got = bn_pfx_read(&r->in, buf, n);
    if (got == n) return BITNET_OK;
    if (ferror(r->in.f)) return bn_fail(BITNET_E_IO, "gguf: read error at byte %" PRIu64, at + got);
    return bn_fail(BITNET_E_TRUNCATED, "gguf: input ends at byte %" PRIu64 " inside %s (at %" PRIu64 ")", at + got, what, at);
}

static bitnet_status rd_u32(bitnet_gguf_reader *r, uint32_t *v, const char *what)
{
    uint8_t b[4];
    bitnet_status st = rd(r, b, 4, what);
    if (!st) *v = bn_ld32(b);
    return st;
}

static bitnet_status rd_u64(bitnet_gguf_reader *r, uint64_t *v, const char *what)
{
    uint8_t b[8];
    bitnet_status st = rd(r, b, 8, what);
    if (!st) *v = bn_ld64(b);
    return st;
}

/* A length or count: u32 in version 1, u64 later. */
static bitnet_status rd_len(bitnet_gguf_reader *r, uint64_t *v, const char *what)
{
    if (r->version == 1) {
        uint32_t x = 0;
        bitnet_status st = rd_u32(r, &x, what);
        *v = x;
        return st;
    }
    return rd_u64(r, v, what);
}

/* Appends n bytes of input to b in chunks, after checking n against what is
 * left of the file and of the header budget. */
static bitnet_status rd_bytes(bitnet_gguf_reader *r, bn_buf *b, uint64_t n, const char *what)
{
    uint64_t at = r->in.consumed;
    if (n > remaining(r))
        return bn_fail(BITNET_E_TRUNCATED, "gguf: %s at byte %" PRIu64 " claims %" PRIu64 " bytes, %" PRIu64 " are left",
                       what, at, n, remaining(r));
    if (n > BITNET_GGUF_MAX_HEADER || r->header_bytes + n > BITNET_GGUF_MAX_HEADER)
        return bn_fail(BITNET_E_LIMIT, "gguf: %s at byte %" PRIu64 ": the header exceeds %llu bytes", what, at,
                       (unsigned long long)BITNET_GGUF_MAX_HEADER);
    r->header_bytes += n;
    while (n) {
        size_t k = n < CHUNK ? (size_t)n : CHUNK;
        if (bn_buf_reserve(b, k)) return bn_fail(BITNET_E_NOMEM, "gguf: %s at byte %" PRIu64, what, at);
        bitnet_status st = rd(r, b->p + b->len, k, what);
        if (st) return st;
        b->len += k;
        n -= k;
    }
    return BITNET_OK;
}


/* Reads the body of a value of type t into b as GGUF v3 bytes. */
static bitnet_status rd_value(bitnet_gguf_reader *r, uint32_t t, bn_buf *b, int depth, const char *key)
{
    static const uint8_t fixed[GGUF_T_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    bitnet_status st;
    uint64_t n, at = r->in.consumed;
    if (t >= GGUF_T_COUNT)
        return bn_fail(BITNET_E_FORMAT, "gguf: key '%s': unknown value type %" PRIu32 " at byte %" PRIu64, key, t, at);
    if (fixed[t]) return rd_bytes(r, b, fixed[t], "a metadata value");
    if (t == GGUF_T_STR) {
        if ((st = rd_len(r, &n, "a string length")) || (st = bn_buf_put64(b, n))) return st;
        return rd_bytes(r, b, n, "a metadata string");
    }
    uint32_t et;
    if ((st = rd_u32(r, &et, "an array type"))) return st;
    if (et >= GGUF_T_COUNT)
        return bn_fail(BITNET_E_FORMAT, "gguf: key '%s': unknown array element type %" PRIu32 " at byte %" PRIu64, key, et, at);
    if (et == GGUF_T_ARR && depth + 1 >= GGUF_MAX_DEPTH)
        return bn_fail(BITNET_E_LIMIT, "gguf: key '%s': arrays nested deeper than %d at byte %" PRIu64, key, GGUF_MAX_DEPTH, at);
    if ((st = rd_len(r, &n, "an array count")) || (st = bn_buf_put32(b, et)) || (st = bn_buf_put64(b, n))) return st;
    if (fixed[et]) {
        uint64_t bytes;
        if (bn_mul_u64(n, fixed[et], &bytes))
            return bn_fail(BITNET_E_OVERFLOW, "gguf: key '%s': array count %" PRIu64 " at byte %" PRIu64 " overflows", key, n, at);
        return rd_bytes(r, b, bytes, "a metadata array");
    }
    /* every string or array element takes at least 4 bytes (v1 length) */
    if (n > remaining(r) / 4 || n > BITNET_GGUF_MAX_HEADER / 8)
        return bn_fail(BITNET_E_TRUNCATED, "gguf: key '%s': array count %" PRIu64 " at byte %" PRIu64
                       " does not fit in the rest of the input", key, n, at);
    for (uint64_t i = 0; i < n; i++)
        if ((st = rd_value(r, et, b, depth + 1, key))) return st;
    return BITNET_OK;
}


static bitnet_status read_kv(bitnet_gguf_reader *r, uint64_t i)
{
    bitnet_status st;
    bn_buf key = {0}, raw = {0};
    uint64_t kl, at = r->in.consumed;
    uint32_t t;
    char *text = NULL;
    const char *pfx = BITNET_GGUF_META_PREFIX;
    if ((st = rd_len(r, &kl, "a key length"))) goto out;
    if (kl == 0 || kl > GGUF_MAX_KEY) {
        st = bn_fail(BITNET_E_FORMAT, "gguf: key %" PRIu64 " at byte %" PRIu64 ": length %" PRIu64 " (1 to %d)", i, at, kl,
                     GGUF_MAX_KEY);
        goto out;
    }
    if (bn_buf_add(&key, pfx, strlen(pfx))) goto nomem;
    if ((st = rd_bytes(r, &key, kl, "a key"))) goto out;
    if (bn_buf_add(&key, "", 1)) goto nomem;
    const char *k = (const char *)key.p + strlen(pfx);
    if (strlen(k) != kl) {
        st = bn_fail(BITNET_E_FORMAT, "gguf: key %" PRIu64 " at byte %" PRIu64 " holds a NUL byte", i, at);
        goto out;
    }
    if ((st = rd_u32(r, &t, "a value type")) || (st = bn_buf_put32(&raw, t))) goto out;
    if ((st = rd_value(r, t, &raw, 0, k))) goto out;
    if (strcmp(k, "general.alignment") == 0) {
        if (t != GGUF_T_U32 || !bn_is_pow2(bn_ld32(raw.p + 4))) {
            st = bn_fail(BITNET_E_FORMAT, "gguf: general.alignment at byte %" PRIu64 " must be a u32 power of two", at);
            goto out;
        }
        if (bn_ld32(raw.p + 4) > GGUF_MAX_ALIGN) {
            st = bn_fail(BITNET_E_LIMIT, "gguf: general.alignment %" PRIu32 " at byte %" PRIu64 " exceeds %u",
                         bn_ld32(raw.p + 4), at, GGUF_MAX_ALIGN);
            goto out;
        }
        r->alignment = bn_ld32(raw.p + 4);
    }
    if ((st = bn_gguf_meta_encode(raw.p, raw.len, &text))) {
        bn_detail_prefix("key '%s'", k);
        goto out;
    }
    r->keys[r->n_kv] = (char *)key.p;
    r->key_at[r->n_kv] = at;
    r->values[r->n_kv] = text;
    r->n_kv++;
    bn_buf_free(&raw);
    return BITNET_OK;
nomem:
    st = bn_fail(BITNET_E_NOMEM, "gguf: metadata");
out:
    bn_buf_free(&key);
    bn_buf_free(&raw);
    free(text);
    return st;
}

static bitnet_status read_tensor_info(bitnet_gguf_reader *r, uint64_t i)
{
    bitnet_status st;
    bitnet_gguf_tensor_desc *d = &r->t[i];
    uint64_t nl, at = r->in.consumed;
    bn_buf name = {0};
    memset(d, 0, sizeof *d);
    if ((st = rd_len(r, &nl, "a tensor name length"))) return st;
    if (nl == 0 || nl > BITNET_MAX_NAME)
        return bn_fail(BITNET_E_LIMIT, "gguf: tensor %" PRIu64 " at byte %" PRIu64 ": name length %" PRIu64 " (1 to %d)", i,
                       at, nl, BITNET_MAX_NAME);
    if ((st = rd_bytes(r, &name, nl, "a tensor name"))) {
        bn_buf_free(&name);
        return st;
    }
    memcpy(d->name, name.p, (size_t)nl);
    d->name[nl] = 0;
    bn_buf_free(&name);
    if (strlen(d->name) != nl)
        return bn_fail(BITNET_E_FORMAT, "gguf: tensor %" PRIu64 " at byte %" PRIu64 ": NUL in its name", i, at);
    if ((st = rd_u32(r, &d->n_dims, "a tensor's dims"))) return st;
    if (d->n_dims > BITNET_GGUF_MAX_DIMS)
        return bn_fail(BITNET_E_LIMIT, "gguf: tensor '%s' at byte %" PRIu64 ": %" PRIu32 " dims (at most %d)", d->name, at,
                       d->n_dims, BITNET_GGUF_MAX_DIMS);
    for (uint32_t k = 0; k < d->n_dims; k++)
        if ((st = rd_len(r, &d->ne[k], "a tensor's dims"))) return st;
    if ((st = rd_u32(r, &d->type, "a tensor's type")) || (st = rd_u64(r, &d->offset, "a tensor's offset"))) return st;
    if ((st = tensor_bytes(d->name, d->type, d->n_dims, d->ne, &d->bytes, &d->size_from_layout))) return st;
    if (d->offset % r->alignment)
        return bn_fail(BITNET_E_FORMAT, "gguf: tensor '%s': offset %" PRIu64 " is not a multiple of the alignment %" PRIu32,
                       d->name, d->offset, r->alignment);
    if (d->offset > UINT64_MAX / 2)
        return bn_fail(BITNET_E_OVERFLOW, "gguf: tensor '%s': offset %" PRIu64 " is absurd", d->name, d->offset);
    return BITNET_OK;
}

/* qsort has no context argument in C11: the comparators below read these
 * (a reader is not shared between threads while it is being created). */
static char *const *sort_keys;
static int by_key(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(sort_keys[i], sort_keys[j]);
    return c ? c : i < j ? -1 : i > j;
}

/* Keys unique: sorted, each compared with its neighbour (n log n; a header
 * may hold a million keys). */
static bitnet_status check_keys(bitnet_gguf_reader *r)
{
    bitnet_status st = BITNET_OK;
    size_t *ix = malloc((r->n_kv ? r->n_kv : 1) * sizeof *ix);
    if (!ix) return bn_fail(BITNET_E_NOMEM, "gguf: %zu keys", r->n_kv);
    for (size_t i = 0; i < r->n_kv; i++) ix[i] = i;
    sort_keys = r->keys;
    qsort(ix, r->n_kv, sizeof *ix, by_key);
    for (size_t i = 1; i < r->n_kv && !st; i++)
        if (strcmp(r->keys[ix[i]], r->keys[ix[i - 1]]) == 0)
            st = bn_fail(BITNET_E_FORMAT, "gguf: key '%s' at byte %" PRIu64 " appears twice (first at byte %" PRIu64 ")",
                         bitnet_gguf_reader_meta_key(r, ix[i]), r->key_at[ix[i]], r->key_at[ix[i - 1]]);
    free(ix);
    return st;
}

static const bitnet_gguf_tensor_desc *sort_base;
static int by_offset(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const bitnet_gguf_tensor_desc *x = &sort_base[i], *y = &sort_base[j];
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return i < j ? -1 : i > j;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(sort_base[*(const size_t *)a].name, sort_base[*(const size_t *)b].name);
}

/* Names unique, data ranges disjoint and inside the file; sets r->order. */
static bitnet_status check_layout(bitnet_gguf_reader *r)
{
    bitnet_status st = BITNET_OK;
    size_t *ix = malloc((r->n ? r->n : 1) * sizeof *ix);
    if (!ix) return bn_fail(BITNET_E_NOMEM, "gguf: %zu tensors", r->n);
    for (size_t i = 0; i < r->n; i++) ix[i] = i;
    sort_base = r->t;
    qsort(ix, r->n, sizeof *ix, by_name);
    for (size_t i = 1; i < r->n && !st; i++)
        if (strcmp(r->t[ix[i]].name, r->t[ix[i - 1]].name) == 0)
            st = bn_fail(BITNET_E_FORMAT, "gguf: tensor name '%s' appears twice", r->t[ix[i]].name);
    qsort(ix, r->n, sizeof *ix, by_offset);
    uint64_t have = UINT64_MAX; /* bytes of the data section, when the file size is known */
    if (r->seekable) have = r->file_size >= r->data_start ? r->file_size - r->data_start : 0;
    for (size_t i = 0; i < r->n && !st; i++) { /* sizes that only the layout tells */
        bitnet_gguf_tensor_desc *d = &r->t[ix[i]];
        uint64_t limit = i + 1 < r->n ? r->t[ix[i + 1]].offset : have;
        if (d->type == GGML_MXFP4_OR_TL2 && !d->size_from_layout && d->offset + d->bytes > limit) d->size_from_layout = 1;
        if (!d->size_from_layout) continue;
        d->bytes = limit == UINT64_MAX || limit < d->offset ? 0 : limit - d->offset;
        if (limit == UINT64_MAX) r->open_end = 1;
    }
    uint64_t end = 0;
    for (size_t i = 0; i < r->n && !st; i++) {
        const bitnet_gguf_tensor_desc *d = &r->t[ix[i]];
        if (d->offset < end)
            st = bn_fail(BITNET_E_FORMAT, "gguf: tensor '%s': data [%" PRIu64 ", %" PRIu64 ") overlaps tensor '%s', which "
                         "ends at %" PRIu64, d->name, d->offset, d->offset + d->bytes, r->t[ix[i - 1]].name, end);
        end = d->offset + d->bytes;
    }
    if (!st && r->seekable) {
        uint64_t padded = (end + r->alignment - 1) / r->alignment * r->alignment;
        for (size_t i = 0; i < r->n && !st; i++) {
            const bitnet_gguf_tensor_desc *d = &r->t[ix[i]];
            if (d->offset + d->bytes > have)
                st = bn_fail(BITNET_E_TRUNCATED, "gguf: tensor '%s': data [%" PRIu64 ", %" PRIu64 ") at file byte %" PRIu64
                             " runs past the end of the file (%" PRIu64 " bytes)", d->name, d->offset, d->offset + d->bytes,
                             r->data_start + d->offset, r->file_size);
        }
        if (!st && r->n && have > padded)
            st = bn_fail(BITNET_E_FORMAT, "gguf: %" PRIu64 " bytes follow the last tensor's data (it ends at file byte %"
                         PRIu64 ", padded to %" PRIu64 ")", have - end, r->data_start + end, r->data_start + padded);
        if (!st && !r->n && r->file_size > r->in.consumed && have > 0)
            st = bn_fail(BITNET_E_FORMAT, "gguf: %" PRIu64 " bytes follow the header of a file without tensors",
                         r->file_size - r->in.consumed);
        for (size_t i = 0; i < r->n; i++) ix[i] = i; /* seekable: info order */
    }
    if (st) {
        free(ix);
        return st;
    }
    r->order = ix;
    return BITNET_OK;
}

bitnet_status bitnet_gguf_reader_create(bitnet_gguf_reader **out, FILE *f, const uint8_t *prefix, size_t prefix_len)
{
    bitnet_status st;
    uint8_t head[8];
    uint64_t n_tensors, n_kv;
    if (!out || !f || (prefix_len && !prefix)) return bn_fail(BITNET_E_INVALID, "gguf: no input");
    *out = NULL;
    bitnet_gguf_reader *r = calloc(1, sizeof *r);
    if (!r) return bn_fail(BITNET_E_NOMEM, "gguf reader");
    r->alignment = GGUF_DEFAULT_ALIGN;
    if (bn_pfx_init(&r->in, f, prefix, prefix_len)) {
        free(r);
        return bn_fail(BITNET_E_INVALID, "gguf: prefix too long");
    }
    int64_t left = bn_file_remaining(f);
    off_t pos = ftello(f);
    if (left >= 0 && pos >= (off_t)prefix_len) {
        r->seekable = 1;
        r->file_start = (int64_t)pos - (int64_t)prefix_len;
        r->file_size = (uint64_t)left + prefix_len;
    }
    if ((st = rd(r, head, 8, "the file header"))) goto fail;
    if (memcmp(head, "GGUF", 4) != 0) {
        st = bn_fail(BITNET_E_FORMAT, "gguf: bad magic (not a GGUF file)");
        goto fail;
    }
    r->version = bn_ld32(head + 4);
    if (r->version < 1 || r->version > 3) {
        st = bn_fail(BITNET_E_VERSION, "gguf: version %" PRIu32 " (1 to 3 are read)", r->version);
        goto fail;
    }
    if ((st = rd_len(r, &n_tensors, "the tensor count")) || (st = rd_len(r, &n_kv, "the key count"))) goto fail;
    if (n_tensors > BITNET_GGUF_MAX_TENSORS || n_kv > BITNET_GGUF_MAX_KV) {
        st = bn_fail(BITNET_E_LIMIT, "gguf: %" PRIu64 " tensors and %" PRIu64 " keys (at most %u of each)", n_tensors,
                     n_kv, BITNET_GGUF_MAX_TENSORS);
        goto fail;
    }
    /* each key takes at least 13 bytes, each tensor info 20 (version 1) */
    if (n_kv * 13 + n_tensors * 20 > remaining(r)) {
        st = bn_fail(BITNET_E_TRUNCATED, "gguf: %" PRIu64 " tensors and %" PRIu64 " keys cannot fit in the %" PRIu64
                     " bytes left", n_tensors, n_kv, remaining(r));
        goto fail;
    }
    r->keys = calloc(n_kv ? n_kv : 1, sizeof *r->keys);
    r->values = calloc(n_kv ? n_kv : 1, sizeof *r->values);
    r->key_at = calloc(n_kv ? n_kv : 1, sizeof *r->key_at);
    r->t = calloc(n_tensors ? n_tensors : 1, sizeof *r->t);
    if (!r->keys || !r->values || !r->key_at || !r->t) {
        st = bn_fail(BITNET_E_NOMEM, "gguf: header tables");
        goto fail;
    }
    for (uint64_t i = 0; i < n_kv; i++)
        if ((st = read_kv(r, i))) goto fail;
    if ((st = check_keys(r))) goto fail;
    for (uint64_t i = 0; i < n_tensors; i++, r->n++)
        if ((st = read_tensor_info(r, i))) goto fail;
    r->data_start = (r->in.consumed + r->alignment - 1) / r->alignment * r->alignment;
    if ((st = check_layout(r))) goto fail;
    *out = r;
    return BITNET_OK;
fail:
    bitnet_gguf_reader_free(r);
    return st;
}

/* ---- tensor data ------------------------------------------------------------------- */

/* Positions the input at the data of d (seek, or read forward on a pipe). */
static bitnet_status position(bitnet_gguf_reader *r, const bitnet_gguf_tensor_desc *d)
{
    uint64_t target = r->data_start + d->offset;
    if (r->seekable) {
        if (target > (uint64_t)INT64_MAX - (uint64_t)r->file_start ||
            fseeko(r->in.f, (off_t)(r->file_start + (int64_t)target), SEEK_SET) != 0)
            return bn_fail(BITNET_E_IO, "gguf: tensor '%s': cannot seek to file byte %" PRIu64, d->name, target);
        r->in.pre_pos = r->in.pre_len; /* the prefix lies behind */
        r->in.consumed = target;
        return BITNET_OK;
    }
    uint8_t skip[4096];
    while (r->in.consumed < target) {
        uint64_t k = target - r->in.consumed;
        if (k > sizeof skip) k = sizeof skip;
        bitnet_status st = rd(r, skip, (size_t)k, "the padding before a tensor's data");
        if (st) {
            bn_detail_prefix("tensor '%s'", d->name);
            return st;
        }
    }
    return BITNET_OK;
}

static void fill_info(const bitnet_gguf_tensor_desc *d, bitnet_tensor_info *info)
{
    memset(info, 0, sizeof *info);
    memcpy(info->name, d->name, strlen(d->name) + 1);
    info->rank = d->n_dims;
    for (uint32_t k = 0; k < d->n_dims; k++) info->dims[k] = d->ne[d->n_dims - 1 - k];
}

static bitnet_status decode_ternary(const bitnet_gguf_tensor_desc *d, const uint8_t *raw, bitnet_tensor *t)
{
    bitnet_status st = BITNET_OK;
    uint64_t rows, cols, n;
    int8_t *q = NULL;
    bitnet_tensor_rows_cols(&t->info, &rows, &cols);
    if ((st = bitnet_tensor_elements(&t->info, &n))) return st;
    if (d->type == GGML_I2_S) {
        size_t nn;
        if (bn_u64_to_size(n, &nn) || !(q = malloc(nn ? nn : 1))) return bn_fail(BITNET_E_NOMEM, "gguf: tensor '%s'", d->name);
        uint64_t bad = bn_i2s_decode(raw, n, q);
        if (bad < n) st = bn_fail(BITNET_E_FORMAT, "gguf: tensor '%s': i2_s code 3 (invalid) at weight %" PRIu64, d->name, bad);
        else if (n) st = bitnet_t2_pack(q, rows, cols, t->data);
        uint32_t u = bn_ld32(raw + n / 4);
        memcpy(&t->scales[0], &u, 4);
        free(q);
        return st;
    }
    uint64_t nblk = cols / GGUF_QK;
    size_t row_out = d->type == GGML_TQ2_0 ? bitnet_t2_row_bytes(cols) : bitnet_t3_row_bytes(cols);
    if (!rows || !nblk) return BITNET_OK; /* no data (the rows may still be long: no buffer of their size) */
    if (d->type == GGML_TQ1_0 && !(q = malloc((size_t)cols))) return bn_fail(BITNET_E_NOMEM, "gguf: tensor '%s'", d->name);
    const uint8_t *p = raw;
    for (uint64_t r = 0; r < rows && !st; r++) {
        uint8_t *o = (uint8_t *)t->data + r * row_out;
        for (uint64_t b = 0; b < nblk && !st; b++) {
            if (d->type == GGML_TQ2_0) {
                for (int j = 0; j < 64 && !st; j++)
                    if (p[j] & (p[j] >> 1) & 0x55)
                        st = bn_fail(BITNET_E_FORMAT, "gguf: tensor '%s': tq2_0 code 3 (invalid) in row %" PRIu64
                                     ", block %" PRIu64, d->name, r, b);
                memcpy(o + b * 64, p, 64);
                t->scales[r * nblk + b] = bitnet_f16_to_f32(bn_ld16(p + 64));
                p += GGUF_TQ2_BYTES;
            } else {
                bn_tq1_decode(p, q + b * GGUF_QK);
                t->scales[r * nblk + b] = bitnet_f16_to_f32(bn_ld16(p + 52));
                p += GGUF_TQ1_BYTES;
            }
        }
        if (!st && d->type == GGML_TQ1_0) st = bitnet_t3_pack(q, 1, cols, o);
    }
    free(q);
    return st;
}

/* Turns the raw bytes of d into t (raw is consumed). */
static bitnet_status decode(const bitnet_gguf_tensor_desc *d, uint8_t *raw, bitnet_tensor *t)
{
    bitnet_status st;
    uint64_t n;
    fill_info(d, &t->info);
    bitnet_dtype pd = plain_dtype(d->type);
    if (pd != BITNET_DTYPE_INVALID) {
        t->info.dtype = pd;
        if ((st = bitnet_tensor_elements(&t->info, &n))) {
            free(raw);
            return st;
        }
        bn_from_le(raw, (size_t)n, bitnet_dtype_size(pd));
        t->data = raw;
        return BITNET_OK;
    }
    if (d->type == GGML_I2_S) {
        t->info.dtype = BITNET_T2;
        t->info.scale_kind = BITNET_SCALE_TENSOR;
    } else {
        t->info.dtype = d->type == GGML_TQ2_0 ? BITNET_T2 : BITNET_T3;
        t->info.scale_kind = BITNET_SCALE_GROUP;
        t->info.group = GGUF_QK;
    }
    if ((st = bitnet_tensor_info_check(&t->info)) || (st = bitnet_tensor_alloc(t))) {
        bn_detail_prefix("gguf: tensor '%s'", d->name);
        free(raw);
        return st;
    }
    st = decode_ternary(d, raw, t);
    free(raw);
    if (st) bitnet_tensor_release(t);
    return st;
}

/* What bitnet.cpp calls the codes ggml's table lacks or gives another meaning. */
static const char *bitnet_cpp_name(uint32_t type)
{
    switch (type) {
    case 37: return " (bitnet.cpp's i8_s)";
    case 38: return " (bitnet.cpp's tl1)";
    case GGML_MXFP4_OR_TL2: return " (bitnet.cpp's tl2; not laid out as ggml's mxfp4)";
    default: return "";
    }
}

static bitnet_status load(bitnet_gguf_reader *r, const bitnet_gguf_tensor_desc *d, bitnet_tensor *t)
{
    bitnet_status st;
    uint8_t *raw;
    uint64_t got;
    /* types not converted are refused before any byte is read: next() may go on */
    if (d->size_from_layout)
        return bn_fail(BITNET_E_UNSUPPORTED, "gguf: tensor '%s': unknown ggml type %" PRIu32 "%s is not converted here",
                       d->name, d->type, bitnet_cpp_name(d->type));
    if (plain_dtype(d->type) == BITNET_DTYPE_INVALID && d->type != GGML_TQ1_0 && d->type != GGML_TQ2_0 &&
        d->type != GGML_I2_S)
        return bn_fail(BITNET_E_UNSUPPORTED, "gguf: tensor '%s': ggml type %s is not supported here (code %" PRIu32
                       "%s; f32 f16 bf16 f64 i8 i16 i32 i64 tq1_0 tq2_0 i2_s are)", d->name, bitnet_gguf_type_name(d->type),
                       d->type, d->type == GGML_MXFP4_OR_TL2 ? ", also bitnet.cpp's tl2" : "");
    if ((st = position(r, d))) return (r->err = st);
    if (bn_pfx_read_alloc(&r->in, d->bytes, &raw, &got))
        return (r->err = bn_fail(BITNET_E_NOMEM, "gguf: tensor '%s': cannot allocate %" PRIu64 " bytes", d->name, d->bytes));
    if (got < d->bytes) {
        free(raw);
        if (ferror(r->in.f)) return (r->err = bn_fail(BITNET_E_IO, "gguf: tensor '%s': read error", d->name));
        return (r->err = bn_fail(BITNET_E_TRUNCATED, "gguf: tensor '%s': input ends at file byte %" PRIu64
                                 ", inside its data [%" PRIu64 ", %" PRIu64 ")", d->name, r->in.consumed,
                                 r->data_start + d->offset, r->data_start + d->offset + d->bytes));
    }
    return decode(d, raw, t);
}

bitnet_status bitnet_gguf_reader_next(bitnet_gguf_reader *r, bitnet_tensor *t)
{
    if (!r || !t) return bn_fail(BITNET_E_INVALID, "gguf: no reader");
    memset(t, 0, sizeof *t);
    if (r->err) return bn_fail(r->err, "gguf: the reader failed earlier");
    if (r->next < r->n) return load(r, &r->t[r->order[r->next++]], t);
    if (!r->at_end && !r->seekable) {
        /* on a pipe: at most the padding after the last tensor may follow
         * (anything, when the last tensor's size is that of the rest) */
        uint64_t end = r->in.consumed, k;
        for (size_t i = 0; i < r->n; i++)
            if (r->data_start + r->t[i].offset + r->t[i].bytes > end) end = r->data_start + r->t[i].offset + r->t[i].bytes;
        uint64_t limit = r->n ? (end + r->alignment - 1) / r->alignment * r->alignment : r->data_start;
        uint8_t skip[256];
        while ((k = bn_pfx_read(&r->in, skip, sizeof skip)) > 0)
            if (r->in.consumed > limit && !r->open_end)
                return (r->err = bn_fail(BITNET_E_FORMAT, "gguf: bytes follow the last tensor's data past file byte %" PRIu64,
                                         limit));
        if (ferror(r->in.f)) return (r->err = bn_fail(BITNET_E_IO, "gguf: read error"));
        if (r->in.consumed < end) /* the data of a skipped tensor (a type not converted) were cut */
            return (r->err = bn_fail(BITNET_E_TRUNCATED, "gguf: input ends at file byte %" PRIu64 ", inside the tensor "
                                     "data (which end at %" PRIu64 ")", r->in.consumed, end));
    }
    r->at_end = 1;
    return BITNET_END;
}

bitnet_status bitnet_gguf_reader_find(bitnet_gguf_reader *r, const char *name, bitnet_tensor *t)
{
    if (!r || !name || !t) return bn_fail(BITNET_E_INVALID, "gguf: NULL argument");
    memset(t, 0, sizeof *t);
    if (!r->seekable) return bn_fail(BITNET_E_UNSUPPORTED, "gguf: finding a tensor by name needs a seekable file");
    if (r->err) return bn_fail(r->err, "gguf: the reader failed earlier");
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->t[i].name, name) == 0) return load(r, &r->t[i], t);
    return bn_fail(BITNET_E_NOT_FOUND, "gguf: no tensor named '%s'", name);
}

