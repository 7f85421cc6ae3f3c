/*
 * bitlinear_vnni.c - AVX-512 VNNI T2 dot kernel (compiled with
 * -mavx512vnni): vpdpbusd multiplies the unsigned codes (0..2) with int8
 * activations and adds groups of four straight into int32 lanes.  Layout as
 * in bitlinear_avx512.c.  With one token, four accumulators break the
 * vpdpbusd latency chain.
 */
#include "bitlinear_x512.h"

#define LD(p) _mm512_loadu_si512((const void *)(p))

/* A load kept in a register: without the empty asm the compiler folds it
 * into both vpdpbusd that use it, loading the same 64 bytes twice. */
INLINE __m512i LD_REG(const int8_t *p)
{
    __m512i v = _mm512_loadu_si512((const void *)p);
    __asm__("" : "+v"(v));
    return v;
}

/* acc += the vpdpbusd of a (unsigned) and b (signed), in place.  Through
 * the intrinsic, GCC 12 copied the accumulators of gemv_rows in and out of
 * the vpdpbusd each pair of blocks: 16 register moves beside 16 vector
 * operations with two rows, 12 once the loop had no branch; the asm's "+v"
 * keeps each accumulator in its register (one move is left).  Where its
 * codes are in the cache, the one-token loop is bound by those vector
 * operations, which share two ports, not by the cache.  An H100 machine's
 * 16-vCPU host (Xeon model 207), 2026-12-07, 4096 x 14336 at one token, tensor
 * scale, four alternating rounds of `bitnet-bench --device cpu --threads N
 * --op bitlinear --tokens 1 --scale tensor --llc 1` against the loop
 * before (one loop, the intrinsic), medians in us: 1 thread 786-1077
 * against 1018-1235, 8 threads 118-135 against 145-158 (five more rounds
 * later, the host busier: 123-182 against 156-203, faster in four), 16
 * threads 73-84 against 91-97; weights rotated past the caches, level (8
 * threads 216-326 against 260-359).  The same change applied to every
 * vpdpbusd of this file (the kernels of 2 to 8 tokens and of group scales)
 * moved nothing beyond the noise of the 2-vCPU Zen 4 VM and is not made. */
INLINE __m512i dpbusd(__m512i acc, __m512i a, __m512i b)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}

/* One pair of blocks (256 columns) of NR rows: u[r] its codes. */
INLINE void gemv_step(const __m512i *u, const int NR, const int8_t *xp, __m512i a[2][4])
{
    const __m512i m[4] = {_mm512_set1_epi8(3), _mm512_set1_epi8(12), _mm512_set1_epi8(48),
                          _mm512_set1_epi8((char)192)};
    #pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const __m512i xv = LD_REG(xp + 64 * k);
        #pragma GCC unroll 2
        for (int r = 0; r < NR; r++) a[r][k] = dpbusd(a[r][k], _mm512_and_si512(u[r], m[k]), xv);
    }
}

/* gemv_step over whole pairs p0 .. p1 - 1, each row's stream prefetched
 * BL_PF_BYTES ahead where pf (a constant: no test in the loop). */
INLINE void gemv_pairs(const uint8_t *w, size_t rb, const int NR, const int8_t *x, size_t p0, size_t p1, const int pf,
                       __m512i a[2][4])
{
    for (size_t p = p0; p < p1; p++) {
        __m512i u[2];
        #pragma GCC unroll 2
        for (int r = 0; r < NR; r++) {
            u[r] = LD(w + r * rb + 64 * p);
            if (pf) _mm_prefetch((const char *)(w + r * rb + 64 * p + BL_PF_BYTES), _MM_HINT_T1);
        }
        gemv_step(u, NR, x + 256 * p, a);
    }
}

/* One token.  vpdpbusd takes unsigned bytes up to 255, so the codes of
 * shift k are used in place as code * 4^k (w & (3 << 2k), no shift), each
 * shift in its own accumulator; every lane of accumulator k holds a multiple
 * of 4^k, so an arithmetic shift right by 2k per lane is exact and one
 * horizontal sum ends the row.  |sum| <= 4^3 * 256 * 32 * nblocks must fit
 * in int32: BN_T2_NOSHIFT_MAX_BLOCKS (bitlinear.h).
 *
 * The weights stream from memory once; a software prefetch into L2
 * BL_PF_BYTES ahead (up to pf_last, the last line the caller will read)
 * keeps enough lines in flight.  Without it one core read at 10 GB/s against
 * a read roofline of 24 GB/s on a Zen 4 VM (4 KiB pages; the hardware
 * prefetcher alone did not run far enough ahead of this loop), with it at
 * 21-27 GB/s; L1 prefetches or distances under 8 KiB gained less.
 * Again on such a VM (2026-12-05; 4096 x 14336, one token, rotated, tensor
 * scale, bitnet-bench --min-time 3, medians in ms of 4 runs each, 1 / 2
 * threads): the hint T1 0.65-0.70 / 0.39-0.51, T2 0.66-0.74 / 0.48-0.50,
 * T0 1.21-1.27 / 0.66-0.73, NTA 1.23-1.32 / 0.65-0.70, no prefetch
 * 1.37-1.45 / 0.73-0.85; distances of 12, 24, 48 and 96 KiB (3 runs)
 * 0.65-0.72, 0.68-0.71, 0.69-0.75, 0.73-0.78 / 0.38-0.52 across the four.
 * Transparent huge pages for every mapping (the kernel's "always" against
 * "madvise"; nothing here asks for them) raised one thread's plain read
 * from 23-25 to 30-31 GB/s, this loop far less: one thread faster in 3 of
 * 5 alternating pairs (0.67-0.77 against 0.65-0.81 ms), two threads in 5
 * of 6 by 0-9% (0.39-0.53 against 0.40-0.54), inside the VM's spread from
 * run to run; with the prefetch the loop does not wait on page walks, and
 * no allocation asks for huge pages.
 *
 * NR rows rb bytes apart at once (gemv2: two): each 64-byte activation load
 * feeds every row, 3 loads per 4 vpdpbusd a row instead of 5, and each row's
 * stream is prefetched.  On a 2-vCPU AMD EPYC (Zen 4) VM, 4096 x 14336 at
 * one token with its weights in the cache (bitnet-bench --llc 1, six
 * alternating rounds, medians): one thread 0.427-0.472 ms with one row at a
 * time, 0.348-0.378 with two; two threads 0.221-0.254 against 0.185-0.212.
 * In three rounds of one thread, three rows took 0.34 ms (no better than
 * two) and four 0.44-0.45 (worse).  Weights rotated past the caches (2
 * threads): one row 0.42-0.50 ms, two 0.40-0.49.  Prefetching only one of
 * the two streams left every other row's lines cold: 0.75 ms. */
