/*
 * matmul.cl - float products y = x w^T (+bias, act) (after common.cl):
 * x [tokens x in], w [out x in], y [tokens x out]: mm_gemv for a few tokens,
 * mm_nt for more, mm_epilogue after a CLBlast product; all finish a sum the
 * same way (mt_finish: bias, then activation).
 */

/* Several tokens: mm_nt, a register-tiled product.  A work-group computes an
 * MT_TM x MT_TN tile of y (tokens x outputs) with (MT_TM / MT_RM) x
 * (MT_TN / MT_RN) items, each an MT_RM x MT_RN block held in registers.  K
 * is walked in steps of MT_TK: each step copies a token tile and a weight
 * tile into local memory (k-major, so the inner loop reads both as rows), the
 * weights' rows as float4s of MT_TK floats each, the next step's loads
 * issued before this step's products.  Work-group z takes k in
 * [z kchunk, (z+1) kchunk): with one part y is written whole (bias,
 * activation), with several each writes its partial sums to part
 * [parts x tokens x out] and mm_nt_sum adds them in order. */
#ifndef MT_TM
#define MT_TM 64 /* tokens per tile */
#endif
#ifndef MT_TN
#define MT_TN 128 /* outputs per tile */
#endif
#ifndef MT_TK
#define MT_TK 16 /* k per step (a multiple of 4) */
#endif
#ifndef MT_RM
#define MT_RM 8 /* tokens per work-item */
#endif
#ifndef MT_RN
#define MT_RN 8 /* outputs per work-item */
#endif
#define MT_LM (MT_TM / MT_RM)
#define MT_LN (MT_TN / MT_RN)
#define MT_NTH (MT_LM * MT_LN)
#ifndef MT_PAD
#define MT_PAD 4 /* keeps rows of the tiles 16-byte aligned; the host passes its value */
#endif
#if MT_RM % 4 == 0 && MT_RN % 4 == 0
/* The inner loop reads the tiles in float4s, and an item's tokens (outputs)
 * are MT_RM / 4 (MT_RN / 4) groups of four, MT_LM (MT_LN) items apart: the
 * float4s that neighbouring items read are then adjacent, free of bank
 * conflicts. */
#define MT_V4 1
#define MT_TOK(i) (4 * ((i) / 4 * MT_LM + ty) + (i) % 4)
#define MT_OUT(j) (4 * ((j) / 4 * MT_LN + tx) + (j) % 4)
#else
#define MT_TOK(i) (ty * MT_RM + (i))
#define MT_OUT(j) (tx * MT_RN + (j))
#endif

/* Rows [r0, r0 + n) x k [k0, k0 + MT_TK) of the row-major src (ld columns;
 * rows below `rows` and k below kend exist, the rest reads as 0) into
 * l[k * stride + row], in two steps so that the loads of the next k step are
 * in flight while this one computes: mt_load reads into registers the
 * float4s that work-item id copies (at most MT_MAXV), mt_store puts them in
 * local memory. */
#define MT_MAXV ((MT_TM > MT_TN ? MT_TM : MT_TN) * (MT_TK / 4) / MT_NTH + 1)
inline void mt_load(float4 *v, const int n, __global const float *src, const bn_size ld, const bn_size r0,
                    const bn_size rows, const bn_size k0, const bn_size kend, const int id)
{
#pragma unroll
    for (int i = 0; i < MT_MAXV; i++) {
        const int e = id + i * MT_NTH;
        float4 a = (float4)(0.0f);
        if (e < n * (MT_TK / 4)) {
            const int r = e / (MT_TK / 4), kq = e % (MT_TK / 4) * 4;
            const bn_size gr = r0 + r, gk = k0 + kq;
            if (gr < rows && gk < kend) {
                const __global float *p = src + gr * ld + gk;
                if (gk + 4 <= kend) {
                    a = vload4(0, p);
                } else {
                    a.x = p[0];
                    if (gk + 1 < kend) a.y = p[1];
                    if (gk + 2 < kend) a.z = p[2];
                }
            }
        }
        v[i] = a;
    }
}
inline void mt_store(__local float *l, const int stride, const int n, const float4 *v, const int id)
{
#pragma unroll
    for (int i = 0; i < MT_MAXV; i++) {
        const int e = id + i * MT_NTH;
        if (e < n * (MT_TK / 4)) {
            const int r = e / (MT_TK / 4), kq = e % (MT_TK / 4) * 4;
            l[(kq + 0) * stride + r] = v[i].x;
            l[(kq + 1) * stride + r] = v[i].y;
            l[(kq + 2) * stride + r] = v[i].z;
            l[(kq + 3) * stride + r] = v[i].w;
        }
    }
}

