/*
 * bitlinear.c - BitLinear on the CPU: the scalar definition
 * (bitnet_bitlinear_ref) and the fast path (bn_cpu_bitlinear).
 *
 * The fast path quantizes the activations once per call into rows padded
 * with zeros to whole 128-column blocks, then threads over output rows; each
 * weight row is decoded once per pass over up to BN_T2_MAXT tokens by the
 * SIMD kernel of the run-time level (bitlinear_avx2.c, _avx512.c, _vnni.c).
 * The kernels sum code * x with code = q + 1 (unsigned, as vpmaddubsw and
 * vpdpbusd want); the sum of x over the same columns is subtracted here.
 *
 * Many tokens: dequantizing W and calling sgemm was measured against these
 * kernels and never wins (1024 x 4096, one AVX-512 VNNI core: 64 tokens
 * 2.7 ms here vs 7.3 ms for sgemm alone, 256 tokens 11.0 vs 25.0 ms), so
 * there is no such path; activations of many tokens are walked in column
 * chunks that stay in L1 instead.
 *
 * AVX-512 kernels read two blocks (64 bytes of codes) per load, so their
 * activation rows use a pairwise layout: rows padded to an even number of
 * blocks, and column 128*b + 32*k + j (b = 2*p + h) stored at byte
 * 256*p + 64*k + 32*h + j, which makes the 64 activations that meet the
 * codes of one shift k contiguous.
 *
 * One token (GEMV) is bound by reading W.  Three things decide the speed
 * (measured on a 2-core AMD EPYC VM with AVX-512 VNNI, 4096 x 14336, W
 * rotated through 88 MB so every call reads DRAM, one thread): activation
 * rows on 64-byte boundaries (16-byte aligned rows made every 64-byte load
 * span two cache lines: 0.97 ms, aligned 0.51 ms); one weight row at a time,
 * a single sequential stream per thread (two rows at once, two streams
 * 3.5 KiB apart, read at about half the speed: 0.94 ms); and the rows split
 * into pieces that threads take as they come (BL_PIECE), so that a thread
 * woken late or preempted does not hold up the call.  A fourth decided
 * most of all on a Zen 4 VM with 4 KiB pages: the hardware prefetcher alone
 * kept too few lines in flight for this loop (one thread read W at 10 GB/s
 * against a read roofline of 24 GB/s); the one-token kernel now prefetches
 * into L2 24 KiB ahead inside its piece (see bitlinear_vnni.c).  The AVX2
 * level (CPUs without AVX-512) had no one-token kernel of its own and ran
 * the general one without a prefetch; on a 2-core AMD EPYC VM with AVX2
 * only, 4096 x 14336 at one token, its own (bitlinear_avx2.c) took 1.02-1.10
 * ms against 1.13-1.47 ms with 2 threads on weights rotated past the caches
 * (4 alternating rounds) and 0.80-1.16 ms against 1.56-2.25 ms with one
 * thread on weights in the cache.
 *
 * Group scales of 32 and 64 columns on AVX-512 VNNI are summed whole in
 * vector lanes like the larger ones below (grp1s, grpns; 4096 x 14336, Zen 4
 * VM: one thread in cache, one token group 32 2.10-2.65 -> 1.34-1.52 ms,
 * group 64 1.64-2.03 -> 0.92-1.16, 8 tokens 14.2-14.7 -> 5.9-6.1 and
 * 11.9-12.1 -> 3.9-4.0; two threads, rotated, one token 1.61 -> 1.03 and
 * 1.29-1.33 -> 0.77, 64 tokens 74.4 -> 24.9 and 46.5 -> 17.3), and at one
 * token on AVX2 and AVX-VNNI (the grp256.h grp1s: group 32 3.54-3.84 ->
 * 2.07-2.26 ms, group 64 2.81-3.31 -> 1.45-1.47 at the avx2 level, one
 * thread in cache).  Elsewhere they take sums per 32-column sub-block (the
 * kernels' dot_sub), integer sums per group, then the float chain of the
 * definition, which is sequential over the groups of a row: eight rows at a
 * time so that eight chains run side by side (4096 x 14336, 2 threads, one
 * token: group 32 1.6 -> 1.3 ms, group 64 and 128 1.3 -> 1.0 ms; 8 tokens,
 * group 32 12 -> 5.4 ms).  Groups of 128 columns and more, among them the
 * 256 of ggml's TQ1_0 and TQ2_0 (what a GGUF import gives), are whole
 * blocks: the AVX2 and AVX-512 VNNI sets sum each group in vector lanes and
 * add the lanes of 8 or 16 groups (or rows and tokens) in one transposing
 * tree (grp1, grpn; rows_group_fast).  On a 2-vCPU AMD EPYC (Zen 4) VM,
 * 4096 x 14336 with its weights in the cache, one thread, group 256 before
 * / after: AVX-512 VNNI one token 1.61 / 0.59-0.61 ms, 8 tokens 12.4 /
 * 3.3-3.6 ms (tensor scale 0.34 / 2.6); AVX2 one token 1.99 / 0.78 ms, 8
 * tokens 10.1 / 5.0 ms (tensor 0.56 / 3.8); group 128 on AVX2 one token
 * 3.05 / 0.86 ms.
 */
#include "bitlinear.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

static inline int t2_code(const uint8_t *row, uint64_t c)
{
    const uint8_t byte = row[(c / BITNET_T2_BLOCK) * BITNET_T2_BLOCK_BYTES + (c % 32)];
    return (byte >> (2 * ((c % BITNET_T2_BLOCK) / 32))) & 3;
}

