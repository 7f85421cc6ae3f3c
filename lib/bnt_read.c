/*
 * bnt_read.c - the .bnt reader: one pass over a FILE* (pipes included), every
 * byte covered by a CRC, every size checked against the hard limits before
 * anything is allocated.  On a seekable file with an index, _seek jumps to
 * one tensor.  Also the helpers shared with bnt_write.c (bnt_format.h).
 */
#include "bnt_format.h"
#include "internal_io.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/types.h>
#include <zlib.h>

/* ---- shared helpers ------------------------------------------------------ */

int bn_bnt_utf8_ok(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) {
            if (c == 0) return 0;
            i++;
            continue;
        }
        if ((c & 0xe0) == 0xc0) { k = 1; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { k = 2; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { k = 3; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (n - i <= k) return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += k + 1;
    }
    return 1;
}

static uint64_t name_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

size_t bn_bnt_names_find(const bn_bnt_names *s, const char *name, size_t len)
{
    if (!s->nslot) return SIZE_MAX;
    for (size_t i = (size_t)name_hash(name, len) & (s->nslot - 1);; i = (i + 1) & (s->nslot - 1)) {
        uint32_t e = s->slot[i];
        if (!e) return SIZE_MAX;
        if (strncmp(s->name[e - 1], name, len) == 0 && s->name[e - 1][len] == 0) return e - 1;
    }
}

int bn_bnt_names_add(bn_bnt_names *s, const char *name, size_t len, uint64_t off)
{
    char *copy;
    if (bn_bnt_names_find(s, name, len) != SIZE_MAX) return 1;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16, nslot = 4 * cap;
        char **nn = realloc(s->name, cap * sizeof *nn);
        if (!nn) return -1;
        s->name = nn;
        uint64_t *no = realloc(s->off, cap * sizeof *no);
        if (!no) return -1;
        s->off = no;
        uint32_t *ns = calloc(nslot, sizeof *ns);
        if (!ns) return -1;
        for (size_t e = 0; e < s->n; e++) {
            size_t i = (size_t)name_hash(s->name[e], strlen(s->name[e])) & (nslot - 1);
            while (ns[i]) i = (i + 1) & (nslot - 1);
            ns[i] = (uint32_t)(e + 1);
        }
        free(s->slot);
        s->slot = ns;
        s->nslot = nslot;
        s->cap = cap;
    }
    if (!(copy = malloc(len + 1))) return -1;
    memcpy(copy, name, len);
    copy[len] = 0;
    size_t i = (size_t)name_hash(name, len) & (s->nslot - 1);
    while (s->slot[i]) i = (i + 1) & (s->nslot - 1);
    s->slot[i] = (uint32_t)(s->n + 1);
    s->name[s->n] = copy;
    s->off[s->n] = off;
    s->n++;
    return 0;
}

void bn_bnt_names_free(bn_bnt_names *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->name[i]);
    free(s->name);
    free(s->off);
    free(s->slot);
    memset(s, 0, sizeof *s);
}

/* ---- the reader ---------------------------------------------------------- */

enum { AT_RECORD, IN_DATA, AT_END };

struct bitnet_bnt_reader {
    FILE *f;
    uint8_t *pre;          /* bytes consumed before create (format sniffing) */
    size_t pre_len, pre_pos;
    uint64_t off;          /* bytes of the file consumed so far */
    int64_t base;          /* file position of byte 0, -1 if not seekable */
    int state;
    bitnet_status err;     /* sticky */
    char what[BITNET_MAX_NAME + 32]; /* the part being read, for messages */
    char errmsg[BITNET_MAX_NAME + 32 + 1024 + 48];

    uint32_t chunk;
    uint64_t header_end;
    uint8_t *meta;         /* NUL-terminated keys and values */
    char **keys, **vals;
    size_t n_meta;

    bn_bnt_names ents;     /* tensors seen (streaming) or the whole index */
    int index_loaded;
    size_t n_seen;         /* tensors passed, in file order */

    bitnet_tensor_info info; /* current tensor */
    int comp;
    uint64_t total, chunk_no, nchunks, stored_bytes, delivered;
    uint8_t *raw, *st;
    size_t raw_cap, st_cap;
    uint32_t raw_len, raw_pos;
    z_stream z;
    int z_init;

    uint8_t hdr[8 + BITNET_BNT_MAX_HEADER + 4];
};

/* Records a failure: "<what> at byte <off>: <message>"; the reader stays failed. */
static bitnet_status BN_PRINTF(4, 5) fail(bitnet_bnt_reader *r, bitnet_status st, uint64_t off, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(r->errmsg, sizeof r->errmsg, "%s at byte %llu: %s", r->what, (unsigned long long)off, msg);
    r->err = st;
    return bn_fail(st, "%s", r->errmsg);
}

/* Keeps a detail message set by a callee, prefixed with where we are (once:
 * a callee's own "tensor 'x': " goes). */
