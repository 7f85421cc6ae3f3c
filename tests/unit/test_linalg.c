/*
 * test_linalg.c - Cholesky, QR, SVD, the Cholesky solve and least squares on
 * the float64 reference, the CPU (LAPACK) and OpenCL (PoCL here), f32 and
 * f64, on random matrices of awkward shapes and on ill-conditioned ones
 * built as U diag(s) V^T from random orthogonal factors (condition 1e6; their
 * singular values are known).  Every residual is computed here in double.
 *
 * Bounds, from the backward error analysis of each algorithm (u = eps/2, eps
 * the dtype's machine epsilon, N = max(m, n)), with the constant 4 for the
 * terms the analyses leave as "a small constant":
 *   Cholesky   ||A - L L^T||_F / ||A||_F            <= 4 n eps
 *   QR         ||A - Q R||_F / ||A||_F, ||Q^T Q - I||_F      <= 4 N eps
 *   SVD        ||A - U S V^T||_F / ||A||_F, ||U^T U - I||_F, ||V^T V - I||_F <= 4 N eps;
 *              |s_i - s_i(ref)| <= 4 N eps s_1 (Weyl: a backward-stable SVD
 *              moves each singular value by at most ||dA||_2)
 *   solve      ||A x - b|| / (||A|| ||x|| + ||b||)  <= 4 n eps   (normwise backward error)
 *   lstsq      ||A^T r|| / (||A|| (||A|| ||x|| + ||r|| + ||b||)) <= 4 N eps, r = A x - b
 *              (a backward-stable solution solves a problem perturbed by
 *              ||dA|| <= c N eps ||A||, ||db|| <= c N eps ||b||)
 * The f32 Cholesky matrices have condition 1e4, not 1e6: rounding a matrix
 * with smallest eigenvalue 1e-6 to f32 moves its eigenvalues by about
 * sqrt(n) eps/2 ~ 1e-6 at n = 513, which may leave it indefinite.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitnet.h"
#include "testutil.h"

typedef struct {
    uint64_t m, n;
} shape;
static const shape SHAPES[] = {{1, 1}, {3, 5}, {17, 17}, {255, 64}, {64, 255}, {513, 513}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

static double frob(const double *a, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * a[i];
    return sqrt(s);
}

static double eps_of(bitnet_dtype dt) { return dt == BITNET_F64 ? 2.220446049250313e-16 : 1.1920928955078125e-7; }

static void *to_dt(bitnet_dtype dt, const double *a, size_t n)
{
    void *p = malloc(n * (dt == BITNET_F64 ? 8 : 4));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        if (dt == BITNET_F64) ((double *)p)[i] = a[i];
        else ((float *)p)[i] = (float)a[i];
    }
    return p;
}

static double *from_dt(bitnet_dtype dt, const void *p, size_t n)
{
    double *a = malloc(n * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++) a[i] = dt == BITNET_F64 ? ((const double *)p)[i] : ((const float *)p)[i];
    return a;
}

static void *out_buf(bitnet_dtype dt, size_t n)
{
    void *p = malloc((n ? n : 1) * (dt == BITNET_F64 ? 8 : 4));
    assert_non_null(p);
    memset(p, 0x7f, (n ? n : 1) * (dt == BITNET_F64 ? 8 : 4)); /* not zeros: an unwritten output shows */
    return p;
}

static double *randm(uint64_t *st, size_t n)
{
    double *a = malloc(n * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++) a[i] = tu_randf53(st);
    return a;
}

/* m x k with orthonormal columns: modified Gram-Schmidt, twice, on random columns. */
static double *orth(uint64_t *st, uint64_t m, uint64_t k)
{
    double *q = randm(st, (size_t)(m * k));
    for (int pass = 0; pass < 2; pass++)
        for (uint64_t j = 0; j < k; j++) {
            for (uint64_t p = 0; p < j; p++) {
                double d = 0.0;
                for (uint64_t i = 0; i < m; i++) d += q[i * k + p] * q[i * k + j];
                for (uint64_t i = 0; i < m; i++) q[i * k + j] -= d * q[i * k + p];
            }
            double nr = 0.0;
            for (uint64_t i = 0; i < m; i++) nr += q[i * k + j] * q[i * k + j];
            nr = sqrt(nr);
            for (uint64_t i = 0; i < m; i++) q[i * k + j] /= nr;
        }
    return q;
}

/* A = U diag(s) V^T [m x n], s_i = cond^(-i/(k-1)) descending from 1. */
static double *built(uint64_t *st, uint64_t m, uint64_t n, double cond, double *s)
{
    const uint64_t k = m < n ? m : n;
    double *u = orth(st, m, k), *v = orth(st, n, k), *a = calloc((size_t)(m * n), sizeof *a);
    assert_non_null(a);
    for (uint64_t i = 0; i < k; i++) s[i] = k > 1 ? pow(cond, -(double)i / (double)(k - 1)) : 1.0;
    for (uint64_t i = 0; i < m; i++)
        for (uint64_t j = 0; j < n; j++) {
            double t = 0.0;
            for (uint64_t p = 0; p < k; p++) t += u[i * k + p] * s[p] * v[j * k + p];
            a[i * n + j] = t;
        }
    free(u);
    free(v);
    return a;
}

