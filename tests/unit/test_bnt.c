/*
 * test_bnt.c - the .bnt container: round trips of every dtype, rank and scale
 * kind, chunk boundaries, streaming through pipes, seek by name, identical
 * bytes with threads, hard limits, every single-bit flip and every truncation
 * detected, and the golden corpus in testdata/bnt (EXPECTED).
 *
 * `test_bnt --regen DIR` rewrites the corpus.  Broken files are built by the
 * small spec-following encoder and walker below, not by the library, and the
 * statuses in EXPECTED are written here by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "bitnet.h"
#include "testutil.h"
#include "internal_io.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) { return tu_rand32(&rng); }

/* pattern 0: random bytes (incompressible); 1: compressible */
static void make_tensor(bitnet_tensor *t, const char *name, bitnet_dtype dt, uint32_t rank, const uint64_t *dims,
                        bitnet_scale_kind sk, uint32_t group, int pattern)
{
    uint64_t nb, ns;
    memset(t, 0, sizeof *t);
    snprintf(t->info.name, sizeof t->info.name, "%s", name);
    t->info.dtype = dt;
    t->info.rank = rank;
    for (uint32_t i = 0; i < rank; i++) t->info.dims[i] = dims[i];
    t->info.scale_kind = sk;
    t->info.group = group;
    assert_int_equal(bitnet_tensor_info_check(&t->info), BITNET_OK);
    assert_int_equal(bitnet_tensor_alloc(t), BITNET_OK);
    assert_int_equal(bitnet_tensor_data_bytes(&t->info, &nb), BITNET_OK);
    assert_int_equal(bitnet_tensor_n_scales(&t->info, &ns), BITNET_OK);
    uint8_t *d = t->data;
    if (bitnet_dtype_is_ternary(dt)) {
        /* Valid codes only (bnt(5): code 3 and non-zero padding are invalid),
         * packed by the library's packers. */
        uint64_t rows, cols, n;
        bitnet_tensor_rows_cols(&t->info, &rows, &cols);
        assert_int_equal(bitnet_tensor_elements(&t->info, &n), BITNET_OK);
        int8_t *q = malloc(n ? n : 1);
        assert_non_null(q);
        for (uint64_t i = 0; i < n; i++) q[i] = (int8_t)((pattern ? (i / 97) : rnd()) % 3) - 1;
        if (n) assert_int_equal((dt == BITNET_T2 ? bitnet_t2_pack : bitnet_t3_pack)(q, rows, cols, d), BITNET_OK);
        free(q);
    } else {
        for (uint64_t i = 0; i < nb; i++) d[i] = pattern ? (uint8_t)((i / 97) % 5) : (uint8_t)rnd();
    }
    for (uint64_t i = 0; i < ns; i++) t->scales[i] = (float)(rnd() % 100000) / 1000.0f + 0.001f;
}

static uint8_t *write_mem(const bitnet_tensor *ts, size_t n, const bitnet_bnt_writer_opts *o, const char *const *meta,
                          size_t *len)
{
    char *buf = NULL;
    size_t sz = 0;
    FILE *f = open_memstream(&buf, &sz);
    bitnet_bnt_writer *w;
    assert_non_null(f);
    assert_int_equal(bitnet_bnt_writer_create(&w, f, o), BITNET_OK);
    for (size_t i = 0; meta && meta[i]; i += 2) assert_int_equal(bitnet_bnt_writer_meta(w, meta[i], meta[i + 1]), BITNET_OK);
    for (size_t i = 0; i < n; i++) assert_int_equal(bitnet_bnt_writer_put(w, &ts[i]), BITNET_OK);
    assert_int_equal(bitnet_bnt_writer_finish(w), BITNET_OK);
    bitnet_bnt_writer_free(w);
    fclose(f);
    *len = sz;
    return (uint8_t *)buf;
}

static FILE *mem_in(const uint8_t *buf, size_t len)
{
    FILE *f = len ? fmemopen((void *)(uintptr_t)buf, len, "rb") : fopen("/dev/null", "rb");
    assert_non_null(f);
    return f;
}

/* Opens a reader on len bytes of buf (which must succeed) and seeks to
 * name: the status of the seek. */
static bitnet_status seek_mem(const uint8_t *buf, size_t len, const char *name)
{
    FILE *f = mem_in(buf, len);
    bitnet_bnt_reader *r;
    bitnet_tensor_info info;
    assert_int_equal(bitnet_bnt_reader_create(&r, f), BITNET_OK);
    bitnet_status st = bitnet_bnt_reader_seek(r, name, &info);
    bitnet_bnt_reader_free(r);
    fclose(f);
    return st;
}

static void assert_same_info(const bitnet_tensor_info *a, const bitnet_tensor_info *b)
{
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->rank, b->rank);
    for (uint32_t i = 0; i < a->rank; i++) assert_int_equal(a->dims[i], b->dims[i]);
    assert_int_equal(a->scale_kind, b->scale_kind);
    assert_int_equal(a->group, b->group);
}

/* Reads the current tensor with bitnet_bnt_reader_read in pieces of the
 * sizes in pieces[] (cycled) and compares with want. */
static void read_compare(bitnet_bnt_reader *r, const bitnet_tensor *want, const size_t *pieces, size_t npieces)
{
    uint64_t nb, ns;
    assert_int_equal(bitnet_tensor_data_bytes(&want->info, &nb), BITNET_OK);
    assert_int_equal(bitnet_tensor_n_scales(&want->info, &ns), BITNET_OK);
    size_t total = (size_t)(nb + 4 * ns), pos = 0, got, k = 0;
    uint8_t *all = malloc(total + 1);
    assert_non_null(all);
    for (;;) {
        size_t want_n = pieces[k++ % npieces];
        if (want_n > total + 1 - pos) want_n = total + 1 - pos;
        assert_int_equal(bitnet_bnt_reader_read(r, all + pos, want_n, &got), BITNET_OK);
        if (got == 0) break;
        pos += got;
        assert_true(pos <= total);
    }
    assert_int_equal(pos, total);
    assert_memory_equal(all, want->data, (size_t)nb);
    if (ns) assert_memory_equal(all + nb, want->scales, (size_t)ns * 4); /* little-endian host */
    free(all);
}

/* Reads the whole file (load, or pieces) and compares with ts[]. */
static void check_file(const uint8_t *buf, size_t len, const bitnet_tensor *ts, size_t n, const size_t *pieces,
                       size_t npieces)
{
    FILE *f = mem_in(buf, len);
    bitnet_bnt_reader *r;
    bitnet_tensor_info info;
    assert_int_equal(bitnet_bnt_reader_create(&r, f), BITNET_OK);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(bitnet_bnt_reader_next(r, &info), BITNET_OK);
        assert_same_info(&info, &ts[i].info);
        if (pieces) {
            read_compare(r, &ts[i], pieces, npieces);
        } else {
            bitnet_tensor t;
            uint64_t nb, ns;
            assert_int_equal(bitnet_bnt_reader_load(r, &t), BITNET_OK);
            assert_same_info(&t.info, &ts[i].info);
            assert_int_equal(bitnet_tensor_data_bytes(&t.info, &nb), BITNET_OK);
            assert_int_equal(bitnet_tensor_n_scales(&t.info, &ns), BITNET_OK);
            assert_memory_equal(t.data, ts[i].data, (size_t)nb);
            if (ns) assert_memory_equal(t.scales, ts[i].scales, (size_t)ns * 4);
            bitnet_tensor_release(&t);
        }
    }
    assert_int_equal(bitnet_bnt_reader_next(r, &info), BITNET_END);
    assert_int_equal(bitnet_bnt_reader_next(r, &info), BITNET_END);
    bitnet_bnt_reader_free(r);
    fclose(f);
}

