/* testutil.c - see testutil.h. */
#include "testutil.h"

#include "bitnet.h"

#include <dirent.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <stdlib.h>
#include <string.h>

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

size_t tu_t2_row_bytes(uint64_t in) { return (size_t)((in + 127) / 128 * 32); }

void tu_t2_pack(const int8_t *q, uint64_t out, uint64_t in, uint8_t *t2)
{
    const size_t rb = tu_t2_row_bytes(in);
    for (uint64_t o = 0; o < out; o++) {
        uint8_t *row = t2 + o * rb;
        memset(row, 0x55, rb); /* code 1 everywhere: padding */
        for (uint64_t c = 0; c < in; c++) {
            const uint64_t b = c / 128, k = (c % 128) / 32, j = c % 32;
            uint8_t *p = &row[b * 32 + j];
            *p = (uint8_t)((*p & ~(3u << (2 * k))) | ((unsigned)(q[o * in + c] + 1) << (2 * k)));
        }
    }
}

int tu_temps_in(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += bitnet_outfile_is_temp(e->d_name);
    closedir(d);
    return n;
}

int tu_has_avxvnni(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) return 0;
    __get_cpuid_count(7, 1, &a, &b, &c, &d);
    return (a >> 4) & 1;
#else
    return 0;
#endif
}
