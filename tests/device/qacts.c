/*
 * qacts.c - where the one-token activation quantizer (q_acts_rows of
 * kernels/quantize.cl) spends its time on an NVIDIA GPU, and what a row
 * split over several work-groups would give.  Builds common.cl +
 * quantize.cl from the working tree (run it from the repository root) plus
 * a few probe kernels of its own, and reports medians of REPS launches in
 * microseconds:
 *   - the profiled time of q_acts_rows at one token for several row lengths
 *     (plain, and with the fused norm), of an empty one-work-group kernel,
 *     and the device's time per kernel when they run back to back (queued
 *     behind a spin kernel, so the host's enqueue cost is out of the way);
 *   - a copy of q_acts_rows' register path with %globaltimer stamps (start,
 *     loads, absmax, codes, sum) against the event's start and end;
 *   - the row split over G work-groups that meet through a global atomic
 *     (every work-group must be resident at once: a probe, not a kernel a
 *     portable library may ship) and over G work-groups that each read the
 *     whole row for its absmax and write their share of the codes.
 * On an H200 (2026-12-01, driver 580.159.04): the empty kernel 5.44 us
 * profiled, 4.78 back to back; q_acts_rows 7.07 us at 256 columns, 8.10 at
 * 14336, 8.13 at 16384 (7.52 / 8.00 at 4096 plain / with the norm); the
 * stamped copy at 14336: 3.84 us from the event's start to the kernel's
 * first instruction, loads and absmax 0.64, the group max 0.26, the codes
 * 1.63, the code sum 0.22, then 1.54 to the event's end; the split row
 * 7.9-8.5 us for every G from 2 to 28 (codes equal to q_acts_rows').  The
 * kernel is at the fixed cost of a launch; only fewer kernels would gain.
 * A probe for the GPU machine (tests/device/), not part of the library.
 *
 *   cc -O2 -o qacts tests/device/qacts.c -lOpenCL
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

#define REPS 200
#define CHAIN 50

static const char *probe_src =
    "\n#line 1 \"probe\"\n"
    "inline ulong gt(void) { ulong t; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); return t; }\n"
    "__kernel void empty1(__global uint *p) { if (get_local_id(0) == 0 && p[0] == 12345u) p[1] = 1u; }\n"
    "__kernel void spin(__global float *p, int n) {\n"
    "  float a = p[get_global_id(0)];\n"
    "  for (int i = 0; i < n; i++) a = a * 0.999f + 0.001f;\n"
    "  p[get_global_id(0)] = a; }\n"
    /* q_acts_reg with stamps by item 0 */
    "__kernel void qa_stamped(__global const float *x, bn_size cols, bn_size xstride, __global char *q,\n"
    "    __global float *s, __global int *sum, __global ulong *st) {\n"
    "  __local uint red[Q_RWG];\n"
    "  const uint lid = get_local_id(0);\n"
    "  ulong t0 = gt();\n"
    "  __global const float4 *x4 = (__global const float4 *)x;\n"
    "  const bn_size n4 = cols / 4;\n"
    "  float4 v[Q_J4]; uint m = 0;\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < Q_J4; j++) { const bn_size c = lid + (bn_size)j * Q_RWG; v[j] = c < n4 ? x4[c] : (float4)(0.0f); }\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < Q_J4; j++) m = max(m, q_amax4(v[j]));\n"
    "  ulong t1 = gt();\n"
    "  m = bn_group_umax(red, m, lid, Q_RWG);\n"
    "  ulong t2 = gt();\n"
    "  const float sc = q_act_scale(m);\n"
    "  __global char4 *q4 = (__global char4 *)q; const bn_size w4 = xstride / 4; int acc = 0;\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < Q_J4; j++) { const bn_size c = lid + (bn_size)j * Q_RWG; int4 iv = (int4)(0);\n"
    "    if (c < n4) iv = convert_int4(clamp(rint(v[j] * sc), -128.0f, 127.0f));\n"
    "    if (c < w4) q4[c] = convert_char4(iv); acc += iv.x + iv.y + iv.z + iv.w; }\n"
    "  ulong t3 = gt();\n"
    "  const int total = bn_group_isum((__local int *)red, acc, lid, Q_RWG);\n"
    "  ulong t4 = gt();\n"
    "  if (lid == 0) { *sum = total; *s = sc; st[0] = t0; st[1] = t1; st[2] = t2; st[3] = t3; st[4] = t4; }\n"
    "}\n"
    /* the row over G work-groups of Q_RWG items, one float4 slice each
     * (up to Q_J4 float4s an item), meeting at gmax[gen] / cnt[gen] */
    "__kernel void qa_spin(__global const float *x, bn_size cols, __global char *q, __global float *s,\n"
    "    __global int *sum, __global uint *gmax, __global uint *cnt, uint gen, uint G) {\n"
    "  __local uint red[Q_RWG]; __local uint lm;\n"
    "  const uint lid = get_local_id(0), g = get_group_id(0);\n"
    "  __global const float4 *x4 = (__global const float4 *)x;\n"
    "  const bn_size n4 = cols / 4, per = (n4 + G - 1) / G, c0 = (bn_size)g * per;\n"
    "  float4 v[Q_J4]; uint m = 0;\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < Q_J4; j++) { const bn_size c = lid + (bn_size)j * Q_RWG;\n"
    "    v[j] = c < per && c0 + c < n4 ? x4[c0 + c] : (float4)(0.0f); }\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < Q_J4; j++) m = max(m, q_amax4(v[j]));\n"
    "  m = bn_group_umax(red, m, lid, Q_RWG);\n"
    "  if (lid == 0) {\n"
    "    atomic_max(&gmax[gen], m); mem_fence(CLK_GLOBAL_MEM_FENCE); atomic_inc(&cnt[gen]);\n"
    "    while (atomic_add(&cnt[gen], 0u) < G) ;\n"
    "    lm = atomic_max(&gmax[gen], 0u); }\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  const float sc = q_act_scale(lm);\n"
    "  __global char4 *q4 = (__global char4 *)q; int acc = 0;\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < Q_J4; j++) { const bn_size c = lid + (bn_size)j * Q_RWG;\n"
    "    if (c < per && c0 + c < n4) { int4 iv = convert_int4(clamp(rint(v[j] * sc), -128.0f, 127.0f));\n"
    "      q4[c0 + c] = convert_char4(iv); acc += iv.x + iv.y + iv.z + iv.w; } }\n"
    "  const int total = bn_group_isum((__local int *)red, acc, lid, Q_RWG);\n"
    "  if (lid == 0) { atomic_add(&sum[gen], total); if (g == 0) *s = sc; }\n"
    "}\n"
    /* G work-groups, each reading the whole row for the absmax, writing
     * the codes of its slice; group 0 sums every code */
    "__kernel void qa_redund(__global const float *x, bn_size cols, __global char *q, __global float *s,\n"
    "    __global int *sum, uint G) {\n"
    "  __local uint red[Q_RWG];\n"
    "  const uint lid = get_local_id(0), g = get_group_id(0);\n"
    "  __global const float4 *x4 = (__global const float4 *)x;\n"
    "  const bn_size n4 = cols / 4, jper = (Q_J4 + G - 1) / G;\n"
    "  float4 v[Q_J4]; uint m = 0;\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < Q_J4; j++) { const bn_size c = lid + (bn_size)j * Q_RWG; v[j] = c < n4 ? x4[c] : (float4)(0.0f); }\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < Q_J4; j++) m = max(m, q_amax4(v[j]));\n"
    "  m = bn_group_umax(red, m, lid, Q_RWG);\n"
    "  const float sc = q_act_scale(m);\n"
    "  __global char4 *q4 = (__global char4 *)q; int acc = 0;\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < Q_J4; j++) { const bn_size c = lid + (bn_size)j * Q_RWG;\n"
    "    const int mine = j / jper == g;\n"
    "    if (c < n4 && (mine || g == 0)) { int4 iv = convert_int4(clamp(rint(v[j] * sc), -128.0f, 127.0f));\n"
    "      if (mine) q4[c] = convert_char4(iv); acc += iv.x + iv.y + iv.z + iv.w; } }\n"
    "  if (g == 0) { const int total = bn_group_isum((__local int *)red, acc, lid, Q_RWG);\n"
    "    if (lid == 0) { *sum = total; *s = sc; } }\n"
    "}\n";

