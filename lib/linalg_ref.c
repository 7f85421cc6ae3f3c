/*
 * linalg_ref.c - the definitions of the linear-algebra ops: plain loops in
 * double, rounded once to the output dtype.  Cholesky-Banachiewicz; Householder
 * QR (reflector v = x - alpha e1, alpha = -sign(x0) ||x||); one-sided Jacobi
 * SVD (Hestenes: rotate column pairs until all are orthogonal, then sigma_j =
 * ||column j||, sorted descending); solves by substitution.  Slow, O(n^3) with
 * no blocking, and obviously right: the tests' float64 reference.
 */
#include "linalg.h"

#include <math.h>
#include <stdlib.h>

static double *load(bitnet_dtype dt, const void *p, uint64_t elems)
{
    double *d = malloc((size_t)elems * sizeof *d);
    if (d)
        for (uint64_t i = 0; i < elems; i++) d[i] = bn_la_get(dt, p, (size_t)i);
    return d;
}

static void store(bitnet_dtype dt, void *p, const double *d, uint64_t elems)
{
    for (uint64_t i = 0; i < elems; i++) bn_la_set(dt, p, (size_t)i, d[i]);
}

static bitnet_status nomem(const char *op) { return bn_fail(BITNET_E_NOMEM, "%s: out of memory", op); }

/* In place: the lower triangle of a [n x n] becomes L, the upper is zeroed.
 * Returns 0 or the 1-based failing pivot. */
static uint64_t chol(double *a, uint64_t n)
{
    for (uint64_t j = 0; j < n; j++) {
        double d = a[j * n + j];
        for (uint64_t k = 0; k < j; k++) d -= a[j * n + k] * a[j * n + k];
        if (!(d > 0.0)) return j + 1;
        const double ljj = sqrt(d);
        a[j * n + j] = ljj;
        for (uint64_t i = j + 1; i < n; i++) {
            double v = a[i * n + j];
            for (uint64_t k = 0; k < j; k++) v -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = v / ljj;
        }
        for (uint64_t k = j + 1; k < n; k++) a[j * n + k] = 0.0;
    }
    return 0;
}

bitnet_status bitnet_cholesky_ref(bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n, void *l)
{
    uint64_t bytes;
    bitnet_status st = bn_la_check(NULL, "cholesky", dt, a, batch, n, n, NULL, 0, 0, &bytes);
    if (st) return st;
    if (!l) return bn_fail(BITNET_E_INVALID, "cholesky: NULL output");
    for (uint64_t b = 0; b < batch; b++) {
        double *w = load(dt, bn_la_at(dt, a, b, n * n), n * n);
        if (!w) return nomem("cholesky");
        /* only the lower triangle is read: mirror it */
        for (uint64_t i = 0; i < n; i++)
            for (uint64_t j = i + 1; j < n; j++) w[i * n + j] = w[j * n + i];
        const uint64_t p = chol(w, n);
        if (!p) store(dt, bn_la_at_mut(dt, l, b, n * n), w, n * n);
        free(w);
        if (p) return bn_la_not_pd("cholesky", b, batch, p, n);
    }
    return BITNET_OK;
}

/* Householder QR of a [m x n] in place: R in the upper triangle, reflector j
 * (unit norm, zero above row j) in v[j * m ..]; beta[j] 0 when the column
 * was already zero (no reflection). */
