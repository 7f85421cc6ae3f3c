/*
 * reader.c - the generic reader and writer: one interface over .bnt, .npy
 * safetensors and GGUF, the format told by magic bytes (never by file name).
 * The sniffed bytes are handed to the format's reader as a prefix, so pipes
 * work without rewinding.
 */
#include "bnt_format.h"
#include "gguf_internal.h"
#include "internal.h"
#include "internal_io.h"
#include "prefix_io.h"

#include <inttypes.h>
#include <stdlib.h>

static const uint8_t bnt_magic[8] = {0x89, 'B', 'N', 'T', '\r', '\n', 0x1a, '\n'};
static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
#define SNIFF_BYTES 9 /* safetensors: 8-byte length, then '{' */

static const char *const format_names[] = {
    [BITNET_FMT_AUTO] = "auto", [BITNET_FMT_BNT] = "bnt", [BITNET_FMT_NPY] = "npy",
    [BITNET_FMT_SAFETENSORS] = "safetensors", [BITNET_FMT_GGUF] = "gguf",
};

const char *bitnet_format_name(bitnet_format f)
{
    if ((unsigned)f >= sizeof format_names / sizeof format_names[0]) return NULL;
    return format_names[f];
}

bitnet_status bitnet_format_parse(const char *name, bitnet_format *out)
{
    if (!name || !out) return bn_fail(BITNET_E_INVALID, "no format name");
    for (unsigned i = 0; i < sizeof format_names / sizeof format_names[0]; i++)
        if (strcmp(name, format_names[i]) == 0) {
            *out = (bitnet_format)i;
            return BITNET_OK;
        }
    if (strcmp(name, "st") == 0) {
        *out = BITNET_FMT_SAFETENSORS;
        return BITNET_OK;
    }
    return bn_fail(BITNET_E_INVALID, "unknown format '%s' (bnt, npy, safetensors, gguf)", name);
}

bitnet_format bitnet_format_detect(const uint8_t *head, size_t n)
{
    if (!head) return BITNET_FMT_AUTO;
    if (n >= 8 && memcmp(head, bnt_magic, 8) == 0) return BITNET_FMT_BNT;
    if (n >= 6 && memcmp(head, npy_magic, 6) == 0) return BITNET_FMT_NPY;
    if (n >= 4 && memcmp(head, "GGUF", 4) == 0) return BITNET_FMT_GGUF;
    if (n >= 8) {
        uint64_t len = bn_ld64(head);
        if (len >= 2 && len <= BITNET_ST_MAX_HEADER && (n < 9 || head[8] == '{')) return BITNET_FMT_SAFETENSORS;
    }
    return BITNET_FMT_AUTO;
}

/* ---- reader ------------------------------------------------------------------- */

struct bitnet_reader {
    bitnet_format fmt;
    FILE *f;
    bitnet_bnt_reader *bnt;
    bitnet_st_reader *st;
    bitnet_gguf_reader *gguf;
    uint8_t head[SNIFF_BYTES];
    size_t head_len;
    int npy_state; /* 0 unread, 1 returned, 2 at end */
    uint64_t stored;
    bn_bnt_names names; /* the header's tensor names (has_tensor), built on first use */
    int names_built;
};

