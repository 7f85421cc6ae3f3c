/*
 * between.c - what passes between two kernels on an NVIDIA GPU.
 * 1. The device's time from one kernel to the next in an in-order queue:
 *    CHAIN one-work-group kernels queued behind a spin kernel, each
 *    stamping %globaltimer as it starts, on a queue without profiling (as
 *    the library runs unless it times kernels), on a profiling queue with
 *    an event on every kernel (as bitnet-bench's kernel times do), on a
 *    profiling queue without events and on a queue without profiling with
 *    an event on every kernel; and the host's wall time of a host-pointer
 *    call's commands (64 KiB written up from pinned memory, a kernel, 64
 *    KiB read down, a wait for the read) with and without an event on the
 *    write.
 * 2. Can the second pass of weight quantization (q_pack_gpu after
 *    q_absum_gpu, kernels/quantize.cl) read from the L2 what the first
 *    pass has just read?  Two grid-stride read kernels run back to back
 *    over the same buffer after the L2 is flushed (a copy of 512 MiB): the
 *    median profiled time of the first (cold) read and of the second, read
 *    in the same order or in reverse, for several buffer sizes, and with
 *    the first read's last part loaded with an L2 evict_last policy, and
 *    with a blocking 4-byte read and write between the two (the round trip
 *    quantize_weights makes between its kernels).
 * 3. The host's time inside clEnqueueNDRangeKernel (no event, queue without
 *    profiling, kernels queued behind a spin kernel) for a kernel of one
 *    and of eight buffer arguments, and whether the device offers
 *    cl_khr_command_buffer (recorded command sequences).
 * Inline PTX: NVIDIA only.  A probe for the GPU machine (tests/device/),
 * not part of the library.
 * On H200 machines (2026-12-02, driver 580.159.04, two calls):
 * 1. kernel to kernel 1.63 / 1.54 / 1.63 us without profiling, 4.86 /
 *    4.80 / 5.02 us with an event on each, 1.47 us on a profiling queue
 *    without events (three calls): an event adds about 3.3 us of device
 *    time to its kernel (and an empty kernel is profiled at 5.4 us start
 *    to end, tests/device/qacts.c), which callers running without
 *    profiling do not pay; the profiling queue alone costs nothing.  A
 *    fourth call: 1.66 us without events either way, 4.93 with events on
 *    the profiling queue, 3.52 with events on the queue without profiling.
 *    Yet the host-pointer call's commands took 17.3 us with an event on the
 *    pinned write and 18.9 without, and a library build whose staging
 *    writes carried no event was no faster end to end (lib/opencl/staging.c
 *    has the figures).
 * 2. the second read, us (first read, cold, in brackets):
 *      16 MiB: same order 5.79, reversed 5.92 (10.0)
 *      32 MiB: same order 8.61, reversed 9.15 (15.4)
 *      48 MiB: same order 17.86, reversed 12.96 (20.6)
 *      64 MiB: same order 21.47, reversed 16.58 (25.3-25.6)
 *    so the L2 keeps what one kernel read for the next; past its size the
 *    reversed order still finds the part read last.  The evict_last policy
 *    on the first read's last half, three quarters or all changed nothing.
 *    A blocking 4-byte read and write between the two reads (a third call)
 *    undoes most of it: reversed 9.63 against 6.02 us at 16 MiB, 12.45
 *    against 9.15 at 32, 20.26 against 16.45 at 64.  That is the round
 *    trip quantize_weights makes between q_absum_gpu and q_pack_gpu (the
 *    partial sums down, the scale up), so q_pack_gpu reads cold.
 * 3. clEnqueueNDRangeKernel 6.28 us of host time with one buffer argument,
 *    9.11 us with eight; no cl_khr_command_buffer. 
 *
 *   cc -O2 -o between tests/device/between.c -lOpenCL
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

#define REPS 15

#define CHAIN 64

static const char *src =
    "__kernel void stamp(__global ulong *t, uint i) {\n"
    "  if (get_local_id(0) == 0) { ulong g; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(g)); t[i] = g; } }\n"
    "__kernel void args8(__global uint *a, __global uint *b, __global uint *c, __global uint *d,\n"
    "    __global uint *e, __global uint *f, __global uint *g, __global uint *h) {\n"
    "  if (get_local_id(0) == 0 && a[0] == 12345u) b[0] = c[0] + d[0] + e[0] + f[0] + g[0] + h[0]; }\n"
    "__kernel void spin(__global float *p, int n) {\n"
    "  float a = p[get_global_id(0)];\n"
    "  for (int i = 0; i < n; i++) a = a * 0.999f + 0.001f;\n"
    "  p[get_global_id(0)] = a; }\n"
    "inline float4 ld_el(__global const float4 *p, ulong pol) {\n"
    "  float a, b, c, d;\n"
    "  asm volatile(\"ld.global.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;\"\n"
    "      : \"=f\"(a), \"=f\"(b), \"=f\"(c), \"=f\"(d) : \"l\"((ulong)p), \"l\"(pol));\n"
    "  return (float4)(a, b, c, d); }\n"
    /* rev: read index n-1-i; el_from: iterations from this index on load with evict_last */
    "__kernel void rd(__global const float4 *x, __global float *out, ulong n, int rev, ulong el_from) {\n"
    "  ulong stride = get_global_size(0); float4 acc = (float4)(0.0f);\n"
    "  ulong pol; asm volatile(\"createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\" : \"=l\"(pol));\n"
    "  for (ulong i = get_global_id(0); i < n; i += stride) {\n"
    "    ulong j = rev ? n - 1 - i : i;\n"
    "    acc += i >= el_from ? ld_el(x + j, pol) : x[j]; }\n"
    "  out[get_global_id(0)] = acc.x + acc.y + acc.z + acc.w; }\n"
    "__kernel void cp(__global const float4 *x, __global float4 *y, ulong n) {\n"
    "  ulong stride = get_global_size(0);\n"
    "  for (ulong i = get_global_id(0); i < n; i += stride) y[i] = x[i]; }\n";

