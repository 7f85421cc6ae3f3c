/*
 * quantize_avx2.c - AVX2 kernels of the quantization family (compiled with
 * -mavx2 -mfma; used only when the CPU has them).  Each one computes exactly
 * what its scalar counterpart in quantize.c / quantize_cpu.c computes.
 */
#include "quantize.h"

#include <immintrin.h>

static inline uint32_t hmax_epi32(__m256i v)
{
    __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(m);
}

static inline uint32_t hmin_epu32(__m256i v)
{
    __m128i m = _mm_min_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_min_epu32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_min_epu32(m, _mm_shuffle_epi32(m, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(m);
}

static int xchunk_avx2(const float *w, size_t n, uint64_t *sum, unsigned *shift)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff), one = _mm256_set1_epi32(1);
    __m256i vmax = _mm256_setzero_si256(), vmin = _mm256_set1_epi32(-1);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(w + i)), absmask);
        vmax = _mm256_max_epi32(vmax, u);
        vmin = _mm256_min_epu32(vmin, _mm256_sub_epi32(u, one)); /* zero wraps: ignored */
    }
    uint32_t maxb = hmax_epi32(vmax), minm1 = hmin_epu32(vmin);
    for (size_t t = i; t < n; t++) {
        uint32_t u;
        memcpy(&u, &w[t], 4);
        u &= 0x7fffffffu;
        if (u > maxb) maxb = u;
        if (u - 1 < minm1) minm1 = u - 1;
    }
    uint32_t emin;
    const int r = bn_xchunk_range(maxb, minm1, sum, shift, &emin);
    if (r >= 0) return r;
    /* |w| = m << (e - emin) units of 2^(emin - 150); a zero has e = 0, and its
     * negative count (huge as unsigned) shifts everything out. */
    const __m256i vemin = _mm256_set1_epi32((int)emin), mant = _mm256_set1_epi32(0x7fffff),
                  hidden = _mm256_set1_epi32(0x800000), zero = _mm256_setzero_si256();
    __m256i acc0 = zero, acc1 = zero;
    for (i = 0; i + 8 <= n; i += 8) {
        __m256i u = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(w + i)), absmask);
        __m256i m = _mm256_or_si256(_mm256_and_si256(u, mant), hidden);
        __m256i c = _mm256_sub_epi32(_mm256_srli_epi32(u, 23), vemin);
        acc0 = _mm256_add_epi64(acc0, _mm256_sllv_epi64(_mm256_unpacklo_epi32(m, zero), _mm256_unpacklo_epi32(c, zero)));
        acc1 = _mm256_add_epi64(acc1, _mm256_sllv_epi64(_mm256_unpackhi_epi32(m, zero), _mm256_unpackhi_epi32(c, zero)));
    }
    acc0 = _mm256_add_epi64(acc0, acc1);
    __m128i a = _mm_add_epi64(_mm256_castsi256_si128(acc0), _mm256_extracti128_si256(acc0, 1));
    uint64_t s = (uint64_t)_mm_cvtsi128_si64(a) + (uint64_t)_mm_extract_epi64(a, 1);
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, &w[i], 4);
        uint32_t e = (u >> 23) & 0xff;
        if (e) s += (uint64_t)((u & 0x7fffff) | 0x800000u) << (e - emin);
    }
    *sum = s;
    *shift = emin - 1;
    return 0;
}

/* One pass per chunk: the exponent range and a double sum, exact when the
 * range is narrow (bn_xchunk_double); other chunks take xchunk_avx2. */
static size_t absum_avx2(const float *w, size_t n, bn_xsum *acc)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff), one = _mm256_set1_epi32(1);
    for (size_t c = 0; c < n; c += BN_DCHUNK) {
        const size_t len = n - c < BN_DCHUNK ? n - c : BN_DCHUNK;
        const float *p = w + c;
        __m256i vmax = _mm256_setzero_si256(), vmin = _mm256_set1_epi32(-1);
        __m256d d0 = _mm256_setzero_pd(), d1 = d0, d2 = d0, d3 = d0;
        size_t i = 0;
        for (; i + 16 <= len; i += 16) {
            _mm_prefetch((const char *)(p + i + BN_PREFETCH), _MM_HINT_T0);
            __m256i u = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + i)), absmask);
            __m256i v = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + i + 8)), absmask);
            vmax = _mm256_max_epu32(vmax, _mm256_max_epu32(u, v));
            vmin = _mm256_min_epu32(vmin, _mm256_min_epu32(_mm256_sub_epi32(u, one), _mm256_sub_epi32(v, one)));
            d0 = _mm256_add_pd(d0, _mm256_cvtps_pd(_mm_castsi128_ps(_mm256_castsi256_si128(u))));
            d1 = _mm256_add_pd(d1, _mm256_cvtps_pd(_mm_castsi128_ps(_mm256_extracti128_si256(u, 1))));
            d2 = _mm256_add_pd(d2, _mm256_cvtps_pd(_mm_castsi128_ps(_mm256_castsi256_si128(v))));
            d3 = _mm256_add_pd(d3, _mm256_cvtps_pd(_mm_castsi128_ps(_mm256_extracti128_si256(v, 1))));
        }
        uint32_t maxb = hmax_epi32(vmax), minm1 = hmin_epu32(vmin);
        __m256d ds = _mm256_add_pd(_mm256_add_pd(d0, d1), _mm256_add_pd(d2, d3));
        __m128d h = _mm_add_pd(_mm256_castpd256_pd128(ds), _mm256_extractf128_pd(ds, 1));
        double dsum = _mm_cvtsd_f64(h) + _mm_cvtsd_f64(_mm_unpackhi_pd(h, h));
        for (; i < len; i++) {
            uint32_t u;
            memcpy(&u, &p[i], 4);
            u &= 0x7fffffffu;
            if (u > maxb) maxb = u;
            if (u - 1 < minm1) minm1 = u - 1;
            dsum += fabs((double)p[i]);
        }
        if (bn_xchunk_double(dsum, maxb, minm1, acc) == 0) continue;
        size_t at = bn_absum(xchunk_avx2, p, len, acc);
        if (at < len) return c + at;
    }
    return n;
}

