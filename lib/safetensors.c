/*
 * safetensors.c - the safetensors format: an 8-byte little-endian header
 * length, a JSON header, then the tensors' bytes back to back.
 *
 * Validation follows the reference implementation: the header is bounded and
 * starts with '{', the JSON has no duplicate keys, "__metadata__" maps strings
 * to strings, every data_offsets [begin, end) holds exactly shape * dtype-size
 * bytes, and sorted by begin the ranges start at 0, touch without gap or
 * overlap and end where the data does.  Tensors are returned in offset order,
 * so a pipe is read front to back; on a pipe the data size is learnt while
 * reading, which still detects truncation and trailing bytes.
 */
#include "internal.h"
#include "prefix_io.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>

static const struct {
    const char *name;
    bitnet_dtype dtype;
} st_types[] = {
    {"F32", BITNET_F32}, {"F16", BITNET_F16}, {"BF16", BITNET_BF16}, {"F64", BITNET_F64}, {"I8", BITNET_I8},
    {"U8", BITNET_U8},   {"I16", BITNET_I16}, {"I32", BITNET_I32},   {"I64", BITNET_I64},
};
#define N_ST_TYPES (sizeof st_types / sizeof st_types[0])

static const char *st_dtype_name(bitnet_dtype t)
{
    for (size_t i = 0; i < N_ST_TYPES; i++)
        if (st_types[i].dtype == t) return st_types[i].name;
    return NULL;
}

typedef struct {
    char *name;
    bitnet_dtype dtype;
    uint32_t rank;
    uint64_t dims[BITNET_MAX_RANK];
    uint64_t begin, end;
} st_entry;

struct bitnet_st_reader {
    bn_pfx in;
    st_entry *e;
    size_t n, next;
    char **meta_keys, **meta_values;
    size_t n_meta;
    uint64_t data_size;
    int at_end;        /* BITNET_END already returned */
    bitnet_status err; /* sticky: a failed read leaves the stream mid-tensor */
};

size_t bitnet_st_reader_meta_count(const bitnet_st_reader *r) { return r ? r->n_meta : 0; }
size_t bitnet_st_reader_tensor_count(const bitnet_st_reader *r) { return r ? r->n : 0; }
const char *bitnet_st_reader_tensor_name(const bitnet_st_reader *r, size_t i) { return r && i < r->n ? r->e[i].name : NULL; }
const char *bitnet_st_reader_meta_key(const bitnet_st_reader *r, size_t i) { return r && i < r->n_meta ? r->meta_keys[i] : NULL; }
const char *bitnet_st_reader_meta_value(const bitnet_st_reader *r, size_t i) { return r && i < r->n_meta ? r->meta_values[i] : NULL; }

void bitnet_st_reader_free(bitnet_st_reader *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) free(r->e[i].name);
    for (size_t i = 0; i < r->n_meta; i++) {
        free(r->meta_keys[i]);
        free(r->meta_values[i]);
    }
    free(r->e);
    free(r->meta_keys);
    free(r->meta_values);
    free(r);
}

/* A JSON integer that is a valid non-negative size. */
static int get_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static bitnet_status parse_meta(bitnet_st_reader *r, json_t *m)
{
    const char *k;
    json_t *v;
    if (!json_is_object(m)) return bn_fail(BITNET_E_FORMAT, "safetensors: \"__metadata__\" is not an object");
    size_t n = json_object_size(m);
    r->meta_keys = calloc(n ? n : 1, sizeof *r->meta_keys);
    r->meta_values = calloc(n ? n : 1, sizeof *r->meta_values);
    if (!r->meta_keys || !r->meta_values) return bn_fail(BITNET_E_NOMEM, "safetensors: metadata");
    json_object_foreach(m, k, v) {
        if (!json_is_string(v))
            return bn_fail(BITNET_E_FORMAT, "safetensors: metadata value of \"%s\" is not a string", k);
        r->meta_keys[r->n_meta] = strdup(k);
        r->meta_values[r->n_meta] = strdup(json_string_value(v));
        r->n_meta++;
        if (!r->meta_keys[r->n_meta - 1] || !r->meta_values[r->n_meta - 1])
            return bn_fail(BITNET_E_NOMEM, "safetensors: metadata");
    }
    return BITNET_OK;
}

