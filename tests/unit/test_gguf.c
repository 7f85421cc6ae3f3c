/* test_gguf.c - GGUF read/write against files written by the gguf Python
 * package (testdata/gguf/make.py) and values numpy stored next to them:
 * every plain type, TQ2_0/TQ1_0 codes and block scales, I2_S, versions 1
 * and 2, info order on files and offset order on pipes, GGUF -> .bnt -> GGUF
 * byte for byte (metadata of every type included), the metadata text codec,
 * the writer's refusals and the f16 scale rounding it reports, and that
 * duplicate names are found in n log n time (200k keys and tensors). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bitnet.h"

static char path_buf[4096];
static const char *td(const char *rel)
{
    const char *root = getenv("BITNET_TESTDATA");
    snprintf(path_buf, sizeof path_buf, "%s/gguf/%s", root ? root : "testdata", rel);
    return path_buf;
}

static void load_npy(const char *rel, bitnet_tensor *t)
{
    FILE *f = fopen(td(rel), "rb");
    assert_non_null(f);
    assert_int_equal(bitnet_npy_read(f, NULL, 0, t), BITNET_OK);
    fclose(f);
}

static bitnet_reader *open_reader(const char *rel, FILE **f)
{
    bitnet_reader *r = NULL;
    *f = fopen(td(rel), "rb");
    assert_non_null(*f);
    assert_int_equal(bitnet_reader_create(&r, *f, BITNET_FMT_AUTO), BITNET_OK);
    assert_int_equal(bitnet_reader_format(r), BITNET_FMT_GGUF);
    return r;
}

static void expect_same_shape(const bitnet_tensor_info *a, const bitnet_tensor_info *b)
{
    assert_int_equal(a->rank, b->rank);
    for (uint32_t i = 0; i < a->rank; i++) assert_int_equal(a->dims[i], b->dims[i]);
}

/* Every plain tensor of types.gguf equals numpy's copy of its data. */
static void test_plain_types(void **state)
{
    (void)state;
    static const char *names[] = {"f32", "f16", "f64", "i8", "i16", "i32", "i64", "f32_3d", "bf16"};
    static const bitnet_dtype want[] = {BITNET_F32, BITNET_F16, BITNET_F64, BITNET_I8, BITNET_I16,
                                        BITNET_I32, BITNET_I64, BITNET_F32, BITNET_BF16};
    FILE *f;
    bitnet_reader *r = open_reader("types.gguf", &f);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        bitnet_tensor t, e;
        char rel[64];
        uint64_t n, bytes;
        assert_int_equal(bitnet_reader_find(r, names[i], &t), BITNET_OK);
        assert_int_equal(t.info.dtype, want[i]);
        snprintf(rel, sizeof rel, "expected/%s.npy", names[i]);
        load_npy(rel, &e);
        expect_same_shape(&t.info, &e.info);
        assert_int_equal(bitnet_tensor_elements(&t.info, &n), BITNET_OK);
        if (want[i] == BITNET_BF16) { /* numpy has no bf16: it stored the f32 values */
            float *x = malloc(n * sizeof *x);
            assert_int_equal(bitnet_cast(BITNET_BF16, t.data, BITNET_F32, x, n), BITNET_OK);
            assert_memory_equal(x, e.data, n * sizeof *x);
            free(x);
        } else {
            assert_int_equal(e.info.dtype, want[i]);
            assert_int_equal(bitnet_tensor_data_bytes(&t.info, &bytes), BITNET_OK);
            assert_memory_equal(t.data, e.data, bytes);
        }
        bitnet_tensor_release(&t);
        bitnet_tensor_release(&e);
    }
    bitnet_reader_free(r);
    fclose(f);
}

