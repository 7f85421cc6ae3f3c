/*
 * reduce.c - reductions (sum, mean, max, min, argmax) over any set of axes
 * on the CPU: the scalar reference and a multi-threaded fast path.
 *
 * Sums accumulate in double (error near float64's, then one rounding), in a
 * fixed order that does not depend on the thread count: a row is cut into
 * chunks of RED_CHUNK elements whose partial results are combined in order.
 * max/min propagate NaN; argmax returns the first maximum, or the first NaN
 * when the slice holds one.  mean of an empty slice is NaN, sum 0.
 *
 * The fast path plans the shape (dims merged): reduced trailing dims are
 * rows; a reduced middle dim [outer, len, inner] accumulates columns row by
 * row in memory order (fixed row blocks combined in order); any other
 * pattern is first permuted to [kept..., reduced...].
 */
#include "cpu.h"
#include "../op_tensor.h"
#include "reduce.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RED_CHUNK (1u << 16)

static inline int better_max(float v, float best) { return v > best || (v != v && best == best); }
static inline int better_min(float v, float best) { return v < best || (v != v && best == best); }

static void put(bitnet_reduce_op op, float *y, int64_t *idx, uint64_t o, double s, float m, int64_t mi, uint64_t n)
{
    switch (op) {
    case BITNET_RED_SUM: if (y) y[o] = (float)s; break;
    case BITNET_RED_MEAN: if (y) y[o] = (float)(s / (double)n); break;
    case BITNET_RED_MAX: case BITNET_RED_MIN: if (y) y[o] = m; break;
    default:
        if (y) y[o] = (float)mi;
        if (idx) idx[o] = mi;
        break;
    }
}

/* ---- reference ---------------------------------------------------------- */

void bn_reduce_ref_k(bitnet_reduce_op op, const float *x, const bitnet_shape *s, uint32_t axes_mask, float *y,
                     int64_t *idx)
{
    uint64_t stride[BITNET_MAX_RANK], n_out = 1, n_red = 1, st = 1;
    uint32_t kept[BITNET_MAX_RANK], red[BITNET_MAX_RANK], nk = 0, nr = 0;
    for (uint32_t k = 0; k < s->rank; k++) {
        uint32_t i = s->rank - 1 - k;
        stride[i] = st;
        st *= s->dims[i];
    }
    for (uint32_t i = 0; i < s->rank; i++) {
        if (axes_mask == 0 || (axes_mask >> i) & 1) { red[nr++] = i; n_red *= s->dims[i]; }
        else { kept[nk++] = i; n_out *= s->dims[i]; }
    }
    for (uint64_t o = 0; o < n_out; o++) {
        uint64_t base = 0, rest = o;
        for (uint32_t k = nk; k-- > 0;) {
            base += (rest % s->dims[kept[k]]) * stride[kept[k]];
            rest /= s->dims[kept[k]];
        }
        double sum = 0;
        float m = 0;
        int64_t mi = 0;
        for (uint64_t r = 0; r < n_red; r++) {
            uint64_t off = base;
            rest = r;
            for (uint32_t k = nr; k-- > 0;) {
                off += (rest % s->dims[red[k]]) * stride[red[k]];
                rest /= s->dims[red[k]];
            }
            float v = x[off];
            sum += v;
            if (r == 0 || (op == BITNET_RED_MIN ? better_min(v, m) : better_max(v, m))) {
                m = v;
                mi = (int64_t)r;
            }
        }
        put(op, y, idx, o, sum, m, mi, n_red);
    }
}

/* ---- fast path ---------------------------------------------------------- */

typedef struct { double s; float m; int64_t i; } part;