static int all_finite(const float *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* ---- the definition ------------------------------------------------------ */

bitnet_status bitnet_bitlinear_ref(const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io)
{
    bitnet_status st = bn_bitlinear_check(w, io);
    if (st) return st;
    const uint64_t T = io->tokens, in = w->in, out = w->out;
    const size_t rb = bitnet_t2_row_bytes(in);
    int8_t *qbuf = NULL;
    float *sbuf = NULL, *ybuf = NULL;
    const int8_t *xq = io->xq;
    const float *xs = io->xs;
    float *nbuf = NULL;
    if (io->x) {
        if (!all_finite(io->x, T * in)) return bn_fail(BITNET_E_NUMERIC, "bitlinear: input holds NaN or Inf");
        qbuf = malloc((size_t)(T * in));
        sbuf = malloc((size_t)T * sizeof(float));
        if (!qbuf || !sbuf) { st = bn_fail(BITNET_E_NOMEM, "bitlinear: activations"); goto out; }
        const float *x = io->x;
        if (io->norm) { /* the CPU's rmsnorm row (the norm is defined as bitnet_rmsnorm's) */
            if (!(nbuf = malloc((size_t)(T * in) * sizeof(float)))) {
                st = bn_fail(BITNET_E_NOMEM, "bitlinear: activations");
                goto out;
            }
            for (uint64_t t = 0; t < T; t++) bn_cpu_rmsnorm_row(io->x + t * in, in, io->norm, io->norm_eps, nbuf + t * in);
            if (!all_finite(nbuf, T * in)) {
                st = bn_fail(BITNET_E_NUMERIC, "bitlinear: input holds NaN or Inf");
                goto out;
            }
            x = nbuf;
        }
        if ((st = bitnet_quantize_acts_ref(x, T, in, qbuf, sbuf))) goto out;
        xq = qbuf;
        xs = sbuf;
    }
    if (!io->y && !(ybuf = malloc((size_t)out * sizeof(float)))) {
        st = bn_fail(BITNET_E_NOMEM, "bitlinear: output row");
        goto out;
    }
    const uint64_t ng = w->kind == BITNET_SCALE_GROUP ? (in + w->group - 1) / w->group : 0;
    for (uint64_t t = 0; t < T; t++) {
        const int8_t *xr = xq + t * in;
        float *yr = io->y ? io->y + t * out : ybuf;
        for (uint64_t o = 0; o < out; o++) {
            const uint8_t *row = w->t2 + o * rb;
            float y;
            if (w->kind == BITNET_SCALE_GROUP) {
                float sum = 0.0f;
                for (uint64_t g = 0; g < ng; g++) {
                    int32_t acc = 0;
                    const uint64_t end = (g + 1) * w->group < in ? (g + 1) * w->group : in;
                    for (uint64_t c = g * w->group; c < end; c++) acc += (t2_code(row, c) - 1) * xr[c];
                    sum = sum + (float)acc * w->d[o * ng + g];
                }
                y = sum / xs[t];
            } else {
                int32_t acc = 0;
                for (uint64_t c = 0; c < in; c++) acc += (t2_code(row, c) - 1) * xr[c];
                y = bn_bl_tensor_row(acc, w->kind == BITNET_SCALE_ROW ? w->d[o] : w->d[0], xs[t]);
            }
            yr[o] = bn_bl_epilogue(y, io, out, t, o);
        }
        if (io->yq && !all_finite(yr, out)) {
            st = bn_fail(BITNET_E_NUMERIC, "bitlinear: output row %llu holds NaN or Inf", (unsigned long long)t);
            goto out;
        }
        if (io->yq && (st = bitnet_quantize_acts_ref(yr, 1, out, io->yq + t * out, io->ys + t))) goto out;
    }
out:
    free(nbuf);
    free(qbuf);
    free(sbuf);
    free(ybuf);
    return st;
}

/* ---- scalar kernels (the fast path without SIMD) ------------------------- */

int bn_quant_row_scalar(const float *x, uint64_t n, uint64_t npad, int8_t *q, float *s)
{
    float m = 0.0f;
    for (uint64_t i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        if (!(a <= 3.40282347e38f)) return 1; /* NaN or Inf */
        if (a > m) m = a;
    }
    if (m < 1e-5f) m = 1e-5f;
    const float sc = 127.0f / m;
    for (uint64_t i = 0; i < n; i++) {
        float r = rintf(x[i] * sc);
        r = r < -128.0f ? -128.0f : r > 127.0f ? 127.0f : r;
        q[i] = (int8_t)r;
    }
    memset(q + n, 0, (size_t)(npad - n));
    *s = sc;
    return 0;
}

void bn_t2_dot_scalar(const uint8_t *w, const int8_t *x, size_t xstride, int nt, size_t nblocks, int32_t *acc)
{
    for (int t = 0; t < nt; t++) {
        const int8_t *xr = x + (size_t)t * xstride;
        int32_t a = 0;
        for (size_t b = 0; b < nblocks; b++)
            for (int k = 0; k < 4; k++)
                for (int j = 0; j < 32; j++) a += ((w[32 * b + j] >> (2 * k)) & 3) * xr[128 * b + 32 * k + j];
        acc[t] = a;
    }
}

void bn_t2_dot_sub_scalar(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc)
{
    for (size_t b = 0; b < nblocks; b++)
        for (int k = 0; k < 4; k++) {
            int32_t a = 0;
            for (int j = 0; j < 32; j++) a += ((w[32 * b + j] >> (2 * k)) & 3) * x[128 * b + 32 * k + j];
            acc[4 * b + k] = a;
        }
}

static const bn_t2_kernels kern_scalar = {.name = "scalar", .quant_row = bn_quant_row_scalar, .dot = bn_t2_dot_scalar,
                                          .dot_sub = bn_t2_dot_sub_scalar, .tokens_per_pass = 4};
#if defined(__x86_64__)
static const bn_t2_kernels kern_avx2 = {.name = "avx2", .quant_row = bn_quant_row_avx2, .dot = bn_t2_dot_avx2,
                                        .dot_sub = bn_t2_dot_sub_avx2, .gemv = bn_t2_gemv_avx2,
                                        .tokens_per_pass = 4, .chains8 = bn_group_chains8_avx2,
                                        .grp1 = bn_t2_grp1_avx2, .grpn = bn_t2_grpn_avx2, .grp1s = bn_t2_grp1s_avx2};
static const bn_t2_kernels kern_avxvnni = {.name = "avx-vnni", .quant_row = bn_quant_row_avx2, .dot = bn_t2_dot_avxvnni,
                                           .dot_sub = bn_t2_dot_sub_avx2, .gemv = bn_t2_gemv_avxvnni,
                                           .tokens_per_pass = 4, .chains8 = bn_group_chains8_avx2,
                                           .grp1 = bn_t2_grp1_avxvnni, .grpn = bn_t2_grpn_avxvnni,
                                           .grp1s = bn_t2_grp1s_avxvnni};
static const bn_t2_kernels kern_avx512 = {.name = "avx512", .quant_row = bn_quant_row_avx2, .dot = bn_t2_dot_avx512,
                                          .dot_sub = bn_t2_dot_sub_avx2, .tokens_per_pass = 8, .pair_layout = 1};
static const bn_t2_kernels kern_vnni = {.name = "avx512-vnni", .quant_row = bn_quant_row_avx2, .dot = bn_t2_dot_vnni,
                                        .dot_sub = bn_t2_dot_sub_vnni, .dot2 = bn_t2_dot2_vnni, .gemv = bn_t2_gemv_vnni,
                                        .gemv2 = bn_t2_gemv2_vnni,
                                        .tokens_per_pass = 8, .pair_layout = 1, .chains8 = bn_group_chains8_avx2,
                                        .grp1 = bn_t2_grp1_vnni, .grpn = bn_t2_grpn_vnni, .grp1s = bn_t2_grp1s_vnni,
                                        .grpns = bn_t2_grpns_vnni};
#endif

static const bn_t2_kernels *pick_kernels(bn_simd simd, int group)
{
#if defined(__x86_64__)
    /* Group scales need sums per 32-column sub-block and per group:
     * AVX-512 VNNI and AVX-VNNI have their own (AVX-VNNI's sub-block sums
     * are the AVX2 set's); AVX-512BW without VNNI uses the AVX2 set. */
    if (simd == BN_SIMD_AVX512 && group) return &kern_avx2;
    switch (simd) {
    case BN_SIMD_AMX:
    case BN_SIMD_AVX512_VNNI: return &kern_vnni;
    case BN_SIMD_AVX512: return &kern_avx512;
    case BN_SIMD_AVX_VNNI: return &kern_avxvnni;
    case BN_SIMD_AVX2: return &kern_avx2;
    default: break;
    }
#else
    (void)simd;
    (void)group;
#endif
    return &kern_scalar;
}

/* ---- the fast path ------------------------------------------------------ */

typedef struct bl_job {
    const bitnet_ternary_matrix *w;
    const bitnet_bitlinear_io *io;
    const bn_t2_kernels *k;
    size_t nblocks, rb, xstride, nsub;
    int8_t *xq;        /* tokens rows of xstride bytes, kernel layout */
    int8_t *xnat;      /* scratch: one natural-layout row per token (pair layout only) */
    float *xnorm;      /* scratch: the normalized float rows (io->norm only) */
    float *xs;         /* s per token */
    int32_t *xsub;     /* sum of x per 32-column sub-block: tokens * nsub */
    int32_t *xtot;     /* sum of x per token */
    int32_t *xgrp;     /* group scales: sum of x per group, tokens * ngroups */
    int32_t *xgt;      /* group scales on tiles: [group][16 ntt], 0 past the tokens (or NULL) */
    int32_t *xgp;      /* the same for the grpn kernels, tpp = tokens_per_pass: [t / tpp][group][t % tpp] (or NULL) */
    float *y;          /* tokens x out (io->y or scratch) */
    int failed;        /* set by a worker: the input or the output is not finite */
    /* many tokens on tiles (NULL: not used) */
    bn_t2_tiles_fn tiles;
    int8_t *xpack;     /* ntt x nsteps tiles of 1 KiB */
    uint64_t ntt;
    size_t nsteps;
    /* rows in pieces handed out in order to whichever thread asks next */
    void (*rows_fn)(struct bl_job *j, uint64_t begin, uint64_t end, int32_t *acc);
    uint64_t piece_rows, npieces, next_piece;
    /* each thread's partial sums: slot i at acc + i * acc_elems */
    int32_t *acc;
    size_t acc_elems;
    uint64_t next_slot;
} bl_job;

static void set_failed(bl_job *j) { __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED); }

