/*
 * roofline.c - what the OpenCL device can move: a copy kernel and a read
 * kernel timed by profiling events (best of several runs), and host<->device
 * transfer rates from pageable (malloc) and pinned (CL_MEM_ALLOC_HOST_PTR,
 * mapped) host memory.  Used by bitnet-bench to put kernel numbers on a scale.
 */
#include "ocl_impl.h"

#include <stdlib.h>
#include <string.h>

#define RUNS 5

/* Global size for a grid-stride kernel over n4 float4 values. */
static size_t grid(const bn_ocl *o, size_t n4, size_t wg)
{
    size_t want = (size_t)(o->caps.compute_units ? o->caps.compute_units : 1) * wg * 16;
    if (want > n4) want = n4;
    return (want + wg - 1) / wg * wg;
}

static bitnet_status best_kernel_ms(bn_ocl *o, cl_kernel k, size_t global, size_t wg, double *best)
{
    *best = 0;
    for (int r = 0; r < RUNS + 1; r++) { /* the first run warms up */
        bitnet_status st = bn_ocl_run(o, k, 1, &global, &wg, "roofline");
        if (st == BITNET_OK) st = bn_ocl_finish(o);
        if (st != BITNET_OK) return st;
        double ms = bn_ocl_last_kernel_ms(o);
        if (r > 0 && (*best == 0 || ms < *best)) *best = ms;
    }
    return BITNET_OK;
}

static bitnet_status bandwidth(bn_ocl *o, uint64_t bytes, double *copy_gbs, double *read_gbs);

/* Timed by profiling events: on for the measurement, as it was after. */
bitnet_status bn_ocl_bandwidth(bn_ocl *o, uint64_t bytes, double *copy_gbs, double *read_gbs)
{
    *copy_gbs = *read_gbs = 0;
    const int was = bn_ocl_profiling(o);
    bitnet_status st = bn_ocl_set_profiling(o, 1);
    if (st == BITNET_OK) st = bandwidth(o, bytes, copy_gbs, read_gbs);
    const bitnet_status s2 = bn_ocl_set_profiling(o, was);
    return st != BITNET_OK ? st : s2;
}

static bitnet_status bandwidth(bn_ocl *o, uint64_t bytes, double *copy_gbs, double *read_gbs)
{
    size_t sz;
    if (bn_u64_to_size(bytes, &sz) || sz < 16) return bn_fail(BITNET_E_INVALID, "bandwidth: bad size %llu", (unsigned long long)bytes);
    size_t n4 = sz / 16;
    sz = n4 * 16;
    cl_kernel kc, kr;
    bitnet_status st = bn_ocl_kernel(o, "scale", "copy4", "-DSCALE_PER_ITEM=4", &kc);
    if (st == BITNET_OK) st = bn_ocl_kernel(o, "scale", "read4", "-DSCALE_PER_ITEM=4", &kr);
    if (st != BITNET_OK) return st;
    size_t wg = bn_ocl_kernel_wg(o, kc);
    if (bn_ocl_kernel_wg(o, kr) < wg) wg = bn_ocl_kernel_wg(o, kr);
    if (wg > 256) wg = 256;
    size_t global = grid(o, n4, wg);
    cl_mem a = NULL, b = NULL, sums = NULL;
    st = bn_ocl_alloc(o, sz, &a);
    if (st == BITNET_OK) st = bn_ocl_alloc(o, sz, &b);
    if (st == BITNET_OK) st = bn_ocl_alloc(o, global * sizeof(float), &sums);
    if (st == BITNET_OK) {
        const float one = 1.0f;
        cl_int err = clEnqueueFillBuffer(o->queue, a, &one, sizeof one, 0, sz, 0, NULL, NULL);
        if (err != CL_SUCCESS) st = bn_cl_fail(err, "clEnqueueFillBuffer(queue, buf, 1.0f, ...)", __FILE__, __LINE__);
    }
    cl_ulong cn = n4;
    double ms = 0;
    if (st == BITNET_OK) st = bn_ocl_args(o, kc, 3, sizeof a, &a, sizeof b, &b, sizeof cn, &cn);
    if (st == BITNET_OK) st = best_kernel_ms(o, kc, global, wg, &ms);
    if (st == BITNET_OK && ms > 0) *copy_gbs = 2.0 * (double)sz / (ms * 1e6);
    if (st == BITNET_OK) st = bn_ocl_args(o, kr, 3, sizeof a, &a, sizeof sums, &sums, sizeof cn, &cn);
    if (st == BITNET_OK) st = best_kernel_ms(o, kr, global, wg, &ms);
    if (st == BITNET_OK && ms > 0) *read_gbs = (double)sz / (ms * 1e6);
    bn_ocl_release(o, a);
    bn_ocl_release(o, b);
    bn_ocl_release(o, sums);
    return st;
}

