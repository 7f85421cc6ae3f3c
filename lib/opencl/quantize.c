/*
 * quantize.c - host code of the quantization family on OpenCL
 * (kernels/quantize.cl).  Weights: q_absum gives exact partial sums of |w|
 * per piece; the host merges them with the same bn_xsum arithmetic as the
 * CPU, rounds once, computes d and s = 1/d, uploads s, and q_pack writes T2.
 * GPUs (see "layout choice" below) take q_absum_gpu, q_merge_gpu (the same
 * exact merge and rounding on the device) and q_pack_gpu, enqueued back to
 * back: the host waits once, at the end, or not at all when both outputs
 * are device buffers written in place (the NaN flag is then read at the
 * next wait).  Activations and dequantization are one kernel each.
 * Results are bit-identical to the CPU.
 */
#include "ocl.h"

#include "../cpu/quantize.h"
#include "../devmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q_WG 64
#define Q_LIMBS 11
#define Q_SHORT 0x8000000000000000ull /* a piece in the short form (kernels/quantize.cl) */
#define Q_OPTS "-DQ_WG=64"

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* Buffers of one call, released together. */
typedef struct {
    bn_ocl *o;
    cl_mem m[6];
    int n;
} bufs;

static bitnet_status take(bufs *b, size_t bytes, cl_mem *out)
{
    bitnet_status st = bn_ocl_alloc(b->o, bytes ? bytes : 4, out);
    if (st == BITNET_OK) b->m[b->n++] = *out;
    return st;
}

static void release_all(bufs *b)
{
    for (int i = 0; i < b->n; i++) bn_ocl_release(b->o, b->m[i]);
    b->n = 0;
}

static bitnet_status zero_flag(bn_ocl *o, cl_mem flag)
{
    const cl_uint z = 0;
    return bn_ocl_upload(o, flag, 0, &z, sizeof z);
}

static bitnet_status read_flag(bn_ocl *o, cl_mem flag, cl_uint *v) { return bn_ocl_download(o, flag, 0, v, sizeof *v); }

/* Scale layout of the kernels: scale of (r, c) is s[r * sr + c / group]. */
static void scale_layout(bitnet_scale_kind kind, uint32_t group, uint64_t cols, cl_ulong *sr, cl_ulong *g)
{
    *sr = kind == BITNET_SCALE_TENSOR ? 0 : kind == BITNET_SCALE_ROW ? 1 : (cols + group - 1) / group;
    *g = kind == BITNET_SCALE_GROUP ? group : ~(cl_ulong)0;
}

static int on_device(const void *p)
{
    bn_devref r;
    return bn_devmem_find(p, &r);
}

/* The op's NaN/Inf error: with the position when x is host memory. */
static bitnet_status nonfinite(const char *op, const float *x, uint64_t cols, uint64_t n);

static size_t first_bad_float(const float *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return (size_t)i;
    return (size_t)n;
}

static bitnet_status nonfinite(const char *op, const float *x, uint64_t cols, uint64_t n)
{
    if (on_device(x)) return bn_fail(BITNET_E_NUMERIC, "%s: input holds NaN or Inf", op);
    return bn_quant_nonfinite(op, x, cols, first_bad_float(x, n));
}

/* An op's NaN/Inf flag once its kernels are enqueued: with defer (every
 * output a device buffer) left to the next wait, which reports "op: input
 * holds NaN or Inf" (the check then owns the flag: *flag becomes NULL);
 * else read now, and when set, the op's error (with the position when x is
 * host memory). */
static bitnet_status nan_flag(bn_ocl *o, cl_mem *flag, int defer, const char *op, const float *x, uint64_t cols,
                              uint64_t n)
{
    if (defer) {
        char what[96];
        snprintf(what, sizeof what, "%s: input holds NaN or Inf", op);
        bitnet_status st = bn_ocl_defer_check(o, *flag, what);
        if (!st) *flag = NULL;
        return st;
    }
    cl_uint v;
    bitnet_status st = read_flag(o, *flag, &v);
    return st ? st : v ? nonfinite(op, x, cols, n) : BITNET_OK;
}

/* The exact sum of one slice from its pieces, rounded once to double. */
static double merge_pieces(const uint64_t *part, uint64_t pieces)
{
    const uint64_t *p = part;
    if (pieces == 1 && p[Q_LIMBS - 1] == Q_SHORT && (p[1] >> 32) == 0 && p[0] <= UINT64_MAX - (p[1] << 32))
        return ldexp((double)(p[0] + (p[1] << 32)), (int)p[2] - 149); /* one rounding, then exact */
    bn_xsum acc;
    bn_xsum_zero(&acc);
    for (uint64_t i = 0; i < pieces; i++, p += Q_LIMBS) {
        if (p[Q_LIMBS - 1] == Q_SHORT) {
            bn_xsum_add(&acc, p[0], (unsigned)p[2]);
            bn_xsum_add(&acc, p[1], (unsigned)p[2] + 32);
        } else {
            for (unsigned k = 0; k < Q_LIMBS; k++) bn_xsum_add(&acc, p[k], 32 * k);
        }
    }
    return bn_xsum_to_double(&acc);
}

