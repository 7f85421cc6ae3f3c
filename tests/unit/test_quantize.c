/*
 * test_quantize.c - quantization: the _ref definitions against hand-computed
 * cases (ties at 0.5 and 1.5, all-zero slices, an outlier, subnormals,
 * negative zero, rows of one, a sum whose naive double orders disagree), the
 * exact-sum and exact-division helpers, then every fast path (each SIMD
 * level, 1 and 2 threads, OpenCL when present) against the _ref on random
 * inputs of awkward shapes (codes and scales compared with memcmp), the
 * test hooks, and real trained weights against statistics computed here
 * with plain double loops.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitnet.h"
#include "cpu/quantize.h" /* exact-sum and division helpers (internal) */
#include "testutil.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t rnd(void) { return tu_rand32(&rng); }
static float rndf(void) { return tu_randf32(&rng); }
static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* Weights with the awkward values mixed in: zeros of both signs, subnormals,
 * a wide range of magnitudes now and then. */
static float *rand_weights(uint64_t n, int wild)
{
    float *w = malloc((n ? n : 1) * sizeof *w);
    for (uint64_t i = 0; i < n; i++) {
        float v = rndf() * 0.05f;
        uint32_t r = rnd() % 1000;
        if (r == 0) v = 0.0f;
        else if (r == 1) v = -0.0f;
        else if (wild && r == 2) v = bits_f(rnd() % 0x7fffff + 1) * (rnd() & 1 ? 1.0f : -1.0f); /* subnormal */
        else if (wild && r == 3) v = ldexpf(rndf(), (int)(rnd() % 120) - 60);
        w[i] = v;
    }
    return w;
}

/* code of column c of row r in a T2 buffer, from the layout in bnt(5) */
static int t2_code(const uint8_t *t2, uint64_t cols, uint64_t r, uint64_t c)
{
    const uint8_t *row = t2 + r * ((cols + 127) / 128 * 32);
    return (row[(c / 128) * 32 + c % 32] >> (2 * ((c % 128) / 32))) & 3;
}

/* ---- hand-computed cases -------------------------------------------------- */

static void ref_ties(void **state)
{
    (void)state;
    /* sum |w| = 8, n = 8: d = 1, s = 1.  rint: .5 -> 0, 1.5 -> 2 -> 1, -.5 -> 0,
     * -1.5 -> -1, .625 -> 1, -.375 -> 0, 2 -> 1, 1 -> 1 */
    const float w[8] = {0.5f, 1.5f, -0.5f, -1.5f, 0.625f, -0.375f, 2.0f, 1.0f};
    const int want[8] = {1, 2, 1, 0, 2, 1, 2, 2};
    uint8_t t2[32];
    float d = 0;
    assert_int_equal(bitnet_quantize_weights_ref(w, 1, 8, BITNET_SCALE_TENSOR, 0, t2, &d), BITNET_OK);
    assert_true(d == 1.0f);
    for (int c = 0; c < 8; c++) assert_int_equal(t2[c], 0x54 | want[c]); /* other sub-blocks: padding code 1 */
    for (int c = 8; c < 32; c++) assert_int_equal(t2[c], 0x55);
    /* d = 0.25, s = 4: 0.125 -> 0.5 -> 0; 0.375 -> 1.5 -> 2 -> 1 */
    const float w2[4] = {0.125f, 0.375f, -0.125f, -0.375f};
    assert_int_equal(bitnet_quantize_weights_ref(w2, 1, 4, BITNET_SCALE_ROW, 0, t2, &d), BITNET_OK);
    assert_true(d == 0.25f);
    assert_int_equal(t2[0], 0x55);
    assert_int_equal(t2[1], 0x56);
    assert_int_equal(t2[2], 0x55);
    assert_int_equal(t2[3], 0x54);
}

static void ref_special_values(void **state)
{
    (void)state;
    uint8_t t2[3 * 32];
    float d[3];
    /* all zero (both signs): d = 1e-5 per row, every code 1 */
    const float z[6] = {0.0f, -0.0f, 0.0f, -0.0f, -0.0f, 0.0f};
    assert_int_equal(bitnet_quantize_weights_ref(z, 3, 2, BITNET_SCALE_ROW, 0, t2, d), BITNET_OK);
    for (int r = 0; r < 3; r++) assert_true(d[r] == 1e-5f);
    for (int i = 0; i < 96; i++) assert_int_equal(t2[i], 0x55);
    /* subnormals only: the mean is below the floor */
    const float sub[4] = {bits_f(1), -bits_f(0x7fffff), bits_f(0x400000), 0.0f};
    assert_int_equal(bitnet_quantize_weights_ref(sub, 1, 4, BITNET_SCALE_TENSOR, 0, t2, d), BITNET_OK);
    assert_true(d[0] == 1e-5f);
    assert_int_equal(t2[0], 0x55);
    /* rows of length one: d = |w|, q = sign */
    const float one[3] = {2.0f, -3.0f, 0.0f};
    assert_int_equal(bitnet_quantize_weights_ref(one, 3, 1, BITNET_SCALE_ROW, 0, t2, d), BITNET_OK);
    assert_true(d[0] == 2.0f && d[1] == 3.0f && d[2] == 1e-5f);
    assert_int_equal(t2[0], 0x56);
    assert_int_equal(t2[32], 0x54);
    assert_int_equal(t2[64], 0x55);
    /* one huge outlier among 999 ones: sum = 1e30f + 999 rounds to 1e30f */
    float *w = malloc(1000 * sizeof *w);
    uint8_t t2b[8 * 32];
    for (int i = 0; i < 1000; i++) w[i] = 1.0f;
    w[500] = 1e30f;
    assert_int_equal(bitnet_quantize_weights_ref(w, 1, 1000, BITNET_SCALE_TENSOR, 0, t2b, d), BITNET_OK);
    assert_true(d[0] == (float)((double)1e30f / 1000.0));
    for (int c = 0; c < 1000; c++) assert_int_equal(t2_code(t2b, 1000, 0, c), c == 500 ? 2 : 1);
    free(w);
    /* groups of 32 in a row of 70: means 0.5, 2 and (over the 6 real columns) 1 */
    float g[70];
    for (int c = 0; c < 32; c++) g[c] = c % 2 ? 0.5f : -0.5f;
    for (int c = 32; c < 64; c++) g[c] = c % 3 ? 2.0f : -2.0f;
    for (int c = 64; c < 70; c++) g[c] = c == 64 ? -6.0f : 0.0f;
    float dg[3];
    assert_int_equal(bitnet_quantize_weights_ref(g, 1, 70, BITNET_SCALE_GROUP, 32, t2, dg), BITNET_OK);
    assert_true(dg[0] == 0.5f && dg[1] == 2.0f && dg[2] == 1.0f);
    for (int c = 0; c < 70; c++) {
        int want = c < 64 ? (g[c] > 0 ? 2 : 0) : c == 64 ? 0 : 1;
        assert_int_equal(t2_code(t2, 70, 0, c), want);
    }
    for (int c = 70; c < 128; c++) assert_int_equal(t2_code(t2, 128, 0, c), 1); /* padding */
}