/* Best-of-RUNS blocking write and read of host <-> m. */
static bitnet_status time_transfers(bn_ocl *o, cl_mem m, void *host, size_t sz, double *h2d_ms, double *d2h_ms)
{
    *h2d_ms = *d2h_ms = 0;
    for (int r = 0; r < RUNS + 1; r++) {
        double t0 = bn_now_ms();
        cl_int err = clEnqueueWriteBuffer(o->queue, m, CL_TRUE, 0, sz, host, 0, NULL, NULL);
        double t1 = bn_now_ms();
        if (err == CL_SUCCESS) err = clEnqueueReadBuffer(o->queue, m, CL_TRUE, 0, sz, host, 0, NULL, NULL);
        double t2 = bn_now_ms();
        if (err != CL_SUCCESS) return bn_cl_fail(err, "clEnqueueWriteBuffer/clEnqueueReadBuffer(queue, buf, CL_TRUE, ...)", __FILE__, __LINE__);
        if (r == 0) continue;
        if (*h2d_ms == 0 || t1 - t0 < *h2d_ms) *h2d_ms = t1 - t0;
        if (*d2h_ms == 0 || t2 - t1 < *d2h_ms) *d2h_ms = t2 - t1;
    }
    return BITNET_OK;
}

bitnet_status bn_ocl_transfer_rate(bn_ocl *o, uint64_t bytes, int pinned, double *h2d_gbs, double *d2h_gbs)
{
    *h2d_gbs = *d2h_gbs = 0;
    size_t sz;
    if (bn_u64_to_size(bytes, &sz) || sz == 0) return bn_fail(BITNET_E_INVALID, "transfer rate: bad size %llu", (unsigned long long)bytes);
    cl_mem dev = NULL, staging = NULL;
    void *host = NULL;
    bitnet_status st = bn_ocl_alloc(o, sz, &dev);
    if (st != BITNET_OK) return st;
    if (pinned) {
        cl_int err;
        staging = clCreateBuffer(o->ctx, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE, sz, NULL, &err);
        if (!staging) st = bn_cl_fail(err, "clCreateBuffer(ctx, CL_MEM_ALLOC_HOST_PTR, size, NULL, &err)", __FILE__, __LINE__);
        if (st == BITNET_OK) {
            host = clEnqueueMapBuffer(o->queue, staging, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, sz, 0, NULL, NULL, &err);
            if (!host) st = bn_cl_fail(err, "clEnqueueMapBuffer(queue, pinned, CL_TRUE, ...)", __FILE__, __LINE__);
        }
    } else {
        host = malloc(sz);
        if (!host) st = bn_fail(BITNET_E_NOMEM, "transfer rate: cannot allocate %zu host bytes", sz);
    }
    double h2d = 0, d2h = 0;
    if (st == BITNET_OK) {
        memset(host, 1, sz);
        st = time_transfers(o, dev, host, sz, &h2d, &d2h);
    }
    if (st == BITNET_OK) {
        if (h2d > 0) *h2d_gbs = (double)sz / (h2d * 1e6);
        if (d2h > 0) *d2h_gbs = (double)sz / (d2h * 1e6);
    }
    if (pinned) {
        if (host) clEnqueueUnmapMemObject(o->queue, staging, host, 0, NULL, NULL);
        if (staging) {
            clFinish(o->queue);
            clReleaseMemObject(staging);
        }
    } else {
        free(host);
    }
    bn_ocl_release(o, dev);
    return st;
}
