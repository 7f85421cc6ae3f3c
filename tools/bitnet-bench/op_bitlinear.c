/* op_bitlinear.c - BitLinear y[tokens x M] = x[tokens x K] * W^T with W
 * ternary T2 [M x K] and scales, one variant per scale kind; float x in
 * (quantized inside the call), float y out, no bias, no activation.
 * Moves: T2 weights + scales + activations in + outputs.  GOP/s counts
 * 2 M K tokens.  Check: bit-exact against bitnet_bitlinear_ref (the int32
 * accumulation is exact and no transcendental function is involved). */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    void **t2, **d, **x, **y;
    bitnet_scale_kind kind;
    uint32_t group;
    uint64_t t2_bytes, nd;
} bl_state;

static void bl_geometry(const bench_case *c, bl_state *s)
{
    bench_parse_scale(c->variant, &s->kind, &s->group);
    s->t2_bytes = c->m * bitnet_t2_row_bytes(c->k);
    s->nd = bench_n_scales(s->kind, s->group, c->m, c->k);
}

static void bl_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    bl_state s;
    bl_geometry(c, &s);
    *moved = *set_bytes = s.t2_bytes + s.nd * 4 + c->tokens * c->k * 4 + c->tokens * c->m * 4;
}

static void bl_teardown(bench_case *c)
{
    bl_state *s = c->st;
    if (!s) return;
    bench_bufs_free(s->t2, c->nsets);
    bench_bufs_free(s->d, c->nsets);
    bench_bufs_free(s->x, c->nsets);
    bench_bufs_free(s->y, c->nsets);
    free(s);
    c->st = NULL;
}

static bitnet_status bl_setup(bench_case *c)
{
    bl_state *s = calloc(1, sizeof *s);
    if (!s) return BITNET_E_NOMEM;
    c->st = s;
    bl_geometry(c, s);
    s->t2 = bench_bufs_new(c->nsets, s->t2_bytes);
    s->d = bench_bufs_new(c->nsets, s->nd * 4);
    s->x = bench_bufs_new(c->nsets, c->tokens * c->k * 4);
    s->y = bench_bufs_new(c->nsets, c->tokens * c->m * 4);
    if (!s->t2 || !s->d || !s->x || !s->y) return BITNET_E_NOMEM;
    bench_fill_t2(s->t2[0], c->m, c->k, c->opts->seed);
    bench_fill_f32(s->d[0], s->nd, c->opts->seed + 1, 0.01f, 0.1f);
    bench_fill_f32(s->x[0], c->tokens * c->k, c->opts->seed + 2, -2.0f, 2.0f);
    bench_bufs_replicate(s->t2, c->nsets, s->t2_bytes);
    bench_bufs_replicate(s->d, c->nsets, s->nd * 4);
    bench_bufs_replicate(s->x, c->nsets, c->tokens * c->k * 4);
    return BITNET_OK;
}

static void bl_args(const bench_case *c, size_t set, bitnet_ternary_matrix *w, bitnet_bitlinear_io *io, float *y)
{
    const bl_state *s = c->st;
    memset(w, 0, sizeof *w);
    memset(io, 0, sizeof *io);
    w->t2 = s->t2[set], w->out = c->m, w->in = c->k, w->kind = s->kind, w->group = s->group, w->d = s->d[set];
    io->tokens = c->tokens, io->x = s->x[set], io->act = BITNET_ACT_NONE, io->y = y;
}

static bitnet_status bl_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    bl_state *s = c->st;
    bitnet_ternary_matrix w;
    bitnet_bitlinear_io io;
    (void)ms;
    bl_args(c, set, &w, &io, s->y[set]);
    return bitnet_bitlinear(be, &w, &io);
}

static int bl_check(bench_case *c, char *why, size_t wn)
{
    float *y = malloc(c->tokens * c->m * 4);
    bitnet_ternary_matrix w;
    bitnet_bitlinear_io io;
    int bad = 1;
    bitnet_status st;
    if (!y) {
        snprintf(why, wn, "out of memory for the reference");
        return 1;
    }
    bl_args(c, 0, &w, &io, y);
    if ((st = bitnet_bitlinear_ref(&w, &io))) snprintf(why, wn, "reference failed: %s", bitnet_strerror(st));
    else bad = bench_check_ulp(((bl_state *)c->st)->y[0], y, c->tokens * c->m, 0, why, wn);
    free(y);
    return bad;
}

const bench_op bench_op_bitlinear = {
    .name = "bitlinear", .shape = BENCH_SHAPE_MATRIX, .uses_tokens = 1, .product = 1, .has_baseline_blas = 1,
    .variants = bench_scale_variants, .sizes = bl_sizes, .setup = bl_setup, .run = bl_run,
    .check = bl_check, .teardown = bl_teardown,
};
