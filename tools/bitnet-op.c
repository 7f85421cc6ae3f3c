/*
 * bitnet-op - runs one tensor op (element-wise, softmax, reduction, norm,
 * permute, linear algebra: tools/bitnet-op/linalg.c) on tensors read from .npy/.bnt/.safetensors files or pipes and
 * writes the result as .npy or .bnt.  Thin: flags -> bitnet_* call -> output.
 */
#include "common.h"
#include "bitnet-op/linalg.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef enum { K_BINARY, K_UNARY, K_SOFTMAX, K_REDUCE, K_NORM, K_PERMUTE, K_LINALG } op_kind;

typedef struct {
    const char *name;
    op_kind kind;
    int arity; /* inputs */
    int code;  /* bitnet_binary_op / bitnet_unary_op / bitnet_reduce_op / log / rms / transpose */
    const char *opts, *what;
} op_def;

static const op_def ops[] = {
    {"add", K_BINARY, 2, BITNET_BIN_ADD, "", "a + b (NumPy broadcasting)"},
    {"sub", K_BINARY, 2, BITNET_BIN_SUB, "", "a - b"},
    {"mul", K_BINARY, 2, BITNET_BIN_MUL, "", "a * b"},
    {"div", K_BINARY, 2, BITNET_BIN_DIV, "", "a / b"},
    {"max", K_BINARY, 2, BITNET_BIN_MAX, "", "element-wise maximum, NaN propagates (one input: reduction)"},
    {"min", K_BINARY, 2, BITNET_BIN_MIN, "", "element-wise minimum, NaN propagates (one input: reduction)"},
    {"relu", K_UNARY, 1, BITNET_UN_RELU, "", "max(x, 0)"},
    {"gelu", K_UNARY, 1, BITNET_UN_GELU, "", "x * Phi(x) (erf form)"},
    {"gelu-tanh", K_UNARY, 1, BITNET_UN_GELU_TANH, "", "tanh approximation of gelu"},
    {"sigmoid", K_UNARY, 1, BITNET_UN_SIGMOID, "", "1 / (1 + exp(-x))"},
    {"silu", K_UNARY, 1, BITNET_UN_SILU, "", "x * sigmoid(x)"},
    {"tanh", K_UNARY, 1, BITNET_UN_TANH, "", "tanh(x)"},
    {"exp", K_UNARY, 1, BITNET_UN_EXP, "", "exp(x)"},
    {"neg", K_UNARY, 1, BITNET_UN_NEG, "", "-x"},
    {"abs", K_UNARY, 1, BITNET_UN_ABS, "", "|x|"},
    {"sqrt", K_UNARY, 1, BITNET_UN_SQRT, "", "sqrt(x)"},
    {"scale", K_UNARY, 1, BITNET_UN_SCALE, "--alpha X", "alpha * x"},
    {"softmax", K_SOFTMAX, 1, 0, "[--axis N]", "softmax along one axis (default -1)"},
    {"log-softmax", K_SOFTMAX, 1, 1, "[--axis N]", "log of softmax, computed directly"},
    {"sum", K_REDUCE, 1, BITNET_RED_SUM, "[--axis N[,N...]]", "sum over the axes (default all)"},
    {"mean", K_REDUCE, 1, BITNET_RED_MEAN, "[--axis N[,N...]]", "mean over the axes"},
    {"max", K_REDUCE, 1, BITNET_RED_MAX, "[--axis N[,N...]]", "maximum over the axes, NaN propagates"},
    {"min", K_REDUCE, 1, BITNET_RED_MIN, "[--axis N[,N...]]", "minimum over the axes, NaN propagates"},
    {"argmax", K_REDUCE, 1, BITNET_RED_ARGMAX, "[--axis N] [--index-type i64|i32]",
     "index of the first maximum (first NaN) along one axis (default -1)"},
    {"layernorm", K_NORM, 1, 0, "[--weight T] [--bias T] [--eps X]", "LayerNorm over the last axis"},
    {"rmsnorm", K_NORM, 1, 1, "[--weight T] [--eps X]", "RMSNorm over the last axis"},
    {"transpose", K_PERMUTE, 1, 1, "[--perm N,N...]", "permute axes (default: reverse them)"},
    {"permute", K_PERMUTE, 1, 0, "--perm N,N...", "y.shape[i] = x.shape[perm[i]]"},
    {"cholesky", K_LINALG, 1, 0, "", "L with A = L L^T, A symmetric positive definite (tensor l)"},
    {"qr", K_LINALG, 1, 1, "", "thin Householder QR: tensors q [m x k], r [k x n]"},
    {"svd", K_LINALG, 1, 2, "[--vectors]", "singular values s, descending (--vectors: also u, vt)"},
    {"solve", K_LINALG, 2, 3, "", "X with A X = B, A positive definite (Cholesky; tensor x)"},
    {"lstsq", K_LINALG, 2, 4, "", "X minimising ||A X - B|| (QR), A [m x n], m >= n (tensor x)"},
};
#define N_OPS (sizeof ops / sizeof ops[0])

