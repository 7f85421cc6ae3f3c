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