static cl_context ctx;
static cl_device_id dev;
static cl_command_queue q, qn;

/* Median device time from one stamp kernel's start to the next's, CHAIN of
 * them behind a spin kernel on queue qq (events on each when ev). */
static double chain_us(cl_command_queue qq, cl_kernel ks, cl_kernel kt, cl_mem tb, int ev)
{
    double d[REPS * (CHAIN - 1)];
    int nd = 0;
    const size_t gs = 132 * 1024, ls = 256, one = 256;
    for (int r = 0; r < REPS + 2; r++) {
        cl_event e[CHAIN];
        CK(clEnqueueNDRangeKernel(qq, ks, 1, NULL, &gs, &ls, 0, NULL, NULL));
        for (cl_uint i = 0; i < CHAIN; i++) {
            CK(clSetKernelArg(kt, 1, sizeof i, &i));
            CK(clEnqueueNDRangeKernel(qq, kt, 1, NULL, &one, &one, 0, NULL, ev ? &e[i] : NULL));
        }
        cl_ulong t[CHAIN];
        CK(clEnqueueReadBuffer(qq, tb, CL_TRUE, 0, sizeof t, t, 0, NULL, NULL));
        if (ev)
            for (int i = 0; i < CHAIN; i++) clReleaseEvent(e[i]);
        if (r < 2) continue;
        for (int i = 1; i < CHAIN; i++) d[nd++] = (double)(t[i] - t[i - 1]) / 1e3;
    }
    return median(d, nd);
}

static void set_rd(cl_kernel k, cl_mem x, cl_mem out, cl_ulong n, cl_int rev, cl_ulong el_from)
{
    args(k, 0, 5, A(x), A(out), A(n), A(rev), A(el_from));
}

