/*
 * linalg.c (OpenCL) - Cholesky and the Cholesky solve on the device: a
 * right-looking blocked factorisation of the matrix in one device buffer
 * (row-major, lower factor), entirely on the device (see factor()): block
 * columns of NB, each factored in tiles of LA_TB columns by two kernels of
 * kernels/linalg.cl and a CLBlast GEMM, then the trailing matrix updated by
 * CLBlast's SYRK.  NB is 512 (BITNET_OCL_CHOL_NB sets it for sweeps).  The
 * host reads one int after the factorisation: 0, or the failing pivot.  The
 * solve adds two TRSMs (L Z = B, L^T X = Z).  f64 on a device without fp64,
 * or a device too small for the tile kernels (chol_fits), runs the CPU path.
 *
 * QR (thin, Householder, blocked like LAPACK's geqrf/orgqr) on the matrix in
 * one device buffer:
 *   for each block column j of width QR_NB (k = min(m, n) columns in all):
 *     the panel A[j:m, j:j+nb]    down to the host: geqrf, and larft's T
 *                                 (H1 ... Hnb = I - V T V^T); R and zeros
 *                                 go back up, V (unit diagonal) to a
 *                                 device buffer of all reflectors, T beside
 *     A2 = (I - V T^T V^T) A2      three CLBlast GEMMs on the columns right
 *                                 of the panel
 *   Q = H1 ... Hk [I; 0]          the blocks backwards, three GEMMs each
 * R is the first k rows of A.  QR_NB (64) is not tuned: no GPU measurement
 * chose it (PoCL only so far).
 *
 * Least squares (m >= n) factors A so, keeps Q and R on the device, and
 * solves R X = Q^T B with a CLBlast GEMM and TRSM.  The SVD is in svd.c
 * (one-sided Jacobi, kernels/linalg.cl).
 */
#include "../linalg.h"
#include "blas.h"
#include "tensor_ops.h"

#include <stdlib.h>
#include <string.h>

/* The factorisation on the device, 4096 x 4096 f32 on an H100 (2026-11-26,
 * bitnet-bench --op cholesky --threads 16, two alternating rounds in one
 * call, kernel / end to end): NB 256 7.9-9.0 / 14.0-15.1 ms, NB 512
 * 7.2 / 12.7-12.8, NB 1024 6.7 / 13.0-13.2; the host's LAPACK (16 threads)
 * 50.8-51.6 ms; torch (cuSOLVER) 1.97 ms.  The former code in the same
 * call (the host's potrf of each 512 diagonal block and trtri of its
 * 128-column blocks, a blocking read and write per block, the panel solved
 * by GEMMs against those inverses) took 5.1-6.1 / 49.5-75.1 ms.  Where the
 * 7.2 ms of kernels go (tests/device/cltrace.c, CLTRACE_KTIME=1):
 * la_chol_tile about 40 us x 64, la_chol_panel 23 us x 63, the GEMMs
 * 12 us each, SYRK 107 us each (7); la_chol_tile took 67 us when one item
 * per row did its row's whole update.  Earlier, with a host factor of the
 * diagonal blocks: NB 64 to 1024 (H100) 103 / 76.2 / 85.4 ms end to end at
 * 64 / 512 / 1024, and the trailing update on the project's own tiled float
 * kernel (mm_nt) in place of CLBlast's SYRK, with lookahead, no faster end
 * to end (H200). */
#define NB_DEFAULT 512
#define NB_MAX 2048

/* Block width: BITNET_OCL_CHOL_NB (16..2048) for sweeps, else NB_DEFAULT. */
static uint64_t block_width(void)
{
    const char *e = getenv("BITNET_OCL_CHOL_NB");
    const long v = e ? strtol(e, NULL, 10) : 0;
    return v >= 16 && v <= NB_MAX ? (uint64_t)v : NB_DEFAULT;
}

#define BLAS_CALL(o, op, what, call)                           \
    do {                                                       \
        cl_event mark_, ev_ = NULL;                            \
        bitnet_status s_ = bn_blas_begin((o), &mark_);         \
        if (s_) return s_;                                     \
        CLBlastStatusCode c_ = (call);                         \
        s_ = bn_blas_end((o), mark_, ev_, (op));               \
        if (c_ != CLBlastSuccess) return BN_BLAS_FAIL(c_, what); \
        if (s_) return s_;                                     \
    } while (0)
