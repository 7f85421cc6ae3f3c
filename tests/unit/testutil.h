/*
 * testutil.h - helpers shared by the unit tests (tests/unit/testutil.c is
 * linked into every one): the seeded random generators they draw data from,
 * and a T2 packer written from bnt(5) alone.
 * Each test keeps its own state and seed, so its data does not depend on
 * what other tests draw.
 */
#ifndef BITNET_TESTUTIL_H
#define BITNET_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* One xorshift64 step (13, 7, 17) of *state (nonzero); returns the new state. */
uint64_t tu_xorshift(uint64_t *state);
/* 32 random bits: bits 16..47 of the next xorshift state. */
uint32_t tu_rand32(uint64_t *state);
/* Uniform in [-1, 1) from 32 bits (tu_rand32). */
float tu_randf32(uint64_t *state);
/* Uniform in [-1, 1) from the top 53 bits of the next xorshift state. */
float tu_randf53(uint64_t *state);
/* n floats (malloc'd, aborts on failure) from the LCG seed = seed * 1664525
 * + 1013904223: v = (seed >> 9) % 20001 - 10000, x = (v ? v : zero) / div. */
/* T2 rows [out x in] from codes q in {-1,0,1}, written from the layout in
 * bnt(5) and independent of the library; tu_t2_row_bytes is ceil(in/128)*32. */
size_t tu_t2_row_bytes(uint64_t in);
void tu_t2_pack(const int8_t *q, uint64_t out, uint64_t in, uint8_t *t2);
float *tu_lcg_floats(uint64_t n, uint32_t seed, int zero, float div);

/* Whether the CPU has AVX-VNNI (CPUID leaf 7, sub-leaf 1, EAX bit 4), asked
 * apart from the library; 0 off x86. */
int tu_has_avxvnni(void);

/* Temporaries of outputs (bitnet_outfile_is_temp) in dir; -1 when it cannot be read. */
int tu_temps_in(const char *dir);

#endif
