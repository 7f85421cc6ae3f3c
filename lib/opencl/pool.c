/*
 * pool.c - pooled device buffers.
 *
 * Sizes are rounded up to a size class (powers of two up to 64 KiB, then
 * steps of 1/8 of the power of two below: at most 12.5% slack) so that a
 * released buffer serves later requests of nearby sizes.  Idle buffers are
 * kept up to a cap (a quarter of device memory, at most 1 GiB), oldest
 * released first when over it.
 *
 * Buffers handed out are found again by handle in a search tree (POSIX
 * tsearch): a bench row that keeps 262144 tiny buffers on the device spent
 * three quarters of its 30 s in the linear scan an array needed on release.
 */
#include "ocl_impl.h"

#include <search.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int cmp_mem(const void *a, const void *b)
{
    const uintptr_t x = (uintptr_t)((const bn_ocl_buf *)a)->m, y = (uintptr_t)((const bn_ocl_buf *)b)->m;
    return (x > y) - (x < y);
}

static size_t size_class(size_t bytes, size_t max_alloc)
{
    if (bytes <= 256) return 256;
    size_t p = 1;
    while (p < bytes && p <= SIZE_MAX / 2) p <<= 1;
    size_t c;
    if (p <= 65536) {
        c = p;
    } else {
        size_t step = p / 16; /* p/2 < bytes <= p: steps of (p/2)/8 */
        c = (bytes + step - 1) / step * step;
    }
    if (max_alloc && c > max_alloc) c = bytes;
    return c;
}

static size_t idle_cap(const bn_ocl *o)
{
    cl_ulong cap = o->caps.global_mem / 4;
    if (cap > (1ull << 30) || cap == 0) cap = 1ull << 30;
    return (size_t)cap;
}

static int push(bn_ocl_buf **arr, size_t *n, size_t *cap, cl_mem m, size_t size)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        bn_ocl_buf *a = realloc(*arr, c * sizeof *a);
        if (!a) return -1;
        *arr = a;
        *cap = c;
    }
    (*arr)[*n].m = m;
    (*arr)[*n].size = size;
    (*n)++;
    return 0;
}

static void drop_idle(bn_ocl *o, size_t i)
{
    o->idle_bytes -= o->idle[i].size;
    clReleaseMemObject(o->idle[i].m);
    memmove(&o->idle[i], &o->idle[i + 1], (o->nidle - i - 1) * sizeof o->idle[0]);
    o->nidle--;
}

void bn_ocl_pool_trim(bn_ocl *o)
{
    while (o->nidle) drop_idle(o, o->nidle - 1);
}

bitnet_status bn_ocl_alloc(bn_ocl *o, size_t bytes, cl_mem *m)
{
    *m = NULL;
    if (bn_test_fail("alloc"))
        return bn_cl_fail_test(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer(ctx, CL_MEM_READ_WRITE, size, ...)",
                               __FILE__, __LINE__);
    if (bytes == 0) bytes = 1;
    if (o->caps.max_alloc && bytes > o->caps.max_alloc)
        return bn_fail(BITNET_E_DEVICE_MEMORY, "a buffer of %zu bytes exceeds CL_DEVICE_MAX_MEM_ALLOC_SIZE (%llu) of %s",
                       bytes, (unsigned long long)o->caps.max_alloc, o->caps.name);
    size_t cls = size_class(bytes, o->caps.max_alloc);
    bn_ocl_buf *node = malloc(sizeof *node); /* first: a failure later would leak the buffer */
    if (!node) return bn_fail(BITNET_E_NOMEM, "opencl: out of memory");
    o->pstats.allocs++;
    cl_mem got = NULL;
    for (size_t i = o->nidle; i-- > 0;)
        if (o->idle[i].size == cls) {
            got = o->idle[i].m;
            o->idle_bytes -= cls;
            memmove(&o->idle[i], &o->idle[i + 1], (o->nidle - i - 1) * sizeof o->idle[0]);
            o->nidle--;
            o->pstats.hits++;
            break;
        }
    if (!got) {
        cl_int err;
        got = clCreateBuffer(o->ctx, CL_MEM_READ_WRITE, cls, NULL, &err);
        if (!got && err == CL_MEM_OBJECT_ALLOCATION_FAILURE && o->nidle) {
            bn_ocl_pool_trim(o);
            got = clCreateBuffer(o->ctx, CL_MEM_READ_WRITE, cls, NULL, &err);
        }
        if (!got) {
            o->pstats.allocs--;
            free(node);
            return bn_cl_fail(err, "clCreateBuffer(ctx, CL_MEM_READ_WRITE, size, NULL, &err)", __FILE__, __LINE__);
        }
        o->pstats.misses++;
    }
    *node = (bn_ocl_buf){got, cls};
    if (!tsearch(node, &o->used, cmp_mem)) { /* the tree's own node could not be allocated */
        o->pstats.allocs--;
        clReleaseMemObject(got);
        free(node);
        return bn_fail(BITNET_E_NOMEM, "opencl: out of memory");
    }
    o->pstats.bytes_in_use += cls;
    if (o->pstats.bytes_in_use > o->pstats.peak_bytes) o->pstats.peak_bytes = o->pstats.bytes_in_use;
    bn_ocl_note_peak(o);
    *m = got;
    return BITNET_OK;
}

void bn_ocl_release(bn_ocl *o, cl_mem m)
{
    if (!o || !m) return;
    const bn_ocl_buf key = {m, 0};
    void *found = tfind(&key, &o->used, cmp_mem);
    if (!found) {
        clReleaseMemObject(m); /* not from the pool */
        return;
    }
    bn_ocl_buf *node = *(bn_ocl_buf **)found;
    const size_t size = node->size;
    tdelete(node, &o->used, cmp_mem);
    free(node);
    o->pstats.releases++;
    o->pstats.bytes_in_use -= size;
    if (size > idle_cap(o) || push(&o->idle, &o->nidle, &o->capidle, m, size) != 0) {
        clReleaseMemObject(m);
        return;
    }
    o->idle_bytes += size;
    while (o->idle_bytes > idle_cap(o) && o->nidle) drop_idle(o, 0);
}

void bn_ocl_note_peak(bn_ocl *o)
{
    const uint64_t now = o->pstats.bytes_in_use + o->idle_bytes + o->kept_bytes;
    if (now > o->device_peak) o->device_peak = now;
}

void bn_ocl_pool_stats(const bn_ocl *o, bitnet_pool_stats *out)
{
    *out = o->pstats;
    out->idle_bytes = o->idle_bytes;
    out->kept_bytes = o->kept_bytes;
    out->device_peak_bytes = o->device_peak;
}

static void release_node(void *p)
{
    clReleaseMemObject(((bn_ocl_buf *)p)->m);
    free(p);
}

void bn_ocl_pool_free(bn_ocl *o)
{
    bn_ocl_pool_trim(o);
    tdestroy(o->used, release_node);
    free(o->idle);
    o->used = NULL;
    o->idle = NULL;
    o->nidle = o->capidle = 0;
}

