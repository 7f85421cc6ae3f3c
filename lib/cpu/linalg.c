/*
 * linalg.c - Cholesky, QR, SVD and the solves on the CPU through LAPACK (the
 * copy OpenBLAS ships, through the Fortran interface, which libopenblas
 * exports itself: no other library to link), with as many BLAS threads as
 * the backend has.  Row-major data meets column-major LAPACK as follows:
 *   - a symmetric A is its own transpose: potrf/posv with uplo 'U' on the
 *     row-major buffer leave the row-major lower factor L;
 *   - the SVD runs on the row-major buffer read as A^T [n x m]: A^T = V S U^T,
 *     so LAPACK's "U" is our Vt and its "VT" our U, with no copy;
 *   - QR and least squares transpose into a column-major work copy.
 */
#include "../linalg.h"
#include "cpu.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

/* LAPACK, Fortran calling convention (hidden string lengths last). */
#define FLEN size_t
void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info, FLEN);
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, FLEN);
void sgeqrf_(const int *m, const int *n, float *a, const int *lda, float *tau, float *work, const int *lwork, int *info);
void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work, const int *lwork,
             int *info);
void sorgqr_(const int *m, const int *n, const int *k, float *a, const int *lda, const float *tau, float *work,
             const int *lwork, int *info);
void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda, const double *tau, double *work,
             const int *lwork, int *info);
void slarft_(const char *direct, const char *storev, const int *n, const int *k, const float *v, const int *ldv,
             const float *tau, float *t, const int *ldt, FLEN, FLEN);
void dlarft_(const char *direct, const char *storev, const int *n, const int *k, const double *v, const int *ldv,
             const double *tau, double *t, const int *ldt, FLEN, FLEN);
void sgesdd_(const char *jobz, const int *m, const int *n, float *a, const int *lda, float *s, float *u, const int *ldu,
             float *vt, const int *ldvt, float *work, const int *lwork, int *iwork, int *info, FLEN);
void dgesdd_(const char *jobz, const int *m, const int *n, double *a, const int *lda, double *s, double *u,
             const int *ldu, double *vt, const int *ldvt, double *work, const int *lwork, int *iwork, int *info, FLEN);
void sposv_(const char *uplo, const int *n, const int *nrhs, float *a, const int *lda, float *b, const int *ldb,
            int *info, FLEN);
void dposv_(const char *uplo, const int *n, const int *nrhs, double *a, const int *lda, double *b, const int *ldb,
            int *info, FLEN);
void sgels_(const char *trans, const int *m, const int *n, const int *nrhs, float *a, const int *lda, float *b,
            const int *ldb, float *work, const int *lwork, int *info, FLEN);
void dgels_(const char *trans, const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b,
            const int *ldb, double *work, const int *lwork, int *info, FLEN);

#define F64(dt) ((dt) == BITNET_F64)

static void blas_threads(void *ctx)
{
    bn_cpu *cpu = ctx;
    if (cpu) openblas_set_num_threads(bn_pool_threads(cpu->pool));
}

static bitnet_status nomem(const char *op) { return bn_fail(BITNET_E_NOMEM, "%s: out of memory", op); }

static bitnet_status lapack_fail(const char *op, const char *call, int info)
{
    return bn_fail(BITNET_E_NUMERIC, "%s: LAPACK %s failed (info %d)", op, call, info);
}

static void *alloc(bitnet_dtype dt, uint64_t elems)
{
    return malloc((size_t)(elems ? elems : 1) * bn_la_esize(dt));
}

/* Optimal lwork from a workspace query's work[0]. */
static int lwork_of(bitnet_dtype dt, const void *w)
{
    const double v = bn_la_get(dt, w, 0);
    return v < 1.0 ? 1 : v > (double)INT32_MAX ? INT32_MAX : (int)v;
}

/* Row-major a [n x n] (leading dimension lda), lower factor in place;
 * returns the LAPACK info (0, or the failing 1-based pivot). */
static int potrf_lower(bitnet_dtype dt, void *a, int n, int lda)
{
    int info = 0;
    if (F64(dt)) dpotrf_("U", &n, a, &lda, &info, 1);
    else spotrf_("U", &n, a, &lda, &info, 1);
    return info;
}

int bn_cpu_qr_panel(bitnet_dtype dt, void *a, int m, int n, void *tau, void *t)
{
    int info = 0, lw = -1;
    char probe[16];
    if (F64(dt)) dgeqrf_(&m, &n, a, &m, tau, (double *)probe, &lw, &info);
    else sgeqrf_(&m, &n, a, &m, tau, (float *)probe, &lw, &info);
    if (info) return info;
    lw = lwork_of(dt, probe);
    void *work = alloc(dt, (uint64_t)lw);
    if (!work) return -1000;
    if (F64(dt)) dgeqrf_(&m, &n, a, &m, tau, work, &lw, &info);
    else sgeqrf_(&m, &n, a, &m, tau, work, &lw, &info);
    free(work);
    if (info) return info;
    if (F64(dt)) dlarft_("F", "C", &m, &n, a, &m, tau, t, &n, 1, 1);
    else slarft_("F", "C", &m, &n, a, &m, tau, t, &n, 1, 1);
    return 0;
}

