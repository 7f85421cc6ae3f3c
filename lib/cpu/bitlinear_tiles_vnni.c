/*
 * bitlinear_tiles_vnni.c - the tiled BitLinear of bitlinear_tiles.h on
 * AVX-512 VNNI (compiled with -mavx512vnni): the tile product done with
 * vpdpbusd, each weight dword broadcast against a B row of 16 tokens, so
 * that every lane is one token and a group's sums come out of the products
 * with no horizontal adds.  The C tiles live in memory (4 KiB), A and B are
 * read in place where the tile code keeps them.  The last product of a
 * group takes the group's float step on its registers (TILE_DP_FLUSH)
 * instead of TILES_GROUP_STEP's store, reload and zeroing: 4096 x 14336 in
 * cache, one thread, Zen 4 VM, three alternating rounds, group 256 at 16
 * tokens 5.93-5.99 -> 5.45-5.62 ms, at 64 21.3-21.5 -> 19.8-20.2; group 128
 * at 16 6.53-6.71 -> 5.69-5.73, at 64 23.7-23.9 -> 20.7-21.7.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* c[m][n] += sum over k < 64 of a[m][k] * b[k / 4][4 n + k % 4]: for each
 * row m, 16 vpdpbusd of a broadcast dword of A (four codes) against a row of
 * B (16 tokens x those four columns), in two chains.  fl: then, on each
 * row's sums, the float step of group g of bitlinear_tiles.h's
 * TILES_GROUP_STEP for rows below `rows`, s[16 m + n] = s + (float)(c -
 * xg[n]) * d[m * ng] (no FMA), and the row of c zeroed. */
static inline __attribute__((always_inline)) void vt_dp(int32_t *c, const uint8_t *a, const int8_t *b, const int fl,
                                                        float *s, const int32_t *xg, const float *d, size_t ng,
                                                        uint64_t rows)
{
    __m512i bv[16];
    #pragma GCC unroll 16
    for (int k = 0; k < 16; k++) bv[k] = _mm512_loadu_si512((const void *)(b + 64 * k));
    const __m512i xv = fl ? _mm512_loadu_si512((const void *)xg) : _mm512_setzero_si512();
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
        const __m512i sum = _mm512_add_epi32(s0, s1);
        if (!fl) {
            _mm512_store_si512((void *)(c + 16 * m), sum);
            continue;
        }
        if ((uint64_t)m < rows) {
            const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum, xv)), _mm512_set1_ps(d[(size_t)m * ng]));
            _mm512_store_ps(s + 16 * m, _mm512_add_ps(_mm512_load_ps(s + 16 * m), p));
        }
        _mm512_store_si512((void *)(c + 16 * m), _mm512_setzero_si512());
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
#define TILE_DP(c, a, b) vt_dp(vt_c[c], vt_a, vt_b, 0, NULL, NULL, NULL, 0, 0)
#define TILE_STORE(t, p, stride) memcpy((p), vt_c[t], sizeof vt_c[t])
#define TILE_DP_FLUSH(q, g)                                                                                  \
    vt_dp(vt_c[q], vt_a, vt_b, 1, s[q], grp->xg + (g) * grp->ldx + (t0 + (q)) * 16, grp->d + r0 * grp->ng + (g), \
                grp->ng, rows)
#include "bitlinear_tiles.h"
