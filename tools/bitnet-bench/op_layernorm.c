/* op_layernorm.c - layer normalisation over the last axis of [M x K] floats
 * with weight and bias [K], eps 1e-5.  Moves: x, weight, bias in, y out.
 * Check: NMSE against bitnet_layernorm_ref <= 1e-12. */
#include "bench.h"

#include <stdlib.h>

/* in[0] is x (M*K floats); in[1] holds weight then bias (2*K floats). */
static void ln_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = 8 * c->m * c->k + 8 * c->k;
    *set_bytes = 8 * c->m * c->k + 8 * c->k;
}

static bitnet_status ln_setup(bench_case *c)
{
    bitnet_status st = bench_f32io_setup(c, 1, c->m * c->k, c->m * c->k, -3.0f, 3.0f);
    bench_f32io *s = BENCH_F32IO(c);
    if (st) return st;
    return (s->in[1] = bench_bufs_f32(c->nsets, 2 * c->k, c->opts->seed + 5, 0.5f, 1.5f)) ? BITNET_OK : BITNET_E_NOMEM;
}

static bitnet_status ln_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    bench_f32io *s = BENCH_F32IO(c);
    const float *wb = s->in[1][set];
    (void)ms;
    return bitnet_layernorm(be, s->in[0][set], c->m, c->k, wb, wb + c->k, 1e-5f, s->out[set]);
}

static int ln_check(bench_case *c, char *why, size_t wn)
{
    bench_f32io *s = BENCH_F32IO(c);
    const float *wb = s->in[1][0];
    float *y = malloc(s->out_n * 4);
    bitnet_status st = y ? bitnet_layernorm_ref(s->in[0][0], c->m, c->k, wb, wb + c->k, 1e-5f, y) : BITNET_E_NOMEM;
    return bench_check_f32_ref(y, st, s->out[0], s->out_n, 0, 1e-12, why, wn);
}

const bench_op bench_op_layernorm = {
    .name = "layernorm", .shape = BENCH_SHAPE_MATRIX,
    .sizes = ln_sizes, .setup = ln_setup, .run = ln_run, .check = ln_check, .teardown = bench_f32io_teardown,
};