/* Reads everything, returns the first failure (BITNET_OK when the file ends
 * well); the detail stays in bitnet_error_detail(). */
static bitnet_status scan(const uint8_t *buf, size_t len)
{
    static uint8_t sink[5000];
    FILE *f = mem_in(buf, len);
    bitnet_bnt_reader *r;
    bitnet_tensor_info info;
    bitnet_status st = bitnet_bnt_reader_create(&r, f);
    size_t got;
    if (st) {
        fclose(f);
        return st;
    }
    while ((st = bitnet_bnt_reader_next(r, &info)) == BITNET_OK) {
        if (rnd() & 1) continue; /* leave it to next() to skip and verify */
        do st = bitnet_bnt_reader_read(r, sink, sizeof sink, &got);
        while (st == BITNET_OK && got);
        if (st) break;
    }
    bitnet_bnt_reader_free(r);
    fclose(f);
    return st == BITNET_END ? BITNET_OK : st;
}

static void free_tensors(bitnet_tensor *ts, size_t n)
{
    for (size_t i = 0; i < n; i++) bitnet_tensor_release(&ts[i]);
}

/* ---- a walker that follows bnt(5) on its own ---------------------------- */

typedef struct {
    size_t header_end;
    size_t n;
    size_t rec[64], data[64], data_end[64];
    size_t index, trailer;
} layout;

static uint32_t ld32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t ld64(const uint8_t *p) { return ld32(p) | (uint64_t)ld32(p + 4) << 32; }
static void st32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i); }
static void st64(uint8_t *p, uint64_t v) { st32(p, (uint32_t)v); st32(p + 4, (uint32_t)(v >> 32)); }

static void walk(const uint8_t *b, size_t len, layout *L)
{
    size_t p = 24 + ld32(b + 20) + 4;
    memset(L, 0, sizeof *L);
    L->header_end = p;
    while (memcmp(b + p, "TNSR", 4) == 0) {
        uint32_t hl = ld32(b + p + 4);
        const uint8_t *h = b + p + 8;
        uint32_t nl = h[0] | h[1] << 8, rank = h[3 + nl];
        uint64_t total = ld64(h + 10 + nl + 8 * rank) + 4 * ld64(h + 18 + nl + 8 * rank);
        L->rec[L->n] = p;
        p += 8 + hl + 4;
        L->data[L->n] = p;
        for (uint64_t seen = 0; seen < total;) {
            seen += ld32(b + p);
            p += 20 + ld32(b + p + 4);
        }
        L->data_end[L->n++] = p;
    }
    if (memcmp(b + p, "INDX", 4) == 0) {
        L->index = p;
        p = len - 36;
    }
    L->trailer = p;
    assert_int_equal(p, len - 36);
    assert_memory_equal(b + p, "BEND", 4);
}

/* ---- the corpus's good content ----------------------------------------- */

#define N_GOOD 8
static const char *const good_meta[] = {"producer", "bitnet test_bnt", "command", "test_bnt --regen",
                                        "source", "synthetic; \xc3\xa9t\xc3\xa9 UTF-8", NULL};

static void good_tensors(bitnet_tensor *ts)
{
    static const uint64_t d45[] = {4, 5}, d3_200[] = {3, 200}, d2_7[] = {2, 7}, d2_3[] = {2, 3}, d0[] = {0},
                          d9000[] = {9000}, d2_2_300[] = {2, 2, 300};
    rng = 12345;
    make_tensor(&ts[0], "layers.0.weight", BITNET_F32, 2, d45, BITNET_SCALE_NONE, 0, 0);
    make_tensor(&ts[1], "layers.0.weight.t2", BITNET_T2, 2, d3_200, BITNET_SCALE_ROW, 0, 0);
    make_tensor(&ts[2], "t3 tensor", BITNET_T3, 2, d2_7, BITNET_SCALE_TENSOR, 0, 0);
    make_tensor(&ts[3], "acts.q", BITNET_I8, 2, d2_3, BITNET_SCALE_ROW, 0, 0);
    make_tensor(&ts[4], "empty", BITNET_U8, 1, d0, BITNET_SCALE_NONE, 0, 0);
    make_tensor(&ts[5], "scalar", BITNET_F16, 0, NULL, BITNET_SCALE_NONE, 0, 0);
    make_tensor(&ts[6], "big.compressible", BITNET_U8, 1, d9000, BITNET_SCALE_NONE, 0, 1);
    make_tensor(&ts[7], "grouped", BITNET_T2, 3, d2_2_300, BITNET_SCALE_GROUP, 64, 0);
}

static uint8_t *good_file(int level, int no_index, size_t *len)
{
    bitnet_tensor ts[N_GOOD];
    bitnet_bnt_writer_opts o = {level, 4096, 1, no_index};
    good_tensors(ts);
    uint8_t *b = write_mem(ts, N_GOOD, &o, good_meta, len);
    free_tensors(ts, N_GOOD);
    return b;
}

/* ---- round trips ---------------------------------------------------------- */

static void test_roundtrip_dtypes(void **state)
{
    static const bitnet_dtype dts[] = {BITNET_F32, BITNET_F16, BITNET_BF16, BITNET_F64, BITNET_I8, BITNET_I16,
                                       BITNET_I32, BITNET_U8, BITNET_I64, BITNET_T2, BITNET_T3};
    static const uint64_t dims[] = {3, 133};
    bitnet_tensor ts[11 * 4];
    size_t n = 0;
    (void)state;
    for (size_t i = 0; i < 11; i++)
        for (int sk = 0; sk < 4; sk++) {
            char name[64];
            if (bitnet_dtype_is_ternary(dts[i]) && sk == BITNET_SCALE_NONE) continue;
            snprintf(name, sizeof name, "%s.scale%d", bitnet_dtype_name(dts[i]), sk);
            make_tensor(&ts[n++], name, dts[i], 2, dims, (bitnet_scale_kind)sk, sk == BITNET_SCALE_GROUP ? 32 : 0, (int)(i & 1));
        }
    for (int level = 0; level <= 9; level += 3) {
        bitnet_bnt_writer_opts o = {level, 4096, 1, 0};
        size_t len;
        uint8_t *b = write_mem(ts, n, &o, NULL, &len);
        check_file(b, len, ts, n, NULL, 0);
        free(b);
    }
    free_tensors(ts, n);
}

