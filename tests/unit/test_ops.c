/*
 * test_ops.c - tensor ops on the CPU: the references against hand-computed
 * values, the references and the fast paths against float64 computed here,
 * broadcasting, awkward sizes, NaN/Inf rules, large reductions, shape errors,
 * and the BITNET_TEST_PERTURB hook.  OpenCL is in test_ops_ocl.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bitnet.h"
#include "ops_testlib.h"

static bitnet_backend *cpu;

static int setup(void **state)
{
    (void)state;
    unsetenv("BITNET_TEST_PERTURB");
    return bitnet_backend_create(&cpu, "cpu", 0) == BITNET_OK ? 0 : -1;
}
/* The same tests with the SIMD level capped: the portable fast paths. */
static int setup_scalar(void **state)
{
    setenv("BITNET_SIMD", "scalar", 1);
    int r = setup(state);
    unsetenv("BITNET_SIMD");
    return r;
}
static int teardown(void **state)
{
    (void)state;
    bitnet_backend_free(cpu);
    return 0;
}

/* ---- broadcasting ------------------------------------------------------- */

static void test_broadcast_shape(void **state)
{
    (void)state;
    bitnet_shape a = SHAPE(2, 2, 3), b = SHAPE(1, 3), c = SHAPE(1, 4), y;
    assert_int_equal(bitnet_broadcast_shape(&a, &b, &y), BITNET_OK);
    assert_int_equal(y.rank, 2);
    assert_int_equal(y.dims[0], 2);
    assert_int_equal(y.dims[1], 3);
    bitnet_shape col = SHAPE(2, 4, 1), row = SHAPE(2, 1, 5);
    assert_int_equal(bitnet_broadcast_shape(&col, &row, &y), BITNET_OK);
    assert_int_equal(y.rank, 2);
    assert_int_equal(y.dims[0], 4);
    assert_int_equal(y.dims[1], 5);
    bitnet_shape s0 = {0, {0}};
    bitnet_shape t3 = SHAPE(3, 2, 1, 7);
    assert_int_equal(bitnet_broadcast_shape(&s0, &t3, &y), BITNET_OK);
    assert_int_equal(y.rank, 3);
    assert_int_equal(y.dims[2], 7);
    assert_int_equal(bitnet_broadcast_shape(&a, &c, &y), BITNET_E_SHAPE);
    assert_non_null(strstr(bitnet_error_detail(), "cannot broadcast [2, 3] with [4]"));
    float buf[6] = {0}, out[6];
    assert_int_equal(bitnet_binary(cpu, BITNET_BIN_ADD, buf, &a, buf, &c, out), BITNET_E_SHAPE);
    assert_int_equal(bitnet_binary_ref(BITNET_BIN_ADD, buf, &a, buf, &c, out), BITNET_E_SHAPE);
    assert_int_equal(bitnet_binary(cpu, BITNET_BIN_COUNT, buf, &a, buf, &b, out), BITNET_E_INVALID);
}

static void test_binary_hand(void **state)
{
    (void)state;
    const float a[6] = {1, 2, 3, 4, 5, 6}, row[3] = {10, 20, 30}, col[2] = {100, 200}, two = 2;
    bitnet_shape sa = SHAPE(2, 2, 3), sr = SHAPE(1, 3), sc = SHAPE(2, 2, 1), s0 = {0, {0}};
    float y[6];
    const float add_row[6] = {11, 22, 33, 14, 25, 36}, sub_col[6] = {-99, -98, -97, -196, -195, -194};
    const float div_s[6] = {0.5f, 1, 1.5f, 2, 2.5f, 3};
    assert_int_equal(bitnet_binary_ref(BITNET_BIN_ADD, a, &sa, row, &sr, y), BITNET_OK);
    assert_memory_equal(y, add_row, sizeof y);
    assert_int_equal(bitnet_binary_ref(BITNET_BIN_SUB, a, &sa, col, &sc, y), BITNET_OK);
    assert_memory_equal(y, sub_col, sizeof y);
    assert_int_equal(bitnet_binary_ref(BITNET_BIN_DIV, a, &sa, &two, &s0, y), BITNET_OK);
    assert_memory_equal(y, div_s, sizeof y);
    /* scalar on the left, max/min */
    const float three = 3.5f, max_s[6] = {3.5f, 3.5f, 3.5f, 4, 5, 6}, min_s[6] = {1, 2, 3, 3.5f, 3.5f, 3.5f};
    assert_int_equal(bitnet_binary_ref(BITNET_BIN_MAX, &three, &s0, a, &sa, y), BITNET_OK);
    assert_memory_equal(y, max_s, sizeof y);
    assert_int_equal(bitnet_binary(cpu, BITNET_BIN_MIN, &three, &s0, a, &sa, y), BITNET_OK);
    assert_memory_equal(y, min_s, sizeof y);
    /* column x row -> outer product */
    float op[6];
    const float mul_cr[6] = {1000, 2000, 3000, 2000, 4000, 6000};
    assert_int_equal(bitnet_binary(cpu, BITNET_BIN_MUL, col, &sc, row, &sr, op), BITNET_OK);
    assert_memory_equal(op, mul_cr, sizeof op);
}

