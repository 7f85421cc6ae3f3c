/*
 * op_linalg.c - public entry points of the linear-algebra ops (Cholesky, QR,
 * SVD, Cholesky solve, least squares): dtype, shape and finiteness checks
 * with messages naming the matrix, then BN_DISPATCH to the backend.  The
 * float64 references are in lib/linalg_ref.c.
 */
#include "backend.h"
#include "linalg.h"

#include <math.h>
#include <stdint.h>

bitnet_status bn_la_not_pd(const char *op, uint64_t index, uint64_t batch, uint64_t pivot, uint64_t n)
{
    if (batch > 1)
        return bn_fail(BITNET_E_NUMERIC,
                       "%s: matrix %llu (0-based) of a batch of %llu is not positive definite (pivot %llu of %llu is not positive)", op,
                       (unsigned long long)index, (unsigned long long)batch, (unsigned long long)pivot,
                       (unsigned long long)n);
    return bn_fail(BITNET_E_NUMERIC, "%s: the matrix is not positive definite (pivot %llu of %llu is not positive)", op,
                   (unsigned long long)pivot, (unsigned long long)n);
}

bitnet_status bn_la_rank(uint64_t index, uint64_t batch, uint64_t col)
{
    return bn_fail(BITNET_E_NUMERIC, "lstsq: matrix %llu (0-based) of a batch of %llu is rank deficient (R[%llu][%llu] is 0)",
                   (unsigned long long)index, (unsigned long long)batch, (unsigned long long)col,
                   (unsigned long long)col);
}

/* Sizes: every matrix below 2^31 elements (LAPACK's int), the batch in memory. */
static bitnet_status la_dims(const char *op, bitnet_dtype dt, uint64_t batch, uint64_t m, uint64_t n, uint64_t *bytes)
{
    if (dt != BITNET_F32 && dt != BITNET_F64)
        return bn_fail(BITNET_E_DTYPE, "%s: dtype %s (f32 or f64 expected)", op,
                       bitnet_dtype_name(dt) ? bitnet_dtype_name(dt) : "invalid");
    if (!batch || !m || !n)
        return bn_fail(BITNET_E_SHAPE, "%s: empty matrix (batch %llu, %llu x %llu)", op, (unsigned long long)batch,
                       (unsigned long long)m, (unsigned long long)n);
    uint64_t e, t;
    if (m > INT32_MAX || n > INT32_MAX || bn_mul_u64(m, n, &e) || e > INT32_MAX || bn_mul_u64(e, batch, &t) ||
        bn_mul_u64(t, 8, &t) || t > (uint64_t)SIZE_MAX / 4)
        return bn_fail(BITNET_E_OVERFLOW, "%s: %llu matrices of %llu x %llu exceed the LAPACK int range or memory", op,
                       (unsigned long long)batch, (unsigned long long)m, (unsigned long long)n);
    *bytes = batch * e * bn_la_esize(dt);
    return BITNET_OK;
}

/* 1 when the n elements at p are all finite: exponent bits all ones is NaN
 * or Inf.  Branch-free over the block, so that the compiler vectorizes it
 * (a 4096 x 4096 f32 matrix took 8.7 ms element by element through isfinite
 * on a 2-vCPU VM, where the OpenCL Cholesky of such a matrix spends about
 * 7 ms in kernels on an H100). */
static int block_finite(bitnet_dtype dt, const void *p, size_t n)
{
    unsigned bad = 0;
    if (dt == BITNET_F64) {
        const uint64_t *u = p, e = 0x7ff0000000000000ull;
        for (size_t i = 0; i < n; i++) bad |= (u[i] & e) == e;
    } else {
        const uint32_t *u = p, e = 0x7f800000u;
        for (size_t i = 0; i < n; i++) bad |= (u[i] & e) == e;
    }
    return !bad;
}

#define FINITE_BLOCK 4096
#define FINITE_GRAIN ((uint64_t)1 << 18) /* elements per thread at least: 1 MiB of f32 */

typedef struct {
    bitnet_dtype dt;
    const char *p;
    uint64_t first; /* the lowest index of a non-finite element found, or UINT64_MAX */
} finite_job;

