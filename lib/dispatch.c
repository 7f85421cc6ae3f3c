/*
 * dispatch.c - one op call from the public entry point to a backend: the
 * backend's op lock, the choice of target (operands already on the device
 * keep the op there), staging of device operands through host copies when
 * the op runs on the CPU (no OpenCL implementation, or the fallback of
 * --device auto after a device failure), and the statistics.
 */
#include "backend_impl.h"
#include "devmem.h"
#include "opencl/ocl.h"

#include <stdlib.h>

int bn_is_device_ptr(const void *p)
{
    bn_devref r;
    return bn_devmem_find(p, &r);
}

static void *slot_ptr(const bn_operand *o)
{
    void *p;
    memcpy(&p, o->slot, sizeof p);
    return p;
}

static void set_slot(const bn_operand *o, void *p) { memcpy(o->slot, &p, sizeof p); }

/* Replaces every device operand by a host copy (inputs read from the device). */
static bitnet_status stage(bn_call *c)
{
    bitnet_backend *be = c->be;
    for (size_t i = 0; i < c->nopd; i++) {
        if (!c->dev[i]) continue;
        const bn_operand *o = &c->opd[i];
        void *p = slot_ptr(o);
        bn_devref r;
        if (!bn_devmem_find(p, &r)) return bn_fail(BITNET_E_INVALID, "%s: device buffer freed during the call", c->op);
        size_t sz = (o->bytes + 63) / 64 * 64;
        void *t = aligned_alloc(64, sz ? sz : 64);
        if (!t) return bn_fail(BITNET_E_NOMEM, "%s: host copy of a device operand (%zu bytes)", c->op, o->bytes);
        c->tmp[i] = t;
        c->saved[i] = p;
        c->staged = 1;
        if (!o->out) {
            bitnet_status st = bn_ocl_ops.buffer_read(be->ocl, r.handle, r.offset, t, o->bytes);
            if (st != BITNET_OK) return st;
        }
        set_slot(o, t);
    }
    return BITNET_OK;
}

/* Puts the caller's pointers back; with write set, copies staged outputs up. */
static bitnet_status unstage(bn_call *c, int write)
{
    bitnet_status st = BITNET_OK;
    for (size_t i = 0; i < c->nopd; i++) {
        if (!c->tmp[i]) continue;
        const bn_operand *o = &c->opd[i];
        bn_devref r;
        if (write && o->out && st == BITNET_OK) {
            if (bn_devmem_find(c->saved[i], &r))
                st = bn_ocl_ops.buffer_write(c->be->ocl, r.handle, r.offset, c->tmp[i], o->bytes);
            else
                st = bn_fail(BITNET_E_INVALID, "%s: device buffer freed during the call", c->op);
        }
        set_slot(o, c->saved[i]);
        free(c->tmp[i]);
        c->tmp[i] = NULL;
    }
    c->staged = 0;
    return st;
}

bitnet_status bn_call_begin(bn_call *c, bitnet_backend *be, size_t slot, const char *op, uint64_t bytes,
                            bn_operand *opd, size_t nopd)
{
    memset(c, 0, sizeof *c);
    be = bn_backend_or_default(be);
    if (!be) return bn_fail(BITNET_E_NOMEM, "%s: no default backend", op);
    if (nopd > BN_MAX_OPERANDS) return bn_fail(BITNET_E_INVALID, "%s: too many operands", op);
    c->be = be;
    c->slot = slot;
    c->op = op;
    c->bytes = bytes;
    c->opd = opd;
    c->nopd = nopd;
    pthread_mutex_lock(&be->op_mu);
    for (size_t i = 0; i < nopd; i++) {
        bn_devref r;
        void *p = slot_ptr(&opd[i]);
        if (!p || !opd[i].bytes || !bn_devmem_find(p, &r)) continue;
        if (!be->ocl || r.owner != (void *)be->ocl) {
            pthread_mutex_unlock(&be->op_mu);
            return bn_fail(BITNET_E_INVALID, "%s: operand %zu is a device buffer of another backend", op, i + 1);
        }
        if (r.offset > r.bytes || opd[i].bytes > r.bytes - r.offset) {
            pthread_mutex_unlock(&be->op_mu);
            return bn_fail(BITNET_E_INVALID, "%s: operand %zu runs %zu bytes past the end of its device buffer (%zu bytes)",
                           op, i + 1, opd[i].bytes - (r.bytes - r.offset), r.bytes);
        }
        c->dev[i] = 1;
        c->ndev++;
    }
    int has_ocl;
    {
        void *fn;
        memcpy(&fn, (const char *)&bn_ocl_ops + slot, sizeof fn);
        has_ocl = fn != NULL;
    }
    if (c->ndev && has_ocl && !be->ocl_disabled && be->force != BN_FORCE_CPU) {
        bn_ocl_ops.op_begin(be->ocl, op);
        c->t = (bn_target){&bn_ocl_ops, be->ocl, be->mode == BN_MODE_AUTO};
    } else {
        c->t = bn_backend_select(be, slot, op, bytes);
    }
    bitnet_status st = BITNET_OK;
    if (c->ndev && c->t.ops != &bn_ocl_ops) st = stage(c);
    if (st != BITNET_OK) {
        unstage(c, 0);
        pthread_mutex_unlock(&be->op_mu);
        return st;
    }
    c->t0 = bn_now_ms();
    return BITNET_OK;
}

int bn_call_retry(bn_call *c, bitnet_status *st)
{
    if (!bn_is_device_error(*st) || !c->t.can_fallback) return 0;
    bn_backend_fallback(c->be, c->op, *st);
    c->t = bn_backend_cpu_target(c->be);
    if (c->ndev) {
        bitnet_status s = stage(c);
        if (s != BITNET_OK) {
            *st = s;
            return 0;
        }
    }
    c->t0 = bn_now_ms();
    return 1;
}

bitnet_status bn_call_end(bn_call *c, bitnet_status st)
{
    if (c->staged) {
        bitnet_status s = unstage(c, st == BITNET_OK);
        if (st == BITNET_OK) st = s;
    }
    bn_backend_record(c->be, &c->t, c->op, bn_now_ms() - c->t0, c->bytes);
    pthread_mutex_unlock(&c->be->op_mu);
    return st;
}
