/*
 * threads.c - the thread pool: persistent pthread workers that split
 * [0, n) into contiguous ranges.  The calling thread takes part, so a pool
 * of T threads has T-1 workers.  A call made while the pool is busy (another
 * thread, or a range function calling back in) runs inline instead of
 * waiting, so nesting can never deadlock.
 *
 * Hand-off: a sleeping thread takes tens of microseconds to wake on a
 * virtual machine (futex wake, then an interrupt to an idle virtual CPU),
 * which is a tenth of a 4096 x 14336 GEMV.  So an idle worker first spins
 * for BN_SPIN_US watching the generation, and the caller spins as long for
 * the last range to finish, before either sleeps on its condition
 * variable.  Calls that follow each other closely (a decoder's layers) then
 * never sleep; a pool left idle costs at most BN_SPIN_US of CPU per call.
 *
 * Tried and not kept (2026-12-02): range c of every section for thread c
 * (the caller 0, worker i i + 1; a thread whose own range was taken took the
 * highest left), so that repeated calls on the same weights find each
 * thread's rows in its own core's cache.  The GPU machine's 16-core host
 * (2 MiB of L2 a core), BitLinear 4096x14336 with its weights in cache,
 * tensor scale, four alternating rounds, medians in us, old / new: 8
 * threads 1 token 118.6-125.3 / 122.5-134.2, 8 tokens 327.7-362.4 /
 * 342.0-372.9; 16 threads 81.9 / 87.9 and 242.1 / 232.0 (one round): no
 * gain, the ranges' cache did not follow them.
 */
#include "threads.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BN_MAX_THREADS 512
#ifndef BN_SPIN_US
#define BN_SPIN_US 100
#endif

struct bn_pool {
    int threads;
    pthread_t *workers;
    int nworkers;            /* started */
    pthread_mutex_t busy;    /* held by the caller of a parallel section */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    uint64_t generation;     /* bumped for each parallel section */
    int quit;
    /* the current section */
    bn_range_fn fn;
    void *arg;
    uint64_t n, chunks, next, finished;
};

static _Thread_local int in_worker;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins up to BN_SPIN_US while *v == val (read without the lock); returns
 * nonzero once it changed.  Also stops when *quit is set (may be NULL). */
static int spin_while_eq(const uint64_t *v, uint64_t val, const int *quit)
{
    if (BN_SPIN_US <= 0) return 0;
    const uint64_t t0 = now_ns();
    for (unsigned i = 1;; i++) {
        if (__atomic_load_n(v, __ATOMIC_ACQUIRE) != val) return 1;
        if (quit && __atomic_load_n(quit, __ATOMIC_RELAXED)) return 1;
        cpu_relax();
        if (i % 64 == 0 && now_ns() - t0 > (uint64_t)BN_SPIN_US * 1000u) return 0;
    }
}

/* Range c of `chunks` equal contiguous ranges over [0, n). */
static void chunk_range(uint64_t n, uint64_t chunks, uint64_t c, uint64_t *b, uint64_t *e)
{
    uint64_t base = n / chunks, rem = n % chunks;
    *b = c * base + (c < rem ? c : rem);
    *e = *b + base + (c < rem ? 1 : 0);
}

/* Takes chunks until none is left; returns with mu held. */
static void run_chunks(bn_pool *p)
{
    while (p->next < p->chunks) {
        uint64_t c = p->next++, b, e;
        bn_range_fn fn = p->fn;
        void *arg = p->arg;
        chunk_range(p->n, p->chunks, c, &b, &e);
        pthread_mutex_unlock(&p->mu);
        fn(arg, b, e);
        pthread_mutex_lock(&p->mu);
        if (__atomic_add_fetch(&p->finished, 1, __ATOMIC_RELEASE) == p->chunks) pthread_cond_broadcast(&p->done);
    }
}