/* ||X^T X - I||_F for X [r x c]. */
static double orth_err(const double *x, uint64_t r, uint64_t c)
{
    double e = 0.0;
    for (uint64_t p = 0; p < c; p++)
        for (uint64_t q = 0; q < c; q++) {
            double d = 0.0;
            for (uint64_t i = 0; i < r; i++) d += x[i * c + p] * x[i * c + q];
            d -= p == q ? 1.0 : 0.0;
            e += d * d;
        }
    return sqrt(e);
}

typedef struct {
    const char *name;
    bitnet_backend *be; /* NULL: the _ref */
} dev;

static int ndev(dev *d)
{
    int n = 0;
    d[n++] = (dev){"ref", NULL};
    bitnet_backend *be;
    if (bitnet_backend_create(&be, "cpu", 2) == BITNET_OK) d[n++] = (dev){"cpu", be};
    if (bitnet_backend_create(&be, "opencl", 2) == BITNET_OK) d[n++] = (dev){"opencl", be};
    else print_message("# no OpenCL device: CPU and reference only\n");
    return n;
}

static void free_devs(dev *d, int n)
{
    for (int i = 0; i < n; i++) bitnet_backend_free(d[i].be);
}

static const bitnet_dtype DTS[] = {BITNET_F32, BITNET_F64};

static void check(double v, double bound, const char *what, const char *dname, bitnet_dtype dt, uint64_t m,
                  uint64_t n)
{
    if (!(v <= bound))
        print_message("# %s on %s, %s, %llu x %llu: %g > bound %g\n", what, dname, bitnet_dtype_name(dt),
                      (unsigned long long)m, (unsigned long long)n, v, bound);
    assert_true(v <= bound);
}

/* ---- QR ----------------------------------------------------------------- */

static void qr_case(const dev *d, bitnet_dtype dt, const double *a, uint64_t batch, uint64_t m, uint64_t n)
{
    const uint64_t k = m < n ? m : n, N = m > n ? m : n;
    void *ad = to_dt(dt, a, (size_t)(batch * m * n)), *q = out_buf(dt, (size_t)(batch * m * k)),
         *r = out_buf(dt, (size_t)(batch * k * n));
    bitnet_status st = d->be ? bitnet_qr(d->be, dt, ad, batch, m, n, q, r) : bitnet_qr_ref(dt, ad, batch, m, n, q, r);
    assert_int_equal(st, BITNET_OK);
    double *qd = from_dt(dt, q, (size_t)(batch * m * k)), *rd = from_dt(dt, r, (size_t)(batch * k * n));
    double *ar = from_dt(dt, ad, (size_t)(batch * m * n)); /* A as the op saw it */
    const double bound = 4.0 * (double)N * eps_of(dt);
    for (uint64_t b = 0; b < batch; b++) {
        const double *A = ar + b * m * n, *Q = qd + b * m * k, *R = rd + b * k * n;
        double res = 0.0;
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t j = 0; j < n; j++) {
                double t = A[i * n + j];
                for (uint64_t p = 0; p < k; p++) t -= Q[i * k + p] * R[p * n + j];
                res += t * t;
            }
        for (uint64_t i = 0; i < k; i++)
            for (uint64_t j = 0; j < i && j < n; j++) assert_true(R[i * n + j] == 0.0);
        check(sqrt(res) / frob(A, (size_t)(m * n)), bound, "qr ||A-QR||/||A||", d->name, dt, m, n);
        check(orth_err(Q, m, k), bound, "qr ||Q^TQ-I||", d->name, dt, m, n);
    }
    free(ad);
    free(q);
    free(r);
    free(qd);
    free(rd);
    free(ar);
}

static void test_qr(void **state)
{
    (void)state;
    dev d[3];
    const int nd = ndev(d);
    uint64_t st = 0x51ull;
    for (size_t s = 0; s < NSHAPES; s++) {
        const uint64_t m = SHAPES[s].m, n = SHAPES[s].n, k = m < n ? m : n;
        double *a = randm(&st, (size_t)(m * n)), *sv = malloc((size_t)k * sizeof *sv);
        double *ill = built(&st, m, n, 1e6, sv);
        for (int i = 0; i < nd; i++)
            for (int t = 0; t < 2; t++) {
                qr_case(&d[i], DTS[t], a, 1, m, n);
                qr_case(&d[i], DTS[t], ill, 1, m, n);
            }
        free(a);
        free(ill);
        free(sv);
    }
    double *a = randm(&st, 3 * 5 * 4); /* a batch of three 5 x 4 */
    for (int i = 0; i < nd; i++) qr_case(&d[i], BITNET_F32, a, 3, 5, 4);
    free(a);
    /* several blocks of the OpenCL QR (64 columns each), the last one partial,
     * tall and wide, and a batch of them */
    static const shape blocks[] = {{300, 130}, {130, 300}, {129, 129}};
    for (size_t s = 0; s < sizeof blocks / sizeof blocks[0]; s++) {
        const uint64_t m = blocks[s].m, n = blocks[s].n;
        double *b = randm(&st, (size_t)(2 * m * n));
        for (int i = 0; i < nd; i++)
            for (int t = 0; t < 2; t++) qr_case(&d[i], DTS[t], b, 2, m, n);
        free(b);
    }
    free_devs(d, nd);
}

