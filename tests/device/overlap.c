/*
 * overlap.c - whether an OpenCL driver runs a host<->device copy while a
 * kernel runs: a kernel of about KUS microseconds (a spin over every compute
 * unit) and a copy of 1 MiB to or from pinned memory, enqueued on one
 * in-order queue, then on two queues (the copy on the second), each pair
 * waited for with clFinish on both.  If the two queues overlap, the pair
 * takes about the longer of the two, not their sum.  Medians of REPS rounds
 * after a warm-up, host wall time, microseconds.  A probe for the GPU
 * machine (tests/device/), not part of the library or its tests.
 *
 *   cc -O2 -o overlap tests/device/overlap.c -lOpenCL
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

#define REPS 200
#define BYTES (1u << 20)

static const char *src = "__kernel void spin(__global float *p, int n) {\n"
                         "  float a = p[get_global_id(0)];\n"
                         "  for (int i = 0; i < n; i++) a = a * 0.999f + 0.001f;\n"
                         "  p[get_global_id(0)] = a; }\n";

static cl_command_queue qa, qb;
static cl_kernel kspin;
static cl_mem dspin, dcopy;
static size_t gsz;

/* what: 0 kernel alone, 1 write alone, 2 read alone, 3 kernel + write on one
 * queue, 4 kernel + read on one queue, 5 kernel + write on two, 6 kernel +
 * read on two */
static double round_us(int what, void *pinned)
{
    const size_t l = 256;
    const double t0 = now_us();
    cl_command_queue qc = what >= 5 ? qb : qa;
    if (what == 0 || what >= 3) CK(clEnqueueNDRangeKernel(qa, kspin, 1, NULL, &gsz, &l, 0, NULL, NULL));
    if (what == 1 || what == 3 || what == 5) CK(clEnqueueWriteBuffer(qc, dcopy, CL_FALSE, 0, BYTES, pinned, 0, NULL, NULL));
    if (what == 2 || what == 4 || what == 6) CK(clEnqueueReadBuffer(qc, dcopy, CL_FALSE, 0, BYTES, pinned, 0, NULL, NULL));
    CK(clFlush(qa));
    CK(clFlush(qb));
    CK(clFinish(qa));
    CK(clFinish(qb));
    return now_us() - t0;
}

int main(void)
{
    cl_uint cus;
    cl_device_id dev = probe_gpu("overlap", &cus);
    cl_int err;
    cl_command_queue qp;
    cl_context ctx = probe_context(dev, &qp, &qa);
    qb = clCreateCommandQueue(ctx, dev, 0, &err);
    CK(err);
    cl_program prog = probe_build(ctx, dev, 1, &src, "");
    if (!prog) return 1;
    kspin = clCreateKernel(prog, "spin", &err);
    CK(err);
    gsz = (size_t)cus * 1024;
    dspin = clCreateBuffer(ctx, CL_MEM_READ_WRITE, gsz * 4, NULL, &err);
    CK(err);
    dcopy = clCreateBuffer(ctx, CL_MEM_READ_WRITE, BYTES, NULL, &err);
    CK(err);
    cl_mem pm = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, BYTES, NULL, &err);
    CK(err);
    void *pinned = clEnqueueMapBuffer(qb, pm, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, BYTES, 0, NULL, NULL, &err);
    CK(err);
    memset(pinned, 1, BYTES);
    CK(clEnqueueFillBuffer(qa, dspin, &(float){1.0f}, 4, 0, gsz * 4, 0, NULL, NULL));
    CK(clFinish(qa));
    /* the spin's length: about KUS us (default 20) on this device */
    const int kus = getenv("KUS") ? atoi(getenv("KUS")) : 20;
    int n = 256;
    CK(clSetKernelArg(kspin, 0, sizeof dspin, &dspin));
    for (int it = 0; it < 12; it++) {
        CK(clSetKernelArg(kspin, 1, sizeof n, &n));
        const double s = probe_kernel_s(qp, kspin, gsz, 256) * 1e6;
        if (s > 0.8 * kus && s < 1.25 * kus) break;
        n = (int)(n * kus / (s > 1 ? s : 1));
        if (n < 1) n = 1;
    }
    CK(clSetKernelArg(kspin, 1, sizeof n, &n));
    printf("spin of %d iterations: %.1f us profiled; copies of %u bytes from/to pinned memory\n", n,
           probe_kernel_s(qp, kspin, gsz, 256) * 1e6, BYTES);
    static const char *const what[] = {"kernel alone", "write alone", "read alone", "kernel + write, one queue",
                                       "kernel + read, one queue", "kernel + write, two queues",
                                       "kernel + read, two queues"};
    for (int pass = 0; pass < 2; pass++)
        for (int w = 0; w < 7; w++) {
            double v[REPS];
            for (int r = 0; r < REPS + 10; r++) {
                const double t = round_us(w, pinned);
                if (r >= 10) v[r - 10] = t;
            }
            printf("round %d  %-28s %8.1f us\n", pass + 1, what[w], median(v, REPS));
        }
    return 0;
}