static cl_context ctx;
static cl_device_id dev;
static cl_command_queue qp;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "qacts: %s: cannot open (run from the repository root)\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    if (!b || fread(b, 1, (size_t)len, f) != (size_t)len) exit(1);
    b[len] = 0;
    fclose(f);
    return b;
}

static double ev_us(cl_event e, cl_profiling_info a, cl_profiling_info b)
{
    cl_ulong s, t;
    CK(clGetEventProfilingInfo(e, a, sizeof s, &s, NULL));
    CK(clGetEventProfilingInfo(e, b, sizeof t, &t, NULL));
    return (double)(t - s) / 1e3;
}

/* median profiled time of REPS single launches, and the device time per
 * kernel of CHAIN launches queued behind a spin kernel */
static void timeit(const char *what, cl_kernel k, size_t global, size_t local, cl_kernel kspin, int gen_arg)
{
    double v[REPS], c[REPS / 10];
    static cl_uint gen = 0;
    for (int r = 0; r < REPS + 10; r++) {
        cl_event e;
        if (gen_arg >= 0) {
            CK(clSetKernelArg(k, (cl_uint)gen_arg, sizeof gen, &gen));
            gen++;
        }
        CK(clEnqueueNDRangeKernel(qp, k, 1, NULL, &global, &local, 0, NULL, &e));
        CK(clFinish(qp));
        if (r >= 10) v[r - 10] = ev_us(e, CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END);
        clReleaseEvent(e);
    }
    const size_t gs = 132 * 1024, ls = 256;
    for (int r = 0; r < REPS / 10; r++) {
        cl_event e[CHAIN];
        CK(clEnqueueNDRangeKernel(qp, kspin, 1, NULL, &gs, &ls, 0, NULL, NULL));
        for (int i = 0; i < CHAIN; i++) {
            if (gen_arg >= 0) {
                CK(clSetKernelArg(k, (cl_uint)gen_arg, sizeof gen, &gen));
                gen++;
            }
            CK(clEnqueueNDRangeKernel(qp, k, 1, NULL, &global, &local, 0, NULL, &e[i]));
        }
        CK(clFinish(qp));
        cl_ulong s0, e1;
        CK(clGetEventProfilingInfo(e[0], CL_PROFILING_COMMAND_START, sizeof s0, &s0, NULL));
        CK(clGetEventProfilingInfo(e[CHAIN - 1], CL_PROFILING_COMMAND_END, sizeof e1, &e1, NULL));
        c[r] = (double)(e1 - s0) / 1e3 / CHAIN;
        for (int i = 0; i < CHAIN; i++) clReleaseEvent(e[i]);
    }
    printf("%-52s profiled %7.2f us, back to back %7.2f us a kernel\n", what, median(v, REPS), median(c, REPS / 10));
}

