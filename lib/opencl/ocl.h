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
    size_t base_align; /* CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes: sub-buffer offsets */
} bn_ocl_caps;

const bn_ocl_caps *bn_ocl_get_caps(const bn_ocl *o);

/* Kernel `name` from kernels/common.cl + kernels/<family>.cl, built with
 * `options` (e.g. "-DWG=256"); programs are built once per (family, options)
 * and cached on disk.  The returned kernel belongs to o (do not release). */
bitnet_status bn_ocl_kernel(bn_ocl *o, const char *family, const char *name, const char *options, cl_kernel *k);

/* Pooled device buffers (reused by size class; statistics kept). */
bitnet_status bn_ocl_alloc(bn_ocl *o, size_t bytes, cl_mem *m);
void bn_ocl_release(bn_ocl *o, cl_mem m);
/* Device-resident weights (lib/opencl/keep.c): bitnet_backend_keep/forget. */
bitnet_status bn_ocl_keep(void *ctx, const void *host, size_t bytes);
void bn_ocl_forget(void *ctx, const void *host);
uint64_t bn_ocl_kept_bytes(const bn_ocl *o);
/* Transfers through pinned staging memory (staging.c).  upload copies src
 * and returns (src may be reused at once; the copy up is ordered before
 * later commands); download waits for the queue, then fills dst. */
bitnet_status bn_ocl_upload(bn_ocl *o, cl_mem m, size_t offset, const void *src, size_t bytes);
bitnet_status bn_ocl_download(bn_ocl *o, cl_mem m, size_t offset, void *dst, size_t bytes);
/* An upload whose bytes the host writes straight into staging memory:
 * fill(o, ctx, dst, at, n) writes bytes [at, at + n) at dst, in order of at.
 * With unit 1 (bn_ocl_upload's copy) in about four pieces; with a larger
 * unit in one piece up to 8 MiB, else in pieces of at most 8 MiB, each (but
 * the last) a whole number of `unit` bytes.  A failure of fill stops the
 * upload (pieces before it may be enqueued) and is returned. */
typedef bitnet_status (*bn_ocl_fill_fn)(bn_ocl *o, void *ctx, void *dst, size_t at, size_t n);
bitnet_status bn_ocl_upload_fill(bn_ocl *o, cl_mem m, size_t offset, size_t bytes, size_t unit, bn_ocl_fill_fn fill,
                                 void *ctx);
/* Staging memory of `bytes` (at most BN_OCL_STAGE_MAX) held at *host for
 * the caller to fill in its own time (on other threads too), then uploaded
 * by bn_ocl_staged_write_side (after which it is the staging's again), or
 * given back unused by bn_ocl_staged_release.  bn_ocl_staged_write_side
 * enqueues that upload of `bytes` into m on the queue of uploads beside the
 * ops (after the event `after` where not NULL) and makes the ops' queue wait
 * for it; bn_ocl_read_staged_side reads the first `bytes` of m into staging
 * memory on the queue of downloads, after every op enqueued so far (as
 * bn_ocl_read_staged otherwise).  For a call whose buffers are its own
 * while it runs (staging.c says more); bn_ocl_drain waits for both queues. */
#define BN_OCL_STAGE_MAX ((size_t)8 << 20)
bitnet_status bn_ocl_stage_hold(bn_ocl *o, size_t bytes, void **host);
bitnet_status bn_ocl_staged_write_side(bn_ocl *o, void *host, cl_mem m, size_t bytes, cl_event after);
bitnet_status bn_ocl_read_staged_side(bn_ocl *o, cl_mem m, size_t bytes, const void **host);
void bn_ocl_side_free(bn_ocl *o);
/* The threads of the staging copies, for a fill to share (NULL: none). */
struct bn_pool *bn_ocl_host_pool(bn_ocl *o);
/* One download of dst_bytes + tail_bytes: the first part into dst, the rest into tail. */
bitnet_status bn_ocl_download_tail(bn_ocl *o, cl_mem m, size_t offset, void *dst, size_t dst_bytes, void *tail,
                                   size_t tail_bytes);
/* Enqueues reads of the first bytes[i] of each m[i] (n buffers, in all at
 * most 8 MiB) one after the other into one pinned staging buffer and sets
 * *host to it: valid once the queue has passed the reads (a later wait),
 * and kept for the caller until bn_ocl_staged_release(o, *host).  A read into
 * ordinary host memory cost NVIDIA's driver a round trip of its own (45 us
 * on an H100). */
bitnet_status bn_ocl_read_staged(bn_ocl *o, size_t n, const cl_mem *m, const size_t *bytes, const void **host);
void bn_ocl_staged_release(bn_ocl *o, const void *host);
/* Waits for the reads into the staging memory at host (a read_staged
 * result); bytes are counted in the statistics as downloaded. */
bitnet_status bn_ocl_staged_wait(bn_ocl *o, const void *host, size_t bytes);
/* Collects the profiling times of finished kernels into the op stats
 * (the queue must be finished, as after waiting for its last command). */
void bn_ocl_collect(bn_ocl *o);
/* Waits for the queue after a failure, keeping the failure's detail. */
void bn_ocl_drain(bn_ocl *o);