static void householder(double *a, uint64_t m, uint64_t n, double *v, double *beta)
{
    const uint64_t k = m < n ? m : n;
    for (uint64_t j = 0; j < k; j++) {
        double *vj = v + j * m, norm = 0.0;
        for (uint64_t i = j; i < m; i++) norm += a[i * n + j] * a[i * n + j];
        norm = sqrt(norm);
        for (uint64_t i = 0; i < m; i++) vj[i] = 0.0;
        beta[j] = 0.0;
        if (norm == 0.0) continue;
        const double alpha = a[j * n + j] > 0.0 ? -norm : norm;
        for (uint64_t i = j; i < m; i++) vj[i] = a[i * n + j];
        vj[j] -= alpha;
        double vn = 0.0;
        for (uint64_t i = j; i < m; i++) vn += vj[i] * vj[i];
        if (vn == 0.0) continue;
        beta[j] = 2.0 / vn;
        for (uint64_t c = j; c < n; c++) { /* a -= beta v (v^T a) */
            double d = 0.0;
            for (uint64_t i = j; i < m; i++) d += vj[i] * a[i * n + c];
            d *= beta[j];
            for (uint64_t i = j; i < m; i++) a[i * n + c] -= d * vj[i];
        }
        for (uint64_t i = j + 1; i < m; i++) a[i * n + j] = 0.0;
    }
}

/* x [m x c] = H_{k-1} ... H_0 x (transpose 0: Q^T x) or H_0 ... H_{k-1} x (1: Q x). */
static void apply_q(const double *v, const double *beta, uint64_t m, uint64_t k, double *x, uint64_t c, int q)
{
    for (uint64_t s = 0; s < k; s++) {
        const uint64_t j = q ? k - 1 - s : s;
        const double *vj = v + j * m;
        if (beta[j] == 0.0) continue;
        for (uint64_t col = 0; col < c; col++) {
            double d = 0.0;
            for (uint64_t i = j; i < m; i++) d += vj[i] * x[i * c + col];
            d *= beta[j];
            for (uint64_t i = j; i < m; i++) x[i * c + col] -= d * vj[i];
        }
    }
}

bitnet_status bitnet_qr_ref(bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *q, void *r)
{
    uint64_t bytes;
    bitnet_status st = bn_la_check(NULL, "qr", dt, a, batch, m, n, NULL, 0, 0, &bytes);
    if (st) return st;
    if (!q || !r) return bn_fail(BITNET_E_INVALID, "qr: NULL output");
    const uint64_t k = m < n ? m : n;
    double *v = malloc((size_t)(k * m) * sizeof *v), *beta = malloc((size_t)k * sizeof *beta),
           *qm = malloc((size_t)(m * k) * sizeof *qm);
    st = v && beta && qm ? BITNET_OK : nomem("qr");
    for (uint64_t b = 0; b < batch && !st; b++) {
        double *w = load(dt, bn_la_at(dt, a, b, m * n), m * n);
        if (!w) {
            st = nomem("qr");
            break;
        }
        householder(w, m, n, v, beta);
        store(dt, bn_la_at_mut(dt, r, b, k * n), w, k * n); /* the first k rows */
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t j = 0; j < k; j++) qm[i * k + j] = i == j ? 1.0 : 0.0;
        apply_q(v, beta, m, k, qm, k, 1);
        store(dt, bn_la_at_mut(dt, q, b, m * k), qm, m * k);
        free(w);
    }
    free(v);
    free(beta);
    free(qm);
    return st;
}

/* One-sided Jacobi on w [m x n], m >= n: rotates column pairs (and the rows
 * of vt, which starts as I) until every pair is orthogonal to working
 * precision.  Afterwards sigma_j = ||w column j||. */
static void jacobi(double *w, uint64_t m, uint64_t n, double *vt)
{
    for (uint64_t i = 0; i < n * n; i++) vt[i] = i % (n + 1) == 0 ? 1.0 : 0.0;
    for (int sweep = 0; sweep < 60; sweep++) {
        int rotated = 0;
        for (uint64_t p = 0; p + 1 < n; p++)
            for (uint64_t c = p + 1; c < n; c++) {
                double al = 0.0, be = 0.0, ga = 0.0;
                for (uint64_t i = 0; i < m; i++) {
                    al += w[i * n + p] * w[i * n + p];
                    be += w[i * n + c] * w[i * n + c];
                    ga += w[i * n + p] * w[i * n + c];
                }
                if (ga == 0.0 || fabs(ga) <= 1e-15 * sqrt(al * be)) continue;
                rotated = 1;
                const double zeta = (be - al) / (2.0 * ga);
                const double t = (zeta >= 0.0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1.0 + zeta * zeta));
                const double cs = 1.0 / sqrt(1.0 + t * t), sn = cs * t;
                for (uint64_t i = 0; i < m; i++) {
                    const double x = w[i * n + p], y = w[i * n + c];
                    w[i * n + p] = cs * x - sn * y;
                    w[i * n + c] = sn * x + cs * y;
                }
                for (uint64_t i = 0; i < n; i++) {
                    const double x = vt[p * n + i], y = vt[c * n + i];
                    vt[p * n + i] = cs * x - sn * y;
                    vt[c * n + i] = sn * x + cs * y;
                }
            }
        if (!rotated) break;
    }
}

