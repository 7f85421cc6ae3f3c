/*
 * bitlinear_grp256.h - the 256-bit group-scale kernels of whole blocks
 * (grp1, grpn: see bitlinear.h and rows_group_fast in bitlinear.c), shared
 * by bitlinear_avx2.c and bitlinear_avxvnni.c.  The including file defines
 * grp_block32(wb, x), the int32 partial sums (8 lanes) of one block of codes
 * wb against one token's 128 activations x, grp_plane32(c, x), those of 32
 * codes c (0..2 a byte) against 32 activations, and GRP_NAME(n), the exported
 * name of kernel n; optionally GRP_PAIR32(w, x), grp_block32 of the two
 * blocks at w summed, which the one-token kernel then takes for groups of
 * two blocks.  As in bitlinear_vnni.c: one vector of partial sums per
 * group, token and row, and the lanes of eight such vectors added in one
 * transposing tree (red8), in place of sums per 32-column sub-block.
 */
#ifndef BITNET_BITLINEAR_GRP256_H
#define BITNET_BITLINEAR_GRP256_H

/* Lane i of the result: the sum of the eight lanes of v[i]. */
INLINE __m256i red8(const __m256i v[8])
{
    __m256i t[4], u[2];
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) /* per 128-bit half: [a0 + a2, b0 + b2, a1 + a3, b1 + b3] */
        t[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    #pragma GCC unroll 2
    for (int i = 0; i < 2; i++) /* per half: the half sums of four vectors */
        u[i] = _mm256_add_epi32(_mm256_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
                                _mm256_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(u[0], u[1], 0x20), _mm256_permute2x128_si256(u[0], u[1], 0x31));
}

/* Lane i of the result: the sum of the eight lanes of v[i], i < 4. */
INLINE __m128i red4(const __m256i v[4])
{
    const __m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[0], v[1]), _mm256_unpackhi_epi32(v[0], v[1]));
    const __m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2], v[3]), _mm256_unpackhi_epi32(v[2], v[3]));
    const __m256i u = _mm256_add_epi32(_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1));
    return _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
}

/* The lanes below n. */
INLINE __m256i lanes_below(size_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}


/* Two rows' eight group vectors (n of them real) summed by red8, less the
 * activations' group sums xg, into o0 and o1; masked only at the end
 * (vpmaskmovd is slow on AMD's cores). */
INLINE void grp_store8(__m256i v[2][8], size_t n, const int32_t *xg, int32_t *o0, int32_t *o1)
{
    int32_t *const o[2] = {o0, o1};
    const __m256i m = lanes_below(n);
    const __m256i xs = n == 8 ? _mm256_loadu_si256((const __m256i *)xg) : _mm256_maskload_epi32(xg, m);
    #pragma GCC unroll 2
    for (int r = 0; r < 2; r++) {
        const __m256i res = _mm256_sub_epi32(red8(v[r]), xs);
        if (n == 8) _mm256_storeu_si256((__m256i *)o[r], res);
        else _mm256_maskstore_epi32(o[r], m, res);
    }
}

/* One token, rows w and w + rb (rb 0 repeats the row): the sums of
 * (code - 1) * x of each group into o0 and o1, eight groups a batch. */
INLINE void grp1_rows(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, const size_t bpg, size_t ng,
                      const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last)
{
    for (size_t g0 = 0; g0 < ng; g0 += 8) {
        const size_t n = ng - g0 < 8 ? ng - g0 : 8;
        __m256i v[2][8];
        for (size_t u = 0; u < n; u++) {
            const size_t b0 = (g0 + u) * bpg, b1 = bpg == 1 ? b0 + 1 : b0 + bpg < nblocks ? b0 + bpg : nblocks;
            __m256i a0 = _mm256_setzero_si256(), a1 = a0;
#ifdef GRP_PAIR32
            if (bpg == 2 && b1 == b0 + 2) { /* a whole group of two blocks */
                if (pf_last) {
                    pf_l2(w + 32 * b0 + BL_PF_BYTES, pf_last);
                    pf_l2(w + rb + 32 * b0 + BL_PF_BYTES, pf_last);
                }
                v[0][u] = GRP_PAIR32(w + 32 * b0, x + 128 * b0);
                v[1][u] = GRP_PAIR32(w + rb + 32 * b0, x + 128 * b0);
                continue;
            }
#endif
            for (size_t b = b0; b < b1; b++) {
                if (pf_last) {
                    pf_l2(w + 32 * b + BL_PF_BYTES, pf_last);
                    pf_l2(w + rb + 32 * b + BL_PF_BYTES, pf_last);
                }
                a0 = _mm256_add_epi32(a0, grp_block32(_mm256_loadu_si256((const __m256i *)(w + 32 * b)), x + 128 * b));
                a1 = _mm256_add_epi32(a1, grp_block32(_mm256_loadu_si256((const __m256i *)(w + rb + 32 * b)), x + 128 * b));
            }
            v[0][u] = a0;
            v[1][u] = a1;
        }
        /* the row's last groups: lanes past ng are never stored, zeros only keep them defined */
        if (n < 8) { /* (gcc made a plain loop of it two slow rep stos) */
            #pragma GCC unroll 8
            for (size_t u = 1; u < 8; u++)
                if (u >= n) v[0][u] = v[1][u] = _mm256_setzero_si256();
        }
        grp_store8(v, n, xg + g0, o0 + g0, o1 + g0);
    }
}

