/*
 * latency.c - what fixed costs an OpenCL driver puts around a call, measured
 * on the first GPU (or the device named by LATENCY_DEVICE=index): the wait
 * on an idle queue, kernels back to back with and without events and
 * profiling, the gaps between them on the device, small reads and writes
 * from pinned and pageable memory, and the ways to wait for a result.
 * Medians of REPS rounds after a warm-up, in microseconds.  LATENCY_ONLY=launch
 * measures only the host cost of a launch with BitLinear's argument list,
 * LATENCY_ONLY=args that of its parts.  A probe for the
 * GPU machine (tests/device/), not part of the library or its tests.
 *
 *   cc -O2 -o latency tests/device/latency.c -lOpenCL
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe.h"

#define REPS 300

static const char *src =
    "__kernel void empty(__global float *p) { if (get_global_id(0) == 0xffffffffu) p[0] = 1.0f; }\n"
    "__kernel void spin(__global float *p, int n) {\n"
    "  float a = p[get_global_id(0)];\n"
    "  for (int i = 0; i < n; i++) a = a * 0.999f + 0.001f;\n"
    "  p[get_global_id(0)] = a; }\n"
    /* BitLinear's one-token GEMV has 10 buffers, 12 scalars and a local buffer */
    "__kernel void wide(__global float *p0, __global const float *p1, __global const float *p2,\n"
    "  __global const float *p3, __global const float *p4, __global const float *p5, __global const float *p6,\n"
    "  __global const float *p7, __global const float *p8, __global const float *p9, __local float *l,\n"
    "  int a0, int a1, int a2, int a3, int a4, int a5, long a6, long a7, long a8, long a9, long a10, long a11) {\n"
    "  if (get_global_id(0) == 0xffffffffu) p0[0] = p1[a0] + p2[a1] + p3[a2] + p4[a3] + p5[a4] + p6[a5]\n"
    "    + p7[a6] + p8[a7] + p9[a8 + a9 + a10 + a11] + l[0]; }\n"
    /* the same list in parts: the buffers alone, the scalars alone, the
     * scalars packed into one struct passed by value */
    "__kernel void bufs(__global float *p0, __global const float *p1, __global const float *p2,\n"
    "  __global const float *p3, __global const float *p4, __global const float *p5, __global const float *p6,\n"
    "  __global const float *p7, __global const float *p8, __global const float *p9) {\n"
    "  if (get_global_id(0) == 0xffffffffu) p0[0] = p1[0] + p2[0] + p3[0] + p4[0] + p5[0] + p6[0] + p7[0] + p8[0] + p9[0]; }\n"
    "__kernel void scal(__global float *p0,\n"
    "  int a0, int a1, int a2, int a3, int a4, int a5, long a6, long a7, long a8, long a9, long a10, long a11) {\n"
    "  if (get_global_id(0) == 0xffffffffu) p0[0] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11; }\n"
    "typedef struct { int a0, a1, a2, a3, a4, a5; long a6, a7, a8, a9, a10, a11; } wargs;\n"
    "__kernel void packed(__global float *p0, __global const float *p1, __global const float *p2,\n"
    "  __global const float *p3, __global const float *p4, __global const float *p5, __global const float *p6,\n"
    "  __global const float *p7, __global const float *p8, __global const float *p9, __local float *l, wargs a) {\n"
    "  if (get_global_id(0) == 0xffffffffu) p0[0] = p1[a.a0] + p2[a.a1] + p3[a.a2] + p4[a.a3] + p5[a.a4] + p6[a.a5]\n"
    "    + p7[a.a6] + p8[a.a7] + p9[a.a8 + a.a9 + a.a10 + a.a11] + l[0]; }\n";

static cl_context ctx;
static cl_device_id dev;
static cl_command_queue qp, qn; /* profiling, plain */
static cl_kernel kempty, kspin;
static cl_mem dbuf, dsmall;

