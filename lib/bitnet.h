/*
 * bitnet.h - the one public header of libbitnet.
 *
 * libbitnet stores, converts, quantizes and multiplies ternary (BitNet b1.58)
 * neural-network weights.  It backs the bitnet-* command-line tools, which use
 * nothing but this header.
 *
 * Conventions (zstd style):
 *   - every fallible call returns a bitnet_status; BITNET_OK is 0;
 *   - bitnet_strerror() names a status, bitnet_error_detail() gives the last
 *     detailed message of the calling thread (which tensor, which byte offset);
 *   - the library never prints and never exits; the caller owns buffers;
 *   - constructors and destructors pair up (_create/_free), _free(NULL) is a no-op;
 *   - every size is checked for overflow before use.
 *
 * Sections: status - dtypes - tensors - .bnt container - npy - safetensors -
 * GGUF - generic readers/writers - backends - quantization - BitLinear and matmul -
 * tensor ops - linear algebra.
 */
#ifndef BITNET_H
#define BITNET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BITNET_VERSION_MAJOR 0
#define BITNET_VERSION_MINOR 1
#define BITNET_VERSION_PATCH 0
#define BITNET_VERSION_STRING "0.1.0"
const char *bitnet_version(void);

/* ==== status ============================================================ */

typedef enum {
    BITNET_OK = 0,
    BITNET_END,              /* no more tensors: not an error */
    BITNET_E_INVALID,        /* invalid argument from the caller */
    BITNET_E_NOMEM,          /* allocation failed */
    BITNET_E_IO,             /* read/write/seek failed at the OS level */
    BITNET_E_FORMAT,         /* malformed input (bad magic, bad structure) */
    BITNET_E_VERSION,        /* unsupported format version */
    BITNET_E_CHECKSUM,       /* CRC mismatch */
    BITNET_E_TRUNCATED,      /* input ended early */
    BITNET_E_LIMIT,          /* input exceeds a hard limit */
    BITNET_E_OVERFLOW,       /* a size computation overflowed */
    BITNET_E_UNSUPPORTED,    /* dtype/feature not supported here */
    BITNET_E_SHAPE,          /* shapes do not fit together */
    BITNET_E_DTYPE,          /* wrong dtype for the operation */
    BITNET_E_NOT_FOUND,      /* no tensor of that name */
    BITNET_E_NUMERIC,        /* NaN or Inf where finite values are required */
    BITNET_E_DEVICE,         /* OpenCL (or other device) failure */
    BITNET_E_BUILD,          /* OpenCL program failed to build */
    BITNET_E_DEVICE_MEMORY,  /* device allocation failed / exceeds limits */
    BITNET_E_NO_DEVICE,      /* the requested device does not exist */
    BITNET_STATUS_COUNT
} bitnet_status;

const char *bitnet_strerror(bitnet_status st);
/* The last detailed message set by a failing call in this thread ("" if none). */
const char *bitnet_error_detail(void);
void bitnet_error_clear(void);

/* ==== dtypes ============================================================ */

typedef enum {
    BITNET_F32 = 0,
    BITNET_F16 = 1,
    BITNET_BF16 = 2,
    BITNET_F64 = 3,
    BITNET_I8 = 4,
    BITNET_I16 = 5,
    BITNET_I32 = 6,
    BITNET_U8 = 7,
    BITNET_I64 = 8,
    /* Ternary codes {-1,0,+1}.  T2: 2 bits per weight in blocks of 128 weights
     * (32 bytes), rows padded to whole blocks.  T3: base 3, 5 trits per byte,
     * rows padded to whole bytes.  See bnt(5) for the exact layouts. */
    BITNET_T2 = 16,
    BITNET_T3 = 17,
    BITNET_DTYPE_INVALID = 255
} bitnet_dtype;

#define BITNET_T2_BLOCK 128 /* weights per T2 block */
#define BITNET_T2_BLOCK_BYTES 32
#define BITNET_T3_PER_BYTE 5

const char *bitnet_dtype_name(bitnet_dtype t);           /* "f32", ..., "t2", "t3"; NULL if invalid */
bitnet_status bitnet_dtype_parse(const char *name, bitnet_dtype *out);
int bitnet_dtype_valid(bitnet_dtype t);
int bitnet_dtype_is_float(bitnet_dtype t);               /* f32 f16 bf16 f64 */
int bitnet_dtype_is_int(bitnet_dtype t);                 /* i8 i16 i32 i64 u8 */
int bitnet_dtype_is_ternary(bitnet_dtype t);             /* t2 t3 */
size_t bitnet_dtype_size(bitnet_dtype t);                /* bytes per element; 0 for ternary */

/* Scalar conversions, round to nearest even; NaN stays NaN, overflow -> Inf. */
uint16_t bitnet_f32_to_f16(float f);
float bitnet_f16_to_f32(uint16_t h);
uint16_t bitnet_f32_to_bf16(float f);
float bitnet_bf16_to_f32(uint16_t h);
uint16_t bitnet_f64_to_f16(double d); /* rounds once, from double */
uint16_t bitnet_f64_to_bf16(double d);

/* Element-wise cast of n elements between non-ternary dtypes.  Floats round to
 * nearest even; float -> int rounds to nearest even and saturates (NaN -> 0). */
bitnet_status bitnet_cast(bitnet_dtype from, const void *src, bitnet_dtype to, void *dst, size_t n);

/* ==== tensors =========================================================== */

#define BITNET_MAX_RANK 8
#define BITNET_MAX_NAME 1024               /* bytes, excluding the NUL */
#define BITNET_MAX_ELEMENTS (1ULL << 48)   /* per tensor */

typedef enum {
    BITNET_SCALE_NONE = 0,
    BITNET_SCALE_TENSOR = 1,  /* one scale */
    BITNET_SCALE_ROW = 2,     /* one scale per row (rows = product of all dims but the last) */
    BITNET_SCALE_GROUP = 3    /* one scale per group of `group` consecutive elements of a row */
} bitnet_scale_kind;

/* Meaning of scales: for ternary dtypes the scale is d, w ~= q * d.  For i8
 * activations the scale is s, x ~= q / s (s = 127 / absmax). */