/* ---- SVD ---------------------------------------------------------------- */

/* sref: the reference singular values (NULL: the f64 reference computes them). */
static void svd_case(const dev *d, bitnet_dtype dt, const double *a, uint64_t batch, uint64_t m, uint64_t n,
                     const double *sref)
{
    const uint64_t k = m < n ? m : n, N = m > n ? m : n;
    void *ad = to_dt(dt, a, (size_t)(batch * m * n)), *s = out_buf(dt, (size_t)(batch * k)),
         *u = out_buf(dt, (size_t)(batch * m * k)), *vt = out_buf(dt, (size_t)(batch * k * n)),
         *s2 = out_buf(dt, (size_t)(batch * k));
    bitnet_status st = d->be ? bitnet_svd(d->be, dt, ad, batch, m, n, s, u, vt)
                             : bitnet_svd_ref(dt, ad, batch, m, n, s, u, vt);
    assert_int_equal(st, BITNET_OK);
    /* values only: the same values */
    st = d->be ? bitnet_svd(d->be, dt, ad, batch, m, n, s2, NULL, NULL) : bitnet_svd_ref(dt, ad, batch, m, n, s2, NULL, NULL);
    assert_int_equal(st, BITNET_OK);
    double *sd = from_dt(dt, s, (size_t)(batch * k)), *s2d = from_dt(dt, s2, (size_t)(batch * k)),
           *ud = from_dt(dt, u, (size_t)(batch * m * k)), *vd = from_dt(dt, vt, (size_t)(batch * k * n)),
           *ar = from_dt(dt, ad, (size_t)(batch * m * n));
    double *sr = NULL;
    if (!sref) { /* the reference: Jacobi in double on the same rounded input */
        void *ref = out_buf(BITNET_F64, (size_t)(batch * k));
        assert_int_equal(bitnet_svd_ref(BITNET_F64, ar, batch, m, n, ref, NULL, NULL), BITNET_OK);
        sr = from_dt(BITNET_F64, ref, (size_t)(batch * k));
        free(ref);
    }
    const double bound = 4.0 * (double)N * eps_of(dt);
    for (uint64_t b = 0; b < batch; b++) {
        const double *A = ar + b * m * n, *S = sd + b * k, *U = ud + b * m * k, *V = vd + b * k * n;
        const double *R = sref ? sref : sr + b * k;
        double res = 0.0, verr = 0.0;
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t j = 0; j < n; j++) {
                double t = A[i * n + j];
                for (uint64_t p = 0; p < k; p++) t -= U[i * k + p] * S[p] * V[p * n + j];
                res += t * t;
            }
        for (uint64_t i = 0; i < k; i++) {
            assert_true(S[i] >= 0.0);
            if (i) assert_true(S[i] <= S[i - 1]);
            verr = fmax(verr, fabs(S[i] - R[i]));
            assert_true(fabs(s2d[b * k + i] - S[i]) <= bound * S[0]);
        }
        check(sqrt(res) / frob(A, (size_t)(m * n)), bound, "svd ||A-USV^T||/||A||", d->name, dt, m, n);
        check(orth_err(U, m, k), bound, "svd ||U^TU-I||", d->name, dt, m, n);
        /* V^T is k x n: its rows orthonormal, i.e. (V^T)^T as columns */
        double ve = 0.0;
        for (uint64_t p = 0; p < k; p++)
            for (uint64_t q = 0; q < k; q++) {
                double t = 0.0;
                for (uint64_t j = 0; j < n; j++) t += V[p * n + j] * V[q * n + j];
                t -= p == q;
                ve += t * t;
            }
        check(sqrt(ve), bound, "svd ||V^TV-I||", d->name, dt, m, n);
        check(verr / R[0], bound, "svd max|s-s_ref|/s_1", d->name, dt, m, n);
    }
    free(ad), free(s), free(u), free(vt), free(s2), free(sd), free(s2d), free(ud), free(vd), free(ar), free(sr);
}

