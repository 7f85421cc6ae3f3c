/*
 * matmul.c - float products y = x w^T (+bias, act) on the CPU: the
 * definition (plain float loops, in column order) and the fast path through
 * OpenBLAS (sgemv for one token, sgemm otherwise) with as many BLAS threads
 * as the backend has.
 */
#include "bitlinear.h"

#include <cblas.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

bitnet_status bitnet_matmul_f32_ref(const float *x, uint64_t tokens, uint64_t in, const float *w, uint64_t out,
                                    const float *bias, bitnet_act act, float *y)
{
    bitnet_status st = bn_matmul_check(x, tokens, in, w, out, y, act);
    if (st) return st;
    for (uint64_t t = 0; t < tokens; t++)
        for (uint64_t o = 0; o < out; o++) {
            const float *xr = x + t * in, *wr = w + o * in;
            float s = 0.0f;
            for (uint64_t i = 0; i < in; i++) s = s + xr[i] * wr[i];
            y[t * out + o] = bn_bl_finish(s, bias, o, act);
        }
    return BITNET_OK;
}

bitnet_status bn_cpu_matmul_f32(void *ctx, const float *x, uint64_t tokens, uint64_t in, const float *w, uint64_t out,
                                const float *bias, bitnet_act act, float *y)
{
    bn_cpu *cpu = ctx;
    static int blas_threads; /* what OpenBLAS was last told (it is process-wide) */
    const int want = bn_pool_threads(cpu->pool);
    if (__atomic_load_n(&blas_threads, __ATOMIC_RELAXED) != want) {
        openblas_set_num_threads(want);
        __atomic_store_n(&blas_threads, want, __ATOMIC_RELAXED);
    }
    const int nt = (int)tokens, ni = (int)in, no = (int)out;
    if (tokens == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, no, ni, 1.0f, w, ni, x, 1, 0.0f, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nt, no, ni, 1.0f, x, ni, w, ni, 0.0f, y, no);
    if (bias || act != BITNET_ACT_NONE)
        for (uint64_t t = 0; t < tokens; t++)
            for (uint64_t o = 0; o < out; o++) y[t * out + o] = bn_bl_finish(y[t * out + o], bias, o, act);
    if (bn_test_perturb("matmul_f32")) y[0] = y[0] + 1.0f;
    return BITNET_OK;
}
