/* test_reader.c - the generic reader/writer and format detection; the good
 * and broken corpora of testdata/npy and testdata/safetensors against their
 * EXPECTED files; the real trained weights of testdata/real; which tensors
 * a header lists (has_tensor). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bitnet.h"

static const char *testdata(void)
{
    const char *d = getenv("BITNET_TESTDATA");
    return d && *d ? d : "testdata";
}

static const char *const status_names[BITNET_STATUS_COUNT] = {
    "BITNET_OK", "BITNET_END", "BITNET_E_INVALID", "BITNET_E_NOMEM", "BITNET_E_IO", "BITNET_E_FORMAT",
    "BITNET_E_VERSION", "BITNET_E_CHECKSUM", "BITNET_E_TRUNCATED", "BITNET_E_LIMIT", "BITNET_E_OVERFLOW",
    "BITNET_E_UNSUPPORTED", "BITNET_E_SHAPE", "BITNET_E_DTYPE", "BITNET_E_NOT_FOUND", "BITNET_E_NUMERIC",
    "BITNET_E_DEVICE", "BITNET_E_BUILD", "BITNET_E_DEVICE_MEMORY", "BITNET_E_NO_DEVICE",
};

/* Reads a whole file with the format's own reader: the status, and in `desc`
 * "name [dims], ..." of what was read. */
static bitnet_status read_corpus_file(const char *path, int is_npy, char *desc, size_t size)
{
    FILE *f = fopen(path, "rb");
    bitnet_status st;
    bitnet_tensor t;
    char shape[256];
    size_t used = 0;
    desc[0] = 0;
    if (!f) fail_msg("cannot open %s", path);
    if (is_npy) {
        st = bitnet_npy_read(f, NULL, 0, &t);
        if (!st) {
            snprintf(desc, size, "%s", bitnet_shape_str(&t.info, shape, sizeof shape));
            bitnet_tensor_release(&t);
        }
    } else {
        bitnet_st_reader *r = NULL;
        st = bitnet_st_reader_create(&r, f, NULL, 0);
        while (!st && (st = bitnet_st_reader_next(r, &t)) == BITNET_OK) {
            used += (size_t)snprintf(desc + used, size - used, "%s%s %s", used ? ", " : "", t.info.name,
                                     bitnet_shape_str(&t.info, shape, sizeof shape));
            bitnet_tensor_release(&t);
        }
        if (st == BITNET_END) st = BITNET_OK;
        bitnet_st_reader_free(r);
    }
    fclose(f);
    return st;
}

static void check_corpus(const char *sub, int is_npy)
{
    char path[8192], line[1024], desc[4096];
    snprintf(path, sizeof path, "%s/%s/EXPECTED", testdata(), sub);
    FILE *ex = fopen(path, "r");
    if (!ex) fail_msg("cannot open %s", path);
    int n = 0, bad = 0;
    while (fgets(line, sizeof line, ex)) {
        line[strcspn(line, "\n")] = 0;
        char *file = line, *status = strchr(file, '\t'), *detail = status ? strchr(status + 1, '\t') : NULL;
        if (!status || !detail) fail_msg("bad EXPECTED line: %s", line);
        *status++ = 0;
        *detail++ = 0;
        snprintf(path, sizeof path, "%s/%s/%s", testdata(), sub, file);
        bitnet_error_clear();
        bitnet_status st = read_corpus_file(path, is_npy, desc, sizeof desc);
        const char *got_detail = st == BITNET_OK ? desc : bitnet_error_detail();
        if ((unsigned)st >= BITNET_STATUS_COUNT || strcmp(status_names[st], status) != 0 || !strstr(got_detail, detail)) {
            print_message("# %s: got %s (%s), wanted %s with '%s'\n", file,
                          (unsigned)st < BITNET_STATUS_COUNT ? status_names[st] : "?", got_detail, status, detail);
            bad++;
        }
        n++;
    }
    fclose(ex);
    assert_true(n >= 10);
    assert_int_equal(bad, 0);
}

static void test_npy_corpus(void **state) { (void)state; check_corpus("npy", 1); }
static void test_safetensors_corpus(void **state) { (void)state; check_corpus("safetensors", 0); }