/* nt tokens (up to 4) of one row: sums[t] = the float chain over the groups. */
INLINE void grpn_row(const uint8_t *w, const int8_t *x, size_t xstride, const int nt, size_t nblocks, size_t bpg,
                     size_t ng, const float *d, const int32_t *xgp, float *sums)
{
    __m128 sum = _mm_setzero_ps();
    for (size_t g = 0; g < ng; g++) {
        const size_t b0 = g * bpg, b1 = b0 + bpg < nblocks ? b0 + bpg : nblocks;
        __m256i s[4];
        #pragma GCC unroll 4
        for (int t = 0; t < 4; t++) s[t] = _mm256_setzero_si256();
        for (size_t b = b0; b < b1; b++) {
            const __m256i wb = _mm256_loadu_si256((const __m256i *)(w + 32 * b));
            #pragma GCC unroll 4
            for (int t = 0; t < nt; t++) s[t] = _mm256_add_epi32(s[t], grp_block32(wb, x + (size_t)t * xstride + 128 * b));
        }
        /* the four tokens' sums: sum + (float)(acc - xg) * d, no FMA */
        const __m128i acc = _mm_sub_epi32(red4(s), _mm_loadu_si128((const __m128i *)(xgp + 4 * g)));
        sum = _mm_add_ps(sum, _mm_mul_ps(_mm_cvtepi32_ps(acc), _mm_set1_ps(d[g])));
    }
    _mm_storeu_ps(sums, sum);
}

void GRP_NAME(grpn)(const uint8_t *w, size_t rb, const int8_t *x, size_t xstride, int nt, size_t nblocks, size_t bpg,
                     size_t ng, const float *d0, const float *d1, const int32_t *xgp, float *sums)
{
    for (int r = 0; r < (rb ? 2 : 1); r++) {
        const uint8_t *wr = w + (size_t)r * rb;
        const float *d = r ? d1 : d0;
        float *sr = sums + 8 * r;
        switch (nt) {
        case 1: grpn_row(wr, x, xstride, 1, nblocks, bpg, ng, d, xgp, sr); break;
        case 2: grpn_row(wr, x, xstride, 2, nblocks, bpg, ng, d, xgp, sr); break;
        case 3: grpn_row(wr, x, xstride, 3, nblocks, bpg, ng, d, xgp, sr); break;
        default: grpn_row(wr, x, xstride, 4, nblocks, bpg, ng, d, xgp, sr); break;
        }
    }
}

/* One token, two rows as grp1_rows, groups of 32 (spg 1) or 64 (spg 2)
 * columns: code plane k of block b is group 4b + k (spg 1) or half of
 * group 2b + k / 2 (spg 2); eight groups a tree. */
INLINE void grp1s_rows(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, const size_t spg, size_t ng,
                       const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last)
{
    const size_t gpb = 4 / spg, bpt = 8 / gpb; /* groups a block, blocks a tree */
    const __m256i m3 = _mm256_set1_epi8(3);
    for (size_t b0 = 0; b0 < nblocks; b0 += bpt) {
        const size_t g0 = b0 * gpb, n = ng - g0 < 8 ? ng - g0 : 8;
        __m256i v[2][8];
        #pragma GCC unroll 4
        for (size_t i = 0; i < bpt; i++) {
            const size_t b = b0 + i;
            if (b >= nblocks) { /* lanes past ng are never stored */
                #pragma GCC unroll 4
                for (size_t q = 0; q < gpb; q++) v[0][gpb * i + q] = v[1][gpb * i + q] = _mm256_setzero_si256();
                continue;
            }
            #pragma GCC unroll 2
            for (int r = 0; r < 2; r++) {
                const uint8_t *wr = w + (size_t)r * rb + 32 * b;
                if (pf_last) pf_l2(wr + BL_PF_BYTES, pf_last);
                const __m256i wb = _mm256_loadu_si256((const __m256i *)wr);
                __m256i p[4];
                #pragma GCC unroll 4
                for (int k = 0; k < 4; k++)
                    p[k] = grp_plane32(_mm256_and_si256(_mm256_srli_epi16(wb, 2 * k), m3), x + 128 * b + 32 * k);
                if (spg == 1) {
                    #pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) v[r][4 * i + (size_t)k] = p[k];
                } else {
                    v[r][2 * i] = _mm256_add_epi32(p[0], p[1]);
                    v[r][2 * i + 1] = _mm256_add_epi32(p[2], p[3]);
                }
            }
        }
        grp_store8(v, n, xg + g0, o0 + g0, o1 + g0);
    }
}

void GRP_NAME(grp1s)(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t spg, size_t ng,
                      const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last)
{
    if (spg == 1) grp1s_rows(w, rb, x, nblocks, 1, ng, xg, o0, o1, pf_last);
    else grp1s_rows(w, rb, x, nblocks, 2, ng, xg, o0, o1, pf_last);
}

void GRP_NAME(grp1)(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t bpg, size_t ng,
                     const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last)
{
    if (bpg == 1) grp1_rows(w, rb, x, nblocks, 1, ng, xg, o0, o1, pf_last);
    else if (bpg == 2) grp1_rows(w, rb, x, nblocks, 2, ng, xg, o0, o1, pf_last);
    else grp1_rows(w, rb, x, nblocks, bpg, ng, xg, o0, o1, pf_last);
}

#endif
