/*
 * bitnet-matmul - one linear layer: y = x W^T (+bias, act).  Ternary
 * weights (t2/t3) run BitLinear (int8 activations, exact integer sums);
 * float weights run the float product.  Inputs and outputs are files or
 * pipes, so layers chain:
 *   bitnet-matmul -w m.bnt:l0.weight -x in.npy --act relu -o - |
 *   bitnet-matmul -w m.bnt:l1.weight -x - -o out.npy
 */
#include "common.h"

#include <stdlib.h>
#include <string.h>

static const char purpose[] =
    "Applies one linear layer y = x W^T (+bias, activation) on the chosen device.\n"
    "Ternary weights (t2/t3 .bnt tensors) run BitLinear; float weights the float product.\n"
    "INPUT is float (f32/f16/bf16/f64) or int8 with row scales (bitnet-quantize --activations);\n"
    "leading axes of INPUT are tokens and stay in the output shape.";

/* Converts a float tensor to f32 in place. */
static int to_f32(const char *what, bitnet_tensor *t)
{
    if (t->info.dtype == BITNET_F32) return EXIT_OK;
    if (!bitnet_dtype_is_float(t->info.dtype)) {
        msg_err("%s: dtype %s is not a float type", what, bitnet_dtype_name(t->info.dtype));
        return EXIT_FAIL;
    }
    return tool_cast_f32(what, t);
}

/* The weights as [out x in]: a T2 matrix (t3 is repacked) or f32. */
typedef struct {
    bitnet_tensor t;
    int ternary;
    uint8_t *t2;          /* owned when repacked from t3 */
    float unit_scale;     /* d = 1 for ternary tensors stored without scales */
    bitnet_ternary_matrix m;
} weights;

static int load_weights(const char *spec, weights *w)
{
    char shp[256];
    int rc = tool_load_tensor(spec, &w->t);
    if (rc) return rc;
    const bitnet_tensor_info *info = &w->t.info;
    if (info->rank != 2) {
        msg_err("%s: weights must be a matrix [out, in], not of shape %s", spec, bitnet_shape_str(info, shp, sizeof shp));
        return EXIT_FAIL;
    }
    const uint64_t out = info->dims[0], in = info->dims[1];
    if (bitnet_dtype_is_ternary(info->dtype)) {
        w->ternary = 1;
        const uint8_t *codes = w->t.data;
        if (info->dtype == BITNET_T3) {
            uint64_t n;
            if (__builtin_mul_overflow(out, (uint64_t)bitnet_t2_row_bytes(in), &n) || n > SIZE_MAX)
                return tool_fail(BITNET_E_OVERFLOW, "%s: repacking t3", spec);
            if (!(w->t2 = malloc(n ? (size_t)n : 1))) return tool_fail(BITNET_E_NOMEM, "%s: repacking t3", spec);
            bitnet_status st = bitnet_t3_to_t2(w->t.data, out, in, w->t2);
            if (st) return tool_fail(st, "%s: repacking t3 to t2", spec);
            codes = w->t2;
        }
        w->m.t2 = codes;
        w->m.out = out;
        w->m.in = in;
        if (info->scale_kind == BITNET_SCALE_NONE || !w->t.scales) {
            msg_warn("%s: ternary weights without scales: using d = 1", spec);
            w->unit_scale = 1.0f;
            w->m.kind = BITNET_SCALE_TENSOR;
            w->m.d = &w->unit_scale;
        } else {
            w->m.kind = info->scale_kind;
            w->m.group = info->group;
            w->m.d = w->t.scales;
        }
        return EXIT_OK;
    }
    if (bitnet_dtype_is_float(info->dtype)) return to_f32(spec, &w->t);
    msg_err("%s: weights of dtype %s: need t2/t3 (ternary) or a float type", spec, bitnet_dtype_name(info->dtype));
    return EXIT_FAIL;
}

/* The input as tokens x in: f32, or int8 codes with one scale s per token. */
typedef struct {
    bitnet_tensor t;
    uint64_t tokens, in;
    int quantized;
} input;

