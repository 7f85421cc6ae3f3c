/*
 * ops_testlib.h - small helpers of the tensor-op tests (header only, so that
 * nothing is linked into the other unit tests): shapes, seeded random data,
 * ulp distances against float64 values.
 */
#ifndef OPS_TESTLIB_H
#define OPS_TESTLIB_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bitnet.h"
#include "testutil.h"

#define SHAPE(r, ...) ((bitnet_shape){(r), {__VA_ARGS__}})

/* A shape from {rank, dims...} (the test tables' form). */
static inline bitnet_shape shape_from(const uint32_t *spec)
{
    bitnet_shape s = {spec[0], {0}};
    for (uint32_t i = 0; i < s.rank; i++) s.dims[i] = spec[1 + i];
    return s;
}

/* Axes p[0..3] from the base-4 digits of code (0..255); 1 when they are a
 * permutation of 0..3 (24 of the 256 codes). */
static inline int perm4_of(uint32_t code, uint32_t p[4])
{
    for (int i = 0; i < 4; i++) p[i] = (code >> (2 * i)) & 3;
    return (1u << p[0] | 1u << p[1] | 1u << p[2] | 1u << p[3]) == 15;
}

static inline uint64_t shape_n(const bitnet_shape *s)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < s->rank; i++) n *= s->dims[i];
    return n;
}

/* n floats uniform in [-1, 1), none zero, from a xorshift seeded by seed. */
static inline float *rand_floats(uint64_t n, uint64_t seed)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint64_t i = 0; i < n; i++) {
        float v = tu_randf53(&s);
        x[i] = v == 0 ? 0.5f : v;
    }
    return x;
}

/* The ulp of f32 numbers near w (subnormal spacing below FLT_MIN). */
static inline double ulp_of(double w)
{
    int e;
    if (w == 0 || !isfinite(w)) return ldexp(1, -149);
    frexp(w, &e);
    return ldexp(1, e - 24 < -149 ? -149 : e - 24);
}

/* |y - w| in ulps of w; 0 when both are NaN or the same infinity. */
static inline double ulp_diff(float y, double w)
{
    if (isnan(w) || isnan(y)) return isnan(w) && isnan(y) ? 0 : INFINITY;
    if (isinf(w) || isinf(y)) return (double)y == w ? 0 : INFINITY;
    return fabs((double)y - w) / ulp_of(w);
}

/* Bitwise equal, any NaN equal to any NaN. */
static inline int same_bits_nan(const float *a, const float *b, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i])) continue;
        if (memcmp(&a[i], &b[i], 4) != 0) return 0;
    }
    return 1;
}

static inline uint64_t count_diff(const float *a, const float *b, uint64_t n)
{
    uint64_t c = 0;
    for (uint64_t i = 0; i < n; i++)
        if (!(isnan(a[i]) && isnan(b[i])) && memcmp(&a[i], &b[i], 4) != 0) c++;
    return c;
}