#define EV (bn_blas_queue(o)), &ev_

/* Rows [r0, r0+rows) x cols [c0, c0+cols) of the n-column matrix in buf, to
 * or from host h (leading dimension cols). */
static bitnet_status rect(bn_ocl *o, cl_mem buf, size_t es, uint64_t n, uint64_t r0, uint64_t c0, uint64_t rows,
                          uint64_t cols, void *h, int write)
{
    const size_t origin[3] = {(size_t)c0 * es, (size_t)r0, 0}, zero[3] = {0, 0, 0};
    const size_t region[3] = {(size_t)cols * es, (size_t)rows, 1};
    if (write)
        BN_CL(clEnqueueWriteBufferRect(bn_ocl_queue(o), buf, CL_TRUE, origin, zero, region, (size_t)n * es, 0,
                                       (size_t)cols * es, 0, h, 0, NULL, NULL));
    else
        BN_CL(clEnqueueReadBufferRect(bn_ocl_queue(o), buf, CL_TRUE, origin, zero, region, (size_t)n * es, 0,
                                      (size_t)cols * es, 0, h, 0, NULL, NULL));
    return BITNET_OK;
}

/* C = alpha op(A) op(B) + beta C, row-major, on device buffers (offsets and
 * leading dimensions in elements). */
static bitnet_status gemm(bn_ocl *o, const char *op, bitnet_dtype dt, int ta, int tb, uint64_t M, uint64_t N, uint64_t K,
                          double alpha, cl_mem a, size_t aoff, uint64_t lda, cl_mem b, size_t boff, uint64_t ldb,
                          double beta, cl_mem c, size_t coff, uint64_t ldc)
{
    const CLBlastTranspose tra = ta ? CLBlastTransposeYes : CLBlastTransposeNo;
    const CLBlastTranspose trb = tb ? CLBlastTransposeYes : CLBlastTransposeNo;
    if (!M || !N || !K) return BITNET_OK;
    if (dt == BITNET_F64)
        BLAS_CALL(o, op, "CLBlastDgemm",
                  CLBlastDgemm(CLBlastLayoutRowMajor, tra, trb, M, N, K, alpha, a, aoff, lda, b, boff, ldb, beta, c,
                               coff, ldc, EV));
    else
        BLAS_CALL(o, op, "CLBlastSgemm",
                  CLBlastSgemm(CLBlastLayoutRowMajor, tra, trb, M, N, K, (float)alpha, a, aoff, lda, b, boff, ldb,
                               (float)beta, c, coff, ldc, EV));
    return BITNET_OK;
}

#define LA_TB 64 /* the tile of la_chol_tile and la_chol_panel (kernels/linalg.cl, same name) */

/* Factors the n x n matrix in buf in place (lower triangle) in block
 * columns of nb, each in tiles of LA_TB columns on the device:
 *   for each tile (j, width tb) of the block column [j0, j0 + jb):
 *     L11 = chol(A11)                   la_chol_tile (one work-group)
 *     L21 = A21 L11^-T                  la_chol_panel (every row below)
 *     A[j+tb:, j+tb:j0+jb] -= L21 L21'^T  CLBlast GEMM (the block column's
 *                                         rest; above the diagonal too,
 *                                         never read, zeroed at the end)
 *   A22 -= L21 L21^T                    CLBlast SYRK (the trailing matrix)
 * info (a device int, 0 on entry) gets the 1-based pivot that is not
 * positive; the host reads it after the last launch. */
/* One launch of la_chol_tile or la_chol_panel (the same arguments) on the
 * tile at column j, tb wide. */
static bitnet_status chol_run(bn_ocl *o, cl_kernel k, cl_mem buf, cl_ulong n, cl_ulong j, cl_int tb, cl_mem info,
                              size_t global, size_t local, const char *op)
{
    bitnet_status st = bn_ocl_args(o, k, 5, sizeof buf, &buf, sizeof n, &n, sizeof j, &j, sizeof tb, &tb,
                                   sizeof info, &info);
    return st ? st : bn_ocl_run(o, k, 1, &global, &local, op);
}