/* A sum where the naive double order is wrong: 4 + (4 + 2^-21) + 6 * 2^-52.
 * Exactly: 8 + 2^-21 + 1.5 * 2^-50, which rounds to 8 + 2^-21 + 2^-49; / 8 is
 * just above the float midpoint 1 + 2^-24, so d = 1 + 2^-23.  Left to right in
 * double, each 2^-52 is lost: 1 + 2^-24 exactly, a tie, which gives d = 1. */
static void ref_exact_sum(void **state)
{
    (void)state;
    float w[8] = {4.0f, 4.0f + 0x1p-21f, 0x1p-52f, 0x1p-52f, 0x1p-52f, 0x1p-52f, 0x1p-52f, 0x1p-52f};
    double naive = 0;
    for (int i = 0; i < 8; i++) naive += fabs((double)w[i]);
    assert_true((float)(naive / 8) == 1.0f); /* the case really discriminates */
    uint8_t t2[32];
    float d;
    assert_int_equal(bitnet_quantize_weights_ref(w, 1, 8, BITNET_SCALE_TENSOR, 0, t2, &d), BITNET_OK);
    assert_int_equal(f_bits(d), 0x3f800001u);
    /* the same in every position of a longer row, for each SIMD level and 1/2 threads */
    const char *levels[] = {"scalar", "avx2", "avx512"};
    float *big = calloc(4096, sizeof *big);
    for (int i = 0; i < 8; i++) big[4000 + i] = w[i];
    float dref;
    uint8_t *t2r = malloc(32 * 32), *t2f = malloc(32 * 32);
    assert_int_equal(bitnet_quantize_weights_ref(big, 1, 4096, BITNET_SCALE_TENSOR, 0, t2r, &dref), BITNET_OK);
    assert_true(dref == (float)((8.0 + 0x1p-21 + 0x1p-49) / 4096)); /* exact sum, rounded, / 4096 */
    for (int l = 0; l < 3; l++)
        for (int th = 1; th <= 2; th++) {
            setenv("BITNET_SIMD", levels[l], 1);
            bitnet_backend *be;
            assert_int_equal(bitnet_backend_create(&be, "cpu", th), BITNET_OK);
            float df;
            assert_int_equal(bitnet_quantize_weights(be, big, 1, 4096, BITNET_SCALE_TENSOR, 0, t2f, &df), BITNET_OK);
            assert_int_equal(f_bits(df), f_bits(dref));
            assert_memory_equal(t2f, t2r, 32 * 32);
            bitnet_backend_free(be);
        }
    unsetenv("BITNET_SIMD");
    free(big), free(t2r), free(t2f);
}

static void ref_nonfinite(void **state)
{
    (void)state;
    float w[4 * 9];
    for (int i = 0; i < 36; i++) w[i] = 0.25f;
    w[2 * 9 + 5] = NAN;
    uint8_t t2[4 * 32];
    float d[4];
    int8_t q[36];
    assert_int_equal(bitnet_quantize_weights_ref(w, 4, 9, BITNET_SCALE_ROW, 0, t2, d), BITNET_E_NUMERIC);
    assert_non_null(strstr(bitnet_error_detail(), "row 2, column 5"));
    w[2 * 9 + 5] = -INFINITY;
    assert_int_equal(bitnet_quantize_acts_ref(w, 4, 9, q, d), BITNET_E_NUMERIC);
    assert_non_null(strstr(bitnet_error_detail(), "Inf"));
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "cpu", 2), BITNET_OK);
    for (int k = 1; k <= 3; k++) {
        assert_int_equal(bitnet_quantize_weights(be, w, 4, 9, (bitnet_scale_kind)k, 32, t2, d), BITNET_E_NUMERIC);
        assert_non_null(strstr(bitnet_error_detail(), "row 2, column 5"));
    }
    assert_int_equal(bitnet_quantize_acts(be, w, 4, 9, q, d), BITNET_E_NUMERIC);
    assert_non_null(strstr(bitnet_error_detail(), "row 2, column 5"));
    /* bad arguments */
    assert_int_equal(bitnet_quantize_weights(be, w, 4, 9, BITNET_SCALE_GROUP, 48, t2, d), BITNET_E_INVALID);
    assert_int_equal(bitnet_quantize_weights(be, w, 4, 9, BITNET_SCALE_GROUP, 16, t2, d), BITNET_E_INVALID);
    assert_int_equal(bitnet_quantize_weights(be, w, 4, 9, BITNET_SCALE_NONE, 0, t2, d), BITNET_E_INVALID);
    assert_int_equal(bitnet_quantize_weights(be, w, 1ull << 30, 1ull << 30, BITNET_SCALE_ROW, 0, t2, d), BITNET_E_LIMIT);
    assert_int_equal(bitnet_quantize_weights(be, NULL, 4, 9, BITNET_SCALE_ROW, 0, t2, d), BITNET_E_INVALID);
    assert_int_equal(bitnet_quantize_weights(NULL, w, 4, 9, BITNET_SCALE_ROW, 0, t2, d), BITNET_E_INVALID);
    bitnet_backend_free(be);
}