static const char purpose[] =
    "Runs one tensor op on f32 tensors (f16/bf16/f64/integers are converted).\n"
    "  bitnet-op add A B -o Y           bitnet-op gelu X -o -\n"
    "  bitnet-op softmax --axis -1 X -o Y   bitnet-op sum --axis 0,1 X -o Y\n"
    "  bitnet-op layernorm --weight M:ln.weight --bias M:ln.bias X -o Y\n"
    "  bitnet-op qr A -o QR.bnt   bitnet-op svd --vectors A -o USV.bnt   bitnet-op lstsq A B -o X.npy\n"
    "Inputs are FILE[:TENSOR] or '-'; --list prints every op.";

static void print_list(void)
{
    printf("%-12s %-6s %-38s %s\n", "OP", "INPUTS", "OPTIONS", "WHAT");
    for (size_t i = 0; i < N_OPS; i++)
        printf("%-12s %-6d %-38s %s\n", ops[i].name, ops[i].arity, ops[i].opts, ops[i].what);
}

/* Parses "N[,N...]" (each may be negative) into v; returns the count or -1. */
static int parse_ints(const char *s, long *v, int max)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *e;
        errno = 0;
        long x = strtol(p, &e, 10);
        if (e == p || errno || n == max) return -1;
        v[n++] = x;
        if (*e == ',') p = e + 1;
        else if (*e == 0) p = e;
        else return -1;
        if (*e == ',' && *p == 0) return -1;
    }
    return n ? n : -1;
}

static void shape_of(const bitnet_tensor *t, bitnet_shape *s)
{
    memset(s, 0, sizeof *s);
    s->rank = t->info.rank;
    for (uint32_t i = 0; i < t->info.rank; i++) s->dims[i] = t->info.dims[i];
}

static const char *shape_text(const bitnet_shape *s, char *buf, size_t size)
{
    bitnet_tensor_info info;
    memset(&info, 0, sizeof info);
    info.rank = s->rank;
    memcpy(info.dims, s->dims, sizeof info.dims);
    return bitnet_shape_str(&info, buf, size);
}

/* Loads FILE[:TENSOR] and converts it to f32 in place. */
static int load_f32(const char *spec, bitnet_tensor *t)
{
    int rc = tool_load_tensor(spec, t);
    if (rc) return rc;
    if (t->info.dtype == BITNET_F32) return EXIT_OK;
    if (bitnet_dtype_is_ternary(t->info.dtype)) {
        msg_err("%s: dtype %s is ternary; dequantize it first (bitnet-quantize --dequantize)", spec,
                bitnet_dtype_name(t->info.dtype));
        bitnet_tensor_release(t);
        return EXIT_FAIL;
    }
    const bitnet_dtype from = t->info.dtype;
    if ((rc = tool_cast_f32(spec, t))) {
        bitnet_tensor_release(t);
        return rc;
    }
    msg_info("%s: converted %s to f32", spec, bitnet_dtype_name(from));
    return EXIT_OK;
}