static bitnet_status fail_detail(bitnet_bnt_reader *r, bitnet_status st, uint64_t off)
{
    char msg[1024];
    const char *d = bitnet_error_detail();
    size_t wl = strlen(r->what);
    if (strncmp(d, r->what, wl) == 0 && strncmp(d + wl, ": ", 2) == 0) d += wl + 2;
    snprintf(msg, sizeof msg, "%s", d);
    return fail(r, st, off, "%s", msg);
}

static bitnet_status stuck(const bitnet_bnt_reader *r)
{
    return bn_fail(r->err, "%s", r->errmsg);
}

static bitnet_status rd(bitnet_bnt_reader *r, void *buf, size_t n)
{
    uint8_t *p = buf;
    size_t got = 0;
    if (r->pre_pos < r->pre_len) {
        got = r->pre_len - r->pre_pos < n ? r->pre_len - r->pre_pos : n;
        memcpy(p, r->pre + r->pre_pos, got);
        r->pre_pos += got;
    }
    if (got < n) got += fread(p + got, 1, n - got, r->f);
    r->off += got;
    if (got < n) {
        if (ferror(r->f)) return fail(r, BITNET_E_IO, r->off, "read error");
        return fail(r, BITNET_E_TRUNCATED, r->off, "file ends early (%zu more bytes needed)", n - got);
    }
    return BITNET_OK;
}

static bitnet_status seek_to(bitnet_bnt_reader *r, uint64_t off)
{
    if (off > (uint64_t)INT64_MAX - (uint64_t)r->base || fseeko(r->f, (off_t)(r->base + (int64_t)off), SEEK_SET) != 0)
        return fail(r, BITNET_E_IO, off, "cannot seek");
    r->pre_pos = r->pre_len;
    r->off = off;
    return BITNET_OK;
}

static int ensure(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    free(*buf);
    *buf = malloc(need);
    *cap = *buf ? need : 0;
    return *buf == NULL;
}

static bitnet_status read_file_header(bitnet_bnt_reader *r)
{
    uint8_t h[BN_BNT_FIXED_HEADER], c[4];
    uint32_t meta_len, flags, count;
    uLong crc;
    bitnet_status st;
    snprintf(r->what, sizeof r->what, "file header");
    if ((st = rd(r, h, 8))) return st;
    if (memcmp(h, BN_BNT_MAGIC, 8) != 0) return fail(r, BITNET_E_FORMAT, 0, "bad magic (not a .bnt file)");
    if ((st = rd(r, h + 8, sizeof h - 8))) return st;
    if (bn_ld16(h + 8) != BITNET_BNT_VERSION)
        return fail(r, BITNET_E_VERSION, 8, "format version %u.%u (this reader knows %u.x)", bn_ld16(h + 8),
                    bn_ld16(h + 10), BITNET_BNT_VERSION);
    meta_len = bn_ld32(h + 20);
    if (meta_len > BITNET_BNT_MAX_META)
        return fail(r, BITNET_E_LIMIT, 20, "metadata of %u bytes exceeds %u", meta_len, BITNET_BNT_MAX_META);
    if (meta_len < 4) return fail(r, BITNET_E_FORMAT, 20, "metadata length %u below 4", meta_len);
    if (!(r->meta = malloc(meta_len)))
        return fail(r, BITNET_E_NOMEM, 24, "cannot allocate %u bytes of metadata", meta_len);
    if ((st = rd(r, r->meta, meta_len)) || (st = rd(r, c, 4))) return st;
    crc = crc32_z(crc32_z(0, h, sizeof h), r->meta, meta_len);
    if ((uint32_t)crc != bn_ld32(c))
        return fail(r, BITNET_E_CHECKSUM, 24 + (uint64_t)meta_len, "CRC mismatch");
    flags = bn_ld32(h + 12);
    r->chunk = bn_ld32(h + 16);
    if (flags != 0) return fail(r, BITNET_E_FORMAT, 12, "unknown flags 0x%x", flags);
    if (r->chunk < BN_BNT_MIN_CHUNK || r->chunk > BN_BNT_MAX_CHUNK)
        return fail(r, BITNET_E_LIMIT, 16, "chunk size %u not in [%u, %u]", r->chunk, BN_BNT_MIN_CHUNK, BN_BNT_MAX_CHUNK);

    /* metadata: u32 count, then (u32 len, key, u32 len, value) each; the
     * strings are moved down over the length fields and NUL-terminated */
    count = bn_ld32(r->meta);
    if (count > (meta_len - 4) / 8) return fail(r, BITNET_E_FORMAT, 24, "metadata count %u too large", count);
    r->keys = malloc((count ? count : 1) * sizeof *r->keys);
    r->vals = malloc((count ? count : 1) * sizeof *r->vals);
    if (!r->keys || !r->vals) return fail(r, BITNET_E_NOMEM, 24, "cannot allocate %u metadata entries", count);
    bn_bnt_names keys = {0};
    size_t in = 4, out = 0;
    for (uint32_t i = 0; i < count; i++) {
        for (int kv = 0; kv < 2; kv++) {
            uint32_t len;
            if (meta_len - in < 4) goto bad_meta;
            len = bn_ld32(r->meta + in);
            in += 4;
            if (meta_len - in < len || (kv == 0 && len == 0) || !bn_bnt_utf8_ok(r->meta + in, len)) goto bad_meta;
            memmove(r->meta + out, r->meta + in, len);
            r->meta[out + len] = 0;
            (kv ? r->vals : r->keys)[i] = (char *)r->meta + out;
            in += len;
            out += len + 1;
        }
        int rc = bn_bnt_names_add(&keys, r->keys[i], strlen(r->keys[i]), i);
        if (rc) {
            bn_bnt_names_free(&keys);
            if (rc < 0) return fail(r, BITNET_E_NOMEM, 24, "out of memory");
            return fail(r, BITNET_E_FORMAT, 24 + in, "duplicate metadata key '%s'", r->keys[i]);
        }
    }
    bn_bnt_names_free(&keys);
    if (in != meta_len) return fail(r, BITNET_E_FORMAT, 24 + in, "%u bytes after the metadata entries", (unsigned)(meta_len - in));
    r->n_meta = count;
    r->header_end = r->off;
    return BITNET_OK;
bad_meta:
    bn_bnt_names_free(&keys);
    return fail(r, BITNET_E_FORMAT, 24 + in, "malformed metadata entry (bad length, empty key, NUL or invalid UTF-8)");
}

