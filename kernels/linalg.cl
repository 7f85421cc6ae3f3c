/*
 * linalg.cl - the one-sided Jacobi (Hestenes) SVD on the device
 * (lib/opencl/svd.c).  A batch of matrices W [k x len], row-major, whose
 * rows are the vectors made orthogonal: one launch per round of a sweep,
 * one work-group per pair of rows, the pairs of a round disjoint (a
 * round-robin tournament), so the groups of a launch never touch the same
 * row.  The optional V [k x k] per matrix gets the same rotations.
 * Also the Cholesky's last step (lib/opencl/linalg.c): la_zero_upper.
 */
#ifndef LA_F64
#define LA_F64 0 /* 1: f64 elements (the host builds it only where the device has fp64) */
#endif

#if LA_F64
typedef double la_t;
typedef double la_acc;
#else
typedef float la_t;
typedef bn_real la_acc; /* the dot products and the rotation in double where the device has it */
#endif

#define LA_FOR(i, lid, len, wg) BN_ROW_FOR(i, lid, 0, len, wg)

/* Sums of x, y and z over the work-group into l[0], l[wg], l[2 wg] (l holds
 * 3 wg values).  The tree halves the live count rounding up, so that any
 * work-group size is right, not only powers of two. */
inline void la_sum3(__local la_acc *l, la_acc x, la_acc y, la_acc z, uint lid, uint wg)
{
    l[lid] = x;
    l[wg + lid] = y;
    l[2 * wg + lid] = z;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint live = wg; live > 1;) {
        const uint upper = (live + 1) / 2;
        if (lid < live - upper) {
            l[lid] += l[lid + upper];
            l[wg + lid] += l[wg + lid + upper];
            l[2 * wg + lid] += l[2 * wg + lid + upper];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        live = upper;
    }
}

/* x, y = c x - s y, s x + c y on rows of len elements, as x - s (y + tau x)
 * and y + s (x - tau y) with tau = s / (1 + c) (= tan(theta / 2)): each
 * element changes by a correction that is small when the angle is, so its
 * rounding error is too. */
inline void la_rotate(__global la_t *x, __global la_t *y, bn_size len, la_acc s, la_acc tau, uint lid, uint wg)
{
    LA_FOR(e, lid, len, wg) {
        const la_acc a = x[e], b = y[e];
        x[e] = (la_t)(a - s * (b + tau * a));
        y[e] = (la_t)(b + s * (a - tau * b));
    }
}

/* Round `rnd` (0 .. p-2, p = k rounded up to even) of a sweep: pair q of the
 * round is group q of dimension 0, the matrix group b of dimension 1.  Row p-1
 * stays in place while the others turn: pair 0 is (rnd, p-1), pair q > 0 is
 * (rnd + q, rnd - q) mod p-1; over the p-1 rounds every pair meets once.  A
 * row index k (odd k) is the dummy: no work.  The pair is rotated unless
 * |a_ij| <= tol_rot sqrt(a_ii a_jj); one of a pair further from orthogonal
 * than tol_conv sets *far (the sweep has not converged). */
__kernel void svd_round(__global la_t *w, __global la_t *v, const uint k, const bn_size len, const uint rnd,
                        const int want_v, const la_acc tol_rot, const la_acc tol_conv, __global uint *far,
                        __local la_acc *l)
{
    const uint q = (uint)get_group_id(0), lid = (uint)get_local_id(0), wg = (uint)get_local_size(0);
    const bn_size b = get_group_id(1);
    const uint last = k + (k & 1) - 1;
    uint i = q ? (rnd + q) % last : rnd, j = q ? (rnd + last - q) % last : last;
    if (i >= k || j >= k) return; /* the whole group: i and j depend on the group only */
    if (i > j) {
        const uint t = i;
        i = j;
        j = t;
    }
    __global la_t *wi = w + (b * k + i) * len, *wj = w + (b * k + j) * len;
    la_acc aii = 0, ajj = 0, aij = 0;
    LA_FOR(e, lid, len, wg) {
        const la_acc x = wi[e], y = wj[e];
        aii += x * x;
        ajj += y * y;
        aij += x * y;
    }
    la_sum3(l, aii, ajj, aij, lid, wg);
    aii = l[0];
    ajj = l[wg];
    aij = l[2 * wg];
    const la_acc scale = sqrt(aii) * sqrt(ajj);
    if (fabs(aij) <= tol_rot * scale) return; /* the same values in every item: the same choice */
    /* the angle that makes the pair orthogonal, |t| <= 1 (the smaller root) */
    const la_acc zeta = (ajj - aii) / (2 * aij);
    const la_acc t = (zeta >= 0 ? (la_acc)1 : (la_acc)-1) / (fabs(zeta) + hypot((la_acc)1, zeta));
    const la_acc c = (la_acc)1 / sqrt(1 + t * t), s = c * t, tau = s / (1 + c);
    la_rotate(wi, wj, len, s, tau, lid, wg);
    if (want_v) la_rotate(v + (b * k + i) * k, v + (b * k + j) * k, k, s, tau, lid, wg);
    if (lid == 0 && fabs(aij) > tol_conv * scale) *far = 1u;
}

/* W of each matrix from A [m x n] scaled by sc[b] (a power of two): W = A^T
 * [n x m] when trans, else W = A.  One item per element of A. */
__kernel void svd_load(__global const la_t *a, __global const la_t *sc, __global la_t *w, const bn_size m,
                       const bn_size n, const int trans)
{
    const bn_size e = get_global_id(0), b = get_global_id(1), mn = m * n;
    if (e >= mn) return;
    const bn_size r = e / n, c = e % n;
    w[b * mn + (trans ? c * m + r : e)] = a[b * mn + e] * sc[b];
}

