/*
 * internal.h - helpers shared by the library's sources; not installed.
 * Detail messages, checked arithmetic, little-endian access.
 */
#ifndef BITNET_INTERNAL_H
#define BITNET_INTERNAL_H

#include "bitnet.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__)
#define BN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define BN_PRINTF(a, b)
#endif

/* Sets this thread's detail message and returns st, so that error paths read
 *     return bn_fail(BITNET_E_FORMAT, "tensor '%s': bad rank %u", name, rank); */
bitnet_status bn_fail(bitnet_status st, const char *fmt, ...) BN_PRINTF(2, 3);
/* Prepends "prefix: " to the current detail message (adds context on the way up). */
void bn_detail_prefix(const char *fmt, ...) BN_PRINTF(1, 2);

/* Checked size arithmetic: return nonzero on overflow. */
static inline int bn_mul_u64(uint64_t a, uint64_t b, uint64_t *r) { return __builtin_mul_overflow(a, b, r); }
static inline int bn_add_u64(uint64_t a, uint64_t b, uint64_t *r) { return __builtin_add_overflow(a, b, r); }
static inline int bn_mul_size(size_t a, size_t b, size_t *r) { return __builtin_mul_overflow(a, b, r); }
static inline int bn_add_size(size_t a, size_t b, size_t *r) { return __builtin_add_overflow(a, b, r); }
/* uint64 -> size_t, nonzero if it does not fit. */
static inline int bn_u64_to_size(uint64_t v, size_t *r) { if (v > (uint64_t)SIZE_MAX) return 1; *r = (size_t)v; return 0; }

/* Little-endian loads and stores (the host may be big-endian). */
static inline uint16_t bn_ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t bn_ld32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t bn_ld64(const uint8_t *p) { return (uint64_t)bn_ld32(p) | ((uint64_t)bn_ld32(p + 4) << 32); }
static inline void bn_st16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void bn_st32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void bn_st64(uint8_t *p, uint64_t v) { bn_st32(p, (uint32_t)v); bn_st32(p + 4, (uint32_t)(v >> 32)); }

static inline int bn_host_is_le(void) { const uint16_t one = 1; uint8_t b; memcpy(&b, &one, 1); return b == 1; }

/* A monotonic clock in milliseconds. */
static inline double bn_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The scalar definition of each activation (lib/act.c); BITNET_ACT_NONE is identity. */
float bn_act_ref(bitnet_act a, float v);

/* Byte-swaps n elements of `size` bytes in place when the host is big-endian. */
void bn_to_le(void *buf, size_t n, size_t size);
#define bn_from_le bn_to_le

#endif