bitnet_status bitnet_svd_ref(bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *s, void *u,
                             void *vt)
{
    uint64_t bytes;
    bitnet_status st = bn_la_check(NULL, "svd", dt, a, batch, m, n, NULL, 0, 0, &bytes);
    if (st) return st;
    if (!s || (!u) != (!vt)) return bn_fail(BITNET_E_INVALID, "svd: NULL s, or only one of u and vt");
    const int wide = m < n; /* work on A^T: then U and V swap */
    const uint64_t rr = wide ? n : m, cc = wide ? m : n; /* rr >= cc = k */
    double *w = malloc((size_t)(rr * cc) * sizeof *w), *v = malloc((size_t)(cc * cc) * sizeof *v),
           *sig = malloc((size_t)cc * sizeof *sig);
    uint64_t *ord = malloc((size_t)cc * sizeof *ord);
    st = w && v && sig && ord ? BITNET_OK : nomem("svd");
    for (uint64_t b = 0; b < batch && !st; b++) {
        const void *ab = bn_la_at(dt, a, b, m * n);
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t j = 0; j < n; j++) {
                const double x = bn_la_get(dt, ab, (size_t)(i * n + j));
                if (wide) w[j * cc + i] = x;
                else w[i * cc + j] = x;
            }
        jacobi(w, rr, cc, v);
        for (uint64_t j = 0; j < cc; j++) {
            double t = 0.0;
            for (uint64_t i = 0; i < rr; i++) t += w[i * cc + j] * w[i * cc + j];
            sig[j] = sqrt(t);
            ord[j] = j;
        }
        for (uint64_t i = 1; i < cc; i++) /* insertion sort, descending */
            for (uint64_t j = i; j > 0 && sig[ord[j]] > sig[ord[j - 1]]; j--) {
                const uint64_t t = ord[j];
                ord[j] = ord[j - 1];
                ord[j - 1] = t;
            }
        void *sb = bn_la_at_mut(dt, s, b, cc);
        for (uint64_t j = 0; j < cc; j++) bn_la_set(dt, sb, (size_t)j, sig[ord[j]]);
        if (!u) continue;
        /* left vectors of the worked matrix: w columns / sigma (0 for sigma 0);
         * right vectors: rows of v.  For a wide A they swap. */
        void *ub = bn_la_at_mut(dt, u, b, m * cc), *vb = bn_la_at_mut(dt, vt, b, cc * n);
        for (uint64_t j = 0; j < cc; j++) {
            const uint64_t o = ord[j];
            const double inv = sig[o] > 0.0 ? 1.0 / sig[o] : 0.0;
            for (uint64_t i = 0; i < rr; i++) {
                const double left = w[i * cc + o] * inv;
                if (wide) bn_la_set(dt, vb, (size_t)(j * n + i), left);
                else bn_la_set(dt, ub, (size_t)(i * cc + j), left);
            }
            for (uint64_t i = 0; i < cc; i++) {
                const double right = v[o * cc + i];
                if (wide) bn_la_set(dt, ub, (size_t)(i * cc + j), right);
                else bn_la_set(dt, vb, (size_t)(j * n + i), right);
            }
        }
    }
    free(w);
    free(v);
    free(sig);
    free(ord);
    return st;
}