static void ref_acts_and_dequant(void **state)
{
    (void)state;
    /* m = 1, s = 127: 1 -> 127, -.5 -> -63.5 -> -64 (even), .25 -> 31.75 -> 32 */
    const float x[8] = {1.0f, -0.5f, 0.25f, 0.0f, 0.0f, -0.0f, 0.0f, 0.0f};
    int8_t q[8];
    float s[2];
    assert_int_equal(bitnet_quantize_acts_ref(x, 2, 4, q, s), BITNET_OK);
    assert_true(s[0] == 127.0f && s[1] == 127.0f / 1e-5f);
    const int8_t want[8] = {127, -64, 32, 0, 0, 0, 0, 0};
    assert_memory_equal(q, want, 8);
    float back[8];
    assert_int_equal(bitnet_dequantize_acts_ref(q, 2, 4, s, back), BITNET_OK);
    assert_true(back[0] == 1.0f && back[1] == -64.0f / 127.0f && back[2] == 32.0f / 127.0f && back[3] == 0.0f);
    /* weights: codes 2, 0, 1 and d = 0.75 -> 0.75, -0.75, 0 */
    const int8_t c3[3] = {1, -1, 0};
    uint8_t t2[32];
    assert_int_equal(bitnet_t2_pack(c3, 1, 3, t2), BITNET_OK);
    const float dd = 0.75f;
    float w[3];
    assert_int_equal(bitnet_dequantize_weights_ref(t2, 1, 3, BITNET_SCALE_TENSOR, 0, &dd, w), BITNET_OK);
    assert_true(w[0] == 0.75f && w[1] == -0.75f && w[2] == 0.0f && !signbit(w[2]));
    t2[1] |= 3; /* code 3 at column 1 */
    assert_int_equal(bitnet_dequantize_weights_ref(t2, 1, 3, BITNET_SCALE_TENSOR, 0, &dd, w), BITNET_E_FORMAT);
    assert_non_null(strstr(bitnet_error_detail(), "column 1"));
    const float bad = NAN, zero = 0.0f;
    assert_int_equal(bitnet_dequantize_weights_ref(t2, 1, 3, BITNET_SCALE_TENSOR, 0, &bad, w), BITNET_E_NUMERIC);
    assert_int_equal(bitnet_dequantize_acts_ref(q, 1, 4, &zero, back), BITNET_E_NUMERIC);
}

/* ---- helpers: exact sums, exact division ----------------------------------- */

static void xsum_and_division(void **state)
{
    (void)state;
    bn_xsum a;
    bn_xsum_zero(&a);
    assert_true(bn_xsum_to_double(&a) == 0.0);
    bn_xsum_add_float(&a, bits_f(1)); /* 2^-149 */
    assert_true(bn_xsum_to_double(&a) == 0x1p-149);
    bn_xsum_add_float(&a, FLT_MAX);
    bn_xsum_add_float(&a, -FLT_MAX);
    /* 2 FLT_MAX + 2^-149: rounds to 2 FLT_MAX in double */
    assert_true(bn_xsum_to_double(&a) == 2.0 * (double)FLT_MAX);
    /* 1 + 2^-53 + 2^-149: above the double midpoint -> rounds up (sticky) */
    bn_xsum_zero(&a);
    bn_xsum_add_float(&a, 1.0f);
    bn_xsum_add_float(&a, 0x1p-53f);
    assert_true(bn_xsum_to_double(&a) == 1.0); /* a tie: to even */
    bn_xsum_add_float(&a, bits_f(1));
    assert_true(bn_xsum_to_double(&a) == 1.0 + 0x1p-52);
    /* merge with carries across limbs */
    bn_xsum b;
    bn_xsum_zero(&b);
    for (int i = 0; i < 1000; i++) {
        bn_xsum_add_float(&a, 3.0e38f);
        bn_xsum_add_float(&b, 3.0e38f);
    }
    bn_xsum_merge(&a, &b);
    assert_true(bn_xsum_to_double(&a) == 2000.0 * (double)3.0e38f + 1.0);
    /* chunk kernels and whole-slice sums agree with the per-element sum, for
     * exponent spans from 1 to 40 binades (each exact form and the fallbacks),
     * at every SIMD level this CPU runs (AVX-512 code faults where it has none) */
    const bn_simd hw = bn_cpu_simd();
    const int nk = hw >= BN_SIMD_AVX512 ? 3 : hw >= BN_SIMD_AVX2 ? 2 : 1;
    if (nk < 3) print_message("# xsum: %d of 3 SIMD levels on this CPU\n", nk);
    for (int t = 0; t < 400; t++) {
        float w[2000];
        size_t n = 1 + rnd() % (t < 200 ? BN_XCHUNK : 2000);
        for (size_t i = 0; i < n; i++) w[i] = ldexpf(rndf(), -(int)(rnd() % (t % 40 + 1)));
        if (t % 7 == 0) w[rnd() % n] = 0.0f;
        if (t % 11 == 0) w[rnd() % n] = bits_f(rnd() % 0x7fffff + 1); /* subnormal */
        bn_xsum e, f;
        bn_xsum_zero(&e);
        bn_xsum_zero(&f);
        for (size_t i = 0; i < n; i++) bn_xsum_add_float(&e, w[i]);
        const bn_quant_kernels *ks[3] = {bn_quant_kernels_for(BN_SIMD_SCALAR), bn_quant_kernels_for(BN_SIMD_AVX2),
                                         bn_quant_kernels_for(BN_SIMD_AVX512)};
        for (int k = 0; k < nk; k++) {
            bn_xsum_zero(&f);
            if (n <= BN_XCHUNK) {
                assert_int_equal(bn_absum(ks[k]->xchunk, w, n, &f), n);
                assert_memory_equal(&e, &f, sizeof e);
                bn_xsum_zero(&f);
            }
            assert_int_equal(ks[k]->absum(w, n, &f), n);
            assert_memory_equal(&e, &f, sizeof e);
        }
        w[n / 2] = NAN;
        for (int k = 0; k < nk; k++) assert_int_equal(ks[k]->absum(w, n, &f), n / 2);
    }
    /* division from integers against the hardware division, all q, many s */
    for (int t = 0; t < 20000; t++) {
        float s;
        switch (t % 4) {
        case 0: s = bits_f(1 + rnd() % 0x7f7fffff); break;            /* any positive finite */
        case 1: s = 127.0f / ldexpf(fabsf(rndf()) + 1e-3f, (int)(rnd() % 40) - 20); break;
        case 2: s = bits_f(1 + rnd() % 0x7fffff); break;              /* subnormal */
        default: s = bits_f(0x7f000000 + rnd() % 0x7fffff); break;   /* huge: subnormal results */
        }
        for (int q = -255; q <= 255; q += (t % 50 == 0 ? 1 : 37)) {
            float want = (float)q / s;
            assert_int_equal(bn_div_rn_bits(q, s), f_bits(want));
        }
    }
}

