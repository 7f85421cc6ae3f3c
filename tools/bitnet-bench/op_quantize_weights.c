/* op_quantize_weights.c - absmean weight quantization f32 -> T2 + scales,
 * one variant per scale kind.  Moves: f32 weights in, T2 codes and scales out.
 * Check: codes and scales bit-exact against bitnet_quantize_weights_ref.
 * --resident: weights, codes and scales in device buffers, each call reading
 * the scales back (the caller's view of quantizing a tensor on the device). */
#include "bench.h"

#include <stdlib.h>

typedef struct {
    void **w, **t2, **d;
    bench_ternary t;
    bitnet_buffer **dev; /* --resident: w, t2, d of each set on the device */
} qw_state;

static void qw_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    bench_ternary t;
    bench_ternary_of(c, &t);
    *moved = *set_bytes = c->m * c->k * 4 + t.t2_bytes + t.nd * 4;
}

static void qw_teardown(bench_case *c)
{
    qw_state *s = c->st;
    if (s) bench_state_free(c, 3, s->w, s->t2, s->d);
}

static bitnet_status qw_setup(bench_case *c)
{
    qw_state *s = bench_state_new(c, sizeof *s);
    if (!s) return BITNET_E_NOMEM;
    bench_ternary_of(c, &s->t);
    s->w = bench_bufs_f32(c->nsets, c->m * c->k, c->opts->seed, -1.0f, 1.0f);
    s->t2 = bench_bufs_new(c->nsets, s->t.t2_bytes);
    s->d = bench_bufs_new(c->nsets, s->t.nd * 4);
    return s->w && s->t2 && s->d ? BITNET_OK : BITNET_E_NOMEM;
}

static bitnet_status qw_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    qw_state *s = c->st;
    (void)ms;
    if (!s->dev) return bitnet_quantize_weights(be, s->w[set], c->m, c->k, s->t.kind, s->t.group, s->t2[set], s->d[set]);
    bitnet_buffer *const *b = s->dev + 3 * set;
    bitnet_status st = bitnet_quantize_weights(be, bitnet_buffer_data(b[0]), c->m, c->k, s->t.kind, s->t.group,
                                               bitnet_buffer_data(b[1]), bitnet_buffer_data(b[2]));
    if (st || c->chained) return st; /* a chain: the method waits once at its end */
    return bitnet_buffer_read(b[2], 0, s->d[set], s->t.nd * 4); /* the one read: the scales */
}

static bitnet_status qw_keep(bench_case *c, bitnet_backend *be, int keep)
{
    qw_state *s = c->st;
    if (!c->opts->resident) return bench_keep_bufs(be, keep, s->w, c->nsets, c->m * c->k * 4);
    if (!keep) {
        for (size_t i = 0; s->dev && i < 3 * c->nsets; i++) bitnet_buffer_free(s->dev[i]);
        free(s->dev);
        s->dev = NULL;
        return BITNET_OK;
    }
    if (!(s->dev = calloc(3 * c->nsets, sizeof *s->dev))) return BITNET_E_NOMEM;
    for (size_t i = 0; i < c->nsets; i++) {
        bitnet_buffer **b = s->dev + 3 * i;
        bitnet_status st;
        if ((st = bitnet_buffer_upload(be, s->w[i], c->m * c->k * 4, &b[0])) ||
            (st = bitnet_buffer_create(be, s->t.t2_bytes, &b[1])) || (st = bitnet_buffer_create(be, s->t.nd * 4, &b[2])))
            return st;
    }
    return bitnet_backend_sync(be);
}

static int qw_check(bench_case *c, char *why, size_t wn)
{
    qw_state *s = c->st;
    uint8_t *t2 = malloc(s->t.t2_bytes ? s->t.t2_bytes : 1);
    float *d = malloc(s->t.nd * 4);
    int bad = 1;
    bitnet_status st = BITNET_OK;
    if (s->dev && t2) /* resident: the codes of set 0 from the device */
        st = bitnet_buffer_read(s->dev[1], 0, s->t2[0], s->t.t2_bytes);
    if (!t2 || !d) snprintf(why, wn, "out of memory for the reference");
    else if (st) snprintf(why, wn, "reading the codes back failed: %s", bitnet_strerror(st));
    else if ((st = bitnet_quantize_weights_ref(s->w[0], c->m, c->k, s->t.kind, s->t.group, t2, d)))
        snprintf(why, wn, "reference failed: %s", bitnet_strerror(st));
    else
        bad = bench_check_bytes(s->t2[0], t2, s->t.t2_bytes, "T2 codes", why, wn) ||
              bench_check_bytes(s->d[0], d, s->t.nd * 4, "scales", why, wn);
    free(t2);
    free(d);
    return bad;
}

const bench_op bench_op_quantize_weights = {
    .name = "quantize_weights", .shape = BENCH_SHAPE_MATRIX,
    .variants = bench_scale_variants, .sizes = qw_sizes, .setup = qw_setup, .run = qw_run,
    .check = qw_check, .teardown = qw_teardown, .keep = qw_keep,
};
