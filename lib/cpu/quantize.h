/*
 * quantize.h - internals of the quantization family, shared by the scalar
 * definitions and threaded CPU code (lib/cpu/quantize.c), the SIMD kernels
 * (lib/cpu/quantize_avx2.c, quantize_avx512.c), the public entry points
 * (lib/op_quantize.c) and the OpenCL host code (lib/opencl/quantize.c).
 *
 * The exact sum of |w|.  The absmean scale is defined as
 *     d = (float)( RN_double(sum |w|) / (double)n ),  d = max(d, 1e-5f)
 * where sum |w| is the EXACT real sum, rounded once to double.  A sum
 * accumulated in double in some order can differ in its last bit between
 * orders (and so, rarely, flip the float d), so no backend sums in floating
 * point: every |w| is an integer multiple of 2^-149 (the smallest float
 * subnormal), below 2^128, so sum |w| is an integer number of 2^-149 units
 * below 2^325 for any tensor of at most 2^48 elements.  bn_xsum holds that
 * integer in six 64-bit limbs; integer addition is associative, so threads,
 * SIMD lanes and OpenCL work-groups may add their parts in any order and
 * all get the same bits.  Fast paths add a whole chunk at once: when the
 * exponents of a chunk of 256 values span at most 32 binades (always, in
 * practice), each |w| is m << (e - emin) with m its 24-bit significand, and
 * the chunk sum fits in a uint64 (256 * 2^56 = 2^64); other chunks (wide
 * range, subnormals) take the exact per-element path.
 */
#ifndef BITNET_CPU_QUANTIZE_H
#define BITNET_CPU_QUANTIZE_H

#include "cpu.h"

#include <math.h>

#define BN_XSUM_LIMBS 6
typedef struct {
    uint64_t w[BN_XSUM_LIMBS]; /* value = sum w[i] * 2^(64 i) units of 2^-149 */
} bn_xsum;

/* Elements per fast chunk, and the widest exponent span it accepts. */
#define BN_XCHUNK 256
#define BN_XSPAN 32

static inline void bn_xsum_zero(bn_xsum *a) { memset(a, 0, sizeof *a); }
/* a += v * 2^shift (shift < 320). */
void bn_xsum_add(bn_xsum *a, uint64_t v, unsigned shift);
void bn_xsum_merge(bn_xsum *a, const bn_xsum *b);
/* a += |x| exactly (x finite). */
void bn_xsum_add_float(bn_xsum *a, float x);
/* The sum in units of 1 (not 2^-149), rounded once to nearest-even double. */
double bn_xsum_to_double(const bn_xsum *a);

/* The absmean scale of a slice of n elements whose exact |w| sum is sum
 * (a double from bn_xsum_to_double); n = 0 gives the floor 1e-5f. */
static inline float bn_absmean_scale(double sum, uint64_t n)
{
    float d = n ? (float)(sum / (double)n) : 0.0f;
    return d < 1e-5f ? 1e-5f : d;
}
/* Activation scale from the absolute maximum. */
static inline float bn_absmax_scale(float m)
{
    if (m < 1e-5f) m = 1e-5f;
    return 127.0f / m;
}

/* Scalar chunk kernel (also the reference for the SIMD ones): n <= BN_XCHUNK.
 * Returns 0 and sets *sum, *shift with sum|w| = sum * 2^shift units of
 * 2^-149 when the fast form applies; 1 when the chunk needs the exact
 * per-element path; 2 when it holds NaN or Inf. */
int bn_xchunk_scalar(const float *w, size_t n, uint64_t *sum, unsigned *shift);

/* Adds sum |w[0..n)| to acc exactly using chunk kernel fn.  Returns n, or
 * the index of the first NaN/Inf (acc is then meaningless). */