int main(void)
{
    cl_uint cus = 0;
    dev = probe_gpu("between", &cus);
    cl_int err;
    ctx = probe_context(dev, &q, &qn);
    cl_program prog = probe_build(ctx, dev, 1, &src, "");
    if (!prog) return 1;
    cl_kernel k1 = clCreateKernel(prog, "rd", &err), k2 = clCreateKernel(prog, "rd", &err);
    cl_kernel kc = clCreateKernel(prog, "cp", &err);
    CK(err);
    {
        cl_kernel ks = clCreateKernel(prog, "spin", &err), kt = clCreateKernel(prog, "stamp", &err);
        CK(err);
        cl_mem spinb = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 132 * 1024 * 4, NULL, &err);
        cl_mem tb = clCreateBuffer(ctx, CL_MEM_READ_WRITE, CHAIN * 8, NULL, &err);
        CK(err);
        const float zero = 0.0f;
        CK(clEnqueueFillBuffer(q, spinb, &zero, sizeof zero, 0, 132 * 1024 * 4, 0, NULL, NULL));
        const int iters = 1000000;
        args(ks, 0, 2, A(spinb), A(iters));
        args(kt, 0, 1, A(tb));
        printf("kernel to kernel, one work-group each, in-order queue: no profiling %.2f us, "
               "profiling with an event on each %.2f us, profiling without events %.2f us, "
               "no profiling with an event on each %.2f us\n",
               chain_us(qn, ks, kt, tb, 0), chain_us(q, ks, kt, tb, 1), chain_us(q, ks, kt, tb, 0),
               chain_us(qn, ks, kt, tb, 1));
        /* a host-pointer call's commands: pinned write up, a kernel, read down, wait for the read */
        const size_t xfer = 64 << 10;
        cl_mem pin = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, 2 * xfer, NULL, &err);
        cl_mem dx = clCreateBuffer(ctx, CL_MEM_READ_WRITE, xfer, NULL, &err), dy = clCreateBuffer(ctx, CL_MEM_READ_WRITE, xfer, NULL, &err);
        CK(err);
        char *hp = clEnqueueMapBuffer(qn, pin, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, 2 * xfer, 0, NULL, NULL, &err);
        CK(err);
        memset(hp, 1, 2 * xfer);
        cl_uint zero0 = 0;
        CK(clSetKernelArg(kt, 1, sizeof zero0, &zero0));
        double rt[2][REPS * 4];
        const size_t one = 256;
        for (int r = 0; r < REPS * 4 + 4; r++)
            for (int wev = 0; wev < 2; wev++) {
                cl_event ew = NULL, er;
                const double t0 = now_us();
                CK(clEnqueueWriteBuffer(qn, dx, CL_FALSE, 0, xfer, hp, 0, NULL, wev ? &ew : NULL));
                CK(clEnqueueNDRangeKernel(qn, kt, 1, NULL, &one, &one, 0, NULL, NULL));
                CK(clEnqueueReadBuffer(qn, dy, CL_FALSE, 0, xfer, hp + xfer, 0, NULL, &er));
                CK(clWaitForEvents(1, &er));
                const double t1 = now_us();
                clReleaseEvent(er);
                if (ew) clReleaseEvent(ew);
                if (r >= 4) rt[wev][r - 4] = t1 - t0;
            }
        printf("64 KiB up, a kernel, 64 KiB down, wait (no profiling): %.2f us with no event on the write, "
               "%.2f us with one\n", median(rt[0], REPS * 4), median(rt[1], REPS * 4));
    }
    {
        char ext[8192] = "";
        clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, sizeof ext, ext, NULL);
        printf("cl_khr_command_buffer: %s\n", strstr(ext, "cl_khr_command_buffer") ? "yes" : "no");
        cl_kernel ks = clCreateKernel(prog, "spin", &err), k1 = clCreateKernel(prog, "stamp", &err);
        cl_kernel k8 = clCreateKernel(prog, "args8", &err);
        CK(err);
        cl_mem spinb = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 132 * 1024 * 4, NULL, &err), bb[8];
        CK(err);
        for (int i = 0; i < 8; i++) {
            bb[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1 << 20, NULL, &err);
            CK(err);
            CK(clSetKernelArg(k8, (cl_uint)i, sizeof bb[i], &bb[i]));
        }
        const int iters = 2000000;
        cl_uint zero = 0;
        args(ks, 0, 2, A(spinb), A(iters));
        args(k1, 0, 2, A(bb[0]), A(zero));
        const size_t gs = 132 * 1024, ls = 256, one = 256;
        cl_kernel kk[2] = {k1, k8};
        double h[2][REPS];
        for (int r = 0; r < REPS + 2; r++)
            for (int w = 0; w < 2; w++) {
                CK(clEnqueueNDRangeKernel(qn, ks, 1, NULL, &gs, &ls, 0, NULL, NULL));
                CK(clFlush(qn));
                const double t0 = now_us();
                for (int i = 0; i < 100; i++) CK(clEnqueueNDRangeKernel(qn, kk[w], 1, NULL, &one, &one, 0, NULL, NULL));
                const double t1 = now_us();
                CK(clFinish(qn));
                if (r >= 2) h[w][r - 2] = (t1 - t0) / 100;
            }
        printf("host time of clEnqueueNDRangeKernel: 1 buffer argument %.2f us, 8 buffer arguments %.2f us\n",
               median(h[0], REPS), median(h[1], REPS));
    }
    const size_t maxb = (size_t)64 << 20, flushb = (size_t)512 << 20;
    const size_t local = 256, global = (size_t)cus * 8 * local;
    cl_mem x = clCreateBuffer(ctx, CL_MEM_READ_WRITE, maxb, NULL, &err);
    CK(err);
    cl_mem fa = clCreateBuffer(ctx, CL_MEM_READ_WRITE, flushb, NULL, &err), fb = clCreateBuffer(ctx, CL_MEM_READ_WRITE, flushb, NULL, &err);
    cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, global * sizeof(float), NULL, &err);
    CK(err);
    const float one = 1.0f;
    CK(clEnqueueFillBuffer(q, x, &one, sizeof one, 0, maxb, 0, NULL, NULL));
    CK(clEnqueueFillBuffer(q, fa, &one, sizeof one, 0, flushb, 0, NULL, NULL));
    CK(clFinish(q));
    cl_ulong fn = flushb / 16;
    args(kc, 0, 3, A(fa), A(fb), A(fn));
    const size_t mibs[] = {16, 24, 32, 40, 48, 64};
    /* first read: forward, evict_last on none / the last half / the last 3/4
     * (by iteration); second read: forward or reverse; with or without a
     * host round trip between them */
    static const struct {
        const char *name;
        int rev2;
        int el_num; /* evict_last from iteration index n * (4 - el_num) / 4 */
        int host;   /* a blocking 4-byte read and write between the two */
    } cases[] = {{"fwd, then fwd", 0, 0, 0}, {"fwd, then rev", 1, 0, 0}, {"fwd (last 1/2 evict_last), then rev", 1, 2, 0},
                 {"fwd (last 3/4 evict_last), then rev", 1, 3, 0}, {"fwd (all evict_last), then rev", 1, 4, 0},
                 {"fwd, 4 B read + 4 B write, then rev", 1, 0, 1}};
    for (size_t m = 0; m < sizeof mibs / sizeof *mibs; m++) {
        const cl_ulong n = (cl_ulong)(mibs[m] << 20) / 16;
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            double a[REPS], b[REPS];
            const cl_ulong el_from = cases[c].el_num ? n * (cl_ulong)(4 - cases[c].el_num) / 4 : ~(cl_ulong)0;
            set_rd(k1, x, out, n, 0, el_from);
            set_rd(k2, x, out, n, cases[c].rev2, ~(cl_ulong)0);
            for (int r = 0; r < REPS + 2; r++) {
                cl_event e1, e2;
                CK(clEnqueueNDRangeKernel(q, kc, 1, NULL, &global, &local, 0, NULL, NULL));
                CK(clEnqueueNDRangeKernel(q, k1, 1, NULL, &global, &local, 0, NULL, &e1));
                if (cases[c].host) { /* what quantize_weights does between its kernels: the sums down, the scale up */
                    cl_uint v = 0;
                    CK(clEnqueueReadBuffer(q, out, CL_TRUE, 0, sizeof v, &v, 0, NULL, NULL));
                    CK(clEnqueueWriteBuffer(q, out, CL_TRUE, sizeof v, sizeof v, &v, 0, NULL, NULL));
                }
                CK(clEnqueueNDRangeKernel(q, k2, 1, NULL, &global, &local, 0, NULL, &e2));
                CK(clFinish(q));
                if (r >= 2) a[r - 2] = probe_ev_us(e1), b[r - 2] = probe_ev_us(e2);
                clReleaseEvent(e1);
                clReleaseEvent(e2);
            }
            const double ma = median(a, REPS), mb = median(b, REPS);
            printf("%2zu MiB  %-40s first %7.2f us (%6.0f GB/s), second %7.2f us (%6.0f GB/s)\n", mibs[m],
                   cases[c].name, ma, (double)(mibs[m] << 20) / (ma * 1e3), mb, (double)(mibs[m] << 20) / (mb * 1e3));
        }
    }
    return 0;
}
