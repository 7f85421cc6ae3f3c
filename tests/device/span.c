/*
 * span.c - how much of a kernel's profiled time is the profiling event's
 * own cost, and whether markers can time a run of kernels instead.  A
 * grid-stride read kernel over SIZE MiB, rotated over enough buffers that
 * the L2 holds none of them, run CHAIN times back to back:
 *   events   an event on every kernel (as bitnet-bench's kernel times):
 *            the median of each kernel's start to end, and the span from
 *            the first start to the last end over CHAIN;
 *   ends     events on the first and the last kernel only: span / CHAIN;
 *   markers  no kernel events, a marker with an event before and after:
 *            (end of the second - end of the first) / CHAIN;
 *   held     the same with the queue held by a user event until the whole
 *            chain is enqueued, so that the device, not the host's enqueue
 *            rate, sets the pace;
 *   wall     the host's wall time of the chain on a queue without
 *            profiling, enqueue to finish, / CHAIN.
 * usage: span [SIZE_MIB ...]  (default 4 16 64).  A probe for the GPU
 * machine (tests/device/), not part of the library.
 * On H200 machines (2026-12-04, driver 580.159.04), us a kernel, medians
 * of 7 rounds of 40; a first call without the held form, a second (another
 * machine, whose host enqueued more slowly) with it:
 *                each (events)  span/N (events)  ends only  markers  held  wall
 *   first call
 *     4 MiB x 128     7.78          13.68            6.31      6.38     -    6.26
 *    16 MiB x 32     10.85          13.44            6.81      6.80     -    6.94
 *    64 MiB x 8      19.74          21.32           19.06     19.03     -   19.14
 *   second call
 *     1 MiB x 512     7.58          16.71           10.04      9.84   7.10   9.73
 *     4 MiB x 128     8.13          16.19            9.61      9.68   7.11   9.66
 *    16 MiB x 32     11.30          16.56            9.44      9.06   7.10   9.85
 *    64 MiB x 8      19.94          21.43           19.30     19.36  19.49  19.54
 * NVIDIA's driver gives markers profiling times, and they agree with events
 * on the two ends of a chain and with the wall time of a queue without
 * profiling.  An event on every kernel lengthens a chain of small kernels
 * (13.4-16.7 against 6.4-9.8 us a kernel) but not of large ones (64 MiB: 1-2 us).
 * Without events a chain of small kernels runs at the host's enqueue rate
 * (6.3 us a kernel on the first host, 9.7 on the second), and held back by
 * a user event until all is enqueued, at 7.1 us a kernel whatever its size
 * up to 16 MiB: the driver then hands the commands over one at a time.  So
 * no form of timing here sees a small kernel faster than about 7 us, and
 * the profiled time of one kernel (7.6-8.1 us for a read of 1-4 MiB, 9.0 us
 * for the one-token GEMV of 4096x4096 in bitnet-bench the same day) is
 * close to what a caller pays for it; bitnet-bench keeps its per-kernel
 * events.  (In the first call bitnet-bench's GEMV of 16384x16384 took 25.6
 * us, weight quantization 4096x4096 53.4 us against torch's unfused
 * expression's 189 us, 3.5x.)
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

#define CHAIN 40
#define ROUNDS 7
#define ROTATE_MIB 512

static const char *src =
    "__kernel void rd(__global const float4 *a, const ulong n, __global float *out) {\n"
    "  float4 s = (float4)(0);\n"
    "  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) s += a[i];\n"
    "  if (s.x + s.y + s.z + s.w == 12345.0f) out[get_group_id(0)] = s.x;\n"
    "}\n";

/* A profiling time of e in us; where the driver refuses it, *ok is
 * cleared (ok NULL: a kernel's event, which must have one: exits). */
static double ts(cl_event e, cl_profiling_info what, int *ok)
{
    cl_ulong t = 0;
    if (ok) {
        if (clGetEventProfilingInfo(e, what, sizeof t, &t, NULL) != CL_SUCCESS) *ok = 0;
    } else {
        CK(clGetEventProfilingInfo(e, what, sizeof t, &t, NULL));
    }
    return (double)t / 1e3;
}

static const size_t ls = 256;
static size_t gs;

/* CHAIN reads enqueued on q, rotating over b[0..nbuf) from *next: with an
 * event each into every[] (every not NULL), else into *first and *last
 * (where not NULL) on the first and the last kernel. */
static void chain(cl_command_queue q, cl_kernel k, cl_mem *b, int nbuf, int *next, cl_ulong n4, cl_mem out,
                  cl_event *every, cl_event *first, cl_event *last)
{
    for (int c = 0; c < CHAIN; c++) {
        args(k, 0, 3, A(b[*next]), A(n4), A(out));
        *next = (*next + 1) % nbuf;
        cl_event *e = every ? &every[c] : c == 0 ? first : c == CHAIN - 1 ? last : NULL;
        CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &gs, &ls, 0, NULL, e));
    }
}

/* A chain of kernels without events between two markers on the profiling
 * queue qp, held back by a user event until all is enqueued where hold:
 * the end-to-end time of the markers / CHAIN, *ok cleared where the driver
 * gives the markers no times (verbose: their times printed). */