static bitnet_status parse_entry(const char *name, json_t *v, st_entry *e)
{
    if (strlen(name) > BITNET_MAX_NAME)
        return bn_fail(BITNET_E_LIMIT, "safetensors: a tensor name is longer than %d bytes", BITNET_MAX_NAME);
    if (!json_is_object(v)) return bn_fail(BITNET_E_FORMAT, "safetensors: tensor '%s': entry is not an object", name);
    json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt)) return bn_fail(BITNET_E_FORMAT, "safetensors: tensor '%s': missing or non-string \"dtype\"", name);
    if (!json_is_array(shape)) return bn_fail(BITNET_E_FORMAT, "safetensors: tensor '%s': missing or non-array \"shape\"", name);
    if (!json_is_array(off)) return bn_fail(BITNET_E_FORMAT, "safetensors: tensor '%s': missing or non-array \"data_offsets\"", name);
    const char *dn = json_string_value(dt);
    size_t i;
    for (i = 0; i < N_ST_TYPES; i++)
        if (strcmp(dn, st_types[i].name) == 0) break;
    if (i == N_ST_TYPES)
        return bn_fail(BITNET_E_UNSUPPORTED, "safetensors: tensor '%s': dtype '%s' not supported "
                       "(supported: F32 F16 BF16 F64 I8 U8 I16 I32 I64)", name, dn);
    e->dtype = st_types[i].dtype;
    if (json_array_size(shape) > BITNET_MAX_RANK)
        return bn_fail(BITNET_E_LIMIT, "safetensors: tensor '%s': rank %zu exceeds %d", name, json_array_size(shape),
                       BITNET_MAX_RANK);
    e->rank = (uint32_t)json_array_size(shape);
    for (uint32_t d = 0; d < e->rank; d++)
        if (!get_u64(json_array_get(shape, d), &e->dims[d]))
            return bn_fail(BITNET_E_FORMAT, "safetensors: tensor '%s': shape entry %u is not a non-negative integer", name, d);
    if (json_array_size(off) != 2 || !get_u64(json_array_get(off, 0), &e->begin) || !get_u64(json_array_get(off, 1), &e->end))
        return bn_fail(BITNET_E_FORMAT, "safetensors: tensor '%s': \"data_offsets\" must be [begin, end]", name);
    if (e->end < e->begin)
        return bn_fail(BITNET_E_FORMAT, "safetensors: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin",
                       name, e->begin, e->end);
    /* bytes = product(shape) * dtype size, checked */
    bitnet_tensor_info info;
    uint64_t bytes;
    memset(&info, 0, sizeof info);
    memcpy(info.name, name, strlen(name) + 1);
    info.dtype = e->dtype;
    info.rank = e->rank;
    memcpy(info.dims, e->dims, sizeof e->dims);
    bitnet_status st = bitnet_tensor_data_bytes(&info, &bytes);
    if (st) {
        bn_detail_prefix("safetensors");
        return st;
    }
    if (bytes != e->end - e->begin) {
        char sh[256];
        return bn_fail(BITNET_E_FORMAT, "safetensors: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                       " bytes but shape %s of %s needs %" PRIu64, name, e->begin, e->end, e->end - e->begin,
                       bitnet_shape_str(&info, sh, sizeof sh), dn, bytes);
    }
    e->name = strdup(name);
    if (!e->name) return bn_fail(BITNET_E_NOMEM, "safetensors: names");
    return BITNET_OK;
}

