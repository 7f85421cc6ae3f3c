/*
 * staging.c - host<->device copies through pinned (page-locked) staging
 * memory.  An upload copies the source into a staging buffer and enqueues
 * the transfer from there, so it returns at once and the caller may reuse
 * its memory; a staging buffer is reused when its transfer is done.  A
 * download of more than one piece keeps two pieces in flight: the device
 * copies piece i+1 while the host copies piece i out of staging memory.
 * Staging buffers are created with CL_MEM_ALLOC_HOST_PTR and mapped once on
 * a second queue, so that mapping never waits for the ops.  Copies into and
 * out of staging memory run on a few threads (copy_pool): one thread's
 * memcpy was most of a 64-token call on the GPU machine's host (3.7 MB of
 * activations at about 10 GB/s, tests/device/cltrace.c).
 */
#include "ocl_impl.h"

#include "../threads.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PIN_MIN (64u << 10)
#define PIN_PIECE BN_OCL_STAGE_MAX /* a download's largest piece; an upload's largest staging copy */
#define PIN_CAP (256u << 20)   /* staging memory held at most (beyond it: wait for the oldest) */

/* A transfer of `bytes` goes in about four pieces (`least` to 8 MiB each),
 * so that the host's copy of one piece overlaps the device's of the next:
 * in one piece a 3.7 MB download waited for the whole copy down before the
 * host copied any of it out.  Each piece costs calls and a hand-off to the
 * copy threads, though: downloads take pieces of 1 MiB at least (an H200
 * machine, BitLinear 4096 x 14336 at 64 tokens, 1 MB of output, end to end
 * in two rounds: 242-253 us in one piece, 321-328 in four of 256 KiB,
 * 383-419 in eight of 128 KiB). */
#define UP_LEAST (256u << 10)
#define DOWN_LEAST (1u << 20)
static size_t piece_for(size_t bytes, size_t least)
{
    size_t p = bytes / 4;
    if (p < least) p = least;
    if (p > PIN_PIECE) p = PIN_PIECE;
    return (p + 4095) & ~(size_t)4095;
}

/* At most: a memcpy's bandwidth is reached with a few.  On an H200
 * machine's 16-core host (BitLinear through host pointers, three rounds,
 * end to end) 4, 12 and 16 threads against 8: 4096 x 14336 at 64 tokens
 * 203-221, 193-211 and 205 us against 192-198; at 512 tokens 1.3-2.1 ms,
 * 1.03-1.07 and 0.99-1.01 against 1.13-1.17; 16384 x 16384 at 64 tokens
 * 372-387, 390-401 and 387-406 against 367-373.
 * Again on an H100 machine (2026-12-05, weights kept, row scales, end to
 * end, three alternating rounds, us), 8 threads / 16 / 8 with the pool's
 * spin at 1 ms (BN_SPIN_US=1000) / 16 with it: 4096 x 14336 at 64 tokens
 * 250-414 (170-184 in a call an hour before) / 154-160 / 173-197 / 151-169;
 * 16384 x 16384 at 64 tokens 391-489 / 670-717 / 389-406 / 369-413; one
 * token within the noise.  16 threads alone doubled the larger call (its
 * copy threads fall asleep while the device works and wake slowly), and a
 * spin of 1 ms keeps up to 16 host cores busy after every call for a gain
 * the noise covers: neither kept.  A trace of the 64-token call
 * (tests/device/cltrace.c) shows the host, not the device, on the critical
 * path: 35-47 us quantizing each block of 32 tokens (1.8 MB of floats), 20
 * us of OpenCL calls enqueueing it, 13 us copying the output out.
 * Since the next block is quantized while this one is enqueued
 * (bitlinear.c, 2026-12-06) the threads have work while the device runs,
 * and 16 won over 8 on two H100 machines (driver 580.159.04, 16-core
 * hosts; three alternating rounds each of `bitnet-bench --device opencl
 * --op bitlinear --keep-weights --scale row --min-time 0.3 --no-check
 * --shape 4096x14336,14336x4096,16384x16384 --tokens 1,64,512`, end to end
 * in us, 8 / 16): 4096x14336 at 64 tokens 138.9-144.0 / 118.4-131.6 and
 * 135.1-151.0 / 120.3-125.4, at 512 657-923 / 525-636 and 770-872 /
 * 607-660; 14336x4096 at 64 210-228 / 199-227 and 213-230 / 197-198, at
 * 512 757-810 / 699-729 and 874-953 / 778-786; 16384x16384 at 64 274-284
 * / 258-287 and 271-280 / 264-271, at 512 1038-1104 / 992-1041 and
 * 1284-1472 / 1160-1179; one token level (the copies of one token go
 * without the pool). */