static void test_ranks(void **state)
{
    bitnet_tensor ts[9 + 3];
    uint64_t dims[8] = {2, 1, 3, 2, 1, 2, 3, 5};
    size_t n = 0;
    (void)state;
    for (uint32_t rank = 0; rank <= 8; rank++) {
        char name[16];
        snprintf(name, sizeof name, "rank%u", rank);
        make_tensor(&ts[n++], name, BITNET_I16, rank, dims, rank ? BITNET_SCALE_ROW : BITNET_SCALE_TENSOR, 0, 0);
    }
    uint64_t z1[] = {0, 5}, z2[] = {4, 0}, z3[] = {3, 0, 2};
    make_tensor(&ts[n++], "zero.rows", BITNET_T2, 2, z1, BITNET_SCALE_ROW, 0, 0);
    make_tensor(&ts[n++], "zero.cols", BITNET_T3, 2, z2, BITNET_SCALE_GROUP, 4, 0);
    make_tensor(&ts[n++], "zero.mid", BITNET_F32, 3, z3, BITNET_SCALE_NONE, 0, 0);
    size_t len;
    uint8_t *b = write_mem(ts, n, NULL, NULL, &len);
    check_file(b, len, ts, n, NULL, 0);
    static const size_t one[] = {1};
    check_file(b, len, ts, n, one, 1);
    free(b);
    free_tensors(ts, n);
}

static void test_chunk_boundaries(void **state)
{
    static const uint64_t sizes[] = {0, 1, 4095, 4096, 4097, 8191, 8192, 8193, 3 * 4096 + 5};
    bitnet_tensor ts[2 * 9];
    size_t n = 0;
    (void)state;
    for (size_t i = 0; i < 9; i++)
        for (int pat = 0; pat < 2; pat++) {
            char name[32];
            snprintf(name, sizeof name, "s%llu.p%d", (unsigned long long)sizes[i], pat);
            make_tensor(&ts[n++], name, BITNET_U8, 1, &sizes[i], BITNET_SCALE_NONE, 0, pat);
        }
    static const size_t pieces[] = {4096, 1, 4095, 8192, 3, 4097, 100000};
    for (int level = 0; level <= 1; level++) {
        bitnet_bnt_writer_opts o = {level ? 6 : 0, 4096, 1, 0};
        size_t len;
        uint8_t *b = write_mem(ts, n, &o, NULL, &len);
        check_file(b, len, ts, n, NULL, 0);
        check_file(b, len, ts, n, pieces, 7);
        /* stored bytes: random data stays raw (chunk headers + data), patterns shrink */
        FILE *f = mem_in(b, len);
        bitnet_bnt_reader *r;
        bitnet_tensor_info info;
        bitnet_tensor t;
        assert_int_equal(bitnet_bnt_reader_create(&r, f), BITNET_OK);
        for (size_t i = 0; i < n; i++) {
            uint64_t sz = sizes[i / 2], chunks = (sz + 4095) / 4096;
            assert_int_equal(bitnet_bnt_reader_next(r, &info), BITNET_OK);
            assert_int_equal(bitnet_bnt_reader_load(r, &t), BITNET_OK);
            bitnet_tensor_release(&t);
            if (level == 0 || (i % 2 == 0))
                assert_int_equal(bitnet_bnt_reader_stored_bytes(r), sz + 20 * chunks);
            else if (sz > 1000)
                assert_true(bitnet_bnt_reader_stored_bytes(r) < sz / 4);
        }
        bitnet_bnt_reader_free(r);
        fclose(f);
        /* the walker agrees on the chunk count per tensor */
        layout L;
        walk(b, len, &L);
        assert_int_equal(L.n, n);
        for (size_t i = 0; i < n; i++) {
            uint64_t sz = sizes[i / 2], chunks = (sz + 4095) / 4096, c = 0;
            for (size_t p = L.data[i]; p < L.data_end[i]; p += 20 + ld32(b + p + 4)) c++;
            assert_int_equal(c, chunks);
        }
        free(b);
    }
    free_tensors(ts, n);
}

static void test_metadata(void **state)
{
    static const char *const meta[] = {"producer", "bitnet-convert 0.1.0", "command", "bitnet-convert -o x.bnt y",
                                       "source", "caf\xc3\xa9 \xf0\x9f\x98\x80", "empty", "", NULL};
    size_t len;
    char *buf = NULL;
    size_t sz;
    (void)state;
    uint8_t *b = write_mem(NULL, 0, NULL, meta, &len);
    FILE *f = mem_in(b, len);
    bitnet_bnt_reader *r;
    bitnet_tensor_info info;
    assert_int_equal(bitnet_bnt_reader_create(&r, f), BITNET_OK);
    assert_int_equal(bitnet_bnt_reader_meta_count(r), 4);
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(bitnet_bnt_reader_meta_key(r, i), meta[2 * i]);
        assert_string_equal(bitnet_bnt_reader_meta_value(r, i), meta[2 * i + 1]);
    }
    assert_string_equal(bitnet_bnt_reader_meta_get(r, "source"), meta[5]);
    assert_null(bitnet_bnt_reader_meta_get(r, "nope"));
    assert_null(bitnet_bnt_reader_meta_key(r, 4));
    assert_int_equal(bitnet_bnt_reader_next(r, &info), BITNET_END);
    bitnet_bnt_reader_free(r);
    fclose(f);
    free(b);

    /* misuse: duplicate key, bad UTF-8, empty key, meta after a tensor */
    FILE *o = open_memstream(&buf, &sz);
    bitnet_bnt_writer *w;
    bitnet_tensor t;
    uint64_t d = 3;
    assert_int_equal(bitnet_bnt_writer_create(&w, o, NULL), BITNET_OK);
    assert_int_equal(bitnet_bnt_writer_meta(w, "k", "v"), BITNET_OK);
    assert_int_equal(bitnet_bnt_writer_meta(w, "k", "w"), BITNET_E_INVALID);
    assert_int_equal(bitnet_bnt_writer_meta(w, "bad", "\xc3"), BITNET_E_INVALID);
    assert_int_equal(bitnet_bnt_writer_meta(w, "over", "\xed\xa0\x80"), BITNET_E_INVALID); /* surrogate */
    assert_int_equal(bitnet_bnt_writer_meta(w, "", "v"), BITNET_E_INVALID);
    make_tensor(&t, "x", BITNET_F32, 1, &d, BITNET_SCALE_NONE, 0, 0);
    assert_int_equal(bitnet_bnt_writer_put(w, &t), BITNET_OK);
    assert_int_equal(bitnet_bnt_writer_meta(w, "late", "v"), BITNET_E_INVALID);
    assert_int_equal(bitnet_bnt_writer_finish(w), BITNET_OK);
    bitnet_bnt_writer_free(w);
    fclose(o);
    check_file((uint8_t *)buf, sz, &t, 1, NULL, 0);
    bitnet_tensor_release(&t);
    free(buf);
}

