/*
 * devmem.h - device addresses (internal, a helper beneath the backends).
 *
 * A device buffer gets an address of its own: a range of the process's
 * address space reserved with no memory behind it (mmap PROT_NONE), so that
 * the address is unique, arithmetic on it (an element offset) works, and a
 * host access faults at once instead of reading stale data.  The registry
 * maps any address inside such a range back to the buffer's owner (the
 * backend context that made it), its handle (a cl_mem on OpenCL) and the
 * offset.  Thread-safe; the registry is process-wide.
 */
#ifndef BITNET_DEVMEM_H
#define BITNET_DEVMEM_H

#include "internal.h"

typedef struct {
    void *owner;   /* the backend context that allocated it */
    void *handle;  /* its memory object */
    size_t offset; /* of the address looked up, from the start of the buffer */
    size_t bytes;  /* the buffer's size */
} bn_devref;

/* Reserves an address range of bytes (> 0) and registers it. */
bitnet_status bn_devmem_register(size_t bytes, void *owner, void *handle, void **addr);
/* Unregisters the range starting at addr and gives the address space back. */
void bn_devmem_unregister(void *addr);
/* 1 and *ref when p lies inside a registered range, else 0. */
int bn_devmem_find(const void *p, bn_devref *ref);

#endif
