/*
 * threads.c - the thread pool: persistent pthread workers that split
 * [0, n) into contiguous ranges.  The calling thread takes part, so a pool
 * of T threads has T-1 workers.  A call made while the pool is busy (another
 * thread, or a range function calling back in) runs inline instead of
 * waiting, so nesting can never deadlock.  A section may also be begun and
 * ended apart (bn_parallel_begin, bn_parallel_end): the workers start on it
 * while the caller does something else, and the caller joins in at the end.
 *
 * Hand-off: a sleeping thread takes tens of microseconds to wake on a
 * virtual machine (futex wake, then an interrupt to an idle virtual CPU),
 * which is a tenth of a 4096 x 14336 GEMV.  So an idle worker first spins
 * for BN_SPIN_US watching the generation, and the caller spins as long for
 * the last range to finish, before either sleeps on its condition
 * variable.  Calls that follow each other closely (a decoder's layers) then
 * never sleep; a pool left idle costs at most BN_SPIN_US of CPU per call.
 * A section is handed out without a lock: the caller publishes it by its
 * number, the threads take its chunks by compare-and-swap and count them
 * done with an atomic add; the mutex is only for sleeping and waking.
 * Before (2026-12-04), every chunk taken and finished went through the
 * mutex, and with many threads spinning on it the section's own work was
 * the smaller part of a small call.  The GPU machine's 16-core host (an H200
 * machine's), BitLinear with one token, weights in cache, kernel medians of
 * four alternating rounds, before / after, us: 256x4096 on 8 threads
 * 20.9-22.6 / 9.9-12.7, on 16 threads 31.2-54.4 / 10.0-11.3; 4096x14336 on
 * 16 threads 109-284 / 97-126 (8 threads: within that host's noise).
 *
 * Tried and not kept (2026-12-02): range c of every section for thread c
 * (the caller 0, worker i i + 1; a thread whose own range was taken took the
 * highest left), so that repeated calls on the same weights find each
 * thread's rows in its own core's cache.  The GPU machine's 16-core host
 * (2 MiB of L2 a core), BitLinear 4096x14336 with its weights in cache,
 * tensor scale, four alternating rounds, medians in us, old / new: 8
 * threads 1 token 118.6-125.3 / 122.5-134.2, 8 tokens 327.7-362.4 /
 * 342.0-372.9; 16 threads 81.9 / 87.9 and 242.1 / 232.0 (one round): no
 * gain, the ranges' cache did not follow them.  BitLinear hands its rows
 * out in pieces of its own (rows_dynamic), so that try did not move them;
 * tried again (2026-12-04) with each thread taking a home share of the
 * pieces first, then the others' (and, in the same runs, each thread pinned
 * to a CPU of its own): 8 threads 117-135 us against 117-137, 16 threads
 * 80-90 against 85-94, three rounds.  At 8 threads a share is 1.8 MiB, most
 * of a 2 MiB L2, and a loop over it gets little from an LRU cache.
 * Nor was it the L2's size (2026-12-07, an H100 machine's 16-vCPU host,
 * Xeon model 207, 2 MiB of L2 a vCPU; five alternating rounds of
 * `bitnet-bench --device cpu --threads N --op bitlinear --tokens 1 --scale
 * tensor --llc 1`, medians of the rounds in us): against the pool as it is
 * (8 threads 4096x14336 128.5-167.0, median 143.7; 16 threads 79.2-109.0,
 * 82.6), the bench's weights in 2 MiB pages (madvise, so that a share maps
 * evenly over the L2's sets: 134.0-160.1, 138.7), each thread its home
 * share of equal pieces first and pinned to a CPU of its own (141.2-165.6,
 * 157.9), both (135.5-164.2, 136.2) and the home shares in huge pages
 * unpinned (132.2-145.0, 140.7) were all within the runs' spread, on 16
 * threads too (76.1-101.3 across them).  2048x14336 on 8 threads, a share
 * of 0.9 MiB, took 70.9-95.3 us (median 72.6) as it was and 65.4-78.3
 * (75.2) with everything: half of 4096x14336, so the 8 threads read their
 * codes at the same rate whether a share fits their L2 or not.
 * A longer spin (BN_SPIN_US=2000, built with CPPFLAGS) on the 2-vCPU Zen 4
 * VM, 2026-12-06, ten alternating rounds of `bitnet-bench --device cpu --op
 * copy,bitlinear --shape 4096x14336 --tokens 1 --scale tensor`: one token
 * 0.416-0.601 ms (median of the rounds 0.548) against 0.499-0.613 (0.558),
 * 80-98% of the same round's read against 62-99%: within that VM's noise,
 * so the hand-off is not what keeps it under 85% in some runs.
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
    int nworkers;         /* started */
    pthread_mutex_t busy; /* held by the caller of a parallel section */
    pthread_mutex_t mu;   /* sleeping and waking only */
    pthread_cond_t wake, done;
    int quit;
    /* The current section, written by its caller before it publishes the
     * generation and read by the workers after they see it (relaxed
     * atomics: a worker that comes late may read the next section's, and
     * then fails to take a chunk, below). */
    bn_range_fn fn;
    void *arg;
    uint64_t n;
    /* Hot words, a cache line each: the section's number; its chunks, taken
     * by compare-and-swap on the ticket (number << 32 | chunks << 16 | next
     * chunk), so that a worker still holding an old number takes nothing
     * (the low 32 bits of it: a worker would have to sleep through 2^32
     * sections between reading the number and its swap to take a wrong
     * chunk); the chunks done; who sleeps.  The section's chunk count is in
     * the ticket itself: compared with the count field, which the caller
     * rewrites for the next section while an old ticket may still be read, a
     * worker that came late took "chunk" c of a finished section whose
     * count was below the next one's (its swap on the exhausted ticket
     * succeeded before the caller replaced it) and ran range c of the next
     * section, twice in all, with the finished count off by one
     * (test_backend's back-to-back sections caught it once in about 200 runs
     * with 16 threads on 2 CPUs). */
    _Alignas(64) uint64_t generation;
    _Alignas(64) uint64_t ticket;
    _Alignas(64) uint64_t finished;
    _Alignas(64) int sleepers;    /* workers in (or about to enter) pthread_cond_wait on wake */
    int caller_sleeping;          /* the caller waits on done */
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

