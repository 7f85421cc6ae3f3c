/*
 * matmul.c (OpenCL) - host code of the float product y = x w^T (+bias, act):
 * the project's own kernels (kernels/matmul.cl) or CLBlast (Sgemv for one
 * token, Sgemm otherwise, then the epilogue as one kernel), on the same
 * device buffers, with the definition of bitnet_matmul_f32_ref: the sum is
 * rounded to float, then bias is added, then the activation applied.
 *
 * On NVIDIA GPUs the project's own kernels take every product, measured
 * faster than CLBlast (1.5.3, default parameters) at every shape and token
 * count tried (bitnet-bench --op matmul_f32 --keep-weights, kernel medians,
 * one call of tests/device/mm-sweep.sh on an H100, NVIDIA OpenCL 580,
 * 2026-11-26; own / CLBlast / cuBLAS fp32):
 *     4096 x 4096:   1 token 30.8 / 121.5 / 40.3 us, 8: 54.1 / 277 / 59.0,
 *                    16: 67.4 / 274 / 66.5, 64: 151 / 248 / 81.0
 *     4096 x 14336:  1: 92.3 / 388 / 95.1, 8: 139 / 908 / 177,
 *                    16: 181 / 946 / 150, 64: 494 / 874 / 200
 *    16384 x 16384:  1: 356 / 535 / 374, 8: 559 / 1287 / 617,
 *                    16: 768 / 2130 / 632, 64: 1867 / 2133 / 781
 *   (own at 64 tokens: the former mm_nt tile; today's is below)
 *   - mm_gemv up to GV_TMAX (16) tokens: the weights streamed once, every
 *     token's sums kept per item.  At 16 tokens it beat mm_nt 67.4 against
 *     130 us (4096 x 4096).
 *   - mm_nt from 17 tokens: 64 x 128 tiles (tokens x outputs) of 8 x 8 per
 *     item (128 items), k in steps of 16, each item's tokens and outputs in
 *     groups of four LM (LN) items apart (the kernel's MT_TOK/MT_OUT), the
 *     loops over a step's loads and stores unrolled.  H100, 2026-11-26,
 *     kernel medians at 64 tokens, two calls on one machine, bitnet-bench --op matmul_f32
 *     --keep-weights --no-check, 4096 x 4096 / 4096 x 14336 / 16384 x 16384:
 *       the former 64 x 64 tiles of 4 x 4:        129.6 / 423.6 / 1570 us
 *       64 x 128 of 8 x 8, loops not unrolled:    113.8 / 332.8 / 1122
 *       the same, unrolled (the default):         109.5 / 305.1 / 1055
 *       cuBLAS fp32 (torch, TF32 off), same call:  96.9 / 231.3 /  842
 *     (a second round: 108.3 / 304.2 / 1055 against 87.0 / 213.4 / 806),
 *     and at 17 tokens 95.6 / 283.8 / 969 against 113.6 / 368.1 / 1359
 *     for the former tile.  Also tried at 64 tokens (the same calls and the
 *     one before, TM,TN,TK,RM,RN[,parts]): 64,256,32,8,8 102-109 / 328-331
 *     / 1468-1548; 64,128,32,8,8 106 / 506 / 1684; 64,128,8,8,8 134 / 391 /
 *     1314; 64,256,16,8,8 111 / 359 / 1335; 32,128,16,4,8 139 / 421 / 1601;
 *     32,128,32,4,8 127-129 / 402 / 1481; and the default with 2, 4, 5 and
 *     6 k parts where 3 (4096 x 14336, 16384 x 16384) or 9 (4096 x 4096)
 *     are chosen: all slower.  The grouping by four alone (64 x 64 tiles of
 *     4 x 4 keep their layout; only the code changed) took 141 to 129 us at
 *     4096 x 4096.
 *     Earlier, with 64 x 64 tiles of 4 x 4: the k split (5 parts there on
 *     132 compute units) against none, on an H200: 202 against 532 us; each
 *     k step's loads issued before the previous step's products: 8-10%
 *     faster at 17 and 64 tokens (H200).
 * On other devices CLBlast: on PoCL (CPU, 1024 x 1024) it won at 1 and 64
 * tokens (0.34 against 0.56-0.62 ms, 25.9 against 51.0 ms for the former
 * tiled kernel).  BITNET_OCL_MATMUL=own or =clblast forces one (for
 * measurements).
 */
