/*
 * gguf_write.c - the GGUF writer (version 3) behind the generic writer.
 *
 * GGUF puts every tensor's info before the first data byte, so the writer
 * spools the data to a temporary file (tmpfile) and writes header and data
 * at finish: peak memory stays one tensor, and the output may be a pipe.
 * Each tensor is padded to the alignment, as llama.cpp and the gguf Python
 * package do, so that their files come back byte for byte.
 */
#include "bnt_format.h"
#include "gguf_internal.h"
#include "internal.h"
#include "prefix_io.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#define CHUNK (1u << 20)

struct bn_gguf_writer {
    FILE *f, *spool;
    bn_buf kv, infos;
    bn_bnt_names keys, names; /* hashed: a duplicate is found in O(1), not by a scan */
    uint64_t data_at;
    uint32_t alignment;
};

bitnet_status bn_gguf_writer_create(bn_gguf_writer **out, FILE *f)
{
    *out = NULL;
    bn_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return bn_fail(BITNET_E_NOMEM, "gguf writer");
    w->f = f;
    w->alignment = GGUF_DEFAULT_ALIGN;
    if (!(w->spool = tmpfile())) {
        free(w);
        return bn_fail(BITNET_E_IO, "gguf writer: cannot create a temporary file for the tensor data");
    }
    *out = w;
    return BITNET_OK;
}

void bn_gguf_writer_free(bn_gguf_writer *w)
{
    if (!w) return;
    if (w->spool) fclose(w->spool);
    bn_buf_free(&w->kv);
    bn_buf_free(&w->infos);
    bn_bnt_names_free(&w->keys);
    bn_bnt_names_free(&w->names);
    free(w);
}

/* s may join the names: not there yet, and the count within the reader's
 * limit (the reader refuses a file with more). */
static bitnet_status check_name(const bn_bnt_names *names, const char *s, const char *what, size_t limit)
{
    if (bn_bnt_names_find(names, s, strlen(s)) != SIZE_MAX)
        return bn_fail(BITNET_E_INVALID, "gguf writer: %s '%s' given twice", what, s);
    if (names->n >= limit) return bn_fail(BITNET_E_LIMIT, "gguf writer: more than %zu %ss", limit, what);
    return BITNET_OK;
}

static bitnet_status add_name(bn_bnt_names *names, const char *s)
{
    return bn_bnt_names_add(names, s, strlen(s), 0) < 0 ? bn_fail(BITNET_E_NOMEM, "gguf writer") : BITNET_OK;
}

bitnet_status bn_gguf_writer_meta(bn_gguf_writer *w, const char *key, const char *value)
{
    bitnet_status st = BITNET_OK;
    bn_buf raw = {0};
    const char *pfx = BITNET_GGUF_META_PREFIX, *k = key;
    if (strncmp(key, pfx, strlen(pfx)) == 0) {
        k = key + strlen(pfx);
        if ((st = bn_gguf_meta_decode(value, &raw))) {
            bn_detail_prefix("gguf writer: metadata '%s'", key);
            goto out;
        }
    } else {
        size_t n = strlen(value);
        if ((st = bn_buf_put32(&raw, GGUF_T_STR)) || (st = bn_buf_put64(&raw, n))) goto out;
        if (bn_buf_add(&raw, value, n)) goto nomem;
    }
    if (!*k) {
        st = bn_fail(BITNET_E_INVALID, "gguf writer: empty metadata key");
        goto out;
    }
    if (strcmp(k, "general.alignment") == 0) {
        if (raw.len != 8 || bn_ld32(raw.p) != GGUF_T_U32 || !bn_is_pow2(bn_ld32(raw.p + 4)) ||
            bn_ld32(raw.p + 4) > GGUF_MAX_ALIGN) {
            st = bn_fail(BITNET_E_INVALID, "gguf writer: general.alignment must be a u32 power of two up to %u",
                         GGUF_MAX_ALIGN);
            goto out;
        }
        if (w->names.n) {
            st = bn_fail(BITNET_E_INVALID, "gguf writer: general.alignment after the first tensor");
            goto out;
        }
        w->alignment = bn_ld32(raw.p + 4);
    }
    if ((st = check_name(&w->keys, k, "metadata key", BITNET_GGUF_MAX_KV)) || (st = add_name(&w->keys, k))) goto out;
    if ((st = bn_buf_put64(&w->kv, strlen(k)))) goto out;
    if (bn_buf_add(&w->kv, k, strlen(k)) || bn_buf_add(&w->kv, raw.p, raw.len)) goto nomem;
    goto out;
nomem:
    st = bn_fail(BITNET_E_NOMEM, "gguf writer: metadata");
out:
    bn_buf_free(&raw);
    return st;
}

static float block_scale(const bitnet_tensor *t, uint64_t row, uint64_t col, uint64_t cols)
{
    switch (t->info.scale_kind) {
    case BITNET_SCALE_TENSOR: return t->scales[0];
    case BITNET_SCALE_ROW: return t->scales[row];
    case BITNET_SCALE_GROUP: return t->scales[row * ((cols + t->info.group - 1) / t->info.group) + col / t->info.group];
    default: return 1.0f;
    }
}

