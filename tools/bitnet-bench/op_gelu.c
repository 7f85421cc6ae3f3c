/* op_gelu.c - element-wise GELU (erf form) over n = M*K floats
 * (bitnet_unary).  Moves: x in, y out.  Check: within 4 ulp of the _ref. */
#include "bench.h"

#include <stdlib.h>

static void gelu_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = *set_bytes = 8 * c->m * c->k;
}

static bitnet_status gelu_setup(bench_case *c)
{
    return bench_f32io_setup(c, 1, c->m * c->k, c->m * c->k, -4.0f, 4.0f);
}

static bitnet_status gelu_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    bench_f32io *s = BENCH_F32IO(c);
    (void)ms;
    return bitnet_unary(be, BITNET_UN_GELU, s->in[0][set], s->in_n, 0.0f, s->out[set]);
}

static int gelu_check(bench_case *c, char *why, size_t wn)
{
    bench_f32io *s = BENCH_F32IO(c);
    float *y = malloc(s->out_n * 4);
    bitnet_status st = y ? bitnet_unary_ref(BITNET_UN_GELU, s->in[0][0], s->in_n, 0.0f, y) : BITNET_E_NOMEM;
    return bench_check_f32_ref(y, st, s->out[0], s->out_n, 4, 0, why, wn);
}

const bench_op bench_op_gelu = {
    .name = "gelu", .alias = "unary", .shape = BENCH_SHAPE_VECTOR,
    .sizes = gelu_sizes, .setup = gelu_setup, .run = gelu_run, .check = gelu_check, .teardown = bench_f32io_teardown,
};