typedef struct {
    char name[BITNET_MAX_NAME + 1];
    bitnet_dtype dtype;
    uint32_t rank;                      /* 0..BITNET_MAX_RANK */
    uint64_t dims[BITNET_MAX_RANK];     /* logical shape, row-major (C order) */
    bitnet_scale_kind scale_kind;
    uint32_t group;                     /* for BITNET_SCALE_GROUP, else 0 */
} bitnet_tensor_info;

typedef struct {
    bitnet_tensor_info info;
    void *data;           /* bitnet_tensor_data_bytes() bytes */
    float *scales;        /* bitnet_tensor_n_scales() floats, or NULL */
} bitnet_tensor;

/* Product of dims (1 for rank 0), checked against BITNET_MAX_ELEMENTS. */
bitnet_status bitnet_tensor_elements(const bitnet_tensor_info *info, uint64_t *out);
/* rows = product of all dims but the last (1 for rank <= 1); cols = last dim (1 for rank 0). */
void bitnet_tensor_rows_cols(const bitnet_tensor_info *info, uint64_t *rows, uint64_t *cols);
/* Bytes of the payload (elements, or packed codes for ternary), checked. */
bitnet_status bitnet_tensor_data_bytes(const bitnet_tensor_info *info, uint64_t *out);
/* Number of f32 scales implied by scale_kind/group (0 for NONE), checked. */
bitnet_status bitnet_tensor_n_scales(const bitnet_tensor_info *info, uint64_t *out);
/* Validates dtype, rank, dims, scale kind and group; sets a detail message. */
bitnet_status bitnet_tensor_info_check(const bitnet_tensor_info *info);
/* Allocates data and scales for t->info (zeroed).  Frees nothing. */
bitnet_status bitnet_tensor_alloc(bitnet_tensor *t);
/* Frees data and scales and zeroes the struct (not the struct itself). */
void bitnet_tensor_release(bitnet_tensor *t);
/* Formats a shape as "[512, 784]" into buf (always NUL-terminated). */
const char *bitnet_shape_str(const bitnet_tensor_info *info, char *buf, size_t size);
/* Glob match of a tensor name (fnmatch without FNM_PATHNAME): 1 on match. */
int bitnet_name_match(const char *glob, const char *name);

/* ==== the .bnt container (see bnt(5)) ==================================== */

#define BITNET_BNT_VERSION 1
#define BITNET_BNT_DEFAULT_CHUNK (1u << 20)
#define BITNET_BNT_MAX_META (16u << 20)     /* bytes of metadata */
#define BITNET_BNT_MAX_HEADER (1u << 16)    /* bytes of one tensor header */

typedef struct {
    int level;            /* zlib level 0..9; 0 = stored; -1 = default (6) */
    uint32_t chunk_size;  /* uncompressed bytes per chunk; 0 = default (1 MiB) */
    int threads;          /* compression threads; 0 = 1 */
    int no_index;         /* 1: do not write the name index */
} bitnet_bnt_writer_opts;

typedef struct bitnet_bnt_writer bitnet_bnt_writer;
/* f stays owned by the caller and need not be seekable. */
bitnet_status bitnet_bnt_writer_create(bitnet_bnt_writer **w, FILE *f, const bitnet_bnt_writer_opts *opts);
/* Adds a metadata string; all metadata must be added before the first tensor. */
bitnet_status bitnet_bnt_writer_meta(bitnet_bnt_writer *w, const char *key, const char *value);
/* Streaming: begin, write payload bytes then scale bytes (f32 little-endian) in
 * pieces of any size, end.  end fails if the byte count is not exact. */
bitnet_status bitnet_bnt_writer_begin(bitnet_bnt_writer *w, const bitnet_tensor_info *info);
bitnet_status bitnet_bnt_writer_write(bitnet_bnt_writer *w, const void *buf, size_t n);
bitnet_status bitnet_bnt_writer_end(bitnet_bnt_writer *w);
/* Convenience: the whole tensor at once. */
bitnet_status bitnet_bnt_writer_put(bitnet_bnt_writer *w, const bitnet_tensor *t);
/* Writes the index and the trailer and flushes f.  Required for a valid file. */
bitnet_status bitnet_bnt_writer_finish(bitnet_bnt_writer *w);
void bitnet_bnt_writer_free(bitnet_bnt_writer *w);

typedef struct bitnet_bnt_reader bitnet_bnt_reader;
/* Reads and checks the file header.  f need not be seekable. */
bitnet_status bitnet_bnt_reader_create(bitnet_bnt_reader **r, FILE *f);
size_t bitnet_bnt_reader_meta_count(const bitnet_bnt_reader *r);
const char *bitnet_bnt_reader_meta_key(const bitnet_bnt_reader *r, size_t i);
const char *bitnet_bnt_reader_meta_value(const bitnet_bnt_reader *r, size_t i);
const char *bitnet_bnt_reader_meta_get(const bitnet_bnt_reader *r, const char *key); /* NULL if absent */
/* Advances to the next tensor (skipping any unread data of the current one,
 * verifying its CRCs) and fills info.  Returns BITNET_END after the last
 * tensor once the index and trailer have been verified. */
bitnet_status bitnet_bnt_reader_next(bitnet_bnt_reader *r, bitnet_tensor_info *info);
/* Reads up to n bytes of the current tensor's payload-then-scales stream;
 * *got = 0 at its end. */
bitnet_status bitnet_bnt_reader_read(bitnet_bnt_reader *r, void *buf, size_t n, size_t *got);
/* Reads the rest of the current tensor into t (allocated; t->info filled). */
bitnet_status bitnet_bnt_reader_load(bitnet_bnt_reader *r, bitnet_tensor *t);
/* On a seekable file with an index: positions on the tensor `name` so that
 * the next call to bitnet_bnt_reader_read/load reads it.  BITNET_E_NOT_FOUND
 * if absent, BITNET_E_UNSUPPORTED if the file is not seekable or has no index. */
bitnet_status bitnet_bnt_reader_seek(bitnet_bnt_reader *r, const char *name, bitnet_tensor_info *info);
/* Compressed (on-disk) bytes of the current tensor's data seen so far (after
 * a full read: all of it). */
uint64_t bitnet_bnt_reader_stored_bytes(const bitnet_bnt_reader *r);
void bitnet_bnt_reader_free(bitnet_bnt_reader *r);