bitnet_status bn_bnt_reader_create_prefixed(bitnet_bnt_reader **rp, FILE *f, const uint8_t *prefix, size_t prefix_len)
{
    bitnet_bnt_reader *r;
    bitnet_status st;
    off_t pos;
    if (!rp || !f || (prefix_len && !prefix)) return bn_fail(BITNET_E_INVALID, "bnt reader: NULL argument");
    *rp = NULL;
    if (!(r = calloc(1, sizeof *r))) return bn_fail(BITNET_E_NOMEM, "bnt reader: out of memory");
    r->f = f;
    if (prefix_len) {
        if (!(r->pre = malloc(prefix_len))) {
            free(r);
            return bn_fail(BITNET_E_NOMEM, "bnt reader: out of memory");
        }
        memcpy(r->pre, prefix, prefix_len);
        r->pre_len = prefix_len;
    }
    pos = ftello(f);
    r->base = pos >= 0 && (uint64_t)pos >= prefix_len ? (int64_t)pos - (int64_t)prefix_len : -1;
    if ((st = read_file_header(r))) {
        bitnet_bnt_reader_free(r);
        return st;
    }
    r->state = AT_RECORD;
    *rp = r;
    return BITNET_OK;
}

bitnet_status bitnet_bnt_reader_create(bitnet_bnt_reader **r, FILE *f)
{
    return bn_bnt_reader_create_prefixed(r, f, NULL, 0);
}

size_t bitnet_bnt_reader_meta_count(const bitnet_bnt_reader *r) { return r ? r->n_meta : 0; }
const char *bitnet_bnt_reader_meta_key(const bitnet_bnt_reader *r, size_t i) { return r && i < r->n_meta ? r->keys[i] : NULL; }
const char *bitnet_bnt_reader_meta_value(const bitnet_bnt_reader *r, size_t i) { return r && i < r->n_meta ? r->vals[i] : NULL; }

const char *bitnet_bnt_reader_meta_get(const bitnet_bnt_reader *r, const char *key)
{
    for (size_t i = 0; r && key && i < r->n_meta; i++)
        if (strcmp(r->keys[i], key) == 0) return r->vals[i];
    return NULL;
}

