/*
 * bk_quant.c - --backends checks of quantization, dequantization, packing,
 * BitLinear and the float matrix product.  Codes, scales and integer results
 * must be bit-identical to the _ref; BitLinear without a transcendental
 * activation too; with one, 4 ulps; the float product NMSE <= 1e-9.
 */
#include "bk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* T2 and T3 packers written from the layout in bnt(5), independent of the
 * library, so that the library's packers have something to be checked against. */
static void spec_t2_pack(const int8_t *q, uint64_t rows, uint64_t cols, uint8_t *t2)
{
    uint64_t rb = bitnet_t2_row_bytes(cols);
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t b = 0; b < rb; b++) {
            uint8_t byte = 0;
            uint64_t blk = b / 32, j = b % 32;
            for (unsigned k = 0; k < 4; k++) {
                uint64_t col = 128 * blk + 32 * k + j;
                unsigned code = col < cols ? (unsigned)(q[r * cols + col] + 1) : 1;
                byte |= (uint8_t)(code << (2 * k));
            }
            t2[r * rb + b] = byte;
        }
}

static void spec_t3_pack(const int8_t *q, uint64_t rows, uint64_t cols, uint8_t *t3)
{
    uint64_t rb = bitnet_t3_row_bytes(cols);
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t i = 0; i < rb; i++) {
            unsigned v = 0, p = 1;
            for (unsigned m = 0; m < 5; m++, p *= 3) {
                uint64_t col = 5 * i + m;
                v += (col < cols ? (unsigned)(q[r * cols + col] + 1) : 1) * p;
            }
            t3[r * rb + i] = (uint8_t)v;
        }
}

static uint64_t n_scales(bitnet_scale_kind kind, uint32_t group, uint64_t rows, uint64_t cols)
{
    return kind == BITNET_SCALE_TENSOR ? 1 : kind == BITNET_SCALE_ROW ? rows : rows * ((cols + group - 1) / group);
}

static const char *kind_name(bitnet_scale_kind k)
{
    return k == BITNET_SCALE_TENSOR ? "tensor" : k == BITNET_SCALE_ROW ? "row" : "group";
}

static const uint32_t groups_group[] = {32, 128}, groups_none[] = {0};

static void case_name(char *buf, size_t size, uint64_t rows, uint64_t cols, uint32_t group)
{
    if (group) snprintf(buf, size, "%llux%llu group=%u", (unsigned long long)rows, (unsigned long long)cols, group);
    else snprintf(buf, size, "%llux%llu", (unsigned long long)rows, (unsigned long long)cols);
}

/* Matrix cases of a class: its matrices (m x k), then its vectors as one row. */
static size_t n_cases(const bk_ctx *c) { return c->cls->nmat + c->cls->nvec; }
static bk_mat case_at(const bk_ctx *c, size_t i)
{
    if (i < c->cls->nmat) return c->cls->mat[i];
    bk_mat v = {1, c->cls->vec[i - c->cls->nmat], 1};
    return v;
}

/* Rounding ties: |w| alternates 0.5 and 1.5 with random signs, so every
 * tensor, row and (even-sized) group has mean |w| = 1 exactly: d = s = 1 and
 * w*s = +-0.5, which rint() rounds to 0 (half to even) and round() to +-1. */
static void weights_ties(bk_ctx *c, bitnet_scale_kind kind, uint32_t group)
{
    const uint64_t rows = 3, cols = 256, n = rows * cols, nb = rows * bitnet_t2_row_bytes(cols);
    uint64_t ns = n_scales(kind, group, rows, cols);
    float *w = bk_alloc(n, 4), *dr = bk_alloc(ns, 4), *df = bk_alloc(ns, 4);
    uint8_t *tr = bk_alloc(nb, 1), *tf = bk_alloc(nb, 1);
    char what[128];
    case_name(what, sizeof what, rows, cols, group);
    snprintf(what + strlen(what), sizeof what - strlen(what), " rounding ties");
    for (uint64_t i = 0; i < n; i++) w[i] = (i & 1 ? 1.5f : 0.5f) * (bk_rand(c) & 1 ? -1.0f : 1.0f);
    bk_poison(tr, nb), bk_poison(tf, nb), bk_poison(dr, ns * 4), bk_poison(df, ns * 4);
    bitnet_status a = bitnet_quantize_weights_ref(w, rows, cols, kind, group, tr, dr);
    bitnet_status b = bitnet_quantize_weights(c->be, w, rows, cols, kind, group, tf, df);
    if (!bk_status(c, a, b, what)) bk_add(c, (double)(bk_diff_bytes(tr, tf, nb) + bk_diff_f32(dr, df, ns)), what);
    free(w), free(dr), free(df), free(tr), free(tf);
}