#define COPY_THREADS 16

/* The pool of the staging copies, made at the first large copy (NULL when
 * it cannot be made: the copies then run on the calling thread). */
static bn_pool *copy_pool(bn_ocl *o)
{
    if (!o->copy_pool && !o->copy_pool_failed) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        if (n > COPY_THREADS) n = COPY_THREADS;
        if (n < 2 || bn_pool_create(&o->copy_pool, (int)n) != BITNET_OK) {
            o->copy_pool = NULL;
            o->copy_pool_failed = 1;
        }
    }
    return o->copy_pool;
}

static void copy_in(bn_ocl *o, void *dst, const void *src, size_t n)
{
    bn_parallel_memcpy(n >= BN_PARALLEL_COPY_MIN ? copy_pool(o) : NULL, dst, src, n); /* no pool for small copies */
}

static int pin_free(bn_ocl_pin *p)
{
    if (p->held) return 0;
    if (!p->busy) return 1;
    cl_int s = CL_QUEUED;
    if (clGetEventInfo(p->busy, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, NULL) != CL_SUCCESS) s = CL_COMPLETE;
    if (s != CL_COMPLETE && s >= 0) return 0;
    clReleaseEvent(p->busy);
    p->busy = NULL;
    return 1;
}

static bitnet_status pin_new(bn_ocl *o, size_t size, size_t *out)
{
    if (o->npins == o->cappins) {
        const size_t cap = o->cappins ? o->cappins * 2 : 8;
        bn_ocl_pin *a = realloc(o->pins, cap * sizeof *a);
        if (!a) return bn_fail(BITNET_E_NOMEM, "opencl: out of memory (staging table)");
        o->pins = a;
        o->cappins = cap;
    }
    cl_int err;
    if (!o->aux && !(o->aux = clCreateCommandQueue(o->ctx, o->device, 0, &err)))
        return bn_cl_fail(err, "clCreateCommandQueue(ctx, device, 0, &err)", __FILE__, __LINE__);
    cl_mem m = clCreateBuffer(o->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, NULL, &err);
    if (!m) return bn_cl_fail(err, "clCreateBuffer(ctx, CL_MEM_ALLOC_HOST_PTR, size, NULL, &err)", __FILE__, __LINE__);
    void *ptr = clEnqueueMapBuffer(o->aux, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0, NULL, NULL, &err);
    if (!ptr) {
        clReleaseMemObject(m);
        return bn_cl_fail(err, "clEnqueueMapBuffer(aux, staging, CL_TRUE, ...)", __FILE__, __LINE__);
    }
    o->pins[o->npins] = (bn_ocl_pin){m, ptr, size, NULL, 0};
    o->pinned_bytes += size;
    *out = o->npins++;
    return BITNET_OK;
}

/* A free staging buffer of at least size bytes (size <= PIN_PIECE), other
 * than the one at index `not` (-1: any). */
