/*
 * softmax.c - OpenCL host code of softmax/log-softmax (kernels/softmax.cl):
 * a work-group per row for long contiguous rows, a work-item per slice
 * otherwise.
 */
#include "tensor_ops.h"

#define SM_WG 256

bitnet_status bn_ocl_softmax(void *ctx, const float *x, uint64_t outer, uint64_t len, uint64_t inner, int log_,
                             float *y)
{
    bn_ocl *o = ctx;
    const uint64_t n = outer * len * inner;
    if (n == 0) return BITNET_OK;
    const int rows = inner == 1 && len >= 256;
    char opts[256];
    snprintf(opts, sizeof opts, "%s -DSM_WG=%d", bn_tops_options(o), SM_WG);
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "softmax", rows ? "softmax_rows" : "softmax_cols", opts, &k);
    if (st) return st;
    if (rows && bn_ocl_kernel_wg(o, k) < SM_WG)
        return bn_fail(BITNET_E_DEVICE, "softmax: the device takes work-groups of %zu < %d", bn_ocl_kernel_wg(o, k), SM_WG);
    bn_ocl_arg ax = {0}, ay = {0};
    if (!(st = bn_ocl_in(o, x, n * sizeof(float), &ax))) st = bn_ocl_out(o, y, n * sizeof(float), &ay);
    cl_mem bx = ax.m, by = ay.m;
    cl_ulong co = outer, cl = len, ci = inner;
    cl_int lg = log_ != 0;
    cl_long perturb = bn_test_perturb("softmax") ? (cl_long)(n / 2) : -1;
    size_t wg, global;
    if (rows) {
        wg = SM_WG;
        global = (size_t)outer * SM_WG;
        if (!st)
            st = bn_ocl_args(o, k, 5, sizeof bx, &bx, sizeof by, &by, sizeof cl, &cl, sizeof lg, &lg, sizeof perturb,
                             &perturb);
    } else {
        wg = bn_tops_wg(o, k, 64);
        global = bn_tops_round(outer * inner, wg);
        if (!st)
            st = bn_ocl_args(o, k, 7, sizeof bx, &bx, sizeof by, &by, sizeof co, &co, sizeof cl, &cl, sizeof ci, &ci,
                             sizeof lg, &lg, sizeof perturb, &perturb);
    }
    if (!st) st = bn_ocl_run(o, k, 1, &global, &wg, log_ ? "log_softmax" : "softmax");
    st = bn_ocl_done(o, &ay, st);
    return bn_ocl_done(o, &ax, st);
}
