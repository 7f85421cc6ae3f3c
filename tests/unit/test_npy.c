/* test_npy.c - .npy read/write: hand-built bytes, round trips of every dtype,
 * version and rank, Fortran order, big-endian data, pipes, refusals. */
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

/* Builds a .npy file by hand: magic, version, length, dict padded to 64. */
static size_t build_npy(uint8_t *out, int ver, const char *dict, const void *data, size_t data_len)
{
    size_t pre = ver == 1 ? 10 : 12, n = strlen(dict) + 1;
    size_t total = (pre + n + 63) / 64 * 64, hlen = total - pre;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (uint8_t)ver;
    out[7] = 0;
    out[8] = (uint8_t)hlen;
    out[9] = (uint8_t)(hlen >> 8);
    if (ver != 1) out[10] = out[11] = 0;
    memcpy(out + pre, dict, n - 1);
    memset(out + pre + n - 1, ' ', hlen - n);
    out[total - 1] = '\n';
    memcpy(out + total, data, data_len);
    return total + data_len;
}

static bitnet_status read_mem(const uint8_t *buf, size_t n, bitnet_tensor *t)
{
    FILE *f = fmemopen((void *)buf, n, "rb");
    assert_non_null(f);
    bitnet_status st = bitnet_npy_read(f, NULL, 0, t);
    fclose(f);
    return st;
}

static void test_hand_built_v1(void **state)
{
    (void)state;
    uint8_t file[256];
    const float v[6] = {1, 2, 3, 4, 5, 6};
    size_t n = build_npy(file, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v, sizeof v);
    bitnet_tensor t;
    assert_int_equal(read_mem(file, n, &t), BITNET_OK);
    assert_int_equal(t.info.dtype, BITNET_F32);
    assert_int_equal(t.info.rank, 2);
    assert_int_equal(t.info.dims[0], 2);
    assert_int_equal(t.info.dims[1], 3);
    assert_memory_equal(t.data, v, sizeof v);
    /* the writer must produce exactly these bytes (numpy's own layout) */
    char *out = NULL;
    size_t out_len = 0;
    FILE *w = open_memstream(&out, &out_len);
    assert_int_equal(bitnet_npy_write(w, &t), BITNET_OK);
    fclose(w);
    assert_int_equal(out_len, n);
    assert_memory_equal(out, file, n);
    free(out);
    bitnet_tensor_release(&t);
}

static void test_hand_built_v2_v3_and_prefix(void **state)
{
    (void)state;
    uint8_t file[256];
    const int16_t v[3] = {-1, 300, 7};
    for (int ver = 2; ver <= 3; ver++) {
        size_t n = build_npy(file, ver, "{\"descr\":\"<i2\",\"shape\":(3,),\"fortran_order\":False}", v, sizeof v);
        FILE *f = fmemopen(file + 8, n - 8, "rb");
        bitnet_tensor t;
        /* the first 8 bytes come as an already-consumed prefix */
        assert_int_equal(bitnet_npy_read(f, file, 8, &t), BITNET_OK);
        fclose(f);
        assert_int_equal(t.info.dtype, BITNET_I16);
        assert_int_equal(t.info.rank, 1);
        assert_int_equal(t.info.dims[0], 3);
        assert_memory_equal(t.data, v, sizeof v);
        bitnet_tensor_release(&t);
    }
}

static void test_fortran_order(void **state)
{
    (void)state;
    uint8_t file[512];
    /* a 2x3x2 array a[i][j][k] = 100i + 10j + k stored column-major */
    int32_t fdata[12], want[12];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++) {
                fdata[i + 2 * j + 6 * k] = 100 * i + 10 * j + k;
                want[i * 6 + j * 2 + k] = 100 * i + 10 * j + k;
            }
    size_t n = build_npy(file, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 2), }", fdata, sizeof fdata);
    bitnet_tensor t;
    assert_int_equal(read_mem(file, n, &t), BITNET_OK);
    assert_memory_equal(t.data, want, sizeof want);
    bitnet_tensor_release(&t);
    /* 2-D */
    const float f2[6] = {1, 4, 2, 5, 3, 6}, c2[6] = {1, 2, 3, 4, 5, 6};
    n = build_npy(file, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f2, sizeof f2);
    assert_int_equal(read_mem(file, n, &t), BITNET_OK);
    assert_memory_equal(t.data, c2, sizeof c2);
    bitnet_tensor_release(&t);
}