static int load_input(const char *spec, input *x)
{
    char shp[256];
    int rc = tool_load_tensor(spec, &x->t);
    if (rc) return rc;
    const bitnet_tensor_info *info = &x->t.info;
    if (info->rank == 0) {
        msg_err("%s: input is a scalar; need [..., in]", spec);
        return EXIT_FAIL;
    }
    bitnet_tensor_rows_cols(info, &x->tokens, &x->in);
    if (info->dtype == BITNET_I8) {
        if (info->scale_kind != BITNET_SCALE_ROW || !x->t.scales) {
            msg_err("%s: int8 input of shape %s needs one scale per row (write it with bitnet-quantize --activations "
                    "to a .bnt file)", spec, bitnet_shape_str(info, shp, sizeof shp));
            return EXIT_FAIL;
        }
        x->quantized = 1;
        return EXIT_OK;
    }
    if (bitnet_dtype_is_float(info->dtype)) return to_f32(spec, &x->t);
    msg_err("%s: input of dtype %s: need a float type or int8 with row scales", spec, bitnet_dtype_name(info->dtype));
    return EXIT_FAIL;
}

/* The output; only .bnt holds the row scales of --quantize-output. */
static int write_out(const char *path, const char *to, int force, const bitnet_tensor *y, int argc, char **argv)
{
    if (y->info.scale_kind != BITNET_SCALE_NONE && tool_out_format(path, to) != BITNET_FMT_BNT) {
        msg_err("%s: --quantize-output writes row scales, which only .bnt can hold (use a .bnt name or --to bnt)", path);
        return EXIT_USAGE;
    }
    return tool_write_tensor(path, to, force, y, argc, argv);
}