/* ---- operands (operand.c) ----
 * An op's pointer operand as a cl_mem: a device address (a bitnet_buffer of
 * this device, whole, a sub-buffer, or a copy where the offset is not
 * aligned for one), a kept weight, or host memory (uploaded for an input; a
 * pooled buffer downloaded at bn_ocl_done for an output). */
typedef struct {
    cl_mem m;      /* what the kernel takes */
    int kind;
    cl_mem base;   /* a device address: its buffer and offset */
    size_t off;
    void *host;    /* a host output: where it goes */
    size_t bytes;
    int out;
} bn_ocl_arg;
bitnet_status bn_ocl_in(bn_ocl *o, const void *p, size_t bytes, bn_ocl_arg *a);
bitnet_status bn_ocl_out(bn_ocl *o, void *p, size_t bytes, bn_ocl_arg *a);
/* A buffer the caller holds, as an operand that bn_ocl_done leaves alone. */
void bn_ocl_borrow(cl_mem m, size_t bytes, bn_ocl_arg *a);
/* A scratch buffer released by bn_ocl_done, like an operand. */
bitnet_status bn_ocl_scratch(bn_ocl *o, size_t bytes, bn_ocl_arg *a);
/* Zeroes the first bytes (rounded up to 4) of m, in order with the ops. */
bitnet_status bn_ocl_fill0(bn_ocl *o, cl_mem m, size_t bytes);
/* 1 when p is host memory that bn_ocl_in would upload (not a device address, not kept). */
int bn_ocl_is_host(const bn_ocl *o, const void *p, size_t bytes);
/* 1 when the operand is device memory of a bitnet_buffer (an output there is not downloaded). */
int bn_ocl_resident(const bn_ocl_arg *a);
/* 1 when the kernel writes such an operand in place (not through a copy
 * made when the op is finished). */
int bn_ocl_in_place(const bn_ocl_arg *a);
/* Finishes an operand when st is BITNET_OK (an output: copied into its
 * buffer or downloaded to the host) and releases what it took; returns st,
 * or the error of finishing it.  Safe on a zeroed arg. */
bitnet_status bn_ocl_done(bn_ocl *o, bn_ocl_arg *a, bitnet_status st);
/* A failure flag of n uints for an op's kernel: a slot of the status
 * buffer (whose flags one read brings at a wait) where n fits one, else a
 * pooled buffer.  Give it back with bn_ocl_flag_put, or to
 * bn_ocl_defer_check.  A slot is not zeroed. */
bitnet_status bn_ocl_flag_get(bn_ocl *o, size_t n, cl_mem *flag);
/* Gives back a flag of bn_ocl_flag_get (NULL: nothing). */
void bn_ocl_flag_put(bn_ocl *o, cl_mem flag);
/* Takes a failure flag of bn_ocl_flag_get set by an enqueued op; the next wait
 * (bitnet_buffer_read, bitnet_backend_sync) reads it and fails with
 * BITNET_E_NUMERIC and `what` when it is set. */
bitnet_status bn_ocl_defer_check(bn_ocl *o, cl_mem flag, const char *what);
/* The same for n flags (any one set is the error). */
bitnet_status bn_ocl_defer_check_n(bn_ocl *o, cl_mem flag, size_t n, const char *what);
/* The table's device-memory members. */
bitnet_status bn_ocl_buffer_alloc(void *ctx, size_t bytes, void **handle);
void bn_ocl_buffer_free(void *ctx, void *handle);
bitnet_status bn_ocl_buffer_write(void *ctx, void *handle, size_t offset, const void *src, size_t bytes);
bitnet_status bn_ocl_buffer_read(void *ctx, void *handle, size_t offset, void *dst, size_t bytes);
bitnet_status bn_ocl_sync(void *ctx);
/* Enqueues k (global/local may be NULL for local); with profiling on, the
 * kernel time is added to the stats of `op` when the queue is finished. */
bitnet_status bn_ocl_run(bn_ocl *o, cl_kernel k, cl_uint dims, const size_t *global, const size_t *local, const char *op);
bitnet_status bn_ocl_finish(bn_ocl *o);
/* Profiling (off after bn_ocl_create): on, the queue is remade with
 * CL_QUEUE_PROFILING_ENABLE and every command carries an event whose times
 * go to the kernel_time and transfer callbacks.  Switching waits for the
 * queue. */
bitnet_status bn_ocl_set_profiling(bn_ocl *o, int on);
int bn_ocl_profiling(const bn_ocl *o);
/* clSetKernelArg for each (size, pointer) pair: bn_ocl_args(o, k, n, sz0, p0, sz1, p1, ...). */
bitnet_status bn_ocl_args(bn_ocl *o, cl_kernel k, int n, ...);
/* clSetKernelArg of one argument at index. */
bitnet_status bn_ocl_arg_at(bn_ocl *o, cl_kernel k, int index, size_t size, const void *p);

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
bitnet_status bn_ocl_create(bn_ocl **o, int index, const bn_host *host);
void bn_ocl_op_begin(void *ctx, const char *op);
/* Tells the layer above (bn_host). */
void bn_ocl_log(bn_ocl *o, bitnet_log_level level, const char *fmt, ...) BN_PRINTF(3, 4);
void bn_ocl_stat_transfer(bn_ocl *o, int to_device, uint64_t bytes, double ms);

