/*
 * prefix_io.h - I/O helpers of the npy, safetensors and generic readers:
 * reading a FILE whose first bytes were already consumed by format detection
 * (those bytes are replayed first: pipes cannot be rewound), and writing
 * little-endian element data.
 */
#ifndef BITNET_PREFIX_IO_H
#define BITNET_PREFIX_IO_H

#include "bitnet.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef struct {
    FILE *f;
    uint8_t pre[16];       /* replayed bytes (detection reads at most 8) */
    size_t pre_len, pre_pos;
    uint64_t consumed;     /* bytes delivered so far, prefix included */
} bn_pfx;

/* Returns 0, or -1 when the prefix is longer than bn_pfx can hold. */
static inline int bn_pfx_init(bn_pfx *s, FILE *f, const uint8_t *prefix, size_t n)
{
    memset(s, 0, sizeof *s);
    s->f = f;
    if (n > sizeof s->pre) return -1;
    if (n) memcpy(s->pre, prefix, n);
    s->pre_len = n;
    return 0;
}

/* Reads up to n bytes; a short count means end of input or an error
 * (ferror(s->f) tells which). */
static inline size_t bn_pfx_read(bn_pfx *s, void *buf, size_t n)
{
    uint8_t *p = buf;
    size_t got = 0;
    if (s->pre_pos < s->pre_len) {
        size_t k = s->pre_len - s->pre_pos;
        if (k > n) k = n;
        memcpy(p, s->pre + s->pre_pos, k);
        s->pre_pos += k;
        got = k;
    }
    if (got < n) got += fread(p + got, 1, n - got, s->f);
    s->consumed += got;
    return got;
}

/* Bytes left in f when it is a regular file (-1 when unknown: pipe, socket,
 * memory stream). */
static inline int64_t bn_file_remaining(FILE *f)
{
    struct stat sb;
    int fd = fileno(f);
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) return -1;
    off_t pos = ftello(f);
    if (pos < 0 || pos > sb.st_size) return -1;
    return (int64_t)(sb.st_size - pos);
}

/* Reads exactly `need` bytes into a fresh malloc'd buffer that grows as data
 * arrives, so that a header claiming a huge size costs memory only for the
 * bytes really present.  Returns 0 with *buf (at least 1 byte) and *got
 * (*got < need: input ended early; ferror tells a read error), or -1 when out
 * of memory. */
static inline int bn_pfx_read_alloc(bn_pfx *s, uint64_t need, uint8_t **buf, uint64_t *got)
{
    size_t cap = need < (1u << 20) ? (size_t)need : (1u << 20);
    uint8_t *b = malloc(cap ? cap : 1);
    uint64_t have = 0;
    *buf = NULL;
    *got = 0;
    if (!b) return -1;
    while (have < need) {
        if (have == cap) {
            size_t ncap = cap * 2;
            if ((uint64_t)ncap > need || ncap < cap) ncap = (size_t)need;
            uint8_t *nb = realloc(b, ncap);
            if (!nb) { free(b); return -1; }
            b = nb;
            cap = ncap;
        }
        size_t r = bn_pfx_read(s, b + have, cap - (size_t)have);
        have += r;
        if (r == 0) break;
    }
    *buf = b;
    *got = have;
    return 0;
}

/* Writes n elements of es bytes from p in little-endian order (npy.c). */
bitnet_status bn_write_le(FILE *f, const void *p, uint64_t n, size_t es);
/* Refuses what .npy and safetensors cannot hold: ternary dtypes and scales,
 * with a message saying to dequantize (npy.c). */
bitnet_status bn_check_plain_tensor(const bitnet_tensor *t, const char *fmt);

#endif
