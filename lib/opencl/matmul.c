/*
 * matmul.c (OpenCL) - host code of the float product y = x w^T (+bias, act):
 * the product through CLBlast (Sgemv for one token, Sgemm otherwise) on the
 * same device buffers, then the epilogue (bias, activation) as one kernel of
 * kernels/matmul.cl with the definition of bitnet_matmul_f32_ref: the sum is
 * rounded to float, then bias is added, then the activation applied.
 *
 * The project's own kernels stay where they were faster in the same run
 * (bitnet-bench --op matmul_f32 --keep-weights, BITNET_OCL_MATMUL=clblast
 * against =own, NVIDIA OpenCL 580, CLBlast 1.5.3 with its default
 * parameters; kernel medians, CLBlast / own):
 *   H100, 2026-11 (before mm_gemv existed; own at one token was mm_f32):
 *     4096 x 4096,  64 tokens  275.7 us /  232.7 us   own
 *    16384 x 16384, 64 tokens  2.260 ms / 3.359 ms    CLBlast
 *   H200, 2026-11-26, two alternating rounds (one token is mm_gemv, which
 *   streams each weight row once in float4s, 4 rows per work-group):
 *     4096 x 4096,   1 token   135-139 us / 24.1 us   own (cuBLAS fp32: 40.4 us)
 *     4096 x 14336,  1 token   404-406 us / 60.9 us   own
 *    16384 x 16384,  1 token   515 us / 245 us        own (cuBLAS fp32: 276.6 us)
 *     4096 x 4096,   8 tokens  287-294 us / 193 us    own
 *     4096 x 14336,  8 tokens  928-932 us / 662 us    own
 *    16384 x 16384,  8 tokens  1.28 ms / 1.77 ms      CLBlast
 *     4096 x 14336, 64 tokens  1.00 ms / 786 us      own
 *    16384 x 16384, 64 tokens  1.85 ms / 3.36 ms      CLBlast
 * and on PoCL (CPU, 1024 x 1024) CLBlast won at 1 and 64 tokens (2.2 / 24.9 ms
 * and 25.9 / 51.0 ms; mm_gemv 0.56-0.62 against 0.34 ms).  So on an NVIDIA
 * GPU: the own kernels for one token, and for several tokens up to
 * 2^26 weights; CLBlast everywhere else.
 * BITNET_OCL_MATMUL=own or =clblast forces one (for measurements).
 */
#include "../cpu/bitlinear.h"
#include "blas.h"

#include <stdlib.h>
#include <string.h>

/* the own kernel's largest weights from two tokens: between 4096 x 14336
 * (own faster) and 16384 x 16384 (CLBlast faster) */
#define OWN_MAX_WEIGHTS (1ull << 26)
#define MM_TS 32
#define MM_WPT 4

static int own_kernel(const bn_ocl *o, uint64_t tokens, uint64_t in, uint64_t out)
{
    const char *e = getenv("BITNET_OCL_MATMUL");
    if (e && strcmp(e, "own") == 0) return 1;
    if (e && strcmp(e, "clblast") == 0) return 0;
    const bn_ocl_caps *c = bn_ocl_get_caps(o);
    return c->is_nvidia && c->is_gpu && (tokens == 1 || out * in <= OWN_MAX_WEIGHTS);
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

/* One token through mm_gemv: GV_ROWS rows per work-group of up to 256 items
 * (GV_MAXLX in the kernel). */
#define GV_ROWS 4
#define GV_STR_(x) #x
#define GV_STR(x) GV_STR_(x)
static bitnet_status gemv(bn_ocl *o, cl_mem bx, uint64_t in, cl_mem bw, uint64_t out, cl_mem bb, int has_bias,
                          bitnet_act act, cl_mem by)
{
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "matmul", "mm_gemv", "-DGV_ROWS=" GV_STR(GV_ROWS), &k);
    if (st) return st;
    const cl_int hb = has_bias, a = (cl_int)act;
    const cl_ulong ci = in, co = out;
    const cl_long perturb = bn_test_perturb("matmul_f32") ? 0 : -1;
    if ((st = bn_ocl_args(o, k, 9, sizeof bx, &bx, sizeof bw, &bw, sizeof bb, &bb, sizeof hb, &hb, sizeof a, &a,
                          sizeof by, &by, sizeof ci, &ci, sizeof co, &co, sizeof perturb, &perturb)))
        return st;
    size_t lx = 1, max = bn_ocl_kernel_wg(o, k);
    while (lx * 2 <= 256 && lx * 2 <= max) lx *= 2;
    const size_t global = (size_t)((out + GV_ROWS - 1) / GV_ROWS) * lx;
    return bn_ocl_run(o, k, 1, &global, &lx, "matmul_f32");
}

bitnet_status bn_ocl_matmul_f32(void *ctx, const float *x, uint64_t tokens, uint64_t in, const float *w, uint64_t out,
                                const float *bias, bitnet_act act, float *y)
{
    bn_ocl *o = ctx;
    cl_kernel k;
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
    if (!own_kernel(o, tokens, in, out)) {
        /* CLBlast computes beta * y even for beta = 0: a pooled y may hold NaN */
        if (!(st = bn_ocl_fill0(o, by, yb))) st = matmul_blas(o, bx, tokens, in, bw, out, bb, bias != NULL, act, by);
        goto out;
    }
    if (tokens == 1) {
        st = gemv(o, bx, in, bw, out, bb, bias != NULL, act, by);
        goto out;
    }
    if ((st = bn_ocl_kernel(o, "matmul", "mm_f32", "-DMM_TS=32 -DMM_WPT=4", &k))) goto out;
    const cl_int has_bias = bias != NULL, a = (cl_int)act;
    const cl_ulong ct = tokens, ci = in, co = out;
    const cl_long perturb = bn_test_perturb("matmul_f32") ? 0 : -1;
    if ((st = bn_ocl_args(o, k, 10, sizeof bx, &bx, sizeof bw, &bw, sizeof bb, &bb, sizeof has_bias, &has_bias,
                          sizeof a, &a, sizeof by, &by, sizeof ct, &ct, sizeof ci, &ci, sizeof co, &co, sizeof perturb,
                          &perturb)))
        goto out;
    const size_t local[2] = {MM_TS, MM_TS / MM_WPT};
    const size_t global[2] = {((size_t)out + MM_TS - 1) / MM_TS * MM_TS,
                              ((size_t)tokens + MM_TS - 1) / MM_TS * (MM_TS / MM_WPT)};
    st = bn_ocl_run(o, k, 2, global, local, "matmul_f32");
out:
    st = bn_ocl_done(o, &ay, st);
    st = bn_ocl_done(o, &ax, st);
    st = bn_ocl_done(o, &aw, st);
    return bn_ocl_done(o, &ab, st);
}