INLINE void gemv_rows(const uint8_t *w, size_t rb, const int NR, const int8_t *x, size_t nblocks, int32_t *acc,
                      const uint8_t *pf_last)
{
    const size_t pfd = BL_PF_BYTES;
    __m512i a[2][4];
    #pragma GCC unroll 2
    for (int r = 0; r < NR; r++) a[r][0] = a[r][1] = a[r][2] = a[r][3] = _mm512_setzero_si512();
    /* Loops without branches (see dpbusd): whole pairs with their prefetch
     * while the last row's stays at or before pf_last, whole pairs without
     * it, then a last half pair, where one loop tested the tail's masked
     * load and clamped each prefetch. */
    const size_t nfull = nblocks / 2;
    size_t npf = 0;
    if (pf_last) {
        const uint8_t *last_row = w + (size_t)(NR - 1) * rb + pfd;
        npf = pf_last >= last_row ? (size_t)(pf_last - last_row) / 64 + 1 : 0;
        if (npf > nfull) npf = nfull;
    }
    gemv_pairs(w, rb, NR, x, 0, npf, 1, a);
    gemv_pairs(w, rb, NR, x, npf, nfull, 0, a);
    const size_t p = nfull;
    if (nblocks % 2) {
        __m512i u[2];
        #pragma GCC unroll 2
        for (int r = 0; r < NR; r++) u[r] = load_pair(w + r * rb, p, nblocks);
        gemv_step(u, NR, x + 256 * p, a);
    }
    #pragma GCC unroll 2
    for (int r = 0; r < NR; r++) {
        const __m512i s = _mm512_add_epi32(_mm512_add_epi32(a[r][0], _mm512_srai_epi32(a[r][1], 2)),
                                           _mm512_add_epi32(_mm512_srai_epi32(a[r][2], 4), _mm512_srai_epi32(a[r][3], 6)));
        acc[r] = _mm512_reduce_add_epi32(s);
    }
}

/* Rows past BN_T2_NOSHIFT_MAX_BLOCKS blocks: the codes shifted down first. */
static void dot_1_shift(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc, const uint8_t *pf_last)
{
    const size_t pfd = BL_PF_BYTES;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    const size_t npairs = (nblocks + 1) / 2;
    const __m512i mask = _mm512_set1_epi8(3);
    for (size_t p = 0; p < npairs; p++) {
        const __m512i wb = load_pair(w, p, nblocks);
        if (pf_last) pf_l2(w + 64 * p + pfd, pf_last);
        const int8_t *xp = x + 256 * p;
        a0 = _mm512_dpbusd_epi32(a0, _mm512_and_si512(wb, mask), LD(xp));
        a1 = _mm512_dpbusd_epi32(a1, _mm512_and_si512(_mm512_srli_epi16(wb, 2), mask), LD(xp + 64));
        a2 = _mm512_dpbusd_epi32(a2, _mm512_and_si512(_mm512_srli_epi16(wb, 4), mask), LD(xp + 128));
        a3 = _mm512_dpbusd_epi32(a3, _mm512_and_si512(_mm512_srli_epi16(wb, 6), mask), LD(xp + 192));
    }
    acc[0] = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)));
}

static void dot_1(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc, const uint8_t *pf_last)
{
    if (nblocks <= BN_T2_NOSHIFT_MAX_BLOCKS) gemv_rows(w, 0, 1, x, nblocks, acc, pf_last);
    else dot_1_shift(w, x, nblocks, acc, pf_last);
}

void bn_t2_gemv_vnni(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc, const uint8_t *pf_last)
{
    dot_1(w, x, nblocks, acc, pf_last);
}

void bn_t2_gemv2_vnni(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, int32_t *acc,
                      const uint8_t *pf_last)
{
    if (nblocks <= BN_T2_NOSHIFT_MAX_BLOCKS) {
        gemv_rows(w, rb, 2, x, nblocks, acc, pf_last);
        return;
    }
    dot_1_shift(w, x, nblocks, acc, pf_last);
    dot_1_shift(w + rb, x, nblocks, acc + 1, pf_last);
}

INLINE void dot_nt(const uint8_t *w, const int8_t *x, size_t xstride, const int nt, size_t nblocks, int32_t *acc)
{
    __m512i a[BN_T2_MAXT][2];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) a[t][0] = a[t][1] = _mm512_setzero_si512();
    const size_t npairs = (nblocks + 1) / 2;
    for (size_t p = 0; p < npairs; p++) {
        const __m512i wb = load_pair(w, p, nblocks);
        __m512i c[4];
        code_planes(wb, c);
        const __m512i c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const int8_t *xp = x + (size_t)t * xstride + 256 * p;
            a[t][0] = _mm512_dpbusd_epi32(a[t][0], c0, LD(xp));
            a[t][1] = _mm512_dpbusd_epi32(a[t][1], c1, LD(xp + 64));
            a[t][0] = _mm512_dpbusd_epi32(a[t][0], c2, LD(xp + 128));
            a[t][1] = _mm512_dpbusd_epi32(a[t][1], c3, LD(xp + 192));
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm512_reduce_add_epi32(_mm512_add_epi32(a[t][0], a[t][1]));
}