/* A ternary tensor: codes q and per-block scales d as numpy stored them. */
static void expect_ternary(const char *file, const char *name, const char *qrel, const char *drel, bitnet_dtype dt,
                           bitnet_scale_kind sk)
{
    FILE *f;
    bitnet_reader *r = open_reader(file, &f);
    bitnet_tensor t, q, d;
    uint64_t rows, cols, ns;
    assert_int_equal(bitnet_reader_find(r, name, &t), BITNET_OK);
    load_npy(qrel, &q);
    load_npy(drel, &d);
    assert_int_equal(t.info.dtype, dt);
    assert_int_equal(t.info.scale_kind, sk);
    if (sk == BITNET_SCALE_GROUP) assert_int_equal(t.info.group, 256);
    expect_same_shape(&t.info, &q.info);
    bitnet_tensor_rows_cols(&t.info, &rows, &cols);
    int8_t *codes = malloc(rows * cols);
    assert_int_equal(dt == BITNET_T2 ? bitnet_t2_unpack(t.data, rows, cols, codes) : bitnet_t3_unpack(t.data, rows, cols, codes),
                     BITNET_OK);
    assert_memory_equal(codes, q.data, rows * cols);
    assert_int_equal(bitnet_tensor_n_scales(&t.info, &ns), BITNET_OK);
    assert_int_equal(bitnet_tensor_elements(&d.info, &rows), BITNET_OK);
    assert_int_equal(ns, rows);
    assert_memory_equal(t.scales, d.data, ns * sizeof(float));
    free(codes);
    bitnet_tensor_release(&t);
    bitnet_tensor_release(&q);
    bitnet_tensor_release(&d);
    bitnet_reader_free(r);
    fclose(f);
}

static void test_tq2_0(void **state)
{
    (void)state;
    expect_ternary("types.gguf", "tq2", "expected/tq2_q.npy", "expected/tq2_d.npy", BITNET_T2, BITNET_SCALE_GROUP);
}

static void test_tq1_0(void **state)
{
    (void)state;
    expect_ternary("types.gguf", "tq1", "expected/tq1_q.npy", "expected/tq1_d.npy", BITNET_T3, BITNET_SCALE_GROUP);
}

static void test_i2_s(void **state)
{
    (void)state;
    expect_ternary("i2s.gguf", "i2s", "expected/i2s_q.npy", "expected/i2s_d.npy", BITNET_T2, BITNET_SCALE_TENSOR);
}

static void test_old_versions(void **state)
{
    (void)state;
    for (int v = 1; v <= 2; v++) {
        char rel[32];
        FILE *f;
        bitnet_tensor t, e;
        snprintf(rel, sizeof rel, "v%d.gguf", v);
        bitnet_reader *r = open_reader(rel, &f);
        assert_int_equal(bitnet_gguf_reader_version(bitnet_reader_gguf(r)), (unsigned)v);
        assert_int_equal(bitnet_reader_meta_count(r), 2);
        assert_string_equal(bitnet_reader_meta_key(r, 1), "gguf:t.arr");
        assert_string_equal(bitnet_reader_meta_value(r, 1), "arr:str:2:[\"x\",\"yz\"]");
        assert_int_equal(bitnet_reader_next(r, &t), BITNET_OK);
        load_npy("expected/v_f32.npy", &e);
        expect_same_shape(&t.info, &e.info);
        assert_memory_equal(t.data, e.data, 64);
        bitnet_tensor_release(&t);
        assert_int_equal(bitnet_reader_next(r, &t), BITNET_END);
        bitnet_tensor_release(&e);
        bitnet_reader_free(r);
        fclose(f);
    }
}

/* Info order on a file, offset order on a pipe; both reach BITNET_END. */
static void test_order_file_and_pipe(void **state)
{
    (void)state;
    char cmd[4200];
    for (int pipe = 0; pipe < 2; pipe++) {
        FILE *f;
        bitnet_reader *r = NULL;
        bitnet_tensor t;
        if (pipe) {
            snprintf(cmd, sizeof cmd, "cat '%s'", td("order.gguf"));
            f = popen(cmd, "r");
        } else {
            f = fopen(td("order.gguf"), "rb");
        }
        assert_non_null(f);
        assert_int_equal(bitnet_reader_create(&r, f, BITNET_FMT_AUTO), BITNET_OK);
        const char *want[2] = {pipe ? "first" : "second", pipe ? "second" : "first"};
        for (int i = 0; i < 2; i++) {
            assert_int_equal(bitnet_reader_next(r, &t), BITNET_OK);
            assert_string_equal(t.info.name, want[i]);
            float first = strcmp(t.info.name, "first") == 0 ? 0.0f : 100.0f;
            assert_true(((float *)t.data)[0] == first && ((float *)t.data)[7] == first + 7);
            bitnet_tensor_release(&t);
        }
        assert_int_equal(bitnet_reader_next(r, &t), BITNET_END);
        bitnet_reader_free(r);
        if (pipe) pclose(f);
        else fclose(f);
    }
}