static void test_svd(void **state)
{
    (void)state;
    dev d[3];
    const int nd = ndev(d);
    uint64_t st = 0x5dull;
    for (size_t s = 0; s < NSHAPES; s++) {
        const uint64_t m = SHAPES[s].m, n = SHAPES[s].n, k = m < n ? m : n;
        double *sv = malloc((size_t)k * sizeof *sv), *ill = built(&st, m, n, 1e6, sv);
        double *a = m * n <= 255 * 64 ? randm(&st, (size_t)(m * n)) : NULL; /* the Jacobi reference is slow */
        for (int i = 0; i < nd; i++)
            for (int t = 0; t < 2; t++) {
                if (d[i].be || m * n <= 255 * 64) svd_case(&d[i], DTS[t], ill, 1, m, n, sv);
                if (a) svd_case(&d[i], DTS[t], a, 1, m, n, NULL);
            }
        free(a);
        free(ill);
        free(sv);
    }
    double *a = randm(&st, 4 * 3 * 5); /* a batch of four 3 x 5 */
    for (int i = 0; i < nd; i++) svd_case(&d[i], BITNET_F64, a, 4, 3, 5, NULL);
    free(a);
    /* the OpenCL kernel's sums with work-groups of 1 and 3 items (any size
     * must do, not only powers of two), on a single row and column too */
    static const shape wgs[] = {{1, 7}, {7, 1}, {17, 17}, {64, 255}};
    for (int w = 0; w < 2; w++) {
        setenv("BITNET_OCL_SVD_WG", w ? "3" : "1", 1);
        for (size_t s = 0; s < sizeof wgs / sizeof wgs[0]; s++) {
            double *b = randm(&st, (size_t)(wgs[s].m * wgs[s].n));
            for (int i = 0; i < nd; i++)
                if (d[i].be)
                    for (int t = 0; t < 2; t++) svd_case(&d[i], DTS[t], b, 1, wgs[s].m, wgs[s].n, NULL);
            free(b);
        }
    }
    unsetenv("BITNET_OCL_SVD_WG");
    free_devs(d, nd);
}

/* Rank-deficient matrices: singular values exactly 0, whose vectors must
 * still complete orthonormal U and V^T (the backends; the reference leaves
 * them 0).  A zero column, a zero row, rank 1 (an exact outer product), and
 * all zeros; tall and wide. */
static void test_svd_rank_deficient(void **state)
{
    (void)state;
    dev d[3];
    const int nd = ndev(d);
    uint64_t st = 0x5eull;
    double *zc = randm(&st, 6 * 4), *zr = randm(&st, 3 * 6), r1[5 * 3], r1t[3 * 5], zero[4 * 3] = {0};
    for (int i = 0; i < 6; i++) zc[i * 4 + 2] = 0.0;
    for (int j = 0; j < 6; j++) zr[1 * 6 + j] = 0.0;
    const double cu[5] = {1, 2, 3, 4, 5}, cv[3] = {1, 1, 2};
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++) r1[i * 3 + j] = r1t[j * 5 + i] = cu[i] * cv[j];
    for (int i = 0; i < nd; i++) {
        if (!d[i].be) continue;
        for (int t = 0; t < 2; t++) {
            svd_case(&d[i], DTS[t], zc, 1, 6, 4, NULL);
            svd_case(&d[i], DTS[t], zr, 1, 3, 6, NULL);
            svd_case(&d[i], DTS[t], r1, 1, 5, 3, NULL);
            svd_case(&d[i], DTS[t], r1t, 1, 3, 5, NULL);
            for (int w = 0; w < 2; w++) { /* all zeros (no ||A|| to divide by): s = 0, orthonormal factors */
                const uint64_t m = w ? 3 : 4, n = w ? 4 : 3;
                void *az = to_dt(DTS[t], zero, 12), *sz = out_buf(DTS[t], 3), *uz = out_buf(DTS[t], m * 3),
                     *vz = out_buf(DTS[t], 3 * n);
                assert_int_equal(bitnet_svd(d[i].be, DTS[t], az, 1, m, n, sz, uz, vz), BITNET_OK);
                double *sd = from_dt(DTS[t], sz, 3), *ud = from_dt(DTS[t], uz, m * 3), *vd = from_dt(DTS[t], vz, 3 * n);
                double vtt[12]; /* (V^T)^T, n x 3 */
                for (uint64_t p = 0; p < 3; p++)
                    for (uint64_t j = 0; j < n; j++) vtt[j * 3 + p] = vd[p * n + j];
                for (int c = 0; c < 3; c++) assert_true(sd[c] == 0.0);
                check(orth_err(ud, m, 3), 4.0 * 4 * eps_of(DTS[t]), "svd of zeros ||U^TU-I||", d[i].name, DTS[t], m, n);
                check(orth_err(vtt, n, 3), 4.0 * 4 * eps_of(DTS[t]), "svd of zeros ||V^TV-I||", d[i].name, DTS[t], m, n);
                free(az), free(sz), free(uz), free(vz), free(sd), free(ud), free(vd);
            }
        }
    }
    free(zc), free(zr);
    free_devs(d, nd);
}

/* ---- Cholesky and its solve ------------------------------------------------ */

/* Q diag(e) Q^T, e from 1 down to 1/cond. */
static double *spd(uint64_t *st, uint64_t n, double cond)
{
    double *e = malloc((size_t)n * sizeof *e), *a = built(st, n, n, cond, e);
    /* built gives U S V^T; make it symmetric: U S U^T */
    double *u = orth(st, n, n);
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = 0; j < n; j++) {
            double t = 0.0;
            for (uint64_t p = 0; p < n; p++) t += u[i * n + p] * e[p] * u[j * n + p];
            a[i * n + j] = t;
        }
    for (uint64_t i = 0; i < n; i++) /* exactly symmetric */
        for (uint64_t j = 0; j < i; j++) a[j * n + i] = a[i * n + j];
    free(u);
    free(e);
    return a;
}

