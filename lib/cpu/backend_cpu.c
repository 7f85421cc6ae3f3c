/*
 * backend_cpu.c - the CPU backend: SIMD level found at run time, the op
 * table, and the plumbing op (scale) with its scalar reference.
 */
#include "cpu.h"
#include "../linalg.h"

#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#ifdef BN_ASAN
#include <sanitizer/asan_interface.h>
#endif

static const char *const simd_names[] = {"scalar", "avx2", "avx-vnni", "avx512", "avx512-vnni", "amx"};

#if defined(__x86_64__) || defined(__i386__)
/* AVX-VNNI: CPUID leaf 7, sub-leaf 1, EAX bit 4 (clang 14 has no
 * __builtin_cpu_supports name for it); the register state is AVX's, which
 * the caller's AVX2 check has found enabled. */
static int cpu_has_avxvnni(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) return 0;
    __get_cpuid_count(7, 1, &a, &b, &c, &d);
    return (a >> 4) & 1;
}
#endif

/* The levels this CPU has, one bit each (detected once). */
static unsigned simd_hardware(void)
{
    static int done;
    static unsigned have;
    if (__atomic_load_n(&done, __ATOMIC_ACQUIRE)) return have;
    unsigned h = 1u << BN_SIMD_SCALAR;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        h |= 1u << BN_SIMD_AVX2;
        if (cpu_has_avxvnni()) h |= 1u << BN_SIMD_AVX_VNNI;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
            h |= 1u << BN_SIMD_AVX512;
            if (__builtin_cpu_supports("avx512vnni")) {
                h |= 1u << BN_SIMD_AVX512_VNNI;
                if (bn_amx_usable()) h |= 1u << BN_SIMD_AMX;
            }
        }
    }
#endif
    have = h;
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    return have;
}

/* The highest level the hardware has, not above the one $BITNET_SIMD names
 * (read on every call so that tests may change it between backends;
 * unknown values are ignored). */
bn_simd bn_cpu_simd(void)
{
    const unsigned have = simd_hardware();
    int top = BN_SIMD_AMX;
    const char *cap = getenv("BITNET_SIMD");
    if (cap && *cap)
        for (int i = 0; i <= BN_SIMD_AMX; i++)
            if (strcmp(cap, simd_names[i]) == 0) top = i;
    while (top > 0 && !(have & (1u << top))) top--;
    return (bn_simd)top;
}

const char *bitnet_cpu_simd_name(void) { return simd_names[bn_cpu_simd()]; }

bitnet_status bn_cpu_create(bn_cpu **out, int threads)
{
    *out = NULL;
    bn_cpu *c = calloc(1, sizeof *c);
    if (!c) return bn_fail(BITNET_E_NOMEM, "cpu backend: out of memory");
    bitnet_status st = bn_pool_create(&c->pool, threads);
    if (st != BITNET_OK) {
        free(c);
        return st;
    }
    c->simd = bn_cpu_simd();
    *out = c;
    return BITNET_OK;
}

/* Scratch above this size is given back after the call that needed it. */
#define SCRATCH_KEEP ((size_t)64 << 20)

void *bn_cpu_scratch(bn_cpu *cpu, size_t n)
{
    if (n > cpu->scratch_bytes) {
        if (n > SIZE_MAX - 63) return NULL;
        free(cpu->scratch);
        cpu->scratch_bytes = 0;
        if (!(cpu->scratch = aligned_alloc(64, (n + 63) & ~(size_t)63))) return NULL;
        cpu->scratch_bytes = n;
    }
#ifdef BN_ASAN
    ASAN_POISON_MEMORY_REGION(cpu->scratch, cpu->scratch_bytes);
#endif
    return cpu->scratch;
}

void bn_cpu_scratch_open(bn_cpu *cpu, size_t at, size_t bytes)
{
#ifdef BN_ASAN
    ASAN_UNPOISON_MEMORY_REGION((char *)cpu->scratch + at, bytes);
#else
    (void)cpu, (void)at, (void)bytes;
#endif
}

void bn_cpu_scratch_done(bn_cpu *cpu)
{
#ifdef BN_ASAN
    if (cpu->scratch) ASAN_UNPOISON_MEMORY_REGION(cpu->scratch, cpu->scratch_bytes);
#endif
    if (cpu->scratch_bytes <= SCRATCH_KEEP) return;
    free(cpu->scratch);
    cpu->scratch = NULL;
    cpu->scratch_bytes = 0;
}

static void cpu_free(void *ctx)
{
    bn_cpu *c = ctx;
    if (!c) return;
    bn_pool_free(c->pool);
    free(c->scratch);
    free(c);
}

/* ---- scale: y = alpha * x ---------------------------------------------- */

bitnet_status bitnet_scale_ref(const float *x, uint64_t n, float alpha, float *y)
{
    if (n && (!x || !y)) return bn_fail(BITNET_E_INVALID, "scale: NULL buffer");
    for (uint64_t i = 0; i < n; i++) y[i] = alpha * x[i];
    return BITNET_OK;
}

typedef struct {
    const float *x;
    float *y;
    float alpha;
} scale_args;

static void scale_range(void *vp, uint64_t b, uint64_t e)
{
    const scale_args *a = vp;
    const float *x = a->x;
    float *y = a->y;
    const float alpha = a->alpha;
    for (uint64_t i = b; i < e; i++) y[i] = alpha * x[i]; /* vectorised by the compiler */
}

bitnet_status bn_cpu_scale(void *ctx, const float *x, uint64_t n, float alpha, float *y)
{
    bn_cpu *c = ctx;
    scale_args a = {x, y, alpha};
    bn_parallel_for(c ? c->pool : NULL, n, 1u << 16, scale_range, &a);
    if (n && bn_test_perturb("scale")) y[n / 2] = y[n / 2] != 0.0f ? -3.0f * y[n / 2] : 1.0f;
    return BITNET_OK;
}

const bn_backend_ops bn_cpu_ops = {
    .name = "cpu",
    .scale = bn_cpu_scale,
    .free = cpu_free,
    .cholesky = bn_cpu_cholesky, .qr = bn_cpu_qr, .svd = bn_cpu_svd, .cholesky_solve = bn_cpu_cholesky_solve,
    .lstsq = bn_cpu_lstsq,
    .bitlinear = bn_cpu_bitlinear,
    .matmul_f32 = bn_cpu_matmul_f32,
    .binary = bn_cpu_binary,
    .unary = bn_cpu_unary,
    .softmax = bn_cpu_softmax,
    .reduce = bn_cpu_reduce,
    .layernorm = bn_cpu_layernorm,
    .permute = bn_cpu_permute,
    .quantize_weights = bn_cpu_quantize_weights, .quantize_acts = bn_cpu_quantize_acts, .dequantize_weights = bn_cpu_dequantize_weights, .dequantize_acts = bn_cpu_dequantize_acts,
    /* more ops above */
};
