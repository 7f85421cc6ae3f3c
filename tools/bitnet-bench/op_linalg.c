/* op_linalg.c - Cholesky, QR and SVD of f32 matrices [m x k] (Cholesky: the
 * m x m symmetric, diagonally dominant matrix made from the random one).
 * Moves: the matrix in, the factors out.  Checks (O(n^2), sampled where the
 * full product would cost O(n^3)), with bounds from the backward error
 * analyses, N = max(m, k), eps = 2^-23:
 *   cholesky  1024 sampled entries |(L L^T - A)_ij| <= 4 N eps ||A||_F
 *   qr        1024 sampled entries |(Q R - A)_ij| and |(Q^T Q - I)_ij| <= 4 N eps (||A||_F for the first)
 *   svd       |sum s_i^2 - ||A||_F^2| <= 8 N eps ||A||_F^2 (values move by at most ||dA||_2) */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EPS32 1.1920928955078125e-7

static uint64_t kdim(const bench_case *c) { return c->m < c->k ? c->m : c->k; }
static uint64_t cols(const bench_case *c) { return c->op->name[0] == 'c' ? c->m : c->k; }
static int vectors(const bench_case *c) { return strcmp(c->variant, "vectors") == 0; }

static uint64_t out_floats(const bench_case *c)
{
    const uint64_t m = c->m, n = cols(c), k = kdim(c);
    switch (c->op->name[0]) {
    case 'c': return m * m;
    case 'q': return m * k + k * n;
    default: return k + (vectors(c) ? m * k + k * n : 0);
    }
}

static void la_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = 4 * (c->m * cols(c) + out_floats(c));
    *set_bytes = *moved;
}

static bitnet_status la_setup(bench_case *c)
{
    bitnet_status st = bench_f32io_setup(c, 1, c->m * cols(c), out_floats(c), -1.0f, 1.0f);
    if (st || c->op->name[0] != 'c') return st;
    bench_f32io *s = BENCH_F32IO(c);
    const uint64_t n = c->m;
    for (size_t set = 0; set < c->nsets; set++) { /* symmetric, diagonal n > sum of |off-diagonal| */
        float *a = s->in[0][set];
        for (uint64_t i = 0; i < n; i++) {
            for (uint64_t j = 0; j < i; j++) a[j * n + i] = a[i * n + j];
            a[i * n + i] = (float)n;
        }
    }
    return BITNET_OK;
}

static bitnet_status la_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    bench_f32io *s = BENCH_F32IO(c);
    const void *a = s->in[0][set];
    float *y = s->out[set];
    const uint64_t m = c->m, n = cols(c), k = kdim(c);
    (void)ms;
    switch (c->op->name[0]) {
    case 'c': return bitnet_cholesky(be, BITNET_F32, a, 1, m, y);
    case 'q': return bitnet_qr(be, BITNET_F32, a, 1, m, n, y, y + m * k);
    default: return bitnet_svd(be, BITNET_F32, a, 1, m, n, y, vectors(c) ? y + k : NULL, vectors(c) ? y + k + m * k : NULL);
    }
}

static int la_check(bench_case *c, char *why, size_t wn)
{
    bench_f32io *s = BENCH_F32IO(c);
    const float *a = s->in[0][0], *y = s->out[0];
    const uint64_t m = c->m, n = cols(c), k = kdim(c), N = m > n ? m : n;
    double fa = 0.0;
    for (uint64_t i = 0; i < m * n; i++) fa += (double)a[i] * a[i];
    fa = sqrt(fa);
    uint64_t rng = c->opts->seed | 1;
    double worst = 0.0, bound = 4.0 * (double)N * EPS32 * fa;
    const char *what = "";
    if (c->op->name[0] == 's') {
        double ss = 0.0;
        for (uint64_t i = 0; i < k; i++) ss += (double)y[i] * y[i];
        worst = fabs(ss - fa * fa);
        bound = 8.0 * (double)N * EPS32 * fa * fa;
        what = "sum s^2 vs ||A||_F^2";
    }
    for (int t = 0; t < 1024 && c->op->name[0] != 's'; t++) {
        const uint64_t i = bench_rand(&rng) % m, j = bench_rand(&rng) % n;
        double v = 0.0;
        if (c->op->name[0] == 'c') {
            const uint64_t r = i > j ? i : j, q = i > j ? j : i; /* lower triangle (r, q) */
            for (uint64_t p = 0; p <= q; p++) v += (double)y[r * m + p] * y[q * m + p];
            v -= a[r * m + q];
            what = "L L^T - A";
        } else {
            const float *Q = y, *R = y + m * k;
            for (uint64_t p = 0; p < k; p++) v += (double)Q[i * k + p] * R[p * n + j];
            v -= a[i * n + j];
            const uint64_t p1 = bench_rand(&rng) % k, p2 = bench_rand(&rng) % k;
            double o = 0.0;
            for (uint64_t r = 0; r < m; r++) o += (double)Q[r * k + p1] * Q[r * k + p2];
            o -= p1 == p2;
            if (fabs(o) > 4.0 * (double)N * EPS32) {
                snprintf(why, wn, "(Q^T Q - I)[%llu][%llu] = %.3g > %.3g", (unsigned long long)p1,
                         (unsigned long long)p2, o, 4.0 * (double)N * EPS32);
                return 1;
            }
            what = "Q R - A";
        }
        if (fabs(v) > worst) worst = fabs(v);
    }
    if (!(worst <= bound)) {
        snprintf(why, wn, "%s: %.3g > bound %.3g", what, worst, bound);
        return 1;
    }
    return 0;
}

static size_t svd_variants(const bench_opts *o, char out[][BENCH_NAME], size_t max)
{
    (void)o;
    if (max < 2) return 0;
    snprintf(out[0], BENCH_NAME, "values");
    snprintf(out[1], BENCH_NAME, "vectors");
    return 2;
}

const bench_op bench_op_cholesky = {
    .name = "cholesky", .shape = BENCH_SHAPE_MATRIX,
    .sizes = la_sizes, .setup = la_setup, .run = la_run, .check = la_check, .teardown = bench_f32io_teardown,
};
const bench_op bench_op_qr = {
    .name = "qr", .shape = BENCH_SHAPE_MATRIX,
    .sizes = la_sizes, .setup = la_setup, .run = la_run, .check = la_check, .teardown = bench_f32io_teardown,
};
const bench_op bench_op_svd = {
    .name = "svd", .shape = BENCH_SHAPE_MATRIX, .variants = svd_variants,
    .sizes = la_sizes, .setup = la_setup, .run = la_run, .check = la_check, .teardown = bench_f32io_teardown,
};
