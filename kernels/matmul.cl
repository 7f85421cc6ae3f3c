/*
 * matmul.cl - float products y = x w^T (+bias, act) (after common.cl):
 * x [tokens x in], w [out x in], y [tokens x out].  A work-group computes a
 * MM_TS x MM_TS tile of y; K is walked in steps of MM_TS through local
 * memory; each work-item computes MM_WPT outputs of its tile column.
 */

#ifndef MM_TS
#define MM_TS 32 /* tile edge */
#endif
#ifndef MM_WPT
#define MM_WPT 4 /* outputs per work-item (MM_TS / MM_WPT rows of work-items) */
#endif
#define MM_RTS (MM_TS / MM_WPT)

/* local size (MM_TS, MM_RTS): dim 0 walks outputs o, dim 1 tokens t (MM_WPT each). */
__kernel __attribute__((reqd_work_group_size(MM_TS, MM_RTS, 1)))
void mm_f32(__global const float *x, __global const float *w, __global const float *bias, const int has_bias,
            const int act, __global float *y, const bn_size tokens, const bn_size in, const bn_size out,
            const long perturb)
{
    __local float xl[MM_TS][MM_TS + 1]; /* [token][k] */
    __local float wl[MM_TS][MM_TS + 1]; /* [o][k] */
    const int lo = get_local_id(0), lt = get_local_id(1);
    const bn_size o = get_group_id(0) * MM_TS + lo;
    const bn_size tb = get_group_id(1) * MM_TS;
    float acc[MM_WPT];
    for (int i = 0; i < MM_WPT; i++) acc[i] = 0.0f;
    for (bn_size k0 = 0; k0 < in; k0 += MM_TS) {
        for (int i = 0; i < MM_WPT; i++) {
            const int r = lt + i * MM_RTS;
            const bn_size t = tb + r, k = k0 + lo;
            xl[r][lo] = (t < tokens && k < in) ? x[t * in + k] : 0.0f;
            const bn_size ow = get_group_id(0) * MM_TS + r;
            wl[r][lo] = (ow < out && k < in) ? w[ow * in + k] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < MM_TS; k++) {
            const float wv = wl[lo][k];
            for (int i = 0; i < MM_WPT; i++) acc[i] = acc[i] + xl[lt + i * MM_RTS][k] * wv;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < MM_WPT; i++) {
        const bn_size t = tb + lt + i * MM_RTS;
        if (o < out && t < tokens) {
            float v = acc[i];
            if (has_bias) v = v + bias[o];
            if (act) v = bn_act(act, v);
            if ((long)(t * out + o) == perturb) v = bn_perturb(v);
            y[t * out + o] = v;
        }
    }
}

/* The epilogue after a CLBlast product: y[t][o] = act(y[t][o] + bias[o]),
 * as bitnet_matmul_f32_ref finishes its sums.  global (out, tokens). */
__kernel void mm_epilogue(__global float *y, __global const float *bias, const int has_bias, const int act,
                          const bn_size tokens, const bn_size out, const long perturb)
{
    const bn_size o = get_global_id(0), t = get_global_id(1);
    if (o >= out || t >= tokens) return;
    float v = y[t * out + o];
    if (has_bias) v = v + bias[o];
    if (act) v = bn_act(act, v);
    if ((long)(t * out + o) == perturb) v = bn_perturb(v);
    y[t * out + o] = v;
}

/* One token: y[o] = act(sum_k x[k] w[o][k] + bias[o]), a work-group of LX
 * items (a power of two, at most 256) per GV_ROWS rows of w.  Each item reads
 * float4s of the rows at stride LX, GV_ROWS loads in flight, and keeps one
 * partial sum per row; the work-group then adds them up in local memory.
 * The weights are read once, at the memory's speed; x comes from the cache. */
#ifndef GV_ROWS
#define GV_ROWS 4
#endif
#define GV_MAXLX 256

__kernel void mm_gemv(__global const float *x, __global const float *w, __global const float *bias, const int has_bias,
                      const int act, __global float *y, const bn_size in, const bn_size out, const long perturb)
{
    __local float red[GV_ROWS][GV_MAXLX];
    const int lid = get_local_id(0), lx = get_local_size(0);
    const bn_size o0 = get_group_id(0) * GV_ROWS;
    float acc[GV_ROWS];
    const __global float *wr[GV_ROWS];
    for (int r = 0; r < GV_ROWS; r++) {
        acc[r] = 0.0f;
        wr[r] = w + (o0 + r < out ? o0 + r : o0) * in; /* rows past the end read row o0 and are not stored */
    }
    const bn_size in4 = in / 4;
    for (bn_size k = lid; k < in4; k += lx) {
        const float4 xv = vload4(k, x);
        float4 wv[GV_ROWS];
        for (int r = 0; r < GV_ROWS; r++) wv[r] = vload4(k, wr[r]);
        for (int r = 0; r < GV_ROWS; r++) acc[r] += dot(wv[r], xv);
    }
    for (bn_size k = in4 * 4 + lid; k < in; k += lx)
        for (int r = 0; r < GV_ROWS; r++) acc[r] += wr[r][k] * x[k];
    for (int r = 0; r < GV_ROWS; r++) red[r][lid] = acc[r];
    for (int h = lx / 2; h > 0; h /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < h)
            for (int r = 0; r < GV_ROWS; r++) red[r][lid] += red[r][lid + h];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < GV_ROWS && o0 + lid < out) {
        const bn_size o = o0 + lid;
        float v = red[lid][0];
        if (has_bias) v = v + bias[o];
        if (act) v = bn_act(act, v);
        if ((long)o == perturb) v = bn_perturb(v);
        y[o] = v;
    }
}