/* Reads a tensor header whose tag ("TNSR") at rec_off has been consumed. */
static bitnet_status read_tensor_header(bitnet_bnt_reader *r, uint64_t rec_off)
{
    uint8_t *h = r->hdr, *p;
    uint32_t len, nl, rank, comp, kind;
    uint64_t payload, nscales, want_payload, want_scales, total;
    bitnet_tensor_info *info = &r->info;
    bitnet_status st;
    snprintf(r->what, sizeof r->what, "tensor #%zu header", r->n_seen);
    memcpy(h, BN_BNT_TAG_TENSOR, 4);
    if ((st = rd(r, h + 4, 4))) return st;
    len = bn_ld32(h + 4);
    if (len > BITNET_BNT_MAX_HEADER)
        return fail(r, BITNET_E_LIMIT, rec_off, "header of %u bytes exceeds %u", len, BITNET_BNT_MAX_HEADER);
    if (len < BN_BNT_TENSOR_FIXED) return fail(r, BITNET_E_FORMAT, rec_off, "header of %u bytes is too short", len);
    if ((st = rd(r, h + 8, (size_t)len + 4))) return st;
    if ((uint32_t)crc32_z(0, h, 8 + (size_t)len) != bn_ld32(h + 8 + len))
        return fail(r, BITNET_E_CHECKSUM, rec_off, "header CRC mismatch");
    p = h + 8;
    nl = bn_ld16(p);
    if (nl > BITNET_MAX_NAME) return fail(r, BITNET_E_LIMIT, rec_off, "name of %u bytes exceeds %d", nl, BITNET_MAX_NAME);
    if (nl > len - BN_BNT_TENSOR_FIXED) return fail(r, BITNET_E_FORMAT, rec_off, "name length %u overruns the header", nl);
    rank = p[3 + nl];
    if (rank > BITNET_MAX_RANK) return fail(r, BITNET_E_LIMIT, rec_off, "rank %u exceeds %d", rank, BITNET_MAX_RANK);
    if (len != bn_bnt_tensor_header_len(nl, rank))
        return fail(r, BITNET_E_FORMAT, rec_off, "header length %u does not match name length %u and rank %u", len, nl, rank);
    if (!bn_bnt_utf8_ok(p + 2, nl)) return fail(r, BITNET_E_FORMAT, rec_off, "name is not valid UTF-8 or holds NUL");
    memset(info, 0, sizeof *info);
    memcpy(info->name, p + 2, nl);
    snprintf(r->what, sizeof r->what, "tensor '%s'", info->name);
    p += 2 + nl;
    info->dtype = (bitnet_dtype)p[0];
    info->rank = rank;
    kind = p[2];
    info->scale_kind = kind <= BITNET_SCALE_GROUP ? (bitnet_scale_kind)kind : BITNET_SCALE_NONE;
    comp = p[3];
    info->group = bn_ld32(p + 4);
    p += 8;
    for (uint32_t i = 0; i < rank; i++, p += 8) info->dims[i] = bn_ld64(p);
    payload = bn_ld64(p);
    nscales = bn_ld64(p + 8);
    if (comp > BN_BNT_COMP_DEFLATE) return fail(r, BITNET_E_FORMAT, rec_off, "unknown compression %u", comp);
    if (kind > BITNET_SCALE_GROUP) return fail(r, BITNET_E_FORMAT, rec_off, "unknown scale kind %u", kind);
    if ((st = bitnet_tensor_info_check(info)) || (st = bitnet_tensor_data_bytes(info, &want_payload)) ||
        (st = bitnet_tensor_n_scales(info, &want_scales)))
        return fail_detail(r, st, rec_off);
    if (payload != want_payload || nscales != want_scales)
        return fail(r, BITNET_E_FORMAT, rec_off, "payload %llu bytes / %llu scales, the shape implies %llu / %llu",
                    (unsigned long long)payload, (unsigned long long)nscales, (unsigned long long)want_payload,
                    (unsigned long long)want_scales);
    if (bn_mul_u64(nscales, 4, &total) || bn_add_u64(total, payload, &total))
        return fail(r, BITNET_E_OVERFLOW, rec_off, "size overflows");

    /* the tensor must be the next one the index lists (or a new unique name) */
    if (r->index_loaded) {
        if (r->n_seen >= r->ents.n || r->ents.off[r->n_seen] != rec_off || strcmp(r->ents.name[r->n_seen], info->name))
            return fail(r, BITNET_E_FORMAT, rec_off, "tensor does not match index entry %zu", r->n_seen);
    } else {
        if (r->ents.n >= BN_BNT_MAX_TENSORS)
            return fail(r, BITNET_E_LIMIT, rec_off, "more than %u tensors", BN_BNT_MAX_TENSORS);
        int rc = bn_bnt_names_add(&r->ents, info->name, nl, rec_off);
        if (rc < 0) return fail(r, BITNET_E_NOMEM, rec_off, "out of memory");
        if (rc > 0) return fail(r, BITNET_E_FORMAT, rec_off, "duplicate tensor name");
    }
    r->n_seen++;
    r->comp = (int)comp;
    r->total = total;
    r->nchunks = total / r->chunk + (total % r->chunk != 0);
    r->chunk_no = 0;
    r->stored_bytes = 0;
    r->delivered = 0;
    r->raw_len = r->raw_pos = 0;
    r->state = IN_DATA;
    return BITNET_OK;
}

/* Reads and verifies the next chunk of the current tensor.  The data lands in
 * dst when dst can take the whole chunk (*direct = 1), else in r->raw. */
