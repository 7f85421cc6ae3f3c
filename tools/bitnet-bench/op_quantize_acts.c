/* op_quantize_acts.c - absmax activation quantization of [M x K] f32 to
 * int8 + one scale per row (a row is a token).
 * Moves: f32 in, int8 and scales out.  Check: bit-exact against the _ref. */
#include "bench.h"

#include <stdlib.h>

typedef struct {
    void **x, **q, **s;
} qa_state;

static void qa_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = *set_bytes = c->m * c->k * 5 + c->m * 4;
}

static void qa_teardown(bench_case *c)
{
    qa_state *s = c->st;
    if (s) bench_state_free(c, 3, s->x, s->q, s->s);
}

static bitnet_status qa_setup(bench_case *c)
{
    qa_state *s = bench_state_new(c, sizeof *s);
    if (!s) return BITNET_E_NOMEM;
    s->x = bench_bufs_f32(c->nsets, c->m * c->k, c->opts->seed, -4.0f, 4.0f);
    s->q = bench_bufs_new(c->nsets, c->m * c->k);
    s->s = bench_bufs_new(c->nsets, c->m * 4);
    return s->x && s->q && s->s ? BITNET_OK : BITNET_E_NOMEM;
}

static bitnet_status qa_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    qa_state *s = c->st;
    (void)ms;
    return bitnet_quantize_acts(be, s->x[set], c->m, c->k, s->q[set], s->s[set]);
}

static int qa_check(bench_case *c, char *why, size_t wn)
{
    qa_state *s = c->st;
    int8_t *q = malloc(c->m * c->k);
    float *sc = malloc(c->m * 4);
    int bad = 1;
    bitnet_status st;
    if (!q || !sc) snprintf(why, wn, "out of memory for the reference");
    else if ((st = bitnet_quantize_acts_ref(s->x[0], c->m, c->k, q, sc)))
        snprintf(why, wn, "reference failed: %s", bitnet_strerror(st));
    else
        bad = bench_check_bytes(s->q[0], q, c->m * c->k, "int8 codes", why, wn) ||
              bench_check_bytes(s->s[0], sc, c->m * 4, "scales", why, wn);
    free(q);
    free(sc);
    return bad;
}

const bench_op bench_op_quantize_acts = {
    .name = "quantize_acts", .shape = BENCH_SHAPE_MATRIX,
    .sizes = qa_sizes, .setup = qa_setup, .run = qa_run, .check = qa_check, .teardown = qa_teardown,
};
