/*
 * ocl.h - the OpenCL backend's runtime (internal), used by the host code of
 * every kernel family (lib/opencl/<family>.c, kernels/<family>.cl).
 */
#ifndef BITNET_OCL_H
#define BITNET_OCL_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "../backend.h"

typedef struct bn_ocl bn_ocl; /* one device: context, queue, programs, buffer pool */

typedef struct {
    char name[256], vendor[256], driver[128], platform_version[256], c_version[128];
    int is_gpu, is_nvidia, has_fp64, unified_memory;
    cl_uint compute_units, clock_mhz;
    cl_ulong global_mem, local_mem, max_alloc;
    size_t max_wg;
} bn_ocl_caps;

const bn_ocl_caps *bn_ocl_get_caps(const bn_ocl *o);

/* Kernel `name` from kernels/common.cl + kernels/<family>.cl, built with
 * `options` (e.g. "-DWG=256"); programs are built once per (family, options)
 * and cached on disk.  The returned kernel belongs to o (do not release). */
bitnet_status bn_ocl_kernel(bn_ocl *o, const char *family, const char *name, const char *options, cl_kernel *k);

/* Pooled device buffers (reused by size class; statistics kept). */
bitnet_status bn_ocl_alloc(bn_ocl *o, size_t bytes, cl_mem *m);
void bn_ocl_release(bn_ocl *o, cl_mem m);
/* Blocking transfers, timed. */
bitnet_status bn_ocl_upload(bn_ocl *o, cl_mem m, size_t offset, const void *src, size_t bytes);
bitnet_status bn_ocl_download(bn_ocl *o, cl_mem m, size_t offset, void *dst, size_t bytes);
/* Enqueues k (global/local may be NULL for local) with profiling; the kernel
 * time is added to the stats of `op` when the queue is finished. */
bitnet_status bn_ocl_run(bn_ocl *o, cl_kernel k, cl_uint dims, const size_t *global, const size_t *local, const char *op);
bitnet_status bn_ocl_finish(bn_ocl *o);
/* clSetKernelArg for each (size, pointer) pair: bn_ocl_args(o, k, n, sz0, p0, sz1, p1, ...). */
bitnet_status bn_ocl_args(bn_ocl *o, cl_kernel k, int n, ...);

const char *bn_cl_errname(cl_int err);
/* Turns a failed cl* status into a library status with call, file and line. */
bitnet_status bn_cl_fail(cl_int err, const char *call, const char *file, int line);
#define BN_CL(call)                                                           \
    do {                                                                      \
        cl_int e_ = (call);                                                   \
        if (e_ != CL_SUCCESS) return bn_cl_fail(e_, #call, __FILE__, __LINE__); \
    } while (0)

/* The OpenCL table (slots set by the families implemented so far). */
extern const bn_backend_ops bn_ocl_ops;
/* index < 0: first GPU, else first device. */
bitnet_status bn_ocl_create(bn_ocl **o, int index, bitnet_backend *be);

/* Host code of each family (NULL-able in the table until written). */
bitnet_status bn_ocl_quantize_weights(void *ctx, const float *w, uint64_t rows, uint64_t cols,
                                      bitnet_scale_kind kind, uint32_t group, uint8_t *out_t2, float *d);
bitnet_status bn_ocl_quantize_acts(void *ctx, const float *x, uint64_t rows, uint64_t cols, int8_t *q, float *s);
bitnet_status bn_ocl_dequantize_weights(void *ctx, const uint8_t *t2, uint64_t rows, uint64_t cols,
                                        bitnet_scale_kind kind, uint32_t group, const float *d, float *w);
bitnet_status bn_ocl_dequantize_acts(void *ctx, const int8_t *q, uint64_t rows, uint64_t cols, const float *s, float *x);
bitnet_status bn_ocl_bitlinear(void *ctx, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io);
bitnet_status bn_ocl_matmul_f32(void *ctx, const float *x, uint64_t tokens, uint64_t in, const float *w,
                                uint64_t out, const float *bias, bitnet_act act, float *y);
bitnet_status bn_ocl_binary(void *ctx, bitnet_binary_op op, const float *a, const bitnet_shape *sa,
                            const float *b, const bitnet_shape *sb, float *y, const bitnet_shape *sy);
bitnet_status bn_ocl_unary(void *ctx, bitnet_unary_op op, const float *x, uint64_t n, float param, float *y);
bitnet_status bn_ocl_softmax(void *ctx, const float *x, uint64_t outer, uint64_t len, uint64_t inner, int log, float *y);
bitnet_status bn_ocl_reduce(void *ctx, bitnet_reduce_op op, const float *x, const bitnet_shape *s,
                            uint32_t axes_mask, float *y, int64_t *idx);
bitnet_status bn_ocl_layernorm(void *ctx, const float *x, uint64_t rows, uint64_t cols, const float *weight,
                               const float *bias, float eps, int rms, float *y);
bitnet_status bn_ocl_permute(void *ctx, const float *x, const bitnet_shape *s, const uint32_t *perm, float *y);
bitnet_status bn_ocl_scale(void *ctx, const float *x, uint64_t n, float alpha, float *y);

#endif
