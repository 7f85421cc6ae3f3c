/*
 * cpu.h - the CPU backend (internal): SIMD level, kernels (the thread pool
 * is the shared helper threads.h).
 * Each kernel family has a scalar _ref (the public bitnet_*_ref) and fast
 * versions picked by the SIMD level found at run time.
 */
#ifndef BITNET_CPU_H
#define BITNET_CPU_H

#include "../backend.h"
#include "../threads.h"

/* avx-vnni: AVX2 plus the VEX-encoded 256-bit VNNI (Intel client cores
 * from Alder Lake on, which have no AVX-512).  Each level from avx512 up
 * implies the ones below it but avx-vnni: an AVX-512 CPU may lack AVX-VNNI.
 * amx: AVX-512 VNNI plus AMX INT8 tiles that the kernel let this process use. */
typedef enum { BN_SIMD_SCALAR = 0, BN_SIMD_AVX2, BN_SIMD_AVX_VNNI, BN_SIMD_AVX512, BN_SIMD_AVX512_VNNI, BN_SIMD_AMX } bn_simd;
/* Detected once; BITNET_SIMD=scalar|avx2|avx-vnni|avx512|avx512-vnni|amx
 * caps it at the highest level this CPU has that is not above the one named
 * (tests use it). */
bn_simd bn_cpu_simd(void);
/* amx.c: nonzero when the CPU has AMX-INT8 and Linux granted the tile state. */
int bn_amx_usable(void);


typedef struct {
    bn_pool *pool;
    bn_simd simd;
    /* Scratch reused from call to call (calls on one backend run one at a
     * time): memory freed after every call came back as fresh pages, page
     * faults and all, on the next. */
    void *scratch;
    size_t scratch_bytes;
} bn_cpu;
/* At least n bytes of 64-byte aligned scratch, valid until the next call
 * (NULL when out of memory).  In AddressSanitizer builds all of it is
 * poisoned: the caller opens each part it uses with bn_cpu_scratch_open and
 * leaves BN_SCRATCH_GAP bytes between parts, so that an overrun of one part
 * is caught as it would be between separate allocations. */
void *bn_cpu_scratch(bn_cpu *cpu, size_t n);
void bn_cpu_scratch_open(bn_cpu *cpu, size_t at, size_t bytes);
#if defined(__SANITIZE_ADDRESS__)
#define BN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BN_ASAN 1
#endif
#endif
#ifdef BN_ASAN
#define BN_SCRATCH_GAP 64
#else
#define BN_SCRATCH_GAP 0
#endif
/* Ends a call's use of the scratch: it is kept for the next call unless it
 * grew past what is worth holding between calls. */
void bn_cpu_scratch_done(bn_cpu *cpu);

/* The CPU table: every slot set. */
extern const bn_backend_ops bn_cpu_ops;
bitnet_status bn_cpu_create(bn_cpu **cpu, int threads);

/* Kernel entry points used by bn_cpu_ops (one file per family). */
bitnet_status bn_cpu_quantize_weights(void *ctx, const float *w, uint64_t rows, uint64_t cols,
                                      bitnet_scale_kind kind, uint32_t group, uint8_t *out_t2, float *d);
bitnet_status bn_cpu_quantize_acts(void *ctx, const float *x, uint64_t rows, uint64_t cols, int8_t *q, float *s);
bitnet_status bn_cpu_dequantize_weights(void *ctx, const uint8_t *t2, uint64_t rows, uint64_t cols,
                                        bitnet_scale_kind kind, uint32_t group, const float *d, float *w);
bitnet_status bn_cpu_dequantize_acts(void *ctx, const int8_t *q, uint64_t rows, uint64_t cols, const float *s, float *x);
bitnet_status bn_cpu_bitlinear(void *ctx, const bitnet_ternary_matrix *w, const bitnet_bitlinear_io *io);
bitnet_status bn_cpu_matmul_f32(void *ctx, const float *x, uint64_t tokens, uint64_t in, const float *w,
                                uint64_t out, const float *bias, bitnet_act act, float *y);
bitnet_status bn_cpu_binary(void *ctx, bitnet_binary_op op, const float *a, const bitnet_shape *sa,
                            const float *b, const bitnet_shape *sb, float *y, const bitnet_shape *sy);
bitnet_status bn_cpu_unary(void *ctx, bitnet_unary_op op, const float *x, uint64_t n, float param, float *y);
bitnet_status bn_cpu_softmax(void *ctx, const float *x, uint64_t outer, uint64_t len, uint64_t inner, int log, float *y);
bitnet_status bn_cpu_reduce(void *ctx, bitnet_reduce_op op, const float *x, const bitnet_shape *s,
                            uint32_t axes_mask, float *y, int64_t *idx);
/* One row of the CPU's rmsnorm (the rows of bn_cpu_layernorm with rms set,
 * bit for bit): y = x / sqrt(mean(x^2) + eps) * w (w NULL: no weight). */
void bn_cpu_rmsnorm_row(const float *x, uint64_t cols, const float *w, float eps, float *y);
bitnet_status bn_cpu_layernorm(void *ctx, const float *x, uint64_t rows, uint64_t cols, const float *weight,
                               const float *bias, float eps, int rms, float *y);
bitnet_status bn_cpu_permute(void *ctx, const float *x, const bitnet_shape *s, const uint32_t *perm, float *y);
bitnet_status bn_cpu_scale(void *ctx, const float *x, uint64_t n, float alpha, float *y);

#endif
