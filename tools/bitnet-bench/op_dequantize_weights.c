/* op_dequantize_weights.c - T2 + scales -> f32 weights, one variant per
 * scale kind.  Moves: T2 codes and scales in, f32 out.  Check: bit-exact
 * against bitnet_dequantize_weights_ref (w = q * d is one exact product). */
#include "bench.h"

#include <stdlib.h>

typedef struct {
    void **t2, **d, **w;
    bitnet_scale_kind kind;
    uint32_t group;
    uint64_t t2_bytes, nd;
} dqw_state;

static void dqw_geometry(const bench_case *c, dqw_state *s)
{
    bench_parse_scale(c->variant, &s->kind, &s->group);
    s->t2_bytes = c->m * bitnet_t2_row_bytes(c->k);
    s->nd = bench_n_scales(s->kind, s->group, c->m, c->k);
}

static void dqw_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    dqw_state s;
    dqw_geometry(c, &s);
    *moved = *set_bytes = c->m * c->k * 4 + s.t2_bytes + s.nd * 4;
}

static void dqw_teardown(bench_case *c)
{
    dqw_state *s = c->st;
    if (!s) return;
    bench_bufs_free(s->t2, c->nsets);
    bench_bufs_free(s->d, c->nsets);
    bench_bufs_free(s->w, c->nsets);
    free(s);
    c->st = NULL;
}

static bitnet_status dqw_setup(bench_case *c)
{
    dqw_state *s = calloc(1, sizeof *s);
    if (!s) return BITNET_E_NOMEM;
    c->st = s;
    dqw_geometry(c, s);
    s->t2 = bench_bufs_new(c->nsets, s->t2_bytes);
    s->d = bench_bufs_new(c->nsets, s->nd * 4);
    s->w = bench_bufs_new(c->nsets, c->m * c->k * 4);
    if (!s->w || !s->t2 || !s->d) return BITNET_E_NOMEM;
    bench_fill_t2(s->t2[0], c->m, c->k, c->opts->seed);
    bench_fill_f32(s->d[0], s->nd, c->opts->seed + 1, 0.01f, 0.1f);
    bench_bufs_replicate(s->t2, c->nsets, s->t2_bytes);
    bench_bufs_replicate(s->d, c->nsets, s->nd * 4);
    return BITNET_OK;
}

static bitnet_status dqw_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    dqw_state *s = c->st;
    (void)ms;
    return bitnet_dequantize_weights(be, s->t2[set], c->m, c->k, s->kind, s->group, s->d[set], s->w[set]);
}

static int dqw_check(bench_case *c, char *why, size_t wn)
{
    dqw_state *s = c->st;
    float *w = malloc(c->m * c->k * 4);
    int bad = 1;
    bitnet_status st;
    if (!w) snprintf(why, wn, "out of memory for the reference");
    else if ((st = bitnet_dequantize_weights_ref(s->t2[0], c->m, c->k, s->kind, s->group, s->d[0], w)))
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