static void pair_permute(const int8_t *nat, size_t nblocks_even, int8_t *dst)
{
    for (size_t p = 0; p < nblocks_even / 2; p++)
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 4; k++)
                memcpy(dst + 256 * p + 64 * k + 32 * h, nat + 128 * (2 * p + h) + 32 * k, 32);
}

static void prep_tokens(void *arg, uint64_t begin, uint64_t end)
{
    bl_job *j = arg;
    const bitnet_bitlinear_io *io = j->io;
    const uint64_t in = j->w->in;
    for (uint64_t t = begin; t < end; t++) {
        int8_t *dst = j->xq + t * j->xstride;
        int8_t *nat = j->k->pair_layout ? j->xnat + t * j->xstride : dst;
        if (io->x) {
            const float *xr = io->x + t * in;
            if (io->norm) { /* bitnet_rmsnorm's row, then the same quantization */
                bn_cpu_rmsnorm_row(xr, in, io->norm, io->norm_eps, j->xnorm + t * in);
                xr = j->xnorm + t * in;
            }
            if (j->k->quant_row(xr, in, j->xstride, nat, &j->xs[t])) {
                set_failed(j);
                return;
            }
        } else {
            memcpy(nat, io->xq + t * in, (size_t)in);
            memset(nat + in, 0, j->xstride - (size_t)in);
            j->xs[t] = io->xs[t];
        }
        int32_t tot = 0;
        for (size_t i = 0; i < j->nsub; i++) {
            int32_t s = 0;
            for (int c = 0; c < 32; c++) s += nat[32 * i + c];
            j->xsub[t * j->nsub + i] = s;
            tot += s;
        }
        j->xtot[t] = tot;
        if (j->xgrp) {
            const uint64_t g = j->w->group / 32, ng = (in + j->w->group - 1) / j->w->group;
            const uint64_t tpp = (uint64_t)j->k->tokens_per_pass;
            for (uint64_t i = 0; i < ng; i++) {
                int32_t s = 0;
                for (uint64_t q = i * g; q < (i + 1) * g && q < j->nsub; q++) s += j->xsub[t * j->nsub + q];
                j->xgrp[t * ng + i] = s;
                if (j->xgp) j->xgp[((t / tpp) * ng + i) * tpp + t % tpp] = s;
                if (j->xgt) j->xgt[i * j->ntt * 16 + t] = s;
            }
        }
        if (j->k->pair_layout) pair_permute(nat, j->xstride / BITNET_T2_BLOCK, dst);
    }
}


/* Blocks of columns per pass so that the activations of one pass (tokens
 * per pass x columns) stay in 32 KiB of L1 (measured on a Xeon with
 * AVX-512 VNNI, 2 threads, 8 tokens of 4096 x 14336: 8 KiB 3.0-3.6 ms,
 * 16 KiB 2.0-3.3 ms, 32 KiB 1.65-2.2 ms); even, for the pair layout.
 * 0: no need (one token, or short rows). */
#define BL_L1_BYTES 32768
static size_t chunk_blocks(const bl_job *j)
{
    const uint64_t tpp = j->io->tokens < (uint64_t)j->k->tokens_per_pass ? j->io->tokens : (uint64_t)j->k->tokens_per_pass;
    if (tpp < 2 || tpp * j->nblocks * BITNET_T2_BLOCK <= BL_L1_BYTES) return 0;
    size_t cb = BL_L1_BYTES / (size_t)(tpp * BITNET_T2_BLOCK);
    cb &= ~(size_t)1;
    return cb < 2 ? 2 : cb;
}