static void test_detect(void **state)
{
    (void)state;
    const uint8_t bnt[9] = {0x89, 'B', 'N', 'T', '\r', '\n', 0x1a, '\n', 1};
    const uint8_t npy[9] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 'v'};
    const uint8_t st[9] = {0x10, 0, 0, 0, 0, 0, 0, 0, '{'};
    const uint8_t st_bad[9] = {0x10, 0, 0, 0, 0, 0, 0, 0, '['};
    const uint8_t st_huge[9] = {0, 0, 0, 0, 0, 0, 0, 1, '{'};
    const uint8_t text[9] = "hello wo";
    assert_int_equal(bitnet_format_detect(bnt, 9), BITNET_FMT_BNT);
    assert_int_equal(bitnet_format_detect(bnt, 7), BITNET_FMT_AUTO);
    assert_int_equal(bitnet_format_detect(npy, 9), BITNET_FMT_NPY);
    assert_int_equal(bitnet_format_detect(st, 9), BITNET_FMT_SAFETENSORS);
    assert_int_equal(bitnet_format_detect(st, 8), BITNET_FMT_SAFETENSORS);
    assert_int_equal(bitnet_format_detect(st_bad, 9), BITNET_FMT_AUTO);
    assert_int_equal(bitnet_format_detect(st_huge, 9), BITNET_FMT_AUTO);
    assert_int_equal(bitnet_format_detect(text, 8), BITNET_FMT_AUTO);
    assert_int_equal(bitnet_format_detect(NULL, 0), BITNET_FMT_AUTO);
    bitnet_format f;
    assert_int_equal(bitnet_format_parse("npy", &f), BITNET_OK);
    assert_int_equal(f, BITNET_FMT_NPY);
    assert_int_equal(bitnet_format_parse("safetensors", &f), BITNET_OK);
    assert_int_equal(f, BITNET_FMT_SAFETENSORS);
    assert_int_equal(bitnet_format_parse("bnt", &f), BITNET_OK);
    assert_int_equal(f, BITNET_FMT_BNT);
    assert_int_equal(bitnet_format_parse("gguf", &f), BITNET_OK);
    assert_int_equal(f, BITNET_FMT_GGUF);
    assert_int_equal(bitnet_format_parse("hdf5", &f), BITNET_E_INVALID);
    const uint8_t gguf[9] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0};
    assert_int_equal(bitnet_format_detect(gguf, 9), BITNET_FMT_GGUF);
    assert_int_equal(bitnet_format_detect(gguf, 3), BITNET_FMT_AUTO);
    assert_string_equal(bitnet_format_name(BITNET_FMT_SAFETENSORS), "safetensors");
    assert_null(bitnet_format_name((bitnet_format)42));
}

/* ---- real weights ---------------------------------------------------------- */

typedef struct { const char *name; uint32_t rank; uint64_t d0, d1; } want_tensor;

static void check_real(const char *file, const want_tensor *want, size_t n_want, size_t n_total)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/real/%s", testdata(), file);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    bitnet_reader *r;
    bitnet_tensor t;
    assert_int_equal(bitnet_reader_create(&r, f, BITNET_FMT_AUTO), BITNET_OK);
    assert_int_equal(bitnet_reader_format(r), BITNET_FMT_SAFETENSORS);
    size_t count = 0, found = 0;
    bitnet_status st;
    while ((st = bitnet_reader_next(r, &t)) == BITNET_OK) {
        count++;
        assert_int_equal(t.info.dtype, BITNET_F32);
        for (size_t i = 0; i < n_want; i++)
            if (strcmp(want[i].name, t.info.name) == 0) {
                found++;
                assert_int_equal(t.info.rank, want[i].rank);
                assert_int_equal(t.info.dims[0], want[i].d0);
                if (want[i].rank > 1) assert_int_equal(t.info.dims[1], want[i].d1);
            }
        /* trained weights: finite, not all zero */
        uint64_t n, nonzero = 0;
        bitnet_tensor_elements(&t.info, &n);
        for (uint64_t i = 0; i < n; i++) {
            float v = ((float *)t.data)[i];
            assert_true(v == v && v - v == 0);
            nonzero += v != 0;
        }
        assert_true(nonzero > 0);
        bitnet_tensor_release(&t);
    }
    assert_int_equal(st, BITNET_END);
    assert_int_equal(found, n_want);
    assert_int_equal(count, n_total);
    bitnet_reader_free(r);
    fclose(f);
}

