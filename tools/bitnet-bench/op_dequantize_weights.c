/* op_dequantize_weights.c - T2 + scales -> f32 weights, one variant per
 * scale kind.  Moves: T2 codes and scales in, f32 out.  Check: bit-exact
 * against bitnet_dequantize_weights_ref (w = q * d is one exact product). */
#include "bench.h"

#include <stdlib.h>

typedef struct {
    void **t2, **d, **w;
    bench_ternary t;
} dqw_state;

static void dqw_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    bench_ternary t;
    bench_ternary_of(c, &t);
    *moved = *set_bytes = c->m * c->k * 4 + t.t2_bytes + t.nd * 4;
}

static void dqw_teardown(bench_case *c)
{
    dqw_state *s = c->st;
    if (s) bench_state_free(c, 3, s->t2, s->d, s->w);
}

static bitnet_status dqw_setup(bench_case *c)
{
    dqw_state *s = bench_state_new(c, sizeof *s);
    if (!s) return BITNET_E_NOMEM;
    bench_ternary_of(c, &s->t);
    s->t2 = bench_bufs_t2(c->nsets, c->m, c->k, c->opts->seed);
    s->d = bench_bufs_f32(c->nsets, s->t.nd, c->opts->seed + 1, 0.01f, 0.1f);
    s->w = bench_bufs_new(c->nsets, c->m * c->k * 4);
    return s->w && s->t2 && s->d ? BITNET_OK : BITNET_E_NOMEM;
}

static bitnet_status dqw_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    dqw_state *s = c->st;
    (void)ms;
    return bitnet_dequantize_weights(be, s->t2[set], c->m, c->k, s->t.kind, s->t.group, s->d[set], s->w[set]);
}

static int dqw_check(bench_case *c, char *why, size_t wn)
{
    dqw_state *s = c->st;
    float *w = malloc(c->m * c->k * 4);
    int bad = 1;
    bitnet_status st;
    if (!w) snprintf(why, wn, "out of memory for the reference");
    else if ((st = bitnet_dequantize_weights_ref(s->t2[0], c->m, c->k, s->t.kind, s->t.group, s->d[0], w)))
        snprintf(why, wn, "reference failed: %s", bitnet_strerror(st));
    else
        bad = bench_check_bytes(s->w[0], w, c->m * c->k * 4, "weights", why, wn);
    free(w);
    return bad;
}

const bench_op bench_op_dequantize_weights = {
    .name = "dequantize_weights", .shape = BENCH_SHAPE_MATRIX,
    .variants = bench_scale_variants, .sizes = dqw_sizes, .setup = dqw_setup, .run = dqw_run,
    .check = dqw_check, .teardown = dqw_teardown,
};
