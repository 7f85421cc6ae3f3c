/*
 * probe.h - what the stand-alone GPU-machine probes of tests/device/
 * (latency.c, int8_input.c, mma_peak.c) share: a wall clock, the median of
 * a sample, and CK, which exits with the call and line of a failed OpenCL
 * call.  Not part of the library or its tests.
 */
#ifndef BITNET_PROBE_H
#define BITNET_PROBE_H

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

#endif