/* The pass kernels read a row's chunk of nb blocks, then the next row's,
 * rb bytes further: runs of a few KiB that the hardware prefetcher starts
 * over at every row.  The chunk of the row BL_PF_CHUNK bytes of chunks ahead
 * (one row at least) is prefetched into L2 before each row is computed,
 * never past row pf_end.  Measured on a 2-vCPU AMD EPYC VM (AVX2), the
 * AVX2 pass kernel alone on 4 tokens, chunks of 64 blocks (2 KiB), best of
 * 30 rounds: 4096 rows of 14336 in the L3 10.9-13.5 TSC cycles per block
 * and token without, 4.1-4.9 one row ahead, 3.5-5.7 two rows ahead, 5.2-6.5
 * three; 16384 rows (from memory) 12.7-12.8 against 6.0-6.8 two rows
 * ahead.  The whole call on the same VM, 4096 x 14336, three alternating
 * rounds of bitnet-bench --op copy,bitlinear --tokens 1,4,8,64 --scale
 * tensor (weights rotated, 2 threads), before / after: 4 tokens 3.5-4.3 /
 * 2.4-3.7 ms, 8 tokens 5.2-7.5 / 3.8-4.6 ms; with --llc 1 --threads 1: 4
 * tokens 5.8-6.3 / 3.3-4.4 ms, 8 tokens 8.0-10.3 / 6.7-7.6 ms; 64 tokens
 * (bound by the arithmetic) and one token (the gemv kernel) unchanged.
 * On an H100 machine's 16-core Xeon host (AVX-512 VNNI level forced, which
 * is what runs 2 to 7 tokens there; weights rotated; three alternating
 * rounds, us): 2 tokens 256-267 / 227-274, 4 tokens 323-338 / 274-289, 8
 * tokens 470-491 / 384-431.
 * always_inline: a function of prefetches alone has no effects by the
 * compiler's reckoning, and gcc 12 deleted its calls at -O2.
 * Tried and not kept (same VM, 6 alternating rounds of 8 tokens, one
 * thread, --llc 1): rows outside the token passes, with chunks sized for
 * all 8 tokens (each row's chunk read once for both passes): 6.2-9.3 ms
 * against 6.4-8.0. */
#define BL_PF_CHUNK 4096
static inline __attribute__((always_inline)) void pf_chunk(const bl_job *j, uint64_t row, size_t c0, size_t nb)
{
    const char *p = (const char *)(j->w->t2 + row * j->rb + c0 * BITNET_T2_BLOCK_BYTES);
    for (size_t l = 0; l < nb * BITNET_T2_BLOCK_BYTES; l += 64) __builtin_prefetch(p + l, 0, 2); /* 2: into L2 */
}

/* Integer sums of rows [begin, end) over blocks [c0, c0 + nb) for all tokens,
 * added into part[(o - begin) * T + t].  One token with whole rows goes to
 * the prefetching gemv kernels (two rows at once where the kernel set has
 * gemv2, an odd last row alone), which may prefetch up to the end of row
 * pf_end (the end of the caller's piece); the pass kernels' chunks are
 * prefetched here (pf_chunk). */
static void sums_chunk(const bl_job *j, uint64_t begin, uint64_t end, size_t c0, size_t nb, int32_t *part,
                       uint64_t pf_end)
{
    const uint64_t T = j->io->tokens;
    if (T == 1 && j->k->gemv && c0 == 0 && nb == j->nblocks) {
        const uint8_t *last = j->w->t2 + pf_end * j->rb - 1;
        uint64_t o = begin;
        if (j->k->gemv2)
            for (; o + 2 <= end; o += 2) j->k->gemv2(j->w->t2 + o * j->rb, j->rb, j->xq, nb, part + (o - begin), last);
        for (; o < end; o++) j->k->gemv(j->w->t2 + o * j->rb, j->xq, nb, part + (o - begin), last);
        return;
    }
    const int tpp = j->k->tokens_per_pass;
    const size_t cbytes = nb * BITNET_T2_BLOCK_BYTES;
    const uint64_t ahead = (BL_PF_CHUNK + cbytes - 1) / cbytes; /* rows, >= 1 */
    int32_t acc[BN_T2_MAXT], acc1[BN_T2_MAXT];
    for (uint64_t t0 = 0; t0 < T; t0 += (uint64_t)tpp) {
        const int nt = T - t0 < (uint64_t)tpp ? (int)(T - t0) : tpp;
        const int8_t *x = j->xq + t0 * j->xstride + c0 * BITNET_T2_BLOCK;
        uint64_t o = begin;
        if (j->k->dot2 && nt > 1)
            for (; o + 2 <= end; o += 2) {
                if (o + ahead < pf_end) pf_chunk(j, o + ahead, c0, nb);
                if (o + ahead + 1 < pf_end) pf_chunk(j, o + ahead + 1, c0, nb);
                const uint8_t *r0 = j->w->t2 + o * j->rb + c0 * BITNET_T2_BLOCK_BYTES;
                j->k->dot2(r0, r0 + j->rb, x, j->xstride, nt, nb, acc, acc1);
                int32_t *p0 = part + (o - begin) * T + t0, *p1 = p0 + T;
                for (int i = 0; i < nt; i++) {
                    p0[i] += acc[i];
                    p1[i] += acc1[i];
                }
            }
        for (; o < end; o++) {
            if (o + ahead < pf_end) pf_chunk(j, o + ahead, c0, nb);
            j->k->dot(j->w->t2 + o * j->rb + c0 * BITNET_T2_BLOCK_BYTES, x, j->xstride, nt, nb, acc);
            int32_t *p0 = part + (o - begin) * T + t0;
            for (int i = 0; i < nt; i++) p0[i] += acc[i];
        }
    }
}

/* The outputs of rows [r0, r0 + nr) for every token from their sums
 * (acc[(o - r0) * ld + t]), token by token: each token's outputs are one
 * contiguous run of y.  Row by row, the tokens' outputs lie `out` floats
 * apart, a multiple of 4 KiB for the usual widths, so that the stores of a
 * row all fell in one L1 set: row by row this took 18% of a 64-token call
 * on AMX (perf, 4096 x 14336, one thread).  Token by token the call took
 * 3.57-3.72 ms against 4.15-4.45 ms (2 threads, this 2-core Xeon VM, three
 * alternating runs of bitnet-bench --op bitlinear --shape 4096x14336
 * --tokens 8,64 --scale tensor,row --llc 1); 8 tokens and the VNNI path
 * were unchanged. */
static void emit_rows(const bl_job *j, uint64_t r0, uint64_t nr, const int32_t *acc, size_t ld)
{
    const bitnet_ternary_matrix *w = j->w;
    const bitnet_bitlinear_io *io = j->io;
    const int per_row = w->kind == BITNET_SCALE_ROW;
    for (uint64_t t = 0; t < io->tokens; t++) {
        float *y = j->y + t * w->out + r0;
        const int32_t xt = j->xtot[t];
        const float sx = j->xs[t];
        for (uint64_t i = 0; i < nr; i++) {
            const float v = bn_bl_tensor_row(acc[i * ld + t] - xt, per_row ? w->d[r0 + i] : w->d[0], sx);
            y[i] = bn_bl_epilogue(v, io, w->out, t, r0 + i);
        }
    }
}

/* Rows in pieces of BL_ROWS (2 for many tokens) so that the partial sums
 * stay small. */