int main(void)
{
    cl_uint cus = 0;
    dev = probe_gpu("qacts", &cus);
    cl_int err;
    ctx = probe_context(dev, &qp, NULL);
    char *common = slurp("kernels/common.cl"), *quant = slurp("kernels/quantize.cl");
    const char *srcs[4] = {common, "\n#line 1 \"quantize.cl\"\n", quant, probe_src};
    cl_program prog = probe_build(ctx, dev, 4, srcs, "-cl-fp32-correctly-rounded-divide-sqrt -DQ_WG=64 -DQ_RWG=256 -DBN_GPU=1");
    if (!prog) return 1;
    cl_kernel kq = clCreateKernel(prog, "q_acts_rows", &err);
    CK(err);
    cl_kernel ke = clCreateKernel(prog, "empty1", &err), ks = clCreateKernel(prog, "spin", &err);
    cl_kernel kst = clCreateKernel(prog, "qa_stamped", &err), ksp = clCreateKernel(prog, "qa_spin", &err);
    cl_kernel kre = clCreateKernel(prog, "qa_redund", &err);
    CK(err);
    const size_t maxc = 16384, nslot = 1u << 16;
    float *hx = malloc(maxc * sizeof *hx), *hn = malloc(maxc * sizeof *hn);
    uint64_t r = 88172645463325252ull;
    for (size_t i = 0; i < maxc; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        hx[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 8.0 - 4.0);
        hn[i] = 0.5f + (float)(i % 7) / 7.0f;
    }
    cl_mem x = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, maxc * 4, hx, &err);
    CK(err);
    cl_mem nw = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, maxc * 4, hn, &err);
    cl_mem q = clCreateBuffer(ctx, CL_MEM_READ_WRITE, maxc, NULL, &err);
    cl_mem q2 = clCreateBuffer(ctx, CL_MEM_READ_WRITE, maxc, NULL, &err);
    cl_mem small = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cl_mem stamps = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
    cl_mem spinb = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 132 * 1024 * 4, NULL, &err);
    CK(err);
    cl_uint *zeros = calloc(nslot, 4);
    cl_mem gmax = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, nslot * 4, zeros, &err);
    cl_mem cnt = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, nslot * 4, zeros, &err);
    cl_mem gsum = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, nslot * 4, zeros, &err);
    CK(err);
    const int iters = 200000;
    CK(clSetKernelArg(ks, 0, sizeof spinb, &spinb));
    CK(clSetKernelArg(ks, 1, sizeof iters, &iters));
    CK(clSetKernelArg(ke, 0, sizeof small, &small));
    timeit("empty kernel, one work-group of 256", ke, 256, 256, ks, -1);

    const cl_ulong colsv[] = {256, 4096, 14336, 16384};
    for (size_t ci = 0; ci < 4; ci++) {
        for (int hnorm = 0; hnorm < 2; hnorm++) {
            const cl_ulong cols = colsv[ci], xs = (cols + 127) / 128 * 128, foff = 0;
            if (hnorm && cols > 4096) continue;
            const cl_float eps = 1e-5f;
            const cl_int hn_ = hnorm;
            args(kq, 0, 11, A(x), A(cols), A(xs), A(q), A(small), A(small), A(small), A(foff), A(nw), A(eps), A(hn_));
            char what[96];
            snprintf(what, sizeof what, "q_acts_rows %5llu columns%s", (unsigned long long)cols,
                     hnorm ? ", fused norm" : "");
            timeit(what, kq, 256, 256, ks, -1);
        }
    }
    /* the stamped copy, 14336 columns */
    {
        const cl_ulong cols = 14336, xs = 14336;
        args(kst, 0, 7, A(x), A(cols), A(xs), A(q2), A(small), A(small), A(stamps));
        double d[6][REPS];
        for (int rr = 0; rr < REPS + 10; rr++) {
            cl_event e;
            const size_t g = 256;
            CK(clEnqueueNDRangeKernel(qp, kst, 1, NULL, &g, &g, 0, NULL, &e));
            CK(clFinish(qp));
            cl_ulong st[5], s0, e0;
            CK(clEnqueueReadBuffer(qp, stamps, CL_TRUE, 0, sizeof st, st, 0, NULL, NULL));
            CK(clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof s0, &s0, NULL));
            CK(clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof e0, &e0, NULL));
            clReleaseEvent(e);
            if (rr < 10) continue;
            d[0][rr - 10] = ((double)st[0] - (double)s0) / 1e3;
            for (int i = 1; i < 5; i++) d[i][rr - 10] = (double)(st[i] - st[i - 1]) / 1e3;
            d[5][rr - 10] = ((double)e0 - (double)st[4]) / 1e3;
        }
        printf("stamped 14336: event start->kernel %6.2f, loads+max %6.2f, group max %6.2f, codes %6.2f, "
               "group sum %6.2f, ->event end %6.2f us\n",
               median(d[0], REPS), median(d[1], REPS), median(d[2], REPS), median(d[3], REPS), median(d[4], REPS),
               median(d[5], REPS));
    }
    /* the split row */
    const cl_uint Gs[] = {2, 4, 7, 14, 28};
    for (size_t gi = 0; gi < 5; gi++) {
        for (size_t ci = 1; ci < 4; ci++) {
            const cl_ulong cols = colsv[ci];
            const cl_uint G = Gs[gi];
            if ((cols / 4 + G - 1) / G > 16 * 256 || G > cus) continue;
            args(ksp, 0, 7, A(x), A(cols), A(q2), A(small), A(gsum), A(gmax), A(cnt));
            CK(clSetKernelArg(ksp, 8, sizeof G, &G));
            char what[96];
            snprintf(what, sizeof what, "split over %2u groups (atomic meet) %5llu", G, (unsigned long long)cols);
            timeit(what, ksp, (size_t)G * 256, 256, ks, 7);
            /* the codes against q_acts_rows' */
            const cl_ulong xs = cols, foff = 0;
            const cl_float eps = 1e-5f;
            const cl_int hn0 = 0;
            args(kq, 0, 11, A(x), A(cols), A(xs), A(q), A(small), A(small), A(small), A(foff), A(nw), A(eps), A(hn0));
            const size_t g = 256;
            CK(clEnqueueNDRangeKernel(qp, kq, 1, NULL, &g, &g, 0, NULL, NULL));
            static char a[16384], b[16384];
            CK(clEnqueueReadBuffer(qp, q, CL_TRUE, 0, cols, a, 0, NULL, NULL));
            CK(clEnqueueReadBuffer(qp, q2, CL_TRUE, 0, cols, b, 0, NULL, NULL));
            if (memcmp(a, b, cols)) printf("  split %u %llu: codes DIFFER\n", G, (unsigned long long)cols);
            args(kre, 0, 6, A(x), A(cols), A(q2), A(small), A(small), A(G));
            snprintf(what, sizeof what, "split over %2u groups (row read by each) %5llu", G, (unsigned long long)cols);
            if (G <= 16) timeit(what, kre, (size_t)G * 256, 256, ks, -1);
        }
    }
    return 0;
}