static bitnet_status read_chunk(bitnet_bnt_reader *r, uint8_t *dst, size_t dst_n, int *direct)
{
    uint8_t h[BN_BNT_CHUNK_HEADER], *out;
    uint64_t at = r->off, left = r->total - r->chunk_no * r->chunk;
    uint32_t want = left < r->chunk ? (uint32_t)left : r->chunk, raw_len, stored_len, raw_crc, stored_crc;
    uint64_t no = r->chunk_no;
    bitnet_status st;
    if ((st = rd(r, h, sizeof h))) return st;
    if ((uint32_t)crc32_z(0, h, 16) != bn_ld32(h + 16))
        return fail(r, BITNET_E_CHECKSUM, at, "chunk %llu header CRC mismatch", (unsigned long long)no);
    raw_len = bn_ld32(h);
    stored_len = bn_ld32(h + 4);
    raw_crc = bn_ld32(h + 8);
    stored_crc = bn_ld32(h + 12);
    if (raw_len != want)
        return fail(r, BITNET_E_FORMAT, at, "chunk %llu holds %u bytes, expected %u", (unsigned long long)no, raw_len, want);
    if (stored_len == 0 || stored_len > raw_len || (r->comp == BN_BNT_COMP_NONE && stored_len != raw_len))
        return fail(r, BITNET_E_FORMAT, at, "chunk %llu: stored length %u invalid for %u bytes", (unsigned long long)no,
                    stored_len, raw_len);
    *direct = dst && dst_n >= raw_len;
    if (!*direct && ensure(&r->raw, &r->raw_cap, raw_len))
        return fail(r, BITNET_E_NOMEM, at, "cannot allocate a chunk of %u bytes", raw_len);
    out = *direct ? dst : r->raw;
    if (stored_len == raw_len) {
        if ((st = rd(r, out, raw_len))) return st;
        uint32_t crc = (uint32_t)crc32_z(0, out, raw_len);
        if (crc != stored_crc || crc != raw_crc)
            return fail(r, BITNET_E_CHECKSUM, at, "chunk %llu data CRC mismatch", (unsigned long long)no);
    } else {
        if (ensure(&r->st, &r->st_cap, stored_len))
            return fail(r, BITNET_E_NOMEM, at, "cannot allocate a chunk of %u bytes", stored_len);
        if ((st = rd(r, r->st, stored_len))) return st;
        if ((uint32_t)crc32_z(0, r->st, stored_len) != stored_crc)
            return fail(r, BITNET_E_CHECKSUM, at, "chunk %llu stored data CRC mismatch", (unsigned long long)no);
        if (!r->z_init) {
            if (inflateInit2(&r->z, -15) != Z_OK) return fail(r, BITNET_E_NOMEM, at, "inflateInit2 failed");
            r->z_init = 1;
        } else if (inflateReset(&r->z) != Z_OK) {
            return fail(r, BITNET_E_NOMEM, at, "inflateReset failed");
        }
        r->z.next_in = r->st;
        r->z.avail_in = stored_len;
        r->z.next_out = out;
        r->z.avail_out = raw_len;
        int rc = inflate(&r->z, Z_FINISH);
        if (rc != Z_STREAM_END || r->z.avail_in || r->z.avail_out)
            return fail(r, BITNET_E_FORMAT, at, "chunk %llu: corrupt deflate data", (unsigned long long)no);
        if ((uint32_t)crc32_z(0, out, raw_len) != raw_crc)
            return fail(r, BITNET_E_CHECKSUM, at, "chunk %llu data CRC mismatch", (unsigned long long)no);
    }
    r->stored_bytes += BN_BNT_CHUNK_HEADER + (uint64_t)stored_len;
    r->chunk_no++;
    if (!*direct) {
        r->raw_len = raw_len;
        r->raw_pos = 0;
    }
    return BITNET_OK;
}

bitnet_status bitnet_bnt_reader_read(bitnet_bnt_reader *r, void *buf, size_t n, size_t *got)
{
    uint8_t *p = buf;
    bitnet_status st;
    if (got) *got = 0;
    if (!r || !got || (n && !buf)) return bn_fail(BITNET_E_INVALID, "bnt reader: NULL argument");
    if (r->err) return stuck(r);
    if (r->state != IN_DATA) return bn_fail(BITNET_E_INVALID, "bnt reader: no current tensor");
    while (n) {
        if (r->raw_pos < r->raw_len) {
            size_t k = r->raw_len - r->raw_pos < n ? r->raw_len - r->raw_pos : n;
            memcpy(p, r->raw + r->raw_pos, k);
            r->raw_pos += (uint32_t)k;
            p += k;
            n -= k;
            *got += k;
            continue;
        }
        if (r->chunk_no == r->nchunks) break;
        uint64_t left = r->total - r->chunk_no * r->chunk;
        size_t want = left < r->chunk ? (size_t)left : r->chunk;
        int direct;
        if ((st = read_chunk(r, p, n, &direct))) return st;
        if (direct) {
            p += want;
            n -= want;
            *got += want;
        }
    }
    r->delivered += *got;
    return BITNET_OK;
}