bitnet_status bitnet_reader_create(bitnet_reader **out, FILE *f, bitnet_format fmt)
{
    bitnet_status st = BITNET_OK;
    if (!out || !f) return bn_fail(BITNET_E_INVALID, "reader: no input");
    *out = NULL;
    if (!bitnet_format_name(fmt)) return bn_fail(BITNET_E_INVALID, "reader: unknown format code %d", (int)fmt);
    bitnet_reader *r = calloc(1, sizeof *r);
    if (!r) return bn_fail(BITNET_E_NOMEM, "reader");
    r->f = f;
    r->head_len = fread(r->head, 1, SNIFF_BYTES, f);
    if (r->head_len < SNIFF_BYTES && ferror(f)) {
        free(r);
        return bn_fail(BITNET_E_IO, "read error");
    }
    if (r->head_len == 0) {
        free(r);
        return bn_fail(BITNET_E_TRUNCATED, "empty input");
    }
    if (fmt == BITNET_FMT_AUTO) {
        fmt = bitnet_format_detect(r->head, r->head_len);
        if (fmt == BITNET_FMT_AUTO) {
            free(r);
            return bn_fail(BITNET_E_FORMAT, "unknown format: the first bytes are not those of .bnt, .npy, safetensors or GGUF");
        }
    }
    r->fmt = fmt;
    switch (fmt) {
    case BITNET_FMT_BNT: st = bn_bnt_reader_create_prefixed(&r->bnt, f, r->head, r->head_len); break;
    case BITNET_FMT_SAFETENSORS: st = bitnet_st_reader_create(&r->st, f, r->head, r->head_len); break;
    case BITNET_FMT_GGUF: st = bitnet_gguf_reader_create(&r->gguf, f, r->head, r->head_len); break;
    case BITNET_FMT_NPY: break; /* read whole at the first next() */
    default: st = bn_fail(BITNET_E_INVALID, "reader: bad format");
    }
    if (st) {
        free(r);
        return st;
    }
    *out = r;
    return BITNET_OK;
}

bitnet_format bitnet_reader_format(const bitnet_reader *r) { return r ? r->fmt : BITNET_FMT_AUTO; }

size_t bitnet_reader_meta_count(const bitnet_reader *r)
{
    if (!r) return 0;
    if (r->bnt) return bitnet_bnt_reader_meta_count(r->bnt);
    if (r->st) return bitnet_st_reader_meta_count(r->st);
    if (r->gguf) return bitnet_gguf_reader_meta_count(r->gguf);
    return 0;
}

const char *bitnet_reader_meta_key(const bitnet_reader *r, size_t i)
{
    if (!r) return NULL;
    if (r->bnt) return bitnet_bnt_reader_meta_key(r->bnt, i);
    if (r->st) return bitnet_st_reader_meta_key(r->st, i);
    if (r->gguf) return bn_gguf_reader_prefixed_key(r->gguf, i);
    return NULL;
}

const char *bitnet_reader_meta_value(const bitnet_reader *r, size_t i)
{
    if (!r) return NULL;
    if (r->bnt) return bitnet_bnt_reader_meta_value(r->bnt, i);
    if (r->st) return bitnet_st_reader_meta_value(r->st, i);
    if (r->gguf) return bitnet_gguf_reader_meta_value(r->gguf, i);
    return NULL;
}

static bitnet_status raw_bytes(const bitnet_tensor *t, uint64_t *out)
{
    uint64_t d, s;
    bitnet_status st;
    if ((st = bitnet_tensor_data_bytes(&t->info, &d)) || (st = bitnet_tensor_n_scales(&t->info, &s))) return st;
    *out = d + s * 4;
    return BITNET_OK;
}

static bitnet_status npy_next(bitnet_reader *r, bitnet_tensor *t)
{
    if (r->npy_state == 0) {
        bitnet_status st = bitnet_npy_read(r->f, r->head, r->head_len, t);
        if (st) return st;
        r->npy_state = 1;
        return raw_bytes(t, &r->stored);
    }
    if (r->npy_state == 1) {
        /* a .npy file ends with its data: anything more means a damaged or
         * concatenated stream */
        if (fgetc(r->f) != EOF) return bn_fail(BITNET_E_FORMAT, "npy: trailing bytes after the array data");
        if (ferror(r->f)) return bn_fail(BITNET_E_IO, "npy: read error");
        r->npy_state = 2;
    }
    return BITNET_END;
}

