/*
 * linalg.h - what the linear-algebra ops share (internal): element access by
 * dtype, the LAPACK-side limits, and the CPU and OpenCL implementations that
 * fill the backend table's linear-algebra slots (every op has both: on
 * OpenCL, CLBlast-blocked Cholesky, QR and least squares in
 * lib/opencl/linalg.c, a one-sided Jacobi SVD in lib/opencl/svd.c).
 */
#ifndef BITNET_LINALG_H
#define BITNET_LINALG_H

#include "internal.h"
#include "threads.h"

#include <stddef.h>
#include <string.h>

static inline size_t bn_la_esize(bitnet_dtype dt) { return dt == BITNET_F64 ? 8 : 4; }
static inline double bn_la_get(bitnet_dtype dt, const void *p, size_t i)
{
    return dt == BITNET_F64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}
static inline void bn_la_set(bitnet_dtype dt, void *p, size_t i, double v)
{
    if (dt == BITNET_F64) ((double *)p)[i] = v;
    else ((float *)p)[i] = (float)v;
}
/* A pointer to matrix `i` of a batch whose matrices have `elems` elements. */
static inline const void *bn_la_at(bitnet_dtype dt, const void *p, uint64_t i, uint64_t elems)
{
    return (const char *)p + (size_t)(i * elems) * bn_la_esize(dt);
}
static inline void *bn_la_at_mut(bitnet_dtype dt, void *p, uint64_t i, uint64_t elems)
{
    return (char *)p + (size_t)(i * elems) * bn_la_esize(dt);
}
/* Row-major src [rows x cols] -> column-major dst (ld rows). */
static inline void bn_la_to_colmajor(bitnet_dtype dt, const void *src, uint64_t rows, uint64_t cols, void *dst)
{
    const size_t es = bn_la_esize(dt);
    for (uint64_t i = 0; i < rows; i++)
        for (uint64_t j = 0; j < cols; j++)
            memcpy((char *)dst + (size_t)(j * rows + i) * es, (const char *)src + (size_t)(i * cols + j) * es, es);
}

/* The checks of every public call: dtype, non-empty sizes within LAPACK's
 * int, a (and b [m x nrhs] when want_b) non-NULL and finite (scanned on the
 * pool's threads; pool NULL: on the calling thread).  *bytes: of a. */
bitnet_status bn_la_check(bn_pool *pool, const char *op, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m,
                          uint64_t n, const void *b, uint64_t nrhs, int want_b, uint64_t *bytes);
/* The error of a failed Cholesky factorisation of matrix `index` (of batch)
 * at 1-based pivot `pivot` (the leading minor of that order is not positive). */
bitnet_status bn_la_not_pd(const char *op, uint64_t index, uint64_t batch, uint64_t pivot, uint64_t n);
/* The error of a rank-deficient least-squares problem (R[col][col] is 0). */
bitnet_status bn_la_rank(uint64_t index, uint64_t batch, uint64_t col);

/* CPU (lib/cpu/linalg.c, LAPACK). */
bitnet_status bn_cpu_cholesky(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n, void *l);
bitnet_status bn_cpu_qr(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *q,
                        void *r);
bitnet_status bn_cpu_svd(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *s,
                         void *u, void *vt);
bitnet_status bn_cpu_cholesky_solve(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n,
                                    const void *b, uint64_t nrhs, void *x);
bitnet_status bn_cpu_lstsq(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n,
                           const void *b, uint64_t nrhs, void *x);
/* One panel of the OpenCL QR on the host: geqrf of column-major a [m x n]
 * (lda m, m >= n) in place, then larft's upper triangular T [n x n]
 * (column-major, ldt n) of its n reflectors, so that H1 ... Hn = I - V T V^T.
 * Returns the LAPACK info (0; -1000 when out of memory). */
int bn_cpu_qr_panel(bitnet_dtype dt, void *a, int m, int n, void *tau, void *t);

/* OpenCL (lib/opencl/linalg.c, CLBlast); f64 on a device without fp64 runs the CPU's. */
bitnet_status bn_ocl_cholesky(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n, void *l);
bitnet_status bn_ocl_cholesky_solve(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n,
                                    const void *b, uint64_t nrhs, void *x);
bitnet_status bn_ocl_qr(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *q,
                        void *r);
/* lib/opencl/svd.c: one-sided Jacobi, kernels/linalg.cl. */
bitnet_status bn_ocl_svd(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *s,
                         void *u, void *vt);
bitnet_status bn_ocl_lstsq(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n,
                           const void *b, uint64_t nrhs, void *x);

#endif
