/*
 * operand.c - op operands as device memory (see ocl.h), the device-memory
 * members of the OpenCL table (bitnet_buffer), and the failure flags of
 * enqueued ops that the next wait reads.
 */
#include "ocl_impl.h"

#include "../devmem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

enum { ARG_NONE, ARG_DEV, ARG_SUB, ARG_COPY, ARG_KEPT, ARG_HOST, ARG_SCRATCH };

static bitnet_status pooled(bn_ocl *o, size_t bytes, cl_mem *m)
{
    if (o->caps.max_alloc && bytes > o->caps.max_alloc)
        return bn_fail(BITNET_E_DEVICE_MEMORY, "opencl: a buffer of %zu bytes exceeds the largest allocation (%llu) of %s",
                       bytes, (unsigned long long)o->caps.max_alloc, o->caps.name);
    return bn_ocl_alloc(o, bytes ? bytes : 4, m);
}

/* A device address: the whole buffer, a sub-buffer, or a pooled copy. */
static bitnet_status resident(bn_ocl *o, const bn_devref *r, size_t bytes, int out, bn_ocl_arg *a)
{
    if (r->owner != (void *)o) return bn_fail(BITNET_E_INVALID, "opencl: a device buffer of another backend");
    a->base = (cl_mem)r->handle;
    a->off = r->offset;
    if (r->offset == 0) {
        a->kind = ARG_DEV;
        a->m = a->base;
        return BITNET_OK;
    }
    if (o->caps.base_align && r->offset % o->caps.base_align == 0) {
        cl_buffer_region reg = {r->offset, bytes ? bytes : 1};
        cl_int err;
        cl_mem sub = clCreateSubBuffer(a->base, 0, CL_BUFFER_CREATE_TYPE_REGION, &reg, &err);
        if (sub) {
            a->kind = ARG_SUB;
            a->m = sub;
            return BITNET_OK;
        }
    }
    bitnet_status st = pooled(o, bytes, &a->m);
    if (st != BITNET_OK) return st;
    a->kind = ARG_COPY;
    if (!out && bytes) {
        cl_int err = clEnqueueCopyBuffer(o->queue, a->base, a->m, a->off, 0, bytes, 0, NULL, NULL);
        if (err != CL_SUCCESS) {
            bn_ocl_release(o, a->m);
            a->kind = ARG_NONE;
            return bn_cl_fail(err, "clEnqueueCopyBuffer(queue, buffer, copy, offset, 0, size, ...)", __FILE__, __LINE__);
        }
    }
    return BITNET_OK;
}

bitnet_status bn_ocl_in(bn_ocl *o, const void *p, size_t bytes, bn_ocl_arg *a)
{
    memset(a, 0, sizeof *a);
    a->bytes = bytes;
    bn_devref r;
    if (p && bn_devmem_find(p, &r)) return resident(o, &r, bytes, 0, a);
    cl_mem kept = p ? bn_ocl_kept_find(o, p, bytes) : NULL;
    if (kept) {
        a->kind = ARG_KEPT;
        a->m = kept;
        return BITNET_OK;
    }
    bitnet_status st = pooled(o, bytes, &a->m);
    if (st != BITNET_OK) return st;
    a->kind = ARG_HOST;
    if (p && bytes && (st = bn_ocl_upload(o, a->m, 0, p, bytes)) != BITNET_OK) {
        bn_ocl_release(o, a->m);
        memset(a, 0, sizeof *a);
    }
    return st;
}

int bn_ocl_is_host(const bn_ocl *o, const void *p, size_t bytes)
{
    return p && !bn_is_device_ptr(p) && !bn_ocl_kept_find(o, p, bytes);
}

bitnet_status bn_ocl_out(bn_ocl *o, void *p, size_t bytes, bn_ocl_arg *a)
{
    memset(a, 0, sizeof *a);
    a->bytes = bytes;
    a->out = 1;
    bn_devref r;
    if (p && bn_devmem_find(p, &r)) return resident(o, &r, bytes, 1, a);
    bitnet_status st = pooled(o, bytes, &a->m);
    if (st != BITNET_OK) return st;
    a->kind = ARG_HOST;
    a->host = p;
    return BITNET_OK;
}