/* A NaN input: the reference and the fast path must both refuse it with
 * BITNET_E_NUMERIC. */
static void weights_nan(bk_ctx *c, bitnet_scale_kind kind, uint32_t group)
{
    const uint64_t rows = 5, cols = 300, n = rows * cols;
    float *w = bk_alloc(n, 4), *d = bk_alloc(n_scales(kind, group, rows, cols), 4);
    uint8_t *t2 = bk_alloc(rows * bitnet_t2_row_bytes(cols), 1);
    char what[128];
    case_name(what, sizeof what, rows, cols, group);
    snprintf(what + strlen(what), sizeof what - strlen(what), " NaN input");
    bk_fill(c, w, n, -1, 1);
    w[bk_rand(c) % n] = NAN;
    bitnet_status a = bitnet_quantize_weights_ref(w, rows, cols, kind, group, t2, d);
    bitnet_status b = bitnet_quantize_weights(c->be, w, rows, cols, kind, group, t2, d);
    bk_same_error(c, BITNET_E_NUMERIC, a, b, what);
    free(w), free(d), free(t2);
}

/* ---- quantize / dequantize ------------------------------------------------ */

static void t_quantize_weights(bk_ctx *c, bitnet_scale_kind kind)
{
    static char names[4][40];
    snprintf(names[kind], sizeof names[kind], "quantize_weights/%s", kind_name(kind));
    bk_begin(c, names[kind], BK_MISMATCH, 0);
    const uint32_t *gl = kind == BITNET_SCALE_GROUP ? groups_group : groups_none;
    size_t ng = kind == BITNET_SCALE_GROUP ? 2 : 1;
    for (size_t i = 0; i < n_cases(c); i++)
        for (size_t g = 0; g < ng; g++) {
            bk_mat s = case_at(c, i);
            uint64_t rows = s.m, cols = s.k, nb = rows * bitnet_t2_row_bytes(cols), ns = n_scales(kind, gl[g], rows, cols);
            float *w = bk_alloc(rows * cols, 4), *dr = bk_alloc(ns, 4), *df = bk_alloc(ns, 4);
            uint8_t *tr = bk_alloc(nb, 1), *tf = bk_alloc(nb, 1);
            char what[128];
            case_name(what, sizeof what, rows, cols, gl[g]);
            bk_fill(c, w, rows * cols, -1, 1);
            bk_poison(tr, nb);
            bk_poison(tf, nb);
            bk_poison(dr, ns * 4);
            bk_poison(df, ns * 4);
            bitnet_status a = bitnet_quantize_weights_ref(w, rows, cols, kind, gl[g], tr, dr);
            bitnet_status b = bitnet_quantize_weights(c->be, w, rows, cols, kind, gl[g], tf, df);
            if (!bk_status(c, a, b, what)) bk_add(c, (double)(bk_diff_bytes(tr, tf, nb) + bk_diff_f32(dr, df, ns)), what);
            free(w), free(dr), free(df), free(tr), free(tf);
        }
    for (size_t g = 0; g < ng; g++) {
        weights_ties(c, kind, gl[g]);
        weights_nan(c, kind, gl[g]);
    }
    bk_end(c);
}

/* Rounding ties and refusal of Inf: rows whose largest |x| is 127 have
 * s = 1, so x = k + 0.5 is a tie (rint: to even; round: away from zero);
 * a row holding Inf must give BITNET_E_NUMERIC on both paths. */