typedef int (*bn_xchunk_fn)(const float *w, size_t n, uint64_t *sum, unsigned *shift);
size_t bn_absum(bn_xchunk_fn fn, const float *w, size_t n, bn_xsum *acc);
/* The exact sum as a double for a short slice (n <= BN_XCHUNK) without the
 * limb arithmetic when possible.  Returns n or the first NaN/Inf index. */
size_t bn_absum_small(bn_xchunk_fn fn, const float *w, size_t n, double *sum);

/* The SIMD absum kernels go faster with a second exact form: a chunk of
 * BN_DCHUNK values whose exponents span at most BN_DSPAN binades is summed
 * in double in any order without rounding (every value is a multiple of
 * 2^(emin - 150) and every partial sum stays below 2^(emin - 150 + 53):
 * 512 * 2^(emax - 126) <= 2^(emin - 97)).  Other chunks go through the
 * chunk kernel above, 256 at a time. */
#define BN_DCHUNK 512
/* Software prefetch distance of the streaming kernels, in floats (8 KiB):
 * prefetching past the end of a buffer is harmless (no fault). */
#define BN_PREFETCH 2048
#define BN_DSPAN 20
/* Adds a chunk summed in double (see above) to acc, or returns nonzero when
 * the chunk is not of that form (maxb, minm1: the largest |w| bits and the
 * smallest nonzero |w| bits minus one, UINT32_MAX when all are zero). */
static inline int bn_xchunk_double(double dsum, uint32_t maxb, uint32_t minm1, bn_xsum *acc)
{
    if (minm1 == UINT32_MAX) return maxb ? 1 : 0; /* all zero: nothing to add */
    uint32_t emin = (minm1 + 1) >> 23, emax = maxb >> 23;
    if (maxb >= 0x7f800000u || emin == 0 || emax - emin > BN_DSPAN) return 1;
    bn_xsum_add(acc, (uint64_t)ldexp(dsum, 150 - (int)emin), emin - 1);
    return 0;
}
/* The first step of every chunk kernel, from maxb (the largest |w| bits) and
 * minm1 (the smallest nonzero |w| bits minus one, UINT32_MAX when all are
 * zero): returns 2 for a NaN/Inf, 0 with *sum = *shift = 0 for an all-zero
 * chunk, 1 for a chunk that needs the exact per-element path (these are the
 * chunk kernel's own results), or -1 with *emin set when the fast form
 * applies (each |w| is then m << (e - emin) units of 2^(emin - 150)). */
static inline int bn_xchunk_range(uint32_t maxb, uint32_t minm1, uint64_t *sum, unsigned *shift, uint32_t *emin)
{
    if (maxb >= 0x7f800000u) return 2;
    if (minm1 == UINT32_MAX) { /* all zero */
        *sum = 0;
        *shift = 0;
        return 0;
    }
    const uint32_t lo = (minm1 + 1) >> 23, hi = maxb >> 23;
    if (lo == 0 || hi - lo > BN_XSPAN) return 1;
    *emin = lo;
    return -1;
}
/* The exact sum of n values, chunk by chunk: returns n or the first NaN/Inf. */
typedef size_t (*bn_absum_fn)(const float *w, size_t n, bn_xsum *acc);

/* Quantizes blocks [b0, b1) of one row of `cols` weights to T2 (t2 points at
 * the row's first block).  The scale of 32-column sub-block j (j counted
 * from the row start) is s[j >> gshift].  Weights are finite. */
/* The index into s of sub-block sb; sub-blocks wholly past the last column
 * (padding, code 1 whatever the scale) reuse the last scale, so that s is
 * never read beyond its end. */
static inline uint64_t bn_qscale_index(uint64_t sb, unsigned gshift, uint64_t cols)
{
    uint64_t last = cols ? ((cols - 1) / 32) >> gshift : 0, i = sb >> gshift;
    return i < last ? i : last;
}
/* Where the SIMD kernels read block b of a row of cols weights at w: the row
 * itself, or for the last, partial block its columns copied into tmp with
 * zeros after them (a zero quantizes to code 1, the padding code). */