static int by_offset(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static bitnet_status parse_header(bitnet_st_reader *r, const char *text, size_t len)
{
    json_error_t jerr;
    const char *k;
    json_t *v;
    bitnet_status st = BITNET_OK;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root && (json_error_code(&jerr) == json_error_out_of_memory || !jerr.text[0]))
        return bn_fail(BITNET_E_NOMEM, "safetensors: out of memory reading the header"); /* not the file's fault */
    /* jansson's lexer drops a character when its buffer cannot grow and
     * parses on (seen in the fault campaign: "layers.0.weight" read as
     * "layers.0.weigh", exit 0), or reports a syntax error.  A second parse
     * that must give the same result catches a failed allocation in either. */
    json_error_t jerr2;
    json_t *again = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr2);
    if (!root && again) {
        json_decref(again);
        return bn_fail(BITNET_E_NOMEM, "safetensors: out of memory reading the header");
    }
    if (!root)
        return bn_fail(BITNET_E_FORMAT, "safetensors: header JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                       jerr.column);
    int same = again && json_equal(root, again);
    json_decref(again);
    if (!same) {
        json_decref(root);
        return bn_fail(BITNET_E_NOMEM, "safetensors: out of memory reading the header");
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return bn_fail(BITNET_E_FORMAT, "safetensors: header is not a JSON object");
    }
    size_t n = json_object_size(root);
    r->e = calloc(n ? n : 1, sizeof *r->e);
    if (!r->e) {
        json_decref(root);
        return bn_fail(BITNET_E_NOMEM, "safetensors: %zu header entries", n);
    }
    json_object_foreach(root, k, v) {
        if (strcmp(k, "__metadata__") == 0) st = parse_meta(r, v);
        else if ((st = parse_entry(k, v, &r->e[r->n])) == BITNET_OK) r->n++;
        if (st) break;
    }
    json_decref(root);
    if (st) return st;
    qsort(r->e, r->n, sizeof *r->e, by_offset);
    uint64_t at = 0;
    for (size_t i = 0; i < r->n; i++) {
        const st_entry *e = &r->e[i];
        if (e->begin < at)
            return bn_fail(BITNET_E_FORMAT, "safetensors: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                           "] overlap the previous tensor '%s', which ends at %" PRIu64,
                           e->name, e->begin, e->end, r->e[i - 1].name, at);
        if (e->begin > at)
            return bn_fail(BITNET_E_FORMAT, "safetensors: gap in the data: tensor '%s' begins at %" PRIu64
                           " but the previous data ends at %" PRIu64, e->name, e->begin, at);
        at = e->end;
    }
    r->data_size = at;
    return BITNET_OK;
}

bitnet_status bitnet_st_reader_create(bitnet_st_reader **out, FILE *f, const uint8_t *prefix, size_t prefix_len)
{
    uint8_t lenb[8];
    uint8_t *text = NULL;
    uint64_t got;
    bitnet_status st;
    if (!out || !f || (prefix_len && !prefix)) return bn_fail(BITNET_E_INVALID, "safetensors: no input");
    *out = NULL;
    bitnet_st_reader *r = calloc(1, sizeof *r);
    if (!r) return bn_fail(BITNET_E_NOMEM, "safetensors reader");
    if (bn_pfx_init(&r->in, f, prefix, prefix_len)) {
        free(r);
        return bn_fail(BITNET_E_INVALID, "safetensors: prefix too long");
    }
    size_t k = bn_pfx_read(&r->in, lenb, 8);
    if (k < 8) {
        st = ferror(f) ? bn_fail(BITNET_E_IO, "safetensors: read error")
                       : bn_fail(BITNET_E_TRUNCATED, "safetensors: %zu bytes, too short for the header length", k);
        goto fail;
    }
    uint64_t hlen = bn_ld64(lenb);
    if (hlen > BITNET_ST_MAX_HEADER) {
        st = bn_fail(BITNET_E_LIMIT, "safetensors: header length %" PRIu64 " exceeds %u bytes", hlen, BITNET_ST_MAX_HEADER);
        goto fail;
    }
    if (hlen < 2) {
        st = bn_fail(BITNET_E_FORMAT, "safetensors: header length %" PRIu64 " is too small for a JSON object", hlen);
        goto fail;
    }
    int64_t left = bn_file_remaining(f);
    if (left >= 0) left += (int64_t)(r->in.pre_len - r->in.pre_pos);
    if (left >= 0 && hlen > (uint64_t)left) {
        st = bn_fail(BITNET_E_TRUNCATED, "safetensors: header length %" PRIu64 " runs past the end of the file (%" PRId64
                     " bytes follow it)", hlen, left);
        goto fail;
    }
    if (bn_pfx_read_alloc(&r->in, hlen, &text, &got)) {
        st = bn_fail(BITNET_E_NOMEM, "safetensors: header of %" PRIu64 " bytes", hlen);
        goto fail;
    }
    if (got < hlen) {
        st = ferror(f) ? bn_fail(BITNET_E_IO, "safetensors: read error")
                       : bn_fail(BITNET_E_TRUNCATED, "safetensors: header length %" PRIu64 " runs past the end of the "
                                 "input (%" PRIu64 " bytes follow it)", hlen, got);
        goto fail;
    }
    if (text[0] != '{') {
        st = bn_fail(BITNET_E_FORMAT, "safetensors: header does not start with '{'");
        goto fail;
    }
    if ((st = parse_header(r, (const char *)text, (size_t)hlen))) goto fail;
    free(text);
    text = NULL;
    if (left >= 0) {
        uint64_t data_left = (uint64_t)left - hlen;
        if (r->data_size > data_left) {
            st = bn_fail(BITNET_E_TRUNCATED, "safetensors: the tensors need %" PRIu64 " data bytes, the file has %" PRIu64,
                         r->data_size, data_left);
            goto fail;
        }
        if (r->data_size < data_left) {
            st = bn_fail(BITNET_E_FORMAT, "safetensors: data_offsets do not cover the data: %" PRIu64
                         " bytes follow the last tensor", data_left - r->data_size);
            goto fail;
        }
    }
    *out = r;
    return BITNET_OK;
fail:
    free(text);
    bitnet_st_reader_free(r);
    return st;
}

