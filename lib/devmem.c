/*
 * devmem.c - the registry of device addresses (see devmem.h): a sorted array
 * of reserved ranges under a read-write lock.
 */
#include "devmem.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    uintptr_t base;
    size_t bytes, span; /* asked for, reserved (whole pages) */
    void *owner, *handle;
} range;

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static range *ranges;
static size_t nranges, capranges;

/* The first range whose base is > p (0..nranges). */
static size_t upper(uintptr_t p)
{
    size_t lo = 0, hi = nranges;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (ranges[mid].base <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

bitnet_status bn_devmem_register(size_t bytes, void *owner, void *handle, void **addr)
{
    *addr = NULL;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span;
    if (bytes == 0 || bn_add_size(bytes, page - 1, &span))
        return bn_fail(BITNET_E_OVERFLOW, "device buffer of %zu bytes: no address range fits", bytes);
    span -= span % page;
    void *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return bn_fail(BITNET_E_NOMEM, "device buffer of %zu bytes: no address range left", bytes);
    pthread_rwlock_wrlock(&lock);
    if (nranges == capranges) {
        const size_t cap = capranges ? capranges * 2 : 64;
        range *a = realloc(ranges, cap * sizeof *a);
        if (!a) {
            pthread_rwlock_unlock(&lock);
            munmap(p, span);
            return bn_fail(BITNET_E_NOMEM, "device buffer registry: out of memory");
        }
        ranges = a;
        capranges = cap;
    }
    const size_t i = upper((uintptr_t)p);
    memmove(&ranges[i + 1], &ranges[i], (nranges - i) * sizeof *ranges);
    ranges[i] = (range){(uintptr_t)p, bytes, span, owner, handle};
    nranges++;
    pthread_rwlock_unlock(&lock);
    *addr = p;
    return BITNET_OK;
}

void bn_devmem_unregister(void *addr)
{
    if (!addr) return;
    pthread_rwlock_wrlock(&lock);
    const size_t i = upper((uintptr_t)addr);
    if (i > 0 && ranges[i - 1].base == (uintptr_t)addr) {
        const size_t span = ranges[i - 1].span;
        memmove(&ranges[i - 1], &ranges[i], (nranges - i) * sizeof *ranges);
        nranges--;
        munmap(addr, span);
    }
    pthread_rwlock_unlock(&lock);
}

int bn_devmem_find(const void *p, bn_devref *ref)
{
    const uintptr_t a = (uintptr_t)p;
    int found = 0;
    if (!p) return 0;
    pthread_rwlock_rdlock(&lock);
    const size_t i = nranges ? upper(a) : 0;
    if (i > 0 && a - ranges[i - 1].base < ranges[i - 1].bytes) {
        const range *r = &ranges[i - 1];
        *ref = (bn_devref){r->owner, r->handle, (size_t)(a - r->base), r->bytes};
        found = 1;
    }
    pthread_rwlock_unlock(&lock);
    return found;
}
