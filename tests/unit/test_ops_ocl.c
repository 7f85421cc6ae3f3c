/*
 * test_ops_ocl.c - every tensor op on OpenCL (PoCL here, any device on the
 * GPU machine) against the CPU reference: exact where the op is exact
 * (binary, relu/neg/abs/sqrt/scale, max/min/argmax, permute), within 4 ulp
 * for transcendental functions, softmax and norms, NMSE <= 1e-12 for sums.
 * Skips (passes with a note) when no OpenCL device exists.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>

#include "ops_testlib.h"

static bitnet_backend *ocl;

static int setup(void **state)
{
    (void)state;
    unsetenv("BITNET_TEST_PERTURB");
    if (bitnet_backend_create(&ocl, "opencl", 0) != BITNET_OK) {
        printf("# no OpenCL device (%s): OpenCL op tests skipped\n", bitnet_error_detail());
        ocl = NULL;
    }
    return 0;
}
static int teardown(void **state)
{
    (void)state;
    bitnet_backend_free(ocl);
    return 0;
}

#define NEED_DEVICE() do { if (!ocl) skip(); } while (0)

static void expect_ulps(const float *y, const float *r, uint64_t n, double ulps, const char *what)
{
    for (uint64_t i = 0; i < n; i++)
        if (ulp_diff(y[i], r[i]) > ulps) fail_msg("%s at %llu: opencl %.9g, reference %.9g", what, (unsigned long long)i, y[i], r[i]);
}

static void test_ocl_binary(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const uint32_t shapes[][2][5] = {
        {{1, 1}, {1, 1}},          {{1, 17}, {0}},             {{0}, {1, 4097}},        {{2, 3, 255}, {1, 255}},
        {{2, 255, 3}, {2, 255, 1}}, {{2, 1, 17}, {2, 33, 1}},  {{3, 5, 1, 17}, {2, 3, 1}}, {{1, 100003}, {1, 100003}},
    };
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        bitnet_shape sa = shape_from(shapes[t][0]), sb = shape_from(shapes[t][1]), sy;
        assert_int_equal(bitnet_broadcast_shape(&sa, &sb, &sy), BITNET_OK);
        uint64_t na = shape_n(&sa), nb = shape_n(&sb), ny = shape_n(&sy);
        float *a = rand_floats(na, 10 + t), *b = rand_floats(nb, 20 + t), *y = malloc(ny * 4), *r = malloc(ny * 4);
        if (na > 3) { a[1] = NAN; a[2] = INFINITY; }
        if (nb > 3) { b[3] = NAN; b[0] = 0; }
        for (int op = 0; op < BITNET_BIN_COUNT; op++) {
            assert_int_equal(bitnet_binary(ocl, (bitnet_binary_op)op, a, &sa, b, &sb, y), BITNET_OK);
            assert_int_equal(bitnet_binary_ref((bitnet_binary_op)op, a, &sa, b, &sb, r), BITNET_OK);
            if (!same_bits_nan(y, r, ny)) fail_msg("binary op %d case %zu differs from the reference", op, t);
        }
        free(a); free(b); free(y); free(r);
    }
}

static void test_ocl_unary(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const uint64_t sizes[] = {1, 3, 17, 255, 4097, 65539};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        uint64_t n = sizes[s];
        float *x = rand_floats(n, 70 + s), *y = malloc(n * 4), *r = malloc(n * 4);
        for (uint64_t i = 0; i < n; i++) x[i] *= 8;
        if (n > 4) { x[0] = NAN; x[1] = -INFINITY; x[2] = INFINITY; x[3] = -20; }
        for (int op = 0; op < BITNET_UN_COUNT; op++) {
            int exact = op == BITNET_UN_RELU || op == BITNET_UN_NEG || op == BITNET_UN_ABS || op == BITNET_UN_SCALE ||
                        op == BITNET_UN_SQRT;
            assert_int_equal(bitnet_unary(ocl, (bitnet_unary_op)op, x, n, -1.5f, y), BITNET_OK);
            assert_int_equal(bitnet_unary_ref((bitnet_unary_op)op, x, n, -1.5f, r), BITNET_OK);
            char what[32];
            snprintf(what, sizeof what, "unary op %d", op);
            expect_ulps(y, r, n, exact ? 0 : 4, what);
        }
        free(x); free(y); free(r);
    }
}

static void test_ocl_softmax(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const uint32_t shapes[][3] = {{3, 17, 255}, {2, 4097, 3}, {1, 5, 70001}, {300, 1, 1}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
        for (int axis = 0; axis < 3; axis++)
            for (int lg = 0; lg < 2; lg++) {
                bitnet_shape s = SHAPE(3, shapes[t][0], shapes[t][1], shapes[t][2]);
                uint64_t n = shape_n(&s);
                float *x = rand_floats(n, 90 + t), *y = malloc(n * 4), *r = malloc(n * 4);
                for (uint64_t i = 0; i < n; i++) x[i] *= 30;
                x[n / 2] = -INFINITY;
                if (n > 10) x[7] = 1e30f;
                assert_int_equal(bitnet_softmax(ocl, x, &s, axis, lg, y), BITNET_OK);
                assert_int_equal(bitnet_softmax_ref(x, &s, axis, lg, r), BITNET_OK);
                expect_ulps(y, r, n, 4, lg ? "log-softmax" : "softmax");
                free(x); free(y); free(r);
            }
    /* rows of -inf, a NaN, length 1, a long row of -inf */
    float z[600];
    for (int i = 0; i < 600; i++) z[i] = -INFINITY;
    z[1] = 0;
    float y[600], r[600];
    bitnet_shape s = SHAPE(2, 2, 300);
    assert_int_equal(bitnet_softmax(ocl, z, &s, -1, 0, y), BITNET_OK);
    assert_int_equal(bitnet_softmax_ref(z, &s, -1, 0, r), BITNET_OK);
    assert_true(y[1] == 1 && y[0] == 0 && isnan(y[300]) && isnan(y[599]));
    expect_ulps(y, r, 600, 0, "softmax of -inf rows");
}

