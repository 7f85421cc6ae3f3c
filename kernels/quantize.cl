/*
 * quantize.cl - BitNet b1.58 quantization on OpenCL devices (after
 * common.cl).  Bit-exact with the CPU: no float sum and no float division
 * is ever evaluated here (see lib/cpu/quantize.h).
 *
 *   q_absum     exact sum of |w| over pieces of slices (tensor, rows or
 *               groups), as 11 carry-save 32-bit limbs per piece (unit 2^-149),
 *               or in a short form (two halves and a shift) when the piece's
 *               exponents are close; the host merges them, rounds once and
 *               computes d and 1/d
 *   q_pack      codes q = clamp(rint(w * s), -1, 1) written as T2 bytes
 *   q_absum_gpu, q_pack_gpu  the same two for GPUs (-DQ_GPU, below): coalesced
 *               float4 loads, per-item double sums proven exact, T2 words
 *   q_acts      per-row absmax int8 quantization (one work-group per row)
 *   q_dequant_w w = q * d from T2 (integer ops on the bits of d)
 *   q_dequant_a x = q / s (exact division from integers)
 *
 * The CPU layout sums with ulong/uint arithmetic only (any device); the
 * GPU layout adds in double where that is provably exact, so the host picks
 * it only on devices with fp64.
 */

#ifndef Q_WG
#define Q_WG 64 /* work-group size of q_absum and q_acts (a power of two) */
#endif
#define Q_LIMBS 11
#define Q_SPAN 32
/* Marks a piece written in the short form (the top limb of a real sum stays
 * below 2^5: sums are below 2^325). */
#define Q_SHORT 0x8000000000000000UL

/* acc += v * 2^sh as 32-bit pieces into carry-save limbs (limb i: 2^(32 i)). */
inline void q_add_shifted(ulong *acc, ulong v, uint sh)
{
    uint i = sh >> 5, b = sh & 31;
    ulong lo = (v << b) & 0xffffffffUL;
    ulong mid = (b ? (v >> (32 - b)) : (v >> 32)) & 0xffffffffUL;
    ulong hi = b ? (v >> (64 - b)) : 0UL;
    acc[i] += lo;
    acc[i + 1] += mid;
    acc[i + 2] += hi;
}

/* Slice sl: start and length; `kind` 1 tensor, 2 row, 3 group. */
inline void q_slice(uint kind, bn_size sl, bn_size rows, bn_size cols, bn_size group, bn_size *start, bn_size *len)
{
    if (kind == 1) {
        *start = 0;
        *len = rows * cols;
    } else if (kind == 2) {
        *start = sl * cols;
        *len = cols;
    } else {
        bn_size ng = (cols + group - 1) / group, r = sl / ng, c0 = (sl % ng) * group;
        *start = r * cols + c0;
        *len = cols - c0 < group ? cols - c0 : group;
    }
}

