/*
 * bnt_format.h - byte layout constants of the .bnt container and the helpers
 * that bnt_write.c and bnt_read.c share.  bnt(5) is the specification; every
 * number here appears there.
 */
#ifndef BITNET_BNT_FORMAT_H
#define BITNET_BNT_FORMAT_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

#define BN_BNT_MAGIC "\x89" "BNT\r\n\x1a\n" /* 8 bytes, first in the file */
#define BN_BNT_END_MAGIC "TNB\x89"         /* 4 bytes, last in the file */
#define BN_BNT_MINOR 0

/* file header: magic, u16 major, u16 minor, u32 flags, u32 chunk_size,
 * u32 meta_len; then meta_len bytes of metadata, then u32 CRC. */
#define BN_BNT_FIXED_HEADER 24
/* record tags */
#define BN_BNT_TAG_TENSOR "TNSR"
#define BN_BNT_TAG_INDEX "INDX"
#define BN_BNT_TAG_END "BEND"
/* tensor header body without name and dims: u16 name_len, u8 dtype, u8 rank,
 * u8 scale_kind, u8 compression, u32 group, u64 payload_bytes, u64 n_scales */
#define BN_BNT_TENSOR_FIXED 26
/* chunk header: u32 raw_len, u32 stored_len, u32 raw_crc, u32 stored_crc,
 * u32 header_crc (over the first 16 bytes) */
#define BN_BNT_CHUNK_HEADER 20
/* trailer: "BEND", u64 index_offset, u64 tensor_count, u64 trailer_offset,
 * u32 CRC (over the 28 bytes before it), end magic */
#define BN_BNT_TRAILER 36

#define BN_BNT_MIN_CHUNK 4096u
#define BN_BNT_MAX_CHUNK (64u << 20)
#define BN_BNT_MAX_TENSORS (1u << 20)
#define BN_BNT_MAX_THREADS 64

#define BN_BNT_COMP_NONE 0
#define BN_BNT_COMP_DEFLATE 1

/* Bytes of a tensor header body for a name of name_len bytes and rank dims. */
static inline size_t bn_bnt_tensor_header_len(size_t name_len, unsigned rank)
{
    return BN_BNT_TENSOR_FIXED + name_len + 8u * rank;
}

/* 1 if s[0..n) is well-formed UTF-8 without NUL bytes (defined in bnt_read.c). */
int bn_bnt_utf8_ok(const uint8_t *s, size_t n);

/* A list of unique names with an offset each, looked up by hash: the index of
 * the tensors (both sides) and the metadata keys.  Defined in bnt_read.c. */
typedef struct {
    char **name;
    uint64_t *off;
    size_t n, cap;
    uint32_t *slot;  /* open addressing, entry index + 1, 0 = empty */
    size_t nslot;    /* power of two, at least 2 * cap */
} bn_bnt_names;

/* 0 added, 1 duplicate (not added), -1 out of memory. */
int bn_bnt_names_add(bn_bnt_names *s, const char *name, size_t len, uint64_t off);
/* Entry index of name, or SIZE_MAX. */
size_t bn_bnt_names_find(const bn_bnt_names *s, const char *name, size_t len);
void bn_bnt_names_free(bn_bnt_names *s);

#endif