bitnet_status bitnet_bnt_reader_load(bitnet_bnt_reader *r, bitnet_tensor *t)
{
    uint64_t payload, ns;
    size_t got, nb;
    bitnet_status st;
    if (!r || !t) return bn_fail(BITNET_E_INVALID, "bnt reader: NULL argument");
    if (r->err) return stuck(r);
    if (r->state != IN_DATA || r->delivered || r->raw_pos < r->raw_len)
        return bn_fail(BITNET_E_INVALID, "bnt reader: load needs a current tensor not yet read");
    t->info = r->info;
    if ((st = bitnet_tensor_data_bytes(&t->info, &payload)) || (st = bitnet_tensor_n_scales(&t->info, &ns)) ||
        (st = bitnet_tensor_alloc(t)))
        return st;
    nb = (size_t)payload;
    if ((st = bitnet_bnt_reader_read(r, t->data, nb, &got))) goto fail;
    if (ns && (st = bitnet_bnt_reader_read(r, t->scales, (size_t)ns * 4, &got))) goto fail;
    bn_from_le(t->scales, (size_t)ns, 4);
    if (bitnet_dtype_size(t->info.dtype) > 1)
        bn_from_le(t->data, nb / bitnet_dtype_size(t->info.dtype), bitnet_dtype_size(t->info.dtype));
    return BITNET_OK;
fail:
    bitnet_tensor_release(t);
    return st;
}

/* Reads (after its tag at rec_off) an index record.  load: the entries become
 * r->ents; else they must equal r->ents, the tensors seen. */
static bitnet_status read_index(bitnet_bnt_reader *r, uint64_t rec_off, int load)
{
    uint8_t b[12];
    uint64_t count;
    uLong crc;
    bn_bnt_names ents = {0};
    bitnet_status st;
    char name[BITNET_MAX_NAME + 1];
    int mismatch = 0;
    snprintf(r->what, sizeof r->what, "index");
    memcpy(b, BN_BNT_TAG_INDEX, 4);
    if ((st = rd(r, b + 4, 8))) return st;
    count = bn_ld64(b + 4);
    crc = crc32_z(0, b, 12);
    if (count > BN_BNT_MAX_TENSORS)
        return fail(r, BITNET_E_LIMIT, rec_off, "%llu entries exceed %u", (unsigned long long)count, BN_BNT_MAX_TENSORS);
    if (!load && count != r->ents.n)
        return fail(r, BITNET_E_FORMAT, rec_off, "%llu entries for %zu tensors", (unsigned long long)count, r->ents.n);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t at = r->off;
        uint16_t nl;
        if ((st = rd(r, b, 2))) goto out;
        nl = bn_ld16(b);
        if (nl > BITNET_MAX_NAME) {
            st = fail(r, BITNET_E_LIMIT, at, "entry %llu: name of %u bytes exceeds %d", (unsigned long long)i, nl, BITNET_MAX_NAME);
            goto out;
        }
        if ((st = rd(r, name, nl)) || (st = rd(r, b + 2, 8))) goto out;
        name[nl] = 0;
        crc = crc32_z(crc32_z(crc32_z(crc, b, 2), (const uint8_t *)name, nl), b + 2, 8);
        uint64_t off = bn_ld64(b + 2);
        if (load) {
            /* checked against the CRC below before anything trusts it */
            int rc = bn_bnt_names_add(&ents, name, nl, off);
            if (rc < 0) { st = fail(r, BITNET_E_NOMEM, at, "out of memory"); goto out; }
            if (rc > 0) { st = fail(r, BITNET_E_FORMAT, at, "duplicate entry"); goto out; }
        } else if (off != r->ents.off[i] || strlen(name) != nl || strcmp(name, r->ents.name[i]) != 0) {
            mismatch = 1; /* reported after the CRC: a CRC mismatch says more */
        }
    }
    if ((st = rd(r, b, 4))) goto out;
    if ((uint32_t)crc != bn_ld32(b)) {
        st = fail(r, BITNET_E_CHECKSUM, rec_off, "CRC mismatch");
        goto out;
    }
    if (mismatch) {
        st = fail(r, BITNET_E_FORMAT, rec_off, "entries do not match the tensors in the file");
        goto out;
    }
    if (load) {
        bn_bnt_names_free(&r->ents);
        r->ents = ents;
        memset(&ents, 0, sizeof ents);
    }
out:
    bn_bnt_names_free(&ents);
    return st;
}

