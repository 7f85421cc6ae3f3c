/*
 * int8_input.c - BitLinear on OpenCL through host pointers, weights kept on
 * the device: a float input (quantized on the device, q_acts_rows) against
 * the same activations quantized on the host's CPU backend and given as
 * int8 codes and scales (padded on the device, q_pad_i8).  Prints the
 * medians of REPS calls of each, end to end, and says whether the two
 * outputs differ (they must not).  A probe for the GPU machine, not part of
 * the library or its tests.
 *
 *   cc -O2 -Ilib -o int8_input tests/device/int8_input.c build/lib/libbitnet.a \
 *      -lOpenCL -lclblast -lopenblas -ljansson -lz -lm -lpthread
 *   ./int8_input OUT IN TOKENS        (default 4096 14336 64)
 */
#include "bitnet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe.h"

#define REPS 200
#define WARMUP 10

static int fail(const char *what)
{
    fprintf(stderr, "int8_input: %s: %s\n", what, bitnet_error_detail());
    return 1;
}

int main(int argc, char **argv)
{
    const uint64_t out = argc > 1 ? strtoull(argv[1], NULL, 10) : 4096, in = argc > 2 ? strtoull(argv[2], NULL, 10) : 14336,
                   T = argc > 3 ? strtoull(argv[3], NULL, 10) : 64;
    if (!out || !in || !T) return fprintf(stderr, "usage: int8_input OUT IN TOKENS\n"), 2;
    bitnet_backend *gpu, *cpu;
    if (bitnet_backend_create(&gpu, "opencl", 0) || bitnet_backend_create(&cpu, "cpu", 0)) return fail("backends");
    const size_t rb = bitnet_t2_row_bytes(in);
    uint8_t *t2 = malloc(out * rb);
    float *x = malloc(T * in * 4), *y = malloc(T * out * 4), *y8 = malloc(T * out * 4), *xs = malloc(T * 4);
    int8_t *xq = malloc(T * in);
    if (!t2 || !x || !y || !y8 || !xs || !xq) return fprintf(stderr, "int8_input: out of memory\n"), 1;
    srand(1);
    for (size_t i = 0; i < out * rb; i++) /* four codes 0..2 a byte */
        t2[i] = (uint8_t)(rand() % 3 | rand() % 3 << 2 | rand() % 3 << 4 | rand() % 3 << 6);
    for (size_t i = 0; i < T * in; i++) x[i] = (float)rand() / (float)RAND_MAX * 4.0f - 2.0f;
    const float d = 0.05f;
    bitnet_buffer *bw, *bd;
    if (bitnet_buffer_upload(gpu, t2, out * rb, &bw) || bitnet_buffer_upload(gpu, &d, sizeof d, &bd))
        return fail("weights");
    bitnet_ternary_matrix w = {0};
    w.t2 = bitnet_buffer_data(bw), w.d = bitnet_buffer_data(bd), w.out = out, w.in = in, w.kind = BITNET_SCALE_TENSOR;
    static double tf[REPS], tq[REPS], t8[REPS];
    for (int r = -WARMUP; r < REPS; r++) {
        const bitnet_bitlinear_io iof = {.tokens = T, .x = x, .y = y, .act = BITNET_ACT_NONE};
        const bitnet_bitlinear_io io8 = {.tokens = T, .xq = xq, .xs = xs, .y = y8, .act = BITNET_ACT_NONE};
        const double t0 = now_us();
        if (bitnet_bitlinear(gpu, &w, &iof)) return fail("float input");
        const double t1 = now_us();
        if (bitnet_quantize_acts(cpu, x, T, in, xq, xs)) return fail("host quantization");
        const double t2_ = now_us();
        if (bitnet_bitlinear(gpu, &w, &io8)) return fail("int8 input");
        const double t3 = now_us();
        if (r >= 0) tf[r] = t1 - t0, tq[r] = t2_ - t1, t8[r] = t3 - t2_;
    }
    printf("%llux%llu, %llu tokens: float input %.1f us; int8 input %.1f us (after %.1f us of host quantization)%s\n",
           (unsigned long long)out, (unsigned long long)in, (unsigned long long)T, median(tf, REPS), median(t8, REPS), median(tq, REPS),
           memcmp(y, y8, T * out * 4) ? "; OUTPUTS DIFFER" : "");
    return 0;
}