static void test_big_endian(void **state)
{
    (void)state;
    uint8_t file[256];
    const uint8_t be[8] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0}; /* 1.0 as big-endian f8 */
    size_t n = build_npy(file, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (), }", be, sizeof be);
    bitnet_tensor t;
    assert_int_equal(read_mem(file, n, &t), BITNET_OK);
    assert_int_equal(t.info.rank, 0);
    assert_true(((double *)t.data)[0] == 1.0);
    bitnet_tensor_release(&t);
}

static void fill(bitnet_tensor *t, uint64_t nbytes)
{
    uint8_t *p = t->data;
    for (uint64_t i = 0; i < nbytes; i++) p[i] = (uint8_t)(i * 37 + 11);
}

static void test_round_trip_all(void **state)
{
    (void)state;
    const bitnet_dtype types[] = {BITNET_F32, BITNET_F16, BITNET_F64, BITNET_I8, BITNET_U8, BITNET_I16, BITNET_I32, BITNET_I64};
    const struct { uint32_t rank; uint64_t dims[8]; } shapes[] = {
        {0, {0}}, {1, {1}}, {1, {17}}, {2, {3, 5}}, {3, {2, 0, 4}}, {1, {0}}, {8, {1, 2, 1, 3, 1, 2, 1, 2}},
    };
    for (size_t a = 0; a < sizeof types / sizeof types[0]; a++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            bitnet_tensor t, u;
            uint64_t nb;
            memset(&t, 0, sizeof t);
            strcpy(t.info.name, "x");
            t.info.dtype = types[a];
            t.info.rank = shapes[s].rank;
            memcpy(t.info.dims, shapes[s].dims, sizeof t.info.dims);
            assert_int_equal(bitnet_tensor_alloc(&t), BITNET_OK);
            assert_int_equal(bitnet_tensor_data_bytes(&t.info, &nb), BITNET_OK);
            fill(&t, nb);
            char *buf = NULL;
            size_t len = 0;
            FILE *w = open_memstream(&buf, &len);
            assert_int_equal(bitnet_npy_write(w, &t), BITNET_OK);
            fclose(w);
            assert_int_equal(len % 64, nb % 64); /* header padded to 64 */
            assert_int_equal(buf[6], 1);
            assert_int_equal(read_mem((uint8_t *)buf, len, &u), BITNET_OK);
            assert_int_equal(u.info.dtype, t.info.dtype);
            assert_int_equal(u.info.rank, t.info.rank);
            assert_memory_equal(u.info.dims, t.info.dims, sizeof t.info.dims);
            if (nb) assert_memory_equal(u.data, t.data, nb);
            bitnet_tensor_release(&u);
            /* truncating the file by one byte must be detected */
            if (nb) assert_int_equal(read_mem((uint8_t *)buf, len - 1, &u), BITNET_E_TRUNCATED);
            bitnet_tensor_release(&t);
            free(buf);
        }
}

static void test_pipe(void **state)
{
    (void)state;
    int fds[2];
    uint8_t file[256];
    const uint8_t v[5] = {1, 2, 3, 250, 0};
    size_t n = build_npy(file, 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", v, sizeof v);
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], file, n), (ssize_t)n);
    close(fds[1]);
    FILE *f = fdopen(fds[0], "rb");
    bitnet_tensor t;
    assert_int_equal(bitnet_npy_read(f, NULL, 0, &t), BITNET_OK);
    fclose(f);
    assert_memory_equal(t.data, v, 5);
    bitnet_tensor_release(&t);
    /* truncated on a pipe: size unknown up front, still detected */
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], file, n - 2), (ssize_t)(n - 2));
    close(fds[1]);
    f = fdopen(fds[0], "rb");
    assert_int_equal(bitnet_npy_read(f, NULL, 0, &t), BITNET_E_TRUNCATED);
    assert_non_null(strstr(bitnet_error_detail(), "only 3 present"));
    fclose(f);
}