/* Zeroes the strictly upper triangle of row-major a [n x n]. */
static void zero_upper(bitnet_dtype dt, void *a, uint64_t n)
{
    const size_t es = bn_la_esize(dt);
    for (uint64_t i = 0; i + 1 < n; i++) memset((char *)a + (size_t)(i * n + i + 1) * es, 0, (size_t)(n - i - 1) * es);
}

bitnet_status bn_cpu_cholesky(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n, void *l)
{
    blas_threads(ctx);
    const size_t mat = (size_t)(n * n) * bn_la_esize(dt);
    for (uint64_t b = 0; b < batch; b++) {
        void *lb = bn_la_at_mut(dt, l, b, n * n);
        memmove(lb, bn_la_at(dt, a, b, n * n), mat);
        const int info = potrf_lower(dt, lb, (int)n, (int)n);
        if (info > 0) return bn_la_not_pd("cholesky", b, batch, (uint64_t)info, n);
        if (info < 0) return lapack_fail("cholesky", "potrf", info);
        zero_upper(dt, lb, n);
    }
    return BITNET_OK;
}

bitnet_status bn_cpu_qr(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *q,
                        void *r)
{
    blas_threads(ctx);
    const int im = (int)m, in = (int)n, k = (int)(m < n ? m : n), q1 = -1;
    void *w = alloc(dt, m * n), *tau = alloc(dt, (uint64_t)k), *work = NULL;
    bitnet_status st = w && tau ? BITNET_OK : nomem("qr");
    int info = 0, lw = 1;
    char probe[16];
    if (!st) { /* workspace: the larger of the two queries */
        if (F64(dt)) {
            dgeqrf_(&im, &in, w, &im, tau, (double *)probe, &q1, &info);
            lw = lwork_of(dt, probe);
            dorgqr_(&im, &k, &k, w, &im, tau, (double *)probe, &q1, &info);
        } else {
            sgeqrf_(&im, &in, w, &im, tau, (float *)probe, &q1, &info);
            lw = lwork_of(dt, probe);
            sorgqr_(&im, &k, &k, w, &im, tau, (float *)probe, &q1, &info);
        }
        if (lwork_of(dt, probe) > lw) lw = lwork_of(dt, probe);
        if (!(work = alloc(dt, (uint64_t)lw))) st = nomem("qr");
    }
    for (uint64_t b = 0; b < batch && !st; b++) {
        bn_la_to_colmajor(dt, bn_la_at(dt, a, b, m * n), m, n, w);
        if (F64(dt)) dgeqrf_(&im, &in, w, &im, tau, work, &lw, &info);
        else sgeqrf_(&im, &in, w, &im, tau, work, &lw, &info);
        if (info) {
            st = lapack_fail("qr", "geqrf", info);
            break;
        }
        void *rb = bn_la_at_mut(dt, r, b, (uint64_t)k * n);
        for (int i = 0; i < k; i++)
            for (int j = 0; j < in; j++)
                bn_la_set(dt, rb, (size_t)i * n + j, j < i ? 0.0 : bn_la_get(dt, w, (size_t)j * m + i));
        if (F64(dt)) dorgqr_(&im, &k, &k, w, &im, tau, work, &lw, &info);
        else sorgqr_(&im, &k, &k, w, &im, tau, work, &lw, &info);
        if (info) {
            st = lapack_fail("qr", "orgqr", info);
            break;
        }
        void *qb = bn_la_at_mut(dt, q, b, m * (uint64_t)k);
        for (uint64_t i = 0; i < m; i++)
            for (int j = 0; j < k; j++) bn_la_set(dt, qb, (size_t)(i * k) + j, bn_la_get(dt, w, (size_t)j * m + i));
    }
    free(w);
    free(tau);
    free(work);
    return st;
}

