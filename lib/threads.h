/*
 * threads.h - the thread pool (pthreads), a helper beneath both backends:
 * the CPU backend's kernels and the OpenCL backend's staging copies.
 * fn(arg, begin, end) is called over [0, n) split into contiguous ranges of
 * at least `grain` items; runs inline when one thread suffices.  Returns
 * after all ranges are done.
 */
#ifndef BITNET_THREADS_H
#define BITNET_THREADS_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

typedef struct bn_pool bn_pool;
typedef void (*bn_range_fn)(void *arg, uint64_t begin, uint64_t end);
bitnet_status bn_pool_create(bn_pool **p, int threads);
void bn_pool_free(bn_pool *p);
int bn_pool_threads(const bn_pool *p);
void bn_parallel_for(bn_pool *p, uint64_t n, uint64_t grain, bn_range_fn fn, void *arg);
/* The same section begun and ended apart: bn_parallel_begin hands every
 * range to the pool's workers and returns at once, so that the caller can
 * do other work (enqueue a device's commands) meanwhile; bn_parallel_end
 * runs the ranges no worker has taken yet and returns when all are done.
 * Where the pool cannot take the section (see bn_parallel_for) begin runs
 * it inline and end does nothing.  Between the two the pool is busy: the
 * caller's own bn_parallel_for on it runs inline, and every begin must be
 * ended, by the thread that began it, before the pool is freed. */
typedef struct {
    bn_pool *pool; /* NULL: nothing left to end */
    uint64_t chunks;
} bn_section;
void bn_parallel_begin(bn_pool *p, bn_section *s, uint64_t n, uint64_t grain, bn_range_fn fn, void *arg);
void bn_parallel_end(bn_section *s);
/* memcpy of n bytes split over the pool's threads (p NULL, or fewer than
 * BN_PARALLEL_COPY_MIN bytes: on the calling thread). */
#define BN_PARALLEL_COPY_MIN ((size_t)256 << 10)
void bn_parallel_memcpy(bn_pool *p, void *dst, const void *src, size_t n);

#endif