bitnet_status bitnet_gguf_scale_error(const bitnet_tensor *t, double *max_rel)
{
    uint64_t ns;
    bitnet_status st;
    if (!t || !max_rel) return bn_fail(BITNET_E_INVALID, "gguf scale error: NULL argument");
    *max_rel = 0;
    if (!bitnet_dtype_is_ternary(t->info.dtype)) return BITNET_OK;
    if ((st = bitnet_tensor_n_scales(&t->info, &ns))) return st;
    for (uint64_t i = 0; i < ns; i++) {
        double d = t->scales[i], h = bitnet_f16_to_f32(bitnet_f32_to_f16(t->scales[i]));
        double e = d != 0 ? fabs(h - d) / fabs(d) : 0;
        if (!(e <= *max_rel)) *max_rel = e; /* NaN wins */
    }
    return BITNET_OK;
}

/* One row of a ternary tensor as GGUF blocks (q: the row's codes for t3). */
static bitnet_status ternary_row(const bitnet_tensor *t, uint64_t row, uint64_t cols, const int8_t *q, uint8_t *out)
{
    for (uint64_t b = 0; b < cols / GGUF_QK; b++) {
        float s = block_scale(t, row, b * GGUF_QK, cols);
        uint16_t h = bitnet_f32_to_f16(s);
        if (!isfinite(bitnet_f16_to_f32(h)))
            return bn_fail(BITNET_E_NUMERIC, "gguf writer: tensor '%s': scale %g of row %" PRIu64 " does not fit an f16",
                           t->info.name, (double)s, row);
        if (t->info.dtype == BITNET_T2) {
            memcpy(out + b * GGUF_TQ2_BYTES, (const uint8_t *)t->data + row * bitnet_t2_row_bytes(cols) + b * 64, 64);
            bn_st16(out + b * GGUF_TQ2_BYTES + 64, h);
        } else {
            bn_tq1_encode(q + b * GGUF_QK, out + b * GGUF_TQ1_BYTES);
            bn_st16(out + b * GGUF_TQ1_BYTES + 52, h);
        }
    }
    return BITNET_OK;
}

static bitnet_status spool_ternary(bn_gguf_writer *w, const bitnet_tensor *t, uint64_t rows, uint64_t cols)
{
    bitnet_status st = BITNET_OK;
    const bitnet_tensor_info *in = &t->info;
    if (cols % GGUF_QK)
        return bn_fail(BITNET_E_SHAPE, "gguf writer: tensor '%s': rows of %" PRIu64 " weights; tq1_0 and tq2_0 need a "
                       "multiple of %d", in->name, cols, GGUF_QK);
    if (in->scale_kind == BITNET_SCALE_GROUP && in->group % GGUF_QK)
        return bn_fail(BITNET_E_UNSUPPORTED, "gguf writer: tensor '%s': scale groups of %" PRIu32 " weights; GGUF has one "
                       "f16 scale per 256-weight block", in->name, in->group);
    size_t bpb = in->dtype == BITNET_T2 ? GGUF_TQ2_BYTES : GGUF_TQ1_BYTES;
    size_t row_bytes = (size_t)(cols / GGUF_QK) * bpb;
    if (!rows || !cols) return BITNET_OK; /* no data: a row's buffer for a [0, huge] shape would be huge for nothing */
    uint8_t *buf = malloc(row_bytes);
    int8_t *q = in->dtype == BITNET_T3 ? malloc((size_t)cols) : NULL;
    if (!buf || (in->dtype == BITNET_T3 && !q)) {
        st = bn_fail(BITNET_E_NOMEM, "gguf writer: tensor '%s'", in->name);
        goto out;
    }
    for (uint64_t r = 0; r < rows; r++) {
        if (q && (st = bitnet_t3_unpack((const uint8_t *)t->data + r * bitnet_t3_row_bytes(cols), 1, cols, q))) goto out;
        if ((st = ternary_row(t, r, cols, q, buf))) goto out;
        if (fwrite(buf, 1, row_bytes, w->spool) != row_bytes) {
            st = bn_fail(BITNET_E_IO, "gguf writer: cannot write the temporary file");
            goto out;
        }
    }
out:
    free(buf);
    free(q);
    return st;
}

