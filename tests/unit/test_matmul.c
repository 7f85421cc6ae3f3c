/*
 * test_matmul.c - the float product y = x w^T (+bias, act): the _ref and
 * every backend (CPU through OpenBLAS with 1 and 2 threads, OpenCL when
 * present) against a float64 loop written here, by NMSE <= 1e-9; the
 * epilogue (bias, activation) against the scalar definitions; errors; the
 * planted bug.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bitnet.h"
#include "testutil.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static float rndf(void) { return tu_randf53(&rng_state); }

/* float64 model of the same product, activations written from their formulas */
static double act64(bitnet_act a, double v)
{
    switch (a) {
    case BITNET_ACT_RELU: return v > 0 ? v : 0;
    case BITNET_ACT_GELU: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    case BITNET_ACT_GELU_TANH: return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case BITNET_ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case BITNET_ACT_SILU: return v / (1.0 + exp(-v));
    default: return v;
    }
}

static void model(const float *x, uint64_t T, uint64_t in, const float *w, uint64_t out, const float *bias,
                  bitnet_act act, double *y)
{
    for (uint64_t t = 0; t < T; t++)
        for (uint64_t o = 0; o < out; o++) {
            double s = 0;
            for (uint64_t i = 0; i < in; i++) s += (double)x[t * in + i] * w[o * in + i];
            if (bias) s += bias[o];
            y[t * out + o] = act64(act, s);
        }
}

static double nmse(const double *ref, const float *got, uint64_t n)
{
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

typedef struct { uint64_t tokens, in, out; } shape3;
static const shape3 shapes[] = {{1, 1, 1}, {1, 3, 5}, {2, 17, 64}, {7, 255, 5}, {1, 4097, 64}, {64, 255, 1000}, {9, 130, 33}, {3, 4097, 17}, {1, 1024, 1001},
                                {130, 300, 70}, {65, 2049, 3}, {16, 1023, 9}};

static int check_backend(bitnet_backend *be)
{
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const uint64_t T = shapes[s].tokens, in = shapes[s].in, out = shapes[s].out;
        float *x = malloc(T * in * 4), *w = malloc(out * in * 4), *bias = malloc(out * 4), *y = malloc(T * out * 4);
        double *ref = malloc(T * out * 8);
        assert_non_null(x && w && bias && y && ref);
        for (uint64_t i = 0; i < T * in; i++) x[i] = rndf();
        for (uint64_t i = 0; i < out * in; i++) w[i] = rndf();
        for (uint64_t i = 0; i < out; i++) bias[i] = rndf();
        for (int a = 0; a < BITNET_ACT_COUNT; a++) {
            const float *b = a % 2 ? bias : NULL;
            model(x, T, in, w, out, b, (bitnet_act)a, ref);
            bitnet_status st = be ? bitnet_matmul_f32(be, x, T, in, w, out, b, (bitnet_act)a, y)
                                  : bitnet_matmul_f32_ref(x, T, in, w, out, b, (bitnet_act)a, y);
            if (st) { print_message("# %s\n", bitnet_error_detail()); bad++; continue; }
            const double e = nmse(ref, y, T * out);
            if (!(e <= 1e-9)) {
                print_message("# %s: tokens %llu in %llu out %llu act %s: nmse %g\n", be ? bitnet_backend_describe(be) : "ref",
                              (unsigned long long)T, (unsigned long long)in, (unsigned long long)out,
                              bitnet_act_name((bitnet_act)a), e);
                bad++;
            }
        }
        free(x); free(w); free(bias); free(y); free(ref);
    }
    return bad;
}

static void test_ref(void **state)
{
    (void)state;
    /* by hand: x = [1 2; 3 4], w = [1 0; 1 1; -1 2], bias [0, 1, -10], relu:
     * y = [1 3 3; 3 7 5] + bias = [1 4 -7; 3 8 -5] -> [1 4 0; 3 8 0] */
    const float x[4] = {1, 2, 3, 4}, w[6] = {1, 0, 1, 1, -1, 2}, bias[3] = {0, 1, -10};
    float y[6];
    assert_int_equal(bitnet_matmul_f32_ref(x, 2, 2, w, 3, bias, BITNET_ACT_RELU, y), BITNET_OK);
    const float want[6] = {1, 4, 0, 3, 8, 0};
    assert_memory_equal(y, want, sizeof want);
    assert_int_equal(check_backend(NULL), 0);
}

