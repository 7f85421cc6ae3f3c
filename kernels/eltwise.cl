/*
 * eltwise.cl - element-wise ops: binary with broadcasting and unary.
 * Each work-item handles a contiguous block of EW_BLOCK outputs (what PoCL
 * and other CPU drivers vectorize best); on GPUs the host passes
 * -DEW_BLOCK=4 so that neighbouring work-items still touch neighbouring
 * memory.  Op codes are bitnet_binary_op / bitnet_unary_op.
 * Transcendental functions run in double where the device has it, so that
 * the f32 result is within an ulp or two of float64 (as the CPU reference).
 */
#ifndef EW_BLOCK
#define EW_BLOCK 16
#endif

#if BN_HAS_FP64
typedef double ew_real;
#else
typedef float ew_real;
#endif

inline float ew_binary(int op, float a, float b)
{
    switch (op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    case 4: return (a > b || isnan(a)) ? a : b; /* NaN propagates */
    default: return (a < b || isnan(a)) ? a : b;
    }
}

/* Same shapes (or a scalar side: stride 0): float4 loads when aligned. */
__kernel void binary_flat(__global const float *a, __global const float *b, __global float *y, const bn_size n,
                          const int op, const int sa, const int sb, const long perturb)
{
    bn_size i0 = (bn_size)get_global_id(0) * EW_BLOCK;
    if (i0 >= n) return;
    if (i0 + EW_BLOCK <= n && EW_BLOCK % 4 == 0) {
        for (int k = 0; k < EW_BLOCK; k += 4) {
            bn_size i = i0 + (bn_size)k;
            float4 va = sa ? vload4(0, a + i) : (float4)(a[0]);
            float4 vb = sb ? vload4(0, b + i) : (float4)(b[0]);
            float4 r;
            r.x = ew_binary(op, va.x, vb.x);
            r.y = ew_binary(op, va.y, vb.y);
            r.z = ew_binary(op, va.z, vb.z);
            r.w = ew_binary(op, va.w, vb.w);
            vstore4(r, 0, y + i);
        }
    } else {
        for (bn_size i = i0; i < n && i < i0 + EW_BLOCK; i++) y[i] = ew_binary(op, a[sa ? i : 0], b[sb ? i : 0]);
    }
    if (perturb >= (long)i0 && perturb < (long)(i0 + EW_BLOCK) && (bn_size)perturb < n)
        y[perturb] = bn_perturb(y[perturb]);
}

/* General broadcast over a merged view of up to 8 dims: dims, and the element
 * strides of a and b (0 where that side broadcasts). */
__kernel void binary_bcast(__global const float *a, __global const float *b, __global float *y, const bn_size n,
                           const int op, const uint rank, const ulong8 dims8, const ulong8 sa8, const ulong8 sb8,
                           const long perturb)
{
    ulong dims[8], sa[8], sb[8], idx[8];
    vstore8(dims8, 0, dims);
    vstore8(sa8, 0, sa);
    vstore8(sb8, 0, sb);
    bn_size i0 = (bn_size)get_global_id(0) * EW_BLOCK;
    if (i0 >= n) return;
    bn_size rest = i0, oa = 0, ob = 0;
    for (int k = (int)rank - 1; k >= 0; k--) {
        idx[k] = rest % dims[k];
        rest /= dims[k];
        oa += idx[k] * sa[k];
        ob += idx[k] * sb[k];
    }
    for (bn_size i = i0; i < n && i < i0 + EW_BLOCK; i++) {
        float v = ew_binary(op, a[oa], b[ob]);
        if ((long)i == perturb) v = bn_perturb(v);
        y[i] = v;
        for (int k = (int)rank - 1; k >= 0; k--) { /* odometer */
            oa += sa[k];
            ob += sb[k];
            if (++idx[k] < dims[k]) break;
            oa -= sa[k] * dims[k];
            ob -= sb[k] * dims[k];
            idx[k] = 0;
        }
    }
}

inline float ew_unary(int op, float xf, float param)
{
    ew_real x = (ew_real)xf;
    switch (op) {
    case 0: return (xf > 0.0f || isnan(xf)) ? xf : 0.0f;
    case 1: return (float)((ew_real)0.5 * x * erfc(-x * (ew_real)0.70710678118654752440));
    case 2: {
        ew_real u = (ew_real)0.79788456080286535588 * (x + (ew_real)0.044715 * x * x * x);
        return (float)(x / ((ew_real)1 + exp((ew_real)-2 * u)));
    }
    case 3: return (float)((ew_real)1 / ((ew_real)1 + exp(-x)));
    case 4: return (float)(x / ((ew_real)1 + exp(-x)));
    case 5: return (float)tanh(x);
    case 6: return (float)exp(x);
    case 7: return -xf;
    case 8: return fabs(xf);
    case 9: return sqrt(xf); /* correctly rounded: built with -cl-fp32-correctly-rounded-divide-sqrt */
    default: return xf * param;
    }
}

__kernel void unary(__global const float *x, __global float *y, const bn_size n, const int op, const float param,
                    const long perturb)
{
    bn_size i0 = (bn_size)get_global_id(0) * EW_BLOCK;
    for (bn_size i = i0; i < n && i < i0 + EW_BLOCK; i++) {
        float v = ew_unary(op, x[i], param);
        if ((long)i == perturb) v = bn_perturb(v);
        y[i] = v;
    }
}
