/*
 * eltwise.c - element-wise ops on the CPU: binary with NumPy broadcasting
 * and unary, each as a scalar reference (the definition: double arithmetic
 * rounded once to f32) and a multi-threaded fast path.
 *
 * Fast binary: the broadcast is planned once (dims merged, strides 0 where a
 * side broadcasts), the flat output range is split among threads, and each
 * thread walks its range one run of the innermost dim at a time with a
 * vectorised loop for the (1,1), (1,0) and (0,1) stride cases.  The f32
 * result equals the reference bit for bit: one IEEE operation rounds the same
 * as the double one rounded to f32.  exp, tanh, sigmoid and silu use f32
 * libm (within 4 ulp of float64, tested); gelu and gelu-tanh evaluate the
 * reference formula in double; the others are exact in f32.
 */
#include "cpu.h"
#include "../op_tensor.h"

#include <math.h>
#include <string.h>

/* ---- references --------------------------------------------------------- */

void bn_binary_ref_k(bitnet_binary_op op, const float *a, const bitnet_shape *sa, const float *b,
                     const bitnet_shape *sb, float *y, const bitnet_shape *sy)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < sy->rank; i++) n *= sy->dims[i];
    for (uint64_t f = 0; f < n; f++) {
        /* output index -> input indices, clamping broadcast dims to 0 */
        uint64_t rest = f, ia = 0, ib = 0, ma = 1, mb = 1;
        for (uint32_t k = 0; k < sy->rank; k++) {
            uint64_t d = sy->dims[sy->rank - 1 - k], c = rest % d;
            rest /= d;
            if (k < sa->rank) {
                uint64_t da = sa->dims[sa->rank - 1 - k];
                ia += (da == 1 ? 0 : c) * ma;
                ma *= da;
            }
            if (k < sb->rank) {
                uint64_t db = sb->dims[sb->rank - 1 - k];
                ib += (db == 1 ? 0 : c) * mb;
                mb *= db;
            }
        }
        y[f] = (float)bn_binary_scalar(op, a[ia], b[ib]);
    }
}

void bn_unary_ref_k(bitnet_unary_op op, const float *x, uint64_t n, float param, float *y)
{
    for (uint64_t i = 0; i < n; i++) y[i] = (float)bn_unary_scalar(op, x[i], param);
}

/* ---- fast binary -------------------------------------------------------- */

/* GCC/clang vector extensions: 8 floats, lowered to whatever the target has. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* Macros, not functions: passing 32-byte vectors by value without AVX
 * enabled would change the ABI (-Wpsabi). */
#define ld8(p) (__extension__({ v8f v_; memcpy(&v_, (p), sizeof v_); v_; }))
#define st8(p, v) do { v8f w_ = (v); memcpy((p), &w_, sizeof w_); } while (0)
#define splat8(s) ((v8f){(s), (s), (s), (s), (s), (s), (s), (s)})
/* NaN-propagating max/min (numpy.maximum): a if a is NaN or wins, else b. */
#define vsel8(m, a, b) ((v8f)(((v8i)(a) & (m)) | ((v8i)(b) & ~(m))))
#define vmax8(a, b) vsel8((v8i)(((a) > (b)) | ((a) != (a))), a, b)
#define vmin8(a, b) vsel8((v8i)(((a) < (b)) | ((a) != (a))), a, b)
static inline float smax(float a, float b) { return (a > b || a != a) ? a : b; }
static inline float smin(float a, float b) { return (a < b || a != a) ? a : b; }

#define BIN_CASES(V, S)                                                                  \
    switch (op) {                                                                        \
    case BITNET_BIN_ADD: LOOP(V(A + B), S(A + B)); break;                                 \
    case BITNET_BIN_SUB: LOOP(V(A - B), S(A - B)); break;                                 \
    case BITNET_BIN_MUL: LOOP(V(A * B), S(A * B)); break;                                 \
    case BITNET_BIN_DIV: LOOP(V(A / B), S(A / B)); break;                                 \
    case BITNET_BIN_MAX: LOOP(V(vmax8(A, B)), S(smax(A, B))); break;                      \
    case BITNET_BIN_MIN: LOOP(V(vmin8(A, B)), S(smin(A, B))); break;                      \
    default: break;                                                                      \
    }
