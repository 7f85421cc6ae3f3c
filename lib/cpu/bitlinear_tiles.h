/*
 * bitlinear_tiles.h - BitLinear for many tokens on 16 x 64-byte INT8 tiles
 * (AMX TDPBUSD), written once and compiled twice: bitlinear_amx.c defines
 * the tile operations as the AMX instructions, bitlinear_amx_emu_avx2.c as
 * plain C with the same semantics, so that machines without AMX (CI) check
 * this tiling code exactly against bitnet_bitlinear_ref.
 *
 * The includer defines TILES_FN (the function's name) and
 *   TILE_CONFIG()            load the configuration: tiles 0..5 of 16 rows x 64 bytes
 *   TILE_RELEASE()           give the tile state back
 *   TILE_ZERO(t)             tile t = 0
 *   TILE_LOAD(t, p, stride)  16 rows of 64 bytes from p, rows stride bytes apart
 *   TILE_DP(c, a, b)         c[m][n] += sum over k < 64 of (uint8)a[m][k] * (int8)b[k/4][4n + k%4]
 *                            (int32 lanes, wrapping)
 *   TILE_STORE(t, p, stride) 16 rows of 16 int32 to p
 * with tile numbers given as literals (the AMX intrinsics want constants).
 *
 * A (tile 4): 16 weight rows x 64 columns of codes 0..2, decoded from T2
 * (columns 128b + 64h + [0, 64) are the code planes 2h and 2h + 1 of the
 * 32 bytes of block b).  B (tile 5): 16 tokens x the same 64 columns of int8
 * activations in the four-per-dword layout that bn_t2_tiles_pack writes.
 * C (tiles 0..3): 16 rows x 16 tokens each, up to four token tiles per pass
 * so that each decoded A tile feeds four products.
 */
#include <immintrin.h>
#include <string.h>

#include "bitlinear.h"

/* Each row tile reads 16 rows of codes side by side, 16 streams rb bytes
 * apart; the line TILES_PF bytes ahead in each is prefetched once per 64
 * bytes of the row (every fourth step).  On an H100 machine's 16-core Xeon
 * host (AMX, 4096 x 14336, weights rotated past the caches, three
 * alternating rounds, medians in us), none / 512 / 1024 bytes ahead: 8
 * tokens 368-410 / 337-368 / 360-417, 16 tokens 410-468 / 377-404 /
 * 395-440, 64 tokens 822-832 / 762-795 / 797-844, 256 tokens 2908-3040 /
 * 2795-3103 / 3008-3075 (VNNI, for comparison: 369-406, 636-723,
 * 2302-2408, 8319-9314).  0 turns it off.
 * Tried and not kept (same kind of host, four alternating rounds, us):
 * both steps of a block per iteration, decoded from one load of each row
 * into two A tiles, with the second B tile in tile 7.  Interleaved per
 * token tile: 8 tokens 357-394 against 385-427, 64 tokens 953-1101
 * against 784-890.  All of the first A tile's products, then the
 * second's: 8 tokens 326-359 against 373-396, 16 tokens 336-390 against
 * 407-434, but 64 tokens 973-1130 against 802-874 and 256 tokens
 * 3681-4646 against 3244-3379.  Each step's A decoded one or two steps
 * ahead into a ring of four buffers (so that a tile load never follows the
 * stores that wrote its data closely), three alternating rounds: 64 tokens
 * 796-837 and 789-817 against 792-899, 256 tokens 3156-3513 and 3051-3498
 * against 3287-3504, 8 and 16 tokens as mixed: within the noise. */
#ifndef TILES_PF
#define TILES_PF 512
#endif
#ifndef TILES_RB
#define TILES_RB 16 /* row tiles sharing each pass over the packed activations */
#endif

/* A: rows [0, nr) of 16 from t2 (rows rb bytes apart), columns 64 s ..,
 * codes as bytes; rows past nr are zero.  AVX2. */
