/*
 * coldread.c - how fast can one OpenCL kernel read a buffer the L2 does not
 * hold, on an NVIDIA GPU?  The one-token GEMV of 16384 x 16384 reads 64 MiB
 * of codes once; bitnet-bench's roofline reads GiBs, where the start and
 * the end of a kernel do not count.  Each variant below reads NB buffers
 * of MIB MiB in turn (NB * MIB well past the L2, so every read is cold),
 * CHAIN kernels a chain on a queue without profiling, timed by %globaltimer
 * stamps before and after the chain (so a kernel's share includes one
 * kernel-to-kernel gap, about 1.5 us, as a caller's chain pays it); and the
 * same kernels one at a time with a profiling event (as bitnet-bench's
 * kernel times, about 3.3 us more, tests/device/between.c).
 * Variants:
 *   gs8, gs16   grid-stride float4 (bitnet-bench's read kernel), cus x 8 or
 *               16 work-groups of 256
 *   gs4x        grid-stride, four independent uint4 loads an iteration
 *   gs4x_nc     the same through ld.global.nc.L1::no_allocate.L2::256B
 *   warpU       each warp owns a contiguous slice (like a GEMV's rows) and
 *               reads it U x 512 bytes at a time (U = 4, 8), 4 work-groups
 *               of 8 warps per compute unit
 *   warp8x8     warp8 with 8 work-groups per compute unit
 *   warp8_nc    warp8 with the .nc/L2::256B load
 *   bulk        Hopper bulk copies (cp.async.bulk, mbarrier) of 8 KiB into
 *               local memory, 4 in flight per work-group of 128, 4
 *               work-groups per compute unit (a program of its own: skipped
 *               when the driver cannot build it)
 * Each variant is also timed (one profiling event) after the device has
 * been idle for 200 us ("idle", as each call of bitnet-bench finds it),
 * right after a copy of the size that leaves the L2 full of dirty lines
 * ("dirty"), and right after one work-group that spins for 8 us ("small":
 * the memory idle, the device not, as after q_acts_rows in a chain).  COLDREAD_NOBULK=1 leaves out bulk, COLDREAD_BULK=1
 * runs it alone.
 * Inline PTX: NVIDIA only.  A probe for the GPU machine (tests/device/),
 * not part of the library.
 * On H200 machines (2026-12-02, driver 580.159.04, three calls; us, medians
 * of 9; GB/s in brackets):
 *   64 MiB    chain          event          idle           dirty
 *   gs8       19.8-19.9      20.2-21.5      27.3           26.7
 *   gs4x_nc   19.4-19.5      20.4-20.5      24.5           22.6
 *   warp4     19.4           19.7-19.9      24.0           25.2
 *   warp8     19.3-19.4      19.7 (3404)    23.7 (2834)    25.2
 *   warp8_nc  18.9-19.0      19.7-20.7      26.3           23.0
 *   bulk      18.7           18.9-19.0      23.5 (2857)    24.3
 *   16 MiB: 6.7-8.1 chained, 9.2-12.0 with an event, 10.8-16.6 idle.
 *   256 MiB: 62.6-68.8 chained (3.9-4.3 TB/s), the event the same.
 *   A fourth call (another machine): 64 MiB warp4 / warp8 / gs8 event
 *   19.5 / 19.5 / 20.2, idle 22.4 / 22.6 / 22.9, small 20.9 / 21.2 / 21.6;
 *   4 MiB warp8 chain 5.9, event 6.9, idle 7.5, small 6.3.
 * So a cold read of 64 MiB that follows another kernel takes 19-20 us
 * whatever the load (grid-stride or a slice per warp, .nc with the
 * L2::256B hint, 2 to 4 KiB in flight per warp, bulk copies into local
 * memory), but 23.5-27 us when the device was idle before it: about 4 us
 * that every kernel started from idle pays, and that a chain of kernels
 * does not.  bitnet-bench's one-token GEMV of 16384 x 16384 (64 MiB of
 * codes) is timed that way, from idle: 26.5-26.9 us (medians; minima
 * 23.5-24.6) in the same calls, 10-20% over the fastest reads under the
 * same conditions.  Its 85%-of-copy target (3978 GB/s over 256 MiB, so about
 * 19.9 us) is below every idle-start read kernel here.  In a chain, right
 * after q_acts_rows, the GEMV still takes 26.4 us mean (minimum 22.9) by
 * tests/device/cltrace.c, where a read after a small kernel takes 21.
 *
 *   cc -O2 -o coldread tests/device/coldread.c -lOpenCL
 *   ./coldread [MIB...]      (default 16 64 256)
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"

#define REPS 9
#define CHAIN 24
#define NB 8

static const char *src =
    "__kernel void stamp(__global ulong *t, uint i) {\n"
    "  if (get_local_id(0) == 0) { ulong g; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(g)); t[i] = g; } }\n"
    "__kernel void spin(ulong ns) {\n"
    "  ulong t0, t; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "  do asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); while (t - t0 < ns); }\n"
    "__kernel void gs(__global const float4 *x, __global float *out, ulong n) {\n"
    "  ulong stride = get_global_size(0); float4 acc = (float4)(0.0f);\n"
    "  for (ulong i = get_global_id(0); i < n; i += stride) acc += x[i];\n"
    "  out[get_global_id(0)] = acc.x + acc.y + acc.z + acc.w; }\n"
    "inline uint4 ld_nc(__global const uint4 *p) {\n"
    "  uint a, b, c, d;\n"
    "  asm volatile(\"ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\"\n"
    "      : \"=r\"(a), \"=r\"(b), \"=r\"(c), \"=r\"(d) : \"l\"((ulong)p));\n"
    "  return (uint4)(a, b, c, d); }\n"
    "#ifdef NC\n#define LD(p) ld_nc(p)\n#else\n#define LD(p) (*(p))\n#endif\n"
    "#ifndef U\n#define U 4\n#endif\n"
    /* four independent loads an iteration, n a multiple of 4 * stride not required */
    "__kernel void gs4x(__global const uint4 *x, __global uint *out, ulong n) {\n"
    "  ulong stride = get_global_size(0); uint4 acc = (uint4)(0);\n"
    "  ulong i = get_global_id(0);\n"
    "  for (; i + 3 * stride < n; i += 4 * stride) {\n"
    "    uint4 a = LD(x + i), b = LD(x + i + stride), c = LD(x + i + 2 * stride), d = LD(x + i + 3 * stride);\n"
    "    acc ^= a ^ b ^ c ^ d; }\n"
    "  for (; i < n; i += stride) acc ^= LD(x + i);\n"
    "  out[get_global_id(0)] = acc.x ^ acc.y ^ acc.z ^ acc.w; }\n"
    /* each warp a contiguous slice of n / warps units, read U * 32 units at a time */
    "__kernel __attribute__((reqd_work_group_size(32, 8, 1)))\n"
    "void warp(__global const uint4 *x, __global uint *out, ulong n) {\n"
    "  const uint lane = get_local_id(0);\n"
    "  const ulong w = get_group_id(0) * 8 + get_local_id(1), nw = get_num_groups(0) * 8;\n"
    "  const ulong per = (n + nw - 1) / nw, b = w * per, e = min(n, b + per);\n"
    "  uint4 acc = (uint4)(0);\n"
    "  for (ulong i = b; i < e; i += 32 * U) {\n"
    "    uint4 v[U];\n"
    "    for (int u = 0; u < U; u++) { ulong j = i + 32 * u + lane; v[u] = j < e ? LD(x + j) : (uint4)(0); }\n"
    "    for (int u = 0; u < U; u++) acc ^= v[u]; }\n"
    "  out[w * 32 + lane] = acc.x ^ acc.y ^ acc.z ^ acc.w; }\n";