/* ==== NumPy .npy ========================================================= */

/* Reads one .npy array (v1/v2/v3; <f4 <f2 <f8 |i1 |u1 <i2 <i4 <i8; C order;
 * Fortran order is transposed to C order).  prefix/prefix_len are bytes
 * already consumed from f (by format detection), may be NULL/0. */
bitnet_status bitnet_npy_read(FILE *f, const uint8_t *prefix, size_t prefix_len, bitnet_tensor *t);
/* Writes t (non-ternary dtypes) as .npy v1 (v2 when the header needs it). */
bitnet_status bitnet_npy_write(FILE *f, const bitnet_tensor *t);

/* ==== safetensors ======================================================== */

#define BITNET_ST_MAX_HEADER (100u << 20)

typedef struct bitnet_st_reader bitnet_st_reader;
/* Reads and validates the header (JSON, offsets contiguous, non-overlapping,
 * covering the data exactly).  Works on pipes: tensors are returned in the
 * order of their offsets. */
bitnet_status bitnet_st_reader_create(bitnet_st_reader **r, FILE *f, const uint8_t *prefix, size_t prefix_len);
size_t bitnet_st_reader_meta_count(const bitnet_st_reader *r);
const char *bitnet_st_reader_meta_key(const bitnet_st_reader *r, size_t i);
const char *bitnet_st_reader_meta_value(const bitnet_st_reader *r, size_t i);
bitnet_status bitnet_st_reader_next(bitnet_st_reader *r, bitnet_tensor *t); /* BITNET_END at the end */
/* The header's tensors, in the order next() returns them (of their offsets). */
size_t bitnet_st_reader_tensor_count(const bitnet_st_reader *r);
const char *bitnet_st_reader_tensor_name(const bitnet_st_reader *r, size_t i); /* NULL past the end */
void bitnet_st_reader_free(bitnet_st_reader *r);

/* Writes all tensors (non-ternary dtypes) with optional string metadata. */
bitnet_status bitnet_st_write(FILE *f, const bitnet_tensor *const *tensors, size_t n,
                              const char *const *meta_keys, const char *const *meta_values, size_t n_meta);

/* ==== GGUF (llama.cpp / ggml files, version 3; 1 and 2 read) ============= */

#define BITNET_GGUF_MAX_TENSORS (1u << 20)
#define BITNET_GGUF_MAX_KV (1u << 20)
#define BITNET_GGUF_MAX_HEADER (1ull << 30)   /* bytes of metadata + tensor infos */
#define BITNET_GGUF_MAX_DIMS 4
/* GGUF metadata travels through .bnt and the generic reader/writer as string
 * metadata "gguf:KEY" = "TYPE:TEXT" (see bnt(5), GGUF metadata). */
#define BITNET_GGUF_META_PREFIX "gguf:"

typedef struct {
    char name[BITNET_MAX_NAME + 1];
    uint32_t type;            /* ggml type code */
    uint32_t n_dims;
    uint64_t ne[BITNET_GGUF_MAX_DIMS]; /* ggml order: ne[0] is the row length */
    uint64_t offset;          /* from the start of the data section */
    uint64_t bytes;
    /* 1 for a type whose size is not known here (an unknown code, or 39 not
     * laid out as MXFP4, e.g. bitnet.cpp's TL2): bytes is then the gap up to
     * the next tensor's data, or to the end of the file for the last one (0
     * on a pipe, where the end is not known). */
    uint32_t size_from_layout;
} bitnet_gguf_tensor_desc;

typedef struct bitnet_gguf_reader bitnet_gguf_reader;
/* Reads and checks the header (counts, lengths, types, dims, offsets,
 * alignment, overlaps; against the file size when f is a regular file).
 * prefix: bytes already consumed from f, as for bitnet_st_reader_create.
 * Tensors come in the order of the tensor infos when f is seekable, in the
 * order of their data offsets on a pipe. */
bitnet_status bitnet_gguf_reader_create(bitnet_gguf_reader **r, FILE *f, const uint8_t *prefix, size_t prefix_len);
uint32_t bitnet_gguf_reader_version(const bitnet_gguf_reader *r);
uint32_t bitnet_gguf_reader_alignment(const bitnet_gguf_reader *r);
uint64_t bitnet_gguf_reader_data_offset(const bitnet_gguf_reader *r); /* file offset of the data section */
size_t bitnet_gguf_reader_meta_count(const bitnet_gguf_reader *r);
const char *bitnet_gguf_reader_meta_key(const bitnet_gguf_reader *r, size_t i);   /* the GGUF key */
const char *bitnet_gguf_reader_meta_value(const bitnet_gguf_reader *r, size_t i); /* "TYPE:TEXT" */
size_t bitnet_gguf_reader_tensor_count(const bitnet_gguf_reader *r);
const bitnet_gguf_tensor_desc *bitnet_gguf_reader_tensor(const bitnet_gguf_reader *r, size_t i); /* info order */
/* The next tensor: F32 F16 BF16 F64 I8 I16 I32 I64 as they are; TQ2_0 as t2
 * and TQ1_0 as t3 with one scale per 256-weight block (BITNET_SCALE_GROUP,
 * group 256); I2_S (bitnet.cpp) as t2 with its tensor scale.  Another ggml
 * type, known or not, gives BITNET_E_UNSUPPORTED naming it and its code,
 * after which next() goes on with the tensor after it.  BITNET_END at the end. */
bitnet_status bitnet_gguf_reader_next(bitnet_gguf_reader *r, bitnet_tensor *t);
/* Seekable input: loads the tensor `name` (BITNET_E_NOT_FOUND if absent);
 * BITNET_E_UNSUPPORTED on a pipe. */
bitnet_status bitnet_gguf_reader_find(bitnet_gguf_reader *r, const char *name, bitnet_tensor *t);
void bitnet_gguf_reader_free(bitnet_gguf_reader *r);
/* "f32", "q4_K", "tq2_0", "i2_s", ...; NULL for an unknown code (39 gives
 * "mxfp4", ggml's name; bitnet.cpp uses 37 to 39 for I8_S, TL1, TL2). */