typedef struct {
    const op_def *op;
    const char *axis, *perm, *weight, *bias, *index_type;
    double alpha, eps;
    int have_alpha;
} op_args;

/* Runs the op on x (and x2); fills y (allocated). */
static int run_op(bitnet_backend *be, const op_args *a, const bitnet_tensor *x, const bitnet_tensor *x2,
                  bitnet_tensor *y)
{
    bitnet_shape sx, sy;
    bitnet_status st = BITNET_OK;
    char b1[256], b2[256];
    long v[BITNET_MAX_RANK];
    int nv = 0;
    uint64_t n;
    shape_of(x, &sx);
    sy = sx;
    memset(&y->info, 0, sizeof y->info);
    snprintf(y->info.name, sizeof y->info.name, "%s", x->info.name);
    y->info.dtype = BITNET_F32;
    if (a->axis && (nv = parse_ints(a->axis, v, BITNET_MAX_RANK)) < 0) {
        msg_err("--axis: '%s' is not a comma-separated list of integers", a->axis);
        return EXIT_USAGE;
    }
    /* output shape */
    switch (a->op->kind) {
    case K_BINARY: {
        bitnet_shape s2;
        shape_of(x2, &s2);
        if ((st = bitnet_broadcast_shape(&sx, &s2, &sy))) return tool_fail(st, "%s", a->op->name);
        break;
    }
    case K_REDUCE:
        if (a->op->code == BITNET_RED_ARGMAX && nv > 1) {
            msg_err("argmax: --axis takes exactly one axis");
            return EXIT_USAGE;
        }
        sy.rank = 0;
        for (uint32_t i = 0; i < sx.rank; i++) {
            int red = nv == 0 && a->op->code != BITNET_RED_ARGMAX;
            for (int k = 0; k < nv; k++) red |= v[k] == (long)i || v[k] + (long)sx.rank == (long)i;
            if (nv == 0 && a->op->code == BITNET_RED_ARGMAX) red = i + 1 == sx.rank;
            if (!red) sy.dims[sy.rank++] = sx.dims[i];
        }
        if (a->op->code == BITNET_RED_ARGMAX)
            y->info.dtype = a->index_type && strcmp(a->index_type, "i32") == 0 ? BITNET_I32 : BITNET_I64;
        break;
    case K_PERMUTE:
        break; /* set below */
    default:
        break;
    }
    uint32_t perm[BITNET_MAX_RANK];
    if (a->op->kind == K_PERMUTE) {
        if (a->perm) {
            int np = parse_ints(a->perm, v, BITNET_MAX_RANK);
            if (np != (int)sx.rank) {
                msg_err("--perm: '%s' must list the %u axes of %s", a->perm, sx.rank, shape_text(&sx, b1, sizeof b1));
                return EXIT_USAGE;
            }
            for (int i = 0; i < np; i++) perm[i] = v[i] < 0 ? (uint32_t)(v[i] + np) : (uint32_t)v[i];
        } else if (a->op->code == 1) {
            for (uint32_t i = 0; i < sx.rank; i++) perm[i] = sx.rank - 1 - i;
        } else {
            msg_err("permute needs --perm");
            return EXIT_USAGE;
        }
        for (uint32_t i = 0; i < sx.rank; i++) sy.dims[i] = perm[i] < sx.rank ? sx.dims[perm[i]] : 0;
    }
    y->info.rank = sy.rank;
    memcpy(y->info.dims, sy.dims, sizeof sy.dims);
    if ((st = bitnet_tensor_alloc(y))) return tool_fail(st, "output %s", shape_text(&sy, b1, sizeof b1));
    n = 1;
    for (uint32_t i = 0; i < sx.rank; i++) n *= sx.dims[i];
    const float *xd = x->data;
    float *yd = y->data;
    switch (a->op->kind) {
    case K_BINARY: {
        bitnet_shape s2;
        shape_of(x2, &s2);
        st = bitnet_binary(be, (bitnet_binary_op)a->op->code, xd, &sx, x2->data, &s2, yd);
        break;
    }
    case K_UNARY:
        st = bitnet_unary(be, (bitnet_unary_op)a->op->code, xd, n, (float)a->alpha, yd);
        break;
    case K_SOFTMAX:
        if (nv > 1) {
            msg_err("%s: --axis takes one axis", a->op->name);
            return EXIT_USAGE;
        }
        st = bitnet_softmax(be, xd, &sx, nv ? (int)v[0] : -1, a->op->code, yd);
        break;
    case K_REDUCE: {
        uint32_t mask = 0;
        for (int k = 0; k < nv; k++) {
            long ax = v[k] < 0 ? v[k] + (long)sx.rank : v[k];
            if (ax < 0 || ax >= (long)sx.rank) {
                msg_err("--axis: %ld is out of range for shape %s", v[k], shape_text(&sx, b1, sizeof b1));
                return EXIT_USAGE;
            }
            mask |= 1u << ax;
        }
        bitnet_shape ys;
        if (a->op->code == BITNET_RED_ARGMAX) {
            uint64_t no = 1;
            for (uint32_t i = 0; i < sy.rank; i++) no *= sy.dims[i];
            int64_t *idx = malloc((no ? no : 1) * sizeof *idx);
            if (!idx) return tool_fail(BITNET_E_NOMEM, "argmax");
            st = bitnet_reduce_argmax(be, xd, &sx, nv ? (int)v[0] : -1, idx, &ys);
            if (!st) st = bitnet_cast(BITNET_I64, idx, y->info.dtype, y->data, no);
            free(idx);
        } else {
            st = bitnet_reduce(be, (bitnet_reduce_op)a->op->code, xd, &sx, mask, yd, &ys);
        }
        break;
    }
    case K_NORM: {
        bitnet_tensor w = {0}, b = {0};
        uint64_t rows = 1, cols = sx.rank ? sx.dims[sx.rank - 1] : 1;
        int rc;
        for (uint32_t i = 0; i + 1 < sx.rank; i++) rows *= sx.dims[i];
        if (a->weight && (rc = load_f32(a->weight, &w))) return rc;
        if (a->bias && (rc = load_f32(a->bias, &b))) {
            bitnet_tensor_release(&w);
            return rc;
        }
        for (int k = 0; k < 2; k++) {
            const bitnet_tensor *p = k ? &b : &w;
            uint64_t pn;
            if (!p->data) continue;
            if (bitnet_tensor_elements(&p->info, &pn) || pn != cols) {
                bitnet_shape ps;
                shape_of(p, &ps);
                msg_err("%s: --%s of shape %s does not fit the last axis of %s", a->op->name, k ? "bias" : "weight",
                        shape_text(&ps, b2, sizeof b2), shape_text(&sx, b1, sizeof b1));
                bitnet_tensor_release(&w);
                bitnet_tensor_release(&b);
                return EXIT_FAIL;
            }
        }
        if (a->op->code) st = bitnet_rmsnorm(be, xd, rows, cols, w.data, (float)a->eps, yd);
        else st = bitnet_layernorm(be, xd, rows, cols, w.data, b.data, (float)a->eps, yd);
        bitnet_tensor_release(&w);
        bitnet_tensor_release(&b);
        break;
    }
    case K_PERMUTE:
        st = bitnet_permute(be, xd, &sx, perm, yd);
        break;
    case K_LINALG:
        break; /* main calls la_run */
    }
    if (st) return tool_fail(st, "%s", a->op->name);
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    tool_init("bitnet-op");
    tool_std_args std = tool_std_args_new();
    tool_dev_args dev = tool_dev_args_new();
    struct arg_lit *list = arg_lit0(NULL, "list", "print every op with its inputs and options, and exit");
    struct arg_str *axis = arg_str0(NULL, "axis", "N[,N...]", "axis (softmax, argmax) or axes (reductions); negative counts from the end");
    struct arg_str *perm = arg_str0(NULL, "perm", "N,N...", "permute/transpose: output axis i is input axis perm[i]");
    struct arg_dbl *alpha = arg_dbl0(NULL, "alpha", "X", "scale: the factor");
    struct arg_dbl *eps = arg_dbl0(NULL, "eps", "X", "layernorm/rmsnorm: added to the variance (default 1e-5)");
    struct arg_str *weight = arg_str0(NULL, "weight", "FILE[:T]", "layernorm/rmsnorm: weight of the last axis");
    struct arg_str *bias = arg_str0(NULL, "bias", "FILE[:T]", "layernorm: bias of the last axis");
    struct arg_lit *vectors = arg_lit0(NULL, "vectors", "svd: also the singular vectors (tensors u and vt)");
    struct arg_str *itype = arg_str0(NULL, "index-type", "i64|i32", "argmax: output dtype (default i64)");
    struct arg_str *to = arg_str0(NULL, "to", "npy|bnt|safetensors", "output format (default: by extension; '-' is bnt)");
    struct arg_str *output = arg_str0("o", "output", "FILE", "output file ('-' is standard output)");
    struct arg_str *opname = arg_str0(NULL, NULL, "OP", "the op (--list)");
    struct arg_str *inputs = arg_strn(NULL, NULL, "INPUT", 0, 2, "FILE[:TENSOR] or '-'");
    struct arg_end *end = arg_end(20);
    void *table[] = {opname, inputs, output, axis, perm, alpha, eps, weight, bias, vectors, itype, to, list,
                     dev.device, dev.threads, dev.stats, std.help, std.version, std.quiet, std.verbose, std.force, end};
    bitnet_backend *be = NULL;
    bitnet_tensor x = {0}, x2 = {0}, y = {0}, outs[3];
    memset(outs, 0, sizeof outs);
    int nout = 0;
    int done, rc = tool_parse(argc, argv, table, &std, purpose, &done);
    if (rc || done) goto out;
    if (list->count) {
        print_list();
        goto out;
    }
    rc = EXIT_USAGE;
    if (!opname->count) {
        msg_err("no op given (bitnet-op --list prints them)");
        goto out;
    }
    /* max/min: two inputs are element-wise, one input is the reduction */
    const op_def *op = NULL;
    for (size_t i = 0; i < N_OPS; i++)
        if (strcmp(ops[i].name, opname->sval[0]) == 0 && (!op || ops[i].arity == inputs->count)) op = &ops[i];
    if (!op) {
        msg_err("unknown op '%s' (bitnet-op --list prints them)", opname->sval[0]);
        goto out;
    }
    if (inputs->count != op->arity) {
        msg_err("%s takes %d input%s, got %d", op->name, op->arity, op->arity > 1 ? "s" : "", inputs->count);
        goto out;
    }
    if (!output->count) {
        msg_err("no output: give -o FILE ('-' for standard output)");
        goto out;
    }
    if (inputs->count == 2 && strcmp(inputs->sval[0], "-") == 0 && strcmp(inputs->sval[1], "-") == 0) {
        msg_err("standard input can be read only once");
        goto out;
    }
    struct { void *arg; int count; op_kind kind; int code; const char *flag; } belongs[] = {
        {axis, axis->count, K_SOFTMAX, -1, "--axis"},  {perm, perm->count, K_PERMUTE, -1, "--perm"},
        {alpha, alpha->count, K_UNARY, BITNET_UN_SCALE, "--alpha"}, {eps, eps->count, K_NORM, -1, "--eps"},
        {weight, weight->count, K_NORM, -1, "--weight"}, {bias, bias->count, K_NORM, 0, "--bias"},
        {itype, itype->count, K_REDUCE, BITNET_RED_ARGMAX, "--index-type"},
        {vectors, vectors->count, K_LINALG, 2, "--vectors"},
    };
    for (size_t i = 0; i < sizeof belongs / sizeof belongs[0]; i++) {
        int fits = op->kind == belongs[i].kind || (belongs[i].kind == K_SOFTMAX && op->kind == K_REDUCE);
        if (belongs[i].code >= 0) fits = fits && op->code == belongs[i].code;
        if (belongs[i].count && !fits) {
            msg_err("%s does not apply to %s (bitnet-op --list)", belongs[i].flag, op->name);
            goto out;
        }
    }
    if (itype->count && strcmp(itype->sval[0], "i64") != 0 && strcmp(itype->sval[0], "i32") != 0) {
        msg_err("--index-type: '%s' is neither i64 nor i32", itype->sval[0]);
        goto out;
    }
    if (to->count) {
        bitnet_format f;
        if (bitnet_format_parse(to->sval[0], &f) != BITNET_OK || f == BITNET_FMT_AUTO) {
            msg_err("--to: unknown format '%s' (npy, bnt, safetensors)", to->sval[0]);
            goto out;
        }
    }
    if (op->kind == K_UNARY && op->code == BITNET_UN_SCALE && !alpha->count) {
        msg_err("scale needs --alpha");
        goto out;
    }
    if ((rc = tool_out_check(output->sval[0]))) goto out;
    const int several = op->kind == K_LINALG && (op->code == 1 || (op->code == 2 && vectors->count));
    if (several && tool_out_format(output->sval[0], to->count ? to->sval[0] : NULL) == BITNET_FMT_NPY) {
        msg_err("%s writes %s: .npy holds one tensor (write .bnt or .safetensors)", op->name,
                op->code == 1 ? "q and r" : "s, u and vt");
        rc = EXIT_USAGE;
        goto out;
    }
    if (op->kind == K_LINALG) {
        if ((rc = la_load(inputs->sval[0], &x))) goto out;
        if (op->arity == 2 && (rc = la_load(inputs->sval[1], &x2))) goto out;
        if ((op->code == 0 || op->code == 3) && (rc = la_square(op->name, &x))) goto out;
        if ((rc = tool_backend(&dev, &be))) goto out;
        if ((rc = la_run(be, op->code, vectors->count > 0, &x, &x2, outs, &nout))) goto out;
        tool_backend_stats(&dev, be);
        const bitnet_tensor *ys[3] = {&outs[0], &outs[1], &outs[2]};
        rc = tool_write_tensors(output->sval[0], to->count ? to->sval[0] : NULL, std.force->count > 0, ys, nout, argc,
                                argv);
        goto out;
    }
    if ((rc = load_f32(inputs->sval[0], &x))) goto out;
    if (op->arity == 2 && (rc = load_f32(inputs->sval[1], &x2))) goto out;
    if ((rc = tool_backend(&dev, &be))) goto out;
    op_args a = {op, axis->count ? axis->sval[0] : NULL, perm->count ? perm->sval[0] : NULL,
                 weight->count ? weight->sval[0] : NULL, bias->count ? bias->sval[0] : NULL,
                 itype->count ? itype->sval[0] : NULL, alpha->count ? alpha->dval[0] : 1.0,
                 eps->count ? eps->dval[0] : 1e-5, alpha->count > 0};
    if ((rc = run_op(be, &a, &x, &x2, &y))) goto out;
    tool_backend_stats(&dev, be);
    rc = tool_write_tensor(output->sval[0], to->count ? to->sval[0] : NULL, std.force->count > 0, &y, argc, argv);
out:
    bitnet_tensor_release(&x);
    bitnet_tensor_release(&x2);
    bitnet_tensor_release(&y);
    for (int i = 0; i < 3; i++) bitnet_tensor_release(&outs[i]);
    bitnet_backend_free(be);
    arg_freetable(table, sizeof table / sizeof table[0]);
    return rc;
}
