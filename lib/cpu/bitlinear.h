/*
 * bitlinear.h - internals of the BitLinear and float-product family, shared
 * by the public entry points (lib/op_bitlinear.c), the CPU kernels
 * (lib/cpu/bitlinear*.c, lib/cpu/matmul.c) and the OpenCL host code.
 */
#ifndef BITNET_CPU_BITLINEAR_H
#define BITNET_CPU_BITLINEAR_H

#include "cpu.h"

/* The largest `in`: |acc| <= 128 * in must fit in int32. */
#define BN_BITLINEAR_MAX_IN ((uint64_t)1 << 24)

/* Argument checks of the public calls (also run by the _ref functions):
 * NULLs, one input form and one output form, shapes, size overflow, the
 * group size, and finite positive activation scales. */
bitnet_status bn_bitlinear_check(const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io);
bitnet_status bn_matmul_check(const float *x, uint64_t tokens, uint64_t in, const float *w, uint64_t out,
                              const float *y, bitnet_act act);
/* Bytes an op call moves (for dispatch thresholds and statistics). */
uint64_t bn_bitlinear_bytes(const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io);

/* Number of scales of w: 1, out, or out * ceil(in / group). */
uint64_t bn_bitlinear_n_scales(const bitnet_ternary_matrix *w);

/* The epilogue: the one float order every backend follows.
 *   tensor/row scale:  y = (float)acc * (d / s_x)      (d / s_x rounded once)
 *   group scale:       y = (sum over g = 0.. of (float)acc_g * d_g) / s_x
 * then y = y + bias[o], then the activation.  No step is contracted. */
static inline float bn_bl_tensor_row(int32_t acc, float d, float sx)
{
    const float factor = d / sx;
    return (float)acc * factor;
}
static inline float bn_bl_finish(float y, const float *bias, uint64_t o, bitnet_act act)
{
    if (bias) y = y + bias[o];
    return act == BITNET_ACT_NONE ? y : bn_act_ref(act, y);
}
/* BitLinear's epilogue of output (t, o): bias, activation, residual. */
static inline float bn_bl_epilogue(float y, const bitnet_bitlinear_io *io, uint64_t out, uint64_t t, uint64_t o)
{
    y = bn_bl_finish(y, io->bias, o, io->act);
    return io->residual ? y + io->residual[t * out + o] : y;
}

/* Activation quantization of one row (absmax rule of bnt(5)), writing
 * npad >= n codes (zeros past n).  Returns nonzero when x holds NaN/Inf. */
typedef int (*bn_quant_row_fn)(const float *x, uint64_t n, uint64_t npad, int8_t *q, float *s);
int bn_quant_row_scalar(const float *x, uint64_t n, uint64_t npad, int8_t *q, float *s);

/* T2 dot kernels.  x holds nt token rows `xstride` bytes apart, each padded
 * with zeros to whole blocks.  They return sum over columns of code * x with
 * code = q + 1 in 0..2 (the caller subtracts the sum of x).
 *   dot:     acc[t] over blocks [0, nblocks) of one weight row;
 *   dot_sub: per 32-column sub-block of one token: acc[4*b + k], in the
 *            activation layout of its kernel set. */
#define BN_T2_MAXT 8
typedef void (*bn_t2_dot_fn)(const uint8_t *w, const int8_t *x, size_t xstride, int nt, size_t nblocks,
                             int32_t *acc);
/* dot2 (optional): the same for two rows w0, w1 at once (acc0, acc1). */
typedef void (*bn_t2_dot2_fn)(const uint8_t *w0, const uint8_t *w1, const int8_t *x, size_t xstride, int nt,
                              size_t nblocks, int32_t *acc0, int32_t *acc1);
/* gemv (optional): dot for one token, prefetching the weight stream ahead
 * but never past pf_last (the last byte the caller's rows reach). */
/* The one-token kernels' software prefetch distance into L2 (bytes ahead
 * of the weight row being read; bitlinear_vnni.c has the measurement). */
#ifndef BL_PF_BYTES
#define BL_PF_BYTES 24576
#endif
typedef void (*bn_t2_gemv_fn)(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc, const uint8_t *pf_last);
/* The VNNI one-token kernels (AVX-512 and AVX-VNNI) use the codes in place,
 * as code * 4^k, up to this many blocks a row, and shift them down beyond:
 * their sums must fit in int32 (bitlinear_vnni.c has the bound). */