/* ---- layout choice and tunables ----------------------------------------------
 * CPU drivers (PoCL) keep q_absum/q_pack: a work-group per piece with a
 * short strided loop, one item per T2 byte.  GPUs with fp64 take
 * q_absum_gpu/q_pack_gpu (kernels/quantize.cl): coalesced float4 loads,
 * segments of work-items per slice piece, at least compute_units *
 * Q_PER_CU work-groups for a tensor, per-item double sums proven exact or
 * redone as integers, and one uint (4 T2 bytes) per work-item in a 2-D grid
 * (no 64-bit division per element).  Both give the bits of the _ref.
 * Test hook: BITNET_OCL_FORCE_GPU_LAYOUT=1 picks the GPU layout on any
 * device with fp64.  Tuning hook: BITNET_QUANT_OPTS, e.g.
 * "-DQ_GWG=512 -DQ_PER_CU=4 -DQ_PACK_WG=128 -DQ_ITEM_F4=8" (work-group
 * size of the sums, work-groups per compute unit for a tensor, work-group
 * size of the packing, float4 words per work-item of short slices). */
#define Q_GWG_DEF 256
/* Work-groups per compute unit for a tensor: H200 sweep (tests/device/
 * quant-sweep.sh): 54.9 us per tensor at 4096x4096, 63.5 with 8.  Fewer
 * lost too (H100, 2026-12-06, two alternating rounds of `ROUNDS=2
 * VARIANTS="-DQ_PER_CU=2|-DQ_PER_CU=3" bash tests/device/quant-ab.sh`,
 * kernel medians in us, 4 / 3 / 2): 4096x4096 64.3-64.5 / 73.2-73.3 /
 * 79.0-79.4, 4097x4099 66.8-67.2 / 76.4-76.5 / 82.2-82.6, 14336x4096
 * 206.8-206.9 / 206.6-206.7 / 206.4-206.8; a chain of 20 calls at
 * 4096x4096 69.8-69.9 / 78.6-79.0 / 85.2-85.3 a call.  torch's expression
 * took 243.6-244.4 us in the same call. */