bitnet_status bitnet_cholesky_solve_ref(bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n, const void *b,
                                        uint64_t nrhs, void *x)
{
    uint64_t bytes;
    bitnet_status st = bn_la_check(NULL, "cholesky_solve", dt, a, batch, n, n, b, nrhs, 1, &bytes);
    if (st) return st;
    if (!x) return bn_fail(BITNET_E_INVALID, "cholesky_solve: NULL output");
    for (uint64_t k = 0; k < batch; k++) {
        double *l = load(dt, bn_la_at(dt, a, k, n * n), n * n), *y = load(dt, bn_la_at(dt, b, k, n * nrhs), n * nrhs);
        uint64_t p = 0;
        if (l && y) {
            for (uint64_t i = 0; i < n; i++)
                for (uint64_t j = i + 1; j < n; j++) l[i * n + j] = l[j * n + i];
            p = chol(l, n);
        }
        if (l && y && !p)
            for (uint64_t c = 0; c < nrhs; c++) {
                for (uint64_t i = 0; i < n; i++) { /* L z = b */
                    double t = y[i * nrhs + c];
                    for (uint64_t j = 0; j < i; j++) t -= l[i * n + j] * y[j * nrhs + c];
                    y[i * nrhs + c] = t / l[i * n + i];
                }
                for (uint64_t i = n; i-- > 0;) { /* L^T x = z */
                    double t = y[i * nrhs + c];
                    for (uint64_t j = i + 1; j < n; j++) t -= l[j * n + i] * y[j * nrhs + c];
                    y[i * nrhs + c] = t / l[i * n + i];
                }
            }
        if (l && y && !p) store(dt, bn_la_at_mut(dt, x, k, n * nrhs), y, n * nrhs);
        st = !l || !y ? nomem("cholesky_solve") : p ? bn_la_not_pd("cholesky_solve", k, batch, p, n) : BITNET_OK;
        free(l);
        free(y);
        if (st) return st;
    }
    return BITNET_OK;
}

bitnet_status bitnet_lstsq_ref(bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, const void *b,
                               uint64_t nrhs, void *x)
{
    uint64_t bytes;
    bitnet_status st = bn_la_check(NULL, "lstsq", dt, a, batch, m, n, b, nrhs, 1, &bytes);
    if (st) return st;
    if (m < n)
        return bn_fail(BITNET_E_SHAPE, "lstsq: A is %llu x %llu: fewer rows than columns (m >= n needed)",
                       (unsigned long long)m, (unsigned long long)n);
    if (!x) return bn_fail(BITNET_E_INVALID, "lstsq: NULL output");
    double *v = malloc((size_t)(n * m) * sizeof *v), *beta = malloc((size_t)n * sizeof *beta);
    for (uint64_t k = 0; k < batch && !st; k++) {
        double *w = load(dt, bn_la_at(dt, a, k, m * n), m * n), *y = load(dt, bn_la_at(dt, b, k, m * nrhs), m * nrhs);
        if (!v || !beta || !w || !y) st = nomem("lstsq");
        if (!st) {
            householder(w, m, n, v, beta);
            apply_q(v, beta, m, n, y, nrhs, 0); /* Q^T b */
            for (uint64_t i = 0; i < n && !st; i++)
                if (w[i * n + i] == 0.0) st = bn_la_rank(k, batch, i);
        }
        if (!st) {
            for (uint64_t c = 0; c < nrhs; c++)
                for (uint64_t i = n; i-- > 0;) { /* R x = (Q^T b)[0..n) */
                    double t = y[i * nrhs + c];
                    for (uint64_t j = i + 1; j < n; j++) t -= w[i * n + j] * y[j * nrhs + c];
                    y[i * nrhs + c] = t / w[i * n + i];
                }
            store(dt, bn_la_at_mut(dt, x, k, n * nrhs), y, n * nrhs); /* the first n rows */
        }
        free(w);
        free(y);
    }
    free(v);
    free(beta);
    return st;
}