static void chol_case(const dev *d, bitnet_dtype dt, const double *a, uint64_t batch, uint64_t n, uint64_t nrhs,
                      const double *rhs)
{
    void *ad = to_dt(dt, a, (size_t)(batch * n * n)), *l = out_buf(dt, (size_t)(batch * n * n));
    bitnet_status st = d->be ? bitnet_cholesky(d->be, dt, ad, batch, n, l) : bitnet_cholesky_ref(dt, ad, batch, n, l);
    assert_int_equal(st, BITNET_OK);
    double *ld = from_dt(dt, l, (size_t)(batch * n * n)), *ar = from_dt(dt, ad, (size_t)(batch * n * n));
    const double bound = 4.0 * (double)n * eps_of(dt);
    for (uint64_t b = 0; b < batch; b++) {
        const double *A = ar + b * n * n, *L = ld + b * n * n;
        double res = 0.0;
        for (uint64_t i = 0; i < n; i++)
            for (uint64_t j = 0; j < n; j++) {
                if (j > i) assert_true(L[i * n + j] == 0.0);
                if (j == i) assert_true(L[i * n + i] > 0.0);
                double t = A[i * n + j];
                for (uint64_t p = 0; p <= (i < j ? i : j); p++) t -= L[i * n + p] * L[j * n + p];
                res += t * t;
            }
        check(sqrt(res) / frob(A, (size_t)(n * n)), bound, "cholesky ||A-LL^T||/||A||", d->name, dt, n, n);
    }
    /* the solve */
    void *bd = to_dt(dt, rhs, (size_t)(batch * n * nrhs)), *x = out_buf(dt, (size_t)(batch * n * nrhs));
    st = d->be ? bitnet_cholesky_solve(d->be, dt, ad, batch, n, bd, nrhs, x)
               : bitnet_cholesky_solve_ref(dt, ad, batch, n, bd, nrhs, x);
    assert_int_equal(st, BITNET_OK);
    double *xd = from_dt(dt, x, (size_t)(batch * n * nrhs)), *br = from_dt(dt, bd, (size_t)(batch * n * nrhs));
    for (uint64_t b = 0; b < batch; b++) {
        const double *A = ar + b * n * n, *X = xd + b * n * nrhs, *B = br + b * n * nrhs;
        double res = 0.0;
        for (uint64_t i = 0; i < n; i++)
            for (uint64_t c = 0; c < nrhs; c++) {
                double t = -B[i * nrhs + c];
                for (uint64_t j = 0; j < n; j++) t += A[i * n + j] * X[j * nrhs + c];
                res += t * t;
            }
        const double be = sqrt(res) / (frob(A, (size_t)(n * n)) * frob(X, (size_t)(n * nrhs)) +
                                       frob(B, (size_t)(n * nrhs)));
        check(be, bound, "cholesky_solve backward error", d->name, dt, n, nrhs);
    }
    free(ad), free(l), free(ld), free(ar), free(bd), free(x), free(xd), free(br);
}

static void test_cholesky(void **state)
{
    (void)state;
    dev d[3];
    const int nd = ndev(d);
    uint64_t st = 0xc4ull;
    const uint64_t ns[] = {1, 3, 17, 64, 255, 513};
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        const uint64_t n = ns[s];
        double *well = spd(&st, n, 10.0), *ill64 = spd(&st, n, 1e6), *ill32 = spd(&st, n, 1e4);
        double *rhs = randm(&st, (size_t)(n * 3));
        for (int i = 0; i < nd; i++) {
            chol_case(&d[i], BITNET_F64, well, 1, n, 3, rhs);
            chol_case(&d[i], BITNET_F32, well, 1, n, 1, rhs);
            chol_case(&d[i], BITNET_F64, ill64, 1, n, 3, rhs);
            chol_case(&d[i], BITNET_F32, ill32, 1, n, 3, rhs);
        }
        free(well), free(ill64), free(ill32), free(rhs);
    }
    /* the blocked OpenCL path with narrow blocks: several blocks, a ragged last one */
    setenv("BITNET_OCL_CHOL_NB", "16", 1);
    for (uint64_t n = 17; n <= 100; n += 83) {
        double *well = spd(&st, n, 100.0), *rhs = randm(&st, (size_t)(n * 2));
        for (int i = 0; i < nd; i++) {
            chol_case(&d[i], BITNET_F32, well, 1, n, 2, rhs);
            chol_case(&d[i], BITNET_F64, well, 1, n, 2, rhs);
        }
        free(well), free(rhs);
    }
    /* blocks of 300 on 700: the OpenCL factor's tiles of 64 with a ragged 44
     * in each block column, on an ill-conditioned matrix too */
    setenv("BITNET_OCL_CHOL_NB", "300", 1);
    {
        const uint64_t n = 700;
        double *ill = spd(&st, n, 1e4), *rhs = randm(&st, (size_t)(n * 2));
        for (int i = 0; i < nd; i++) {
            chol_case(&d[i], BITNET_F32, ill, 1, n, 2, rhs);
            chol_case(&d[i], BITNET_F64, ill, 1, n, 2, rhs);
        }
        free(ill), free(rhs);
    }
    unsetenv("BITNET_OCL_CHOL_NB");
    /* a batch of three 17 x 17 */
    double *a = malloc(3 * 17 * 17 * sizeof *a), *rhs = randm(&st, 3 * 17 * 2);
    for (int b = 0; b < 3; b++) {
        double *one = spd(&st, 17, 100.0);
        memcpy(a + b * 17 * 17, one, 17 * 17 * sizeof *a);
        free(one);
    }
    for (int i = 0; i < nd; i++) chol_case(&d[i], BITNET_F32, a, 3, 17, 2, rhs);
    free(a), free(rhs);
    free_devs(d, nd);
}

