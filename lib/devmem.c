/*
 * devmem.c - the registry of device addresses (see devmem.h): a balanced
 * search tree (POSIX tsearch) of reserved ranges under a read-write lock.
 *
 * Registered ranges never overlap, so ordering them by "lies wholly before"
 * is a total order, and a one-byte key at an address compares equal to the
 * one range that contains it: looking up, adding and removing all take
 * O(log n).  (A sorted array made adding and removing O(n) each, and a
 * bench row with 262144 tiny device buffers spent a minute in memmove.)
 */
#include "devmem.h"

#include <pthread.h>
#include <search.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    uintptr_t base;
    size_t bytes, span; /* asked for, reserved (whole pages) */
    void *owner, *handle;
} range;

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static void *root;

/* <0, 0, >0: a lies before b, they overlap, a lies after b. */
static int cmp(const void *pa, const void *pb)
{
    const range *a = pa, *b = pb;
    if (a->base + a->bytes <= b->base) return -1;
    if (b->base + b->bytes <= a->base) return 1;
    return 0;
}

bitnet_status bn_devmem_register(size_t bytes, void *owner, void *handle, void **addr)
{
    *addr = NULL;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span;
    if (bytes == 0 || bn_add_size(bytes, page - 1, &span))
        return bn_fail(BITNET_E_OVERFLOW, "device buffer of %zu bytes: no address range fits", bytes);
    span -= span % page;
    range *r = malloc(sizeof *r);
    if (!r) return bn_fail(BITNET_E_NOMEM, "device buffer registry: out of memory");
    void *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        free(r);
        return bn_fail(BITNET_E_NOMEM, "device buffer of %zu bytes: no address range left", bytes);
    }
    *r = (range){(uintptr_t)p, bytes, span, owner, handle};
    pthread_rwlock_wrlock(&lock);
    void *node = tsearch(r, &root, cmp);
    pthread_rwlock_unlock(&lock);
    if (!node) { /* the tree's node could not be allocated */
        munmap(p, span);
        free(r);
        return bn_fail(BITNET_E_NOMEM, "device buffer registry: out of memory");
    }
    *addr = p;
    return BITNET_OK;
}

void bn_devmem_unregister(void *addr)
{
    if (!addr) return;
    const range key = {(uintptr_t)addr, 1, 0, NULL, NULL};
    range *r = NULL;
    pthread_rwlock_wrlock(&lock);
    void *node = tfind(&key, &root, cmp);
    if (node && (*(range **)node)->base == (uintptr_t)addr) { /* only a range's own start unregisters it */
        r = *(range **)node;
        tdelete(r, &root, cmp);
    }
    pthread_rwlock_unlock(&lock);
    if (r) {
        munmap(addr, r->span);
        free(r);
    }
}

int bn_devmem_find(const void *p, bn_devref *ref)
{
    if (!p) return 0;
    const range key = {(uintptr_t)p, 1, 0, NULL, NULL};
    int found = 0;
    pthread_rwlock_rdlock(&lock);
    void *node = tfind(&key, &root, cmp);
    if (node) {
        const range *r = *(range **)node;
        *ref = (bn_devref){r->owner, r->handle, (size_t)((uintptr_t)p - r->base), r->bytes};
        found = 1;
    }
    pthread_rwlock_unlock(&lock);
    return found;
}