static bitnet_status factor(bn_ocl *o, bitnet_dtype dt, cl_mem buf, uint64_t n, uint64_t nb, cl_mem info,
                            const char *op)
{
    const int d = dt == BITNET_F64;
    cl_kernel kt, kp;
    const char *opts = bn_tops_la_options(o, d);
    bitnet_status st = bn_ocl_kernel(o, "linalg", "la_chol_tile", opts, &kt);
    if (!st) st = bn_ocl_kernel(o, "linalg", "la_chol_panel", opts, &kp);
    if (st) return st;
    for (uint64_t j0 = 0; j0 < n; j0 += nb) {
        const uint64_t jb = n - j0 < nb ? n - j0 : nb, pe = j0 + jb, rest = n - pe;
        for (uint64_t j = j0; j < pe; j += LA_TB) {
            const cl_int tb = (cl_int)(pe - j < LA_TB ? pe - j : LA_TB);
            const uint64_t below = n - j - (uint64_t)tb;
            /* la_chol_tile: one work-group of 4 LA_TB items; la_chol_panel: LA_TB rows a work-group */
            if ((st = chol_run(o, kt, buf, n, j, tb, info, 4 * LA_TB, 4 * LA_TB, op))) return st;
            if (!below) break;
            if ((st = chol_run(o, kp, buf, n, j, tb, info, bn_tops_round(below, LA_TB), LA_TB, op))) return st;
            const size_t l21 = (size_t)((j + (uint64_t)tb) * n + j);
            if ((st = gemm(o, op, dt, 0, 1, below, pe - j - (uint64_t)tb, (uint64_t)tb, -1.0, buf, l21, n, buf, l21, n,
                           1.0, buf, l21 + (size_t)tb, n)))
                return st;
        }
        if (!rest) break;
        const size_t a21 = (size_t)(pe * n + j0), a22 = (size_t)(pe * n + pe);
        if (d)
            BLAS_CALL(o, op, "CLBlastDsyrk",
                      CLBlastDsyrk(CLBlastLayoutRowMajor, CLBlastTriangleLower, CLBlastTransposeNo, rest, jb, -1.0, buf,
                                   a21, n, 1.0, buf, a22, n, EV));
        else
            BLAS_CALL(o, op, "CLBlastSsyrk",
                      CLBlastSsyrk(CLBlastLayoutRowMajor, CLBlastTriangleLower, CLBlastTransposeNo, rest, jb, -1.0f,
                                   buf, a21, n, 1.0f, buf, a22, n, EV));
    }
    return BITNET_OK;
}

/* op(T) X = B in place on B [n x nrhs] in bb, T the lower or upper triangle
 * of the first n rows of the n-column matrix in bt (CLBlast TRSM). */
static bitnet_status trsm_left(bn_ocl *o, const char *op, bitnet_dtype dt, int upper, int trans, cl_mem bt, cl_mem bb,
                               uint64_t n, uint64_t nrhs)
{
    const CLBlastTriangle tri = upper ? CLBlastTriangleUpper : CLBlastTriangleLower;
    const CLBlastTranspose tr = trans ? CLBlastTransposeYes : CLBlastTransposeNo;
    if (dt == BITNET_F64)
        BLAS_CALL(o, op, "CLBlastDtrsm",
                  CLBlastDtrsm(CLBlastLayoutRowMajor, CLBlastSideLeft, tri, tr, CLBlastDiagonalNonUnit, n, nrhs, 1.0,
                               bt, 0, n, bb, 0, nrhs, EV));
    else
        BLAS_CALL(o, op, "CLBlastStrsm",
                  CLBlastStrsm(CLBlastLayoutRowMajor, CLBlastSideLeft, tri, tr, CLBlastDiagonalNonUnit, n, nrhs, 1.0f,
                               bt, 0, n, bb, 0, nrhs, EV));
    return BITNET_OK;
}

