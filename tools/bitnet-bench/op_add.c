/* op_add.c - element-wise a + b over n = M*K floats (bitnet_binary ADD, same
 * shapes).  Moves: a, b in, y out.  Check: exact (one IEEE addition). */
#include "bench.h"

#include <stdlib.h>

static void add_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = *set_bytes = 12 * c->m * c->k;
}

static bitnet_status add_setup(bench_case *c)
{
    return bench_f32io_setup(c, 2, c->m * c->k, c->m * c->k, -1.0f, 1.0f);
}

static bitnet_status add_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    bench_f32io *s = BENCH_F32IO(c);
    bitnet_shape sh = {.rank = 1, .dims = {c->m * c->k}};
    (void)ms;
    return bitnet_binary(be, BITNET_BIN_ADD, s->in[0][set], &sh, s->in[1][set], &sh, s->out[set]);
}

static int add_check(bench_case *c, char *why, size_t wn)
{
    bench_f32io *s = BENCH_F32IO(c);
    bitnet_shape sh = {.rank = 1, .dims = {c->m * c->k}};
    float *y = malloc(s->out_n * 4);
    bitnet_status st = y ? bitnet_binary_ref(BITNET_BIN_ADD, s->in[0][0], &sh, s->in[1][0], &sh, y) : BITNET_E_NOMEM;
    return bench_check_f32_ref(y, st, s->out[0], s->out_n, 0, 0, why, wn);
}

const bench_op bench_op_add = {
    .name = "add", .alias = "binary", .shape = BENCH_SHAPE_VECTOR,
    .sizes = add_sizes, .setup = add_setup, .run = add_run, .check = add_check, .teardown = bench_f32io_teardown,
};
