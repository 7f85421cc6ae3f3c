/*
 * bitlinear_avx512.c - AVX-512BW T2 dot kernel (compiled with -mavx512bw).
 * One 64-byte load holds two blocks; activations come in the pairwise
 * layout of bitlinear.c so that each shift k meets 64 contiguous int8.
 * An odd last block is read with a 32-byte mask (the upper codes are zero).
 */
#include "bitlinear_x512.h"

INLINE void dot_nt(const uint8_t *w, const int8_t *x, size_t xstride, const int nt, size_t nblocks, int32_t *acc)
{
    const __m512i ones = _mm512_set1_epi16(1);
    __m512i a[BN_T2_MAXT];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) a[t] = _mm512_setzero_si512();
    const size_t npairs = (nblocks + 1) / 2;
    for (size_t p = 0; p < npairs; p++) {
        const __m512i wb = load_pair(w, p, nblocks);
        __m512i c[4];
        code_planes(wb, c);
        const __m512i c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const int8_t *xp = x + (size_t)t * xstride + 256 * p;
            __m512i s = _mm512_maddubs_epi16(c0, _mm512_loadu_si512((const void *)xp));
            s = _mm512_add_epi16(s, _mm512_maddubs_epi16(c1, _mm512_loadu_si512((const void *)(xp + 64))));
            s = _mm512_add_epi16(s, _mm512_maddubs_epi16(c2, _mm512_loadu_si512((const void *)(xp + 128))));
            s = _mm512_add_epi16(s, _mm512_maddubs_epi16(c3, _mm512_loadu_si512((const void *)(xp + 192))));
            a[t] = _mm512_add_epi32(a[t], _mm512_madd_epi16(s, ones));
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm512_reduce_add_epi32(a[t]);
}

void bn_t2_dot_avx512(const uint8_t *w, const int8_t *x, size_t xstride, int nt, size_t nblocks, int32_t *acc)
{
    switch (nt) {
    case 1: dot_nt(w, x, xstride, 1, nblocks, acc); break;
    case 2: dot_nt(w, x, xstride, 2, nblocks, acc); break;
    case 3: dot_nt(w, x, xstride, 3, nblocks, acc); break;
    case 4: dot_nt(w, x, xstride, 4, nblocks, acc); break;
    case 5: dot_nt(w, x, xstride, 5, nblocks, acc); break;
    case 6: dot_nt(w, x, xstride, 6, nblocks, acc); break;
    case 7: dot_nt(w, x, xstride, 7, nblocks, acc); break;
    default: dot_nt(w, x, xstride, 8, nblocks, acc); break;
    }
}