/* y = a op b by explicit loops over a rank-4 view (independent of the library). */
static void binary_expect(bitnet_binary_op op, const float *a, const bitnet_shape *sa, const float *b,
                          const bitnet_shape *sb, float *y, const bitnet_shape *sy)
{
    uint64_t da[4], db[4], dy[4];
    for (int k = 0; k < 4; k++) {
        int ia = (int)sa->rank - 4 + k, ib = (int)sb->rank - 4 + k, iy = (int)sy->rank - 4 + k;
        da[k] = ia >= 0 ? sa->dims[ia] : 1;
        db[k] = ib >= 0 ? sb->dims[ib] : 1;
        dy[k] = iy >= 0 ? sy->dims[iy] : 1;
    }
    uint64_t f = 0;
    for (uint64_t i0 = 0; i0 < dy[0]; i0++)
        for (uint64_t i1 = 0; i1 < dy[1]; i1++)
            for (uint64_t i2 = 0; i2 < dy[2]; i2++)
                for (uint64_t i3 = 0; i3 < dy[3]; i3++, f++) {
                    uint64_t oa = (((da[0] > 1 ? i0 : 0) * da[1] + (da[1] > 1 ? i1 : 0)) * da[2] +
                                   (da[2] > 1 ? i2 : 0)) * da[3] + (da[3] > 1 ? i3 : 0);
                    uint64_t ob = (((db[0] > 1 ? i0 : 0) * db[1] + (db[1] > 1 ? i1 : 0)) * db[2] +
                                   (db[2] > 1 ? i2 : 0)) * db[3] + (db[3] > 1 ? i3 : 0);
                    double x = a[oa], z = b[ob], r;
                    switch (op) {
                    case BITNET_BIN_ADD: r = x + z; break;
                    case BITNET_BIN_SUB: r = x - z; break;
                    case BITNET_BIN_MUL: r = x * z; break;
                    case BITNET_BIN_DIV: r = x / z; break;
                    case BITNET_BIN_MAX: r = isnan(x) || isnan(z) ? NAN : x > z ? x : z; break;
                    default: r = isnan(x) || isnan(z) ? NAN : x < z ? x : z; break;
                    }
                    y[f] = (float)r;
                }
}

static void test_binary_random(void **state)
{
    (void)state;
    static const uint32_t shapes[][2][5] = {
        /* {rank, dims...} of a, then of b */
        {{1, 1}, {1, 1}},          {{1, 17}, {0}},            {{0}, {1, 4097}},
        {{2, 3, 255}, {1, 255}},   {{2, 255, 3}, {2, 255, 1}}, {{2, 1, 17}, {2, 33, 1}},
        {{3, 5, 1, 17}, {2, 3, 1}}, {{3, 2, 3, 4}, {3, 2, 1, 4}}, {{4, 3, 1, 5, 7}, {3, 4, 1, 7}},
        {{1, 4097}, {1, 4097}},    {{2, 70000, 3}, {2, 1, 3}},  {{1, 200003}, {1, 200003}},
    };
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        bitnet_shape sa = shape_from(shapes[t][0]), sb = shape_from(shapes[t][1]), sy;
        assert_int_equal(bitnet_broadcast_shape(&sa, &sb, &sy), BITNET_OK);
        uint64_t na = shape_n(&sa), nb = shape_n(&sb), ny = shape_n(&sy);
        float *a = rand_floats(na, 100 + t), *b = rand_floats(nb, 200 + t);
        float *want = malloc(ny * 4), *got = malloc(ny * 4);
        for (uint64_t i = 0; i < nb; i += 7) b[i] = b[i] == 0 ? 1 : b[i];
        if (na > 3) { a[1] = NAN; a[2] = INFINITY; }
        if (nb > 3) { b[0] = -INFINITY; b[3] = NAN; }
        for (int op = 0; op < BITNET_BIN_COUNT; op++) {
            binary_expect((bitnet_binary_op)op, a, &sa, b, &sb, want, &sy);
            assert_int_equal(bitnet_binary_ref((bitnet_binary_op)op, a, &sa, b, &sb, got), BITNET_OK);
            assert_true(same_bits_nan(want, got, ny));
            memset(got, 0, ny * 4);
            assert_int_equal(bitnet_binary(cpu, (bitnet_binary_op)op, a, &sa, b, &sb, got), BITNET_OK);
            if (!same_bits_nan(want, got, ny)) fail_msg("binary op %d shape case %zu differs", op, t);
        }
        free(a); free(b); free(want); free(got);
    }
}

/* Large outputs take the streaming-store path (with its alignment prologue). */
static void test_binary_large(void **state)
{
    (void)state;
    const uint64_t n = (16u << 20) + 5;
    float *a = rand_floats(n, 3), *b = rand_floats(n + 1, 4), *buf = malloc((n + 1) * 4);
    float *y = buf + 1; /* misaligned on purpose */
    bitnet_shape s = SHAPE(1, n);
    a[n - 1] = NAN;
    for (int op = BITNET_BIN_ADD; op <= BITNET_BIN_MAX; op += BITNET_BIN_MAX - BITNET_BIN_ADD) {
        assert_int_equal(bitnet_binary(cpu, (bitnet_binary_op)op, a, &s, b + 1, &s, y), BITNET_OK);
        for (uint64_t i = 0; i < n; i++) {
            float w = op == BITNET_BIN_ADD ? a[i] + b[i + 1] : (isnan(a[i]) || a[i] > b[i + 1]) ? a[i] : b[i + 1];
            if (memcmp(&w, &y[i], 4) != 0 && !(isnan(w) && isnan(y[i]))) fail_msg("op %d at %llu", op, (unsigned long long)i);
        }
    }
    free(a); free(b); free(buf);
}

