/*
 * hostcost.c - the host's time inside the OpenCL calls of one host-pointer
 * BitLinear call, and what each alternative costs, on a queue without
 * profiling with the device idle between calls (as a caller runs):
 *   write   16900 bytes up (codes, scale, sum) from pinned memory (a mapped
 *           CL_MEM_ALLOC_HOST_PTR buffer, as lib/opencl/staging.c has it),
 *           from malloc'd memory, or by clEnqueueCopyBuffer from the pinned
 *           buffer itself;
 *   sub     clCreateSubBuffer + clReleaseMemObject (the call makes two, for
 *           the scale and the sums behind the codes);
 *   launch  a kernel of 22 arguments like bl_gemv_nv4 (8 buffers, 13
 *           scalars, a local buffer), every argument set before it: 8
 *           distinct buffers, 5 distinct and 3 NULL (unused bias, residual,
 *           sums), all 8 the same buffer; and with no argument set again;
 *   read    65536 bytes down into pinned memory, then the wait;
 *   call    the whole sequence (write, two sub-buffers, launch, read, wait)
 *           against the same with the scale and sums passed as offsets into
 *           the codes' buffer and NULL for what is unused; and with the
 *           kernel writing its output into a mapped CL_MEM_ALLOC_HOST_PTR
 *           buffer left mapped (no read command, only a clFinish), checked
 *           against the read path's bytes after every call.
 * Medians of REPS calls, in us.  A probe for the GPU machine, not part of the
 * library.
 * On H200 machines, 2026-12-03, driver 580.159.04: one machine, one run /
 * another machine, three runs (its host took about twice as long in every
 * call):
 *   write from pinned 3.9 / 5.7-6.6; from malloc'd 2.5 / 3.8-4.8, blocking
 *   9.7-11.0 (a whole call with it 26-32 against 20-27 through pinned
 *   memory); copy from the pinned buffer 4.4 / 6.5-8.8
 *   two sub-buffers 1.5 / 2.4-4.3
 *   launch of 22 arguments 4.2-4.6 / 7.5-10.5 whatever the buffers: 8
 *   distinct, 3 of them NULL, one 8 times, or none set again (setting all
 *   22 takes 0.2-0.4)
 *   read 64 KiB to pinned and wait 7.5 / 8.3-9.6; to malloc'd 26-34; to
 *   pinned then memcpy out 14.2-14.3
 *   the whole call 17.1-17.6 / 22.4-27.3 with the sub-buffers, 15.7-15.8 /
 *   19.6-25.3 without, 19.3-24.5 with NULL for what is unused.
 * Another H200 machine, 2026-12-04: the call 19.3-19.6 us, and with the
 * output written into the mapped pinned buffer 16.0-16.2, but the host saw
 * none of it: all 602 such calls left the mapped memory as it was (NVIDIA's
 * driver keeps a device copy of an ALLOC_HOST_PTR buffer and syncs it only
 * at a map), so a read or a map stays in every host-pointer call.
 * So pinned staging both ways is right (lib/opencl/staging.c), NULL
 * arguments buy nothing, and the sub-buffers cost 1-3 us of a call (keeping
 * them in the pool was tried: lib/opencl/bitlinear.c, hq_upload).  The
 * host's speed moves a host-pointer call's end-to-end time as much as any of
 * these.
 *
 *   cc -O2 -o hostcost tests/device/hostcost.c -lOpenCL
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

#define REPS 301

static const char *src =
    "__kernel void k22(__global const uint4 *w, __global const int4 *x, __global const float *xs,\n"
    "                  __global const float *d, const int per_row, __global const float *bias, const int has_bias,\n"
    "                  const int act, __global float *y, const ulong out, const ulong tokens, const ulong nb,\n"
    "                  const ulong xstride, const long perturb, __local int4 *xl, const int tt,\n"
    "                  __global const int *xsum, const uint nbp, const uint rw, __global const float *res,\n"
    "                  const int has_res, const int own) {\n"
    "  const size_t g = get_global_id(0);\n"
    "  if (g < out) {\n"
    "    float v = (float)x[g % 1024].x * xs[0] * d[0] + (float)(xsum ? xsum[0] : 0);\n"
    "    if (has_bias) v += bias[g];\n"
    "    if (has_res) v += res[g];\n"
    "    y[g] = v + (float)(per_row + act + tt + nbp + rw + own + (int)nb + (int)xstride + (int)tokens + (int)perturb);\n"
    "  }\n"
    "  if (get_local_id(0) == 0) xl[0] = (int4)(0);\n"
    "}\n";

static cl_command_queue q;

/* Sets the 22 arguments of k22: buffers b[0..7] (w, x, xs, d, bias, y,
 * xsum, res), NULL where b[i] is NULL. */