/* Reduces x[0..n) (the chunk starting at element `first` of its slice). */
static part span_reduce(bitnet_reduce_op op, const float *restrict x, uint64_t n, uint64_t first, bn_simd simd)
{
    part p = {0, x[0], (int64_t)first};
    uint64_t i = 0;
#if defined(__x86_64__)
    if ((op == BITNET_RED_SUM || op == BITNET_RED_MEAN) && simd >= BN_SIMD_AVX2) {
        p.s = simd >= BN_SIMD_AVX512 ? bn_sum_f32_avx512(x, n) : bn_sum_f32_avx2(x, n);
        return p;
    }
#else
    (void)simd;
#endif
    if (op == BITNET_RED_SUM || op == BITNET_RED_MEAN) {
        typedef double v4d __attribute__((vector_size(32)));
        typedef float v4f __attribute__((vector_size(16)));
        v4d a0 = {0, 0, 0, 0}, a1 = a0;
        for (; i + 8 <= n; i += 8) {
            v4f f0, f1;
            memcpy(&f0, x + i, sizeof f0);
            memcpy(&f1, x + i + 4, sizeof f1);
            a0 += __builtin_convertvector(f0, v4d);
            a1 += __builtin_convertvector(f1, v4d);
        }
        a0 += a1;
        double s = (a0[0] + a0[1]) + (a0[2] + a0[3]);
        for (; i < n; i++) s += x[i];
        p.s = s;
    } else if (op == BITNET_RED_ARGMAX) {
        float best = x[0];
        uint64_t bi = 0;
        for (i = 1; i < n; i++)
            if (better_max(x[i], best)) { best = x[i]; bi = i; }
        p.m = best;
        p.i = (int64_t)(first + bi);
    } else {
        /* four lanes (one SSE register), NaN-sticky: a lane takes v when v
         * wins or is NaN */
        typedef float v4f __attribute__((vector_size(16)));
        typedef int32_t v4i __attribute__((vector_size(16)));
        float best = x[0];
        i = 1;
        if (n >= 8) {
            v4f acc, v;
            memcpy(&acc, x, sizeof acc);
            if (op == BITNET_RED_MAX)
                for (i = 4; i + 4 <= n; i += 4) {
                    memcpy(&v, x + i, sizeof v);
                    v4i m = (v > acc) | (v != v);
                    acc = (v4f)(((v4i)v & m) | ((v4i)acc & ~m));
                }
            else
                for (i = 4; i + 4 <= n; i += 4) {
                    memcpy(&v, x + i, sizeof v);
                    v4i m = (v < acc) | (v != v);
                    acc = (v4f)(((v4i)v & m) | ((v4i)acc & ~m));
                }
            for (int k = 0; k < 4; k++)
                best = (op == BITNET_RED_MAX ? better_max(acc[k], best) : better_min(acc[k], best)) ? acc[k] : best;
        }
        if (op == BITNET_RED_MAX)
            for (; i < n; i++) best = better_max(x[i], best) ? x[i] : best;
        else
            for (; i < n; i++) best = better_min(x[i], best) ? x[i] : best;
        p.m = best;
    }
    return p;
}

typedef struct {
    bitnet_reduce_op op;
    const float *x;
    float *y;
    int64_t *idx;
    uint64_t len, cpr; /* row length, chunks per row */
    part *parts;
    bn_simd simd;
} red_job;

static void rows_range(void *arg, uint64_t begin, uint64_t end)
{
    const red_job *j = arg;
    for (uint64_t it = begin; it < end; it++) {
        uint64_t r = it / j->cpr, c0 = (it % j->cpr) * RED_CHUNK;
        uint64_t n = j->len - c0 < RED_CHUNK ? j->len - c0 : RED_CHUNK;
        j->parts[it] = span_reduce(j->op, j->x + r * j->len + c0, n, c0, j->simd);
    }
}

static void rows_reduce(bn_cpu *cpu, red_job *j, uint64_t rows, bitnet_status *st)
{
    j->cpr = (j->len + RED_CHUNK - 1) / RED_CHUNK;
    j->parts = malloc(rows * j->cpr * sizeof *j->parts);
    if (!j->parts) {
        *st = bn_fail(BITNET_E_NOMEM, "reduce: no memory for %llu partial results",
                      (unsigned long long)(rows * j->cpr));
        return;
    }
    uint64_t grain = j->len >= RED_CHUNK ? 1 : RED_CHUNK / j->len;
    bn_parallel_for(cpu->pool, rows * j->cpr, grain, rows_range, j);
    for (uint64_t r = 0; r < rows; r++) {
        part p = j->parts[r * j->cpr];
        for (uint64_t c = 1; c < j->cpr; c++) {
            part q = j->parts[r * j->cpr + c];
            p.s += q.s;
            if (j->op == BITNET_RED_MIN ? better_min(q.m, p.m) : better_max(q.m, p.m)) {
                p.m = q.m;
                p.i = q.i;
            }
        }
        put(j->op, j->y, j->idx, r, p.s, p.m, p.i, j->len);
    }
    free(j->parts);
}

/* [outer, len, inner] reduced over len (e.g. axis 0 of a matrix): the input
 * is streamed in memory order.  An item is (outer, column block of up to
 * COL_W columns, row block of COL_H rows); it walks its rows one after the
 * other, adding each row's columns into COL_W running results, so every
 * item reads long contiguous runs.  The row blocks' results are then
 * combined in row-block order.  COL_W and COL_H depend only on the shape,
 * so the result is the same for every thread count. */
#define COL_W 4096           /* columns per item: whole rows of most matrices; 32 KiB of double sums */
#define COL_ELEMS (1u << 20)  /* about this many elements (4 MiB) per item */