#define BN_T2_NOSHIFT_MAX_BLOCKS 4095
/* gemv2 (optional): the same for two rows at once, w and w + rb (acc[0],
 * acc[1]); pf_last as above. */
typedef void (*bn_t2_gemv2_fn)(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, int32_t *acc,
                               const uint8_t *pf_last);
typedef void (*bn_t2_dot_sub_fn)(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc);
/* Group scales of bpg blocks a group, bpg 1 or even (bitlinear.c, rows_group):
 *   grp1: one token, rows w and w + rb (rb 0: the same row twice): the
 *         sums of (code - 1) * x of each of the ng groups into o0 and o1
 *         (xg: the sums of x per group); pf_last as for gemv;
 *   grpn: nt tokens (1..tokens_per_pass) xstride apart, the same two rows:
 *         the float chains of the definition, sums[8 r + t] = sum over the
 *         groups in order of (float)(acc_g - xgp[tokens_per_pass * g + t]) *
 *         d_r[g] (d0, d1: the rows' ng scales). */
typedef void (*bn_t2_grp1_fn)(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t bpg, size_t ng,
                              const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last);
typedef void (*bn_t2_grpn_fn)(const uint8_t *w, size_t rb, const int8_t *x, size_t xstride, int nt, size_t nblocks,
                              size_t bpg, size_t ng, const float *d0, const float *d1, const int32_t *xgp, float *sums);

typedef struct {
    const char *name;
    bn_quant_row_fn quant_row;
    bn_t2_dot_fn dot;
    bn_t2_dot_sub_fn dot_sub;
    bn_t2_dot2_fn dot2;   /* (optional) */
    bn_t2_gemv_fn gemv;   /* (optional) */
    bn_t2_gemv2_fn gemv2; /* (optional, with gemv) */
    int tokens_per_pass;  /* nt per dot call (<= BN_T2_MAXT) */
    int pair_layout;      /* 1: x rows use the AVX-512 pairwise layout (see bitlinear.c) */
    /* (optional) group scales: the float chains of 8 rows (bitlinear.c) */
    void (*chains8)(const int32_t *acc, size_t astride, const float *d, uint64_t ng, float *y);
    bn_t2_grp1_fn grp1;   /* (optional, with grpn) group scales of whole blocks */
    bn_t2_grpn_fn grpn;
    /* (optional) grp1 and grpn for groups of 32 and 64 columns, their bpg
     * argument the 32-column planes of a group (1, 2); without grpns only
     * one token takes grp1s */
    bn_t2_grp1_fn grp1s;
    bn_t2_grpn_fn grpns;
} bn_t2_kernels;

void bn_t2_dot_scalar(const uint8_t *w, const int8_t *x, size_t xstride, int nt, size_t nblocks, int32_t *acc);
void bn_t2_dot_sub_scalar(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc);
#if defined(__x86_64__)
int bn_quant_row_avx2(const float *x, uint64_t n, uint64_t npad, int8_t *q, float *s);
void bn_t2_dot_avx2(const uint8_t *w, const int8_t *x, size_t xstride, int nt, size_t nblocks, int32_t *acc);
void bn_t2_dot_sub_avx2(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc);
void bn_t2_gemv_avx2(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc, const uint8_t *pf_last);
void bn_group_chains8_avx2(const int32_t *acc, size_t astride, const float *d, uint64_t ng, float *y);
void bn_t2_grp1s_avx2(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t spg, size_t ng,
                      const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last);
void bn_t2_grp1s_avxvnni(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t spg, size_t ng,
                         const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last);
void bn_t2_grp1_avx2(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t bpg, size_t ng,
                     const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last);
void bn_t2_grpn_avx2(const uint8_t *w, size_t rb, const int8_t *x, size_t xstride, int nt, size_t nblocks, size_t bpg,
                     size_t ng, const float *d0, const float *d1, const int32_t *xgp, float *sums);