const char *bitnet_gguf_type_name(uint32_t type);
/* The largest relative change |f16(d) - d| / |d| that writing the ternary
 * tensor t to GGUF (f16 block scales) makes to its scales (0 when exact). */
bitnet_status bitnet_gguf_scale_error(const bitnet_tensor *t, double *max_rel);

/* ==== generic readers and writers (format by magic bytes) ================= */

typedef enum {
    BITNET_FMT_AUTO = 0,
    BITNET_FMT_BNT,
    BITNET_FMT_NPY,
    BITNET_FMT_SAFETENSORS,
    BITNET_FMT_GGUF
} bitnet_format;

const char *bitnet_format_name(bitnet_format f);
bitnet_status bitnet_format_parse(const char *name, bitnet_format *out);
/* Guess from the first bytes (at least 8 are needed for a safe guess). */
bitnet_format bitnet_format_detect(const uint8_t *head, size_t n);

typedef struct bitnet_reader bitnet_reader;
/* Opens any supported format on f (pipes included).  fmt AUTO sniffs magic. */
bitnet_status bitnet_reader_create(bitnet_reader **r, FILE *f, bitnet_format fmt);
bitnet_format bitnet_reader_format(const bitnet_reader *r);
size_t bitnet_reader_meta_count(const bitnet_reader *r);
const char *bitnet_reader_meta_key(const bitnet_reader *r, size_t i);
const char *bitnet_reader_meta_value(const bitnet_reader *r, size_t i);
/* Next whole tensor (owned by the caller: bitnet_tensor_release). BITNET_END at the end. */
bitnet_status bitnet_reader_next(bitnet_reader *r, bitnet_tensor *t);
/* The tensor called name (seeks through an indexed .bnt; otherwise scans
 * forward).  BITNET_E_NOT_FOUND if absent. */
bitnet_status bitnet_reader_find(bitnet_reader *r, const char *name, bitnet_tensor *t);
/* Whether the input holds a tensor called name, as its header tells before
 * any tensor is read: 1 yes, 0 no, -1 not known up front (.bnt and .npy,
 * whose tensors are known as they come).  Safetensors and GGUF list their
 * tensors in the header; the first call builds a hashed index of them. */
int bitnet_reader_has_tensor(bitnet_reader *r, const char *name);
/* On-disk bytes of the tensor last returned by next/find: the compressed size
 * for .bnt, the raw data size for .npy and safetensors. */
uint64_t bitnet_reader_stored_bytes(const bitnet_reader *r);
/* The GGUF reader under r (NULL when r reads another format): for the
 * listing of types this library does not convert. */
bitnet_gguf_reader *bitnet_reader_gguf(bitnet_reader *r);
void bitnet_reader_free(bitnet_reader *r);

/* The Hugging Face BitNet checkpoint layout (transformers, integrations/
 * bitnet.py): a linear layer's ternary weight [out, in] is a u8 tensor
 * [out/4, in] holding four 2-bit codes (0, 1, 2 = -1, 0, +1) per byte, field
 * i (bits 2i, 2i+1) of packed row p being row i*(out/4) + p, next to a
 * "weight_scale" tensor (one value, or one per output row).  Which way the
 * scale goes depends on the layer class the checkpoint names: AutoBitLinear
 * (the published BitNet b1.58 checkpoints) multiplies the output by it,
 * w = q * s; BitLinear divides, w = q / s. */
typedef enum { BITNET_HF_SCALE_MUL = 0, BITNET_HF_SCALE_DIV = 1 } bitnet_hf_scale_op;
/* packed (u8, rank 2) + scale (float, 1 or out elements) -> out: t2 [out, in]
 * with scale kind tensor or row (d = s, or 1/s rounded to f32 for DIV). */
bitnet_status bitnet_hf_unpack(const bitnet_tensor *packed, const bitnet_tensor *scale, bitnet_hf_scale_op op,
                               bitnet_tensor *out);
/* The same weights as f32, computed as the integration does: q * s or q / s
 * (one rounding, from the scale as stored). */
bitnet_status bitnet_hf_dequantize(const bitnet_tensor *packed, const bitnet_tensor *scale, bitnet_hf_scale_op op,
                                   bitnet_tensor *out);

typedef struct bitnet_writer bitnet_writer;
/* .bnt streams each tensor out; .npy takes exactly one tensor; safetensors
 * collects tensors and writes them at finish; GGUF spools tensor data to a
 * temporary file and writes the header then the data at finish (metadata
 * "gguf:KEY" becomes the typed GGUF key KEY, other keys strings; t2 is
 * written as TQ2_0, t3 as TQ1_0, rows a multiple of 256 long). */
bitnet_status bitnet_writer_create(bitnet_writer **w, FILE *f, bitnet_format fmt, const bitnet_bnt_writer_opts *bnt_opts);
bitnet_status bitnet_writer_meta(bitnet_writer *w, const char *key, const char *value);
bitnet_status bitnet_writer_put(bitnet_writer *w, const bitnet_tensor *t);
bitnet_status bitnet_writer_finish(bitnet_writer *w);
void bitnet_writer_free(bitnet_writer *w);

/* ==== output files ======================================================== */

/* Writing a file without ever destroying what the path names.  A regular file
 * or a new path is written to a temporary file in the same directory, named
 * ".NAME.bnpart.XXXXXX" (bitnet_outfile_is_temp), and renamed over the target
 * by _commit, keeping a replaced file's permission bits: readers see the old
 * file or the new one whole, never a mixture, and a failed write leaves the
 * target as it was.  A symbolic link is followed (the file it names is
 * replaced, the link stays).  A character or block device, a FIFO or a socket
 * is written directly, every write and the final close checked.  A directory,
 * or a target whose directory cannot be written, fails here (BITNET_E_IO)
 * before any work is done. */
typedef struct bitnet_outfile bitnet_outfile;
bitnet_status bitnet_outfile_open(bitnet_outfile **o, const char *path);
/* What _open would refuse, checked without creating or opening anything: for
 * a tool that writes only after long work.  BITNET_E_IO with the reason. */
bitnet_status bitnet_outfile_check(const char *path);
/* The stream to write to (owned by o). */
FILE *bitnet_outfile_stream(const bitnet_outfile *o);
/* Flushes and checks every write, syncs, renames into place; frees o (also on
 * failure, where the temporary is removed and the target left as it was). */