bitnet_status bn_gguf_writer_put(bn_gguf_writer *w, const bitnet_tensor *t)
{
    bitnet_status st;
    const bitnet_tensor_info *in = &t->info;
    uint64_t ne[BITNET_GGUF_MAX_DIMS] = {1, 1, 1, 1}, n, rows, cols, bytes;
    uint32_t n_dims = in->rank ? in->rank : 1; /* rank 0 is written as [1] */
    uint32_t type = bn_ggml_of(in->dtype);
    if ((st = bitnet_tensor_info_check(in))) return st;
    if (type == UINT32_MAX)
        return bn_fail(BITNET_E_DTYPE, "gguf writer: tensor '%s': GGUF has no %s type (cast it, e.g. --dtype i16)", in->name,
                       bitnet_dtype_name(in->dtype));
    if (in->rank > BITNET_GGUF_MAX_DIMS)
        return bn_fail(BITNET_E_SHAPE, "gguf writer: tensor '%s': rank %" PRIu32 " (GGUF holds at most %d dims)", in->name,
                       in->rank, BITNET_GGUF_MAX_DIMS);
    if (!bitnet_dtype_is_ternary(in->dtype) && in->scale_kind != BITNET_SCALE_NONE)
        return bn_fail(BITNET_E_UNSUPPORTED, "gguf writer: tensor '%s': %s with scales has no GGUF type; dequantize it "
                       "(--dtype f32)", in->name, bitnet_dtype_name(in->dtype));
    for (uint32_t k = 0; k < in->rank; k++) ne[k] = in->dims[in->rank - 1 - k];
    if ((st = bitnet_tensor_elements(in, &n))) return st;
    bitnet_tensor_rows_cols(in, &rows, &cols);
    if ((st = check_name(&w->names, in->name, "tensor", BITNET_GGUF_MAX_TENSORS))) return st;
    if (bitnet_dtype_is_ternary(in->dtype)) {
        st = spool_ternary(w, t, rows, cols);
        bytes = cols / GGUF_QK * rows * (in->dtype == BITNET_T2 ? GGUF_TQ2_BYTES : GGUF_TQ1_BYTES);
    } else {
        bytes = n * bitnet_dtype_size(in->dtype);
        if (n && (st = bn_write_le(w->spool, t->data, n, bitnet_dtype_size(in->dtype))))
            bn_detail_prefix("gguf writer: tensor '%s'", in->name);
    }
    if (st) { /* a refused tensor leaves nothing behind: later ones may follow */
        if (fflush(w->spool) != 0 || ftruncate(fileno(w->spool), (off_t)w->data_at) != 0 ||
            fseeko(w->spool, (off_t)w->data_at, SEEK_SET) != 0)
            return bn_fail(BITNET_E_IO, "gguf writer: cannot undo a refused tensor in the temporary file");
        return st;
    }
    if ((st = add_name(&w->names, in->name))) return st;
    uint64_t pad = (w->alignment - bytes % w->alignment) % w->alignment;
    static const uint8_t zeros[256];
    for (uint64_t left = pad; left;) {
        size_t k = left < sizeof zeros ? (size_t)left : sizeof zeros;
        if (fwrite(zeros, 1, k, w->spool) != k) return bn_fail(BITNET_E_IO, "gguf writer: cannot write the temporary file");
        left -= k;
    }
    size_t nl = strlen(in->name);
    if ((st = bn_buf_put64(&w->infos, nl))) return st;
    if (bn_buf_add(&w->infos, in->name, nl)) return bn_fail(BITNET_E_NOMEM, "gguf writer");
    if ((st = bn_buf_put32(&w->infos, n_dims))) return st;
    for (uint32_t k = 0; k < n_dims; k++)
        if ((st = bn_buf_put64(&w->infos, ne[k]))) return st;
    if ((st = bn_buf_put32(&w->infos, type)) || (st = bn_buf_put64(&w->infos, w->data_at))) return st;
    w->data_at += bytes + pad;
    return BITNET_OK;
}

bitnet_status bn_gguf_writer_finish(bn_gguf_writer *w)
{
    bn_buf h = {0};
    bitnet_status st;
    uint8_t *buf = NULL;
    if (bn_buf_add(&h, "GGUF", 4)) return bn_fail(BITNET_E_NOMEM, "gguf writer");
    if ((st = bn_buf_put32(&h, 3)) || (st = bn_buf_put64(&h, w->names.n)) || (st = bn_buf_put64(&h, w->keys.n))) goto out;
    if (bn_buf_add(&h, w->kv.p, w->kv.len) || bn_buf_add(&h, w->infos.p, w->infos.len) ||
        bn_buf_reserve(&h, w->alignment)) {
        st = bn_fail(BITNET_E_NOMEM, "gguf writer: header");
        goto out;
    }
    while (h.len % w->alignment) h.p[h.len++] = 0;
    if (fwrite(h.p, 1, h.len, w->f) != h.len) {
        st = bn_fail(BITNET_E_IO, "gguf writer: write failed");
        goto out;
    }
    if (fflush(w->spool) != 0 || fseeko(w->spool, 0, SEEK_SET) != 0) {
        st = bn_fail(BITNET_E_IO, "gguf writer: cannot rewind the temporary file");
        goto out;
    }
    if (!(buf = malloc(CHUNK))) {
        st = bn_fail(BITNET_E_NOMEM, "gguf writer");
        goto out;
    }
    uint64_t copied = 0;
    size_t k;
    while ((k = fread(buf, 1, CHUNK, w->spool)) > 0) {
        if (fwrite(buf, 1, k, w->f) != k) break;
        copied += k;
    }
    if (copied != w->data_at || ferror(w->spool))
        st = bn_fail(BITNET_E_IO, "gguf writer: copying the tensor data failed after %" PRIu64 " of %" PRIu64 " bytes",
                     copied, w->data_at);
out:
    free(buf);
    bn_buf_free(&h);
    return st;
}
