/*
 * bitlinear.c (OpenCL) - host code of BitLinear on an OpenCL device
 * (kernels/bitlinear.cl), in order on the queue.  Activations in host
 * memory are quantized (float) or padded (int8) by the host on their way
 * into staging memory (hq_upload below); device-resident ones on the
 * device: float ones by q_acts_rows (one command, kernels/quantize.cl: the
 * codes and scales of the CPU, bit for bit, with the per-token code sums),
 * int8 ones by q_pad_i8.  The product computes the integer sums and the
 * float epilogue; an int8 output is re-quantized from the float rows by
 * q_acts.  Operands may be host memory or device
 * addresses (operand.c); with a host output the call waits for it, and the
 * per-token NaN flags come down in the same read.
 *
 * Kernel choice: group scales -> bl_group, on NVIDIA from 4 tokens with
 * groups of whole blocks bl_group_mma (tensor cores); NVIDIA from 2 tokens
 * -> the tensor cores (bl_mma_skinny up to 8 tokens, bl_gemm_mma beyond), one token (or
 * the tensor cores off) -> an NV variant (dp4a); both unless
 * BITNET_OCL_PORTABLE=1; otherwise bl_gemm (tiled) above
 * GEMM_MIN_TOKENS tokens, else bl_gemv.
 *
 * NV variants (bl_gemv_nv1, 3, 4: kernels/bitlinear.cl says what each does;
 * read at every call):
 *   default           by token count, from nv_tuned below: 4 for one token,
 *                     3 for more; both fall back to 1 when one token's
 *                     activations do not fit the local memory they may take.
 *   BITNET_GEMV_NV=1|3|4 (sweeps) takes that variant for every token count
 *                     (3 and 4 still fall back to 1), with the kernel's
 *                     defaults for the tunables BITNET_GEMV_OPTS leaves out.
 *   BITNET_GEMV_OPTS="-DNV_WARPS=8 -DNV_ROWS=4 -DNV_UNROLL=2 -DNV_TT=8
 *                     -DNV_LMEM=32768" is appended to the build options in
 *                     place of the tuned ones; the host reads the same
 *                     -DNAME=value words (nv_names below) for the launch
 *                     geometry.
 *   BITNET_GEMV_NV_EMULATE=1 (tests) builds with -DNV_EMULATE (dp4a and the
 *                     warp sum in portable OpenCL C) and takes the NV
 *                     variants on any device.
 *
 * Tensor cores (bl_gemm_mma, host side in bitlinear_mma.c; read at every call):
 *   on NVIDIA, unless BITNET_OCL_PORTABLE=1, tensor and row scales from
 *   BITNET_MMA_MIN_TOKENS tokens on (default 2; a large value turns it off)
 *   take INT8 mma.sync instead of the NV variants.
 *   BITNET_MMA_OPTS="-DMMA_WM=4 -DMMA_MT=2 -DMMA_NT=32 -DMMA_KB=2 -DMMA_ST=3 -DMMA_KP=3"
 *                     (bl_mma_skinny, up to 8 tokens or 16 on rows of at most 8192
 *                     columns, reads SK_W, SK_T, SK_A and SK_N)
 *                     is appended to its build options; the tunables it names
 *                     replace the ones chosen from the shape (bitlinear_mma.c);
 *                     -DMMA_SIGNED=1 decodes codes to s8 (default u8 codes
 *                     less the per-token sums); other options go to the
 *                     driver as they are (NVIDIA's register cap is spelled
 *                     -cl-nv-maxrregcount=N).
 *   BITNET_MMA_EMULATE=1 (tests) builds it with -DMMA_EMULATE (the mma in
 *                     portable OpenCL C) and takes it on any device.
 */
#include "../cpu/bitlinear.h"
#include "../cpu/quantize.h"
#include "../threads.h"
#include "ocl.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEMM_MIN_TOKENS 16
#define GEMV_RY 4
#define GEMV_LX 64
#define TS 16

/* The value of the last "-DNAME=value" in opts when positive, else def. */
static long opt_value(const char *opts, const char *name, long def)
{
    const long v = bn_ocl_opt_value(opts, name, def, NULL);
    return v > 0 ? v : def;
}

/* ---- the NVIDIA family (bl_gemv_nv1, 3, 4) ------------------------------------
 * Its tunables, with the defaults of their #ifndef in kernels/bitlinear.cl
 * (the two must agree).  NV_LMEM and NV_RW are the host's alone; 0 here
 * means chosen from the device and the shape. */
typedef struct {
    long warps, rows, unroll, tt, u, lmem, rw, r;
} nv_tunables;
static const struct {
    const char *name;
    size_t off;
    long def;
} nv_names[] = {
    {"NV_WARPS", offsetof(nv_tunables, warps), 4},   /* warps per work-group */
    {"NV_ROWS", offsetof(nv_tunables, rows), 2},     /* nv1, nv3: rows per warp */
    {"NV_UNROLL", offsetof(nv_tunables, unroll), 2}, /* nv1, nv3: blocks per lane in flight (kernel only) */
    {"NV_TT", offsetof(nv_tunables, tt), 4},         /* most tokens per pass */
    {"NV_U", offsetof(nv_tunables, u), 4},           /* nv4: half blocks per lane and row in flight (kernel only) */
    {"NV_LMEM", offsetof(nv_tunables, lmem), 0},     /* bytes of staged activations: 0, the device's less 1 KiB
                                                        (also the cap) */
    {"NV_RW", offsetof(nv_tunables, rw), 0},         /* nv4: rows per warp: 0, as many as leave at most 4
                                                        work-groups per compute unit (1 to 16) */
    {"NV_R", offsetof(nv_tunables, r), 1},           /* nv4: rows of a warp computed together (rw is rounded
                                                        up to a multiple) */
};
#define N_NV_NAMES (sizeof nv_names / sizeof nv_names[0])

