/*
 * reduce.cl - sum, mean, max, min, argmax.  Rows ([kept, reduced]) take two
 * passes with no float atomics, so results do not depend on scheduling:
 * reduce_part gives one partial per (row, chunk) through a local-memory
 * tree, reduce_final combines a row's partials in order.  [outer, len,
 * inner] reduced over len: reduce_cols, one work-item per output.
 * Sums in double where the device has it.  max/min propagate NaN; argmax
 * gives the first maximum, or the first NaN.  Op codes: bitnet_reduce_op.
 */
#ifndef RD_WG
#define RD_WG 256
#endif
#ifndef BN_GPU
#define BN_GPU 1
#endif

#if BN_HAS_FP64
typedef double rd_real;
#else
typedef float rd_real;
#endif

/* Is (v, vi) a better pick than (b, bi)?  op 3 = min, else max. */
inline int rd_better(int op, float v, long vi, float b, long bi)
{
    if (isnan(b)) return isnan(v) && vi < bi;
    if (isnan(v)) return 1;
    if (op == 3 ? v < b : v > b) return 1;
    return v == b && vi < bi;
}

#if BN_GPU
#define RD_FOR(i, lid, lo, hi) for (bn_size i = (lo) + (lid); i < (hi); i += RD_WG)
#else
#define RD_FOR(i, lid, lo, hi)                                                                 \
    for (bn_size per_ = ((hi) - (lo) + RD_WG - 1) / RD_WG, i = (lo) + (lid)*per_;              \
         i < (hi) && i < (lo) + ((bn_size)(lid) + 1) * per_; i++)
#endif

