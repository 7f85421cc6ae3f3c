/*
 * reduce.c - OpenCL host code of the reductions (kernels/reduce.cl): rows
 * in two deterministic passes, reduced middle axes one work-item per
 * output, any other pattern permuted on the device first.
 *
 * Rows have two layouts.  CPU drivers (PoCL): each work-item walks a
 * contiguous block, which the driver vectorizes.  GPUs: grid-stride float4
 * loads (consecutive work-items read consecutive 16-byte words) over
 * compute_units * RD_GPU_GROUPS_PER_CU work-groups in all, so that a large
 * full reduction fills the device (kernels/reduce.cl, reduce_gpu_*);
 * reduced middle axes with few outputs are cut into chunks of rows.  The
 * grids depend only on the shape and the device: results are repeatable.
 * Test hook: BITNET_OCL_FORCE_GPU_LAYOUT=1 in the environment picks the GPU
 * layout on any device (tests run it on PoCL against the reference).
 */
#include "tensor_ops.h"

#include <stdlib.h>
#include <string.h>

#define RD_WG 256
#define RD_CHUNK (1u << 16)

static bitnet_status rows_pass(bn_ocl *o, const char *opts, cl_mem bx, uint64_t rows, uint64_t len, int op,
                               cl_mem by, cl_mem bi, int has_y, int has_idx, cl_long perturb)
{
    cl_kernel kp, kf;
    bitnet_status st;
    if ((st = bn_ocl_kernel(o, "reduce", "reduce_part", opts, &kp)) || (st = bn_ocl_kernel(o, "reduce", "reduce_final", opts, &kf)))
        return st;
    if (bn_ocl_kernel_wg(o, kp) < RD_WG)
        return bn_fail(BITNET_E_DEVICE, "reduce: the device takes work-groups of %zu < %d", bn_ocl_kernel_wg(o, kp), RD_WG);
    uint64_t chunk = len < RD_CHUNK ? (len ? len : 1) : RD_CHUNK, nchunks = (len + chunk - 1) / chunk;
    if (nchunks == 0) nchunks = 1;
    uint64_t np = rows * nchunks;
    cl_mem ps = NULL, pv = NULL, pi = NULL;
    if (!(st = bn_tops_alloc(o, np * 8, &ps)) && !(st = bn_tops_alloc(o, np * 4, &pv))) st = bn_tops_alloc(o, np * 8, &pi);
    cl_ulong cl = len, cc = chunk, cn = nchunks, cr = rows;
    cl_int cop = op, hy = has_y, hi = has_idx;
    size_t wg = RD_WG, global = (size_t)np * RD_WG;
    if (!st)
        st = bn_ocl_args(o, kp, 8, sizeof bx, &bx, sizeof ps, &ps, sizeof pv, &pv, sizeof pi, &pi, sizeof cl, &cl,
                         sizeof cc, &cc, sizeof cn, &cn, sizeof cop, &cop);
    if (!st) st = bn_ocl_run(o, kp, 1, &global, &wg, "reduce");
    size_t wf = bn_tops_wg(o, kf, 64), gf = bn_tops_round(rows, wf);
    if (!st)
        st = bn_ocl_args(o, kf, 12, sizeof ps, &ps, sizeof pv, &pv, sizeof pi, &pi, sizeof by, &by, sizeof bi, &bi,
                         sizeof cr, &cr, sizeof cn, &cn, sizeof cop, &cop, sizeof cl, &cl, sizeof hy, &hy, sizeof hi, &hi,
                         sizeof perturb, &perturb);
    if (!st) st = bn_ocl_run(o, kf, 1, &gf, &wf, "reduce");
    bn_ocl_release(o, ps);
    bn_ocl_release(o, pv);
    bn_ocl_release(o, pi);
    return st;
}

