/*
 * reduce_avx2.c - the AVX2 inner loops of reductions (built with -mavx2):
 * a sum of f32 accumulated in double, four vector accumulators deep so that
 * it keeps up with memory.  Called from reduce.c when the CPU has AVX2.
 */
#include "../op_tensor.h"

#include <immintrin.h>

double bn_sum_f32_avx2(const float *x, uint64_t n)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v0)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1)));
        a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(v1)));
        a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(v1, 1)));
    }
    a0 = _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3));
    double t[4];
    _mm256_storeu_pd(t, a0);
    double s = (t[0] + t[1]) + (t[2] + t[3]);
    for (; i < n; i++) s += x[i];
    return s;
}

#include "reduce.h"

void bn_colsum_rows_avx2(double *acc, const float *x, uint64_t stride, uint64_t rows, uint64_t w)
{
    uint64_t l = 0;
    /* four rows at a time: a quarter of the accumulator traffic */
    for (; l + 4 <= rows; l += 4) {
        const float *x0 = x + l * stride, *x1 = x0 + stride, *x2 = x1 + stride, *x3 = x2 + stride;
        uint64_t c = 0;
        for (; c + 4 <= w; c += 4) {
            __m256d a = _mm256_add_pd(_mm256_cvtps_pd(_mm_loadu_ps(x0 + c)), _mm256_cvtps_pd(_mm_loadu_ps(x1 + c)));
            __m256d b = _mm256_add_pd(_mm256_cvtps_pd(_mm_loadu_ps(x2 + c)), _mm256_cvtps_pd(_mm_loadu_ps(x3 + c)));
            _mm256_storeu_pd(acc + c, _mm256_add_pd(_mm256_loadu_pd(acc + c), _mm256_add_pd(a, b)));
        }
        for (; c < w; c++) acc[c] += ((double)x0[c] + x1[c]) + ((double)x2[c] + x3[c]);
    }
    for (; l < rows; l++) {
        const float *xr = x + l * stride;
        uint64_t c = 0;
        for (; c + 4 <= w; c += 4)
            _mm256_storeu_pd(acc + c, _mm256_add_pd(_mm256_loadu_pd(acc + c), _mm256_cvtps_pd(_mm_loadu_ps(xr + c))));
        for (; c < w; c++) acc[c] += xr[c];
    }
}