static void set22(cl_kernel k, cl_mem *b)
{
    const int per_row = 0, has_bias = b[4] != NULL, act = 0, tt = 1, has_res = b[7] != NULL, own = 0;
    const cl_ulong out = 16384, tokens = 1, nb = 128, xstride = 16384;
    const cl_long perturb = -1;
    const cl_uint nbp = 132, rw = 4;
    args(k, 0, 4, A(b[0]), A(b[1]), A(b[2]), A(b[3]));
    args(k, 4, 2, A(per_row), A(b[4]));
    args(k, 6, 3, A(has_bias), A(act), A(b[5]));
    args(k, 9, 5, A(out), A(tokens), A(nb), A(xstride), A(perturb));
    CK(clSetKernelArg(k, 14, 16 * 1056, NULL));
    args(k, 15, 6, A(tt), A(b[6]), A(nbp), A(rw), A(b[7]), A(has_res));
    args(k, 21, 1, A(own));
}

static const size_t gs = 16384, ls = 256;

/* The two sub-buffers of a call: the scale and the sums behind the codes. */
static void two_subs(cl_mem xq, cl_mem *s1, cl_mem *s2)
{
    cl_int err;
    const cl_buffer_region r1 = {16384, 4}, r2 = {16896, 4};
    *s1 = clCreateSubBuffer(xq, 0, CL_BUFFER_CREATE_TYPE_REGION, &r1, &err);
    CK(err);
    *s2 = clCreateSubBuffer(xq, 0, CL_BUFFER_CREATE_TYPE_REGION, &r2, &err);
    CK(err);
}

/* k22 with its arguments set from b (set22), launched. */
static void launch(cl_kernel k, cl_mem *b)
{
    set22(k, b);
    CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &gs, &ls, 0, NULL, NULL));
}

/* bytes of src read into dst, then waited for. */
static void read_wait(cl_mem src, void *dst, size_t bytes)
{
    cl_event e;
    CK(clEnqueueReadBuffer(q, src, CL_FALSE, 0, bytes, dst, 0, NULL, &e));
    CK(clWaitForEvents(1, &e));
    clReleaseEvent(e);
}

