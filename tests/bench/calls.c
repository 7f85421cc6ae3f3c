/* calls.c - the cost of repeated BitLinear calls on the CPU backend as a
 * caller sees it: minor page faults per call (getrusage) and the best and
 * mean wall time of REPS calls, 4096 x 14336 ternary weights (tensor scale),
 * float input and output.  Page faults count fresh memory touched per call,
 * which a machine's noise does not change.
 *   make && cc -O2 -Ilib -o calls tests/bench/calls.c build/lib/libbitnet.a \
 *       $(pkg-config --libs OpenCL zlib jansson) -lclblast -lopenblas -lm -lpthread
 *   ./calls TOKENS THREADS REPS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "bitnet.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long minor_faults(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
}

int main(int argc, char **argv)
{
    const uint64_t in = 4096, out = 14336, T = argc > 1 ? strtoull(argv[1], NULL, 10) : 64;
    const int threads = argc > 2 ? atoi(argv[2]) : 0, reps = argc > 3 ? atoi(argv[3]) : 50;
    bitnet_backend *be;
    if (T == 0 || reps <= 0 || bitnet_backend_create(&be, "cpu", threads)) {
        fprintf(stderr, "usage: calls TOKENS THREADS REPS\n");
        return 2;
    }
    const size_t rb = bitnet_t2_row_bytes(in);
    uint8_t *t2 = malloc(out * rb);
    float *x = malloc(T * in * sizeof(float)), *y = malloc(T * out * sizeof(float)), d = 0.01f;
    if (!t2 || !x || !y) return 2;
    srand(1);
    for (size_t i = 0; i < out * rb; i++) {
        uint8_t b = 0;
        for (int k = 0; k < 4; k++) b |= (uint8_t)((rand() % 3) << (2 * k));
        t2[i] = b;
    }
    for (size_t i = 0; i < T * in; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    const bitnet_ternary_matrix w = {t2, out, in, BITNET_SCALE_TENSOR, 0, &d};
    const bitnet_bitlinear_io io = {.tokens = T, .x = x, .y = y};
    for (int i = 0; i < 5; i++)
        if (bitnet_bitlinear(be, &w, &io)) {
            fprintf(stderr, "calls: %s\n", bitnet_error_detail());
            return 1;
        }
    const long f0 = minor_faults();
    double best = 1e9, total = 0;
    for (int i = 0; i < reps; i++) {
        const double t0 = now();
        bitnet_bitlinear(be, &w, &io);
        const double t = now() - t0;
        total += t;
        if (t < best) best = t;
    }
    printf("%s, %llu tokens: %.1f minor faults a call, best %.3f ms, mean %.3f ms of %d calls\n",
           bitnet_backend_describe(be), (unsigned long long)T, (double)(minor_faults() - f0) / reps, best * 1e3,
           total / reps * 1e3, reps);
    bitnet_backend_free(be);
    free(t2);
    free(x);
    free(y);
    return 0;
}
