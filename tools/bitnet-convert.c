/*
 * bitnet-convert - converts between .bnt, .npy, safetensors and GGUF: selects
 * tensors by glob, casts dtypes (round to nearest even), dequantizes ternary
 * and scaled int8 tensors to floats.  The input format comes from its magic
 * bytes, the output format from --to or the output's extension.
 */
#include "common.h"

#include <stdlib.h>
#include <string.h>

static const char purpose[] =
    "Converts tensors between .bnt, .npy (one tensor), safetensors and GGUF.\n"
    "The input format is told by magic bytes; the output format by --to, else by\n"
    "the extension of OUT (.npy, .safetensors, .gguf, else .bnt).";

typedef struct {
    const tool_dev_args *dev;
    bitnet_backend *be; /* created on first need: only dequantization uses it */
} converter;

static bitnet_status need_backend(converter *c, int *rc)
{
    if (c->be) return BITNET_OK;
    *rc = tool_backend(c->dev, &c->be);
    return *rc ? BITNET_E_DEVICE : BITNET_OK;
}

/* Ternary -> float: T3 to T2, then w = q * d on the backend. */
static bitnet_status dequantize_ternary(converter *c, const bitnet_tensor *in, float *w, uint64_t rows, uint64_t cols,
                                        int *rc)
{
    bitnet_status st;
    const uint8_t *t2 = in->data;
    uint8_t *tmp = NULL;
    if (in->info.dtype == BITNET_T3) {
        size_t rb = bitnet_t2_row_bytes(cols), bytes;
        if (__builtin_mul_overflow(rb, (size_t)rows, &bytes) || !(tmp = malloc(bytes ? bytes : 1)))
            return BITNET_E_NOMEM;
        if ((st = bitnet_t3_to_t2(in->data, rows, cols, tmp))) {
            free(tmp);
            return st;
        }
        t2 = tmp;
    }
    if (!(st = need_backend(c, rc)))
        st = bitnet_dequantize_weights(c->be, t2, rows, cols, in->info.scale_kind, in->info.group, in->scales, w);
    free(tmp);
    return st;
}

/* int8 with scales s (x = q / s) -> float. */
static bitnet_status dequantize_int8(converter *c, const bitnet_tensor *in, float *x, uint64_t rows, uint64_t cols, int *rc)
{
    bitnet_status st;
    float *s = in->scales, *expanded = NULL;
    if (in->info.scale_kind == BITNET_SCALE_GROUP) return BITNET_E_UNSUPPORTED;
    if (in->info.scale_kind == BITNET_SCALE_TENSOR) { /* one s for every row */
        if (!(expanded = malloc((size_t)(rows ? rows : 1) * sizeof *expanded))) return BITNET_E_NOMEM;
        for (uint64_t i = 0; i < rows; i++) expanded[i] = in->scales[0];
        s = expanded;
    }
    if (!(st = need_backend(c, rc))) st = bitnet_dequantize_acts(c->be, in->data, rows, cols, s, x);
    free(expanded);
    return st;
}

/* Converts in (released on success) to dtype `to` into out.  Returns an exit status. */
static int convert_tensor(converter *c, bitnet_tensor *in, bitnet_dtype to, bitnet_tensor *out)
{
    bitnet_status st = BITNET_OK;
    int rc = EXIT_OK;
    uint64_t n, rows, cols;
    const bitnet_dtype from = in->info.dtype;
    const char *name = in->info.name;
    memset(out, 0, sizeof *out);
    if (from == to) {
        *out = *in;
        memset(in, 0, sizeof *in);
        return EXIT_OK;
    }
    bitnet_tensor_elements(&in->info, &n);
    bitnet_tensor_rows_cols(&in->info, &rows, &cols);
    out->info = in->info;
    out->info.dtype = to;
    if (bitnet_dtype_is_ternary(to)) {
        if (!bitnet_dtype_is_ternary(from)) {
            msg_err("tensor '%s': cannot make %s from %s here; quantize with bitnet-quantize", name,
                    bitnet_dtype_name(to), bitnet_dtype_name(from));
            return EXIT_USAGE;
        }
        if ((st = bitnet_tensor_alloc(out))) return tool_fail(st, "tensor '%s'", name);
        if (n) st = from == BITNET_T2 ? bitnet_t2_to_t3(in->data, rows, cols, out->data)
                                      : bitnet_t3_to_t2(in->data, rows, cols, out->data);
        uint64_t ns = 0;
        bitnet_tensor_n_scales(&in->info, &ns);
        if (ns) memcpy(out->scales, in->scales, (size_t)ns * sizeof(float));
    } else if (bitnet_dtype_is_ternary(from) || in->info.scale_kind != BITNET_SCALE_NONE) {
        if (!bitnet_dtype_is_float(to)) {
            msg_err("tensor '%s': %s%s can only be dequantized to a float dtype (--dtype f32)", name,
                    bitnet_dtype_name(from), bitnet_dtype_is_ternary(from) ? "" : " with scales");
            return EXIT_USAGE;
        }
        if (!bitnet_dtype_is_ternary(from) && from != BITNET_I8) {
            msg_err("tensor '%s': scales on a %s tensor are not understood", name, bitnet_dtype_name(from));
            return EXIT_FAIL;
        }
        out->info.scale_kind = BITNET_SCALE_NONE;
        out->info.group = 0;
        bitnet_tensor f32 = {0};
        f32.info = out->info;
        f32.info.dtype = BITNET_F32;
        if ((st = bitnet_tensor_alloc(&f32))) return tool_fail(st, "tensor '%s'", name);
        if (n) st = bitnet_dtype_is_ternary(from) ? dequantize_ternary(c, in, f32.data, rows, cols, &rc)
                                                  : dequantize_int8(c, in, f32.data, rows, cols, &rc);
        if (!st && to != BITNET_F32) {
            if (!(st = bitnet_tensor_alloc(out)))
                st = bitnet_cast(BITNET_F32, f32.data, to, out->data, (size_t)n);
            bitnet_tensor_release(&f32);
        } else if (!st) {
            *out = f32;
        } else {
            bitnet_tensor_release(&f32);
        }
        if (rc) { /* the backend could not be created: already reported */
            bitnet_tensor_release(out);
            return rc;
        }
    } else {
        if ((st = bitnet_tensor_alloc(out))) return tool_fail(st, "tensor '%s'", name);
        st = bitnet_cast(from, in->data, to, out->data, (size_t)n);
    }
    if (st) {
        rc = tool_fail(st, "tensor '%s': %s -> %s", name, bitnet_dtype_name(from), bitnet_dtype_name(to));
        bitnet_tensor_release(out);
        return rc;
    }
    bitnet_tensor_release(in);
    return EXIT_OK;
}