static void test_real_files(void **state)
{
    (void)state;
    const want_tensor hep[] = {
        {"layers.0.weight", 2, 512, 784}, {"layers.2.weight", 2, 512, 512}, {"layers.4.weight", 2, 512, 512},
        {"layers.6.weight", 2, 10, 512},  {"layers.0.bias", 1, 512, 0},     {"layers.6.bias", 1, 10, 0},
        {"layers.0.norm.weight", 1, 784, 0}, {"layers.0.norm.bias", 1, 784, 0},
    };
    /* 4 layers x (weight, bias, norm weight, norm bias) */
    check_real("hep-bitnet-mnist-b158.safetensors", hep, sizeof hep / sizeof hep[0], 16);
    const want_tensor hepf[] = {
        {"layers.0.weight", 2, 512, 784}, {"layers.3.weight", 2, 512, 512}, {"layers.6.weight", 2, 512, 512},
        {"layers.9.weight", 2, 10, 512},  {"layers.0.bias", 1, 512, 0},     {"layers.9.bias", 1, 10, 0},
    };
    check_real("hep-bitnet-mnist-float.safetensors", hepf, sizeof hepf / sizeof hepf[0], 8);
    const want_tensor jet[] = {
        {"layers.0.weight", 2, 128, 16}, {"layers.1.weight", 2, 32, 128}, {"layers.2.weight", 2, 1, 32},
        {"layers.0.bias", 1, 128, 0},    {"layers.1.bias", 1, 32, 0},     {"layers.2.bias", 1, 1, 0},
    };
    check_real("fastml-jet-b158.safetensors", jet, sizeof jet / sizeof jet[0], 6);
    const want_tensor dfdx[] = {
        {"0.0.weight", 2, 512, 784}, {"1.0.weight", 2, 128, 512}, {"2.0.weight", 2, 32, 128}, {"3.weight", 2, 10, 32},
        {"0.0.bias", 1, 512, 0},     {"1.0.bias", 1, 128, 0},     {"2.0.bias", 1, 32, 0},     {"3.bias", 1, 10, 0},
    };
    check_real("dfdx-mnist-mlp.safetensors", dfdx, sizeof dfdx / sizeof dfdx[0], 8);
}

/* ---- the generic writer ---------------------------------------------------------- */

static void make_tensor(bitnet_tensor *t, const char *name, bitnet_dtype dt, uint64_t rows, uint64_t cols)
{
    memset(t, 0, sizeof *t);
    snprintf(t->info.name, sizeof t->info.name, "%s", name);
    t->info.dtype = dt;
    t->info.rank = 2;
    t->info.dims[0] = rows;
    t->info.dims[1] = cols;
    assert_int_equal(bitnet_tensor_alloc(t), BITNET_OK);
    uint64_t nb;
    bitnet_tensor_data_bytes(&t->info, &nb);
    for (uint64_t i = 0; i < nb; i++) ((uint8_t *)t->data)[i] = (uint8_t)(i % 7); /* compressible */
}

static FILE *reopen_as_pipe(FILE *f)
{
    int fds[2];
    char buf[65536];
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf, f);
    assert_true(n < sizeof buf);
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], buf, n), (ssize_t)n);
    close(fds[1]);
    return fdopen(fds[0], "rb");
}