bitnet_status bn_ocl_scratch(bn_ocl *o, size_t bytes, bn_ocl_arg *a)
{
    memset(a, 0, sizeof *a);
    a->bytes = bytes;
    bitnet_status st = pooled(o, bytes, &a->m);
    if (st == BITNET_OK) a->kind = ARG_SCRATCH;
    return st;
}

void bn_ocl_borrow(cl_mem m, size_t bytes, bn_ocl_arg *a)
{
    memset(a, 0, sizeof *a);
    a->bytes = bytes;
    a->kind = ARG_DEV;
    a->m = a->base = m;
}

int bn_ocl_resident(const bn_ocl_arg *a) { return a->kind == ARG_DEV || a->kind == ARG_SUB || a->kind == ARG_COPY; }
int bn_ocl_in_place(const bn_ocl_arg *a) { return a->kind == ARG_DEV || a->kind == ARG_SUB; }

bitnet_status bn_ocl_done(bn_ocl *o, bn_ocl_arg *a, bitnet_status st)
{
    if (a->out && st == BITNET_OK && a->bytes) {
        if (a->kind == ARG_COPY) {
            cl_int err = clEnqueueCopyBuffer(o->queue, a->m, a->base, 0, a->off, a->bytes, 0, NULL, NULL);
            if (err != CL_SUCCESS)
                st = bn_cl_fail(err, "clEnqueueCopyBuffer(queue, copy, buffer, 0, offset, size, ...)", __FILE__, __LINE__);
        } else if (a->kind == ARG_HOST && a->host) {
            st = bn_ocl_download(o, a->m, 0, a->host, a->bytes);
        }
    }
    switch (a->kind) {
    case ARG_SUB: clReleaseMemObject(a->m); break;
    case ARG_COPY: case ARG_HOST: case ARG_SCRATCH: bn_ocl_release(o, a->m); break;
    default: break;
    }
    memset(a, 0, sizeof *a);
    return st;
}

bitnet_status bn_ocl_fill0(bn_ocl *o, cl_mem m, size_t bytes)
{
    const cl_uint zero = 0;
    cl_int err = clEnqueueFillBuffer(o->queue, m, &zero, sizeof zero, 0, (bytes + 3) / 4 * 4, 0, NULL, NULL);
    if (err != CL_SUCCESS) return bn_cl_fail(err, "clEnqueueFillBuffer(queue, buf, &zero, 4, 0, size, ...)", __FILE__, __LINE__);
    return BITNET_OK;
}

/* ---- failure flags read at the next wait ---------------------------------------- */

/* Slot i of the status buffer, or -1. */
static int slot_of(const bn_ocl *o, cl_mem m)
{
    for (int i = 0; m && i < BN_OCL_SLOTS; i++)
        if (o->slot[i] == m) return i;
    return -1;
}

/* The status buffer, made at the first flag: slots of at least 1 KiB (256
 * flags), aligned as sub-buffers must be.  16 KiB and more of device memory
 * for the backend's life, not counted in the pool's figures.
 * Before it each deferred flag was a pooled buffer of its own, read by a
 * command of its own at the wait (2-3.5 us each on an H100).  H100,
 * 2026-11-28, three alternating rounds, end-to-end medians in us, before /
 * after: the ffn block of bitnet-bench (two BitLinear input checks a call)
 * 4096x14336 at 1 token 79.9-96.9 / 66.4-82.2, at 8 tokens 97-122 /
 * 90-111; one resident BitLinear (one check) 16384x16384 67.2-68.3 /
 * 64.9-67.3, 4096x14336 45.8-47.0 / 39.1-44.8. */
static int status_ready(bn_ocl *o)
{
    if (o->status) return 1;
    if (o->status_failed) return 0;
    cl_uint bits = 0;
    size_t sb = 1024;
    cl_int err = clGetDeviceInfo(o->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL);
    if (err == CL_SUCCESS && bits / 8 > sb) sb = (size_t)bits / 8;
    o->status = err == CL_SUCCESS ? clCreateBuffer(o->ctx, CL_MEM_READ_WRITE, BN_OCL_SLOTS * sb, NULL, &err) : NULL;
    if (!o->status) {
        o->status_failed = 1; /* pooled flags, as before */
        return 0;
    }
    o->slot_bytes = sb;
    return 1;
}