#include "../cpu/bitlinear.h"
#include "blas.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int own_kernel(const bn_ocl *o)
{
    const char *e = getenv("BITNET_OCL_MATMUL");
    if (e && strcmp(e, "own") == 0) return 1;
    if (e && strcmp(e, "clblast") == 0) return 0;
    return bn_ocl_get_caps(o)->is_nvidia && bn_ocl_get_caps(o)->is_gpu;
}

/* y = x w^T through CLBlast, then the epilogue when there is one. */
static bitnet_status matmul_blas(bn_ocl *o, cl_mem bx, uint64_t tokens, uint64_t in, cl_mem bw, uint64_t out,
                                 cl_mem bb, int has_bias, bitnet_act act, cl_mem by)
{
    cl_event mark, ev = NULL;
    bitnet_status st = bn_blas_begin(o, &mark);
    if (st) return st;
    CLBlastStatusCode c;
    if (tokens == 1)
        c = CLBlastSgemv(CLBlastLayoutRowMajor, CLBlastTransposeNo, out, in, 1.0f, bw, 0, in, bx, 0, 1, 0.0f, by, 0,
                         1, bn_blas_queue(o), &ev);
    else
        c = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, tokens, out, in, 1.0f, bx, 0,
                         in, bw, 0, in, 0.0f, by, 0, out, bn_blas_queue(o), &ev);
    st = bn_blas_end(o, mark, ev, "matmul_f32");
    if (c != CLBlastSuccess) return BN_BLAS_FAIL(c, tokens == 1 ? "CLBlastSgemv" : "CLBlastSgemm");
    if (st) return st;
    const cl_long perturb = bn_test_perturb("matmul_f32") ? 0 : -1;
    if (!has_bias && act == BITNET_ACT_NONE && perturb < 0) return BITNET_OK;
    cl_kernel k;
    if ((st = bn_ocl_kernel(o, "matmul", "mm_epilogue", "", &k))) return st;
    const cl_int hb = has_bias, a = (cl_int)act;
    const cl_ulong ct = tokens, co = out;
    if ((st = bn_ocl_args(o, k, 7, sizeof by, &by, sizeof bb, &bb, sizeof hb, &hb, sizeof a, &a, sizeof ct, &ct,
                          sizeof co, &co, sizeof perturb, &perturb)))
        return st;
    const size_t global[2] = {(size_t)out, (size_t)tokens};
    return bn_ocl_run(o, k, 2, global, NULL, "matmul_f32");
}

/* Up to GV_TMAX tokens through mm_gemv (built for the call's token count):
 * GV_ROWS rows per work-group of GV_LX items, a power of two up to 256 whose
 * partial sums (GV_ROWS x tokens x GV_LX floats) fit 32 KiB of local memory. */
#define GV_ROWS 4
#define GV_TMAX 16
static bitnet_status gemv(bn_ocl *o, cl_mem bx, uint64_t tokens, uint64_t in, cl_mem bw, uint64_t out, cl_mem bb,
                          int has_bias, bitnet_act act, cl_mem by)
{
    size_t lx = 256;
    while (lx > 1 && (lx > bn_ocl_get_caps(o)->max_wg || GV_ROWS * tokens * lx * 4 > 32768)) lx /= 2;
    char opts[96];
    snprintf(opts, sizeof opts, "-DGV_ROWS=%d -DGV_T=%u -DGV_LX=%zu", GV_ROWS, (unsigned)tokens, lx);
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "matmul", "mm_gemv", opts, &k);
    if (st) return st;
    const cl_int hb = has_bias, a = (cl_int)act;
    const cl_ulong ci = in, co = out;
    const cl_long perturb = bn_test_perturb("matmul_f32") ? 0 : -1;
    if ((st = bn_ocl_args(o, k, 9, sizeof bx, &bx, sizeof bw, &bw, sizeof bb, &bb, sizeof hb, &hb, sizeof a, &a,
                          sizeof by, &by, sizeof ci, &ci, sizeof co, &co, sizeof perturb, &perturb)))
        return st;
    const size_t global = (size_t)((out + GV_ROWS - 1) / GV_ROWS) * lx;
    return bn_ocl_run(o, k, 1, &global, &lx, "matmul_f32");
}

