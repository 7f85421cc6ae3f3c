/*
 * bitlinear_avx2.c - AVX2 kernels of BitLinear (compiled with -mavx2):
 * activation quantization of one row, and the T2 dot products.  One 32-byte
 * load of a block gives, after a shift by 2k and a mask, the codes of the 32
 * consecutive columns 128b+32k..+31; vpmaddubsw multiplies those unsigned
 * codes (0..2) with signed int8 activations (|pair sum| <= 512, no
 * saturation), four shifts add up in int16 (<= 2048) and vpmaddwd widens.
 */
#include "bitlinear.h"
#include "bitlinear_x256.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* bn_group_chains8_avx2 follows the definition's roundings: no FMA
 * (this file is built with -mfma; gcc in ISO C mode contracts nothing) */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

int bn_quant_row_avx2(const float *x, uint64_t n, uint64_t npad, int8_t *q, float *s)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vmax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    const __m256 big = _mm256_set1_ps(3.40282347e38f);
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), absmask);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, big, _CMP_NLE_UQ)); /* NaN or > FLT_MAX */
        vmax = _mm256_max_ps(vmax, a);
    }
    if (_mm256_movemask_ps(bad)) return 1;
    float lanes[8];
    _mm256_storeu_ps(lanes, vmax);
    float m = 0.0f;
    for (int l = 0; l < 8; l++) m = lanes[l] > m ? lanes[l] : m;
    for (; i < n; i++) {
        const float a = fabsf(x[i]);
        if (!(a <= 3.40282347e38f)) return 1;
        if (a > m) m = a;
    }
    if (m < 1e-5f) m = 1e-5f;
    const float sc = 127.0f / m;
    const __m256 vs = _mm256_set1_ps(sc);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    i = 0;
    /* x*s is one rounded product; cvtps rounds to nearest even (the default
     * MXCSR mode, as rintf); the saturating packs clamp to -128..127. */
    for (; i + 32 <= n; i += 32) {
        const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
        const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vs));
        const __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), vs));
        const __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), vs));
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
        _mm256_storeu_si256((__m256i *)(q + i), _mm256_permutevar8x32_epi32(p, perm));
    }
    for (; i < n; i++) {
        float r = rintf(x[i] * sc);
        r = r < -128.0f ? -128.0f : r > 127.0f ? 127.0f : r;
        q[i] = (int8_t)r;
    }
    memset(q + n, 0, (size_t)(npad - n));
    *s = sc;
    return 0;
}

INLINE void dot_nt(const uint8_t *w, const int8_t *x, size_t xstride, const int nt, size_t nblocks, int32_t *acc)
{
    const __m256i mask = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (size_t b = 0; b < nblocks; b++) {
        const __m256i wb = _mm256_loadu_si256((const __m256i *)(w + 32 * b));
        const __m256i c0 = _mm256_and_si256(wb, mask);
        const __m256i c1 = _mm256_and_si256(_mm256_srli_epi16(wb, 2), mask);
        const __m256i c2 = _mm256_and_si256(_mm256_srli_epi16(wb, 4), mask);
        const __m256i c3 = _mm256_and_si256(_mm256_srli_epi16(wb, 6), mask);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const int8_t *xp = x + (size_t)t * xstride + 128 * b;
            __m256i p = _mm256_maddubs_epi16(c0, _mm256_loadu_si256((const __m256i *)xp));
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c1, _mm256_loadu_si256((const __m256i *)(xp + 32))));
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c2, _mm256_loadu_si256((const __m256i *)(xp + 64))));
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c3, _mm256_loadu_si256((const __m256i *)(xp + 96))));
            a[t] = _mm256_add_epi32(a[t], _mm256_madd_epi16(p, ones));
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = hsum(a[t]);
}