static void acts_ties(bk_ctx *c)
{
    const uint64_t rows = 4, cols = 200, n = rows * cols;
    float *x = bk_alloc(n, 4), *sr = bk_alloc(rows, 4), *sf = bk_alloc(rows, 4);
    int8_t *qr = bk_alloc(n, 1), *qf = bk_alloc(n, 1);
    for (uint64_t i = 0; i < n; i++)
        x[i] = (float)((int)(bk_rand(c) % 253) - 126) + ((bk_rand(c) & 1) ? 0.5f : -0.5f);
    for (uint64_t r = 0; r < rows; r++) x[r * cols + bk_rand(c) % cols] = r & 1 ? -127.0f : 127.0f;
    bk_poison(qr, n), bk_poison(qf, n), bk_poison(sr, rows * 4), bk_poison(sf, rows * 4);
    bitnet_status a = bitnet_quantize_acts_ref(x, rows, cols, qr, sr);
    bitnet_status b = bitnet_quantize_acts(c->be, x, rows, cols, qf, sf);
    if (!bk_status(c, a, b, "4x200 rounding ties"))
        bk_add(c, (double)(bk_diff_bytes(qr, qf, n) + bk_diff_f32(sr, sf, rows)), "4x200 rounding ties");
    x[bk_rand(c) % n] = -INFINITY;
    a = bitnet_quantize_acts_ref(x, rows, cols, qr, sr);
    b = bitnet_quantize_acts(c->be, x, rows, cols, qf, sf);
    bk_same_error(c, BITNET_E_NUMERIC, a, b, "4x200 Inf input");
    free(x), free(sr), free(sf), free(qr), free(qf);
}

static void t_quantize_acts(bk_ctx *c)
{
    bk_begin(c, "quantize_acts", BK_MISMATCH, 0);
    for (size_t i = 0; i < n_cases(c); i++) {
        bk_mat s = case_at(c, i);
        uint64_t n = s.m * s.k;
        float *x = bk_alloc(n, 4), *sr = bk_alloc(s.m, 4), *sf = bk_alloc(s.m, 4);
        int8_t *qr = bk_alloc(n, 1), *qf = bk_alloc(n, 1);
        char what[96];
        snprintf(what, sizeof what, "%llux%llu", (unsigned long long)s.m, (unsigned long long)s.k);
        bk_fill(c, x, n, -4, 4);
        bk_poison(qr, n), bk_poison(qf, n), bk_poison(sr, s.m * 4), bk_poison(sf, s.m * 4);
        bitnet_status a = bitnet_quantize_acts_ref(x, s.m, s.k, qr, sr);
        bitnet_status b = bitnet_quantize_acts(c->be, x, s.m, s.k, qf, sf);
        if (!bk_status(c, a, b, what)) bk_add(c, (double)(bk_diff_bytes(qr, qf, n) + bk_diff_f32(sr, sf, s.m)), what);
        free(x), free(sr), free(sf), free(qr), free(qf);
    }
    acts_ties(c);
    bk_end(c);
}

static void t_dequantize_weights(bk_ctx *c, bitnet_scale_kind kind)
{
    static char names[4][40];
    snprintf(names[kind], sizeof names[kind], "dequantize_weights/%s", kind_name(kind));
    bk_begin(c, names[kind], BK_ULP, 0);
    const uint32_t *gl = kind == BITNET_SCALE_GROUP ? groups_group : groups_none;
    size_t ng = kind == BITNET_SCALE_GROUP ? 2 : 1;
    for (size_t i = 0; i < n_cases(c); i++)
        for (size_t g = 0; g < ng; g++) {
            bk_mat s = case_at(c, i);
            uint64_t rows = s.m, cols = s.k, n = rows * cols, ns = n_scales(kind, gl[g], rows, cols);
            int8_t *q = bk_alloc(n, 1);
            uint8_t *t2 = bk_alloc(rows * bitnet_t2_row_bytes(cols), 1);
            float *d = bk_alloc(ns, 4), *yr = bk_alloc(n, 4), *yf = bk_alloc(n, 4);
            char what[128];
            case_name(what, sizeof what, rows, cols, gl[g]);
            bk_codes(c, q, n);
            spec_t2_pack(q, rows, cols, t2);
            bk_fill(c, d, ns, 0.01f, 0.5f);
            bk_poison(yr, n * 4), bk_poison(yf, n * 4);
            bitnet_status a = bitnet_dequantize_weights_ref(t2, rows, cols, kind, gl[g], d, yr);
            bitnet_status b = bitnet_dequantize_weights(c->be, t2, rows, cols, kind, gl[g], d, yf);
            if (!bk_status(c, a, b, what)) bk_add(c, bk_ulps(yf, yr, n), what);
            free(q), free(t2), free(d), free(yr), free(yf);
        }
    bk_end(c);
}