/* Bulk copies into local memory: work-group g takes chunks g, g + G, ...
 * of CH bytes, ST in flight, each landing on its own mbarrier. */
static const char *bulk_src =
    "#define CH 8192\n#define ST 4\n"
    "inline uint sa(__local void *p) { return (uint)(ulong)p; }\n"
    "inline void bar_init(__local ulong *b) { asm volatile(\"mbarrier.init.shared.b64 [%0], 1;\" :: \"r\"(sa(b)) : \"memory\"); }\n"
    "inline void bar_expect(__local ulong *b, uint bytes) {\n"
    "  ulong st; asm volatile(\"mbarrier.arrive.expect_tx.shared.b64 %0, [%1], %2;\" : \"=l\"(st) : \"r\"(sa(b)), \"r\"(bytes) : \"memory\"); }\n"
    "inline void bulk(__local void *dst, __global const uchar *src, uint bytes, __local ulong *b) {\n"
    "  asm volatile(\"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\"\n"
    "      :: \"r\"(sa(dst)), \"l\"((ulong)src), \"r\"(bytes), \"r\"(sa(b)) : \"memory\"); }\n"
    "inline void bar_wait(__local ulong *b, uint phase) {\n"
    "  uint ok = 0;\n"
    "  while (!ok) asm volatile(\"{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\"\n"
    "      : \"=r\"(ok) : \"r\"(sa(b)), \"r\"(phase) : \"memory\"); }\n"
    "__kernel __attribute__((reqd_work_group_size(128, 1, 1)))\n"
    "void bulkrd(__global const uchar *x, __global uint *out, ulong nbytes) {\n"
    "  __local uint buf[ST][CH / 4] __attribute__((aligned(128)));\n"
    "  __local ulong bars[ST] __attribute__((aligned(8)));\n"
    "  const uint lid = get_local_id(0);\n"
    "  const ulong g = get_group_id(0), G = get_num_groups(0), nch = nbytes / CH;\n"
    "  if (lid == 0) { for (int s = 0; s < ST; s++) bar_init(&bars[s]);\n"
    "    asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\"); }\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  if (lid == 0) for (int s = 0; s < ST; s++) { ulong c = g + (ulong)s * G;\n"
    "    if (c < nch) { bar_expect(&bars[s], CH); bulk(buf[s], x + c * CH, CH, &bars[s]); } }\n"
    "  uint acc = 0;\n"
    "  for (ulong k = 0; g + k * G < nch; k++) {\n"
    "    const int s = (int)(k % ST); const uint ph = (uint)((k / ST) & 1);\n"
    "    bar_wait(&bars[s], ph);\n"
    "    acc ^= buf[s][lid] ^ buf[s][CH / 4 - 1 - lid];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    const ulong c = g + (k + ST) * G;\n"
    "    if (lid == 0 && c < nch) { asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
    "      bar_expect(&bars[s], CH); bulk(buf[s], x + c * CH, CH, &bars[s]); } }\n"
    "  out[g * 128 + lid] = acc; }\n";