/* Without BITNET_GEMV_NV and BITNET_GEMV_OPTS: the variant and its options by
 * token count, the first row the count reaches.
 * From 2 tokens, variant 3, chosen by the sweep on an H200 (tests/device/
 * gemv-sweep.sh, 2026-11-22): 16384x16384 in 45.8 us against 50.0 us for
 * the former variant 0 (one warp per row, since removed) at 1 token, 177
 * against 286 us at 8, 1.28 against 2.37 ms at 64; from 8 tokens on, 8
 * warps of one row with 4 blocks in flight won.  Since 2026-11-27 the
 * tensor cores take 2 tokens and more (bl_mma_skinny), so variant 3 runs
 * only where they are off.
 * One token: variant 4 with 8 warps and 4 loads in flight per lane (H100,
 * 2026-11-22, kept weights: 16384x16384 in 32.3 us against 34.0 us for
 * variant 3, 4096x4096 9.4-9.7 us, 4096x14336 14.3 us against 14.6).
 * Since 2026-11-27 two rows of a warp at once (NV_R=2, NV_U=2: the same 2
 * KiB per warp in flight, each staged activation read once for both rows).
 * H200, weights kept, two alternating rounds, mean profiled time of the
 * GEMV kernel alone (cltrace) in us, before / after: 16384x16384 28.6-28.9
 * / 25.4-26.0, 14336x4096 15.3-15.5 / 13.9-14.0, 4096x14336 13.7-13.9 /
 * 12.7-12.8, 4096x4096 9.2-9.6 / 9.1-9.6 (NV_R=4 with NV_U=1: 25.5 and
 * 12.7-12.9 on the first two, 14.5-14.6 on 4096x14336, where whole groups
 * of 4 rows leave too few work-groups).  On an H100 the same day, three
 * alternating rounds of the library's defaults, before / after:
 * 16384x16384 31.4-31.7 / 30.7-31.0, 14336x4096 14.9-15.3 / 14.2-14.7,
 * 4096x14336 13.6-14.3 / 13.3-13.7, 4096x4096 9.0-9.3 / 9.1-9.3: smaller
 * gains, nothing slower.  What is left, measured the same
 * day: the kernel with its body emptied (stores only) takes 4-6.5 us by
 * the same events, and with the decode and dot products replaced by an
 * XOR of the loaded words 16384x16384 takes 23 us, so the sums cost about
 * 2.5 us of the 25.5.  4096x4096 does not move with the tunables: H100,
 * 2026-11-28, two rounds, kernel medians in us, NV_WARPS / NV_U / NV_R
 * 8/2/2 (the default) 9.7-9.9, 4/2/2 9.8-9.9, 2/2/2 10.2-10.6, 8/2/1
 * 9.7, 8/1/2 9.6-9.7, 4/2/1 10.2, 8/2/2 with NV_RW=4 10.4-10.5 (4096x14336
 * 14.1-16.9 across the same settings, the default 14.4).
 * Tried and not kept, 2026-11-27: the weights streamed through local
 * memory by cp.async, 4 to 7 chunks of 512 bytes per warp in flight
 * (twice the bytes in flight of variant 4, no registers held): 16384x16384
 * 37.4-40.4 us for the whole call against 37.0-37.8, the other shapes
 * equal or slower; bytes in flight are not what limits variant 4.
 * Tried and not kept: variant 4 quantizing the float activations itself
 * (each work-group read the float row, took its absmax and staged the codes:
 * one kernel per call instead of q_acts_rows + variant 4).  H200, 2026-11-26,
 * one token, weights kept, three alternating rounds, kernel / end-to-end
 * medians in us: 16384x16384 38.0-38.3 / 66.2-66.5 fused against 35.6-36.6
 * / 59.1-63.2; 16384x4096 22.0-22.5 / 44.4-47.6 against 22.1-24.3 /
 * 40.6-52.3; 4096x14336 19.6-19.8 / 42.0-43.8 against 20.4-21.6 /
 * 38.7-46.5 (with 2 rows per warp 15.5-15.8 / 40.8-41.8).  Every
 * work-group reading the whole float row (64 KiB at 16384) cost more than
 * the separate one-work-group kernel, whose profiled 8.5 us overstates its
 * place in the queue: end to end the fused call was slower.
 * Tried again and not kept, 2026-12-01, with the row in registers (the
 * loads of q_acts_rows' register path, the fused input norm too up to 4096
 * columns, the codes staged straight into xl): H200, device-resident
 * operands, row scales, five alternating rounds in one call, kernel /
 * end-to-end medians in us: 4096x14336 20.9-21.2 / 39.7-40.8 fused against
 * 24.3-25.4 / 37.8-46.0; 14336x4096 28.1-28.8 / 52.0-53.9 against
 * 28.2-28.7 / 50.1-51.7; the one-token ffn block 66.5-72.1 us end to end
 * against 63.1-73.3.  Each fused GEMV took about 6 us more than the plain
 * one (tests/device/cltrace.c: 26.2 against 20.2 us), nearly all that the
 * separate kernel cost, and end to end nothing moved: the host's launch
 * saved was not on the critical path.  tests/device/qacts.c shows why the
 * separate kernel is hard to beat: of its 8.1 us profiled at 14336
 * columns the body runs about 2.8 us (an empty one-work-group kernel is
 * profiled at 5.4 us), and splitting the row over 2 to 28 work-groups gave
 * 7.9-8.5 us.
 * How far variant 4 is from a plain read (H200, 2026-12-02): a cold read of
 * 64 MiB profiled after 200 us of idle device takes 23.5-27 us by every
 * load form tried (tests/device/coldread.c; 19-20 us when it follows
 * another kernel), and each of bitnet-bench's calls starts the GEMV from
 * an idle device: 16384x16384 at one token 25.2-27.3 us (kernel medians of
 * seven calls that day, minima 23.3-24.8).  Kernel medians in us, one
 * binary, sources swapped by BITNET_KERNEL_DIR, 16384x16384 / 4096x14336 / 14336x4096 / 4096x4096:
 * the default 25.6-25.7 / 12.7-13.1 / 14.2-14.3 / 9.3-9.9 (three rounds);
 * with -DNV_TT=1 (a one-token build) 26.0-26.2 / 12.9-13.2 / 14.3-14.4 /
 * 8.7-9.3; the staging's four loads of a thread issued before any store
 * 26.7-26.8 / 13.5-14.0 / 14.3-15.0 / 9.1-9.6; and with the next step's
 * loads issued before this step's sums (two sets of registers) 29.6-30.0 /
 * 14.2-16.2 / 15.4-16.5 / 10.6-10.9: none kept.  Another call, two rounds:
 * the default 27.1-27.3; the staging storing a constant instead of
 * loading the activations 25.1-26.2; that and the sums replaced by an XOR
 * of the words 24.3-25.7.  So the activations' staging costs 1-2 us of the
 * call and the decode and sums about 1, and what is left is the read.
 * NV_RW (rows per warp) 2 or 4 against the default (4 at 16384 rows): 25.3-
 * 25.8 / 12.7-15.5 / 13.2-14.0 against 25.2-25.9 / 12.8-13.0 / 13.3-13.6;
 * 1: 35.4-35.6 at 16384x16384.  NV_WARPS=16 or 32 did not launch on the
 * H200 (not looked into).  Without the staging, each lane loading its
 * activations from global memory where it uses them (through L1; the
 * staging pass kept only for the code sums of own_sum), three alternating
 * rounds: 30.9-31.2 / 14.1-14.3 / 15.7-16.1 / 10.2-10.6 against 25.9-26.4
 * / 12.9-13.5 / 13.7-14.5 / 9.5-9.7; not kept.
 * In a chain (--resident --chain 24, profiled by tests/device/cltrace.c)
 * the GEMV follows q_acts_rows at once, yet takes what it takes alone:
 * 16384x16384 26.4 us mean (minimum 22.9) against 26.3 (23.5), 4096x14336
 * 13.2 against 13.0; a plain read of 64 MiB right after a small kernel
 * takes 20.9-21.6 us (tests/device/coldread.c, "small"), so in a chain
 * the GEMV is about 20% over the read. */
static const struct {
    uint64_t min_tokens;
    int variant;
    const char *opts;
} nv_tuned[] = {
    {8, 3, "-DNV_WARPS=8 -DNV_ROWS=1 -DNV_UNROLL=4"}, /* reached where bl_gemm_mma is off */
    {2, 3, ""},
    {1, 4, "-DNV_WARPS=8 -DNV_U=2 -DNV_R=2"},
};

/* One call's NV kernel: variant, build options (BITNET_GEMV_OPTS or the
 * tuned ones), tunables and the launch values that follow from them. */
typedef struct {
    int variant;       /* 1, 3 or 4 */
    const char *opts;
    nv_tunables t;
    size_t nbp;        /* nv4: blocks of a staged row, padded to nbp % 8 == 4 */
    size_t lrow;       /* bytes of one token's staged activations */
    cl_int tt;         /* nv3, nv4: tokens staged per pass */
    cl_uint rw;        /* nv4: rows per warp */
} nv_plan;

