/*
 * quantize_cpu.c - the CPU backend's quantization ops: threads over rows or
 * row blocks, kernels picked by the SIMD level (quantize.h explains the
 * exact sums that make every split give the same bits).
 *
 *   row / group scales: each row is summed and packed while it is in cache
 *     (one pass over memory), rows in parallel;
 *   tensor scale, or rows longer than BIG_ROW: pass 1 sums fixed pieces of
 *     PIECE elements in parallel, the partial sums are merged exactly; pass
 *     2 quantizes and packs row blocks in parallel.
 */
#include "quantize.h"

#include <stdlib.h>

#define PIECE ((uint64_t)1 << 16)   /* elements per pass-1 task */
#define BIG_ROW ((uint64_t)1 << 18) /* longer rows (1 MiB) take the two-pass path */

/* ---- scalar kernels -------------------------------------------------------- */

void bn_qblocks_scalar(const float *w, uint64_t cols, uint64_t b0, uint64_t b1, const float *s, unsigned gshift,
                       uint8_t *t2)
{
    for (uint64_t b = b0; b < b1; b++) {
        uint8_t *out = t2 + b * BITNET_T2_BLOCK_BYTES;
        memset(out, 0, BITNET_T2_BLOCK_BYTES);
        for (unsigned k = 0; k < 4; k++) {
            uint64_t sb = 4 * b + k, c0 = 32 * sb;
            const float sc = s[bn_qscale_index(sb, gshift, cols)];
            for (unsigned j = 0; j < 32; j++) {
                unsigned code = 1;
                if (c0 + j < cols) {
                    const float p = w[c0 + j] * sc; /* rint(p) clamped to [-1, 1], without rint */
                    code = 1u + (p > 0.5f) - (p < -0.5f);
                }
                out[j] |= (uint8_t)(code << (2 * k));
            }
        }
    }
}

size_t bn_qacts_scalar(const float *x, size_t n, int8_t *q, float *s, int32_t *sum)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return i;
        float a = fabsf(x[i]);
        m = a > m ? a : m;
    }
    const float sc = bn_absmax_scale(m);
    *s = sc;
    int32_t tot = 0;
    for (size_t i = 0; i < n; i++) {
        float v = rintf(x[i] * sc);
        v = v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v;
        q[i] = (int8_t)v;
        tot += (int32_t)v;
    }
    if (sum) *sum = tot;
    return n;
}

static size_t absum_scalar(const float *w, size_t n, bn_xsum *acc) { return bn_absum(bn_xchunk_scalar, w, n, acc); }

static const bn_quant_kernels scalar_kernels = {"scalar", absum_scalar, bn_xchunk_scalar, bn_qblocks_scalar,
                                                bn_qacts_scalar};

const bn_quant_kernels *bn_quant_kernels_for(bn_simd simd)
{
#if defined(__x86_64__)
    if (simd >= BN_SIMD_AVX512) return &bn_quant_avx512;
    if (simd >= BN_SIMD_AVX2) return &bn_quant_avx2;
#else
    (void)simd;
#endif
    return &scalar_kernels;
}

static const bn_quant_kernels *cpu_kernels(const bn_cpu *c) { return bn_quant_kernels_for(c ? c->simd : BN_SIMD_SCALAR); }
static bn_pool *cpu_pool(const bn_cpu *c) { return c ? c->pool : NULL; }

