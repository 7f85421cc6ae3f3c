/*
 * test_pack.c - T2/T3 layouts against hand-computed bytes, exact round
 * trips over awkward shapes, and the refusal of invalid codes and padding.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bitnet.h"
#include "testutil.h"

static int8_t *rand_codes(uint64_t n, uint64_t seed)
{
    int8_t *q = malloc(n ? n : 1);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (uint64_t i = 0; i < n; i++) q[i] = (int8_t)((tu_xorshift(&s) >> 20) % 3) - 1;
    return q;
}

static void t2_hand_layout(void **state)
{
    (void)state;
    int8_t q[130] = {0};
    q[0] = 1;    /* block 0, j 0, k 0 -> code 2 */
    q[33] = -1;  /* block 0, j 1, k 1 -> code 0 */
    q[127] = 1;  /* block 0, j 31, k 3 -> code 2 */
    q[129] = -1; /* block 1, j 1, k 0 -> code 0 */
    uint8_t t2[64];
    assert_int_equal(bitnet_t2_row_bytes(130), 64);
    assert_int_equal(bitnet_t2_pack(q, 1, 130, t2), BITNET_OK);
    uint8_t want[64];
    memset(want, 0x55, sizeof want);
    want[0] = 0x56;
    want[1] = 0x51;
    want[31] = 0x95;
    want[32 + 1] = 0x54;
    assert_memory_equal(t2, want, 64);
    int8_t back[130];
    assert_int_equal(bitnet_t2_unpack(t2, 1, 130, back), BITNET_OK);
    assert_memory_equal(back, q, 130);
}

static void t3_hand_layout(void **state)
{
    (void)state;
    const int8_t q[7] = {1, 0, -1, 1, 1, -1, 0};
    uint8_t t3[2];
    assert_int_equal(bitnet_t3_row_bytes(7), 2);
    assert_int_equal(bitnet_t3_pack(q, 1, 7, t3), BITNET_OK);
    /* 2 + 1*3 + 0*9 + 2*27 + 2*81 = 221;  0 + 1*3 + pad 1*(9 + 27 + 81) = 120 */
    assert_int_equal(t3[0], 221);
    assert_int_equal(t3[1], 120);
    int8_t back[7];
    assert_int_equal(bitnet_t3_unpack(t3, 1, 7, back), BITNET_OK);
    assert_memory_equal(back, q, 7);
}

static void round_trips(void **state)
{
    (void)state;
    const uint64_t colss[] = {1, 3, 4, 5, 17, 31, 32, 33, 127, 128, 129, 255, 256, 640, 4097};
    const uint64_t rowss[] = {1, 3};
    for (size_t ci = 0; ci < sizeof colss / sizeof *colss; ci++)
        for (size_t ri = 0; ri < 2; ri++) {
            uint64_t rows = rowss[ri], cols = colss[ci], n = rows * cols;
            int8_t *q = rand_codes(n, cols * 10 + rows), *back = malloc(n);
            size_t b2 = rows * bitnet_t2_row_bytes(cols), b3 = rows * bitnet_t3_row_bytes(cols);
            uint8_t *t2 = malloc(b2), *t3 = malloc(b3), *t2b = malloc(b2), *t3b = malloc(b3);
            assert_int_equal(bitnet_t2_pack(q, rows, cols, t2), BITNET_OK);
            memset(back, 9, n);
            assert_int_equal(bitnet_t2_unpack(t2, rows, cols, back), BITNET_OK);
            assert_memory_equal(back, q, n);
            assert_int_equal(bitnet_t3_pack(q, rows, cols, t3), BITNET_OK);
            memset(back, 9, n);
            assert_int_equal(bitnet_t3_unpack(t3, rows, cols, back), BITNET_OK);
            assert_memory_equal(back, q, n);
            /* conversions give exactly what packing the codes gives */
            assert_int_equal(bitnet_t2_to_t3(t2, rows, cols, t3b), BITNET_OK);
            assert_memory_equal(t3b, t3, b3);
            assert_int_equal(bitnet_t3_to_t2(t3, rows, cols, t2b), BITNET_OK);
            assert_memory_equal(t2b, t2, b2);
            /* every T3 byte is 0..242 and padding trits are 1 */
            for (size_t i = 0; i < b3; i++) assert_true(t3[i] <= 242);
            free(q), free(back), free(t2), free(t3), free(t2b), free(t3b);
        }
}

static void refuses_invalid(void **state)
{
    (void)state;
    int8_t q[300] = {0}, back[300];
    uint8_t t2[3 * 32], t3[60];
    assert_int_equal(bitnet_t2_pack(q, 1, 300, t2), BITNET_OK);
    /* code 3 at column 33 (block 0, byte 1, bits 2..3) */
    t2[1] |= 0x0c;
    assert_int_equal(bitnet_t2_unpack(t2, 1, 300, back), BITNET_E_FORMAT);
    assert_non_null(strstr(bitnet_error_detail(), "column 33"));
    assert_int_equal(bitnet_t2_to_t3(t2, 1, 300, t3), BITNET_E_FORMAT);
    t2[1] = 0x55;
    /* code 3 in the second row, column 128 + 64 + 5 */
    uint8_t t2r[2 * 64];
    int8_t q2[2 * 200] = {0}, back2[2 * 200];
    assert_int_equal(bitnet_t2_pack(q2, 2, 200, t2r), BITNET_OK);
    t2r[64 + 32 + 5] |= 0x30;
    assert_int_equal(bitnet_t2_unpack(t2r, 2, 200, back2), BITNET_E_FORMAT);
    assert_non_null(strstr(bitnet_error_detail(), "row 1, column 197"));
    /* padding that is not code 1: column 300 = block 2, k 1, j 12 */
    t2[64 + 12] &= (uint8_t)~0x0c;
    assert_int_equal(bitnet_t2_unpack(t2, 1, 300, back), BITNET_E_FORMAT);
    assert_non_null(strstr(bitnet_error_detail(), "padding"));
    /* T3: a byte above 242, and a padding trit that is not 1 */
    assert_int_equal(bitnet_t3_pack(q, 1, 300, t3), BITNET_OK);
    t3[7] = 243;
    assert_int_equal(bitnet_t3_unpack(t3, 1, 300, back), BITNET_E_FORMAT);
    assert_non_null(strstr(bitnet_error_detail(), "columns 35..39"));
    assert_int_equal(bitnet_t3_to_t2(t3, 1, 300, t2), BITNET_E_FORMAT);
    uint8_t t3s[2] = {121, 0}; /* cols 7: byte 1 holds columns 5, 6 and padding trits 0 */
    assert_int_equal(bitnet_t3_unpack(t3s, 1, 7, back), BITNET_E_FORMAT);
    assert_non_null(strstr(bitnet_error_detail(), "padding"));
    /* values outside {-1, 0, 1} */
    q[17] = 2;
    assert_int_equal(bitnet_t2_pack(q, 1, 300, t2), BITNET_E_INVALID);
    assert_int_equal(bitnet_t3_pack(q, 1, 300, t3), BITNET_E_INVALID);
    /* sizes */
    assert_int_equal(bitnet_t2_pack(q, 1ull << 40, 1ull << 20, t2), BITNET_E_LIMIT);
    assert_int_equal(bitnet_t2_unpack(NULL, 1, 3, back), BITNET_E_INVALID);
    assert_int_equal(bitnet_t2_pack(NULL, 0, 5, NULL), BITNET_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t2_hand_layout),
        cmocka_unit_test(t3_hand_layout),
        cmocka_unit_test(round_trips),
        cmocka_unit_test(refuses_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
