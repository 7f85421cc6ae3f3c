/*
 * buffer.c - device-resident tensors (bitnet_buffer_*) and
 * bitnet_backend_sync.  A buffer lives on the device its backend computes
 * on: OpenCL memory named by a device address (lib/devmem.h) when the
 * backend has an OpenCL device, else 64-byte aligned host memory that the
 * CPU ops use in place.
 */
#include "backend_impl.h"
#include "devmem.h"
#include "opencl/ocl.h"

#include <stdlib.h>

struct bitnet_buffer {
    bitnet_backend *be;
    void *addr;    /* what ops take: host memory, or a device address */
    size_t bytes;
    void *handle;  /* the device allocation (NULL: host memory) */
};

/* Whether buffers of be go to its OpenCL device (creating it if needed). */
static bitnet_status wants_device(bitnet_backend *be, int *dev)
{
    *dev = 0;
    if (be->mode == BN_MODE_CPU || be->force == BN_FORCE_CPU) return BITNET_OK;
    if (be->mode == BN_MODE_AUTO) {
        if (!be->ocl_probed) bn_backend_auto_probe(be);
        if (be->ocl_disabled) return BITNET_OK;
    }
    bitnet_status st = bn_backend_ensure_ocl(be);
    if (st != BITNET_OK) {
        if (be->mode != BN_MODE_AUTO) return st;
        bn_backend_fallback(be, "buffer", st);
        return BITNET_OK;
    }
    *dev = 1;
    return BITNET_OK;
}

static void account(bitnet_backend *be, size_t bytes, int add)
{
    pthread_mutex_lock(&be->mu);
    if (add) {
        be->buf_bytes += bytes;
        if (be->buf_bytes > be->buf_peak) be->buf_peak = be->buf_bytes;
    } else {
        be->buf_bytes -= bytes;
    }
    pthread_mutex_unlock(&be->mu);
}

bitnet_status bitnet_buffer_create(bitnet_backend *be, size_t bytes, bitnet_buffer **out)
{
    if (!out) return bn_fail(BITNET_E_INVALID, "bitnet_buffer_create: NULL output pointer");
    *out = NULL;
    if (!be || bytes == 0) return bn_fail(BITNET_E_INVALID, "bitnet_buffer_create: %s", !be ? "NULL backend" : "0 bytes");
    bitnet_buffer *b = calloc(1, sizeof *b);
    if (!b) return bn_fail(BITNET_E_NOMEM, "bitnet_buffer_create: out of memory");
    b->be = be;
    b->bytes = bytes;
    pthread_mutex_lock(&be->op_mu);
    int dev = 0;
    bitnet_status st = wants_device(be, &dev);
    if (st == BITNET_OK && dev) {
        st = bn_ocl_ops.buffer_alloc(be->ocl, bytes, &b->handle);
        if (st == BITNET_OK && (st = bn_devmem_register(bytes, be->ocl, b->handle, &b->addr)) != BITNET_OK) {
            bn_ocl_ops.buffer_free(be->ocl, b->handle);
            b->handle = NULL;
        }
        if (st != BITNET_OK && be->mode == BN_MODE_AUTO && bn_is_device_error(st)) {
            bn_backend_fallback(be, "buffer", st); /* auto: host memory, and the CPU from now on */
            st = BITNET_OK;
            dev = 0;
        }
    }
    if (st == BITNET_OK && !dev) {
        size_t sz;
        if (bn_add_size(bytes, 63, &sz)) st = bn_fail(BITNET_E_OVERFLOW, "bitnet_buffer_create: %zu bytes", bytes);
        else if (!(b->addr = aligned_alloc(64, sz / 64 * 64)))
            st = bn_fail(BITNET_E_NOMEM, "bitnet_buffer_create: %zu bytes of host memory", bytes);
    }
    pthread_mutex_unlock(&be->op_mu);
    if (st != BITNET_OK) {
        free(b);
        return st;
    }
    account(be, bytes, 1);
    *out = b;
    return BITNET_OK;
}