static bitnet_status pin_get(bn_ocl *o, size_t size, long not, size_t *out)
{
    long best = -1;
    for (size_t i = 0; i < o->npins; i++)
        if ((long)i != not && o->pins[i].size >= size && (best < 0 || o->pins[i].size < o->pins[best].size) &&
            pin_free(&o->pins[i]))
            best = (long)i;
    if (best >= 0) {
        *out = (size_t)best;
        return BITNET_OK;
    }
    size_t want = PIN_MIN;
    while (want < size) want *= 2;
    if (o->pinned_bytes + want <= PIN_CAP) return pin_new(o, want, out);
    /* at the cap: wait for a large enough one */
    for (size_t i = 0; i < o->npins; i++)
        if ((long)i != not && o->pins[i].size >= size && !o->pins[i].held) {
            bn_ocl_pin *p = &o->pins[i];
            cl_int err = clWaitForEvents(1, &p->busy);
            clReleaseEvent(p->busy);
            p->busy = NULL;
            if (err != CL_SUCCESS) return bn_cl_fail(err, "clWaitForEvents(1, &staging)", __FILE__, __LINE__);
            *out = i;
            return BITNET_OK;
        }
    return pin_new(o, want, out); /* none that large: over the cap once */
}

void bn_ocl_staging_free(bn_ocl *o)
{
    for (size_t i = 0; i < o->npins; i++) {
        bn_ocl_pin *p = &o->pins[i];
        if (p->busy) {
            clWaitForEvents(1, &p->busy);
            clReleaseEvent(p->busy);
        }
        if (o->aux) clEnqueueUnmapMemObject(o->aux, p->m, p->ptr, 0, NULL, NULL);
    }
    if (o->aux) clFinish(o->aux);
    for (size_t i = 0; i < o->npins; i++) clReleaseMemObject(o->pins[i].m);
    free(o->pins);
    o->pins = NULL;
    o->npins = o->cappins = o->pinned_bytes = 0;
    if (o->aux) clReleaseCommandQueue(o->aux);
    o->aux = NULL;
    bn_ocl_side_free(o);
    bn_pool_free(o->copy_pool);
    o->copy_pool = NULL;
}

bn_pool *bn_ocl_host_pool(bn_ocl *o) { return copy_pool(o); }

static bitnet_status fill_copy(bn_ocl *o, void *ctx, void *dst, size_t at, size_t n)
{
    copy_in(o, dst, (const char *)ctx + at, n);
    return BITNET_OK;
}

bitnet_status bn_ocl_upload(bn_ocl *o, cl_mem m, size_t offset, const void *src, size_t bytes)
{
    return bn_ocl_upload_fill(o, m, offset, bytes, 1, fill_copy, (void *)src);
}

/* Enqueues on q (after the event `after` where not NULL) the upload of the
 * first n bytes of staging buffer pi into m at offset; the buffer is busy
 * until it is done.
 * The event tells when the staging buffer is free again.  An event costs
 * the device time (tests/device/between.c: kernels 3.5 us apart with one
 * each, 1.7 without), but a build whose writes here carried none (the
 * call's final read vouching for them) was no faster: H200, 2026-12-02,
 * one token, weights kept, three alternating rounds, end to end us,
 * without / with: 16384x16384 58.0-66.1 / 53.3-55.2, 4096x14336 36.6-49.9
 * / 36.8-46.3, 4096x4096 33.6-40.4 / 34.6-35.7. */
static bitnet_status pin_write(bn_ocl *o, size_t pi, cl_command_queue q, cl_event after, cl_mem m, size_t offset,
                               size_t n)
{
    bn_ocl_pin *p = &o->pins[pi];
    cl_event ev = NULL;
    cl_int err = clEnqueueWriteBuffer(q, m, CL_FALSE, offset, n, p->ptr, after ? 1 : 0, after ? &after : NULL, &ev);
    if (err != CL_SUCCESS)
        return bn_cl_fail(err, "clEnqueueWriteBuffer(queue, buf, CL_FALSE, offset, size, staging, ...)", __FILE__,
                          __LINE__);
    clRetainEvent(ev);
    p->busy = ev;
    return bn_ocl_pending_push(o, ev, o->op, 1, n);
}