/* n empty kernels on q (events kept when ev), then the wait of `how`:
 * 0 clFinish, 1 blocking 4-byte read into pageable, 2 non-blocking read into
 * pinned + clWaitForEvents, 3 blocking read of `rbytes` into pageable,
 * 4 non-blocking read of rbytes into pinned + clWaitForEvents. */
static double round_trip(cl_command_queue q, int n, int ev, int how, void *pinned, void *pageable, size_t rbytes)
{
    cl_event evs[16];
    const size_t g = 128, l = 128;
    const double t0 = now_us();
    for (int i = 0; i < n; i++) CK(clEnqueueNDRangeKernel(q, kempty, 1, NULL, &g, &l, 0, NULL, ev ? &evs[i] : NULL));
    cl_event r = NULL;
    switch (how) {
    case 0: CK(clFinish(q)); break;
    case 1: CK(clEnqueueReadBuffer(q, dsmall, CL_TRUE, 0, 4, pageable, 0, NULL, NULL)); break;
    case 2:
        CK(clEnqueueReadBuffer(q, dsmall, CL_FALSE, 0, 4, pinned, 0, NULL, &r));
        CK(clWaitForEvents(1, &r));
        clReleaseEvent(r);
        break;
    case 3: CK(clEnqueueReadBuffer(q, dbuf, CL_TRUE, 0, rbytes, pageable, 0, NULL, NULL)); break;
    case 4:
        CK(clEnqueueReadBuffer(q, dbuf, CL_FALSE, 0, rbytes, pinned, 0, NULL, &r));
        CK(clWaitForEvents(1, &r));
        clReleaseEvent(r);
        break;
    }
    const double t = now_us() - t0;
    for (int i = 0; ev && i < n; i++) clReleaseEvent(evs[i]);
    return t;
}

static void report(const char *what, cl_command_queue q, int n, int ev, int how, void *pinned, void *pageable,
                   size_t rbytes)
{
    double v[REPS];
    for (int i = 0; i < 20; i++) round_trip(q, n, ev, how, pinned, pageable, rbytes);
    for (int i = 0; i < REPS; i++) v[i] = round_trip(q, n, ev, how, pinned, pageable, rbytes);
    const double lo = v[0];
    (void)lo;
    printf("%-72s %8.1f us\n", what, median(v, REPS));
}

/* device-side gaps: n kernels on the profiling queue, end(i) -> start(i+1) */
static void gaps(int n)
{
    double gap[REPS], span[REPS], lat[REPS];
    const size_t g = 128, l = 128;
    for (int r = 0; r < REPS; r++) {
        cl_event evs[16];
        for (int i = 0; i < n; i++) CK(clEnqueueNDRangeKernel(qp, kempty, 1, NULL, &g, &l, 0, NULL, &evs[i]));
        CK(clFinish(qp));
        cl_ulong s[16], e[16], qd = 0;
        for (int i = 0; i < n; i++) {
            CK(clGetEventProfilingInfo(evs[i], CL_PROFILING_COMMAND_START, sizeof s[i], &s[i], NULL));
            CK(clGetEventProfilingInfo(evs[i], CL_PROFILING_COMMAND_END, sizeof e[i], &e[i], NULL));
        }
        CK(clGetEventProfilingInfo(evs[0], CL_PROFILING_COMMAND_QUEUED, sizeof qd, &qd, NULL));
        double gs = 0;
        for (int i = 1; i < n; i++) gs += (double)(s[i] - e[i - 1]) / 1e3;
        gap[r] = n > 1 ? gs / (n - 1) : 0;
        span[r] = (double)(e[n - 1] - s[0]) / 1e3;
        lat[r] = (double)(s[0] - qd) / 1e3;
        for (int i = 0; i < n; i++) clReleaseEvent(evs[i]);
    }
    printf("device: %d empty kernels: mean gap end->start %6.1f us, span %6.1f us, queued->start of the first %6.1f us\n",
           n, median(gap, REPS), median(span, REPS), median(lat, REPS));
}