#define Q_PER_CU_DEF 4
/* q_pack_gpu taking the rows last to first (so that what q_absum_gpu read
 * last might still be in L2) was no faster: 52.6-55.2 against 51.1-54.3 us
 * per tensor at 4096x4096, H200, three alternating rounds, 2026-11-26.
 * q_absum_gpu's segments read their pieces side by side, so what it read
 * last is spread over the whole tensor.  Two later tries (H200,
 * 2026-11-29, kernel times by tests/device/cltrace.c): pieces of whole rows
 * with q_pack_gpu taking each piece's last rows first made the tensor
 * slower (64.3-67.3 against 52.2-53.9 us: its rows then run 128 KiB apart);
 * q_absum_gpu walking the tensor from end to start with the whole grid (so
 * that q_pack_gpu's first rows are the last read) left q_pack_gpu at
 * 26.3 us (25.5-26.9 before) and the tensor at 50.1-51.4 against
 * 51.1-54.4 us: not kept.  q_pack_gpu takes as long as q_absum_gpu even on
 * a 16 MiB tensor that fits in L2 (about 12 us each at 1024x4096), so the
 * second read is not what bounds it.  Measured (H200,
 * 2026-12-01, three alternating rounds, one binary with BITNET_KERNEL_DIR
 * picking the sources): q_absum_gpu's float4 loop loading four words
 * (seg apart) before adding any, for more loads in flight (it reads at
 * 2.1-2.6 TB/s against the read kernel's 4.5).  Per tensor it won at
 * 14336x4096 (162-166 against 181-186 us) and 4097x4099 (64-66 against
 * 68-69), not at 4096x4096 (51-54 either way); with row scales it lost at
 * 4097x4099 (96-98 against 92-93 us) and 14336x4096 (208-215 against
 * 206-208).  So it is built for per-tensor slices only (gpu_opts,
 * Q_ABSUM_U4): three more alternating rounds the same day, per tensor
 * 14336x4096 164.1-167.3 against 179.6-182.6 us, 4097x4099 63.5-65.6
 * against 68.9-70.9, 4096x4096 51.7-52.9 against 52.0-53.1; row scales
 * within the noise (4097x4099 91.2-91.8 against 90.0-93.3, 14336x4096
 * 205.2-208.4 against 206.0-208.0).  Since 2026-12-02 a per-tensor slice
 * is walked by the whole grid from its end to its start, four loads in
 * flight per item (Q_ABSUM_DESC, which replaced Q_ABSUM_U4's pieces read
 * side by side).  H200, three alternating rounds of
 * `bitnet-bench --device opencl --op quantize_weights --scale tensor,row`,
 * kernel medians in us, before / after: per tensor 4096x4096 51.2-53.4 /
 * 49.6-49.8, 14336x4096 163.1-165.8 / 159.2-160.8, 4097x4099 63.1-65.8 /
 * 53.8-55.6; row scales unchanged.  By tests/device/cltrace.c it is
 * q_absum_gpu that gained (4096x4096 24.5 / 23.9 us): q_pack_gpu stayed at
 * 26.1-26.4 us.  tests/device/between.c shows why: the L2 keeps what a
 * kernel read for the next (a second grid-stride read of 64 MiB, the first
 * one's order reversed, takes 16.6 us against 21.5 in the same order), but
 * not across the host round trip made here between the two kernels (a
 * blocking 4-byte read and write between the reads: 20.3 us; 9.6 against
 * 6.0 at 16 MiB).  Tried the same day and not kept: the pieces merged
 * exactly on the device by the work-group that finishes q_absum_gpu last
 * (a count in the flag buffer; it wrote d and 1/d, q_pack_gpu then read
 * the scale from the device, one wait at the end of the call, the codes
 * and scales bit for bit the host's).  q_pack_gpu then hit the L2: 27.3-
 * 28.5 -> 22.3-22.4 us at 4096x4096 (tests/device/cltrace.c), but
 * q_absum_gpu took 23.9-24.1 -> 31.2-32.5 us, with the sums of the merge
 * in a private array or in registers alike, so the tensor was slower:
 * H200, kernel medians in us, old / merged, three rounds and then two:
 * 4096x4096 49.0-52.5 / 53.2-55.1, 14336x4096 158.8-161.6 / 163.1-167.7,
 * 4097x4099 52.9-55.1 / 57.1-59.0, 1024x4096 23.3-25.3 / 27.1-28.2.  Where
 * the last work-group's 7-8 us go was not found (a merge kernel of its own
 * would tell).
 * Since 2026-12-02 the merge is a kernel of its own (q_merge_gpu) and the
 * host does not wait between the passes.  H200, one call, two alternating
 * rounds against the host merge (e56fba8), medians in us, old / new:
 * kernel times (profiled, the three kernels added) per tensor 4096x4096
 * 50.3-50.7 / 54.6-55.1, 14336x4096 157.8-160.8 / 164.5-164.8, 4097x4099
 * 53.0-54.3 / 58.0-58.3; row scales 73.0-74.7 / 74.9-75.1, 204.6-207.6 /
 * 210.3-210.6, 89.5-90.6 / 92.5-92.6.  By tests/device/cltrace.c
 * q_merge_gpu takes 8.3-8.5 us per tensor (528 pieces; 5.9 with row scales,
 * a slice per item) and q_pack_gpu gains 2-3 us (25.4 -> 22.2 at
 * 4096x4096: part of the weights is still in L2); a merge with its limbs
 * added in a tree of 8 levels, its pieces loaded one word at a time,
 * took the same 8.5 us.  The caller's view, weights, codes and scales in
 * device buffers and the scales read back each call (`bitnet-bench
 * --resident --timer e2e`), three alternating rounds: per tensor 4096x4096
 * 109.1-117.8 / 79.9-80.7, 14336x4096 228.0-232.3 / 187.0-189.3; row
 * scales 239.5-246.3 / 98.0-101.3 and 634.5-668.2 / 235.5-240.7.  Kept for
 * the caller's view.  Where q_merge_gpu's 8.3 us went (H200, cltrace,
 * kernels swapped in by BITNET_KERNEL_DIR, two rounds): a kernel that only
 * stores one scale is profiled at 3.3 us; without the piece loads 6.0-6.2;
 * with a trivial finish (no rounding, no division) 7.7.  Then the second
 * level of the sums read its words 16 apart (a 16-way bank conflict) and an
 * item waited on L2 once per piece: read conflict-free and with four
 * pieces' loads in flight, it takes 7.16-7.20 us against 8.23-8.42, and a
 * chained call (--resident --chain 20, three rounds) 56.5-56.9 against
 * 57.8-58.6 us.
 * Also tried then and not kept: q_pack_gpu as one wave of work-groups
 * whose items loop over rows (4096x4096 31.2 against 26.2 us a call), and
 * its codes from vector comparisons (27.9 against 26.1), two or four words
 * per item (a second call, q_pack_gpu's mean over 4096x4096 and 4097x4099
 * per tensor: 27.1-31.8 / 30.6-32.8 / 35.3-41.5 us for one, two and four
 * words at work-groups of 128, 256 and 512, two rounds).
 * Tried and not kept (2026-12-05; the code is in commits c80fe83 and
 * 19596e1, reverted): per tensor in one read of the weights.  A code
 * depends on s only through |w s| > 1/2, so for every s in a band [lo, hi]
 * it is known where w lo and w hi give the same code.  q_spec_gpu took the
 * band from a sample of 8192 values (the mean |w| within four standard
 * errors), read every weight once for the exact sums (as q_absum_gpu) and
 * the band's codes (3 where the ends disagree) into a scratch; q_spec_fix
 * merged the sums (every work-group the same merge) and copied the codes,
 * computing again the float4s that held a 3, or every word when s missed
 * the band.  Bit for bit the _ref (tests with the band too narrow and too
 * wide), but slower: H100, `bitnet-bench --device opencl --op
 * quantize_weights --scale tensor`, kernel medians in us, three kernels /
 * one read: 4096x4096 64.0-64.4 / 98.4-99.1, 14336x4096 207.0-207.3 /
 * 262.0-269.2.  By tests/device/cltrace.c (4096x4096) q_absum_gpu 28.7-28.9,
 * q_merge_gpu 7.1-7.3, q_pack_gpu 28.0-28.2 against q_spec_gpu 58 and
 * q_spec_fix 41.  q_spec_fix without the reloads took 11 us: reading again
 * the float4s that hold a 3 (about 19% of the words with bench's uniform
 * weights) cost the rest; with all four float4s of such a word loaded at
 * once it took 32.5 us, with a sample of 16384 values as well 28.4-28.6.
 * q_spec_gpu without its sums took 37 us, without
 * its codes 57: the exact sums cost 20 us more there than in q_absum_gpu,
 * and neither four accumulators, nor the next words' loads issued before
 * the sums, nor more work-groups (8 a compute unit: 44-50 us) closed it.
 * The best combination took 84 us for the tensor.
 * A second design the same day (branch spec-quant, commit d21b5cc): tiles
 * of 256 float4s walked as q_absum_gpu walks (consecutive items,
 * consecutive float4s, the next round's loads in flight), the words
 * assembled through local memory, and each float4 with an open code kept
 * in a per-work-group stash, so that q_spec_fix sets those codes without
 * reading the weights again (it runs over q_spec_gpu's work-groups, a
 * fourth as many, each merging every piece).  Exact, and level with the
 * three kernels: H100, three rounds, 4096x4096 66.0-66.6 us against
 * 63.7-64.3, 14336x4096 204.0-205.0 against 206.5-207.5; q_spec_gpu 44-46
 * us (the sample of the band's estimate about 2 of them), q_spec_fix 21.
 * The one read with its codes costs 17 us more than q_absum_gpu's, and the
 * fix 21 against the 35 of the merge and the packing it replaces: a tie,
 * so the three kernels stay (one path fewer).
 * Tried and not kept (2026-12-05, commits 0f59475..c2f7ee4, reverted): per
 * tensor in one kernel, q_tensor_gpu, so that no launch or profiling event
 * separates the two reads.  Each work-group took a ticket (a 64-bit atomic
 * in a buffer kept zero between calls); the first tickets summed as
 * q_absum_gpu and added their pieces to eleven carry-save limbs with 64-bit
 * atomic adds, the last of them rounded and published s, the later tickets
 * waited for it (only on work-groups already running: safe on any grid)
 * and packed, from the tensor's start.  Bit for bit the _ref on PoCL and
 * on the H100 (test_quantize), but slower: H100, three alternating rounds
 * of tests/device/quant-ab.sh, kernel medians in us, three kernels / one:
 * 4096x4096 63.2 / 68.1-68.8, 14336x4096 202.5-202.9 / 220.0-220.3,
 * 4097x4099 65.2 / 71.3-72.0 (Q_PER_CU=8: 74.2-74.4); the caller's view
 * (--resident --timer e2e) 81.8-82.8 / 88.7-90.0 at 4096x4096, a chained
 * call 68.8-69.1 / 73.1-73.4.  torch's unfused expression took 242-244 us
 * in the same call (3.8x the three kernels).  Holding the packing
 * work-groups resident while the sums run, and the sums' code in every
 * work-group of the kernel, cost more than the launch saved. */