/* Reads all of a file into memory. */
static uint8_t *slurp(FILE *f, size_t *n)
{
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    uint8_t *b = malloc((size_t)len + 1);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    *n = (size_t)len;
    return b;
}

/* in -> fmt through the generic reader/writer, metadata included. */
static FILE *copy_through(FILE *in, bitnet_format fmt)
{
    bitnet_reader *r = NULL;
    bitnet_writer *w = NULL;
    bitnet_tensor t;
    bitnet_status st;
    FILE *out = tmpfile();
    assert_non_null(out);
    assert_int_equal(bitnet_reader_create(&r, in, BITNET_FMT_AUTO), BITNET_OK);
    assert_int_equal(bitnet_writer_create(&w, out, fmt, NULL), BITNET_OK);
    for (size_t i = 0; i < bitnet_reader_meta_count(r); i++)
        assert_int_equal(bitnet_writer_meta(w, bitnet_reader_meta_key(r, i), bitnet_reader_meta_value(r, i)), BITNET_OK);
    while ((st = bitnet_reader_next(r, &t)) == BITNET_OK) {
        assert_int_equal(bitnet_writer_put(w, &t), BITNET_OK);
        bitnet_tensor_release(&t);
    }
    assert_int_equal(st, BITNET_END);
    assert_int_equal(bitnet_writer_finish(w), BITNET_OK);
    bitnet_writer_free(w);
    bitnet_reader_free(r);
    rewind(out);
    return out;
}

/* GGUF (written by the package) -> .bnt -> GGUF gives back the same bytes:
 * every metadata type (NaN, nested arrays, string arrays), tensor order,
 * alignment 64, TQ1_0 and TQ2_0 blocks re-encoded from our codes.  (A file
 * whose data order differs from its info order, like order.gguf, comes back
 * with the data in info order: see bitnet-convert(1).) */
static void test_round_trip_bytes(void **state)
{
    (void)state;
    static const char *files[] = {"types.gguf", "tiny.gguf", "v2.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        FILE *f = fopen(td(files[i]), "rb");
        size_t n0, n1;
        assert_non_null(f);
        uint8_t *orig = slurp(f, &n0);
        rewind(f);
        FILE *bnt = copy_through(f, BITNET_FMT_BNT);
        FILE *back = copy_through(bnt, BITNET_FMT_GGUF);
        uint8_t *again = slurp(back, &n1);
        if (i < 2) { /* v2 comes back as v3 (u64 lengths are the same; the version differs) */
            assert_int_equal(n0, n1);
            assert_memory_equal(orig, again, n0);
        } else {
            assert_int_equal(n0, n1);
            assert_int_equal(again[4], 3);
            assert_memory_equal(orig + 8, again + 8, n0 - 8);
        }
        free(orig);
        free(again);
        fclose(back);
        fclose(bnt);
        fclose(f);
    }
}