static void transfers(void *pinned, void *pageable)
{
    const size_t sizes[] = {4, 4096, 65536, 262144, 1u << 20, 8u << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const size_t b = sizes[k];
        double v[4][REPS];
        for (int r = 0; r < REPS; r++) {
            double t0 = now_us();
            CK(clEnqueueWriteBuffer(qn, dbuf, CL_TRUE, 0, b, pageable, 0, NULL, NULL));
            v[0][r] = now_us() - t0;
            t0 = now_us();
            CK(clEnqueueWriteBuffer(qn, dbuf, CL_TRUE, 0, b, pinned, 0, NULL, NULL));
            v[1][r] = now_us() - t0;
            t0 = now_us();
            CK(clEnqueueReadBuffer(qn, dbuf, CL_TRUE, 0, b, pageable, 0, NULL, NULL));
            v[2][r] = now_us() - t0;
            t0 = now_us();
            CK(clEnqueueReadBuffer(qn, dbuf, CL_TRUE, 0, b, pinned, 0, NULL, NULL));
            v[3][r] = now_us() - t0;
        }
        printf("blocking %8zu B: write pageable %7.1f, pinned %7.1f; read pageable %7.1f, pinned %7.1f us\n", b,
               median(v[0], REPS), median(v[1], REPS), median(v[2], REPS), median(v[3], REPS));
    }
}

/* the caller's view of one op: write x (pinned, non-blocking), n kernels, read y */
static void op_like(int n, size_t xb, size_t yb, int ev, cl_command_queue q, void *pinned, const char *what)
{
    double v[REPS];
    const size_t g = 128, l = 128;
    for (int r = 0; r < REPS + 20; r++) {
        cl_event evs[18], rd;
        int ne = 0;
        const double t0 = now_us();
        CK(clEnqueueWriteBuffer(q, dbuf, CL_FALSE, 0, xb, pinned, 0, NULL, ev ? &evs[ne++] : NULL));
        for (int i = 0; i < n; i++) CK(clEnqueueNDRangeKernel(q, kempty, 1, NULL, &g, &l, 0, NULL, ev ? &evs[ne++] : NULL));
        CK(clEnqueueReadBuffer(q, dbuf, CL_FALSE, 1u << 22, yb, (char *)pinned + (1u << 22), 0, NULL, &rd));
        CK(clWaitForEvents(1, &rd));
        clReleaseEvent(rd);
        if (r >= 20) v[r - 20] = now_us() - t0;
        for (int i = 0; i < ne; i++) clReleaseEvent(evs[i]);
    }
    printf("%-72s %8.1f us\n", what, median(v, REPS));
}

/* The caller's view of a one-token BitLinear on a plain queue: a 64 KB
 * write from pinned memory, a one-work-group kernel (the quantizer), a spin
 * kernel of `iters` (the GEMV), a 64 KB read and the wait.  flush: 0 none
 * (the driver submits when it likes), 1 clFlush after the write, 2 after the
 * write and after each kernel; so that the device starts while the host
 * still enqueues. */
static void op_flush(int iters, int flush, void *pinned)
{
    double v[REPS];
    const size_t g1 = 128, l1 = 128, g = 132 * 1024, l = 256;
    CK(clSetKernelArg(kspin, 1, sizeof iters, &iters));
    for (int r = 0; r < REPS + 20; r++) {
        cl_event rd;
        const double t0 = now_us();
        CK(clEnqueueWriteBuffer(qn, dbuf, CL_FALSE, 32u << 20, 65536, (char *)pinned + (1u << 23), 0, NULL, NULL));
        if (flush) CK(clFlush(qn));
        CK(clEnqueueNDRangeKernel(qn, kempty, 1, NULL, &g1, &l1, 0, NULL, NULL));
        if (flush > 1) CK(clFlush(qn));
        CK(clEnqueueNDRangeKernel(qn, kspin, 1, NULL, &g, &l, 0, NULL, NULL));
        if (flush > 1) CK(clFlush(qn));
        CK(clEnqueueReadBuffer(qn, dbuf, CL_FALSE, 0, 65536, pinned, 0, NULL, &rd));
        CK(clWaitForEvents(1, &rd));
        if (r >= 20) v[r - 20] = now_us() - t0;
        clReleaseEvent(rd);
    }
    printf("op: 64 KB write, 1 + spin (%5d iters) kernels, 64 KB read, plain, flush %d: %7.1f us\n", iters, flush,
           median(v, REPS));
}