__kernel __attribute__((reqd_work_group_size(RD_WG, 1, 1)))
void reduce_part(__global const float *x, __global rd_real *psum, __global float *pval, __global long *pidx,
                 const bn_size len, const bn_size chunk, const bn_size nchunks, const int op)
{
    __local rd_real ls[RD_WG];
    __local float lv[RD_WG];
    __local long li[RD_WG];
    const bn_size g = get_group_id(0), row = g / nchunks, c = g % nchunks;
    const uint lid = get_local_id(0);
    const bn_size lo = c * chunk, hi = lo + chunk < len ? lo + chunk : len;
    __global const float *xr = x + row * len;
    rd_real s = 0;
    float best = NAN;
    long bi = LONG_MAX; /* LONG_MAX: nothing seen */
    if (op <= 1) {
        RD_FOR(i, lid, lo, hi) s += (rd_real)xr[i];
    } else {
        RD_FOR(i, lid, lo, hi) {
            float v = xr[i];
            if (bi == LONG_MAX || rd_better(op, v, (long)i, best, bi)) { best = v; bi = (long)i; }
        }
    }
    ls[lid] = s;
    lv[lid] = best;
    li[lid] = bi;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = RD_WG / 2; h > 0; h >>= 1) {
        if (lid < h) {
            ls[lid] += ls[lid + h];
            if (li[lid + h] != LONG_MAX && (li[lid] == LONG_MAX || rd_better(op, lv[lid + h], li[lid + h], lv[lid], li[lid]))) {
                lv[lid] = lv[lid + h];
                li[lid] = li[lid + h];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        psum[g] = ls[0];
        pval[g] = lv[0];
        pidx[g] = li[0];
    }
}

inline void rd_put(int op, __global float *y, __global long *idx, bn_size o, rd_real s, float m, long mi, bn_size n,
                   int has_y, int has_idx, long perturb)
{
    float v = op == 0 ? (float)s : op == 1 ? (float)(s / (rd_real)n) : op == 4 ? (float)mi : m;
    if ((long)o == perturb) {
        v = bn_perturb(v);
        mi ^= 1;
    }
    if (has_y) y[o] = v;
    if (has_idx) idx[o] = mi;
}

__kernel void reduce_final(__global const rd_real *psum, __global const float *pval, __global const long *pidx,
                           __global float *y, __global long *idx, const bn_size rows, const bn_size nchunks,
                           const int op, const bn_size len, const int has_y, const int has_idx, const long perturb)
{
    const bn_size r = get_global_id(0);
    if (r >= rows) return;
    rd_real s = 0;
    float m = pval[r * nchunks];
    long mi = pidx[r * nchunks];
    for (bn_size c = 0; c < nchunks; c++) {
        s += psum[r * nchunks + c];
        if (c && rd_better(op, pval[r * nchunks + c], pidx[r * nchunks + c], m, mi)) {
            m = pval[r * nchunks + c];
            mi = pidx[r * nchunks + c];
        }
    }
    rd_put(op, y, idx, r, s, m, mi, len, has_y, has_idx, perturb);
}

__kernel void reduce_cols(__global const float *x, __global float *y, __global long *idx, const bn_size outer,
                          const bn_size len, const bn_size inner, const int op, const int has_y, const int has_idx,
                          const long perturb)
{
    const bn_size g = get_global_id(0);
    if (g >= outer * inner) return;
    __global const float *xs = x + (g / inner) * len * inner + g % inner;
    rd_real s = 0;
    float m = xs[0];
    long mi = 0;
    for (bn_size l = 0; l < len; l++) {
        float v = xs[l * inner];
        s += (rd_real)v;
        if (l && rd_better(op, v, (long)l, m, mi)) { m = v; mi = (long)l; }
    }
    rd_put(op, y, idx, g, s, m, mi, len, has_y, has_idx, perturb);
}

/* ---- GPU layout (lib/opencl/reduce.c picks it on GPUs) ------------------
 * Rows [rows, len] reduced over len in two passes.  reduce_gpu_part: each
 * row gets `groups` work-groups (fixed by len, rows and the device's compute
 * units, so results are the same from run to run); work-item t of the row
 * reads float4 number t, t + stride, t + 2*stride ... (stride = groups *
 * RD_WG), so consecutive work-items read consecutive 16-byte words, four
 * loads in flight per work-item; the 0..3 elements before the first aligned
 * float4 of the row and after the last go to the first work-items.  Each
 * work-item keeps its own sum (double where the device has it) or best
 * (value, index), then a fixed local-memory tree gives one partial per
 * group.  reduce_gpu_final: one work-group per row combines the row's
 * partials (work-item l takes partials l, l + RD_WG, ... in order) and a
 * second fixed tree.  No atomics: the result depends only on the shape and
 * the device. */

/* Takes (v, vi) into (best, bi) when it wins; bi == LONG_MAX: nothing yet. */
#define RD_TAKE(v, vi)                                                                   \
    do {                                                                                 \
        float v_ = (v);                                                                  \
        long vi_ = (long)(vi);                                                           \
        if (bi == LONG_MAX || rd_better(op, v_, vi_, best, bi)) { best = v_; bi = vi_; } \
    } while (0)

#define RD_TAKE4(a, i0)               \
    do {                              \
        RD_TAKE((a).x, (i0));         \
        RD_TAKE((a).y, (i0) + 1);     \
        RD_TAKE((a).z, (i0) + 2);     \
        RD_TAKE((a).w, (i0) + 3);     \
    } while (0)

inline rd_real rd_sum4(float4 a) { return ((rd_real)a.x + (rd_real)a.y) + ((rd_real)a.z + (rd_real)a.w); }

/* The local tree of a work-group: (ls, lv, li)[0] = the group's result. */
inline void rd_tree(int op, uint lid, __local rd_real *ls, __local float *lv, __local long *li)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = RD_WG / 2; h > 0; h >>= 1) {
        if (lid < h) {
            if (op <= 1)
                ls[lid] += ls[lid + h];
            else if (li[lid + h] != LONG_MAX &&
                     (li[lid] == LONG_MAX || rd_better(op, lv[lid + h], li[lid + h], lv[lid], li[lid]))) {
                lv[lid] = lv[lid + h];
                li[lid] = li[lid + h];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

__kernel __attribute__((reqd_work_group_size(RD_WG, 1, 1)))
void reduce_gpu_part(__global const float *restrict x, __global rd_real *psum, __global float *pval, __global long *pidx,
                     const bn_size len, const bn_size groups, const int op)
{
    __local rd_real ls[RD_WG];
    __local float lv[RD_WG];
    __local long li[RD_WG];
    const bn_size g = get_group_id(0), row = g / groups, c = g % groups;
    const uint lid = get_local_id(0);
    const bn_size off = row * len, stride = groups * RD_WG, t = c * RD_WG + lid;
    bn_size head = (4 - off % 4) % 4;
    if (head > len) head = len;
    const bn_size n4 = (len - head) / 4, tail0 = head + 4 * n4;
    __global const float *restrict xr = x + off;
    __global const float4 *restrict x4 = (__global const float4 *)(xr + head); /* 16-byte aligned: buffers are */
    rd_real s0 = 0, s1 = 0;
    float best = NAN;
    long bi = LONG_MAX;
    bn_size i = t;
    if (op <= 1) {
        if (t < head) s0 += (rd_real)xr[t];
        for (; i + 3 * stride < n4; i += 4 * stride) {
            float4 a = x4[i], b = x4[i + stride], d = x4[i + 2 * stride], e = x4[i + 3 * stride];
            s0 += rd_sum4(a);
            s1 += rd_sum4(b);
            s0 += rd_sum4(d);
            s1 += rd_sum4(e);
        }
        for (; i < n4; i += stride) s0 += rd_sum4(x4[i]);
        if (t < len - tail0) s1 += (rd_real)xr[tail0 + t];
    } else { /* element indices visited in increasing order */
        if (t < head) RD_TAKE(xr[t], t);
        for (; i + 3 * stride < n4; i += 4 * stride) {
            float4 a = x4[i], b = x4[i + stride], d = x4[i + 2 * stride], e = x4[i + 3 * stride];
            RD_TAKE4(a, head + 4 * i);
            RD_TAKE4(b, head + 4 * (i + stride));
            RD_TAKE4(d, head + 4 * (i + 2 * stride));
            RD_TAKE4(e, head + 4 * (i + 3 * stride));
        }
        for (; i < n4; i += stride) {
            float4 a = x4[i];
            RD_TAKE4(a, head + 4 * i);
        }
        if (t < len - tail0) RD_TAKE(xr[tail0 + t], tail0 + t);
    }
    ls[lid] = s0 + s1;
    lv[lid] = best;
    li[lid] = bi;
    rd_tree(op, lid, ls, lv, li);
    if (lid == 0) {
        psum[g] = ls[0];
        pval[g] = lv[0];
        pidx[g] = li[0];
    }
}

__kernel __attribute__((reqd_work_group_size(RD_WG, 1, 1)))
void reduce_gpu_final(__global const rd_real *psum, __global const float *pval, __global const long *pidx,
                      __global float *y, __global long *idx, const bn_size groups, const int op, const bn_size len,
                      const int has_y, const int has_idx, const long perturb)
{
    __local rd_real ls[RD_WG];
    __local float lv[RD_WG];
    __local long li[RD_WG];
    const bn_size row = get_group_id(0);
    const uint lid = get_local_id(0);
    rd_real s = 0;
    float best = NAN;
    long bi = LONG_MAX;
    for (bn_size c = lid; c < groups; c += RD_WG) {
        bn_size p = row * groups + c;
        s += psum[p];
        if (pidx[p] != LONG_MAX) RD_TAKE(pval[p], pidx[p]);
    }
    ls[lid] = s;
    lv[lid] = best;
    li[lid] = bi;
    rd_tree(op, lid, ls, lv, li);
    if (lid == 0) rd_put(op, y, idx, row, ls[0], lv[0], li[0], len, has_y, has_idx, perturb);
}

/* [outer, len, inner] reduced over len on GPUs: reduce_cols has one
 * work-item per output, too few when there are few outputs.  Here the len
 * rows are cut into nchunks chunks (fixed by the shape and the device):
 * work-item (output g, chunk c) walks its chunk down column g (neighbouring
 * work-items read neighbouring floats) into partial c * n_out + g, then
 * reduce_gpu_cols_final combines an output's partials in chunk order. */
__kernel void reduce_gpu_cols_part(__global const float *restrict x, __global rd_real *psum, __global float *pval,
                                   __global long *pidx, const bn_size outer, const bn_size len, const bn_size inner,
                                   const bn_size chunk, const int op)
{
    const bn_size g = get_global_id(0), c = get_global_id(1), n_out = outer * inner;
    if (g >= n_out) return;
    const bn_size l0 = c * chunk, l1 = l0 + chunk < len ? l0 + chunk : len;
    __global const float *xs = x + (g / inner) * len * inner + g % inner;
    rd_real s0 = 0, s1 = 0;
    float best = NAN;
    long bi = LONG_MAX;
    bn_size l = l0;
    if (op <= 1) {
        for (; l + 4 <= l1; l += 4) {
            float a = xs[l * inner], b = xs[(l + 1) * inner], d = xs[(l + 2) * inner], e = xs[(l + 3) * inner];
            s0 += (rd_real)a + (rd_real)b;
            s1 += (rd_real)d + (rd_real)e;
        }
        for (; l < l1; l++) s0 += (rd_real)xs[l * inner];
    } else {
        for (; l + 4 <= l1; l += 4) {
            float a = xs[l * inner], b = xs[(l + 1) * inner], d = xs[(l + 2) * inner], e = xs[(l + 3) * inner];
            RD_TAKE(a, l);
            RD_TAKE(b, l + 1);
            RD_TAKE(d, l + 2);
            RD_TAKE(e, l + 3);
        }
        for (; l < l1; l++) RD_TAKE(xs[l * inner], l);
    }
    if (op <= 1) { /* only what the final pass reads */
        psum[c * n_out + g] = s0 + s1;
    } else {
        pval[c * n_out + g] = best;
        pidx[c * n_out + g] = bi;
    }
}

__kernel void reduce_gpu_cols_final(__global const rd_real *psum, __global const float *pval,
                                    __global const long *pidx, __global float *y, __global long *idx,
                                    const bn_size n_out, const bn_size nchunks, const int op, const bn_size len,
                                    const int has_y, const int has_idx, const long perturb)
{
    const bn_size g = get_global_id(0);
    if (g >= n_out) return;
    rd_real s = 0;
    float best = NAN;
    long bi = LONG_MAX;
    for (bn_size c = 0; c < nchunks; c++) {
        if (op <= 1) s += psum[c * n_out + g];
        else RD_TAKE(pval[c * n_out + g], pidx[c * n_out + g]);
    }
    rd_put(op, y, idx, g, s, best, bi, len, has_y, has_idx, perturb);
}
