/*
 * norm.c - OpenCL host code of LayerNorm/RMSNorm (kernels/norm.cl): one
 * work-group per row.
 */
#include "tensor_ops.h"

#define NM_WG 256

bitnet_status bn_ocl_layernorm(void *ctx, const float *x, uint64_t rows, uint64_t cols, const float *weight,
                               const float *bias, float eps, int rms, float *y)
{
    bn_ocl *o = ctx;
    const uint64_t n = rows * cols;
    if (n == 0) return BITNET_OK;
    char opts[256];
    snprintf(opts, sizeof opts, "%s -DNM_WG=%d", bn_tops_options(o), NM_WG);
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "norm", "norm_rows", opts, &k);
    if (st) return st;
    if (bn_ocl_kernel_wg(o, k) < NM_WG)
        return bn_fail(BITNET_E_DEVICE, "norm: the device takes work-groups of %zu < %d", bn_ocl_kernel_wg(o, k), NM_WG);
    if (rms) bias = NULL;
    bn_ocl_arg ax = {0}, aw = {0}, ab = {0}, ay = {0};
    if (!(st = bn_ocl_in(o, x, n * sizeof(float), &ax)) &&
        !(st = bn_ocl_in(o, weight, weight ? cols * sizeof(float) : 0, &aw)) &&
        !(st = bn_ocl_in(o, bias, bias ? cols * sizeof(float) : 0, &ab)))
        st = bn_ocl_out(o, y, n * sizeof(float), &ay);
    cl_mem bx = ax.m, bw = aw.m, bb = ab.m, by = ay.m;
    cl_ulong cc = cols;
    cl_int crms = rms != 0, hw = weight != NULL, hb = bias != NULL;
    cl_long perturb = bn_test_perturb("layernorm") ? (cl_long)(n / 2) : -1;
    size_t wg = NM_WG, global = (size_t)rows * NM_WG;
    if (!st)
        st = bn_ocl_args(o, k, 10, sizeof bx, &bx, sizeof bw, &bw, sizeof bb, &bb, sizeof by, &by, sizeof cc, &cc,
                         sizeof eps, &eps, sizeof crms, &crms, sizeof hw, &hw, sizeof hb, &hb, sizeof perturb, &perturb);
    if (!st) st = bn_ocl_run(o, k, 1, &global, &wg, rms ? "rmsnorm" : "layernorm");
    st = bn_ocl_done(o, &ay, st);
    st = bn_ocl_done(o, &ax, st);
    st = bn_ocl_done(o, &aw, st);
    return bn_ocl_done(o, &ab, st);
}