/* ---- fast paths against the reference ------------------------------------------ */

typedef struct { uint64_t rows, cols; } shape;

static void compare_backend(bitnet_backend *be, const char *what, int big)
{
    static const shape small[] = {{1, 1}, {3, 0}, {0, 5}, {1, 3}, {3, 17}, {17, 255}, {3, 4097}, {255, 3}, {5, 128}, {2, 300},
                                  {1, 70000}, {1, 300001}};
    static const shape large[] = {{1000, 4096}};
    const shape *sh = big ? large : small;
    size_t nsh = big ? 1 : sizeof small / sizeof *small;
    const struct { bitnet_scale_kind kind; uint32_t group; } kinds[] = {
        {BITNET_SCALE_TENSOR, 0}, {BITNET_SCALE_ROW, 0}, {BITNET_SCALE_GROUP, 32},
        {BITNET_SCALE_GROUP, 128}, {BITNET_SCALE_GROUP, 512}};
    for (size_t si = 0; si < nsh; si++) {
        uint64_t rows = sh[si].rows, cols = sh[si].cols, n = rows * cols;
        float *w = rand_weights(n, si % 2 == 0);
        size_t tb = rows * bitnet_t2_row_bytes(cols);
        uint64_t maxsc = rows * ((cols + 31) / 32) + rows + 1; /* row scales of 0 columns too */
        uint8_t *t2r = malloc(tb + 1), *t2f = malloc(tb + 1);
        float *dr = malloc(maxsc * 4), *df = malloc(maxsc * 4), *wr = malloc(n * 4), *wf = malloc(n * 4);
        for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++) {
            if (big && kinds[ki].kind == BITNET_SCALE_GROUP && kinds[ki].group != 128) continue;
            bitnet_scale_kind kind = kinds[ki].kind;
            uint32_t g = kinds[ki].group;
            uint64_t nsc = kind == BITNET_SCALE_TENSOR ? 1 : kind == BITNET_SCALE_ROW ? rows : rows * ((cols + g - 1) / g);
            assert_int_equal(bitnet_quantize_weights_ref(w, rows, cols, kind, g, t2r, dr), BITNET_OK);
            memset(t2f, 0xee, tb);
            memset(df, 0xee, nsc * 4);
            bitnet_status st = bitnet_quantize_weights(be, w, rows, cols, kind, g, t2f, df);
            if (st) fail_msg("%s: %llux%llu kind %d/%u: %s (%s)", what, (unsigned long long)rows,
                             (unsigned long long)cols, kind, g, bitnet_strerror(st), bitnet_error_detail());
            if (memcmp(df, dr, nsc * 4) || memcmp(t2f, t2r, tb))
                fail_msg("%s: %llux%llu kind %d/%u: codes or scales differ from the _ref", what,
                         (unsigned long long)rows, (unsigned long long)cols, kind, g);
            /* dequantization of the same */
            assert_int_equal(bitnet_dequantize_weights_ref(t2r, rows, cols, kind, g, dr, wr), BITNET_OK);
            assert_int_equal(bitnet_dequantize_weights(be, t2r, rows, cols, kind, g, dr, wf), BITNET_OK);
            if (memcmp(wr, wf, n * 4)) fail_msg("%s: dequantize_weights %llux%llu differs", what,
                                                (unsigned long long)rows, (unsigned long long)cols);
        }
        /* activations: per row absmax */
        int8_t *qr = malloc(n + 1), *qf = malloc(n + 1);
        float *x = malloc((n + 1) * 4);
        for (uint64_t i = 0; i < n; i++) x[i] = w[i] * (float)(1 + i % 7) * 40.0f;
        assert_int_equal(bitnet_quantize_acts_ref(x, rows, cols, qr, dr), BITNET_OK);
        assert_int_equal(bitnet_quantize_acts(be, x, rows, cols, qf, df), BITNET_OK);
        if (memcmp(qr, qf, n) || memcmp(dr, df, rows * 4))
            fail_msg("%s: quantize_acts %llux%llu differs", what, (unsigned long long)rows, (unsigned long long)cols);
        assert_int_equal(bitnet_dequantize_acts_ref(qr, rows, cols, dr, wr), BITNET_OK);
        assert_int_equal(bitnet_dequantize_acts(be, qr, rows, cols, dr, wf), BITNET_OK);
        if (memcmp(wr, wf, n * 4)) fail_msg("%s: dequantize_acts %llux%llu differs", what, (unsigned long long)rows,
                                            (unsigned long long)cols);
        free(w), free(t2r), free(t2f), free(dr), free(df), free(wr), free(wf), free(qr), free(qf), free(x);
    }
}

