/*
 * gguf_internal.h - shared by the GGUF reader/writer (gguf.c), its metadata
 * text codec (gguf_meta.c), the ternary block codecs (gguf_quant.c) and the
 * generic reader/writer (reader.c).  Not installed.
 */
#ifndef BITNET_GGUF_INTERNAL_H
#define BITNET_GGUF_INTERNAL_H

#include "bitnet.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* GGUF value types (the on-disk u32 codes). */
enum {
    GGUF_T_U8 = 0, GGUF_T_I8 = 1, GGUF_T_U16 = 2, GGUF_T_I16 = 3, GGUF_T_U32 = 4, GGUF_T_I32 = 5,
    GGUF_T_F32 = 6, GGUF_T_BOOL = 7, GGUF_T_STR = 8, GGUF_T_ARR = 9, GGUF_T_U64 = 10, GGUF_T_I64 = 11,
    GGUF_T_F64 = 12, GGUF_T_COUNT
};

/* ggml tensor types this library converts (see bitnet_gguf_type_name for all). */
enum {
    GGML_F32 = 0, GGML_F16 = 1, GGML_I8 = 24, GGML_I16 = 25, GGML_I32 = 26, GGML_I64 = 27,
    GGML_F64 = 28, GGML_BF16 = 30, GGML_TQ1_0 = 34, GGML_TQ2_0 = 35, GGML_I2_S = 36,
    GGML_MXFP4_OR_TL2 = 39 /* ggml's MXFP4; bitnet.cpp's TL2 (its TL1 is 38, I8_S 37) */
};

#define GGUF_QK 256             /* weights per TQ1_0 / TQ2_0 block */
#define GGUF_TQ1_BYTES 54       /* 48 base-3 bytes, 4 more, f16 d: 1.6875 bits per weight */
#define GGUF_TQ2_BYTES 66       /* 64 bytes of 2-bit codes, f16 d: 2.0625 bits per weight */
#define GGUF_I2S_BLOCK 128      /* bitnet.cpp I2_S (x86 layout): 128 weights in 32 bytes */
#define GGUF_MAX_DEPTH 3        /* nested arrays */
#define GGUF_DEFAULT_ALIGN 32
#define GGUF_MAX_ALIGN (1u << 20) /* padding to more would cost a writer megabytes of zeros per tensor */

static inline int bn_is_pow2(uint64_t v) { return v && !(v & (v - 1)); }
/* The ggml type code a dtype is written as; UINT32_MAX when there is none. */
uint32_t bn_ggml_of(bitnet_dtype d);

/* A growing byte buffer. */
typedef struct {
    uint8_t *p;
    size_t len, cap;
} bn_buf;
int bn_buf_add(bn_buf *b, const void *src, size_t n); /* nonzero when out of memory or over limit */
int bn_buf_reserve(bn_buf *b, size_t n);
void bn_buf_free(bn_buf *b);
/* Little-endian u32/u64 appended; BITNET_E_NOMEM on failure. */
bitnet_status bn_buf_put32(bn_buf *b, uint32_t v);
bitnet_status bn_buf_put64(bn_buf *b, uint64_t v);

/* Metadata values travel as GGUF v3 bytes ("raw": u32 type, then the value,
 * strings and arrays with u64 lengths) and as text (see bnt(5), GGUF
 * metadata).  raw is validated by the encoder; text by the decoder. */
bitnet_status bn_gguf_meta_encode(const uint8_t *raw, size_t len, char **text);
bitnet_status bn_gguf_meta_decode(const char *text, bn_buf *raw);
/* Size of one complete value at raw[0..len) (type included); 0 when malformed. */
size_t bn_gguf_raw_size(const uint8_t *raw, size_t len, int depth);

/* Ternary codecs.  Codes are q + 1 in {0, 1, 2} (3 is refused on reading). */
/* One TQ2_0 block's 64 code bytes are two T2 blocks as they are: *bad is set
 * when a code 3 appears.  TQ1_0: 54-byte block <-> 256 int8 q. */
void bn_tq1_decode(const uint8_t *blk, int8_t *q);
void bn_tq1_encode(const int8_t *q, uint8_t *blk);
/* bitnet.cpp I2_S, x86 layout: n weights (n % 128 == 0) -> q; returns the
 * index of the first code 3, or n when there is none. */
uint64_t bn_i2s_decode(const uint8_t *src, uint64_t n, int8_t *q);

/* The GGUF writer behind the generic writer (reader.c). */
typedef struct bn_gguf_writer bn_gguf_writer;
/* "gguf:KEY" of metadata entry i (the generic reader shows GGUF keys so). */
const char *bn_gguf_reader_prefixed_key(const bitnet_gguf_reader *r, size_t i);
bitnet_status bn_gguf_writer_create(bn_gguf_writer **w, FILE *f);
bitnet_status bn_gguf_writer_meta(bn_gguf_writer *w, const char *key, const char *value);
bitnet_status bn_gguf_writer_put(bn_gguf_writer *w, const bitnet_tensor *t);
bitnet_status bn_gguf_writer_finish(bn_gguf_writer *w);
void bn_gguf_writer_free(bn_gguf_writer *w);

#endif