bitnet_status bitnet_buffer_upload(bitnet_backend *be, const void *src, size_t bytes, bitnet_buffer **out)
{
    if (out) *out = NULL;
    if (!src && bytes) return bn_fail(BITNET_E_INVALID, "bitnet_buffer_upload: NULL source");
    bitnet_buffer *b;
    bitnet_status st = bitnet_buffer_create(be, bytes, &b);
    if (st == BITNET_OK && (st = bitnet_buffer_write(b, 0, src, bytes)) != BITNET_OK) {
        bitnet_buffer_free(b);
        b = NULL;
    }
    if (out) *out = b;
    return st;
}

void *bitnet_buffer_data(const bitnet_buffer *b) { return b ? b->addr : NULL; }
size_t bitnet_buffer_size(const bitnet_buffer *b) { return b ? b->bytes : 0; }
int bitnet_buffer_on_host(const bitnet_buffer *b) { return b && !b->handle; }

static bitnet_status range_check(const bitnet_buffer *b, size_t offset, size_t bytes, const void *host, const char *fn)
{
    if (!b) return bn_fail(BITNET_E_INVALID, "%s: NULL buffer", fn);
    if (bytes && !host) return bn_fail(BITNET_E_INVALID, "%s: NULL host pointer", fn);
    if (offset > b->bytes || bytes > b->bytes - offset)
        return bn_fail(BITNET_E_INVALID, "%s: bytes [%zu, %zu + %zu) are outside the buffer of %zu bytes", fn, offset,
                       offset, bytes, b->bytes);
    return BITNET_OK;
}

bitnet_status bitnet_buffer_write(bitnet_buffer *b, size_t offset, const void *src, size_t bytes)
{
    bitnet_status st = range_check(b, offset, bytes, src, "bitnet_buffer_write");
    if (st != BITNET_OK || bytes == 0) return st;
    if (!b->handle) {
        memmove((char *)b->addr + offset, src, bytes);
        return BITNET_OK;
    }
    pthread_mutex_lock(&b->be->op_mu);
    bn_ocl_ops.op_begin(b->be->ocl, "buffer_write");
    st = bn_ocl_ops.buffer_write(b->be->ocl, b->handle, offset, src, bytes);
    pthread_mutex_unlock(&b->be->op_mu);
    return st;
}

bitnet_status bitnet_buffer_read(const bitnet_buffer *b, size_t offset, void *dst, size_t bytes)
{
    bitnet_status st = range_check(b, offset, bytes, dst, "bitnet_buffer_read");
    if (st != BITNET_OK) return st;
    if (!b->handle) {
        if (bytes) memmove(dst, (const char *)b->addr + offset, bytes);
        return BITNET_OK;
    }
    pthread_mutex_lock(&b->be->op_mu);
    bn_ocl_ops.op_begin(b->be->ocl, "buffer_read");
    st = bn_ocl_ops.buffer_read(b->be->ocl, b->handle, offset, dst, bytes);
    pthread_mutex_unlock(&b->be->op_mu);
    return st;
}

void bitnet_buffer_free(bitnet_buffer *b)
{
    if (!b) return;
    bitnet_backend *be = b->be;
    if (b->handle) {
        pthread_mutex_lock(&be->op_mu);
        bn_devmem_unregister(b->addr);
        bn_ocl_ops.buffer_free(be->ocl, b->handle); /* ops still in flight keep using it (in-order queue) */
        pthread_mutex_unlock(&be->op_mu);
    } else {
        free(b->addr);
    }
    account(be, b->bytes, 0);
    free(b);
}

bitnet_status bitnet_backend_sync(bitnet_backend *be)
{
    if (!be) return bn_fail(BITNET_E_INVALID, "bitnet_backend_sync: NULL backend");
    bitnet_status st = BITNET_OK;
    pthread_mutex_lock(&be->op_mu);
    if (be->ocl) st = bn_ocl_ops.sync(be->ocl);
    pthread_mutex_unlock(&be->op_mu);
    return st;
}
