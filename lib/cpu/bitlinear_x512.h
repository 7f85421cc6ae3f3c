/*
 * bitlinear_x512.h - what the AVX-512BW and AVX-512 VNNI T2 kernels share
 * (included only by files compiled with -mavx512bw): the two-block load and
 * the four code planes of a 64-byte word.
 */
#ifndef BITNET_BITLINEAR_X512_H
#define BITNET_BITLINEAR_X512_H

#include <immintrin.h>

#include "bitlinear.h"
#include "bitlinear_x256.h" /* INLINE, pf_l2 */

/* Blocks 2p and 2p+1 of a row; an odd last block is read with a 32-byte
 * mask (the upper codes are zero). */
INLINE __m512i load_pair(const uint8_t *w, size_t p, size_t nblocks)
{
    if (2 * p + 1 < nblocks) return _mm512_loadu_si512((const void *)(w + 64 * p));
    return _mm512_maskz_loadu_epi8((__mmask64)0xffffffffu, w + 64 * p);
}

/* c[k] = the codes at shift k (0..2 per byte). */
INLINE void code_planes(__m512i wb, __m512i c[4])
{
    const __m512i mask = _mm512_set1_epi8(3);
    c[0] = _mm512_and_si512(wb, mask);
    c[1] = _mm512_and_si512(_mm512_srli_epi16(wb, 2), mask);
    c[2] = _mm512_and_si512(_mm512_srli_epi16(wb, 4), mask);
    c[3] = _mm512_and_si512(_mm512_srli_epi16(wb, 6), mask);
}

#endif
