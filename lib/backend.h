/*
 * backend.h - the backend table (internal).
 *
 * A backend is a table of op implementations plus a context pointer, as in
 * ggml.  The CPU table (lib/cpu/) fills every slot; the OpenCL table
 * (lib/opencl/) may leave a slot NULL (optional), and the op then runs on the
 * CPU.  Public op functions (lib/op_*.c) validate their arguments, then call
 * BN_DISPATCH, which picks the device (auto: by size against calibrated
 * thresholds), times the call, and on a device failure under --device auto
 * warns once and reruns the op on the CPU.
 */
#ifndef BITNET_BACKEND_H
#define BITNET_BACKEND_H

#include "internal.h"
#include "threads.h"

#include <stddef.h>

/* What a backend may tell the layer above it, given at its creation: the
 * leaves (lib/cpu/, lib/opencl/) never call up into lib/backend.c by name. */
typedef struct {
    void *user;
    void (*kernel_time)(void *user, const char *op, double ms);            /* device time of one kernel */
    void (*transfer)(void *user, const char *op, int to_device, uint64_t bytes, double ms);
    void (*log)(void *user, bitnet_log_level level, const char *msg);
} bn_host;

typedef struct bn_backend_ops {
    const char *name; /* "cpu", "opencl" */
    /* Names the op whose commands follow (optional): transfers and kernels
     * are booked under it when their times are collected. */
    void (*op_begin)(void *ctx, const char *op);
    /* Same arguments as the public calls, with the backend's context first.
     * Arguments arrive validated (sizes checked, pointers non-NULL as needed). */
    bitnet_status (*quantize_weights)(void *ctx, const float *w, uint64_t rows, uint64_t cols,
                                      bitnet_scale_kind kind, uint32_t group, uint8_t *out_t2, float *d);
    bitnet_status (*quantize_acts)(void *ctx, const float *x, uint64_t rows, uint64_t cols, int8_t *q, float *s);
    bitnet_status (*dequantize_weights)(void *ctx, const uint8_t *t2, uint64_t rows, uint64_t cols,
                                        bitnet_scale_kind kind, uint32_t group, const float *d, float *w);
    bitnet_status (*dequantize_acts)(void *ctx, const int8_t *q, uint64_t rows, uint64_t cols, const float *s, float *x);
    bitnet_status (*bitlinear)(void *ctx, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io);
    bitnet_status (*matmul_f32)(void *ctx, const float *x, uint64_t tokens, uint64_t in, const float *w,
                                uint64_t out, const float *bias, bitnet_act act, float *y);
    bitnet_status (*binary)(void *ctx, bitnet_binary_op op, const float *a, const bitnet_shape *sa,
                            const float *b, const bitnet_shape *sb, float *y, const bitnet_shape *sy);
    bitnet_status (*unary)(void *ctx, bitnet_unary_op op, const float *x, uint64_t n, float param, float *y);
    bitnet_status (*softmax)(void *ctx, const float *x, uint64_t outer, uint64_t len, uint64_t inner, int log, float *y);
    bitnet_status (*reduce)(void *ctx, bitnet_reduce_op op, const float *x, const bitnet_shape *s,
                            uint32_t axes_mask, float *y, int64_t *idx);
    bitnet_status (*layernorm)(void *ctx, const float *x, uint64_t rows, uint64_t cols, const float *weight,
                               const float *bias, float eps, int rms, float *y);
    bitnet_status (*permute)(void *ctx, const float *x, const bitnet_shape *s, const uint32_t *perm, float *y);
    bitnet_status (*scale)(void *ctx, const float *x, uint64_t n, float alpha, float *y); /* the plumbing op */
    /* Device-resident weights (optional; NULL on the CPU): bitnet_backend_keep
     * copies p[0..bytes) to the device; forget drops that copy (if any). */
    bitnet_status (*keep)(void *ctx, const void *p, size_t bytes);
    void (*forget)(void *ctx, const void *p);
    /* Device memory (optional; NULL on the CPU, whose buffers are host
     * memory).  A handle names one allocation; ops meet it through the
     * device address registered for it (lib/devmem.h).  write copies src
     * before it returns (the copy up may still be in flight); read waits for
     * every op enqueued before it; sync waits for all of them.  read and
     * sync report an error that an op met after it was enqueued (NaN input
     * to a quantizer, a failed kernel). */
    bitnet_status (*buffer_alloc)(void *ctx, size_t bytes, void **handle);
    void (*buffer_free)(void *ctx, void *handle);
    bitnet_status (*buffer_write)(void *ctx, void *handle, size_t offset, const void *src, size_t bytes);
    bitnet_status (*buffer_read)(void *ctx, void *handle, size_t offset, void *dst, size_t bytes);
    bitnet_status (*sync)(void *ctx);
    void (*free)(void *ctx);
    /* Linear algebra (lib/op_linalg.c): dt is BITNET_F32 or BITNET_F64, the
     * input is finite and non-empty; optional on OpenCL. */
    bitnet_status (*cholesky)(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n, void *l);
    bitnet_status (*qr)(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *q,
                        void *r);
    bitnet_status (*svd)(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *s,
                         void *u, void *vt);
    bitnet_status (*cholesky_solve)(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n,
                                    const void *b, uint64_t nrhs, void *x);
    bitnet_status (*lstsq)(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n,
                           const void *b, uint64_t nrhs, void *x);
} bn_backend_ops;