int main(int argc, char **argv)
{
    tool_init("bitnet-matmul");
    tool_std_args std = tool_std_args_new();
    tool_dev_args dev = tool_dev_args_new();
    struct arg_str *wspec = arg_str1("w", "weights", "FILE[:TENSOR]", "weights [out, in]: t2/t3 (BitLinear) or float");
    struct arg_str *xspec = arg_str1("x", "input", "FILE[:TENSOR]", "input [..., in] ('-' is standard input)");
    struct arg_str *output = arg_str1("o", "output", "FILE", "output [..., out] ('-' is standard output)");
    struct arg_str *bias = arg_str0(NULL, "bias", "FILE[:TENSOR]", "bias [out], added before the activation");
    struct arg_str *act = arg_str0(NULL, "act", "NAME", "none, relu, gelu, gelu-tanh, sigmoid, silu (default none)");
    struct arg_lit *qout = arg_lit0(NULL, "quantize-output", "write int8 rows with their scales (absmax; .bnt only)");
    struct arg_str *to = arg_str0(NULL, "to", "npy|bnt", "output format (default: by extension; '-' is bnt)");
    struct arg_end *end = arg_end(20);
    void *table[] = {wspec, xspec, output, bias, act, qout, to, dev.device, dev.threads, dev.stats,
                     std.help, std.version, std.quiet, std.verbose, std.force, end};
    bitnet_backend *be = NULL;
    weights w;
    input x;
    bitnet_tensor b = {0}, y = {0};
    memset(&w, 0, sizeof w);
    memset(&x, 0, sizeof x);
    char s1[256], s2[256];
    int done, rc = tool_parse(argc, argv, table, &std, purpose, &done);
    if (rc || done) goto out;
    rc = EXIT_USAGE;
    bitnet_act a = BITNET_ACT_NONE;
    if (act->count && bitnet_act_parse(act->sval[0], &a) != BITNET_OK) {
        msg_err("--act: unknown activation '%s' (none, relu, gelu, gelu-tanh, sigmoid, silu)", act->sval[0]);
        goto out;
    }
    if (to->count && strcmp(to->sval[0], "npy") != 0 && strcmp(to->sval[0], "bnt") != 0) {
        msg_err("--to: unknown format '%s' (npy, bnt)", to->sval[0]);
        goto out;
    }
    const char *wfile_tensor;
    char *wfile = tool_split_spec(wspec->sval[0], &wfile_tensor);
    const int w_stdin = wfile && strcmp(wfile, "-") == 0;
    free(wfile);
    if (w_stdin && strcmp(xspec->sval[0], "-") == 0) {
        msg_err("standard input can be read only once (weights and input are both '-')");
        goto out;
    }
    if ((rc = tool_out_check(output->sval[0]))) goto out;
    if ((rc = load_weights(wspec->sval[0], &w))) goto out;
    if ((rc = load_input(xspec->sval[0], &x))) goto out;
    const uint64_t out_dim = w.t.info.dims[0], in_dim = w.t.info.dims[1];
    if (x.in != in_dim) {
        msg_err("input %s of shape %s does not fit weights %s of shape %s: its last axis must be %llu",
                xspec->sval[0], bitnet_shape_str(&x.t.info, s1, sizeof s1), wspec->sval[0],
                bitnet_shape_str(&w.t.info, s2, sizeof s2), (unsigned long long)in_dim);
        rc = EXIT_FAIL;
        goto out;
    }
    if (bias->count) {
        uint64_t n;
        if ((rc = tool_load_tensor(bias->sval[0], &b)) || (rc = to_f32(bias->sval[0], &b))) goto out;
        if (bitnet_tensor_elements(&b.info, &n) || n != out_dim || b.info.rank > 1) {
            msg_err("bias %s of shape %s does not fit weights of shape %s: need [%llu]", bias->sval[0],
                    bitnet_shape_str(&b.info, s1, sizeof s1), bitnet_shape_str(&w.t.info, s2, sizeof s2),
                    (unsigned long long)out_dim);
            rc = EXIT_FAIL;
            goto out;
        }
    }
    /* output: the input's leading axes, then out */
    snprintf(y.info.name, sizeof y.info.name, "%s", "y");
    y.info.rank = x.t.info.rank;
    memcpy(y.info.dims, x.t.info.dims, sizeof y.info.dims);
    y.info.dims[y.info.rank - 1] = out_dim;
    y.info.dtype = qout->count ? BITNET_I8 : BITNET_F32;
    y.info.scale_kind = qout->count ? BITNET_SCALE_ROW : BITNET_SCALE_NONE;
    bitnet_status st = bitnet_tensor_alloc(&y);
    if (st) { rc = tool_fail(st, "output of shape %s", bitnet_shape_str(&y.info, s1, sizeof s1)); goto out; }
    if ((rc = tool_backend(&dev, &be))) goto out;

    if (w.ternary) {
        bitnet_bitlinear_io io = {.tokens = x.tokens, .bias = b.data, .act = a};
        if (x.quantized) { io.xq = x.t.data; io.xs = x.t.scales; } else io.x = x.t.data;
        if (qout->count) { io.yq = y.data; io.ys = y.scales; } else io.y = y.data;
        st = bitnet_bitlinear(be, &w.m, &io);
        if (st) { rc = tool_fail(st, "bitlinear %s", wspec->sval[0]); goto out; }
    } else {
        float *xf = x.t.data, *yf = y.data, *deq = NULL;
        if (x.quantized) { /* x = q / s, then the float product */
            deq = malloc((size_t)(x.tokens * x.in) * sizeof(float));
            if (!deq) { rc = tool_fail(BITNET_E_NOMEM, "input"); goto out; }
            st = bitnet_dequantize_acts(be, x.t.data, x.tokens, x.in, x.t.scales, deq);
            xf = deq;
        }
        if (!st && qout->count && !(yf = malloc((size_t)(x.tokens * out_dim) * sizeof(float)))) st = BITNET_E_NOMEM;
        if (!st) st = bitnet_matmul_f32(be, xf, x.tokens, x.in, w.t.data, out_dim, b.data, a, yf);
        if (!st && qout->count) st = bitnet_quantize_acts(be, yf, x.tokens, out_dim, y.data, y.scales);
        free(deq);
        if (yf != y.data) free(yf);
        if (st) { rc = tool_fail(st, "matmul %s", wspec->sval[0]); goto out; }
    }
    tool_backend_stats(&dev, be);
    rc = write_out(output->sval[0], to->count ? to->sval[0] : NULL, std.force->count > 0, &y, argc, argv);
out:
    bitnet_tensor_release(&w.t);
    free(w.t2);
    bitnet_tensor_release(&x.t);
    bitnet_tensor_release(&b);
    bitnet_tensor_release(&y);
    bitnet_backend_free(be);
    arg_freetable(table, sizeof table / sizeof table[0]);
    return rc;
}