/* [outer, len, inner] reduced over len: one work-item per output. */
static bitnet_status cols_pass(bn_ocl *o, const char *opts, cl_mem bx, cl_ulong co, cl_ulong cl, cl_ulong ci, int op,
                               cl_mem by, cl_mem bi, int has_y, int has_idx, cl_long perturb)
{
    cl_kernel k;
    bitnet_status st;
    if ((st = bn_ocl_kernel(o, "reduce", "reduce_cols", opts, &k))) return st;
    cl_int cop = op, hy = has_y, hi = has_idx;
    size_t wg = bn_tops_wg(o, k, 64), global = bn_tops_round(co * ci, wg);
    st = bn_ocl_args(o, k, 10, sizeof bx, &bx, sizeof by, &by, sizeof bi, &bi, sizeof co, &co, sizeof cl, &cl,
                     sizeof ci, &ci, sizeof cop, &cop, sizeof hy, &hy, sizeof hi, &hi, sizeof perturb, &perturb);
    if (!st) st = bn_ocl_run(o, k, 1, &global, &wg, "reduce");
    return st;
}

/* Work-groups per compute unit of the GPU layout: 8 x 256 work-items fill
 * most GPU compute units once; a few waves more make the last, partial wave
 * (when registers let fewer groups in) a small part of the time.  Tuning
 * hook: BITNET_OCL_REDUCE_GROUPS_PER_CU=N (1..1024) in the environment. */
#define RD_GPU_GROUPS_PER_CU 32
#define RD_GPU_MIN_F4 8    /* float4 words per work-item below which a row gets fewer groups */
#define RD_GPU_SHORT_ROW 32 /* rows this short: one work-item per row (reduce_cols) */

static int gpu_layout(bn_ocl *o)
{
    const char *e = getenv("BITNET_OCL_FORCE_GPU_LAYOUT");
    return bn_ocl_get_caps(o)->is_gpu || (e && strcmp(e, "1") == 0);
}

static bitnet_status gpu_rows_pass(bn_ocl *o, const char *opts, cl_mem bx, uint64_t rows, uint64_t len, int op,
                                   cl_mem by, cl_mem bi, int has_y, int has_idx, cl_long perturb)
{
    if (len <= RD_GPU_SHORT_ROW) return cols_pass(o, opts, bx, rows, len, 1, op, by, bi, has_y, has_idx, perturb);
    cl_kernel kp, kf;
    bitnet_status st;
    if ((st = bn_ocl_kernel(o, "reduce", "reduce_gpu_part", opts, &kp)) ||
        (st = bn_ocl_kernel(o, "reduce", "reduce_gpu_final", opts, &kf)))
        return st;
    if (bn_ocl_kernel_wg(o, kp) < RD_WG || bn_ocl_kernel_wg(o, kf) < RD_WG)
        return bn_fail(BITNET_E_DEVICE, "reduce: the device takes work-groups of %zu < %d", bn_ocl_kernel_wg(o, kp), RD_WG);
    /* groups per row: the device's share for this row, no more than the row fills */
    uint64_t cu = bn_ocl_get_caps(o)->compute_units ? bn_ocl_get_caps(o)->compute_units : 1;
    const char *e = getenv("BITNET_OCL_REDUCE_GROUPS_PER_CU");
    uint64_t gpc = e && atoi(e) >= 1 && atoi(e) <= 1024 ? (uint64_t)atoi(e) : RD_GPU_GROUPS_PER_CU;
    uint64_t target = cu * gpc, per_row = (target + rows - 1) / rows;
    uint64_t fill = (len / 4 + (uint64_t)RD_WG * RD_GPU_MIN_F4 - 1) / ((uint64_t)RD_WG * RD_GPU_MIN_F4);
    uint64_t groups = per_row < fill ? per_row : fill;
    if (groups == 0) groups = 1;
    uint64_t np;
    if (bn_mul_u64(rows, groups, &np) || np > SIZE_MAX / RD_WG)
        return bn_fail(BITNET_E_DEVICE, "reduce: %llu rows are too many for one launch", (unsigned long long)rows);
    cl_mem ps = NULL, pv = NULL, pi = NULL;
    if (!(st = bn_tops_alloc(o, np * 8, &ps)) && !(st = bn_tops_alloc(o, np * 4, &pv))) st = bn_tops_alloc(o, np * 8, &pi);
    cl_ulong cl = len, cg = groups;
    cl_int cop = op, hy = has_y, hi = has_idx;
    size_t wg = RD_WG, global = (size_t)np * RD_WG, gf = (size_t)rows * RD_WG;
    if (!st)
        st = bn_ocl_args(o, kp, 7, sizeof bx, &bx, sizeof ps, &ps, sizeof pv, &pv, sizeof pi, &pi, sizeof cl, &cl,
                         sizeof cg, &cg, sizeof cop, &cop);
    if (!st) st = bn_ocl_run(o, kp, 1, &global, &wg, "reduce");
    if (!st)
        st = bn_ocl_args(o, kf, 11, sizeof ps, &ps, sizeof pv, &pv, sizeof pi, &pi, sizeof by, &by, sizeof bi, &bi,
                         sizeof cg, &cg, sizeof cop, &cop, sizeof cl, &cl, sizeof hy, &hy, sizeof hi, &hi,
                         sizeof perturb, &perturb);
    if (!st) st = bn_ocl_run(o, kf, 1, &gf, &wg, "reduce");
    bn_ocl_release(o, ps);
    bn_ocl_release(o, pv);
    bn_ocl_release(o, pi);
    return st;
}

