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
    bench_ternary t;
    bitnet_buffer **dev; /* --resident: t2, d, x, y of each set on the device */
} bl_state;

static void bl_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    bench_ternary t;
    bench_ternary_of(c, &t);
    *moved = *set_bytes = t.t2_bytes + t.nd * 4 + c->tokens * c->k * 4 + c->tokens * c->m * 4;
}

static void bl_teardown(bench_case *c)
{
    bl_state *s = c->st;
    if (s) bench_state_free(c, 4, s->t2, s->d, s->x, s->y);
}

static bitnet_status bl_setup(bench_case *c)
{
    bl_state *s = bench_state_new(c, sizeof *s);
    if (!s) return BITNET_E_NOMEM;
    bench_ternary_of(c, &s->t);
    s->t2 = bench_bufs_t2(c->nsets, c->m, c->k, c->opts->seed);
    s->d = bench_bufs_f32(c->nsets, s->t.nd, c->opts->seed + 1, 0.01f, 0.1f);
    s->x = bench_bufs_f32(c->nsets, c->tokens * c->k, c->opts->seed + 2, -2.0f, 2.0f);
    s->y = bench_bufs_new(c->nsets, c->tokens * c->m * 4);
    return s->t2 && s->d && s->x && s->y ? BITNET_OK : BITNET_E_NOMEM;
}

static void bl_args(const bench_case *c, size_t set, bitnet_ternary_matrix *w, bitnet_bitlinear_io *io, float *y)
{
    const bl_state *s = c->st;
    memset(w, 0, sizeof *w);
    memset(io, 0, sizeof *io);
    w->t2 = s->t2[set], w->out = c->m, w->in = c->k, w->kind = s->t.kind, w->group = s->t.group, w->d = s->d[set];
    io->tokens = c->tokens, io->x = s->x[set], io->act = BITNET_ACT_NONE, io->y = y;
}

static bitnet_status bl_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    bl_state *s = c->st;
    bitnet_ternary_matrix w;
    bitnet_bitlinear_io io;
    (void)ms;
    bl_args(c, set, &w, &io, s->y[set]);
    if (!s->dev) return bitnet_bitlinear(be, &w, &io);
    /* resident: everything on the device, the output read back once */
    bitnet_buffer *const *b = s->dev + 4 * set;
    w.t2 = bitnet_buffer_data(b[0]);
    w.d = bitnet_buffer_data(b[1]);
    io.x = bitnet_buffer_data(b[2]);
    io.y = bitnet_buffer_data(b[3]);
    bitnet_status st = bitnet_bitlinear(be, &w, &io);
    if (st || c->chained) return st; /* a chain: the method waits once at its end */
    return bitnet_buffer_read(b[3], 0, s->y[set], bitnet_buffer_size(b[3]));
}

static bitnet_status bl_keep(bench_case *c, bitnet_backend *be, int keep)
{
    bl_state *s = c->st;
    if (c->opts->resident) {
        const uint64_t xb = c->tokens * c->k * 4, yb = c->tokens * c->m * 4;
        if (!keep) {
            for (size_t i = 0; s->dev && i < 4 * c->nsets; i++) bitnet_buffer_free(s->dev[i]);
            free(s->dev);
            s->dev = NULL;
            return BITNET_OK;
        }
        if (!(s->dev = calloc(4 * c->nsets, sizeof *s->dev))) return BITNET_E_NOMEM;
        for (size_t i = 0; i < c->nsets; i++) {
            bitnet_buffer **b = s->dev + 4 * i;
            bitnet_status st;
            if ((st = bitnet_buffer_upload(be, s->t2[i], s->t.t2_bytes, &b[0])) ||
                (st = bitnet_buffer_upload(be, s->d[i], s->t.nd * 4, &b[1])) ||
                (st = bitnet_buffer_upload(be, s->x[i], xb, &b[2])) || (st = bitnet_buffer_create(be, yb, &b[3])))
                return st;
        }
        return bitnet_backend_sync(be);
    }
    bitnet_status st = bench_keep_bufs(be, keep, s->t2, c->nsets, s->t.t2_bytes);
    if (st == BITNET_OK || !keep) st = bench_keep_bufs(be, keep, s->d, c->nsets, s->t.nd * 4);
    return st;
}

/* The reference is scalar (about 1.4 ns a multiply-add on a Zen 4 core:
 * 5 s at 64 tokens of 4096 x 14336, a minute at 256), so large products are
 * checked on sampled rows (bench_check_sampled).  Rows are independent, so
 * the reference of those rows copied into a matrix of their own is the
 * definition's result for them (one call: the activations are quantized
 * once). */

static int bl_check(bench_case *c, char *why, size_t wn)
{
    const bl_state *s = c->st;
    bitnet_ternary_matrix w;
    bitnet_bitlinear_io io;
    if (!bench_check_sampled(c)) {
        float *y = malloc(c->tokens * c->m * 4);
        bitnet_status st = BITNET_E_NOMEM;
        if (y) {
            bl_args(c, 0, &w, &io, y);
            st = bitnet_bitlinear_ref(&w, &io);
        }
        return bench_check_f32_ref(y, st, s->y[0], c->tokens * c->m, 0, 0, why, wn);
    }
    /* scales a row: one per group, one, or none of its own (the tensor's) */
    const uint64_t ns = BENCH_CHECK_ROWS, rb = s->t.t2_bytes / c->m;
    const uint64_t dpr = s->t.kind == BITNET_SCALE_GROUP ? s->t.nd / c->m : s->t.kind == BITNET_SCALE_ROW ? 1 : 0;
    uint8_t *t2 = malloc(ns * rb);
    float *d = malloc((dpr ? ns * dpr : 1) * 4), *ref = malloc(c->tokens * ns * 4), *got = malloc(c->tokens * 4);
    bitnet_status st = BITNET_E_NOMEM;
    if (t2 && d && ref && got) {
        for (uint64_t i = 0; i < ns; i++) {
            const uint64_t r = bench_check_row(c, i);
            memcpy(t2 + i * rb, (const uint8_t *)s->t2[0] + r * rb, rb);
            memcpy(d + i * dpr, (const float *)s->d[0] + r * dpr, dpr * 4);
        }
        if (!dpr) d[0] = ((const float *)s->d[0])[0];
        bl_args(c, 0, &w, &io, ref);
        w.t2 = t2, w.out = ns, w.d = d;
        st = bitnet_bitlinear_ref(&w, &io);
    }
    int bad = 0;
    for (uint64_t i = 0; i < ns && !bad; i++) {
        const uint64_t r = bench_check_row(c, i);
        float *rr = got ? malloc(c->tokens * 4) : NULL; /* bench_check_f32_ref frees it */
        for (uint64_t t = 0; rr && st == BITNET_OK && t < c->tokens; t++) {
            rr[t] = ref[t * ns + i];
            got[t] = ((const float *)s->y[0])[t * c->m + r];
        }
        char sub[200];
        bad = bench_check_f32_ref(rr, st, got, c->tokens, 0, 0, sub, sizeof sub);
        if (bad) snprintf(why, wn, "row %llu, element = token: %s", (unsigned long long)r, sub);
    }
    free(t2);
    free(d);
    free(ref);
    free(got);
    return bad;
}

const bench_op bench_op_bitlinear = {
    .name = "bitlinear", .shape = BENCH_SHAPE_MATRIX, .uses_tokens = 1, .product = 1, .has_baseline_blas = 1,
    .variants = bench_scale_variants, .sizes = bl_sizes, .setup = bl_setup, .run = bl_run,
    .check = bl_check, .teardown = bl_teardown, .keep = bl_keep,
};