/* V = I [k x k] for each matrix of the batch (dimension 1). */
__kernel void svd_eye(__global la_t *v, const bn_size k)
{
    const bn_size e = get_global_id(0), b = get_global_id(1);
    if (e >= k * k) return;
    v[b * k * k + e] = e % (k + 1) == 0 ? (la_t)1 : (la_t)0;
}

/* The strict upper triangle of the n x n row-major a set to zero (the
 * Cholesky's factor, before it is read back).  One item per element. */
__kernel void la_zero_upper(__global la_t *a, const bn_size n)
{
    const bn_size e = get_global_id(0);
    if (e >= n * n) return;
    if (e % n > e / n) a[e] = (la_t)0;
}

/* ---- Cholesky panels (lib/opencl/linalg.c) ----
 * The n x n row-major a holds A's lower triangle, factored in place in
 * tiles of tb <= LA_TB columns: la_chol_tile factors the diagonal tile at
 * (j0, j0), la_chol_panel solves the rows below it, L21 = A21 L11^-T, and a
 * GEMM (CLBlast) updates the columns right of the tile.  *info is 0, or the
 * 1-based pivot that was not positive (or NaN): every later launch then
 * returns at once. */
#ifndef LA_TB
#define LA_TB 64 /* tile width: one work-item per row of a tile (the host reads the same name) */
#endif

/* stmt for each element (i_, c_) of the tile's lower triangle (c_ <= i_ <
 * tb), spread over the nw items of a work-group, a row of LA_TB columns per
 * LA_TB items: coalesced, every access of an item in flight at once (one
 * item loading its own row waited on each load: most of the kernels' time
 * on an H100).  The tile's element (i_, c_) is LA_AT(a, n, j0, i_, c_). */
#define LA_TILE_EACH(lid, nw, tb, stmt)                                                                     \
    _Pragma("unroll") for (int e_ = (lid); e_ < LA_TB * LA_TB; e_ += (nw)) {                                \
        const int i_ = e_ / LA_TB, c_ = e_ % LA_TB;                                                          \
        if (i_ < (tb) && c_ <= i_) { stmt; }                                                                 \
    }
#define LA_AT(a, n, j0, i, c) (a)[((j0) + (bn_size)(i)) * (n) + (j0) + (bn_size)(c)]

/* One work-group of 4 LA_TB items: the tile in local memory, column by
 * column: the column scaled by its row's item, then the trailing triangle
 * updated by all items (item lid takes row lid % LA_TB, every fourth
 * column from lid / LA_TB), then written back in place. */
__kernel __attribute__((reqd_work_group_size(4 * LA_TB, 1, 1)))
void la_chol_tile(__global la_t *a, const bn_size n, const bn_size j0, const int tb, __global int *info)
{
    __local la_t t[LA_TB][LA_TB + 1];
    const int lid = (int)get_local_id(0), i = lid % LA_TB, q = lid / LA_TB;
    if (*info) return; /* the same for every item */
    LA_TILE_EACH(lid, 4 * LA_TB, tb, t[i_][c_] = LA_AT(a, n, j0, i_, c_))
    int bad = 0; /* the same for every item: every item reaches every barrier */
    for (int j = 0; j < tb; j++) {
        barrier(CLK_LOCAL_MEM_FENCE);
        const la_t d = t[j][j];
        if (!bad && !(d > (la_t)0)) bad = j + 1;
        barrier(CLK_LOCAL_MEM_FENCE); /* every item has read t[j][j] */
        if (!bad && q == 0) {
            const la_t r = sqrt(d);
            if (i == j) t[j][j] = r;
            if (i > j && i < tb) t[i][j] = t[i][j] / r;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (!bad && i > j && i < tb) {
            const la_t lij = t[i][j];
            for (int k = j + 1 + q; k <= i; k += 4) t[i][k] -= lij * t[k][j];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (bad) {
        if (lid == 0) *info = (int)(j0 + (bn_size)bad);
        return;
    }
    LA_TILE_EACH(lid, 4 * LA_TB, tb, LA_AT(a, n, j0, i_, c_) = t[i_][c_])
}

/* Rows j0 + tb .. n of columns j0 .. j0 + tb: one item per row, LA_TB rows
 * per work-group, each row solved against the factored tile (in local
 * memory) by forward substitution, x_c = (a_c - sum_{k<c} x_k l_ck) / l_cc,
 * the row in registers, each sum in four parts (shorter chains of
 * dependent operations). */
__kernel __attribute__((reqd_work_group_size(LA_TB, 1, 1)))
void la_chol_panel(__global la_t *a, const bn_size n, const bn_size j0, const int tb, __global const int *info)
{
    __local la_t t[LA_TB][LA_TB + 1];
    const int lid = (int)get_local_id(0);
    if (*info) return;
    LA_TILE_EACH(lid, LA_TB, tb, t[i_][c_] = LA_AT(a, n, j0, i_, c_))
    barrier(CLK_LOCAL_MEM_FENCE);
    const bn_size r = j0 + (bn_size)tb + get_global_id(0);
    if (r >= n) return;
    __global la_t *row = a + r * n + j0;
    la_t x[LA_TB];
#pragma unroll
    for (int c = 0; c < LA_TB; c++) x[c] = c < tb ? row[c] : (la_t)0;
#pragma unroll
    for (int c = 0; c < LA_TB; c++) {
        la_t s[4] = {x[c], (la_t)0, (la_t)0, (la_t)0};
#pragma unroll
        for (int k = 0; k < c; k++) s[k % 4] -= x[k] * t[c][k];
        if (c < tb) x[c] = ((s[0] + s[1]) + (s[2] + s[3])) / t[c][c];
    }
#pragma unroll
    for (int c = 0; c < LA_TB; c++)
        if (c < tb) row[c] = x[c];
}