/* Every 8 aligned values are a shuffle of the hand case of ref_ties, so every
 * slice mean is exactly 1 and the products hit the ties 0.5 and 1.5. */
static void ties_backend(bitnet_backend *be, const char *what)
{
    const float pat[8] = {0.5f, 1.5f, -0.5f, -1.5f, 0.625f, -0.375f, 2.0f, 1.0f};
    const int code[8] = {1, 2, 1, 0, 2, 1, 2, 2};
    const shape sh[] = {{17, 4096}, {3, 136}, {1, 8}, {2, 300008}};
    for (int si = 0; si < 4; si++) {
        uint64_t rows = sh[si].rows, cols = sh[si].cols, n = rows * cols;
        float *w = malloc(n * 4);
        int *want = malloc(n * sizeof *want);
        for (uint64_t i = 0; i < n; i += 8) {
            int perm[8] = {0, 1, 2, 3, 4, 5, 6, 7};
            for (int k = 7; k > 0; k--) {
                int j = (int)(rnd() % (unsigned)(k + 1)), t = perm[k];
                perm[k] = perm[j], perm[j] = t;
            }
            for (int k = 0; k < 8; k++) w[i + k] = pat[perm[k]], want[i + k] = code[perm[k]];
        }
        size_t tb = rows * bitnet_t2_row_bytes(cols);
        uint8_t *t2 = malloc(tb);
        float *d = malloc(rows * (cols / 32 + 1) * 4);
        const bitnet_scale_kind kinds[3] = {BITNET_SCALE_TENSOR, BITNET_SCALE_ROW, BITNET_SCALE_GROUP};
        for (int k = 0; k < 3; k++) {
            if (kinds[k] == BITNET_SCALE_GROUP && cols % 32) continue;
            assert_int_equal(bitnet_quantize_weights(be, w, rows, cols, kinds[k], 32, t2, d), BITNET_OK);
            assert_true(d[0] == 1.0f);
            for (uint64_t i = 0; i < n; i++)
                if (t2_code(t2, cols, i / cols, i % cols) != want[i])
                    fail_msg("%s: ties %llux%llu kind %d: element %llu has code %d, not %d", what,
                             (unsigned long long)rows, (unsigned long long)cols, kinds[k], (unsigned long long)i,
                             t2_code(t2, cols, i / cols, i % cols), want[i]);
        }
        free(w), free(want), free(t2), free(d);
    }
}

/* Sums that a plain double accumulation gets wrong: per 32-column slice
 * 1 + 2^-23, 1, 1, two halves of 1.5 2^-52 and zeros.  The exact sum rounds up
 * to 3 + 2^-23 + 2^-51 (the halves are each below half an ulp of 3, together
 * above), so d = (3 + 2^-23 + 2^-51) / 32 rounds up from the float midpoint
 * 0.09375 + 2^-28: d = 0.09375 + 2^-27.  Adding the halves one by one in
 * double loses both and gives the tie, rounded to even: 0.09375.  Then rows
 * of extremes: subnormals only, 3e38 among 1e-30, zeros, 2^-60 .. 2^60,
 * 16-byte words alternating between 2^20 and 2^-20, and 2^60 and 2^-60. */
static void exact_cases_backend(bitnet_backend *be, const char *what)
{
    const uint64_t rows = 8, cols = 4096 + 96, n = rows * cols;
    float *w = calloc(n, 4), *d = malloc(rows * cols / 32 * 4 + 4), *dr = malloc(rows * cols / 32 * 4 + 4);
    size_t tb = rows * bitnet_t2_row_bytes(cols);
    uint8_t *t2 = malloc(tb), *t2r = malloc(tb);
    for (uint64_t c = 0; c < 4 * cols; c += 32) {
        float *x = w + c;
        x[0] = 1.0f + ldexpf(1.0f, -23), x[1] = 1.0f, x[2] = -1.0f, x[3] = ldexpf(0.75f, -52), x[4] = ldexpf(-0.75f, -52);
    }
    const float want = 0.09375f + ldexpf(1.0f, -27);
    for (uint64_t c = 0; c < cols; c++) {
        w[4 * cols + c] = bits_f((uint32_t)(c * 2654435761u) % 0x7fffffu + 1) * (c & 1 ? -1.0f : 1.0f);
        w[5 * cols + c] = c % 1000 == 7 ? -3e38f : c % 3 ? 1e-30f : ldexpf(1.0f, (int)(c % 121) - 60);
        /* alternate 16-byte words far apart: sums of many words that carry, and ranges too wide for 128 bits */
        float f = 1.0f + (float)((c * 2654435761u) % 1000) / 1000.0f;
        w[6 * cols + c] = ldexpf(f, (c / 4) % 2 ? -20 : 20);
        w[7 * cols + c] = ldexpf(f, (c / 4) % 2 ? -60 : 60);
    }
    const struct { bitnet_scale_kind kind; uint32_t group; } kinds[] = {
        {BITNET_SCALE_TENSOR, 0}, {BITNET_SCALE_ROW, 0}, {BITNET_SCALE_GROUP, 32}, {BITNET_SCALE_GROUP, 128}};
    for (size_t k = 0; k < 4; k++) {
        const bitnet_scale_kind kind = kinds[k].kind;
        const uint32_t g = kinds[k].group;
        for (uint64_t r = 4; r <= rows; r += 2) { /* the hand rows alone, then all rows */
            uint64_t nsc = kind == BITNET_SCALE_TENSOR ? 1 : kind == BITNET_SCALE_ROW ? r : r * (cols / g);
            assert_int_equal(bitnet_quantize_weights(be, w, r, cols, kind, g, t2, d), BITNET_OK);
            assert_int_equal(bitnet_quantize_weights_ref(w, r, cols, kind, g, t2r, dr), BITNET_OK);
            for (uint64_t i = 0; r == 4 && i < nsc; i++)
                if (d[i] != want)
                    fail_msg("%s: exact sums, kind %d/%u: scale %llu is %a, not %a", what, kind, g,
                             (unsigned long long)i, (double)d[i], (double)want);
            if (memcmp(d, dr, nsc * 4) || memcmp(t2, t2r, r * bitnet_t2_row_bytes(cols)))
                fail_msg("%s: exact sums, %llu rows, kind %d/%u: codes or scales differ from the _ref", what,
                         (unsigned long long)r, kind, g);
        }
    }
    free(w), free(d), free(dr), free(t2), free(t2r);
}