int main(void)
{
    cl_uint cus;
    cl_device_id dev = probe_gpu("hostcost", &cus);
    cl_command_queue qp;
    cl_context ctx = probe_context(dev, &qp, &q);
    cl_program prog = probe_build(ctx, dev, 1, &src, "");
    if (!prog) return 1;
    cl_int err;
    cl_kernel k = clCreateKernel(prog, "k22", &err);
    CK(err);
    const size_t up = 16900, down = 65536;
    cl_mem pin = clCreateBuffer(ctx, CL_MEM_ALLOC_HOST_PTR, 1 << 20, NULL, &err);
    CK(err);
    char *ph = clEnqueueMapBuffer(q, pin, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, 1 << 20, 0, NULL, NULL, &err);
    CK(err);
    memset(ph, 1, 1 << 20);
    char *heap = malloc(1 << 20);
    memset(heap, 1, 1 << 20);
    cl_mem b[8];
    for (int i = 0; i < 8; i++) {
        b[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1 << 20, NULL, &err);
        CK(err);
        CK(clEnqueueFillBuffer(q, b[i], &(float){1.0f}, 4, 0, 1 << 20, 0, NULL, NULL));
    }
    cl_mem xq = b[1];
    CK(clFinish(q));
    double t[REPS];

#define TIMED(name, ...)                                                       \
    do {                                                                         \
        for (int r = 0; r < REPS; r++) {                                         \
            const double t0 = now_us();                                          \
            __VA_ARGS__;                                                         \
            t[r] = now_us() - t0;                                                \
            CK(clFinish(q));                                                     \
        }                                                                        \
        printf("%-52s %7.2f us\n", name, median(t, REPS));                       \
    } while (0)

    TIMED("write 16900 B from pinned (non-blocking)",
          CK(clEnqueueWriteBuffer(q, xq, CL_FALSE, 0, up, ph, 0, NULL, NULL)));
    TIMED("write 16900 B from malloc'd (non-blocking)",
          CK(clEnqueueWriteBuffer(q, xq, CL_FALSE, 0, up, heap, 0, NULL, NULL)));
    TIMED("write 16900 B from malloc'd (blocking)",
          CK(clEnqueueWriteBuffer(q, xq, CL_TRUE, 0, up, heap, 0, NULL, NULL)));
    TIMED("copy 16900 B from the pinned buffer",
          CK(clEnqueueCopyBuffer(q, pin, xq, 0, 0, up, 0, NULL, NULL)));
    TIMED("two sub-buffers made and released", {
        cl_mem s1, s2;
        two_subs(xq, &s1, &s2);
        clReleaseMemObject(s1);
        clReleaseMemObject(s2);
    });
    cl_mem b8[8] = {b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]};
    cl_mem b5[8] = {b[0], b[1], b[2], b[3], NULL, b[5], NULL, NULL};
    cl_mem b1[8] = {b[0], b[0], b[0], b[0], b[0], b[0], b[0], b[0]};
    TIMED("launch, 8 distinct buffers set", launch(k, b8));
    TIMED("launch, 5 buffers and 3 NULL set", launch(k, b5));
    TIMED("launch, one buffer 8 times set", launch(k, b1));
    set22(k, b8);
    TIMED("launch, 8 distinct buffers, nothing set again",
          CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &gs, &ls, 0, NULL, NULL)));
    TIMED("only setting the 22 arguments", set22(k, b8));
    TIMED("read 65536 B to pinned, then wait", read_wait(b[5], ph + up, down));
    TIMED("read 65536 B to malloc'd, then wait", read_wait(b[5], heap + up, down));
    TIMED("read 65536 B to pinned, wait, copy to malloc'd", {
        read_wait(b[5], ph + up, down);
        memcpy(heap + up, ph + up, down);
    });
    /* The output written by the kernel straight into pinned host memory
     * (the mapped CL_MEM_ALLOC_HOST_PTR buffer `zout`, left mapped): no
     * read command, only the wait.  Checked against the read path's bytes
     * after every call (the mapped memory refilled with 0xff before). */
    cl_mem zout = clCreateBuffer(ctx, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE, down, NULL, &err);
    CK(err);
    char *zh = clEnqueueMapBuffer(q, zout, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, down, 0, NULL, NULL, &err);
    CK(err);
    /* the same buffers both ways (no bias, no residual), but the output */
    cl_mem rb[8] = {b[0], xq, b[2], b[3], NULL, b[5], b[6], NULL}, zb[8] = {b[0], xq, b[2], b[3], NULL, zout, b[6], NULL};
    char *ref = malloc(down);
    CK(clEnqueueWriteBuffer(q, xq, CL_FALSE, 0, up, ph, 0, NULL, NULL));
    launch(k, rb);
    read_wait(b[5], ref, down);
    int zbad = 0;
    for (int round = 0; round < 2; round++) {
        TIMED("call: write, launch, read, wait (no bias/res)", {
            CK(clEnqueueWriteBuffer(q, xq, CL_FALSE, 0, up, ph, 0, NULL, NULL));
            launch(k, rb);
            read_wait(b[5], ph + up, down);
        });
        TIMED("call: write, launch into pinned memory, finish", {
            memset(zh, 0xff, 64);
            memset(zh + down - 64, 0xff, 64);
            CK(clEnqueueWriteBuffer(q, xq, CL_FALSE, 0, up, ph, 0, NULL, NULL));
            launch(k, zb);
            CK(clFinish(q));
            zbad += memcmp(zh, ref, down) != 0;
        });
    }
    printf("zero-copy output: %d of %d calls differed from the read path\n", zbad, 2 * REPS);
    for (int round = 0; round < 2; round++) {
        TIMED("call: write (malloc'd, blocking), launch, read, wait", {
            CK(clEnqueueWriteBuffer(q, xq, CL_TRUE, 0, up, heap, 0, NULL, NULL));
            cl_mem bb[8] = {b[0], xq, b[2], b[3], b[5], b[5], b[6], b[5]};
            launch(k, bb);
            read_wait(b[5], ph + up, down);
        });
        TIMED("call: write, 2 sub-buffers, launch (8 buffers), read, wait", {
            CK(clEnqueueWriteBuffer(q, xq, CL_FALSE, 0, up, ph, 0, NULL, NULL));
            cl_mem s1, s2;
            two_subs(xq, &s1, &s2);
            cl_mem bb[8] = {b[0], xq, s1, b[3], b[5], b[5], s2, b[5]};
            launch(k, bb);
            read_wait(b[5], ph + up, down);
            clReleaseMemObject(s1);
            clReleaseMemObject(s2);
        });
        TIMED("call: write, launch (4 buffers, 4 NULL), read, wait", {
            CK(clEnqueueWriteBuffer(q, xq, CL_FALSE, 0, up, ph, 0, NULL, NULL));
            cl_mem bb[8] = {b[0], xq, xq, b[3], NULL, b[5], NULL, NULL};
            launch(k, bb);
            read_wait(b[5], ph + up, down);
        });
        TIMED("call: write, launch (8 buffers, no sub-buffers), read, wait", {
            CK(clEnqueueWriteBuffer(q, xq, CL_FALSE, 0, up, ph, 0, NULL, NULL));
            cl_mem bb[8] = {b[0], xq, b[2], b[3], b[5], b[5], b[6], b[5]};
            launch(k, bb);
            read_wait(b[5], ph + up, down);
        });
    }
    return 0;
}
