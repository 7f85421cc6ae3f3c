/*
 * bitlinear_avxvnni.c - T2 dot kernels for CPUs with AVX2 and AVX-VNNI but
 * no AVX-512 (Intel client cores from Alder Lake on): the VEX-encoded
 * 256-bit vpdpbusd (compiled with -mavxvnni).  Layout as in
 * bitlinear_avx2.c (natural: block b's codes at w + 32 b, their activations
 * at x + 128 b, shift k meeting x + 128 b + 32 k).  Where the AVX2 kernels
 * multiply with vpmaddubsw, add in int16 and widen with vpmaddwd, one
 * vpdpbusd multiplies and adds into int32 lanes.
 *
 * The same source built with -DBN_AVXVNNI_EVEX and AVX-512 VL + VNNI gives
 * the EVEX-encoded twins (suffix _evex) that the unit tests compare with
 * plain sums on machines without AVX-VNNI; the library ships only the VEX
 * build.
 *
 * Measured only through those twins so far (no machine with AVX-VNNI and
 * without AVX-512 has been at hand): a library whose avx-vnni level ran
 * them, on a 2-vCPU AMD EPYC (Zen 4) VM, 4096 x 14336 with the weights in
 * the cache, one thread, three alternating rounds of BITNET_SIMD=avx2 and
 * =avx-vnni bitnet-bench --threads 1 --op bitlinear --tokens 1,2,3,4,8
 * --scale tensor --llc 1 (ms): 1 token 0.556-0.564 / 0.505-0.512, 2 tokens
 * 1.02-1.08 / 0.91-1.10, 3 tokens 1.54-1.59 / 1.30-1.61, 4 tokens
 * 1.89-1.91 / 1.49-1.71, 8 tokens 3.71-3.87 / 2.93-3.04.  That core loads
 * at most two 32-byte vectors a cycle, which bounds both levels; on cores
 * that load three (Intel's from Alder Lake on) the AVX2 kernels' extra
 * arithmetic (vpmaddubsw, int16 adds, vpmaddwd: 15 vector instructions a
 * block against 8 here) weighs more.  With one accumulator per token the
 * two-token pass was slower than AVX2 (1.14-1.34 ms): vpdpbusd's latency.
 * Group scales of 128 columns and more (bitlinear_grp256.h, shared with the
 * AVX2 set), the same way, three alternating rounds against the AVX2 set's:
 * group 128 one token 0.75-0.79 / 0.87-0.93 ms, 4 tokens 2.50-2.51 /
 * 2.80-2.82, 8 tokens 4.95-5.27 / 5.49-5.57; group 256 one token
 * 0.75-0.77 / 0.80-0.82, 4 and 8 tokens within the noise.
 */
#include "bitlinear.h"
#include "bitlinear_x256.h"

#include <immintrin.h>


#ifdef BN_AVXVNNI_EVEX
#define DPBUSD(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#define FN(name) name##_evex
#else
#define DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#define FN(name) name
#endif

#define LD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))

/* Passes of nt tokens: the four code planes of a block decoded once (shift
 * and mask, codes 0..2) for every token.  vpdpbusd's latency is several
 * cycles: up to two tokens each shift has an accumulator of its own, from
 * three tokens even and odd shifts share one (VEX has 16 registers).
 * |lane| <= 2 * 128 * 4 per vpdpbusd and at most four per block and
 * accumulator: int32 holds any row of BN_BITLINEAR_MAX_IN columns. */
INLINE void dot_nt(const uint8_t *w, const int8_t *x, size_t xstride, const int nt, size_t nblocks, int32_t *acc)
{
    const int na = nt <= 2 ? 4 : 2;
    const __m256i mask = _mm256_set1_epi8(3);
    __m256i a[4][4];
    #pragma GCC unroll 4
    for (int t = 0; t < nt; t++)
        #pragma GCC unroll 4
        for (int k = 0; k < na; k++) a[t][k] = _mm256_setzero_si256();
    for (size_t b = 0; b < nblocks; b++) {
        const __m256i wb = LD(w + 32 * b);
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) { /* one plane live at a time */
            const __m256i c = _mm256_and_si256(_mm256_srli_epi16(wb, 2 * k), mask);
            #pragma GCC unroll 4
            for (int t = 0; t < nt; t++)
                a[t][k % na] = DPBUSD(a[t][k % na], c, LD(x + (size_t)t * xstride + 128 * b + 32 * k));
        }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
        __m256i s = a[t][0];
        #pragma GCC unroll 4
        for (int k = 1; k < na; k++) s = _mm256_add_epi32(s, a[t][k]);
        acc[t] = hsum(s);
    }
}