#define BL_ROWS 256
/* Rows per batch of the group-scale path */
#define BL_GROUP_ROWS 8
static uint64_t tensor_row_rows(uint64_t T) { return T <= BL_ROWS ? BL_ROWS : 2; }
static void rows_tensor_row(bl_job *j, uint64_t begin, uint64_t end, int32_t *part)
{
    const uint64_t T = j->io->tokens;
    const size_t cb = chunk_blocks(j);
    const uint64_t rows = tensor_row_rows(T);
    for (uint64_t r0 = begin; r0 < end; r0 += rows) {
        const uint64_t r1 = end - r0 < rows ? end : r0 + rows;
        memset(part, 0, (size_t)((r1 - r0) * T) * sizeof(int32_t));
        if (cb)
            for (size_t c0 = 0; c0 < j->nblocks; c0 += cb)
                sums_chunk(j, r0, r1, c0, j->nblocks - c0 < cb ? j->nblocks - c0 : cb, part, end);
        else
            sums_chunk(j, r0, r1, 0, j->nblocks, part, end);
        emit_rows(j, r0, r1 - r0, part, T);
    }
}

/* Group scales, one token: acc[g] = sum of sub over group g (spg
 * sub-blocks, the last one cut at nsub) - xg[g], in place of sub. */
static void group_sums(int32_t *restrict sub, size_t nsub, const int32_t *restrict xg, uint64_t ng, uint64_t spg)
{
    if (spg == 1) {
        for (uint64_t g = 0; g < ng; g++) sub[g] -= xg[g];
    } else if (spg == 2) {
        for (uint64_t g = 0; g + 1 < ng; g++) sub[g] = sub[2 * g] + sub[2 * g + 1] - xg[g];
        const uint64_t g = ng - 1;
        sub[g] = sub[2 * g] + (2 * g + 1 < nsub ? sub[2 * g + 1] : 0) - xg[g];
    } else {
        for (uint64_t g = 0; g < ng; g++) {
            const uint64_t i0 = g * spg, i1 = i0 + spg < nsub ? i0 + spg : nsub;
            int32_t a = -xg[g];
            for (uint64_t i = i0; i < i1; i++) a += sub[i];
            sub[g] = a;
        }
    }
}

/* y[r] = the chain sum = sum + (float)acc[r][g] * d[r][g] over g in order
 * (the order of the definition), for nr rows (a constant after inlining):
 * nr independent chains that the CPU overlaps, instead of one chain whose
 * every step waits for the previous add.  Row r: acc + r * astride,
 * d + r * ng. */
static inline __attribute__((always_inline)) void group_chains(const int32_t *acc, size_t astride, const float *d,
                                                               uint64_t ng, const uint64_t nr, float *y)
{
    float sum[BL_GROUP_ROWS] = {0};
    for (uint64_t g = 0; g < ng; g++)
        for (uint64_t r = 0; r < nr; r++) sum[r] = sum[r] + (float)acc[r * astride + g] * d[r * ng + g];
    for (uint64_t r = 0; r < nr; r++) y[r] = sum[r];
}

/* The outputs of token t for rows [o, o + nr) (nr <= BL_GROUP_ROWS) from
 * their integer group sums (row r's at acc + r * astride): the float chains
 * of the rows side by side, then the epilogue.  Inlined: as a call, group
 * 32 at 8 tokens took 17.2 ms against 14.1 (4096 x 14336, one thread). */
static inline __attribute__((always_inline)) void emit_group_rows(const bl_job *j, const int32_t *acc, size_t astride,
                                                                  uint64_t o, uint64_t nr, uint64_t t)
{
    const bitnet_ternary_matrix *w = j->w;
    const uint64_t ng = (w->in + w->group - 1) / w->group;
    float y[BL_GROUP_ROWS];
    if (nr == BL_GROUP_ROWS && j->k->chains8) j->k->chains8(acc, astride, w->d + o * ng, ng, y);
    else if (nr == BL_GROUP_ROWS) group_chains(acc, astride, w->d + o * ng, ng, BL_GROUP_ROWS, y);
    else for (uint64_t r = 0; r < nr; r++) group_chains(acc + r * astride, astride, w->d + (o + r) * ng, ng, 1, y + r);
    for (uint64_t r = 0; r < nr; r++) j->y[t * w->out + o + r] = bn_bl_epilogue(y[r] / j->xs[t], j->io, w->out, t, o + r);
}

/* Group scales on the grp1 / grpn kernels (groups of one block or of an
 * even number of blocks) or on grp1s / grpns (groups of 32 and 64 columns).
 * One token: eight rows' group sums (two rows a call), then
 * emit_group_rows.  More tokens: two rows and tokens_per_pass tokens a
 * call, the float chains inside the kernel. */
static int group_fast(const bl_job *j)
{
    const uint32_t g = j->w->group;
    if (g == 32 || g == 64) return j->k->grp1s && (j->io->tokens == 1 || j->k->grpns);
    return j->k->grpn && g % BITNET_T2_BLOCK == 0 && (g == BITNET_T2_BLOCK || g / BITNET_T2_BLOCK % 2 == 0);
}

static void rows_group_fast(bl_job *j, uint64_t begin, uint64_t end, int32_t *sub)
{
    const bitnet_ternary_matrix *w = j->w;
    const bitnet_bitlinear_io *io = j->io;
    const uint64_t T = io->tokens, out = w->out;
    const size_t ng = (size_t)((w->in + w->group - 1) / w->group), bpg = w->group / BITNET_T2_BLOCK;
    const uint64_t tpp = (uint64_t)j->k->tokens_per_pass;
    /* 32 or 64 columns: grp1s and grpns, whose size argument counts 32-column planes */
    const int small = w->group < BITNET_T2_BLOCK;
    const bn_t2_grp1_fn grp1 = small ? j->k->grp1s : j->k->grp1;
    const bn_t2_grpn_fn grpn = small ? j->k->grpns : j->k->grpn;
    const size_t unit = small ? w->group / 32 : bpg;
    if (T == 1) {
        const uint8_t *last = w->t2 + end * j->rb - 1;
        for (uint64_t o = begin; o < end; o += BL_GROUP_ROWS) {
            const uint64_t nr = end - o < BL_GROUP_ROWS ? end - o : BL_GROUP_ROWS;
            /* an odd last row is computed twice, into the next slot (nr < 8 there) */
            for (uint64_t r = 0; r < nr; r += 2)
                grp1(w->t2 + (o + r) * j->rb, r + 1 < nr ? j->rb : 0, j->xq, j->nblocks, unit, ng, j->xgrp, sub + r * ng,
                     sub + (r + 1) * ng, last);
            emit_group_rows(j, sub, ng, o, nr, 0);
        }
        return;
    }
    for (uint64_t o = begin; o < end; o += 2) {
        const int two = o + 1 < end;
        if (o + 2 < end) pf_chunk(j, o + 2, 0, j->nblocks);
        if (o + 3 < end) pf_chunk(j, o + 3, 0, j->nblocks);
        const float *d0 = w->d + o * ng, *d1 = two ? d0 + ng : d0;
        for (uint64_t t0 = 0; t0 < T; t0 += tpp) {
            const int nt = T - t0 < tpp ? (int)(T - t0) : (int)tpp;
            float sums[16];
            grpn(w->t2 + o * j->rb, two ? j->rb : 0, j->xq + t0 * j->xstride, j->xstride, nt, j->nblocks, unit, ng, d0,
                 d1, j->xgp + (size_t)(t0 / tpp) * ng * tpp, sums);
            for (int r = 0; r < 1 + two; r++)
                for (int i = 0; i < nt; i++) {
                    const uint64_t t = t0 + (uint64_t)i;
                    j->y[t * out + o + (uint64_t)r] = bn_bl_epilogue(sums[8 * r + i] / j->xs[t], io, out, t, o + (uint64_t)r);
                }
        }
    }
}