static void test_writer_misuse(void **state)
{
    char *buf = NULL;
    size_t sz;
    FILE *o = open_memstream(&buf, &sz);
    bitnet_bnt_writer *w;
    bitnet_bnt_writer_opts bad = {0, 100, 1, 0};
    bitnet_tensor t;
    uint64_t d = 10;
    (void)state;
    assert_int_equal(bitnet_bnt_writer_create(&w, o, &bad), BITNET_E_INVALID);
    bad.chunk_size = 4096;
    bad.level = 10;
    assert_int_equal(bitnet_bnt_writer_create(&w, o, &bad), BITNET_E_INVALID);
    make_tensor(&t, "x", BITNET_I32, 1, &d, BITNET_SCALE_NONE, 0, 0);
    assert_int_equal(bitnet_bnt_writer_create(&w, o, NULL), BITNET_OK);
    assert_int_equal(bitnet_bnt_writer_write(w, t.data, 4), BITNET_E_INVALID); /* outside begin/end */
    assert_int_equal(bitnet_bnt_writer_put(w, &t), BITNET_OK);
    assert_int_equal(bitnet_bnt_writer_put(w, &t), BITNET_E_INVALID); /* duplicate name */
    bitnet_tensor_info bi = t.info;
    bi.rank = 9;
    assert_int_equal(bitnet_bnt_writer_begin(w, &bi), BITNET_E_LIMIT);
    bi = t.info;
    bi.dtype = (bitnet_dtype)99;
    assert_int_not_equal(bitnet_bnt_writer_begin(w, &bi), BITNET_OK);
    bi = t.info;
    snprintf(bi.name, sizeof bi.name, "y");
    bi.scale_kind = BITNET_SCALE_GROUP;
    bi.group = 3; /* not a power of two */
    assert_int_not_equal(bitnet_bnt_writer_begin(w, &bi), BITNET_OK);
    bi.scale_kind = BITNET_SCALE_NONE;
    bi.group = 0;
    assert_int_equal(bitnet_bnt_writer_begin(w, &bi), BITNET_OK);
    assert_int_equal(bitnet_bnt_writer_finish(w), BITNET_E_INVALID); /* tensor open */
    assert_int_equal(bitnet_bnt_writer_write(w, t.data, 41), BITNET_E_INVALID); /* too many bytes */
    assert_int_equal(bitnet_bnt_writer_finish(w), BITNET_E_INVALID);              /* sticky */
    bitnet_bnt_writer_free(w);
    bitnet_bnt_writer_free(NULL);
    bitnet_bnt_reader_free(NULL);
    fclose(o);
    free(buf);

    o = open_memstream(&buf, &sz);
    assert_int_equal(bitnet_bnt_writer_create(&w, o, NULL), BITNET_OK);
    assert_int_equal(bitnet_bnt_writer_begin(w, &t.info), BITNET_OK);
    assert_int_equal(bitnet_bnt_writer_write(w, t.data, 39), BITNET_OK);
    assert_int_equal(bitnet_bnt_writer_end(w), BITNET_E_INVALID); /* short */
    bitnet_bnt_writer_free(w);
    fclose(o);
    free(buf);
    bitnet_tensor_release(&t);

    /* a full disk is an I/O error, at the latest when finish flushes */
    FILE *full = fopen("/dev/full", "wb");
    if (full) {
        uint64_t big = 300000;
        bitnet_status st;
        make_tensor(&t, "big", BITNET_U8, 1, &big, BITNET_SCALE_NONE, 0, 0);
        assert_int_equal(bitnet_bnt_writer_create(&w, full, NULL), BITNET_OK);
        st = bitnet_bnt_writer_put(w, &t);
        if (st == BITNET_OK) st = bitnet_bnt_writer_finish(w);
        assert_int_equal(st, BITNET_E_IO);
        assert_int_equal(bitnet_bnt_writer_finish(w), BITNET_E_INVALID);
        bitnet_bnt_writer_free(w);
        fclose(full);
        bitnet_tensor_release(&t);
    }
}

/* ---- streaming: odd pieces, pipes, a prefix ------------------------------- */

static void test_odd_pieces(void **state)
{
    static const uint64_t d[] = {3, 5000};
    bitnet_tensor ts[2];
    char *buf = NULL, *buf2 = NULL;
    size_t sz, sz2, len;
    (void)state;
    make_tensor(&ts[0], "a", BITNET_F32, 2, d, BITNET_SCALE_ROW, 0, 0);
    make_tensor(&ts[1], "b", BITNET_T2, 2, d, BITNET_SCALE_GROUP, 128, 1);
    static const size_t wp[] = {1, 7, 4093, 3, 8192, 12289, 5};
    for (int threads = 1; threads <= 3; threads += 2) {
        FILE *o = open_memstream(&buf, &sz);
        bitnet_bnt_writer *w;
        bitnet_bnt_writer_opts opts = {6, 4096, threads, 0};
        assert_int_equal(bitnet_bnt_writer_create(&w, o, &opts), BITNET_OK);
        for (int i = 0; i < 2; i++) {
            uint64_t nb, ns;
            bitnet_tensor_data_bytes(&ts[i].info, &nb);
            bitnet_tensor_n_scales(&ts[i].info, &ns);
            uint8_t *all = malloc(nb + 4 * ns);
            memcpy(all, ts[i].data, nb);
            memcpy(all + nb, ts[i].scales, 4 * ns);
            assert_int_equal(bitnet_bnt_writer_begin(w, &ts[i].info), BITNET_OK);
            for (size_t pos = 0, k = 0; pos < nb + 4 * ns; k++) {
                size_t m = wp[k % 7] < nb + 4 * ns - pos ? wp[k % 7] : nb + 4 * ns - pos;
                assert_int_equal(bitnet_bnt_writer_write(w, all + pos, m), BITNET_OK);
                pos += m;
            }
            assert_int_equal(bitnet_bnt_writer_end(w), BITNET_OK);
            free(all);
        }
        assert_int_equal(bitnet_bnt_writer_finish(w), BITNET_OK);
        bitnet_bnt_writer_free(w);
        fclose(o);
        static const size_t rp[] = {1, 2, 4097, 3, 65536, 17};
        check_file((uint8_t *)buf, sz, ts, 2, rp, 6);
        /* same bytes as writing whole tensors */
        bitnet_bnt_writer_opts o1 = {6, 4096, 1, 0};
        uint8_t *ref = write_mem(ts, 2, &o1, NULL, &len);
        assert_int_equal(len, sz);
        assert_memory_equal(ref, buf, len);
        free(ref);
        free(buf);
        buf = NULL;
    }
    (void)buf2;
    (void)sz2;
    free_tensors(ts, 2);
}

typedef struct {
    int fd;
    bitnet_tensor *ts;
    size_t n;
    bitnet_status st;
} pipe_job;

static void *pipe_writer(void *arg)
{
    pipe_job *j = arg;
    FILE *f = fdopen(j->fd, "wb");
    bitnet_bnt_writer *w;
    bitnet_bnt_writer_opts o = {1, 4096, 2, 0};
    j->st = bitnet_bnt_writer_create(&w, f, &o);
    if (!j->st) j->st = bitnet_bnt_writer_meta(w, "producer", "pipe");
    for (size_t i = 0; i < j->n && !j->st; i++) j->st = bitnet_bnt_writer_put(w, &j->ts[i]);
    if (!j->st) j->st = bitnet_bnt_writer_finish(w);
    bitnet_bnt_writer_free(w);
    fclose(f);
    return NULL;
}