/* A per-tensor sum that needs its sticky bit: 2^30 (1 + 2^-24 + 2^-53 +
 * 2^-80) is just above a tie of doubles, so it rounds up to 2^30 (1 + 2^-24
 * + 2^-52), and its mean over 2^20 elements to the float 2^10 (1 + 2^-23);
 * without the bit below the double's last it would round to the tie's even
 * side, 2^10.  The four values lie far apart (different pieces of every
 * layout), signs mixed, zeros elsewhere. */
static void sticky_sum_backend(bitnet_backend *be, const char *what)
{
    const uint64_t rows = 1024, cols = 1024, n = rows * cols;
    float *w = calloc(n, 4), d, dr;
    size_t tb = rows * bitnet_t2_row_bytes(cols);
    uint8_t *t2 = malloc(tb), *t2r = malloc(tb);
    assert_non_null(w), assert_non_null(t2), assert_non_null(t2r);
    w[5] = ldexpf(1.0f, 30), w[300001] = -ldexpf(1.0f, 6), w[700003] = ldexpf(1.0f, -23);
    w[n - 6] = -ldexpf(1.0f, -50);
    assert_int_equal(bitnet_quantize_weights(be, w, rows, cols, BITNET_SCALE_TENSOR, 0, t2, &d), BITNET_OK);
    assert_int_equal(bitnet_quantize_weights_ref(w, rows, cols, BITNET_SCALE_TENSOR, 0, t2r, &dr), BITNET_OK);
    const float want = ldexpf(1.0f + ldexpf(1.0f, -23), 10);
    if (d != want || dr != want)
        fail_msg("%s: sticky sum: scale %a, _ref %a, not %a", what, (double)d, (double)dr, (double)want);
    if (memcmp(t2, t2r, tb)) fail_msg("%s: sticky sum: codes differ from the _ref", what);
    free(w), free(t2), free(t2r);
}

/* The activation kernels of every SIMD level this CPU runs: the codes and
 * scale of bitnet_quantize_acts_ref, and with a sum pointer the sum of the
 * codes (OpenCL BitLinear uploads it with host-made activations); awkward
 * lengths around the vector widths, rows holding +-max and ties. */
static void qacts_kernels(void **state)
{
    (void)state;
    const bn_simd hw = bn_cpu_simd();
    const int nk = hw >= BN_SIMD_AVX512 ? 3 : hw >= BN_SIMD_AVX2 ? 2 : 1;
    const bn_quant_kernels *ks[3] = {bn_quant_kernels_for(BN_SIMD_SCALAR), bn_quant_kernels_for(BN_SIMD_AVX2),
                                     bn_quant_kernels_for(BN_SIMD_AVX512)};
    static const size_t ns[] = {1, 3, 8, 15, 16, 17, 31, 32, 33, 63, 255, 256, 4097};
    float x[4097], sr;
    int8_t qr[4097], q[4097];
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (int t = 0; t < 8; t++) {
            const size_t n = ns[a];
            const float big = t % 2 ? 1e3f : 0.1f;
            for (size_t i = 0; i < n; i++) x[i] = big * rndf() + (t % 4 == 3 ? big : 0.0f); /* some rows mostly positive */
            if (n > 2) x[rnd() % n] = t % 3 ? -big * 2 : big * 2;                          /* the max, either sign */
            assert_int_equal(bitnet_quantize_acts_ref(x, 1, n, qr, &sr), BITNET_OK);
            int32_t want = 0;
            for (size_t i = 0; i < n; i++) want += qr[i];
            for (int k = 0; k < nk; k++) {
                float s = 0;
                int32_t sum = INT32_MIN;
                memset(q, 0x55, sizeof q);
                assert_int_equal(ks[k]->qacts(x, n, q, &s, &sum), n);
                assert_memory_equal(q, qr, n);
                assert_true(s == sr);
                if (sum != want) fail_msg("%s, n %zu: code sum %d, want %d", ks[k]->name, n, sum, want);
                assert_int_equal(ks[k]->qacts(x, n, q, &s, NULL), n); /* no sum asked */
                assert_memory_equal(q, qr, n);
            }
        }
}

static void fast_cpu(void **state)
{
    (void)state;
    const char *levels[] = {"scalar", "avx2", "avx512"};
    for (int l = 0; l < 3; l++)
        for (int th = 1; th <= 2; th++) {
            setenv("BITNET_SIMD", levels[l], 1);
            bitnet_backend *be;
            assert_int_equal(bitnet_backend_create(&be, "cpu", th), BITNET_OK);
            char what[64];
            snprintf(what, sizeof what, "cpu %s, %d threads", levels[l], th);
            compare_backend(be, what, 0);
            ties_backend(be, what);
            exact_cases_backend(be, what);
            sticky_sum_backend(be, what);
            if (l == 2 || th == 2) compare_backend(be, what, 1);
            bitnet_backend_free(be);
        }
    unsetenv("BITNET_SIMD");
}