bitnet_status bitnet_st_reader_next(bitnet_st_reader *r, bitnet_tensor *t)
{
    uint8_t *data;
    uint64_t got;
    if (!r || !t) return bn_fail(BITNET_E_INVALID, "safetensors: no reader");
    memset(t, 0, sizeof *t);
    if (r->err) return bn_fail(r->err, "safetensors: the reader failed earlier");
    if (r->next == r->n) {
        if (!r->at_end) {
            /* on a pipe this is where trailing bytes show up */
            uint8_t extra;
            if (bn_pfx_read(&r->in, &extra, 1) != 0) {
                r->err = BITNET_E_FORMAT;
                return bn_fail(BITNET_E_FORMAT, "safetensors: data_offsets do not cover the data: bytes follow the "
                               "last tensor at data offset %" PRIu64, r->data_size);
            }
            if (ferror(r->in.f)) return (r->err = bn_fail(BITNET_E_IO, "safetensors: read error"));
            r->at_end = 1;
        }
        return BITNET_END;
    }
    const st_entry *e = &r->e[r->next];
    uint64_t bytes = e->end - e->begin;
    if (bn_pfx_read_alloc(&r->in, bytes, &data, &got)) {
        r->err = BITNET_E_NOMEM;
        return bn_fail(BITNET_E_NOMEM, "safetensors: tensor '%s': cannot allocate %" PRIu64 " bytes", e->name, bytes);
    }
    if (got < bytes) {
        free(data);
        if (ferror(r->in.f)) return (r->err = bn_fail(BITNET_E_IO, "safetensors: tensor '%s': read error", e->name));
        r->err = BITNET_E_TRUNCATED;
        return bn_fail(BITNET_E_TRUNCATED, "safetensors: tensor '%s': input ends at data offset %" PRIu64
                       ", inside its data [%" PRIu64 ", %" PRIu64 ")", e->name, e->begin + got, e->begin, e->end);
    }
    memcpy(t->info.name, e->name, strlen(e->name) + 1);
    t->info.dtype = e->dtype;
    t->info.rank = e->rank;
    memcpy(t->info.dims, e->dims, sizeof e->dims);
    size_t es = bitnet_dtype_size(e->dtype);
    bn_from_le(data, (size_t)(bytes / es), es);
    t->data = data;
    r->next++;
    return BITNET_OK;
}

/* ---- writing ------------------------------------------------------------------ */