/* Two rows at once: each activation load feeds both rows. */
INLINE void dot2_nt(const uint8_t *w0, const uint8_t *w1, const int8_t *x, size_t xstride, const int nt,
                    size_t nblocks, int32_t *acc0, int32_t *acc1)
{
    const __m512i mask = _mm512_set1_epi8(3);
    __m512i a0[BN_T2_MAXT], a1[BN_T2_MAXT];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) a0[t] = a1[t] = _mm512_setzero_si512();
    const size_t npairs = (nblocks + 1) / 2;
    for (size_t p = 0; p < npairs; p++) {
        const __m512i u = load_pair(w0, p, nblocks), v = load_pair(w1, p, nblocks);
        const __m512i u0 = _mm512_and_si512(u, mask), v0 = _mm512_and_si512(v, mask);
        const __m512i u1 = _mm512_and_si512(_mm512_srli_epi16(u, 2), mask), v1 = _mm512_and_si512(_mm512_srli_epi16(v, 2), mask);
        const __m512i u2 = _mm512_and_si512(_mm512_srli_epi16(u, 4), mask), v2 = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
        const __m512i u3 = _mm512_and_si512(_mm512_srli_epi16(u, 6), mask), v3 = _mm512_and_si512(_mm512_srli_epi16(v, 6), mask);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const int8_t *xp = x + (size_t)t * xstride + 256 * p;
            __m512i xv = LD_REG(xp);
            a0[t] = _mm512_dpbusd_epi32(a0[t], u0, xv);
            a1[t] = _mm512_dpbusd_epi32(a1[t], v0, xv);
            xv = LD_REG(xp + 64);
            a0[t] = _mm512_dpbusd_epi32(a0[t], u1, xv);
            a1[t] = _mm512_dpbusd_epi32(a1[t], v1, xv);
            xv = LD_REG(xp + 128);
            a0[t] = _mm512_dpbusd_epi32(a0[t], u2, xv);
            a1[t] = _mm512_dpbusd_epi32(a1[t], v2, xv);
            xv = LD_REG(xp + 192);
            a0[t] = _mm512_dpbusd_epi32(a0[t], u3, xv);
            a1[t] = _mm512_dpbusd_epi32(a1[t], v3, xv);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        acc0[t] = _mm512_reduce_add_epi32(a0[t]);
        acc1[t] = _mm512_reduce_add_epi32(a1[t]);
    }
}

void bn_t2_dot2_vnni(const uint8_t *w0, const uint8_t *w1, const int8_t *x, size_t xstride, int nt, size_t nblocks,
                     int32_t *acc0, int32_t *acc1)
{
    switch (nt) {
    case 1: /* one stream at a time reads faster (see bitlinear.c) */
        dot_1(w0, x, nblocks, acc0, NULL);
        dot_1(w1, x, nblocks, acc1, NULL);
        break;
    case 2: dot2_nt(w0, w1, x, xstride, 2, nblocks, acc0, acc1); break;
    case 3: dot2_nt(w0, w1, x, xstride, 3, nblocks, acc0, acc1); break;
    case 4: dot2_nt(w0, w1, x, xstride, 4, nblocks, acc0, acc1); break;
    case 5: dot2_nt(w0, w1, x, xstride, 5, nblocks, acc0, acc1); break;
    case 6: dot2_nt(w0, w1, x, xstride, 6, nblocks, acc0, acc1); break;
    case 7: dot2_nt(w0, w1, x, xstride, 7, nblocks, acc0, acc1); break;
    default: dot2_nt(w0, w1, x, xstride, 8, nblocks, acc0, acc1); break;
    }
}

void bn_t2_dot_vnni(const uint8_t *w, const int8_t *x, size_t xstride, int nt, size_t nblocks, int32_t *acc)
{
    switch (nt) {
    case 1: dot_1(w, x, nblocks, acc, NULL); break;
    case 2: dot_nt(w, x, xstride, 2, nblocks, acc); break;
    case 3: dot_nt(w, x, xstride, 3, nblocks, acc); break;
    case 4: dot_nt(w, x, xstride, 4, nblocks, acc); break;
    case 5: dot_nt(w, x, xstride, 5, nblocks, acc); break;
    case 6: dot_nt(w, x, xstride, 6, nblocks, acc); break;
    case 7: dot_nt(w, x, xstride, 7, nblocks, acc); break;
    default: dot_nt(w, x, xstride, 8, nblocks, acc); break;
    }
}

/* Sums per 32-column sub-block (acc[4*b + k]) for group scales, pairwise
 * layout: the vpdpbusd of shift k over a pair holds the 8 partial sums of
 * sub-block k of block 2p in lanes 0..7 and of block 2p+1 in lanes 8..15;
 * two unpack rounds and a 128-bit lane swap add each group of 8 lanes. */
void bn_t2_dot_sub_vnni(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc)
{
    const __m512i zero = _mm512_setzero_si512();
    const size_t npairs = (nblocks + 1) / 2;
    for (size_t p = 0; p < npairs; p++) {
        __m512i c[4];
        code_planes(load_pair(w, p, nblocks), c);
        const int8_t *xp = x + 256 * p;
        const __m512i v0 = _mm512_dpbusd_epi32(zero, c[0], LD(xp)), v1 = _mm512_dpbusd_epi32(zero, c[1], LD(xp + 64));
        const __m512i v2 = _mm512_dpbusd_epi32(zero, c[2], LD(xp + 128)), v3 = _mm512_dpbusd_epi32(zero, c[3], LD(xp + 192));
        /* per 128-bit lane: [v0 a+c, v1 a+c, v0 b+d, v1 b+d] (lanes a b c d) */
        const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
        const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3), _mm512_unpackhi_epi32(v2, v3));
        /* per 128-bit lane: the sums of its 4 lanes of v0, v1, v2, v3 */
        __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
        /* 128-bit lanes 0 + 1 (block 2p), 2 + 3 (block 2p + 1) */
        t = _mm512_add_epi32(t, _mm512_shuffle_i32x4(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
        const __m256i r = _mm512_castsi512_si256(_mm512_shuffle_i32x4(t, t, _MM_SHUFFLE(2, 0, 2, 0)));
        if (2 * p + 1 < nblocks) _mm256_storeu_si256((__m256i *)(acc + 8 * p), r);
        else _mm_storeu_si128((__m128i *)(acc + 8 * p), _mm256_castsi256_si128(r));
    }
}