void bn_t2_dot_avx2(const uint8_t *w, const int8_t *x, size_t xstride, int nt, size_t nblocks, int32_t *acc)
{
    switch (nt) {
    case 1: dot_nt(w, x, xstride, 1, nblocks, acc); break;
    case 2: dot_nt(w, x, xstride, 2, nblocks, acc); break;
    case 3: dot_nt(w, x, xstride, 3, nblocks, acc); break;
    default: dot_nt(w, x, xstride, 4, nblocks, acc); break;
    }
}

/* One token, weights streamed from memory once.  A software prefetch into
 * L2 BL_PF_BYTES ahead (clamped to pf_last, the last byte the caller will
 * read) keeps enough lines in flight, as in bitlinear_vnni.c; two blocks (one
 * 64-byte line) a step, their int16 sums added before one widening. */
#define LD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
/* The int16 sums of one block wb of codes against x (lanes: pairs of
 * 4-column sums, at most 2048). */
INLINE __m256i block16(__m256i wb, const int8_t *x, __m256i mask)
{
    __m256i p = _mm256_maddubs_epi16(_mm256_and_si256(wb, mask), _mm256_loadu_si256((const __m256i *)x));
    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(wb, 2), mask),
                                                 _mm256_loadu_si256((const __m256i *)(x + 32))));
    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(wb, 4), mask),
                                                 _mm256_loadu_si256((const __m256i *)(x + 64))));
    return _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(wb, 6), mask),
                                                    _mm256_loadu_si256((const __m256i *)(x + 96))));
}

void bn_t2_gemv_avx2(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc, const uint8_t *pf_last)
{
    const __m256i mask = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    __m256i a = _mm256_setzero_si256();
    size_t b = 0;
    /* |one block's int16 lane| <= 4 * 2 * 2 * 128 = 2048: two blocks fit */
    for (; b + 2 <= nblocks; b += 2) {
        if (pf_last) pf_l2(w + 32 * b + BL_PF_BYTES, pf_last);
        const __m256i p = _mm256_add_epi16(block16(LD(w + 32 * b), x + 128 * b, mask),
                                           block16(LD(w + 32 * b + 32), x + 128 * b + 128, mask));
        a = _mm256_add_epi32(a, _mm256_madd_epi16(p, ones));
    }
    if (b < nblocks) a = _mm256_add_epi32(a, _mm256_madd_epi16(block16(LD(w + 32 * b), x + 128 * b, mask), ones));
    acc[0] = hsum(a);
}

void bn_t2_dot_sub_avx2(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc)
{
    const __m256i mask = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    for (size_t b = 0; b < nblocks; b++) {
        const __m256i wb = _mm256_loadu_si256((const __m256i *)(w + 32 * b));
        __m256i s[4];
        for (int k = 0; k < 4; k++) {
            const __m256i c = _mm256_and_si256(_mm256_srli_epi16(wb, 2 * k), mask);
            const __m256i p = _mm256_maddubs_epi16(c, _mm256_loadu_si256((const __m256i *)(x + 128 * b + 32 * k)));
            s[k] = _mm256_madd_epi16(p, ones);
        }
        /* four horizontal sums at once */
        const __m256i s01 = _mm256_hadd_epi32(s[0], s[1]), s23 = _mm256_hadd_epi32(s[2], s[3]);
        const __m256i h = _mm256_hadd_epi32(s01, s23); /* each 128-bit half: partial k = 0..3 */
        const __m128i r = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        _mm_storeu_si128((__m128i *)(acc + 4 * b), r);
    }
}

/* Group scales: the chains of 8 rows at once (see group_chains in
 * bitlinear.c): y[r] = sum over g in order of sum + (float)acc[r][g] * d[r][g],
 * rows r at acc + r * astride and d + r * ng.  Eight columns g at a time: the
 * products of each row (one vector per row), an 8 x 8 transpose, then eight
 * adds in g order with the 8 rows in the lanes -- the same roundings in the
 * same order as the scalar chain. */