/* ---- least squares ------------------------------------------------------- */

static void lstsq_case(const dev *d, bitnet_dtype dt, const double *a, uint64_t batch, uint64_t m, uint64_t n,
                       const double *rhs, uint64_t nrhs)
{
    void *ad = to_dt(dt, a, (size_t)(batch * m * n)), *bd = to_dt(dt, rhs, (size_t)(batch * m * nrhs)),
         *x = out_buf(dt, (size_t)(batch * n * nrhs));
    bitnet_status st = d->be ? bitnet_lstsq(d->be, dt, ad, batch, m, n, bd, nrhs, x)
                             : bitnet_lstsq_ref(dt, ad, batch, m, n, bd, nrhs, x);
    assert_int_equal(st, BITNET_OK);
    double *xd = from_dt(dt, x, (size_t)(batch * n * nrhs)), *ar = from_dt(dt, ad, (size_t)(batch * m * n)),
           *br = from_dt(dt, bd, (size_t)(batch * m * nrhs)), *r = malloc((size_t)(m * nrhs) * sizeof *r);
    const double bound = 4.0 * (double)m * eps_of(dt);
    for (uint64_t b = 0; b < batch; b++) {
        const double *A = ar + b * m * n, *X = xd + b * n * nrhs, *B = br + b * m * nrhs;
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t c = 0; c < nrhs; c++) {
                double t = -B[i * nrhs + c];
                for (uint64_t j = 0; j < n; j++) t += A[i * n + j] * X[j * nrhs + c];
                r[i * nrhs + c] = t;
            }
        double atr = 0.0;
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t c = 0; c < nrhs; c++) {
                double t = 0.0;
                for (uint64_t i = 0; i < m; i++) t += A[i * n + j] * r[i * nrhs + c];
                atr += t * t;
            }
        const double na = frob(A, (size_t)(m * n));
        const double v = sqrt(atr) / (na * (na * frob(X, (size_t)(n * nrhs)) + frob(r, (size_t)(m * nrhs)) +
                                            frob(B, (size_t)(m * nrhs))));
        check(v, bound, "lstsq ||A^T r|| backward error", d->name, dt, m, n);
    }
    free(ad), free(bd), free(x), free(xd), free(ar), free(br), free(r);
}

static void test_lstsq(void **state)
{
    (void)state;
    dev d[3];
    const int nd = ndev(d);
    uint64_t st = 0x15ull;
    const shape sh[] = {{1, 1}, {5, 3}, {17, 17}, {255, 64}, {513, 513}};
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        const uint64_t m = sh[s].m, n = sh[s].n;
        double *sv = malloc((size_t)n * sizeof *sv), *a = randm(&st, (size_t)(m * n)), *ill = built(&st, m, n, 1e6, sv);
        double *rhs = randm(&st, (size_t)(m * 2));
        for (int i = 0; i < nd; i++)
            for (int t = 0; t < 2; t++) {
                lstsq_case(&d[i], DTS[t], a, 1, m, n, rhs, 2);
                lstsq_case(&d[i], DTS[t], ill, 1, m, n, rhs, 1);
            }
        free(sv), free(a), free(ill), free(rhs);
    }
    double *a = randm(&st, 2 * 7 * 4), *rhs = randm(&st, 2 * 7 * 3);
    for (int i = 0; i < nd; i++) lstsq_case(&d[i], BITNET_F32, a, 2, 7, 4, rhs, 3);
    free(a), free(rhs);
    free_devs(d, nd);
}

/* ---- errors -------------------------------------------------------------- */