#define ID(e) (e)

/* One run of n outputs with innermost strides as (1 or 0). */
static void bin_run(bitnet_binary_op op, const float *restrict a, uint64_t sa, const float *restrict b, uint64_t sb,
                    float *restrict y, uint64_t n, bn_simd simd, int stream)
{
    uint64_t i = 0;
#if defined(__x86_64__)
    if (simd >= BN_SIMD_AVX2 && sa <= 1 && sb <= 1 && (sa | sb) && n >= 8) {
        i = bn_binary_run_avx2(op, a, sa, b, sb, y, n, stream);
        a += i * sa;
        b += i * sb;
        y += i;
        n -= i;
        i = 0;
    }
#else
    (void)simd;
    (void)stream;
#endif
    if (sa == 1 && sb == 1) {
#define LOOP(VE, SE)                                                                 \
    for (; i + 8 <= n; i += 8) { v8f A = ld8(a + i), B = ld8(b + i); st8(y + i, VE); } \
    for (; i < n; i++) { float A = a[i], B = b[i]; y[i] = SE; }
        BIN_CASES(ID, ID)
#undef LOOP
    } else if (sa == 1 && sb == 0) {
        const float bs = b[0];
        const v8f bv = splat8(bs);
#define LOOP(VE, SE)                                                                \
    for (; i + 8 <= n; i += 8) { v8f A = ld8(a + i), B = bv; st8(y + i, VE); }       \
    for (; i < n; i++) { float A = a[i], B = bs; y[i] = SE; }
        BIN_CASES(ID, ID)
#undef LOOP
    } else if (sa == 0 && sb == 1) {
        const float as = a[0];
        const v8f av = splat8(as);
#define LOOP(VE, SE)                                                                \
    for (; i + 8 <= n; i += 8) { v8f A = av, B = ld8(b + i); st8(y + i, VE); }       \
    for (; i < n; i++) { float A = as, B = b[i]; y[i] = SE; }
        BIN_CASES(ID, ID)
#undef LOOP
    } else {
        for (; i < n; i++) y[i] = (float)bn_binary_scalar(op, a[i * sa], b[i * sb]);
    }
}

/* Outputs of at least this many elements (64 MiB, beyond any cache) are
 * written with streaming stores. */
#define BIN_STREAM_MIN (16u << 20)

typedef struct {
    bitnet_binary_op op;
    const float *a, *b;
    float *y;
    bn_bcast p;
    bn_simd simd;
    int stream;
} bin_job;

static void bin_range(void *arg, uint64_t begin, uint64_t end)
{
    const bin_job *j = arg;
    const bn_bcast *p = &j->p;
    uint32_t r = p->rank, last = r - 1;
    uint64_t idx[BITNET_MAX_RANK], rest = begin;
    for (uint32_t k = 0; k < r; k++) {
        uint32_t i = r - 1 - k;
        idx[i] = rest % p->dims[i];
        rest /= p->dims[i];
    }
    uint64_t pos = begin;
    while (pos < end) {
        uint64_t oa = 0, ob = 0;
        for (uint32_t i = 0; i < r; i++) {
            oa += idx[i] * p->sa[i];
            ob += idx[i] * p->sb[i];
        }
        uint64_t cnt = p->dims[last] - idx[last];
        if (cnt > end - pos) cnt = end - pos;
        /* a stride-0 side is read at its current element, so pass the stride as 0 */
        bin_run(j->op, j->a + oa, p->sa[last], j->b + ob, p->sb[last], j->y + pos, cnt, j->simd, j->stream);
        pos += cnt;
        idx[last] += cnt;
        for (uint32_t i = last; i > 0 && idx[i] == p->dims[i]; i--) {
            idx[i] = 0;
            idx[i - 1]++;
        }
    }
}

