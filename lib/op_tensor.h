/*
 * op_tensor.h - the tensor-op family (internal): shape helpers shared by the
 * public entry points (lib/op_tensor.c), the scalar references and CPU fast
 * paths (lib/cpu/eltwise.c softmax.c reduce.c norm.c permute.c) and the
 * OpenCL host code (lib/opencl/ same names).
 *
 * The references compute in double and round once, so they are the float64
 * definition rounded to f32.  NaN/Inf rules (documented in bitnet-op(1)):
 *   - max/min (binary and reductions) propagate NaN, like numpy.maximum;
 *   - argmax returns the index of the first NaN when the slice holds one,
 *     else of the first maximum;
 *   - softmax of a slice holding NaN or +Inf, or only -Inf, is all NaN
 *     (as NumPy and PyTorch give); -Inf entries of other slices give 0
 *     (log-softmax: -Inf).
 */
#ifndef BITNET_OP_TENSOR_H
#define BITNET_OP_TENSOR_H

#include "internal.h"

#include <math.h>

/* "[2, 3]" (rank 0: "[]"). */
const char *bn_shape_fmt(const bitnet_shape *s, char *buf, size_t size);
/* Element count of s, checked against BITNET_MAX_ELEMENTS and size_t. */
bitnet_status bn_shape_numel(const bitnet_shape *s, uint64_t *n);

/* A strided view used by the broadcast and reduce kernels: dims merged where
 * the memory order allows, size-1 dims dropped.  Element strides. */
typedef struct {
    uint32_t rank;
    uint64_t dims[BITNET_MAX_RANK];
    uint64_t sa[BITNET_MAX_RANK], sb[BITNET_MAX_RANK]; /* strides of a and b (0: broadcast) */
} bn_bcast;
/* Builds the view of y = a op b with y of shape sy (already validated). */
void bn_bcast_plan(const bitnet_shape *sa, const bitnet_shape *sb, const bitnet_shape *sy, bn_bcast *p);

/* outer/len/inner of a softmax axis (axis already normalised). */
void bn_axis_split(const bitnet_shape *s, uint32_t axis, uint64_t *outer, uint64_t *len, uint64_t *inner);

/* Reduction view: the shape with adjacent dims of the same kind (kept or
 * reduced) merged and size-1 dims dropped; red[i] says reduced. */
typedef struct {
    uint32_t rank;
    uint64_t dims[BITNET_MAX_RANK];
    int red[BITNET_MAX_RANK];
    uint64_t n_out, n_red; /* output elements, elements per reduced slice */
} bn_rplan;
void bn_reduce_plan(const bitnet_shape *s, uint32_t axes_mask, bn_rplan *p);

/* Permute view: dims merged where consecutive input axes stay consecutive. */
typedef struct {
    uint32_t rank;
    uint64_t dims[BITNET_MAX_RANK]; /* input dims (merged) */
    uint32_t perm[BITNET_MAX_RANK];
} bn_pplan;
void bn_permute_plan(const bitnet_shape *s, const uint32_t *perm, bn_pplan *p);

/* Scalar definitions (double in, double out). */
static inline double bn_binary_scalar(bitnet_binary_op op, double a, double b)
{
    switch (op) {
    case BITNET_BIN_ADD: return a + b;
    case BITNET_BIN_SUB: return a - b;
    case BITNET_BIN_MUL: return a * b;
    case BITNET_BIN_DIV: return a / b;
    case BITNET_BIN_MAX: return isnan(a) ? a : isnan(b) ? b : a > b ? a : b;
    case BITNET_BIN_MIN: return isnan(a) ? a : isnan(b) ? b : a < b ? a : b;
    default: return NAN;
    }
}

/* sigmoid(z) = 1/(1+exp(-z)); the forms below avoid cancellation so that the
 * f32 result is within an ulp for every input. */
static inline double bn_unary_scalar(bitnet_unary_op op, double x, double param)
{
    switch (op) {
    case BITNET_UN_RELU: return x > 0 ? x : (isnan(x) ? x : 0.0);
    case BITNET_UN_GELU: return 0.5 * x * erfc(-x * 0.70710678118654752440);
    case BITNET_UN_GELU_TANH: {
        /* 0.5 x (1 + tanh(u)) = x * sigmoid(2u) */
        double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
        return x / (1.0 + exp(-2.0 * u));
    }
    case BITNET_UN_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case BITNET_UN_SILU: return x / (1.0 + exp(-x));
    case BITNET_UN_TANH: return tanh(x);
    case BITNET_UN_EXP: return exp(x);
    case BITNET_UN_NEG: return -x;
    case BITNET_UN_ABS: return fabs(x);
    case BITNET_UN_SQRT: return sqrt(x);
    case BITNET_UN_SCALE: return x * param;
    default: return NAN;
    }
}

/* The planted bug of BITNET_TEST_PERTURB: a clearly wrong value. */
static inline void bn_perturb_one(float *v) { *v = isfinite(*v) && fabsf(*v) > 0.5f ? -2.0f * *v : 7.0f; }

/* The scalar references (arguments validated by lib/op_tensor.c). */
void bn_binary_ref_k(bitnet_binary_op op, const float *a, const bitnet_shape *sa, const float *b,
                     const bitnet_shape *sb, float *y, const bitnet_shape *sy);
void bn_unary_ref_k(bitnet_unary_op op, const float *x, uint64_t n, float param, float *y);
void bn_softmax_ref_k(const float *x, uint64_t outer, uint64_t len, uint64_t inner, int log, float *y);
/* ARGMAX writes idx and/or y (as float) where non-NULL. */
void bn_reduce_ref_k(bitnet_reduce_op op, const float *x, const bitnet_shape *s, uint32_t axes_mask,
                     float *y, int64_t *idx);
void bn_norm_ref_k(const float *x, uint64_t rows, uint64_t cols, const float *weight, const float *bias,
                   float eps, int rms, float *y);
void bn_permute_ref_k(const float *x, const bitnet_shape *s, const uint32_t *perm, float *y);

/* SIMD inner loops (lib/cpu/NAME_avx2.c, NAME_avx512.c; x86-64 only). */
double bn_sum_f32_avx2(const float *x, uint64_t n);
double bn_sum_f32_avx512(const float *x, uint64_t n);
/* Runs y[i] = a[i*sa] op b[i*sb] for sa, sb in {0,1}; returns how many it did
 * (the caller finishes the tail). */
uint64_t bn_binary_run_avx2(bitnet_binary_op op, const float *a, uint64_t sa, const float *b, uint64_t sb,
                            float *y, uint64_t n, int stream);
/* neg, abs, sqrt; returns how many it did. */
uint64_t bn_unary_run_avx2(bitnet_unary_op op, const float *x, float *y, uint64_t n);

/* The CPU fast permute without the test hook (reduce uses it internally);
 * cpu is a bn_cpu * (lib/cpu/cpu.h). */
bitnet_status bn_cpu_permute_plain(void *cpu, const float *x, const bitnet_shape *s, const uint32_t *perm, float *y);

#endif