bitnet_status bitnet_reader_next(bitnet_reader *r, bitnet_tensor *t)
{
    bitnet_status st;
    bitnet_tensor_info info;
    if (!r || !t) return bn_fail(BITNET_E_INVALID, "reader: NULL argument");
    memset(t, 0, sizeof *t);
    r->stored = 0;
    switch (r->fmt) {
    case BITNET_FMT_NPY: return npy_next(r, t);
    case BITNET_FMT_SAFETENSORS:
        if ((st = bitnet_st_reader_next(r->st, t))) return st;
        return raw_bytes(t, &r->stored);
    case BITNET_FMT_GGUF:
        if ((st = bitnet_gguf_reader_next(r->gguf, t))) return st;
        return raw_bytes(t, &r->stored);
    case BITNET_FMT_BNT:
        if ((st = bitnet_bnt_reader_next(r->bnt, &info))) return st;
        if ((st = bitnet_bnt_reader_load(r->bnt, t))) return st;
        r->stored = bitnet_bnt_reader_stored_bytes(r->bnt);
        return BITNET_OK;
    default: return bn_fail(BITNET_E_INVALID, "reader: bad format");
    }
}

bitnet_status bitnet_reader_find(bitnet_reader *r, const char *name, bitnet_tensor *t)
{
    bitnet_status st;
    if (!r || !name || !t) return bn_fail(BITNET_E_INVALID, "reader: NULL argument");
    memset(t, 0, sizeof *t);
    if (r->fmt == BITNET_FMT_BNT) {
        bitnet_tensor_info info;
        st = bitnet_bnt_reader_seek(r->bnt, name, &info);
        if (st == BITNET_OK) {
            if ((st = bitnet_bnt_reader_load(r->bnt, t))) return st;
            r->stored = bitnet_bnt_reader_stored_bytes(r->bnt);
            return BITNET_OK;
        }
        if (st != BITNET_E_UNSUPPORTED) return st;
        /* not seekable or no index: scan */
    }
    if (r->fmt == BITNET_FMT_GGUF) {
        st = bitnet_gguf_reader_find(r->gguf, name, t);
        if (st == BITNET_OK) return raw_bytes(t, &r->stored);
        if (st != BITNET_E_UNSUPPORTED) return st;
    }
    for (;;) {
        st = bitnet_reader_next(r, t);
        if (st == BITNET_END) return bn_fail(BITNET_E_NOT_FOUND, "no tensor named '%s'", name);
        if (st) return st;
        if (strcmp(t->info.name, name) == 0) return BITNET_OK;
        bitnet_tensor_release(t);
    }
}

int bitnet_reader_has_tensor(bitnet_reader *r, const char *name)
{
    if (!r || !name || (!r->st && !r->gguf)) return -1;
    if (!r->names_built) {
        size_t n = r->st ? bitnet_st_reader_tensor_count(r->st) : bitnet_gguf_reader_tensor_count(r->gguf);
        for (size_t i = 0; i < n; i++) {
            const char *s = r->st ? bitnet_st_reader_tensor_name(r->st, i) : bitnet_gguf_reader_tensor(r->gguf, i)->name;
            if (bn_bnt_names_add(&r->names, s, strlen(s), 0) < 0) { /* out of memory: say "not known" */
                bn_bnt_names_free(&r->names);
                return -1;
            }
        }
        r->names_built = 1;
    }
    return bn_bnt_names_find(&r->names, name, strlen(name)) != SIZE_MAX;
}

uint64_t bitnet_reader_stored_bytes(const bitnet_reader *r) { return r ? r->stored : 0; }

bitnet_gguf_reader *bitnet_reader_gguf(bitnet_reader *r) { return r ? r->gguf : NULL; }

void bitnet_reader_free(bitnet_reader *r)
{
    if (!r) return;
    bitnet_bnt_reader_free(r->bnt);
    bitnet_st_reader_free(r->st);
    bitnet_gguf_reader_free(r->gguf);
    bn_bnt_names_free(&r->names);
    free(r);
}

/* ---- writer ------------------------------------------------------------------- */