static bitnet_status nv_plan_make(nv_plan *p, const bn_ocl_caps *caps, uint64_t T, uint64_t out, size_t nblocks)
{
    const char *ev = getenv("BITNET_GEMV_NV"), *eopts = getenv("BITNET_GEMV_OPTS");
    if (ev && *ev) {
        if ((ev[0] != '1' && ev[0] != '3' && ev[0] != '4') || ev[1] != '\0')
            return bn_fail(BITNET_E_INVALID, "bitlinear: BITNET_GEMV_NV=%s: 1, 3 or 4", ev);
        p->variant = ev[0] - '0';
        p->opts = eopts ? eopts : "";
    } else {
        size_t i = 0;
        while (T < nv_tuned[i].min_tokens) i++; /* T >= 1 (bn_bitlinear_check) */
        p->variant = nv_tuned[i].variant;
        p->opts = eopts ? eopts : nv_tuned[i].opts;
    }
    for (size_t i = 0; i < N_NV_NAMES; i++)
        *(long *)((char *)&p->t + nv_names[i].off) = opt_value(p->opts, nv_names[i].name, nv_names[i].def);
    const size_t cap = caps->local_mem > 1024 ? (size_t)caps->local_mem - 1024 : 0;
    const size_t lmem = p->t.lmem > 0 && (size_t)p->t.lmem < cap ? (size_t)p->t.lmem : cap;
    p->nbp = nblocks + ((12 - nblocks % 8) % 8);
    p->lrow = 128 * (p->variant == 4 ? p->nbp : (nblocks | 1));
    uint64_t tt = lmem / p->lrow;
    if (tt > (uint64_t)p->t.tt) tt = (uint64_t)p->t.tt;
    if (tt > T) tt = T;
    p->tt = (cl_int)tt;
    if (p->tt == 0) p->variant = 1; /* not one token's activations fit: the fallback */
    const uint64_t wg4 = (uint64_t)p->t.warps * 4 * (caps->compute_units ? caps->compute_units : 1);
    uint64_t rw = (out + wg4 - 1) / wg4;
    rw = rw < 1 ? 1 : rw > 16 ? 16 : rw;
    rw = (rw + (uint64_t)p->t.r - 1) / (uint64_t)p->t.r * (uint64_t)p->t.r; /* whole groups of NV_R rows */
    p->rw = (cl_uint)(p->t.rw > 0 ? p->t.rw : (long)rw);
    return BITNET_OK;
}

/* ---- activations from host memory --------------------------------------------
 * Quantized (float) or padded (int8) by the host straight into the staging
 * memory of their upload, where the caller's data already is: a quarter of
 * the bytes of float activations cross the bus, and no kernel runs for
 * them.  The device buffer holds T rows of xstride codes (zero past in),
 * then at `os` the T scales and at `osum` the T int32 code sums, each at
 * an offset a sub-buffer may start at.  The codes are the CPU's own
 * (bn_quant_kernels' qacts), which q_acts_rows matches bit for bit.
 * Measured on an H100 machine (2026-11-27, weights kept, five alternating
 * rounds, end-to-end medians in us, the median and range over the rounds),
 * host-made / q_acts_rows on the device / the commit before both:
 *   1 token   16384x16384  60.3 (58-67) / 65.4 (62-68) / 64.6 (62-70)
 *             4096x14336   39.1 (38-50) / 48.6 (40-53) / 41.7 (41-51)
 *             14336x4096   39.5 (39-49) / 52.1 (43-55) / 43.3 (43-55)
 *             4096x4096    34.6 (34-36) / 38.0 (37-40) / 37.9 (37-40)
 *   8 tokens  16384x16384  115 (105-122) / 146 (142-158) / 148 (142-163)
 *             4096x14336   69.5 (68-79) / 109 (97-118) / 94.7 (93-119)
 *             4096x4096    75.3 (54-87) / 70.4 (56-75) / 69.3 (55-75) */
typedef struct {
    const float *x;      /* float activations, or */
    const int8_t *xq;    /* int8 ones and their scales */
    const float *xs;
    uint64_t T, in;
    size_t xstride, codes, os, osum, total;
    bn_qacts_fn qacts;
    float *s;            /* each token's scale and code sum, host copies */
    int32_t *sum;
    uint64_t bad;        /* the first token holding NaN or Inf; T: none */
    uint64_t tbase;      /* the call's token number of the first (blocks of a call) */
    char *dst;           /* the piece being filled and its first token */
    uint64_t t0;
} hq_job;