static void test_pipe(void **state)
{
    static const uint64_t d1[] = {100, 300}, d2[] = {7, 1000};
    bitnet_tensor ts[3];
    int fds[2];
    pthread_t th;
    (void)state;
    make_tensor(&ts[0], "p0", BITNET_F32, 2, d1, BITNET_SCALE_NONE, 0, 0);
    make_tensor(&ts[1], "p1", BITNET_T3, 2, d2, BITNET_SCALE_ROW, 0, 1);
    make_tensor(&ts[2], "p2", BITNET_BF16, 2, d2, BITNET_SCALE_NONE, 0, 1);
    assert_int_equal(pipe(fds), 0);
    pipe_job j = {fds[1], ts, 3, BITNET_OK};
    assert_int_equal(pthread_create(&th, NULL, pipe_writer, &j), 0);
    FILE *in = fdopen(fds[0], "rb");
    bitnet_bnt_reader *r;
    bitnet_tensor_info info;
    static const size_t pieces[] = {333, 4096, 1};
    assert_int_equal(bitnet_bnt_reader_create(&r, in), BITNET_OK);
    assert_string_equal(bitnet_bnt_reader_meta_get(r, "producer"), "pipe");
    assert_int_equal(bitnet_bnt_reader_seek(r, "p1", &info), BITNET_E_UNSUPPORTED);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(bitnet_bnt_reader_next(r, &info), BITNET_OK);
        assert_same_info(&info, &ts[i].info);
        if (i != 1) read_compare(r, &ts[i], pieces, 3); /* p1 is skipped */
    }
    assert_int_equal(bitnet_bnt_reader_next(r, &info), BITNET_END);
    bitnet_bnt_reader_free(r);
    fclose(in);
    pthread_join(th, NULL);
    assert_int_equal(j.st, BITNET_OK);
    free_tensors(ts, 3);
}

static void test_prefixed(void **state)
{
    size_t len;
    uint8_t *b = good_file(6, 0, &len), pre[11];
    bitnet_tensor ts[N_GOOD];
    bitnet_bnt_reader *r;
    bitnet_tensor_info info;
    bitnet_tensor t;
    (void)state;
    good_tensors(ts);
    FILE *f = mem_in(b, len);
    assert_int_equal(fread(pre, 1, sizeof pre, f), sizeof pre);
    assert_int_equal(bn_bnt_reader_create_prefixed(&r, f, pre, sizeof pre), BITNET_OK);
    assert_int_equal(bitnet_bnt_reader_seek(r, "grouped", &info), BITNET_OK); /* seekable through the prefix */
    assert_int_equal(bitnet_bnt_reader_load(r, &t), BITNET_OK);
    assert_memory_equal(t.data, ts[7].data, 2 * 2 * 96);
    bitnet_tensor_release(&t);
    assert_int_equal(bitnet_bnt_reader_seek(r, "layers.0.weight", &info), BITNET_OK);
    for (size_t i = 1; i < N_GOOD; i++) assert_int_equal(bitnet_bnt_reader_next(r, &info), BITNET_OK);
    assert_int_equal(bitnet_bnt_reader_next(r, &info), BITNET_END);
    bitnet_bnt_reader_free(r);
    fclose(f);
    free_tensors(ts, N_GOOD);
    free(b);
}

/* ---- seek by name ------------------------------------------------------- */

static void test_seek(void **state)
{
    enum { N = 40 };
    bitnet_tensor ts[N];
    uint64_t d[2];
    size_t len;
    (void)state;
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "blk.%d.w", i);
        d[0] = 1 + (uint64_t)i % 5;
        d[1] = 1000 + 37 * (uint64_t)i;
        make_tensor(&ts[i], name, i % 3 ? BITNET_F32 : BITNET_T2, 2, d, i % 3 ? BITNET_SCALE_NONE : BITNET_SCALE_ROW, 0, i & 1);
    }
    bitnet_bnt_writer_opts o = {6, 4096, 2, 0};
    uint8_t *b = write_mem(ts, N, &o, NULL, &len);
    /* a real file too: tmpfile */
    FILE *tf = tmpfile();
    assert_non_null(tf);
    assert_int_equal(fwrite(b, 1, len, tf), len);
    rewind(tf);
    for (int which = 0; which < 2; which++) {
        FILE *f = which ? tf : mem_in(b, len);
        bitnet_bnt_reader *r;
        bitnet_tensor_info info;
        static const size_t pieces[] = {1000, 7};
        assert_int_equal(bitnet_bnt_reader_create(&r, f), BITNET_OK);
        assert_int_equal(bitnet_bnt_reader_next(r, &info), BITNET_OK); /* read the first half-way */
        size_t got;
        uint8_t tmp[100];
        assert_int_equal(bitnet_bnt_reader_read(r, tmp, sizeof tmp, &got), BITNET_OK);
        assert_int_equal(bitnet_bnt_reader_seek(r, "nope", &info), BITNET_E_NOT_FOUND);
        /* a miss leaves the stream where it was */
        assert_int_equal(bitnet_bnt_reader_read(r, tmp, sizeof tmp, &got), BITNET_OK);
        assert_memory_equal(tmp, (uint8_t *)ts[0].data + 100, 100);
        for (int k = 0; k < N; k++) {
            int i = (k * 17 + 5) % N;
            assert_int_equal(bitnet_bnt_reader_seek(r, ts[i].info.name, &info), BITNET_OK);
            assert_same_info(&info, &ts[i].info);
            read_compare(r, &ts[i], pieces, 2);
        }
        /* after a seek, next continues in file order and ends cleanly */
        assert_int_equal(bitnet_bnt_reader_seek(r, "blk.35.w", &info), BITNET_OK);
        for (int i = 36; i < N; i++) {
            assert_int_equal(bitnet_bnt_reader_next(r, &info), BITNET_OK);
            assert_string_equal(info.name, ts[i].info.name);
        }
        assert_int_equal(bitnet_bnt_reader_next(r, &info), BITNET_END);
        assert_int_equal(bitnet_bnt_reader_seek(r, "blk.0.w", &info), BITNET_OK);
        read_compare(r, &ts[0], pieces, 2);
        bitnet_bnt_reader_free(r);
        if (!which) fclose(f);
    }
    fclose(tf);
    free(b);
    /* no index: seek is unsupported, reading still works */
    o.no_index = 1;
    b = write_mem(ts, 3, &o, NULL, &len);
    assert_int_equal(seek_mem(b, len, "blk.1.w"), BITNET_E_UNSUPPORTED);
    check_file(b, len, ts, 3, NULL, 0);
    free(b);
    free_tensors(ts, N);
}

/* ---- threads -------------------------------------------------------------- */

static void test_threads_identical(void **state)
{
    static const uint64_t d1[] = {70000}, d2[] = {3, 40000}, d3[] = {5};
    bitnet_tensor ts[3];
    (void)state;
    make_tensor(&ts[0], "mixed", BITNET_U8, 1, d1, BITNET_SCALE_NONE, 0, 0);
    make_tensor(&ts[1], "pattern", BITNET_T2, 2, d2, BITNET_SCALE_GROUP, 256, 1);
    make_tensor(&ts[2], "tiny", BITNET_F64, 1, d3, BITNET_SCALE_NONE, 0, 0);
    memset(ts[0].data, 7, 30000); /* compressible chunks, then random ones */
    for (int level = 1; level <= 9; level += 4) {
        size_t len1, len;
        bitnet_bnt_writer_opts o = {level, 4096, 1, 0};
        uint8_t *ref = write_mem(ts, 3, &o, NULL, &len1);
        for (int th = 2; th <= 8; th += 3) {
            o.threads = th;
            uint8_t *b = write_mem(ts, 3, &o, NULL, &len);
            assert_int_equal(len, len1);
            assert_memory_equal(b, ref, len);
            free(b);
        }
        check_file(ref, len1, ts, 3, NULL, 0);
        free(ref);
    }
    free_tensors(ts, 3);
}