static inline double max_rel(const float *y, const float *r, uint64_t n)
{
    double m = 0;
    for (uint64_t i = 0; i < n; i++) {
        double d = fabs((double)y[i] - r[i]) / (fabs(r[i]) > 1e-30 ? fabs(r[i]) : 1e-30);
        if (d > m || isnan(d)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

static inline double nmse1(float y, double w) { return ((double)y - w) * ((double)y - w) / (w * w); }

/* NMSE of n floats against float64 values. */
static inline double nmse(const float *y, const double *w, uint64_t n)
{
    double e = 0, s = 0;
    for (uint64_t i = 0; i < n; i++) {
        e += ((double)y[i] - w[i]) * ((double)y[i] - w[i]);
        s += w[i] * w[i];
    }
    return s > 0 ? e / s : e;
}

/* A sum (mean: the mean) over the middle axis of x [no / inner, len, inner]:
 * the first of the no outputs y that is more than 2 ulp from the reference r
 * or has NMSE > 1e-12 against the float64 sum (set in *w), or UINT64_MAX when
 * all are good (both NaN counts as good). */
static inline uint64_t reduce_sum_bad(int mean, const float *x, uint64_t no, uint64_t len, uint64_t inner,
                                      const float *y, const float *r, double *w)
{
    for (uint64_t o = 0; o < no; o++) {
        if (isnan(y[o]) && isnan(r[o])) continue;
        *w = 0;
        for (uint64_t l = 0; l < len; l++) *w += x[(o / inner * len + l) * inner + o % inner];
        if (mean) *w /= (double)len;
        if (fabsf(y[o] - r[o]) > 2 * ulp_of(r[o]) || (*w != 0 && nmse1(y[o], *w) > 1e-12)) return o;
    }
    return UINT64_MAX;
}

/* The tests include cmocka.h before this header. */
#ifdef assert_int_equal
/* BITNET_TEST_PERTURB reaches the output of every fast op of backend be on
 * [rows, cols] data (seeded by seed): one element differs from the reference
 * (elementwise ops, permute), or the error is large (softmax, reduce,
 * layernorm).  Leaves BITNET_TEST_PERTURB unset. */
static inline void expect_perturb_hooks(bitnet_backend *be, uint64_t rows, uint64_t cols, bitnet_binary_op bop,
                                        bitnet_unary_op uop, uint64_t seed)
{
    const uint64_t n = rows * cols;
    float *x = rand_floats(n, seed), *y = malloc(n * 4), *r = malloc(n * 4);
    bitnet_shape s = SHAPE(2, rows, cols), s1 = SHAPE(1, cols), ys;
    const uint32_t p10[2] = {1, 0};
    setenv("BITNET_TEST_PERTURB", "binary", 1);
    assert_int_equal(bitnet_binary(be, bop, x, &s, x, &s1, y), BITNET_OK);
    assert_int_equal(bitnet_binary_ref(bop, x, &s, x, &s1, r), BITNET_OK);
    assert_int_equal(count_diff(y, r, n), 1);
    setenv("BITNET_TEST_PERTURB", "unary", 1);
    assert_int_equal(bitnet_unary(be, uop, x, n, 0, y), BITNET_OK);
    assert_int_equal(bitnet_unary_ref(uop, x, n, 0, r), BITNET_OK);
    assert_int_equal(count_diff(y, r, n), 1);
    setenv("BITNET_TEST_PERTURB", "softmax", 1);
    assert_int_equal(bitnet_softmax(be, x, &s, 1, 0, y), BITNET_OK);
    assert_int_equal(bitnet_softmax_ref(x, &s, 1, 0, r), BITNET_OK);
    assert_true(max_rel(y, r, n) > 0.1);
    setenv("BITNET_TEST_PERTURB", "reduce", 1);
    assert_int_equal(bitnet_reduce(be, BITNET_RED_SUM, x, &s, 2, y, &ys), BITNET_OK);
    assert_int_equal(bitnet_reduce_ref(BITNET_RED_SUM, x, &s, 2, r, &ys), BITNET_OK);
    assert_true(max_rel(y, r, rows) > 0.1);
    setenv("BITNET_TEST_PERTURB", "layernorm", 1);
    assert_int_equal(bitnet_layernorm(be, x, rows, cols, NULL, NULL, 1e-5f, y), BITNET_OK);
    assert_int_equal(bitnet_layernorm_ref(x, rows, cols, NULL, NULL, 1e-5f, r), BITNET_OK);
    assert_true(max_rel(y, r, n) > 0.1);
    setenv("BITNET_TEST_PERTURB", "permute", 1);
    assert_int_equal(bitnet_permute(be, x, &s, p10, y), BITNET_OK);
    assert_int_equal(bitnet_permute_ref(x, &s, p10, r), BITNET_OK);
    assert_int_equal(count_diff(y, r, n), 1);
    unsetenv("BITNET_TEST_PERTURB");
    free(x); free(y); free(r);
}
#endif

#endif