bitnet_status bn_ocl_upload_fill(bn_ocl *o, cl_mem m, size_t offset, size_t bytes, size_t unit, bn_ocl_fill_fn fill,
                                 void *ctx)
{
    /* a fill's upload goes in one piece up to 8 MiB: it is work for the
     * threads, better handed over once (4096 x 14336 at 64 tokens, 0.9 MB
     * of host-made activations, H200 machine, two rounds with one-piece
     * downloads: 242-253 us end to end against 276-284 in four pieces) */
    size_t piece = unit > 1 ? (bytes < PIN_PIECE ? bytes : PIN_PIECE) : piece_for(bytes, UP_LEAST);
    if (unit > 1 && piece < bytes) piece = piece <= unit ? unit : piece / unit * unit;
    for (size_t at = 0; at < bytes;) {
        const size_t n = bytes - at < piece ? bytes - at : piece;
        size_t pi;
        bitnet_status st = pin_get(o, n, -1, &pi);
        if (st != BITNET_OK) return st;
        if ((st = fill(o, ctx, o->pins[pi].ptr, at, n)) != BITNET_OK) return st;
        if ((st = pin_write(o, pi, o->queue, NULL, m, offset + at, n)) != BITNET_OK) return st;
        at += n;
    }
    return BITNET_OK;
}

bitnet_status bn_ocl_stage_hold(bn_ocl *o, size_t bytes, void **host)
{
    *host = NULL;
    if (bytes == 0 || bytes > PIN_PIECE) return bn_fail(BITNET_E_INVALID, "opencl: %zu bytes to stage at once", bytes);
    size_t pi;
    bitnet_status st = pin_get(o, bytes, -1, &pi);
    if (st != BITNET_OK) return st;
    o->pins[pi].held = 1;
    *host = o->pins[pi].ptr;
    return BITNET_OK;
}

/* ---- copies beside the ops ----------------------------------------------------------
 * A call in blocks of tokens (BitLinear through host pointers) uploads each
 * block on o->upq and downloads it on o->downq, so that the device copies
 * block b + 1 in and block b - 1 out while it multiplies block b: NVIDIA's
 * driver runs a copy on a second queue beside a kernel, where one in-order
 * queue runs them in turn (tests/device/overlap.c, H200 machine: a 19 us
 * kernel and a 1 MiB pinned copy took 49-52 us on one queue, 31-34 on two).
 * The ops' queue waits for an upload with a barrier, a download waits for
 * the ops with a marker.  The buffers they copy must be the call's alone
 * while it runs (the copies are not ordered with the rest of the queue). */
/* The queue of uploads or downloads (*q, made at first use), or the ops'
 * own where the device gives no other: the copies then run in turn with
 * the ops, as they did before, and the barrier and marker change nothing. */