static void t_dequantize_acts(bk_ctx *c)
{
    bk_begin(c, "dequantize_acts", BK_ULP, 0);
    for (size_t i = 0; i < n_cases(c); i++) {
        bk_mat s = case_at(c, i);
        uint64_t n = s.m * s.k;
        int8_t *q = bk_alloc(n, 1);
        float *sc = bk_alloc(s.m, 4), *yr = bk_alloc(n, 4), *yf = bk_alloc(n, 4);
        char what[96];
        snprintf(what, sizeof what, "%llux%llu", (unsigned long long)s.m, (unsigned long long)s.k);
        for (uint64_t j = 0; j < n; j++) q[j] = (int8_t)((int)(bk_rand(c) & 255) - 128);
        q[0] = q[0] ? q[0] : 77;
        bk_fill(c, sc, s.m, 1, 300);
        bk_poison(yr, n * 4), bk_poison(yf, n * 4);
        bitnet_status a = bitnet_dequantize_acts_ref(q, s.m, s.k, sc, yr);
        bitnet_status b = bitnet_dequantize_acts(c->be, q, s.m, s.k, sc, yf);
        if (!bk_status(c, a, b, what)) bk_add(c, bk_ulps(yf, yr, n), what);
        free(q), free(sc), free(yr), free(yf);
    }
    bk_end(c);
}

/* ---- packing (host) ------------------------------------------------------- */

void bk_run_pack(bk_ctx *c)
{
    static const char *ops[] = {"t2_pack", "t3_pack", "t3_to_t2", "t2_to_t3"};
    for (int op = 0; op < 4; op++) {
        bk_begin(c, ops[op], BK_MISMATCH, 0);
        for (size_t i = 0; i < n_cases(c); i++) {
            bk_mat s = case_at(c, i);
            uint64_t rows = s.m, cols = s.k, n = rows * cols;
            uint64_t n2 = rows * bitnet_t2_row_bytes(cols), n3 = rows * bitnet_t3_row_bytes(cols);
            int8_t *q = bk_alloc(n, 1), *back = bk_alloc(n, 1);
            uint8_t *e2 = bk_alloc(n2, 1), *e3 = bk_alloc(n3, 1), *g2 = bk_alloc(n2, 1), *g3 = bk_alloc(n3, 1);
            char what[96];
            snprintf(what, sizeof what, "%llux%llu", (unsigned long long)rows, (unsigned long long)cols);
            bk_codes(c, q, n);
            spec_t2_pack(q, rows, cols, e2);
            spec_t3_pack(q, rows, cols, e3);
            bk_poison(g2, n2), bk_poison(g3, n3), bk_poison(back, n);
            bitnet_status st = BITNET_OK, st2 = BITNET_OK;
            uint64_t err = 0;
            switch (op) {
            case 0: /* pack: the layout of bnt(5); unpack: the codes back */
                if (!(st = bitnet_t2_pack(q, rows, cols, g2)) && !(st2 = bitnet_t2_unpack(e2, rows, cols, back)))
                    err = bk_diff_bytes(g2, e2, n2) + bk_diff_bytes(back, q, n);
                break;
            case 1:
                if (!(st = bitnet_t3_pack(q, rows, cols, g3)) && !(st2 = bitnet_t3_unpack(e3, rows, cols, back)))
                    err = bk_diff_bytes(g3, e3, n3) + bk_diff_bytes(back, q, n);
                break;
            case 2:
                if (!(st = bitnet_t3_to_t2(e3, rows, cols, g2))) err = bk_diff_bytes(g2, e2, n2);
                break;
            default:
                if (!(st = bitnet_t2_to_t3(e2, rows, cols, g3))) err = bk_diff_bytes(g3, e3, n3);
                break;
            }
            if (!bk_status(c, BITNET_OK, st ? st : st2, what)) bk_add(c, (double)err, what);
            free(q), free(back), free(e2), free(e3), free(g2), free(g3);
        }
        bk_end(c);
    }
}

/* ---- BitLinear -------------------------------------------------------------- */

typedef struct {
    const char *name;
    int prequant, bias, requant;
    bitnet_act act;
} bl_variant;

