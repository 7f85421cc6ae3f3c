/*
 * bnt_write.c - the .bnt writer: one pass, no seeking, so it can write to a
 * pipe.  Tensor data is cut into chunks of chunk_size bytes that are deflated
 * independently; with threads > 1 a batch of chunks is compressed in parallel
 * and written in order, so the bytes do not depend on the thread count.
 */
#include "bnt_format.h"

#include <pthread.h>
#include <stdlib.h>
#include <zlib.h>

typedef struct {
    const uint8_t *raw;  /* uncompressed chunk (staging slot or caller memory) */
    uint32_t raw_len;
    int from_caller;     /* raw points into the caller's buffer */
    uint8_t *out;        /* this slot's deflate output */
    uint32_t stored_len; /* == raw_len: stored raw */
    uint32_t raw_crc, stored_crc;
    int zerr;
} chunk_job;

struct bitnet_bnt_writer {
    FILE *f;
    uint64_t off;          /* bytes written so far (pipes cannot ftell) */
    int level;             /* 0..9 */
    uint32_t chunk;
    int threads;
    int no_index;
    bitnet_status err;     /* sticky once the output is inconsistent */
    int header_done, in_tensor, finished;

    uint8_t *meta;         /* u32 count, then entries */
    size_t meta_len, meta_cap;
    uint32_t meta_count;
    bn_bnt_names meta_keys;

    bn_bnt_names names;    /* tensor name -> record offset */

    char cur[BITNET_MAX_NAME + 1];
    uint64_t total;        /* bytes of the current tensor's stream */
    uint64_t done;         /* of which assigned to complete chunks */
    size_t fill;           /* bytes in the staging slot of the next job */

    chunk_job *jobs;       /* one batch: `threads` chunks */
    int njobs;
    uint8_t *stage;        /* threads * chunk bytes */
    uint8_t *outbuf;       /* threads * chunk bytes (level > 0) */
    z_stream *zs;          /* one per thread (level > 0) */
    int nzs;
};

static bitnet_status sticky(bitnet_bnt_writer *w, bitnet_status st)
{
    w->err = st;
    return st;
}

static bitnet_status put_bytes(bitnet_bnt_writer *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->f) != n)
        return sticky(w, bn_fail(BITNET_E_IO, ".bnt: write failed at byte %llu", (unsigned long long)w->off));
    w->off += n;
    return BITNET_OK;
}