typedef struct {
    bitnet_reduce_op op;
    const float *x;
    float *y;
    int64_t *idx;
    uint64_t len, inner, w, h, ncb, nrb; /* column-block width, row-block height, counts */
    double *ps;                          /* partials (nrb > 1): item it at it * w */
    float *pm;
    int64_t *pi;
    bn_simd simd;
} col_job;

/* Rows [r0, r1) of column block [c0, c0 + w) of outer slice o, into s / m, mi. */
static void col_block(const col_job *j, uint64_t o, uint64_t c0, uint64_t w, uint64_t r0, uint64_t r1, double *s,
                      float *m, int64_t *mi)
{
    const float *x = j->x + o * j->len * j->inner + c0;
    const uint64_t inner = j->inner;
    if (j->op == BITNET_RED_SUM || j->op == BITNET_RED_MEAN) {
        for (uint64_t c = 0; c < w; c++) s[c] = 0;
#if defined(__x86_64__)
        if (j->simd >= BN_SIMD_AVX2) {
            (j->simd >= BN_SIMD_AVX512 ? bn_colsum_rows_avx512 : bn_colsum_rows_avx2)(s, x + r0 * inner, inner, r1 - r0, w);
            return;
        }
#endif
        for (uint64_t l = r0; l < r1; l++) {
            const float *xr = x + l * inner;
            for (uint64_t c = 0; c < w; c++) s[c] += xr[c];
        }
        return;
    }
    const int is_min = j->op == BITNET_RED_MIN;
    for (uint64_t c = 0; c < w; c++) { m[c] = x[r0 * inner + c]; mi[c] = (int64_t)r0; }
#if defined(__x86_64__)
    if (j->simd >= BN_SIMD_AVX512) {
        for (uint64_t l = r0 + 1; l < r1; l++) bn_colbest_row_avx512(is_min, m, mi, x + l * inner, w, (int64_t)l);
        return;
    }
#endif
    for (uint64_t l = r0 + 1; l < r1; l++) {
        const float *xr = x + l * inner;
        for (uint64_t c = 0; c < w; c++)
            if (is_min ? better_min(xr[c], m[c]) : better_max(xr[c], m[c])) {
                m[c] = xr[c];
                mi[c] = (int64_t)l;
            }
    }
}

/* item = ((o * ncb) + cb) * nrb + rb */
static void cols_range(void *arg, uint64_t begin, uint64_t end)
{
    const col_job *j = arg;
    double s[COL_W];
    float m[COL_W];
    int64_t mi[COL_W];
    for (uint64_t it = begin; it < end; it++) {
        uint64_t rb = it % j->nrb, cb = it / j->nrb % j->ncb, o = it / j->nrb / j->ncb;
        uint64_t c0 = cb * j->w, w = j->inner - c0 < j->w ? j->inner - c0 : j->w;
        uint64_t r0 = rb * j->h, r1 = j->len - r0 < j->h ? j->len : r0 + j->h;
        if (j->nrb > 1) {
            col_block(j, o, c0, w, r0, r1, j->ps ? j->ps + it * j->w : NULL, j->pm ? j->pm + it * j->w : NULL,
                      j->pi ? j->pi + it * j->w : NULL);
            continue;
        }
        col_block(j, o, c0, w, r0, r1, s, m, mi);
        for (uint64_t c = 0; c < w; c++) put(j->op, j->y, j->idx, o * j->inner + c0 + c, s[c], m[c], mi[c], j->len);
    }
}

/* item = o * ncb + cb: its nrb partials in row-block order */
static void cols_combine(void *arg, uint64_t begin, uint64_t end)
{
    const col_job *j = arg;
    const int sum = j->op == BITNET_RED_SUM || j->op == BITNET_RED_MEAN, is_min = j->op == BITNET_RED_MIN;
    for (uint64_t it = begin; it < end; it++) {
        uint64_t cb = it % j->ncb, o = it / j->ncb, c0 = cb * j->w;
        uint64_t w = j->inner - c0 < j->w ? j->inner - c0 : j->w, p0 = it * j->nrb * j->w;
        for (uint64_t c = 0; c < w; c++) {
            double s = 0;
            float m = 0;
            int64_t mi = 0;
            if (sum) {
                for (uint64_t rb = 0; rb < j->nrb; rb++) s += j->ps[p0 + rb * j->w + c];
            } else {
                m = j->pm[p0 + c];
                mi = j->pi[p0 + c];
                for (uint64_t rb = 1; rb < j->nrb; rb++) {
                    float v = j->pm[p0 + rb * j->w + c];
                    if (is_min ? better_min(v, m) : better_max(v, m)) {
                        m = v;
                        mi = j->pi[p0 + rb * j->w + c];
                    }
                }
            }
            put(j->op, j->y, j->idx, o * j->inner + c0 + c, s, m, mi, j->len);
        }
    }
}