/* Where one op call goes. */
typedef struct {
    const bn_backend_ops *ops;
    void *ctx;
    int can_fallback; /* 1 under --device auto when ops is not the CPU */
} bn_target;

/* Picks the implementation for the op in `slot` (offsetof(bn_backend_ops, x))
 * moving `bytes`: the OpenCL table when the backend has one, the slot is set
 * and (under auto) bytes reach the threshold for `op`; else the CPU. */
bn_target bn_backend_select(bitnet_backend *be, size_t slot, const char *op, uint64_t bytes);
bn_target bn_backend_cpu_target(bitnet_backend *be);
/* Called when a device op failed under auto: logs one warning per backend and
 * disables the device for the rest of the backend's life. */
void bn_backend_fallback(bitnet_backend *be, const char *op, bitnet_status st);
/* Adds one call's host-side wall time to the op statistics. */
void bn_backend_record(bitnet_backend *be, const bn_target *t, const char *op, double ms, uint64_t bytes);
void bn_backend_log(bitnet_backend *be, bitnet_log_level level, const char *fmt, ...) BN_PRINTF(3, 4);
/* Test hooks (lib/testhooks.c).  Always 0 in libbitnet.a; only the test
 * variant libbitnet-test.a (-DBITNET_TEST_HOOKS, linked by the unit tests and
 * the test copies of the tools) reads the environment:
 * nonzero when $BITNET_TEST_PERTURB names `op`; fast paths then corrupt one
 * output element (the planted bug that verify/bench must catch). */
int bn_test_perturb(const char *op);
/* ... nonzero when $BITNET_TEST_FAIL names `step` (create|build|alloc|run|side_queue). */
int bn_test_fail(const char *step);

static inline int bn_is_device_error(bitnet_status st)
{
    return st == BITNET_E_DEVICE || st == BITNET_E_BUILD || st == BITNET_E_DEVICE_MEMORY || st == BITNET_E_NO_DEVICE;
}

/* One memory operand of an op: the address of the argument variable that
 * holds its pointer (so that the dispatcher can point it elsewhere), its
 * bytes, and whether the op writes it.  NULL pointers and 0 bytes are
 * skipped. */
typedef struct {
    void *slot;
    size_t bytes;
    int out;
} bn_operand;
#define BN_IN(var, n) {(void *)&(var), (size_t)(n), 0}
#define BN_OUT(var, n) {(void *)&(var), (size_t)(n), 1}
#define BN_MAX_OPERANDS 12

/* One op call in flight through the dispatcher (lib/dispatch.c). */
typedef struct {
    bitnet_backend *be;
    bn_target t;
    size_t slot;
    const char *op;
    uint64_t bytes;
    bn_operand *opd;
    size_t nopd;
    int dev[BN_MAX_OPERANDS];    /* operand i is a device address of this backend */
    void *saved[BN_MAX_OPERANDS]; /* staging: the caller's pointers */
    void *tmp[BN_MAX_OPERANDS];   /* staging: host copies */
    int staged, ndev;
    double t0;
} bn_call;

/* Locks the backend, picks the target (an op with an operand on the device
 * runs there when it can; else on the CPU, the device operands staged
 * through host copies) and starts the clock.  On failure nothing is held. */
bitnet_status bn_call_begin(bn_call *c, bitnet_backend *be, size_t slot, const char *op, uint64_t bytes,
                            bn_operand *opd, size_t nopd);
/* After a failed device attempt under auto: falls back to the CPU (staging
 * the device operands) and returns 1 to run the op again; else 0. */
int bn_call_retry(bn_call *c, bitnet_status *st);
/* Copies staged outputs back, records the statistics, unlocks. */
bitnet_status bn_call_end(bn_call *c, bitnet_status st);
/* The host threads of a backend (its CPU side's pool), for host-side work
 * of the ops such as input checks; NULL for a NULL backend. */
bn_pool *bn_backend_pool(bitnet_backend *be);
/* 1 when p is a device address (of any backend): its bytes are not host memory. */
int bn_is_device_ptr(const void *p);

#define BN_DISPATCH(st, be, slot, opname, bytes, opd, ...)                                            \
    do {                                                                                             \
        bn_call c_;                                                                                  \
        (st) = bn_call_begin(&c_, (be), offsetof(bn_backend_ops, slot), (opname), (bytes), (opd),   \
                             sizeof(opd) / sizeof((opd)[0]));                                        \
        if ((st) == BITNET_OK) {                                                                     \
            do (st) = c_.t.ops->slot(c_.t.ctx, __VA_ARGS__);                                         \
            while (bn_call_retry(&c_, &(st)));                                                       \
            (st) = bn_call_end(&c_, (st));                                                           \
        }                                                                                            \
    } while (0)

#endif
