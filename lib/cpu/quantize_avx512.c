/*
 * quantize_avx512.c - AVX-512 (F, BW, VL, DQ) kernels of the quantization
 * family; the same arithmetic as the scalar kernels, 16 lanes at a time.
 */
#include "quantize.h"

#include <immintrin.h>

static int xchunk_avx512(const float *w, size_t n, uint64_t *sum, unsigned *shift)
{
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1);
    __m512i vmax = _mm512_setzero_si512(), vmin = _mm512_set1_epi32(-1);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_and_si512(_mm512_loadu_si512(w + i), absmask);
        vmax = _mm512_max_epi32(vmax, u);
        vmin = _mm512_min_epu32(vmin, _mm512_sub_epi32(u, one)); /* zero wraps: ignored */
    }
    if (i < n) { /* the tail under a mask; masked-off lanes keep the neutral values */
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        __m512i u = _mm512_and_si512(_mm512_maskz_loadu_epi32(k, w + i), absmask);
        vmax = _mm512_mask_max_epi32(vmax, k, vmax, u);
        vmin = _mm512_mask_min_epu32(vmin, k, vmin, _mm512_sub_epi32(u, one));
    }
    uint32_t maxb = (uint32_t)_mm512_reduce_max_epi32(vmax), minm1 = _mm512_reduce_min_epu32(vmin);
    uint32_t emin;
    const int r = bn_xchunk_range(maxb, minm1, sum, shift, &emin);
    if (r >= 0) return r;
    const __m512i vemin = _mm512_set1_epi32((int)emin), mant = _mm512_set1_epi32(0x7fffff),
                  hidden = _mm512_set1_epi32(0x800000);
    __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
    for (i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512i u = _mm512_and_si512(_mm512_maskz_loadu_epi32(k, w + i), absmask); /* off lanes: 0 */
        __m512i m = _mm512_or_si512(_mm512_and_si512(u, mant), hidden);
        __m512i c = _mm512_sub_epi32(_mm512_srli_epi32(u, 23), vemin); /* zero: negative, shifts out */
        acc0 = _mm512_add_epi64(acc0, _mm512_sllv_epi64(_mm512_cvtepu32_epi64(_mm512_castsi512_si256(m)),
                                                        _mm512_cvtepu32_epi64(_mm512_castsi512_si256(c))));
        acc1 = _mm512_add_epi64(acc1, _mm512_sllv_epi64(_mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(m, 1)),
                                                        _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(c, 1))));
    }
    *sum = (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(acc0, acc1));
    *shift = emin - 1;
    return 0;
}

/* One pass per chunk: the exponent range and a double sum, exact when the
 * range is narrow (bn_xchunk_double); other chunks take xchunk_avx512. */
static size_t absum_avx512(const float *w, size_t n, bn_xsum *acc)
{
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1);
    for (size_t c = 0; c < n; c += BN_DCHUNK) {
        const size_t len = n - c < BN_DCHUNK ? n - c : BN_DCHUNK;
        const float *p = w + c;
        __m512i vmax = _mm512_setzero_si512(), vmin = _mm512_set1_epi32(-1);
        __m512d d0 = _mm512_setzero_pd(), d1 = d0, d2 = d0, d3 = d0;
        size_t i = 0;
        for (; i + 32 <= len; i += 32) {
            /* far prefetch: keeps more misses in flight than the ALU-heavy loop lets the core find */
            _mm_prefetch((const char *)(p + i + BN_PREFETCH), _MM_HINT_T0);
            _mm_prefetch((const char *)(p + i + BN_PREFETCH + 16), _MM_HINT_T0);
            __m512i u = _mm512_and_si512(_mm512_loadu_si512(p + i), absmask);
            __m512i v = _mm512_and_si512(_mm512_loadu_si512(p + i + 16), absmask);
            vmax = _mm512_max_epu32(vmax, _mm512_max_epu32(u, v));
            vmin = _mm512_min_epu32(vmin, _mm512_min_epu32(_mm512_sub_epi32(u, one), _mm512_sub_epi32(v, one)));
            d0 = _mm512_add_pd(d0, _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_castsi512_si256(u))));
            d1 = _mm512_add_pd(d1, _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(u, 1))));
            d2 = _mm512_add_pd(d2, _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_castsi512_si256(v))));
            d3 = _mm512_add_pd(d3, _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(v, 1))));
        }
        for (; i < len; i += 16) { /* masked-off lanes load 0: neutral everywhere */
            __mmask16 k = len - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - i)) - 1);
            __m512i u = _mm512_and_si512(_mm512_maskz_loadu_epi32(k, p + i), absmask);
            vmax = _mm512_max_epu32(vmax, u);
            vmin = _mm512_mask_min_epu32(vmin, k, vmin, _mm512_sub_epi32(u, one));
            d0 = _mm512_add_pd(d0, _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_castsi512_si256(u))));
            d1 = _mm512_add_pd(d1, _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(u, 1))));
        }
        const double dsum = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(d0, d1), _mm512_add_pd(d2, d3)));
        if (bn_xchunk_double(dsum, (uint32_t)_mm512_reduce_max_epu32(vmax), _mm512_reduce_min_epu32(vmin), acc) == 0)
            continue;
        size_t at = bn_absum(xchunk_avx512, p, len, acc);
        if (at < len) return c + at;
    }
    return n;
}

/* Per sub-block k, the comparisons give 32-bit masks over bytes j = 0..31;
 * code bits are added to the 32 output bytes under those masks
 * (code 2 where x > .5, code 1 where -.5 <= x <= .5, 0 otherwise). */