static void test_ocl_reduce(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const uint64_t shapes[][4] = {{3, 17, 5, 7}, {2, 3, 4097, 1}, {1, 70001, 2, 1}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        bitnet_shape s = SHAPE(4, shapes[t][0], shapes[t][1], shapes[t][2], shapes[t][3]), ys, rs;
        uint64_t n = shape_n(&s);
        float *x = rand_floats(n, 111 + t), *y = malloc(n * 4), *r = malloc(n * 4);
        int64_t *iy = malloc(n * 8), *ir = malloc(n * 8);
        for (uint64_t i = 0; i < n; i += 101) x[i] = x[(i + 3) % n]; /* ties */
        if (t == 0) x[40] = NAN;
        for (uint32_t mask = 0; mask < 16; mask++)
            for (int op = 0; op < BITNET_RED_COUNT; op++) {
                if (op == BITNET_RED_ARGMAX && __builtin_popcount(mask) != 1) continue;
                assert_int_equal(bitnet_reduce(ocl, (bitnet_reduce_op)op, x, &s, mask, y, &ys), BITNET_OK);
                assert_int_equal(bitnet_reduce_ref((bitnet_reduce_op)op, x, &s, mask, r, &rs), BITNET_OK);
                uint64_t no = shape_n(&ys);
                if (op <= BITNET_RED_MEAN) {
                    for (uint64_t o = 0; o < no; o++)
                        if (!(isnan(y[o]) && isnan(r[o])) && fabsf(y[o] - r[o]) > 2 * ulp_of(r[o]))
                            fail_msg("reduce op %d case %zu mask %u out %llu: %.9g vs %.9g", op, t, mask, (unsigned long long)o, y[o], r[o]);
                } else if (!same_bits_nan(y, r, no)) {
                    fail_msg("reduce op %d case %zu mask %u differs", op, t, mask);
                }
                if (op == BITNET_RED_ARGMAX) {
                    int axis = __builtin_ctz(mask);
                    assert_int_equal(bitnet_reduce_argmax(ocl, x, &s, axis, iy, &ys), BITNET_OK);
                    assert_int_equal(bitnet_reduce_argmax_ref(x, &s, axis, ir, &rs), BITNET_OK);
                    assert_memory_equal(iy, ir, no * 8);
                }
            }
        free(x); free(y); free(r); free(iy); free(ir);
    }
    /* a large sum: NMSE against float64 */
    const uint64_t n = (1u << 22) + 7;
    float *x = rand_floats(n, 5), y1;
    double want = 0;
    for (uint64_t i = 0; i < n; i++) { x[i] += 100.0f; want += x[i]; }
    bitnet_shape s = SHAPE(1, n), ys;
    assert_int_equal(bitnet_reduce(ocl, BITNET_RED_SUM, x, &s, 0, &y1, &ys), BITNET_OK);
    assert_true(nmse1(y1, want) <= 1e-12);
    free(x);
}