static void rows_group(bl_job *j, uint64_t begin, uint64_t end, int32_t *sub)
{
    if (group_fast(j)) {
        rows_group_fast(j, begin, end, sub);
        return;
    }
    const bitnet_ternary_matrix *w = j->w;
    const bitnet_bitlinear_io *io = j->io;
    const uint64_t T = io->tokens, out = w->out;
    const uint64_t ng = (w->in + w->group - 1) / w->group, spg = w->group / 32;
    /* Groups of whole blocks: one dot call per group for up to
     * tokens_per_pass tokens (the kernels' natural layout; the AVX2 set is
     * the one picked for group scales), the same float order as below. */
    const int whole = w->group % BITNET_T2_BLOCK == 0 && !j->k->pair_layout;
    const uint64_t bpg = w->group / BITNET_T2_BLOCK;
    const int tpp = j->k->tokens_per_pass;
    for (uint64_t o = begin; whole && o < end; o++) {
        const uint8_t *row = w->t2 + o * j->rb;
        const float *d = w->d + o * ng;
        for (uint64_t t0 = 0; t0 < T; t0 += (uint64_t)tpp) {
            const int nt = T - t0 < (uint64_t)tpp ? (int)(T - t0) : tpp;
            float sum[BN_T2_MAXT] = {0};
            int32_t acc[BN_T2_MAXT];
            for (uint64_t g = 0; g < ng; g++) {
                const uint64_t b0 = g * bpg, b1 = b0 + bpg < j->nblocks ? b0 + bpg : j->nblocks;
                j->k->dot(row + b0 * BITNET_T2_BLOCK_BYTES, j->xq + t0 * j->xstride + b0 * BITNET_T2_BLOCK, j->xstride,
                          nt, (size_t)(b1 - b0), acc);
                for (int i = 0; i < nt; i++) {
                    const int32_t *xsub = j->xsub + (t0 + (uint64_t)i) * j->nsub;
                    int32_t a = acc[i];
                    for (uint64_t q = b0 * 4; q < b1 * 4 && q < j->nsub; q++) a -= xsub[q];
                    sum[i] = sum[i] + (float)a * d[g];
                }
            }
            for (int i = 0; i < nt; i++)
                j->y[(t0 + (uint64_t)i) * out + o] = bn_bl_epilogue(sum[i] / j->xs[t0 + (uint64_t)i], io, out, t0 + (uint64_t)i, o);
        }
    }
    for (uint64_t o = begin; !whole && o < end; o += BL_GROUP_ROWS) {
        const uint64_t nr = end - o < BL_GROUP_ROWS ? end - o : BL_GROUP_ROWS;
        for (uint64_t t = 0; t < T; t++) {
            for (uint64_t r = 0; r < nr; r++) {
                int32_t *sr = sub + r * j->nsub;
                j->k->dot_sub(w->t2 + (o + r) * j->rb, j->xq + t * j->xstride, j->nblocks, sr);
                group_sums(sr, j->nsub, j->xgrp + t * ng, ng, spg);
            }
            emit_group_rows(j, sub, j->nsub, o, nr, t);
        }
    }
}

/* ---- many tokens on INT8 tiles (AMX, its plain-C emulation, or VNNI) -------- */

/* Tiles from this many tokens up: 8 tokens fill half of a 16-token tile,
 * which AMX still does several times faster than VNNI. */
#define BL_TILES_MIN_TOKENS 8
/* Group scales on AVX-512 VNNI without AMX take the same tile code with the
 * tile product done by vpdpbusd (bitlinear_tiles_vnni.c) from this many
 * tokens: the tokens in the lanes, a group's sums need no horizontal adds.
 * On the Zen 4 VM, 4096 x 14336, group 256, in cache, one thread, two
 * alternating rounds against grpn, ms: 16 tokens 5.71-5.79 / 6.11-6.29,
 * 32 tokens 10.90-10.98 / 12.15-12.30, 64 tokens 21.50-21.57 / 25.13-25.56,
 * 128 tokens 42.9-43.2 / 53.2-54.3 (tensor scale on dot_nt 4.8-4.9, 9.7,
 * 19.1-19.2, 38.4-38.9); 8 tokens (half a tile) 6.6-6.7 / 3.1-3.3. */
#define BL_TILES_VNNI_MIN_TOKENS 16

/* Packs steps [begin, end) of 64 columns of every token tile (see
 * bn_t2_tiles_fn) from natural-layout rows; tokens past T are zero. */
static void tiles_pack(void *arg, uint64_t begin, uint64_t end)
{
    bl_job *j = arg;
    const uint64_t T = j->io->tokens;
    const int8_t *nat = j->k->pair_layout ? j->xnat : j->xq;
    for (uint64_t q = 0; q < j->ntt; q++)
        for (uint64_t s = begin; s < end; s++) {
            int8_t *tile = j->xpack + (q * j->nsteps + s) * 1024;
            for (uint64_t n = 0; n < 16; n++) {
                const uint64_t t = 16 * q + n;
                for (int r = 0; r < 16; r++) {
                    if (t < T) memcpy(tile + 64 * r + 4 * n, nat + t * j->xstride + 64 * s + 4 * r, 4);
                    else memset(tile + 64 * r + 4 * n, 0, 4);
                }
            }
        }
}

static void rows_tiles(bl_job *j, uint64_t begin, uint64_t end, int32_t *acc)
{
    const size_t ld = (size_t)j->ntt * 16;
    const bitnet_ternary_matrix *w = j->w;
    if (w->kind != BITNET_SCALE_GROUP) {
        j->tiles(w->t2 + begin * j->rb, j->rb, end - begin, j->xpack, j->ntt, j->nsteps, acc, ld, NULL);
        emit_rows(j, begin, end - begin, acc, ld);
        return;
    }
    /* group scales: the float chains come from the tile function; the slot
     * of partial sums holds them (scratch without a declared type) */
    const bitnet_bitlinear_io *io = j->io;
    const size_t ng = (size_t)((w->in + w->group - 1) / w->group);
    float *fs = (float *)(void *)acc;
    const bn_t2_tiles_grp grp = {.bpg = w->group / BITNET_T2_BLOCK, .ng = ng, .d = w->d + begin * ng, .xg = j->xgt,
                                 .ldx = ld, .sums = fs};
    j->tiles(w->t2 + begin * j->rb, j->rb, end - begin, j->xpack, j->ntt, j->nsteps, acc, ld, &grp);
    for (uint64_t t = 0; t < io->tokens; t++) /* token by token, as emit_rows */
        for (uint64_t i = 0; i < end - begin; i++)
            j->y[t * w->out + begin + i] = bn_bl_epilogue(fs[i * ld + t] / j->xs[t], io, w->out, t, begin + i);
}