/* ---- group scales of whole blocks (bpg blocks a group: 1, or even) ---------
 * A pair's four code planes against its four activation vectors leave, per
 * token and row, one vector whose lanes 0..7 hold the sums of block 2p and
 * lanes 8..15 those of block 2p + 1: with groups of one block, the two
 * halves are two groups; with groups of 2h blocks, h pairs add up to one.
 * The lanes of 16 such vectors are added in one transposing tree (grp_l1 ..
 * grp_l3), a few instructions per group where a row's sums per 32-column
 * sub-block (dot_sub) and then per group took several times the product's
 * own work.  The codes are shifted down (0..2), so every sum is exact in
 * int32 modulo 2^32, like the others of this file. */

/* Per 128-bit lane l of a and b: [a0 + a2, b0 + b2, a1 + a3, b1 + b3]. */
INLINE __m512i grp_l1(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}
/* From two grp_l1 results of (a, b) and (c, d): per 128-bit lane, the sums
 * of that lane's four int32 of a, b, c, d. */
INLINE __m512i grp_l2(__m512i ab, __m512i cd)
{
    return _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
}
/* From two grp_l2 results u (vectors 0..3) and v (4..7): 128-bit lanes
 * [u0 + u1, u2 + u3, v0 + v1, v2 + v3], i.e. the halves (8 int32) of each
 * vector summed: lanes 0..3 vectors 0..3 low halves, 4..7 their high
 * halves, 8..11 vectors 4..7 low, 12..15 high.  Applied to two of those
 * (vectors 0..7 and 8..15), the whole sums of vectors 0..15 in order. */
INLINE __m512i grp_l3(__m512i u, __m512i v)
{
    return _mm512_add_epi32(_mm512_shuffle_i32x4(u, v, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(u, v, _MM_SHUFFLE(3, 1, 3, 1)));
}
/* Eight vectors to grp_l3's half sums. */
INLINE __m512i grp_halves8(const __m512i v[8])
{
    return grp_l3(grp_l2(grp_l1(v[0], v[1]), grp_l1(v[2], v[3])), grp_l2(grp_l1(v[4], v[5]), grp_l1(v[6], v[7])));
}
/* One level of grp_l1 / grp_l2 in 16-bit lanes, for lanes that fit int16
 * (vpackssdw saturates beyond): the pack puts the lanes of a and b side by
 * side and vpmaddwd adds neighbours, two operations where grp_l1 and grp_l2
 * take three.  Two levels leave the lanes as grp_l2 does. */
INLINE __m512i grp_pk(__m512i a, __m512i b)
{
    return _mm512_madd_epi16(_mm512_packs_epi32(a, b), _mm512_set1_epi16(1));
}
/* grp_halves8 for lanes of |v| <= 2^13, whose first level's sums fit int16. */
INLINE __m512i grp_halves8_pk(const __m512i v[8])
{
    return grp_l3(grp_pk(grp_pk(v[0], v[1]), grp_pk(v[2], v[3])), grp_pk(grp_pk(v[4], v[5]), grp_pk(v[6], v[7])));
}

/* The code planes of pair p of rows w and w + rb for the one-token group
 * kernels: c[r][0] and c[r][2] the codes of shifts 0 and 2 (one shift of
 * the word), c[r][1] and c[r][3] those of shifts 1 and 3 in place (4 *
 * code); each row's stream prefetched as in gemv_rows.  full: the pair
 * holds no odd last block and the prefetch stays before pf_last, so neither
 * is checked. */
INLINE void grp_planes2(const uint8_t *w, size_t rb, size_t p, size_t nblocks, __m512i c[2][4], const uint8_t *pf_last,
                        const int full)
{
    const __m512i m3 = _mm512_set1_epi8(3), m12 = _mm512_set1_epi8(12);
    #pragma GCC unroll 2
    for (int r = 0; r < 2; r++) {
        const uint8_t *q = w + r * rb;
        const __m512i wb = full ? LD(q + 64 * p) : load_pair(q, p, nblocks), hi = _mm512_srli_epi16(wb, 4);
        c[r][0] = _mm512_and_si512(wb, m3);
        c[r][1] = _mm512_and_si512(wb, m12);
        c[r][2] = _mm512_and_si512(hi, m3);
        c[r][3] = _mm512_and_si512(hi, m12);
        if (full && pf_last) _mm_prefetch((const char *)(q + 64 * p + BL_PF_BYTES), _MM_HINT_T1);
        else if (pf_last) pf_l2(q + 64 * p + BL_PF_BYTES, pf_last);
    }
}

/* One token, two rows (w and w + rb; rb 0 repeats the row): the sums of
 * (code - 1) * x of each group, ng of them, into o0 and o1 (xg: the sums of
 * x per group).  The activation loads feed both rows; each row's stream is
 * prefetched as in gemv_rows.
 *
 * Groups of one block or one pair (128, 256 columns: grp1_small).  A pair's
 * codes of shifts 0 and 2 go to accumulator a, those of shifts 1 and 3 (in
 * place, 4 * code) to b.  Their lanes are small (|a| <= 8 columns * 2 * 128
 * = 2048, |b| <= 8192), so the first two levels of the tree run in 16-bit
 * lanes: vpackssdw puts the lanes of two vectors side by side and vpmaddwd
 * adds neighbours, by 4 for a, by 1 for b through vpdpwssd, which also adds
 * 4 * a to b; the sums then are 4 times the group's, at most 32512 and at
 * least -32768, so the second pack does not saturate either.  Two operations
 * a level where grp_l1 and grp_l2 take three, and no separate shift back per
 * pair: the 128-bit lanes go through grp_l3, and 16 groups' sums are shifted
 * back at once (exact, multiples of 4).  Four pairs at a time keep the
 * partial trees in registers; pairs away from the row's end are read
 * without checks (full).  Against the kernel before (grp1_rows for these
 * groups: a + b / 4 per pair, the 16 vectors through grp_halves8), on a Zen
 * 4 VM, 4096 x 14336 in cache, one thread, four alternating rounds: group
 * 256 0.60-0.64 -> 0.54-0.55 ms, group 128 0.69-0.80 -> 0.58-0.66 (tensor
 * scale 0.34-0.38 in the same runs).
 *
 * Tried and not kept since: the first level's 4 * a + b taken in 16-bit
 * lanes by a shift and an add, then one vpmaddwd (one multiply-unit
 * instruction a pair of pairs where vpmaddwd and vpdpwssd take two): four
 * alternating rounds, group 256 0.540-0.556 ms against 0.526-0.543, group
 * 128 0.582-0.645 against 0.573-0.621; a and b merged per pair by
 * vpdpwssd with (4, 0) word pairs before one pack (a shuffle less, a
 * multiply more), group 256 0.532-0.549 against 0.530-0.543, group 128
 * 0.594-0.615 against 0.565-0.594.  With the weights in L2 (256 x
 * 14336) a row takes as long as in L3, for both scale kinds: the count of
 * vector instructions sets the pace, not the cache or one unit.
 *
 * Tried and not kept before that (same VM and shape, three alternating
 * rounds): 16 rows at once with the rows in the lanes (one tree per group,
 * the 16 rows' float chains side by side, their scales gathered, the next
 * 16 rows prefetched), 0.66-0.68 ms at group 256 against 0.59-0.60,
 * 0.77-0.82 against 0.65-0.71 at 128, the same at 512; the code planes taken
 * apart by GF2P8AFFINEQB (one accumulator, no shift), 0.68-0.92 ms against
 * 0.61-0.69 at group 256; running sums never reset (a group's sum the
 * difference of two) with the tree taken four vectors at a time, so that
 * nothing is spilled: within the noise at 256 and 128; at 512 0.51-0.52
 * against 0.56-0.59 in three rounds, within the noise in three more.
 *
 * Groups of 2h pairs (h >= 2, 512 columns and more: grp1_rows), where the
 * lanes may outgrow 16 bits: a + b / 4 per group in 32-bit lanes, 16 groups'
 * vectors through grp_halves8 twice. */
INLINE void grp1_rows(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, const size_t h, size_t ng,
                      const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last)
{
    const size_t npairs = (nblocks + 1) / 2, nunits = (npairs + h - 1) / h;
    int32_t *const o[2] = {o0, o1};
    for (size_t u0 = 0; u0 < nunits; u0 += 16) {
        const size_t nu = nunits - u0 < 16 ? nunits - u0 : 16;
        __m512i v[2][16];
        for (size_t u = 0; u < nu; u++) {
            __m512i a[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}, b[2] = {a[0], a[0]};
            const size_t p0 = (u0 + u) * h, p1 = p0 + h < npairs ? p0 + h : npairs;
            for (size_t p = p0; p < p1; p++) {
                __m512i c[2][4];
                grp_planes2(w, rb, p, nblocks, c, pf_last, 0);
                const int8_t *xp = x + 256 * p;
                #pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const __m512i xv = LD_REG(xp + 64 * k);
                    if (k % 2 == 0) {
                        a[0] = _mm512_dpbusd_epi32(a[0], c[0][k], xv);
                        a[1] = _mm512_dpbusd_epi32(a[1], c[1][k], xv);
                    } else {
                        b[0] = _mm512_dpbusd_epi32(b[0], c[0][k], xv);
                        b[1] = _mm512_dpbusd_epi32(b[1], c[1][k], xv);
                    }
                }
            }
            /* exact: a group's lanes stay far below 2^31 (bitlinear.h's BN_BITLINEAR_MAX_IN) */
            v[0][u] = _mm512_add_epi32(a[0], _mm512_srai_epi32(b[0], 2));
            v[1][u] = _mm512_add_epi32(a[1], _mm512_srai_epi32(b[1], 2));
        }
        /* the row's last groups: lanes past ng are never stored, zeros only keep
         * them defined (gcc made a plain loop of it two slow rep stos) */
        if (nu < 16) {
            #pragma GCC unroll 16
            for (size_t u = 1; u < 16; u++)
                if (u >= nu) v[0][u] = v[1][u] = _mm512_setzero_si512();
        }
        const size_t left = ng - u0;
        const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        const __m512i xs = _mm512_maskz_loadu_epi32(m, xg + u0);
        #pragma GCC unroll 2
        for (int r = 0; r < 2; r++)
            _mm512_mask_storeu_epi32(o[r] + u0, m,
                                     _mm512_sub_epi32(grp_l3(grp_halves8(v[r]), grp_halves8(v[r] + 8)), xs));
    }
}

