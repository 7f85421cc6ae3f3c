/*
 * probe.h - what the stand-alone GPU-machine probes of tests/device/
 * (latency.c, int8_input.c, mma_peak.c, mma_ladder.c, qacts.c, between.c,
 * hostcost.c, span.c, wgmma.c)
 * share: a wall clock, the median of a sample, CK, which exits with the
 * call and line of a failed OpenCL call, probe_ev_us, a command's profiled
 * time, probe_kernel_s, one profiled launch, args, which sets a run of kernel
 * arguments, and probe_gpu, the first GPU.  Not part of the library or its
 * tests.
 */
#ifndef BITNET_PROBE_H
#define BITNET_PROBE_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static inline int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (v is sorted in place). */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

#define CK(x)                                                                  \
    do {                                                                       \
        cl_int e_ = (x);                                                       \
        if (e_ != CL_SUCCESS) {                                                \
            fprintf(stderr, "%s failed: %d (line %d)\n", #x, (int)e_, __LINE__); \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

#ifdef CL_VERSION_1_0 /* the probe included CL/cl.h first */
/* Sets arguments first, first + 1, ... of k from n (size, pointer) pairs:
 * args(k, 0, 2, A(buf), A(n)). */
static inline void args(cl_kernel k, cl_uint first, int n, ...)
{
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const size_t size = va_arg(ap, size_t);
        const void *p = va_arg(ap, const void *);
        CK(clSetKernelArg(k, first + (cl_uint)i, size, p));
    }
    va_end(ap);
}
#define A(v) sizeof(v), (const void *)&(v)

/* The first GPU of any platform, its name and compute units printed (who
 * names the probe in the message when there is none: exits). */
static inline cl_device_id probe_gpu(const char *who, cl_uint *cus)
{
    cl_platform_id plats[8];
    cl_uint np = 0;
    cl_device_id dev = NULL;
    CK(clGetPlatformIDs(8, plats, &np));
    for (cl_uint p = 0; p < np && !dev; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_GPU, 1, &dev, &nd) != CL_SUCCESS || !nd) dev = NULL;
    }
    if (!dev) {
        fprintf(stderr, "%s: no GPU\n", who);
        exit(1);
    }
    char name[256];
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof *cus, cus, NULL);
    printf("device: %s, %u compute units\n", name, *cus);
    return dev;
}

/* The program of n sources built for dev with opts; on failure the build
 * log goes to stderr and NULL comes back. */
static inline cl_program probe_build(cl_context ctx, cl_device_id dev, cl_uint n, const char **srcs, const char *opts)
{
    cl_int err;
    cl_program p = clCreateProgramWithSource(ctx, n, srcs, NULL, &err);
    CK(err);
    err = clBuildProgram(p, 1, &dev, opts, NULL, NULL);
    if (err == CL_SUCCESS) return p;
    char log[1 << 15] = "";
    clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    fprintf(stderr, "build (%s): %d\n%s\n", opts, (int)err, log);
    clReleaseProgram(p);
    return NULL;
}

/* The profiled time of a finished command e, start to end, in us. */
static inline double probe_ev_us(cl_event e)
{
    cl_ulong s, t;
    CK(clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof s, &s, NULL));
    CK(clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL));
    return (double)(t - s) / 1e3;
}

/* One launch of k over global (local) work-items on the profiling queue q,
 * waited for: its kernel time in seconds, or -1 when the launch was
 * refused. */
static inline double probe_kernel_s(cl_command_queue q, cl_kernel k, size_t global, size_t local)
{
    cl_event ev;
    if (clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, &ev) != CL_SUCCESS) return -1;
    CK(clWaitForEvents(1, &ev));
    const double us = probe_ev_us(ev);
    clReleaseEvent(ev);
    return us * 1e-6;
}

/* A context on dev with a profiling queue *qp and, where qn is not NULL, a
 * queue without profiling *qn (exits on failure). */
static inline cl_context probe_context(cl_device_id dev, cl_command_queue *qp, cl_command_queue *qn)
{
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CK(err);
    *qp = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
    CK(err);
    if (qn) {
        *qn = clCreateCommandQueue(ctx, dev, 0, &err);
        CK(err);
    }
    return ctx;
}
#endif

#endif