/* Reads the trailer (after its tag at rec_off). */
static bitnet_status read_trailer(bitnet_bnt_reader *r, uint64_t rec_off, uint64_t index_off, uint64_t count)
{
    uint8_t b[BN_BNT_TRAILER];
    bitnet_status st;
    snprintf(r->what, sizeof r->what, "trailer");
    memcpy(b, BN_BNT_TAG_END, 4);
    if ((st = rd(r, b + 4, sizeof b - 4))) return st;
    if ((uint32_t)crc32_z(0, b, 28) != bn_ld32(b + 28)) return fail(r, BITNET_E_CHECKSUM, rec_off, "CRC mismatch");
    if (memcmp(b + 32, BN_BNT_END_MAGIC, 4) != 0) return fail(r, BITNET_E_FORMAT, rec_off + 32, "bad end magic");
    if (bn_ld64(b + 20) != rec_off)
        return fail(r, BITNET_E_FORMAT, rec_off, "records its offset as %llu", (unsigned long long)bn_ld64(b + 20));
    if (bn_ld64(b + 4) != index_off)
        return fail(r, BITNET_E_FORMAT, rec_off, "index offset %llu, the index is at %llu",
                    (unsigned long long)bn_ld64(b + 4), (unsigned long long)index_off);
    if (bn_ld64(b + 12) != count)
        return fail(r, BITNET_E_FORMAT, rec_off, "tensor count %llu, the file holds %llu",
                    (unsigned long long)bn_ld64(b + 12), (unsigned long long)count);
    return BITNET_OK;
}

static bitnet_status read_tag(bitnet_bnt_reader *r, uint8_t tag[4])
{
    snprintf(r->what, sizeof r->what, "record");
    return rd(r, tag, 4);
}

/* Reads the index and the trailer at the end of the record sequence. */
static bitnet_status read_end(bitnet_bnt_reader *r, const uint8_t tag[4], uint64_t rec_off)
{
    uint64_t index_off = 0;
    uint8_t t[4];
    bitnet_status st;
    if (memcmp(tag, BN_BNT_TAG_INDEX, 4) == 0) {
        index_off = rec_off;
        if ((st = read_index(r, rec_off, 0))) return st;
        rec_off = r->off;
        if ((st = read_tag(r, t))) return st;
        if (memcmp(t, BN_BNT_TAG_END, 4) != 0) return fail(r, BITNET_E_FORMAT, rec_off, "no trailer after the index");
    }
    if ((st = read_trailer(r, rec_off, index_off, r->n_seen))) return st;
    if (r->index_loaded && index_off == 0) return fail(r, BITNET_E_FORMAT, rec_off, "index vanished");
    if (r->pre_pos < r->pre_len || fgetc(r->f) != EOF)
        return fail(r, BITNET_E_FORMAT, r->off, "data after the trailer");
    if (ferror(r->f)) return fail(r, BITNET_E_IO, r->off, "read error");
    r->state = AT_END;
    return BITNET_END;
}

bitnet_status bitnet_bnt_reader_next(bitnet_bnt_reader *r, bitnet_tensor_info *info)
{
    uint8_t tag[4];
    uint64_t rec_off;
    bitnet_status st;
    int direct;
    if (!r) return bn_fail(BITNET_E_INVALID, "bnt reader: NULL reader");
    if (r->err) return stuck(r);
    if (r->state == AT_END) return BITNET_END;
    while (r->state == IN_DATA && r->chunk_no < r->nchunks) /* skip, verifying */
        if ((st = read_chunk(r, NULL, 0, &direct))) return st;
    r->state = AT_RECORD;
    rec_off = r->off;
    if ((st = read_tag(r, tag))) {
        if (st == BITNET_E_TRUNCATED) fail(r, st, rec_off, "file ends before the trailer");
        return st;
    }
    if (memcmp(tag, BN_BNT_TAG_TENSOR, 4) == 0) {
        if ((st = read_tensor_header(r, rec_off))) return st;
        if (info) *info = r->info;
        return BITNET_OK;
    }
    if (memcmp(tag, BN_BNT_TAG_INDEX, 4) == 0 || memcmp(tag, BN_BNT_TAG_END, 4) == 0) {
        if (r->index_loaded && r->n_seen != r->ents.n)
            return fail(r, BITNET_E_FORMAT, rec_off, "%zu tensors, the index lists %zu", r->n_seen, r->ents.n);
        return read_end(r, tag, rec_off);
    }
    return fail(r, BITNET_E_FORMAT, rec_off, "unknown record tag %02x %02x %02x %02x", tag[0], tag[1], tag[2], tag[3]);
}