static void test_ocl_norm(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const uint64_t rc[][2] = {{1, 1}, {3, 17}, {17, 255}, {2, 4097}, {255, 3}, {3, 4096}}; /* 4096: the most held in registers */
    for (size_t t = 0; t < sizeof rc / sizeof rc[0]; t++) {
        uint64_t rows = rc[t][0], cols = rc[t][1], n = rows * cols;
        float *x = rand_floats(n, 130 + t), *w = rand_floats(cols, 140 + t), *b = rand_floats(cols, 150 + t);
        float *y = malloc(n * 4), *r = malloc(n * 4);
        for (uint64_t i = 0; i < n; i++) x[i] = 2 + 3 * x[i];
        for (int rms = 0; rms < 2; rms++)
            for (int wb = 0; wb < 2; wb++) {
                if (rms) {
                    assert_int_equal(bitnet_rmsnorm(ocl, x, rows, cols, wb ? w : NULL, 1e-5f, y), BITNET_OK);
                    assert_int_equal(bitnet_rmsnorm_ref(x, rows, cols, wb ? w : NULL, 1e-5f, r), BITNET_OK);
                } else {
                    assert_int_equal(bitnet_layernorm(ocl, x, rows, cols, wb ? w : NULL, wb ? b : NULL, 1e-5f, y), BITNET_OK);
                    assert_int_equal(bitnet_layernorm_ref(x, rows, cols, wb ? w : NULL, wb ? b : NULL, 1e-5f, r), BITNET_OK);
                }
                for (uint64_t i = 0; i < n; i++)
                    if (fabs((double)y[i] - r[i]) > 4 * ulp_of(fabsf(r[i]) > 1e-3f ? r[i] : 1e-3))
                        fail_msg("norm rms=%d case %zu at %llu: %.9g vs %.9g", rms, t, (unsigned long long)i, y[i], r[i]);
            }
        free(x); free(w); free(b); free(y); free(r);
    }
}

static void test_ocl_permute(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const uint64_t dims[][4] = {{3, 17, 5, 2}, {1, 255, 33, 1}, {70, 1, 3, 129}};
    for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++) {
        bitnet_shape s = SHAPE(4, dims[t][0], dims[t][1], dims[t][2], dims[t][3]);
        uint64_t n = shape_n(&s);
        float *x = rand_floats(n, 160 + t), *y = malloc(n * 4), *r = malloc(n * 4);
        for (uint32_t code = 0; code < 256; code++) {
            uint32_t p[4];
            if (!perm4_of(code, p)) continue;
            assert_int_equal(bitnet_permute(ocl, x, &s, p, y), BITNET_OK);
            assert_int_equal(bitnet_permute_ref(x, &s, p, r), BITNET_OK);
            if (memcmp(y, r, n * 4) != 0) fail_msg("permute case %zu perm %u%u%u%u differs", t, p[0], p[1], p[2], p[3]);
        }
        free(x); free(y); free(r);
    }
}

static void test_ocl_perturb(void **state)
{
    (void)state;
    NEED_DEVICE();
    expect_perturb_hooks(ocl, 4, 300, BITNET_BIN_MUL, BITNET_UN_ABS, 2);
}