/* The tile function for this call, or NULL. */
static bn_t2_tiles_fn pick_tiles(const bn_cpu *cpu, uint64_t tokens, const bitnet_ternary_matrix *w)
{
#if defined(__x86_64__)
    const int group = w->kind == BITNET_SCALE_GROUP;
    /* group scales: groups of whole blocks (128 columns and more) */
    if (tokens < BL_TILES_MIN_TOKENS || (group && w->group % BITNET_T2_BLOCK != 0)) return NULL;
    /* Every scale kind on AMX from BL_TILES_MIN_TOKENS.  On an H100
     * machine's 16-core Sapphire Rapids host, 4096 x 14336, 16 threads, two
     * rounds, ms: group 256 in cache, VNNI tiles against AMX, 16 tokens
     * 1.11-1.58 / 0.30-0.36, 64 tokens 2.81 / 0.87-1.32; weights rotated,
     * grpn (the one-token-style kernel of many tokens) against AMX, group
     * 256 at 8 / 12 tokens 0.476-0.555 / 0.771-0.846 against 0.362-0.399 /
     * 0.364-0.399, group 128 0.570-0.576 / 0.834-0.861 against 0.433-0.462
     * / 0.439-0.478 (bitnet-bench's check ok on every run). */
    if (cpu->simd == BN_SIMD_AMX) return bn_t2_tiles_amx;
    const char *emu = getenv("BITNET_AMX_EMULATE");
    if (emu && strcmp(emu, "1") == 0 && cpu->simd >= BN_SIMD_AVX2) return bn_t2_tiles_emu;
    if (cpu->simd >= BN_SIMD_AVX512_VNNI && group && tokens >= BL_TILES_VNNI_MIN_TOKENS) return bn_t2_tiles_vnni;
#else
    (void)cpu;
    (void)tokens;
    (void)w;
#endif
    return NULL;
}

/* Each thread takes the next piece of rows until none is left: a thread
 * that starts late (woken late, or preempted by another process) takes
 * fewer pieces instead of holding up the call. */
static void rows_dynamic(void *arg, uint64_t begin, uint64_t end)
{
    bl_job *j = arg;
    (void)begin;
    (void)end;
    /* one slot of partial sums per running range: at most one per thread */
    int32_t *acc = j->acc + __atomic_fetch_add(&j->next_slot, 1, __ATOMIC_RELAXED) * j->acc_elems;
    for (;;) {
        const uint64_t p = __atomic_fetch_add(&j->next_piece, 1, __ATOMIC_RELAXED);
        if (p >= j->npieces) break;
        const uint64_t r0 = p * j->piece_rows, out = j->w->out;
        j->rows_fn(j, r0, out - r0 < j->piece_rows ? out : r0 + j->piece_rows, acc);
    }
}

static void requant_tokens(void *arg, uint64_t begin, uint64_t end)
{
    bl_job *j = arg;
    const uint64_t out = j->w->out;
    for (uint64_t t = begin; t < end; t++)
        if (j->k->quant_row(j->y + t * out, out, out, j->io->yq + t * out, &j->io->ys[t])) set_failed(j);
}

/* Pieces of about BL_PIECE bytes of weights, but at least 4 per thread.
 * The one-token kernel prefetches ahead only inside its piece, so each piece
 * starts cold: with 64 KiB pieces 2 threads took 0.86-1.17 ms (median) for
 * 4096 x 14336 against 0.53-1.05 ms with 1 MiB pieces (busy 2-core VM).
 * Tried and not kept (Zen 4 VM, 2026-12-05, three alternating rounds, one
 * thread, medians in ms): the first 24 KiB of each piece prefetched at once
 * before its rows, 0.72-0.80 against 0.72-0.78 with 1 MiB pieces, and
 * 0.82-0.84 against 0.84-0.88 with 256 KiB pieces (two threads: within the
 * noise); the cold start of a piece is not what a thread waits on. */
/* The tiles are bound by the tile unit, not by memory: their pieces are
 * whole row tiles, at least as many per thread as below (never larger than
 * the pieces above), so that the threads end together.  The rule above gave
 * 4096 x 14336 on 16 threads 52 pieces of 80 rows, and the threads that took
 * a fourth piece held up the call.  Up to four token tiles (one pass over the
 * packed activations, which stay in L2 from piece to piece) small pieces
 * cost nothing; with more, each piece reads every pass's activations again,
 * so they are larger.  An H100 machine's 16-core host (AMX), 4096 x 14336,
 * weights rotated, three alternating rounds, medians in us:
 *   tile kernel of 11826c8:  80-row pieces / 64 rows (4 per thread):
 *     64 tokens 796-830 / 736-790, 256 tokens 3089-3469 / 2860-3224
 *   blocks decoded ahead:    4 per thread / 8 per thread:
 *     64 tokens 720-786 / 727-741, 256 tokens 2881-3201 / 3280-3457
 * 8 and 16 tokens within the noise. */
#define BL_TILE_PIECES_1 8 /* pieces per thread, up to four token tiles */
#define BL_TILE_PIECES_N 4 /* more */
#ifndef BL_PIECE
#define BL_PIECE (1u << 20)
#endif

/* Scratch layout: consecutive parts, each 64-byte aligned (a 64-byte load
 * across two cache lines costs two) with BN_SCRATCH_GAP bytes after it;
 * returns nonzero on overflow. */
static int carve(size_t *total, size_t bytes, size_t *at)
{
    size_t r;
    if (bn_add_size(bytes, 63 + BN_SCRATCH_GAP, &r)) return 1;
    *at = *total;
    return bn_add_size(*total, r & ~(size_t)63, total);
}

