/*
 * permute.c - axis permutation (transpose) on the CPU: the scalar reference
 * and a multi-threaded fast path.  The fast path merges axes that stay
 * together; when the last axis stays last it copies whole rows, otherwise it
 * moves 32x32 tiles between the input's last axis and the output's last axis
 * (both sides then touch whole cache lines).
 */
#include "cpu.h"
#include "../op_tensor.h"

#include <string.h>

void bn_permute_ref_k(const float *x, const bitnet_shape *s, const uint32_t *perm, float *y)
{
    uint64_t stride[BITNET_MAX_RANK], n = 1;
    for (uint32_t k = 0; k < s->rank; k++) {
        uint32_t i = s->rank - 1 - k;
        stride[i] = n;
        n *= s->dims[i];
    }
    for (uint64_t f = 0; f < n; f++) {
        uint64_t rest = f, off = 0;
        for (uint32_t k = s->rank; k-- > 0;) { /* output axis k is input axis perm[k] */
            uint64_t d = s->dims[perm[k]];
            off += (rest % d) * stride[perm[k]];
            rest /= d;
        }
        y[f] = x[off];
    }
}

#define TILE 32

typedef struct {
    const float *x;
    float *y;
    uint32_t rank, nb;                  /* merged rank; number of batch axes */
    uint64_t dims[BITNET_MAX_RANK];     /* merged input dims */
    uint64_t sin[BITNET_MAX_RANK];      /* input stride of input axis k */
    uint64_t sout[BITNET_MAX_RANK];     /* output stride of input axis k */
    uint32_t batch[BITNET_MAX_RANK];    /* batch axes (input numbering), outermost first */
    uint32_t a;                         /* input axis that becomes the output's last */
    uint64_t ta, tl, inner;             /* tiles along a and along the input's last axis; row length */
} perm_job;

/* Input and output offsets of batch item b. */
static void batch_offsets(const perm_job *j, uint64_t b, uint64_t *oi, uint64_t *oo)
{
    uint64_t i = 0, o = 0;
    for (uint32_t k = j->nb; k-- > 0;) {
        uint32_t ax = j->batch[k];
        uint64_t c = b % j->dims[ax];
        b /= j->dims[ax];
        i += c * j->sin[ax];
        o += c * j->sout[ax];
    }
    *oi = i;
    *oo = o;
}

/* The last axis stays last: item = one output row of `inner` elements. */
static void rows_range(void *arg, uint64_t begin, uint64_t end)
{
    const perm_job *j = arg;
    for (uint64_t r = begin; r < end; r++) {
        uint64_t oi, oo;
        batch_offsets(j, r, &oi, &oo);
        memcpy(j->y + oo, j->x + oi, j->inner * sizeof(float));
    }
}

static void tiles_range(void *arg, uint64_t begin, uint64_t end)
{
    const perm_job *j = arg;
    const uint32_t last = j->rank - 1;
    const uint64_t na = j->dims[j->a], nl = j->dims[last];
    const uint64_t sa = j->sin[j->a], sl = j->sout[last];
    for (uint64_t it = begin; it < end; it++) {
        uint64_t tl = it % j->tl, ta = (it / j->tl) % j->ta, b = it / j->tl / j->ta;
        uint64_t oi, oo;
        batch_offsets(j, b, &oi, &oo);
        uint64_t a0 = ta * TILE, l0 = tl * TILE;
        uint64_t a1 = a0 + TILE < na ? a0 + TILE : na, l1 = l0 + TILE < nl ? l0 + TILE : nl;
        const float *restrict x = j->x + oi;
        float *restrict y = j->y + oo;
        for (uint64_t l = l0; l < l1; l++)
            for (uint64_t ia = a0; ia < a1; ia++) y[l * sl + ia] = x[ia * sa + l];
    }
}

bitnet_status bn_cpu_permute_plain(void *ctx, const float *x, const bitnet_shape *s, const uint32_t *perm, float *y)
{
    bn_cpu *cpu = ctx;
    bn_pplan p;
    perm_job j;
    uint64_t st = 1;
    bn_permute_plan(s, perm, &p);
    memset(&j, 0, sizeof j);
    j.x = x;
    j.y = y;
    j.rank = p.rank;
    for (uint32_t k = 0; k < p.rank; k++) j.dims[k] = p.dims[k];
    for (uint32_t k = p.rank; k-- > 0;) { j.sin[k] = st; st *= p.dims[k]; }
    st = 1;
    for (uint32_t k = p.rank; k-- > 0;) { j.sout[p.perm[k]] = st; st *= p.dims[p.perm[k]]; }
    const uint32_t last = p.rank - 1;
    const uint64_t n = st;
    if (p.perm[last] == last) {
        for (uint32_t k = 0; k < last; k++) j.batch[j.nb++] = p.perm[k]; /* output order: rows written in order */
        j.inner = p.dims[last];
        bn_parallel_for(cpu->pool, n / j.inner, j.inner >= 4096 ? 1 : 4096 / j.inner, rows_range, &j);
    } else {
        j.a = p.perm[last];
        for (uint32_t k = 0; k < last; k++)
            if (k != j.a) j.batch[j.nb++] = k;
        j.ta = (p.dims[j.a] + TILE - 1) / TILE;
        j.tl = (p.dims[last] + TILE - 1) / TILE;
        uint64_t nbatch = n / p.dims[j.a] / p.dims[last];
        bn_parallel_for(cpu->pool, nbatch * j.ta * j.tl, 16, tiles_range, &j);
    }
    return BITNET_OK;
}

bitnet_status bn_cpu_permute(void *ctx, const float *x, const bitnet_shape *s, const uint32_t *perm, float *y)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < s->rank; i++) n *= s->dims[i];
    if (n == 0) return BITNET_OK;
    bitnet_status st = bn_cpu_permute_plain(ctx, x, s, perm, y);
    if (st == BITNET_OK && bn_test_perturb("permute")) bn_perturb_one(&y[n / 2]);
    return st;
}
