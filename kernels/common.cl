/*
 * common.cl - types and helpers shared by every kernel family; the host
 * prepends it to each kernels/<family>.cl before building (OpenCL C 1.2).
 * Tunables are macros with #ifndef defaults; the host may pass -D values.
 */
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define BN_HAS_FP64 1
#else
#define BN_HAS_FP64 0
#endif

#ifndef BN_WG
#define BN_WG 256 /* default work-group size of 1-D kernels */
#endif

/* Element counts and offsets are 64-bit on the host; a kernel indexes with
 * ulong so that tensors above 2^32 elements stay correct. */
typedef ulong bn_size;

/* Accumulations in double where the device has it. */
#if BN_HAS_FP64
typedef double bn_real;
#else
typedef float bn_real;
#endif

/* 1 on GPUs; the host passes -DBN_GPU=0 for CPU drivers. */
#ifndef BN_GPU
#define BN_GPU 1
#endif

/* The elements [lo, hi) of a row that work-item lid of a work-group of wg
 * items handles: strided on GPUs (coalesced loads), a contiguous block on
 * CPU drivers (one core streams its own part). */
#if BN_GPU
#define BN_ROW_FOR(i, lid, lo, hi, wg) for (bn_size i = (lo) + (lid); i < (hi); i += (wg))
#else
#define BN_ROW_FOR(i, lid, lo, hi, wg)                                                         \
    for (bn_size per_ = ((hi) - (lo) + (wg)-1) / (wg), i = (lo) + (lid)*per_;                   \
         i < (hi) && i < (lo) + ((bn_size)(lid) + 1) * per_; i++)
#endif

/* The sum of every work-item's real v over a work-group of n items (a power
 * of two) through l[0..n), in one fixed binary tree (so the same on every
 * call, and norm_rows' and the fused norm's the same); every item gets it,
 * and l may be reused after. */
inline bn_real bn_group_rsum(__local bn_real *l, bn_real v, uint lid, uint n)
{
    l[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = n / 2; s > 0; s >>= 1) {
        if (lid < s) l[lid] += l[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const bn_real r = l[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* The same for an operation whose result does not depend on the order
 * (integer sums, maxima), in rounds of 16: n / 16 items fold 16 values each
 * (item i the values i, i + n/16, ...: consecutive banks) until 16 or fewer
 * are left, which every item folds itself.  Three barriers for 256 items,
 * where the binary tree takes ten; bn_group_isum for int32 code sums,
 * bn_group_umax for the absmax bits.  On an H200 (2026-12-01, two
 * alternating rounds, tests/device/cltrace.c over bitnet-bench --op ffn
 * 4096x14336 at 1 and 8 tokens) q_acts_rows, which takes two of them,
 * averaged 9.80-9.81 us against 10.10 with the binary tree. */
#define BN_GROUP_FOLD(name, T, OP)                                             \
    inline T name(__local T *l, T v, uint lid, uint n)                         \
    {                                                                          \
        l[lid] = v;                                                            \
        barrier(CLK_LOCAL_MEM_FENCE);                                          \
        uint k = n;                                                            \
        for (; k > 16; k /= 16) {                                              \
            const uint m = k / 16;                                             \
            if (lid < m) {                                                     \
                T a = l[lid];                                                  \
                for (uint j = 1; j < 16; j++) a = OP(a, l[lid + j * m]);       \
                l[lid] = a;                                                    \
            }                                                                  \
            barrier(CLK_LOCAL_MEM_FENCE);                                      \
        }                                                                      \
        T r = l[0];                                                            \
        for (uint j = 1; j < k; j++) r = OP(r, l[j]);                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                          \
        return r;                                                              \
    }
#define BN_ADD_(a, b) ((a) + (b))
BN_GROUP_FOLD(bn_group_isum, int, BN_ADD_)
BN_GROUP_FOLD(bn_group_umax, uint, max)

/* The planted bug of the perturbation test hook (test builds only): the host passes the
 * index of the element to corrupt, or -1. */
inline float bn_perturb(float v) { return v != 0.0f ? -3.0f * v : 1.0f; }

/* The activation of BitLinear and matmul epilogues (act codes as bitnet_act),
 * the definition of lib/act.c: transcendental activations in double when
 * the device has fp64 (rounded once), else in float. */
inline float bn_act(int act, float v)
{
#if BN_HAS_FP64
    const double d = (double)v;
    switch (act) {
    case 1: return v > 0.0f ? v : 0.0f;
    case 2: return (float)(0.5 * d * erfc(d * -0.70710678118654752));
    case 3: {
        const double inner = 0.79788456080286536 * (d + 0.044715 * (d * d * d));
        return (float)(d / (1.0 + exp(-2.0 * inner)));
    }
    case 4: return (float)(1.0 / (1.0 + exp(-d)));
    case 5: return (float)(d / (1.0 + exp(-d)));
    default: return v;
    }
#else
    switch (act) {
    case 1: return v > 0.0f ? v : 0.0f;
    case 2: return 0.5f * v * erfc(v * -0.70710678118654752f);
    case 3: {
        const float inner = 0.79788456080286536f * (v + 0.044715f * (v * v * v));
        return v / (1.0f + exp(-2.0f * inner));
    }
    case 4: return 1.0f / (1.0f + exp(-v));
    case 5: return v / (1.0f + exp(-v));
    default: return v;
    }
#endif
}