void FN(bn_t2_dot_avxvnni)(const uint8_t *w, const int8_t *x, size_t xstride, int nt, size_t nblocks, int32_t *acc)
{
    switch (nt) {
    case 1: dot_nt(w, x, xstride, 1, nblocks, acc); break;
    case 2: dot_nt(w, x, xstride, 2, nblocks, acc); break;
    case 3: dot_nt(w, x, xstride, 3, nblocks, acc); break;
    default: dot_nt(w, x, xstride, 4, nblocks, acc); break;
    }
}

/* One token, as the AVX-512 VNNI kernel does it (bitlinear_vnni.c): the
 * codes of shift k used in place as code * 4^k (w & (3 << 2k), no shift),
 * one accumulator per shift, each lane a multiple of 4^k, shifted back
 * exactly before the horizontal sum.  A lane of accumulator 3 gains at most
 * 4 * 128 * 128 a block: up to BN_T2_NOSHIFT_MAX_BLOCKS blocks fit in
 * int32 with room to spare; longer rows take the pass kernel.  Prefetched
 * into L2 BL_PF_BYTES ahead, never past pf_last. */
INLINE void gemv_block(const uint8_t *w, const int8_t *x, const __m256i m[4], __m256i a[4])
{
    const __m256i wb = LD(w);
    a[0] = DPBUSD(a[0], _mm256_and_si256(wb, m[0]), LD(x));
    a[1] = DPBUSD(a[1], _mm256_and_si256(wb, m[1]), LD(x + 32));
    a[2] = DPBUSD(a[2], _mm256_and_si256(wb, m[2]), LD(x + 64));
    a[3] = DPBUSD(a[3], _mm256_and_si256(wb, m[3]), LD(x + 96));
}

void FN(bn_t2_gemv_avxvnni)(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc, const uint8_t *pf_last)
{
    if (nblocks > BN_T2_NOSHIFT_MAX_BLOCKS) {
        dot_nt(w, x, 0, 1, nblocks, acc);
        return;
    }
    const __m256i m[4] = {_mm256_set1_epi8(3), _mm256_set1_epi8(12), _mm256_set1_epi8(48),
                          _mm256_set1_epi8((char)192)};
    __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    size_t b = 0;
    for (; b + 2 <= nblocks; b += 2) { /* one 64-byte line a step */
        if (pf_last) pf_l2(w + 32 * b + BL_PF_BYTES, pf_last);
        gemv_block(w + 32 * b, x + 128 * b, m, a);
        gemv_block(w + 32 * b + 32, x + 128 * b + 128, m, a);
    }
    if (b < nblocks) gemv_block(w + 32 * b, x + 128 * b, m, a);
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(a[0], _mm256_srai_epi32(a[1], 2)),
                                       _mm256_add_epi32(_mm256_srai_epi32(a[2], 4), _mm256_srai_epi32(a[3], 6)));
    acc[0] = hsum(s);
}

/* ---- group scales of whole blocks (bitlinear_grp256.h) ------------------
 * One block against one token in int32 lanes: the codes of shifts 0 and 2
 * (one shift of the word) in one accumulator, those of shifts 1 and 3 in
 * place as 4 * code in another, shifted back exactly before they are added
 * (a lane of it is at most 2 * 4 * 2 * 128 * 4, a multiple of 4). */
INLINE __m256i grp_block32(__m256i wb, const int8_t *x)
{
    const __m256i m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12), hi = _mm256_srli_epi16(wb, 4);
    __m256i a = DPBUSD(_mm256_setzero_si256(), _mm256_and_si256(wb, m3), LD(x));
    __m256i b = DPBUSD(_mm256_setzero_si256(), _mm256_and_si256(wb, m12), LD(x + 32));
    a = DPBUSD(a, _mm256_and_si256(hi, m3), LD(x + 64));
    b = DPBUSD(b, _mm256_and_si256(hi, m12), LD(x + 96));
    return _mm256_add_epi32(a, _mm256_srai_epi32(b, 2));
}
INLINE __m256i grp_plane32(__m256i c, const int8_t *x) { return DPBUSD(_mm256_setzero_si256(), c, LD(x)); }
#ifdef BN_AVXVNNI_EVEX
#define GRP_NAME(n) bn_t2_##n##_avxvnni_evex
#else
#define GRP_NAME(n) bn_t2_##n##_avxvnni
#endif
#include "bitlinear_grp256.h"