#define Q_PACK_WG_DEF 256
#define Q_ITEM_F4_DEF 4 /* float4 words per work-item at least, where slices are short (rows, groups) */
#define Q_MWG 256 /* q_merge_gpu's work-group (its reqd_work_group_size: the kernel's default) */
#define Q_MERGE_GROUPS 65536 /* at most this many work-groups of it (it loops over slices) */
#define Q_PER_ITEM 256 /* at most this many |w| per work-item and pass: the double stays exact to spans of 20 binades */

typedef struct {
    unsigned gwg, per_cu, pack_wg, item_f4;
    char opts[200];
} gpu_tune;

static unsigned opt_value(const char *opts, const char *key, unsigned def, unsigned lo, unsigned hi)
{
    const char *p = opts ? strstr(opts, key) : NULL;
    if (!p) return def;
    unsigned long v = strtoul(p + strlen(key), NULL, 10);
    return v >= lo && v <= hi ? (unsigned)v : def;
}

static int use_gpu_layout(bn_ocl *o, gpu_tune *t)
{
    const bn_ocl_caps *c = bn_ocl_get_caps(o);
    const char *e = getenv("BITNET_OCL_FORCE_GPU_LAYOUT");
    if (!c->has_fp64 || !(c->is_gpu || (e && strcmp(e, "1") == 0))) return 0;
    const char *user = getenv("BITNET_QUANT_OPTS");
    t->gwg = opt_value(user, "-DQ_GWG=", Q_GWG_DEF, 32, 512);
    if (t->gwg & (t->gwg - 1)) t->gwg = Q_GWG_DEF;
    t->per_cu = opt_value(user, "-DQ_PER_CU=", Q_PER_CU_DEF, 1, 1024);
    t->pack_wg = opt_value(user, "-DQ_PACK_WG=", Q_PACK_WG_DEF, 1, 1024);
    t->item_f4 = opt_value(user, "-DQ_ITEM_F4=", Q_ITEM_F4_DEF, 1, 64);
    return 1;
}

/* The GPU layout's build options: per-tensor slices (long) walked by the
 * whole grid from the end (Q_ABSUM_DESC; measured above).  q_merge_gpu's
 * 1/d must be the correctly rounded quotient, which NVIDIA's default float
 * division is not: on an H200, built without the option and with 1/d
 * written (float)(1.0 / (double)d), one row scale of 14336 at 14336x4096
 * came out a unit apart (the compiler may narrow that to a float
 * division); with the option every row matched, in every run. */
static void gpu_opts(gpu_tune *t, bitnet_scale_kind kind)
{
    snprintf(t->opts, sizeof t->opts, "%s -DQ_GPU -DQ_GWG=%u -DQ_ABSUM_DESC=%d -cl-fp32-correctly-rounded-divide-sqrt",
             Q_OPTS, t->gwg, kind == BITNET_SCALE_TENSOR);
}

static uint64_t pow2_ceil(uint64_t v)
{
    uint64_t p = 1;
    while (p < v) p <<= 1;
    return p;
}

/* Launch geometry of q_absum_gpu for slices of `slice` elements. */
typedef struct {
    cl_uint seg;
    cl_ulong pieces, plen, nseg;
    size_t groups;
} gpu_grid;