void bn_t2_dot_avxvnni(const uint8_t *w, const int8_t *x, size_t xstride, int nt, size_t nblocks, int32_t *acc);
void bn_t2_gemv_avxvnni(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc, const uint8_t *pf_last);
void bn_t2_grp1_avxvnni(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t bpg, size_t ng,
                        const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last);
void bn_t2_grpn_avxvnni(const uint8_t *w, size_t rb, const int8_t *x, size_t xstride, int nt, size_t nblocks,
                        size_t bpg, size_t ng, const float *d0, const float *d1, const int32_t *xgp, float *sums);
void bn_t2_dot_avx512(const uint8_t *w, const int8_t *x, size_t xstride, int nt, size_t nblocks, int32_t *acc);
void bn_t2_dot2_vnni(const uint8_t *w0, const uint8_t *w1, const int8_t *x, size_t xstride, int nt, size_t nblocks,
                     int32_t *acc0, int32_t *acc1);
void bn_t2_dot_vnni(const uint8_t *w, const int8_t *x, size_t xstride, int nt, size_t nblocks, int32_t *acc);
void bn_t2_gemv_vnni(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc, const uint8_t *pf_last);
void bn_t2_gemv2_vnni(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, int32_t *acc,
                      const uint8_t *pf_last);
void bn_t2_dot_sub_vnni(const uint8_t *w, const int8_t *x, size_t nblocks, int32_t *acc);
void bn_t2_grp1s_vnni(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t spg, size_t ng,
                      const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last);
void bn_t2_grpns_vnni(const uint8_t *w, size_t rb, const int8_t *x, size_t xstride, int nt, size_t nblocks, size_t spg,
                      size_t ng, const float *d0, const float *d1, const int32_t *xg8, float *sums);
void bn_t2_grp1_vnni(const uint8_t *w, size_t rb, const int8_t *x, size_t nblocks, size_t bpg, size_t ng,
                     const int32_t *xg, int32_t *o0, int32_t *o1, const uint8_t *pf_last);
void bn_t2_grpn_vnni(const uint8_t *w, size_t rb, const int8_t *x, size_t xstride, int nt, size_t nblocks, size_t bpg,
                     size_t ng, const float *d0, const float *d1, const int32_t *xgp, float *sums);
#endif

/* Many tokens on INT8 tiles (bitlinear_tiles.h): acc[r * ldacc + t] = sum of
 * code * x over the columns, rows [0, nr) of t2, tokens [0, 16 ntt) packed
 * by the caller as ntt x nsteps tiles of 1 KiB (byte 64 r + 4 n + i of tile
 * (q, s) = x[16 q + n][64 s + 4 r + i]).  _amx on the hardware, _emu in
 * plain C (both need AVX2 for the weight decode). */
typedef struct {
    size_t bpg, ng;      /* blocks a group (group / 128), groups a row */
    const float *d;      /* the scales of row 0 of the call; row r's at d + r * ng */
    const int32_t *xg;   /* xg[g * ldx + t]: the sum of token t's activations over group g (0 past the tokens) */
    size_t ldx;          /* 16 ntt at least */
    float *sums;         /* the float chains, laid out as acc */
} bn_t2_tiles_grp;
typedef void (*bn_t2_tiles_fn)(const uint8_t *t2, size_t rb, uint64_t nr, const int8_t *xpack, uint64_t ntt,
                               size_t nsteps, int32_t *acc, size_t ldacc, const bn_t2_tiles_grp *grp);
#if defined(__x86_64__)
void bn_t2_tiles_amx(const uint8_t *t2, size_t rb, uint64_t nr, const int8_t *xpack, uint64_t ntt, size_t nsteps,
                     int32_t *acc, size_t ldacc, const bn_t2_tiles_grp *grp);
void bn_t2_tiles_vnni(const uint8_t *t2, size_t rb, uint64_t nr, const int8_t *xpack, uint64_t ntt, size_t nsteps,
                      int32_t *acc, size_t ldacc, const bn_t2_tiles_grp *grp);
void bn_t2_tiles_emu(const uint8_t *t2, size_t rb, uint64_t nr, const int8_t *xpack, uint64_t ntt, size_t nsteps,
                     int32_t *acc, size_t ldacc, const bn_t2_tiles_grp *grp);
#endif

#endif