bitnet_status bn_ocl_flag_get(bn_ocl *o, size_t n, cl_mem *flag)
{
    *flag = NULL;
    if (n && n <= 256 && !bn_test_fail("alloc") && status_ready(o)) {
        for (int i = 0; i < BN_OCL_SLOTS; i++) {
            if (o->slot_used & (1u << i)) continue;
            if (!o->slot[i]) {
                const cl_buffer_region r = {(size_t)i * o->slot_bytes, o->slot_bytes};
                cl_int err;
                o->slot[i] = clCreateSubBuffer(o->status, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
                if (!o->slot[i]) break; /* a pooled flag instead */
            }
            o->slot_used |= 1u << i;
            *flag = o->slot[i];
            return BITNET_OK;
        }
    }
    return pooled(o, n * sizeof(cl_uint), flag);
}

void bn_ocl_flag_put(bn_ocl *o, cl_mem flag)
{
    const int i = slot_of(o, flag);
    if (i >= 0) o->slot_used &= ~(1u << i);
    else bn_ocl_release(o, flag);
}

bitnet_status bn_ocl_defer_check(bn_ocl *o, cl_mem flag, const char *what)
{
    return bn_ocl_defer_check_n(o, flag, 1, what);
}

bitnet_status bn_ocl_defer_check_n(bn_ocl *o, cl_mem flag, size_t n, const char *what)
{
    if (o->nchecks == o->capchecks) {
        const size_t cap = o->capchecks ? o->capchecks * 2 : 8;
        bn_ocl_check *c = realloc(o->checks, cap * sizeof *c);
        if (!c) return bn_fail(BITNET_E_NOMEM, "opencl: out of memory (checks)");
        o->checks = c;
        o->capchecks = cap;
    }
    bn_ocl_check *c = &o->checks[o->nchecks++];
    c->flag = flag;
    c->n = n;
    snprintf(c->what, sizeof c->what, "%s", what);
    return BITNET_OK;
}

/* The flags' reads, enqueued behind the ops before the wait of a read or a
 * sync, so that one wait brings the data and the flags (a second blocking
 * read cost another round trip to the device).  The flags in slots of the
 * status buffer come in one read (the slots up to the last one checked);
 * every other flag in a read of its own, after them. */
typedef struct {
    const cl_uint *v; /* the slots' read, then every other check's flags (pinned staging memory) */
    size_t slots;     /* uints of the slots' read */
    int big;          /* too many for staging: read one by one after the wait */
    bitnet_status st;
} check_reads;

static void checks_enqueue(bn_ocl *o, check_reads *r)
{
    r->v = NULL;
    r->slots = 0;
    r->big = 0;
    r->st = BITNET_OK;
    if (!o->nchecks) return;
    cl_mem *m = calloc(o->nchecks + 1, sizeof *m);
    size_t *bytes = calloc(o->nchecks + 1, sizeof *bytes), total = 0, nm = 1;
    if (!m || !bytes) {
        r->st = bn_fail(BITNET_E_NOMEM, "opencl: out of memory (checks)");
    } else {
        int last = -1;
        for (size_t i = 0; i < o->nchecks; i++) {
            const int k = slot_of(o, o->checks[i].flag);
            if (k > last) last = k;
            if (k >= 0) continue;
            m[nm] = o->checks[i].flag;
            bytes[nm] = o->checks[i].n * sizeof(cl_uint);
            total += bytes[nm++];
        }
        if (last >= 0) {
            m[0] = o->status;
            bytes[0] = (size_t)(last + 1) * o->slot_bytes;
            total += bytes[0];
            r->slots = bytes[0] / sizeof(cl_uint);
        }
        const void *v = NULL;
        if (total <= (8u << 20)) r->st = bn_ocl_read_staged(o, nm, m, bytes, &v);
        else r->big = 1; /* more flags than one staging buffer: read after the wait */
        r->v = v;
    }
    free(m);
    free(bytes);
}

/* After the wait (waited: the queue is idle up to the reads): the first flag
 * set is the error; every flag goes back (slots free again, others to the
 * pool). */
static bitnet_status checks_finish(bn_ocl *o, check_reads *r, int waited)
{
    bitnet_status st = r->st;
    if (!waited && r->v) clFinish(o->queue); /* the reads must land before the staging buffer is reused */
    const cl_uint *at = r->v ? r->v + r->slots : NULL;
    for (size_t i = 0; i < o->nchecks; i++) {
        const size_t n = o->checks[i].n;
        const int k = slot_of(o, o->checks[i].flag);
        cl_uint *own = NULL;
        if (r->big && st == BITNET_OK && waited) { /* blocking, one check at a time */
            if (!(own = calloc(n, sizeof *own))) st = bn_fail(BITNET_E_NOMEM, "opencl: out of memory (checks)");
            cl_int err = own ? clEnqueueReadBuffer(o->queue, o->checks[i].flag, CL_TRUE, 0, n * sizeof *own, own, 0,
                                                   NULL, NULL)
                             : CL_SUCCESS;
            if (err != CL_SUCCESS)
                st = bn_cl_fail(err, "clEnqueueReadBuffer(queue, flag, CL_TRUE, ...)", __FILE__, __LINE__);
        }
        const cl_uint *v = own ? own : k >= 0 && r->v ? r->v + (size_t)k * (o->slot_bytes / sizeof(cl_uint)) : at;
        for (size_t j = 0; st == BITNET_OK && waited && v && j < n; j++)
            if (v[j]) st = bn_fail(BITNET_E_NUMERIC, "%s (found after the op was enqueued)", o->checks[i].what);
        free(own);
        if (at && k < 0) at += n;
        bn_ocl_flag_put(o, o->checks[i].flag);
    }
    o->nchecks = 0;
    bn_ocl_staged_release(o, r->v);
    r->v = NULL;
    return st;
}

void bn_ocl_checks_free(bn_ocl *o)
{
    free(o->checks);
    o->checks = NULL;
    o->nchecks = o->capchecks = 0;
    for (int i = 0; i < BN_OCL_SLOTS; i++)
        if (o->slot[i]) clReleaseMemObject(o->slot[i]);
    if (o->status) clReleaseMemObject(o->status);
    memset(o->slot, 0, sizeof o->slot);
    o->status = NULL;
    o->slot_used = 0;
}

/* ---- bitnet_buffer ------------------------------------------------------------ */

bitnet_status bn_ocl_buffer_alloc(void *ctx, size_t bytes, void **handle)
{
    bn_ocl *o = ctx;
    cl_mem m = NULL;
    bitnet_status st = pooled(o, bytes, &m);
    *handle = m;
    return st;
}

void bn_ocl_buffer_free(void *ctx, void *handle) { bn_ocl_release(ctx, (cl_mem)handle); }

bitnet_status bn_ocl_buffer_write(void *ctx, void *handle, size_t offset, const void *src, size_t bytes)
{
    return bn_ocl_upload(ctx, (cl_mem)handle, offset, src, bytes);
}

bitnet_status bn_ocl_buffer_read(void *ctx, void *handle, size_t offset, void *dst, size_t bytes)
{
    bn_ocl *o = ctx;
    check_reads r;
    checks_enqueue(o, &r);
    /* the download waits for its last read, which the flags' reads precede */
    bitnet_status st = bn_ocl_download(o, (cl_mem)handle, offset, dst, bytes);
    bitnet_status c = checks_finish(o, &r, st == BITNET_OK);
    return st != BITNET_OK ? st : c;
}

bitnet_status bn_ocl_sync(void *ctx)
{
    bn_ocl *o = ctx;
    check_reads r;
    checks_enqueue(o, &r);
    bitnet_status st = bn_ocl_finish(o);
    bitnet_status c = checks_finish(o, &r, st == BITNET_OK);
    return st != BITNET_OK ? st : c;
}