bitnet_status bn_cpu_svd(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *s,
                         void *u, void *vt)
{
    blas_threads(ctx);
    /* LAPACK sees A^T: M = n rows, N = m columns. */
    const int lm = (int)n, ln = (int)m, k = (int)(m < n ? m : n), q1 = -1, one = 1;
    const char *jobz = u ? "S" : "N";
    void *w = alloc(dt, m * n), *work = NULL;
    int *iwork = malloc((size_t)(8 * k) * sizeof *iwork), info = 0, lw = 1;
    bitnet_status st = w && iwork ? BITNET_OK : nomem("svd");
    char probe[16];
    if (!st) {
        if (F64(dt)) dgesdd_(jobz, &lm, &ln, w, &lm, s, NULL, &lm, NULL, &k, (double *)probe, &q1, iwork, &info, 1);
        else sgesdd_(jobz, &lm, &ln, w, &lm, s, NULL, &lm, NULL, &k, (float *)probe, &q1, iwork, &info, 1);
        lw = lwork_of(dt, probe);
        if (!(work = alloc(dt, (uint64_t)lw))) st = nomem("svd");
    }
    for (uint64_t b = 0; b < batch && !st; b++) {
        memcpy(w, bn_la_at(dt, a, b, m * n), (size_t)(m * n) * bn_la_esize(dt));
        void *sb = bn_la_at_mut(dt, s, b, (uint64_t)k);
        void *ub = u ? bn_la_at_mut(dt, u, b, m * (uint64_t)k) : NULL, *vb = u ? bn_la_at_mut(dt, vt, b, (uint64_t)k * n) : NULL;
        /* LAPACK's U [n x k] (ld n) is our Vt; its VT [k x m] (ld k) our U */
        const int ldu = u ? lm : one, ldvt = u ? k : one;
        if (F64(dt)) dgesdd_(jobz, &lm, &ln, w, &lm, sb, vb, &ldu, ub, &ldvt, work, &lw, iwork, &info, 1);
        else sgesdd_(jobz, &lm, &ln, w, &lm, sb, vb, &ldu, ub, &ldvt, work, &lw, iwork, &info, 1);
        if (info) st = lapack_fail("svd", "gesdd", info);
    }
    free(w);
    free(work);
    free(iwork);
    return st;
}

bitnet_status bn_cpu_cholesky_solve(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n,
                                    const void *b, uint64_t nrhs, void *x)
{
    blas_threads(ctx);
    const int in = (int)n, ir = (int)nrhs;
    void *w = alloc(dt, n * n), *y = alloc(dt, n * nrhs);
    bitnet_status st = w && y ? BITNET_OK : nomem("cholesky_solve");
    for (uint64_t k = 0; k < batch && !st; k++) {
        memcpy(w, bn_la_at(dt, a, k, n * n), (size_t)(n * n) * bn_la_esize(dt));
        bn_la_to_colmajor(dt, bn_la_at(dt, b, k, n * nrhs), n, nrhs, y);
        int info = 0;
        if (F64(dt)) dposv_("U", &in, &ir, w, &in, y, &in, &info, 1);
        else sposv_("U", &in, &ir, w, &in, y, &in, &info, 1);
        if (info > 0) st = bn_la_not_pd("cholesky_solve", k, batch, (uint64_t)info, n);
        else if (info < 0) st = lapack_fail("cholesky_solve", "posv", info);
        else bn_la_to_colmajor(dt, y, nrhs, n, bn_la_at_mut(dt, x, k, n * nrhs)); /* back to row-major */
    }
    free(w);
    free(y);
    return st;
}

bitnet_status bn_cpu_lstsq(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n,
                           const void *b, uint64_t nrhs, void *x)
{
    blas_threads(ctx);
    const int im = (int)m, in = (int)n, ir = (int)nrhs, q1 = -1;
    void *w = alloc(dt, m * n), *y = alloc(dt, m * nrhs), *work = NULL;
    bitnet_status st = w && y ? BITNET_OK : nomem("lstsq");
    int info = 0, lw = 1;
    char probe[16];
    if (!st) {
        if (F64(dt)) dgels_("N", &im, &in, &ir, w, &im, y, &im, (double *)probe, &q1, &info, 1);
        else sgels_("N", &im, &in, &ir, w, &im, y, &im, (float *)probe, &q1, &info, 1);
        lw = lwork_of(dt, probe);
        if (!(work = alloc(dt, (uint64_t)lw))) st = nomem("lstsq");
    }
    const size_t es = bn_la_esize(dt);
    for (uint64_t k = 0; k < batch && !st; k++) {
        bn_la_to_colmajor(dt, bn_la_at(dt, a, k, m * n), m, n, w);
        bn_la_to_colmajor(dt, bn_la_at(dt, b, k, m * nrhs), m, nrhs, y);
        if (F64(dt)) dgels_("N", &im, &in, &ir, w, &im, y, &im, work, &lw, &info, 1);
        else sgels_("N", &im, &in, &ir, w, &im, y, &im, work, &lw, &info, 1);
        if (info > 0) st = bn_la_rank(k, batch, (uint64_t)info - 1);
        else if (info < 0) st = lapack_fail("lstsq", "gels", info);
        else {
            char *xb = bn_la_at_mut(dt, x, k, n * nrhs);
            for (uint64_t i = 0; i < n; i++) /* the first n rows of the column-major solution */
                for (uint64_t c = 0; c < nrhs; c++) memcpy(xb + (size_t)(i * nrhs + c) * es, (char *)y + (size_t)(c * m + i) * es, es);
        }
    }
    free(w);
    free(y);
    free(work);
    return st;
}