static void test_cpu(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        bitnet_backend *be;
        assert_int_equal(bitnet_backend_create(&be, "cpu", threads), BITNET_OK);
        assert_int_equal(check_backend(be), 0);
        bitnet_backend_free(be);
    }
}

static void test_opencl(void **state)
{
    (void)state;
    bitnet_backend *be;
    if (bitnet_backend_create(&be, "opencl", 1) != BITNET_OK) skip();
    assert_int_equal(check_backend(be), 0);
    /* both products: CLBlast and the own kernels (the device decides which by default) */
    setenv("BITNET_OCL_MATMUL", "own", 1);
    assert_int_equal(check_backend(be), 0);
    /* the tiled kernel with other tiles and k splits (BITNET_OCL_MM_TILE) */
    static const char *const tiles[] = {"16,32,8,2,4,3", "32,16,4,4,2", "8,8,4,1,1,7", "64,64,16,4,4,1",
                                        "16,32,8,8,8,2"};
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        setenv("BITNET_OCL_MM_TILE", tiles[i], 1);
        if (check_backend(be)) fail_msg("BITNET_OCL_MM_TILE=%s", tiles[i]);
    }
    static const char *const bad[] = {"64,64,16,3,4", "64,64,18,4,4", "64,64,16,4", "64,64,16,4,4,0", "64,64,16,4,4x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("BITNET_OCL_MM_TILE", bad[i], 1);
        float xb[4] = {1, 2, 3, 4}, wb[4] = {1, 0, 0, 1}, yb[4];
        assert_int_equal(bitnet_matmul_f32(be, xb, 2, 2, wb, 2, NULL, BITNET_ACT_NONE, yb), BITNET_E_INVALID);
        assert_non_null(strstr(bitnet_error_detail(), "BITNET_OCL_MM_TILE"));
    }
    unsetenv("BITNET_OCL_MM_TILE");
    setenv("BITNET_OCL_MATMUL", "clblast", 1);
    assert_int_equal(check_backend(be), 0);
    unsetenv("BITNET_OCL_MATMUL");
    bitnet_backend_free(be);
}

static void test_perturb_and_errors(void **state)
{
    (void)state;
    const char *devs[] = {"cpu", "opencl"};
    float x[6] = {1, 2, 3, 4, 5, 6}, w[6] = {1, -1, 2, 0, 1, 1}, y[4], yr[4];
    assert_int_equal(bitnet_matmul_f32_ref(x, 2, 3, w, 2, NULL, BITNET_ACT_NONE, yr), BITNET_OK);
    for (int d = 0; d < 2; d++) {
        bitnet_backend *be;
        if (bitnet_backend_create(&be, devs[d], 1) != BITNET_OK) continue;
        setenv("BITNET_TEST_PERTURB", "matmul_f32", 1);
        assert_int_equal(bitnet_matmul_f32(be, x, 2, 3, w, 2, NULL, BITNET_ACT_NONE, y), BITNET_OK);
        unsetenv("BITNET_TEST_PERTURB");
        assert_true(memcmp(y, yr, sizeof y) != 0);
        assert_int_equal(bitnet_matmul_f32(be, x, 2, 3, w, 2, NULL, BITNET_ACT_NONE, y), BITNET_OK);
        assert_memory_equal(y, yr, sizeof y);
        assert_int_equal(bitnet_matmul_f32(be, x, 0, 3, w, 2, NULL, BITNET_ACT_NONE, y), BITNET_E_SHAPE);
        assert_int_equal(bitnet_matmul_f32(be, NULL, 2, 3, w, 2, NULL, BITNET_ACT_NONE, y), BITNET_E_INVALID);
        assert_int_equal(bitnet_matmul_f32(be, x, 2, 3, w, 2, NULL, BITNET_ACT_COUNT, y), BITNET_E_INVALID);
        assert_int_equal(bitnet_matmul_f32(be, x, 1u << 20, 1u << 12, w, 2, NULL, BITNET_ACT_NONE, y), BITNET_E_OVERFLOW);
        bitnet_backend_free(be);
    }
    assert_int_equal(bitnet_matmul_f32(NULL, x, 2, 3, w, 2, NULL, BITNET_ACT_NONE, y), BITNET_E_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref),
        cmocka_unit_test(test_cpu),
        cmocka_unit_test(test_opencl),
        cmocka_unit_test(test_perturb_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
