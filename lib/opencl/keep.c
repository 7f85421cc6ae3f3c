/*
 * keep.c - device-resident weights: a table of {host pointer, bytes, cl_mem}
 * per OpenCL context, sorted by host address.  A weight operand that starts at
 * a kept pointer and fits its kept range is read from the device copy instead
 * of being uploaded again (bn_ocl_in).  Kept buffers are exact
 * allocations, not pooled: they live until forgotten or the context goes.
 */
#include "ocl_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The first entry whose host address is >= host (nkept if none). */
static size_t lower_bound(const bn_ocl *o, const void *host)
{
    const uintptr_t key = (uintptr_t)host;
    size_t lo = 0, hi = o->nkept;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)o->kept[mid].host < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The entry kept for host, or NULL. */
static bn_ocl_kept *find(const bn_ocl *o, const void *host)
{
    const size_t i = lower_bound(o, host);
    return i < o->nkept && o->kept[i].host == host ? &o->kept[i] : NULL;
}

void bn_ocl_forget(void *ctx, const void *host)
{
    bn_ocl *o = ctx;
    bn_ocl_kept *e = o && host ? find(o, host) : NULL;
    if (!e) return;
    const size_t i = (size_t)(e - o->kept);
    clReleaseMemObject(e->m);
    o->kept_bytes -= e->bytes;
    memmove(&o->kept[i], &o->kept[i + 1], (o->nkept - i - 1) * sizeof o->kept[0]);
    o->nkept--;
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
    if (o->nkept == o->capkept) { /* room first, so that nothing fails after the upload */
        const size_t cap = o->capkept ? o->capkept * 2 : 16;
        bn_ocl_kept *a = realloc(o->kept, cap * sizeof *a);
        if (!a) return bn_fail(BITNET_E_NOMEM, "opencl: out of memory (kept weights table)");
        o->kept = a;
        o->capkept = cap;
    }
    cl_int err;
    cl_mem m = clCreateBuffer(o->ctx, CL_MEM_READ_ONLY, bytes, NULL, &err);
    if (!m && err == CL_MEM_OBJECT_ALLOCATION_FAILURE) { /* idle pooled buffers may hold the room */
        bn_ocl_pool_trim(o);
        m = clCreateBuffer(o->ctx, CL_MEM_READ_ONLY, bytes, NULL, &err);
    }
    if (!m) return bn_cl_fail(err, "clCreateBuffer(ctx, CL_MEM_READ_ONLY, size, NULL, &err)", __FILE__, __LINE__);
    bitnet_status st = bn_ocl_upload(o, m, 0, host, bytes);
    if (st == BITNET_OK) st = bn_ocl_finish(o); /* done (and booked) when keep returns */
    if (st != BITNET_OK) {
        clReleaseMemObject(m);
        return st;
    }
    const size_t i = lower_bound(o, host);
    memmove(&o->kept[i + 1], &o->kept[i], (o->nkept - i) * sizeof o->kept[0]);
    o->kept[i].host = host;
    o->kept[i].bytes = bytes;
    o->kept[i].m = m;
    o->nkept++;
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

void bn_ocl_keep_free(bn_ocl *o)
{
    for (size_t i = 0; i < o->nkept; i++) clReleaseMemObject(o->kept[i].m);
    free(o->kept);
    o->kept = NULL;
    o->nkept = o->capkept = 0;
    o->kept_bytes = 0;
}