/* The text form of metadata: what it reads back, what it refuses. */
static void test_meta_text(void **state)
{
    (void)state;
    static const char *ok[] = {"u8:0", "i8:-128", "u16:65535", "i16:-1", "u32:7", "i32:-7", "u64:18446744073709551615",
                               "i64:-9223372036854775808", "f32:1.5", "f64:-2.25", "bool:true", "str:", "str:a:b",
                               "arr:u8:0:", "arr:i32:2:1,-1", "arr:str:1:[\"q\"]", "arr:bool:1:false",
                               "hex:0000000001"};
    static const char *bad[] = {"u8:256", "i8:-129", "u32:-1", "u32:", "u32:1x", "bool:yes", "f32:abc", "nothing",
                                "zz:1", "arr:i32:3:1,2", "arr:i32:1:1,", "arr:str:2:[\"a\"]", "arr:str:1:[1]",
                                "hex:00", "hex:0g000000", "hex:08000000ff00000000000000", "arr:arr:0:"};
    FILE *out = tmpfile();
    bitnet_writer *w = NULL;
    assert_int_equal(bitnet_writer_create(&w, out, BITNET_FMT_GGUF, NULL), BITNET_OK);
    char key[32];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(key, sizeof key, "gguf:k%zu", i);
        assert_int_equal(bitnet_writer_meta(w, key, ok[i]), BITNET_OK);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(key, sizeof key, "gguf:bad%zu", i);
        if (bitnet_writer_meta(w, key, bad[i]) == BITNET_OK) fail_msg("accepted '%s'", bad[i]);
    }
    assert_int_equal(bitnet_writer_meta(w, "plain", "text"), BITNET_OK);
    assert_int_not_equal(bitnet_writer_meta(w, "gguf:k0", "u8:1"), BITNET_OK); /* twice */
    assert_int_equal(bitnet_writer_finish(w), BITNET_OK);
    bitnet_writer_free(w);
    rewind(out);
    bitnet_reader *r = NULL;
    assert_int_equal(bitnet_reader_create(&r, out, BITNET_FMT_AUTO), BITNET_OK);
    size_t n = sizeof ok / sizeof ok[0];
    assert_int_equal(bitnet_reader_meta_count(r), n + 1);
    for (size_t i = 0; i < n; i++) {
        const char *v = bitnet_reader_meta_value(r, i);
        if (strcmp(ok[i], "hex:0000000001") == 0) assert_string_equal(v, "u8:1"); /* has a text form */
        else assert_string_equal(v, ok[i]);
    }
    assert_string_equal(bitnet_reader_meta_key(r, n), "gguf:plain");
    assert_string_equal(bitnet_reader_meta_value(r, n), "str:text");
    bitnet_reader_free(r);
    fclose(out);
}

static void put_expect(bitnet_writer *w, const bitnet_tensor *t, bitnet_status want)
{
    bitnet_status st = bitnet_writer_put(w, t);
    if (st != want) fail_msg("tensor '%s': status %d, wanted %d (%s)", t->info.name, st, want, bitnet_error_detail());
}

/* What GGUF cannot hold is refused with a reason; the f16 scale cost. */
static void test_writer_refusals_and_scale_error(void **state)
{
    (void)state;
    FILE *out = tmpfile();
    bitnet_writer *w = NULL;
    bitnet_tensor t;
    assert_int_equal(bitnet_writer_create(&w, out, BITNET_FMT_GGUF, NULL), BITNET_OK);
    memset(&t, 0, sizeof t);
    strcpy(t.info.name, "u8");
    t.info.dtype = BITNET_U8;
    t.info.rank = 1;
    t.info.dims[0] = 4;
    assert_int_equal(bitnet_tensor_alloc(&t), BITNET_OK);
    put_expect(w, &t, BITNET_E_DTYPE);
    assert_non_null(strstr(bitnet_error_detail(), "no u8"));
    bitnet_tensor_release(&t);

    memset(&t, 0, sizeof t);
    strcpy(t.info.name, "rank5");
    t.info.dtype = BITNET_F32;
    t.info.rank = 5;
    for (int i = 0; i < 5; i++) t.info.dims[i] = 1;
    assert_int_equal(bitnet_tensor_alloc(&t), BITNET_OK);
    put_expect(w, &t, BITNET_E_SHAPE);
    bitnet_tensor_release(&t);

    memset(&t, 0, sizeof t); /* rows of 128: TQ blocks are 256 */
    strcpy(t.info.name, "short");
    t.info.dtype = BITNET_T2;
    t.info.rank = 2;
    t.info.dims[0] = 2;
    t.info.dims[1] = 128;
    t.info.scale_kind = BITNET_SCALE_TENSOR;
    assert_int_equal(bitnet_tensor_alloc(&t), BITNET_OK);
    memset(t.data, 0x55, bitnet_t2_row_bytes(128) * 2);
    t.scales[0] = 1;
    put_expect(w, &t, BITNET_E_SHAPE);
    bitnet_tensor_release(&t);

    memset(&t, 0, sizeof t); /* groups of 128 straddle a block */
    strcpy(t.info.name, "g128");
    t.info.dtype = BITNET_T2;
    t.info.rank = 2;
    t.info.dims[0] = 1;
    t.info.dims[1] = 256;
    t.info.scale_kind = BITNET_SCALE_GROUP;
    t.info.group = 128;
    assert_int_equal(bitnet_tensor_alloc(&t), BITNET_OK);
    memset(t.data, 0x55, 64);
    t.scales[0] = t.scales[1] = 1;
    put_expect(w, &t, BITNET_E_UNSUPPORTED);
    bitnet_tensor_release(&t);

    memset(&t, 0, sizeof t); /* per-row scales; one too large for an f16 */
    strcpy(t.info.name, "rows");
    t.info.dtype = BITNET_T2;
    t.info.rank = 2;
    t.info.dims[0] = 2;
    t.info.dims[1] = 256;
    t.info.scale_kind = BITNET_SCALE_ROW;
    assert_int_equal(bitnet_tensor_alloc(&t), BITNET_OK);
    memset(t.data, 0x55, 128);
    t.scales[0] = 0.1f;
    t.scales[1] = 0.5f;
    double rel;
    assert_int_equal(bitnet_gguf_scale_error(&t, &rel), BITNET_OK);
    /* f16(0.1) = 0.0999755859375; 0.1f = 0.100000001490116... */
    double want = (0.100000001490116119384765625 - 0.0999755859375) / 0.100000001490116119384765625;
    assert_true(fabs(rel - want) < 1e-12);
    put_expect(w, &t, BITNET_OK);
    strcpy(t.info.name, "huge");
    t.scales[1] = 70000.0f;
    put_expect(w, &t, BITNET_E_NUMERIC);
    bitnet_tensor_release(&t);
    assert_int_equal(bitnet_writer_finish(w), BITNET_OK);
    bitnet_writer_free(w);

    /* what was written reads back: codes 1 (q = 0), scales f16(0.1), 0.5 */
    rewind(out);
    bitnet_reader *r = NULL;
    assert_int_equal(bitnet_reader_create(&r, out, BITNET_FMT_AUTO), BITNET_OK);
    assert_int_equal(bitnet_reader_next(r, &t), BITNET_OK);
    assert_string_equal(t.info.name, "rows");
    assert_int_equal(t.info.scale_kind, BITNET_SCALE_GROUP);
    assert_true(t.scales[0] == 0.0999755859375f && t.scales[1] == 0.5f);
    for (int i = 0; i < 128; i++) assert_int_equal(((uint8_t *)t.data)[i], 0x55);
    bitnet_tensor_release(&t);
    assert_int_equal(bitnet_reader_next(r, &t), BITNET_END);
    bitnet_reader_free(r);
    fclose(out);
}