struct bitnet_writer {
    bitnet_format fmt;
    FILE *f;
    bitnet_bnt_writer *bnt;
    bn_gguf_writer *gguf;
    size_t n_put;
    bitnet_tensor *held; /* safetensors: copies, written at finish */
    size_t cap;
    char **meta_keys, **meta_values;
    size_t n_meta;
    int finished;
};

bitnet_status bitnet_writer_create(bitnet_writer **out, FILE *f, bitnet_format fmt, const bitnet_bnt_writer_opts *bnt_opts)
{
    if (!out || !f) return bn_fail(BITNET_E_INVALID, "writer: no output");
    *out = NULL;
    if (fmt == BITNET_FMT_AUTO) fmt = BITNET_FMT_BNT;
    if (!bitnet_format_name(fmt)) return bn_fail(BITNET_E_INVALID, "writer: unknown format code %d", (int)fmt);
    bitnet_writer *w = calloc(1, sizeof *w);
    if (!w) return bn_fail(BITNET_E_NOMEM, "writer");
    w->fmt = fmt;
    w->f = f;
    if (fmt == BITNET_FMT_BNT || fmt == BITNET_FMT_GGUF) {
        bitnet_status st = fmt == BITNET_FMT_BNT ? bitnet_bnt_writer_create(&w->bnt, f, bnt_opts)
                                                 : bn_gguf_writer_create(&w->gguf, f);
        if (st) {
            free(w);
            return st;
        }
    }
    *out = w;
    return BITNET_OK;
}

bitnet_status bitnet_writer_meta(bitnet_writer *w, const char *key, const char *value)
{
    if (!w || !key || !value) return bn_fail(BITNET_E_INVALID, "writer: NULL metadata");
    switch (w->fmt) {
    case BITNET_FMT_BNT: return bitnet_bnt_writer_meta(w->bnt, key, value);
    case BITNET_FMT_GGUF: return bn_gguf_writer_meta(w->gguf, key, value);
    case BITNET_FMT_NPY: return BITNET_OK; /* .npy has no place for metadata */
    default: break;
    }
    for (size_t i = 0; i < w->n_meta; i++)
        if (strcmp(w->meta_keys[i], key) == 0) {
            char *v = strdup(value);
            if (!v) return bn_fail(BITNET_E_NOMEM, "writer metadata");
            free(w->meta_values[i]);
            w->meta_values[i] = v;
            return BITNET_OK;
        }
    char **k = realloc(w->meta_keys, (w->n_meta + 1) * sizeof *k);
    if (!k) return bn_fail(BITNET_E_NOMEM, "writer metadata");
    w->meta_keys = k;
    char **v = realloc(w->meta_values, (w->n_meta + 1) * sizeof *v);
    if (!v) return bn_fail(BITNET_E_NOMEM, "writer metadata");
    w->meta_values = v;
    k[w->n_meta] = strdup(key);
    v[w->n_meta] = strdup(value);
    if (!k[w->n_meta] || !v[w->n_meta]) {
        free(k[w->n_meta]);
        free(v[w->n_meta]);
        return bn_fail(BITNET_E_NOMEM, "writer metadata");
    }
    w->n_meta++;
    return BITNET_OK;
}

static bitnet_status hold_copy(bitnet_writer *w, const bitnet_tensor *t)
{
    uint64_t bytes;
    size_t nb;
    bitnet_status st;
    if ((st = bitnet_tensor_data_bytes(&t->info, &bytes))) return st;
    if (bn_u64_to_size(bytes, &nb)) return bn_fail(BITNET_E_OVERFLOW, "tensor '%s' does not fit in memory", t->info.name);
    if (nb && !t->data) return bn_fail(BITNET_E_INVALID, "tensor '%s': no data", t->info.name);
    for (size_t i = 0; i < w->n_put; i++)
        if (strcmp(w->held[i].info.name, t->info.name) == 0)
            return bn_fail(BITNET_E_INVALID, "tensor '%s' written twice", t->info.name);
    if (w->n_put == w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 16;
        bitnet_tensor *h = realloc(w->held, ncap * sizeof *h);
        if (!h) return bn_fail(BITNET_E_NOMEM, "writer");
        w->held = h;
        w->cap = ncap;
    }
    bitnet_tensor *c = &w->held[w->n_put];
    memset(c, 0, sizeof *c);
    c->info = t->info;
    c->data = malloc(nb ? nb : 1);
    if (!c->data) return bn_fail(BITNET_E_NOMEM, "tensor '%s': %zu bytes", t->info.name, nb);
    if (nb) memcpy(c->data, t->data, nb);
    w->n_put++;
    return BITNET_OK;
}