static void *worker_main(void *vp)
{
    bn_pool *p = vp;
    in_worker = 1;
    pthread_mutex_lock(&p->mu);
    /* the generation at creation, not the one found when this thread first
     * runs: a section begun in between is still this thread's to join */
    uint64_t seen = 0;
    for (;;) {
        if (!p->quit && p->generation == seen) {
            pthread_mutex_unlock(&p->mu);
            spin_while_eq(&p->generation, seen, &p->quit);
            pthread_mutex_lock(&p->mu);
        }
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        run_chunks(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

bitnet_status bn_pool_create(bn_pool **out, int threads)
{
    *out = NULL;
    if (threads < 0) return bn_fail(BITNET_E_INVALID, "threads must be >= 0 (0 = all cores), got %d", threads);
    if (threads == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (int)(c < BN_MAX_THREADS ? c : BN_MAX_THREADS) : 1;
    }
    if (threads > BN_MAX_THREADS)
        return bn_fail(BITNET_E_INVALID, "threads: %d exceeds the limit of %d", threads, BN_MAX_THREADS);
    bn_pool *p = calloc(1, sizeof *p);
    if (!p) return bn_fail(BITNET_E_NOMEM, "thread pool: out of memory");
    p->threads = threads;
    pthread_mutex_init(&p->busy, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (threads > 1) {
        p->workers = calloc((size_t)threads - 1, sizeof *p->workers);
        if (!p->workers) {
            bn_pool_free(p);
            return bn_fail(BITNET_E_NOMEM, "thread pool: out of memory");
        }
        for (int i = 0; i < threads - 1; i++) {
            if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
                bn_pool_free(p);
                return bn_fail(BITNET_E_NOMEM, "thread pool: cannot start thread %d of %d", i + 2, threads);
            }
            p->nworkers++;
        }
    }
    *out = p;
    return BITNET_OK;
}

void bn_pool_free(bn_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    __atomic_store_n(&p->quit, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nworkers; i++) pthread_join(p->workers[i], NULL);
    free(p->workers);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->busy);
    free(p);
}

int bn_pool_threads(const bn_pool *p) { return p ? p->threads : 1; }

void bn_parallel_for(bn_pool *p, uint64_t n, uint64_t grain, bn_range_fn fn, void *arg)
{
    if (n == 0) return;
    if (grain == 0) grain = 1;
    uint64_t chunks = n / grain;
    int threads = bn_pool_threads(p);
    if (chunks > (uint64_t)threads) chunks = (uint64_t)threads;
    if (chunks <= 1 || !p || p->nworkers == 0 || in_worker || pthread_mutex_trylock(&p->busy) != 0) {
        fn(arg, 0, n);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    p->chunks = chunks;
    p->next = 0;
    p->finished = 0;
    __atomic_store_n(&p->generation, p->generation + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->wake);
    in_worker = 1; /* a range function calling back in runs inline */
    run_chunks(p);
    in_worker = 0;
    if (p->finished < p->chunks) {
        pthread_mutex_unlock(&p->mu);
        for (uint64_t f; (f = __atomic_load_n(&p->finished, __ATOMIC_ACQUIRE)) < chunks;)
            if (!spin_while_eq(&p->finished, f, NULL)) break;
        pthread_mutex_lock(&p->mu);
    }
    while (p->finished < p->chunks) pthread_cond_wait(&p->done, &p->mu);
    p->fn = NULL;
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->busy);
}

typedef struct {
    char *dst;
    const char *src;
} bn_copy_job;

static void copy_range(void *arg, uint64_t begin, uint64_t end)
{
    const bn_copy_job *j = arg;
    memcpy(j->dst + begin, j->src + begin, (size_t)(end - begin));
}

void bn_parallel_memcpy(bn_pool *p, void *dst, const void *src, size_t n)
{
    /* ranges of at least 64 KiB: a few microseconds of copying, about what
     * handing a range to a worker costs */
    bn_copy_job j = {dst, src};
    if (!p || n < BN_PARALLEL_COPY_MIN) {
        if (n) memcpy(dst, src, n);
        return;
    }
    bn_parallel_for(p, n, 64u << 10, copy_range, &j);
}