/* mm_nt's tile (the kernel's MT_* settings) and its split of k. */
typedef struct {
    unsigned tm, tn, tk, rm, rn, parts; /* parts 0: chosen from the shape */
} mt_cfg;

static const mt_cfg mt_default = {64, 128, 16, 8, 8, 0};
#define MT_PAD 4 /* floats added to each row of the kernel's local tiles */

/* BITNET_OCL_MM_TILE=TM,TN,TK,RM,RN[,PARTS] replaces the tile for sweeps
 * (and takes mm_nt from two tokens, where mm_gemv would take a few). */
static bitnet_status mt_config(const bn_ocl *o, mt_cfg *c)
{
    *c = mt_default;
    const char *e = getenv("BITNET_OCL_MM_TILE");
    if (!e || !*e) return BITNET_OK;
    unsigned v[6] = {0};
    int used = 0;
    const int n = sscanf(e, "%u,%u,%u,%u,%u%n,%u%n", &v[0], &v[1], &v[2], &v[3], &v[4], &used, &v[5], &used);
    const size_t local = (size_t)(v[2] * ((v[0] + MT_PAD) + (v[1] + MT_PAD))) * 4;
    if (n < 5 || e[used] || v[3] == 0 || v[4] == 0 || v[0] % v[3] || v[1] % v[4] || v[2] == 0 || v[2] % 4 ||
        v[0] % 4 || v[1] % 4 ||
        v[0] > 256 || v[1] > 256 || v[2] > 256 || (size_t)(v[0] / v[3]) * (v[1] / v[4]) > bn_ocl_get_caps(o)->max_wg ||
        local > bn_ocl_get_caps(o)->local_mem || (n == 6 && (v[5] == 0 || v[5] > 4096)))
        return bn_fail(BITNET_E_INVALID, "BITNET_OCL_MM_TILE=%s: want TM,TN,TK,RM,RN[,PARTS] with RM dividing TM, RN "
                                         "dividing TN, TM, TN and TK multiples of 4, each at most 256, (TM/RM)(TN/RN) items "
                                         "and the tiles' local memory within the device's limits, PARTS 1..4096",
                       e);
    *c = (mt_cfg){v[0], v[1], v[2], v[3], v[4], n == 6 ? v[5] : 0};
    return BITNET_OK;
}

/* Several tokens through mm_nt.  When the tiles alone would leave compute
 * units idle, k is split into parts (each a multiple of TK, at least 16
 * steps long) so that there are about two work-groups per compute unit; the
 * parts' sums go through a pooled buffer and mm_nt_sum. */