static inline const float *bn_qblock_src(const float *w, uint64_t cols, uint64_t b, float tmp[BITNET_T2_BLOCK])
{
    const float *p = w + b * BITNET_T2_BLOCK;
    if ((b + 1) * BITNET_T2_BLOCK <= cols) return p;
    memset(tmp, 0, BITNET_T2_BLOCK * sizeof *tmp);
    memcpy(tmp, p, (cols - b * BITNET_T2_BLOCK) * sizeof *p);
    return tmp;
}
typedef void (*bn_qblocks_fn)(const float *w, uint64_t cols, uint64_t b0, uint64_t b1, const float *s,
                              unsigned gshift, uint8_t *t2);
void bn_qblocks_scalar(const float *w, uint64_t cols, uint64_t b0, uint64_t b1, const float *s, unsigned gshift,
                       uint8_t *t2);

/* One row of activations: returns n, or the index of the first NaN/Inf;
 * with sum not NULL, *sum gets the sum of the codes (OpenCL BitLinear's
 * host-made activations, lib/opencl/bitlinear.c). */
typedef size_t (*bn_qacts_fn)(const float *x, size_t n, int8_t *q, float *s, int32_t *sum);
size_t bn_qacts_scalar(const float *x, size_t n, int8_t *q, float *s, int32_t *sum);
/* The SIMD activation kernels after their max pass: with maxb the largest
 * |x| bits of the row, returns the index of the first NaN/Inf, or n with
 * *s set to the row's scale. */
static inline size_t bn_qacts_scale(const float *x, size_t n, uint32_t maxb, float *s)
{
    if (maxb >= 0x7f800000u) {
        for (size_t i = 0; i < n; i++)
            if (!isfinite(x[i])) return i;
    }
    float m;
    memcpy(&m, &maxb, 4);
    *s = bn_absmax_scale(m);
    return n;
}

typedef struct {
    const char *name;
    bn_absum_fn absum;
    bn_xchunk_fn xchunk;
    bn_qblocks_fn qblocks;
    bn_qacts_fn qacts;
} bn_quant_kernels;

/* The kernels for a SIMD level (the best one available at or below it). */
const bn_quant_kernels *bn_quant_kernels_for(bn_simd simd);

/* Argument checks shared by the public calls and the _ref functions.
 * For weights: kind/group, sizes; n_scales gets the scale count. */
bitnet_status bn_quant_check(const char *op, uint64_t rows, uint64_t cols, bitnet_scale_kind kind, uint32_t group,
                             uint64_t *n_scales);
/* gshift such that the scale of sub-block j is s[j >> gshift]. */
unsigned bn_quant_gshift(bitnet_scale_kind kind, uint32_t group);
/* Index into d of the scale of (row r, column c). */
static inline uint64_t bn_scale_index(bitnet_scale_kind kind, uint32_t group, uint64_t cols, uint64_t r, uint64_t c)
{
    if (kind == BITNET_SCALE_TENSOR) return 0;
    if (kind == BITNET_SCALE_ROW) return r;
    return r * ((cols + group - 1) / group) + c / group;
}
/* Dequantization scales must be finite (positive: also > 0); sets a detail. */
bitnet_status bn_dequant_check_scales(const char *op, const float *sc, uint64_t n, int positive);
/* NaN/Inf found at flat index i of [rows x cols]. */
bitnet_status bn_quant_nonfinite(const char *op, const float *x, uint64_t cols, uint64_t i);

/* Exact float division a / b rounded to nearest even, from integers only
 * (the OpenCL kernels use the same algorithm): for the integer a in
 * [-255, 255] and a finite b > 0.  Returns the float's bits. */
uint32_t bn_div_rn_bits(int32_t a, float b);

#if defined(__x86_64__)
extern const bn_quant_kernels bn_quant_avx2;
extern const bn_quant_kernels bn_quant_avx512;
#endif

#endif