/* The first failure among tasks: the lowest index wins, whatever the order. */
static void note_bad(uint64_t *bad, uint64_t i)
{
    uint64_t cur = __atomic_load_n(bad, __ATOMIC_RELAXED);
    while (i < cur && !__atomic_compare_exchange_n(bad, &cur, i, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* ---- weights: fused per-row path ------------------------------------------------- */

typedef struct {
    const bn_quant_kernels *k;
    const float *w;
    uint64_t rows, cols;
    bitnet_scale_kind kind;
    uint32_t group;
    uint8_t *t2;
    float *d;
    size_t rb;
    uint64_t bad;      /* lowest NaN/Inf index, or UINT64_MAX */
    int nomem;
    /* two-pass path */
    uint64_t slice, pieces; /* elements per slice, pieces per slice */
    bn_xsum *part;
    float *s;               /* 1/d per slice */
} qw_job;

static void qw_rows(void *vp, uint64_t r0, uint64_t r1)
{
    qw_job *j = vp;
    const uint64_t cols = j->cols;
    const uint64_t ng = j->kind == BITNET_SCALE_GROUP ? (cols + j->group - 1) / j->group : 1;
    float one;
    float *s = &one;
    if (ng > 1 && !(s = malloc(ng * sizeof *s))) {
        __atomic_store_n(&j->nomem, 1, __ATOMIC_RELAXED);
        return;
    }
    const unsigned gshift = bn_quant_gshift(j->kind, j->group);
    const uint64_t glen = j->kind == BITNET_SCALE_GROUP ? j->group : cols;
    for (uint64_t r = r0; r < r1; r++) {
        const float *wr = j->w + r * cols;
        for (uint64_t g = 0; g < ng; g++) {
            uint64_t c0 = g * glen, len = cols - c0 < glen ? cols - c0 : glen;
            double sum;
            size_t at;
            if (len <= BN_XCHUNK) {
                at = bn_absum_small(j->k->xchunk, wr + c0, len, &sum);
            } else {
                bn_xsum acc;
                bn_xsum_zero(&acc);
                at = j->k->absum(wr + c0, len, &acc);
                sum = bn_xsum_to_double(&acc);
            }
            if (at < len) {
                note_bad(&j->bad, r * cols + c0 + at);
                goto out;
            }
            float dd = bn_absmean_scale(sum, len);
            j->d[j->kind == BITNET_SCALE_ROW ? r : r * ng + g] = dd;
            s[g] = 1.0f / dd;
        }
        j->k->qblocks(wr, cols, 0, (cols + BITNET_T2_BLOCK - 1) / BITNET_T2_BLOCK, s, gshift, j->t2 + r * j->rb);
    }
out:
    if (s != &one) free(s);
}

/* ---- weights: two-pass path --------------------------------------------------------- */

static void qw_pass1(void *vp, uint64_t t0, uint64_t t1)
{
    qw_job *j = vp;
    for (uint64_t t = t0; t < t1; t++) {
        uint64_t sl = t / j->pieces, pc = t % j->pieces;
        uint64_t b = pc * PIECE, e = b + PIECE < j->slice ? b + PIECE : j->slice;
        const float *base = j->w + sl * j->slice;
        bn_xsum_zero(&j->part[t]);
        size_t at = j->k->absum(base + b, (size_t)(e - b), &j->part[t]);
        if (at < e - b) note_bad(&j->bad, sl * j->slice + b + at);
    }
}

static void qw_pass2(void *vp, uint64_t u0, uint64_t u1)
{
    qw_job *j = vp;
    const uint64_t nb = (j->cols + BITNET_T2_BLOCK - 1) / BITNET_T2_BLOCK;
    while (u0 < u1) {
        uint64_t r = u0 / nb, b = u0 % nb, e = nb < b + (u1 - u0) ? nb : b + (u1 - u0);
        const float *s = j->kind == BITNET_SCALE_TENSOR ? &j->s[0] : &j->s[r];
        j->k->qblocks(j->w + r * j->cols, j->cols, b, e, s, 63, j->t2 + r * j->rb);
        u0 += e - b;
    }
}

static bitnet_status qw_two_pass(bn_cpu *c, qw_job *j)
{
    uint64_t nsl = j->kind == BITNET_SCALE_TENSOR ? 1 : j->rows;
    j->slice = j->kind == BITNET_SCALE_TENSOR ? j->rows * j->cols : j->cols;
    j->pieces = (j->slice + PIECE - 1) / PIECE;
    if (j->pieces == 0) j->pieces = 1;
    uint64_t tasks = nsl * j->pieces;
    j->part = malloc(tasks * sizeof *j->part);
    j->s = malloc(nsl * sizeof *j->s);
    bitnet_status st = BITNET_OK;
    if (!j->part || !j->s) {
        st = bn_fail(BITNET_E_NOMEM, "quantize_weights: out of memory");
        goto out;
    }
    bn_parallel_for(cpu_pool(c), tasks, 1, qw_pass1, j);
    if (j->bad != UINT64_MAX) goto out;
    for (uint64_t sl = 0; sl < nsl; sl++) {
        bn_xsum *acc = &j->part[sl * j->pieces];
        for (uint64_t p = 1; p < j->pieces; p++) bn_xsum_merge(acc, &j->part[sl * j->pieces + p]);
        j->d[sl] = bn_absmean_scale(bn_xsum_to_double(acc), j->slice);
        j->s[sl] = 1.0f / j->d[sl];
    }
    const uint64_t nb = (j->cols + BITNET_T2_BLOCK - 1) / BITNET_T2_BLOCK;
    bn_parallel_for(cpu_pool(c), j->rows * nb, PIECE / BITNET_T2_BLOCK, qw_pass2, j);
out:
    free(j->part);
    free(j->s);
    return st;
}

bitnet_status bn_cpu_quantize_weights(void *ctx, const float *w, uint64_t rows, uint64_t cols, bitnet_scale_kind kind,
                                      uint32_t group, uint8_t *out_t2, float *d)
{
    bn_cpu *c = ctx;
    qw_job j;
    memset(&j, 0, sizeof j);
    j.k = cpu_kernels(c);
    j.w = w;
    j.rows = rows;
    j.cols = cols;
    j.kind = kind;
    j.group = group;
    j.t2 = out_t2;
    j.d = d;
    j.rb = bitnet_t2_row_bytes(cols);
    j.bad = UINT64_MAX;
    bitnet_status st = BITNET_OK;
    if (rows == 0 || cols == 0) {
        /* No elements: every scale is the floor; rows of zero columns have no bytes. */
        uint64_t nsc = kind == BITNET_SCALE_TENSOR ? 1 : kind == BITNET_SCALE_ROW ? rows : 0;
        for (uint64_t i = 0; i < nsc; i++) d[i] = 1e-5f;
        return BITNET_OK;
    }
    if (kind == BITNET_SCALE_TENSOR || (kind == BITNET_SCALE_ROW && cols > BIG_ROW)) {
        st = qw_two_pass(c, &j);
    } else {
        uint64_t grain = PIECE / cols ? PIECE / cols : 1;
        bn_parallel_for(cpu_pool(c), rows, grain, qw_rows, &j);
        if (j.nomem) st = bn_fail(BITNET_E_NOMEM, "quantize_weights: out of memory");
    }
    if (st) return st;
    if (j.bad != UINT64_MAX) return bn_quant_nonfinite("quantize_weights", w, cols, j.bad);
    if (bn_test_perturb("quantize_weights")) out_t2[0] ^= 0x01; /* code 1 <-> 0, or 2 <-> 3 */
    return BITNET_OK;
}

/* ---- activations -------------------------------------------------------------------- */

typedef struct {
    const bn_quant_kernels *k;
    const float *x;
    uint64_t cols;
    int8_t *q;
    float *s;
    uint64_t bad;
} qa_job;

static void qa_rows(void *vp, uint64_t r0, uint64_t r1)
{
    qa_job *j = vp;
    for (uint64_t r = r0; r < r1; r++) {
        size_t at = j->k->qacts(j->x + r * j->cols, (size_t)j->cols, j->q + r * j->cols, &j->s[r], NULL);
        if (at < j->cols) {
            note_bad(&j->bad, r * j->cols + at);
            return;
        }
    }
}

bitnet_status bn_cpu_quantize_acts(void *ctx, const float *x, uint64_t rows, uint64_t cols, int8_t *q, float *s)
{
    bn_cpu *c = ctx;
    qa_job j = {cpu_kernels(c), x, cols, q, s, UINT64_MAX};
    uint64_t grain = cols && PIECE / cols ? PIECE / cols : 1;
    bn_parallel_for(cpu_pool(c), rows, grain, qa_rows, &j);
    if (j.bad != UINT64_MAX) return bn_quant_nonfinite("quantize_acts", x, cols, j.bad);
    if (rows && cols && bn_test_perturb("quantize_acts")) {
        uint64_t i = rows * cols / 2;
        q[i] = (int8_t)(q[i] == 0 ? 1 : q[i] == -128 ? 127 : -q[i]);
    }
    return BITNET_OK;
}

/* ---- dequantization ------------------------------------------------------------------- */

typedef struct {
    const uint8_t *t2;
    const int8_t *q;
    uint64_t cols;
    bitnet_scale_kind kind;
    uint32_t group;
    const float *sc;
    float *out;
    size_t rb;
    uint64_t bad;
} dq_job;

static void dqw_rows(void *vp, uint64_t r0, uint64_t r1)
{
    dq_job *j = vp;
    const uint64_t cols = j->cols, ng = j->kind == BITNET_SCALE_GROUP ? (cols + j->group - 1) / j->group : 1;
    const float sign[4] = {-1.0f, 0.0f, 1.0f, 0.0f};
    for (uint64_t r = r0; r < r1; r++) {
        const uint8_t *row = j->t2 + r * j->rb;
        float *o = j->out + r * cols;
        const float *d = j->kind == BITNET_SCALE_TENSOR ? j->sc : j->kind == BITNET_SCALE_ROW ? &j->sc[r] : &j->sc[r * ng];
        for (uint64_t b = 0; b * BITNET_T2_BLOCK < cols; b++) {
            const uint8_t *blk = row + b * BITNET_T2_BLOCK_BYTES;
            for (unsigned k = 0; k < 4; k++) {
                uint64_t c0 = b * BITNET_T2_BLOCK + 32 * k;
                if (c0 >= cols) break;
                const float dd = d[j->kind == BITNET_SCALE_GROUP ? c0 / j->group : 0];
                unsigned n = cols - c0 < 32 ? (unsigned)(cols - c0) : 32, any3 = 0;
                for (unsigned i = 0; i < n; i++) {
                    unsigned code = (blk[i] >> (2 * k)) & 3;
                    any3 |= code == 3;
                    o[c0 + i] = sign[code] * dd;
                }
                if (any3) {
                    for (unsigned i = 0; i < n; i++)
                        if (((blk[i] >> (2 * k)) & 3) == 3) {
                            note_bad(&j->bad, r * cols + c0 + i);
                            return;
                        }
                }
            }
        }
    }
}

bitnet_status bn_cpu_dequantize_weights(void *ctx, const uint8_t *t2, uint64_t rows, uint64_t cols,
                                        bitnet_scale_kind kind, uint32_t group, const float *d, float *w)
{
    bn_cpu *c = ctx;
    dq_job j = {t2, NULL, cols, kind, group, d, w, bitnet_t2_row_bytes(cols), UINT64_MAX};
    uint64_t grain = cols && PIECE / cols ? PIECE / cols : 1;
    bn_parallel_for(cpu_pool(c), rows, grain, dqw_rows, &j);
    if (j.bad != UINT64_MAX)
        return bn_fail(BITNET_E_FORMAT, "dequantize_weights: invalid code 3 at row %llu, column %llu",
                       (unsigned long long)(j.bad / cols), (unsigned long long)(j.bad % cols));
    if (rows && cols && bn_test_perturb("dequantize_weights")) {
        uint64_t i = rows * cols / 2;
        w[i] = w[i] != 0.0f ? -3.0f * w[i] : 1.0f;
    }
    return BITNET_OK;
}

static void dqa_rows(void *vp, uint64_t r0, uint64_t r1)
{
    dq_job *j = vp;
    for (uint64_t r = r0; r < r1; r++) {
        const int8_t *q = j->q + r * j->cols;
        float *o = j->out + r * j->cols;
        const float s = j->sc[r];
        for (uint64_t c = 0; c < j->cols; c++) o[c] = (float)q[c] / s; /* vectorised by the compiler */
    }
}

bitnet_status bn_cpu_dequantize_acts(void *ctx, const int8_t *q, uint64_t rows, uint64_t cols, const float *s, float *x)
{
    bn_cpu *c = ctx;
    dq_job j = {NULL, q, cols, BITNET_SCALE_ROW, 0, s, x, 0, UINT64_MAX};
    uint64_t grain = cols && PIECE / cols ? PIECE / cols : 1;
    bn_parallel_for(cpu_pool(c), rows, grain, dqa_rows, &j);
    if (rows && cols && bn_test_perturb("dequantize_acts")) {
        uint64_t i = rows * cols / 2;
        x[i] = x[i] != 0.0f ? -3.0f * x[i] : 1.0f;
    }
    return BITNET_OK;
}
