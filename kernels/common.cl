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

/* The planted bug of the perturbation test hook (test builds only): the host passes the
 * index of the element to corrupt, or -1. */
/* The sum of every work-item's v over a work-group of n items (a power of
 * two) through l[0..n), in one fixed tree (so the same on every call);
 * every item gets it, and l may be reused after. */
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

/* The int8 activation scale, shared by the quantize family and the
 * re-quantizing tail of bitlinear.cl's GEMV. */
/* Rounds (N + f) 2^X, 0 <= f < 1 (f > 0 iff sticky), N > 0, to float bits. */
inline uint q_round_bits(ulong N, int sticky, int X)
{
    int p = 63 - (int)clz(N);
    int E = p + X;
    int keep = E >= -126 ? 24 : 24 - (-126 - E);
    if (keep < 0) keep = -1;
    int drop = p + 1 - keep;
    ulong m;
    if (drop <= 0) {
        m = N << (-drop);
    } else if (drop > 63) {
        m = 0;
    } else {
        ulong rem = N & ((1UL << drop) - 1UL), hw = 1UL << (drop - 1);
        m = N >> drop;
        if (rem > hw || (rem == hw && (sticky || (m & 1UL)))) m++;
    }
    if (E >= -126) {
        if (m == (1UL << 24)) {
            m >>= 1;
            E++;
        }
        if (E > 127) return 0x7f800000u;
        return ((uint)(E + 127) << 23) | ((uint)m & 0x7fffffu);
    }
    return (uint)m;
}

/* a / b rounded to nearest even, for integer a in [-255, 255] and finite
 * b > 0, from integers only (bn_div_rn_bits in lib/cpu/quantize.c). */
inline uint q_div_bits(int a, float b)
{
    uint sign = a < 0 ? 0x80000000u : 0u;
    uint ua = (uint)(a < 0 ? -a : a);
    if (ua == 0) return 0u;
    uint ub = as_uint(b);
    int eb = (int)((ub >> 23) & 0xffu);
    ulong mb = ub & 0x7fffffu;
    if (eb) mb |= 0x800000UL;
    else eb = 1;
    ulong num = (ulong)ua << 50;
    ulong N = num / mb, rem = num % mb;
    return sign | q_round_bits(N, rem != 0, 100 - eb);
}

/* The activation scale 127 / max(m, 1e-5f) of the finite absmax bits m. */
inline float q_act_scale(uint m)
{
    if (m < 0x3727c5acu) m = 0x3727c5acu; /* the bits of 1e-5f */
    return as_float(q_div_bits(127, as_float(m)));
}

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