/* grp1_small's pairs p0 .. p0 + 3 of both rows, two tree levels down. */
INLINE void grp1_quad(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t p0, size_t npairs,
                      const uint8_t *pf_last, const int full, __m512i q[2])
{
    const __m512i z = _mm512_setzero_si512(), four = _mm512_set1_epi16(4), one = _mm512_set1_epi16(1);
    __m512i a[2][4], b[2][4];
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        const size_t p = p0 + (size_t)i;
        if (!full && p >= npairs) { /* lanes past the row's groups are never stored */
            a[0][i] = a[1][i] = b[0][i] = b[1][i] = z;
            continue;
        }
        __m512i c[2][4];
        grp_planes2(w, rb, p, nblocks, c, pf_last, full);
        const int8_t *xp = x + 256 * p;
        #pragma GCC unroll 2
        for (int r = 0; r < 2; r++) a[r][i] = b[r][i] = z;
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512i xv = LD_REG(xp + 64 * k);
            #pragma GCC unroll 2
            for (int r = 0; r < 2; r++) {
                if (k % 2 == 0) a[r][i] = _mm512_dpbusd_epi32(a[r][i], c[r][k], xv);
                else b[r][i] = _mm512_dpbusd_epi32(b[r][i], c[r][k], xv);
            }
        }
    }
    #pragma GCC unroll 2
    for (int r = 0; r < 2; r++) {
        __m512i l1[2];
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
            l1[h] = _mm512_dpwssd_epi32(_mm512_madd_epi16(_mm512_packs_epi32(a[r][2 * h], a[r][2 * h + 1]), four),
                                        _mm512_packs_epi32(b[r][2 * h], b[r][2 * h + 1]), one);
        q[r] = grp_pk(l1[0], l1[1]);
    }
}

/* grp1_quad of pairs p .. p + 3 with the checks where they are needed;
 * pairs past the row give zeros. */