/* T3 -> TQ1_0 -> T3 keeps every code: random codes, awkward row counts. */
static void test_tq1_codes_random(void **state)
{
    (void)state;
    static const uint64_t rows_list[] = {1, 3, 17};
    srand(14);
    for (size_t k = 0; k < 3; k++) {
        uint64_t rows = rows_list[k], cols = 768;
        int8_t *q = malloc(rows * cols), *back = malloc(rows * cols);
        for (uint64_t i = 0; i < rows * cols; i++) q[i] = (int8_t)(rand() % 3 - 1);
        bitnet_tensor t;
        memset(&t, 0, sizeof t);
        strcpy(t.info.name, "w");
        t.info.dtype = BITNET_T3;
        t.info.rank = 2;
        t.info.dims[0] = rows;
        t.info.dims[1] = cols;
        t.info.scale_kind = BITNET_SCALE_TENSOR;
        assert_int_equal(bitnet_tensor_alloc(&t), BITNET_OK);
        assert_int_equal(bitnet_t3_pack(q, rows, cols, t.data), BITNET_OK);
        t.scales[0] = 0.25f;
        FILE *out = tmpfile();
        bitnet_writer *w = NULL;
        assert_int_equal(bitnet_writer_create(&w, out, BITNET_FMT_GGUF, NULL), BITNET_OK);
        assert_int_equal(bitnet_writer_put(w, &t), BITNET_OK);
        assert_int_equal(bitnet_writer_finish(w), BITNET_OK);
        bitnet_writer_free(w);
        bitnet_tensor_release(&t);
        rewind(out);
        bitnet_reader *r = NULL;
        assert_int_equal(bitnet_reader_create(&r, out, BITNET_FMT_AUTO), BITNET_OK);
        const bitnet_gguf_tensor_desc *d = bitnet_gguf_reader_tensor(bitnet_reader_gguf(r), 0);
        assert_non_null(d);
        assert_int_equal(d->type, 34); /* tq1_0 */
        assert_int_equal(d->bytes, rows * 3 * 54);
        assert_int_equal(bitnet_reader_next(r, &t), BITNET_OK);
        assert_int_equal(t.info.dtype, BITNET_T3);
        assert_int_equal(bitnet_t3_unpack(t.data, rows, cols, back), BITNET_OK);
        assert_memory_equal(q, back, rows * cols);
        for (uint64_t i = 0; i < rows * 3; i++) assert_true(t.scales[i] == 0.25f);
        bitnet_tensor_release(&t);
        bitnet_reader_free(r);
        fclose(out);
        free(q);
        free(back);
    }
}

