/*
 * norm.c - LayerNorm and RMSNorm over the last axis on the CPU: the scalar
 * reference and a multi-threaded fast path.  Both compute in double (two
 * passes: mean, then the centred variance; no E[x^2]-E[x]^2 cancellation)
 * and round once, so they sit within an ulp or two of float64.
 *   layernorm: y = (x - mean) / sqrt(var + eps) * w + b   (var biased, /n)
 *   rmsnorm:   y = x / sqrt(mean(x^2) + eps) * w
 * NaN or Inf in a row makes the whole row NaN (through the mean).
 */
#include "cpu.h"
#include "../op_tensor.h"

#include <math.h>
#include <string.h>

void bn_norm_ref_k(const float *x, uint64_t rows, uint64_t cols, const float *weight, const float *bias, float eps,
                   int rms, float *y)
{
    for (uint64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double mean = 0, var = 0;
        if (!rms) {
            for (uint64_t c = 0; c < cols; c++) mean += xr[c];
            mean /= (double)cols;
        }
        for (uint64_t c = 0; c < cols; c++) var += ((double)xr[c] - mean) * ((double)xr[c] - mean);
        var /= (double)cols;
        double rstd = 1.0 / sqrt(var + (double)eps);
        for (uint64_t c = 0; c < cols; c++) {
            double v = ((double)xr[c] - mean) * rstd;
            if (weight) v *= weight[c];
            if (bias) v += bias[c];
            y[r * cols + c] = (float)v;
        }
    }
}

/* 16-byte vectors (one SSE register each): wider generic vectors compile
 * poorly without AVX. */
typedef double v2d __attribute__((vector_size(16)));
typedef float v4f __attribute__((vector_size(16)));

typedef struct {
    const float *x, *w, *b;
    float *y;
    uint64_t cols;
    double eps;
    int rms;
} norm_job;

static void norm_rows(void *arg, uint64_t begin, uint64_t end)
{
    const norm_job *j = arg;
    const uint64_t n = j->cols;
    for (uint64_t r = begin; r < end; r++) {
        const float *restrict x = j->x + r * n;
        float *restrict y = j->y + r * n;
        double mean = 0;
        uint64_t c;
        v4f f;
        if (!j->rms) {
            v2d a0 = {0, 0}, a1 = a0;
            for (c = 0; c + 4 <= n; c += 4) {
                memcpy(&f, x + c, sizeof f);
                a0 += (v2d){f[0], f[1]};
                a1 += (v2d){f[2], f[3]};
            }
            a0 += a1;
            double s = a0[0] + a0[1];
            for (; c < n; c++) s += x[c];
            mean = s / (double)n;
        }
        const v2d mv = {mean, mean};
        v2d q0 = {0, 0}, q1 = q0;
        for (c = 0; c + 4 <= n; c += 4) {
            memcpy(&f, x + c, sizeof f);
            v2d d0 = (v2d){f[0], f[1]} - mv, d1 = (v2d){f[2], f[3]} - mv;
            q0 += d0 * d0;
            q1 += d1 * d1;
        }
        q0 += q1;
        double var = q0[0] + q0[1];
        for (; c < n; c++) var += ((double)x[c] - mean) * ((double)x[c] - mean);
        var /= (double)n;
        const double rstd = 1.0 / sqrt(var + j->eps);
        const v2d rv = {rstd, rstd};
        for (c = 0; c + 4 <= n; c += 4) {
            memcpy(&f, x + c, sizeof f);
            v2d lo = ((v2d){f[0], f[1]} - mv) * rv, hi = ((v2d){f[2], f[3]} - mv) * rv;
            if (j->w) {
                memcpy(&f, j->w + c, sizeof f);
                lo *= (v2d){f[0], f[1]};
                hi *= (v2d){f[2], f[3]};
            }
            if (j->b) {
                memcpy(&f, j->b + c, sizeof f);
                lo += (v2d){f[0], f[1]};
                hi += (v2d){f[2], f[3]};
            }
            f = (v4f){(float)lo[0], (float)lo[1], (float)hi[0], (float)hi[1]};
            memcpy(y + c, &f, sizeof f);
        }
        for (; c < n; c++) {
            double v = ((double)x[c] - mean) * rstd;
            if (j->w) v *= j->w[c];
            if (j->b) v += j->b[c];
            y[c] = (float)v;
        }
    }
}

void bn_cpu_rmsnorm_row(const float *x, uint64_t cols, const float *w, float eps, float *y)
{
    norm_job j = {x, w, NULL, y, cols, eps, 1};
    norm_rows(&j, 0, 1);
}

bitnet_status bn_cpu_layernorm(void *ctx, const float *x, uint64_t rows, uint64_t cols, const float *weight,
                               const float *bias, float eps, int rms, float *y)
{
    bn_cpu *cpu = ctx;
    norm_job j = {x, weight, rms ? NULL : bias, y, cols, eps, rms};
    if (rows == 0 || cols == 0) return BITNET_OK;
    bn_parallel_for(cpu->pool, rows, cols >= 8192 ? 1 : 8192 / cols, norm_rows, &j);
    if (bn_test_perturb("layernorm")) bn_perturb_one(&y[rows * cols / 2]);
    return BITNET_OK;
}
