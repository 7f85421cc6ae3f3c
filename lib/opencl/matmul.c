/*
 * matmul.c (OpenCL) - host code of the float product y = x w^T (+bias, act):
 * the product through CLBlast (Sgemv for one token, Sgemm otherwise) on the
 * same device buffers, then the epilogue (bias, activation) as one kernel of
 * kernels/matmul.cl with the definition of bitnet_matmul_f32_ref: the sum is
 * rounded to float, then bias is added, then the activation applied.
 *
 * The project's own tiled kernel (mm_f32) stays for one case, where it was
 * faster in the same run (bitnet-bench --op matmul_f32 --keep-weights, H100,
 * NVIDIA OpenCL 580.159.04, CLBlast 1.5.3 with its default parameters; kernel
 * medians, CLBlast / own):
 *     4096 x 4096,   1 token   130.9 us /  188.1 us   CLBlast
 *     4096 x 4096,  64 tokens  275.7 us /  232.7 us   own kernel
 *    16384 x 16384,  1 token   552.7 us / 1759 us     CLBlast
 *    16384 x 16384, 64 tokens  2.260 ms / 3.359 ms    CLBlast
 * and on PoCL (CPU, 1024 x 1024) CLBlast won at 1 and 64 tokens (2.2 / 24.9 ms
 * and 25.9 / 51.0 ms).  So: the own kernel for several tokens on an NVIDIA GPU
 * when out x in is at most 4096 x 4096, CLBlast everywhere else.
 * BITNET_OCL_MATMUL=own or =clblast forces one (for measurements).
 *
 * "own" at one token is mm_gemv, a matrix-vector kernel that streams each
 * weight row once in float4s (4 rows per work-group in flight), written to
 * take the one-token case from CLBlast's Sgemv (552.7 us at 16384 x 16384
 * above, where cuBLAS took 372.5 us).  It has not run on a GPU yet:
 * tests/device/linalg.sh compares it there.  On PoCL (this 2-core VM,
 * kernel medians, CLBlast / mm_gemv) CLBlast wins: 1024 x 1024 0.34 / 0.56
 * to 0.62 ms, 4096 x 4096 4.65-4.80 / 5.03-5.09 ms.
 */
#include "../cpu/bitlinear.h"
#include "blas.h"

#include <stdlib.h>
#include <string.h>

#define MM_TS 32
#define MM_WPT 4

static int own_kernel(const bn_ocl *o, uint64_t tokens, uint64_t in, uint64_t out)
{
    const char *e = getenv("BITNET_OCL_MATMUL");
    if (e && strcmp(e, "own") == 0) return 1;
    if (e && strcmp(e, "clblast") == 0) return 0;
    return tokens > 1 && bn_ocl_get_caps(o)->is_nvidia && bn_ocl_get_caps(o)->is_gpu && out * in <= 4096ull * 4096ull;
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