static void gpu_absum_grid(const bn_ocl *o, const gpu_tune *t, uint64_t nsc, uint64_t slice, gpu_grid *g)
{
    uint64_t f4 = (slice + 3) / 4, seg = pow2_ceil(f4 ? (f4 + t->item_f4 - 1) / t->item_f4 : 1);
    if (seg > t->gwg) seg = t->gwg;
    uint64_t cu = bn_ocl_get_caps(o)->compute_units ? bn_ocl_get_caps(o)->compute_units : 1;
    uint64_t want_seg = cu * t->per_cu * (t->gwg / seg);
    uint64_t pieces = (slice + seg * Q_PER_ITEM - 1) / (seg * Q_PER_ITEM), fill = (want_seg + nsc - 1) / nsc;
    uint64_t most = (f4 + seg - 1) / seg; /* at least one float4 per item */
    if (fill > most) fill = most;
    if (pieces < fill) pieces = fill;
    if (pieces == 0) pieces = 1;
    uint64_t plen = ((slice + pieces - 1) / pieces + 3) / 4 * 4;
    if (plen == 0) plen = 4;
    pieces = (slice + plen - 1) / plen;
    if (pieces == 0) pieces = 1;
    g->seg = (cl_uint)seg;
    g->pieces = pieces;
    g->plen = plen;
    g->nseg = nsc * pieces;
    uint64_t per_group = t->gwg / seg;
    g->groups = (size_t)((g->nseg + per_group - 1) / per_group);
}

/* q_merge_gpu (kernels/quantize.cl): the slices' d and s = 1/d from the
 * pieces, on the device; a slice per work-item where slices have one piece,
 * else a work-group of Q_MWG items per slice. */
static bitnet_status gpu_merge(bn_ocl *o, const gpu_tune *t, cl_mem bpart, uint64_t nsc, uint64_t pieces, cl_uint ckind,
                               cl_ulong crows, cl_ulong ccols, cl_ulong cgroup, cl_mem bflag, cl_mem bd, cl_mem bs)
{
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "quantize", "q_merge_gpu", t->opts, &k);
    if (st) return st;
    const cl_ulong cnsc = nsc, cpieces = pieces;
    if ((st = bn_ocl_args(o, k, 10, sizeof bpart, &bpart, sizeof cnsc, &cnsc, sizeof cpieces, &cpieces, sizeof ckind,
                          &ckind, sizeof crows, &crows, sizeof ccols, &ccols, sizeof cgroup, &cgroup, sizeof bflag,
                          &bflag, sizeof bd, &bd, sizeof bs, &bs)))
        return st;
    if (bn_ocl_kernel_wg(o, k) < Q_MWG)
        return bn_fail(BITNET_E_DEVICE, "quantize_weights: the device takes work-groups of %zu < %d",
                       bn_ocl_kernel_wg(o, k), Q_MWG);
    const size_t local = Q_MWG; /* the kernel loops over slices past Q_MERGE_GROUPS work-groups */
    const size_t global = pieces == 1 ? round_up((size_t)nsc, local)
                                      : (size_t)(nsc < Q_MERGE_GROUPS ? nsc : Q_MERGE_GROUPS) * local;
    return bn_ocl_run(o, k, 1, &global, &local, "quantize_weights");
}

/* q_pack_gpu: one uint (4 T2 bytes) per work-item, a row per grid row. */
static bitnet_status gpu_pack(bn_ocl *o, const gpu_tune *t, cl_kernel kp, cl_mem bw, bitnet_scale_kind kind,
                              uint32_t group, uint64_t cols, uint64_t rows, cl_mem bs, cl_mem bt2)
{
    cl_ulong nb = (cols + BITNET_T2_BLOCK - 1) / BITNET_T2_BLOCK, sr, g, ccols = cols;
    scale_layout(kind, group, cols, &sr, &g);
    cl_ulong nw = nb * 8, last = 0;
    cl_uint gshift = 0;
    if (kind == BITNET_SCALE_GROUP) {
        gshift = bn_quant_gshift(kind, group);
        last = ((cols - 1) / 32) >> gshift;
    }
    bitnet_status st = bn_ocl_args(o, kp, 8, sizeof bw, &bw, sizeof ccols, &ccols, sizeof nw, &nw, sizeof sr, &sr,
                                   sizeof gshift, &gshift, sizeof last, &last, sizeof bs, &bs, sizeof bt2, &bt2);
    if (st) return st;
    size_t kwg = bn_ocl_kernel_wg(o, kp), l2[2] = {t->pack_wg < kwg ? t->pack_wg : kwg, 1};
    size_t g2[2] = {round_up((size_t)nw, l2[0]), (size_t)rows};
    return bn_ocl_run(o, kp, 2, g2, l2, "quantize_weights");
}