static void test_errors(void **state)
{
    (void)state;
    dev d[3];
    const int nd = ndev(d);
    /* a batch of two: the second has a negative pivot at position 2 */
    const float a[2][9] = {{4, 0, 0, 2, 5, 0, 0, 1, 3}, {1, 0, 0, 0, -1, 0, 0, 0, 2}};
    const float b[6] = {1, 2, 3, 4, 5, 6};
    float l[18], x[9], q[9], r[9], s[3], u[9], vt[9], nan3[9] = {1, 0, 0, 0, 1, 0, 0, 0, NAN};
    const float rankdef[6] = {1, 0, 2, 0, 3, 0}; /* 3 x 2, second column 0: R[1][1] is exactly 0 */
    for (int i = 0; i < nd; i++) {
        bitnet_backend *be = d[i].be;
#define CALL(call_be, call_ref) (be ? (call_be) : (call_ref))
        bitnet_status st = CALL(bitnet_cholesky(be, BITNET_F32, a, 2, 3, l), bitnet_cholesky_ref(BITNET_F32, a, 2, 3, l));
        assert_int_equal(st, BITNET_E_NUMERIC);
        assert_non_null(strstr(bitnet_error_detail(), "not positive definite"));
        assert_non_null(strstr(bitnet_error_detail(), "pivot 2 of 3"));
        assert_non_null(strstr(bitnet_error_detail(), "matrix 1 (0-based)"));
        st = CALL(bitnet_cholesky_solve(be, BITNET_F32, a[1], 1, 3, b, 2, x),
                  bitnet_cholesky_solve_ref(BITNET_F32, a[1], 1, 3, b, 2, x));
        assert_int_equal(st, BITNET_E_NUMERIC);
        assert_non_null(strstr(bitnet_error_detail(), "pivot 2 of 3"));
        st = CALL(bitnet_qr(be, BITNET_F32, nan3, 1, 3, 3, q, r), bitnet_qr_ref(BITNET_F32, nan3, 1, 3, 3, q, r));
        assert_int_equal(st, BITNET_E_NUMERIC);
        assert_non_null(strstr(bitnet_error_detail(), "NaN or Inf at element 8"));
        nan3[8] = INFINITY;
        st = CALL(bitnet_svd(be, BITNET_F32, nan3, 1, 3, 3, s, u, vt), bitnet_svd_ref(BITNET_F32, nan3, 1, 3, 3, s, u, vt));
        assert_int_equal(st, BITNET_E_NUMERIC);
        nan3[8] = NAN;
        st = CALL(bitnet_cholesky(be, BITNET_F32, a, 1, 0, l), bitnet_cholesky_ref(BITNET_F32, a, 1, 0, l));
        assert_int_equal(st, BITNET_E_SHAPE);
        assert_non_null(strstr(bitnet_error_detail(), "empty matrix"));
        st = CALL(bitnet_svd(be, BITNET_F32, a, 0, 3, 3, s, NULL, NULL), bitnet_svd_ref(BITNET_F32, a, 0, 3, 3, s, NULL, NULL));
        assert_int_equal(st, BITNET_E_SHAPE);
        st = CALL(bitnet_qr(be, BITNET_I8, a, 1, 3, 3, q, r), bitnet_qr_ref(BITNET_I8, a, 1, 3, 3, q, r));
        assert_int_equal(st, BITNET_E_DTYPE);
        st = CALL(bitnet_svd(be, BITNET_F32, a, 1, 3, 3, s, u, NULL), bitnet_svd_ref(BITNET_F32, a, 1, 3, 3, s, u, NULL));
        assert_int_equal(st, BITNET_E_INVALID);
        st = CALL(bitnet_lstsq(be, BITNET_F32, rankdef, 1, 2, 3, b, 1, x), bitnet_lstsq_ref(BITNET_F32, rankdef, 1, 2, 3, b, 1, x));
        assert_int_equal(st, BITNET_E_SHAPE); /* wide */
        st = CALL(bitnet_lstsq(be, BITNET_F32, rankdef, 1, 3, 2, b, 1, x), bitnet_lstsq_ref(BITNET_F32, rankdef, 1, 3, 2, b, 1, x));
        assert_int_equal(st, BITNET_E_NUMERIC);
        assert_non_null(strstr(bitnet_error_detail(), "rank deficient"));
        assert_non_null(strstr(bitnet_error_detail(), "R[1][1] is 0"));
        /* the same from the second matrix of a batch (the first has full rank) */
        const float pair[12] = {1, 0, 0, 1, 1, 1, 1, 0, 2, 0, 3, 0};
        st = CALL(bitnet_lstsq(be, BITNET_F32, pair, 2, 3, 2, b, 1, x), bitnet_lstsq_ref(BITNET_F32, pair, 2, 3, 2, b, 1, x));
        assert_int_equal(st, BITNET_E_NUMERIC);
        assert_non_null(strstr(bitnet_error_detail(), "matrix 1 (0-based) of a batch of 2 is rank deficient (R[1][1] is 0)"));
        st = CALL(bitnet_lstsq(be, BITNET_F32, a[0], 1, 3, 3, nan3, 3, x), bitnet_lstsq_ref(BITNET_F32, a[0], 1, 3, 3, nan3, 3, x));
        assert_int_equal(st, BITNET_E_NUMERIC);
        assert_non_null(strstr(bitnet_error_detail(), "right-hand side"));
#undef CALL
    }
    assert_int_equal(bitnet_cholesky(NULL, BITNET_F32, a, 1, 3, l), BITNET_E_INVALID);
    free_devs(d, nd);
}

/* The finiteness scan runs on the backend's threads: of several non-finite
 * elements in different threads' ranges, the first is named (two matrices
 * of 600 x 600 f32, 720000 elements in ranges of at least 262144). */
