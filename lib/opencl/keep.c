/*
 * keep.c - device-resident weights: a table of {host pointer, bytes, cl_mem}
 * per OpenCL context, a search tree (POSIX tsearch) by host address.  A
 * weight operand that starts at a kept pointer and fits its kept range is
 * read from the device copy instead of being uploaded again (bn_ocl_in).
 * Kept buffers are exact allocations, not pooled: they live until forgotten
 * or the context goes.  (A sorted array made keeping and forgetting O(n)
 * each: a bench row keeping 65536 tiny weight sets spent 40% of its 15 s in
 * memmove; what is left is the driver's cost of one upload and wait each.)
 */
#include "ocl_impl.h"

#include <search.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int cmp_host(const void *a, const void *b)
{
    const uintptr_t x = (uintptr_t)((const bn_ocl_kept *)a)->host, y = (uintptr_t)((const bn_ocl_kept *)b)->host;
    return (x > y) - (x < y);
}

/* The entry kept for host, or NULL. */
static bn_ocl_kept *find(const bn_ocl *o, const void *host)
{
    const bn_ocl_kept key = {host, 0, NULL};
    void *const *node = tfind(&key, &o->kept, cmp_host);
    return node ? *(bn_ocl_kept **)node : NULL;
}

void bn_ocl_forget(void *ctx, const void *host)
{
    bn_ocl *o = ctx;
    bn_ocl_kept *e = o && host ? find(o, host) : NULL;
    if (!e) return;
    clReleaseMemObject(e->m);
    o->kept_bytes -= e->bytes;
    tdelete(e, &o->kept, cmp_host);
    free(e);
}

bitnet_status bn_ocl_keep(void *ctx, const void *host, size_t bytes)
{
    bn_ocl *o = ctx;
    /* keeping again means the memory changed: the old copy goes whatever happens */
    bn_ocl_forget(o, host);
    if (bn_test_fail("alloc"))
        return bn_cl_fail_test(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer(ctx, CL_MEM_READ_ONLY, size, ...)",
                               __FILE__, __LINE__);
    if (o->caps.max_alloc && bytes > o->caps.max_alloc)
        return bn_fail(BITNET_E_DEVICE_MEMORY,
                       "keeping %zu bytes: more than CL_DEVICE_MAX_MEM_ALLOC_SIZE (%llu) of %s", bytes,
                       (unsigned long long)o->caps.max_alloc, o->caps.name);
    bn_ocl_kept *e = malloc(sizeof *e); /* first, so that nothing fails after the upload */
    if (!e) return bn_fail(BITNET_E_NOMEM, "opencl: out of memory (kept weights table)");
    cl_int err;
    cl_mem m = clCreateBuffer(o->ctx, CL_MEM_READ_ONLY, bytes, NULL, &err);
    if (!m && err == CL_MEM_OBJECT_ALLOCATION_FAILURE) { /* idle pooled buffers may hold the room */
        bn_ocl_pool_trim(o);
        m = clCreateBuffer(o->ctx, CL_MEM_READ_ONLY, bytes, NULL, &err);
    }
    if (!m) {
        free(e);
        return bn_cl_fail(err, "clCreateBuffer(ctx, CL_MEM_READ_ONLY, size, NULL, &err)", __FILE__, __LINE__);
    }
    bitnet_status st = bn_ocl_upload(o, m, 0, host, bytes);
    if (st == BITNET_OK) st = bn_ocl_finish(o); /* done (and booked) when keep returns */
    *e = (bn_ocl_kept){host, bytes, m};
    if (st == BITNET_OK && !tsearch(e, &o->kept, cmp_host))
        st = bn_fail(BITNET_E_NOMEM, "opencl: out of memory (kept weights table)");
    if (st != BITNET_OK) {
        clReleaseMemObject(m);
        free(e);
        return st;
    }
    o->kept_bytes += bytes;
    bn_ocl_note_peak(o);
    return BITNET_OK;
}

uint64_t bn_ocl_kept_bytes(const bn_ocl *o) { return o ? o->kept_bytes : 0; }

cl_mem bn_ocl_kept_find(const bn_ocl *o, const void *host, size_t bytes)
{
    const bn_ocl_kept *e = find(o, host);
    return e && bytes <= e->bytes ? e->m : NULL;
}

static void release_kept(void *p)
{
    clReleaseMemObject(((bn_ocl_kept *)p)->m);
    free(p);
}

void bn_ocl_keep_free(bn_ocl *o)
{
    tdestroy(o->kept, release_kept);
    o->kept = NULL;
    o->kept_bytes = 0;
}