static double marked(cl_context ctx, cl_command_queue qp, cl_kernel k, cl_mem *b, int nbuf, int *next, cl_ulong n4,
                     cl_mem out, int hold, int verbose, int *ok)
{
    cl_int err;
    cl_event ue = NULL, m0, m1;
    if (hold) {
        ue = clCreateUserEvent(ctx, &err);
        CK(err);
        CK(clEnqueueBarrierWithWaitList(qp, 1, &ue, NULL));
    }
    CK(clEnqueueMarkerWithWaitList(qp, 0, NULL, &m0));
    chain(qp, k, b, nbuf, next, n4, out, NULL, NULL, NULL);
    CK(clEnqueueMarkerWithWaitList(qp, 0, NULL, &m1));
    if (hold) CK(clSetUserEventStatus(ue, CL_COMPLETE));
    CK(clFinish(qp));
    int mok = 1;
    const double a0 = ts(m0, CL_PROFILING_COMMAND_END, &mok), a1 = ts(m1, CL_PROFILING_COMMAND_END, &mok);
    if (verbose) {
        int sok = 1;
        printf("#   markers: first start %.3f end %.3f, second start %.3f end %.3f us (%s)\n",
               ts(m0, CL_PROFILING_COMMAND_START, &sok), a0, ts(m1, CL_PROFILING_COMMAND_START, &sok), a1,
               mok && sok ? "profiling info given" : "profiling info refused");
    }
    *ok &= mok && a1 > a0;
    if (ue) clReleaseEvent(ue);
    clReleaseEvent(m0);
    clReleaseEvent(m1);
    return (a1 - a0) / CHAIN;
}

int main(int argc, char **argv)
{
    cl_uint cus;
    cl_device_id dev = probe_gpu("span", &cus);
    cl_command_queue qp, qn;
    cl_context ctx = probe_context(dev, &qp, &qn);
    cl_program prog = probe_build(ctx, dev, 1, &src, "");
    if (!prog) return 1;
    cl_int err;
    cl_kernel k = clCreateKernel(prog, "rd", &err);
    CK(err);
    cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1 << 20, NULL, &err);
    CK(err);
    gs = (size_t)cus * 8 * ls;
    static const int defsizes[] = {4, 16, 64};
    const int nsz = argc > 1 ? argc - 1 : 3;
    for (int si = 0; si < nsz; si++) {
        const size_t mib = argc > 1 ? (size_t)atoi(argv[si + 1]) : (size_t)defsizes[si];
        const size_t bytes = mib << 20;
        int nbuf = (int)(ROTATE_MIB / mib);
        if (nbuf < 4) nbuf = 4;
        cl_mem *b = calloc((size_t)nbuf, sizeof *b);
        for (int i = 0; i < nbuf; i++) {
            b[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
            CK(err);
            CK(clEnqueueFillBuffer(qp, b[i], &(float){1.0f}, 4, 0, bytes, 0, NULL, NULL));
        }
        CK(clFinish(qp));
        const cl_ulong n4 = bytes / 16;
        double per[ROUNDS], spanv[ROUNDS], ends[ROUNDS], marks[ROUNDS], wall[ROUNDS], held[ROUNDS];
        int marks_ok = 1, held_ok = 1;
        int next = 0;
        for (int r = 0; r < ROUNDS; r++) {
            cl_event ev[CHAIN];
            double kt[CHAIN];
            chain(qp, k, b, nbuf, &next, n4, out, ev, NULL, NULL); /* events on every kernel */
            CK(clFinish(qp));
            for (int c = 0; c < CHAIN; c++) kt[c] = probe_ev_us(ev[c]);
            spanv[r] = (ts(ev[CHAIN - 1], CL_PROFILING_COMMAND_END, NULL) - ts(ev[0], CL_PROFILING_COMMAND_START, NULL)) / CHAIN;
            per[r] = median(kt, CHAIN);
            for (int c = 0; c < CHAIN; c++) clReleaseEvent(ev[c]);
            cl_event e0, e1; /* first and last only */
            chain(qp, k, b, nbuf, &next, n4, out, NULL, &e0, &e1);
            CK(clFinish(qp));
            ends[r] = (ts(e1, CL_PROFILING_COMMAND_END, NULL) - ts(e0, CL_PROFILING_COMMAND_START, NULL)) / CHAIN;
            clReleaseEvent(e0);
            clReleaseEvent(e1);
            marks[r] = marked(ctx, qp, k, b, nbuf, &next, n4, out, 0, r == 0, &marks_ok);
            held[r] = marked(ctx, qp, k, b, nbuf, &next, n4, out, 1, 0, &held_ok);
            const double t0 = now_us(); /* the caller's view, no profiling */
            chain(qn, k, b, nbuf, &next, n4, out, NULL, NULL, NULL);
            CK(clFinish(qn));
            wall[r] = (now_us() - t0) / CHAIN;
        }
        printf("%3zu MiB x %d buffers, %d kernels a chain, medians of %d rounds (us a kernel):\n", mib, nbuf, CHAIN, ROUNDS);
        printf("  events on every kernel: each %.2f, span/N %.2f\n", median(per, ROUNDS), median(spanv, ROUNDS));
        printf("  events on the ends only: span/N %.2f\n", median(ends, ROUNDS));
        if (marks_ok)
            printf("  markers around the chain: %.2f\n", median(marks, ROUNDS));
        else
            printf("  markers around the chain: no usable times\n");
        if (held_ok)
            printf("  markers, the queue held by a user event until all is enqueued: %.2f\n", median(held, ROUNDS));
        else
            printf("  markers, the queue held: no usable times\n");
        printf("  wall time, no profiling: %.2f\n", median(wall, ROUNDS));
        for (int i = 0; i < nbuf; i++) clReleaseMemObject(b[i]);
        free(b);
    }
    return 0;
}