bitnet_status bn_ocl_quantize_weights(void *ctx, const float *w, uint64_t rows, uint64_t cols, bitnet_scale_kind kind,
                                      uint32_t group, uint8_t *out_t2, float *d)
{
    bn_ocl *o = ctx;
    const uint64_t n = rows * cols;
    const uint64_t nsc = kind == BITNET_SCALE_TENSOR ? 1 : kind == BITNET_SCALE_ROW ? rows : rows * ((cols + group - 1) / group);
    if (n == 0) {
        float *h = malloc((size_t)nsc * sizeof *h);
        if (!h) return bn_fail(BITNET_E_NOMEM, "quantize_weights: out of memory");
        for (uint64_t i = 0; i < nsc; i++) h[i] = 1e-5f;
        bn_ocl_arg ad;
        bitnet_status st = bn_ocl_out(o, d, (size_t)nsc * 4, &ad);
        if (!st) st = bn_ocl_upload(o, ad.m, 0, h, (size_t)nsc * 4);
        st = bn_ocl_done(o, &ad, st);
        free(h);
        return st;
    }
    gpu_tune tune;
    const int gpu = use_gpu_layout(o, &tune);
    if (gpu) gpu_opts(&tune, kind);
    const char *opts = gpu ? tune.opts : Q_OPTS;
    cl_kernel ka, kp;
    bitnet_status st = bn_ocl_kernel(o, "quantize", gpu ? "q_absum_gpu" : "q_absum", opts, &ka);
    if (st == BITNET_OK) st = bn_ocl_kernel(o, "quantize", gpu ? "q_pack_gpu" : "q_pack", opts, &kp);
    if (st) return st;
    if (gpu && bn_ocl_kernel_wg(o, ka) < tune.gwg) {
        /* Q_GWG is compiled in: a request past what this kernel takes on
         * this device (registers) is lowered to the largest power of two
         * it takes, and the program built again with it. */
        const size_t kwg = bn_ocl_kernel_wg(o, ka);
        while (tune.gwg > 32 && tune.gwg > kwg) tune.gwg >>= 1;
        if (tune.gwg > kwg)
            return bn_fail(BITNET_E_DEVICE, "quantize_weights: the device takes work-groups of %zu < 32", kwg);
        gpu_opts(&tune, kind);
        st = bn_ocl_kernel(o, "quantize", "q_absum_gpu", tune.opts, &ka);
        if (st == BITNET_OK) st = bn_ocl_kernel(o, "quantize", "q_pack_gpu", tune.opts, &kp);
        if (st) return st;
    }
    /* pieces: each work-group (CPU layout) or segment (GPU layout) sums one piece of one slice */
    const uint64_t slice = kind == BITNET_SCALE_TENSOR ? n : kind == BITNET_SCALE_ROW ? cols : group;
    uint64_t items64 = (slice + Q_WG - 1) / Q_WG;
    cl_uint items = (cl_uint)(items64 > 64 ? 64 : items64 ? items64 : 1);
    uint64_t pieces = (slice + (uint64_t)Q_WG * items - 1) / ((uint64_t)Q_WG * items);
    gpu_grid gg = {0, 0, 0, 0, 0};
    if (gpu) {
        gpu_absum_grid(o, &tune, nsc, slice, &gg);
        pieces = gg.pieces;
    }
    const uint64_t groups = nsc * pieces;
    const size_t rb = bitnet_t2_row_bytes(cols), tbytes = (size_t)(rows * rb);
    /* the host's merge (CPU layout): the pieces, and the scales it uploads */
    uint64_t *part = gpu ? NULL : malloc((size_t)groups * Q_LIMBS * sizeof *part);
    float *s = gpu ? NULL : malloc((size_t)nsc * sizeof *s), *dh = gpu ? NULL : malloc((size_t)nsc * sizeof *dh);
    bufs b = {o, {0}, 0};
    bn_ocl_arg aw = {0}, at2 = {0}, ad = {0};
    cl_mem bw = NULL, bpart, bflag = NULL, bs, bt2 = NULL;
    if (!gpu && (!part || !s || !dh)) {
        st = bn_fail(BITNET_E_NOMEM, "quantize_weights: out of memory");
        goto out;
    }
    if ((st = bn_ocl_in(o, w, (size_t)n * 4, &aw)) || (st = take(&b, (size_t)groups * Q_LIMBS * 8, &bpart)) ||
        (st = bn_ocl_flag_get(o, 1, &bflag)) || (st = take(&b, (size_t)nsc * 4, &bs)) ||
        (st = bn_ocl_out(o, out_t2, tbytes, &at2)) || (st = bn_ocl_out(o, d, (size_t)nsc * 4, &ad)))
        goto out;
    bw = aw.m;
    bt2 = at2.m;
    if ((st = zero_flag(o, bflag))) goto out;
    cl_uint ckind = (cl_uint)kind;
    cl_ulong crows = rows, ccols = cols, cgroup = group ? group : 1, cpieces = pieces;
    size_t global, local;
    if (gpu) {
        st = bn_ocl_args(o, ka, 11, sizeof bw, &bw, sizeof ckind, &ckind, sizeof crows, &crows, sizeof ccols, &ccols,
                         sizeof cgroup, &cgroup, sizeof cpieces, &cpieces, sizeof gg.plen, &gg.plen, sizeof gg.seg,
                         &gg.seg, sizeof gg.nseg, &gg.nseg, sizeof bpart, &bpart, sizeof bflag, &bflag);
        global = gg.groups * tune.gwg;
        local = tune.gwg;
    } else {
        st = bn_ocl_args(o, ka, 9, sizeof bw, &bw, sizeof ckind, &ckind, sizeof crows, &crows, sizeof ccols, &ccols,
                         sizeof cgroup, &cgroup, sizeof cpieces, &cpieces, sizeof items, &items, sizeof bpart, &bpart,
                         sizeof bflag, &bflag);
        global = (size_t)groups * Q_WG;
        local = Q_WG;
    }
    if (st || (st = bn_ocl_run(o, ka, 1, &global, &local, "quantize_weights"))) goto out;
    if (gpu) { /* merged on the device: no host round trip before q_pack_gpu */
        st = gpu_merge(o, &tune, bpart, nsc, pieces, ckind, crows, ccols, cgroup, bflag, ad.m, bs);
        if (st) goto out;
        if ((st = gpu_pack(o, &tune, kp, bw, kind, group, cols, rows, bs, bt2))) goto out;
        /* outputs written in place on the device: no wait (one written
         * through a copy would take it even after a NaN) */
        const int defer = bn_ocl_in_place(&at2) && bn_ocl_in_place(&ad);
        if ((st = nan_flag(o, &bflag, defer, "quantize_weights", w, cols, n)) || defer) goto out;
        st = bn_ocl_done(o, &ad, st);
        goto codes;
    }
    if ((st = nan_flag(o, &bflag, 0, "quantize_weights", w, cols, n))) goto out;
    if ((st = bn_ocl_download(o, bpart, 0, part, (size_t)groups * Q_LIMBS * 8))) goto out;
    for (uint64_t sl = 0; sl < nsc; sl++) {
        uint64_t len = slice;
        if (kind == BITNET_SCALE_GROUP) { /* the last group of a row may be short */
            uint64_t ng = (cols + group - 1) / group, c0 = (sl % ng) * group;
            len = cols - c0 < group ? cols - c0 : group;
        }
        dh[sl] = bn_absmean_scale(merge_pieces(part + sl * pieces * Q_LIMBS, pieces), len);
        s[sl] = 1.0f / dh[sl];
    }
    if ((st = bn_ocl_upload(o, bs, 0, s, (size_t)nsc * 4))) goto out;
    if (bn_ocl_resident(&ad)) st = bn_ocl_upload(o, ad.m, 0, dh, (size_t)nsc * 4);
    else memcpy(d, dh, (size_t)nsc * 4);
    if (st) goto out;
    cl_ulong nb = (cols + BITNET_T2_BLOCK - 1) / BITNET_T2_BLOCK, sr, g;
    scale_layout(kind, group, cols, &sr, &g);
    if ((st = bn_ocl_args(o, kp, 8, sizeof bw, &bw, sizeof crows, &crows, sizeof ccols, &ccols, sizeof nb, &nb,
                          sizeof sr, &sr, sizeof g, &g, sizeof bs, &bs, sizeof bt2, &bt2)))
        goto out;
    local = 256 < bn_ocl_kernel_wg(o, kp) ? 256 : bn_ocl_kernel_wg(o, kp);
    global = round_up(tbytes, local);
    if ((st = bn_ocl_run(o, kp, 1, &global, &local, "quantize_weights"))) goto out;
codes:
    if (!bn_ocl_resident(&at2)) {
        st = bn_ocl_done(o, &at2, st);
        if (!st && bn_test_perturb("quantize_weights")) out_t2[0] ^= 0x01;
    }
out:
    st = bn_ocl_done(o, &at2, st);
    ad.host = NULL; /* written above, or not to be written (an error) */
    st = bn_ocl_done(o, &ad, st);
    st = bn_ocl_done(o, &aw, st);
    bn_ocl_flag_put(o, bflag);
    release_all(&b);
    free(dh);
    free(part);
    free(s);
    return st;
}