static int selected(const char *name, const struct arg_str *inc, const struct arg_str *exc)
{
    int ok = inc->count == 0;
    for (int i = 0; i < inc->count && !ok; i++) ok = bitnet_name_match(inc->sval[i], name);
    for (int i = 0; i < exc->count && ok; i++) ok = !bitnet_name_match(exc->sval[i], name);
    return ok;
}

static int is_reserved_meta(const char *k)
{
    return !strcmp(k, "producer") || !strcmp(k, "command") || !strcmp(k, "source");
}

int main(int argc, char **argv)
{
    tool_init("bitnet-convert");
    tool_std_args std = tool_std_args_new();
    tool_dev_args dev = tool_dev_args_new();
    struct arg_file *in = arg_file1(NULL, NULL, "IN", "input file ('-' is standard input)");
    struct arg_file *out = arg_file1("o", "output", "OUT", "output file ('-' is standard output)");
    struct arg_str *from = arg_str0(NULL, "from", "FMT", "input format: bnt, npy, safetensors, gguf (default: from magic bytes)");
    struct arg_str *to = arg_str0(NULL, "to", "FMT", "output format (default: OUT's extension, else bnt)");
    struct arg_str *inc = arg_strn("t", "tensor", "GLOB", 0, 10000, "convert only tensors whose name matches (repeatable)");
    struct arg_str *exc = arg_strn(NULL, "exclude", "GLOB", 0, 10000, "skip tensors whose name matches (repeatable)");
    struct arg_str *dtype = arg_str0(NULL, "dtype", "DTYPE", "cast to f32|f16|bf16|f64|i8|i16|i32|i64|u8|t2|t3; "
                                     "ternary and scaled int8 are dequantized to floats");
    struct arg_int *level = arg_int0(NULL, "level", "N", ".bnt output: zlib level 0..9 (default 6)");
    tool_hf_args hfa = tool_hf_args_new();
    struct arg_end *end = arg_end(20);
    void *table[] = {in, out, from, to, inc, exc, dtype, level, hfa.mode, hfa.scale, dev.threads, dev.device, dev.stats,
                     std.force, std.help, std.version, std.quiet, std.verbose, end};
    FILE *fin = NULL;
    bitnet_reader *r = NULL;
    bitnet_writer *w = NULL;
    tool_out o = {0};
    converter conv = {&dev, NULL};
    bitnet_format in_fmt = BITNET_FMT_AUTO, out_fmt;
    bitnet_dtype target = BITNET_DTYPE_INVALID;
    bitnet_status st;
    bitnet_tensor t = {0}, c = {0};
    size_t n_out = 0, n_seen = 0;
    tool_hf hf = {0};

    int done, rc = tool_parse(argc, argv, table, &std, purpose, &done);
    if (rc || done) goto out;
    rc = EXIT_USAGE;
    if (from->count && (bitnet_format_parse(from->sval[0], &in_fmt) || in_fmt == BITNET_FMT_AUTO)) {
        msg_err("--from: unknown format '%s' (bnt, npy, safetensors, gguf)", from->sval[0]);
        goto out;
    }
    if (to->count && (bitnet_format_parse(to->sval[0], &out_fmt) || out_fmt == BITNET_FMT_AUTO)) {
        msg_err("--to: unknown format '%s' (bnt, npy, safetensors, gguf)", to->sval[0]);
        goto out;
    }
    if (dtype->count && bitnet_dtype_parse(dtype->sval[0], &target)) {
        msg_err("--dtype: unknown dtype '%s' (f32 f16 bf16 f64 i8 i16 i32 i64 u8 t2 t3)", dtype->sval[0]);
        goto out;
    }
    /* to a float dtype the pairs are dequantized as the integration does (q*s or q/s) */
    if ((rc = tool_hf_init(&hf, &hfa, target != BITNET_DTYPE_INVALID && bitnet_dtype_is_float(target)))) goto out;
    rc = EXIT_USAGE;
    if (level->count && (level->ival[0] < 0 || level->ival[0] > 9)) {
        msg_err("--level must be 0..9");
        goto out;
    }
    if (dev.threads->count && dev.threads->ival[0] < 0) {
        msg_err("--threads must be >= 0");
        goto out;
    }
    out_fmt = tool_out_format(out->filename[0], to->count ? to->sval[0] : NULL);
    if (level->count && out_fmt != BITNET_FMT_BNT) msg_warn("--level only applies to .bnt output; ignored");

    if ((rc = tool_in_open(in->filename[0], &fin))) goto out;
    if ((st = bitnet_reader_create(&r, fin, in_fmt))) {
        rc = tool_fail(st, "%s", in->filename[0]);
        goto out;
    }
    if ((rc = tool_out_open(&o, out->filename[0], std.force->count > 0))) goto out;
    bitnet_bnt_writer_opts opts = {level->count ? level->ival[0] : -1, 0, dev.threads->count ? dev.threads->ival[0] : 0, 0};
    if ((st = bitnet_writer_create(&w, o.f, out_fmt, &opts))) {
        rc = tool_fail(st, "%s", out->filename[0]);
        goto out;
    }
    /* metadata first (.bnt needs it before any tensor): the input's, then ours */
    for (size_t i = 0; i < bitnet_reader_meta_count(r); i++) {
        const char *k = bitnet_reader_meta_key(r, i);
        if (is_reserved_meta(k)) continue;
        if ((st = bitnet_writer_meta(w, k, bitnet_reader_meta_value(r, i)))) {
            rc = tool_fail(st, "%s: metadata '%s'", out->filename[0], k);
            goto out;
        }
    }
    /* GGUF output carries the input's metadata only, so that GGUF -> .bnt ->
     * GGUF gives back the same bytes */
    if (out_fmt != BITNET_FMT_GGUF) {
        tool_record_meta(w, argc, argv);
        if ((st = bitnet_writer_meta(w, "source", in->filename[0]))) {
            rc = tool_fail(st, "%s: metadata", out->filename[0]);
            goto out;
        }
    }
    while ((st = tool_hf_next(&hf, r, &t)) == BITNET_OK) {
        n_seen++;
        if (!selected(t.info.name, inc, exc)) {
            bitnet_tensor_release(&t);
            continue;
        }
        if (target != BITNET_DTYPE_INVALID) {
            if ((rc = convert_tensor(&conv, &t, target, &c))) goto out;
        } else {
            c = t;
            memset(&t, 0, sizeof t);
        }
        if (out_fmt == BITNET_FMT_GGUF && bitnet_dtype_is_ternary(c.info.dtype)) {
            double rel = 0;
            if (bitnet_gguf_scale_error(&c, &rel) == BITNET_OK)
                msg_info("%s: f16 block scales change the scales by at most %.3g (relative)", c.info.name, rel);
        }
        if ((st = bitnet_writer_put(w, &c))) {
            rc = tool_fail(st, "%s: tensor '%s'", out->filename[0], c.info.name);
            if (st == BITNET_E_INVALID && out_fmt == BITNET_FMT_NPY)
                msg_err("select the one tensor to write with -t NAME");
            goto out;
        }
        msg_info("%s: %s", c.info.name, bitnet_dtype_name(c.info.dtype));
        bitnet_tensor_release(&c);
        n_out++;
    }
    if (st != BITNET_END) {
        rc = tool_fail(st, "%s", in->filename[0]);
        goto out;
    }
    if (n_out == 0 && (inc->count || exc->count)) {
        msg_err("%s: no tensor matches the selection (%zu tensor%s in the input)", in->filename[0], n_seen,
                n_seen == 1 ? "" : "s");
        rc = EXIT_USAGE;
        goto out;
    }
    if ((st = bitnet_writer_finish(w))) {
        rc = tool_fail(st, "%s", out->filename[0]);
        goto out;
    }
    rc = tool_out_commit(&o);
    if (!rc) msg_info("%zu tensor%s written to %s (%s)", n_out, n_out == 1 ? "" : "s", out->filename[0],
                      bitnet_format_name(out_fmt));
out:
    if (rc) tool_out_abort(&o);
    tool_backend_stats(&dev, conv.be);
    bitnet_tensor_release(&t);
    bitnet_tensor_release(&c);
    bitnet_writer_free(w);
    tool_hf_free(&hf);
    bitnet_reader_free(r);
    bitnet_backend_free(conv.be);
    tool_in_close(fin);
    arg_freetable(table, sizeof table / sizeof table[0]);
    return rc;
}