/* [outer, len, inner] over len on GPUs: enough chunks of rows that about
 * RD_GPU_COL_ITEMS work-items per compute unit run (each walking at least
 * RD_GPU_COL_MIN rows); a single chunk is reduce_cols. */
#define RD_GPU_COL_ITEMS 8192
#define RD_GPU_COL_MIN 32

static bitnet_status gpu_cols_pass(bn_ocl *o, const char *opts, cl_mem bx, uint64_t outer, uint64_t len, uint64_t inner,
                                   int op, cl_mem by, cl_mem bi, int has_y, int has_idx, cl_long perturb)
{
    uint64_t cu = bn_ocl_get_caps(o)->compute_units ? bn_ocl_get_caps(o)->compute_units : 1;
    uint64_t n_out = outer * inner, want = (cu * RD_GPU_COL_ITEMS + n_out - 1) / n_out, most = len / RD_GPU_COL_MIN;
    uint64_t nchunks = want < most ? want : most;
    if (nchunks <= 1) return cols_pass(o, opts, bx, outer, len, inner, op, by, bi, has_y, has_idx, perturb);
    uint64_t chunk = (len + nchunks - 1) / nchunks;
    nchunks = (len + chunk - 1) / chunk;
    cl_kernel kp, kf;
    bitnet_status st;
    if ((st = bn_ocl_kernel(o, "reduce", "reduce_gpu_cols_part", opts, &kp)) ||
        (st = bn_ocl_kernel(o, "reduce", "reduce_gpu_cols_final", opts, &kf)))
        return st;
    uint64_t np = n_out * nchunks; /* <= n_out * len / RD_GPU_COL_MIN */
    cl_mem ps = NULL, pv = NULL, pi = NULL;
    if (!(st = bn_tops_alloc(o, np * 8, &ps)) && !(st = bn_tops_alloc(o, np * 4, &pv))) st = bn_tops_alloc(o, np * 8, &pi);
    cl_ulong co = outer, cl = len, ci = inner, cc = chunk, cn = nchunks, cno = n_out;
    cl_int cop = op, hy = has_y, hi = has_idx;
    size_t wg[2] = {bn_tops_wg(o, kp, 64), 1}, global[2] = {bn_tops_round(n_out, wg[0]), (size_t)nchunks};
    if (!st)
        st = bn_ocl_args(o, kp, 9, sizeof bx, &bx, sizeof ps, &ps, sizeof pv, &pv, sizeof pi, &pi, sizeof co, &co,
                         sizeof cl, &cl, sizeof ci, &ci, sizeof cc, &cc, sizeof cop, &cop);
    if (!st) st = bn_ocl_run(o, kp, 2, global, wg, "reduce");
    size_t wf = bn_tops_wg(o, kf, 64), gf = bn_tops_round(n_out, wf);
    if (!st)
        st = bn_ocl_args(o, kf, 12, sizeof ps, &ps, sizeof pv, &pv, sizeof pi, &pi, sizeof by, &by, sizeof bi, &bi,
                         sizeof cno, &cno, sizeof cn, &cn, sizeof cop, &cop, sizeof cl, &cl, sizeof hy, &hy,
                         sizeof hi, &hi, sizeof perturb, &perturb);
    if (!st) st = bn_ocl_run(o, kf, 1, &gf, &wf, "reduce");
    bn_ocl_release(o, ps);
    bn_ocl_release(o, pv);
    bn_ocl_release(o, pi);
    return st;
}

