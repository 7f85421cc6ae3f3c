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

#define SHAPE(r, ...) ((bitnet_shape){(r), {__VA_ARGS__}})

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
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        float v = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
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

#endif