/* L Z = B then L^T X = Z on B [n x nrhs] in bb. */
static bitnet_status solve(bn_ocl *o, bitnet_dtype dt, cl_mem bl, cl_mem bb, uint64_t n, uint64_t nrhs)
{
    bitnet_status st = trsm_left(o, "cholesky_solve", dt, 0, 0, bl, bb, n, nrhs);
    return st ? st : trsm_left(o, "cholesky_solve", dt, 0, 1, bl, bb, n, nrhs);
}

/* The strict upper triangle of the n x n matrix in buf zeroed on the device
 * (la_zero_upper): on the host, after the read, it took about 4.7 ms of a
 * 4096 x 4096 f32 call on the H100 machine's host (a probe's memset).  Four
 * alternating rounds there, end-to-end medians: 45.1-65.7 ms against
 * 51.0-69.9 (better in three), within the noise of a call. */
static bitnet_status zero_upper(bn_ocl *o, bitnet_dtype dt, cl_mem buf, uint64_t n)
{
    cl_kernel k;
    bitnet_status st = bn_ocl_kernel(o, "linalg", "la_zero_upper", bn_tops_la_options(o, dt == BITNET_F64), &k);
    if (st) return st;
    const cl_ulong cn = n;
    const size_t wg = bn_tops_wg(o, k, 256), global = bn_tops_round(n * n, wg);
    st = bn_ocl_args(o, k, 2, sizeof buf, &buf, sizeof cn, &cn);
    return st ? st : bn_ocl_run(o, k, 1, &global, &wg, "cholesky");
}

/* Both ops: factor each matrix; with b, solve too. */
static bitnet_status chol_ocl(bn_ocl *o, const char *op, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n,
                              const void *b, uint64_t nrhs, void *out)
{
    const size_t es = bn_la_esize(dt), mat = (size_t)(n * n) * es, rhs = (size_t)(n * nrhs) * es;
    cl_mem bl = NULL, bb = NULL, binfo = NULL;
    const uint64_t nb = block_width();
    bitnet_status st = bn_ocl_alloc(o, mat, &bl);
    if (!st && b) st = bn_ocl_alloc(o, rhs, &bb);
    if (!st) st = bn_ocl_alloc(o, sizeof(cl_int), &binfo);
    for (uint64_t k = 0; k < batch && !st; k++) {
        cl_int info = 0;
        if ((st = bn_ocl_fill0(o, binfo, sizeof info)) ||
            (st = bn_ocl_upload(o, bl, 0, bn_la_at(dt, a, k, n * n), mat)) ||
            (st = factor(o, dt, bl, n, nb, binfo, op)) || (st = bn_ocl_download(o, binfo, 0, &info, sizeof info)))
            break;
        if (info) {
            st = bn_la_not_pd(op, k, batch, (uint64_t)info, n);
            break;
        }
        if (!b) {
            if ((st = zero_upper(o, dt, bl, n)) ||
                (st = bn_ocl_download(o, bl, 0, bn_la_at_mut(dt, out, k, n * n), mat)))
                break;
            continue;
        }
        if ((st = bn_ocl_upload(o, bb, 0, bn_la_at(dt, b, k, n * nrhs), rhs))) break;
        if ((st = solve(o, dt, bl, bb, n, nrhs))) break;
        st = bn_ocl_download(o, bb, 0, bn_la_at_mut(dt, out, k, n * nrhs), rhs);
    }
    if (st) bn_ocl_drain(o);
    bn_ocl_release(o, bl);
    bn_ocl_release(o, bb);
    bn_ocl_release(o, binfo);
    return st;
}

/* 1 when the device runs the tile kernels: f64 where asked, 4 LA_TB items a
 * work-group and a tile in local memory.  Else the CPU path takes the op. */
static int chol_fits(bn_ocl *o, bitnet_dtype dt)
{
    const bn_ocl_caps *c = bn_ocl_get_caps(o);
    const uint64_t tile = (uint64_t)LA_TB * (LA_TB + 1) * bn_la_esize(dt);
    return (dt != BITNET_F64 || c->has_fp64) && (!c->max_wg || c->max_wg >= 4 * LA_TB) &&
           (!c->local_mem || c->local_mem >= tile);
}

bitnet_status bn_ocl_cholesky(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n, void *l)
{
    bn_ocl *o = ctx;
    if (!chol_fits(o, dt)) return bn_cpu_cholesky(NULL, dt, a, batch, n, l);
    return chol_ocl(o, "cholesky", dt, a, batch, n, NULL, 0, l);
}