bitnet_status bitnet_outfile_commit(bitnet_outfile *o);
/* Removes the temporary, leaves the target as it was; frees o.  NULL: no-op. */
void bitnet_outfile_abort(bitnet_outfile *o);
/* Removes every temporary file of this process not yet committed or aborted.
 * Async-signal-safe: for a SIGINT/SIGTERM/SIGHUP/SIGPIPE handler that then
 * ends the process. */
void bitnet_outfile_unlink_pending(void);
/* Nonzero when the last component of path has the name of such a temporary
 * (a leftover of a process killed by SIGKILL or a crash): never an input. */
int bitnet_outfile_is_temp(const char *path);

/* ==== backends =========================================================== */

/* A backend runs ops on one device: the CPU (own C kernels, SIMD picked at run
 * time, a thread pool; OpenBLAS for float products) or an OpenCL device.
 * "auto" holds both and sends each op to OpenCL when it is large enough to
 * gain, falling back to the CPU (with one warning) when OpenCL fails. */
typedef struct bitnet_backend bitnet_backend;

typedef enum { BITNET_LOG_WARN = 1, BITNET_LOG_INFO = 2, BITNET_LOG_DEBUG = 3 } bitnet_log_level;
typedef void (*bitnet_log_fn)(void *user, bitnet_log_level level, const char *msg);

/* spec: "cpu", "opencl", "opencl:N", "auto"; NULL or "" means $BITNET_DEVICE,
 * else "cpu".  threads: CPU threads, 0 = all cores.
 * Threads: every call that takes a backend may be made from any thread.
 * Calls on one backend run one at a time (an internal lock; on OpenCL an op
 * holds it only while it is enqueued); calls on different backends run in
 * parallel.  For parallel work create one backend per thread.  The library's
 * other calls (readers, writers, _ref functions) share nothing between
 * objects: one object per thread. */
bitnet_status bitnet_backend_create(bitnet_backend **be, const char *spec, int threads);
void bitnet_backend_free(bitnet_backend *be);
void bitnet_backend_set_log(bitnet_backend *be, bitnet_log_fn fn, void *user);
/* "cpu (avx512-vnni, 2 threads)", "opencl:0 (NVIDIA H100 ...)", ... */
const char *bitnet_backend_describe(const bitnet_backend *be);
int bitnet_backend_threads(const bitnet_backend *be);

/* Per-op statistics collected while the backend lives (--stats). */
typedef struct {
    char op[32];
    char device[16];        /* "cpu" or "opencl" */
    uint64_t calls;
    double kernel_ms;       /* device kernel time (profiling events) or CPU time */
    double h2d_ms, d2h_ms;  /* transfers */
    uint64_t h2d_bytes, d2h_bytes;
    uint64_t bytes_moved;   /* bytes the op must read + write */
} bitnet_op_stats;

/* Device memory (zero on the CPU backend): the buffer pool serves every
 * device allocation (bitnet_buffer memory and the scratch of ops); kept
 * weights are exact allocations beside it. */
typedef struct {
    uint64_t allocs, hits, misses, releases;
    uint64_t bytes_in_use, peak_bytes;  /* pool memory handed out, and its peak */
    uint64_t idle_bytes;                /* pool memory held for reuse */
    uint64_t kept_bytes;                /* bitnet_backend_keep */
    uint64_t device_peak_bytes;         /* peak of everything allocated on the device at once */
    uint64_t buffer_bytes, buffer_peak_bytes; /* bytes asked for by live bitnet_buffers, and their peak */
} bitnet_pool_stats;

size_t bitnet_backend_op_stats(const bitnet_backend *be, bitnet_op_stats *out, size_t max);
void bitnet_backend_pool_stats(const bitnet_backend *be, bitnet_pool_stats *out);
/* Human-readable stats report written into buf (tools print it to stderr). */
void bitnet_backend_stats_format(const bitnet_backend *be, char *buf, size_t size);

/* Device listing for bitnet-info --devices: a JSON document (jansson-free
 * callers can print it as is) and a text table. Caller frees with free(). */
bitnet_status bitnet_devices_text(char **out);
bitnet_status bitnet_devices_json(char **out);

/* CPU SIMD level found at run time: "scalar", "avx2", "avx512", "avx512-vnni". */
const char *bitnet_cpu_simd_name(void);

/* Measures the auto-dispatch thresholds (bytes above which OpenCL gains over
 * the CPU) for this backend's device and stores them in the cache directory;
 * a short report is written into report. */
bitnet_status bitnet_backend_calibrate(bitnet_backend *be, char *report, size_t size);
/* The roofline of this backend's device, measured now: a copy kernel and a
 * read-only kernel over `bytes` bytes (CPU: memcpy and a SIMD read loop on all
 * threads), in GB/s counting bytes read + written.  For bitnet-bench. */
bitnet_status bitnet_backend_bandwidth(bitnet_backend *be, uint64_t bytes, double *copy_gbs, double *read_gbs);
/* Host<->device transfer rates in GB/s from pageable (malloc) or pinned host
 * memory; BITNET_E_UNSUPPORTED on the CPU backend. */
bitnet_status bitnet_backend_transfer_rate(bitnet_backend *be, uint64_t bytes, int pinned,
                                           double *h2d_gbs, double *d2h_gbs);
/* The plumbing op: y = alpha * x on the backend's device. */
bitnet_status bitnet_scale(bitnet_backend *be, const float *x, uint64_t n, float alpha, float *y);
bitnet_status bitnet_scale_ref(const float *x, uint64_t n, float alpha, float *y);
/* Clears the op statistics (bench: between configurations). */
void bitnet_backend_stats_reset(bitnet_backend *be);
/* Device kernel times (bitnet_op_stats.kernel_ms and the transfer times of
 * an OpenCL device) need profiling, which is off unless turned on here
 * (tools turn it on for --stats; bitnet-bench for its kernel timer).  It
 * costs: on NVIDIA's driver every command then carries an event and
 * timestamps, which more than doubled the fixed cost of a small call.
 * Without it OpenCL ops report calls and bytes, and 0 ms.  Switching waits
 * for the ops enqueued so far.  No effect on the CPU backend. */