/* Host code of each family (NULL-able in the table until written). */
bitnet_status bn_ocl_quantize_weights(void *ctx, const float *w, uint64_t rows, uint64_t cols,
                                      bitnet_scale_kind kind, uint32_t group, uint8_t *out_t2, float *d);
bitnet_status bn_ocl_quantize_acts(void *ctx, const float *x, uint64_t rows, uint64_t cols, int8_t *q, float *s);
bitnet_status bn_ocl_dequantize_weights(void *ctx, const uint8_t *t2, uint64_t rows, uint64_t cols,
                                        bitnet_scale_kind kind, uint32_t group, const float *d, float *w);
bitnet_status bn_ocl_dequantize_acts(void *ctx, const int8_t *q, uint64_t rows, uint64_t cols, const float *s, float *x);
bitnet_status bn_ocl_bitlinear(void *ctx, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io);
/* BitLinear on tensor cores (lib/opencl/bitlinear_mma.c): whether to take it
 * (NVIDIA or BITNET_MMA_EMULATE, not BITNET_OCL_PORTABLE, tensor/row scales or
 * groups of whole blocks, tokens >= BITNET_MMA_MIN_TOKENS or the group default), and the launch on buffers made by
 * bn_ocl_bitlinear (bsum: int32 per-token sums of the activations; bres:
 * the residual, used when io->residual is set). */
int bn_ocl_mma_wanted(const bn_ocl_caps *caps, const bitnet_ternary_matrix *w, uint64_t tokens);
/* Whether the activations of such a call, where bn_ocl_mma_wanted and the
 * device makes them (bl_one in bitlinear.c: the host's keep the row order),
 * are made in bl_mma_skinny's order (q_code_at with Q_FRAG in
 * kernels/quantize.cl; frag below). */
int bn_ocl_mma_frag(const bitnet_ternary_matrix *w, uint64_t tokens, size_t nblocks);
bitnet_status bn_ocl_bitlinear_mma(bn_ocl *o, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io, cl_mem bw,
                                   cl_mem bx, cl_mem bs, cl_mem bd, cl_mem bb, cl_mem by, cl_mem bsum, cl_mem bres,
                                   size_t nblocks, size_t xstride, int frag);
/* The residual arguments every BitLinear kernel takes last (kernels/bitlinear.cl:
 * BL_RES_ARGS), at index at and at + 1. */
bitnet_status bn_ocl_bl_res_args(bn_ocl *o, cl_kernel k, int at, cl_mem bres, int has_res);
/* The value of the last "-DNAME=value" (value >= 0) in opts, else def;
 * *found (may be NULL) set to 1 when there is one. */
long bn_ocl_opt_value(const char *opts, const char *name, long def, int *found);
/* Whether the environment variable is set to something other than "" or "0". */
int bn_ocl_env_on(const char *name);
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

/* ---- runtime internals used by the backend core (lib/backend.c, lib/calibrate.c) ---- */
void bn_ocl_free(bn_ocl *o);
/* Finds device `index` as bn_ocl_create would and fills caps, without
 * creating a context (cheap: auto uses it to load thresholds lazily).
 * *count (may be NULL) gets the number of devices on all platforms. */
bitnet_status bn_ocl_probe(int index, bn_ocl_caps *caps, int *count);
cl_context bn_ocl_context(const bn_ocl *o);
cl_command_queue bn_ocl_queue(const bn_ocl *o);
cl_device_id bn_ocl_device(const bn_ocl *o);
int bn_ocl_index(const bn_ocl *o); /* position in the device listing */
/* CL_KERNEL_WORK_GROUP_SIZE of k on this device (1 if the query fails). */
size_t bn_ocl_kernel_wg(bn_ocl *o, cl_kernel k);
/* Device time of the last kernel collected by bn_ocl_finish/download, ms. */
double bn_ocl_last_kernel_ms(const bn_ocl *o);
void bn_ocl_pool_stats(const bn_ocl *o, bitnet_pool_stats *out);
/* Frees every idle pooled buffer (kept ones stay until released). */
void bn_ocl_pool_trim(bn_ocl *o);
/* Disk cache of program binaries: process-wide counters (tests). */
typedef struct { uint64_t hits, misses, corrupt, writes; } bn_ocl_cache_stats;
void bn_ocl_cache_stats_get(bn_ocl_cache_stats *out);
#define BN_FNV_INIT 0xcbf29ce484222325ULL
uint64_t bn_fnv1a64(uint64_t h, const void *p, size_t n);
/* Roofline (lib/opencl/roofline.c). */
bitnet_status bn_ocl_bandwidth(bn_ocl *o, uint64_t bytes, double *copy_gbs, double *read_gbs);
bitnet_status bn_ocl_transfer_rate(bn_ocl *o, uint64_t bytes, int pinned, double *h2d_gbs, double *d2h_gbs);

#endif