/* The caller's view of a 64-token BitLinear 4096x14336 through host
 * pointers, as staging.c does it: 3.5 MiB of activations copied from
 * pageable memory into pinned memory in four pieces, each written to the
 * device as soon as it is copied, a spin kernel of `iters`, 1 MiB read
 * into pinned memory and copied out.  flush 1: clFlush after each piece's
 * write, so that the device's copy of one piece can overlap the host's of
 * the next. */
static void op_pieces(int iters, int flush, void *pinned, void *pageable)
{
    double v[REPS];
    const size_t g = 132 * 1024, l = 256, xb = 3670016, yb = 1u << 20, piece = xb / 4;
    char *src = (char *)pageable, *dst = (char *)pageable + (8u << 20);
    CK(clSetKernelArg(kspin, 1, sizeof iters, &iters));
    for (int r = 0; r < REPS + 20; r++) {
        cl_event rd;
        const double t0 = now_us();
        for (size_t off = 0; off < xb; off += piece) {
            memcpy((char *)pinned + off, src + off, piece);
            CK(clEnqueueWriteBuffer(qn, dbuf, CL_FALSE, (16u << 20) + off, piece, (char *)pinned + off, 0, NULL, NULL));
            if (flush) CK(clFlush(qn));
        }
        CK(clEnqueueNDRangeKernel(qn, kspin, 1, NULL, &g, &l, 0, NULL, NULL));
        CK(clEnqueueReadBuffer(qn, dbuf, CL_FALSE, 0, yb, (char *)pinned + (8u << 20), 0, NULL, &rd));
        CK(clWaitForEvents(1, &rd));
        memcpy(dst, (char *)pinned + (8u << 20), yb);
        if (r >= 20) v[r - 20] = now_us() - t0;
        clReleaseEvent(rd);
    }
    printf("op: 3.5 MiB copied+written in 4 pieces, spin (%5d iters), 1 MiB read+copied, flush %d: %7.1f us\n", iters,
           flush, median(v, REPS));
}

/* The host time of one launch of `wide` (BitLinear's argument list, empty
 * body), eight back to back on the plain queue, by grid size, whether the
 * arguments are all set again before each launch (as the library does),
 * and whether its ten buffers are ten objects or one. */
static cl_kernel kwide;
static void wide_args(cl_mem *bufs)
{
    for (cl_uint i = 0; i < 10; i++) CK(clSetKernelArg(kwide, i, sizeof bufs[i], &bufs[i]));
    CK(clSetKernelArg(kwide, 10, 4096, NULL));
    for (cl_uint i = 11; i < 17; i++) {
        const cl_int z = 0;
        CK(clSetKernelArg(kwide, i, sizeof z, &z));
    }
    for (cl_uint i = 17; i < 23; i++) {
        const cl_long z = 0;
        CK(clSetKernelArg(kwide, i, sizeof z, &z));
    }
}

