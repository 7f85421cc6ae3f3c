/*
 * softmax.c - softmax and log-softmax along one axis on the CPU, seen as
 * [outer, len, inner]: the scalar reference (double) and a multi-threaded
 * fast path (double exponentials and sums, f32 loads and stores).
 *
 * Both subtract the slice maximum first, so large values (1e30) do not
 * overflow.  A slice whose maximum is NaN, +Inf or -Inf (all -Inf) gives NaN
 * everywhere, as NumPy and PyTorch do; -Inf entries of other slices give 0
 * (log-softmax: -Inf).
 */
#include "cpu.h"
#include "../op_tensor.h"

#include <math.h>

/* NaN-propagating maximum. */
static inline double dmax(double a, double b) { return (a > b || a != a) ? a : b; }
static inline float fmax_nan(float a, float b) { return (a > b || a != a) ? a : b; }

void bn_softmax_ref_k(const float *x, uint64_t outer, uint64_t len, uint64_t inner, int log_, float *y)
{
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t i = 0; i < inner; i++) {
            const float *xs = x + o * len * inner + i;
            float *ys = y + o * len * inner + i;
            double m = -INFINITY, s = 0;
            for (uint64_t l = 0; l < len; l++) m = dmax(m, xs[l * inner]);
            if (!isfinite(m)) {
                for (uint64_t l = 0; l < len; l++) ys[l * inner] = NAN;
                continue;
            }
            for (uint64_t l = 0; l < len; l++) s += exp((double)xs[l * inner] - m);
            double ls = log(s);
            for (uint64_t l = 0; l < len; l++) {
                double d = (double)xs[l * inner] - m;
                ys[l * inner] = (float)(log_ ? d - ls : exp(d) / s);
            }
        }
}

typedef struct {
    const float *x;
    float *y;
    uint64_t len, inner, chunks;
    int log;
} sm_job;

#define SM_CHUNK 256 /* columns of an inner > 1 slab handled together */

/* Rows (inner == 1): one row per item. */
static void sm_rows(void *arg, uint64_t begin, uint64_t end)
{
    const sm_job *j = arg;
    const uint64_t len = j->len;
    for (uint64_t r = begin; r < end; r++) {
        const float *restrict x = j->x + r * len;
        float *restrict y = j->y + r * len;
        float m = -INFINITY;
        for (uint64_t l = 0; l < len; l++) m = fmax_nan(m, x[l]);
        if (!isfinite(m)) {
            for (uint64_t l = 0; l < len; l++) y[l] = NAN;
            continue;
        }
        double s = 0;
        /* exp of the double difference: x - m rounded to f32 would cost
         * |x - m| * 2^-24 of relative error */
        if (j->log) {
            for (uint64_t l = 0; l < len; l++) s += exp((double)x[l] - m);
            const double ls = log(s);
            for (uint64_t l = 0; l < len; l++) y[l] = (float)((double)x[l] - m - ls);
        } else {
            for (uint64_t l = 0; l < len; l++) {
                double e = exp((double)x[l] - m);
                y[l] = (float)e;
                s += e;
            }
            const double inv = 1.0 / s;
            for (uint64_t l = 0; l < len; l++) y[l] = (float)((double)y[l] * inv);
        }
    }
}

/* Strided slices (inner > 1): item = (outer, chunk of SM_CHUNK columns). */
static void sm_cols(void *arg, uint64_t begin, uint64_t end)
{
    const sm_job *j = arg;
    const uint64_t len = j->len, inner = j->inner;
    float m[SM_CHUNK];
    double s[SM_CHUNK];
    for (uint64_t it = begin; it < end; it++) {
        uint64_t o = it / j->chunks, c0 = (it % j->chunks) * SM_CHUNK;
        uint64_t w = inner - c0 < SM_CHUNK ? inner - c0 : SM_CHUNK;
        const float *x = j->x + o * len * inner + c0;
        float *y = j->y + o * len * inner + c0;
        for (uint64_t c = 0; c < w; c++) { m[c] = -INFINITY; s[c] = 0; }
        for (uint64_t l = 0; l < len; l++)
            for (uint64_t c = 0; c < w; c++) m[c] = fmax_nan(m[c], x[l * inner + c]);
        for (uint64_t l = 0; l < len; l++)
            for (uint64_t c = 0; c < w; c++) s[c] += exp((double)x[l * inner + c] - m[c]);
        if (j->log)
            for (uint64_t c = 0; c < w; c++) s[c] = log(s[c]);
        for (uint64_t l = 0; l < len; l++)
            for (uint64_t c = 0; c < w; c++) {
                float v = x[l * inner + c];
                if (!isfinite(m[c])) y[l * inner + c] = NAN;
                else if (j->log) y[l * inner + c] = (float)((double)v - m[c] - s[c]);
                else y[l * inner + c] = (float)(exp((double)v - m[c]) / s[c]);
            }
    }
}

bitnet_status bn_cpu_softmax(void *ctx, const float *x, uint64_t outer, uint64_t len, uint64_t inner, int log_,
                             float *y)
{
    bn_cpu *cpu = ctx;
    sm_job j = {x, y, len, inner, (inner + SM_CHUNK - 1) / SM_CHUNK, log_};
    uint64_t n = outer * len * inner;
    if (n == 0) return BITNET_OK;
    if (inner == 1) {
        uint64_t grain = len >= 4096 ? 1 : 4096 / len;
        bn_parallel_for(cpu->pool, outer, grain, sm_rows, &j);
    } else {
        bn_parallel_for(cpu->pool, outer * j.chunks, 1, sm_cols, &j);
    }
    if (bn_test_perturb("softmax")) bn_perturb_one(&y[n / 2]);
    return BITNET_OK;
}
