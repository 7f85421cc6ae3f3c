/*
 * backend_ocl.c - the OpenCL op table and the host code of the plumbing op
 * (scale, kernels/scale.cl).  Each family's host code lives in its own
 * lib/opencl/<family>.c; this file is the pattern they follow: fetch the
 * kernel, take pooled buffers, upload, set arguments, run, download, release.
 */
#include "ocl_impl.h"
#include "../linalg.h"

/* Largest piece sent at once, so that any n fits CL_DEVICE_MAX_MEM_ALLOC_SIZE. */
static size_t piece_elems(const bn_ocl *o)
{
    cl_ulong max = o->caps.max_alloc ? o->caps.max_alloc : (128u << 20);
    if (max > (256u << 20)) max = 256u << 20;
    return (size_t)(max / sizeof(float));
}

#define SCALE_PER_ITEM 4

bitnet_status bn_ocl_scale(void *ctx, const float *x, uint64_t n, float alpha, float *y)
{
    bn_ocl *o = ctx;
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "scale", "scale", "-DSCALE_PER_ITEM=4", &k);
    if (st != BITNET_OK) return st;
    const size_t piece = piece_elems(o);
    cl_long perturb_at = bn_test_perturb("scale") ? (cl_long)(n / 2) : -1;
    size_t wg = bn_ocl_kernel_wg(o, k);
    if (wg > 256) wg = 256;
    for (uint64_t at = 0; st == BITNET_OK && at < n; at += piece) {
        size_t m = (size_t)(n - at < piece ? n - at : piece);
        cl_ulong cm = m;
        cl_long pa = perturb_at >= (cl_long)at && perturb_at < (cl_long)(at + m) ? perturb_at - (cl_long)at : -1;
        size_t items = (m + SCALE_PER_ITEM - 1) / SCALE_PER_ITEM;
        size_t global = (items + wg - 1) / wg * wg;
        bn_ocl_arg ax = {0}, ay = {0};
        if ((st = bn_ocl_in(o, x + at, m * sizeof(float), &ax)) == BITNET_OK &&
            (st = bn_ocl_out(o, y + at, m * sizeof(float), &ay)) == BITNET_OK &&
            (st = bn_ocl_args(o, k, 5, sizeof ax.m, &ax.m, sizeof ay.m, &ay.m, sizeof alpha, &alpha, sizeof cm, &cm,
                              sizeof pa, &pa)) == BITNET_OK)
            st = bn_ocl_run(o, k, 1, &global, &wg, "scale");
        st = bn_ocl_done(o, &ay, st);
        st = bn_ocl_done(o, &ax, st);
    }
    return st;
}

static void ocl_free(void *ctx) { bn_ocl_free(ctx); }

const bn_backend_ops bn_ocl_ops = {
    .name = "opencl",
    .op_begin = bn_ocl_op_begin,
    .scale = bn_ocl_scale,
    .free = ocl_free,
    .bitlinear = bn_ocl_bitlinear,
    .matmul_f32 = bn_ocl_matmul_f32,
    .quantize_weights = bn_ocl_quantize_weights, .quantize_acts = bn_ocl_quantize_acts, .dequantize_weights = bn_ocl_dequantize_weights, .dequantize_acts = bn_ocl_dequantize_acts,
    .binary = bn_ocl_binary,
    .unary = bn_ocl_unary,
    .softmax = bn_ocl_softmax,
    .reduce = bn_ocl_reduce,
    .layernorm = bn_ocl_layernorm,
    .permute = bn_ocl_permute,
    .keep = bn_ocl_keep, .forget = bn_ocl_forget,
    .buffer_alloc = bn_ocl_buffer_alloc, .buffer_free = bn_ocl_buffer_free, .buffer_write = bn_ocl_buffer_write,
    .buffer_read = bn_ocl_buffer_read, .sync = bn_ocl_sync,
    .cholesky = bn_ocl_cholesky, .cholesky_solve = bn_ocl_cholesky_solve, .qr = bn_ocl_qr,
    .svd = bn_ocl_svd, .lstsq = bn_ocl_lstsq,
    /* more ops above */
};