static bitnet_status tiled(bn_ocl *o, cl_mem bx, uint64_t tokens, uint64_t in, cl_mem bw, uint64_t out, cl_mem bb,
                           int has_bias, bitnet_act act, cl_mem by)
{
    mt_cfg c;
    bitnet_status st = mt_config(o, &c);
    if (st) return st;
    const uint64_t tiles = (out + c.tn - 1) / c.tn * ((tokens + c.tm - 1) / c.tm);
    uint64_t parts = c.parts;
    if (!parts) {
        const uint64_t want = 2 * (uint64_t)bn_ocl_get_caps(o)->compute_units, most = in / (16 * c.tk);
        parts = tiles >= want ? 1 : (want + tiles - 1) / tiles;
        if (parts > most) parts = most ? most : 1;
    }
    uint64_t kchunk = (in + parts - 1) / parts;
    kchunk = (kchunk + c.tk - 1) / c.tk * c.tk;
    parts = (in + kchunk - 1) / kchunk;
    cl_mem part = NULL;
    if (parts > 1) {
        /* tokens x out is below 2^31 (bn_matmul_check), parts below 2^32 */
        if (parts * tokens * out > SIZE_MAX / 4) return bn_fail(BITNET_E_NOMEM, "matmul_f32: k split too large");
        if ((st = bn_ocl_alloc(o, (size_t)(parts * tokens * out) * 4, &part))) return st;
    }
    char opts[128];
    snprintf(opts, sizeof opts, "-DMT_TM=%u -DMT_TN=%u -DMT_TK=%u -DMT_RM=%u -DMT_RN=%u -DMT_PAD=%d", c.tm, c.tn,
             c.tk, c.rm, c.rn, MT_PAD);
    cl_kernel k;
    const cl_int hb = has_bias, a = (cl_int)act, np = (cl_int)parts;
    const cl_ulong ct = tokens, ci = in, co = out, kc = kchunk;
    const cl_long perturb = bn_test_perturb("matmul_f32") ? 0 : -1;
    if (!(st = bn_ocl_kernel(o, "matmul", "mm_nt", opts, &k)) &&
        !(st = bn_ocl_args(o, k, 12, sizeof bx, &bx, sizeof bw, &bw, sizeof bb, &bb, sizeof hb, &hb, sizeof a, &a,
                           sizeof by, &by, sizeof part, &part, sizeof ct, &ct, sizeof ci, &ci, sizeof co, &co,
                           sizeof kc, &kc, sizeof perturb, &perturb))) {
        const size_t local[3] = {c.tn / c.rn, c.tm / c.rm, 1};
        const size_t global[3] = {(size_t)((out + c.tn - 1) / c.tn) * local[0],
                                  (size_t)((tokens + c.tm - 1) / c.tm) * local[1], (size_t)parts};
        st = bn_ocl_run(o, k, 3, global, local, "matmul_f32");
    }
    if (!st && parts > 1 && !(st = bn_ocl_kernel(o, "matmul", "mm_nt_sum", opts, &k)) &&
        !(st = bn_ocl_args(o, k, 9, sizeof part, &part, sizeof np, &np, sizeof bb, &bb, sizeof hb, &hb, sizeof a, &a,
                           sizeof by, &by, sizeof ct, &ct, sizeof co, &co, sizeof perturb, &perturb))) {
        const size_t global[2] = {(size_t)out, (size_t)tokens};
        st = bn_ocl_run(o, k, 2, global, NULL, "matmul_f32");
    }
    bn_ocl_release(o, part);
    return st;
}

bitnet_status bn_ocl_matmul_f32(void *ctx, const float *x, uint64_t tokens, uint64_t in, const float *w, uint64_t out,
                                const float *bias, bitnet_act act, float *y)
{
    bn_ocl *o = ctx;
    bitnet_status st;
    /* sizes were checked by bn_matmul_check (each below 2^31 elements) */
    const size_t xb = (size_t)(tokens * in) * 4, wb = (size_t)(out * in) * 4, yb = (size_t)(tokens * out) * 4;
    bn_ocl_arg ax = {0}, aw = {0}, ab = {0}, ay = {0};
    cl_mem bx = NULL, bw = NULL, bb = NULL, by = NULL;
    if ((st = bn_ocl_in(o, x, xb, &ax)) || (st = bn_ocl_in(o, w, wb, &aw)) ||
        (st = bn_ocl_in(o, bias, bias ? (size_t)out * 4 : 0, &ab)) || (st = bn_ocl_out(o, y, yb, &ay)))
        goto out;
    bx = ax.m;
    bw = aw.m;
    bb = ab.m;
    by = ay.m;
    if (!own_kernel(o)) {
        /* CLBlast computes beta * y even for beta = 0: a pooled y may hold NaN */
        if (!(st = bn_ocl_fill0(o, by, yb))) st = matmul_blas(o, bx, tokens, in, bw, out, bb, bias != NULL, act, by);
        goto out;
    }
    if (tokens <= GV_TMAX && !getenv("BITNET_OCL_MM_TILE")) {
        st = gemv(o, bx, tokens, in, bw, out, bb, bias != NULL, act, by);
        goto out;
    }
    st = tiled(o, bx, tokens, in, bw, out, bb, bias != NULL, act, by);
out:
    st = bn_ocl_done(o, &ay, st);
    st = bn_ocl_done(o, &ax, st);
    st = bn_ocl_done(o, &aw, st);
    return bn_ocl_done(o, &ab, st);
}