static void test_binary_nan_rules(void **state)
{
    (void)state;
    const float a[4] = {NAN, 1, NAN, INFINITY}, b[4] = {1, NAN, NAN, -INFINITY};
    bitnet_shape s = SHAPE(1, 4);
    float y[4];
    assert_int_equal(bitnet_binary(cpu, BITNET_BIN_MAX, a, &s, b, &s, y), BITNET_OK);
    assert_true(isnan(y[0]) && isnan(y[1]) && isnan(y[2]) && y[3] == INFINITY);
    assert_int_equal(bitnet_binary(cpu, BITNET_BIN_MIN, a, &s, b, &s, y), BITNET_OK);
    assert_true(isnan(y[0]) && isnan(y[1]) && isnan(y[2]) && y[3] == -INFINITY);
    assert_int_equal(bitnet_binary(cpu, BITNET_BIN_ADD, a, &s, b, &s, y), BITNET_OK);
    assert_true(isnan(y[3]));
    const float z[4] = {0, 0, 0, 0}, o[4] = {1, -1, 0, 2};
    assert_int_equal(bitnet_binary(cpu, BITNET_BIN_DIV, o, &s, z, &s, y), BITNET_OK);
    assert_true(y[0] == INFINITY && y[1] == -INFINITY && isnan(y[2]) && y[3] == INFINITY);
}

/* ---- unary -------------------------------------------------------------- */

static double un_expect(bitnet_unary_op op, double x, double p)
{
    switch (op) {
    case BITNET_UN_RELU: return isnan(x) ? x : x > 0 ? x : 0;
    case BITNET_UN_GELU: return 0.5 * x * erfc(-x / sqrt(2.0));
    case BITNET_UN_GELU_TANH: {
        double u = sqrt(2 / M_PI) * (x + 0.044715 * x * x * x), t = exp(2 * u);
        return 0.5 * x * (u < 0 ? 2 * t / (1 + t) : 1 + tanh(u)); /* 1 + tanh(u) without cancellation */
    }
    case BITNET_UN_SIGMOID: return x < 0 ? exp(x) / (1 + exp(x)) : 1 / (1 + exp(-x));
    case BITNET_UN_SILU: return x < 0 ? x * exp(x) / (1 + exp(x)) : x / (1 + exp(-x));
    case BITNET_UN_TANH: return tanh(x);
    case BITNET_UN_EXP: return exp(x);
    case BITNET_UN_NEG: return -x;
    case BITNET_UN_ABS: return fabs(x);
    case BITNET_UN_SQRT: return sqrt(x);
    default: return x * p;
    }
}

