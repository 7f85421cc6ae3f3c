/* test_safetensors.c - safetensors read/write: hand-built bytes, every dtype,
 * metadata, pipes (truncation and trailing bytes found while streaming),
 * offset validation, writer refusals. */
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

/* Builds a file by hand: u64 LE length, JSON padded with spaces to 8, data. */
static size_t build_st(uint8_t *out, const char *json, const void *data, size_t data_len)
{
    size_t n = strlen(json), padded = (n + 7) / 8 * 8;
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(out + 8, json, n);
    memset(out + 8 + n, ' ', padded - n);
    memcpy(out + 8 + padded, data, data_len);
    return 8 + padded + data_len;
}

static FILE *pipe_with(const uint8_t *buf, size_t n)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], buf, n), (ssize_t)n); /* small: fits the pipe buffer */
    close(fds[1]);
    return fdopen(fds[0], "rb");
}

static const char *json_ab =
    "{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"I16\",\"shape\":[3],\"data_offsets\":[8,14]},"
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";

static void check_ab(FILE *f)
{
    bitnet_st_reader *r;
    bitnet_tensor t;
    assert_int_equal(bitnet_st_reader_create(&r, f, NULL, 0), BITNET_OK);
    assert_int_equal(bitnet_st_reader_meta_count(r), 1);
    assert_string_equal(bitnet_st_reader_meta_key(r, 0), "format");
    assert_string_equal(bitnet_st_reader_meta_value(r, 0), "pt");
    /* offset order, not header order */
    assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_OK);
    assert_string_equal(t.info.name, "a");
    assert_int_equal(t.info.dtype, BITNET_F32);
    assert_true(((float *)t.data)[0] == 1.5f && ((float *)t.data)[1] == -2.0f);
    bitnet_tensor_release(&t);
    assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_OK);
    assert_string_equal(t.info.name, "b");
    assert_int_equal(t.info.dtype, BITNET_I16);
    assert_int_equal(t.info.rank, 1);
    assert_int_equal(t.info.dims[0], 3);
    assert_int_equal(((int16_t *)t.data)[0], 1);
    assert_int_equal(((int16_t *)t.data)[1], -1);
    assert_int_equal(((int16_t *)t.data)[2], 256);
    bitnet_tensor_release(&t);
    assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_END);
    assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_END);
    bitnet_st_reader_free(r);
}

static const uint8_t data_ab[14] = {0, 0, 0xc0, 0x3f, 0, 0, 0, 0xc0, 1, 0, 0xff, 0xff, 0, 1};

static void test_hand_built(void **state)
{
    (void)state;
    uint8_t file[512];
    size_t n = build_st(file, json_ab, data_ab, sizeof data_ab);
    FILE *f = fmemopen(file, n, "rb");
    check_ab(f);
    fclose(f);
    f = tmpfile();
    fwrite(file, 1, n, f);
    rewind(f);
    check_ab(f);
    fclose(f);
    check_ab(f = pipe_with(file, n));
    fclose(f);
}

static void test_writer_bytes(void **state)
{
    (void)state;
    /* the writer's exact output, built independently */
    const char *json = "{\"__metadata__\":{\"k\":\"v\",\"z\":\"\\\"q\\\"\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"s\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[8,9]}}";
    const uint8_t data[9] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 7};
    uint8_t want[512];
    size_t n = build_st(want, json, data, sizeof data);
    float wv[2] = {1, 2};
    uint8_t sv = 7;
    bitnet_tensor w = {0}, s = {0};
    strcpy(w.info.name, "w");
    w.info.dtype = BITNET_F32;
    w.info.rank = 1;
    w.info.dims[0] = 2;
    w.data = wv;
    strcpy(s.info.name, "s");
    s.info.dtype = BITNET_U8;
    s.data = &sv;
    const bitnet_tensor *ts[2] = {&w, &s};
    const char *mk[2] = {"k", "z"}, *mv[2] = {"v", "\"q\""};
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_int_equal(bitnet_st_write(f, ts, 2, mk, mv, 2), BITNET_OK);
    fclose(f);
    assert_int_equal(len, n);
    assert_memory_equal(out, want, n);
    assert_int_equal((len - 9) % 8, 0);
    free(out);
}

