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

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

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
 * against 3287-3504, 8 and 16 tokens as mixed: within the noise.
 *
 * Where the time goes (2026-11-28, a microbenchmark of this function alone
 * on such a host, one thread, 256 rows of 14336 columns in L2, ns per step
 * of 16 rows, 64 tokens): the four products alone 27; with the four B tile
 * loads from L2 89; with the A decode and its tile load 153 (the decode
 * without the tile load 122).  So each step paid about 60 ns for B and 60
 * for A, where the products take 27.
 * Now (same microbenchmark, another machine of the kind, ns per step, 16 /
 * 64 tokens): the step of before 44 / 98; both steps of a block decoded
 * from one load of each row 33 / 94 (with AVX-512 instructions 31 / 94);
 * that AVX-512 decode of block b + 1 done while the tile unit works on
 * block b 28 / 83, and with all 16 threads and the weights from memory
 * 60-69 / 155-161 against 78 / 164-186.  What is kept is the AVX2 decode
 * one block ahead (the emulated test path runs the same decode), measured
 * only through bitnet-bench on the host, 4096 x 14336, weights rotated,
 * three alternating rounds, medians in us, before / after (both with
 * 64-row pieces, 4 per thread): 8 tokens 343-396 / 290-340, 16
 * tokens 368-412 / 325-333, 64 tokens 736-790 / 720-786, 256 tokens
 * 2860-3224 / 2881-3201.
 * Tried and not kept, the same day: A in tiles 4 and 5 by turns and B in
 * tiles 6 and 7 by turns (so that no tile load waits for the product that
 * reads the tile before), and 2 x 2 blocking (two row tiles x two token
 * tiles, A in tiles 4 and 5, B in 6 and 7: half the B loads, twice the
 * decodes).  bitnet-bench as above, the one-B-tile step of before against
 * the two: 64 tokens 786-874 / 948-1061 / 929-1113, 256 tokens 2909-3201 /
 * 3653-5064 / 3682-3726; the microbenchmark agreed (one thread, 64 tokens,
 * ns per step: 153 / 213 / 215).  The k range in chunks of 4 or 8 blocks,
 * each chunk run by all the row tiles of a call (so that the chunk's B
 * stays in L1, the C tiles kept in memory between chunks) was faster on
 * one thread from L2 (64 tokens 83 -> 65-73 ns a step) and slower with 16
 * threads and the weights from memory (155-161 -> 179-238): each row then
 * reads its codes in short runs.
 */
#ifndef TILES_PF
#define TILES_PF 512
#endif
#ifndef TILES_RB
#define TILES_RB 16 /* row tiles sharing each pass over the packed activations */
#endif

/* A of both steps of block b: rows [0, nr) of 16 from t2 (rows rb bytes
 * apart), the codes of columns 128 b + [0, 64) into a0 and of 128 b +
 * [64, 128) into a1, as bytes, from one load of each row; rows past nr are
 * zero.  AVX2. */
static inline void tiles_decode(const uint8_t *t2, size_t rb, uint64_t nr, size_t b, uint8_t *a0, uint8_t *a1)
{
    const __m256i three = _mm256_set1_epi8(3);
    uint64_t r = 0;
    for (; r < nr; r++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(t2 + r * rb + 32 * b));
        _mm256_store_si256((__m256i *)(a0 + 64 * r), _mm256_and_si256(v, three));
        _mm256_store_si256((__m256i *)(a0 + 64 * r + 32), _mm256_and_si256(_mm256_srli_epi16(v, 2), three));
        _mm256_store_si256((__m256i *)(a1 + 64 * r), _mm256_and_si256(_mm256_srli_epi16(v, 4), three));
        _mm256_store_si256((__m256i *)(a1 + 64 * r + 32), _mm256_and_si256(_mm256_srli_epi16(v, 6), three));
    }
    if (r < 16) {
        memset(a0 + 64 * r, 0, (size_t)(16 - r) * 64);
        memset(a1 + 64 * r, 0, (size_t)(16 - r) * 64);
    }
}

/* Step s: A from buffer ab into tile 4, then each token tile's B into tile
 * 5 and its product.  fl: the step ends group g, and the includer's
 * TILE_DP_FLUSH(c, g) (where defined) takes the product with the group's
 * float step on the result, leaving tile c zero; without it the products
 * are plain and TILES_GROUP_STEP follows. */
#ifdef TILE_DP_FLUSH
#define TILES_FLUSH 1
#define TILES_DP(c, fl, g)                                                                                   \
    do {                                                                                                     \
        if (fl) TILE_DP_FLUSH(c, g);                                                                         \
        else TILE_DP(c, 4, 5);                                                                               \
    } while (0)