INLINE void grp1_quad_at(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t p, size_t npairs,
                         const uint8_t *pf_last, const int full, __m512i q[2])
{
    if (full) grp1_quad(w, rb, x, nblocks, p, npairs, pf_last, 1, q);
    else if (p < npairs) grp1_quad(w, rb, x, nblocks, p, npairs, pf_last, 0, q);
    else q[0] = q[1] = _mm512_setzero_si512();
}

/* gpu: groups a pair (2: groups of one block, 1: of one pair). */
INLINE void grp1_small(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, const int gpu, size_t ng,
                       const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last)
{
    const size_t npairs = (nblocks + 1) / 2, upb = (size_t)(16 / gpu); /* pairs per 16 groups */
    /* lanes of grp_l3 for one-block groups: the two halves of pairs 0..7 in order */
    const __m512i perm = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    int32_t *const o[2] = {o0, o1};
    for (size_t p0 = 0; p0 < npairs; p0 += upb) {
        /* the farthest prefetch of these pairs is below w + rb + 64 (p0 + upb) + BL_PF_BYTES */
        const int full = p0 + upb <= nblocks / 2 && (!pf_last || w + rb + 64 * (p0 + upb) + BL_PF_BYTES <= pf_last);
        __m512i q[4][2];
        /* written out: gcc left a loop of these rolled, and refused an unroll
         * pragma on it under the sanitizers */
        grp1_quad_at(w, rb, x, nblocks, p0, npairs, pf_last, full, q[0]);
        grp1_quad_at(w, rb, x, nblocks, p0 + 4, npairs, pf_last, full, q[1]);
        if (gpu == 1) {
            grp1_quad_at(w, rb, x, nblocks, p0 + 8, npairs, pf_last, full, q[2]);
            grp1_quad_at(w, rb, x, nblocks, p0 + 12, npairs, pf_last, full, q[3]);
        }
        const size_t g0 = p0 * (size_t)gpu, left = ng - g0;
        const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        const __m512i xs = _mm512_maskz_loadu_epi32(m, xg + g0);
        #pragma GCC unroll 2
        for (int r = 0; r < 2; r++) {
            const __m512i s4 = gpu == 2 ? _mm512_permutexvar_epi32(perm, grp_l3(q[0][r], q[1][r]))
                                        : grp_l3(grp_l3(q[0][r], q[1][r]), grp_l3(q[2][r], q[3][r]));
            _mm512_mask_storeu_epi32(o[r] + g0, m, _mm512_sub_epi32(_mm512_srai_epi32(s4, 2), xs));
        }
    }
}

void bn_t2_grp1_vnni(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t bpg, size_t ng,
                     const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last)
{
    if (bpg == 1) grp1_small(w, rb, x, nblocks, 2, ng, xg, o0, o1, pf_last);
    else if (bpg == 2) grp1_small(w, rb, x, nblocks, 1, ng, xg, o0, o1, pf_last);
    else grp1_rows(w, rb, x, nblocks, bpg / 2, ng, xg, o0, o1, pf_last);
}

/* One token, two rows as grp1, groups of 32 (spg 1) or 64 (spg 2) columns.
 * Code plane k of a pair against its activation vector leaves the sums of
 * columns 32k.. of block 2p in lanes 0..7 and of block 2p + 1 in lanes
 * 8..15: with spg 1 each plane is two groups, with spg 2 planes 0 + 1 and
 * 2 + 3 are (shifts 1 and 3 in place, 4 * code, shifted back exactly per
 * group).  Eight such vectors, 16 groups, go through grp_halves8, whose
 * lanes are then in group order (spg 1) or two pairs apart (spg 2: perm64).
 * Before, these groups took 32-column sums one row at a time and added them
 * into groups in scalar code: 4096 x 14336 in cache, one thread (Zen 4
 * VM), group 32 2.40 ms, group 64 1.74 ms. */
INLINE void grp1s_rows(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, const size_t spg, size_t ng,
                       const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last)
{
    const size_t npairs = (nblocks + 1) / 2, vpp = 4 / spg, ppt = 8 / vpp, gpp = 8 / spg; /* a pair's vectors, groups */
    const __m512i perm64 = _mm512_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15);
    const __m512i z = _mm512_setzero_si512();
    int32_t *const o[2] = {o0, o1};
    for (size_t p0 = 0; p0 < npairs; p0 += ppt) {
        __m512i v[2][8];
        #pragma GCC unroll 4
        for (size_t i = 0; i < ppt; i++) {
            const size_t p = p0 + i;
            if (p >= npairs) { /* lanes past the row's groups are never stored */
                #pragma GCC unroll 4
                for (size_t q = 0; q < vpp; q++) v[0][vpp * i + q] = v[1][vpp * i + q] = z;
                continue;
            }
            __m512i c[2][4];
            grp_planes2(w, rb, p, nblocks, c, pf_last, 0);
            const int8_t *xp = x + 256 * p;
            __m512i xv[4];
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) xv[k] = LD_REG(xp + 64 * k);
            #pragma GCC unroll 2
            for (int r = 0; r < 2; r++) {
                const __m512i s0 = _mm512_dpbusd_epi32(z, c[r][0], xv[0]);
                const __m512i s1 = _mm512_srai_epi32(_mm512_dpbusd_epi32(z, c[r][1], xv[1]), 2);
                const __m512i s2 = _mm512_dpbusd_epi32(z, c[r][2], xv[2]);
                const __m512i s3 = _mm512_srai_epi32(_mm512_dpbusd_epi32(z, c[r][3], xv[3]), 2);
                if (spg == 1) {
                    v[r][4 * i] = s0;
                    v[r][4 * i + 1] = s1;
                    v[r][4 * i + 2] = s2;
                    v[r][4 * i + 3] = s3;
                } else {
                    v[r][2 * i] = _mm512_add_epi32(s0, s1);
                    v[r][2 * i + 1] = _mm512_add_epi32(s2, s3);
                }
            }
        }
        const size_t g0 = p0 * gpp, left = ng - g0;
        const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        const __m512i xs = _mm512_maskz_loadu_epi32(m, xg + g0);
        #pragma GCC unroll 2
        for (int r = 0; r < 2; r++) {
            const __m512i h = grp_halves8(v[r]);
            const __m512i s = spg == 1 ? h : _mm512_permutexvar_epi32(perm64, h);
            _mm512_mask_storeu_epi32(o[r] + g0, m, _mm512_sub_epi32(s, xs));
        }
    }
}

