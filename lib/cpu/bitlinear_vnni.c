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

/* One token.  vpdpbusd takes unsigned bytes up to 255, so the codes of
 * shift k are used in place as code * 4^k (w & (3 << 2k), no shift), each
 * shift in its own accumulator; every lane of accumulator k holds a multiple
 * of 4^k, so an arithmetic shift right by 2k per lane is exact and one
 * horizontal sum ends the row.  |sum| <= 4^3 * 256 * 32 * nblocks must fit
 * in int32: BN_T2_NOSHIFT_MAX_BLOCKS (bitlinear.h).
 *
 * The weights stream from memory once; a software prefetch into L2
 * BL_PF_BYTES ahead (clamped to pf_last, the last line the caller will read)
 * keeps enough lines in flight.  Without it one core read at 10 GB/s against
 * a read roofline of 24 GB/s on a Zen 4 VM (4 KiB pages; the hardware
 * prefetcher alone did not run far enough ahead of this loop), with it at
 * 21-27 GB/s; L1 prefetches or distances under 8 KiB gained less.
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
    const __m512i m[4] = {_mm512_set1_epi8(3), _mm512_set1_epi8(12), _mm512_set1_epi8(48),
                          _mm512_set1_epi8((char)192)};
    __m512i a[2][4];
    #pragma GCC unroll 2
    for (int r = 0; r < NR; r++) a[r][0] = a[r][1] = a[r][2] = a[r][3] = _mm512_setzero_si512();
    const size_t npairs = (nblocks + 1) / 2;
    for (size_t p = 0; p < npairs; p++) {
        __m512i u[2];
        #pragma GCC unroll 2
        for (int r = 0; r < NR; r++) {
            u[r] = load_pair(w + r * rb, p, nblocks);
            if (pf_last) {
                const uint8_t *q = w + r * rb + 64 * p + pfd;
                _mm_prefetch((const char *)(q < pf_last ? q : pf_last), _MM_HINT_T1);
            }
        }
        const int8_t *xp = x + 256 * p;
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512i xv = LD_REG(xp + 64 * k);
            #pragma GCC unroll 2
            for (int r = 0; r < NR; r++) a[r][k] = _mm512_dpbusd_epi32(a[r][k], _mm512_and_si512(u[r], m[k]), xv);
        }
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
        if (pf_last) {
            const uint8_t *q = w + 64 * p + pfd;
            _mm_prefetch((const char *)(q < pf_last ? q : pf_last), _MM_HINT_T1);
        }
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