static inline void tiles_decode(const uint8_t *t2, size_t rb, uint64_t nr, size_t s, uint8_t *a)
{
    const __m256i three = _mm256_set1_epi8(3);
    const size_t b = s / 2;
    const int sh = 4 * (int)(s % 2);
    uint64_t r = 0;
    for (; r < nr; r++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(t2 + r * rb + 32 * b));
        const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(sh)), three);
        const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(sh + 2)), three);
        _mm256_store_si256((__m256i *)(a + 64 * r), lo);
        _mm256_store_si256((__m256i *)(a + 64 * r + 32), hi);
    }
    if (r < 16) memset(a + 64 * r, 0, (size_t)(16 - r) * 64);
}

/* acc[r * ldacc + t] = sum over columns of code * x for rows [0, nr) of t2
 * and tokens [0, 16 ntt) (packed in xpack: ntt x nsteps tiles of 1 KiB). */
void TILES_FN(const uint8_t *t2, size_t rb, uint64_t nr, const int8_t *xpack, uint64_t ntt, size_t nsteps,
              int32_t *acc, size_t ldacc)
{
    _Alignas(64) uint8_t a[16 * 64];
    _Alignas(64) int32_t c[4][16 * 16];
    TILE_CONFIG();
    /* TILES_RB row tiles take each pass of (up to) four token tiles in turn,
     * so that the pass's packed activations (nsteps KiB per token tile) are
     * read from L2 for all of them: with every row tile running all passes,
     * 256 tokens (16 token tiles, 3.5 MiB packed at 14336 columns) streamed
     * the whole packed input from L3 per row tile. */
    for (uint64_t rb0 = 0; rb0 < nr; rb0 += 16 * TILES_RB) {
        const uint64_t rbend = nr - rb0 < 16 * TILES_RB ? nr : rb0 + 16 * TILES_RB;
        for (uint64_t t0 = 0; t0 < ntt; t0 += 4) {
            const uint64_t nq = ntt - t0 < 4 ? ntt - t0 : 4;
            const int8_t *xb = xpack + t0 * nsteps * 1024;
            const size_t tstride = nsteps * 1024;
            for (uint64_t r0 = rb0; r0 < rbend; r0 += 16) {
                const uint64_t rows = nr - r0 < 16 ? nr - r0 : 16;
                TILE_ZERO(0);
                TILE_ZERO(1);
                TILE_ZERO(2);
                TILE_ZERO(3);
                for (size_t s = 0; s < nsteps; s++) {
#if TILES_PF
                    if (s % 4 == 0 && 16 * s + TILES_PF < rb)
                        for (uint64_t r = 0; r < rows; r++)
                            _mm_prefetch((const char *)(t2 + (r0 + r) * rb + 16 * s + TILES_PF), _MM_HINT_T0);
#endif
                    tiles_decode(t2 + r0 * rb, rb, rows, s, a);
                    TILE_LOAD(4, a, 64);
                    TILE_LOAD(5, xb + s * 1024, 64);
                    TILE_DP(0, 4, 5);
                    if (nq > 1) {
                        TILE_LOAD(5, xb + tstride + s * 1024, 64);
                        TILE_DP(1, 4, 5);
                    }
                    if (nq > 2) {
                        TILE_LOAD(5, xb + 2 * tstride + s * 1024, 64);
                        TILE_DP(2, 4, 5);
                    }
                    if (nq > 3) {
                        TILE_LOAD(5, xb + 3 * tstride + s * 1024, 64);
                        TILE_DP(3, 4, 5);
                    }
                }
                TILE_STORE(0, c[0], 64);
                TILE_STORE(1, c[1], 64);
                TILE_STORE(2, c[2], 64);
                TILE_STORE(3, c[3], 64);
                for (uint64_t q = 0; q < nq; q++)
                    for (uint64_t r = 0; r < rows; r++)
                        memcpy(acc + (r0 + r) * ldacc + (t0 + q) * 16, c[q] + 16 * r, 16 * sizeof(int32_t));
            }
        }
    }
    TILE_RELEASE();
}