/* ---- many names: duplicates are found without comparing every pair ---------------- */

#define MANY 200000
#define MANY_SECONDS 10.0 /* a pairwise scan takes minutes here; n log n well under a second */

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void put_u32(FILE *f, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    assert_int_equal(fwrite(b, 1, 4, f), 4);
}

static void put_u64(FILE *f, uint64_t v)
{
    put_u32(f, (uint32_t)v);
    put_u32(f, (uint32_t)(v >> 32));
}

/* A GGUF v3 header with MANY u8 keys "key.NNNNNN" and no tensor; key number
 * dup (if < MANY) repeats key 7. */
static FILE *many_keys_file(size_t dup)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(fwrite("GGUF", 1, 4, f), 4);
    put_u32(f, 3);
    put_u64(f, 0);
    put_u64(f, MANY);
    for (size_t i = 0; i < MANY; i++) {
        char key[32];
        int n = snprintf(key, sizeof key, "key.%06zu", i == dup ? (size_t)7 : i);
        put_u64(f, (uint64_t)n);
        assert_int_equal(fwrite(key, 1, (size_t)n, f), (size_t)n);
        put_u32(f, 0); /* u8 */
        assert_int_equal(fputc((int)(i & 0xff), f), (int)(i & 0xff));
    }
    long pad = (32 - ftell(f) % 32) % 32;
    for (long i = 0; i < pad; i++) fputc(0, f);
    rewind(f);
    return f;
}

static void test_many_keys_read(void **state)
{
    (void)state;
    FILE *f = many_keys_file(MANY);
    bitnet_gguf_reader *g = NULL;
    double t0 = seconds();
    assert_int_equal(bitnet_gguf_reader_create(&g, f, NULL, 0), BITNET_OK);
    double dt = seconds() - t0;
    if (dt > MANY_SECONDS) fail_msg("%d keys took %.1f s to read", MANY, dt);
    assert_int_equal(bitnet_gguf_reader_meta_count(g), MANY);
    assert_string_equal(bitnet_gguf_reader_meta_key(g, MANY - 1), "key.199999");
    bitnet_gguf_reader_free(g);
    fclose(f);

    f = many_keys_file(150000); /* key.000007 again, far from the first */
    t0 = seconds();
    assert_int_equal(bitnet_gguf_reader_create(&g, f, NULL, 0), BITNET_E_FORMAT);
    dt = seconds() - t0;
    if (dt > MANY_SECONDS) fail_msg("%d keys with a duplicate took %.1f s to refuse", MANY, dt);
    assert_null(g);
    if (!strstr(bitnet_error_detail(), "key 'key.000007'") || !strstr(bitnet_error_detail(), "appears twice"))
        fail_msg("the message does not name the key: %s", bitnet_error_detail());
    fclose(f);
}

