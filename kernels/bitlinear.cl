/*
 * bitlinear.cl - BitLinear on OpenCL devices (after common.cl).
 *
 * Weights are T2 rows (bnt(5)); activations arrive quantized by the host
 * (int8 rows of `xstride` bytes, zero-padded to whole 128-column blocks) with
 * their scales s.  Integer sums are exact; the epilogue is the library's one
 * float order, with no contraction (FP_CONTRACT OFF) and the division
 * correctly rounded (the host builds with -cl-fp32-correctly-rounded-divide-sqrt):
 *   tensor/row: y = (float)acc * (d / s);  group: y = (sum_g (float)acc_g * d_g) / s;
 *   then y + bias, then the activation.
 *
 * Kernels: bl_gemv (portable, few tokens: LX work-items share a row, RY rows
 * per work-group, uint4 loads, reduction in local memory), bl_gemm (many
 * tokens: TS x TS tiles of rows x tokens through local memory), bl_group
 * (group scales: a work-group per row, a work-item per group, the groups'
 * products added in order); on NVIDIA
 * only (inline PTX), bl_gemv_nv1, bl_gemv_nv3 and bl_gemv_nv4 (dp4a and warp
 * shuffles, fewer than 8 tokens) and bl_gemm_mma (8 tokens and more: INT8
 * tensor cores, mma.sync) and bl_group_mma (group scales of whole blocks on
 * the tensor cores).
 */
#pragma OPENCL FP_CONTRACT OFF

#ifndef GEMV_LX
#define GEMV_LX 64 /* work-items per row (power of two) */
#endif
#ifndef GEMV_RY
#define GEMV_RY 4 /* rows per work-group */
#endif
#ifndef GEMV_TT
#define GEMV_TT 4 /* tokens per pass over the weights */
#endif
#ifndef CONTIG
#define CONTIG 0 /* 1: each work-item walks a contiguous span (CPU devices) */
#endif
#ifndef TS
#define TS 16 /* bl_gemm tile: TS rows x TS tokens */
#endif

/* The epilogue of every kernel: bias, activation, then the residual res
 * (tokens x out, indexed like y; it may be y itself) when has_res.  Each
 * kernel takes res and has_res as its last two arguments, which bl_store
 * passes on. */
inline void bl_store_r(__global float *y, bn_size idx, float v, __global const float *bias, int has_bias, bn_size o,
                       int act, long perturb, __global const float *res, int has_res)
{
    if (has_bias) v = v + bias[o];
    if (act) v = bn_act(act, v);
    if (has_res) v = v + res[idx];
    if ((long)idx == perturb) v = bn_perturb(v);
    y[idx] = v;
}
#define bl_store(y, idx, v, bias, has_bias, o, act, perturb) \
    bl_store_r((y), (idx), (v), (bias), (has_bias), (o), (act), (perturb), res, has_res)
#define BL_RES_ARGS , __global const float *res, const int has_res

inline float bl_scale(int acc, float d, float s)
{
    const float f = d / s;
    return convert_float(acc) * f;
}

/* Sum of code-1 times x over 16 columns: codes from one byte lane set
 * (bl_dot16v: the activations already in a register). */
inline int bl_dot16v(uint4 wv, int k, char16 xv)
{
    const uchar16 c = as_uchar16((wv >> (uint)(2 * k)) & (uint4)(0x03030303u));
    const int16 p = (convert_int16(c) - 1) * convert_int16(xv);
    const int8 a = p.s01234567 + p.s89abcdef;
    const int4 b = a.s0123 + a.s4567;
    return b.s0 + b.s1 + b.s2 + b.s3;
}
inline int bl_dot16(uint4 wv, int k, __global const char *xp) { return bl_dot16v(wv, k, vload16(0, xp)); }