bitnet_status bitnet_writer_put(bitnet_writer *w, const bitnet_tensor *t)
{
    bitnet_status st;
    if (!w || !t) return bn_fail(BITNET_E_INVALID, "writer: NULL argument");
    if (w->finished) return bn_fail(BITNET_E_INVALID, "writer: already finished");
    switch (w->fmt) {
    case BITNET_FMT_BNT:
        if ((st = bitnet_bnt_writer_put(w->bnt, t))) return st;
        w->n_put++;
        return BITNET_OK;
    case BITNET_FMT_NPY:
        if (w->n_put)
            return bn_fail(BITNET_E_INVALID, "a .npy file holds exactly one tensor (second: '%s'); select one", t->info.name);
        if ((st = bitnet_npy_write(w->f, t))) return st;
        w->n_put++;
        return BITNET_OK;
    case BITNET_FMT_SAFETENSORS:
        if ((st = bn_check_plain_tensor(t, "safetensors"))) return st;
        return hold_copy(w, t);
    case BITNET_FMT_GGUF:
        if ((st = bn_gguf_writer_put(w->gguf, t))) return st;
        w->n_put++;
        return BITNET_OK;
    default: return bn_fail(BITNET_E_INVALID, "writer: bad format");
    }
}

bitnet_status bitnet_writer_finish(bitnet_writer *w)
{
    bitnet_status st = BITNET_OK;
    if (!w) return bn_fail(BITNET_E_INVALID, "writer: NULL");
    if (w->finished) return bn_fail(BITNET_E_INVALID, "writer: already finished");
    w->finished = 1;
    switch (w->fmt) {
    case BITNET_FMT_BNT: st = bitnet_bnt_writer_finish(w->bnt); break;
    case BITNET_FMT_GGUF: st = bn_gguf_writer_finish(w->gguf); break;
    case BITNET_FMT_NPY:
        if (!w->n_put) st = bn_fail(BITNET_E_INVALID, "a .npy file holds exactly one tensor; none was written");
        break;
    case BITNET_FMT_SAFETENSORS: {
        const bitnet_tensor **list = malloc((w->n_put ? w->n_put : 1) * sizeof *list);
        if (!list) return bn_fail(BITNET_E_NOMEM, "writer");
        for (size_t i = 0; i < w->n_put; i++) list[i] = &w->held[i];
        st = bitnet_st_write(w->f, list, w->n_put, (const char *const *)w->meta_keys,
                             (const char *const *)w->meta_values, w->n_meta);
        free(list);
        break;
    }
    default: st = bn_fail(BITNET_E_INVALID, "writer: bad format");
    }
    if (st) return st;
    if (fflush(w->f) != 0 || ferror(w->f)) return bn_fail(BITNET_E_IO, "write failed");
    return BITNET_OK;
}

void bitnet_writer_free(bitnet_writer *w)
{
    if (!w) return;
    bitnet_bnt_writer_free(w->bnt);
    bn_gguf_writer_free(w->gguf);
    if (w->fmt == BITNET_FMT_SAFETENSORS)
        for (size_t i = 0; i < w->n_put; i++) bitnet_tensor_release(&w->held[i]);
    free(w->held);
    for (size_t i = 0; i < w->n_meta; i++) {
        free(w->meta_keys[i]);
        free(w->meta_values[i]);
    }
    free(w->meta_keys);
    free(w->meta_values);
    free(w);
}
