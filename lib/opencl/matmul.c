/*
 * matmul.c (OpenCL) - host code of the float product y = x w^T (+bias, act)
 * (kernels/matmul.cl, tiled through local memory).
 */
#include "../cpu/bitlinear.h"
#include "ocl.h"

#define MM_TS 32
#define MM_WPT 4

bitnet_status bn_ocl_matmul_f32(void *ctx, const float *x, uint64_t tokens, uint64_t in, const float *w, uint64_t out,
                                const float *bias, bitnet_act act, float *y)
{
    bn_ocl *o = ctx;
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "matmul", "mm_f32", "-DMM_TS=32 -DMM_WPT=4", &k);
    if (st) return st;
    /* sizes were checked by bn_matmul_check (each below 2^31 elements) */
    const size_t xb = (size_t)(tokens * in) * 4, wb = (size_t)(out * in) * 4, yb = (size_t)(tokens * out) * 4;
    cl_mem bx = NULL, bw = NULL, bb = NULL, by = NULL;
    int wkept = 0, bkept = 0;
    if ((st = bn_ocl_alloc(o, xb, &bx)) || (st = bn_ocl_weight(o, w, wb, &bw, &wkept)) ||
        (st = bias ? bn_ocl_weight(o, bias, (size_t)out * 4, &bb, &bkept) : bn_ocl_alloc(o, 4, &bb)) ||
        (st = bn_ocl_alloc(o, yb, &by)))
        goto out;
    if ((st = bn_ocl_upload(o, bx, 0, x, xb))) goto out;
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
    if ((st = bn_ocl_run(o, k, 2, global, local, "matmul_f32"))) goto out;
    st = bn_ocl_download(o, by, 0, y, yb);
out:
    bn_ocl_release(o, bx);
    if (!wkept) bn_ocl_release(o, bw);
    if (!bkept) bn_ocl_release(o, bb);
    bn_ocl_release(o, by);
    return st;
}