/* NaN/Inf, invalid codes and the planted bug, on one backend */
static void errors_backend(bitnet_backend *be)
{
    float w[5 * 300];
    for (int i = 0; i < 1500; i++) w[i] = rndf();
    w[3 * 300 + 201] = NAN;
    uint8_t t2[5 * 96], t2r[5 * 96];
    float d[5 * 10], dr[5 * 10], x[1500];
    int8_t q[1500], qr[1500];
    for (int k = 1; k <= 3; k++) {
        memset(t2, 0xa5, sizeof t2), memset(d, 0xa5, sizeof d);
        assert_int_equal(bitnet_quantize_weights(be, w, 5, 300, (bitnet_scale_kind)k, 32, t2, d), BITNET_E_NUMERIC);
        assert_non_null(strstr(bitnet_error_detail(), "row 3, column 201"));
        /* nothing written per tensor, nor on OpenCL (bitnet.h) */
        const int kept = k == BITNET_SCALE_TENSOR || strncmp(bitnet_backend_describe(be), "opencl", 6) == 0;
        for (size_t i = 0; kept && i < sizeof t2; i++)
            if (t2[i] != 0xa5) fail_msg("quantize_weights kind %d wrote its codes before failing", k);
        for (size_t i = 0; kept && i < sizeof d; i++)
            if (((const uint8_t *)d)[i] != 0xa5) fail_msg("quantize_weights kind %d wrote its scales before failing", k);
    }
    w[3 * 300 + 201] = INFINITY;
    assert_int_equal(bitnet_quantize_acts(be, w, 5, 300, q, d), BITNET_E_NUMERIC);
    assert_non_null(strstr(bitnet_error_detail(), "row 3, column 201"));
    w[3 * 300 + 201] = 0.5f;
    assert_int_equal(bitnet_quantize_weights(be, w, 5, 300, BITNET_SCALE_ROW, 0, t2, d), BITNET_OK);
    t2[96 * 4 + 32 + 7] |= 0xc0; /* code 3: row 4, column 128 + 96 + 7 */
    assert_int_equal(bitnet_dequantize_weights(be, t2, 5, 300, BITNET_SCALE_ROW, 0, d, x), BITNET_E_FORMAT);
    assert_non_null(strstr(bitnet_error_detail(), "row 4, column 231"));
    /* the planted bug shows in the fast path and never in the _ref */
    setenv("BITNET_TEST_PERTURB", "quantize_weights,quantize_acts,dequantize_weights,dequantize_acts", 1);
    assert_int_equal(bitnet_quantize_weights_ref(w, 5, 300, BITNET_SCALE_TENSOR, 0, t2r, dr), BITNET_OK);
    assert_int_equal(bitnet_quantize_weights(be, w, 5, 300, BITNET_SCALE_TENSOR, 0, t2, d), BITNET_OK);
    assert_true(memcmp(t2r, t2, sizeof t2) != 0);
    assert_int_equal(bitnet_quantize_acts_ref(w, 5, 300, qr, dr), BITNET_OK);
    assert_int_equal(bitnet_quantize_acts(be, w, 5, 300, q, d), BITNET_OK);
    assert_true(memcmp(qr, q, sizeof q) != 0);
    float xr[1500];
    assert_int_equal(bitnet_dequantize_acts_ref(qr, 5, 300, dr, xr), BITNET_OK);
    assert_int_equal(bitnet_dequantize_acts(be, qr, 5, 300, dr, x), BITNET_OK);
    assert_true(memcmp(xr, x, sizeof x) != 0);
    unsetenv("BITNET_TEST_PERTURB");
    assert_int_equal(bitnet_quantize_acts(be, w, 5, 300, q, d), BITNET_OK);
    assert_memory_equal(qr, q, sizeof q);
}

static void fast_opencl(void **state)
{
    (void)state;
    bitnet_backend *be = NULL;
    if (bitnet_backend_create(&be, "opencl", 0) != BITNET_OK) {
        printf("# no OpenCL device: %s\n", bitnet_error_detail());
        skip();
    }
    compare_backend(be, "opencl", 0);
    ties_backend(be, "opencl");
    errors_backend(be);
    exact_cases_backend(be, "opencl");
    sticky_sum_backend(be, "opencl");
    compare_backend(be, "opencl", 1);
    bitnet_backend_free(be);
}

/* The GPU layout of the OpenCL quantizer (kernels/quantize.cl, *_gpu), forced
 * on whatever device there is, with the default and three odd geometries. */
static void opencl_gpu_layout(void **state)
{
    (void)state;
    bitnet_backend *be = NULL;
    setenv("BITNET_OCL_FORCE_GPU_LAYOUT", "1", 1);
    if (bitnet_backend_create(&be, "opencl", 0) != BITNET_OK) {
        unsetenv("BITNET_OCL_FORCE_GPU_LAYOUT");
        printf("# no OpenCL device: %s\n", bitnet_error_detail());
        skip();
    }
    /* the last: over a thousand pieces a long slice, so that q_merge_gpu's
     * items take several rounds of pieces */
    const char *tunes[] = {NULL, "-DQ_GWG=32 -DQ_PER_CU=1 -DQ_PACK_WG=7", "-DQ_GWG=512 -DQ_PER_CU=64 -DQ_PACK_WG=64",
                           "-DQ_GWG=32 -DQ_PER_CU=1024"};
    for (int t = 0; t < 4; t++) {
        char what[96];
        snprintf(what, sizeof what, "opencl gpu layout %s", tunes[t] ? tunes[t] : "(defaults)");
        if (tunes[t]) setenv("BITNET_QUANT_OPTS", tunes[t], 1);
        exact_cases_backend(be, what);
        sticky_sum_backend(be, what);
        compare_backend(be, what, 0);
        ties_backend(be, what);
        if (t == 0) {
            errors_backend(be);
            compare_backend(be, what, 1);
        }
        unsetenv("BITNET_QUANT_OPTS");
    }
    bitnet_backend_free(be);
    unsetenv("BITNET_OCL_FORCE_GPU_LAYOUT");
}

