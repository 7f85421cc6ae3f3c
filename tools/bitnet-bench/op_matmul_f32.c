/* op_matmul_f32.c - float product y[tokens x M] = x[tokens x K] * W^T with
 * W f32 [M x K] (CPU: OpenBLAS sgemm/sgemv; OpenCL: tiled kernel).  This is
 * also the `openblas` baseline: what a user without ternary weights runs.
 * Moves: W + x in, y out.  GOP/s counts 2 M K tokens.  Check: NMSE against
 * bitnet_matmul_f32_ref <= 1e-9, or <= 1e-6 when K > 4096 (f32 sums over
 * long rows in a different order), over sampled rows on large products
 * (mm_check). */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    void **w, **x, **y;
} mm_state;

static void mm_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = *set_bytes = 4 * (c->m * c->k + c->tokens * c->k + c->tokens * c->m);
}

static void mm_teardown(bench_case *c)
{
    mm_state *s = c->st;
    if (s) bench_state_free(c, 3, s->w, s->x, s->y);
}

static bitnet_status mm_setup(bench_case *c)
{
    mm_state *s = bench_state_new(c, sizeof *s);
    if (!s) return BITNET_E_NOMEM;
    s->w = bench_bufs_f32(c->nsets, c->m * c->k, c->opts->seed, -0.1f, 0.1f);
    s->x = bench_bufs_f32(c->nsets, c->tokens * c->k, c->opts->seed + 2, -2.0f, 2.0f);
    s->y = bench_bufs_new(c->nsets, c->tokens * c->m * 4);
    return s->w && s->x && s->y ? BITNET_OK : BITNET_E_NOMEM;
}

static bitnet_status mm_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    mm_state *s = c->st;
    (void)ms;
    return bitnet_matmul_f32(be, s->x[set], c->tokens, c->k, s->w[set], c->m, NULL, BITNET_ACT_NONE, s->y[set]);
}

static bitnet_status mm_keep(bench_case *c, bitnet_backend *be, int keep)
{
    return bench_keep_bufs(be, keep, ((mm_state *)c->st)->w, c->nsets, c->m * c->k * 4);
}

/* The reference is scalar (about 1 ns a multiply-add: 4 s at 64 tokens of
 * 4096 x 14336), so large products are checked on sampled rows of W
 * (bench_check_sampled), copied into a matrix of their own: rows are
 * independent, so its reference is the definition's result for them. */

static int mm_check(bench_case *c, char *why, size_t wn)
{
    mm_state *s = c->st;
    const double nmse = c->k > 4096 ? 1e-6 : 1e-9;
    if (!bench_check_sampled(c)) {
        float *y = malloc(c->tokens * c->m * 4);
        bitnet_status st =
            y ? bitnet_matmul_f32_ref(s->x[0], c->tokens, c->k, s->w[0], c->m, NULL, BITNET_ACT_NONE, y) : BITNET_E_NOMEM;
        return bench_check_f32_ref(y, st, s->y[0], c->tokens * c->m, 0, nmse, why, wn);
    }
    const uint64_t ns = BENCH_CHECK_ROWS;
    float *w = malloc(ns * c->k * 4), *ref = malloc(c->tokens * ns * 4), *got = malloc(c->tokens * ns * 4);
    if (!w || !ref || !got) {
        free(w);
        free(ref);
        free(got);
        snprintf(why, wn, "out of memory for the reference");
        return 1;
    }
    for (uint64_t i = 0; i < ns; i++) {
        const uint64_t r = bench_check_row(c, i);
        memcpy(w + i * c->k, (const float *)s->w[0] + r * c->k, c->k * 4);
        for (uint64_t t = 0; t < c->tokens; t++) got[t * ns + i] = ((const float *)s->y[0])[t * c->m + r];
    }
    const bitnet_status st = bitnet_matmul_f32_ref(s->x[0], c->tokens, c->k, w, ns, NULL, BITNET_ACT_NONE, ref);
    char sub[200];
    const int bad = bench_check_f32_ref(ref, st, got, c->tokens * ns, 0, nmse, sub, sizeof sub); /* frees ref */
    if (bad) snprintf(why, wn, "%llu rows spread over the output: %s", (unsigned long long)ns, sub);
    free(w);
    free(got);
    return bad;
}

const bench_op bench_op_matmul_f32 = {
    .name = "matmul_f32", .shape = BENCH_SHAPE_MATRIX, .uses_tokens = 1, .product = 1, .has_baseline_blas = 1,
    .sizes = mm_sizes, .setup = mm_setup, .run = mm_run, .check = mm_check, .teardown = mm_teardown,
    .keep = mm_keep,
};