/* Exact: integer accumulation, then one division and the bias (and ReLU). */
static const bl_variant bl_exact[] = {
    {"", 0, 0, 0, BITNET_ACT_NONE},        {"+bias", 0, 1, 0, BITNET_ACT_NONE},
    {"+relu", 0, 0, 0, BITNET_ACT_RELU},   {"+bias+relu", 0, 1, 0, BITNET_ACT_RELU},
    {"+prequant", 1, 0, 0, BITNET_ACT_NONE}, {"+prequant+bias+relu", 1, 1, 0, BITNET_ACT_RELU},
};
/* Transcendental activations: 4 ulps. */
static const bl_variant bl_act[] = {
    {"+gelu", 0, 0, 0, BITNET_ACT_GELU},       {"+bias+gelu_tanh", 0, 1, 0, BITNET_ACT_GELU_TANH},
    {"+sigmoid", 0, 0, 0, BITNET_ACT_SIGMOID}, {"+prequant+bias+silu", 1, 1, 0, BITNET_ACT_SILU},
};
/* Re-quantized output: codes and scales exact. */
static const bl_variant bl_requant[] = {
    {"+requant", 0, 0, 1, BITNET_ACT_NONE},
    {"+bias+relu+requant", 0, 1, 1, BITNET_ACT_RELU},
    {"+prequant+requant", 1, 0, 1, BITNET_ACT_NONE},
};

typedef struct {
    bitnet_ternary_matrix w;
    uint64_t tokens;
    const float *x, *xs, *bias;
    const int8_t *xq;
} bl_inputs;

static void bl_case(bk_ctx *c, const bl_inputs *in, const bl_variant *v, const char *shape)
{
    uint64_t ny = in->tokens * in->w.out;
    float *yr = bk_alloc(ny, 4), *yf = bk_alloc(ny, 4), *sr = bk_alloc(in->tokens, 4), *sf = bk_alloc(in->tokens, 4);
    int8_t *qr = bk_alloc(ny, 1), *qf = bk_alloc(ny, 1);
    bitnet_bitlinear_io ior, iof;
    char what[192];
    snprintf(what, sizeof what, "%s%s", shape, v->name);
    memset(&ior, 0, sizeof ior);
    ior.tokens = in->tokens;
    if (v->prequant) ior.xq = in->xq, ior.xs = in->xs;
    else ior.x = in->x;
    ior.bias = v->bias ? in->bias : NULL;
    ior.act = v->act;
    iof = ior;
    if (v->requant) ior.yq = qr, ior.ys = sr, iof.yq = qf, iof.ys = sf;
    else ior.y = yr, iof.y = yf;
    bk_poison(yr, ny * 4), bk_poison(yf, ny * 4), bk_poison(qr, ny), bk_poison(qf, ny);
    bk_poison(sr, in->tokens * 4), bk_poison(sf, in->tokens * 4);
    bitnet_status a = bitnet_bitlinear_ref(&in->w, &ior);
    bitnet_status b = bitnet_bitlinear(c->be, &in->w, &iof);
    if (!bk_status(c, a, b, what)) {
        if (v->requant) bk_add(c, (double)(bk_diff_bytes(qr, qf, ny) + bk_diff_f32(sr, sf, in->tokens)), what);
        else bk_add(c, bk_ulps(yf, yr, ny), what);
    }
    free(yr), free(yf), free(sr), free(sf), free(qr), free(qf);
}

static void t_bitlinear(bk_ctx *c, bitnet_scale_kind kind)
{
    static char names[4][3][48];
    static const char *suffix[3] = {"", "+act", "+requant"};
    const bl_variant *vl[3] = {bl_exact, bl_act, bl_requant};
    const size_t vn[3] = {sizeof bl_exact / sizeof bl_exact[0], sizeof bl_act / sizeof bl_act[0],
                          sizeof bl_requant / sizeof bl_requant[0]};
    const bk_metric metric[3] = {BK_ULP, BK_ULP, BK_MISMATCH};
    const double bound[3] = {0, 4, 0};
    const uint32_t *gl = kind == BITNET_SCALE_GROUP ? groups_group : groups_none;
    size_t ng = kind == BITNET_SCALE_GROUP ? 2 : 1;
    for (int line = 0; line < 3; line++) {
        snprintf(names[kind][line], sizeof names[kind][line], "bitlinear/%s%s", kind_name(kind), suffix[line]);
        bk_begin(c, names[kind][line], metric[line], bound[line]);
        for (size_t i = 0; i < c->cls->nmat; i++)
            for (size_t g = 0; g < ng; g++) {
                bk_mat s = c->cls->mat[i];
                uint64_t ns = n_scales(kind, gl[g], s.n, s.k);
                int8_t *q = bk_alloc(s.n * s.k, 1), *xq = bk_alloc(s.m * s.k, 1);
                uint8_t *t2 = bk_alloc(s.n * bitnet_t2_row_bytes(s.k), 1);
                float *d = bk_alloc(ns, 4), *x = bk_alloc(s.m * s.k, 4), *xs = bk_alloc(s.m, 4), *bias = bk_alloc(s.n, 4);
                bk_codes(c, q, s.n * s.k);
                spec_t2_pack(q, s.n, s.k, t2);
                bk_fill(c, d, ns, 0.01f, 0.1f);
                bk_fill(c, x, s.m * s.k, -2, 2);
                for (uint64_t j = 0; j < s.m * s.k; j++) xq[j] = (int8_t)((int)(bk_rand(c) & 255) - 128);
                bk_fill(c, xs, s.m, 10, 100);
                bk_fill(c, bias, s.n, -1, 1);
                bl_inputs in = {{t2, s.n, s.k, kind, gl[g], d}, s.m, x, xs, bias, xq};
                char shape[96], gtext[32] = "";
                if (gl[g]) snprintf(gtext, sizeof gtext, " group=%u", gl[g]);
                snprintf(shape, sizeof shape, "tokens=%llu in=%llu out=%llu%s", (unsigned long long)s.m,
                         (unsigned long long)s.k, (unsigned long long)s.n, gtext);
                for (size_t v = 0; v < vn[line]; v++) bl_case(c, &in, &vl[line][v], shape);
                free(q), free(xq), free(t2), free(d), free(x), free(xs), free(bias);
            }
        bk_end(c);
    }
}