bitnet_status bitnet_bnt_writer_create(bitnet_bnt_writer **wp, FILE *f, const bitnet_bnt_writer_opts *opts)
{
    bitnet_bnt_writer_opts o = {-1, 0, 0, 0};
    bitnet_bnt_writer *w;
    if (!wp || !f) return bn_fail(BITNET_E_INVALID, "bnt writer: NULL argument");
    *wp = NULL;
    if (opts) o = *opts;
    if (o.level < -1 || o.level > 9) return bn_fail(BITNET_E_INVALID, "bnt writer: level %d not in -1..9", o.level);
    if (o.level == -1) o.level = 6;
    if (o.chunk_size == 0) o.chunk_size = BITNET_BNT_DEFAULT_CHUNK;
    if (o.chunk_size < BN_BNT_MIN_CHUNK || o.chunk_size > BN_BNT_MAX_CHUNK)
        return bn_fail(BITNET_E_INVALID, "bnt writer: chunk size %u not in [%u, %u]", o.chunk_size,
                       BN_BNT_MIN_CHUNK, BN_BNT_MAX_CHUNK);
    if (o.threads < 0) return bn_fail(BITNET_E_INVALID, "bnt writer: negative thread count");
    if (o.threads == 0 || o.level == 0) o.threads = 1;
    if (o.threads > BN_BNT_MAX_THREADS) o.threads = BN_BNT_MAX_THREADS;

    w = calloc(1, sizeof *w);
    if (!w) return bn_fail(BITNET_E_NOMEM, "bnt writer: out of memory");
    w->f = f;
    w->level = o.level;
    w->chunk = o.chunk_size;
    w->threads = o.threads;
    w->no_index = o.no_index != 0;
    w->meta_cap = 256;
    w->meta = malloc(w->meta_cap);
    w->meta_len = 4;
    w->jobs = calloc((size_t)w->threads, sizeof *w->jobs);
    w->stage = malloc((size_t)w->threads * w->chunk);
    if (w->level > 0) {
        w->outbuf = malloc((size_t)w->threads * w->chunk);
        w->zs = calloc((size_t)w->threads, sizeof *w->zs);
    }
    if (!w->meta || !w->jobs || !w->stage || (w->level > 0 && (!w->outbuf || !w->zs))) {
        bitnet_bnt_writer_free(w);
        return bn_fail(BITNET_E_NOMEM, "bnt writer: cannot allocate %d chunk buffers of %u bytes", o.threads, o.chunk_size);
    }
    for (int i = 0; w->level > 0 && i < w->threads; i++) {
        if (deflateInit2(&w->zs[i], w->level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            bitnet_bnt_writer_free(w);
            return bn_fail(BITNET_E_NOMEM, "bnt writer: deflateInit2 failed");
        }
        w->nzs = i + 1;
    }
    *wp = w;
    return BITNET_OK;
}

static bitnet_status usable(bitnet_bnt_writer *w, const char *what)
{
    if (!w) return bn_fail(BITNET_E_INVALID, "bnt writer: NULL writer");
    if (w->err) return bn_fail(BITNET_E_INVALID, "bnt writer: %s after an earlier failure", what);
    if (w->finished) return bn_fail(BITNET_E_INVALID, "bnt writer: %s after finish", what);
    return BITNET_OK;
}

bitnet_status bitnet_bnt_writer_meta(bitnet_bnt_writer *w, const char *key, const char *value)
{
    bitnet_status st = usable(w, "meta");
    size_t kl, vl, need;
    if (st) return st;
    if (!key || !value) return bn_fail(BITNET_E_INVALID, "bnt writer: NULL metadata key or value");
    if (w->header_done) return bn_fail(BITNET_E_INVALID, "bnt writer: metadata '%s' after the first tensor", key);
    kl = strlen(key);
    vl = strlen(value);
    if (kl == 0) return bn_fail(BITNET_E_INVALID, "bnt writer: empty metadata key");
    if (!bn_bnt_utf8_ok((const uint8_t *)key, kl) || !bn_bnt_utf8_ok((const uint8_t *)value, vl))
        return bn_fail(BITNET_E_INVALID, "bnt writer: metadata '%s' is not valid UTF-8", key);
    if (kl > BITNET_BNT_MAX_META || vl > BITNET_BNT_MAX_META || (need = w->meta_len + 8 + kl + vl) > BITNET_BNT_MAX_META)
        return bn_fail(BITNET_E_LIMIT, "bnt writer: metadata exceeds %u bytes", BITNET_BNT_MAX_META);
    if (need > w->meta_cap) {
        size_t cap = w->meta_cap;
        while (cap < need) cap *= 2;
        uint8_t *p = realloc(w->meta, cap);
        if (!p) return bn_fail(BITNET_E_NOMEM, "bnt writer: out of memory for metadata");
        w->meta = p;
        w->meta_cap = cap;
    }
    switch (bn_bnt_names_add(&w->meta_keys, key, kl, 0)) {
    case 1: return bn_fail(BITNET_E_INVALID, "bnt writer: duplicate metadata key '%s'", key);
    case -1: return bn_fail(BITNET_E_NOMEM, "bnt writer: out of memory for metadata");
    }
    uint8_t *p = w->meta + w->meta_len;
    bn_st32(p, (uint32_t)kl);
    memcpy(p + 4, key, kl);
    bn_st32(p + 4 + kl, (uint32_t)vl);
    memcpy(p + 8 + kl, value, vl);
    w->meta_len = need;
    w->meta_count++;
    return BITNET_OK;
}

static bitnet_status write_header(bitnet_bnt_writer *w)
{
    uint8_t h[BN_BNT_FIXED_HEADER], c[4];
    uint32_t crc;
    bitnet_status st;
    if (w->header_done) return BITNET_OK;
    memcpy(h, BN_BNT_MAGIC, 8);
    bn_st16(h + 8, BITNET_BNT_VERSION);
    bn_st16(h + 10, BN_BNT_MINOR);
    bn_st32(h + 12, 0);
    bn_st32(h + 16, w->chunk);
    bn_st32(h + 20, (uint32_t)w->meta_len);
    bn_st32(w->meta, w->meta_count);
    crc = (uint32_t)crc32_z(0, h, sizeof h);
    crc = (uint32_t)crc32_z(crc, w->meta, w->meta_len);
    bn_st32(c, crc);
    if ((st = put_bytes(w, h, sizeof h)) || (st = put_bytes(w, w->meta, w->meta_len)) || (st = put_bytes(w, c, 4)))
        return st;
    w->header_done = 1;
    return BITNET_OK;
}

bitnet_status bitnet_bnt_writer_begin(bitnet_bnt_writer *w, const bitnet_tensor_info *info)
{
    bitnet_status st = usable(w, "begin");
    uint64_t payload, nscales, total;
    uint8_t h[8 + BN_BNT_TENSOR_FIXED + BITNET_MAX_NAME + 8 * BITNET_MAX_RANK + 4], *p;
    size_t nl, hl;
    if (st) return st;
    if (!info) return bn_fail(BITNET_E_INVALID, "bnt writer: NULL tensor info");
    if (w->in_tensor) return bn_fail(BITNET_E_INVALID, "bnt writer: begin of '%s' before end of '%s'", info->name, w->cur);
    if ((st = bitnet_tensor_info_check(info))) return st;
    if ((st = bitnet_tensor_data_bytes(info, &payload)) || (st = bitnet_tensor_n_scales(info, &nscales))) return st;
    if (bn_mul_u64(nscales, 4, &total) || bn_add_u64(total, payload, &total))
        return bn_fail(BITNET_E_OVERFLOW, "tensor '%s': size overflows", info->name);
    nl = strlen(info->name);
    if (!bn_bnt_utf8_ok((const uint8_t *)info->name, nl))
        return bn_fail(BITNET_E_INVALID, "tensor '%s': name is not valid UTF-8", info->name);
    if (w->names.n >= BN_BNT_MAX_TENSORS)
        return bn_fail(BITNET_E_LIMIT, "tensor '%s': more than %u tensors in one file", info->name, BN_BNT_MAX_TENSORS);
    if (bn_bnt_names_find(&w->names, info->name, nl) != SIZE_MAX)
        return bn_fail(BITNET_E_INVALID, "tensor '%s': duplicate name", info->name);
    if ((st = write_header(w))) return st;
    if (bn_bnt_names_add(&w->names, info->name, nl, w->off) < 0)
        return bn_fail(BITNET_E_NOMEM, "tensor '%s': out of memory for the index", info->name);

    hl = bn_bnt_tensor_header_len(nl, info->rank);
    memcpy(h, BN_BNT_TAG_TENSOR, 4);
    bn_st32(h + 4, (uint32_t)hl);
    p = h + 8;
    bn_st16(p, (uint16_t)nl);
    memcpy(p + 2, info->name, nl);
    p += 2 + nl;
    p[0] = (uint8_t)info->dtype;
    p[1] = (uint8_t)info->rank;
    p[2] = (uint8_t)info->scale_kind;
    p[3] = w->level ? BN_BNT_COMP_DEFLATE : BN_BNT_COMP_NONE;
    bn_st32(p + 4, info->group);
    p += 8;
    for (uint32_t i = 0; i < info->rank; i++, p += 8) bn_st64(p, info->dims[i]);
    bn_st64(p, payload);
    bn_st64(p + 8, nscales);
    p += 16;
    bn_st32(p, (uint32_t)crc32_z(0, h, (size_t)(p - h)));
    if ((st = put_bytes(w, h, (size_t)(p - h) + 4))) return st;

    memcpy(w->cur, info->name, nl + 1);
    w->total = total;
    w->done = 0;
    w->fill = 0;
    w->njobs = 0;
    w->in_tensor = 1;
    return BITNET_OK;
}

static void compress_job(chunk_job *j, z_stream *z)
{
    j->raw_crc = (uint32_t)crc32_z(0, j->raw, j->raw_len);
    j->stored_len = j->raw_len;
    j->stored_crc = j->raw_crc;
    j->zerr = 0;
    if (!z) return;
    if (deflateReset(z) != Z_OK) {
        j->zerr = 1;
        return;
    }
    /* Output room of raw_len - 1: if deflate does not shrink the chunk it
     * cannot finish, and the chunk is stored raw. */
    z->next_in = (Bytef *)(uintptr_t)j->raw;
    z->avail_in = j->raw_len;
    z->next_out = j->out;
    z->avail_out = j->raw_len - 1;
    int rc = deflate(z, Z_FINISH);
    if (rc == Z_STREAM_END) {
        j->stored_len = (uint32_t)z->total_out;
        j->stored_crc = (uint32_t)crc32_z(0, j->out, j->stored_len);
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        j->zerr = 1;
    }
}

typedef struct {
    chunk_job *jobs;
    int first, step, n;
    z_stream *z;
} worker_arg;

static void *worker(void *arg)
{
    worker_arg *a = arg;
    for (int i = a->first; i < a->n; i += a->step) compress_job(&a->jobs[i], a->z);
    return NULL;
}

/* Compresses the queued chunks (in parallel when there are threads) and
 * writes them in order. */
static bitnet_status flush_batch(bitnet_bnt_writer *w)
{
    int n = w->njobs, nt = w->threads < n ? w->threads : n, started = 0;
    pthread_t tid[BN_BNT_MAX_THREADS];
    worker_arg args[BN_BNT_MAX_THREADS];
    bitnet_status st;
    if (n == 0) return BITNET_OK;
    for (int t = 0; t < nt; t++)
        args[t] = (worker_arg){w->jobs, t, nt, n, w->level ? &w->zs[t] : NULL};
    for (int t = 1; t < nt; t++) {
        if (pthread_create(&tid[t], NULL, worker, &args[t]) != 0) break;
        started = t;
    }
    if (started + 1 < nt) { /* could not start them all: do the rest here */
        for (int t = started + 1; t < nt; t++) worker(&args[t]);
    }
    worker(&args[0]);
    for (int t = 1; t <= started; t++) pthread_join(tid[t], NULL);

    for (int i = 0; i < n; i++) {
        chunk_job *j = &w->jobs[i];
        uint8_t h[BN_BNT_CHUNK_HEADER];
        if (j->zerr)
            return sticky(w, bn_fail(BITNET_E_INVALID, "tensor '%s': deflate failed", w->cur));
        bn_st32(h, j->raw_len);
        bn_st32(h + 4, j->stored_len);
        bn_st32(h + 8, j->raw_crc);
        bn_st32(h + 12, j->stored_crc);
        bn_st32(h + 16, (uint32_t)crc32_z(0, h, 16));
        if ((st = put_bytes(w, h, sizeof h)) ||
            (st = put_bytes(w, j->stored_len < j->raw_len ? j->out : j->raw, j->stored_len)))
            return st;
    }
    w->njobs = 0;
    return BITNET_OK;
}

static void queue_job(bitnet_bnt_writer *w, const uint8_t *raw, uint32_t len, int from_caller)
{
    chunk_job *j = &w->jobs[w->njobs];
    j->raw = raw;
    j->raw_len = len;
    j->from_caller = from_caller;
    j->out = w->outbuf ? w->outbuf + (size_t)w->njobs * w->chunk : NULL;
    w->njobs++;
    w->done += len;
}

bitnet_status bitnet_bnt_writer_write(bitnet_bnt_writer *w, const void *buf, size_t n)
{
    bitnet_status st = usable(w, "write");
    const uint8_t *p = buf;
    int caller_refs = 0;
    if (st) return st;
    if (!w->in_tensor) return bn_fail(BITNET_E_INVALID, "bnt writer: write outside begin/end");
    if (n && !buf) return bn_fail(BITNET_E_INVALID, "bnt writer: NULL buffer");
    if ((uint64_t)n > w->total - w->done - w->fill)
        return sticky(w, bn_fail(BITNET_E_INVALID, "tensor '%s': more than the %llu bytes of its payload and scales",
                                 w->cur, (unsigned long long)w->total));
    while (n) {
        uint64_t left = w->total - w->done;
        uint32_t clen = left < w->chunk ? (uint32_t)left : w->chunk;
        if (w->fill == 0 && n >= clen) {
            queue_job(w, p, clen, 1); /* a whole chunk in the caller's buffer: no copy */
            caller_refs = 1;
            p += clen;
            n -= clen;
        } else {
            uint8_t *slot = w->stage + (size_t)w->njobs * w->chunk;
            size_t k = clen - w->fill < n ? clen - w->fill : n;
            memcpy(slot + w->fill, p, k);
            w->fill += k;
            p += k;
            n -= k;
            if (w->fill == clen) {
                w->fill = 0;
                queue_job(w, slot, clen, 0);
            }
        }
        if (w->njobs == w->threads) {
            if ((st = flush_batch(w))) return st;
            caller_refs = 0;
        }
    }
    /* queued jobs must not outlive the caller's buffer */
    if (caller_refs && w->fill == 0) return flush_batch(w);
    if (caller_refs) { /* a partial chunk sits in the staging slot after them: move it to slot 0 */
        const uint8_t *slot = w->stage + (size_t)w->njobs * w->chunk;
        if ((st = flush_batch(w))) return st;
        memmove(w->stage, slot, w->fill);
    }
    return BITNET_OK;
}

bitnet_status bitnet_bnt_writer_end(bitnet_bnt_writer *w)
{
    bitnet_status st = usable(w, "end");
    if (st) return st;
    if (!w->in_tensor) return bn_fail(BITNET_E_INVALID, "bnt writer: end without begin");
    if (w->done != w->total)
        return sticky(w, bn_fail(BITNET_E_INVALID, "tensor '%s': %llu of %llu bytes written", w->cur,
                                 (unsigned long long)(w->done + w->fill), (unsigned long long)w->total));
    if ((st = flush_batch(w))) return st;
    w->in_tensor = 0;
    return BITNET_OK;
}

/* Writes n elements of `size` bytes, little-endian whatever the host. */
static bitnet_status write_le(bitnet_bnt_writer *w, const void *p, size_t n, size_t size)
{
    uint8_t tmp[4096];
    bitnet_status st;
    if (bn_host_is_le() || size < 2) return bitnet_bnt_writer_write(w, p, n * size);
    for (size_t i = 0, per = sizeof tmp / size; i < n; i += per) {
        size_t k = n - i < per ? n - i : per;
        memcpy(tmp, (const uint8_t *)p + i * size, k * size);
        bn_to_le(tmp, k, size);
        if ((st = bitnet_bnt_writer_write(w, tmp, k * size))) return st;
    }
    return BITNET_OK;
}

bitnet_status bitnet_bnt_writer_put(bitnet_bnt_writer *w, const bitnet_tensor *t)
{
    uint64_t payload, ns;
    size_t nb, es;
    bitnet_status st;
    if (!t) return bn_fail(BITNET_E_INVALID, "bnt writer: NULL tensor");
    if ((st = bitnet_bnt_writer_begin(w, &t->info))) return st;
    if ((st = bitnet_tensor_data_bytes(&t->info, &payload)) || (st = bitnet_tensor_n_scales(&t->info, &ns)))
        return sticky(w, st);
    if (bn_u64_to_size(payload, &nb) || ns > SIZE_MAX / 4)
        return sticky(w, bn_fail(BITNET_E_OVERFLOW, "tensor '%s' does not fit in memory", t->info.name));
    if ((payload && !t->data) || (ns && !t->scales))
        return sticky(w, bn_fail(BITNET_E_INVALID, "tensor '%s': NULL data or scales", t->info.name));
    es = bitnet_dtype_size(t->info.dtype);
    if (es < 2) es = 1; /* bytes and packed ternary codes */
    if ((st = write_le(w, t->data, nb / es, es)) || (st = write_le(w, t->scales, (size_t)ns, 4))) return st;
    return bitnet_bnt_writer_end(w);
}

bitnet_status bitnet_bnt_writer_finish(bitnet_bnt_writer *w)
{
    bitnet_status st = usable(w, "finish");
    uint8_t b[BN_BNT_TRAILER];
    uint64_t index_off = 0;
    if (st) return st;
    if (w->in_tensor) return bn_fail(BITNET_E_INVALID, "bnt writer: finish before end of '%s'", w->cur);
    if ((st = write_header(w))) return st;
    if (!w->no_index) {
        uLong crc;
        index_off = w->off;
        memcpy(b, BN_BNT_TAG_INDEX, 4);
        bn_st64(b + 4, w->names.n);
        crc = crc32_z(0, b, 12);
        if ((st = put_bytes(w, b, 12))) return st;
        for (size_t i = 0; i < w->names.n; i++) {
            size_t nl = strlen(w->names.name[i]);
            bn_st16(b, (uint16_t)nl);
            bn_st64(b + 2, w->names.off[i]);
            crc = crc32_z(crc, b, 2);
            crc = crc32_z(crc, (const uint8_t *)w->names.name[i], nl);
            crc = crc32_z(crc, b + 2, 8);
            if ((st = put_bytes(w, b, 2)) || (st = put_bytes(w, w->names.name[i], nl)) || (st = put_bytes(w, b + 2, 8)))
                return st;
        }
        bn_st32(b, (uint32_t)crc);
        if ((st = put_bytes(w, b, 4))) return st;
    }
    memcpy(b, BN_BNT_TAG_END, 4);
    bn_st64(b + 4, index_off);
    bn_st64(b + 12, w->names.n);
    bn_st64(b + 20, w->off);
    bn_st32(b + 28, (uint32_t)crc32_z(0, b, 28));
    memcpy(b + 32, BN_BNT_END_MAGIC, 4);
    if ((st = put_bytes(w, b, sizeof b))) return st;
    if (fflush(w->f) != 0) return sticky(w, bn_fail(BITNET_E_IO, ".bnt: flush failed"));
    w->finished = 1;
    return BITNET_OK;
}

void bitnet_bnt_writer_free(bitnet_bnt_writer *w)
{
    if (!w) return;
    for (int i = 0; i < w->nzs; i++) deflateEnd(&w->zs[i]);
    free(w->zs);
    free(w->outbuf);
    free(w->stage);
    free(w->jobs);
    free(w->meta);
    bn_bnt_names_free(&w->meta_keys);
    bn_bnt_names_free(&w->names);
    free(w);
}
