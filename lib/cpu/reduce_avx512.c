/*
 * reduce_avx512.c - the AVX-512 inner loop of sums (built with -mavx512f
 * -mavx512dq): f32 widened to double eight at a time, four accumulators.
 * Called from reduce.c when the CPU has AVX-512.
 */
#include "../op_tensor.h"

#include <immintrin.h>

double bn_sum_f32_avx512(const float *x, uint64_t n)
{
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    uint64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(v0)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v0, 1)));
        a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(_mm512_castps512_ps256(v1)));
        a3 = _mm512_add_pd(a3, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v1, 1)));
    }
    double s = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
    for (; i < n; i++) s += x[i];
    return s;
}