static void perturb_hook(void **state)
{
    (void)state;
    float *w = rand_weights(3 * 300, 0);
    uint8_t t2r[3 * 96], t2f[3 * 96];
    float dr, df;
    int8_t qr[900], qf[900];
    float sr[3], sf[3];
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "cpu", 2), BITNET_OK);
    errors_backend(be);
    bitnet_backend_free(be);
    assert_int_equal(bitnet_backend_create(&be, "cpu", 1), BITNET_OK);
    setenv("BITNET_TEST_PERTURB", "quantize_weights,quantize_acts", 1);
    assert_int_equal(bitnet_quantize_weights_ref(w, 3, 300, BITNET_SCALE_TENSOR, 0, t2r, &dr), BITNET_OK);
    assert_int_equal(bitnet_quantize_weights(be, w, 3, 300, BITNET_SCALE_TENSOR, 0, t2f, &df), BITNET_OK);
    assert_true(memcmp(t2r, t2f, sizeof t2r) != 0);
    assert_int_equal(bitnet_quantize_acts_ref(w, 3, 300, qr, sr), BITNET_OK);
    assert_int_equal(bitnet_quantize_acts(be, w, 3, 300, qf, sf), BITNET_OK);
    assert_true(memcmp(qr, qf, sizeof qr) != 0);
    unsetenv("BITNET_TEST_PERTURB");
    assert_int_equal(bitnet_quantize_weights(be, w, 3, 300, BITNET_SCALE_TENSOR, 0, t2f, &df), BITNET_OK);
    assert_memory_equal(t2r, t2f, sizeof t2r);
    bitnet_backend_free(be);
    free(w);
}

/* ---- real trained weights --------------------------------------------------------- */

static void real_weights(void **state)
{
    (void)state;
    const char *td = getenv("BITNET_TESTDATA");
    char path[4096];
    const char *files[] = {"hep-bitnet-mnist-b158", "hep-bitnet-mnist-float", "fastml-jet-b158", "dfdx-mnist-mlp"};
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "cpu", 2), BITNET_OK);
    int checked = 0;
    for (int fi = 0; fi < 4; fi++) {
        snprintf(path, sizeof path, "%s/real/%s.safetensors", td ? td : "testdata", files[fi]);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        bitnet_st_reader *r;
        assert_int_equal(bitnet_st_reader_create(&r, f, NULL, 0), BITNET_OK);
        bitnet_tensor t;
        int layer = 0;
        while (bitnet_st_reader_next(r, &t) == BITNET_OK) {
            size_t nl = strlen(t.info.name);
            if (t.info.rank != 2 || t.info.dtype != BITNET_F32 || nl < 7 || strcmp(t.info.name + nl - 7, ".weight")) {
                bitnet_tensor_release(&t);
                continue;
            }
            uint64_t rows = t.info.dims[0], cols = t.info.dims[1], n = rows * cols;
            const float *w = t.data;
            uint8_t *t2 = malloc(rows * bitnet_t2_row_bytes(cols));
            float d;
            assert_int_equal(bitnet_quantize_weights(be, w, rows, cols, BITNET_SCALE_TENSOR, 0, t2, &d), BITNET_OK);
            /* independently: mean |w|, codes by rounding, zeros, error */
            double sum = 0, err = 0, ref = 0;
            for (uint64_t i = 0; i < n; i++) sum += fabs((double)w[i]);
            float dd = (float)(sum / (double)n);
            if (dd < 1e-5f) dd = 1e-5f;
            uint64_t zeros = 0, zl = 0;
            for (uint64_t i = 0; i < n; i++) {
                float p = w[i] * (1.0f / dd);
                int qi = p > 0.5f ? 1 : p < -0.5f ? -1 : 0;
                zeros += qi == 0;
                zl += t2_code(t2, cols, i / cols, i % cols) == 1;
                double e = (double)w[i] - (double)t2_code(t2, cols, i / cols, i % cols) * d + d;
                err += e * e;
                ref += (double)w[i] * w[i];
            }
            assert_true(fabs((double)d - dd) <= 1e-6 * dd);
            double fz = (double)zl / (double)n, fzi = (double)zeros / (double)n;
            assert_true(fabs(fz - fzi) < 1e-4);
            double rel = sqrt(err / ref);
            /* the reconstruction error of absmean ternary codes is large but bounded */
            assert_true(rel > 0.0 && rel < 1.0);
            printf("# %s %s [%llu, %llu]: d %.6g, zeros %.2f%%, relative RMS error %.4f\n", files[fi], t.info.name,
                   (unsigned long long)rows, (unsigned long long)cols, (double)d, 100 * fz, rel);
            if (fi == 0) { /* the quantization-aware model: about 8%, 31%, 0%, 0% zeros */
                const double want[4] = {0.08, 0.31, 0.0, 0.0};
                assert_true(layer < 4 && fabs(fz - want[layer]) < 0.03);
            }
            layer++;
            checked++;
            free(t2);
            bitnet_tensor_release(&t);
        }
        bitnet_st_reader_free(r);
        fclose(f);
    }
    assert_true(checked >= 10);
    bitnet_backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ref_ties),
        cmocka_unit_test(ref_special_values),
        cmocka_unit_test(ref_exact_sum),
        cmocka_unit_test(ref_nonfinite),
        cmocka_unit_test(ref_acts_and_dequant),
        cmocka_unit_test(xsum_and_division),
        cmocka_unit_test(qacts_kernels),
        cmocka_unit_test(fast_cpu),
        cmocka_unit_test(fast_opencl),
        cmocka_unit_test(opencl_gpu_layout),
        cmocka_unit_test(perturb_hook),
        cmocka_unit_test(real_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