bitnet_status bitnet_backend_set_profiling(bitnet_backend *be, int on);

/* The cache directory ($XDG_CACHE_HOME/bitnet or ~/.cache/bitnet) into buf. */
const char *bitnet_cache_dir(char *buf, size_t size);

/* ==== device-resident weights ============================================ */

/* Copies p[0..bytes) to the backend's device now and keeps it there.  Later
 * calls whose weight operand starts at p (bitnet_ternary_matrix.t2 and .d,
 * the w of bitnet_matmul_f32, the bias of either) and fits in bytes read the device copy instead
 * of uploading it again.  The memory must not change while kept; keeping p
 * again re-uploads it (after a change).  On the CPU backend (and for ops that
 * run on the CPU) it changes nothing and returns BITNET_OK.  Errors:
 * BITNET_E_INVALID (NULL p, bytes 0), BITNET_E_DEVICE_MEMORY. */
bitnet_status bitnet_backend_keep(bitnet_backend *be, const void *p, size_t bytes);
/* Drops the device copy kept for p (nothing if none); bitnet_backend_free drops all. */
void bitnet_backend_forget(bitnet_backend *be, const void *p);
/* Bytes kept on the device now (0 on the CPU backend). */
uint64_t bitnet_backend_kept_bytes(const bitnet_backend *be);

/* ==== device-resident tensors ============================================= */

/* A buffer is memory on the device a backend computes on.  Its address,
 * bitnet_buffer_data(), is what every op of that backend takes wherever it
 * takes a pointer: inputs, outputs, weights, scales, bias (and, as with host
 * memory, data + k for an element offset inside it).  So a chain of ops runs
 * with every intermediate on the device:
 *
 *     bitnet_buffer *x, *h;
 *     bitnet_buffer_upload(be, host_x, bytes_x, &x);      -- once
 *     bitnet_buffer_create(be, bytes_h, &h);
 *     bitnet_rmsnorm(be, bitnet_buffer_data(x), ..., bitnet_buffer_data(h));
 *     bitnet_bitlinear(be, &w, &(bitnet_bitlinear_io){.x = bitnet_buffer_data(h), ...});
 *     ...
 *     bitnet_buffer_read(y, 0, host_y, bytes_y);            -- waits here only
 *
 * On OpenCL an op whose outputs are all on the device returns once it is
 * enqueued; ops run in the order they were called, and the host waits only in
 * bitnet_buffer_read and bitnet_backend_sync (which also report an error an
 * op met after it was enqueued, such as NaN input to a quantizer: those ops
 * have no host to tell at the time).  Host and device pointers mix freely in
 * one call: host inputs go up through pinned staging memory, host outputs come
 * down before the call returns, exactly as in the host-pointer calls.
 * On the CPU backend (and under auto when no OpenCL device is found) a
 * buffer is ordinary host memory, 64-byte aligned: the address may be used
 * directly and ops work on it in place, with no copies.  On OpenCL the
 * address is not host memory (touching it faults): use read and write.
 * Passing a device address to another backend is refused.
 *
 * Lifetime: free every buffer before its backend.  Freeing a buffer that an
 * enqueued op still uses is safe (the device keeps the memory until the op is
 * done).  Thread safety: see bitnet_backend_create. */
typedef struct bitnet_buffer bitnet_buffer;

/* bytes > 0; the contents are undefined until written.  Errors:
 * BITNET_E_DEVICE_MEMORY (under auto: falls back to host memory, with the
 * one warning, and the backend runs on the CPU from then on). */
bitnet_status bitnet_buffer_create(bitnet_backend *be, size_t bytes, bitnet_buffer **buf);
/* create + write of src[0..bytes). */
bitnet_status bitnet_buffer_upload(bitnet_backend *be, const void *src, size_t bytes, bitnet_buffer **buf);
void *bitnet_buffer_data(const bitnet_buffer *buf);
size_t bitnet_buffer_size(const bitnet_buffer *buf);
/* 1 when the buffer is host memory (CPU), 0 when it is on a device. */
int bitnet_buffer_on_host(const bitnet_buffer *buf);
/* Copies src into the buffer at offset.  src may be reused as soon as this
 * returns; the copy is ordered before every op called after it. */
bitnet_status bitnet_buffer_write(bitnet_buffer *buf, size_t offset, const void *src, size_t bytes);
/* Waits for the ops called before it, then copies bytes at offset into dst. */
bitnet_status bitnet_buffer_read(const bitnet_buffer *buf, size_t offset, void *dst, size_t bytes);
/* NULL is a no-op. */
void bitnet_buffer_free(bitnet_buffer *buf);
/* Waits until every op called on be so far is done; returns the first error
 * one of them met after it was enqueued (BITNET_OK on the CPU). */
bitnet_status bitnet_backend_sync(bitnet_backend *be);

/* ==== quantization (BitNet b1.58) ======================================== */

/* Weights, absmean: d = max((float)mean|W|, 1e-5f) per tensor/row/group;
 * q = clamp(rint(w * (1.0f/d)), -1, 1).  w is [rows x cols] f32; out is T2
 * (rows * bitnet_t2_row_bytes(cols) bytes); d gets the scales
 * (1, rows, or rows * ceil(cols/group)).  NaN/Inf -> BITNET_E_NUMERIC:
 * then out and d are as they were with one scale (every backend) and on
 * OpenCL; with row or group scales the CPU may have written the rows it
 * had done (it reads each row once, from the cache, for its sum and its
 * codes).  On an OpenCL GPU whose out and d are both device buffers the
 * call returns once enqueued, and the next wait reports the error (see
 * bitnet_buffer). */
bitnet_status bitnet_quantize_weights(bitnet_backend *be, const float *w, uint64_t rows, uint64_t cols,
                                      bitnet_scale_kind kind, uint32_t group, uint8_t *out_t2, float *d);
bitnet_status bitnet_quantize_weights_ref(const float *w, uint64_t rows, uint64_t cols,
                                          bitnet_scale_kind kind, uint32_t group, uint8_t *out_t2, float *d);
/* Activations, absmax per row: s = 127 / max(max|x|, 1e-5f);
 * q = clamp(rint(x * s), -128, 127). */