static void test_writer_round_trip(void **state)
{
    (void)state;
    const bitnet_format fmts[] = {BITNET_FMT_BNT, BITNET_FMT_SAFETENSORS};
    bitnet_tensor a, b, c;
    make_tensor(&a, "layers.0.weight", BITNET_F32, 30, 17);
    make_tensor(&b, "layers.0.bias", BITNET_I16, 1, 30);
    make_tensor(&c, "emb", BITNET_BF16, 4, 8);
    for (size_t k = 0; k < 2; k++)
        for (int pipe_in = 0; pipe_in < 2; pipe_in++) {
            FILE *f = tmpfile();
            bitnet_writer *w;
            assert_int_equal(bitnet_writer_create(&w, f, fmts[k], NULL), BITNET_OK);
            assert_int_equal(bitnet_writer_meta(w, "source", "unit test"), BITNET_OK);
            assert_int_equal(bitnet_writer_put(w, &a), BITNET_OK);
            assert_int_equal(bitnet_writer_put(w, &b), BITNET_OK);
            assert_int_equal(bitnet_writer_put(w, &c), BITNET_OK);
            assert_int_equal(bitnet_writer_finish(w), BITNET_OK);
            bitnet_writer_free(w);
            FILE *in = pipe_in ? reopen_as_pipe(f) : f;
            rewind(in);
            bitnet_reader *r;
            bitnet_tensor t;
            assert_int_equal(bitnet_reader_create(&r, in, BITNET_FMT_AUTO), BITNET_OK);
            assert_int_equal(bitnet_reader_format(r), fmts[k]);
            int has_meta = 0;
            for (size_t i = 0; i < bitnet_reader_meta_count(r); i++)
                if (strcmp(bitnet_reader_meta_key(r, i), "source") == 0)
                    has_meta = strcmp(bitnet_reader_meta_value(r, i), "unit test") == 0;
            assert_true(has_meta);
            /* find a later tensor first (seeks in an indexed .bnt, scans otherwise) */
            assert_int_equal(bitnet_reader_find(r, "layers.0.bias", &t), BITNET_OK);
            assert_int_equal(t.info.dtype, BITNET_I16);
            assert_memory_equal(t.data, b.data, 60);
            assert_true(bitnet_reader_stored_bytes(r) > 0);
            bitnet_tensor_release(&t);
            if (!pipe_in && k == 0) { /* seek back in an indexed .bnt */
                assert_int_equal(bitnet_reader_find(r, "layers.0.weight", &t), BITNET_OK);
                assert_memory_equal(t.data, a.data, 30 * 17 * 4);
                /* compressible data: fewer bytes stored than raw */
                assert_true(bitnet_reader_stored_bytes(r) < 30 * 17 * 4);
                bitnet_tensor_release(&t);
            }
            assert_int_equal(bitnet_reader_find(r, "emb", &t), BITNET_OK);
            assert_memory_equal(t.data, c.data, 64);
            bitnet_tensor_release(&t);
            assert_int_equal(bitnet_reader_find(r, "nope", &t), BITNET_E_NOT_FOUND);
            bitnet_reader_free(r);
            if (in != f) fclose(in);
            fclose(f);
        }
    bitnet_tensor_release(&a);
    bitnet_tensor_release(&b);
    bitnet_tensor_release(&c);
}

