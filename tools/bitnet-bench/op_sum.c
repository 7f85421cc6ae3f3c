/* op_sum.c - sum of n = M*K floats (bitnet_reduce SUM over every axis).
 * Moves: x in (the one-float output is negligible).  Inputs are positive so
 * that the relative error is well defined.  Check: squared relative error
 * against a double-precision sum <= 1e-12. */
#include "bench.h"

#include <stdlib.h>

static void sum_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = *set_bytes = 4 * c->m * c->k + 4;
}

static bitnet_status sum_setup(bench_case *c)
{
    return bench_f32io_setup(c, 1, c->m * c->k, 1, 0.0f, 1.0f);
}

static bitnet_status sum_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    bench_f32io *s = BENCH_F32IO(c);
    bitnet_shape sh = {.rank = 1, .dims = {s->in_n}}, ys;
    (void)ms;
    return bitnet_reduce(be, BITNET_RED_SUM, s->in[0][set], &sh, 0, s->out[set], &ys);
}

static int sum_check(bench_case *c, char *why, size_t wn)
{
    bench_f32io *s = BENCH_F32IO(c);
    const float *x = s->in[0][0];
    double exact = 0;
    for (uint64_t i = 0; i < s->in_n; i++) exact += x[i];
    double got = *(const float *)s->out[0], rel = (got - exact) / exact;
    if (rel * rel <= 1e-12) return 0;
    snprintf(why, wn, "sum %.9g, double-precision sum %.9g (squared relative error %.3g > 1e-12)", got, exact, rel * rel);
    return 1;
}

const bench_op bench_op_sum = {
    .name = "sum", .alias = "reduce", .shape = BENCH_SHAPE_VECTOR,
    .sizes = sum_sizes, .setup = sum_setup, .run = sum_run, .check = sum_check, .teardown = bench_f32io_teardown,
};
