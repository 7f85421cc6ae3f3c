/*
 * bitlinear_x256.h - what the T2 kernels share (included only by files
 * compiled with -mavx2 or more): the horizontal sum of eight int32 lanes and
 * the one-token kernels' clamped prefetch.
 */
#ifndef BITNET_BITLINEAR_X256_H
#define BITNET_BITLINEAR_X256_H

#include <immintrin.h>
#include <stdint.h>

#define INLINE static inline __attribute__((always_inline))

INLINE int32_t hsum(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* A software prefetch of q into L2, never past pf_last (the last byte the
 * caller's rows reach). */
INLINE void pf_l2(const uint8_t *q, const uint8_t *pf_last)
{
    _mm_prefetch((const char *)(q < pf_last ? q : pf_last), _MM_HINT_T1);
}

#endif