static void finite_range(void *arg, uint64_t begin, uint64_t end)
{
    finite_job *j = arg;
    const size_t es = bn_la_esize(j->dt);
    for (uint64_t i0 = begin; i0 < end; i0 += FINITE_BLOCK) {
        const size_t len = (size_t)(end - i0 < FINITE_BLOCK ? end - i0 : FINITE_BLOCK);
        if (block_finite(j->dt, j->p + (size_t)i0 * es, len)) continue;
        size_t i = 0;
        while (isfinite(bn_la_get(j->dt, j->p, (size_t)i0 + i))) i++;
        uint64_t cur = __atomic_load_n(&j->first, __ATOMIC_RELAXED);
        while (i0 + i < cur &&
               !__atomic_compare_exchange_n(&j->first, &cur, i0 + i, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        }
        return; /* the rest of this range comes later */
    }
}

/* The batch's elements scanned over the pool's threads (a memory-bound
 * pass: one thread reads 64 MiB in about 6 ms on a 2-vCPU VM). */
static bitnet_status all_finite(bn_pool *pool, const char *op, const char *what, bitnet_dtype dt, const void *p,
                                uint64_t batch, uint64_t elems)
{
    finite_job j = {dt, p, UINT64_MAX};
    bn_parallel_for(pool, batch * elems, FINITE_GRAIN, finite_range, &j);
    if (j.first == UINT64_MAX) return BITNET_OK;
    return bn_fail(BITNET_E_NUMERIC, "%s: %s (matrix %llu, 0-based) has a NaN or Inf at element %llu", op, what,
                   (unsigned long long)(j.first / elems), (unsigned long long)(j.first % elems));
}

bitnet_status bn_la_check(bn_pool *pool, const char *op, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m,
                          uint64_t n, const void *b, uint64_t nrhs, int want_b, uint64_t *bytes)
{
    bitnet_status st = la_dims(op, dt, batch, m, n, bytes);
    if (st) return st;
    if (!a) return bn_fail(BITNET_E_INVALID, "%s: NULL matrix", op);
    if (bn_is_device_ptr(a) || (want_b && bn_is_device_ptr(b)))
        return bn_fail(BITNET_E_INVALID, "%s: takes host memory, not a device buffer", op);
    if ((st = all_finite(pool, op, "the matrix", dt, a, batch, m * n))) return st;
    if (!want_b) return BITNET_OK;
    uint64_t bb;
    if (!b) return bn_fail(BITNET_E_INVALID, "%s: NULL right-hand side", op);
    if (!nrhs) return bn_fail(BITNET_E_SHAPE, "%s: no right-hand side (nrhs 0)", op);
    if ((st = la_dims(op, dt, batch, m, nrhs, &bb)) || (st = la_dims(op, dt, batch, n, nrhs, &bb))) return st;
    return all_finite(pool, op, "the right-hand side", dt, b, batch, m * nrhs);
}

/* The linear-algebra ops take host memory only (refused above): nothing to
 * stage.  BN_DISPATCH wants an array; its one entry is a NULL pointer. */
static const void *const no_ptr = NULL;
#define no_operands ((bn_operand[]){BN_IN(no_ptr, 0)})

bitnet_status bitnet_cholesky(bitnet_backend *be, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n, void *l)
{
    uint64_t bytes;
    if (!be) return bn_fail(BITNET_E_INVALID, "cholesky: NULL backend");
    bitnet_status st = bn_la_check(bn_backend_pool(be), "cholesky", dt, a, batch, n, n, NULL, 0, 0, &bytes);
    if (st) return st;
    if (!l) return bn_fail(BITNET_E_INVALID, "cholesky: NULL output");
    BN_DISPATCH(st, be, cholesky, "cholesky", 2 * bytes, no_operands, dt, a, batch, n, l);
    return st;
}

bitnet_status bitnet_qr(bitnet_backend *be, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n,
                        void *q, void *r)
{
    uint64_t bytes;
    if (!be) return bn_fail(BITNET_E_INVALID, "qr: NULL backend");
    bitnet_status st = bn_la_check(bn_backend_pool(be), "qr", dt, a, batch, m, n, NULL, 0, 0, &bytes);
    if (st) return st;
    if (!q || !r) return bn_fail(BITNET_E_INVALID, "qr: NULL output");
    BN_DISPATCH(st, be, qr, "qr", 3 * bytes, no_operands, dt, a, batch, m, n, q, r);
    return st;
}

bitnet_status bitnet_svd(bitnet_backend *be, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n,
                         void *s, void *u, void *vt)
{
    uint64_t bytes;
    if (!be) return bn_fail(BITNET_E_INVALID, "svd: NULL backend");
    bitnet_status st = bn_la_check(bn_backend_pool(be), "svd", dt, a, batch, m, n, NULL, 0, 0, &bytes);
    if (st) return st;
    if (!s || (!u) != (!vt)) return bn_fail(BITNET_E_INVALID, "svd: NULL s, or only one of u and vt");
    BN_DISPATCH(st, be, svd, "svd", (u ? 3 : 1) * bytes, no_operands, dt, a, batch, m, n, s, u, vt);
    return st;
}

bitnet_status bitnet_cholesky_solve(bitnet_backend *be, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n,
                                    const void *b, uint64_t nrhs, void *x)
{
    uint64_t bytes;
    if (!be) return bn_fail(BITNET_E_INVALID, "cholesky_solve: NULL backend");
    bitnet_status st = bn_la_check(bn_backend_pool(be), "cholesky_solve", dt, a, batch, n, n, b, nrhs, 1, &bytes);
    if (st) return st;
    if (!x) return bn_fail(BITNET_E_INVALID, "cholesky_solve: NULL output");
    BN_DISPATCH(st, be, cholesky_solve, "cholesky_solve", 2 * bytes, no_operands, dt, a, batch, n, b, nrhs, x);
    return st;
}

bitnet_status bitnet_lstsq(bitnet_backend *be, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n,
                           const void *b, uint64_t nrhs, void *x)
{
    uint64_t bytes;
    if (!be) return bn_fail(BITNET_E_INVALID, "lstsq: NULL backend");
    bitnet_status st = bn_la_check(bn_backend_pool(be), "lstsq", dt, a, batch, m, n, b, nrhs, 1, &bytes);
    if (st) return st;
    if (m < n)
        return bn_fail(BITNET_E_SHAPE, "lstsq: A is %llu x %llu: fewer rows than columns (m >= n needed)",
                       (unsigned long long)m, (unsigned long long)n);
    if (!x) return bn_fail(BITNET_E_INVALID, "lstsq: NULL output");
    BN_DISPATCH(st, be, lstsq, "lstsq", 2 * bytes, no_operands, dt, a, batch, m, n, b, nrhs, x);
    return st;
}