/* ---- float matrix product --------------------------------------------------- */

static void t_matmul(bk_ctx *c)
{
    static const struct { const char *name; int bias; bitnet_act act; } var[] = {
        {"", 0, BITNET_ACT_NONE}, {"+bias+relu", 1, BITNET_ACT_RELU}, {"+gelu", 0, BITNET_ACT_GELU},
        {"+bias+silu", 1, BITNET_ACT_SILU},
    };
    bk_begin(c, "matmul_f32", BK_NMSE, 1e-9);
    for (size_t i = 0; i < c->cls->nmat; i++) {
        bk_mat s = c->cls->mat[i];
        float *x = bk_alloc(s.m * s.k, 4), *w = bk_alloc(s.n * s.k, 4), *bias = bk_alloc(s.n, 4);
        float *yr = bk_alloc(s.m * s.n, 4), *yf = bk_alloc(s.m * s.n, 4);
        double *rd = bk_alloc(s.m * s.n, 8);
        bk_fill(c, x, s.m * s.k, -1, 1);
        bk_fill(c, w, s.n * s.k, -1, 1);
        bk_fill(c, bias, s.n, -1, 1);
        for (size_t v = 0; v < sizeof var / sizeof var[0]; v++) {
            char what[128];
            snprintf(what, sizeof what, "tokens=%llu in=%llu out=%llu%s", (unsigned long long)s.m, (unsigned long long)s.k,
                     (unsigned long long)s.n, var[v].name);
            const float *b = var[v].bias ? bias : NULL;
            bk_poison(yr, s.m * s.n * 4), bk_poison(yf, s.m * s.n * 4);
            bitnet_status a = bitnet_matmul_f32_ref(x, s.m, s.k, w, s.n, b, var[v].act, yr);
            bitnet_status f = bitnet_matmul_f32(c->be, x, s.m, s.k, w, s.n, b, var[v].act, yf);
            if (bk_status(c, a, f, what)) continue;
            for (uint64_t j = 0; j < s.m * s.n; j++) rd[j] = yr[j];
            bk_add(c, bk_nmse(yf, rd, s.m * s.n), what);
        }
        free(x), free(w), free(bias), free(yr), free(yf), free(rd);
    }
    bk_end(c);
}

void bk_run_quant(bk_ctx *c, int level)
{
    (void)level;
    for (int k = BITNET_SCALE_TENSOR; k <= BITNET_SCALE_GROUP; k++) t_quantize_weights(c, (bitnet_scale_kind)k);
    t_quantize_acts(c);
    for (int k = BITNET_SCALE_TENSOR; k <= BITNET_SCALE_GROUP; k++) t_dequantize_weights(c, (bitnet_scale_kind)k);
    t_dequantize_acts(c);
    for (int k = BITNET_SCALE_TENSOR; k <= BITNET_SCALE_GROUP; k++) t_bitlinear(c, (bitnet_scale_kind)k);
    t_matmul(c);
}