bitnet_status bn_ocl_quantize_acts(void *ctx, const float *x, uint64_t rows, uint64_t cols, int8_t *q, float *s)
{
    bn_ocl *o = ctx;
    const uint64_t n = rows * cols;
    if (rows == 0) return BITNET_OK;
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "quantize", "q_acts", Q_OPTS, &k);
    if (st) return st;
    bn_ocl_arg ax = {0}, aq = {0}, as = {0};
    cl_mem bx = NULL, bq = NULL, bs = NULL, bflag = NULL;
    if ((st = bn_ocl_in(o, x, (size_t)n * 4, &ax)) || (st = bn_ocl_out(o, q, (size_t)n, &aq)) ||
        (st = bn_ocl_out(o, s, (size_t)rows * 4, &as)) || (st = bn_ocl_flag_get(o, 1, &bflag)))
        goto out;
    bx = ax.m;
    bq = aq.m;
    bs = as.m;
    if ((st = zero_flag(o, bflag))) goto out;
    cl_ulong ccols = cols;
    if ((st = bn_ocl_args(o, k, 5, sizeof bx, &bx, sizeof ccols, &ccols, sizeof bq, &bq, sizeof bs, &bs, sizeof bflag,
                          &bflag)))
        goto out;
    size_t global = (size_t)rows * Q_WG, local = Q_WG;
    if ((st = bn_ocl_run(o, k, 1, &global, &local, "quantize_acts"))) goto out;
    const int defer = bn_ocl_resident(&aq) && bn_ocl_resident(&as); /* no wait: the flag is read at the next one */
    if ((st = nan_flag(o, &bflag, defer, "quantize_acts", x, cols, n)) || defer) goto out;
    if ((st = bn_ocl_done(o, &aq, st)) || (st = bn_ocl_done(o, &as, st))) goto out;
    if (n && q && !on_device(q) && bn_test_perturb("quantize_acts")) {
        uint64_t i = n / 2;
        q[i] = (int8_t)(q[i] == 0 ? 1 : q[i] == -128 ? 127 : -q[i]);
    }
out:
    st = bn_ocl_done(o, &aq, st);
    st = bn_ocl_done(o, &as, st);
    st = bn_ocl_done(o, &ax, st);
    bn_ocl_flag_put(o, bflag);
    return st;
}