/* 32 bytes from four vectors of 8 int32 in 0..255 (j = 0..7, 8..15, ...). */
static inline __m256i pack_bytes(__m256i a0, __m256i a1, __m256i a2, __m256i a3)
{
    __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(a0, a1), _mm256_packus_epi32(a2, a3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static void qblocks_avx2(const float *w, uint64_t cols, uint64_t b0, uint64_t b1, const float *s, unsigned gshift,
                         uint8_t *t2)
{
    const __m256 half = _mm256_set1_ps(0.5f), mhalf = _mm256_set1_ps(-0.5f);
    const __m256i one = _mm256_set1_epi32(1);
    float tmp[BITNET_T2_BLOCK];
    for (uint64_t b = b0; b < b1; b++) {
        const float *p = bn_qblock_src(w, cols, b, tmp);
        __m256 sc[4];
        for (unsigned k = 0; k < 4; k++) sc[k] = _mm256_set1_ps(s[bn_qscale_index(4 * b + k, gshift, cols)]);
        __m256i acc[4];
        for (unsigned jj = 0; jj < 4; jj++) {
            __m256i a = _mm256_setzero_si256();
            for (unsigned k = 0; k < 4; k++) {
                __m256 x = _mm256_mul_ps(_mm256_loadu_ps(p + 32 * k + 8 * jj), sc[k]);
                __m256i gt = _mm256_castps_si256(_mm256_cmp_ps(x, half, _CMP_GT_OQ));
                __m256i lt = _mm256_castps_si256(_mm256_cmp_ps(x, mhalf, _CMP_LT_OQ));
                __m256i code = _mm256_add_epi32(_mm256_sub_epi32(one, gt), lt); /* 1 + (x > .5) - (x < -.5) */
                a = _mm256_or_si256(a, _mm256_slli_epi32(code, (int)(2 * k)));
            }
            acc[jj] = a;
        }
        _mm256_storeu_si256((__m256i *)(t2 + b * BITNET_T2_BLOCK_BYTES), pack_bytes(acc[0], acc[1], acc[2], acc[3]));
    }
}

/* The max over four chains (2026-12-02, Zen 5 VM under load, one thread,
 * `BITNET_SIMD=avx2 bitnet-bench --device cpu --threads 1 --op
 * quantize_acts --shape 1x16384 --shape 64x4096 --llc 1`, three
 * alternating rounds, medians in us: 3.8-4.6 / 52.6-66.2 against 3.8-4.9 /
 * 52.9-72.8 with one chain). */
static size_t qacts_avx2(const float *x, size_t n, int8_t *q, float *s, int32_t *sum)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    __m256i vmax = _mm256_setzero_si256(), m1 = vmax, m2 = vmax, m3 = vmax;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) { /* four chains, as qacts_avx512 */
        vmax = _mm256_max_epi32(vmax, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), absmask));
        m1 = _mm256_max_epi32(m1, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i + 8)), absmask));
        m2 = _mm256_max_epi32(m2, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i + 16)), absmask));
        m3 = _mm256_max_epi32(m3, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i + 24)), absmask));
    }
    for (; i + 8 <= n; i += 8)
        vmax = _mm256_max_epi32(vmax, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), absmask));
    uint32_t maxb = hmax_epi32(_mm256_max_epi32(_mm256_max_epi32(vmax, m1), _mm256_max_epi32(m2, m3)));
    for (size_t t = i; t < n; t++) {
        uint32_t u;
        memcpy(&u, &x[t], 4);
        u &= 0x7fffffffu;
        if (u > maxb) maxb = u;
    }
    float scf = 0;
    const size_t bad = bn_qacts_scale(x, n, maxb, &scf);
    if (bad < n) return bad;
    *s = scf;
    const __m256 sc = _mm256_set1_ps(scf);
    __m256i acc = _mm256_setzero_si256(); /* the codes' sum: |x * sc| <= 127, so no pack saturates */
    for (i = 0; i + 32 <= n; i += 32) {
        /* rint in the current (nearest-even) mode, clamped by saturating packs */
        __m256i a0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), sc));
        __m256i a1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), sc));
        __m256i a2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), sc));
        __m256i a3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), sc));
        acc = _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)));
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + i), p);
    }
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    int32_t tot = _mm_cvtsi128_si32(h);
    for (; i < n; i++) {
        float v = rintf(x[i] * scf);
        v = v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v;
        q[i] = (int8_t)v;
        tot += (int32_t)v;
    }
    if (sum) *sum = tot;
    return n;
}

const bn_quant_kernels bn_quant_avx2 = {"avx2", absum_avx2, xchunk_avx2, qblocks_avx2, qacts_avx2};
