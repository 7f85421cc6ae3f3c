/*
 * eltwise_avx2.c - the AVX2 inner loop of broadcast binary ops (built with
 * -mavx2).  With `stream` set (outputs larger than the caches) the stores
 * bypass the cache (movntps), which saves the read-for-ownership of y: a
 * large add then moves 12 bytes per element instead of 16.
 */
#include "../op_tensor.h"

#include <immintrin.h>

static inline __m256 vop(bitnet_binary_op op, __m256 a, __m256 b)
{
    switch (op) {
    case BITNET_BIN_ADD: return _mm256_add_ps(a, b);
    case BITNET_BIN_SUB: return _mm256_sub_ps(a, b);
    case BITNET_BIN_MUL: return _mm256_mul_ps(a, b);
    case BITNET_BIN_DIV: return _mm256_div_ps(a, b);
    case BITNET_BIN_MAX: /* a if a > b or a is NaN, else b: NaN propagates */
        return _mm256_blendv_ps(b, a, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q)));
    default:
        return _mm256_blendv_ps(b, a, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q)));
    }
}

#define BODY(LOADA, LOADB, STORE)                                                    \
    for (; i + 8 <= n; i += 8) STORE(y + i, vop(op, LOADA, LOADB));

/* sa, sb in {0, 1}, not both 0.  Returns the count done (a multiple of 8 plus
 * the aligned prologue); the caller finishes the tail. */
uint64_t bn_binary_run_avx2(bitnet_binary_op op, const float *a, uint64_t sa, const float *b, uint64_t sb,
                            float *y, uint64_t n, int stream)
{
    uint64_t i = 0;
    if (stream) { /* streaming stores need 32-byte aligned addresses */
        while (i < n && ((uintptr_t)(y + i) & 31)) {
            y[i] = (float)bn_binary_scalar(op, a[i * sa], b[i * sb]);
            i++;
        }
    }
    const __m256 as = _mm256_set1_ps(a[0]), bs = _mm256_set1_ps(b[0]);
    if (stream) {
        if (sa && sb) { BODY(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), _mm256_stream_ps) }
        else if (sa) { BODY(_mm256_loadu_ps(a + i), bs, _mm256_stream_ps) }
        else { BODY(as, _mm256_loadu_ps(b + i), _mm256_stream_ps) }
        _mm_sfence();
    } else {
        if (sa && sb) { BODY(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), _mm256_storeu_ps) }
        else if (sa) { BODY(_mm256_loadu_ps(a + i), bs, _mm256_storeu_ps) }
        else { BODY(as, _mm256_loadu_ps(b + i), _mm256_storeu_ps) }
    }
    return i;
}

/* neg, abs and sqrt (correctly rounded: vsqrtps) on n elements; returns how
 * many it did. */
uint64_t bn_unary_run_avx2(bitnet_unary_op op, const float *x, float *y, uint64_t n)
{
    uint64_t i = 0;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    switch (op) {
    case BITNET_UN_NEG:
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_xor_ps(_mm256_loadu_ps(x + i), sign));
        break;
    case BITNET_UN_ABS:
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
        break;
    case BITNET_UN_SQRT:
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
        break;
    default:
        break;
    }
    return i;
}