void bn_t2_grp1s_vnni(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t spg, size_t ng,
                      const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last)
{
    if (spg == 1) grp1s_rows(w, rb, x, nblocks, 1, ng, xg, o0, o1, pf_last);
    else grp1s_rows(w, rb, x, nblocks, 2, ng, xg, o0, o1, pf_last);
}

/* One step of the float chains of 16 (row, token) lanes, r * 8 + t:
 * sum + (float)(s - xg[t]) * d[r] (the definition's order, no FMA). */
INLINE __m512 grp_step(__m512 sum, __m512i s, const int32_t *xg8, float d0, float d1)
{
    const __m512i xg = _mm512_broadcast_i32x8(_mm256_loadu_si256((const __m256i *)xg8));
    const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
    return _mm512_add_ps(sum, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(s, xg)), d));
}

/* Up to 4 tokens: the eight (row, token) vectors r * 4 + t summed by one
 * grp_halves8 into 256-bit lanes r * 4 + t; half the tree of 16. */
INLINE __m256 grp_step4(__m256 sum, __m256i s, const int32_t *xg8, float d0, float d1)
{
    const __m256i xg = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)xg8));
    const __m256 d = _mm256_insertf128_ps(_mm256_set1_ps(d0), _mm_set1_ps(d1), 1);
    return _mm256_add_ps(sum, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s, xg)), d));
}
/* 128-bit lanes a and b of v as one 256-bit vector. */
#define LANES2(v, a, b) _mm512_castsi512_si256(_mm512_shuffle_i32x4((v), (v), _MM_SHUFFLE(0, 0, (b), (a))))

/* The chains of grpn into sums[8 r + t]: 16 lanes (R 8) or 8 (R 4, lanes r * 4 + t). */
INLINE void grp_sums_out(__m512 sum, __m256 sum4, const int R, float *sums)
{
    if (R == 4) {
        float t4[8];
        _mm256_storeu_ps(t4, sum4);
        for (int t = 0; t < 4; t++) {
            sums[t] = t4[t];
            sums[8 + t] = t4[4 + t];
        }
    } else {
        _mm512_storeu_ps(sums, sum);
    }
}

/* nt tokens (xstride apart, up to 8), two rows (w and w + rb; rb 0 repeats
 * the row): the float chains of the group-scale definition, ng groups,
 * sums[r * 8 + t] = sum over g in order of (float)(acc_g - xg) * d_r[g]
 * with xg8[8 g + t] the sum of token t's activations over group g.
 * Groups of 128 and 256 columns take the tree's first two levels in 16-bit
 * lanes (grp_halves8_pk): 4096 x 14336 in cache, one thread, Zen 4 VM,
 * three alternating rounds, group 256 at 3 tokens 1.58-1.64 -> 1.48-1.50
 * ms, at 8 tokens 3.28-3.46 -> 3.13-3.20; group 128 at 8 tokens 3.43-3.68
 * -> 3.36-3.39. */
INLINE void grpn_2rows(const uint8_t *w, size_t rb, const int8_t *x, size_t xstride, const int nt, size_t nblocks,
                       size_t bpg, size_t ng, const float *d0, const float *d1, const int32_t *xg8, float *sums)
{
    const size_t npairs = (nblocks + 1) / 2, h = bpg == 1 ? 1 : bpg / 2;
    const size_t nunits = (npairs + h - 1) / h;
    const int R = nt <= 4 ? 4 : 8; /* the vector of (row r, token t): s[R * r + t] */
    const int pk = bpg <= 2;      /* lanes of 16 columns, |s| <= 16 * 2 * 128 = 2^12: grp_halves8_pk */
    __m512 sum = _mm512_setzero_ps();
    __m256 sum4 = _mm256_setzero_ps();
    for (size_t u = 0; u < nunits; u++) {
        __m512i s[16];
        #pragma GCC unroll 16
        for (int i = 0; i < 2 * R; i++) s[i] = _mm512_setzero_si512();
        const size_t p0 = u * h, p1 = p0 + h < npairs ? p0 + h : npairs;
        for (size_t p = p0; p < p1; p++) {
            __m512i c0[4], c1[4];
            code_planes(load_pair(w, p, nblocks), c0);
            code_planes(load_pair(w + rb, p, nblocks), c1);
            #pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                const int8_t *xp = x + (size_t)t * xstride + 256 * p;
                #pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const __m512i xv = LD_REG(xp + 64 * k);
                    s[t] = _mm512_dpbusd_epi32(s[t], c0[k], xv);
                    s[R + t] = _mm512_dpbusd_epi32(s[R + t], c1[k], xv);
                }
            }
        }
        if (R == 4) { /* grp_halves8: [(r0) low, (r0) high, (r1) low, (r1) high] */
            const __m512i hv = pk ? grp_halves8_pk(s) : grp_halves8(s);
            if (bpg == 1) {
                const size_t g = 2 * u;
                sum4 = grp_step4(sum4, LANES2(hv, 0, 2), xg8 + 8 * g, d0[g], d1[g]);
                if (g + 1 < ng) sum4 = grp_step4(sum4, LANES2(hv, 1, 3), xg8 + 8 * (g + 1), d0[g + 1], d1[g + 1]);
            } else {
                const __m512i f = _mm512_add_epi32(hv, _mm512_shuffle_i32x4(hv, hv, _MM_SHUFFLE(2, 3, 0, 1)));
                sum4 = grp_step4(sum4, LANES2(f, 0, 2), xg8 + 8 * u, d0[u], d1[u]);
            }
        } else if (bpg == 1) { /* groups 2u and 2u + 1: the low and the high halves */
            const __m512i r0 = grp_halves8_pk(s), r1 = grp_halves8_pk(s + 8);
            const size_t g = 2 * u;
            sum = grp_step(sum, _mm512_shuffle_i32x4(r0, r1, _MM_SHUFFLE(2, 0, 2, 0)), xg8 + 8 * g, d0[g], d1[g]);
            if (g + 1 < ng)
                sum = grp_step(sum, _mm512_shuffle_i32x4(r0, r1, _MM_SHUFFLE(3, 1, 3, 1)), xg8 + 8 * (g + 1), d0[g + 1],
                               d1[g + 1]);
        } else {
            const __m512i v = pk ? grp_l3(grp_halves8_pk(s), grp_halves8_pk(s + 8)) : grp_l3(grp_halves8(s), grp_halves8(s + 8));
            sum = grp_step(sum, v, xg8 + 8 * u, d0[u], d1[u]);
        }
    }
    grp_sums_out(sum, sum4, R, sums);
}