bitnet_status bn_ocl_cholesky_solve(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t n,
                                    const void *b, uint64_t nrhs, void *x)
{
    bn_ocl *o = ctx;
    if (!chol_fits(o, dt)) return bn_cpu_cholesky_solve(NULL, dt, a, batch, n, b, nrhs, x);
    return chol_ocl(o, "cholesky_solve", dt, a, batch, n, b, nrhs, x);
}

/* ---- QR ------------------------------------------------------------------------ */

#define QR_NB 64

typedef struct {
    const char *op;           /* "qr" or "lstsq": errors and kernel times */
    cl_mem a, v, t, w, w2, q; /* A [m x n]; V [m x k]; T blocks [QR_NB x QR_NB] each; W, W2 [QR_NB x n]; Q [m x k] */
    void *hp, *hc, *tau, *th; /* host: a panel row-major and column-major [m x QR_NB], tau, T (column-major) */
    void *eye;                /* host: [I; 0] [m x k], Q's start */
} qr_bufs;

/* X -= V T' V^T X on rows j0.. of the columns [c0, c0 + nc) of x (leading
 * dimension ldx), where T' is block bi's T (forming Q) or its transpose
 * (reducing A). */
static bitnet_status apply_block(bn_ocl *o, bitnet_dtype dt, const qr_bufs *b, uint64_t k, uint64_t m, uint64_t j0,
                                 uint64_t jb, uint64_t bi, int trans_t, cl_mem x, uint64_t ldx, uint64_t c0, uint64_t nc)
{
    const uint64_t mm = m - j0;
    const size_t voff = (size_t)(j0 * k + j0), xoff = (size_t)(j0 * ldx + c0), toff = (size_t)(bi * QR_NB * QR_NB);
    bitnet_status st = gemm(o, b->op, dt, 1, 0, jb, nc, mm, 1.0, b->v, voff, k, x, xoff, ldx, 0.0, b->w, 0, nc);
    if (!st) st = gemm(o, b->op, dt, trans_t, 0, jb, nc, jb, 1.0, b->t, toff, jb, b->w, 0, nc, 0.0, b->w2, 0, nc);
    if (!st) st = gemm(o, b->op, dt, 0, 0, mm, nc, jb, -1.0, b->v, voff, k, b->w2, 0, nc, 1.0, x, xoff, ldx);
    return st;
}

/* One m x n matrix, already in b->a: R into the first k rows of b->a, Q into b->q. */
static bitnet_status qr_one(bn_ocl *o, bitnet_dtype dt, const qr_bufs *b, uint64_t m, uint64_t n)
{
    const size_t es = bn_la_esize(dt);
    const uint64_t k = m < n ? m : n;
    bitnet_status st = BITNET_OK;
    for (uint64_t j0 = 0, bi = 0; j0 < k && !st; j0 += QR_NB, bi++) {
        const uint64_t mm = m - j0, jb = k - j0 < QR_NB ? k - j0 : QR_NB;
        if ((st = rect(o, b->a, es, n, j0, j0, mm, jb, b->hp, 0))) break;
        bn_la_to_colmajor(dt, b->hp, mm, jb, b->hc);
        const int info = bn_cpu_qr_panel(dt, b->hc, (int)mm, (int)jb, b->tau, b->th);
        if (info == -1000) return bn_fail(BITNET_E_NOMEM, "%s: out of memory", b->op);
        if (info) return bn_fail(BITNET_E_NUMERIC, "%s: LAPACK geqrf failed on a panel (info %d)", b->op, info);
        /* R (zeros below it) back into A; V, unit diagonal and zeros above, into its buffer */
        for (uint64_t i = 0; i < mm; i++)
            for (uint64_t j = 0; j < jb; j++)
                bn_la_set(dt, b->hp, (size_t)(i * jb + j), i <= j ? bn_la_get(dt, b->hc, (size_t)(j * mm + i)) : 0.0);
        if ((st = rect(o, b->a, es, n, j0, j0, mm, jb, b->hp, 1))) break;
        for (uint64_t i = 0; i < mm; i++)
            for (uint64_t j = 0; j < jb; j++)
                bn_la_set(dt, b->hp, (size_t)(i * jb + j),
                          i < j ? 0.0 : i == j ? 1.0 : bn_la_get(dt, b->hc, (size_t)(j * mm + i)));
        if ((st = rect(o, b->v, es, k, j0, j0, mm, jb, b->hp, 1))) break;
        for (uint64_t i = 0; i < jb; i++) /* T row-major, leading dimension jb; larft leaves below it unset */
            for (uint64_t j = 0; j < jb; j++)
                bn_la_set(dt, b->hp, (size_t)(i * jb + j), j >= i ? bn_la_get(dt, b->th, (size_t)(j * jb + i)) : 0.0);
        if ((st = bn_ocl_upload(o, b->t, (size_t)(bi * QR_NB * QR_NB) * es, b->hp, (size_t)(jb * jb) * es))) break;
        if (j0 + jb < n) st = apply_block(o, dt, b, k, m, j0, jb, bi, 1, b->a, n, j0 + jb, n - j0 - jb);
    }
    if (st) return st;
    /* Q = H1 ... Hk [I; 0], the blocks last to first */
    for (uint64_t bi = (k + QR_NB - 1) / QR_NB; bi-- > 0 && !st;) {
        const uint64_t j0 = bi * QR_NB, jb = k - j0 < QR_NB ? k - j0 : QR_NB;
        st = apply_block(o, dt, b, k, m, j0, jb, bi, 0, b->q, k, j0, k - j0);
    }
    return st;
}

