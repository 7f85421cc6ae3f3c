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

#include "reduce.h"

void bn_colsum_rows_avx512(double *acc, const float *x, uint64_t stride, uint64_t rows, uint64_t w)
{
    uint64_t l = 0;
    /* four rows at a time: a quarter of the accumulator traffic */
    for (; l + 4 <= rows; l += 4) {
        const float *x0 = x + l * stride, *x1 = x0 + stride, *x2 = x1 + stride, *x3 = x2 + stride;
        uint64_t c = 0;
        for (; c + 8 <= w; c += 8) {
            __m512d a = _mm512_add_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x0 + c)), _mm512_cvtps_pd(_mm256_loadu_ps(x1 + c)));
            __m512d b = _mm512_add_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x2 + c)), _mm512_cvtps_pd(_mm256_loadu_ps(x3 + c)));
            _mm512_storeu_pd(acc + c, _mm512_add_pd(_mm512_loadu_pd(acc + c), _mm512_add_pd(a, b)));
        }
        for (; c < w; c++) acc[c] += ((double)x0[c] + x1[c]) + ((double)x2[c] + x3[c]);
    }
    for (; l < rows; l++) {
        const float *xr = x + l * stride;
        uint64_t c = 0;
        for (; c + 8 <= w; c += 8)
            _mm512_storeu_pd(acc + c, _mm512_add_pd(_mm512_loadu_pd(acc + c), _mm512_cvtps_pd(_mm256_loadu_ps(xr + c))));
        for (; c < w; c++) acc[c] += xr[c];
    }
}

void bn_colbest_row_avx512(int is_min, float *m, int64_t *mi, const float *x, uint64_t w, int64_t l)
{
    const __m512i vl = _mm512_set1_epi64(l);
    uint64_t c = 0;
    for (; c + 16 <= w; c += 16) {
        __m512 v = _mm512_loadu_ps(x + c), b = _mm512_loadu_ps(m + c);
        __mmask16 k = is_min ? _mm512_cmp_ps_mask(v, b, _CMP_LT_OQ) : _mm512_cmp_ps_mask(v, b, _CMP_GT_OQ);
        k |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(b, b, _CMP_ORD_Q);
        if (k) {
            _mm512_mask_storeu_ps(m + c, k, v);
            _mm512_mask_storeu_epi64(mi + c, (__mmask8)k, vl);
            _mm512_mask_storeu_epi64(mi + c + 8, (__mmask8)(k >> 8), vl);
        }
    }
    for (; c < w; c++) {
        float v = x[c], b = m[c];
        if ((is_min ? v < b : v > b) || (v != v && b == b)) {
            m[c] = v;
            mi[c] = l;
        }
    }
}
