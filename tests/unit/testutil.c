/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <stdlib.h>

uint64_t tu_xorshift(uint64_t *state)
{
    uint64_t s = *state;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return *state = s;
}

uint32_t tu_rand32(uint64_t *state) { return (uint32_t)(tu_xorshift(state) >> 16); }

float tu_randf32(uint64_t *state) { return (float)((double)tu_rand32(state) / 4294967296.0 * 2.0 - 1.0); }

float tu_randf53(uint64_t *state)
{
    return (float)((double)(tu_xorshift(state) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

float *tu_lcg_floats(uint64_t n, uint32_t seed, int zero, float div)
{
    float *x = calloc(n ? n : 1, sizeof *x);
    if (!x) abort();
    for (uint64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        int v = (int)(seed >> 9) % 20001 - 10000;
        x[i] = (float)(v ? v : zero) / div;
    }
    return x;
}