/* ---- hard limits ----------------------------------------------------------- */

/* A file header with no metadata and the given chunk size, CRC included. */
static size_t put_file_header(uint8_t *b, uint32_t chunk, uint32_t meta_len_field)
{
    memcpy(b, "\x89" "BNT\r\n\x1a\n", 8);
    b[8] = 1, b[9] = 0, b[10] = 0, b[11] = 0;
    st32(b + 12, 0);
    st32(b + 16, chunk);
    st32(b + 20, meta_len_field);
    st32(b + 24, 0); /* metadata count */
    st32(b + 28, (uint32_t)crc32(0, b, 28));
    return 32;
}

/* A tensor record header; returns its length. */
static size_t put_tensor_header(uint8_t *b, const char *name, uint16_t name_len, uint8_t dtype, uint8_t rank,
                                const uint64_t *dims, uint8_t kind, uint32_t group, uint64_t payload, uint64_t nscales)
{
    size_t nl = strlen(name), p;
    memcpy(b, "TNSR", 4);
    b[8] = (uint8_t)name_len, b[9] = (uint8_t)(name_len >> 8);
    memcpy(b + 10, name, nl);
    p = 10 + nl;
    b[p] = dtype, b[p + 1] = rank, b[p + 2] = kind, b[p + 3] = 0;
    st32(b + p + 4, group);
    p += 8;
    for (unsigned i = 0; i < rank; i++, p += 8) st64(b + p, dims[i]);
    st64(b + p, payload);
    st64(b + p + 8, nscales);
    p += 16;
    st32(b + 4, (uint32_t)(p - 8));
    st32(b + p, (uint32_t)crc32(0, b, (uInt)p));
    return p + 4;
}

static size_t absurd_file(uint8_t *b, int which)
{
    static const uint64_t huge[] = {1ull << 30, 1ull << 30, 1ull << 30}, ok[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    char longname[2000];
    size_t n = put_file_header(b, 4096, 4);
    switch (which) {
    case 0: /* dims multiply past 2^48 */
        n += put_tensor_header(b + n, "huge", 4, BITNET_F32, 3, huge, 0, 0, 0, 0);
        break;
    case 1: /* rank 9 */
        n += put_tensor_header(b + n, "rank9", 5, BITNET_F32, 9, ok, 0, 0, 4, 0);
        break;
    case 2: /* name of 1025 bytes */
        memset(longname, 'n', 1025);
        longname[1025] = 0;
        n += put_tensor_header(b + n, longname, 1025, BITNET_F32, 1, ok, 0, 0, 4, 0);
        break;
    case 3: /* tensor header length field 1 GiB */
        n += put_tensor_header(b + n, "x", 1, BITNET_F32, 1, ok, 0, 0, 4, 0);
        st32(b + 32 + 4, 1u << 30);
        break;
    case 4: /* metadata length 4 GiB - 1 */
        st32(b + 20, 0xffffffffu);
        break;
    case 5: /* chunk size 1 GiB (CRC fixed) */
        n = put_file_header(b, 1u << 30, 4);
        break;
    case 6: /* index with 2^40 entries */
        memcpy(b + n, "INDX", 4);
        st64(b + n + 4, 1ull << 40);
        n += 12;
        break;
    case 7: /* tensor header length one past the limit */
        n += put_tensor_header(b + n, "x", 1, BITNET_F32, 1, ok, 0, 0, 4, 0);
        st32(b + 32 + 4, 65537);
        break;
    }
    return n;
}

static void test_limits(void **state)
{
    static const char *const want[] = {"2^48", "rank 9 exceeds", "name of 1025 bytes", "header of 1073741824 bytes",
                                       "metadata of 4294967295 bytes", "chunk size 1073741824", "entries exceed",
                                       "header of 65537 bytes"};
    uint8_t *b = malloc(1 << 16);
    (void)state;
    for (int i = 0; i < 8; i++) {
        size_t n = absurd_file(b, i);
        bitnet_status st = scan(b, n);
        print_message("# absurd %d: %s\n", i, bitnet_error_detail());
        assert_int_equal(st, BITNET_E_LIMIT);
        assert_non_null(strstr(bitnet_error_detail(), want[i]));
    }
    free(b);
}

/* ---- every flip, every truncation ----------------------------------------- */

static void flip_all(const uint8_t *src, size_t len)
{
    uint8_t *b = malloc(len);
    memcpy(b, src, len);
    assert_int_equal(scan(b, len), BITNET_OK);
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (uint8_t)(1u << bit);
            bitnet_status st = scan(b, len);
            if (st == BITNET_OK) fail_msg("flip of byte %zu bit %d not detected", i, bit);
            b[i] ^= (uint8_t)(1u << bit);
        }
    free(b);
}

static void test_every_bitflip(void **state)
{
    static const uint64_t d1[] = {2, 3}, d2[] = {2, 130}, d3[] = {5000}, d4[] = {300};
    bitnet_tensor ts[4];
    size_t len;
    (void)state;
    make_tensor(&ts[0], "a", BITNET_F32, 2, d1, BITNET_SCALE_NONE, 0, 0);
    make_tensor(&ts[1], "b", BITNET_T2, 2, d2, BITNET_SCALE_ROW, 0, 0);
    make_tensor(&ts[2], "c", BITNET_U8, 1, d3, BITNET_SCALE_NONE, 0, 1); /* two deflated chunks */
    make_tensor(&ts[3], "d", BITNET_I8, 1, d4, BITNET_SCALE_TENSOR, 0, 0); /* stored raw */
    static const char *const meta[] = {"producer", "t", NULL};
    for (int mode = 0; mode < 3; mode++) {
        bitnet_bnt_writer_opts o = {mode == 1 ? 0 : 6, 4096, 1, mode == 2};
        uint8_t *b = write_mem(ts, mode == 1 ? 2 : 4, &o, meta, &len);
        print_message("# flipping all %zu bits of a %zu-byte file\n", 8 * len, len);
        flip_all(b, len);
        free(b);
    }
    free_tensors(ts, 4);
}

static void test_every_truncation(void **state)
{
    size_t len;
    (void)state;
    for (int no_index = 0; no_index < 2; no_index++) {
        uint8_t *b = good_file(6, no_index, &len);
        for (size_t n = 0; n < len; n++) {
            bitnet_status st = scan(b, n);
            if (st != BITNET_E_TRUNCATED) fail_msg("truncation at %zu of %zu: %s (%s)", n, len, bitnet_strerror(st), bitnet_error_detail());
        }
        /* a seekable reader looking for the index must not be fooled either */
        for (size_t n = len - 40; n < len; n++) assert_int_not_equal(seek_mem(b, n, "grouped"), BITNET_OK);
        /* and nothing may follow the trailer */
        uint8_t *c = malloc(len + 1);
        memcpy(c, b, len);
        c[len] = 0;
        assert_int_equal(scan(c, len + 1), BITNET_E_FORMAT);
        free(c);
        free(b);
    }
}

