/*
 * softmax.cl - softmax and log-softmax along one axis of [outer, len, inner].
 * Long rows (inner == 1): one work-group per row, maximum and sum through
 * local-memory trees.  Otherwise one work-item per slice.  Exponentials and
 * sums in double where the device has it.  A slice whose maximum is NaN or
 * +-Inf gives NaN everywhere (as the CPU reference).
 */
#ifndef SM_WG
#define SM_WG 256 /* work-group size of softmax_rows (a power of two) */
#endif

typedef bn_real sm_real;

inline float sm_max(float a, float b) { return (a > b || isnan(a)) ? a : b; }

inline float sm_out(float x, float m, sm_real s, int lg)
{
    sm_real d = (sm_real)x - (sm_real)m;
    return lg ? (float)(d - log(s)) : (float)(exp(d) / s);
}

/* The range of row elements of work-item lid (common.cl). */
#define SM_FOR(i, lid, len) BN_ROW_FOR(i, lid, 0, len, SM_WG)

__kernel __attribute__((reqd_work_group_size(SM_WG, 1, 1)))
void softmax_rows(__global const float *x, __global float *y, const bn_size len, const int lg, const long perturb)
{
    __local float lm[SM_WG];
    __local sm_real ls[SM_WG];
    const bn_size row = get_group_id(0);
    const uint lid = get_local_id(0);
    __global const float *xr = x + row * len;
    __global float *yr = y + row * len;
    float m = -INFINITY;
    SM_FOR(i, lid, len) m = sm_max(m, xr[i]);
    lm[lid] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = SM_WG / 2; s > 0; s >>= 1) {
        if (lid < s) lm[lid] = sm_max(lm[lid], lm[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = lm[0];
    sm_real acc = 0;
    if (isfinite(m))
        SM_FOR(i, lid, len) acc += exp((sm_real)xr[i] - (sm_real)m);
    const sm_real sum = bn_group_rsum(ls, acc, lid, SM_WG);
    SM_FOR(i, lid, len) {
        float v = isfinite(m) ? sm_out(xr[i], m, sum, lg) : NAN;
        if ((long)(row * len + i) == perturb) v = bn_perturb(v);
        yr[i] = v;
    }
}

/* One work-item per (outer, inner) slice; neighbours read neighbouring columns. */
__kernel void softmax_cols(__global const float *x, __global float *y, const bn_size outer, const bn_size len,
                           const bn_size inner, const int lg, const long perturb)
{
    const bn_size g = get_global_id(0);
    if (g >= outer * inner) return;
    const bn_size o = g / inner, c = g % inner;
    __global const float *xs = x + o * len * inner + c;
    __global float *ys = y + o * len * inner + c;
    float m = -INFINITY;
    for (bn_size l = 0; l < len; l++) m = sm_max(m, xs[l * inner]);
    sm_real s = 0;
    if (isfinite(m))
        for (bn_size l = 0; l < len; l++) s += exp((sm_real)xs[l * inner] - (sm_real)m);
    for (bn_size l = 0; l < len; l++) {
        float v = isfinite(m) ? sm_out(xs[l * inner], m, s, lg) : NAN;
        if ((long)(o * len * inner + l * inner + c) == perturb) v = bn_perturb(v);
        ys[l * inner] = v;
    }
}