static void test_writer_npy_and_refusals(void **state)
{
    (void)state;
    bitnet_tensor a, q, t;
    make_tensor(&a, "x", BITNET_F64, 3, 3);
    FILE *f = tmpfile();
    bitnet_writer *w;
    assert_int_equal(bitnet_writer_create(&w, f, BITNET_FMT_NPY, NULL), BITNET_OK);
    assert_int_equal(bitnet_writer_meta(w, "ignored", "npy has no metadata"), BITNET_OK);
    assert_int_equal(bitnet_writer_finish(w), BITNET_E_INVALID); /* no tensor */
    bitnet_writer_free(w);
    assert_int_equal(bitnet_writer_create(&w, f, BITNET_FMT_NPY, NULL), BITNET_OK);
    assert_int_equal(bitnet_writer_put(w, &a), BITNET_OK);
    assert_int_equal(bitnet_writer_put(w, &a), BITNET_E_INVALID);
    assert_non_null(strstr(bitnet_error_detail(), "exactly one tensor"));
    assert_int_equal(bitnet_writer_finish(w), BITNET_OK);
    bitnet_writer_free(w);
    rewind(f);
    bitnet_reader *r;
    assert_int_equal(bitnet_reader_create(&r, f, BITNET_FMT_AUTO), BITNET_OK);
    assert_int_equal(bitnet_reader_format(r), BITNET_FMT_NPY);
    assert_int_equal(bitnet_reader_next(r, &t), BITNET_OK);
    assert_memory_equal(t.data, a.data, 72);
    bitnet_tensor_release(&t);
    assert_int_equal(bitnet_reader_next(r, &t), BITNET_END);
    bitnet_reader_free(r);
    fclose(f);

    /* ternary tensors must be dequantized before npy/safetensors */
    memset(&q, 0, sizeof q);
    strcpy(q.info.name, "w");
    q.info.dtype = BITNET_T2;
    q.info.rank = 2;
    q.info.dims[0] = 2;
    q.info.dims[1] = 5;
    q.info.scale_kind = BITNET_SCALE_ROW;
    assert_int_equal(bitnet_tensor_alloc(&q), BITNET_OK);
    const bitnet_format fmts[] = {BITNET_FMT_NPY, BITNET_FMT_SAFETENSORS};
    for (int k = 0; k < 2; k++) {
        f = tmpfile();
        assert_int_equal(bitnet_writer_create(&w, f, fmts[k], NULL), BITNET_OK);
        assert_int_equal(bitnet_writer_put(w, &q), BITNET_E_DTYPE);
        assert_non_null(strstr(bitnet_error_detail(), "bitnet-convert --dtype f32"));
        bitnet_writer_free(w);
        fclose(f);
    }
    bitnet_tensor_release(&q);
    bitnet_tensor_release(&a);

    /* a .npy stream ends with its data: trailing bytes are an error */
    char path[4096];
    snprintf(path, sizeof path, "%s/npy/good_f32_v1.npy", testdata());
    FILE *src = fopen(path, "rb");
    assert_non_null(src);
    f = tmpfile();
    int ch;
    while ((ch = fgetc(src)) != EOF) fputc(ch, f);
    fclose(src);
    fputc('!', f);
    rewind(f);
    assert_int_equal(bitnet_reader_create(&r, f, BITNET_FMT_AUTO), BITNET_OK);
    assert_int_equal(bitnet_reader_next(r, &t), BITNET_OK);
    bitnet_tensor_release(&t);
    assert_int_equal(bitnet_reader_next(r, &t), BITNET_E_FORMAT);
    assert_non_null(strstr(bitnet_error_detail(), "trailing bytes"));
    bitnet_reader_free(r);
    /* an explicit format overrides the magic bytes */
    rewind(f);
    assert_int_equal(bitnet_reader_create(&r, f, BITNET_FMT_SAFETENSORS), BITNET_E_LIMIT);
    rewind(f);
    assert_int_equal(bitnet_reader_create(&r, f, BITNET_FMT_BNT), BITNET_E_FORMAT);
    fclose(f);

    /* unknown and empty inputs */
    const char junk[] = "this is not a tensor file";
    f = fmemopen((void *)junk, sizeof junk, "rb");
    assert_int_equal(bitnet_reader_create(&r, f, BITNET_FMT_AUTO), BITNET_E_FORMAT);
    assert_non_null(strstr(bitnet_error_detail(), "unknown format"));
    fclose(f);
    f = tmpfile();
    assert_int_equal(bitnet_reader_create(&r, f, BITNET_FMT_AUTO), BITNET_E_TRUNCATED);
    fclose(f);
}

/* has_tensor: what the header lists (safetensors, GGUF), "not known" else. */
static void test_has_tensor(void **state)
{
    (void)state;
    static const struct { const char *file, *yes, *no; int known; } cases[] = {
        {"hf/bitnet-tiny.safetensors", "layers.0.proj.weight_scale", "token_ids_scale", 1},
        {"gguf/tiny.gguf", "b", "c", 1},
        {"npy/good_f32_v1.npy", "x", "y", 0},
    };
    char path[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", testdata(), cases[i].file);
        FILE *f = fopen(path, "rb");
        bitnet_reader *r = NULL;
        assert_non_null(f);
        assert_int_equal(bitnet_reader_create(&r, f, BITNET_FMT_AUTO), BITNET_OK);
        assert_int_equal(bitnet_reader_has_tensor(r, cases[i].yes), cases[i].known ? 1 : -1);
        assert_int_equal(bitnet_reader_has_tensor(r, cases[i].no), cases[i].known ? 0 : -1);
        bitnet_tensor t;
        assert_int_equal(bitnet_reader_next(r, &t), BITNET_OK); /* reading does not change the answer */
        bitnet_tensor_release(&t);
        assert_int_equal(bitnet_reader_has_tensor(r, cases[i].yes), cases[i].known ? 1 : -1);
        bitnet_reader_free(r);
        fclose(f);
    }
    assert_int_equal(bitnet_reader_has_tensor(NULL, "x"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect),           cmocka_unit_test(test_npy_corpus),
        cmocka_unit_test(test_safetensors_corpus), cmocka_unit_test(test_real_files),
        cmocka_unit_test(test_writer_round_trip), cmocka_unit_test(test_writer_npy_and_refusals),
        cmocka_unit_test(test_has_tensor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