bitnet_status bn_cpu_bitlinear(void *ctx, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io)
{
    bn_cpu *cpu = ctx;
    const uint64_t T = io->tokens, in = w->in, out = w->out;
    const int group = w->kind == BITNET_SCALE_GROUP;
    bl_job j;
    memset(&j, 0, sizeof j);
    j.w = w;
    j.io = io;
    j.k = pick_kernels(cpu->simd, group);
    j.rb = bitnet_t2_row_bytes(in);
    j.nblocks = j.rb / BITNET_T2_BLOCK_BYTES;
    j.nsub = j.nblocks * 4;
    j.xstride = (j.k->pair_layout ? (j.nblocks + 1) / 2 * 2 : j.nblocks) * BITNET_T2_BLOCK;
    size_t xbytes, ybytes;
    if (bn_mul_size(j.xstride, (size_t)T, &xbytes) || bn_mul_size((size_t)T * out, sizeof(float), &ybytes))
        return bn_fail(BITNET_E_OVERFLOW, "bitlinear: scratch size");
    j.tiles = pick_tiles(cpu, T, w);
    j.ntt = (T + 15) / 16;
    j.nsteps = j.nblocks * 2;
    uint64_t piece = BL_PIECE, wbytes = out * j.rb;
    const uint64_t threads = (uint64_t)bn_pool_threads(cpu->pool), per = 4 * threads;
    if (wbytes / per < piece) piece = wbytes / per;
    j.rows_fn = j.tiles ? rows_tiles : group ? rows_group : rows_tensor_row;
    /* a multiple of 16: whole tiles, whole passes of the two-row kernel and of the 8-row group chains */
    j.piece_rows = (piece / j.rb + 16) & ~(uint64_t)15;
    if (j.tiles) {
        const uint64_t nrt = (out + 15) / 16, want = (j.ntt <= 4 ? BL_TILE_PIECES_1 : BL_TILE_PIECES_N) * threads;
        const uint64_t rows = 16 * ((nrt + want - 1) / want);
        if (rows < j.piece_rows) j.piece_rows = rows;
    }
    j.npieces = (out + j.piece_rows - 1) / j.piece_rows;
    /* the partial sums of one thread's piece: tiles, group chains or row passes */
    j.acc_elems = j.tiles ? (size_t)(j.piece_rows * j.ntt * 16)
                  : group ? BL_GROUP_ROWS * j.nsub
                          : (size_t)(tensor_row_rows(T) * T);
    size_t ng = 0, pbytes = 0, accbytes;
    if (group) ng = (size_t)((in + w->group - 1) / w->group);
    if ((j.tiles && bn_mul_size(j.nsteps * 1024, (size_t)j.ntt, &pbytes)) ||
        bn_mul_size(j.acc_elems * sizeof(int32_t), (size_t)threads, &accbytes))
        return bn_fail(BITNET_E_OVERFLOW, "bitlinear: scratch size");
    size_t nbytes = 0;
    if (io->norm && bn_mul_size((size_t)(T * in), sizeof(float), &nbytes))
        return bn_fail(BITNET_E_OVERFLOW, "bitlinear: scratch size");
    const size_t tpp = (size_t)j.k->tokens_per_pass;
    size_t xgpbytes = 0; /* ng * tpp per pass of tpp tokens, for the grpn kernels */
    if (group && group_fast(&j) && bn_mul_size(((size_t)T + tpp - 1) / tpp * tpp * sizeof(int32_t), ng, &xgpbytes))
        return bn_fail(BITNET_E_OVERFLOW, "bitlinear: scratch size");
    size_t xgtbytes = 0; /* group scales on tiles: ng x 16 ntt */
    if (group && j.tiles && bn_mul_size((size_t)j.ntt * 16 * sizeof(int32_t), ng, &xgtbytes))
        return bn_fail(BITNET_E_OVERFLOW, "bitlinear: scratch size");
    enum { XQ, XNAT, XS, XSUB, XTOT, XGRP, XGP, XGT, Y, XPACK, ACC, XNORM, NPARTS };
    const size_t bytes[NPARTS] = {
        [XQ] = xbytes, [XNAT] = j.k->pair_layout ? xbytes : 0, [XS] = (size_t)T * sizeof(float),
        [XSUB] = (size_t)T * j.nsub * sizeof(int32_t), [XTOT] = (size_t)T * sizeof(int32_t),
        [XGRP] = (size_t)T * ng * sizeof(int32_t), [XGP] = xgpbytes, [XGT] = xgtbytes, [Y] = io->y ? 0 : ybytes, [XPACK] = pbytes, [ACC] = accbytes, [XNORM] = nbytes};
    size_t at[NPARTS], total = 0;
    for (int i = 0; i < NPARTS; i++)
        if (carve(&total, bytes[i], &at[i])) return bn_fail(BITNET_E_OVERFLOW, "bitlinear: scratch size");
    char *scr = bn_cpu_scratch(cpu, total);
    if (!scr) return bn_fail(BITNET_E_NOMEM, "bitlinear: scratch of %zu bytes", total);
    for (int i = 0; i < NPARTS; i++) bn_cpu_scratch_open(cpu, at[i], bytes[i]);
    j.xq = (int8_t *)(scr + at[XQ]);
    j.xnat = j.k->pair_layout ? (int8_t *)(scr + at[XNAT]) : NULL;
    j.xs = (float *)(scr + at[XS]);
    j.xsub = (int32_t *)(scr + at[XSUB]);
    j.xtot = (int32_t *)(scr + at[XTOT]);
    j.xgrp = group ? (int32_t *)(scr + at[XGRP]) : NULL;
    j.xgp = xgpbytes ? (int32_t *)(scr + at[XGP]) : NULL;
    j.xgt = xgtbytes ? (int32_t *)(scr + at[XGT]) : NULL;
    if (j.xgp && T % tpp) /* the lanes of the tokens past T in the last pass */
        memset(j.xgp + (size_t)T / tpp * ng * tpp, 0, ng * tpp * sizeof(int32_t));
    if (j.xgt && T % 16) /* the same for the last token tile (prep_tokens writes the others) */
        memset(j.xgt, 0, xgtbytes);
    j.y = io->y ? io->y : (float *)(scr + at[Y]);
    j.xpack = j.tiles ? (int8_t *)(scr + at[XPACK]) : NULL;
    j.acc = (int32_t *)(scr + at[ACC]);
    j.xnorm = io->norm ? (float *)(scr + at[XNORM]) : NULL;
    bitnet_status st = BITNET_OK;
    bn_parallel_for(cpu->pool, T, 1, prep_tokens, &j);
    if (j.failed) { st = bn_fail(BITNET_E_NUMERIC, "bitlinear: input holds NaN or Inf"); goto out; }
    if (j.tiles) bn_parallel_for(cpu->pool, j.nsteps, 4, tiles_pack, &j);
    bn_parallel_for(cpu->pool, j.npieces, 1, rows_dynamic, &j);
    if (io->yq) {
        bn_parallel_for(cpu->pool, T, 1, requant_tokens, &j);
        if (j.failed) { st = bn_fail(BITNET_E_NUMERIC, "bitlinear: output holds NaN or Inf"); goto out; }
    }
    if (bn_test_perturb("bitlinear")) {
        if (io->yq) io->yq[0] = (int8_t)(io->yq[0] == 127 ? 126 : io->yq[0] + 1);
        else io->y[0] = io->y[0] + 1.0f;
    }
out:
    bn_cpu_scratch_done(cpu);
    return st;
}