static void qblocks_avx512(const float *w, uint64_t cols, uint64_t b0, uint64_t b1, const float *s, unsigned gshift,
                           uint8_t *t2)
{
    const __m512 half = _mm512_set1_ps(0.5f), mhalf = _mm512_set1_ps(-0.5f);
    const __m256i two[4] = {_mm256_set1_epi8(2), _mm256_set1_epi8(8), _mm256_set1_epi8(32), _mm256_set1_epi8((char)128)};
    const __m256i one[4] = {_mm256_set1_epi8(1), _mm256_set1_epi8(4), _mm256_set1_epi8(16), _mm256_set1_epi8(64)};
    float tmp[BITNET_T2_BLOCK];
    for (uint64_t b = b0; b < b1; b++) {
        const float *p = bn_qblock_src(w, cols, b, tmp);
        __m256i acc = _mm256_setzero_si256();
        for (unsigned k = 0; k < 8; k++) _mm_prefetch((const char *)(p + 16 * k + BN_PREFETCH), _MM_HINT_T0);
        for (unsigned k = 0; k < 4; k++) {
            const __m512 sc = _mm512_set1_ps(s[bn_qscale_index(4 * b + k, gshift, cols)]);
            const __m512 x0 = _mm512_mul_ps(_mm512_loadu_ps(p + 32 * k), sc);
            const __m512 x1 = _mm512_mul_ps(_mm512_loadu_ps(p + 32 * k + 16), sc);
            const __mmask32 gt = _mm512_kunpackw(_mm512_cmp_ps_mask(x1, half, _CMP_GT_OQ), _mm512_cmp_ps_mask(x0, half, _CMP_GT_OQ));
            const __mmask32 lt = _mm512_kunpackw(_mm512_cmp_ps_mask(x1, mhalf, _CMP_LT_OQ), _mm512_cmp_ps_mask(x0, mhalf, _CMP_LT_OQ));
            acc = _mm256_mask_add_epi8(acc, gt, acc, two[k]);
            acc = _mm256_mask_add_epi8(acc, (__mmask32)~(gt | lt), acc, one[k]);
        }
        _mm256_storeu_si256((__m256i *)(t2 + b * BITNET_T2_BLOCK_BYTES), acc);
    }
}

/* Both passes four vectors a step, full vectors first and the masked tail
 * after (2026-12-02, 2-vCPU Zen 5 VM under load, one thread, `bitnet-bench
 * --device cpu --threads 1 --op quantize_acts --shape 1x16384 --shape
 * 64x4096`, three alternating rounds, medians in us: with --llc 1 (in
 * cache) 3.7-4.1 / 54.9-62.5 against 4.2-5.2 / 74.4-78.7; rotated 7.5-8.3 /
 * 107.0-113.1 against 7.9-8.0 / 117.5-121.4). */
static size_t qacts_avx512(const float *x, size_t n, int8_t *q, float *s, int32_t *sum)
{
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
    __m512i m0 = _mm512_setzero_si512(), m1 = m0, m2 = m0, m3 = m0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) { /* four chains: the loads, not the max latency, set the pace */
        m0 = _mm512_max_epi32(m0, _mm512_and_si512(_mm512_loadu_si512(x + i), absmask));
        m1 = _mm512_max_epi32(m1, _mm512_and_si512(_mm512_loadu_si512(x + i + 16), absmask));
        m2 = _mm512_max_epi32(m2, _mm512_and_si512(_mm512_loadu_si512(x + i + 32), absmask));
        m3 = _mm512_max_epi32(m3, _mm512_and_si512(_mm512_loadu_si512(x + i + 48), absmask));
    }
    for (; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        m0 = _mm512_max_epi32(m0, _mm512_and_si512(_mm512_maskz_loadu_epi32(k, x + i), absmask));
    }
    uint32_t maxb = (uint32_t)_mm512_reduce_max_epi32(_mm512_max_epi32(_mm512_max_epi32(m0, m1), _mm512_max_epi32(m2, m3)));
    float scf = 0;
    const size_t bad = bn_qacts_scale(x, n, maxb, &scf);
    if (bad < n) return bad;
    *s = scf;
    const __m512 sc = _mm512_set1_ps(scf);
    __m512i acc = _mm512_setzero_si512(), acc2 = acc; /* the codes' sum: |x * sc| <= 127, so no narrowing saturates */
    /* rint in the current (nearest-even) mode, then a saturating narrow to int8 */
    for (i = 0; i + 64 <= n; i += 64) {
        const __m512i v0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), sc));
        const __m512i v1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i + 16), sc));
        const __m512i v2 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i + 32), sc));
        const __m512i v3 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i + 48), sc));
        _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtsepi32_epi8(v0));
        _mm_storeu_si128((__m128i *)(q + i + 16), _mm512_cvtsepi32_epi8(v1));
        _mm_storeu_si128((__m128i *)(q + i + 32), _mm512_cvtsepi32_epi8(v2));
        _mm_storeu_si128((__m128i *)(q + i + 48), _mm512_cvtsepi32_epi8(v3));
        acc = _mm512_add_epi32(acc, _mm512_add_epi32(v0, v1));
        acc2 = _mm512_add_epi32(acc2, _mm512_add_epi32(v2, v3));
    }
    for (; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), sc));
        _mm_mask_storeu_epi8(q + i, k, _mm512_cvtsepi32_epi8(v));
        acc = _mm512_add_epi32(acc, v); /* masked lanes loaded 0 */
    }
    if (sum) *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(acc, acc2));
    return n;
}

const bn_quant_kernels bn_quant_avx512 = {"avx512", absum_avx512, xchunk_avx512, qblocks_avx512, qacts_avx512};