static void cols_reduce(bn_cpu *cpu, bitnet_reduce_op op, const float *x, uint64_t outer, uint64_t len, uint64_t inner,
                        float *y, int64_t *idx, bitnet_status *st)
{
    col_job j = {op, x, y, idx, len, inner, 0, 0, 0, 0, NULL, NULL, NULL, cpu->simd};
    j.w = inner < COL_W ? inner : COL_W;
    j.ncb = (inner + j.w - 1) / j.w;
    j.h = COL_ELEMS / j.w;
    if (j.h > len) j.h = len;
    j.nrb = (len + j.h - 1) / j.h;
    uint64_t items = outer * j.ncb * j.nrb;
    if (j.nrb > 1) {
        const int sum = op == BITNET_RED_SUM || op == BITNET_RED_MEAN;
        uint64_t np;
        if (bn_mul_u64(items, j.w, &np) || np > SIZE_MAX / 16) {
            *st = bn_fail(BITNET_E_NOMEM, "reduce: too many partial results");
            return;
        }
        if (sum) j.ps = malloc(np * sizeof *j.ps);
        else { j.pm = malloc(np * sizeof *j.pm); j.pi = malloc(np * sizeof *j.pi); }
        if (sum ? !j.ps : !j.pm || !j.pi) {
            *st = bn_fail(BITNET_E_NOMEM, "reduce: no memory for %llu partial results", (unsigned long long)np);
            free(j.ps); free(j.pm); free(j.pi);
            return;
        }
    }
    bn_parallel_for(cpu->pool, items, 1, cols_range, &j);
    if (j.nrb > 1) bn_parallel_for(cpu->pool, outer * j.ncb, 1, cols_combine, &j);
    free(j.ps);
    free(j.pm);
    free(j.pi);
}

bitnet_status bn_cpu_reduce(void *ctx, bitnet_reduce_op op, const float *x, const bitnet_shape *s,
                            uint32_t axes_mask, float *y, int64_t *idx)
{
    bn_cpu *cpu = ctx;
    bn_rplan p;
    bitnet_status st = BITNET_OK;
    red_job j = {op, x, y, idx, 0, 0, NULL, cpu->simd};
    bn_reduce_plan(s, axes_mask, &p);
    if (p.n_out == 0) return BITNET_OK;
    if (p.n_red == 0) { /* only sum/mean get here */
        for (uint64_t o = 0; o < p.n_out; o++) put(op, y, idx, o, 0, 0, 0, 0);
        return BITNET_OK;
    }
    /* merged dims alternate kept/reduced */
    if (p.rank <= 1 || (p.rank == 2 && p.red[1])) {
        /* [reduced], [kept, reduced] or nothing reduced (rows of one): rows */
        j.len = p.rank && p.red[p.rank - 1] ? p.dims[p.rank - 1] : 1;
        rows_reduce(cpu, &j, p.n_out, &st);
    } else if (p.rank <= 3 && (p.rank == 2 ? p.red[0] : p.red[1])) {
        /* [outer?, len, inner] with len reduced */
        cols_reduce(cpu, op, x, p.rank == 3 ? p.dims[0] : 1, p.dims[p.rank - 2], p.dims[p.rank - 1], y, idx, &st);
    } else {
        /* move the reduced axes last, then rows (never argmax: one axis) */
        bitnet_shape ps = {p.rank, {0}};
        uint32_t perm[BITNET_MAX_RANK], np = 0;
        for (uint32_t i = 0; i < p.rank; i++)
            if (!p.red[i]) perm[np++] = i;
        for (uint32_t i = 0; i < p.rank; i++)
            if (p.red[i]) perm[np++] = i;
        for (uint32_t i = 0; i < p.rank; i++) ps.dims[i] = p.dims[i];
        float *t = malloc(p.n_out * p.n_red * sizeof *t);
        if (!t) return bn_fail(BITNET_E_NOMEM, "reduce: no memory for the transposed copy");
        if ((st = bn_cpu_permute_plain(cpu, x, &ps, perm, t)) == BITNET_OK) {
            j.x = t;
            j.len = p.n_red;
            rows_reduce(cpu, &j, p.n_out, &st);
        }
        free(t);
    }
    if (st == BITNET_OK && bn_test_perturb("reduce")) {
        if (y) bn_perturb_one(&y[p.n_out / 2]);
        if (idx) idx[p.n_out / 2] ^= 1;
    }
    return st;
}