static void expect_bad(const char *dict, bitnet_status want, const char *detail)
{
    uint8_t file[512];
    const uint8_t zeros[64] = {0};
    size_t n = build_npy(file, 1, dict, zeros, sizeof zeros);
    bitnet_tensor t;
    bitnet_status st = read_mem(file, n, &t);
    if (st != want || !strstr(bitnet_error_detail(), detail))
        fail_msg("%s: got %s (%s), wanted %s with '%s'", dict, bitnet_strerror(st), bitnet_error_detail(),
                 bitnet_strerror(want), detail);
    if (st == BITNET_OK) bitnet_tensor_release(&t);
}

static void test_header_strictness(void **state)
{
    (void)state;
    expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", BITNET_OK, "");
    expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", BITNET_OK, "");
    expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3,), }", BITNET_OK, "");
    expect_bad("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", BITNET_E_UNSUPPORTED, "object arrays");
    expect_bad("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", BITNET_E_UNSUPPORTED, "'|b1'");
    expect_bad("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", BITNET_E_UNSUPPORTED, "'<u2'");
    expect_bad("{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }", BITNET_E_UNSUPPORTED, "'|f4'");
    expect_bad("{'descr': '<f4', 'fortran_order': false, 'shape': (2,), }", BITNET_E_FORMAT, "True or False");
    expect_bad("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,), }", BITNET_E_FORMAT, "True or False");
    expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", BITNET_E_FORMAT, "not a tuple");
    expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", BITNET_E_FORMAT, "expected '('");
    expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", BITNET_E_FORMAT, "expected a dimension");
    expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2,,), }", BITNET_E_FORMAT, "expected a dimension");
    expect_bad("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", BITNET_E_FORMAT, "repeated key 'descr'");
    expect_bad("{'descr': '<f4', 'fortran_order': False}", BITNET_E_FORMAT, "missing key 'shape'");
    expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", BITNET_E_FORMAT, "after the dict");
    expect_bad("{'descr' '<f4', 'fortran_order': False, 'shape': (2,), }", BITNET_E_FORMAT, "expected ':'");
    expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", BITNET_E_LIMIT, "more than 8");
    expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551616,), }", BITNET_E_LIMIT, "too large");
    expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536, 65537), }", BITNET_E_LIMIT, "2^48");
    expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }", BITNET_E_TRUNCATED, "data needs 4000 bytes");
}

static void test_write_refusals(void **state)
{
    (void)state;
    bitnet_tensor t;
    memset(&t, 0, sizeof t);
    strcpy(t.info.name, "w");
    t.info.dtype = BITNET_T2;
    t.info.rank = 2;
    t.info.dims[0] = 2;
    t.info.dims[1] = 3;
    t.info.scale_kind = BITNET_SCALE_TENSOR;
    assert_int_equal(bitnet_tensor_alloc(&t), BITNET_OK);
    FILE *f = tmpfile();
    assert_int_equal(bitnet_npy_write(f, &t), BITNET_E_DTYPE);
    assert_non_null(strstr(bitnet_error_detail(), "--dtype f32"));
    bitnet_tensor_release(&t);
    t.info.dtype = BITNET_BF16;
    t.info.scale_kind = BITNET_SCALE_NONE;
    assert_int_equal(bitnet_tensor_alloc(&t), BITNET_OK);
    assert_int_equal(bitnet_npy_write(f, &t), BITNET_E_DTYPE);
    assert_non_null(strstr(bitnet_error_detail(), "bf16"));
    bitnet_tensor_release(&t);
    t.info.dtype = BITNET_I8;
    t.info.scale_kind = BITNET_SCALE_ROW;
    assert_int_equal(bitnet_tensor_alloc(&t), BITNET_OK);
    assert_int_equal(bitnet_npy_write(f, &t), BITNET_E_DTYPE);
    assert_non_null(strstr(bitnet_error_detail(), "scales"));
    bitnet_tensor_release(&t);
    assert_int_equal(ftell(f), 0); /* nothing written */
    fclose(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_built_v1),     cmocka_unit_test(test_hand_built_v2_v3_and_prefix),
        cmocka_unit_test(test_fortran_order),     cmocka_unit_test(test_big_endian),
        cmocka_unit_test(test_round_trip_all),    cmocka_unit_test(test_pipe),
        cmocka_unit_test(test_header_strictness), cmocka_unit_test(test_write_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