static void launch_cost(void)
{
    cl_mem ten[10], one[10];
    cl_int err;
    for (int i = 0; i < 10; i++) {
        ten[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1u << 20, NULL, &err);
        CK(err);
        one[i] = dbuf;
    }
    static const struct {
        size_t g, l;
        int reset, distinct;
    } cases[] = {{128, 128, 0, 0}, {128, 128, 0, 1}, {448 * 256, 256, 0, 1}, {448 * 256, 256, 1, 1}, {448 * 256, 256, 1, 0}};
    double e[REPS];
    const size_t g1 = 128;
    for (int r = 0; r < REPS + 20; r++) {
        const double t0 = now_us();
        for (int i = 0; i < 8; i++) CK(clEnqueueNDRangeKernel(qn, kempty, 1, NULL, &g1, &g1, 0, NULL, NULL));
        const double t = now_us() - t0;
        CK(clFinish(qn));
        if (r >= 20) e[r - 20] = t / 8;
    }
    printf("empty kernel (1 argument), 128 items of 128, arguments set once: %6.1f us a launch\n", median(e, REPS));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double v[REPS];
        wide_args(cases[c].distinct ? ten : one);
        for (int r = 0; r < REPS + 20; r++) {
            const double t0 = now_us();
            for (int i = 0; i < 8; i++) {
                if (cases[c].reset) wide_args(cases[c].distinct ? ten : one);
                CK(clEnqueueNDRangeKernel(qn, kwide, 1, NULL, &cases[c].g, &cases[c].l, 0, NULL, NULL));
            }
            const double t = now_us() - t0;
            CK(clFinish(qn));
            if (r >= 20) v[r - 20] = t / 8;
        }
        printf("wide kernel (23 arguments), %6zu items of %3zu, arguments %s, %s buffers: %6.1f us a launch\n",
               cases[c].g, cases[c].l, cases[c].reset ? "set each launch" : "set once ", cases[c].distinct ? "10" : " 1",
               median(v, REPS));
    }
    for (int i = 0; i < 10; i++) clReleaseMemObject(ten[i]);
}

/* LATENCY_ONLY=args: which part of that list costs: the host time of a
 * launch (eight back to back, the arguments set before each as the library
 * does, 448 work-groups of 256) of the wide kernel, of its ten buffers alone,
 * of one buffer and its twelve scalars, and of the buffers, the local buffer
 * and the scalars packed into one struct. */
typedef struct {
    cl_int a0, a1, a2, a3, a4, a5;
    cl_long a6, a7, a8, a9, a10, a11;
} wargs;
static cl_kernel kbufs, kscal, kpacked;
static void args_cost(void)
{
    cl_mem ten[10];
    cl_int err;
    for (int i = 0; i < 10; i++) {
        ten[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1u << 20, NULL, &err);
        CK(err);
    }
    const size_t g = 448 * 256, l = 256;
    const wargs wa = {0};
    for (int pass = 0; pass < 2; pass++)
        for (int c = 0; c < 4; c++) {
            cl_kernel k = c == 0 ? kwide : c == 1 ? kbufs : c == 2 ? kscal : kpacked;
            double v[REPS];
            for (int r = 0; r < REPS + 20; r++) {
                const double t0 = now_us();
                for (int i = 0; i < 8; i++) {
                    if (c == 0) wide_args(ten);
                    else if (c == 1)
                        for (cl_uint a = 0; a < 10; a++) CK(clSetKernelArg(k, a, sizeof ten[a], &ten[a]));
                    else if (c == 2) {
                        CK(clSetKernelArg(k, 0, sizeof ten[0], &ten[0]));
                        for (cl_uint a = 1; a < 7; a++) CK(clSetKernelArg(k, a, sizeof wa.a0, &wa.a0));
                        for (cl_uint a = 7; a < 13; a++) CK(clSetKernelArg(k, a, sizeof wa.a6, &wa.a6));
                    } else {
                        for (cl_uint a = 0; a < 10; a++) CK(clSetKernelArg(k, a, sizeof ten[a], &ten[a]));
                        CK(clSetKernelArg(k, 10, 4096, NULL));
                        CK(clSetKernelArg(k, 11, sizeof wa, &wa));
                    }
                    CK(clEnqueueNDRangeKernel(qn, k, 1, NULL, &g, &l, 0, NULL, NULL));
                }
                const double t = now_us() - t0;
                CK(clFinish(qn));
                if (r >= 20) v[r - 20] = t / 8;
            }
            static const char *const what[] = {"wide: 10 buffers, a local buffer, 12 scalars", "10 buffers alone",
                                               "1 buffer and 12 scalars", "10 buffers, a local buffer, 1 struct"};
            printf("round %d, %-48s %6.1f us a launch\n", pass + 1, what[c], median(v, REPS));
        }
    for (int i = 0; i < 10; i++) clReleaseMemObject(ten[i]);
}