static bitnet_status build_header(json_t *root, const bitnet_tensor *const *ts, size_t n, const char *const *mk,
                                  const char *const *mv, size_t n_meta)
{
    uint64_t at = 0, bytes;
    bitnet_status st;
    if (n_meta) {
        json_t *m = json_object();
        if (!m || json_object_set_new(root, "__metadata__", m)) return bn_fail(BITNET_E_NOMEM, "safetensors header");
        for (size_t i = 0; i < n_meta; i++) {
            if (!mk[i] || !mv[i]) return bn_fail(BITNET_E_INVALID, "safetensors: NULL metadata key or value");
            if (json_object_get(m, mk[i])) return bn_fail(BITNET_E_INVALID, "safetensors: metadata key \"%s\" given twice", mk[i]);
            if (json_object_set_new(m, mk[i], json_string(mv[i])))
                return bn_fail(BITNET_E_INVALID, "safetensors: metadata \"%s\" is not valid UTF-8", mk[i]);
        }
    }
    for (size_t i = 0; i < n; i++) {
        const bitnet_tensor *t = ts[i];
        if (!t) return bn_fail(BITNET_E_INVALID, "safetensors: NULL tensor");
        if ((st = bn_check_plain_tensor(t, "safetensors"))) return st;
        if ((st = bitnet_tensor_data_bytes(&t->info, &bytes))) return st;
        if (bytes && !t->data) return bn_fail(BITNET_E_INVALID, "tensor '%s': no data", t->info.name);
        const char *dn = st_dtype_name(t->info.dtype);
        if (!dn) return bn_fail(BITNET_E_DTYPE, "tensor '%s': safetensors has no %s dtype", t->info.name, bitnet_dtype_name(t->info.dtype));
        if (strcmp(t->info.name, "__metadata__") == 0 || json_object_get(root, t->info.name))
            return bn_fail(BITNET_E_INVALID, "safetensors: tensor name '%s' %s", t->info.name,
                           strcmp(t->info.name, "__metadata__") == 0 ? "is reserved" : "given twice");
        json_t *e = json_object(), *shape = json_array(), *off = json_array();
        if (!e || !shape || !off) {
            json_decref(e);
            json_decref(shape);
            json_decref(off);
            return bn_fail(BITNET_E_NOMEM, "safetensors header");
        }
        json_object_set_new(e, "dtype", json_string(dn));
        for (uint32_t d = 0; d < t->info.rank; d++) json_array_append_new(shape, json_integer((json_int_t)t->info.dims[d]));
        json_object_set_new(e, "shape", shape);
        json_array_append_new(off, json_integer((json_int_t)at));
        if (bn_add_u64(at, bytes, &at) || at > INT64_MAX) {
            json_decref(off);
            json_decref(e);
            return bn_fail(BITNET_E_OVERFLOW, "safetensors: data too large");
        }
        json_array_append_new(off, json_integer((json_int_t)at));
        json_object_set_new(e, "data_offsets", off);
        if (json_object_set_new(root, t->info.name, e))
            return bn_fail(BITNET_E_INVALID, "safetensors: tensor name '%s' is not valid UTF-8", t->info.name);
    }
    return BITNET_OK;
}

bitnet_status bitnet_st_write(FILE *f, const bitnet_tensor *const *tensors, size_t n, const char *const *meta_keys,
                              const char *const *meta_values, size_t n_meta)
{
    bitnet_status st;
    char *text = NULL;
    if (!f || (n && !tensors) || (n_meta && (!meta_keys || !meta_values)))
        return bn_fail(BITNET_E_INVALID, "safetensors: no output or tensors");
    json_t *root = json_object();
    if (!root) return bn_fail(BITNET_E_NOMEM, "safetensors header");
    st = build_header(root, tensors, n, meta_keys, meta_values, n_meta);
    if (!st) {
        text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!text) st = bn_fail(BITNET_E_NOMEM, "safetensors header");
    }
    json_decref(root);
    if (st) return st;
    /* the reference writer pads the header with spaces to a multiple of 8 */
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    uint8_t lenb[8];
    bn_st64(lenb, padded);
    int ok = fwrite(lenb, 1, 8, f) == 8 && fwrite(text, 1, len, f) == len;
    for (size_t i = len; ok && i < padded; i++) ok = fputc(' ', f) != EOF;
    free(text);
    if (!ok) return bn_fail(BITNET_E_IO, "safetensors: write failed");
    for (size_t i = 0; i < n; i++) {
        uint64_t elems;
        if ((st = bitnet_tensor_elements(&tensors[i]->info, &elems))) return st;
        if ((st = bn_write_le(f, tensors[i]->data, elems, bitnet_dtype_size(tensors[i]->info.dtype)))) {
            bn_detail_prefix("safetensors: tensor '%s'", tensors[i]->info.name);
            return st;
        }
    }
    return BITNET_OK;
}
