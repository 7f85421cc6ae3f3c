/*
 * tensor_ops.h - helpers shared by the OpenCL host code of the tensor-op
 * families (eltwise.c softmax.c reduce.c norm.c permute.c): checked buffer
 * sizes, upload-on-allocate, work-group sizes, build options.
 */
#ifndef BITNET_OCL_TENSOR_OPS_H
#define BITNET_OCL_TENSOR_OPS_H

#include "ocl.h"
#include "../op_tensor.h"

/* A device buffer of `bytes` (at least 4), refused above the device's
 * largest allocation (auto then falls back to the CPU). */
static inline bitnet_status bn_tops_alloc(bn_ocl *o, uint64_t bytes, cl_mem *m)
{
    const bn_ocl_caps *c = bn_ocl_get_caps(o);
    *m = NULL;
    if (bytes < 4) bytes = 4;
    if ((c->max_alloc && bytes > c->max_alloc) || bytes > SIZE_MAX)
        return bn_fail(BITNET_E_DEVICE_MEMORY, "opencl: a buffer of %llu bytes exceeds the largest allocation (%llu) of %s",
                       (unsigned long long)bytes, (unsigned long long)c->max_alloc, c->name);
    return bn_ocl_alloc(o, (size_t)bytes, m);
}

/* Allocates and fills a buffer with bytes from host memory. */
static inline bitnet_status bn_tops_put(bn_ocl *o, const void *src, uint64_t bytes, cl_mem *m)
{
    bitnet_status st = bn_tops_alloc(o, bytes, m);
    if (st == BITNET_OK && bytes) st = bn_ocl_upload(o, *m, 0, src, (size_t)bytes);
    return st;
}

/* The largest power of two <= want that the kernel accepts. */
static inline size_t bn_tops_wg(bn_ocl *o, cl_kernel k, size_t want)
{
    size_t max = bn_ocl_kernel_wg(o, k), w = 1;
    while (w * 2 <= want && w * 2 <= max) w *= 2;
    return w;
}

static inline size_t bn_tops_round(uint64_t n, size_t wg) { return (size_t)((n + wg - 1) / wg * wg); }

/* Build options of a family: the elements per work-item (contiguous blocks
 * on CPU drivers, small ones on GPUs) and correctly rounded / and sqrt. */
static inline const char *bn_tops_options(bn_ocl *o)
{
    return bn_ocl_get_caps(o)->is_gpu ? "-cl-fp32-correctly-rounded-divide-sqrt -DEW_BLOCK=4 -DBN_GPU=1"
                                      : "-cl-fp32-correctly-rounded-divide-sqrt -DEW_BLOCK=64 -DBN_GPU=0";
}

/* Build options of kernels/linalg.cl for an element type. */
static inline const char *bn_tops_la_options(bn_ocl *o, int f64)
{
    const int gpu = bn_ocl_get_caps(o)->is_gpu;
    return f64 ? (gpu ? "-DLA_F64=1 -DBN_GPU=1" : "-DLA_F64=1 -DBN_GPU=0")
               : (gpu ? "-cl-fp32-correctly-rounded-divide-sqrt -DLA_F64=0 -DBN_GPU=1"
                      : "-cl-fp32-correctly-rounded-divide-sqrt -DLA_F64=0 -DBN_GPU=0");
}

static inline cl_ulong8 bn_tops_u8(const uint64_t *v, uint32_t n)
{
    cl_ulong8 r;
    for (int i = 0; i < 8; i++) r.s[i] = i < (int)n ? v[i] : 1;
    return r;
}

/* Permutes device buffer x into y (lib/opencl/permute.c); perturb: the
 * output index to corrupt, or -1. */
bitnet_status bn_ocl_permute_buf(bn_ocl *o, cl_mem x, const bitnet_shape *s, const uint32_t *perm, cl_mem y,
                                 int64_t perturb);

#endif