/* Device and host buffers of the QR of m x n matrices; release with qr_bufs_free. */
static bitnet_status qr_bufs_init(bn_ocl *o, const char *op, bitnet_dtype dt, uint64_t m, uint64_t n, qr_bufs *b)
{
    const size_t es = bn_la_esize(dt);
    const uint64_t k = m < n ? m : n, nblk = (k + QR_NB - 1) / QR_NB;
    memset(b, 0, sizeof *b);
    b->op = op;
    b->eye = calloc((size_t)(m * k), es);
    b->hp = malloc((size_t)(m * QR_NB) * es);
    b->hc = malloc((size_t)(m * QR_NB) * es);
    b->tau = malloc((size_t)QR_NB * es);
    b->th = malloc((size_t)(QR_NB * QR_NB) * es);
    if (!b->eye || !b->hp || !b->hc || !b->tau || !b->th) return bn_fail(BITNET_E_NOMEM, "%s: out of memory", op);
    for (uint64_t i = 0; i < k; i++) bn_la_set(dt, b->eye, (size_t)(i * k + i), 1.0);
    bitnet_status st = bn_ocl_alloc(o, (size_t)(m * n) * es, &b->a);
    if (!st) st = bn_ocl_alloc(o, (size_t)(m * k) * es, &b->v);
    if (!st) st = bn_ocl_alloc(o, (size_t)(nblk * QR_NB * QR_NB) * es, &b->t);
    if (!st) st = bn_ocl_alloc(o, (size_t)(QR_NB * n) * es, &b->w);
    if (!st) st = bn_ocl_alloc(o, (size_t)(QR_NB * n) * es, &b->w2);
    if (!st) st = bn_ocl_alloc(o, (size_t)(m * k) * es, &b->q);
    return st;
}

static void qr_bufs_free(bn_ocl *o, qr_bufs *b)
{
    bn_ocl_release(o, b->a);
    bn_ocl_release(o, b->v);
    bn_ocl_release(o, b->t);
    bn_ocl_release(o, b->w);
    bn_ocl_release(o, b->w2);
    bn_ocl_release(o, b->q);
    free(b->eye), free(b->hp), free(b->hc), free(b->tau), free(b->th);
}

/* Factors host matrix a [m x n], leaving R in the first k rows of b->a and
 * Q [m x k] in b->q, on the device. */
static bitnet_status qr_factor(bn_ocl *o, bitnet_dtype dt, const qr_bufs *b, const void *a, uint64_t m, uint64_t n)
{
    const size_t es = bn_la_esize(dt);
    const uint64_t k = m < n ? m : n;
    bitnet_status st = bn_ocl_upload(o, b->a, 0, a, (size_t)(m * n) * es);
    if (!st) st = bn_ocl_upload(o, b->q, 0, b->eye, (size_t)(m * k) * es);
    if (!st) st = qr_one(o, dt, b, m, n);
    return st;
}