bitnet_status bn_ocl_dequantize_weights(void *ctx, const uint8_t *t2, uint64_t rows, uint64_t cols,
                                        bitnet_scale_kind kind, uint32_t group, const float *d, float *w)
{
    bn_ocl *o = ctx;
    const uint64_t n = rows * cols;
    if (n == 0) return BITNET_OK;
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "quantize", "q_dequant_w", Q_OPTS, &k);
    if (st) return st;
    const uint64_t nsc = kind == BITNET_SCALE_TENSOR ? 1 : kind == BITNET_SCALE_ROW ? rows : rows * ((cols + group - 1) / group);
    const size_t rb = bitnet_t2_row_bytes(cols), tbytes = (size_t)(rows * rb);
    bn_ocl_arg at = {0}, ad = {0}, aw = {0};
    cl_mem bt = NULL, bd = NULL, bw = NULL, bflag = NULL;
    if ((st = bn_ocl_in(o, t2, tbytes, &at)) || (st = bn_ocl_in(o, d, (size_t)nsc * 4, &ad)) ||
        (st = bn_ocl_out(o, w, (size_t)n * 4, &aw)) || (st = bn_ocl_flag_get(o, 1, &bflag)))
        goto out;
    bt = at.m;
    bd = ad.m;
    bw = aw.m;
    if ((st = zero_flag(o, bflag))) goto out;
    cl_ulong crows = rows, ccols = cols, crb = rb, sr, g;
    scale_layout(kind, group, cols, &sr, &g);
    if ((st = bn_ocl_args(o, k, 9, sizeof bt, &bt, sizeof crows, &crows, sizeof ccols, &ccols, sizeof crb, &crb,
                          sizeof sr, &sr, sizeof g, &g, sizeof bd, &bd, sizeof bw, &bw, sizeof bflag, &bflag)))
        goto out;
    size_t local = 256 < bn_ocl_kernel_wg(o, k) ? 256 : bn_ocl_kernel_wg(o, k), global = round_up((size_t)n, local);
    if ((st = bn_ocl_run(o, k, 1, &global, &local, "dequantize_weights"))) goto out;
    if (bn_ocl_resident(&aw)) {
        st = bn_ocl_defer_check(o, bflag, "dequantize_weights: invalid code 3");
        if (!st) bflag = NULL; /* the check owns the flag now */
        goto out;
    }
    cl_uint flag;
    if ((st = read_flag(o, bflag, &flag))) goto out;
    if (flag) { /* find the position on the host, the error path only */
        st = bn_fail(BITNET_E_FORMAT, "dequantize_weights: invalid code 3");
        for (uint64_t i = 0; i < n && !on_device(t2); i++) {
            uint64_t r = i / cols, c = i % cols;
            if (((t2[r * rb + (c / 128) * 32 + c % 32] >> (2 * ((c % 128) / 32))) & 3) == 3) {
                st = bn_fail(BITNET_E_FORMAT, "dequantize_weights: invalid code 3 at row %llu, column %llu",
                             (unsigned long long)r, (unsigned long long)c);
                break;
            }
        }
        goto out;
    }
    if ((st = bn_ocl_done(o, &aw, st))) goto out;
    if (bn_test_perturb("dequantize_weights")) w[n / 2] = w[n / 2] != 0.0f ? -3.0f * w[n / 2] : 1.0f;
out:
    st = bn_ocl_done(o, &aw, st);
    st = bn_ocl_done(o, &at, st);
    st = bn_ocl_done(o, &ad, st);
    bn_ocl_flag_put(o, bflag);
    return st;
}

bitnet_status bn_ocl_dequantize_acts(void *ctx, const int8_t *q, uint64_t rows, uint64_t cols, const float *s, float *x)
{
    bn_ocl *o = ctx;
    const uint64_t n = rows * cols;
    if (n == 0) return BITNET_OK;
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "quantize", "q_dequant_a", Q_OPTS, &k);
    if (st) return st;
    bn_ocl_arg aq = {0}, as = {0}, ax = {0};
    cl_mem bq = NULL, bs = NULL, bx = NULL;
    if ((st = bn_ocl_in(o, q, (size_t)n, &aq)) || (st = bn_ocl_in(o, s, (size_t)rows * 4, &as)) ||
        (st = bn_ocl_out(o, x, (size_t)n * 4, &ax)))
        goto out;
    bq = aq.m;
    bs = as.m;
    bx = ax.m;
    cl_ulong crows = rows, ccols = cols;
    if ((st = bn_ocl_args(o, k, 5, sizeof bq, &bq, sizeof crows, &crows, sizeof ccols, &ccols, sizeof bs, &bs,
                          sizeof bx, &bx)))
        goto out;
    size_t local = 256 < bn_ocl_kernel_wg(o, k) ? 256 : bn_ocl_kernel_wg(o, k), global = round_up((size_t)n, local);
    if ((st = bn_ocl_run(o, k, 1, &global, &local, "dequantize_acts"))) goto out;
    if (bn_ocl_resident(&ax)) goto out;
    if ((st = bn_ocl_done(o, &ax, st))) goto out;
    if (bn_test_perturb("dequantize_acts")) x[n / 2] = x[n / 2] != 0.0f ? -3.0f * x[n / 2] : 1.0f;
out:
    st = bn_ocl_done(o, &ax, st);
    st = bn_ocl_done(o, &aq, st);
    return bn_ocl_done(o, &as, st);
}
