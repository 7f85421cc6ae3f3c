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
    size_t piece = piece_elems(o), first = 0;
    if (bn_u64_to_size(n, &first)) return bn_fail(BITNET_E_OVERFLOW, "scale: n does not fit size_t");
    if (first > piece) first = piece;
    cl_mem bx = NULL, by = NULL;
    st = bn_ocl_alloc(o, first * sizeof(float), &bx);
    if (st == BITNET_OK) st = bn_ocl_alloc(o, first * sizeof(float), &by);
    cl_long perturb_at = bn_test_perturb("scale") ? (cl_long)(n / 2) : -1;
    size_t wg = bn_ocl_kernel_wg(o, k);
    if (wg > 256) wg = 256;
    for (uint64_t at = 0; st == BITNET_OK && at < n; at += piece) {
        size_t m = (size_t)(n - at < piece ? n - at : piece);
        cl_ulong cm = m;
        cl_long pa = perturb_at >= (cl_long)at && perturb_at < (cl_long)(at + m) ? perturb_at - (cl_long)at : -1;
        size_t items = (m + SCALE_PER_ITEM - 1) / SCALE_PER_ITEM;
        size_t global = (items + wg - 1) / wg * wg;
        st = bn_ocl_upload(o, bx, 0, x + at, m * sizeof(float));
        if (st == BITNET_OK)
            st = bn_ocl_args(o, k, 5, sizeof bx, &bx, sizeof by, &by, sizeof alpha, &alpha, sizeof cm, &cm,
                             sizeof pa, &pa);
        if (st == BITNET_OK) st = bn_ocl_run(o, k, 1, &global, &wg, "scale");
        if (st == BITNET_OK) st = bn_ocl_download(o, by, 0, y + at, m * sizeof(float));
    }
    bn_ocl_release(o, bx);
    bn_ocl_release(o, by);
    return st;
}

static void ocl_free(void *ctx) { bn_ocl_free(ctx); }

const bn_backend_ops bn_ocl_ops = {
    .name = "opencl",
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
    .cholesky = bn_ocl_cholesky, .cholesky_solve = bn_ocl_cholesky_solve,
    /* more ops above */
};
