/*
 * eltwise.c - OpenCL host code of the element-wise ops (kernels/eltwise.cl):
 * binary with broadcasting (a flat float4 kernel when both sides are whole
 * or scalar, a strided one otherwise) and unary.
 */
#include "tensor_ops.h"

/* Work sizes of both kernels over n elements: each work-item handles
 * EW_BLOCK of them (4 on GPUs, 64 on CPU drivers, as bn_tops_options says). */
static void ew_sizes(bn_ocl *o, cl_kernel k, uint64_t n, size_t *wg, size_t *global)
{
    const size_t block = bn_ocl_get_caps(o)->is_gpu ? 4 : 64;
    *wg = bn_tops_wg(o, k, 256);
    *global = bn_tops_round((n + block - 1) / block, *wg);
}

bitnet_status bn_ocl_binary(void *ctx, bitnet_binary_op op, const float *a, const bitnet_shape *sa,
                            const float *b, const bitnet_shape *sb, float *y, const bitnet_shape *sy)
{
    bn_ocl *o = ctx;
    uint64_t n = 1, na = 1, nb = 1;
    for (uint32_t i = 0; i < sy->rank; i++) n *= sy->dims[i];
    for (uint32_t i = 0; i < sa->rank; i++) na *= sa->dims[i];
    for (uint32_t i = 0; i < sb->rank; i++) nb *= sb->dims[i];
    if (n == 0) return BITNET_OK;
    bn_bcast p;
    bn_bcast_plan(sa, sb, sy, &p);
    int flat = p.rank == 1 && p.sa[0] <= 1 && p.sb[0] <= 1;
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "eltwise", flat ? "binary_flat" : "binary_bcast", bn_tops_options(o), &k);
    if (st) return st;
    bn_ocl_arg aa = {0}, ab = {0}, ay = {0};
    if (!(st = bn_ocl_in(o, a, na * sizeof(float), &aa)) && !(st = bn_ocl_in(o, b, nb * sizeof(float), &ab)))
        st = bn_ocl_out(o, y, n * sizeof(float), &ay);
    cl_mem ba = aa.m, bb = ab.m, by = ay.m;
    cl_ulong cn = n;
    cl_int cop = (cl_int)op;
    cl_long perturb = bn_test_perturb("binary") ? (cl_long)(n / 2) : -1;
    size_t wg, global;
    ew_sizes(o, k, n, &wg, &global);
    if (!st && flat) {
        cl_int csa = (cl_int)p.sa[0], csb = (cl_int)p.sb[0];
        st = bn_ocl_args(o, k, 8, sizeof ba, &ba, sizeof bb, &bb, sizeof by, &by, sizeof cn, &cn, sizeof cop, &cop,
                         sizeof csa, &csa, sizeof csb, &csb, sizeof perturb, &perturb);
    } else if (!st) {
        cl_uint rank = p.rank;
        cl_ulong8 d = bn_tops_u8(p.dims, p.rank), s1 = bn_tops_u8(p.sa, p.rank), s2 = bn_tops_u8(p.sb, p.rank);
        st = bn_ocl_args(o, k, 10, sizeof ba, &ba, sizeof bb, &bb, sizeof by, &by, sizeof cn, &cn, sizeof cop, &cop,
                         sizeof rank, &rank, sizeof d, &d, sizeof s1, &s1, sizeof s2, &s2, sizeof perturb, &perturb);
    }
    if (!st) st = bn_ocl_run(o, k, 1, &global, &wg, "binary");
    st = bn_ocl_done(o, &ay, st);
    st = bn_ocl_done(o, &aa, st);
    return bn_ocl_done(o, &ab, st);
}

bitnet_status bn_ocl_unary(void *ctx, bitnet_unary_op op, const float *x, uint64_t n, float param, float *y)
{
    bn_ocl *o = ctx;
    if (n == 0) return BITNET_OK;
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "eltwise", "unary", bn_tops_options(o), &k);
    if (st) return st;
    bn_ocl_arg ax = {0}, ay = {0};
    if (!(st = bn_ocl_in(o, x, n * sizeof(float), &ax))) st = bn_ocl_out(o, y, n * sizeof(float), &ay);
    cl_mem bx = ax.m, by = ay.m;
    cl_ulong cn = n;
    cl_int cop = (cl_int)op;
    cl_long perturb = bn_test_perturb("unary") ? (cl_long)(n / 2) : -1;
    size_t wg, global;
    ew_sizes(o, k, n, &wg, &global);
    if (!st)
        st = bn_ocl_args(o, k, 6, sizeof bx, &bx, sizeof by, &by, sizeof cn, &cn, sizeof cop, &cop, sizeof param,
                         &param, sizeof perturb, &perturb);
    if (!st) st = bn_ocl_run(o, k, 1, &global, &wg, "unary");
    st = bn_ocl_done(o, &ay, st);
    return bn_ocl_done(o, &ax, st);
}