/* Seekable files: reads the trailer at the end, then the index it points at. */
static bitnet_status load_index(bitnet_bnt_reader *r)
{
    uint8_t b[BN_BNT_TRAILER];
    uint64_t end, tr, index_off, count;
    off_t pos;
    bitnet_status st;
    snprintf(r->what, sizeof r->what, "trailer");
    if (fseeko(r->f, 0, SEEK_END) != 0 || (pos = ftello(r->f)) < r->base)
        return fail(r, BITNET_E_IO, r->off, "cannot seek to the end");
    end = (uint64_t)(pos - r->base);
    if (end < r->header_end + BN_BNT_TRAILER) return fail(r, BITNET_E_TRUNCATED, end, "file too short for a trailer");
    tr = end - BN_BNT_TRAILER;
    if ((st = seek_to(r, tr)) || (st = rd(r, b, sizeof b))) return st;
    if (memcmp(b, BN_BNT_TAG_END, 4) != 0 || memcmp(b + 32, BN_BNT_END_MAGIC, 4) != 0)
        return fail(r, BITNET_E_FORMAT, tr, "no trailer at the end of the file");
    if ((uint32_t)crc32_z(0, b, 28) != bn_ld32(b + 28)) return fail(r, BITNET_E_CHECKSUM, tr, "CRC mismatch");
    index_off = bn_ld64(b + 4);
    count = bn_ld64(b + 12);
    if (bn_ld64(b + 20) != tr) return fail(r, BITNET_E_FORMAT, tr, "records its offset as %llu", (unsigned long long)bn_ld64(b + 20));
    if (index_off == 0) return BITNET_E_UNSUPPORTED;
    if (index_off < r->header_end || index_off >= tr)
        return fail(r, BITNET_E_FORMAT, tr, "index offset %llu out of range", (unsigned long long)index_off);
    if ((st = seek_to(r, index_off)) || (st = read_tag(r, b))) return st;
    if (memcmp(b, BN_BNT_TAG_INDEX, 4) != 0) return fail(r, BITNET_E_FORMAT, index_off, "no index at the trailer's index offset");
    /* what was seen so far must agree with the index */
    bn_bnt_names seen = r->ents;
    memset(&r->ents, 0, sizeof r->ents);
    st = read_index(r, index_off, 1);
    if (!st && r->off != tr) st = fail(r, BITNET_E_FORMAT, index_off, "index does not end at the trailer");
    if (!st && r->ents.n != count)
        st = fail(r, BITNET_E_FORMAT, tr, "tensor count %llu, the index lists %zu", (unsigned long long)count, r->ents.n);
    for (size_t i = 0; !st && i < seen.n; i++)
        if (i >= r->ents.n || seen.off[i] != r->ents.off[i] || strcmp(seen.name[i], r->ents.name[i]))
            st = fail(r, BITNET_E_FORMAT, index_off, "entry %zu does not match tensor '%s'", i, seen.name[i]);
    for (size_t i = 0; !st && i < r->ents.n; i++)
        if (r->ents.off[i] < r->header_end || r->ents.off[i] >= index_off || (i && r->ents.off[i] <= r->ents.off[i - 1]))
            st = fail(r, BITNET_E_FORMAT, index_off, "entry %zu: record offset %llu out of order", i,
                      (unsigned long long)r->ents.off[i]);
    if (st) {
        bn_bnt_names_free(&r->ents);
        r->ents = seen;
        return st;
    }
    bn_bnt_names_free(&seen);
    r->index_loaded = 1;
    return BITNET_OK;
}

bitnet_status bitnet_bnt_reader_seek(bitnet_bnt_reader *r, const char *name, bitnet_tensor_info *info)
{
    uint64_t saved;
    uint8_t tag[4];
    size_t k;
    bitnet_status st;
    if (!r || !name) return bn_fail(BITNET_E_INVALID, "bnt reader: NULL argument");
    if (r->err) return stuck(r);
    if (r->base < 0) return bn_fail(BITNET_E_UNSUPPORTED, "bnt reader: seek by name needs a seekable file");
    saved = r->off;
    if (!r->index_loaded) {
        st = load_index(r);
        if (st == BITNET_E_UNSUPPORTED) {
            if ((st = seek_to(r, saved))) return st;
            return bn_fail(BITNET_E_UNSUPPORTED, "bnt reader: the file has no index");
        }
        if (st) return st;
    }
    k = bn_bnt_names_find(&r->ents, name, strlen(name));
    if (k == SIZE_MAX) {
        if ((st = seek_to(r, saved))) return st;
        return bn_fail(BITNET_E_NOT_FOUND, "no tensor '%s' in the index", name);
    }
    if ((st = seek_to(r, r->ents.off[k])) || (st = read_tag(r, tag))) return st;
    if (memcmp(tag, BN_BNT_TAG_TENSOR, 4) != 0)
        return fail(r, BITNET_E_FORMAT, r->ents.off[k], "index entry '%s' does not point at a tensor", name);
    r->n_seen = k;
    if ((st = read_tensor_header(r, r->ents.off[k]))) return st;
    if (info) *info = r->info;
    return BITNET_OK;
}

uint64_t bitnet_bnt_reader_stored_bytes(const bitnet_bnt_reader *r) { return r ? r->stored_bytes : 0; }

void bitnet_bnt_reader_free(bitnet_bnt_reader *r)
{
    if (!r) return;
    if (r->z_init) inflateEnd(&r->z);
    bn_bnt_names_free(&r->ents);
    free(r->raw);
    free(r->st);
    free(r->meta);
    free(r->keys);
    free(r->vals);
    free(r->pre);
    free(r);
}