#else
#define TILES_FLUSH 0
#define TILES_DP(c, fl, g) TILE_DP(c, 4, 5)
#endif
#define TILES_STEP(ab, s, fl, g)                                                                             \
    do {                                                                                                     \
        TILE_LOAD(4, ab, 64);                                                                                \
        TILE_LOAD(5, xb + (s)*1024, 64);                                                                     \
        TILES_DP(0, fl, g);                                                                                  \
        if (nq > 1) {                                                                                        \
            TILE_LOAD(5, xb + tstride + (s)*1024, 64);                                                       \
            TILES_DP(1, fl, g);                                                                              \
        }                                                                                                    \
        if (nq > 2) {                                                                                        \
            TILE_LOAD(5, xb + 2 * tstride + (s)*1024, 64);                                                   \
            TILES_DP(2, fl, g);                                                                              \
        }                                                                                                    \
        if (nq > 3) {                                                                                        \
            TILE_LOAD(5, xb + 3 * tstride + (s)*1024, 64);                                                   \
            TILES_DP(3, fl, g);                                                                              \
        }                                                                                                    \
    } while (0)

/* The float step of group g for the nq token tiles of a pass, from the C
 * tiles (stored to c), then the C tiles zeroed: s[q][16 r + n] = s + (float)(
 * c - xg[g][t]) * d[r][g], the definition's order and roundings (no FMA). */
#define TILES_GROUP_STEP(g)                                                                                  \
    do {                                                                                                     \
        TILE_STORE(0, c[0], 64);                                                                             \
        if (nq > 1) TILE_STORE(1, c[1], 64);                                                                 \
        if (nq > 2) TILE_STORE(2, c[2], 64);                                                                 \
        if (nq > 3) TILE_STORE(3, c[3], 64);                                                                 \
        for (uint64_t q = 0; q < nq; q++) {                                                                  \
            const int32_t *xg = grp->xg + (g) * grp->ldx + (t0 + q) * 16;                                    \
            for (uint64_t r = 0; r < rows; r++) {                                                            \
                const float dg = grp->d[(r0 + r) * grp->ng + (g)];                                           \
                float *sq = s[q] + 16 * r;                                                                   \
                const int32_t *cq = c[q] + 16 * r;                                                           \
                for (int n = 0; n < 16; n++) {                                                               \
                    const float p = (float)(int32_t)((uint32_t)cq[n] - (uint32_t)xg[n]) * dg;                \
                    sq[n] = sq[n] + p;                                                                       \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
        TILE_ZERO(0);                                                                                        \
        if (nq > 1) TILE_ZERO(1);                                                                            \
        if (nq > 2) TILE_ZERO(2);                                                                            \
        if (nq > 3) TILE_ZERO(3);                                                                            \
    } while (0)

/* acc[r * ldacc + t] = sum over columns of code * x for rows [0, nr) of t2
 * and tokens [0, 16 ntt) (packed in xpack: ntt x nsteps tiles of 1 KiB).
 * With grp (group scales of whole blocks), grp->sums[r * ldacc + t] = the
 * float chain of row r and token t over its groups instead (acc unused). */
void TILES_FN(const uint8_t *t2, size_t rb, uint64_t nr, const int8_t *xpack, uint64_t ntt, size_t nsteps,
              int32_t *acc, size_t ldacc, const bn_t2_tiles_grp *grp)
{
    _Alignas(64) uint8_t a[2][2][16 * 64]; /* [block parity][step of the block] */
    _Alignas(64) int32_t c[4][16 * 16];
    _Alignas(64) float s[4][16 * 16]; /* group scales: the chains of a row tile's pass */
    const size_t nblk = (nsteps + 1) / 2;  /* blocks of 128 columns; the last may have one step */
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
                const uint8_t *w = t2 + r0 * rb;
                TILE_ZERO(0);
                TILE_ZERO(1);
                TILE_ZERO(2);
                TILE_ZERO(3);
                if (grp) memset(s, 0, sizeof s);
                /* block b + 1 is decoded while the tile unit works on block b */
                tiles_decode(w, rb, rows, 0, a[0][0], a[0][1]);
                for (size_t b = 0; b < nblk; b++) {
                    const int cur = (int)(b & 1);
#if TILES_PF
                    if (b % 2 == 0 && 32 * b + TILES_PF < rb)
                        for (uint64_t r = 0; r < rows; r++)
                            _mm_prefetch((const char *)(w + r * rb + 32 * b + TILES_PF), _MM_HINT_T0);
#endif
                    /* the last step of a group (block b's second, or its only one) ends it */
                    const int gend = grp && ((b + 1) % grp->bpg == 0 || b + 1 == nblk), two = 2 * b + 1 < nsteps;
                    const size_t g = grp ? b / grp->bpg : 0;
                    TILES_STEP(a[cur][0], 2 * b, gend && !two, g);
                    if (b + 1 < nblk) tiles_decode(w, rb, rows, b + 1, a[cur ^ 1][0], a[cur ^ 1][1]);
                    if (two) TILES_STEP(a[cur][1], 2 * b + 1, gend, g);
                    if (gend && !TILES_FLUSH) TILES_GROUP_STEP(g);
                }
                if (grp) {
                    for (uint64_t q = 0; q < nq; q++)
                        for (uint64_t r = 0; r < rows; r++)
                            memcpy(grp->sums + (r0 + r) * ldacc + (t0 + q) * 16, s[q] + 16 * r, 16 * sizeof(float));
                    continue;
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