bitnet_status bitnet_quantize_acts(bitnet_backend *be, const float *x, uint64_t rows, uint64_t cols,
                                   int8_t *q, float *s);
bitnet_status bitnet_quantize_acts_ref(const float *x, uint64_t rows, uint64_t cols, int8_t *q, float *s);
/* w = q * d;  x = q / s. */
bitnet_status bitnet_dequantize_weights(bitnet_backend *be, const uint8_t *t2, uint64_t rows, uint64_t cols,
                                        bitnet_scale_kind kind, uint32_t group, const float *d, float *w);
bitnet_status bitnet_dequantize_weights_ref(const uint8_t *t2, uint64_t rows, uint64_t cols,
                                            bitnet_scale_kind kind, uint32_t group, const float *d, float *w);
bitnet_status bitnet_dequantize_acts(bitnet_backend *be, const int8_t *q, uint64_t rows, uint64_t cols,
                                     const float *s, float *x);
bitnet_status bitnet_dequantize_acts_ref(const int8_t *q, uint64_t rows, uint64_t cols, const float *s, float *x);

/* Packing.  Codes are int8 in {-1,0,1}. */
size_t bitnet_t2_row_bytes(uint64_t cols);   /* ceil(cols/128) * 32 */
size_t bitnet_t3_row_bytes(uint64_t cols);   /* ceil(cols/5) */
bitnet_status bitnet_t2_pack(const int8_t *q, uint64_t rows, uint64_t cols, uint8_t *t2);
bitnet_status bitnet_t2_unpack(const uint8_t *t2, uint64_t rows, uint64_t cols, int8_t *q);
bitnet_status bitnet_t3_pack(const int8_t *q, uint64_t rows, uint64_t cols, uint8_t *t3);
bitnet_status bitnet_t3_unpack(const uint8_t *t3, uint64_t rows, uint64_t cols, int8_t *q);
bitnet_status bitnet_t3_to_t2(const uint8_t *t3, uint64_t rows, uint64_t cols, uint8_t *t2);
bitnet_status bitnet_t2_to_t3(const uint8_t *t2, uint64_t rows, uint64_t cols, uint8_t *t3);

/* ==== BitLinear and float matrix products ================================= */

typedef enum {
    BITNET_ACT_NONE = 0,
    BITNET_ACT_RELU,
    BITNET_ACT_GELU,        /* erf form */
    BITNET_ACT_GELU_TANH,
    BITNET_ACT_SIGMOID,
    BITNET_ACT_SILU,
    BITNET_ACT_COUNT
} bitnet_act;
const char *bitnet_act_name(bitnet_act a);
bitnet_status bitnet_act_parse(const char *name, bitnet_act *out);

/* A ternary weight matrix [out x in] in the T2 layout with its scales d. */
typedef struct {
    const uint8_t *t2;
    uint64_t out, in;
    bitnet_scale_kind kind;
    uint32_t group;
    const float *d;
} bitnet_ternary_matrix;

/* Inputs and outputs of one BitLinear call over `tokens` rows.
 * Input: either x (float [tokens x in]) or xq + xs (int8 + per-token s).
 * Output: either y (float [tokens x out]) or yq + ys (re-quantized int8 + s).
 * norm (float input only): each token of x is first RMS-normalized with this
 * weight and norm_eps, exactly as bitnet_rmsnorm on the same backend would
 * (the norm that precedes every BitLinear of a BitNet block), then
 * quantized: one op where the two calls took two (on OpenCL one kernel
 * instead of two).
 * residual (float output or re-quantized output): added to each output
 * after the bias and the activation, y = act(acc * scale + bias) +
 * residual, the residual add of a transformer block in the same op (and the
 * same kernel on OpenCL); it may be y itself (y += ...). */
typedef struct {
    uint64_t tokens;
    const float *x;
    const int8_t *xq;
    const float *xs;
    const float *bias;      /* [out] or NULL */
    bitnet_act act;
    float *y;
    int8_t *yq;
    float *ys;
    const float *norm;      /* [in] RMSNorm weight applied to x first, or NULL */
    float norm_eps;         /* its eps (finite, >= 0) */
    const float *residual;  /* [tokens x out] added last, or NULL */
} bitnet_bitlinear_io;

/* acc[t,o] = sum q_w*q_x (int32, exact); y = acc / (s_x[t] * s_w) (+bias, act,
 * +residual). */
bitnet_status bitnet_bitlinear(bitnet_backend *be, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io);
bitnet_status bitnet_bitlinear_ref(const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io);

/* Float: y[tokens x out] = x[tokens x in] * w[out x in]^T (+bias, act). */
bitnet_status bitnet_matmul_f32(bitnet_backend *be, const float *x, uint64_t tokens, uint64_t in,
                                const float *w, uint64_t out, const float *bias, bitnet_act act, float *y);
bitnet_status bitnet_matmul_f32_ref(const float *x, uint64_t tokens, uint64_t in,
                                    const float *w, uint64_t out, const float *bias, bitnet_act act, float *y);

/* ==== tensor ops (f32, contiguous, row-major) ============================== */

typedef enum { BITNET_BIN_ADD, BITNET_BIN_SUB, BITNET_BIN_MUL, BITNET_BIN_DIV,
               BITNET_BIN_MAX, BITNET_BIN_MIN, BITNET_BIN_COUNT } bitnet_binary_op;
typedef enum { BITNET_UN_RELU, BITNET_UN_GELU, BITNET_UN_GELU_TANH, BITNET_UN_SIGMOID,
               BITNET_UN_SILU, BITNET_UN_TANH, BITNET_UN_EXP, BITNET_UN_NEG, BITNET_UN_ABS,
               BITNET_UN_SQRT, BITNET_UN_SCALE, BITNET_UN_COUNT } bitnet_unary_op;
typedef enum { BITNET_RED_SUM, BITNET_RED_MEAN, BITNET_RED_MAX, BITNET_RED_MIN,
               BITNET_RED_ARGMAX, BITNET_RED_COUNT } bitnet_reduce_op;

/* A shape for ops: rank 0..8. */
typedef struct { uint32_t rank; uint64_t dims[BITNET_MAX_RANK]; } bitnet_shape;