/* The detail names the part and the byte offset. */
static void expect_detail(const uint8_t *src, size_t len, size_t flip_at, bitnet_status want, const char *what, size_t off)
{
    char at[64];
    uint8_t *b = malloc(len);
    memcpy(b, src, len);
    b[flip_at] ^= 0x10;
    assert_int_equal(scan(b, len), want);
    snprintf(at, sizeof at, "at byte %zu", off);
    if (!strstr(bitnet_error_detail(), what) || !strstr(bitnet_error_detail(), at))
        fail_msg("detail '%s' lacks '%s' or '%s'", bitnet_error_detail(), what, at);
    free(b);
}

static void test_error_details(void **state)
{
    size_t len;
    layout L;
    (void)state;
    uint8_t *b = good_file(6, 0, &len);
    walk(b, len, &L);
    assert_int_equal(L.n, N_GOOD);
    expect_detail(b, len, 30, BITNET_E_CHECKSUM, "file header", L.header_end - 4);
    expect_detail(b, len, L.rec[2] + 12, BITNET_E_CHECKSUM, "tensor #2 header", L.rec[2]);
    /* data of t2 tensor 1 (one raw chunk): byte 40 of its data */
    expect_detail(b, len, L.data[1] + 20 + 40, BITNET_E_CHECKSUM, "tensor 'layers.0.weight.t2'", L.data[1]);
    /* second chunk header of the compressible tensor */
    size_t c1 = L.data[6] + 20 + ld32(b + L.data[6] + 4);
    expect_detail(b, len, c1 + 2, BITNET_E_CHECKSUM, "tensor 'big.compressible'", c1);
    expect_detail(b, len, c1 + 25, BITNET_E_CHECKSUM, "chunk 1 stored data CRC", c1);
    expect_detail(b, len, L.index + 14, BITNET_E_CHECKSUM, "index", L.index);
    expect_detail(b, len, L.trailer + 6, BITNET_E_CHECKSUM, "trailer", L.trailer);
    expect_detail(b, len, 8, BITNET_E_VERSION, "file header", 8);
    expect_detail(b, len, 3, BITNET_E_FORMAT, "bad magic", 0);
    expect_detail(b, len, L.rec[3] + 1, BITNET_E_FORMAT, "unknown record tag", L.rec[3]);
    free(b);
}

/* Structural rules that a CRC cannot catch: the bytes are changed and their
 * CRC recomputed, as a buggy or hostile writer would. */
static void recrc(uint8_t *b, size_t from, size_t to)
{
    st32(b + to, (uint32_t)crc32(0, b + from, (uInt)(to - from)));
}

static bitnet_status scan_expect(const uint8_t *b, size_t len, const char *want)
{
    bitnet_status st = scan(b, len);
    if (!strstr(bitnet_error_detail(), want)) fail_msg("detail '%s' lacks '%s'", bitnet_error_detail(), want);
    return st;
}

static void test_structure_checks(void **state)
{
    size_t len;
    layout L;
    (void)state;
    uint8_t *g = good_file(6, 0, &len), *b = malloc(len);
    walk(g, len, &L);
    size_t idx_crc = L.trailer - 4, nl = 15; /* entry 0: "layers.0.weight" */

    memcpy(b, g, len); /* index entry 0 points one byte off */
    st64(b + L.index + 12 + 2 + nl, L.rec[0] + 1);
    recrc(b, L.index, idx_crc);
    assert_int_equal(scan_expect(b, len, "entries do not match"), BITNET_E_FORMAT);
    assert_int_equal(seek_mem(b, len, "layers.0.weight"), BITNET_E_FORMAT);

    memcpy(b, g, len); /* trailer: wrong tensor count, wrong index offset */
    st64(b + L.trailer + 12, N_GOOD + 1);
    recrc(b, L.trailer, L.trailer + 28);
    assert_int_equal(scan_expect(b, len, "tensor count 9"), BITNET_E_FORMAT);
    memcpy(b, g, len);
    st64(b + L.trailer + 4, 0);
    recrc(b, L.trailer, L.trailer + 28);
    assert_int_equal(scan_expect(b, len, "index offset 0"), BITNET_E_FORMAT);

    memcpy(b, g, len); /* header flags */
    b[12] = 1;
    recrc(b, 0, L.header_end - 4);
    assert_int_equal(scan_expect(b, len, "unknown flags"), BITNET_E_FORMAT);

    memcpy(b, g, len); /* tensor 0: payload bytes disagree with the shape */
    size_t body = L.rec[0] + 8, pl = body + 10 + nl + 16;
    st64(b + pl, 81);
    recrc(b, L.rec[0], L.data[0] - 4);
    assert_int_equal(scan_expect(b, len, "the shape implies 80"), BITNET_E_FORMAT);

    memcpy(b, g, len); /* tensor 0: a chunk's raw length */
    st32(b + L.data[0], 79);
    recrc(b, L.data[0], L.data[0] + 16);
    assert_int_equal(scan_expect(b, len, "chunk 0 holds 79 bytes, expected 80"), BITNET_E_FORMAT);

    free(g);
    free(b);
    static const uint64_t d[] = {3};
    bitnet_tensor ts[2];
    make_tensor(&ts[0], "aa", BITNET_F32, 1, d, BITNET_SCALE_NONE, 0, 0);
    make_tensor(&ts[1], "bb", BITNET_F32, 1, d, BITNET_SCALE_NONE, 0, 0);
    bitnet_bnt_writer_opts o = {0, 4096, 1, 1};
    b = write_mem(ts, 2, &o, NULL, &len);
    walk(b, len, &L);
    memcpy(b + L.rec[1] + 10, "aa", 2);
    recrc(b, L.rec[1], L.data[1] - 4);
    assert_int_equal(scan_expect(b, len, "duplicate tensor name"), BITNET_E_FORMAT);
    free(b);
    free_tensors(ts, 2);
}

/* ---- the golden corpus ------------------------------------------------------ */

typedef struct {
    const char *name;
    const char *status;
    const char *detail;
} corpus_entry;

static const struct {
    const char *name;
    bitnet_status st;
} status_names[] = {
    {"BITNET_OK", BITNET_OK},           {"BITNET_E_FORMAT", BITNET_E_FORMAT},
    {"BITNET_E_VERSION", BITNET_E_VERSION}, {"BITNET_E_CHECKSUM", BITNET_E_CHECKSUM},
    {"BITNET_E_TRUNCATED", BITNET_E_TRUNCATED}, {"BITNET_E_LIMIT", BITNET_E_LIMIT},
};

static int save(const char *dir, const char *name, const uint8_t *b, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    return 0;
}