__kernel void q_absum(__global const uint *w, uint kind, bn_size rows, bn_size cols, bn_size group,
                      bn_size pieces, uint items, __global ulong *part, __global uint *flag)
{
    __local ulong red[Q_WG];
    __local uint rmax[Q_WG], rmin[Q_WG];
    const uint lid = get_local_id(0);
    const bn_size gid = get_group_id(0), sl = gid / pieces, pc = gid % pieces;
    bn_size start, len;
    q_slice(kind, sl, rows, cols, group, &start, &len);
    const bn_size piece = (bn_size)Q_WG * items, b = pc * piece;
    const bn_size e = b + piece < len ? b + piece : len;
    /* 1: the exponent range of the piece */
    uint mx = 0, mn = 0xffffffffu;
    for (bn_size i = b + lid; i < e; i += Q_WG) {
        uint u = w[start + i] & 0x7fffffffu;
        mx = max(mx, u);
        mn = min(mn, u - 1u); /* zero wraps: ignored */
    }
    rmax[lid] = mx;
    rmin[lid] = mn;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = Q_WG / 2; s > 0; s >>= 1) {
        if (lid < s) {
            rmax[lid] = max(rmax[lid], rmax[lid + s]);
            rmin[lid] = min(rmin[lid], rmin[lid + s]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    mx = rmax[0];
    mn = rmin[0];
    if (mx >= 0x7f800000u) {
        if (lid == 0) flag[0] = 1u;
        return;
    }
    ulong acc[Q_LIMBS];
    for (uint k = 0; k < Q_LIMBS; k++) acc[k] = 0;
    if (mn == 0xffffffffu) { /* all zero */
        if (lid == 0)
            for (uint k = 0; k < Q_LIMBS; k++) part[gid * Q_LIMBS + k] = 0;
        return;
    }
    const uint emin = (mn + 1u) >> 23, emax = mx >> 23;
    if (emin > 0 && emax - emin <= Q_SPAN) {
        /* 2a: each |w| is m << (e - emin), a uint64 below 2^56; up to 64 per item */
        ulong s = 0;
        for (bn_size i = b + lid; i < e; i += Q_WG) {
            uint u = w[start + i] & 0x7fffffffu, ex = u >> 23;
            if (ex) s += (ulong)((u & 0x7fffffu) | 0x800000u) << (ex - emin);
        }
        /* reduce the low and high halves separately: no overflow for any Q_WG */
        red[lid] = s & 0xffffffffUL;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint t = Q_WG / 2; t > 0; t >>= 1) {
            if (lid < t) red[lid] += red[lid + t];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        ulong lo = red[0];
        barrier(CLK_LOCAL_MEM_FENCE);
        red[lid] = s >> 32;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint t = Q_WG / 2; t > 0; t >>= 1) {
            if (lid < t) red[lid] += red[lid + t];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (lid == 0) { /* the short form: (lo + hi * 2^32) * 2^(emin - 1), marked in the top limb */
            part[gid * Q_LIMBS + 0] = lo;
            part[gid * Q_LIMBS + 1] = red[0];
            part[gid * Q_LIMBS + 2] = emin - 1u;
            part[gid * Q_LIMBS + Q_LIMBS - 1] = Q_SHORT;
        }
        return;
    }
    /* 2b: wide range or subnormals (rare): one item adds every element into
     * the limbs, so that no private array lives across a barrier */
    if (lid == 0) {
        for (bn_size i = b; i < e; i++) {
            uint u = w[start + i] & 0x7fffffffu, ex = u >> 23, m = u & 0x7fffffu;
            if (ex) q_add_shifted(acc, (ulong)(m | 0x800000u), ex - 1u);
            else q_add_shifted(acc, (ulong)m, 0u);
        }
        for (uint k = 0; k < Q_LIMBS; k++) part[gid * Q_LIMBS + k] = acc[k];
    }
}

/* One item per T2 byte: byte j of block blk of row r holds columns
 * 128 blk + 32 k + j, k = 0..3.  Scale of column c: s[r*sr + c/group]. */
__kernel void q_pack(__global const float *w, bn_size rows, bn_size cols, bn_size nb, bn_size sr, bn_size group,
                     __global const float *s, __global uchar *t2)
{
    const bn_size id = get_global_id(0);
    if (id >= rows * nb * 32) return;
    const bn_size r = id / (nb * 32), rest = id % (nb * 32), blk = rest / 32, j = rest % 32;
    uint v = 0;
    for (uint k = 0; k < 4; k++) {
        bn_size c = blk * 128 + 32 * k + j;
        uint code = 1;
        if (c < cols) {
            float p = w[r * cols + c] * s[r * sr + c / group];
            code = 1u + (p > 0.5f ? 1u : 0u) - (p < -0.5f ? 1u : 0u); /* clamp(rint(p), -1, 1) + 1 */
        }
        v |= code << (2 * k);
    }
    t2[id] = (uchar)v;
}

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

/* One work-group per row: m = max |x| (as bits), s = 127 / max(m, 1e-5f),
 * q = clamp(rint(x * s), -128, 127). */
__kernel void q_acts(__global const float *x, bn_size cols, __global char *q, __global float *s,
                     __global uint *flag)
{
    __local uint red[Q_WG];
    const uint lid = get_local_id(0);
    const bn_size r = get_group_id(0);
    __global const float *xr = x + r * cols;
    uint mx = 0;
    for (bn_size c = lid; c < cols; c += Q_WG) mx = max(mx, as_uint(xr[c]) & 0x7fffffffu);
    mx = bn_group_umax(red, mx, lid, Q_WG);
    if (mx >= 0x7f800000u) {
        if (lid == 0) flag[0] = 1u;
        return;
    }
    const float sc = q_act_scale(mx);
    if (lid == 0) s[r] = sc;
    for (bn_size c = lid; c < cols; c += Q_WG) {
        float v = rint(xr[c] * sc);
        v = clamp(v, -128.0f, 127.0f);
        q[r * cols + c] = (char)(int)v;
    }
}

__kernel void q_dequant_w(__global const uchar *t2, bn_size rows, bn_size cols, bn_size rb, bn_size sr,
                          bn_size group, __global const float *d, __global float *w, __global uint *flag)
{
    const bn_size id = get_global_id(0);
    if (id >= rows * cols) return;
    const bn_size r = id / cols, c = id % cols;
    uint code = (t2[r * rb + (c / 128) * 32 + c % 32] >> (2 * ((c % 128) / 32))) & 3u;
    uint db = as_uint(d[r * sr + c / group]);
    if (code == 3u) flag[0] = 1u;
    /* q * d for q in {-1, 0, 1} and finite d, exactly as IEEE multiplication */
    uint out = code == 2u ? db : code == 0u ? db ^ 0x80000000u : db & 0x80000000u;
    w[id] = as_float(out);
}

__kernel void q_dequant_a(__global const char *q, bn_size rows, bn_size cols, __global const float *s,
                          __global float *x)
{
    const bn_size id = get_global_id(0);
    if (id >= rows * cols) return;
    x[id] = as_float(q_div_bits((int)q[id], s[id / cols]));
}

/* ---- GPU layout (built with -DQ_GPU; lib/opencl/quantize.c picks it on GPUs
 * with fp64, or everywhere with BITNET_OCL_FORCE_GPU_LAYOUT=1) -------------
 *
 * q_absum_gpu: a "segment" of Q_SEG consecutive work-items (Q_SEG divides
 * Q_GWG; Q_SEG is a kernel argument) sums one piece of one slice with
 * coalesced grid-stride loads (float4 when the slice starts 16-byte aligned).
 * Exactness, per work-item: it adds its N values |w| in double, in any
 * order, and tracks the largest and smallest nonzero |w| bits.  When no
 * value is subnormal, every |w| is a multiple of u = 2^(emin - 150) and
 * below 2^(emax - 126); if log2(N) + emax - emin <= 29 every partial sum is
 * a multiple of u below 2^53 u, so no addition rounded and the double IS
 * the exact sum (any order, any device with IEEE double addition).  Other
 * work-items (wide range, subnormals: rare, and a few dozen values each)
 * read their values again and add them exactly as integers.  Combining
 * the work-items: each exact sum is an integer v 2^sh (unit 2^-149, v odd);
 * when every v has at most 128 bits and each segment's items lie within 119
 * bits above the segment's lowest bit E, the segment adds v 2^(sh - E) as
 * 128-bit integers (two words with carries: cheap in local memory);
 * otherwise (ranges beyond 2^90 or so) the whole work-group adds 11
 * carry-save 32-bit limbs one by one.
 * Integer addition is exact in any order.  The segment's first work-item
 * writes the piece: the short form when the sum has at most 64 significant
 * bits, else carry-save limbs (the two forms of q_absum, merged by the same
 * host code). */
#ifdef Q_GPU
#ifndef Q_GWG
#define Q_GWG 256 /* work-group size of q_absum_gpu (a power of two) */
#endif
#ifndef Q_ABSUM_DESC
#define Q_ABSUM_DESC 0 /* 1: one slice (per tensor), walked by the whole grid from its end to its start */
#endif

/* acc += |w| (bits u, finite) exactly, as 32-bit pieces (q_add_shifted). */
inline void qg_add_exact(ulong *acc, uint u)
{
    uint ex = u >> 23, m = u & 0x7fffffu;
    if (ex) q_add_shifted(acc, (ulong)(m | 0x800000u), ex - 1u);
    else if (m) q_add_shifted(acc, (ulong)m, 0u);
}

inline uint qg_ctz(uint x) { return 31u - clz(x & (0u - x)); }

/* Runs BODY on the four |w| bits u of the uint4 v (already masked). */
#define QG_EACH4(v, BODY)                                                                  \
    {                                                                                      \
        uint u = (v).x;                                                                    \
        BODY;                                                                              \
        u = (v).y;                                                                         \
        BODY;                                                                              \
        u = (v).z;                                                                         \
        BODY;                                                                              \
        u = (v).w;                                                                         \
        BODY;                                                                              \
    }

/* Runs BODY on each |w| bits u of the item's share of [b, e) (coalesced).
 * With Q_ABSUM_DESC (per-tensor slices: the host), on its share of the
 * whole slice [0, slen) instead: float4 j of the slice goes to item gi (of
 * ng items in all) where j = n4 - 1 - gi - k ng, four loads in flight
 * before the first use, so the grid reads the slice from its end to its
 * start and the first rows, which q_pack_gpu reads first, last. */
#if Q_ABSUM_DESC
#define QG_FOR_EACH(BODY)                                                                  \
    if (gs < nseg) {                                                                       \
        __global const uint4 *w4_ = (__global const uint4 *)ws;                            \
        const bn_size ng_ = nseg * (bn_size)seg, gi_ = gs * (bn_size)seg + tid, n4_ = slen / 4; \
        bn_size k_ = gi_;                                                                  \
        for (; k_ + 3 * ng_ < n4_; k_ += 4 * ng_) {                                        \
            uint4 q4_[4]; /* four loads in flight before the first use */                  \
            for (int j_ = 0; j_ < 4; j_++) q4_[j_] = w4_[n4_ - 1 - k_ - (bn_size)j_ * ng_] & (uint4)0x7fffffffu; \
            for (int j_ = 0; j_ < 4; j_++) QG_EACH4(q4_[j_], BODY)                         \
        }                                                                                  \
        for (; k_ < n4_; k_ += ng_) {                                                      \
            const uint4 u4 = w4_[n4_ - 1 - k_] & (uint4)0x7fffffffu;                       \
            QG_EACH4(u4, BODY)                                                             \
        }                                                                                  \
        for (bn_size i = n4_ * 4 + gi_; i < slen; i += ng_) {                              \
            uint u = as_uint(ws[i]) & 0x7fffffffu;                                         \
            BODY;                                                                          \
        }                                                                                  \
    }
#else
#define QG_FOR_EACH(BODY)                                                                  \
    if (vec) {                                                                             \
        for (bn_size i = b + tid; i < b4 * 4 && i < e; i += seg) {                         \
            uint u = as_uint(ws[i]) & 0x7fffffffu;                                         \
            BODY;                                                                          \
        }                                                                                  \
        __global const uint4 *w4_ = (__global const uint4 *)ws;                            \
        for (bn_size i4_ = b4 + tid; i4_ < e4; i4_ += seg) {                               \
            const uint4 u4 = w4_[i4_] & (uint4)0x7fffffffu;                                \
            QG_EACH4(u4, BODY)                                                             \
        }                                                                                  \
        for (bn_size i = (e4 > b4 ? e4 : b4) * 4 + tid; i < e; i += seg) {                 \
            uint u = as_uint(ws[i]) & 0x7fffffffu;                                         \
            BODY;                                                                          \
        }                                                                                  \
    } else {                                                                               \
        for (bn_size i = b + tid; i < e; i += seg) {                                       \
            uint u = as_uint(ws[i]) & 0x7fffffffu;                                         \
            BODY;                                                                          \
        }                                                                                  \
    }
#endif

inline ulong qg_ctz64(ulong x) { return 63UL - clz(x & (0UL - x)); }

/* Writes a piece: v = lo + hi 2^64 (units 2^(e - 149)) in the short form when
 * it has at most 64 significant bits, else as 11 carried 32-bit limbs. */
inline void qg_write(__global ulong *p, ulong lo, ulong hi, uint e)
{
    if (lo == 0 && hi == 0) {
        for (int k = 0; k < Q_LIMBS; k++) p[k] = 0;
        return;
    }
    uint tz = lo ? (uint)qg_ctz64(lo) : 64u + (uint)qg_ctz64(hi);
    if (tz >= 64u) lo = hi >> (tz - 64u), hi = 0;
    else if (tz) lo = (lo >> tz) | (hi << (64u - tz)), hi >>= tz;
    e += tz;
    if (hi == 0 && e <= 224u) {
        p[0] = lo & 0xffffffffUL;
        p[1] = lo >> 32;
        p[2] = e;
        p[Q_LIMBS - 1] = Q_SHORT;
        return;
    }
    ulong wd[Q_LIMBS + 4];
    for (int k = 0; k < Q_LIMBS + 4; k++) wd[k] = 0;
    q_add_shifted(wd, lo, e);
    q_add_shifted(wd, hi, e + 64u);
    for (int k = 0; k < Q_LIMBS; k++) p[k] = wd[k]; /* carry-save, below 2^34 each (the top one < 2^34 too) */
}

__kernel __attribute__((reqd_work_group_size(Q_GWG, 1, 1))) void
q_absum_gpu(__global const float *w, uint kind, bn_size rows, bn_size cols, bn_size group, bn_size pieces,
            bn_size plen, uint seg, bn_size nseg, __global ulong *part, __global uint *flag)
{
    __local ulong red[2 * Q_GWG];
    __local uint smin[Q_GWG], smax[Q_GWG];
    __local volatile uint wide;
    const uint lid = get_local_id(0), tid = lid % seg;
    const bn_size gs = get_group_id(0) * (Q_GWG / seg) + lid / seg;
    if (lid == 0) wide = 0;
    bn_size b = 0, e = 0, start = 0, slen = 0;
    if (gs < nseg) {
        bn_size sl = gs / pieces, pc = gs % pieces;
        q_slice(kind, sl, rows, cols, group, &start, &slen);
        b = pc * plen;
        e = b + plen < slen ? b + plen : slen;
    }
    __global const float *ws = w + start;
    const int vec = (start & 3) == 0;
    const bn_size b4 = (b + 3) / 4, e4 = e / 4;
    /* pass 1: in double, with the exponent range and count */
    uint mx = 0, mn = 0xffffffffu, cnt = 0;
    double acc = 0.0;
    QG_FOR_EACH((mx = max(mx, u), mn = min(mn, u - 1u), acc += (double)as_float(u), cnt++));
    const int bad = mx >= 0x7f800000u, zero = mn == 0xffffffffu;
    if (bad) flag[0] = 1u;
    const uint emin = (mn + 1u) >> 23, emax = mx >> 23;
    const int slow = !bad && !zero && (emin == 0 || emax - emin + (32u - clz(cnt)) > 29u);
    /* the item's exact sum: vlo + vhi 2^64 in units of 2^(sh - 149), lowest bit set */
    ulong vlo = 0, vhi = 0;
    uint sh = 0;
    int own_wide = 0;
    ulong limb[Q_LIMBS]; /* the integer pass (rare: a spilled array is fine) */
    for (uint k = 0; k < Q_LIMBS; k++) limb[k] = 0;
    if (!bad && !zero && !slow) { /* acc = m 2^(x - 1075) exactly */
        ulong bits = as_ulong(acc), m = (bits & 0xfffffffffffffUL) | 0x10000000000000UL;
        int x = (int)(bits >> 52) - 926;
        uint tz = (uint)qg_ctz64(m);
        m >>= tz, x += (int)tz;
        if (x < 0) m >>= -x, x = 0; /* never: the sum is a multiple of 2^-149 */
        vlo = m;
        sh = (uint)x;
    } else if (slow) {
        QG_FOR_EACH(qg_add_exact(limb, u));
        ulong c = 0;
        int lo = -1, hi = -1;
        for (int k = 0; k < Q_LIMBS; k++) { /* carried: 32-bit words */
            ulong x = limb[k] + c;
            limb[k] = x & 0xffffffffUL;
            c = x >> 32;
            if (limb[k]) {
                if (lo < 0) lo = k;
                hi = k;
            }
        }
        if (lo >= 0) {
            uint bb = qg_ctz((uint)limb[lo]), bot = 32u * (uint)lo + bb;
            uint top = 32u * (uint)hi + 31u - clz((uint)limb[hi]);
            if (top - bot >= 128u) {
                own_wide = 1;
            } else { /* the 128 bits from bot */
                uint wv[4];
                for (int j = 0; j < 4; j++) {
                    uint a0 = lo + j < Q_LIMBS ? (uint)limb[lo + j] : 0u;
                    uint a1 = lo + j + 1 < Q_LIMBS ? (uint)limb[lo + j + 1] : 0u;
                    wv[j] = bb ? (a0 >> bb) | (a1 << (32u - bb)) : a0;
                }
                vlo = (ulong)wv[0] | (ulong)wv[1] << 32;
                vhi = (ulong)wv[2] | (ulong)wv[3] << 32;
                sh = bot;
            }
        }
    }
    const int nz = vlo != 0 || vhi != 0;
    barrier(CLK_LOCAL_MEM_FENCE); /* wide = 0 is seen */
    if (own_wide) atomic_or(&wide, 1u);
    smin[lid] = nz ? sh : 0xffffffffu;
    smax[lid] = !nz ? 0u : vhi ? sh + 128u - (uint)clz(vhi) : sh + 64u - (uint)clz(vlo);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint t = seg / 2; t > 0; t >>= 1) {
        if (tid < t) {
            smin[lid] = min(smin[lid], smin[lid + t]);
            smax[lid] = max(smax[lid], smax[lid + t]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const uint E = smin[lid - tid], T = smax[lid - tid];
    if (E != 0xffffffffu && T - E > 119u) atomic_or(&wide, 1u);
    barrier(CLK_LOCAL_MEM_FENCE);
    __global ulong *p = part + gs * Q_LIMBS;
    if (!wide) {
        /* every item's sum is v 2^(sh - E) < 2^119 in units of 2^(E - 149): two words, with carries */
        ulong lo = 0, hi = 0;
        if (nz) {
            uint d = sh - E;
            if (d == 0u) lo = vlo, hi = vhi;
            else if (d < 64u) lo = vlo << d, hi = (vhi << d) | (vlo >> (64u - d));
            else hi = vlo << (d - 64u); /* vhi is 0 here: the value is below 2^119 */
        }
        red[lid] = lo;
        red[Q_GWG + lid] = hi;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint t = seg / 2; t > 0; t >>= 1) {
            if (tid < t) {
                ulong a = red[lid], c = red[lid + t], s2 = a + c;
                red[Q_GWG + lid] += red[Q_GWG + lid + t] + (s2 < a ? 1UL : 0UL);
                red[lid] = s2;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (tid == 0 && gs < nseg) qg_write(p, red[lid], red[Q_GWG + lid], E == 0xffffffffu ? 0u : E);
        return;
    }
    /* some item's or segment's range is too wide for 128 bits: 11 limbs,
     * added limb by limb through local memory (the integer pass left its
     * limbs carried, which is the same value) */
    if (!slow && nz) q_add_shifted(limb, vlo, sh);
    uint wd[Q_LIMBS];
    ulong c = 0;
    int lo = -1, hi = -1;
    for (int k = 0; k < Q_LIMBS; k++) {
        red[lid] = limb[k];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint t = seg / 2; t > 0; t >>= 1) {
            if (tid < t) red[lid] += red[lid + t];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        ulong x = red[lid] + c; /* meaningful at tid == 0 */
        barrier(CLK_LOCAL_MEM_FENCE);
        wd[k] = (uint)(x & 0xffffffffUL);
        c = x >> 32;
        if (wd[k]) {
            if (lo < 0) lo = k;
            hi = k;
        }
    }
    if (tid != 0 || gs >= nseg) return;
    if (lo < 0) {
        for (int k = 0; k < Q_LIMBS; k++) p[k] = 0;
        return;
    }
    uint tz = qg_ctz(wd[lo]);
    uint top = 32u * (uint)hi + 31u - clz(wd[hi]), bot = 32u * (uint)lo + tz;
    if (top - bot < 64u && bot <= 224u) { /* the short form (lo + hi 2^32) 2^bot */
        ulong w01 = (ulong)wd[lo] | (lo + 1 < Q_LIMBS ? (ulong)wd[lo + 1] << 32 : 0UL);
        ulong w2 = lo + 2 < Q_LIMBS ? (ulong)wd[lo + 2] : 0UL;
        ulong v = tz ? (w01 >> tz) | (w2 << (64u - tz)) : w01;
        p[0] = v & 0xffffffffUL;
        p[1] = v >> 32;
        p[2] = bot;
        p[Q_LIMBS - 1] = Q_SHORT;
    } else {
        for (int k = 0; k < Q_LIMBS; k++) p[k] = wd[k];
    }
}

/* q_merge_gpu: the pieces of q_absum_gpu merged exactly on the device, so
 * that q_pack_gpu follows q_absum_gpu with no host round trip (the second
 * read of the weights then finds part of them in L2).  For each slice: the
 * exact sum of its pieces (carry-save 32-bit limbs, integer: any order),
 * rounded once to double as bn_xsum_to_double does (the top 64 bits with a
 * sticky bit for the rest, one integer -> double conversion), then
 * d = max((float)(sum / len), 1e-5f) and s = 1.0f / d, correctly rounded
 * (the host builds the program with -cl-fp32-correctly-rounded-divide-sqrt):
 * the host's bits.  One slice per work-item where slices have one piece,
 * else one work-group (Q_MWG items) per slice, its items taking every
 * Q_MWG-th piece and the limbs added in three levels through local memory.
 * When q_absum_gpu saw NaN or Inf (flag[0]) nothing goes to d and every s
 * is NaN, which tells q_pack_gpu to write nothing either. */
#ifndef Q_MWG
#define Q_MWG 256 /* work-group size of q_merge_gpu (a multiple of QG_MSPLIT, at least QG_MSPLIT * Q_LIMBS) */
#endif
#define QG_MSPLIT 16 /* the second level of q_merge_gpu's sums: Q_MWG / QG_MSPLIT items' limbs each */
#define QG_MLOAD 4   /* pieces an item of q_merge_gpu loads at once */
#if Q_MWG % QG_MSPLIT != 0 || Q_MWG < QG_MSPLIT * Q_LIMBS
#error "q_merge_gpu: Q_MWG must be a multiple of QG_MSPLIT and at least QG_MSPLIT * Q_LIMBS"
#endif

/* acc += the piece whose words are v (short form or carry-save limbs; all
 * zeros adds nothing), the limbs kept in registers (no indexing by the
 * exponent). */
inline void qg_add_words(ulong *acc, const ulong *v)
{
    if (v[Q_LIMBS - 1] == Q_SHORT) { /* v0 + v1 2^32 at 2^e: three 32-bit words from limb e / 32 */
        const uint e = (uint)v[2], i = e >> 5, b = e & 31u;
        const ulong x = v[0] | v[1] << 32;
        const ulong w0 = (x << b) & 0xffffffffUL, w1 = (b ? x >> (32u - b) : x >> 32) & 0xffffffffUL;
        const ulong w2 = b ? x >> (64u - b) : 0UL;
        for (uint k = 0; k < Q_LIMBS; k++) acc[k] += k == i ? w0 : k == i + 1u ? w1 : k == i + 2u ? w2 : 0UL;
    } else {
        for (int k = 0; k < Q_LIMBS; k++) acc[k] += v[k];
    }
}

/* Slice sl's d and s from its summed limbs (carry-save, units 2^-149). */
inline void qg_finish(const ulong *acc, uint kind, bn_size sl, bn_size rows, bn_size cols, bn_size group,
                      __global float *d, __global float *s)
{
    uint wd[Q_LIMBS + 2];
    ulong c = 0;
    int hi = -1;
    for (int k = 0; k < Q_LIMBS; k++) {
        const ulong x = acc[k] + c;
        wd[k] = (uint)(x & 0xffffffffUL);
        c = x >> 32;
        if (wd[k]) hi = k;
    }
    wd[Q_LIMBS] = wd[Q_LIMBS + 1] = 0u;
    double sum = 0.0;
    if (hi >= 0) {
        const int top = 32 * hi + 31 - (int)clz(wd[hi]); /* the highest set bit */
        if (top < 64) {
            sum = ldexp((double)((ulong)wd[0] | (ulong)wd[1] << 32), -149);
        } else {
            const int lo = top - 63, iw = lo >> 5;
            const uint b = (uint)lo & 31u;
            const ulong w01 = (ulong)wd[iw] | (ulong)wd[iw + 1] << 32;
            ulong win = b ? (w01 >> b) | ((ulong)wd[iw + 2] << (64u - b)) : w01;
            int sticky = b ? (wd[iw] & ((1u << b) - 1u)) != 0u : 0;
            for (int k = 0; k < iw; k++) sticky |= wd[k] != 0u;
            win |= (ulong)sticky;
            sum = ldexp((double)win, lo - 149);
        }
    }
    bn_size start, len;
    q_slice(kind, sl, rows, cols, group, &start, &len);
    float dv = len ? (float)(sum / (double)len) : 0.0f;
    if (dv < 1e-5f) dv = 1e-5f;
    d[sl] = dv;
    s[sl] = 1.0f / dv; /* correctly rounded: the program is built with -cl-fp32-correctly-rounded-divide-sqrt */
}

__kernel __attribute__((reqd_work_group_size(Q_MWG, 1, 1))) void
q_merge_gpu(__global const ulong *part, bn_size nsc, bn_size pieces, uint kind, bn_size rows, bn_size cols,
            bn_size group, __global const uint *flag, __global float *d, __global float *s)
{
    __local ulong red[Q_LIMBS * Q_MWG], red2[Q_LIMBS * QG_MSPLIT];
    const int bad = flag[0] != 0u;
    ulong acc[Q_LIMBS];
    if (pieces == 1) { /* a slice per work-item */
        const bn_size sl = get_global_id(0);
        if (sl >= nsc) return;
        if (bad) {
            s[sl] = as_float(0x7fc00000u);
            return;
        }
        ulong v[Q_LIMBS];
        for (int k = 0; k < Q_LIMBS; k++) acc[k] = 0, v[k] = part[sl * Q_LIMBS + k];
        qg_add_words(acc, v);
        qg_finish(acc, kind, sl, rows, cols, group, d, s);
        return;
    }
    /* a work-group per slice: each item's pieces, then the limbs added in
     * three levels through local memory (few barriers and no long serial
     * loop: the kernel is bound by latency, not by the adds) */
    const uint lid = get_local_id(0);
    for (bn_size sl = get_group_id(0); sl < nsc; sl += get_num_groups(0)) {
        if (bad) {
            if (lid == 0) s[sl] = as_float(0x7fc00000u);
            continue;
        }
        for (int k = 0; k < Q_LIMBS; k++) acc[k] = 0;
        /* QG_MLOAD pieces an item loaded before any is added (past the
         * last: zeros), so that the loads wait on L2 once, not per piece */
        for (bn_size i0 = lid; i0 < pieces; i0 += QG_MLOAD * Q_MWG) {
            ulong v[QG_MLOAD][Q_LIMBS];
#pragma unroll
            for (int u = 0; u < QG_MLOAD; u++) {
                const bn_size i = i0 + (bn_size)u * Q_MWG;
                __global const ulong *p = part + (sl * pieces + (i < pieces ? i : 0)) * Q_LIMBS;
                for (int k = 0; k < Q_LIMBS; k++) v[u][k] = i < pieces ? p[k] : 0UL;
            }
#pragma unroll
            for (int u = 0; u < QG_MLOAD; u++) qg_add_words(acc, v[u]);
        }
        for (int k = 0; k < Q_LIMBS; k++) red[k * Q_MWG + lid] = acc[k];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < Q_LIMBS * QG_MSPLIT) { /* limb lid / QG_MSPLIT of every QG_MSPLIT-th item from lid % QG_MSPLIT */
            __local const ulong *r = red + (lid / QG_MSPLIT) * Q_MWG + lid % QG_MSPLIT;
            ulong t = 0; /* consecutive items read consecutive words: no bank conflicts */
#pragma unroll
            for (uint j = 0; j < Q_MWG / QG_MSPLIT; j++) t += r[j * QG_MSPLIT];
            red2[lid] = t;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < Q_LIMBS) { /* limb lid of every item */
            ulong t = 0;
#pragma unroll
            for (uint q = 0; q < QG_MSPLIT; q++) t += red2[lid * QG_MSPLIT + q];
            red[lid] = t;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid == 0) {
            for (int k = 0; k < Q_LIMBS; k++) acc[k] = red[k];
            qg_finish(acc, kind, sl, rows, cols, group, d, s);
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* red and red2 are free for the next slice */
    }
}

/* q_pack_gpu: work-item (i, r) writes word i of row r's T2 bytes: bytes
 * 4j'..4j'+3 (j' = i % 8) of block i / 8 hold columns 128 blk + 32 k + 4 j' + t
 * for k = 0..3, t = 0..3: four float4 loads (consecutive work-items read
 * consecutive 16-byte words) and one coalesced uint store.  Scale of
 * sub-block sb: s[r * sr + min(sb >> gshift, last)]. */
inline uint qg_code(float p) { return 1u + (p > 0.5f ? 1u : 0u) - (p < -0.5f ? 1u : 0u); }

__kernel void q_pack_gpu(__global const float *w, bn_size cols, bn_size nw, bn_size sr, uint gshift, bn_size last,
                         __global const float *s, __global uint *t2)
{
    const bn_size i = get_global_id(0), r = get_global_id(1);
    if (i >= nw) return;
    const bn_size c0 = (i >> 3) * 128 + (i & 7) * 4;
    __global const float *wr = w + r * cols;
    __global const float *sc = s + r * sr;
    if (isnan(sc[0])) return; /* q_merge_gpu: the weights hold NaN or Inf, nothing is written */
    uint v = 0;
    for (uint k = 0; k < 4; k++) {
        const bn_size c = c0 + 32 * k, sb = (i >> 3) * 4 + k;
        bn_size si = sb >> gshift;
        const float f = sc[si < last ? si : last];
        if (c + 4 <= cols) {
            float4 x = ((cols & 3) == 0) ? *(__global const float4 *)(wr + c) : vload4(0, wr + c);
            x *= f;
            v |= (qg_code(x.x) | qg_code(x.y) << 8 | qg_code(x.z) << 16 | qg_code(x.w) << 24) << (2 * k);
        } else {
            for (uint t = 0; t < 4; t++) v |= (c + t < cols ? qg_code(wr[c + t] * f) : 1u) << (8 * t + 2 * k);
        }
    }
    t2[r * nw + i] = v;
}
#endif

/* BitLinear's float activations, one work-group of Q_RWG items (a power of
 * two, set by the host from the device's limit) per token: the absmax bits
 * of row t (the max of the bits is order-free, so exact), then the row
 * quantized as q_acts does into a row of xstride int8 codes (zero past
 * cols), the int32 sum of its codes into sum[t], s[t], and
 * flag[flag_off + t] (1 when the row holds NaN or Inf, else 0; written
 * either way).  One command per call: a token's row (a few tens of KB) is
 * read twice by one work-group.  It replaced a zero fill and two passes
 * spread over the device (q_absmax_rows, q_acts_pad): on an H100, kernel
 * times of BitLinear with row scales, weights kept, one device call
 * alternating the two (2026-11-25): 16384x16384 40.4 us against 45.0 at
 * 1 token, 49.3 against 56.0 at 8; 4096x14336 22.8 against 25.5 at 1 token,
 * 93.5 against 101.8 at 64.  With one float load per item in flight it was
 * slower than the two passes at one token (49.2 against 45.2 us).
 * Rows of up to 4 * Q_J4 * Q_RWG floats (a multiple of 4) are read once,
 * into registers, with every load in flight at once (q_acts_reg). */
#ifndef Q_RWG
#define Q_RWG 256
#endif
#ifndef Q_J4
#define Q_J4 16
#endif
#ifndef Q_NJ
#define Q_NJ 16 /* the fused input norm: rows of up to Q_NJ * Q_RWG in registers (norm.cl's NM_J) */
#endif

/* The largest absolute value's bits of a float4 (NaN and Inf above 0x7f800000 - 1). */
inline uint q_amax4(float4 v)
{
    const uint4 u = as_uint4(v) & (uint4)(0x7fffffffu);
    return max(max(u.x, u.y), max(u.z, u.w));
}

/* Where code c (a column, padding included) of a row of BitLinear's
 * activations lies in it: at c, or with Q_FRAG in the order bl_mma_skinny
 * reads (kernels/bitlinear.cl, SK_XF; the row a multiple of 256): in each
 * 256 columns, for each shift sh, columns 32 sh + [0, 32) then 128 + 32 sh +
 * [0, 32), the 64 bytes lanes t = 0..3 of a token take 16 at a time.  Runs
 * of 32 columns stay together, so a store of 4 or 16 codes at a multiple of
 * its size does too. */
#ifndef Q_FRAG
#define Q_FRAG 0
#endif
inline bn_size q_code_at(bn_size c)
{
#if Q_FRAG
    return (c & ~(bn_size)255) + ((c >> 5) & 3) * 64 + ((c >> 7) & 1) * 32 + (c & 31);
#else
    return c;
#endif
}

/* q_acts_rows for a row that fits the registers: item lid holds float4s
 * lid, lid + Q_RWG, ... (all loads issued before the first use); the same
 * codes, scale, sum and flag as the two-pass loop. */
inline void q_acts_reg(__global const float *xr, bn_size cols, bn_size xstride, __global char *qr, __global float *s,
                       __global int *sum, __global uint *flag, __local uint *red, uint lid)
{
    __global const float4 *x4 = (__global const float4 *)xr;
    const bn_size n4 = cols / 4;
    float4 v[Q_J4];
    uint m = 0;
#pragma unroll
    for (int j = 0; j < Q_J4; j++) {
        const bn_size c = lid + (bn_size)j * Q_RWG;
        v[j] = c < n4 ? x4[c] : (float4)(0.0f);
    }
#pragma unroll
    for (int j = 0; j < Q_J4; j++) m = max(m, q_amax4(v[j]));
    m = bn_group_umax(red, m, lid, Q_RWG); /* red is free again after it */
    const int bad = m >= 0x7f800000u;
    const float sc = bad ? 1.0f : q_act_scale(m);
    const bn_size w4 = xstride / 4; /* xstride is a multiple of 128: whole char4s */
    int acc = 0;
#pragma unroll
    for (int j = 0; j < Q_J4; j++) {
        const bn_size c = lid + (bn_size)j * Q_RWG;
        int4 iv = (int4)(0);
        if (c < n4 && !bad) iv = convert_int4(clamp(rint(v[j] * sc), -128.0f, 127.0f));
        if (c < w4) *(__global char4 *)(qr + q_code_at(4 * c)) = convert_char4(iv);
        acc += iv.x + iv.y + iv.z + iv.w;
    }
    for (bn_size c = lid + (bn_size)Q_J4 * Q_RWG; c < w4; c += Q_RWG) /* padding */
        *(__global char4 *)(qr + q_code_at(4 * c)) = (char4)(0);
    const int total = bn_group_isum((__local int *)red, acc, lid, Q_RWG);
    if (lid == 0) {
        *sum = total;
        *s = sc;
        *flag = bad ? 1u : 0u;
    }
}

/* BitLinear's fused input norm (has_norm): row t RMS-normalized with weight
 * nw and eps as norm_rows (kernels/norm.cl, NM_WG = Q_RWG = 256, the same
 * BN_GPU) computes it, bit for bit: each item sums the squares of its
 * elements in norm_rows' order (strided up to 16 * Q_RWG columns, as its
 * register path; beyond, BN_ROW_FOR as its loop), the sums meet in the same
 * tree, and each value is (float)((x - 0) * rstd * w).  Then the
 * quantization of q_acts_rows on those values (absmax and codes are
 * order-free).  Rows of up to Q_NJ * Q_RWG columns are read once into
 * registers, every load in flight (norm_rows' register path), and their
 * normalized values kept there for both passes; longer rows are read
 * three times and the normalized row recomputed per pass, never stored.
 * The register path against the three passes (H200, 2026-12-01, three
 * alternating rounds of bitnet-bench --op ffn 4096x14336, row scales):
 * the block's kernels at one token 44.5-47.3 us against 49.3-51.3 (8
 * tokens 54.4-58.0 against 59.2-60.1, 64 tokens 89.8-91.1 against
 * 95.0-96.0); q_acts_rows averaged 9.3 us against 11.9 over both of the
 * block's launches (tests/device/cltrace.c). 
 * With it (and the residual in BitLinear's epilogue) bitnet-bench's ffn
 * block at one token, 4096x14336, went from 69.6-77.0 to 59.0-64.7 us end
 * to end on an H100 (2026-11-28, three alternating rounds): two kernel
 * launches fewer, each 7-11 us of the driver's host time. */
typedef bn_real q_real;

inline float q_normed(float x, q_real rstd, float g)
{
    const q_real mean = 0;
    q_real v = ((q_real)x - mean) * rstd;
    v *= (q_real)g;
    return (float)v;
}

inline void q_acts_norm(__global const float *xr, bn_size cols, bn_size xstride, __global char *qr, __global float *s,
                        __global int *sum, __global uint *flag, __global const float *nw, float eps,
                        __local uint *red, __local q_real *lr, uint lid)
{
    const q_real mean = 0;
    /* the register path: the row and the norm's weights loaded once, every
     * load in flight, the normalized values kept for both passes of the
     * quantization (work-group-uniform branches) */
    const int regs = cols <= (bn_size)(Q_NJ * Q_RWG);
    float v[Q_NJ], g[Q_NJ];
    q_real acc = 0;
    if (regs) {
#pragma unroll
        for (int j = 0; j < Q_NJ; j++) {
            const bn_size i = lid + (bn_size)j * Q_RWG;
            v[j] = i < cols ? xr[i] : 0.0f;
            g[j] = i < cols ? nw[i] : 1.0f;
        }
#pragma unroll
        for (int j = 0; j < Q_NJ; j++) { /* the strided order of the loop */
            const q_real d = lid + (bn_size)j * Q_RWG < cols ? (q_real)v[j] - mean : (q_real)0;
            acc += d * d;
        }
    } else {
        BN_ROW_FOR(i, lid, 0, cols, Q_RWG) {
            q_real d = (q_real)xr[i] - mean;
            acc += d * d;
        }
    }
    const q_real var = bn_group_rsum(lr, acc, lid, Q_RWG) / (q_real)cols;
    const q_real rstd = (q_real)1 / sqrt(var + (q_real)eps);
    uint m = 0;
    if (regs) {
#pragma unroll
        for (int j = 0; j < Q_NJ; j++) {
            v[j] = q_normed(v[j], rstd, g[j]);
            if (lid + (bn_size)j * Q_RWG < cols) m = max(m, as_uint(v[j]) & 0x7fffffffu);
        }
    } else {
        for (bn_size i = lid; i < cols; i += Q_RWG) m = max(m, as_uint(q_normed(xr[i], rstd, nw[i])) & 0x7fffffffu);
    }
    m = bn_group_umax(red, m, lid, Q_RWG);
    const int bad = m >= 0x7f800000u;
    const float sc = bad ? 1.0f : q_act_scale(m);
    int tot = 0;
    bn_size i0 = lid; /* the first column the loop below writes */
    if (regs) {
#pragma unroll
        for (int j = 0; j < Q_NJ; j++) { /* no break (see norm_rows) */
            const bn_size i = lid + (bn_size)j * Q_RWG;
            int c = 0;
            if (i < cols && !bad) c = (int)clamp(rint(v[j] * sc), -128.0f, 127.0f);
            if (i < xstride) qr[q_code_at(i)] = (char)c;
            tot += c;
        }
        i0 = lid + (bn_size)Q_NJ * Q_RWG; /* what is left is padding */
    }
    for (bn_size i = i0; i < xstride; i += Q_RWG) {
        int c = 0;
        if (i < cols && !bad) c = (int)clamp(rint(q_normed(xr[i], rstd, nw[i]) * sc), -128.0f, 127.0f);
        qr[q_code_at(i)] = (char)c;
        tot += c;
    }
    const int total = bn_group_isum((__local int *)red, tot, lid, Q_RWG);
    if (lid == 0) {
        *sum = total;
        *s = sc;
        *flag = bad ? 1u : 0u;
    }
}

__kernel void q_acts_rows(__global const float *x, bn_size cols, bn_size xstride, __global char *q,
                          __global float *s, __global int *sum, __global uint *flag, bn_size flag_off,
                          __global const float *nw, const float neps, const int has_norm)
{
    __local uint red[Q_RWG];
    __local q_real lr[Q_RWG];
    const uint lid = get_local_id(0);
    const bn_size t = get_group_id(0);
    __global const float *xr = x + t * cols;
    if (has_norm) {
        q_acts_norm(xr, cols, xstride, q + t * xstride, s + t, sum + t, flag + flag_off + t, nw, neps, red, lr, lid);
        return;
    }
    /* rows of a multiple of 4 are read as float4, four loads in flight per
     * item: one item's loads one after the other took longer than the
     * product at one token */
    const int vec = (cols & 3) == 0;
    if (vec && cols / 4 <= (bn_size)(Q_J4 * Q_RWG)) {
        q_acts_reg(xr, cols, xstride, q + t * xstride, s + t, sum + t, flag + flag_off + t, red, lid);
        return;
    }
    uint m0 = 0, m1 = 0, m2 = 0, m3 = 0;
    if (vec) {
        __global const float4 *x4 = (__global const float4 *)xr;
        const bn_size n4 = cols / 4;
        bn_size c = lid;
        for (; c + 3 * Q_RWG < n4; c += 4 * Q_RWG) {
            const float4 a = x4[c], b = x4[c + Q_RWG], d = x4[c + 2 * Q_RWG], e = x4[c + 3 * Q_RWG];
            m0 = max(m0, q_amax4(a));
            m1 = max(m1, q_amax4(b));
            m2 = max(m2, q_amax4(d));
            m3 = max(m3, q_amax4(e));
        }
        for (; c < n4; c += Q_RWG) m0 = max(m0, q_amax4(x4[c]));
    } else {
        for (bn_size c = lid; c < cols; c += Q_RWG) m0 = max(m0, as_uint(xr[c]) & 0x7fffffffu);
    }
    uint m = bn_group_umax(red, max(max(m0, m1), max(m2, m3)), lid, Q_RWG); /* red is free again after it */
    const int bad = m >= 0x7f800000u;
    const float sc = bad ? 1.0f : q_act_scale(m);
    __global char *qr = q + t * xstride;
    int acc = 0;
    if (vec) { /* xstride is a multiple of 128, so whole char4s */
        __global const float4 *x4 = (__global const float4 *)xr;
        const bn_size n4 = cols / 4;
        for (bn_size c = lid; c < xstride / 4; c += Q_RWG) {
            int4 v = (int4)(0);
            if (c < n4 && !bad) v = convert_int4(clamp(rint(x4[c] * sc), -128.0f, 127.0f));
            *(__global char4 *)(qr + q_code_at(4 * c)) = convert_char4(v);
            acc += v.x + v.y + v.z + v.w;
        }
    } else {
        for (bn_size c = lid; c < xstride; c += Q_RWG) {
            int v = 0;
            if (c < cols && !bad) v = (int)clamp(rint(xr[c] * sc), -128.0f, 127.0f);
            qr[q_code_at(c)] = (char)v;
            acc += v;
        }
    }
    const int total = bn_group_isum((__local int *)red, acc, lid, Q_RWG);
    if (lid == 0) {
        sum[t] = total;
        s[t] = sc;
        flag[flag_off + t] = bad ? 1u : 0u;
    }
}

/* BitLinear's int8 activations given by the caller: row t copied into a row
 * of xstride codes (zero past cols; xstride is a multiple of 128) with the
 * int32 sum of its codes.  16 codes per work-item and step, the pointers
 * restrict so that the steps' loads go out together: a byte per work-item
 * and step, each load waiting for the previous store, took about 50 us for
 * one row of 16384 on an H100 (an int8 input was slower end to end than a
 * float one, which q_acts_rows quantizes). */
__kernel void q_pad_i8(__global const char *restrict xq, bn_size cols, bn_size xstride, __global char *restrict q,
                       __global int *restrict sum)
{
    __local int isum[Q_WG];
    const uint lid = get_local_id(0);
    const bn_size r = get_group_id(0);
    __global const char *src = xq + r * cols;
    __global char *dst = q + r * xstride;
    int acc = 0;
    for (bn_size c = (bn_size)lid * 16; c < xstride; c += (bn_size)Q_WG * 16) {
        union {
            char16 v;
            char b[16];
        } u;
        if (c + 16 <= cols) {
            u.v = vload16(0, src + c);
        } else {
            for (int i = 0; i < 16; i++) u.b[i] = c + (bn_size)i < cols ? src[c + (bn_size)i] : (char)0;
        }
        vstore16(u.v, 0, dst + q_code_at(c));
        const int16 w = convert_int16(u.v);
        const int8 h = w.lo + w.hi;
        const int4 f = h.lo + h.hi;
        acc += f.x + f.y + f.z + f.w;
    }
    const int total = bn_group_isum(isum, acc, lid, Q_WG);
    if (lid == 0) sum[r] = total;
}