/* grpn_2rows for groups of 32 (spg 1) or 64 (spg 2) columns: code plane k
 * of a pair (spg 2: planes 2q and 2q + 1 together) against each token's
 * activations leaves two groups in the halves of each (row, token)
 * vector, block 2p's low and block 2p + 1's high; one tree per plane (or
 * plane pair) gives both, and the float steps follow in group order: the
 * low halves of the planes, then the high ones. */
INLINE void grpns_2rows(const uint8_t *w, size_t rb, const int8_t *x, size_t xstride, const int nt, size_t nblocks,
                        const size_t spg, size_t ng, const float *d0, const float *d1, const int32_t *xg8, float *sums)
{
    const size_t npairs = (nblocks + 1) / 2, np = 4 / spg, gpp = 8 / spg; /* planes (or pairs) a pair, groups */
    const int R = nt <= 4 ? 4 : 8;
    __m512 sum = _mm512_setzero_ps();
    __m256 sum4 = _mm256_setzero_ps();
    for (size_t p = 0; p < npairs; p++) {
        __m512i c0[4], c1[4];
        code_planes(load_pair(w, p, nblocks), c0);
        code_planes(load_pair(w + rb, p, nblocks), c1);
        __m512i lo[4], hi[4];  /* R 8: (row, token) lanes of the low and high groups of plane q */
        __m256i lo4[4], hi4[4]; /* R 4 */
        #pragma GCC unroll 4
        for (size_t q = 0; q < np; q++) {
            __m512i s[16];
            #pragma GCC unroll 16
            for (int i = 0; i < 2 * R; i++) s[i] = _mm512_setzero_si512();
            #pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                const int8_t *xp = x + (size_t)t * xstride + 256 * p;
                #pragma GCC unroll 2
                for (size_t k = q * spg; k < (q + 1) * spg; k++) {
                    const __m512i xv = LD_REG(xp + 64 * k);
                    s[t] = _mm512_dpbusd_epi32(s[t], c0[k], xv);
                    s[R + t] = _mm512_dpbusd_epi32(s[R + t], c1[k], xv);
                }
            }
            if (R == 4) {
                const __m512i hv = grp_halves8(s);
                lo4[q] = LANES2(hv, 0, 2);
                hi4[q] = LANES2(hv, 1, 3);
            } else {
                const __m512i r0 = grp_halves8(s), r1 = grp_halves8(s + 8);
                lo[q] = _mm512_shuffle_i32x4(r0, r1, _MM_SHUFFLE(2, 0, 2, 0));
                hi[q] = _mm512_shuffle_i32x4(r0, r1, _MM_SHUFFLE(3, 1, 3, 1));
            }
        }
        #pragma GCC unroll 8
        for (size_t i = 0; i < 2 * np; i++) {
            const size_t q = i % np, g = p * gpp + i;
            if (g >= ng) break;
            if (R == 4) sum4 = grp_step4(sum4, i < np ? lo4[q] : hi4[q], xg8 + 8 * g, d0[g], d1[g]);
            else sum = grp_step(sum, i < np ? lo[q] : hi[q], xg8 + 8 * g, d0[g], d1[g]);
        }
    }
    grp_sums_out(sum, sum4, R, sums);
}

void bn_t2_grpns_vnni(const uint8_t *w, size_t rb, const int8_t *x, size_t xstride, int nt, size_t nblocks, size_t spg,
                      size_t ng, const float *d0, const float *d1, const int32_t *xg8, float *sums)
{
#define GRPNS(n)                                                                                               \
    (spg == 1 ? grpns_2rows(w, rb, x, xstride, n, nblocks, 1, ng, d0, d1, xg8, sums)                           \
              : grpns_2rows(w, rb, x, xstride, n, nblocks, 2, ng, d0, d1, xg8, sums))
    switch (nt) {
    case 1: GRPNS(1); break;
    case 2: GRPNS(2); break;
    case 3: GRPNS(3); break;
    case 4: GRPNS(4); break;
    case 5: GRPNS(5); break;
    case 6: GRPNS(6); break;
    case 7: GRPNS(7); break;
    default: GRPNS(8); break;
    }
#undef GRPNS
}

void bn_t2_grpn_vnni(const uint8_t *w, size_t rb, const int8_t *x, size_t xstride, int nt, size_t nblocks, size_t bpg,
                     size_t ng, const float *d0, const float *d1, const int32_t *xg8, float *sums)
{
    switch (nt) {
    case 1: grpn_2rows(w, rb, x, xstride, 1, nblocks, bpg, ng, d0, d1, xg8, sums); break;
    case 2: grpn_2rows(w, rb, x, xstride, 2, nblocks, bpg, ng, d0, d1, xg8, sums); break;
    case 3: grpn_2rows(w, rb, x, xstride, 3, nblocks, bpg, ng, d0, d1, xg8, sums); break;
    case 4: grpn_2rows(w, rb, x, xstride, 4, nblocks, bpg, ng, d0, d1, xg8, sums); break;
    case 5: grpn_2rows(w, rb, x, xstride, 5, nblocks, bpg, ng, d0, d1, xg8, sums); break;
    case 6: grpn_2rows(w, rb, x, xstride, 6, nblocks, bpg, ng, d0, d1, xg8, sums); break;
    case 7: grpn_2rows(w, rb, x, xstride, 7, nblocks, bpg, ng, d0, d1, xg8, sums); break;
    default: grpn_2rows(w, rb, x, xstride, 8, nblocks, bpg, ng, d0, d1, xg8, sums); break;
    }
}