static cl_command_queue side_queue(bn_ocl *o, cl_command_queue *q)
{
    if (!*q && !o->side_failed) {
        cl_int err = CL_OUT_OF_RESOURCES;
        if (!bn_test_fail("side_queue"))
            *q = clCreateCommandQueue(o->ctx, o->device, o->profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
        if (!*q) o->side_failed = 1;
    }
    return *q ? *q : o->queue;
}

void bn_ocl_side_free(bn_ocl *o)
{
    o->side_failed = 0;
    cl_command_queue *qs[2] = {&o->upq, &o->downq};
    for (int i = 0; i < 2; i++)
        if (*qs[i]) {
            clFinish(*qs[i]);
            clReleaseCommandQueue(*qs[i]);
            *qs[i] = NULL;
        }
}

bitnet_status bn_ocl_staged_write_side(bn_ocl *o, void *host, cl_mem m, size_t bytes, cl_event after)
{
    size_t pi = o->npins;
    for (size_t i = 0; i < o->npins; i++)
        if (o->pins[i].ptr == host && o->pins[i].held && !o->pins[i].busy && bytes <= o->pins[i].size) pi = i;
    if (pi == o->npins) return bn_fail(BITNET_E_INVALID, "opencl: no held staging memory of %zu bytes at %p", bytes, host);
    bitnet_status st = pin_write(o, pi, side_queue(o, &o->upq), after, m, 0, bytes);
    if (st != BITNET_OK) return st;
    o->pins[pi].held = 0;
    cl_int err = clEnqueueBarrierWithWaitList(o->queue, 1, &o->pins[pi].busy, NULL);
    if (err != CL_SUCCESS)
        return bn_cl_fail(err, "clEnqueueBarrierWithWaitList(queue, 1, &upload, NULL)", __FILE__, __LINE__);
    return BITNET_OK;
}

/* bn_ocl_read_staged on queue q, each read after the event `after` where
 * not NULL. */
static bitnet_status read_staged_on(bn_ocl *o, cl_command_queue q, cl_event after, size_t n, const cl_mem *m,
                                    const size_t *bytes, const void **host)
{
    *host = NULL;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += bytes[i];
    if (!total) return BITNET_OK;
    if (total > PIN_PIECE) return bn_fail(BITNET_E_INVALID, "opencl: %zu bytes to stage at once", total);
    size_t pi;
    bitnet_status st = pin_get(o, total, -1, &pi);
    if (st != BITNET_OK) return st;
    bn_ocl_pin *p = &o->pins[pi];
    cl_event last = NULL;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (!bytes[i]) continue;
        if (last) clReleaseEvent(last);
        last = NULL;
        cl_int err = clEnqueueReadBuffer(q, m[i], CL_FALSE, 0, bytes[i], (char *)p->ptr + at, after ? 1 : 0,
                                         after ? &after : NULL, &last);
        if (err != CL_SUCCESS) {
            bn_ocl_drain(o); /* nothing stays in flight into the staging buffer */
            return bn_cl_fail(err, "clEnqueueReadBuffer(queue, buf, CL_FALSE, 0, size, staging, ...)", __FILE__,
                              __LINE__);
        }
        at += bytes[i];
    }
    p->busy = last;
    p->held = 1; /* not reused until bn_ocl_staged_release, even once the reads are done */
    *host = p->ptr;
    return BITNET_OK;
}

bitnet_status bn_ocl_read_staged(bn_ocl *o, size_t n, const cl_mem *m, const size_t *bytes, const void **host)
{
    return read_staged_on(o, o->queue, NULL, n, m, bytes, host);
}

bitnet_status bn_ocl_read_staged_side(bn_ocl *o, cl_mem m, size_t bytes, const void **host)
{
    *host = NULL;
    if (!bytes) return BITNET_OK;
    cl_event done = NULL;
    cl_int err = clEnqueueMarkerWithWaitList(o->queue, 0, NULL, &done);
    if (err != CL_SUCCESS) return bn_cl_fail(err, "clEnqueueMarkerWithWaitList(queue, 0, NULL, &done)", __FILE__, __LINE__);
    bitnet_status st = read_staged_on(o, side_queue(o, &o->downq), done, 1, &m, &bytes, host);
    clReleaseEvent(done);
    return st;
}

bitnet_status bn_ocl_staged_wait(bn_ocl *o, const void *host, size_t bytes)
{
    for (size_t i = 0; host && i < o->npins; i++) {
        bn_ocl_pin *p = &o->pins[i];
        if (p->ptr != host || !p->busy) continue;
        const double t0 = bn_now_ms();
        cl_int err = clWaitForEvents(1, &p->busy);
        clReleaseEvent(p->busy);
        p->busy = NULL;
        if (err != CL_SUCCESS) return bn_cl_fail(err, "clWaitForEvents(1, &staged)", __FILE__, __LINE__);
        bn_ocl_stat_transfer(o, 0, bytes, bn_now_ms() - t0);
    }
    return BITNET_OK;
}