/* Both row layouts of the reductions (the CPU-driver one and the GPU one,
 * forced here with BITNET_OCL_FORCE_GPU_LAYOUT=1) against the reference on
 * awkward sizes: full reductions, and rows whose starts are not 16-byte
 * aligned.  Sums: within 2 ulp of the reference and NMSE <= 1e-12 against
 * float64; max/min/argmax exact (ties and a NaN included); repeatable bits. */
static void test_ocl_reduce_layouts(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const uint64_t sizes[] = {1, 3, 17, 255, 4097, (1u << 20) + 3};
    static const uint64_t rows[][2] = {{5, 4097}, {3, 17}, {7, 1}, {300, 3}, {2, 70001}, {1000, 255}};
    for (int forced = 0; forced < 2; forced++) {
        if (forced) setenv("BITNET_OCL_FORCE_GPU_LAYOUT", "1", 1);
        else unsetenv("BITNET_OCL_FORCE_GPU_LAYOUT");
        for (size_t c = 0; c < 12; c++) {
            bitnet_shape s = c < 6 ? SHAPE(1, sizes[c]) : SHAPE(2, rows[c - 6][0], rows[c - 6][1]), ys, rs;
            const uint32_t mask = c < 6 ? 0 : 2;
            const uint64_t n = shape_n(&s), len = c < 6 ? n : rows[c - 6][1];
            float *x = rand_floats(n, 900 + c), *y = malloc(n * 4), *y2 = malloc(n * 4), *r = malloc(n * 4);
            int64_t *iy = malloc(n * 8), *ir = malloc(n * 8);
            for (uint64_t i = 0; i < n; i += 7) x[i] = x[(i * 13 + 5) % n]; /* ties */
            if (c == 4 || c == 9) x[n / 2] = NAN;
            for (int op = 0; op < BITNET_RED_COUNT; op++) {
                uint32_t m = op == BITNET_RED_ARGMAX ? (c < 6 ? 1 : 2) : mask;
                assert_int_equal(bitnet_reduce(ocl, (bitnet_reduce_op)op, x, &s, m, y, &ys), BITNET_OK);
                assert_int_equal(bitnet_reduce(ocl, (bitnet_reduce_op)op, x, &s, m, y2, &ys), BITNET_OK);
                assert_int_equal(bitnet_reduce_ref((bitnet_reduce_op)op, x, &s, m, r, &rs), BITNET_OK);
                const uint64_t no = shape_n(&rs);
                if (memcmp(y, y2, no * 4) != 0 && !same_bits_nan(y, y2, no))
                    fail_msg("layout %d op %d case %zu: two runs differ", forced, op, c);
                double w;
                uint64_t o;
                if (op <= BITNET_RED_MEAN) {
                    if ((o = reduce_sum_bad(op == BITNET_RED_MEAN, x, no, len, 1, y, r, &w)) != UINT64_MAX)
                        fail_msg("layout %d op %d case %zu out %llu: %.9g, reference %.9g, float64 %.17g", forced, op,
                                 c, (unsigned long long)o, y[o], r[o], w);
                } else if (!same_bits_nan(y, r, no)) {
                    fail_msg("layout %d op %d case %zu differs from the reference", forced, op, c);
                }
                if (op == BITNET_RED_ARGMAX) {
                    assert_int_equal(bitnet_reduce_argmax(ocl, x, &s, c < 6 ? 0 : 1, iy, &ys), BITNET_OK);
                    assert_int_equal(bitnet_reduce_argmax_ref(x, &s, c < 6 ? 0 : 1, ir, &rs), BITNET_OK);
                    if (memcmp(iy, ir, no * 8) != 0) fail_msg("layout %d argmax case %zu differs", forced, c);
                }
            }
            free(x); free(y); free(y2); free(r); free(iy); free(ir);
        }
        /* the planted bug reaches the output of this layout too */
        float *x = rand_floats(4 * 4097, 77), y[4], r[4];
        bitnet_shape s = SHAPE(2, 4, 4097), ys;
        setenv("BITNET_TEST_PERTURB", "reduce", 1);
        assert_int_equal(bitnet_reduce(ocl, BITNET_RED_MAX, x, &s, 2, y, &ys), BITNET_OK);
        unsetenv("BITNET_TEST_PERTURB");
        assert_int_equal(bitnet_reduce_ref(BITNET_RED_MAX, x, &s, 2, r, &ys), BITNET_OK);
        assert_int_equal(count_diff(y, r, 4), 1);
        free(x);
    }
    unsetenv("BITNET_OCL_FORCE_GPU_LAYOUT");
}