static int regen(const char *dir)
{
    size_t len, n;
    layout L;
    uint8_t *b = good_file(6, 0, &len), *c = malloc(len + 64), *a = malloc(1 << 16);
    int bad = 0;
    FILE *ex;
    char path[4096];
    walk(b, len, &L);
    snprintf(path, sizeof path, "%s/EXPECTED", dir);
    if (!(ex = fopen(path, "w"))) return 1;
    fprintf(ex, "# file<TAB>status of a full read<TAB>substring of the detail message (written by hand; see test_bnt.c)\n");
#define OUT(fname, buf, sz, status, detail)                                   \
    do {                                                                      \
        bad |= save(dir, fname, buf, sz);                                     \
        fprintf(ex, "%s\t%s\t%s\n", fname, status, detail);                   \
    } while (0)
#define MUTATE(fname, at, bit, status, detail)                                \
    do {                                                                      \
        memcpy(c, b, len);                                                    \
        c[at] ^= (uint8_t)(1u << (bit));                                      \
        OUT(fname, c, len, status, detail);                                   \
    } while (0)
    OUT("good.bnt", b, len, "BITNET_OK", "");
    uint8_t *g = good_file(0, 0, &n);
    OUT("good_stored.bnt", g, n, "BITNET_OK", "");
    free(g);
    g = good_file(9, 1, &n);
    OUT("good_noindex.bnt", g, n, "BITNET_OK", "");
    free(g);
    g = write_mem(NULL, 0, NULL, NULL, &n);
    OUT("good_empty.bnt", g, n, "BITNET_OK", "");
    free(g);
    OUT("empty.bnt", b, 0, "BITNET_E_TRUNCATED", "file header at byte 0");
    OUT("trunc_header.bnt", b, 20, "BITNET_E_TRUNCATED", "file header at byte 20");
    OUT("trunc_tensor_header.bnt", b, L.rec[1] + 20, "BITNET_E_TRUNCATED", "tensor #1 header");
    OUT("trunc_data.bnt", b, L.data[6] + 100, "BITNET_E_TRUNCATED", "tensor 'big.compressible'");
    OUT("trunc_at_record.bnt", b, L.index, "BITNET_E_TRUNCATED", "file ends before the trailer");
    OUT("trunc_trailer.bnt", b, len - 10, "BITNET_E_TRUNCATED", "trailer");
    memcpy(c, b, len);
    c[1] = 'b';
    OUT("bad_magic.bnt", c, len, "BITNET_E_FORMAT", "bad magic");
    MUTATE("bad_version.bnt", 8, 1, "BITNET_E_VERSION", "format version 3.0");
    MUTATE("flip_meta.bnt", 40, 0, "BITNET_E_CHECKSUM", "file header at byte");
    MUTATE("flip_tensor_header.bnt", L.rec[3] + 20, 5, "BITNET_E_CHECKSUM", "tensor #3 header");
    MUTATE("flip_data_raw.bnt", L.data[0] + 20 + 7, 3, "BITNET_E_CHECKSUM", "tensor 'layers.0.weight' at byte");
    MUTATE("flip_data_deflate.bnt", L.data[6] + 20 + 5, 6, "BITNET_E_CHECKSUM", "chunk 0 stored data CRC mismatch");
    MUTATE("flip_chunk_header.bnt", L.data[7] + 1, 0, "BITNET_E_CHECKSUM", "chunk 0 header CRC mismatch");
    MUTATE("flip_index.bnt", L.index + 30, 2, "BITNET_E_CHECKSUM", "index at byte");
    MUTATE("flip_trailer.bnt", L.trailer + 13, 7, "BITNET_E_CHECKSUM", "trailer at byte");
    MUTATE("flip_end_magic.bnt", len - 1, 0, "BITNET_E_FORMAT", "bad end magic");
    MUTATE("unknown_tag.bnt", L.rec[5], 5, "BITNET_E_FORMAT", "unknown record tag");
    memcpy(c, b, len);
    memcpy(c + len, "junk", 4);
    OUT("trailing_garbage.bnt", c, len + 4, "BITNET_E_FORMAT", "data after the trailer");
    static const char *const absurd[] = {"absurd_dims.bnt", "absurd_rank.bnt", "absurd_name.bnt", "absurd_header_len.bnt",
                                         "absurd_meta_len.bnt", "absurd_chunk.bnt", "absurd_index_count.bnt",
                                         "absurd_header_len_65537.bnt"};
    static const char *const absurd_msg[] = {"tensor 'huge' at byte 32: more than 2^48 elements", "rank 9 exceeds 8", "name of 1025 bytes exceeds",
                                             "header of 1073741824 bytes exceeds", "metadata of 4294967295 bytes",
                                             "chunk size 1073741824 not in", "index at byte 32: 1099511627776 entries",
                                             "header of 65537 bytes exceeds 65536"};
    for (int i = 0; i < 8; i++) {
        n = absurd_file(a, i);
        OUT(absurd[i], a, n, "BITNET_E_LIMIT", absurd_msg[i]);
    }
    fclose(ex);
    free(a);
    free(b);
    free(c);
    return bad;
}

static void test_corpus(void **state)
{
    const char *td = getenv("BITNET_TESTDATA");
    char path[4096], line[1024];
    size_t checked = 0, good = 0;
    bitnet_tensor ts[N_GOOD];
    (void)state;
    snprintf(path, sizeof path, "%s/bnt/EXPECTED", td ? td : "testdata");
    FILE *ex = fopen(path, "r");
    if (!ex) fail_msg("cannot open %s", path);
    good_tensors(ts);
    while (fgets(line, sizeof line, ex)) {
        char *name = line, *status = NULL, *detail = NULL, *nl;
        if (line[0] == '#' || line[0] == '\n') continue;
        if ((nl = strchr(line, '\n'))) *nl = 0;
        if (!(status = strchr(name, '\t')) || !(detail = strchr(status + 1, '\t'))) fail_msg("bad EXPECTED line '%s'", line);
        *status++ = 0;
        *detail++ = 0;
        int want = -1;
        for (size_t i = 0; i < sizeof status_names / sizeof status_names[0]; i++)
            if (strcmp(status, status_names[i].name) == 0) want = (int)status_names[i].st;
        if (want < 0) fail_msg("unknown status '%s'", status);
        snprintf(path, sizeof path, "%s/bnt/%s", td ? td : "testdata", name);
        FILE *f = fopen(path, "rb");
        if (!f) fail_msg("cannot open %s", path);
        uint8_t *b = malloc(1 << 20);
        size_t n = fread(b, 1, 1 << 20, f);
        fclose(f);
        bitnet_status st = scan(b, n);
        if ((int)st != want || !strstr(bitnet_error_detail(), detail))
            fail_msg("%s: got %s '%s', want %s '%s'", name, bitnet_strerror(st), st ? bitnet_error_detail() : "", status, detail);
        /* good files hold exactly the tensors of good_tensors(): the format did not drift */
        if (want == BITNET_OK && strcmp(name, "good_empty.bnt") != 0) {
            check_file(b, n, ts, N_GOOD, NULL, 0);
            good++;
        }
        free(b);
        checked++;
    }
    fclose(ex);
    free_tensors(ts, N_GOOD);
    print_message("# %zu corpus files checked (%zu good with content)\n", checked, good);
    assert_true(checked >= 30);
    assert_int_equal(good, 3);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--regen") == 0) return regen(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_dtypes), cmocka_unit_test(test_ranks),
        cmocka_unit_test(test_chunk_boundaries), cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_writer_misuse),    cmocka_unit_test(test_odd_pieces),
        cmocka_unit_test(test_pipe),             cmocka_unit_test(test_prefixed),
        cmocka_unit_test(test_seek),             cmocka_unit_test(test_threads_identical),
        cmocka_unit_test(test_limits),           cmocka_unit_test(test_every_bitflip),
        cmocka_unit_test(test_every_truncation), cmocka_unit_test(test_error_details),
        cmocka_unit_test(test_structure_checks),
        cmocka_unit_test(test_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