void bn_ocl_staged_release(bn_ocl *o, const void *host)
{
    for (size_t i = 0; host && i < o->npins; i++)
        if (o->pins[i].ptr == host) o->pins[i].held = 0;
}

/* Copies bytes [at, at + len) of the downloaded range out of staging memory:
 * the first `bytes` of the range go to dst, the rest to tail. */
static void split_copy(bn_ocl *o, void *dst, size_t bytes, void *tail, size_t at, const void *from, size_t len)
{
    if (at < bytes) {
        const size_t n = bytes - at < len ? bytes - at : len;
        copy_in(o, (char *)dst + at, from, n);
        at += n;
        from = (const char *)from + n;
        len -= n;
    }
    if (len) copy_in(o, (char *)tail + (at - bytes), from, len);
}

bitnet_status bn_ocl_download(bn_ocl *o, cl_mem m, size_t offset, void *dst, size_t bytes)
{
    return bn_ocl_download_tail(o, m, offset, dst, bytes, NULL, 0);
}

bitnet_status bn_ocl_download_tail(bn_ocl *o, cl_mem m, size_t offset, void *dst, size_t dst_bytes, void *tail,
                                   size_t tail_bytes)
{
    const size_t bytes = dst_bytes + tail_bytes;
    if (bytes == 0) return bn_ocl_finish(o);
    const size_t pf = piece_for(bytes, DOWN_LEAST), piece = pf < bytes ? pf : bytes, n = (bytes + piece - 1) / piece;
    size_t pi[2] = {0, 0};
    cl_event ev[2] = {NULL, NULL};
    bitnet_status st = pin_get(o, piece, -1, &pi[0]);
    if (st == BITNET_OK && n > 1) st = pin_get(o, piece, (long)pi[0], &pi[1]);
    /* (pin_new may move the table: take the pointers after both) */
    void *pin[2] = {st == BITNET_OK ? o->pins[pi[0]].ptr : NULL, st == BITNET_OK ? o->pins[pi[1]].ptr : NULL};
    const double t0 = bn_now_ms();
    for (size_t i = 0; st == BITNET_OK && i < n + 1; i++) {
        /* enqueue piece i (non-blocking), then finish piece i - 1 */
        if (i < n) {
            const size_t at = i * piece, len = bytes - at < piece ? bytes - at : piece;
            cl_int err = clEnqueueReadBuffer(o->queue, m, CL_FALSE, offset + at, len, pin[i % 2], 0, NULL,
                                             &ev[i % 2]);
            if (err != CL_SUCCESS) {
                st = bn_cl_fail(err, "clEnqueueReadBuffer(queue, buf, CL_FALSE, offset, size, staging, ...)",
                                __FILE__, __LINE__);
                break;
            }
        }
        if (i > 0) {
            const size_t j = i - 1, at = j * piece, len = bytes - at < piece ? bytes - at : piece;
            cl_int err = clWaitForEvents(1, &ev[j % 2]);
            clReleaseEvent(ev[j % 2]);
            ev[j % 2] = NULL;
            if (err != CL_SUCCESS) {
                st = bn_cl_fail(err, "clWaitForEvents(1, &read)", __FILE__, __LINE__);
                break;
            }
            split_copy(o, dst, dst_bytes, tail, at, pin[j % 2], len);
        }
    }
    for (int k = 0; k < 2; k++)
        if (ev[k]) {
            clWaitForEvents(1, &ev[k]);
            clReleaseEvent(ev[k]);
        }
    if (st != BITNET_OK) {
        bn_ocl_drain(o); /* the detail of this failure stays */
        return st;
    }
    /* the queue is idle up to the last read: time what ran */
    bn_ocl_collect(o);
    bn_ocl_stat_transfer(o, 0, bytes, bn_now_ms() - t0);
    return BITNET_OK;
}

void bn_ocl_drain(bn_ocl *o)
{
    if (o->upq) clFinish(o->upq);
    if (o->downq) clFinish(o->downq);
    clFinish(o->queue);
    bn_ocl_collect(o);
}