static void test_unary_hand(void **state)
{
    (void)state;
    const float x[4] = {-1, 0, 1, 2};
    float y[4];
    struct { bitnet_unary_op op; double want[4]; } cases[] = {
        {BITNET_UN_RELU, {0, 0, 1, 2}},
        {BITNET_UN_GELU, {-0.15865525393145707, 0, 0.8413447460685429, 1.9544997361036416}},
        {BITNET_UN_GELU_TANH, {-0.15880800939172324, 0, 0.8411919906082768, 1.9545976940871754}},
        {BITNET_UN_SIGMOID, {0.2689414213699951, 0.5, 0.7310585786300049, 0.8807970779778823}},
        {BITNET_UN_SILU, {-0.2689414213699951, 0, 0.7310585786300049, 1.7615941559557646}},
        {BITNET_UN_TANH, {-0.7615941559557649, 0, 0.7615941559557649, 0.9640275800758169}},
        {BITNET_UN_EXP, {0.36787944117144233, 1, 2.718281828459045, 7.38905609893065}},
        {BITNET_UN_NEG, {1, 0, -1, -2}},
        {BITNET_UN_ABS, {1, 0, 1, 2}},
        {BITNET_UN_SCALE, {0.5, 0, -0.5, -1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        assert_int_equal(bitnet_unary_ref(cases[c].op, x, 4, -0.5f, y), BITNET_OK);
        for (int i = 0; i < 4; i++)
            if (y[i] != (float)cases[c].want[i]) fail_msg("op %d x=%g: %.9g, want %.9g", cases[c].op, x[i], y[i], cases[c].want[i]);
    }
    const float q[3] = {4, 2, -1};
    assert_int_equal(bitnet_unary_ref(BITNET_UN_SQRT, q, 3, 0, y), BITNET_OK);
    assert_true(y[0] == 2 && y[1] == (float)sqrt(2.0) && isnan(y[2]));
    assert_int_equal(bitnet_unary(cpu, BITNET_UN_COUNT, q, 3, 0, y), BITNET_E_INVALID);
}

static void test_unary_random(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {1, 3, 17, 255, 4097, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        uint64_t n = sizes[s];
        float *x = rand_floats(n, 7 + s), *y = malloc(n * 4), *r = malloc(n * 4);
        for (uint64_t i = 0; i < n; i++) x[i] *= 8; /* [-8, 8): exercises the tails */
        if (n > 10) { /* specials, and the edges of f32 exp: overflow above 88.72, subnormals below -87.3 */
            x[0] = NAN; x[1] = INFINITY; x[2] = -INFINITY; x[3] = -30; x[4] = 30;
            x[5] = -89; x[6] = 89; x[7] = -100; x[8] = 100; x[9] = -87.5f; x[10] = 88.7f;
        }
        for (int op = 0; op < BITNET_UN_COUNT; op++) {
            int exact = op == BITNET_UN_RELU || op == BITNET_UN_NEG || op == BITNET_UN_ABS ||
                        op == BITNET_UN_SCALE || op == BITNET_UN_SQRT;
            assert_int_equal(bitnet_unary(cpu, (bitnet_unary_op)op, x, n, 0.37f, y), BITNET_OK);
            assert_int_equal(bitnet_unary_ref((bitnet_unary_op)op, x, n, 0.37f, r), BITNET_OK);
            for (uint64_t i = 0; i < n; i++) {
                double w = un_expect((bitnet_unary_op)op, x[i], 0.37f);
                if (isinf((float)w)) w = (float)w; /* beyond FLT_MAX: the f32 result is Inf */
                double uy = ulp_diff(y[i], w), ur = ulp_diff(r[i], w);
                if (uy > (exact ? 0.5 : 4) || ur > (exact ? 0.5 : 4))
                    fail_msg("unary op %d x=%.9g: fast %.9g ref %.9g want %.17g (%g/%g ulp)", op, x[i], y[i], r[i], w, uy, ur);
            }
        }
        free(x); free(y); free(r);
    }
}

/* ---- softmax ------------------------------------------------------------ */

static void softmax_expect(const float *x, uint64_t outer, uint64_t len, uint64_t inner, int lg, double *y)
{
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t i = 0; i < inner; i++) {
            double m = -INFINITY, s = 0;
            int nan = 0;
            for (uint64_t l = 0; l < len; l++) {
                double v = x[(o * len + l) * inner + i];
                if (isnan(v)) nan = 1;
                if (v > m) m = v;
            }
            for (uint64_t l = 0; l < len; l++) s += exp(x[(o * len + l) * inner + i] - m);
            for (uint64_t l = 0; l < len; l++) {
                double d = x[(o * len + l) * inner + i] - m;
                y[(o * len + l) * inner + i] = nan || !isfinite(m) ? NAN : lg ? d - log(s) : exp(d) / s;
            }
        }
}

static void test_softmax_hand(void **state)
{
    (void)state;
    const float x[3] = {1, 2, 3};
    bitnet_shape s = SHAPE(1, 3);
    float y[3];
    assert_int_equal(bitnet_softmax_ref(x, &s, 0, 0, y), BITNET_OK);
    assert_float_equal(y[0], 0.09003057317038046, 1e-7);
    assert_float_equal(y[1], 0.24472847105479764, 1e-7);
    assert_float_equal(y[2], 0.6652409557748219, 1e-7);
    assert_int_equal(bitnet_softmax(cpu, x, &s, -1, 1, y), BITNET_OK);
    assert_float_equal(y[0], -2.4076059644443806, 1e-6);
    assert_float_equal(y[2], -0.40760596444438046, 1e-6);
    /* large values, -inf entries, an all -inf row, a NaN row, rows of length 1 */
    const float big[8] = {1e30f, 1e30f, 1e30f, 0, -INFINITY, 0, -INFINITY, -INFINITY};
    bitnet_shape s42 = SHAPE(2, 4, 2);
    float yb[8];
    for (int fast = 0; fast < 2; fast++) {
        assert_int_equal(fast ? bitnet_softmax(cpu, big, &s42, 1, 0, yb) : bitnet_softmax_ref(big, &s42, 1, 0, yb), BITNET_OK);
        assert_true(yb[0] == 0.5f && yb[1] == 0.5f && yb[2] == 1 && yb[3] == 0 && yb[4] == 0 && yb[5] == 1);
        assert_true(isnan(yb[6]) && isnan(yb[7]));
        assert_int_equal(fast ? bitnet_softmax(cpu, big, &s42, 1, 1, yb) : bitnet_softmax_ref(big, &s42, 1, 1, yb), BITNET_OK);
        assert_true(yb[2] == 0 && yb[3] == -1e30f && yb[4] == -INFINITY && yb[5] == 0 && isnan(yb[6]));
        const float nanrow[3] = {1, NAN, 2};
        assert_int_equal(fast ? bitnet_softmax(cpu, nanrow, &s, 0, 0, y) : bitnet_softmax_ref(nanrow, &s, 0, 0, y), BITNET_OK);
        assert_true(isnan(y[0]) && isnan(y[1]) && isnan(y[2]));
        bitnet_shape s31 = SHAPE(2, 3, 1);
        assert_int_equal(fast ? bitnet_softmax(cpu, x, &s31, 1, 0, y) : bitnet_softmax_ref(x, &s31, 1, 0, y), BITNET_OK);
        assert_true(y[0] == 1 && y[1] == 1 && y[2] == 1);
        assert_int_equal(fast ? bitnet_softmax(cpu, x, &s31, -1, 1, y) : bitnet_softmax_ref(x, &s31, -1, 1, y), BITNET_OK);
        assert_true(y[0] == 0 && y[1] == 0 && y[2] == 0);
    }
    assert_int_equal(bitnet_softmax(cpu, x, &s, 1, 0, y), BITNET_E_INVALID);
    assert_int_equal(bitnet_softmax(cpu, x, &s, -2, 0, y), BITNET_E_INVALID);
}

static void test_softmax_random(void **state)
{
    (void)state;
    static const uint32_t shapes[][4] = {{3, 17, 255}, {3, 4097, 3}, {1, 1, 4097}, {5, 255, 17}, {2, 3, 70001}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
        for (int axis = -2; axis <= 1; axis++) {
            bitnet_shape s = SHAPE(3, shapes[t][0], shapes[t][1], shapes[t][2]);
            uint64_t n = shape_n(&s), outer = 1, inner = 1, len;
            int ax = axis + (axis < 0 ? 3 : 0);
            for (int i = 0; i < ax; i++) outer *= s.dims[i];
            for (int i = ax + 1; i < 3; i++) inner *= s.dims[i];
            len = s.dims[ax];
            float *x = rand_floats(n, 31 + t), *y = malloc(n * 4), *r = malloc(n * 4);
            double *w = malloc(n * 8);
            for (uint64_t i = 0; i < n; i++) x[i] *= 20;
            x[n / 3] = -INFINITY;
            for (int lg = 0; lg < 2; lg++) {
                softmax_expect(x, outer, len, inner, lg, w);
                assert_int_equal(bitnet_softmax(cpu, x, &s, axis, lg, y), BITNET_OK);
                assert_int_equal(bitnet_softmax_ref(x, &s, axis, lg, r), BITNET_OK);
                for (uint64_t i = 0; i < n; i++) {
                    double ur = ulp_diff(r[i], w[i]), uy = ulp_diff(y[i], w[i]);
                    if (ur > 4 || uy > 4)
                        fail_msg("softmax case %zu axis %d log %d at %llu: fast %.9g ref %.9g want %.17g", t, axis, lg,
                                 (unsigned long long)i, y[i], r[i], w[i]);
                }
            }
            free(x); free(y); free(r); free(w);
        }
}

/* ---- reductions --------------------------------------------------------- */

static void test_reduce_hand(void **state)
{
    (void)state;
    const float x[6] = {1, 5, 3, 4, 2, 6}; /* [[1,5,3],[4,2,6]] */
    bitnet_shape s = SHAPE(2, 2, 3), ys;
    float y[3];
    int64_t idx[3];
    assert_int_equal(bitnet_reduce_ref(BITNET_RED_SUM, x, &s, 1, y, &ys), BITNET_OK);
    assert_int_equal(ys.rank, 1);
    assert_int_equal(ys.dims[0], 3);
    assert_true(y[0] == 5 && y[1] == 7 && y[2] == 9);
    assert_int_equal(bitnet_reduce_ref(BITNET_RED_MEAN, x, &s, 2, y, &ys), BITNET_OK);
    assert_true(y[0] == 3 && y[1] == 4 && ys.dims[0] == 2);
    assert_int_equal(bitnet_reduce_ref(BITNET_RED_MAX, x, &s, 0, y, &ys), BITNET_OK);
    assert_true(y[0] == 6 && ys.rank == 0);
    assert_int_equal(bitnet_reduce_ref(BITNET_RED_MIN, x, &s, 3, y, &ys), BITNET_OK);
    assert_true(y[0] == 1 && ys.rank == 0);
    assert_int_equal(bitnet_reduce_ref(BITNET_RED_ARGMAX, x, &s, 2, y, &ys), BITNET_OK);
    assert_true(y[0] == 1 && y[1] == 2);
    assert_int_equal(bitnet_reduce_argmax(cpu, x, &s, 0, idx, &ys), BITNET_OK);
    assert_true(idx[0] == 1 && idx[1] == 0 && idx[2] == 1);
    /* ties -> first; NaN -> first NaN; max/min propagate NaN */
    const float t[8] = {2, 7, 7, 1, 3, NAN, 9, NAN};
    bitnet_shape s24 = SHAPE(2, 2, 4);
    assert_int_equal(bitnet_reduce_argmax(cpu, t, &s24, -1, idx, &ys), BITNET_OK);
    assert_true(idx[0] == 1 && idx[1] == 1);
    assert_int_equal(bitnet_reduce_argmax_ref(t, &s24, 1, idx, &ys), BITNET_OK);
    assert_true(idx[0] == 1 && idx[1] == 1);
    assert_int_equal(bitnet_reduce(cpu, BITNET_RED_MAX, t, &s24, 2, y, &ys), BITNET_OK);
    assert_true(y[0] == 7 && isnan(y[1]));
    assert_int_equal(bitnet_reduce(cpu, BITNET_RED_MIN, t, &s24, 2, y, &ys), BITNET_OK);
    assert_true(y[0] == 1 && isnan(y[1]));
    /* errors: argmax over two axes, axis out of range */
    assert_int_equal(bitnet_reduce(cpu, BITNET_RED_ARGMAX, x, &s, 3, y, &ys), BITNET_E_INVALID);
    assert_int_equal(bitnet_reduce(cpu, BITNET_RED_SUM, x, &s, 4, y, &ys), BITNET_E_INVALID);
    assert_int_equal(bitnet_reduce_argmax(cpu, x, &s, 2, idx, &ys), BITNET_E_INVALID);
    /* empty slices: sum 0, mean NaN, max refused */
    bitnet_shape e = SHAPE(2, 3, 0);
    assert_int_equal(bitnet_reduce(cpu, BITNET_RED_SUM, x, &e, 2, y, &ys), BITNET_OK);
    assert_true(y[0] == 0 && y[2] == 0);
    assert_int_equal(bitnet_reduce(cpu, BITNET_RED_MEAN, x, &e, 2, y, &ys), BITNET_OK);
    assert_true(isnan(y[0]));
    assert_int_equal(bitnet_reduce(cpu, BITNET_RED_MAX, x, &e, 2, y, &ys), BITNET_E_SHAPE);
}

/* Expected reduction in double by brute force over a rank-4 view. */
static void reduce_expect(bitnet_reduce_op op, const float *x, const uint64_t d[4], uint32_t mask, double *y)
{
    uint64_t od[4];
    for (int k = 0; k < 4; k++) od[k] = (mask == 0 || (mask >> k) & 1) ? 1 : d[k];
    uint64_t nout = od[0] * od[1] * od[2] * od[3];
    uint64_t *cnt = calloc(nout, 8);
    int64_t *first = malloc(nout * 8);
    for (uint64_t o = 0; o < nout; o++) y[o] = op == BITNET_RED_MAX || op == BITNET_RED_ARGMAX ? -INFINITY : op == BITNET_RED_MIN ? INFINITY : 0;
    double *best = malloc(nout * 8);
    for (uint64_t o = 0; o < nout; o++) { best[o] = NAN; first[o] = -1; }
    uint64_t f = 0;
    for (uint64_t a = 0; a < d[0]; a++)
        for (uint64_t b = 0; b < d[1]; b++)
            for (uint64_t c = 0; c < d[2]; c++)
                for (uint64_t e = 0; e < d[3]; e++, f++) {
                    uint64_t c4[4] = {a, b, c, e}, o = 0, r = 0;
                    for (int k = 0; k < 4; k++) {
                        o = o * od[k] + (od[k] == 1 ? 0 : c4[k]);
                        if (od[k] == 1) r = r * d[k] + c4[k];
                    }
                    double v = x[f];
                    if (op == BITNET_RED_SUM || op == BITNET_RED_MEAN) y[o] += v;
                    else if (first[o] < 0 || (!isnan(best[o]) && (isnan(v) || (op == BITNET_RED_MIN ? v < best[o] : v > best[o])))) {
                        best[o] = v;
                        first[o] = (int64_t)r;
                    }
                    cnt[o]++;
                }
    for (uint64_t o = 0; o < nout; o++) {
        if (op == BITNET_RED_MEAN) y[o] /= (double)cnt[o];
        if (op == BITNET_RED_MAX || op == BITNET_RED_MIN) y[o] = best[o];
        if (op == BITNET_RED_ARGMAX) y[o] = (double)first[o];
    }
    free(cnt); free(first); free(best);
}

static void test_reduce_random(void **state)
{
    (void)state;
    static const uint64_t shapes[][4] = {{3, 17, 5, 7}, {1, 255, 1, 17}, {2, 3, 4097, 1}, {17, 1, 3, 255}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        bitnet_shape s = SHAPE(4, shapes[t][0], shapes[t][1], shapes[t][2], shapes[t][3]), ys;
        uint64_t n = shape_n(&s);
        float *x = rand_floats(n, 55 + t), *y = malloc(n * 4), *r = malloc(n * 4);
        double *w = malloc(n * 8);
        for (uint64_t i = 0; i < n; i += 97) x[i] = x[i + 1 < n ? i + 1 : i]; /* ties */
        for (uint32_t mask = 0; mask < 16; mask++)
            for (int op = 0; op < BITNET_RED_COUNT; op++) {
                if (op == BITNET_RED_ARGMAX && __builtin_popcount(mask) != 1) continue;
                reduce_expect((bitnet_reduce_op)op, x, shapes[t], mask, w);
                assert_int_equal(bitnet_reduce(cpu, (bitnet_reduce_op)op, x, &s, mask, y, &ys), BITNET_OK);
                assert_int_equal(bitnet_reduce_ref((bitnet_reduce_op)op, x, &s, mask, r, &ys), BITNET_OK);
                uint64_t no = shape_n(&ys);
                for (uint64_t o = 0; o < no; o++)
                    if (fabs(y[o] - w[o]) > 0.5 * ulp_of(w[o]) || fabs(r[o] - w[o]) > 0.5 * ulp_of(w[o]))
                        fail_msg("reduce op %d case %zu mask %u out %llu: fast %.9g ref %.9g want %.17g", op, t, mask,
                                 (unsigned long long)o, y[o], r[o], w[o]);
            }
        free(x); free(y); free(r); free(w);
    }
}

static void test_reduce_large(void **state)
{
    (void)state;
    /* 2^24 + 3 values with a large common offset: a float accumulator would
     * lose most digits; NMSE against float64 must stay <= 1e-12. */
    const uint64_t n = (1u << 24) + 3;
    float *x = rand_floats(n, 99);
    for (uint64_t i = 0; i < n; i++) x[i] = 1000.0f + x[i];
    bitnet_shape s = SHAPE(1, n), s2 = SHAPE(2, 3, n / 3), ys;
    double want = 0, want_rows[3] = {0, 0, 0};
    for (uint64_t i = 0; i < n; i++) want += x[i];
    for (uint64_t i = 0; i < n / 3 * 3; i++) want_rows[i / (n / 3)] += x[i]; /* s2 covers 3 * (n/3) */
    float y[3];
    assert_int_equal(bitnet_reduce(cpu, BITNET_RED_SUM, x, &s, 0, y, &ys), BITNET_OK);
    assert_true(nmse1(y[0], want) <= 1e-12);
    assert_int_equal(bitnet_reduce(cpu, BITNET_RED_MEAN, x, &s, 0, y, &ys), BITNET_OK);
    assert_true(nmse1(y[0], want / (double)n) <= 1e-12);
    assert_int_equal(bitnet_reduce(cpu, BITNET_RED_SUM, x, &s2, 2, y, &ys), BITNET_OK);
    for (int i = 0; i < 3; i++) assert_true(nmse1(y[i], want_rows[i]) <= 1e-12);
    free(x);
}

/* ---- norms -------------------------------------------------------------- */

static void test_norm_hand(void **state)
{
    (void)state;
    const float x[3] = {1, 2, 3}, w[3] = {1, 2, 3}, b[3] = {0.5f, 0, -1};
    float y[3];
    /* mean 2, var 2/3: (x-2)/sqrt(2/3) = -1.224744871391589, 0, 1.224744871391589 */
    assert_int_equal(bitnet_layernorm_ref(x, 1, 3, NULL, NULL, 0, y), BITNET_OK);
    assert_true(y[0] == (float)-1.224744871391589 && y[1] == 0 && y[2] == (float)1.224744871391589);
    assert_int_equal(bitnet_layernorm(cpu, x, 1, 3, w, b, 0, y), BITNET_OK);
    assert_true(y[0] == (float)-0.724744871391589 && y[1] == 0 && y[2] == (float)(3 * 1.224744871391589 - 1));
    /* rms = sqrt(14/3) */
    assert_int_equal(bitnet_rmsnorm_ref(x, 1, 3, NULL, 1e-5f, y), BITNET_OK);
    assert_true(y[0] == (float)(1 / sqrt(14.0 / 3 + (double)1e-5f)));
    assert_int_equal(bitnet_rmsnorm(cpu, x, 1, 3, w, 0, y), BITNET_OK);
    assert_true(y[2] == (float)(9 / sqrt(14.0 / 3)));
    assert_int_equal(bitnet_layernorm(cpu, x, 1, 3, NULL, NULL, -1, y), BITNET_E_INVALID);
    assert_int_equal(bitnet_rmsnorm(cpu, x, 1, 3, NULL, NAN, y), BITNET_E_INVALID);
}

static void test_norm_random(void **state)
{
    (void)state;
    static const uint64_t rc[][2] = {{1, 1}, {3, 17}, {17, 255}, {2, 4097}, {255, 3}, {64, 2048}};
    for (size_t t = 0; t < sizeof rc / sizeof rc[0]; t++) {
        uint64_t rows = rc[t][0], cols = rc[t][1], n = rows * cols;
        float *x = rand_floats(n, 300 + t), *w = rand_floats(cols, 400 + t), *b = rand_floats(cols, 500 + t);
        float *y = malloc(n * 4), *r = malloc(n * 4);
        for (uint64_t i = 0; i < n; i++) x[i] = 3 + 2 * x[i]; /* offset mean */
        for (int rms = 0; rms < 2; rms++)
            for (int wb = 0; wb < 2; wb++) {
                const float *wp = wb ? w : NULL, *bp = wb ? b : NULL;
                if (rms) {
                    assert_int_equal(bitnet_rmsnorm(cpu, x, rows, cols, wp, 1e-5f, y), BITNET_OK);
                    assert_int_equal(bitnet_rmsnorm_ref(x, rows, cols, wp, 1e-5f, r), BITNET_OK);
                } else {
                    assert_int_equal(bitnet_layernorm(cpu, x, rows, cols, wp, bp, 1e-5f, y), BITNET_OK);
                    assert_int_equal(bitnet_layernorm_ref(x, rows, cols, wp, bp, 1e-5f, r), BITNET_OK);
                }
                for (uint64_t i = 0; i < rows; i++) {
                    const float *xr = x + i * cols;
                    long double mean = 0, var = 0;
                    if (!rms) {
                        for (uint64_t c = 0; c < cols; c++) mean += xr[c];
                        mean /= cols;
                    }
                    for (uint64_t c = 0; c < cols; c++) var += (xr[c] - mean) * (xr[c] - mean);
                    var /= cols;
                    long double rstd = 1 / sqrtl(var + 1e-5f);
                    for (uint64_t c = 0; c < cols; c++) {
                        long double v = (xr[c] - mean) * rstd;
                        if (wp) v *= wp[c];
                        if (bp && !rms) v += bp[c];
                        double want = (double)v;
                        /* 4 ulp of the result, or of the terms when it cancels */
                        double tol = 4 * ulp_of(fabs(want) > 1e-3 ? want : 1e-3);
                        if (fabs(y[i * cols + c] - want) > tol || fabs(r[i * cols + c] - want) > tol)
                            fail_msg("norm rms=%d case %zu [%llu,%llu]: fast %.9g ref %.9g want %.17g", rms, t,
                                     (unsigned long long)i, (unsigned long long)c, y[i * cols + c], r[i * cols + c], want);
                    }
                }
            }
        free(x); free(w); free(b); free(y); free(r);
    }
}

/* ---- permute ------------------------------------------------------------ */

static void test_permute(void **state)
{
    (void)state;
    const float x[6] = {1, 2, 3, 4, 5, 6};
    const float xt[6] = {1, 4, 2, 5, 3, 6};
    bitnet_shape s = SHAPE(2, 2, 3);
    const uint32_t p10[2] = {1, 0}, bad[2] = {0, 0};
    float y[6];
    assert_int_equal(bitnet_permute_ref(x, &s, p10, y), BITNET_OK);
    assert_memory_equal(y, xt, sizeof y);
    assert_int_equal(bitnet_permute(cpu, x, &s, p10, y), BITNET_OK);
    assert_memory_equal(y, xt, sizeof y);
    assert_int_equal(bitnet_permute(cpu, x, &s, bad, y), BITNET_E_INVALID);
    /* every permutation of rank 3 and 4, awkward sizes; expected by loops here */
    static const uint64_t dims[][4] = {{3, 17, 5, 2}, {1, 255, 33, 1}, {70, 1, 3, 129}, {4097, 3, 1, 2}};
    for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++) {
        bitnet_shape s4 = SHAPE(4, dims[t][0], dims[t][1], dims[t][2], dims[t][3]);
        uint64_t n = shape_n(&s4), st[4] = {dims[t][1] * dims[t][2] * dims[t][3], dims[t][2] * dims[t][3], dims[t][3], 1};
        float *in = rand_floats(n, 600 + t), *out = malloc(n * 4), *ref = malloc(n * 4);
        for (uint32_t code = 0; code < 256; code++) {
            uint32_t p[4];
            if (!perm4_of(code, p)) continue;
            assert_int_equal(bitnet_permute(cpu, in, &s4, p, out), BITNET_OK);
            assert_int_equal(bitnet_permute_ref(in, &s4, p, ref), BITNET_OK);
            uint64_t f = 0;
            for (uint64_t a = 0; a < dims[t][p[0]]; a++)
                for (uint64_t b = 0; b < dims[t][p[1]]; b++)
                    for (uint64_t c = 0; c < dims[t][p[2]]; c++)
                        for (uint64_t d = 0; d < dims[t][p[3]]; d++, f++) {
                            float want = in[a * st[p[0]] + b * st[p[1]] + c * st[p[2]] + d * st[p[3]]];
                            if (out[f] != want || ref[f] != want)
                                fail_msg("permute case %zu perm %u%u%u%u at %llu", t, p[0], p[1], p[2], p[3], (unsigned long long)f);
                        }
        }
        free(in); free(out); free(ref);
    }
}

/* ---- the test hook ------------------------------------------------------ */

static void test_perturb_hook(void **state)
{
    (void)state;
    expect_perturb_hooks(cpu, 10, 100, BITNET_BIN_ADD, BITNET_UN_GELU, 1);
    /* the references never move */
    const uint64_t n = 1000;
    float *x = rand_floats(n, 1), *y = malloc(n * 4), *r = malloc(n * 4);
    setenv("BITNET_TEST_PERTURB", "permute", 1);
    assert_int_equal(bitnet_unary_ref(BITNET_UN_RELU, x, n, 0, y), BITNET_OK);
    unsetenv("BITNET_TEST_PERTURB");
    assert_int_equal(bitnet_unary_ref(BITNET_UN_RELU, x, n, 0, r), BITNET_OK);
    assert_int_equal(count_diff(y, r, n), 0);
    free(x); free(y); free(r);
}

/* Reductions over a leading or middle axis ([outer, len, inner] over len)
 * on shapes that cut into several column blocks and row blocks, NaNs and
 * ties in late blocks: sums within 2 ulp of the reference and NMSE <= 1e-12
 * against float64, max/min/argmax exact; the same bits with 1, 2 and 3
 * threads, with and without SIMD. */
static void test_reduce_leading_axis(void **state)
{
    (void)state;
    static const uint64_t shapes[][3] = {{1, 300, 4099}, {1, 5000, 250}, {3, 2500, 600}, {1, 70000, 17}, {2, 3, 4097}};
    static const char *simd[] = {"", "scalar"};
    bitnet_backend *be[6];
    for (int k = 0; k < 6; k++) {
        if (k % 3 == 0) { if (*simd[k / 3]) setenv("BITNET_SIMD", simd[k / 3], 1); else unsetenv("BITNET_SIMD"); }
        assert_int_equal(bitnet_backend_create(&be[k], "cpu", 1 + k % 3), BITNET_OK);
    }
    unsetenv("BITNET_SIMD");
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        const uint64_t outer = shapes[t][0], len = shapes[t][1], inner = shapes[t][2], n = outer * len * inner;
        bitnet_shape s = SHAPE(3, outer, len, inner), ys, rs;
        float *x = rand_floats(n, 500 + t), *y = malloc(n * 4), *y0 = malloc(n * 4), *r = malloc(n * 4);
        int64_t *iy = malloc(n * 8), *ir = malloc(n * 8);
        for (uint64_t i = 0; i < n; i += 5) x[i] = x[(i * 7 + 3) % n]; /* ties */
        x[n - 2] = NAN;
        x[n - 3 * inner - 1] = NAN;
        /* ties of the extremes of a column in its first and last row blocks */
        x[inner + inner / 2] = x[(len - 2) * inner + inner / 2] = 2.0f;
        x[2 * inner + inner / 3] = x[(len - 1) * inner + inner / 3] = -2.0f;
        for (int op = 0; op < BITNET_RED_COUNT; op++) {
            assert_int_equal(bitnet_reduce_ref((bitnet_reduce_op)op, x, &s, 2, r, &rs), BITNET_OK);
            const uint64_t no = outer * inner;
            if (op == BITNET_RED_ARGMAX) assert_int_equal(bitnet_reduce_argmax_ref(x, &s, 1, ir, &rs), BITNET_OK);
            for (int k = 0; k < 6; k++) {
                assert_int_equal(bitnet_reduce(be[k], (bitnet_reduce_op)op, x, &s, 2, y, &ys), BITNET_OK);
                assert_int_equal(ys.rank, 2);
                if (k % 3 == 0) memcpy(y0, y, no * 4);
                else if (memcmp(y0, y, no * 4) != 0) fail_msg("reduce op %d case %zu: %d threads differ from 1", op, t, 1 + k % 3);
                double w;
                uint64_t o;
                if (op <= BITNET_RED_MEAN) {
                    if ((o = reduce_sum_bad(op == BITNET_RED_MEAN, x, no, len, inner, y, r, &w)) != UINT64_MAX)
                        fail_msg("reduce op %d case %zu backend %d out %llu: %.9g, reference %.9g, float64 %.17g", op, t,
                                 k, (unsigned long long)o, y[o], r[o], w);
                } else if (!same_bits_nan(y, r, no)) {
                    fail_msg("reduce op %d case %zu backend %d differs from the reference", op, t, k);
                }
                if (op == BITNET_RED_ARGMAX) {
                    assert_int_equal(bitnet_reduce_argmax(be[k], x, &s, 1, iy, &ys), BITNET_OK);
                    if (memcmp(iy, ir, no * 8) != 0) fail_msg("argmax case %zu backend %d differs", t, k);
                }
            }
        }
        free(x); free(y); free(y0); free(r); free(iy); free(ir);
    }
    for (int k = 0; k < 6; k++) bitnet_backend_free(be[k]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broadcast_shape), cmocka_unit_test(test_binary_hand),
        cmocka_unit_test(test_binary_random),   cmocka_unit_test(test_binary_large),
        cmocka_unit_test(test_binary_nan_rules),
        cmocka_unit_test(test_unary_hand),      cmocka_unit_test(test_unary_random),
        cmocka_unit_test(test_softmax_hand),    cmocka_unit_test(test_softmax_random),
        cmocka_unit_test(test_reduce_hand),     cmocka_unit_test(test_reduce_random),
        cmocka_unit_test(test_reduce_large),    cmocka_unit_test(test_norm_hand),
        cmocka_unit_test(test_norm_random),     cmocka_unit_test(test_permute),
        cmocka_unit_test(test_perturb_hook),
        cmocka_unit_test(test_reduce_leading_axis),
    };
    int failed = cmocka_run_group_tests_name("ops", tests, setup, teardown);
    failed += cmocka_run_group_tests_name("ops without SIMD", tests, setup_scalar, teardown);
    return failed;
}