/* a kernel of known device time, then a 64 KB read: the host's view past the kernel */
static void spin_then_read(cl_command_queue q, void *pinned, int iters)
{
    double v[REPS], kt[REPS];
    const size_t g = 132 * 1024, l = 256;
    CK(clSetKernelArg(kspin, 1, sizeof iters, &iters));
    for (int r = 0; r < REPS + 20; r++) {
        cl_event ek, rd;
        const double t0 = now_us();
        CK(clEnqueueNDRangeKernel(q, kspin, 1, NULL, &g, &l, 0, NULL, &ek));
        CK(clEnqueueReadBuffer(q, dbuf, CL_FALSE, 0, 65536, pinned, 0, NULL, &rd));
        CK(clWaitForEvents(1, &rd));
        const double t = now_us() - t0;
        cl_ulong s = 0, e = 0;
        clGetEventProfilingInfo(ek, CL_PROFILING_COMMAND_START, sizeof s, &s, NULL);
        clGetEventProfilingInfo(ek, CL_PROFILING_COMMAND_END, sizeof e, &e, NULL);
        if (r >= 20) {
            v[r - 20] = t;
            kt[r - 20] = (double)(e - s) / 1e3;
        }
        clReleaseEvent(ek);
        clReleaseEvent(rd);
    }
    printf("spin kernel (%d iters) + 64 KB pinned read: kernel %7.1f us, wall %7.1f us\n", iters, median(kt, REPS),
           median(v, REPS));
}

