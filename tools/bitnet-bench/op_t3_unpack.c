/* op_t3_unpack.c - T3 (base 3) -> T2 repacking of an [M x K] ternary matrix,
 * as done when a .bnt holding T3 is loaded (bitnet_t3_to_t2; host only).
 * Moves: T3 in, T2 out.  Check: every T2 code equals the code packed into
 * T3 (decoded here from the layout in bnt(5)). */
#include "bench.h"

#include <stdlib.h>

typedef struct {
    void **t3, **t2;
    int8_t *q;
    uint64_t t3_bytes, t2_bytes;
} t3_state;

static void t3_sizes(const bench_case *c, uint64_t *moved, uint64_t *set_bytes)
{
    *moved = *set_bytes = c->m * (bitnet_t3_row_bytes(c->k) + bitnet_t2_row_bytes(c->k));
}

static void t3_teardown(bench_case *c)
{
    t3_state *s = c->st;
    if (!s) return;
    free(s->q);
    bench_state_free(c, 2, s->t3, s->t2);
}

static bitnet_status t3_setup(bench_case *c)
{
    t3_state *s = bench_state_new(c, sizeof *s);
    if (!s) return BITNET_E_NOMEM;
    const uint64_t rb = bitnet_t3_row_bytes(c->k);
    s->t3_bytes = c->m * rb;
    s->t2_bytes = c->m * bitnet_t2_row_bytes(c->k);
    s->t3 = bench_bufs_new(c->nsets, s->t3_bytes);
    s->t2 = bench_bufs_new(c->nsets, s->t2_bytes);
    s->q = malloc(c->m * c->k + 1);
    if (!s->t3 || !s->t2 || !s->q) return BITNET_E_NOMEM;
    uint64_t seed = c->opts->seed;
    for (uint64_t i = 0; i < c->m * c->k; i++) s->q[i] = (int8_t)(bench_rand(&seed) % 3) - 1;
    uint8_t *t3 = s->t3[0];
    for (uint64_t r = 0; r < c->m; r++)
        for (uint64_t b = 0; b < rb; b++) {
            unsigned v = 0, p = 1;
            for (uint64_t t = 0; t < 5; t++, p *= 3) {
                uint64_t col = 5 * b + t;
                v += p * (col < c->k ? (unsigned)(s->q[r * c->k + col] + 1) : 1u);
            }
            t3[r * rb + b] = (uint8_t)v;
        }
    bench_bufs_replicate(s->t3, c->nsets, s->t3_bytes);
    return BITNET_OK;
}

static bitnet_status t3_run(bench_case *c, bitnet_backend *be, size_t set, double *ms)
{
    t3_state *s = c->st;
    (void)be, (void)ms;
    return bitnet_t3_to_t2(s->t3[set], c->m, c->k, s->t2[set]);
}

static int t3_check(bench_case *c, char *why, size_t wn)
{
    t3_state *s = c->st;
    const uint8_t *t2 = s->t2[0];
    const uint64_t rb = bitnet_t2_row_bytes(c->k);
    for (uint64_t r = 0; r < c->m; r++)
        for (uint64_t col = 0; col < rb * 4; col++) {
            uint64_t b = col / BITNET_T2_BLOCK, k = col % BITNET_T2_BLOCK / 32, j = col % 32;
            int code = (t2[r * rb + b * BITNET_T2_BLOCK_BYTES + j] >> (2 * k)) & 3;
            int want = col < c->k ? s->q[r * c->k + col] + 1 : 1;
            if (code != want) {
                snprintf(why, wn, "row %llu column %llu: T2 code %d, want %d", (unsigned long long)r,
                         (unsigned long long)col, code, want);
                return 1;
            }
        }
    return 0;
}

const bench_op bench_op_t3_unpack = {
    .name = "t3_unpack", .shape = BENCH_SHAPE_MATRIX, .host_only = 1,
    .sizes = t3_sizes, .setup = t3_setup, .run = t3_run, .check = t3_check, .teardown = t3_teardown,
};
