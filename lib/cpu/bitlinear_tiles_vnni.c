/*
 * bitlinear_tiles_vnni.c - the tiled BitLinear of bitlinear_tiles.h on
 * AVX-512 VNNI (compiled with -mavx512vnni): the tile product done with
 * vpdpbusd, each weight dword broadcast against a B row of 16 tokens, so
 * that every lane is one token and a group's sums come out of the products
 * with no horizontal adds.  The C tiles live in memory (4 KiB), A and B are
 * read in place where the tile code keeps them.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* c[m][n] += sum over k < 64 of a[m][k] * b[k / 4][4 n + k % 4]: for each
 * row m, 16 vpdpbusd of a broadcast dword of A (four codes) against a row of
 * B (16 tokens x those four columns), in two chains. */
static inline __attribute__((always_inline)) void vt_dp(int32_t *c, const uint8_t *a, const int8_t *b)
{
    __m512i bv[16];
    #pragma GCC unroll 16
    for (int k = 0; k < 16; k++) bv[k] = _mm512_loadu_si512((const void *)(b + 64 * k));
    for (int m = 0; m < 16; m++) {
        __m512i s0 = _mm512_load_si512((const void *)(c + 16 * m)), s1 = _mm512_setzero_si512();
        const uint8_t *am = a + 64 * m;
        #pragma GCC unroll 8
        for (int k = 0; k < 16; k += 2) {
            int32_t u0, u1;
            memcpy(&u0, am + 4 * k, 4);
            memcpy(&u1, am + 4 * k + 4, 4);
            s0 = _mm512_dpbusd_epi32(s0, _mm512_set1_epi32(u0), bv[k]);
            s1 = _mm512_dpbusd_epi32(s1, _mm512_set1_epi32(u1), bv[k + 1]);
        }
        _mm512_store_si512((void *)(c + 16 * m), _mm512_add_epi32(s0, s1));
    }
}

#define TILES_FN bn_t2_tiles_vnni
/* tiles 0..3: vt_c, 4: A at vt_a, 5: B at vt_b (the tile code loads them
 * with a stride of 64 only) */
#define TILE_CONFIG()                                                                                        \
    _Alignas(64) int32_t vt_c[4][256];                                                                       \
    const uint8_t *vt_a = NULL;                                                                              \
    const int8_t *vt_b = NULL
#define TILE_RELEASE() ((void)vt_a, (void)vt_b)
#define TILE_ZERO(t) memset(vt_c[t], 0, sizeof vt_c[t])
#define TILE_LOAD(t, p, stride) ((t) == 4 ? (void)(vt_a = (const uint8_t *)(p)) : (void)(vt_b = (const int8_t *)(p)))
#define TILE_DP(c, a, b) vt_dp(vt_c[c], vt_a, vt_b)
#define TILE_STORE(t, p, stride) memcpy((p), vt_c[t], sizeof vt_c[t])
#include "bitlinear_tiles.h"