/* A ticket's section number: the low 32 bits of gen, in the high half;
 * below it the section's chunk count (at most BN_MAX_THREADS) and the next
 * chunk, 16 bits each. */
#define TAG(gen) ((uint64_t)(gen) << 32)
#define TICKET_CHUNKS(t) (((t) >> 16) & 0xffffu)
#define TICKET_NEXT(t) ((t)&0xffffu)
_Static_assert(BN_MAX_THREADS < 0x10000, "a section's chunk count fits 16 bits of its ticket");

/* Chunk c of section gen, done; wakes the caller after the last one. */
static void run_chunk(bn_pool *p, bn_range_fn fn, void *arg, uint64_t n, uint64_t chunks, uint64_t c)
{
    uint64_t b, e;
    chunk_range(n, chunks, c, &b, &e);
    fn(arg, b, e);
    if (__atomic_add_fetch(&p->finished, 1, __ATOMIC_SEQ_CST) == chunks &&
        __atomic_load_n(&p->caller_sleeping, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Takes chunks of section gen until none is left (or the section is over). */
static void run_section(bn_pool *p, uint64_t gen)
{
    const bn_range_fn fn = __atomic_load_n(&p->fn, __ATOMIC_RELAXED);
    void *const arg = __atomic_load_n(&p->arg, __ATOMIC_RELAXED);
    const uint64_t n = __atomic_load_n(&p->n, __ATOMIC_RELAXED);
    uint64_t t = __atomic_load_n(&p->ticket, __ATOMIC_ACQUIRE);
    for (;;) {
        const uint64_t c = TICKET_NEXT(t), chunks = TICKET_CHUNKS(t);
        if ((t & ~(uint64_t)0xffffffffu) != TAG(gen) || c >= chunks) return;
        /* success means the section is still this one with chunk c not
         * taken: it cannot end without this chunk, so what was read above
         * (after its number, before the swap) was its own */
        if (__atomic_compare_exchange_n(&p->ticket, &t, t + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE)) {
            run_chunk(p, fn, arg, n, chunks, c);
            t = __atomic_load_n(&p->ticket, __ATOMIC_ACQUIRE);
        }
    }
}

static void *worker_main(void *vp)
{
    bn_pool *p = vp;
    in_worker = 1;
    /* the generation at creation, not the one found when this thread first
     * runs: a section begun in between is still this thread's to join */
    uint64_t seen = 0;
    for (;;) {
        if (!spin_while_eq(&p->generation, seen, &p->quit)) {
            pthread_mutex_lock(&p->mu);
            __atomic_add_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
            while (!p->quit && __atomic_load_n(&p->generation, __ATOMIC_SEQ_CST) == seen)
                pthread_cond_wait(&p->wake, &p->mu);
            __atomic_sub_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
            pthread_mutex_unlock(&p->mu);
        }
        if (__atomic_load_n(&p->quit, __ATOMIC_RELAXED)) break;
        seen = __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE);
        run_section(p, seen);
    }
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
    __atomic_store_n(&p->quit, 1, __ATOMIC_SEQ_CST);
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

/* Publishes a section of `chunks` ranges, the first `first` of them already
 * taken (by the caller), or runs it inline (returns 0) where the pool
 * cannot take it: one chunk, no workers, a range function calling back in,
 * or the pool busy with another section (another thread's, or one this
 * thread began and has not ended). */
static int publish(bn_pool *p, uint64_t n, uint64_t grain, bn_range_fn fn, void *arg, uint64_t first, uint64_t *nchunks)
{
    if (grain == 0) grain = 1;
    uint64_t chunks = n / grain;
    int threads = bn_pool_threads(p);
    if (chunks > (uint64_t)threads) chunks = (uint64_t)threads;
    if (chunks <= 1 || !p || p->nworkers == 0 || in_worker || pthread_mutex_trylock(&p->busy) != 0) {
        fn(arg, 0, n);
        return 0;
    }
    /* Publish the section: its fields, then its number (release, and
     * sequentially consistent against the sleepers' count: either a worker
     * about to sleep sees the new number, or this sees it counted and wakes
     * it). */
    const uint64_t gen = p->generation + 1;
    __atomic_store_n(&p->fn, fn, __ATOMIC_RELAXED);
    __atomic_store_n(&p->arg, arg, __ATOMIC_RELAXED);
    __atomic_store_n(&p->n, n, __ATOMIC_RELAXED);
    __atomic_store_n(&p->finished, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&p->ticket, TAG(gen) | chunks << 16 | first, __ATOMIC_RELAXED);
    __atomic_store_n(&p->generation, gen, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&p->sleepers, __ATOMIC_SEQ_CST) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    *nchunks = chunks;
    return 1;
}

/* The caller's part of a published section: the chunks left, then the wait
 * for the workers' (spinning first, as they do), then the pool set free. */
static void finish(bn_pool *p, uint64_t chunks)
{
    in_worker = 1; /* a range function calling back in runs inline */
    run_section(p, __atomic_load_n(&p->generation, __ATOMIC_RELAXED));
    in_worker = 0;
    for (uint64_t f; (f = __atomic_load_n(&p->finished, __ATOMIC_ACQUIRE)) < chunks;)
        if (!spin_while_eq(&p->finished, f, NULL)) break;
    if (__atomic_load_n(&p->finished, __ATOMIC_ACQUIRE) < chunks) {
        pthread_mutex_lock(&p->mu);
        __atomic_store_n(&p->caller_sleeping, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&p->finished, __ATOMIC_SEQ_CST) < chunks) pthread_cond_wait(&p->done, &p->mu);
        __atomic_store_n(&p->caller_sleeping, 0, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_unlock(&p->busy);
}

void bn_parallel_for(bn_pool *p, uint64_t n, uint64_t grain, bn_range_fn fn, void *arg)
{
    uint64_t chunks;
    if (n == 0 || !publish(p, n, grain, fn, arg, 1, &chunks)) return;
    in_worker = 1;
    run_chunk(p, fn, arg, n, chunks, 0); /* the caller keeps chunk 0 */
    in_worker = 0;
    finish(p, chunks);
}

void bn_parallel_begin(bn_pool *p, bn_section *s, uint64_t n, uint64_t grain, bn_range_fn fn, void *arg)
{
    s->pool = NULL;
    s->chunks = 0;
    if (n == 0 || !publish(p, n, grain, fn, arg, 0, &s->chunks)) return;
    s->pool = p;
}

void bn_parallel_end(bn_section *s)
{
    if (s->pool) finish(s->pool, s->chunks);
    s->pool = NULL;
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