/* Broadcast shape of a and b (NumPy rules); BITNET_E_SHAPE with both shapes named. */
bitnet_status bitnet_broadcast_shape(const bitnet_shape *a, const bitnet_shape *b, bitnet_shape *out);
bitnet_status bitnet_binary(bitnet_backend *be, bitnet_binary_op op, const float *a, const bitnet_shape *sa,
                            const float *b, const bitnet_shape *sb, float *y);
bitnet_status bitnet_binary_ref(bitnet_binary_op op, const float *a, const bitnet_shape *sa,
                                const float *b, const bitnet_shape *sb, float *y);
/* param: the constant of BITNET_UN_SCALE, ignored otherwise. */
bitnet_status bitnet_unary(bitnet_backend *be, bitnet_unary_op op, const float *x, uint64_t n, float param, float *y);
bitnet_status bitnet_unary_ref(bitnet_unary_op op, const float *x, uint64_t n, float param, float *y);
/* axis may be negative (from the end).  log != 0: log-softmax. */
bitnet_status bitnet_softmax(bitnet_backend *be, const float *x, const bitnet_shape *s, int axis, int log, float *y);
bitnet_status bitnet_softmax_ref(const float *x, const bitnet_shape *s, int axis, int log, float *y);
/* axes_mask: bit i set reduces axis i; 0 reduces all.  Reduced axes are
 * removed from the output shape.  ARGMAX needs exactly one axis; y is f32
 * holding the index (exact below 2^24) -- see bitnet_reduce_argmax for i64. */
bitnet_status bitnet_reduce(bitnet_backend *be, bitnet_reduce_op op, const float *x, const bitnet_shape *s,
                            uint32_t axes_mask, float *y, bitnet_shape *ys);
bitnet_status bitnet_reduce_ref(bitnet_reduce_op op, const float *x, const bitnet_shape *s,
                                uint32_t axes_mask, float *y, bitnet_shape *ys);
bitnet_status bitnet_reduce_argmax(bitnet_backend *be, const float *x, const bitnet_shape *s, int axis,
                                   int64_t *y, bitnet_shape *ys);
bitnet_status bitnet_reduce_argmax_ref(const float *x, const bitnet_shape *s, int axis, int64_t *y, bitnet_shape *ys);
/* Over the last axis of [rows x cols]; weight/bias [cols] or NULL. */
bitnet_status bitnet_layernorm(bitnet_backend *be, const float *x, uint64_t rows, uint64_t cols,
                               const float *weight, const float *bias, float eps, float *y);
bitnet_status bitnet_layernorm_ref(const float *x, uint64_t rows, uint64_t cols,
                                   const float *weight, const float *bias, float eps, float *y);
bitnet_status bitnet_rmsnorm(bitnet_backend *be, const float *x, uint64_t rows, uint64_t cols,
                             const float *weight, float eps, float *y);
bitnet_status bitnet_rmsnorm_ref(const float *x, uint64_t rows, uint64_t cols,
                                 const float *weight, float eps, float *y);
/* y = x with axes permuted: y.dims[i] = x.dims[perm[i]]. */
bitnet_status bitnet_permute(bitnet_backend *be, const float *x, const bitnet_shape *s, const uint32_t *perm, float *y);
bitnet_status bitnet_permute_ref(const float *x, const bitnet_shape *s, const uint32_t *perm, float *y);

/* ==== linear algebra (Cholesky, QR, SVD, solves) ========================= */

/* Matrices are row-major and contiguous, `batch` of them one after another
 * (the leading dimensions of a tensor multiplied out); every operand has the
 * dtype dt, BITNET_F32 or BITNET_F64.  k = min(m, n).  The CPU runs LAPACK;
 * OpenCL runs blocked algorithms whose level-3 parts are CLBlast calls, and
 * the SVD by one-sided Jacobi in its own kernels (f64 on a device without
 * fp64 runs on the CPU).  The _ref forms compute in
 * double with plain loops (one-sided Jacobi for the SVD) and round once.
 * Errors: BITNET_E_DTYPE (dt), BITNET_E_SHAPE (an empty matrix or batch,
 * shapes that do not fit), BITNET_E_NUMERIC (NaN or Inf in an input, a matrix
 * that is not positive definite, a rank-deficient least-squares problem; the
 * detail names the matrix and the pivot or column). */

/* A = L L^T for symmetric positive definite A [n x n] (only its lower
 * triangle is read); l [n x n] gets L, zeros above the diagonal. */
bitnet_status bitnet_cholesky(bitnet_backend *be, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n, void *l);
bitnet_status bitnet_cholesky_ref(bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n, void *l);
/* Thin Householder QR: A [m x n] = Q [m x k] R [k x n], Q with orthonormal
 * columns, R upper triangular (the signs of R's diagonal are the
 * implementation's: compare products, not factors). */
bitnet_status bitnet_qr(bitnet_backend *be, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n,
                        void *q, void *r);
bitnet_status bitnet_qr_ref(bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *q, void *r);
/* Thin SVD: A [m x n] = U [m x k] diag(s) Vt [k x n], s [k] descending and
 * non-negative.  u and vt may both be NULL (values only); else both are set. */
bitnet_status bitnet_svd(bitnet_backend *be, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n,
                         void *s, void *u, void *vt);
bitnet_status bitnet_svd_ref(bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *s, void *u,
                             void *vt);
/* X [n x nrhs] solving A X = B for symmetric positive definite A [n x n]
 * through its Cholesky factor; b [n x nrhs]. */
bitnet_status bitnet_cholesky_solve(bitnet_backend *be, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n,
                                    const void *b, uint64_t nrhs, void *x);
bitnet_status bitnet_cholesky_solve_ref(bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n, const void *b,
                                        uint64_t nrhs, void *x);
/* Least squares through QR: X [n x nrhs] minimising ||A X - B|| (Frobenius)
 * for A [m x n] of full column rank, m >= n; b [m x nrhs]. */
bitnet_status bitnet_lstsq(bitnet_backend *be, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n,
                           const void *b, uint64_t nrhs, void *x);
bitnet_status bitnet_lstsq_ref(bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, const void *b,
                               uint64_t nrhs, void *x);

#ifdef __cplusplus
}
#endif
#endif /* BITNET_H */