void bn_group_chains8_avx2(const int32_t *acc, size_t astride, const float *d, uint64_t ng, float *y)
{
    __m256 sum = _mm256_setzero_ps();
    uint64_t g = 0;
    for (; g + 8 <= ng; g += 8) {
        __m256 p[8];
        for (int r = 0; r < 8; r++)
            p[r] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(acc + (size_t)r * astride + g))),
                                 _mm256_loadu_ps(d + (size_t)r * ng + g));
        const __m256 t0 = _mm256_unpacklo_ps(p[0], p[1]), t1 = _mm256_unpackhi_ps(p[0], p[1]);
        const __m256 t2 = _mm256_unpacklo_ps(p[2], p[3]), t3 = _mm256_unpackhi_ps(p[2], p[3]);
        const __m256 t4 = _mm256_unpacklo_ps(p[4], p[5]), t5 = _mm256_unpackhi_ps(p[4], p[5]);
        const __m256 t6 = _mm256_unpacklo_ps(p[6], p[7]), t7 = _mm256_unpackhi_ps(p[6], p[7]);
        const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
        const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
        const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
        const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
        /* column g + i, rows in lanes 0..7 */
        sum = _mm256_add_ps(sum, _mm256_permute2f128_ps(u0, u4, 0x20));
        sum = _mm256_add_ps(sum, _mm256_permute2f128_ps(u1, u5, 0x20));
        sum = _mm256_add_ps(sum, _mm256_permute2f128_ps(u2, u6, 0x20));
        sum = _mm256_add_ps(sum, _mm256_permute2f128_ps(u3, u7, 0x20));
        sum = _mm256_add_ps(sum, _mm256_permute2f128_ps(u0, u4, 0x31));
        sum = _mm256_add_ps(sum, _mm256_permute2f128_ps(u1, u5, 0x31));
        sum = _mm256_add_ps(sum, _mm256_permute2f128_ps(u2, u6, 0x31));
        sum = _mm256_add_ps(sum, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
    _mm256_storeu_ps(y, sum);
    for (; g < ng; g++)
        for (int r = 0; r < 8; r++) y[r] = y[r] + (float)acc[(size_t)r * astride + g] * d[(size_t)r * ng + g];
}

/* ---- group scales of whole blocks (bitlinear_grp256.h) ------------------ */

/* The int32 partial sums of one block against one token: block16 widened. */
INLINE __m256i grp_block32(__m256i wb, const int8_t *x)
{
    return _mm256_madd_epi16(block16(wb, x, _mm256_set1_epi8(3)), _mm256_set1_epi16(1));
}
/* Two consecutive blocks at w against x (a group of 256 columns): their
 * int16 sums added first (|lane| <= 4096), then widened once, where
 * grp_block32 widens each: one token, group 256, 4096 x 14336 in cache,
 * one thread, Zen 4 VM at the avx2 level, three alternating rounds,
 * 0.80-0.81 -> 0.71-0.74 ms (tensor scale 0.56-0.60).  Not kept: the same
 * in grpn_row (4 and 8 tokens, no faster), and the activation loads shared
 * by the two rows of grp1_rows (0.72-0.76 ms against 0.71-0.74). */
INLINE __m256i grp_pair32(const uint8_t *w, const int8_t *x)
{
    const __m256i m3 = _mm256_set1_epi8(3);
    return _mm256_madd_epi16(_mm256_add_epi16(block16(LD(w), x, m3), block16(LD(w + 32), x + 128, m3)),
                             _mm256_set1_epi16(1));
}
#define GRP_PAIR32(w, x) grp_pair32((w), (x))
INLINE __m256i grp_plane32(__m256i c, const int8_t *x)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(c, _mm256_loadu_si256((const __m256i *)x)), _mm256_set1_epi16(1));
}
#define GRP_NAME(n) bn_t2_##n##_avx2
#include "bitlinear_grp256.h"
