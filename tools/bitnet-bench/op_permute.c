/* op_permute.c - transpose of [M x K] floats (bitnet_permute with axes
 * (1, 0)).  Moves: x in, y out.  Check: exact (a permutation copies). */
#include "bench.h"

#include <stdlib.h>

static const uint32_t transpose[2] = {1, 0};

static void pm_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = *set_bytes = 8 * c->m * c->k;
}

static bitnet_status pm_setup(bench_case *c)
{
    return bench_f32io_setup(c, 1, c->m * c->k, c->m * c->k, -1.0f, 1.0f);
}

static bitnet_status pm_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    bench_f32io *s = BENCH_F32IO(c);
    bitnet_shape sh = {.rank = 2, .dims = {c->m, c->k}};
    (void)ms;
    return bitnet_permute(be, s->in[0][set], &sh, transpose, s->out[set]);
}

static int pm_check(bench_case *c, char *why, size_t wn)
{
    bench_f32io *s = BENCH_F32IO(c);
    const float *x = s->in[0][0], *y = s->out[0];
    for (uint64_t i = 0; i < c->m; i++)
        for (uint64_t j = 0; j < c->k; j++)
            if (y[j * c->m + i] != x[i * c->k + j]) {
                snprintf(why, wn, "y[%llu][%llu] = %g, want x[%llu][%llu] = %g", (unsigned long long)j,
                         (unsigned long long)i, y[j * c->m + i], (unsigned long long)i, (unsigned long long)j,
                         x[i * c->k + j]);
                return 1;
            }
    return 0;
}

const bench_op bench_op_permute = {
    .name = "permute", .shape = BENCH_SHAPE_MATRIX,
    .sizes = pm_sizes, .setup = pm_setup, .run = pm_run, .check = pm_check, .teardown = bench_f32io_teardown,
};
