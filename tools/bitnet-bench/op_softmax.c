/* op_softmax.c - softmax over the last axis of [M x K] floats.  Moves: x in,
 * y out.  Check: NMSE against bitnet_softmax_ref <= 1e-12. */
#include "bench.h"

#include <stdlib.h>

static void sm_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = *set_bytes = 8 * c->m * c->k;
}

static bitnet_status sm_setup(bench_case *c)
{
    return bench_f32io_setup(c, 1, c->m * c->k, c->m * c->k, -8.0f, 8.0f);
}

static bitnet_status sm_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    bench_f32io *s = BENCH_F32IO(c);
    bitnet_shape sh = {.rank = 2, .dims = {c->m, c->k}};
    (void)ms;
    return bitnet_softmax(be, s->in[0][set], &sh, -1, 0, s->out[set]);
}

static int sm_check(bench_case *c, char *why, size_t wn)
{
    bench_f32io *s = BENCH_F32IO(c);
    bitnet_shape sh = {.rank = 2, .dims = {c->m, c->k}};
    float *y = malloc(s->out_n * 4);
    bitnet_status st = y ? bitnet_softmax_ref(s->in[0][0], &sh, -1, 0, y) : BITNET_E_NOMEM;
    return bench_check_f32_ref(y, st, s->out[0], s->out_n, 0, 1e-12, why, wn);
}

const bench_op bench_op_softmax = {
    .name = "softmax", .shape = BENCH_SHAPE_MATRIX,
    .sizes = sm_sizes, .setup = sm_setup, .run = sm_run, .check = sm_check, .teardown = bench_f32io_teardown,
};