__kernel __attribute__((reqd_work_group_size(GEMV_LX, GEMV_RY, 1)))
void bl_gemv(__global const uint4 *w, __global const char *x, __global const float *xs, __global const float *d,
             const int per_row, __global const float *bias, const int has_bias, const int act, __global float *y,
             const bn_size out, const bn_size tokens, const bn_size nhalf, const bn_size xstride, const long perturb BL_RES_ARGS)
{
    __local int red[GEMV_RY][GEMV_TT][GEMV_LX];
    const int lx = get_local_id(0), ly = get_local_id(1);
    const bn_size o = get_global_id(1);
    __global const uint4 *wr = w + o * nhalf;
    for (bn_size t0 = 0; t0 < tokens; t0 += GEMV_TT) {
        int acc[GEMV_TT];
        for (int i = 0; i < GEMV_TT; i++) acc[i] = 0;
        if (o < out) {
#if CONTIG
            const bn_size h1 = nhalf * (bn_size)(lx + 1) / GEMV_LX;
            for (bn_size h = nhalf * (bn_size)lx / GEMV_LX; h < h1; h++) {
#else
            for (bn_size h = lx; h < nhalf; h += GEMV_LX) {
#endif
                const uint4 wv = wr[h];
                const bn_size col0 = (h >> 1) * 128 + (h & 1) * 16;
                for (int i = 0; i < GEMV_TT; i++) {
                    if (t0 + i >= tokens) break;
                    __global const char *xp = x + (t0 + i) * xstride + col0;
                    acc[i] += bl_dot16(wv, 0, xp) + bl_dot16(wv, 1, xp + 32) + bl_dot16(wv, 2, xp + 64) +
                              bl_dot16(wv, 3, xp + 96);
                }
            }
        }
        for (int i = 0; i < GEMV_TT; i++) red[ly][i][lx] = acc[i];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int s = GEMV_LX / 2; s > 0; s >>= 1) {
            if (lx < s)
                for (int i = 0; i < GEMV_TT; i++) red[ly][i][lx] += red[ly][i][lx + s];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (lx < GEMV_TT && o < out && t0 + lx < tokens) {
            const bn_size t = t0 + lx;
            const float v = bl_scale(red[ly][lx][0], per_row ? d[o] : d[0], xs[t]);
            bl_store(y, t * out + o, v, bias, has_bias, o, act, perturb);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* Many tokens: a TS x TS work-group computes rows r0.. x tokens t0.., one
 * block (128 columns) of codes and activations at a time in local memory. */
__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void bl_gemm(__global const uchar *w, __global const char *x, __global const float *xs, __global const float *d,
             const int per_row, __global const float *bias, const int has_bias, const int act, __global float *y,
             const bn_size out, const bn_size tokens, const bn_size nblocks, const bn_size xstride, const long perturb BL_RES_ARGS)
{
    __local uchar wl[TS][32];
    __local char xl[TS][128];
    const int tl = get_local_id(0), rl = get_local_id(1);
    const bn_size t = get_global_id(0), o = get_global_id(1);
    const bn_size t_base = get_group_id(0) * TS, o_base = get_group_id(1) * TS;
    const int lid = rl * TS + tl;
    int acc = 0;
    for (bn_size b = 0; b < nblocks; b++) {
        for (int i = lid; i < TS * 32; i += TS * TS) {
            const bn_size r = o_base + (bn_size)(i / 32);
            wl[i / 32][i % 32] = r < out ? w[r * nblocks * 32 + b * 32 + (i % 32)] : (uchar)0x55;
        }
        for (int i = lid; i < TS * 128; i += TS * TS) {
            const bn_size tt = t_base + (bn_size)(i / 128);
            xl[i / 128][i % 128] = tt < tokens ? x[tt * xstride + b * 128 + (i % 128)] : (char)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int j = 0; j < 32; j++) {
            const int byte = wl[rl][j];
            acc += (((byte) & 3) - 1) * xl[tl][j] + (((byte >> 2) & 3) - 1) * xl[tl][32 + j] +
                   (((byte >> 4) & 3) - 1) * xl[tl][64 + j] + (((byte >> 6) & 3) - 1) * xl[tl][96 + j];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (o < out && t < tokens) {
        const float v = bl_scale(acc, per_row ? d[o] : d[0], xs[t]);
        bl_store(y, t * out + o, v, bias, has_bias, o, act, perturb);
    }
}

/* bl_group: one work-group of GRP_WG work-items a row.  Work-item i takes
 * the groups i, i + GRP_WG, ... of the row (each group's columns whole: one
 * exact integer sum per token, GRP_TT tokens a pass, codes loaded 16 bytes
 * at a time) and puts (float)acc * d of its group into local memory; then
 * the work-item of each token adds the GRP_WG products in group order to
 * its running sum (the definition's chain).  Before (until 2026-12-05) one
 * work-item walked a whole row a column at a time: on PoCL (2-vCPU Zen 4
 * VM, 4096 x 14336, weights kept) group 256 took 14.4 ms at one token and
 * 116 ms at 8, now 5.7 and 28.4 (row scales 5.3 and 25, bl_gemv). */
#ifndef GRP_WG
#define GRP_WG 64
#endif
#if defined(__NV_CL_C_VERSION) || defined(NV_EMULATE)
/* dp4a: c plus the four products of a's and b's signed bytes; PTX on
 * NVIDIA, plain C under NV_EMULATE (tests on other devices).  bl_group and
 * the NV family below use it. */
#ifdef NV_EMULATE
inline int bl_dp4a(int a, int b, int c)
{
    for (int i = 0; i < 32; i += 8) c += (int)(char)(a >> i) * (int)(char)(b >> i);
    return c;
}
#else
inline int bl_dp4a(int a, int b, int c)
{
    int r;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}
#endif
#endif
/* bl_dot16 of 16 aligned activations in a register: the codes' rows and the
 * activations' (whole blocks, xstride a multiple of 128) are 16-byte aligned,
 * so both load as vectors (byte loads otherwise, in clang's nvptx build).
 * On NVIDIA (and under NV_EMULATE) the codes become c - 1 in signed bytes
 * without borrows, ((c | 0x80) - 1) ^ 0x80, and dp4a sums four products at
 * once: in clang's nvptx build (tests/device/sass-loop.sh bitlinear
 * bl_group) a 32-column sub-block of four tokens took 109 instructions (32
 * IDP) where it took 4 x 90 (32 IMAD, 32 PRMT each).  Not yet timed on a GPU. */
inline int grp_dot16(uint4 wv, int k, int4 xv)
{
#if defined(__NV_CL_C_VERSION) || defined(NV_EMULATE)
    const uint4 s = ((((wv >> (uint)(2 * k)) & (uint4)(0x03030303u)) | (uint4)(0x80808080u)) - (uint4)(0x01010101u)) ^
                    (uint4)(0x80808080u);
    const int4 c = as_int4(s);
    return bl_dp4a(c.x, xv.x, bl_dp4a(c.y, xv.y, bl_dp4a(c.z, xv.z, bl_dp4a(c.w, xv.w, 0))));
#else
    return bl_dot16v(wv, k, as_char16(xv));
#endif
}
#ifndef GRP_TT
#define GRP_TT 4
#endif
__kernel __attribute__((reqd_work_group_size(GRP_WG, 1, 1)))
void bl_group(__global const uchar *w, __global const char *x, __global const float *xs,
                       __global const float *d, const uint group, __global const float *bias, const int has_bias,
                       const int act, __global float *y, const bn_size out, const bn_size tokens, const bn_size in,
                       const bn_size xstride, const long perturb BL_RES_ARGS)
{
    __local float lp[GRP_TT][GRP_WG];
    const bn_size o = get_group_id(0);
    const int i = (int)get_local_id(0);
    const bn_size nblocks = (in + 127) / 128, ng = (in + group - 1) / group, nq = nblocks * 4, qpg = group / 32;
    __global const uchar *wr = w + o * nblocks * 32;
    for (bn_size t0 = 0; t0 < tokens; t0 += GRP_TT) {
        const int nt = tokens - t0 < GRP_TT ? (int)(tokens - t0) : GRP_TT;
        float sum = 0.0f; /* work-item i < nt: token t0 + i */
        for (bn_size g0 = 0; g0 < ng; g0 += GRP_WG) {
            const bn_size g = g0 + (bn_size)i;
            if (g < ng) {
                int acc[GRP_TT];
                for (int t = 0; t < GRP_TT; t++) acc[t] = 0;
                /* the group's 32-column sub-blocks q: block q / 4, shift q % 4 */
                const bn_size q0 = g * qpg, q1 = q0 + qpg < nq ? q0 + qpg : nq;
                for (bn_size q = q0; q < q1; q++) {
                    const int k = (int)(q & 3);
                    __global const uint4 *wq = (__global const uint4 *)(wr + (q >> 2) * 32);
                    const uint4 w0 = wq[0], w1 = wq[1];
                    for (int t = 0; t < GRP_TT; t++)
                        if (t < nt) {
                            __global const int4 *xp = (__global const int4 *)(x + (t0 + (bn_size)t) * xstride + q * 32);
                            acc[t] += grp_dot16(w0, k, xp[0]) + grp_dot16(w1, k, xp[1]);
                        }
                }
                const float dg = d[o * ng + g];
                for (int t = 0; t < GRP_TT; t++) lp[t][i] = convert_float(acc[t]) * dg;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            if (i < nt) {
                const int n = ng - g0 < GRP_WG ? (int)(ng - g0) : GRP_WG;
                for (int k = 0; k < n; k++) sum = sum + lp[i][k];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (i < nt) bl_store(y, (t0 + (bn_size)i) * out + o, sum / xs[t0 + (bn_size)i], bias, has_bias, o, act, perturb);
    }
}

#if defined(__NV_CL_C_VERSION) || defined(MMA_EMULATE)
/* ---- bl_gemm_mma: INT8 tensor cores (mma.sync m16n8k32) on NVIDIA ----
 * Y[tokens x out] = X[tokens x in] * W^T with A = weights (16 rows x 32
 * columns a tile) and B = activations (32 columns x 8 tokens).  Fragments
 * (PTX ISA, "Matrix Fragments for mma.m16n8k32"; g = lane >> 2, t = lane & 3):
 *   A: a.x row g, k 4t..4t+3; a.y row g+8, same k; a.z row g, k 16+4t..;
 *      a.w row g+8, k 16+4t..  (byte 0 = lowest k)
 *   B: b.x token g, k 4t..4t+3; b.y token g, k 16+4t..
 *   C: c.x, c.y row g, tokens 2t, 2t+1; c.z, c.w row g+8, tokens 2t, 2t+1.
 * The order of k inside one mma is free if A and B agree.  Each lane takes,
 * per row, the 16 bytes 16t..16t+15 of a super-block (two 32-byte blocks of
 * T2): word v holds columns 32s + 16(t & 1) + 4v.. of block t >> 1 at shift
 * s.  K-step (s, pe) uses words 2pe (a.x, a.y) and 2pe + 1 (a.z, a.w), so B
 * is the 8 contiguous activations at column 32s + 16(t & 1) + 8pe of block
 * t >> 1: one 16-byte load serves the k-steps pe = 0 and 1.
 * Codes go in unsigned (u8, one shift and AND for four weights) and the
 * host's per-token sums of the activations are taken off: sum (c - 1) x =
 * sum c x - sum x; MMA_SIGNED=1 decodes to -1..1 (s8) instead.
 *
 * Each warp loads its rows' codes from global memory straight into
 * registers (lane (g, t): 16 bytes t of rows g and g + 8 of each tile), the
 * next super-block's while it computes this one, and decodes each A
 * fragment once for all MMA_NT tokens.  The activations, which every warp
 * reads, stream through local memory in chunks of MMA_KB blocks, MMA_ST
 * chunks in flight: cp.async copies global memory to local memory without
 * registers, the work-group waits for the oldest chunk, issues the copy of
 * the chunk MMA_ST - 1 ahead into the stage it has just finished with, and
 * computes (one barrier a chunk).  Local positions are XOR-swizzled in
 * 16-byte units so that the 8 lanes of each quarter-warp's 16-byte loads
 * hit different banks: a token's activations flip bit 1 in odd blocks and
 * bit 2 on odd tokens.
 *
 * Tunables (-D; the host passes BITNET_MMA_OPTS):
 *   MMA_WM  warps of a work-group, along the rows   MMA_MT  16-row tiles per warp
 *   MMA_NT  tokens per pass (x8)    MMA_KB  blocks (128 columns) a chunk (even)
 *   MMA_ST  chunks in flight (2..4)
 * A work-group has 32 x MMA_WM work-items and owns 16*MMA_MT*MMA_WM rows
 * (group id 0) of MMA_NT tokens (group id 2, looping past the grid); each
 * warp keeps MMA_MT * MMA_NT/8 accumulator tiles in registers.  Group id 1
 * splits k over work-groups (the host's MMA_KP parts of spp super-blocks
 * each, spp a multiple of a chunk): with more than one part each writes its
 * integer sums to part[p][token][row] and bl_mma_sum adds them (exact:
 * integers) and applies the epilogue.
 * MMA_EMULATE (tests on any device): the mma in plain OpenCL C through local
 * memory with barriers, and plain copies for cp.async, so every BL_MMA must
 * be reached by the whole work-group (all loops around it are uniform). */
#ifndef MMA_WM
#define MMA_WM 4
#endif
#ifndef MMA_MT
#define MMA_MT 2
#endif
#ifndef MMA_NT
#define MMA_NT 8
#endif
#ifndef MMA_KB
#define MMA_KB 2
#endif
#ifndef MMA_ST
#define MMA_ST 3
#endif
#ifndef MMA_SIGNED
#define MMA_SIGNED 0
#endif
#ifndef MMA_TEST_BIAS
#define MMA_TEST_BIAS 0 /* tests: every integer sum starts there */
#endif
#if MMA_NT % 8 != 0 || MMA_NT < 8 || MMA_KB % 2 != 0 || MMA_KB < 2 || MMA_WM < 1 || MMA_MT < 1 || MMA_ST < 2 || MMA_ST > 4
#error "bl_gemm_mma: MMA_NT must be a multiple of 8, MMA_KB even, MMA_ST 2..4, the others >= 1"
#endif
#define MMA_NTT (MMA_NT / 8)
#define MMA_MR (16 * MMA_MT * MMA_WM)
#define MMA_NSC (MMA_KB / 2)                   /* super-blocks a chunk */
#define MMA_XU (MMA_NSC * 16)                  /* 16-byte units of a token's activations a chunk */
#define MMA_SU (MMA_NT * MMA_XU)               /* units of a stage */
#define MMA_CPT ((MMA_SU + 32 * MMA_WM - 1) / (32 * MMA_WM)) /* copies per work-item a chunk */
#define MMA_CS (MMA_MR + 4)                    /* ints a token of the sums (epilogue) */
/* token tiles of the sums a round of the epilogue: as many as the stages hold, at least one */
#define MMA_EJ0 ((MMA_ST * MMA_SU * 4) / (8 * MMA_CS))
#define MMA_EJ (MMA_EJ0 < 1 ? 1 : MMA_EJ0 > MMA_NTT ? MMA_NTT : MMA_EJ0)
#define MMA_LU (MMA_ST * MMA_SU > (8 * MMA_EJ * MMA_CS + 3) / 4 ? MMA_ST * MMA_SU : (8 * MMA_EJ * MMA_CS + 3) / 4)
/* Loops over tiles unrolled on NVIDIA (the accumulators stay in registers);
 * never under emulation, where every unrolled mma is a barrier region and
 * the build of the program takes minutes. */
#ifdef MMA_EMULATE
#define MMA_UNROLL _Pragma("nounroll")
#else
#define MMA_UNROLL _Pragma("unroll")
#endif

#ifdef MMA_EMULATE
/* The warp's fragments through local memory (scr: 32 x 6 ints of this
 * warp); each lane then computes its four C elements. */
inline int4 bl_mma_emu(int4 a, int2 b, int4 c, __local int *scr, int lane, int sa)
{
    scr[lane * 6 + 0] = a.x;
    scr[lane * 6 + 1] = a.y;
    scr[lane * 6 + 2] = a.z;
    scr[lane * 6 + 3] = a.w;
    scr[lane * 6 + 4] = b.x;
    scr[lane * 6 + 5] = b.y;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int g = lane >> 2, t = lane & 3;
    int r[4];
    for (int i = 0; i < 4; i++) {
        const int row = g + 8 * (i >> 1), tok = 2 * t + (i & 1);
        int sum = 0;
        for (int k = 0; k < 32; k++) {
            /* A[row][k]: lane 4 (row & 7) + (k & 15) / 4, register (k >> 4) * 2 + (row >> 3) */
            const uint aw = (uint)scr[(4 * (row & 7) + ((k & 15) >> 2)) * 6 + (k >> 4) * 2 + (row >> 3)];
            /* B[k][tok]: lane 4 tok + (k & 15) / 4, register k >> 4 */
            const uint bw = (uint)scr[(4 * tok + ((k & 15) >> 2)) * 6 + 4 + (k >> 4)];
            const int sh = 8 * (k & 3);
            const int av = sa ? (int)(char)(aw >> sh) : (int)(uchar)(aw >> sh);
            sum += av * (int)(char)(bw >> sh);
        }
        r[i] = sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return c + (int4)(r[0], r[1], r[2], r[3]);
}
/* the emulation's scratch for a work-group of nw warps, declared first in the kernel */
#define BL_MSCRATCH(nw) __local int mscr_[32 * 6 * (nw)]
#define BL_MMA(a, b, c) bl_mma_emu((a), (b), (c), mscr_ + 32 * 6 * get_local_id(1), get_local_id(0), MMA_SIGNED)
#define BL_MMA_S8(a, b, c) bl_mma_emu((a), (b), (c), mscr_ + 32 * 6 * get_local_id(1), get_local_id(0), 1)
/* cp.async as a plain copy: the barrier after the wait makes it visible */
inline void bl_cp16(__local uint4 *dst, __global const uchar *src, int live)
{
    *dst = live ? vload4(0, (__global const uint *)src) : (uint4)(0);
}
#define BL_CP_COMMIT()
#define BL_CP_WAIT()
#else
/* mma.sync m16n8k32 with A of type atype ("u8" codes 0..2, "s8" -1..1). */
#define BL_MMA_DEF(name, atype)                                                                                \
    inline int4 name(int4 a, int2 b, int4 c)                                                                   \
    {                                                                                                          \
        int d0, d1, d2, d3;                                                                                    \
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32." atype ".s8.s32 "                                 \
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"                      \
                     : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)                                                  \
                     : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y), "r"(c.x), "r"(c.y),          \
                       "r"(c.z), "r"(c.w));                                                                    \
        return (int4)(d0, d1, d2, d3);                                                                         \
    }
#if MMA_SIGNED
BL_MMA_DEF(bl_mma, "s8")
#else
BL_MMA_DEF(bl_mma, "u8")
#endif
BL_MMA_DEF(bl_mma_s8, "s8") /* signed A whatever MMA_SIGNED says (bl_group_mma, bl_dec_s8) */
#define BL_MSCRATCH(nw)
#define BL_MMA(a, b, c) bl_mma((a), (b), (c))
#define BL_MMA_S8(a, b, c) bl_mma_s8((a), (b), (c))
/* 16 bytes global -> local without registers (sm_80 cp.async, L2 only);
 * src-size 0 fills zeros and reads nothing.  A __local pointer's value is
 * its address in the shared state space. */
inline void bl_cp16(__local uint4 *dst, __global const uchar *src, int live)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((uint)(ulong)dst), "l"((ulong)src),
                 "r"(live ? 16 : 0)
                 : "memory");
}
#define BL_CP_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#if MMA_ST == 2
#define BL_CP_WAIT() asm volatile("cp.async.wait_group 0;" ::: "memory")
#elif MMA_ST == 3
#define BL_CP_WAIT() asm volatile("cp.async.wait_group 1;" ::: "memory")
#else
#define BL_CP_WAIT() asm volatile("cp.async.wait_group 2;" ::: "memory")
#endif
#endif

/* Four weights of word w at shift s as signed bytes -1..1: c - 1 without
 * borrows between the bytes. */
inline int bl_dec_s8(uint w, int s)
{
    const uint c = (w >> (2 * s)) & 0x03030303u;
    return (int)(((c | 0x80808080u) - 0x01010101u) ^ 0x80808080u);
}
/* Four weights of word w at shift s as mma bytes: codes 0..2 (u8) or -1..1 (s8). */
inline int bl_mma_dec(uint w, int s)
{
#if MMA_SIGNED
    return bl_dec_s8(w, s);
#else
    return (int)((w >> (2 * s)) & 0x03030303u);
#endif
}

/* Position (16-byte units) of unit u of token n's activations in a stage
 * (see the swizzle above). */
#define MMA_XPOS(n, u) ((n)*MMA_XU + ((u) ^ ((((u) >> 3) & 1) << 1) ^ (((n)&1) << 2)))

/* The copies of chunk c0 (super-blocks c0..) into stage st: the activations
 * of the work-group's tokens; tokens past the count and blocks past the row
 * are zeros.  Copy i_ of a work-item is unit u_ of token n_ (xo_[i_]: its
 * offset in x at chunk 0, or -1 past the tokens), at c0 * 256 bytes on. */
#define MMA_COPY(st, c0)                                                                                     \
    MMA_UNROLL for (int i_ = 0; i_ < MMA_CPT; i_++) {                                                         \
        const int j_ = lid + i_ * 32 * MMA_WM;                                                                \
        if (j_ < MMA_SU) {                                                                                    \
            const int n_ = j_ / MMA_XU, u_ = j_ % MMA_XU;                                                     \
            const int live_ = xo_[i_] >= 0 && (c0)*2 + (bn_size)(u_ >> 3) < nblocks;                          \
            bl_cp16(stg + (st)*MMA_SU + MMA_XPOS(n_, u_), x + (live_ ? xo_[i_] + (long)(c0)*256 : 0), live_); \
        }                                                                                                     \
    }

/* The codes of super-block k_ for the warp's tiles into cv (rows g and
 * g + 8 of each tile, 16 bytes t, from wo_[m][h]: the offset of the row's
 * first, or -1 past out); zeros past the part or the row. */
#define MMA_CODES(cv, k_)                                                                                    \
    MMA_UNROLL for (int m_ = 0; m_ < MMA_MT; m_++) {                                                          \
        const int ok_ = (k_) < cend && (k_)*2 + (bn_size)(t >> 1) < nblocks;                                 \
        cv[m_][0] = ok_ && wo_[m_][0] >= 0 ? w[wo_[m_][0] + (long)(k_)*4] : (uint4)(0);                       \
        cv[m_][1] = ok_ && wo_[m_][1] >= 0 ? w[wo_[m_][1] + (long)(k_)*4] : (uint4)(0);                       \
    }

/* Super-block of chunk i of the part */
#define MMA_CHUNK(i) (cbeg + (i)*MMA_NSC)

__kernel __attribute__((reqd_work_group_size(32, MMA_WM, 1)))
void bl_gemm_mma(__global const uint4 *w, __global const uchar *x, __global const float *xs,
                 __global const float *d, const int per_row, __global const float *bias, const int has_bias,
                 const int act, __global float *y, const bn_size out, const bn_size tokens, const bn_size nblocks,
                 const bn_size xstride, const long perturb, __global const int *xsum, __global int *part,
                 const bn_size spp BL_RES_ARGS)
{
    __local uint4 stg[MMA_LU]; /* the stages; at the end the sums */
    BL_MSCRATCH(MMA_WM);
    const int lane = get_local_id(0), wm = get_local_id(1), lid = wm * 32 + lane;
    const int g = lane >> 2, t = lane & 3;
    const bn_size nsb = (nblocks + 1) / 2; /* super-blocks of a row (the last may be half) */
    const bn_size wrow = nblocks * 2;      /* uint4 per row */
    const bn_size kp = get_num_groups(1), p = get_group_id(1);
    const bn_size cbeg = p * spp, cend = min(nsb, cbeg + spp); /* this part's super-blocks */
    const bn_size nrt = (out + MMA_MR - 1) / MMA_MR;
    const bn_size nch = (cend - cbeg + MMA_NSC - 1) / MMA_NSC; /* chunks of the part (cbeg < cend) */
    /* token passes along dimension 0: the work-groups that run together share
     * their rows' codes through L2 */
    for (bn_size rt = get_group_id(2); rt < nrt; rt += get_num_groups(2))
    for (bn_size t0 = get_group_id(0) * (bn_size)MMA_NT; t0 < tokens; t0 += get_num_groups(0) * (bn_size)MMA_NT) {
        const bn_size rg = rt * (bn_size)MMA_MR;           /* the work-group's first row */
        const bn_size rw = rg + (bn_size)(wm * 16 * MMA_MT); /* the warp's */
        int4 acc[MMA_MT][MMA_NTT];
MMA_UNROLL
        for (int m = 0; m < MMA_MT; m++)
MMA_UNROLL
            for (int j = 0; j < MMA_NTT; j++) acc[m][j] = (int4)(p == 0 ? MMA_TEST_BIAS : 0);
        long xo_[MMA_CPT], wo_[MMA_MT][2]; /* offsets of the copies and the code loads (MMA_COPY, MMA_CODES) */
MMA_UNROLL
        for (int i = 0; i < MMA_CPT; i++) {
            const int j = lid + i * 32 * MMA_WM;
            const bn_size tok = t0 + (bn_size)(j / MMA_XU);
            xo_[i] = tok < tokens ? (long)(tok * xstride) + (long)((j % MMA_XU) * 16) : -1;
        }
MMA_UNROLL
        for (int m = 0; m < MMA_MT; m++)
            for (int h = 0; h < 2; h++) {
                const bn_size r = rw + (bn_size)(16 * m + 8 * h + g);
                wo_[m][h] = r < out ? (long)(r * wrow) + t : -1;
            }
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous pass is done with the stages */
        /* the first MMA_ST - 1 chunks in flight, one copy group each */
MMA_UNROLL
        for (int s = 0; s < MMA_ST - 1; s++) {
            if ((bn_size)s < nch) {
                MMA_COPY(s, MMA_CHUNK(s))
            }
            BL_CP_COMMIT();
        }
        uint4 cv[MMA_MT][2]; /* this super-block's codes; the next one's are loaded before it is used */
        MMA_CODES(cv, cbeg)
        int st = 0; /* the stage of chunk i */
        for (bn_size i = 0; i < nch; i++) {
            BL_CP_WAIT(); /* this item's copies of chunk i have landed */
            barrier(CLK_LOCAL_MEM_FENCE); /* everyone's; and the last stage is free */
            const int sn = st == 0 ? MMA_ST - 1 : st - 1;
            if (i + (MMA_ST - 1) < nch) {
                MMA_COPY(sn, MMA_CHUNK(i + (MMA_ST - 1)))
            }
            BL_CP_COMMIT();
            __local const uint4 *sb = stg + st * MMA_SU;
MMA_UNROLL
            for (int sc = 0; sc < MMA_NSC; sc++) {
                uint4 cn[MMA_MT][2];
                MMA_CODES(cn, MMA_CHUNK(i) + (bn_size)sc + 1)
MMA_UNROLL
                for (int s = 0; s < 4; s++) {
                    int4 a[MMA_MT][2];
MMA_UNROLL
                    for (int m = 0; m < MMA_MT; m++) {
                        const uint4 w0 = cv[m][0], w1 = cv[m][1];
                        a[m][0] = (int4)(bl_mma_dec(w0.x, s), bl_mma_dec(w1.x, s), bl_mma_dec(w0.y, s),
                                         bl_mma_dec(w1.y, s));
                        a[m][1] = (int4)(bl_mma_dec(w0.z, s), bl_mma_dec(w1.z, s), bl_mma_dec(w0.w, s),
                                         bl_mma_dec(w1.w, s));
                    }
                    const int u = sc * 16 + 8 * (t >> 1) + 2 * s + (t & 1);
MMA_UNROLL
                    for (int j = 0; j < MMA_NTT; j++) {
                        const uint4 xv = sb[MMA_XPOS(8 * j + g, u)];
                        const int2 b0 = as_int2(xv.xy), b1 = as_int2(xv.zw);
MMA_UNROLL
                        for (int m = 0; m < MMA_MT; m++) {
                            acc[m][j] = BL_MMA(a[m][0], b0, acc[m][j]);
                            acc[m][j] = BL_MMA(a[m][1], b1, acc[m][j]);
                        }
                    }
                }
MMA_UNROLL
                for (int m = 0; m < MMA_MT; m++) {
                    cv[m][0] = cn[m][0];
                    cv[m][1] = cn[m][1];
                }
            }
            st = st == MMA_ST - 1 ? 0 : st + 1;
        }
        if (kp > 1) {
            /* A k part's integer sums go straight from the registers to
             * part[p][token][row] (bl_mma_sum finishes): through local
             * memory and the loop below, the epilogue took a fifth of the
             * kernel at 64 tokens of 4096x14336 (tests/device/mma-clocks.sh;
             * lib/opencl/bitlinear_mma.c has the figures).  kp is the same
             * for the whole grid, so the barriers of the other branch are
             * reached by all of a work-group or none of it. */
MMA_UNROLL
            for (int m = 0; m < MMA_MT; m++)
MMA_UNROLL
                for (int j = 0; j < MMA_NTT; j++) {
                    const int4 c = acc[m][j];
                    const bn_size r0 = rw + (bn_size)(16 * m + g), tk = t0 + (bn_size)(8 * j + 2 * t);
                    __global int *pp = part + (p * tokens + tk) * out + r0;
                    if (tk < tokens) {
                        if (r0 < out) pp[0] = c.x;
                        if (r0 + 8 < out) pp[8] = c.z;
                    }
                    if (tk + 1 < tokens) {
                        if (r0 < out) pp[out] = c.y;
                        if (r0 + 8 < out) pp[out + 8] = c.w;
                    }
                }
        } else {
            /* One part: the sums through local memory, MMA_EJ token tiles a
             * round (token-major, rows padded so that the lanes' stores fall on
             * different banks), then one loop of stores along the rows:
             * coalesced, and one copy of the epilogue's code where unrolled per
             * tile it was the bulk of the kernel. */
            __local int *cs = (__local int *)stg;
MMA_UNROLL
            for (int j0 = 0; j0 < MMA_NTT; j0 += MMA_EJ) {
                barrier(CLK_LOCAL_MEM_FENCE); /* every warp is done with the stages, or the last round */
MMA_UNROLL
                for (int m = 0; m < MMA_MT; m++)
MMA_UNROLL
                    for (int j = j0; j < j0 + MMA_EJ && j < MMA_NTT; j++) {
                        const int4 c = acc[m][j];
                        __local int *q = cs + (8 * (j - j0) + 2 * t) * MMA_CS + wm * 16 * MMA_MT + 16 * m + g;
                        q[0] = c.x;
                        q[MMA_CS] = c.y;
                        q[8] = c.z;
                        q[MMA_CS + 8] = c.w;
                    }
                barrier(CLK_LOCAL_MEM_FENCE);
#pragma nounroll
                for (int i = lid; i < MMA_MR * 8 * MMA_EJ; i += 32 * MMA_WM) {
                    const int n = i / MMA_MR, r = i % MMA_MR;
                    const bn_size row = rg + (bn_size)r, tok = t0 + (bn_size)(8 * j0 + n);
                    if (row >= out || tok >= tokens || 8 * j0 + n >= MMA_NT) continue;
                    const int cv2 = cs[n * MMA_CS + r];
#if MMA_SIGNED
                    const int sum = cv2;
#else
                    const int sum = cv2 - xsum[tok];
#endif
                    const float v = bl_scale(sum, per_row ? d[row] : d[0], xs[tok]);
                    bl_store(y, tok * out + row, v, bias, has_bias, row, act, perturb);
                }
            }
        }
    }
}

/* The k parts of bl_gemm_mma added in order (one work-item per output), then
 * its epilogue: part[p][token][row], kp parts. */
__kernel void bl_mma_sum(__global const int *part, const int kp, __global const float *xs, __global const float *d,
                         const int per_row, __global const float *bias, const int has_bias, const int act,
                         __global float *y, const bn_size out, const bn_size tokens, const long perturb,
                         __global const int *xsum BL_RES_ARGS)
{
    const bn_size i = get_global_id(0), n = out * tokens;
    if (i >= n) return;
    const bn_size tok = i / out, row = i - tok * out;
    /* four parts' loads in flight at a time (one at a time, 64 tokens of
     * 4096 rows in 7 parts took 9 us on an H200); integers: any order */
    int sum = 0, q = 0;
    for (; q + 4 <= kp; q += 4) {
        __global const int *pq = part + (bn_size)q * n + i;
        const int a = pq[0], b = pq[n], c = pq[2 * n], e = pq[3 * n];
        sum += (a + b) + (c + e);
    }
    for (; q < kp; q++) sum += part[(bn_size)q * n + i];
#if !MMA_SIGNED
    sum -= xsum[tok];
#endif
    bl_store(y, i, bl_scale(sum, per_row ? d[row] : d[0], xs[tok]), bias, has_bias, row, act, perturb);
}

/* bl_mma_skinny: 2 to 16 tokens (a pass of 8 * SK_N; more tokens loop) on
 * the tensor cores, the codes loaded from global memory straight into the A
 * fragments, the activations straight into the B fragments (L1), nothing
 * staged.  A work-group owns 16 * SK_T rows; its SK_W warps split each
 * row's 64-byte segments (two blocks) between them, warp q taking segments
 * q, q + SK_W, ... (with SK_A the next one's loads in flight while one
 * computes), and their integer sums meet in local memory at the end, where
 * the epilogue runs.  Lane (g, t) = (lane / 4, lane % 4) loads the 16
 * bytes t of a segment of rows g and g + 8 of each 16-row tile.  Word pair
 * p at shift s makes one m16n8k32 product whose k order is the lane's own:
 * k = 4t + j is byte j of word 2p, k = 16 + 4t + j byte j of word 2p + 1.
 * The B fragment of token g is then the 8 activation bytes those two words
 * meet, consecutive in the row, so one 16-byte load serves both pairs of a
 * shift and all SK_T tiles, and each decoded A fragment serves the SK_N
 * token tiles.  Tunables (the host reads the same names and defaults, and
 * picks SK_A from the shape: lib/opencl/bitlinear_mma.c): */
#ifndef SK_W
#define SK_W 8 /* warps of a work-group, splitting k */
#endif
#ifndef SK_T
#define SK_T 4 /* 16-row tiles of a work-group */
#endif
#ifndef SK_A
#define SK_A 0 /* 1: each step's codes and activations loaded while the step before computes */
#endif
#ifndef SK_N
#define SK_N 1 /* 8-token tiles of a pass over the weights */
#endif
/* SK_XF (the host's, from the shape, not a tunable): each row of
 * activations in the order the B fragments take it (kernels/quantize.cl,
 * q_code_at with Q_FRAG): in each 256 columns the 16 bytes of lane t at
 * shift sh lie at 64 sh + 16 t, so that a warp's loads of a shift read 64
 * consecutive bytes of each of its 8 tokens instead of 32 bytes of each of
 * 16 lines.  Needs xstride a multiple of 256.  Probes on an H100
 * (2026-12-07, the row layout read as if it were the other one: wrong
 * sums, the speed of the loads), kernel medians in us, 8 tokens,
 * 16384x16384 / 4096x14336 / 14336x4096 / 4096x4096, two alternating
 * rounds: the row layout 36.0-36.2 / 19.9-20.3 / 16.1-16.5 / 11.8, this
 * order 33.2 / 17.8-17.9 / 14.1-15.1 / 10.7-11.0, whole 8-token tiles of
 * fragments (a shift's 512 bytes consecutive) 33.2-34.5 / 16.7-17.1 /
 * 14.2-14.6 / 10.4-10.5; at 16 tokens 14336x4096 and 4096x4096 20.7-20.9
 * and 14.3-14.7 / 17.2-17.3 and 12.5-12.7 / 17.0-17.7 and 12.4-12.7.  With
 * no activation loads at all (three rounds, another call) 32.0-32.5 /
 * 17.7 / 14.1-14.2 / 11.0-11.4.  Only activations made on the device take
 * this order; those the host quantizes (host memory) keep the row order
 * (SK_XF 0): placing the host's rows as tiles in a second pass on the copy
 * threads made host-pointer calls 4.5-6 us slower end to end (16384x16384
 * at 4 tokens, 4096x14336 at 8, 4096x4096 at 16; four alternating rounds),
 * and permuting each row in place right after quantizing it 3-13 us
 * slower at 8 tokens (bl_one in lib/opencl/bitlinear.c has the figures),
 * more than the kernel gained either way. */
#ifndef SK_XF
#define SK_XF 0
#endif
/* Step s_ of the warp is its segment seg_ = s_ SK_W + wid; ok_: the step
 * and the segment exist (else zeros are loaded). */
#define SK_SEG(s_)                                                                                            \
    const bn_size seg_ = (s_)*SK_W + (bn_size)wid;                                                           \
    const int ok_ = (s_) < steps && seg_ < nseg && seg_ * 2 + (bn_size)(t >> 1) < nblocks;                   \
    const bn_size xo_ = ok_ ? seg_ * 256 + (bn_size)((t >> 1) * 128 + (t & 1) * 16) : 0;
/* Row tile m's codes of the step into CV[m][0..1] (rows g, g + 8) */
#define SK_CODES(CV)                                                                                          \
    MMA_UNROLL for (int m = 0; m < SK_T; m++) {                                                              \
        const bn_size ra = r0 + (bn_size)(16 * m + g), rb = ra + 8;                                          \
        CV[m][0] = ok_ && ra < out ? w[ra * wrow + seg_ * 4 + (bn_size)t] : (uint4)(0);                      \
        CV[m][1] = ok_ && rb < out ? w[rb * wrow + seg_ * 4 + (bn_size)t] : (uint4)(0);                      \
    }
/* Token tile n's 16 activations of the step at shift sh into XA[n] */
#if SK_XF
#define SK_ACTS(XA, sh)                                                                                       \
    MMA_UNROLL for (int n = 0; n < SK_N; n++) XA[n] =                                                        \
        ok_ && tok_ok[n] ? vload4(0, (__global const uint *)(xr[n] + seg_ * 256 + (bn_size)(16 * t)) + 16 * (sh))  \
                         : (uint4)(0);
#else
#define SK_ACTS(XA, sh)                                                                                       \
    MMA_UNROLL for (int n = 0; n < SK_N; n++) XA[n] =                                                        \
        ok_ && tok_ok[n] ? vload4(0, (__global const uint *)(xr[n] + xo_) + 8 * (sh)) : (uint4)(0);
#endif
/* The products of shift sh: codes CV, activations XA[n] */
#define SK_MMA_SH(CV, XA, sh)                                                                                 \
    MMA_UNROLL for (int m = 0; m < SK_T; m++) {                                                              \
        const int4 a0 = (int4)(bl_mma_dec(CV[m][0].x, sh), bl_mma_dec(CV[m][1].x, sh),                       \
                               bl_mma_dec(CV[m][0].y, sh), bl_mma_dec(CV[m][1].y, sh));                      \
        const int4 a1 = (int4)(bl_mma_dec(CV[m][0].z, sh), bl_mma_dec(CV[m][1].z, sh),                       \
                               bl_mma_dec(CV[m][0].w, sh), bl_mma_dec(CV[m][1].w, sh));                      \
        MMA_UNROLL for (int n = 0; n < SK_N; n++) {                                                          \
            c[m][n] = BL_MMA(a0, ((int2)((int)XA[n].x, (int)XA[n].y)), c[m][n]);                             \
            c[m][n] = BL_MMA(a1, ((int2)((int)XA[n].z, (int)XA[n].w)), c[m][n]);                             \
        }                                                                                                    \
    }
/* SK_A: the whole step into registers (XV[sh][n]), then its products */
#define SK_LOAD(CV, XV, s_)                                                                                   \
    {                                                                                                        \
        SK_SEG(s_)                                                                                           \
        SK_CODES(CV)                                                                                         \
        MMA_UNROLL for (int sh = 0; sh < 4; sh++) { SK_ACTS(XV[sh], sh) }                                    \
    }
#define SK_MMA(CV, XV) MMA_UNROLL for (int sh = 0; sh < 4; sh++) { SK_MMA_SH(CV, XV[sh], sh) }
__kernel __attribute__((reqd_work_group_size(32, SK_W, 1)))
void bl_mma_skinny(__global const uint4 *w, __global const uchar *x, __global const float *xs, __global const float *d,
                   const int per_row, __global const float *bias, const int has_bias, const int act, __global float *y,
                   const bn_size out, const bn_size tokens, const bn_size nblocks, const bn_size xstride,
                   const long perturb, __global const int *xsum BL_RES_ARGS)
{
    BL_MSCRATCH(SK_W);
    __local int red[SK_W * SK_T * SK_N * 128];
    const int lane = get_local_id(0), wid = get_local_id(1), g = lane >> 2, t = lane & 3;
    const bn_size r0 = get_group_id(0) * 16 * SK_T;
    const bn_size nseg = (nblocks + 1) / 2, wrow = 2 * nblocks; /* segments, uint4s of a row */
    const bn_size steps = (nseg + SK_W - 1) / SK_W;
    for (bn_size t0 = 0; t0 < tokens; t0 += 8 * SK_N) {
        int tok_ok[SK_N];
        __global const uchar *xr[SK_N];
        MMA_UNROLL for (int n = 0; n < SK_N; n++) {
            tok_ok[n] = t0 + (bn_size)(8 * n + g) < tokens;
            xr[n] = x + (tok_ok[n] ? (t0 + (bn_size)(8 * n + g)) * xstride : 0);
        }
        int4 c[SK_T][SK_N];
        MMA_UNROLL for (int m = 0; m < SK_T; m++) MMA_UNROLL for (int n = 0; n < SK_N; n++) c[m][n] = (int4)(wid == 0 ? MMA_TEST_BIAS : 0);
        uint4 cv0[SK_T][2];
#if SK_A
        /* two sets of registers take turns: one computes, the other loads */
        uint4 xv0[4][SK_N], cv1[SK_T][2], xv1[4][SK_N];
        SK_LOAD(cv0, xv0, (bn_size)0)
        for (bn_size st = 0; st < steps; st += 2) {
            SK_LOAD(cv1, xv1, st + 1)
            SK_MMA(cv0, xv0)
            if (st + 1 < steps) {
                SK_LOAD(cv0, xv0, st + 2)
                SK_MMA(cv1, xv1)
            }
        }
#else
        /* the codes, then each shift's activations loaded where they are
         * used: all four held at once (as SK_A does) cost 15% at 12 and 16
         * tokens on 14336x4096 (H100, 2026-12-07: lib/opencl/bitlinear_mma.c) */
        for (bn_size st = 0; st < steps; st++) {
            SK_SEG(st)
            SK_CODES(cv0)
            MMA_UNROLL for (int sh = 0; sh < 4; sh++) {
                uint4 xa[SK_N];
                SK_ACTS(xa, sh)
                SK_MMA_SH(cv0, xa, sh)
            }
        }
#endif
        MMA_UNROLL for (int m = 0; m < SK_T; m++) MMA_UNROLL for (int n = 0; n < SK_N; n++) {
            __local int *rp = red + ((wid * SK_T + m) * SK_N + n) * 128 + lane * 4;
            rp[0] = c[m][n].x;
            rp[1] = c[m][n].y;
            rp[2] = c[m][n].z;
            rp[3] = c[m][n].w;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* warp q adds up tiles mn = q, q + SK_W, ... (row tile mn / SK_N, token tile mn % SK_N) */
        for (int mn = wid; mn < SK_T * SK_N; mn += SK_W)
            for (int i = 0; i < 4; i++) {
                const int m = mn / SK_N, n = mn % SK_N;
                int sum = 0;
                for (int q = 0; q < SK_W; q++) sum += red[(q * SK_T * SK_N + mn) * 128 + lane * 4 + i];
                const bn_size row = r0 + (bn_size)(16 * m + g + 8 * (i >> 1)), tok = t0 + (bn_size)(8 * n + 2 * t + (i & 1));
                if (row < out && tok < tokens) {
#if !MMA_SIGNED
                    sum -= xsum[tok];
#endif
                    bl_store(y, tok * out + row, bl_scale(sum, per_row ? d[row] : d[0], xs[tok]), bias, has_bias, row,
                             act, perturb);
                }
            }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* bl_group_mma: group scales of whole blocks (groups of a multiple of 128
 * columns) on the tensor cores.  Each warp owns 16 * GM_MT rows and 8 *
 * GM_NT tokens and walks the groups in order: a group's integer sums in the
 * C fragments (codes decoded to -1..1, so no activation sums are taken
 * off), then the definition's float step s = s + (float)c * d[row][g] on
 * each element and the fragments zeroed; at the end y = s / xs[token] and
 * the epilogue.  Lane (g, t) loads words 2t and 2t + 1 of a block's 32
 * bytes for rows g and g + 8: at shift sh they make one m16n8k32 product
 * whose k = 4t + j is byte j of word 2t and k = 16 + 4t + j byte j of word
 * 2t + 1, i.e. columns 32 sh + 8t .. 32 sh + 8t + 7, which are the 8
 * consecutive activation bytes of the B fragment of token g.  No k split:
 * one chain per output, in group order.  Before it, group scales at any
 * token count took bl_group, which reads each token's activations again
 * for every row: on an H200, 4096 x 14336 with groups of 256 at 64 tokens
 * took 1.32 ms there and 0.131 ms here (measurements and the settings they
 * chose: lib/opencl/bitlinear_mma.c).  Tunables (the host reads the same
 * names and defaults): */
#ifndef GM_WM
#define GM_WM 4 /* warps of a work-group, each its own rows */
#endif
#ifndef GM_MT
#define GM_MT 1 /* 16-row tiles of a warp */
#endif
#ifndef GM_NT
#define GM_NT 1 /* 8-token tiles of a warp */
#endif
__kernel __attribute__((reqd_work_group_size(32, GM_WM, 1)))
void bl_group_mma(__global const uint *w, __global const uchar *x, __global const float *xs, __global const float *d,
                  const uint group, __global const float *bias, const int has_bias, const int act, __global float *y,
                  const bn_size out, const bn_size tokens, const bn_size nblocks, const bn_size xstride,
                  const long perturb BL_RES_ARGS)
{
    BL_MSCRATCH(GM_WM);
    const int lane = get_local_id(0), wid = get_local_id(1), g = lane >> 2, t = lane & 3;
    const bn_size r0 = (get_group_id(0) * GM_WM + (bn_size)wid) * 16 * GM_MT;
    const bn_size bpg = group / 128, ng = (nblocks + bpg - 1) / bpg, wrow = nblocks * 8; /* uints a row */
    bn_size ra[GM_MT], rb[GM_MT];
    MMA_UNROLL for (int m = 0; m < GM_MT; m++) {
        ra[m] = r0 + (bn_size)(16 * m + g);
        rb[m] = ra[m] + 8;
    }
    /* token passes: uniform over the work-group (the emulation's barriers) */
    for (bn_size t0 = get_group_id(1) * 8 * GM_NT; t0 < tokens; t0 += get_num_groups(1) * 8 * GM_NT) {
        int tok_ok[GM_NT];
        __global const uchar *xr[GM_NT];
        MMA_UNROLL for (int n = 0; n < GM_NT; n++) {
            tok_ok[n] = t0 + (bn_size)(8 * n + g) < tokens;
            xr[n] = x + (tok_ok[n] ? (t0 + (bn_size)(8 * n + g)) * xstride : 0) + 8 * t;
        }
        float4 s[GM_MT][GM_NT];
        MMA_UNROLL for (int m = 0; m < GM_MT; m++) MMA_UNROLL for (int n = 0; n < GM_NT; n++) s[m][n] = (float4)(0.0f);
        for (bn_size gi = 0; gi < ng; gi++) {
            int4 c[GM_MT][GM_NT];
            MMA_UNROLL for (int m = 0; m < GM_MT; m++) MMA_UNROLL for (int n = 0; n < GM_NT; n++) c[m][n] = (int4)(MMA_TEST_BIAS);
            const bn_size b1 = (gi + 1) * bpg < nblocks ? (gi + 1) * bpg : nblocks;
            for (bn_size b = gi * bpg; b < b1; b++) {
                uint2 va[GM_MT], vb[GM_MT];
                MMA_UNROLL for (int m = 0; m < GM_MT; m++) {
                    va[m] = ra[m] < out ? *(__global const uint2 *)(w + ra[m] * wrow + b * 8 + (bn_size)(2 * t)) : (uint2)(0);
                    vb[m] = rb[m] < out ? *(__global const uint2 *)(w + rb[m] * wrow + b * 8 + (bn_size)(2 * t)) : (uint2)(0);
                }
                MMA_UNROLL for (int sh = 0; sh < 4; sh++) {
                    int2 xb[GM_NT];
                    MMA_UNROLL for (int n = 0; n < GM_NT; n++)
                        xb[n] = tok_ok[n] ? *(__global const int2 *)(xr[n] + b * 128 + 32 * sh) : (int2)(0);
                    MMA_UNROLL for (int m = 0; m < GM_MT; m++) {
                        const int4 a = (int4)(bl_dec_s8(va[m].x, sh), bl_dec_s8(vb[m].x, sh), bl_dec_s8(va[m].y, sh),
                                              bl_dec_s8(vb[m].y, sh));
                        MMA_UNROLL for (int n = 0; n < GM_NT; n++) c[m][n] = BL_MMA_S8(a, xb[n], c[m][n]);
                    }
                }
            }
            MMA_UNROLL for (int m = 0; m < GM_MT; m++) {
                const float da = ra[m] < out ? d[ra[m] * ng + gi] : 0.0f, db = rb[m] < out ? d[rb[m] * ng + gi] : 0.0f;
                MMA_UNROLL for (int n = 0; n < GM_NT; n++) {
                    s[m][n].x = s[m][n].x + convert_float(c[m][n].x) * da;
                    s[m][n].y = s[m][n].y + convert_float(c[m][n].y) * da;
                    s[m][n].z = s[m][n].z + convert_float(c[m][n].z) * db;
                    s[m][n].w = s[m][n].w + convert_float(c[m][n].w) * db;
                }
            }
        }
        MMA_UNROLL for (int m = 0; m < GM_MT; m++) MMA_UNROLL for (int n = 0; n < GM_NT; n++) {
            const float v[4] = {s[m][n].x, s[m][n].y, s[m][n].z, s[m][n].w};
            for (int i = 0; i < 4; i++) {
                const bn_size row = i < 2 ? ra[m] : rb[m], tok = t0 + (bn_size)(8 * n + 2 * t + (i & 1));
                if (row < out && tok < tokens)
                    bl_store(y, tok * out + row, v[i] / xs[tok], bias, has_bias, row, act, perturb);
            }
        }
    }
}
#endif /* __NV_CL_C_VERSION || MMA_EMULATE */

#if defined(__NV_CL_C_VERSION) || defined(NV_EMULATE)
/* NVIDIA: the dp4a family, one warp (32 work-items) on a row at a time:
 *   bl_gemv_nv4  one token: 16-byte half blocks, 512 bytes per warp load
 *   bl_gemv_nv3  2 to 7 tokens (and more where bl_gemm_mma is off):
 *                activations staged in local memory, one AND per code word
 *   bl_gemv_nv1  the fallback of both when one token's activations do not
 *                fit local memory: activations from global memory
 * Tunables (-D, from the host; the host reads the same names, with the same
 * defaults, for the launch geometry: lib/opencl/bitlinear.c): */
#ifndef NV_WARPS
#define NV_WARPS 4 /* warps per work-group */
#endif
#ifndef NV_ROWS
#define NV_ROWS 2 /* nv1, nv3: rows per warp, computed together (loads of all in flight) */
#endif
#ifndef NV_UNROLL
#define NV_UNROLL 2 /* nv1, nv3: blocks per lane per row loaded before computing */
#endif
#ifndef NV_TT
#define NV_TT 4 /* most tokens per pass over the weights */
#endif
#ifndef NV_U
#define NV_U 4 /* nv4: half blocks per lane and row in flight */
#endif
#ifndef NV_R
#define NV_R 1 /* nv4: rows per warp computed together (one read of the activations) */
#endif
/* and two the host alone reads: NV_LMEM, the most bytes of local memory the
 * staged activations take (default: the device's less 1 KiB), and NV_RW,
 * nv4's rows per warp (default from the shape); the kernels get the tokens
 * per pass and the rows per warp that follow as arguments. */

/* Four consecutive bytes at shift k are four consecutive weights, turned into
 * signed bytes without borrows ((c | 0x80) - 1) ^ 0x80, one dp4a (bl_dp4a,
 * above) each.  NV_EMULATE (tests on other devices): dp4a in plain C and the warp sum
 * through local memory with barriers, so every call of BL_WSUM must be
 * reached by the whole work-group (all loops around it are uniform). */
#ifdef NV_EMULATE
/* Butterfly like shfl.bfly: every lane ends with the sum of its warp. */
inline int bl_warp_sum_emu(int v, __local int *scr, int lane)
{
    scr[lane] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int m = 16; m > 0; m >>= 1) {
        const int other = scr[lane ^ m];
        barrier(CLK_LOCAL_MEM_FENCE);
        v += other;
        scr[lane] = v;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return v;
}
/* a's bytes unsigned, b's signed */
inline int bl_dp4a_us(uint a, int b, int c)
{
    for (int i = 0; i < 32; i += 8) c += (int)(uchar)(a >> i) * (int)(char)(b >> i);
    return c;
}
#define BL_WSCRATCH(warps) __local int wscr_[32 * (warps)]
#define BL_WSUM(v) bl_warp_sum_emu((v), wscr_ + 32 * get_local_id(1), get_local_id(0))
#else
inline int bl_warp_sum(int v)
{
    for (int m = 16; m > 0; m >>= 1) {
        int other;
        asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(other) : "r"(v), "r"(m));
        v += other;
    }
    return v;
}
inline int bl_dp4a_us(uint a, int b, int c)
{
    int r;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}
#define BL_WSCRATCH(warps)
#define BL_WSUM(v) bl_warp_sum(v)
#endif
/* Test hook (-DNV_TEST_Vn=m): variant n starts its integer sums at m, so a
 * test can tell which variant ran. */
#ifndef NV_TEST_V1
#define NV_TEST_V1 0
#endif
#ifndef NV_TEST_V3
#define NV_TEST_V3 0
#endif
#ifndef NV_TEST_V4
#define NV_TEST_V4 0
#endif
/* Four signed codes of one word at shift k, as bytes -1..1. */
inline int bl_q4(uint cw, int k)
{
    const uint c = (cw >> (2 * k)) & 0x03030303u;
    return (int)(((c | 0x80808080u) - 0x01010101u) ^ 0x80808080u);
}

/* The 32 signed code words of one block (32 bytes = 128 weights: w0 bytes
 * 0..15, w1 bytes 16..31): q[8k + j] holds the four weights of word j
 * (0..3 of w0, 4..7 of w1) at shift k, decoded once and used for every
 * token of the pass. */
inline void bl_block_q(uint4 w0, uint4 w1, int *q)
{
    for (int k = 0; k < 4; k++) {
        q[8 * k + 0] = bl_q4(w0.x, k);
        q[8 * k + 1] = bl_q4(w0.y, k);
        q[8 * k + 2] = bl_q4(w0.z, k);
        q[8 * k + 3] = bl_q4(w0.w, k);
        q[8 * k + 4] = bl_q4(w1.x, k);
        q[8 * k + 5] = bl_q4(w1.y, k);
        q[8 * k + 6] = bl_q4(w1.z, k);
        q[8 * k + 7] = bl_q4(w1.w, k);
    }
}
/* ... against the block's 128 activations xv[0..7] (16 each, in column
 * order): xv[2k] meets w0 at shift k, xv[2k+1] meets w1 at shift k. */
inline int bl_block_dot(const int *q, const int4 *xv, int acc)
{
    for (int k = 0; k < 4; k++) {
        const int4 a = xv[2 * k], b = xv[2 * k + 1];
        acc = bl_dp4a(q[8 * k + 0], a.x, acc);
        acc = bl_dp4a(q[8 * k + 1], a.y, acc);
        acc = bl_dp4a(q[8 * k + 2], a.z, acc);
        acc = bl_dp4a(q[8 * k + 3], a.w, acc);
        acc = bl_dp4a(q[8 * k + 4], b.x, acc);
        acc = bl_dp4a(q[8 * k + 5], b.y, acc);
        acc = bl_dp4a(q[8 * k + 6], b.z, acc);
        acc = bl_dp4a(q[8 * k + 7], b.w, acc);
    }
    return acc;
}

/* The shared body of variants 1 and 3.  Warp `wid` of work-group g owns rows
 * r0 .. r0+NV_ROWS-1; lane handles blocks b = lane + 32 i.  Per step it loads
 * NV_UNROLL blocks of each of its NV_ROWS rows (2 NV_ROWS NV_UNROLL uint4 in
 * flight), then decodes each block once and runs it against the nt tokens
 * (<= NV_TT) of the pass from t0, reading the block's 128 activations of a
 * token with XLOAD (from L1 or local memory, once per row).  Rows past
 * `out` compute on zero codes and store nothing. */
#define BL_NV_BODY(XLOAD, INIT, QFN, DOTFN, XCORR)                                                             \
    int acc[NV_ROWS][NV_TT];                                                                                  \
    for (int r = 0; r < NV_ROWS; r++)                                                                         \
        for (int i = 0; i < NV_TT; i++) acc[r][i] = (INIT);                                                   \
    for (bn_size b0 = 0; b0 < nblocks; b0 += 32 * NV_UNROLL) {                                                \
        uint4 wv[NV_ROWS][NV_UNROLL][2];                                                                      \
        for (int r = 0; r < NV_ROWS; r++)                                                                     \
            for (int u = 0; u < NV_UNROLL; u++) {                                                             \
                const bn_size b = b0 + (bn_size)(32 * u + lane), row = r0 + (bn_size)r;                       \
                const int ok = row < out && b < nblocks;                                                      \
                wv[r][u][0] = ok ? w[(row * nblocks + b) * 2] : (uint4)(0);                                   \
                wv[r][u][1] = ok ? w[(row * nblocks + b) * 2 + 1] : (uint4)(0);                               \
            }                                                                                                 \
        for (int u = 0; u < NV_UNROLL; u++) {                                                                 \
            const bn_size b = b0 + (bn_size)(32 * u + lane);                                                  \
            if (b >= nblocks) break;                                                                          \
            for (int r = 0; r < NV_ROWS; r++) {                                                               \
                int q[32];                                                                                    \
                QFN(wv[r][u][0], wv[r][u][1], q);                                                             \
                for (int i = 0; i < NV_TT; i++) {                                                             \
                    if (i >= nt) break;                                                                       \
                    int4 xv[8];                                                                               \
                    for (int c = 0; c < 8; c++) xv[c] = XLOAD(i, b, c);                                       \
                    acc[r][i] = DOTFN(q, xv, acc[r][i]);                                                      \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
    for (int r = 0; r < NV_ROWS; r++)                                                                         \
        for (int i = 0; i < NV_TT; i++) {                                                                     \
            const int a = BL_WSUM(acc[r][i]);                                                                 \
            const bn_size row = r0 + (bn_size)r;                                                              \
            if (lane == 0 && row < out && i < nt) {                                                           \
                const float v = bl_scale(a - (XCORR(i)), per_row ? d[row] : d[0], xs[t0 + i]);                \
                bl_store(y, (t0 + i) * out + row, v, bias, has_bias, row, act, perturb);                      \
            }                                                                                                 \
        }

#define BL_NOCORR(i) 0

/* Variant 1: activations read from global memory (L1/L2), int4 x8 per
 * block and token. */
#define BL_XG(i, b, c) xg[(t0 + (bn_size)(i)) * nx + (b) * 8 + (c)]
__kernel __attribute__((reqd_work_group_size(32, NV_WARPS, 1)))
void bl_gemv_nv1(__global const uint4 *w, __global const int4 *xg, __global const float *xs, __global const float *d,
                 const int per_row, __global const float *bias, const int has_bias, const int act, __global float *y,
                 const bn_size out, const bn_size tokens, const bn_size nblocks, const bn_size xstride,
                 const long perturb BL_RES_ARGS)
{
    BL_WSCRATCH(NV_WARPS);
    const int lane = get_local_id(0);
    const bn_size r0 = (get_group_id(1) * NV_WARPS + get_local_id(1)) * NV_ROWS, nx = xstride / 16;
    for (bn_size t0 = 0; t0 < tokens; t0 += NV_TT) {
        const int nt = tokens - t0 < NV_TT ? (int)(tokens - t0) : NV_TT;
        BL_NV_BODY(BL_XG, NV_TEST_V1, bl_block_q, bl_block_dot, BL_NOCORR)
    }
}

/* Variants 3 and 4 stage the activations of tt tokens (tt <= NV_TT, set by
 * the host from the local memory it gives them) in local memory once per
 * work-group and pass, transposed to xl[token][c][block] (c = 16-byte chunk
 * of the block) so that the 32 lanes of a warp, reading chunk c of 32
 * consecutive blocks, read 512 consecutive bytes. */
#define BL_XL(i, b, c) xl[(uint)(i) * 8 * nbp + (uint)(c) * nbp + (uint)(b)]
/* Variant 3's staging of nt tokens from t0 (32-bit indices: the local copy
 * is small).  Rows of the transposed copy are nbp = nblocks | 1 int4 apart, an odd
 * number, so that the eight chunks of one block written at once go to
 * eight different 16-byte bank groups.  The host sizes xl as tt * 8 * nbp
 * int4 (tt * 128 * (nblocks | 1) bytes). */
#define BL_STAGE()                                                                                            \
    for (int i = 0; i < nt; i++)                                                                              \
        for (uint c = (uint)lid; c < (uint)nx; c += 32 * NV_WARPS)                                            \
            xl[(uint)i * 8 * nbp + (c & 7) * nbp + (c >> 3)] = xg[(t0 + (bn_size)i) * nx + c]
/* Variant 3: activations staged (BL_STAGE), the codes left unsigned and
 * unshifted: word & (3 << 2k) holds code * 4^k per byte (<= 192), so one AND
 * decodes four weights, dp4a.u32.s32 sums code * x, the four shifts of a
 * block are summed apart and divided back exactly (each sum is a multiple of
 * 4^k), and the host's per-token sum of the activations is taken off once:
 * sum (code - 1) x = sum code x - sum x (padding columns have x = 0). */
inline void bl_block_qu(uint4 w0, uint4 w1, int *q)
{
    for (int k = 0; k < 4; k++) {
        const uint m = 0x03030303u << (2 * k);
        q[8 * k + 0] = (int)(w0.x & m);
        q[8 * k + 1] = (int)(w0.y & m);
        q[8 * k + 2] = (int)(w0.z & m);
        q[8 * k + 3] = (int)(w0.w & m);
        q[8 * k + 4] = (int)(w1.x & m);
        q[8 * k + 5] = (int)(w1.y & m);
        q[8 * k + 6] = (int)(w1.z & m);
        q[8 * k + 7] = (int)(w1.w & m);
    }
}
inline int bl_block_dotu(const int *q, const int4 *xv, int acc)
{
    int p[4];
    for (int k = 0; k < 4; k++) {
        const int4 a = xv[2 * k], b = xv[2 * k + 1];
        int s = bl_dp4a_us((uint)q[8 * k + 0], a.x, 0);
        s = bl_dp4a_us((uint)q[8 * k + 1], a.y, s);
        s = bl_dp4a_us((uint)q[8 * k + 2], a.z, s);
        s = bl_dp4a_us((uint)q[8 * k + 3], a.w, s);
        s = bl_dp4a_us((uint)q[8 * k + 4], b.x, s);
        s = bl_dp4a_us((uint)q[8 * k + 5], b.y, s);
        s = bl_dp4a_us((uint)q[8 * k + 6], b.z, s);
        p[k] = bl_dp4a_us((uint)q[8 * k + 7], b.w, s);
    }
    return acc + p[0] + p[1] / 4 + p[2] / 16 + p[3] / 64; /* exact: multiples */
}
#define BL_XSUM(i) xsum[t0 + (bn_size)(i)]
__kernel __attribute__((reqd_work_group_size(32, NV_WARPS, 1)))
void bl_gemv_nv3(__global const uint4 *w, __global const int4 *xg, __global const float *xs, __global const float *d,
                 const int per_row, __global const float *bias, const int has_bias, const int act, __global float *y,
                 const bn_size out, const bn_size tokens, const bn_size nblocks, const bn_size xstride,
                 const long perturb, __local int4 *xl, const int tt, __global const int *xsum BL_RES_ARGS)
{
    BL_WSCRATCH(NV_WARPS);
    const int lane = get_local_id(0), lid = get_local_id(1) * 32 + lane;
    const bn_size r0 = (get_group_id(1) * NV_WARPS + get_local_id(1)) * NV_ROWS, nx = xstride / 16;
    const uint nbp = (uint)nblocks | 1u;
    for (bn_size t0 = 0; t0 < tokens; t0 += (bn_size)tt) {
        const int nt = tokens - t0 < (bn_size)tt ? (int)(tokens - t0) : tt;
        barrier(CLK_LOCAL_MEM_FENCE);
        BL_STAGE();
        barrier(CLK_LOCAL_MEM_FENCE);
        BL_NV_BODY(BL_XL, NV_TEST_V3, bl_block_qu, bl_block_dotu, BL_XSUM)
    }
}
/* Variant 4: for bandwidth.  Lane l of a warp takes the 16-byte half
 * blocks h = l, l + 32, ... of a row, so one load instruction of the warp
 * reads 512 consecutive bytes; NV_U of them per lane for each of NV_R rows
 * are in flight before the rows are computed, and each staged activation
 * read serves the NV_R rows.  Each warp does `rw` rows (set by the host so
 * that the grid still fills the device) and the activations of the pass are
 * staged once per work-group, swizzled: 16-byte chunk c of token i at
 * xl[i * 8 nbp + (c & 7) nbp + (c >> 3)], nbp >= nblocks and nbp % 8 == 4,
 * so that the 8 lanes of each quarter warp read 8 different bank groups.
 * Codes decoded as in variant 3 (one AND per word, the four shifts summed
 * apart and divided back per half block, the activation sum taken off). */
/* sum code * x over one half block (64 weights): xk holds the 16
 * activations that meet the codes at shift k */
inline int bl_half_dotu(uint4 wv, int4 x0, int4 x1, int4 x2, int4 x3)
{
    const uint m0 = 0x03030303u, m1 = m0 << 2, m2 = m0 << 4, m3 = m0 << 6;
    int p0 = bl_dp4a_us(wv.x & m0, x0.x, 0), p1 = bl_dp4a_us(wv.x & m1, x1.x, 0);
    int p2 = bl_dp4a_us(wv.x & m2, x2.x, 0), p3 = bl_dp4a_us(wv.x & m3, x3.x, 0);
    p0 = bl_dp4a_us(wv.y & m0, x0.y, p0), p1 = bl_dp4a_us(wv.y & m1, x1.y, p1);
    p2 = bl_dp4a_us(wv.y & m2, x2.y, p2), p3 = bl_dp4a_us(wv.y & m3, x3.y, p3);
    p0 = bl_dp4a_us(wv.z & m0, x0.z, p0), p1 = bl_dp4a_us(wv.z & m1, x1.z, p1);
    p2 = bl_dp4a_us(wv.z & m2, x2.z, p2), p3 = bl_dp4a_us(wv.z & m3, x3.z, p3);
    p0 = bl_dp4a_us(wv.w & m0, x0.w, p0), p1 = bl_dp4a_us(wv.w & m1, x1.w, p1);
    p2 = bl_dp4a_us(wv.w & m2, x2.w, p2), p3 = bl_dp4a_us(wv.w & m3, x3.w, p3);
    return p0 + (p1 >> 2) + (p2 >> 4) + (p3 >> 6); /* exact: multiples of 4^k */
}
#define BL_XL4(i, c) xl[(uint)(i) * 8 * nbp + ((uint)(c) & 7) * nbp + ((uint)(c) >> 3)]
__kernel __attribute__((reqd_work_group_size(32, NV_WARPS, 1)))
void bl_gemv_nv4(__global const uint4 *w, __global const int4 *xg, __global const float *xs, __global const float *d,
                 const int per_row, __global const float *bias, const int has_bias, const int act, __global float *y,
                 const bn_size out, const bn_size tokens, const bn_size nblocks, const bn_size xstride,
                 const long perturb, __local int4 *xl, const int tt, __global const int *xsum, const uint nbp,
                 const uint rw BL_RES_ARGS, const int own_sum)
{
    BL_WSCRATCH(NV_WARPS);
    __local int osum_[NV_WARPS * NV_TT];
    const int lane = get_local_id(0), lid = get_local_id(1) * 32 + lane;
    const bn_size nh = 2 * nblocks, nx = xstride / 16;
    const bn_size r0 = (get_group_id(1) * NV_WARPS + get_local_id(1)) * (bn_size)rw;
    /* half block h = h0 + lane (h0 a multiple of 32) meets at shift k the
     * staged chunk xl[i 8 nbp + (2k + (lane & 1)) nbp + h0 / 2 + lane / 2] */
    const uint xb = (uint)(lane & 1) * nbp + (uint)(lane >> 1);
    for (bn_size t0 = 0; t0 < tokens; t0 += (bn_size)tt) {
        const int nt = tokens - t0 < (bn_size)tt ? (int)(tokens - t0) : tt;
        /* the first loads of the first rows go out before the staging, so
         * that the two latencies overlap (small matrices are latency-bound) */
        uint4 wv[NV_R][NV_U];
        for (int q = 0; q < NV_R; q++)
            for (int u = 0; u < NV_U; u++) {
                const bn_size h = (bn_size)(32 * u + lane), row = r0 + (bn_size)q;
                wv[q][u] = (uint)q < rw && row < out && h < nh ? w[row * nh + h] : (uint4)(0);
            }
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous pass is done with xl and osum_ */
        int ps[NV_TT], osum[NV_TT];
        for (int i = 0; i < NV_TT; i++) {
            ps[i] = 0;
            if (i >= nt) continue;
            for (uint c = (uint)lid; c < (uint)nx; c += 32 * NV_WARPS) {
                const int4 v = xg[(t0 + (bn_size)i) * nx + c];
                BL_XL4(i, c) = v;
                if (own_sum) ps[i] = bl_dp4a(v.w, 0x01010101, bl_dp4a(v.z, 0x01010101, bl_dp4a(v.y, 0x01010101, bl_dp4a(v.x, 0x01010101, ps[i]))));
            }
        }
        /* own_sum: the caller's int8 activations used as they are (no
         * padding), so the per-token code sums are taken here, from the
         * staged copy's loads (work-group-uniform branch) */
        if (own_sum)
            for (int i = 0; i < NV_TT; i++) {
                const int s = BL_WSUM(ps[i]);
                if (lane == 0) osum_[get_local_id(1) * NV_TT + i] = s;
            }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < NV_TT; i++) {
            osum[i] = 0;
            if (own_sum)
                for (int k = 0; k < NV_WARPS; k++) osum[i] += osum_[k * NV_TT + i];
            else if (i < nt)
                osum[i] = xsum[t0 + i];
        }
        for (uint r = 0; r < rw; r += NV_R) {
            int acc[NV_R][NV_TT];
            for (int q = 0; q < NV_R; q++)
                for (int i = 0; i < NV_TT; i++) acc[q][i] = NV_TEST_V4;
            for (bn_size h0 = 0; h0 < nh; h0 += 32 * NV_U) {
                if (r != 0 || h0 != 0)
                    for (int q = 0; q < NV_R; q++) {
                        const bn_size row = r0 + r + (bn_size)q;
                        const int ok = r + (uint)q < rw && row < out;
                        __global const uint4 *wr = w + (ok ? row : 0) * nh;
                        for (int u = 0; u < NV_U; u++) {
                            const bn_size h = h0 + (bn_size)(32 * u + lane);
                            wv[q][u] = ok && h < nh ? wr[h] : (uint4)(0);
                        }
                    }
                for (int u = 0; u < NV_U; u++) {
                    if (h0 + (bn_size)(32 * u + lane) >= nh) break;
                    const uint xo = xb + (uint)(h0 / 2) + 16 * u;
                    for (int i = 0; i < NV_TT; i++) {
                        if (i >= nt) break;
                        __local const int4 *xi = xl + (uint)i * 8 * nbp + xo;
                        const int4 x0 = xi[0], x1 = xi[2 * nbp], x2 = xi[4 * nbp], x3 = xi[6 * nbp];
                        for (int q = 0; q < NV_R; q++) acc[q][i] += bl_half_dotu(wv[q][u], x0, x1, x2, x3);
                    }
                }
            }
            for (int q = 0; q < NV_R; q++)
                for (int i = 0; i < NV_TT; i++) {
                    const int a = BL_WSUM(acc[q][i]);
                    const bn_size row = r0 + r + (bn_size)q;
                    if (lane == 0 && r + (uint)q < rw && row < out && i < nt) {
                        const float v = bl_scale(a - osum[i], per_row ? d[row] : d[0], xs[t0 + i]);
                        bl_store(y, (t0 + i) * out + row, v, bias, has_bias, row, act, perturb);
                    }
                }
        }
    }
}
#endif /* __NV_CL_C_VERSION || NV_EMULATE */
