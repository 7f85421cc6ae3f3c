/*
 * scale.cl - the plumbing op y = alpha * x, and the two roofline kernels:
 * copy (read + write) and read (a sum the compiler cannot drop).
 */
#ifndef SCALE_PER_ITEM
#define SCALE_PER_ITEM 4 /* elements per work-item */
#endif

__kernel void scale(__global const float *x, __global float *y, const float alpha, const bn_size n,
                    const long perturb)
{
    bn_size i0 = (bn_size)get_global_id(0) * SCALE_PER_ITEM;
    for (int k = 0; k < SCALE_PER_ITEM; k++) {
        bn_size i = i0 + (bn_size)k;
        if (i < n) {
            float v = alpha * x[i];
            if ((long)i == perturb) v = bn_perturb(v);
            y[i] = v;
        }
    }
}

/* y[i] = x[i] over n float4 values (grid-stride). */
__kernel void copy4(__global const float4 *x, __global float4 *y, const bn_size n)
{
    bn_size stride = (bn_size)get_global_size(0);
    for (bn_size i = (bn_size)get_global_id(0); i < n; i += stride) y[i] = x[i];
}

/* Per-work-item sums of n float4 values, written to out[get_global_id(0)]. */
__kernel void read4(__global const float4 *x, __global float *out, const bn_size n)
{
    bn_size stride = (bn_size)get_global_size(0);
    float4 acc = (float4)(0.0f);
    for (bn_size i = (bn_size)get_global_id(0); i < n; i += stride) acc += x[i];
    out[get_global_id(0)] = acc.x + acc.y + acc.z + acc.w;
}