/* Reduced middle axes ([outer, len, inner] over len) in both layouts; the
 * GPU one cuts len into chunks when there are few outputs.  Column extremes
 * tied in the first and last rows, a NaN; exact for max/min/argmax, sums
 * within 2 ulp of the reference and NMSE <= 1e-12 against float64. */
static void test_ocl_reduce_cols_layouts(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const uint64_t shapes[][3] = {{1, 4097, 3}, {3, 1000, 17}, {1, 300, 255}, {2, 70001, 1}, {1, 33, 5}};
    for (int forced = 0; forced < 2; forced++) {
        if (forced) setenv("BITNET_OCL_FORCE_GPU_LAYOUT", "1", 1);
        else unsetenv("BITNET_OCL_FORCE_GPU_LAYOUT");
        for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
            const uint64_t outer = shapes[t][0], len = shapes[t][1], inner = shapes[t][2], n = outer * len * inner;
            bitnet_shape s = SHAPE(3, outer, len, inner), ys, rs;
            float *x = rand_floats(n, 300 + t), *y = malloc(n * 4), *r = malloc(n * 4);
            int64_t *iy = malloc(n * 8), *ir = malloc(n * 8);
            for (uint64_t i = 0; i < n; i += 5) x[i] = x[(i * 7 + 3) % n];
            x[inner / 2] = x[(len - 1) * inner + inner / 2] = 2.0f;
            x[inner + inner / 3] = x[(len - 2) * inner + inner / 3] = -2.0f;
            if (t == 1) x[n - 2 * inner] = NAN;
            const uint64_t no = outer * inner;
            for (int op = 0; op < BITNET_RED_COUNT; op++) {
                assert_int_equal(bitnet_reduce(ocl, (bitnet_reduce_op)op, x, &s, 2, y, &ys), BITNET_OK);
                assert_int_equal(bitnet_reduce_ref((bitnet_reduce_op)op, x, &s, 2, r, &rs), BITNET_OK);
                double w;
                uint64_t o;
                if (op <= BITNET_RED_MEAN) {
                    if ((o = reduce_sum_bad(op == BITNET_RED_MEAN, x, no, len, inner, y, r, &w)) != UINT64_MAX)
                        fail_msg("layout %d op %d case %zu out %llu: %.9g, reference %.9g, float64 %.17g", forced, op, t,
                                 (unsigned long long)o, y[o], r[o], w);
                } else if (!same_bits_nan(y, r, no)) {
                    fail_msg("layout %d op %d case %zu differs from the reference", forced, op, t);
                }
                if (op == BITNET_RED_ARGMAX) {
                    assert_int_equal(bitnet_reduce_argmax(ocl, x, &s, 1, iy, &ys), BITNET_OK);
                    assert_int_equal(bitnet_reduce_argmax_ref(x, &s, 1, ir, &rs), BITNET_OK);
                    if (memcmp(iy, ir, no * 8) != 0) fail_msg("layout %d argmax case %zu differs", forced, t);
                }
            }
            free(x); free(y); free(r); free(iy); free(ir);
        }
    }
    unsetenv("BITNET_OCL_FORCE_GPU_LAYOUT");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ocl_binary), cmocka_unit_test(test_ocl_unary),   cmocka_unit_test(test_ocl_softmax),
        cmocka_unit_test(test_ocl_reduce), cmocka_unit_test(test_ocl_norm),    cmocka_unit_test(test_ocl_permute),
        cmocka_unit_test(test_ocl_perturb),
        cmocka_unit_test(test_ocl_reduce_layouts),
        cmocka_unit_test(test_ocl_reduce_cols_layouts),
    };
    return cmocka_run_group_tests_name("ops_ocl", tests, setup, teardown);
}