bitnet_status bn_ocl_reduce(void *ctx, bitnet_reduce_op op, const float *x, const bitnet_shape *s,
                            uint32_t axes_mask, float *y, int64_t *idx)
{
    bn_ocl *o = ctx;
    bn_rplan p;
    bn_reduce_plan(s, axes_mask, &p);
    if (p.n_out == 0) return BITNET_OK;
    if (p.n_red == 0) { /* sum 0, mean NaN (max/min/argmax were refused): nothing for a device */
        if (!y) return BITNET_OK;
        float *h = malloc((size_t)p.n_out * sizeof(float));
        if (!h) return bn_fail(BITNET_E_NOMEM, "reduce: host scratch");
        for (uint64_t i = 0; i < p.n_out; i++) h[i] = op == BITNET_RED_MEAN ? NAN : 0.0f;
        bn_ocl_arg ay;
        bitnet_status st = bn_ocl_out(o, y, (size_t)p.n_out * sizeof(float), &ay);
        if (!st) st = bn_ocl_upload(o, ay.m, 0, h, (size_t)p.n_out * sizeof(float));
        st = bn_ocl_done(o, &ay, st);
        free(h);
        return st;
    }
    const uint64_t n = p.n_out * p.n_red;
    char opts[256];
    snprintf(opts, sizeof opts, "%s -DRD_WG=%d", bn_tops_options(o), RD_WG);
    cl_long perturb = bn_test_perturb("reduce") ? (cl_long)(p.n_out / 2) : -1;
    cl_mem bt = NULL;
    bn_ocl_arg ax = {0}, ay = {0}, ai = {0};
    bitnet_status st = bn_ocl_in(o, x, n * sizeof(float), &ax);
    if (!st) st = y ? bn_ocl_out(o, y, p.n_out * sizeof(float), &ay) : bn_ocl_scratch(o, 4, &ay);
    if (!st) st = idx ? bn_ocl_out(o, idx, p.n_out * sizeof(int64_t), &ai) : bn_ocl_scratch(o, 8, &ai);
    cl_mem bx = ax.m, by = ay.m, bi = ai.m;
    if (st) goto out;
    if (p.rank <= 1 || (p.rank == 2 && p.red[1])) {
        uint64_t len = p.rank && p.red[p.rank - 1] ? p.dims[p.rank - 1] : 1;
        st = (gpu_layout(o) ? gpu_rows_pass : rows_pass)(o, opts, bx, p.n_out, len, op, by, bi, y != NULL,
                                                          idx != NULL, perturb);
    } else if (p.rank <= 3 && (p.rank == 2 ? p.red[0] : p.red[1])) {
        st = (gpu_layout(o) ? gpu_cols_pass : cols_pass)(o, opts, bx, p.rank == 3 ? p.dims[0] : 1, p.dims[p.rank - 2],
                                                         p.dims[p.rank - 1], op, by, bi, y != NULL, idx != NULL, perturb);
    } else { /* kept axes first, reduced last, then rows */
        bitnet_shape ps = {p.rank, {0}};
        uint32_t perm[BITNET_MAX_RANK], np = 0;
        for (uint32_t i = 0; i < p.rank; i++) { ps.dims[i] = p.dims[i]; if (!p.red[i]) perm[np++] = i; }
        for (uint32_t i = 0; i < p.rank; i++) if (p.red[i]) perm[np++] = i;
        if (!(st = bn_tops_alloc(o, n * sizeof(float), &bt)) && !(st = bn_ocl_permute_buf(o, bx, &ps, perm, bt, -1)))
            st = (gpu_layout(o) ? gpu_rows_pass : rows_pass)(o, opts, bt, p.n_out, p.n_red, op, by, bi, y != NULL,
                                                              idx != NULL, perturb);
    }
out:
    st = bn_ocl_done(o, &ay, st);
    st = bn_ocl_done(o, &ai, st);
    st = bn_ocl_done(o, &ax, st);
    bn_ocl_release(o, bt);
    return st;
}