static cl_context ctx;
static cl_device_id dev;
static cl_command_queue q, qn;

static cl_program build(const char *s, const char *opts) { return probe_build(ctx, dev, 1, &s, opts); }

typedef struct {
    const char *name;
    cl_kernel k;
    size_t global, local;
    int bytes_arg; /* the size argument counts bytes, not 16-byte units */
    int warps;     /* 2-D work-groups of 32 x warps (the warp kernel), else 0 */
} variant;

static void enq(cl_command_queue cq, const variant *v, cl_event *e)
{
    const size_t g[2] = {v->global, (size_t)v->warps}, l[2] = {v->local, (size_t)v->warps};
    CK(clEnqueueNDRangeKernel(cq, v->k, v->warps ? 2 : 1, NULL, g, l, 0, NULL, e));
}

int main(int argc, char **argv)
{
    cl_uint cus = 0;
    dev = probe_gpu("coldread", &cus);
    cl_int err;
    ctx = probe_context(dev, &q, &qn);
    cl_program p0 = build(src, ""), p4 = build(src, "-DU=4"), p8 = build(src, "-DU=8"), pn = build(src, "-DNC -DU=8");
    cl_program pb = build(bulk_src, "");
    if (!p0 || !p4 || !p8 || !pn) return 1;
    variant v[16];
    int nv = 0;
    const size_t cu = cus;
    v[nv++] = (variant){"gs8", clCreateKernel(p0, "gs", &err), cu * 8 * 256, 256, 0, 0};
    v[nv++] = (variant){"gs16", clCreateKernel(p0, "gs", &err), cu * 16 * 256, 256, 0, 0};
    v[nv++] = (variant){"gs4x", clCreateKernel(p0, "gs4x", &err), cu * 8 * 256, 256, 0, 0};
    v[nv++] = (variant){"gs4x_nc", clCreateKernel(pn, "gs4x", &err), cu * 8 * 256, 256, 0, 0};
    v[nv++] = (variant){"warp4", clCreateKernel(p4, "warp", &err), cu * 4 * 32, 32, 0, 8};
    v[nv++] = (variant){"warp8", clCreateKernel(p8, "warp", &err), cu * 4 * 32, 32, 0, 8};
    v[nv++] = (variant){"warp8x8", clCreateKernel(p8, "warp", &err), cu * 8 * 32, 32, 0, 8};
    v[nv++] = (variant){"warp8_nc", clCreateKernel(pn, "warp", &err), cu * 4 * 32, 32, 0, 8};
    CK(err);
    if (pb && getenv("COLDREAD_NOBULK")) {
        clReleaseProgram(pb);
        pb = NULL;
    }
    if (pb && getenv("COLDREAD_BULK")) nv = 0;
    if (pb) {
        v[nv++] = (variant){"bulk", clCreateKernel(pb, "bulkrd", &err), cu * 4 * 128, 128, 1, 0};
        CK(err);
    } else
        printf("bulk: not built\n");
    size_t mibs[8] = {16, 64, 256};
    int nm = 3;
    if (argc > 1) {
        nm = 0;
        for (int i = 1; i < argc && nm < 8; i++) mibs[nm++] = (size_t)strtoul(argv[i], NULL, 10);
    }
    size_t maxm = 0;
    for (int i = 0; i < nm; i++)
        if (mibs[i] > maxm) maxm = mibs[i];
    cl_mem buf[NB];
    for (int i = 0; i < NB; i++) {
        buf[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, maxm << 20, NULL, &err);
        CK(err);
        const float one = 1.0f;
        CK(clEnqueueFillBuffer(q, buf[i], &one, sizeof one, 0, maxm << 20, 0, NULL, NULL));
    }
    cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, cu * 16 * 256 * 4, NULL, &err);
    cl_mem tb = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 16, NULL, &err);
    CK(err);
    CK(clFinish(q));
    cl_kernel kt = clCreateKernel(p0, "stamp", &err);
    CK(err);
    cl_kernel ks = clCreateKernel(p0, "spin", &err);
    CK(err);
    const cl_ulong spin_ns = 8000;
    CK(clSetKernelArg(ks, 0, sizeof spin_ns, &spin_ns));
    args(kt, 0, 1, A(tb));
    const size_t one = 32;
    printf("each figure: median of %d; chain = %d kernels over %d buffers, no profiling, per kernel incl. one gap; "
           "event = one kernel, profiled\n", REPS, CHAIN, NB);
    for (int m = 0; m < nm; m++) {
        const size_t bytes = mibs[m] << 20;
        for (int i = 0; i < nv; i++) {
            const cl_ulong n = v[i].bytes_arg ? (cl_ulong)bytes : (cl_ulong)(bytes / 16);
            double ch[REPS], evs[REPS], idl[REPS], dty[REPS], sml[REPS];
            for (int r = 0; r < REPS + 1; r++) {
                cl_uint s0 = 0, s1 = 1;
                CK(clSetKernelArg(kt, 1, sizeof s0, &s0));
                CK(clEnqueueNDRangeKernel(qn, kt, 1, NULL, &one, &one, 0, NULL, NULL));
                for (int c = 0; c < CHAIN; c++) {
                    args(v[i].k, 0, 3, A(buf[c % NB]), A(out), A(n));
                    enq(qn, &v[i], NULL);
                }
                CK(clSetKernelArg(kt, 1, sizeof s1, &s1));
                CK(clEnqueueNDRangeKernel(qn, kt, 1, NULL, &one, &one, 0, NULL, NULL));
                cl_ulong t[2];
                CK(clEnqueueReadBuffer(qn, tb, CL_TRUE, 0, sizeof t, t, 0, NULL, NULL));
                /* one kernel with an event, after a read of another buffer (cold) */
                args(v[i].k, 0, 3, A(buf[(r + 3) % NB]), A(out), A(n));
                enq(q, &v[i], NULL);
                args(v[i].k, 0, 3, A(buf[(r + 5) % NB]), A(out), A(n));
                cl_event e;
                enq(q, &v[i], &e);
                CK(clFinish(q));
                /* the same after the device has been idle for 200 us */
                usleep(200);
                args(v[i].k, 0, 3, A(buf[(r + 6) % NB]), A(out), A(n));
                cl_event e2;
                enq(q, &v[i], &e2);
                CK(clFinish(q));
                /* after one work-group that spins 8 us (memory idle, the device not) */
                CK(clEnqueueNDRangeKernel(q, ks, 1, NULL, &one, &one, 0, NULL, NULL));
                args(v[i].k, 0, 3, A(buf[(r + 7) % NB]), A(out), A(n));
                cl_event e4;
                enq(q, &v[i], &e4);
                CK(clFinish(q));
                /* and right after a copy that leaves the L2 full of dirty lines */
                CK(clEnqueueCopyBuffer(q, buf[(r + 1) % NB], buf[(r + 2) % NB], 0, 0, bytes, 0, NULL, NULL));
                args(v[i].k, 0, 3, A(buf[(r + 4) % NB]), A(out), A(n));
                cl_event e3;
                enq(q, &v[i], &e3);
                CK(clFinish(q));
                if (r > 0) {
                    ch[r - 1] = (double)(t[1] - t[0]) / 1e3 / CHAIN;
                    evs[r - 1] = probe_ev_us(e);
                    idl[r - 1] = probe_ev_us(e2);
                    dty[r - 1] = probe_ev_us(e3);
                    sml[r - 1] = probe_ev_us(e4);
                }
                clReleaseEvent(e);
                clReleaseEvent(e2);
                clReleaseEvent(e3);
                clReleaseEvent(e4);
            }
            const double mc = median(ch, REPS), me = median(evs, REPS), mi = median(idl, REPS), md = median(dty, REPS),
                         ms = median(sml, REPS);
            printf("%4zu MiB %-9s chain %6.2f us (%4.0f GB/s)  event %6.2f (%4.0f)  idle %6.2f (%4.0f)  dirty %6.2f (%4.0f)"
                   "  small %6.2f (%4.0f)\n",
                   mibs[m], v[i].name, mc, (double)bytes / (mc * 1e3), me, (double)bytes / (me * 1e3), mi,
                   (double)bytes / (mi * 1e3), md, (double)bytes / (md * 1e3), ms, (double)bytes / (ms * 1e3));
            fflush(stdout);
        }
    }
    return 0;
}