static void test_many_names_write(void **state)
{
    (void)state;
    FILE *out = tmpfile();
    bitnet_writer *w = NULL;
    char key[40];
    float one = 1.0f;
    bitnet_tensor t;
    memset(&t, 0, sizeof t);
    t.info.dtype = BITNET_F32;
    t.info.rank = 1;
    t.info.dims[0] = 1;
    t.data = &one;
    assert_int_equal(bitnet_writer_create(&w, out, BITNET_FMT_GGUF, NULL), BITNET_OK);
    double t0 = seconds();
    for (size_t i = 0; i < MANY; i++) {
        snprintf(key, sizeof key, "gguf:key.%06zu", i);
        assert_int_equal(bitnet_writer_meta(w, key, "u8:1"), BITNET_OK);
        snprintf(t.info.name, sizeof t.info.name, "t.%06zu", i);
        assert_int_equal(bitnet_writer_put(w, &t), BITNET_OK);
    }
    double dt = seconds() - t0;
    if (dt > MANY_SECONDS) fail_msg("%d keys and tensors took %.1f s to write", MANY, dt);
    assert_int_equal(bitnet_writer_meta(w, "gguf:key.000007", "u8:2"), BITNET_E_INVALID);
    assert_non_null(strstr(bitnet_error_detail(), "'key.000007' given twice"));
    snprintf(t.info.name, sizeof t.info.name, "t.000007");
    assert_int_equal(bitnet_writer_put(w, &t), BITNET_E_INVALID);
    assert_non_null(strstr(bitnet_error_detail(), "tensor 't.000007' given twice"));
    assert_int_equal(bitnet_writer_finish(w), BITNET_OK);
    bitnet_writer_free(w);

    /* and read back: every key and tensor, the refused ones not there */
    rewind(out);
    bitnet_gguf_reader *g = NULL;
    t0 = seconds();
    assert_int_equal(bitnet_gguf_reader_create(&g, out, NULL, 0), BITNET_OK);
    dt = seconds() - t0;
    if (dt > MANY_SECONDS) fail_msg("%d keys and tensors took %.1f s to read", MANY, dt);
    assert_int_equal(bitnet_gguf_reader_meta_count(g), MANY);
    assert_int_equal(bitnet_gguf_reader_tensor_count(g), MANY);
    assert_string_equal(bitnet_gguf_reader_tensor(g, MANY - 1)->name, "t.199999");
    bitnet_gguf_reader_free(g);
    fclose(out);
}

/* A ternary tensor with no rows but very long ones has no data: it is written
 * and read back as its shape alone (the writer once asked for a row buffer of
 * the rows' size, here 2^40 codes, and failed; the fuzzer found it). */
static void test_empty_ternary_long_rows(void **state)
{
    (void)state;
    static const bitnet_dtype types[] = {BITNET_T2, BITNET_T3};
    for (size_t k = 0; k < 2; k++) {
        FILE *out = tmpfile();
        bitnet_writer *w = NULL;
        bitnet_reader *r = NULL;
        bitnet_tensor t;
        assert_int_equal(bitnet_writer_create(&w, out, BITNET_FMT_GGUF, NULL), BITNET_OK);
        memset(&t, 0, sizeof t);
        strcpy(t.info.name, "empty");
        t.info.dtype = types[k];
        t.info.scale_kind = BITNET_SCALE_ROW;
        t.info.rank = 2;
        t.info.dims[0] = 0;
        t.info.dims[1] = UINT64_C(1) << 40;
        assert_int_equal(bitnet_tensor_alloc(&t), BITNET_OK);
        put_expect(w, &t, BITNET_OK);
        bitnet_tensor_release(&t);
        assert_int_equal(bitnet_writer_finish(w), BITNET_OK);
        bitnet_writer_free(w);
        rewind(out);
        assert_int_equal(bitnet_reader_create(&r, out, BITNET_FMT_AUTO), BITNET_OK);
        assert_int_equal(bitnet_reader_next(r, &t), BITNET_OK);
        assert_string_equal(t.info.name, "empty");
        assert_int_equal(t.info.dtype, types[k]);
        assert_int_equal(t.info.rank, 2);
        assert_true(t.info.dims[0] == 0 && t.info.dims[1] == UINT64_C(1) << 40);
        bitnet_tensor_release(&t);
        assert_int_equal(bitnet_reader_next(r, &t), BITNET_END);
        bitnet_reader_free(r);
        fclose(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_types),
        cmocka_unit_test(test_tq2_0),
        cmocka_unit_test(test_tq1_0),
        cmocka_unit_test(test_i2_s),
        cmocka_unit_test(test_old_versions),
        cmocka_unit_test(test_order_file_and_pipe),
        cmocka_unit_test(test_round_trip_bytes),
        cmocka_unit_test(test_meta_text),
        cmocka_unit_test(test_writer_refusals_and_scale_error),
        cmocka_unit_test(test_empty_ternary_long_rows),
        cmocka_unit_test(test_tq1_codes_random),
        cmocka_unit_test(test_many_keys_read),
        cmocka_unit_test(test_many_names_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