bitnet_status bn_cpu_binary(void *ctx, bitnet_binary_op op, const float *a, const bitnet_shape *sa,
                            const float *b, const bitnet_shape *sb, float *y, const bitnet_shape *sy)
{
    bn_cpu *cpu = ctx;
    bin_job j = {op, a, b, y, {0}, cpu->simd, 0};
    uint64_t n = 1;
    for (uint32_t i = 0; i < sy->rank; i++) n *= sy->dims[i];
    if (n == 0) return BITNET_OK;
    j.stream = n >= BIN_STREAM_MIN;
    bn_bcast_plan(sa, sb, sy, &j.p);
    bn_parallel_for(cpu->pool, n, 1u << 16, bin_range, &j);
    if (bn_test_perturb("binary")) bn_perturb_one(&y[n / 2]);
    return BITNET_OK;
}

/* ---- fast unary --------------------------------------------------------- */

typedef struct {
    bitnet_unary_op op;
    const float *x;
    float param;
    float *y;
    bn_simd simd;
    int stream;
} un_job;

/* f32 forms of the functions whose libm f32 versions stay within 4 ulp
 * (checked by test_ops against float64): one rounding each in expf/tanhf,
 * then one add and one division.  gelu and gelu-tanh are not among them:
 * rounding their argument alone costs tens of ulps in the tails, so they
 * evaluate the reference formula in double. */
static inline float sigmoid_f(float x)
{
    /* below -80 expf(-x) nears overflow and the result the subnormals: double */
    return x > -80.0f ? 1.0f / (1.0f + expf(-x)) : (float)bn_unary_scalar(BITNET_UN_SIGMOID, x, 0);
}
static inline float silu_f(float x)
{
    return x > -80.0f ? x / (1.0f + expf(-x)) : (float)bn_unary_scalar(BITNET_UN_SILU, x, 0);
}

static void un_range(void *arg, uint64_t begin, uint64_t end)
{
    const un_job *j = arg;
    const float *restrict x = j->x + begin;
    float *restrict y = j->y + begin;
    uint64_t n = end - begin, i = 0;
    switch (j->op) {
    case BITNET_UN_RELU: { /* max(x, 0) with NaN passing through: the binary max */
        const float zero = 0.0f;
        bin_run(BITNET_BIN_MAX, x, 1, &zero, 0, y, n, j->simd, j->stream);
        break;
    }
    case BITNET_UN_SCALE:
        bin_run(BITNET_BIN_MUL, x, 1, &j->param, 0, y, n, j->simd, j->stream);
        break;
    case BITNET_UN_NEG:
    case BITNET_UN_ABS:
    case BITNET_UN_SQRT:
#if defined(__x86_64__)
        if (j->simd >= BN_SIMD_AVX2) i = bn_unary_run_avx2(j->op, x, y, n);
#endif
        for (; i < n; i++) y[i] = j->op == BITNET_UN_NEG ? -x[i] : j->op == BITNET_UN_ABS ? fabsf(x[i]) : sqrtf(x[i]);
        break;
    case BITNET_UN_EXP:
        for (; i < n; i++) y[i] = expf(x[i]);
        break;
    case BITNET_UN_TANH:
        for (; i < n; i++) y[i] = tanhf(x[i]);
        break;
    case BITNET_UN_SIGMOID:
        for (; i < n; i++) y[i] = sigmoid_f(x[i]);
        break;
    case BITNET_UN_SILU:
        for (; i < n; i++) y[i] = silu_f(x[i]);
        break;
    default: /* gelu, gelu-tanh: the reference formula in double, rounded once */
        for (; i < n; i++) y[i] = (float)bn_unary_scalar(j->op, x[i], j->param);
        break;
    }
}

bitnet_status bn_cpu_unary(void *ctx, bitnet_unary_op op, const float *x, uint64_t n, float param, float *y)
{
    bn_cpu *cpu = ctx;
    un_job j = {op, x, param, y, cpu->simd, n >= BIN_STREAM_MIN};
    if (n == 0) return BITNET_OK;
    int cheap = op == BITNET_UN_RELU || op == BITNET_UN_NEG || op == BITNET_UN_ABS || op == BITNET_UN_SCALE ||
                op == BITNET_UN_SQRT;
    bn_parallel_for(cpu->pool, n, cheap ? 1u << 16 : 1u << 12, un_range, &j);
    if (bn_test_perturb("unary")) bn_perturb_one(&y[n / 2]);
    return BITNET_OK;
}