static void test_first_nonfinite(void **state)
{
    (void)state;
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "cpu", 0), BITNET_OK);
    const uint64_t n = 600;
    float *a = calloc((size_t)(2 * n * n), sizeof *a), *l = malloc((size_t)(2 * n * n) * sizeof *l);
    assert_non_null(a);
    assert_non_null(l);
    a[123457] = NAN;
    a[600001] = INFINITY; /* matrix 1, element 240001 */
    a[719999] = NAN;
    assert_int_equal(bitnet_cholesky(be, BITNET_F32, a, 2, n, l), BITNET_E_NUMERIC);
    assert_non_null(strstr(bitnet_error_detail(), "(matrix 0, 0-based) has a NaN or Inf at element 123457"));
    a[123457] = 0.0f;
    assert_int_equal(bitnet_cholesky(be, BITNET_F32, a, 2, n, l), BITNET_E_NUMERIC);
    assert_non_null(strstr(bitnet_error_detail(), "(matrix 1, 0-based) has a NaN or Inf at element 240001"));
    free(a), free(l);
    bitnet_backend_free(be);
}

/* A pivot that fails deep in the matrix is named: A = L L^T with A[129][129]
 * lowered past l_129,129^2, so the first 129 pivots are positive and the
 * 130th is not (in the third tile of the OpenCL factor; with blocks of 100,
 * in its second block column too). */
static void test_late_pivot(void **state)
{
    (void)state;
    dev d[3];
    const int nd = ndev(d);
    const uint64_t n = 150, bad = 129;
    uint64_t rs = 0x9a7;
    double *lo = randm(&rs, (size_t)(n * n)), *a = calloc((size_t)(n * n), sizeof *a);
    assert_non_null(a);
    for (uint64_t i = 0; i < n; i++) {
        lo[i * n + i] = 2.0 + fabs(lo[i * n + i]);
        for (uint64_t j = i + 1; j < n; j++) lo[i * n + j] = 0.0;
    }
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = 0; j <= i; j++) {
            double t = 0.0;
            for (uint64_t k = 0; k <= j; k++) t += lo[i * n + k] * lo[j * n + k];
            a[i * n + j] = a[j * n + i] = t;
        }
    a[bad * n + bad] -= lo[bad * n + bad] * lo[bad * n + bad] + 1.0;
    const char *widths[] = {NULL, "100"};
    for (size_t w = 0; w < 2; w++) {
        if (widths[w]) setenv("BITNET_OCL_CHOL_NB", widths[w], 1);
        for (int i = 0; i < nd; i++)
            for (int f64 = 0; f64 < 2; f64++) {
                const bitnet_dtype dt = f64 ? BITNET_F64 : BITNET_F32;
                void *ad = to_dt(dt, a, (size_t)(n * n)), *l = out_buf(dt, (size_t)(n * n));
                const bitnet_status st =
                    d[i].be ? bitnet_cholesky(d[i].be, dt, ad, 1, n, l) : bitnet_cholesky_ref(dt, ad, 1, n, l);
                assert_int_equal(st, BITNET_E_NUMERIC);
                assert_non_null(strstr(bitnet_error_detail(), "pivot 130 of 150"));
                free(ad), free(l);
            }
        unsetenv("BITNET_OCL_CHOL_NB");
    }
    free(lo), free(a);
    free_devs(d, nd);
}

/* An OpenCL SVD that does not converge says so (the test hook svd_converge
 * allows one sweep; a random 17 x 17 matrix needs several), alone and as
 * matrices of a batch. */
static void test_svd_not_converged(void **state)
{
    (void)state;
    bitnet_backend *be;
    if (bitnet_backend_create(&be, "opencl", 1) != BITNET_OK) skip();
    uint64_t st = 0x5eed;
    float a[2 * 17 * 17], s[2 * 17];
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) a[i] = (float)tu_randf53(&st);
    assert_int_equal(bitnet_svd(be, BITNET_F32, a, 2, 17, 17, s, NULL, NULL), BITNET_OK);
    setenv("BITNET_TEST_FAIL", "svd_converge", 1);
    bitnet_status st1 = bitnet_svd(be, BITNET_F32, a, 1, 17, 17, s, NULL, NULL);
    char d1[256];
    snprintf(d1, sizeof d1, "%s", bitnet_error_detail());
    bitnet_status st2 = bitnet_svd(be, BITNET_F32, a, 2, 17, 17, s, NULL, NULL);
    unsetenv("BITNET_TEST_FAIL");
    assert_int_equal(st1, BITNET_E_NUMERIC);
    assert_non_null(strstr(d1, "did not converge in 1 sweeps"));
    assert_int_equal(st2, BITNET_E_NUMERIC);
    assert_non_null(strstr(bitnet_error_detail(), "matrices 0 to 1"));
    bitnet_backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors), cmocka_unit_test(test_late_pivot), cmocka_unit_test(test_first_nonfinite), cmocka_unit_test(test_cholesky), cmocka_unit_test(test_qr),
        cmocka_unit_test(test_svd),    cmocka_unit_test(test_svd_rank_deficient), cmocka_unit_test(test_lstsq),
        cmocka_unit_test(test_svd_not_converged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