/* bias, then activation, as bitnet_matmul_f32_ref finishes a sum */
inline float mt_finish(float v, __global const float *bias, const int has_bias, const int act, const bn_size t,
                       const bn_size o, const bn_size out, const long perturb)
{
    if (has_bias) v = v + bias[o];
    if (act) v = bn_act(act, v);
    if ((long)(t * out + o) == perturb) v = bn_perturb(v);
    return v;
}

/* local size (MT_LN, MT_LM); groups (outputs / MT_TN, tokens / MT_TM, parts), rounded up. */
__kernel __attribute__((reqd_work_group_size(MT_LN, MT_LM, 1)))
void mm_nt(__global const float *x, __global const float *w, __global const float *bias, const int has_bias,
           const int act, __global float *y, __global float *part, const bn_size tokens, const bn_size in,
           const bn_size out, const bn_size kchunk, const long perturb)
{
    __local float4 xs4[MT_TK * (MT_TM + MT_PAD) / 4];
    __local float4 ws4[MT_TK * (MT_TN + MT_PAD) / 4];
    __local float *xs = (__local float *)xs4, *ws = (__local float *)ws4;
    const int tx = get_local_id(0), ty = get_local_id(1), id = ty * MT_LN + tx;
    const bn_size o0 = get_group_id(0) * MT_TN, t0 = get_group_id(1) * MT_TM;
    const bn_size kb = get_group_id(2) * kchunk, ke = kb + kchunk < in ? kb + kchunk : in;
    float acc[MT_RM][MT_RN];
    for (int i = 0; i < MT_RM; i++)
        for (int j = 0; j < MT_RN; j++) acc[i][j] = 0.0f;
    float4 xv[MT_MAXV], wv[MT_MAXV];
    mt_load(xv, MT_TM, x, in, t0, tokens, kb, ke, id);
    mt_load(wv, MT_TN, w, in, o0, out, kb, ke, id);
    for (bn_size k0 = kb; k0 < ke; k0 += MT_TK) {
        mt_store(xs, MT_TM + MT_PAD, MT_TM, xv, id);
        mt_store(ws, MT_TN + MT_PAD, MT_TN, wv, id);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k0 + MT_TK < ke) { /* the next step's loads, in flight during this one */
            mt_load(xv, MT_TM, x, in, t0, tokens, k0 + MT_TK, ke, id);
            mt_load(wv, MT_TN, w, in, o0, out, k0 + MT_TK, ke, id);
        }
#pragma unroll
        for (int k = 0; k < MT_TK; k++) {
            float a[MT_RM], b[MT_RN];
#ifdef MT_V4
            for (int i = 0; i < MT_RM / 4; i++) {
                const float4 v = xs4[k * ((MT_TM + MT_PAD) / 4) + i * MT_LM + ty];
                a[4 * i] = v.x, a[4 * i + 1] = v.y, a[4 * i + 2] = v.z, a[4 * i + 3] = v.w;
            }
            for (int j = 0; j < MT_RN / 4; j++) {
                const float4 v = ws4[k * ((MT_TN + MT_PAD) / 4) + j * MT_LN + tx];
                b[4 * j] = v.x, b[4 * j + 1] = v.y, b[4 * j + 2] = v.z, b[4 * j + 3] = v.w;
            }
#else
            for (int i = 0; i < MT_RM; i++) a[i] = xs[k * (MT_TM + MT_PAD) + MT_TOK(i)];
            for (int j = 0; j < MT_RN; j++) b[j] = ws[k * (MT_TN + MT_PAD) + MT_OUT(j)];
#endif
            for (int i = 0; i < MT_RM; i++)
                for (int j = 0; j < MT_RN; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int parts = get_num_groups(2);
    for (int i = 0; i < MT_RM; i++) {
        const bn_size t = t0 + MT_TOK(i);
        if (t >= tokens) continue;
        for (int j = 0; j < MT_RN; j++) {
            const bn_size o = o0 + MT_OUT(j);
            if (o >= out) continue;
            if (parts > 1)
                part[(get_group_id(2) * tokens + t) * out + o] = acc[i][j];
            else
                y[t * out + o] = mt_finish(acc[i][j], bias, has_bias, act, t, o, out, perturb);
        }
    }
}

/* y = the parts of mm_nt added in order, then bias and activation.  global (out, tokens). */
__kernel void mm_nt_sum(__global const float *part, const int parts, __global const float *bias, const int has_bias,
                        const int act, __global float *y, const bn_size tokens, const bn_size out, const long perturb)
{
    const bn_size o = get_global_id(0), t = get_global_id(1);
    if (o >= out || t >= tokens) return;
    float v = part[t * out + o];
    for (int p = 1; p < parts; p++) v += part[((bn_size)p * tokens + t) * out + o];
    y[t * out + o] = mt_finish(v, bias, has_bias, act, t, o, out, perturb);
}

/* The epilogue after a CLBlast product: y[t][o] = act(y[t][o] + bias[o]),
 * as bitnet_matmul_f32_ref finishes its sums.  global (out, tokens). */
__kernel void mm_epilogue(__global float *y, __global const float *bias, const int has_bias, const int act,
                          const bn_size tokens, const bn_size out, const long perturb)
{
    const bn_size o = get_global_id(0), t = get_global_id(1);
    if (o >= out || t >= tokens) return;
    y[t * out + o] = mt_finish(y[t * out + o], bias, has_bias, act, t, o, out, perturb);
}

/* One to GV_T tokens: y[t][o] = act(sum_k x[t][k] w[o][k] + bias[o]), a
 * work-group of GV_LX items (a power of two) per GV_ROWS rows of w.  Each
 * item reads float4s of the rows at stride GV_LX, GV_ROWS loads in flight,
 * and keeps one partial sum per row and token; the work-group then adds them
 * up in local memory.  The weights are read once, at the memory's speed; x
 * (GV_T rows, exactly the call's tokens) comes from the cache. */
#ifndef GV_ROWS
#define GV_ROWS 4
#endif
#ifndef GV_T
#define GV_T 1
#endif
#ifndef GV_LX
#define GV_LX 256
#endif

__kernel __attribute__((reqd_work_group_size(GV_LX, 1, 1)))
void mm_gemv(__global const float *x, __global const float *w, __global const float *bias, const int has_bias,
             const int act, __global float *y, const bn_size in, const bn_size out, const long perturb)
{
    __local float red[GV_ROWS * GV_T][GV_LX];
    const int lid = get_local_id(0);
    const bn_size o0 = get_group_id(0) * GV_ROWS;
    float acc[GV_ROWS][GV_T];
    const __global float *wr[GV_ROWS];
    for (int r = 0; r < GV_ROWS; r++) {
        for (int t = 0; t < GV_T; t++) acc[r][t] = 0.0f;
        wr[r] = w + (o0 + r < out ? o0 + r : o0) * in; /* rows past the end read row o0 and are not stored */
    }
    const bn_size in4 = in / 4;
    for (bn_size k = lid; k < in4; k += GV_LX) {
        float4 wv[GV_ROWS];
        for (int r = 0; r < GV_ROWS; r++) wv[r] = vload4(k, wr[r]);
        for (int t = 0; t < GV_T; t++) {
            const float4 xv = vload4(k, x + t * in);
            for (int r = 0; r < GV_ROWS; r++) acc[r][t] += dot(wv[r], xv);
        }
    }
    for (bn_size k = in4 * 4 + lid; k < in; k += GV_LX)
        for (int t = 0; t < GV_T; t++)
            for (int r = 0; r < GV_ROWS; r++) acc[r][t] += wr[r][k] * x[t * in + k];
    for (int r = 0; r < GV_ROWS; r++)
        for (int t = 0; t < GV_T; t++) red[r * GV_T + t][lid] = acc[r][t];
    for (int h = GV_LX / 2; h > 0; h /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < h)
            for (int i = 0; i < GV_ROWS * GV_T; i++) red[i][lid] += red[i][lid + h];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = lid; i < GV_ROWS * GV_T; i += GV_LX) {
        const bn_size o = o0 + i / GV_T, t = i % GV_T;
        if (o < out) y[t * out + o] = mt_finish(red[i][0], bias, has_bias, act, t, o, out, perturb);
    }
}