static void test_round_trip_dtypes(void **state)
{
    (void)state;
    const bitnet_dtype types[] = {BITNET_F32, BITNET_F16, BITNET_BF16, BITNET_F64, BITNET_I8,
                                  BITNET_U8,  BITNET_I16, BITNET_I32,  BITNET_I64};
    const size_t nt = sizeof types / sizeof types[0];
    bitnet_tensor ts[9 + 1];
    const bitnet_tensor *ptr[9 + 1];
    memset(ts, 0, sizeof ts);
    for (size_t i = 0; i <= nt; i++) {
        snprintf(ts[i].info.name, sizeof ts[i].info.name, "t%zu.weight", i);
        ts[i].info.dtype = i < nt ? types[i] : BITNET_F32;
        ts[i].info.rank = i < nt ? (uint32_t)(i % 4) : 2;
        for (uint32_t d = 0; d < ts[i].info.rank; d++) ts[i].info.dims[d] = 1 + (i + d) % 5;
        if (i == nt) ts[i].info.dims[1] = 0; /* zero-size */
        assert_int_equal(bitnet_tensor_alloc(&ts[i]), BITNET_OK);
        uint64_t nb;
        bitnet_tensor_data_bytes(&ts[i].info, &nb);
        for (uint64_t b = 0; b < nb; b++) ((uint8_t *)ts[i].data)[b] = (uint8_t)(b * 31 + i);
        ptr[i] = &ts[i];
    }
    for (int via_pipe = 0; via_pipe < 2; via_pipe++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        const char *mk[1] = {"note"}, *mv[1] = {"round trip"};
        assert_int_equal(bitnet_st_write(f, ptr, nt + 1, mk, mv, 1), BITNET_OK);
        fclose(f);
        f = via_pipe ? pipe_with((uint8_t *)buf, len) : fmemopen(buf, len, "rb");
        bitnet_st_reader *r;
        assert_int_equal(bitnet_st_reader_create(&r, f, NULL, 0), BITNET_OK);
        assert_string_equal(bitnet_st_reader_meta_value(r, 0), "round trip");
        for (size_t i = 0; i <= nt; i++) {
            bitnet_tensor t;
            uint64_t nb;
            assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_OK);
            assert_string_equal(t.info.name, ts[i].info.name);
            assert_int_equal(t.info.dtype, ts[i].info.dtype);
            assert_int_equal(t.info.rank, ts[i].info.rank);
            assert_memory_equal(t.info.dims, ts[i].info.dims, sizeof t.info.dims);
            bitnet_tensor_data_bytes(&t.info, &nb);
            if (nb) assert_memory_equal(t.data, ts[i].data, nb);
            bitnet_tensor_release(&t);
        }
        bitnet_tensor t;
        assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_END);
        bitnet_st_reader_free(r);
        fclose(f);
        free(buf);
    }
    for (size_t i = 0; i <= nt; i++) bitnet_tensor_release(&ts[i]);
}

static void test_pipe_truncation_and_trailing(void **state)
{
    (void)state;
    uint8_t file[512];
    size_t n = build_st(file, json_ab, data_ab, sizeof data_ab);
    bitnet_st_reader *r;
    bitnet_tensor t;
    /* truncated inside tensor b: found when b is read */
    FILE *f = pipe_with(file, n - 3);
    assert_int_equal(bitnet_st_reader_create(&r, f, NULL, 0), BITNET_OK);
    assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_OK);
    bitnet_tensor_release(&t);
    assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_E_TRUNCATED);
    assert_non_null(strstr(bitnet_error_detail(), "tensor 'b'"));
    assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_E_TRUNCATED); /* sticky */
    bitnet_st_reader_free(r);
    fclose(f);
    /* a byte too many: found at the end */
    file[n] = 'x';
    f = pipe_with(file, n + 1);
    assert_int_equal(bitnet_st_reader_create(&r, f, NULL, 0), BITNET_OK);
    assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_OK);
    bitnet_tensor_release(&t);
    assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_OK);
    bitnet_tensor_release(&t);
    assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_E_FORMAT);
    assert_non_null(strstr(bitnet_error_detail(), "do not cover"));
    bitnet_st_reader_free(r);
    fclose(f);
    /* on a regular file both are found at create */
    f = tmpfile();
    fwrite(file, 1, n + 1, f);
    rewind(f);
    assert_int_equal(bitnet_st_reader_create(&r, f, NULL, 0), BITNET_E_FORMAT);
    fclose(f);
    /* the prefix handed over by format detection */
    f = fmemopen(file + 8, n - 8, "rb");
    assert_int_equal(bitnet_st_reader_create(&r, f, file, 8), BITNET_OK);
    assert_int_equal(bitnet_st_reader_next(r, &t), BITNET_OK);
    bitnet_tensor_release(&t);
    bitnet_st_reader_free(r);
    fclose(f);
}

