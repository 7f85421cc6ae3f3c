/*
 * bk_ops.c - --backends checks of the f32 tensor ops: binary (with
 * broadcasting), unary, softmax and log-softmax, reductions, layernorm and
 * rmsnorm, permute, scale.  Bounds: exact for add/sub/mul/div/max/min, relu,
 * neg, abs, scale, permute, max/min/argmax; 4 ulps for transcendentals,
 * sqrt, softmax and the norms; NMSE <= 1e-12 for sum and mean against float64.
 */
#include "bk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bitnet_shape shape2(uint64_t a, uint64_t b)
{
    bitnet_shape s;
    memset(&s, 0, sizeof s);
    s.rank = 2, s.dims[0] = a, s.dims[1] = b;
    return s;
}

static bitnet_shape shape3(uint64_t a, uint64_t b, uint64_t d)
{
    bitnet_shape s = shape2(a, b);
    s.rank = 3, s.dims[2] = d;
    return s;
}

static bitnet_shape shape1(uint64_t a)
{
    bitnet_shape s = shape2(a, 1);
    s.rank = 1;
    return s;
}

static uint64_t count(const bitnet_shape *s)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < s->rank; i++) n *= s->dims[i];
    return n;
}

static const char *shape_text(const bitnet_shape *s, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (uint32_t i = 0; i < s->rank && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%llu", i ? "," : "", (unsigned long long)s->dims[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

/* The test shapes of a class for ops on whole tensors: each matrix m x k,
 * one 3-D [2, m, k], and each vector. */
typedef struct {
    bitnet_shape s[16];
    size_t n;
} shape_set;

static void shapes_of(const bk_ctx *c, shape_set *ss, int with3d)
{
    ss->n = 0;
    for (size_t i = 0; i < c->cls->nmat && ss->n < 16; i++) ss->s[ss->n++] = shape2(c->cls->mat[i].m, c->cls->mat[i].k);
    if (with3d && c->cls->nmat) ss->s[ss->n++] = shape3(2, c->cls->mat[0].m, c->cls->mat[0].k);
    for (size_t i = 0; i < c->cls->nvec && ss->n < 16; i++) ss->s[ss->n++] = shape1(c->cls->vec[i]);
}

/* ---- binary ------------------------------------------------------------------ */

static const char *bin_names[BITNET_BIN_COUNT] = {"binary/add", "binary/sub", "binary/mul", "binary/div",
                                                  "binary/max", "binary/min"};

static void t_binary(bk_ctx *c, bitnet_binary_op op)
{
    bk_begin(c, bin_names[op], BK_ULP, 0);
    shape_set ss;
    shapes_of(c, &ss, 0);
    for (size_t i = 0; i < ss.n; i++) {
        bitnet_shape a = ss.s[i], pairs[4][2];
        size_t np = 0;
        uint64_t cols = a.dims[a.rank - 1], rows = a.rank == 2 ? a.dims[0] : 1;
        bitnet_shape scalar;
        memset(&scalar, 0, sizeof scalar);
        pairs[np][0] = a, pairs[np++][1] = a;                    /* same shape */
        pairs[np][0] = a, pairs[np++][1] = shape1(cols);         /* a row vector */
        pairs[np][0] = shape2(rows, 1), pairs[np++][1] = shape2(1, cols); /* both broadcast */
        pairs[np][0] = a, pairs[np++][1] = scalar;               /* a scalar */
        for (size_t p = 0; p < np; p++) {
            bitnet_shape sy;
            char what[160], t1[64], t2[64];
            snprintf(what, sizeof what, "%s op %s", shape_text(&pairs[p][0], t1, sizeof t1),
                     shape_text(&pairs[p][1], t2, sizeof t2));
            if (bitnet_broadcast_shape(&pairs[p][0], &pairs[p][1], &sy)) {
                bk_status(c, BITNET_E_SHAPE, BITNET_OK, what);
                continue;
            }
            uint64_t na = count(&pairs[p][0]), nb = count(&pairs[p][1]), ny = count(&sy);
            float *x = bk_alloc(na, 4), *y = bk_alloc(nb, 4), *r = bk_alloc(ny, 4), *f = bk_alloc(ny, 4);
            bk_fill(c, x, na, -3, 3);
            if (op == BITNET_BIN_DIV) { /* divisors away from zero */
                bk_fill(c, y, nb, 0.5f, 2);
                for (uint64_t j = 0; j < nb; j++)
                    if (bk_rand(c) & 1) y[j] = -y[j];
            } else {
                bk_fill(c, y, nb, -3, 3);
            }
            bk_poison(r, ny * 4), bk_poison(f, ny * 4);
            bitnet_status s1 = bitnet_binary_ref(op, x, &pairs[p][0], y, &pairs[p][1], r);
            bitnet_status s2 = bitnet_binary(c->be, op, x, &pairs[p][0], y, &pairs[p][1], f);
            if (!bk_status(c, s1, s2, what)) bk_add(c, bk_ulps(f, r, ny), what);
            free(x), free(y), free(r), free(f);
        }
    }
    bk_end(c);
}

/* ---- unary -------------------------------------------------------------------- */

static const struct {
    const char *name;
    double bound;
    float lo, hi;
} un[BITNET_UN_COUNT] = {
    [BITNET_UN_RELU] = {"unary/relu", 0, -4, 4},
    [BITNET_UN_GELU] = {"unary/gelu", 4, -6, 6},
    [BITNET_UN_GELU_TANH] = {"unary/gelu_tanh", 4, -6, 6},
    [BITNET_UN_SIGMOID] = {"unary/sigmoid", 4, -8, 8},
    [BITNET_UN_SILU] = {"unary/silu", 4, -8, 8},
    [BITNET_UN_TANH] = {"unary/tanh", 4, -4, 4},
    [BITNET_UN_EXP] = {"unary/exp", 4, -10, 10},
    [BITNET_UN_NEG] = {"unary/neg", 0, -4, 4},
    [BITNET_UN_ABS] = {"unary/abs", 0, -4, 4},
    [BITNET_UN_SQRT] = {"unary/sqrt", 4, 0.001f, 100},
    [BITNET_UN_SCALE] = {"unary/scale", 0, -4, 4},
};

/* One element-wise call: the reference (be NULL) or the backend's. */
typedef bitnet_status (*ew_call)(bitnet_backend *be, int op, const float *x, uint64_t n, float *y);

/* An element-wise op over every vector shape: x uniform in [lo, hi), the
 * backend within bound ulps of the reference. */
static void t_elementwise(bk_ctx *c, const char *name, double bound, float lo, float hi, ew_call call, int op)
{
    bk_begin(c, name, BK_ULP, bound);
    shape_set ss;
    shapes_of(c, &ss, 0);
    for (size_t i = 0; i < ss.n; i++) {
        uint64_t n = count(&ss.s[i]);
        float *x = bk_alloc(n, 4), *r = bk_alloc(n, 4), *f = bk_alloc(n, 4);
        char what[64];
        snprintf(what, sizeof what, "n=%llu", (unsigned long long)n);
        bk_fill(c, x, n, lo, hi);
        bk_poison(r, n * 4), bk_poison(f, n * 4);
        bitnet_status s1 = call(NULL, op, x, n, r);
        bitnet_status s2 = call(c->be, op, x, n, f);
        if (!bk_status(c, s1, s2, what)) bk_add(c, bk_ulps(f, r, n), what);
        free(x), free(r), free(f);
    }
    bk_end(c);
}

static bitnet_status unary_call(bitnet_backend *be, int op, const float *x, uint64_t n, float *y)
{
    return be ? bitnet_unary(be, (bitnet_unary_op)op, x, n, 0.731f, y) : bitnet_unary_ref((bitnet_unary_op)op, x, n, 0.731f, y);
}

static void t_unary(bk_ctx *c, bitnet_unary_op op)
{
    t_elementwise(c, un[op].name, un[op].bound, un[op].lo, un[op].hi, unary_call, (int)op);
}

/* ---- softmax -------------------------------------------------------------------- */

static void t_softmax(bk_ctx *c, int log)
{
    bk_begin(c, log ? "log_softmax" : "softmax", BK_ULP, 4);
    shape_set ss;
    shapes_of(c, &ss, 1);
    for (size_t i = 0; i < ss.n; i++) {
        bitnet_shape s = ss.s[i];
        uint64_t n = count(&s);
        float *x = bk_alloc(n, 4), *r = bk_alloc(n, 4), *f = bk_alloc(n, 4);
        bk_fill(c, x, n, -5, 5);
        for (int axis = -1; axis < (int)s.rank - 1; axis++) { /* the last axis, then 0 .. rank-2 */
            char what[96], t[64];
            snprintf(what, sizeof what, "%s axis=%d", shape_text(&s, t, sizeof t), axis);
            bk_poison(r, n * 4), bk_poison(f, n * 4);
            bitnet_status s1 = bitnet_softmax_ref(x, &s, axis, log, r);
            bitnet_status s2 = bitnet_softmax(c->be, x, &s, axis, log, f);
            if (!bk_status(c, s1, s2, what)) bk_add(c, bk_ulps(f, r, n), what);
        }
        free(x), free(r), free(f);
    }
    bk_end(c);
}

/* ---- reductions ------------------------------------------------------------------- */

/* sum or mean over the axes in mask (0: all), in float64, output in C order
 * of the kept axes. */
static void reduce_f64(const float *x, const bitnet_shape *s, uint32_t mask, int mean, double *y, uint64_t ny)
{
    uint64_t n = count(s), kept_n = 1;
    if (mask == 0) mask = (1u << s->rank) - 1;
    for (uint32_t a = 0; a < s->rank; a++)
        if (!(mask >> a & 1)) kept_n *= s->dims[a];
    memset(y, 0, ny * sizeof *y);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t rest = i, out = 0, stride = 1;
        for (int a = (int)s->rank - 1; a >= 0; a--) {
            uint64_t idx = rest % s->dims[a];
            rest /= s->dims[a];
            if (!(mask >> a & 1)) {
                out += idx * stride;
                stride *= s->dims[a];
            }
        }
        y[out] += x[i];
    }
    if (mean)
        for (uint64_t j = 0; j < kept_n; j++) y[j] /= (double)(n / kept_n);
}

static const char *red_names[BITNET_RED_COUNT] = {"reduce/sum", "reduce/mean", "reduce/max", "reduce/min",
                                                  "reduce/argmax"};

static void t_reduce(bk_ctx *c, bitnet_reduce_op op)
{
    int sum = op == BITNET_RED_SUM || op == BITNET_RED_MEAN;
    bk_begin(c, red_names[op], sum ? BK_NMSE : BK_ULP, sum ? 1e-12 : 0);
    shape_set ss;
    shapes_of(c, &ss, 1);
    for (size_t i = 0; i < ss.n; i++) {
        bitnet_shape s = ss.s[i];
        uint64_t n = count(&s);
        uint32_t masks[4];
        size_t nm = 0;
        if (op == BITNET_RED_ARGMAX) { /* exactly one axis */
            for (uint32_t a = 0; a < s.rank; a++) masks[nm++] = 1u << a;
        } else {
            masks[nm++] = 0;
            masks[nm++] = 1u << (s.rank - 1);
            if (s.rank > 1) masks[nm++] = 1;
            if (s.rank == 3) masks[nm++] = 5;
        }
        float *x = bk_alloc(n, 4), *r = bk_alloc(n, 4), *f = bk_alloc(n, 4);
        double *d = bk_alloc(n, 8);
        bk_fill(c, x, n, -2, 3);
        for (size_t m = 0; m < nm; m++) {
            bitnet_shape sr, sf;
            char what[96], t[64];
            snprintf(what, sizeof what, "%s axes=0x%x", shape_text(&s, t, sizeof t), masks[m]);
            memset(&sr, 0, sizeof sr);
            memset(&sf, 0, sizeof sf);
            bk_poison(r, n * 4), bk_poison(f, n * 4);
            bitnet_status s1 = bitnet_reduce_ref(op, x, &s, masks[m], r, &sr);
            bitnet_status s2 = bitnet_reduce(c->be, op, x, &s, masks[m], f, &sf);
            if (bk_status(c, s1, s2, what)) continue;
            uint64_t ny = count(&sr);
            if (sr.rank != sf.rank || memcmp(sr.dims, sf.dims, sizeof sr.dims) != 0) {
                bk_add(c, INFINITY, what); /* output shapes differ */
                continue;
            }
            if (sum) {
                reduce_f64(x, &s, masks[m], op == BITNET_RED_MEAN, d, ny);
                bk_add(c, bk_nmse(f, d, ny), what);
            } else {
                bk_add(c, bk_ulps(f, r, ny), what);
            }
        }
        free(x), free(r), free(f), free(d);
    }
    bk_end(c);
}

/* bitnet_reduce_argmax (int64 indices) against the reference's f32 indices. */
static void t_argmax_i64(bk_ctx *c)
{
    bk_begin(c, "reduce/argmax_i64", BK_MISMATCH, 0);
    shape_set ss;
    shapes_of(c, &ss, 1);
    for (size_t i = 0; i < ss.n; i++) {
        bitnet_shape s = ss.s[i];
        uint64_t n = count(&s);
        float *x = bk_alloc(n, 4), *r = bk_alloc(n, 4);
        int64_t *f = bk_alloc(n, 8);
        bk_fill(c, x, n, -2, 3);
        for (uint32_t a = 0; a < s.rank; a++) {
            bitnet_shape sr, sf;
            char what[96], t[64];
            snprintf(what, sizeof what, "%s axis=%u", shape_text(&s, t, sizeof t), a);
            memset(&sr, 0, sizeof sr);
            memset(&sf, 0, sizeof sf);
            bitnet_status s1 = bitnet_reduce_ref(BITNET_RED_ARGMAX, x, &s, 1u << a, r, &sr);
            bitnet_status s2 = bitnet_reduce_argmax(c->be, x, &s, (int)a, f, &sf);
            if (bk_status(c, s1, s2, what)) continue;
            uint64_t ny = count(&sr), bad = 0;
            for (uint64_t j = 0; j < ny; j++) bad += (double)f[j] != (double)r[j];
            if (sr.rank != sf.rank || memcmp(sr.dims, sf.dims, sizeof sr.dims) != 0) bad += 1;
            bk_add(c, (double)bad, what);
        }
        free(x), free(r), free(f);
    }
    bk_end(c);
}

/* ---- norms ------------------------------------------------------------------------ */

static void t_norm(bk_ctx *c, int rms)
{
    bk_begin(c, rms ? "rmsnorm" : "layernorm", BK_ULP, 4);
    for (size_t i = 0; i < c->cls->nmat + c->cls->nvec; i++) {
        uint64_t rows = i < c->cls->nmat ? c->cls->mat[i].m : 1;
        uint64_t cols = i < c->cls->nmat ? c->cls->mat[i].k : c->cls->vec[i - c->cls->nmat];
        uint64_t n = rows * cols;
        float *x = bk_alloc(n, 4), *w = bk_alloc(cols, 4), *b = bk_alloc(cols, 4), *r = bk_alloc(n, 4), *f = bk_alloc(n, 4);
        bk_fill(c, x, n, -2, 3); /* a mean away from zero */
        bk_fill(c, w, cols, 0.5f, 1.5f);
        bk_fill(c, b, cols, -1, 1);
        for (int affine = 0; affine < 2; affine++) {
            char what[96];
            snprintf(what, sizeof what, "%llux%llu%s", (unsigned long long)rows, (unsigned long long)cols,
                     affine ? " +weight+bias" : "");
            bk_poison(r, n * 4), bk_poison(f, n * 4);
            bitnet_status s1, s2;
            if (rms) {
                s1 = bitnet_rmsnorm_ref(x, rows, cols, affine ? w : NULL, 1e-5f, r);
                s2 = bitnet_rmsnorm(c->be, x, rows, cols, affine ? w : NULL, 1e-5f, f);
            } else {
                s1 = bitnet_layernorm_ref(x, rows, cols, affine ? w : NULL, affine ? b : NULL, 1e-5f, r);
                s2 = bitnet_layernorm(c->be, x, rows, cols, affine ? w : NULL, affine ? b : NULL, 1e-5f, f);
            }
            if (!bk_status(c, s1, s2, what)) bk_add(c, bk_ulps(f, r, n), what);
        }
        free(x), free(w), free(b), free(r), free(f);
    }
    bk_end(c);
}

/* ---- permute, scale ------------------------------------------------------------------ */

static void t_permute(bk_ctx *c)
{
    static const uint32_t p2[][3] = {{1, 0, 0}, {0, 1, 0}};
    static const uint32_t p3[][3] = {{2, 0, 1}, {1, 2, 0}, {0, 2, 1}};
    bk_begin(c, "permute", BK_ULP, 0);
    shape_set ss;
    shapes_of(c, &ss, 1);
    for (size_t i = 0; i < ss.n; i++) {
        bitnet_shape s = ss.s[i];
        uint64_t n = count(&s);
        size_t np = s.rank == 3 ? 3 : s.rank == 2 ? 2 : 1;
        float *x = bk_alloc(n, 4), *r = bk_alloc(n, 4), *f = bk_alloc(n, 4);
        bk_fill(c, x, n, -3, 3);
        for (size_t p = 0; p < np; p++) {
            const uint32_t *perm = s.rank == 3 ? p3[p] : p2[s.rank == 2 ? p : 1];
            char what[96], t[64];
            snprintf(what, sizeof what, "%s perm=%u,%u,%u", shape_text(&s, t, sizeof t), perm[0], perm[1], perm[2]);
            bk_poison(r, n * 4), bk_poison(f, n * 4);
            bitnet_status s1 = bitnet_permute_ref(x, &s, perm, r);
            bitnet_status s2 = bitnet_permute(c->be, x, &s, perm, f);
            if (!bk_status(c, s1, s2, what)) bk_add(c, bk_ulps(f, r, n), what);
        }
        free(x), free(r), free(f);
    }
    bk_end(c);
}

static bitnet_status scale_call(bitnet_backend *be, int op, const float *x, uint64_t n, float *y)
{
    (void)op;
    return be ? bitnet_scale(be, x, n, -1.37f, y) : bitnet_scale_ref(x, n, -1.37f, y);
}

static void t_scale(bk_ctx *c) { t_elementwise(c, "scale", 0, -3, 3, scale_call, 0); }

void bk_run_ops(bk_ctx *c, int level)
{
    (void)level;
    for (int op = 0; op < BITNET_BIN_COUNT; op++) t_binary(c, (bitnet_binary_op)op);
    for (int op = 0; op < BITNET_UN_COUNT; op++) t_unary(c, (bitnet_unary_op)op);
    t_softmax(c, 0);
    t_softmax(c, 1);
    for (int op = 0; op < BITNET_RED_COUNT; op++) t_reduce(c, (bitnet_reduce_op)op);
    t_argmax_i64(c);
    t_norm(c, 0);
    t_norm(c, 1);
    t_permute(c);
    t_scale(c);
}
