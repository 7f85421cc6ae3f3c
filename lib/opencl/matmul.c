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
    bn_ocl_arg ax = {0}, aw = {0}, ab = {0}, ay = {0};
    cl_mem bx = NULL, bw = NULL, bb = NULL, by = NULL;
    if ((st = bn_ocl_in(o, x, xb, &ax)) || (st = bn_ocl_in(o, w, wb, &aw)) ||
        (st = bn_ocl_in(o, bias, bias ? (size_t)out * 4 : 0, &ab)) || (st = bn_ocl_out(o, y, yb, &ay)))
        goto out;
    bx = ax.m;
    bw = aw.m;
    bb = ab.m;
    by = ay.m;
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