int main(void)
{
    cl_platform_id plats[8];
    cl_uint np = 0;
    CK(clGetPlatformIDs(8, plats, &np));
    int want = getenv("LATENCY_DEVICE") ? atoi(getenv("LATENCY_DEVICE")) : -1, at = 0, found = 0;
    for (cl_uint p = 0; p < np && !found; p++) {
        cl_device_id ds[8];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 8, ds, &nd) != CL_SUCCESS) continue;
        for (cl_uint i = 0; i < nd && !found; i++, at++) {
            cl_device_type t;
            clGetDeviceInfo(ds[i], CL_DEVICE_TYPE, sizeof t, &t, NULL);
            if ((want < 0 && (t & CL_DEVICE_TYPE_GPU)) || want == at) {
                dev = ds[i];
                found = 1;
            }
        }
    }
    if (!found) {
        fprintf(stderr, "latency: no device\n");
        return 1;
    }
    char name[256];
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
    printf("device: %s\n", name);
    cl_int err;
    ctx = probe_context(dev, &qp, &qn);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    CK(err);
    CK(clBuildProgram(prog, 1, &dev, "", NULL, NULL));
    cl_kernel *const ks[] = {&kempty, &kspin, &kwide, &kbufs, &kscal, &kpacked};
    static const char *const kn[] = {"empty", "spin", "wide", "bufs", "scal", "packed"};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        *ks[i] = clCreateKernel(prog, kn[i], &err);
        CK(err);
    }
    dbuf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64u << 20, NULL, &err);
    CK(err);
    dsmall = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    CK(err);
    CK(clSetKernelArg(kempty, 0, sizeof dsmall, &dsmall));
    CK(clSetKernelArg(kspin, 0, sizeof dbuf, &dbuf));
    cl_mem pm = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, 16u << 20, NULL, &err);
    CK(err);
    void *pinned = clEnqueueMapBuffer(qn, pm, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, 16u << 20, 0, NULL, NULL, &err);
    CK(err);
    void *pageable = malloc(16u << 20);
    memset(pageable, 1, 16u << 20);
    memset(pinned, 1, 16u << 20);

    if (getenv("LATENCY_ONLY") && !strcmp(getenv("LATENCY_ONLY"), "args")) {
        args_cost();
        return 0;
    }
    if (getenv("LATENCY_ONLY") && !strcmp(getenv("LATENCY_ONLY"), "launch")) { /* the launch costs alone */
        launch_cost();
        return 0;
    }
    double v[REPS];
    for (int i = 0; i < REPS; i++) {
        const double t0 = now_us();
        clFinish(qp);
        v[i] = now_us() - t0;
    }
    printf("%-72s %8.1f us\n", "clFinish on an idle queue", median(v, REPS));
    const size_t g = 128, l = 128;
    for (int i = 0; i < REPS; i++) {
        const double t0 = now_us();
        clEnqueueNDRangeKernel(qn, kempty, 1, NULL, &g, &l, 0, NULL, NULL);
        v[i] = now_us() - t0;
    }
    clFinish(qn);
    printf("%-72s %8.1f us\n", "clEnqueueNDRangeKernel alone (plain queue, no event)", median(v, REPS));
    for (int i = 0; i < REPS; i++) {
        cl_event e;
        const double t0 = now_us();
        clEnqueueNDRangeKernel(qp, kempty, 1, NULL, &g, &l, 0, NULL, &e);
        v[i] = now_us() - t0;
        clReleaseEvent(e);
    }
    clFinish(qp);
    printf("%-72s %8.1f us\n", "clEnqueueNDRangeKernel alone (profiling queue, event)", median(v, REPS));
    for (int i = 0; i < REPS; i++) {
        const double t0 = now_us();
        clSetKernelArg(kempty, 0, sizeof dsmall, &dsmall);
        size_t wg;
        clGetKernelWorkGroupInfo(kempty, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
        v[i] = now_us() - t0;
    }
    printf("%-72s %8.2f us\n", "clSetKernelArg + clGetKernelWorkGroupInfo", median(v, REPS));
    launch_cost();

    static const struct {
        int profiled, how;
        size_t rbytes;
        const char *what;
    } cases[] = {
        {0, 0, 0, "empty kernels + clFinish, plain queue, no events"},
        {1, 0, 0, "empty kernels + clFinish, profiling queue, events"},
        {0, 1, 0, "empty kernels + blocking 4 B read (pageable), plain queue"},
        {0, 2, 0, "empty kernels + 4 B read (pinned) + clWaitForEvents, plain queue"},
        {1, 3, 65536, "empty kernels + 64 KB blocking read (pageable), profiling, events"},
        {1, 4, 65536, "empty kernels + 64 KB read (pinned) + wait, profiling, events"},
        {0, 4, 65536, "empty kernels + 64 KB read (pinned) + wait, plain, no events"},
    };
    const int ns[] = {1, 3, 6};
    for (int k = 0; k < 3; k++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            char what[128];
            snprintf(what, sizeof what, "%d %s", ns[k], cases[c].what);
            report(what, cases[c].profiled ? qp : qn, ns[k], cases[c].profiled, cases[c].how, pinned, pageable,
                   cases[c].rbytes);
        }
    gaps(2);
    gaps(6);
    transfers(pinned, pageable);
    op_like(1, 65536, 65536, 1, qp, pinned, "op: 64 KB write, 1 kernel, 64 KB read (pinned), profiling+events");
    op_like(1, 65536, 65536, 0, qn, pinned, "op: 64 KB write, 1 kernel, 64 KB read (pinned), plain");
    op_like(4, 65536, 65536, 1, qp, pinned, "op: 64 KB write, 4 kernels, 64 KB read (pinned), profiling+events");
    op_like(4, 65536, 65536, 0, qn, pinned, "op: 64 KB write, 4 kernels, 64 KB read (pinned), plain");
    op_like(4, 1u << 20, 1u << 20, 0, qn, pinned, "op: 1 MB write, 4 kernels, 1 MB read (pinned), plain");
    for (int f = 0; f < 3; f++) {
        op_flush(0, f, pinned);
        op_flush(2000, f, pinned);
    }
    for (int f = 0; f < 2; f++) op_pieces(2000, f, pinned, pageable);
    spin_then_read(qp, pinned, 0);
    spin_then_read(qp, pinned, 2000);
    spin_then_read(qp, pinned, 20000);
    return 0;
}