static void hq_rows(void *arg, uint64_t begin, uint64_t end)
{
    hq_job *j = arg;
    const size_t in = (size_t)j->in;
    for (uint64_t i = begin; i < end; i++) {
        const uint64_t t = j->t0 + i;
        int8_t *q = (int8_t *)j->dst + i * j->xstride;
        if (j->x) {
            if (j->qacts(j->x + t * in, in, q, &j->s[t], &j->sum[t]) < in) {
                uint64_t cur = __atomic_load_n(&j->bad, __ATOMIC_RELAXED); /* the lowest token wins */
                while (t < cur && !__atomic_compare_exchange_n(&j->bad, &cur, t, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                }
                continue;
            }
        } else {
            memcpy(q, j->xq + t * in, in);
            j->s[t] = j->xs[t];
            int32_t tot = 0;
            for (size_t c = 0; c < in; c++) tot += q[c];
            j->sum[t] = tot;
        }
        memset(q + in, 0, j->xstride - in);
    }
}

/* The part of src (len bytes at offset off of the upload) inside the piece
 * [at, at + n) at dst. */
static void hq_put(char *dst, size_t at, size_t n, size_t off, const void *src, size_t len)
{
    const size_t b = off > at ? off : at, e = off + len < at + n ? off + len : at + n;
    if (b < e) memcpy(dst + (b - at), (const char *)src + (b - off), e - b);
}

/* The scales and sums in the piece [at, at + n) at dst, zeros between them. */
static void hq_tail(const hq_job *j, char *dst, size_t at, size_t n)
{
    if (at + n > j->codes) {
        const size_t b = at > j->codes ? at : j->codes;
        memset(dst + (b - at), 0, at + n - b);
        hq_put(dst, at, n, j->os, j->s, (size_t)j->T * sizeof(float));
        hq_put(dst, at, n, j->osum, j->sum, (size_t)j->T * sizeof(int32_t));
    }
}

#define HQ_PAR_MIN 65536 /* values quantized by the calling thread alone below it */

static int hq_par(const hq_job *j, uint64_t rows) { return rows > 1 && rows * j->in >= HQ_PAR_MIN; }
static uint64_t hq_grain(const hq_job *j) { return j->in >= HQ_PAR_MIN / 4 ? 1 : HQ_PAR_MIN / 4 / j->in; }

static bitnet_status hq_fill(bn_ocl *o, void *ctx, void *dst, size_t at, size_t n)
{
    hq_job *j = ctx;
    if (at < j->codes) { /* whole tokens: at is a multiple of xstride, and so is the end or it is past the codes */
        const size_t end = at + n < j->codes ? at + n : j->codes;
        const uint64_t rows = (end - at) / j->xstride;
        j->dst = dst;
        j->t0 = at / j->xstride;
        bn_parallel_for(hq_par(j, rows) ? bn_ocl_host_pool(o) : NULL, rows, hq_grain(j), hq_rows, j);
        if (j->bad < j->T)
            return bn_fail(BITNET_E_NUMERIC, "bitlinear: input holds NaN or Inf (token %llu)",
                           (unsigned long long)(j->tbase + j->bad));
    }
    hq_tail(j, dst, at, n);
    return BITNET_OK;
}

/* The bytes of a token's codes in the device's activations: the row's
 * blocks of 32 weight bytes, 128 codes each (zero past `in`). */
static size_t bl_xstride(uint64_t in) { return bitnet_t2_row_bytes(in) / 32 * 128; }

/* Where the codes, scales and sums of T tokens lie in their device buffer. */
static bitnet_status hq_layout(bn_ocl *o, uint64_t tokens, size_t xstride, hq_job *j)
{
    const bn_ocl_caps *caps = bn_ocl_get_caps(o);
    const size_t A = caps->base_align ? caps->base_align : 4096, T = (size_t)tokens, tb = T * sizeof(float);
    j->codes = T * xstride; /* fits: bn_bitlinear_check */
    if (j->codes > SIZE_MAX / 2 - 2 * (A + tb)) return bn_fail(BITNET_E_OVERFLOW, "bitlinear: activations too large");
    j->os = (j->codes + A - 1) / A * A;
    j->osum = (j->os + tb + A - 1) / A * A;
    j->total = j->osum + tb;
    return BITNET_OK;
}

/* What hq_init allocated. */
static void hq_free(hq_job *j)
{
    free(j->s), free(j->sum);
    j->s = NULL, j->sum = NULL;
}

/* The job of io's activations (offsets, host copies of the scales and sums). */
static bitnet_status hq_init(bn_ocl *o, const bitnet_bitlinear_io *io, uint64_t tbase, uint64_t in, size_t xstride,
                             hq_job *j)
{
    const size_t tb = (size_t)io->tokens * sizeof(float);
    *j = (hq_job){.x = io->x, .xq = io->xq, .xs = io->xs, .T = io->tokens, .in = in, .xstride = xstride,
                  .bad = io->tokens, .tbase = tbase};
    bitnet_status st = hq_layout(o, io->tokens, xstride, j);
    if (st != BITNET_OK) return st;
    j->qacts = bn_quant_kernels_for(bn_cpu_simd())->qacts;
    j->s = malloc(tb);
    j->sum = malloc(tb);
    if (!j->s || !j->sum) {
        hq_free(j);
        return bn_fail(BITNET_E_NOMEM, "bitlinear: host scratch");
    }
    return BITNET_OK;
}

/* ---- the next block's activations, quantized while this block is enqueued ----
 * In a call that goes in blocks of tokens (bn_ocl_bitlinear) the host
 * quantizes block b + 1 into held staging memory on the copy threads
 * (bn_parallel_begin) while the calling thread enqueues block b's product
 * and read (10-20 us of NVIDIA's driver a block); bl_one(b + 1) joins the
 * quantization (hq_end) before anything else, so that its own uploads find
 * the threads free.  Where the staging memory cannot be held (activations
 * over 8 MiB) the block quantizes in hq_upload as a single call does. */
typedef struct {
    hq_job j;
    void *host;     /* held staging memory with the codes (NULL: none) */
    bn_section sec; /* the quantization, begun */
} hq_pre;

static void hq_begin(bn_ocl *o, const bitnet_bitlinear_io *io, uint64_t tbase, uint64_t in, size_t xstride, hq_pre *p)
{
    p->host = NULL;
    p->sec.pool = NULL;
    if (hq_init(o, io, tbase, in, xstride, &p->j) != BITNET_OK) return; /* hq_upload will say it */
    if (p->j.total > BN_OCL_STAGE_MAX || bn_ocl_stage_hold(o, p->j.total, &p->host) != BITNET_OK) {
        p->host = NULL;
        hq_free(&p->j);
        return;
    }
    p->j.dst = p->host;
    p->j.t0 = 0;
    const uint64_t rows = p->j.T;
    bn_parallel_begin(hq_par(&p->j, rows) ? bn_ocl_host_pool(o) : NULL, &p->sec, rows, hq_grain(&p->j), hq_rows, &p->j);
}

/* Waits for the quantization begun by hq_begin (nothing if none); a NaN or
 * Inf found is the error. */
static bitnet_status hq_end(hq_pre *p)
{
    bn_parallel_end(&p->sec);
    if (!p->host) return BITNET_OK;
    if (p->j.bad < p->j.T)
        return bn_fail(BITNET_E_NUMERIC, "bitlinear: input holds NaN or Inf (token %llu)",
                       (unsigned long long)(p->j.tbase + p->j.bad));
    hq_tail(&p->j, p->host, 0, p->j.total);
    return BITNET_OK;
}

/* Gives back what hq_begin took (its quantization waited for). */
static void hq_drop(bn_ocl *o, hq_pre *p)
{
    bn_parallel_end(&p->sec);
    if (!p->host) return;
    bn_ocl_staged_release(o, p->host);
    hq_free(&p->j);
    p->host = NULL;
}

/* A block of a call in blocks of tokens (bn_ocl_bitlinear). */
typedef struct {
    hq_pre *pre;                        /* this block's activations, begun before (its host NULL: none) */
    hq_pre *next;                       /* NULL: the last block */
    const bitnet_bitlinear_io *next_io; /* the next block's, begun here once this block's are enqueued */
    uint64_t next_tbase;
    cl_mem act, y;                      /* the block's own buffers: its activations and float output */
    cl_event after;                     /* its upload waits for it (NULL: none) */
} bl_blocks;

/* Uploads the activations of io (host memory) into a scratch buffer q and
 * makes sub-buffers of it for the scales and sums; with pre (its host not
 * NULL) they were quantized into held staging memory already (hq_begin,
 * hq_end), and pre gives it back.
 * Tried and not kept (H200, 2026-12-02): the pool keeping the sub-buffers
 * it had made of a buffer, for the next call that takes it.  The two
 * clCreateSubBuffer and two clReleaseMemObject of a one-token call (4.5 us
 * of host time, tests/device/cltrace.c) went, but end to end nothing
 * moved: 16384x16384 one token 56.5-58.6 us against 53.2-59.1, 4096x14336
 * 33.7-40.8 against 35.8-49.0, 64 tokens 370.7-432.9 / 208.7-215.8 against
 * 380.7-452.4 / 190.6-198.8 (host pointers, weights kept, three alternating
 * rounds). */
static bitnet_status hq_upload(bn_ocl *o, const bitnet_bitlinear_io *io, uint64_t tbase, uint64_t in, size_t xstride,
                               const bl_blocks *bk, bn_ocl_arg *q, cl_mem *sc, cl_mem *sum)
{
    hq_pre *pre = bk ? bk->pre : NULL;
    hq_job j;
    bitnet_status st = BITNET_OK;
    if (pre && pre->host) { /* a block's, on the queue of uploads */
        j = pre->j;
        bn_ocl_borrow(bk->act, j.total, q);
        st = bn_ocl_staged_write_side(o, pre->host, q->m, j.total, bk->after);
        if (st != BITNET_OK) bn_ocl_staged_release(o, pre->host);
        pre->host = NULL;
        hq_free(&j);
    } else {
        if ((st = hq_init(o, io, tbase, in, xstride, &j)) != BITNET_OK) return st;
        /* a block's too large to hold in staging memory goes on the ops'
         * queue, in order with what it held before the call */
        if (bk) bn_ocl_borrow(bk->act, j.total, q);
        else st = bn_ocl_scratch(o, j.total, q);
        if (st == BITNET_OK) st = bn_ocl_upload_fill(o, q->m, 0, j.total, xstride, hq_fill, &j);
        hq_free(&j);
    }
    if (st != BITNET_OK) return st;
    const size_t tb = (size_t)io->tokens * sizeof(float);
    cl_int err;
    const cl_buffer_region rs = {j.os, tb}, rsum = {j.osum, tb};
    if (!(*sc = clCreateSubBuffer(q->m, 0, CL_BUFFER_CREATE_TYPE_REGION, &rs, &err)))
        return bn_cl_fail(err, "clCreateSubBuffer(codes, 0, REGION, scales)", __FILE__, __LINE__);
    if (!(*sum = clCreateSubBuffer(q->m, 0, CL_BUFFER_CREATE_TYPE_REGION, &rsum, &err)))
        return bn_cl_fail(err, "clCreateSubBuffer(codes, 0, REGION, sums)", __FILE__, __LINE__);
    return BITNET_OK;
}

/* One call, or one block of tokens of a call (tbase: its first token's
 * number, for messages).  host_q: the activations are in host memory
 * (bn_ocl_bitlinear asks once per call).  With `staged` not NULL (host
 * activations and a host float output only) the output is not downloaded:
 * its read into pinned staging memory is enqueued and *staged set to where
 * it lands (bn_ocl_staged_wait, then bn_ocl_staged_release). */
static bitnet_status bl_one(bn_ocl *o, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io, int host_q,
                            uint64_t tbase, const void **staged, const bl_blocks *bk)
{
    const bn_ocl_caps *caps = bn_ocl_get_caps(o);
    const uint64_t T = io->tokens, in = w->in, out = w->out;
    const size_t rb = bitnet_t2_row_bytes(in), nblocks = rb / 32;
    const size_t xstride = bl_xstride(in);
    const int group = w->kind == BITNET_SCALE_GROUP;
    bitnet_status st = BITNET_OK;
    /* operands: weights, scales, bias; activations (float or int8 + s); output
     * (float, or int8 + s re-quantized from a float scratch) */
    bn_ocl_arg aw = {0}, ad = {0}, ab = {0}, ax = {0}, axs = {0}, ay = {0}, ayq = {0}, ays = {0}, anw = {0}, ares = {0};
    /* scratch: padded codes, their scales and sums, per-token flags */
    bn_ocl_arg sq = {0}, ss = {0}, ssum = {0}, ysum = {0};
    cl_mem sflag = NULL, rflag = NULL; /* bn_ocl_flag_get: the input's, the re-quantized output's */
    cl_mem bw = NULL, bx = NULL, bs = NULL, bd = NULL, bb = NULL, by = NULL, bsum = NULL;
    cl_mem hs = NULL, hsum = NULL; /* host-made activations: sub-buffers of sq (hq_upload) */
    uint32_t *flags = NULL;

    /* sizes were checked by bn_bitlinear_check (each fits size_t) */
    const size_t wbytes = (size_t)out * rb, xbytes = (size_t)T * xstride, ybytes = (size_t)(T * out) * sizeof(float);
    const size_t nd = (size_t)bn_bitlinear_n_scales(w), tb = (size_t)T * sizeof(float);

    const char *kname;
    /* On an H200 (kernel time, 4096 x 14336) the dp4a kernel does 1 token
     * in 19 us, 8 in 73 us and 64 in 0.52 ms, where bl_gemv needs 137 us
     * for one and bl_gemm 7.7 ms for 64: NVIDIA takes it for any count.
     * The portable kernels break even near 16 tokens. */
    const int emulate = bn_ocl_env_on("BITNET_GEMV_NV_EMULATE");
    /* planned on every device: its options are on every build line */
    nv_plan nv;
    if ((st = nv_plan_make(&nv, caps, T, out, nblocks))) goto out;
    const int mma = bn_ocl_mma_wanted(caps, w, T); /* tensor cores: bitlinear_mma.c */
    /* The activations in bl_mma_skinny's order where the device makes them.
     * The host's keep the row order: permuting each row in place right
     * after quantizing it (hq_frag_row, e6cdb3b) saved 1-3 us of kernel at
     * 8 tokens but cost more end to end.  H100, driver 580.159.04,
     * 2026-12-07, four to five alternating rounds in one call of
     * `bitnet-bench --device opencl --op bitlinear --scale row
     * --keep-weights --no-check --shape 16384x16384,4096x4096,14336x4096
     * --tokens 2,8 --min-time 0.2`, end-to-end medians in us, the host's
     * rows permuted / not (the device's permuted in both) / the build
     * before either: 8 tokens 110.8 / 97.9 / 94.6, 66.3 / 62.8 / 57.8,
     * 86.6 / 77.1 / 80.8; 2 tokens 81.1 / 82.9 / 79.7, 49.6 / 42.0 / 40.0,
     * 58.9 / 55.2 / 59.5 (kernel medians at 8 tokens 35.2 / 37.2 / 37.1,
     * 11.7 / 12.4 / 12.6, 16.1 / 16.7 / 16.7). */
    const int frag = !host_q && mma && bn_ocl_mma_frag(w, T, nblocks);
    if (mma) kname = "bl_gemm_mma";
    else if (group) kname = "bl_group";
    else if ((caps->is_nvidia && !bn_ocl_env_on("BITNET_OCL_PORTABLE")) || emulate)
        kname = nv.variant == 4 ? "bl_gemv_nv4" : nv.variant == 3 ? "bl_gemv_nv3" : "bl_gemv_nv1";
    else if (T > GEMM_MIN_TOKENS) kname = "bl_gemm";
    else kname = "bl_gemv";
    /* one token (GEMV): the kernel is built for one (no registers for unused
     * accumulators: 16384x16384 went from 48 to 34 us on an H100; the last
     * -D wins).  Only for one, so that the programs stay few. */
    const char *ttopt = T == 1 && nv.t.tt > 1 ? " -DNV_TT=1" : "";
    /* the last options this thread made, reused while what they are made
     * from is the same: formatting them took a tenth of a call's host
     * instructions (callgrind, one token on PoCL) */
    static _Thread_local struct {
        char opts[512], nvopts[256];
        int contig, emulate, tt1;
    } last;
    const int contig = caps->is_gpu ? 0 : 1, tt1 = *ttopt != 0;
    const char *const opts = last.opts;
    if (!last.opts[0] || last.contig != contig || last.emulate != emulate || last.tt1 != tt1 ||
        strcmp(last.nvopts, nv.opts) != 0) {
        const int on = snprintf(last.opts, sizeof last.opts,
                                "-cl-fp32-correctly-rounded-divide-sqrt -DCONTIG=%d -DGEMV_LX=%d -DGEMV_RY=%d -DTS=%d%s %s%s",
                                contig, GEMV_LX, GEMV_RY, TS, emulate ? " -DNV_EMULATE" : "", nv.opts, ttopt);
        const size_t nl = strlen(nv.opts);
        if (on < 0 || (size_t)on >= sizeof last.opts || nl >= sizeof last.nvopts) {
            last.opts[0] = 0;
            st = bn_fail(BITNET_E_INVALID, "bitlinear: BITNET_GEMV_OPTS too long");
            goto out;
        }
        memcpy(last.nvopts, nv.opts, nl + 1);
        last.contig = contig;
        last.emulate = emulate;
        last.tt1 = tt1;
    }
    cl_kernel k = NULL;
    if (!mma && (st = bn_ocl_kernel(o, "bitlinear", kname, opts, &k))) goto out;
    const int nv4 = strcmp(kname, "bl_gemv_nv4") == 0, nv3 = nv4 || strcmp(kname, "bl_gemv_nv3") == 0;
    /* bl_gemv_nv4 reads device int8 activations as they are where a row
     * needs no padding (in a multiple of 128), summing their codes itself:
     * no q_pad_i8 kernel before it.  Measured on an H200 (bitnet-bench --op
     * ffn 4096x14336, one token, the intermediate passed as yq -> xq): the
     * block's kernels 48.7-50.7 us, against 58.8-64.0 us through q_pad_i8.
     * Re-quantizing the output in the GEMV's last work-group (a done
     * counter, no q_acts_rows after it) measured 56.5-56.8 us and was not
     * kept: one work-group re-reading a whole row costs more than a kernel. */
    const int direct = nv4 && !host_q && !io->x && xstride == in;
    size_t rwg = 256; /* q_acts_rows' Q_RWG: a power of two the device allows (formatted only below 256) */
    while (rwg > 1 && rwg > caps->max_wg) rwg /= 2;
    char qbuf[64], qbin[80];
    /* BN_GPU as norm_rows has it (the order of the fused norm's sums);
     * qin: the input's, in bl_mma_skinny's order with frag */
    static const char *const qo[2][2] = {
        {"-DQ_WG=64 -DQ_RWG=256 -DBN_GPU=0", "-DQ_WG=64 -DQ_RWG=256 -DBN_GPU=0 -DQ_FRAG=1"},
        {"-DQ_WG=64 -DQ_RWG=256 -DBN_GPU=1", "-DQ_WG=64 -DQ_RWG=256 -DBN_GPU=1 -DQ_FRAG=1"}};
    const char *qopts = qo[caps->is_gpu ? 1 : 0][0], *qin = qo[caps->is_gpu ? 1 : 0][frag];
    if (rwg < 256) {
        snprintf(qbuf, sizeof qbuf, "-DQ_WG=64 -DQ_RWG=%u -DBN_GPU=%d", (unsigned)rwg, caps->is_gpu ? 1 : 0);
        snprintf(qbin, sizeof qbin, "%s -DQ_FRAG=%d", qbuf, frag);
        qopts = qbuf;
        qin = qbin;
    }

    if (bk && (st = hq_end(bk->pre)) != BITNET_OK) goto out; /* first: the uploads below may want the threads */
    if ((st = bn_ocl_in(o, w->t2, wbytes, &aw)) || (st = bn_ocl_in(o, w->d, nd * sizeof(float), &ad)) ||
        (st = bn_ocl_in(o, io->bias, io->bias ? (size_t)out * sizeof(float) : 0, &ab)) ||
        (st = bn_ocl_in(o, io->residual, io->residual ? ybytes : 0, &ares)))
        goto out;
    /* the activations: quantized (float in) or padded (int8 in), with the
     * per-token code sums (int32 like every sum of the op), by the host where
     * they are in host memory, else on the device */
    if (host_q ? (st = hq_upload(o, io, tbase, in, xstride, bk, &sq, &hs, &hsum)) != BITNET_OK
               : !direct && ((st = bn_ocl_scratch(o, xbytes, &sq)) || (st = bn_ocl_scratch(o, tb, &ssum))))
        goto out;
    if (bk && bk->next) hq_begin(o, bk->next_io, bk->next_tbase, in, xstride, bk->next);
    const size_t qwg = 64; /* Q_WG of the quantize family */
    const size_t qglobal = (size_t)T * qwg;
    const cl_ulong c_cols = in, c_xs = xstride;
    /* the float output: the caller's (host or device), or a scratch to
     * re-quantize; a host output from float input carries the per-token
     * NaN flags behind it, so that one download brings both */
    const int flags_behind = io->x && !host_q && io->y && !bn_is_device_ptr(io->y);
    if (bk) bn_ocl_borrow(bk->y, ybytes, &ay); /* a block's own: read on the queue of downloads */
    else if ((st = flags_behind ? bn_ocl_scratch(o, ybytes + tb, &ay)
                   : io->y      ? bn_ocl_out(o, io->y, ybytes, &ay)
                                : bn_ocl_scratch(o, ybytes, &ay)))
        goto out;
    if (host_q) {
        bs = hs;
    } else if (io->x) { /* one work-group per token: absmax, codes, sums, scale, flag (kernels/quantize.cl) */
        cl_kernel kq;
        if ((st = bn_ocl_in(o, io->x, (size_t)(T * in) * sizeof(float), &ax)) ||
            (st = bn_ocl_in(o, io->norm, io->norm ? (size_t)in * sizeof(float) : 0, &anw)) ||
            (st = bn_ocl_scratch(o, tb, &ss)) ||
            (!flags_behind && (st = bn_ocl_flag_get(o, (size_t)T, &sflag))) ||
            (st = bn_ocl_kernel(o, "quantize", "q_acts_rows", qin, &kq)))
            goto out;
        const cl_ulong c_foff = flags_behind ? ybytes / 4 : 0;
        cl_mem fm = flags_behind ? ay.m : sflag, nwm = io->norm ? anw.m : ax.m;
        const cl_float c_neps = io->norm_eps;
        const cl_int c_hn = io->norm != NULL;
        const size_t gq = (size_t)T * rwg;
        if ((st = bn_ocl_args(o, kq, 11, sizeof ax.m, &ax.m, sizeof c_cols, &c_cols, sizeof c_xs, &c_xs, sizeof sq.m,
                              &sq.m, sizeof ss.m, &ss.m, sizeof ssum.m, &ssum.m, sizeof fm, &fm, sizeof c_foff,
                              &c_foff, sizeof nwm, &nwm, sizeof c_neps, &c_neps, sizeof c_hn, &c_hn)) ||
            (st = bn_ocl_run(o, kq, 1, &gq, &rwg, "bitlinear")))
            goto out;
        bs = ss.m;
    } else {
        cl_kernel kp;
        if ((st = bn_ocl_in(o, io->xq, (size_t)(T * in), &ax)) || (st = bn_ocl_in(o, io->xs, tb, &axs)) ||
            (!direct &&
             (st = bn_ocl_kernel(o, "quantize", "q_pad_i8", frag ? "-DQ_WG=64 -DQ_FRAG=1" : "-DQ_WG=64", &kp))))
            goto out;
        if (!direct && ((st = bn_ocl_args(o, kp, 5, sizeof ax.m, &ax.m, sizeof c_cols, &c_cols, sizeof c_xs, &c_xs,
                                          sizeof sq.m, &sq.m, sizeof ssum.m, &ssum.m)) ||
                        (st = bn_ocl_run(o, kp, 1, &qglobal, &qwg, "bitlinear"))))
            goto out;
        bs = axs.m;
    }
    bw = aw.m;
    bd = ad.m;
    bb = ab.m;
    bx = direct ? ax.m : sq.m;
    bsum = host_q ? hsum : direct ? ax.m /* not read */ : ssum.m;
    by = ay.m;

    const cl_int per_row = w->kind == BITNET_SCALE_ROW, has_bias = io->bias != NULL, act = (cl_int)io->act;
    const cl_ulong c_out = out, c_tok = T, c_in = in, c_xstride = xstride, c_nhalf = 2 * nblocks, c_nblocks = nblocks;
    const cl_uint c_group = w->group;
    const cl_long perturb = bn_test_perturb("bitlinear") && !io->yq ? 0 : -1;
    size_t global[2], local[2];
    cl_uint dims = 2;
    int nres = 14; /* the index of the residual's arguments (BL_RES_ARGS) */
    if (mma) {
        /* bl_gemm_mma: arguments and launch in bitlinear_mma.c */
    } else if (group) {
        st = bn_ocl_args(o, k, 14, sizeof bw, &bw, sizeof bx, &bx, sizeof bs, &bs, sizeof bd, &bd, sizeof c_group,
                         &c_group, sizeof bb, &bb, sizeof has_bias, &has_bias, sizeof act, &act, sizeof by, &by,
                         sizeof c_out, &c_out, sizeof c_tok, &c_tok, sizeof c_in, &c_in, sizeof c_xstride, &c_xstride,
                         sizeof perturb, &perturb);
        dims = 1; /* a work-group of GRP_WG (64) per row */
        local[0] = 64;
        global[0] = (size_t)out * 64;
    } else {
        const int gemm = strcmp(kname, "bl_gemm") == 0, nvk = strncmp(kname, "bl_gemv_nv", 10) == 0;
        const cl_ulong c_len = gemm || nvk ? c_nblocks : c_nhalf;
        /* bl_gemv_nv3 takes three more: its local staging buffer, tokens per
         * pass and the per-token sums; bl_gemv_nv4 two more: the padded row
         * of its staging buffer (blocks) and rows per warp */
        const cl_uint c_nbp4 = (cl_uint)nv.nbp;
        const int nargs = nv4 ? 19 : nv3 ? 17 : 14;
        nres = nargs;
        st = bn_ocl_args(o, k, nargs, sizeof bw, &bw, sizeof bx, &bx, sizeof bs, &bs, sizeof bd, &bd,
                         sizeof per_row, &per_row, sizeof bb, &bb, sizeof has_bias, &has_bias, sizeof act, &act,
                         sizeof by, &by, sizeof c_out, &c_out, sizeof c_tok, &c_tok, sizeof c_len, &c_len,
                         sizeof c_xstride, &c_xstride, sizeof perturb, &perturb,
                         (size_t)nv.tt * nv.lrow, (const void *)NULL, sizeof nv.tt, &nv.tt, sizeof bsum, &bsum,
                         sizeof c_nbp4, &c_nbp4, sizeof nv.rw, &nv.rw);
        if (nvk) {
            const uint64_t per_wg = (uint64_t)nv.t.warps * (nv4 ? (uint64_t)nv.rw : (uint64_t)nv.t.rows);
            local[0] = 32;
            local[1] = (size_t)nv.t.warps;
            global[0] = 32;
            global[1] = (size_t)((out + per_wg - 1) / per_wg) * (size_t)nv.t.warps;
        } else if (gemm) {
            local[0] = TS;
            local[1] = TS;
            global[0] = ((size_t)T + TS - 1) / TS * TS;
            global[1] = ((size_t)out + TS - 1) / TS * TS;
        } else {
            local[0] = GEMV_LX;
            local[1] = GEMV_RY;
            global[0] = local[0];
            global[1] = ((size_t)out + GEMV_RY - 1) / GEMV_RY * GEMV_RY;
        }
    }
    if (st) goto out;
    const cl_mem bres = io->residual ? ares.m : by; /* any buffer when there is none */
    if (!mma && !st) st = bn_ocl_bl_res_args(o, k, group ? 14 : nres, bres, io->residual != NULL);
    if (st) goto out;
    if (nv4) { /* own_sum: whether the kernel sums the codes itself (direct) */
        const cl_int c_own = direct;
        if ((st = bn_ocl_arg_at(o, k, 21, sizeof c_own, &c_own))) goto out;
    }
    if ((st = mma ? bn_ocl_bitlinear_mma(o, w, io, bw, bx, bs, bd, bb, by, bsum, bres, nblocks, xstride, frag)
                  : bn_ocl_run(o, k, dims, global, local, "bitlinear")))
        goto out;
    if (io->yq) { /* re-quantized on the device by q_acts_rows, the bits of the CPU's */
        cl_kernel kr;
        const size_t gr = (size_t)T * rwg;
        const cl_ulong c_foff0 = 0;
        const cl_float c_eps0 = 0.0f;
        const cl_int c_nonorm = 0;
        if ((st = bn_ocl_out(o, io->yq, (size_t)(T * out), &ayq)) || (st = bn_ocl_out(o, io->ys, tb, &ays)) ||
            (st = bn_ocl_scratch(o, tb, &ysum)) || (st = bn_ocl_flag_get(o, (size_t)T, &rflag)) ||
            (st = bn_ocl_kernel(o, "quantize", "q_acts_rows", qopts, &kr)))
            goto out;
        /* codes written contiguously: the row stride is out itself */
        if ((st = bn_ocl_args(o, kr, 11, sizeof by, &by, sizeof c_out, &c_out, sizeof c_out, &c_out, sizeof ayq.m,
                              &ayq.m, sizeof ays.m, &ays.m, sizeof ysum.m, &ysum.m, sizeof rflag, &rflag,
                              sizeof c_foff0, &c_foff0, sizeof by, &by, sizeof c_eps0, &c_eps0, sizeof c_nonorm,
                              &c_nonorm)) ||
            (st = bn_ocl_run(o, kr, 1, &gr, &rwg, "bitlinear")))
            goto out;
        if (bn_ocl_resident(&ayq) && bn_ocl_resident(&ays)) {
            if ((st = bn_ocl_defer_check_n(o, rflag, (size_t)T, "bitlinear: output holds NaN or Inf")) == BITNET_OK)
                rflag = NULL; /* the check owns it */
            else
                goto out;
        } else {
            cl_uint *f = malloc(tb);
            if (!f) { st = bn_fail(BITNET_E_NOMEM, "bitlinear: host scratch"); goto out; }
            st = bn_ocl_download(o, rflag, 0, f, tb);
            for (uint64_t t = 0; st == BITNET_OK && t < T; t++)
                if (f[t]) st = bn_fail(BITNET_E_NUMERIC, "bitlinear: output holds NaN or Inf");
            free(f);
            if (st) goto out;
        }
    }
    /* the input's NaN flags (device-quantized): with a host output read now, else at the next wait */
    if (io->x && !host_q) {
        const int host_out = io->yq ? !bn_ocl_resident(&ayq) : flags_behind;
        if (!host_out) {
            st = bn_ocl_defer_check_n(o, sflag, (size_t)T, "bitlinear: input holds NaN or Inf");
            if (!st) sflag = NULL; /* the check owns it */
            goto out;
        }
        flags = malloc(tb);
        if (!flags) { st = bn_fail(BITNET_E_NOMEM, "bitlinear: host scratch"); goto out; }
        st = flags_behind ? bn_ocl_download_tail(o, by, 0, io->y, ybytes, flags, tb)
                          : bn_ocl_download(o, sflag, 0, flags, tb);
        if (st) goto out;
    }
    for (uint64_t t = 0; flags && t < T; t++)
        if (flags[t]) {
            st = bn_fail(BITNET_E_NUMERIC, "bitlinear: input holds NaN or Inf (token %llu)", (unsigned long long)t);
            goto out;
        }
    if (io->yq && !bn_ocl_resident(&ayq) && (st = bn_ocl_done(o, &ayq, st)) == BITNET_OK &&
        (st = bn_ocl_done(o, &ays, st)) == BITNET_OK && bn_test_perturb("bitlinear"))
        io->yq[0] = (int8_t)(io->yq[0] == 127 ? 126 : io->yq[0] + 1);
out:
    if (staged && st == BITNET_OK) { /* read into staging memory, the pooled output released */
        st = bk ? bn_ocl_read_staged_side(o, ay.m, ybytes, staged) : bn_ocl_read_staged(o, 1, &ay.m, &ybytes, staged);
        ay.host = NULL;
    }
    st = bn_ocl_done(o, &ay, st);
    st = bn_ocl_done(o, &ayq, st);
    st = bn_ocl_done(o, &ays, st);
    if (st != BITNET_OK) bn_ocl_drain(o);
    st = bn_ocl_done(o, &aw, st);
    st = bn_ocl_done(o, &ad, st);
    st = bn_ocl_done(o, &ab, st);
    st = bn_ocl_done(o, &ax, st);
    st = bn_ocl_done(o, &axs, st);
    st = bn_ocl_done(o, &anw, st);
    st = bn_ocl_done(o, &ares, st);
    if (hs) clReleaseMemObject(hs);
    if (hsum) clReleaseMemObject(hsum);
    st = bn_ocl_done(o, &sq, st);
    st = bn_ocl_done(o, &ss, st);
    st = bn_ocl_done(o, &ssum, st);
    st = bn_ocl_done(o, &ysum, st);
    bn_ocl_flag_put(o, sflag);
    bn_ocl_flag_put(o, rflag);
    free(flags);
    return st;
}

bitnet_status bn_ocl_bl_res_args(bn_ocl *o, cl_kernel k, int at, cl_mem bres, int has_res)
{
    const cl_int h = has_res;
    bitnet_status st = bn_ocl_arg_at(o, k, at, sizeof bres, &bres);
    return st ? st : bn_ocl_arg_at(o, k, at + 1, sizeof h, &h);
}

/* ---- blocks of tokens -----------------------------------------------------------
 * A call whose activations and float output are both in host memory goes, on
 * a GPU, in blocks of tokens.  The host quantizes block b + 1 on the copy
 * threads while the calling thread enqueues block b (hq_begin above); each
 * block is uploaded on a queue of uploads and read back into staging memory
 * on a queue of downloads (staging.c), so that the device copies one block
 * in and another out while it multiplies a third; the host copies the
 * outputs out while the device works on later blocks.  Each block has its
 * own device buffers for the whole call (the copies on the other queues are
 * ordered with the product only, by a barrier and a marker), and the first
 * upload waits for what the queue held before the call.  The copies out
 * start once every block is enqueued: a NaN found in a later block leaves
 * the caller's output as it was.  A block holds at least BLOCK_MIN tokens
 * and the call at most BLOCK_MAX blocks (more blocks read the weights more
 * often); a block's output fits one staging buffer (8 MiB), and the whole
 * output 64 MiB.
 * BITNET_OCL_BLOCK_TOKENS=N sets the block (any device; 0: never split).
 * Measured on an H100 machine (driver 580.159.04, 2026-12-06, weights
 * kept, row scales, `bitnet-bench --device opencl --op bitlinear
 * --keep-weights --scale row --min-time 0.3`, four alternating rounds, end
 * to end in us, run by run), one queue and the quantization in turn (the
 * commit before) / the next block quantized during the enqueues only /
 * both changes:
 *   4096x14336   64 tokens  165.6 189.1 172.9 175.4 / 163.6 174.5 172.2 178.1 / 148.9 141.5 177.5 155.7
 *               512 tokens  996 1023 1218 978 / 892 994 941 1245 / 776 835 1056 864
 *   16384x16384  64 tokens  355.7 374.6 386.0 362.7 / 367.7 379.5 375.5 398.4 / 298.9 297.6 291.6 293.8
 *               512 tokens  1671 1641 1671 1725 / 1635 1624 1674 1691 / 1203 1120 1190 1117
 * The profiled kernels of the call took 0-12% longer beside the copies
 * (16384x16384 at 64 tokens 122-126 us against 111-113).  A trace of one
 * 64-token call of 4096x14336 (tests/device/cltrace.c) shows why: the
 * host spent 38 us quantizing the second block after enqueueing the first
 * before, 7 us after, and the last wait took 34 us against 45.  On a host
 * busier than that one (another H100 machine, the same day, four rounds,
 * e2e 0.3-8 ms at 512 tokens), the copies beside the product without the
 * quantization during the enqueues were slower than both changes in 7 of
 * 8 pairs at 64 tokens (4096x14336 410-690 us against 259-357).  A third
 * H100 machine, three rounds, before / both: 4096x14336 at 64 tokens
 * 168.8 169.0 172.9 / 181.7 177.1 171.9 (level or slower: its kernels
 * 49-52 us against 46-47 beside the copies), at 512 980-1049 / 897-1130;
 * 16384x16384 at 64 383-396 / 301-312, at 512 1684-4238 / 1168-1549. */
#define BLOCK_MIN 32
#define BLOCK_MAX 4
#define BLOCK_OUT_BYTES (8u << 20)
#define BLOCK_HELD_BYTES (64u << 20) /* a larger output goes in one block */

static bitnet_status block_tokens(const bn_ocl_caps *caps, uint64_t T, uint64_t out, uint64_t *tb)
{
    *tb = T;
    const char *e = getenv("BITNET_OCL_BLOCK_TOKENS");
    uint64_t b;
    if (e && *e) {
        char *end;
        const unsigned long long v = strtoull(e, &end, 10);
        if (*end || *e == '-') return bn_fail(BITNET_E_INVALID, "bitlinear: BITNET_OCL_BLOCK_TOKENS=%s: a token count", e);
        if (v == 0) return BITNET_OK;
        b = v;
    } else {
        if (!caps->is_gpu || T < 2 * BLOCK_MIN) return BITNET_OK;
        b = (T + BLOCK_MAX - 1) / BLOCK_MAX;
        if (b < BLOCK_MIN) b = BLOCK_MIN;
    }
    const uint64_t cap = BLOCK_OUT_BYTES / (out * sizeof(float)); /* out * 4 fits: bn_bitlinear_check */
    if (cap == 0) return BITNET_OK; /* not one token's output fits a staging buffer */
    if (b > cap) b = cap;
    /* every block's output stays in staging memory until the last is enqueued */
    if (b < T && T * out <= BLOCK_HELD_BYTES / sizeof(float)) *tb = b;
    return BITNET_OK;
}

/* The tokens of the block from t0 of a call of T in blocks of tb. */
static uint64_t block_n(uint64_t T, uint64_t t0, uint64_t tb) { return T - t0 < tb ? T - t0 : tb; }

/* The block of io's tokens [t0, t0 + tb) (fewer at the end). */
static void block_io(const bitnet_bitlinear_io *io, uint64_t in, uint64_t out, uint64_t t0, uint64_t tb,
                     bitnet_bitlinear_io *bio)
{
    *bio = *io;
    bio->tokens = block_n(io->tokens, t0, tb);
    if (io->x) bio->x = io->x + t0 * in;
    else {
        bio->xq = io->xq + t0 * in;
        bio->xs = io->xs + t0;
    }
    bio->y = io->y + t0 * out;
    if (io->residual) bio->residual = io->residual + t0 * out;
}

bitnet_status bn_ocl_bitlinear(void *ctx, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io)
{
    bn_ocl *o = ctx;
    const uint64_t T = io->tokens, in = w->in, out = w->out;
    /* a fused input norm is the device's (norm_rows' arithmetic), wherever x is */
    const int host_q = io->x ? !io->norm && bn_ocl_is_host(o, io->x, (size_t)(T * in) * sizeof(float))
                             : bn_ocl_is_host(o, io->xq, (size_t)(T * in)) &&
                                   bn_ocl_is_host(o, io->xs, (size_t)T * sizeof(float));
    const int host_io = host_q && io->y && !io->yq && bn_ocl_is_host(o, io->y, (size_t)(T * out) * sizeof(float));
    uint64_t tb = T;
    bitnet_status st = host_io ? block_tokens(bn_ocl_get_caps(o), T, out, &tb) : BITNET_OK;
    if (st != BITNET_OK || tb >= T) return st ? st : bl_one(o, w, io, host_q, 0, NULL, NULL);
    const uint64_t nb = (T + tb - 1) / tb;
    const void **staged = calloc(nb, sizeof *staged);
    if (!staged) return bn_fail(BITNET_E_NOMEM, "bitlinear: host scratch");
    /* each block's activations and output in buffers of its own for the
     * whole call: the copies beside the ops are not ordered with them */
    bn_ocl_arg *bufs = calloc(2 * nb, sizeof *bufs);
    hq_pre pre[2] = {{.host = NULL}, {.host = NULL}};
    bitnet_bitlinear_io bio[2];
    cl_event start = NULL; /* the first upload waits for what the queue holds before the call */
    const size_t xstride = bl_xstride(in);
    if (!bufs) st = bn_fail(BITNET_E_NOMEM, "bitlinear: host scratch");
    for (uint64_t b = 0; st == BITNET_OK && b < nb; b++) {
        const uint64_t n = block_n(T, b * tb, tb);
        hq_job lay;
        if ((st = hq_layout(o, n, xstride, &lay)) == BITNET_OK && (st = bn_ocl_scratch(o, lay.total, &bufs[2 * b])) == BITNET_OK)
            st = bn_ocl_scratch(o, (size_t)(n * out) * sizeof(float), &bufs[2 * b + 1]);
    }
    if (st == BITNET_OK) {
        cl_int err = clEnqueueMarkerWithWaitList(bn_ocl_queue(o), 0, NULL, &start);
        if (err != CL_SUCCESS) st = bn_cl_fail(err, "clEnqueueMarkerWithWaitList(queue, 0, NULL, &start)", __FILE__, __LINE__);
    }
    if (st == BITNET_OK) {
        block_io(io, in, out, 0, tb, &bio[0]);
        hq_begin(o, &bio[0], 0, in, xstride, &pre[0]);
    }
    for (uint64_t b = 0; st == BITNET_OK && b < nb; b++) {
        const int last = b + 1 == nb;
        if (!last) block_io(io, in, out, (b + 1) * tb, tb, &bio[(b + 1) % 2]);
        const bl_blocks bk = {&pre[b % 2], last ? NULL : &pre[(b + 1) % 2], &bio[(b + 1) % 2], (b + 1) * tb,
                              bufs[2 * b].m, bufs[2 * b + 1].m, b ? NULL : start};
        st = bl_one(o, w, &bio[b % 2], 1, b * tb, &staged[b], &bk);
    }
    hq_drop(o, &pre[0]);
    hq_drop(o, &pre[1]);
    for (uint64_t k = 0; st == BITNET_OK && k < nb; k++) { /* in order: each wait finds the later blocks running */
        const uint64_t t0 = k * tb, n = block_n(T, t0, tb);
        const size_t bytes = (size_t)(n * out) * sizeof(float);
        st = bn_ocl_staged_wait(o, staged[k], bytes);
        if (st == BITNET_OK) bn_parallel_memcpy(bn_ocl_host_pool(o), io->y + t0 * out, staged[k], bytes);
    }
    if (st != BITNET_OK) bn_ocl_drain(o); /* no copy stays in flight into staging memory or the buffers */
    else bn_ocl_collect(o);               /* the queues are idle up to the last read: time what ran */
    for (uint64_t k = 0; k < nb; k++) bn_ocl_staged_release(o, staged[k]);
    for (uint64_t k = 0; bufs && k < 2 * nb; k++) bn_ocl_done(o, &bufs[k], BITNET_OK);
    if (start) clReleaseEvent(start);
    free(bufs);
    free(staged);
    return st;
}