static void expect_bad_header(const char *json, size_t data_len, bitnet_status want, const char *detail)
{
    uint8_t file[1024], zeros[64] = {0};
    size_t n = build_st(file, json, zeros, data_len);
    FILE *f = fmemopen(file, n, "rb");
    bitnet_st_reader *r = NULL;
    bitnet_status st = bitnet_st_reader_create(&r, f, NULL, 0);
    if (st == BITNET_OK) { /* memory streams have no known size: read to the end */
        bitnet_tensor t;
        while ((st = bitnet_st_reader_next(r, &t)) == BITNET_OK) bitnet_tensor_release(&t);
        if (st == BITNET_END) st = BITNET_OK;
    }
    bitnet_st_reader_free(r);
    fclose(f);
    if (st != want || !strstr(bitnet_error_detail(), detail))
        fail_msg("%s: got %s (%s), wanted %s with '%s'", json, bitnet_strerror(st), bitnet_error_detail(),
                 bitnet_strerror(want), detail);
}

static void test_validation(void **state)
{
    (void)state;
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, BITNET_OK, "");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9, BITNET_E_FORMAT, "do not cover");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 7, BITNET_E_TRUNCATED, "tensor 'a'");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, BITNET_E_FORMAT, "[begin, end]");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, BITNET_E_FORMAT, "shape entry 0");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8, BITNET_E_FORMAT, "header JSON");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"__metadata__\":[]}", 8, BITNET_E_FORMAT, "not an object");
    expect_bad_header("{\"a\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, BITNET_E_UNSUPPORTED, "'U16'");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,16]}}", 16, BITNET_E_LIMIT, "2^48");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                      4, BITNET_OK, "");
    expect_bad_header("{\"a\":5}", 0, BITNET_E_FORMAT, "not an object");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                      8, BITNET_E_FORMAT, "overlap");
}

static void test_writer_refusals(void **state)
{
    (void)state;
    bitnet_tensor a = {0}, b = {0};
    strcpy(a.info.name, "a");
    a.info.dtype = BITNET_F32;
    a.info.rank = 1;
    a.info.dims[0] = 1;
    assert_int_equal(bitnet_tensor_alloc(&a), BITNET_OK);
    b = a;
    const bitnet_tensor *ts[2] = {&a, &b};
    FILE *f = tmpfile();
    assert_int_equal(bitnet_st_write(f, ts, 2, NULL, NULL, 0), BITNET_E_INVALID);
    assert_non_null(strstr(bitnet_error_detail(), "given twice"));
    strcpy(b.info.name, "__metadata__");
    assert_int_equal(bitnet_st_write(f, ts, 2, NULL, NULL, 0), BITNET_E_INVALID);
    strcpy(b.info.name, "t");
    b.info.dtype = BITNET_T3;
    b.info.scale_kind = BITNET_SCALE_TENSOR;
    assert_int_equal(bitnet_st_write(f, ts, 2, NULL, NULL, 0), BITNET_E_DTYPE);
    assert_non_null(strstr(bitnet_error_detail(), "dequantize"));
    assert_int_equal(ftell(f), 0);
    fclose(f);
    bitnet_tensor_release(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_built),        cmocka_unit_test(test_writer_bytes),
        cmocka_unit_test(test_round_trip_dtypes), cmocka_unit_test(test_pipe_truncation_and_trailing),
        cmocka_unit_test(test_validation),        cmocka_unit_test(test_writer_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
