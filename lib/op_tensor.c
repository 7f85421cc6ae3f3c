/*
 * op_tensor.c - public entry points of the tensor ops (binary with
 * broadcasting, unary, softmax, reductions, norms, permute): argument and
 * shape checks with messages naming the shapes, then BN_DISPATCH to the
 * backend, or the scalar reference for the _ref calls.  Also the shape
 * planning helpers every implementation shares (op_tensor.h).
 */
#include "op_tensor.h"
#include "backend.h"

#include <inttypes.h>
#include <stdio.h>

/* ---- shape helpers ------------------------------------------------------ */

const char *bn_shape_fmt(const bitnet_shape *s, char *buf, size_t size)
{
    size_t used;
    if (!size) return buf;
    used = (size_t)snprintf(buf, size, "[");
    for (uint32_t i = 0; i < s->rank && i < BITNET_MAX_RANK && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRIu64, i ? ", " : "", s->dims[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

static bitnet_status shape_check(const bitnet_shape *s, const char *what)
{
    if (!s) return bn_fail(BITNET_E_INVALID, "%s: NULL shape", what);
    if (s->rank > BITNET_MAX_RANK)
        return bn_fail(BITNET_E_LIMIT, "%s: rank %u exceeds %d", what, s->rank, BITNET_MAX_RANK);
    return BITNET_OK;
}

bitnet_status bn_shape_numel(const bitnet_shape *s, uint64_t *n)
{
    uint64_t v = 1, bytes;
    char buf[200];
    for (uint32_t i = 0; i < s->rank; i++)
        if (bn_mul_u64(v, s->dims[i], &v) || v > BITNET_MAX_ELEMENTS)
            return bn_fail(BITNET_E_LIMIT, "shape %s has more than 2^48 elements", bn_shape_fmt(s, buf, sizeof buf));
    if (bn_mul_u64(v, sizeof(float), &bytes) || bytes > (uint64_t)SIZE_MAX)
        return bn_fail(BITNET_E_OVERFLOW, "shape %s does not fit in memory", bn_shape_fmt(s, buf, sizeof buf));
    *n = v;
    return BITNET_OK;
}

void bn_bcast_plan(const bitnet_shape *sa, const bitnet_shape *sb, const bitnet_shape *sy, bn_bcast *p)
{
    uint64_t dims[BITNET_MAX_RANK], a[BITNET_MAX_RANK], b[BITNET_MAX_RANK];
    uint64_t ra = 1, rb = 1;
    uint32_t r = sy->rank;
    /* Strides from the right; a dim of size 1 (or missing) broadcasts: stride 0. */
    for (uint32_t k = 0; k < r; k++) {
        uint32_t i = r - 1 - k;
        uint64_t da = k < sa->rank ? sa->dims[sa->rank - 1 - k] : 1;
        uint64_t db = k < sb->rank ? sb->dims[sb->rank - 1 - k] : 1;
        dims[i] = sy->dims[i];
        a[i] = da == 1 ? 0 : ra;
        b[i] = db == 1 ? 0 : rb;
        ra *= da;
        rb *= db;
    }
    p->rank = 0;
    for (uint32_t i = 0; i < r; i++) {
        if (dims[i] == 1) continue;
        if (p->rank) {
            uint32_t j = p->rank - 1;
            /* merge dim i into the previous one when both strides continue */
            if (p->sa[j] == a[i] * dims[i] && p->sb[j] == b[i] * dims[i]) {
                p->dims[j] *= dims[i];
                p->sa[j] = a[i];
                p->sb[j] = b[i];
                continue;
            }
        }
        p->dims[p->rank] = dims[i];
        p->sa[p->rank] = a[i];
        p->sb[p->rank] = b[i];
        p->rank++;
    }
    if (p->rank == 0) { /* a single element */
        p->rank = 1;
        p->dims[0] = 1;
        p->sa[0] = p->sb[0] = 0;
    }
}

void bn_axis_split(const bitnet_shape *s, uint32_t axis, uint64_t *outer, uint64_t *len, uint64_t *inner)
{
    uint64_t o = 1, in = 1;
    for (uint32_t i = 0; i < axis; i++) o *= s->dims[i];
    for (uint32_t i = axis + 1; i < s->rank; i++) in *= s->dims[i];
    *outer = o;
    *len = s->dims[axis];
    *inner = in;
}

void bn_reduce_plan(const bitnet_shape *s, uint32_t axes_mask, bn_rplan *p)
{
    p->rank = 0;
    p->n_out = p->n_red = 1;
    for (uint32_t i = 0; i < s->rank; i++) {
        int red = axes_mask == 0 || (axes_mask >> i) & 1;
        if (red) p->n_red *= s->dims[i];
        else p->n_out *= s->dims[i];
        if (s->dims[i] == 1) continue;
        if (p->rank && p->red[p->rank - 1] == red) {
            p->dims[p->rank - 1] *= s->dims[i];
            continue;
        }
        p->dims[p->rank] = s->dims[i];
        p->red[p->rank] = red;
        p->rank++;
    }
}

void bn_permute_plan(const bitnet_shape *s, const uint32_t *perm, bn_pplan *p)
{
    /* Drop size-1 axes, then merge runs i, i+1 that follow each other in perm. */
    uint32_t map[BITNET_MAX_RANK], r = 0, q[BITNET_MAX_RANK], nq = 0;
    uint64_t d[BITNET_MAX_RANK];
    for (uint32_t i = 0; i < s->rank; i++) {
        if (s->dims[i] == 1) { map[i] = UINT32_MAX; continue; }
        map[i] = r;
        d[r++] = s->dims[i];
    }
    for (uint32_t i = 0; i < s->rank; i++)
        if (map[perm[i]] != UINT32_MAX) q[nq++] = map[perm[i]];
    /* q is a permutation of 0..r-1; group input axes into runs. */
    uint32_t group_of[BITNET_MAX_RANK], ng = 0;
    for (uint32_t k = 0; k < nq; k++) {
        if (k && q[k] == q[k - 1] + 1) group_of[q[k]] = group_of[q[k - 1]];
        else group_of[q[k]] = ng++;
    }
    /* Groups numbered in output order; input order of groups gives dims. */
    uint32_t in_rank[BITNET_MAX_RANK];
    p->rank = 0;
    for (uint32_t i = 0; i < r; i++) {
        if (i && group_of[i] == group_of[i - 1]) {
            p->dims[p->rank - 1] *= d[i];
            continue;
        }
        in_rank[group_of[i]] = p->rank;
        p->dims[p->rank++] = d[i];
    }
    for (uint32_t g = 0; g < ng; g++) p->perm[g] = in_rank[g];
    if (p->rank == 0) {
        p->rank = 1;
        p->dims[0] = 1;
        p->perm[0] = 0;
    }
}

/* ---- binary ------------------------------------------------------------- */

bitnet_status bitnet_broadcast_shape(const bitnet_shape *a, const bitnet_shape *b, bitnet_shape *out)
{
    bitnet_status st;
    char ba[200], bb[200];
    if ((st = shape_check(a, "broadcast"))) return st;
    if ((st = shape_check(b, "broadcast"))) return st;
    if (!out) return bn_fail(BITNET_E_INVALID, "broadcast: NULL output shape");
    bitnet_shape r;
    r.rank = a->rank > b->rank ? a->rank : b->rank;
    for (uint32_t k = 0; k < r.rank; k++) {
        uint64_t da = k < a->rank ? a->dims[a->rank - 1 - k] : 1;
        uint64_t db = k < b->rank ? b->dims[b->rank - 1 - k] : 1;
        uint64_t d;
        if (da == db || db == 1) d = da;
        else if (da == 1) d = db;
        else
            return bn_fail(BITNET_E_SHAPE, "cannot broadcast %s with %s (dim %" PRIu64 " vs %" PRIu64 ")",
                           bn_shape_fmt(a, ba, sizeof ba), bn_shape_fmt(b, bb, sizeof bb), da, db);
        r.dims[r.rank - 1 - k] = d;
    }
    for (uint32_t i = r.rank; i < BITNET_MAX_RANK; i++) r.dims[i] = 0;
    *out = r;
    return BITNET_OK;
}

static bitnet_status binary_check(bitnet_binary_op op, const float *a, const bitnet_shape *sa, const float *b,
                                  const bitnet_shape *sb, const float *y, bitnet_shape *sy, uint64_t *bytes)
{
    bitnet_status st;
    uint64_t na, nb, ny;
    if ((unsigned)op >= BITNET_BIN_COUNT) return bn_fail(BITNET_E_INVALID, "binary: unknown op %d", (int)op);
    if ((st = bitnet_broadcast_shape(sa, sb, sy))) return st;
    if ((st = bn_shape_numel(sa, &na)) || (st = bn_shape_numel(sb, &nb)) || (st = bn_shape_numel(sy, &ny))) return st;
    if ((na && !a) || (nb && !b) || (ny && !y)) return bn_fail(BITNET_E_INVALID, "binary: NULL buffer");
    *bytes = (na + nb + ny) * sizeof(float); /* each < 2^50: no overflow */
    return BITNET_OK;
}

bitnet_status bitnet_binary(bitnet_backend *be, bitnet_binary_op op, const float *a, const bitnet_shape *sa,
                            const float *b, const bitnet_shape *sb, float *y)
{
    bitnet_shape sy;
    uint64_t bytes;
    bitnet_status st;
    if (!be) return bn_fail(BITNET_E_INVALID, "binary: NULL backend");
    if ((st = binary_check(op, a, sa, b, sb, y, &sy, &bytes))) return st;
    uint64_t na = 0, nb = 0, ny = 0;
    bn_shape_numel(sa, &na);
    bn_shape_numel(sb, &nb);
    bn_shape_numel(&sy, &ny);
    bn_operand opd[] = {BN_IN(a, na * 4), BN_IN(b, nb * 4), BN_OUT(y, ny * 4)};
    BN_DISPATCH(st, be, binary, "binary", bytes, opd, op, a, sa, b, sb, y, &sy);
    return st;
}

bitnet_status bitnet_binary_ref(bitnet_binary_op op, const float *a, const bitnet_shape *sa, const float *b,
                                const bitnet_shape *sb, float *y)
{
    bitnet_shape sy;
    uint64_t bytes;
    bitnet_status st;
    if ((st = binary_check(op, a, sa, b, sb, y, &sy, &bytes))) return st;
    bn_binary_ref_k(op, a, sa, b, sb, y, &sy);
    return BITNET_OK;
}

/* ---- unary -------------------------------------------------------------- */

static bitnet_status unary_check(bitnet_unary_op op, const float *x, uint64_t n, const float *y)
{
    if ((unsigned)op >= BITNET_UN_COUNT) return bn_fail(BITNET_E_INVALID, "unary: unknown op %d", (int)op);
    if (n > BITNET_MAX_ELEMENTS || n > SIZE_MAX / sizeof(float))
        return bn_fail(BITNET_E_LIMIT, "unary: %" PRIu64 " elements exceed the limit", n);
    if (n && (!x || !y)) return bn_fail(BITNET_E_INVALID, "unary: NULL buffer");
    return BITNET_OK;
}

bitnet_status bitnet_unary(bitnet_backend *be, bitnet_unary_op op, const float *x, uint64_t n, float param, float *y)
{
    bitnet_status st;
    if (!be) return bn_fail(BITNET_E_INVALID, "unary: NULL backend");
    if ((st = unary_check(op, x, n, y))) return st;
    bn_operand opd[] = {BN_IN(x, n * 4), BN_OUT(y, n * 4)};
    BN_DISPATCH(st, be, unary, "unary", 2 * n * sizeof(float), opd, op, x, n, param, y);
    return st;
}

bitnet_status bitnet_unary_ref(bitnet_unary_op op, const float *x, uint64_t n, float param, float *y)
{
    bitnet_status st;
    if ((st = unary_check(op, x, n, y))) return st;
    bn_unary_ref_k(op, x, n, param, y);
    return BITNET_OK;
}

/* ---- softmax ------------------------------------------------------------ */

static bitnet_status axis_norm(const bitnet_shape *s, int axis, const char *what, uint32_t *out)
{
    char buf[200];
    int r = (int)s->rank;
    if (axis < -r || axis >= r || r == 0)
        return bn_fail(BITNET_E_INVALID, "%s: axis %d out of range for shape %s", what, axis,
                       bn_shape_fmt(s, buf, sizeof buf));
    *out = (uint32_t)(axis < 0 ? axis + r : axis);
    return BITNET_OK;
}

static bitnet_status softmax_check(const float *x, const bitnet_shape *s, int axis, const float *y, uint64_t *n,
                                   uint64_t *outer, uint64_t *len, uint64_t *inner)
{
    bitnet_status st;
    uint32_t ax;
    if ((st = shape_check(s, "softmax")) || (st = bn_shape_numel(s, n))) return st;
    if ((st = axis_norm(s, axis, "softmax", &ax))) return st;
    if (*n && (!x || !y)) return bn_fail(BITNET_E_INVALID, "softmax: NULL buffer");
    bn_axis_split(s, ax, outer, len, inner);
    return BITNET_OK;
}

bitnet_status bitnet_softmax(bitnet_backend *be, const float *x, const bitnet_shape *s, int axis, int log, float *y)
{
    uint64_t n, outer, len, inner;
    bitnet_status st;
    if (!be) return bn_fail(BITNET_E_INVALID, "softmax: NULL backend");
    if ((st = softmax_check(x, s, axis, y, &n, &outer, &len, &inner))) return st;
    if (n == 0) return BITNET_OK;
    bn_operand opd[] = {BN_IN(x, n * 4), BN_OUT(y, n * 4)};
    BN_DISPATCH(st, be, softmax, log ? "log_softmax" : "softmax", 2 * n * sizeof(float), opd, x, outer, len, inner,
                log != 0, y);
    return st;
}

bitnet_status bitnet_softmax_ref(const float *x, const bitnet_shape *s, int axis, int log, float *y)
{
    uint64_t n, outer, len, inner;
    bitnet_status st;
    if ((st = softmax_check(x, s, axis, y, &n, &outer, &len, &inner))) return st;
    bn_softmax_ref_k(x, outer, len, inner, log != 0, y);
    return BITNET_OK;
}

/* ---- reductions --------------------------------------------------------- */

static bitnet_status reduce_check(bitnet_reduce_op op, const float *x, const bitnet_shape *s, uint32_t axes_mask,
                                  const void *y, bitnet_shape *ys, uint64_t *bytes)
{
    bitnet_status st;
    uint64_t n;
    char buf[200];
    if ((unsigned)op >= BITNET_RED_COUNT) return bn_fail(BITNET_E_INVALID, "reduce: unknown op %d", (int)op);
    if ((st = shape_check(s, "reduce")) || (st = bn_shape_numel(s, &n))) return st;
    if (s->rank < 32 && (axes_mask >> s->rank) != 0)
        return bn_fail(BITNET_E_INVALID, "reduce: axes mask 0x%x names an axis beyond shape %s", axes_mask,
                       bn_shape_fmt(s, buf, sizeof buf));
    if (op == BITNET_RED_ARGMAX && (s->rank == 0 || __builtin_popcount(axes_mask) != 1))
        return bn_fail(BITNET_E_INVALID, "argmax: needs exactly one axis");
    bitnet_shape o = {0, {0}};
    uint64_t nout = 1, nred = 1;
    for (uint32_t i = 0; i < s->rank; i++) {
        if (axes_mask == 0 || (axes_mask >> i) & 1) nred *= s->dims[i];
        else { o.dims[o.rank++] = s->dims[i]; nout *= s->dims[i]; }
    }
    if (nred == 0 && nout != 0 && op != BITNET_RED_SUM && op != BITNET_RED_MEAN)
        return bn_fail(BITNET_E_SHAPE, "reduce: max/min/argmax over an empty axis of shape %s",
                       bn_shape_fmt(s, buf, sizeof buf));
    if ((n && !x) || (nout && !y)) return bn_fail(BITNET_E_INVALID, "reduce: NULL buffer");
    if (ys) *ys = o;
    *bytes = (n + nout) * sizeof(float);
    return BITNET_OK;
}

bitnet_status bitnet_reduce(bitnet_backend *be, bitnet_reduce_op op, const float *x, const bitnet_shape *s,
                            uint32_t axes_mask, float *y, bitnet_shape *ys)
{
    uint64_t bytes;
    bitnet_status st;
    if (!be) return bn_fail(BITNET_E_INVALID, "reduce: NULL backend");
    if ((st = reduce_check(op, x, s, axes_mask, y, ys, &bytes))) return st;
    uint64_t nx = 0, ny = 0;
    bn_shape_numel(s, &nx);
    bn_shape_numel(ys, &ny);
    bn_operand opd[] = {BN_IN(x, nx * 4), BN_OUT(y, ny * 4)};
    BN_DISPATCH(st, be, reduce, "reduce", bytes, opd, op, x, s, axes_mask, y, (int64_t *)NULL);
    return st;
}

bitnet_status bitnet_reduce_ref(bitnet_reduce_op op, const float *x, const bitnet_shape *s, uint32_t axes_mask,
                                float *y, bitnet_shape *ys)
{
    uint64_t bytes;
    bitnet_status st;
    if ((st = reduce_check(op, x, s, axes_mask, y, ys, &bytes))) return st;
    bn_reduce_ref_k(op, x, s, axes_mask, y, NULL);
    return BITNET_OK;
}

bitnet_status bitnet_reduce_argmax(bitnet_backend *be, const float *x, const bitnet_shape *s, int axis, int64_t *y,
                                   bitnet_shape *ys)
{
    uint64_t bytes;
    uint32_t ax;
    bitnet_status st;
    if (!be) return bn_fail(BITNET_E_INVALID, "argmax: NULL backend");
    if ((st = shape_check(s, "argmax")) || (st = axis_norm(s, axis, "argmax", &ax))) return st;
    if ((st = reduce_check(BITNET_RED_ARGMAX, x, s, 1u << ax, y, ys, &bytes))) return st;
    uint64_t nx = 0, ny = 0;
    bn_shape_numel(s, &nx);
    bn_shape_numel(ys, &ny);
    bn_operand opd[] = {BN_IN(x, nx * 4), BN_OUT(y, ny * 8)};
    BN_DISPATCH(st, be, reduce, "reduce", bytes, opd, BITNET_RED_ARGMAX, x, s, 1u << ax, (float *)NULL, y);
    return st;
}

bitnet_status bitnet_reduce_argmax_ref(const float *x, const bitnet_shape *s, int axis, int64_t *y, bitnet_shape *ys)
{
    uint64_t bytes;
    uint32_t ax;
    bitnet_status st;
    if ((st = shape_check(s, "argmax")) || (st = axis_norm(s, axis, "argmax", &ax))) return st;
    if ((st = reduce_check(BITNET_RED_ARGMAX, x, s, 1u << ax, y, ys, &bytes))) return st;
    bn_reduce_ref_k(BITNET_RED_ARGMAX, x, s, 1u << ax, NULL, y);
    return BITNET_OK;
}

/* ---- norms -------------------------------------------------------------- */

static bitnet_status norm_check(const char *what, const float *x, uint64_t rows, uint64_t cols, float eps,
                                const float *y, uint64_t *bytes)
{
    uint64_t n;
    if (bn_mul_u64(rows, cols, &n) || n > BITNET_MAX_ELEMENTS || n > SIZE_MAX / sizeof(float))
        return bn_fail(BITNET_E_LIMIT, "%s: %" PRIu64 " x %" PRIu64 " exceeds the element limit", what, rows, cols);
    if (!(eps >= 0) || isinf(eps)) return bn_fail(BITNET_E_INVALID, "%s: eps %g must be finite and >= 0", what, eps);
    if (n && (!x || !y)) return bn_fail(BITNET_E_INVALID, "%s: NULL buffer", what);
    *bytes = (2 * n + 2 * cols) * sizeof(float);
    return BITNET_OK;
}

bitnet_status bitnet_layernorm(bitnet_backend *be, const float *x, uint64_t rows, uint64_t cols,
                               const float *weight, const float *bias, float eps, float *y)
{
    uint64_t bytes;
    bitnet_status st;
    if (!be) return bn_fail(BITNET_E_INVALID, "layernorm: NULL backend");
    if ((st = norm_check("layernorm", x, rows, cols, eps, y, &bytes))) return st;
    if (rows == 0 || cols == 0) return BITNET_OK;
    bn_operand opd[] = {BN_IN(x, rows * cols * 4), BN_IN(weight, cols * 4), BN_IN(bias, cols * 4),
                        BN_OUT(y, rows * cols * 4)};
    BN_DISPATCH(st, be, layernorm, "layernorm", bytes, opd, x, rows, cols, weight, bias, eps, 0, y);
    return st;
}

bitnet_status bitnet_layernorm_ref(const float *x, uint64_t rows, uint64_t cols, const float *weight,
                                   const float *bias, float eps, float *y)
{
    uint64_t bytes;
    bitnet_status st;
    if ((st = norm_check("layernorm", x, rows, cols, eps, y, &bytes))) return st;
    bn_norm_ref_k(x, rows, cols, weight, bias, eps, 0, y);
    return BITNET_OK;
}

bitnet_status bitnet_rmsnorm(bitnet_backend *be, const float *x, uint64_t rows, uint64_t cols,
                             const float *weight, float eps, float *y)
{
    uint64_t bytes;
    bitnet_status st;
    if (!be) return bn_fail(BITNET_E_INVALID, "rmsnorm: NULL backend");
    if ((st = norm_check("rmsnorm", x, rows, cols, eps, y, &bytes))) return st;
    if (rows == 0 || cols == 0) return BITNET_OK;
    bn_operand opd[] = {BN_IN(x, rows * cols * 4), BN_IN(weight, cols * 4), BN_OUT(y, rows * cols * 4)};
    BN_DISPATCH(st, be, layernorm, "rmsnorm", bytes, opd, x, rows, cols, weight, (const float *)NULL, eps, 1, y);
    return st;
}

bitnet_status bitnet_rmsnorm_ref(const float *x, uint64_t rows, uint64_t cols, const float *weight, float eps,
                                 float *y)
{
    uint64_t bytes;
    bitnet_status st;
    if ((st = norm_check("rmsnorm", x, rows, cols, eps, y, &bytes))) return st;
    bn_norm_ref_k(x, rows, cols, weight, NULL, eps, 1, y);
    return BITNET_OK;
}

/* ---- permute ------------------------------------------------------------ */

static bitnet_status permute_check(const float *x, const bitnet_shape *s, const uint32_t *perm, const float *y,
                                   uint64_t *n)
{
    bitnet_status st;
    char buf[200];
    uint32_t seen = 0;
    if ((st = shape_check(s, "permute")) || (st = bn_shape_numel(s, n))) return st;
    if (s->rank && !perm) return bn_fail(BITNET_E_INVALID, "permute: NULL perm");
    for (uint32_t i = 0; i < s->rank; i++) {
        if (perm[i] >= s->rank || (seen >> perm[i]) & 1)
            return bn_fail(BITNET_E_INVALID, "permute: perm is not a permutation of the %u axes of %s", s->rank,
                           bn_shape_fmt(s, buf, sizeof buf));
        seen |= 1u << perm[i];
    }
    if (*n && (!x || !y)) return bn_fail(BITNET_E_INVALID, "permute: NULL buffer");
    return BITNET_OK;
}

bitnet_status bitnet_permute(bitnet_backend *be, const float *x, const bitnet_shape *s, const uint32_t *perm, float *y)
{
    uint64_t n;
    bitnet_status st;
    if (!be) return bn_fail(BITNET_E_INVALID, "permute: NULL backend");
    if ((st = permute_check(x, s, perm, y, &n))) return st;
    if (n == 0) return BITNET_OK;
    bn_operand opd[] = {BN_IN(x, n * 4), BN_OUT(y, n * 4)};
    BN_DISPATCH(st, be, permute, "permute", 2 * n * sizeof(float), opd, x, s, perm, y);
    return st;
}

bitnet_status bitnet_permute_ref(const float *x, const bitnet_shape *s, const uint32_t *perm, float *y)
{
    uint64_t n;
    bitnet_status st;
    if ((st = permute_check(x, s, perm, y, &n))) return st;
    bn_permute_ref_k(x, s, perm, y);
    return BITNET_OK;
}