bitnet_status bn_ocl_qr(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n, void *q,
                        void *r)
{
    bn_ocl *o = ctx;
    if (dt == BITNET_F64 && !bn_ocl_get_caps(o)->has_fp64) return bn_cpu_qr(NULL, dt, a, batch, m, n, q, r);
    const size_t es = bn_la_esize(dt);
    const uint64_t k = m < n ? m : n;
    qr_bufs b;
    bitnet_status st = qr_bufs_init(o, "qr", dt, m, n, &b);
    for (uint64_t i = 0; i < batch && !st; i++) {
        if ((st = qr_factor(o, dt, &b, bn_la_at(dt, a, i, m * n), m, n))) break;
        if ((st = bn_ocl_download(o, b.a, 0, bn_la_at_mut(dt, r, i, k * n), (size_t)(k * n) * es))) break;
        st = bn_ocl_download(o, b.q, 0, bn_la_at_mut(dt, q, i, m * k), (size_t)(m * k) * es);
    }
    if (st) bn_ocl_drain(o);
    qr_bufs_free(o, &b);
    return st;
}

/* ---- least squares ----------------------------------------------------------- */

/* X = R^-1 (Q^T B) for m >= n: the QR above, then Y = Q^T B (CLBlast GEMM) and
 * R X = Y (CLBlast TRSM, upper), all in device buffers.  A zero on R's
 * diagonal (checked on the host, n values down) is the error the CPU gives
 * from LAPACK gels: the first such column, 0-based. */
bitnet_status bn_ocl_lstsq(void *ctx, bitnet_dtype dt, const void *a, uint64_t batch, uint64_t m, uint64_t n,
                           const void *b, uint64_t nrhs, void *x)
{
    bn_ocl *o = ctx;
    if (dt == BITNET_F64 && !bn_ocl_get_caps(o)->has_fp64) return bn_cpu_lstsq(NULL, dt, a, batch, m, n, b, nrhs, x);
    const char *op = "lstsq";
    const size_t es = bn_la_esize(dt);
    cl_mem bb = NULL, by = NULL;
    qr_bufs q;
    void *diag = malloc((size_t)n * es);
    bitnet_status st = qr_bufs_init(o, op, dt, m, n, &q);
    if (!st && !diag) st = bn_fail(BITNET_E_NOMEM, "%s: out of memory", op);
    if (!st) st = bn_ocl_alloc(o, (size_t)(m * nrhs) * es, &bb);
    if (!st) st = bn_ocl_alloc(o, (size_t)(n * nrhs) * es, &by);
    for (uint64_t i = 0; i < batch && !st; i++) {
        if ((st = qr_factor(o, dt, &q, bn_la_at(dt, a, i, m * n), m, n))) break;
        /* R's diagonal: rows of n + 1 elements from the start, one element each */
        if ((st = rect(o, q.a, es, n + 1, 0, 0, n, 1, diag, 0))) break;
        for (uint64_t c = 0; c < n && !st; c++)
            if (bn_la_get(dt, diag, (size_t)c) == 0.0) st = bn_la_rank(i, batch, c);
        if (st) break;
        if ((st = bn_ocl_upload(o, bb, 0, bn_la_at(dt, b, i, m * nrhs), (size_t)(m * nrhs) * es))) break;
        if ((st = gemm(o, op, dt, 1, 0, n, nrhs, m, 1.0, q.q, 0, n, bb, 0, nrhs, 0.0, by, 0, nrhs))) break;
        if ((st = trsm_left(o, op, dt, 1, 0, q.a, by, n, nrhs))) break; /* R X = Y */
        st = bn_ocl_download(o, by, 0, bn_la_at_mut(dt, x, i, n * nrhs), (size_t)(n * nrhs) * es);
    }
    if (st) bn_ocl_drain(o);
    bn_ocl_release(o, bb);
    bn_ocl_release(o, by);
    qr_bufs_free(o, &q);
    free(diag);
    return st;
}
