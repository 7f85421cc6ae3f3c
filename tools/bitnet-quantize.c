/*
 * bitnet-quantize - quantizes the weight matrices of a model to ternary
 * (BitNet b1.58, absmean) codes in a .bnt file, tensor by tensor, copying
 * every other tensor; or, with --activations, float tensors to int8 with
 * per-row absmax scales.  The output bytes depend only on the input and the
 * options that change the result (not on --threads or --device).
 */
#include "common.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char purpose[] =
    "Quantizes the 2-D '*.weight' tensors of a model (safetensors, .npy or .bnt) to\n"
    "ternary codes with absmean scales and writes a .bnt file; other tensors are copied.";

/* Embeddings, norms and output heads stay in floating point by default. */
static const char *const default_excludes[] = {"*embed*", "*norm*", "*ln_*", "*.ln*", "ln*", "lm_head*",
                                               "*head.weight", "*wte*", "*wpe*", "*pos_emb*", "*tok_emb*"};

typedef struct {
    struct arg_str *tensor, *exclude;
    struct arg_lit *no_default, *activations;
    bitnet_scale_kind kind;
    uint32_t group;
    int base3;
    bitnet_dtype keep; /* BITNET_DTYPE_INVALID: copy unchanged */
} plan;

typedef enum { ACT_COPY, ACT_CAST, ACT_QUANT } action;

static int glob_any(const struct arg_str *a, const char *name)
{
    for (int i = 0; i < a->count; i++)
        if (bitnet_name_match(a->sval[i], name)) return 1;
    return 0;
}

static int excluded(const plan *p, const char *name)
{
    if (glob_any(p->exclude, name)) return 1;
    if (p->tensor->count || p->no_default->count) return 0; /* -t selects explicitly */
    for (size_t i = 0; i < sizeof default_excludes / sizeof *default_excludes; i++)
        if (bitnet_name_match(default_excludes[i], name)) return 1;
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* What happens to tensor t; *explicit_sel is set when -t chose it. */
static action decide(const plan *p, const bitnet_tensor_info *info, int *explicit_sel)
{
    int sel;
    *explicit_sel = 0;
    if (bitnet_dtype_is_ternary(info->dtype)) return ACT_COPY; /* already quantized (Hugging Face BitNet layout) */
    if (p->tensor->count) {
        sel = glob_any(p->tensor, info->name);
        *explicit_sel = sel;
    } else if (p->activations->count) {
        sel = bitnet_dtype_is_float(info->dtype) && info->rank >= 1;
    } else {
        sel = info->rank == 2 && ends_with(info->name, ".weight");
    }
    if (sel && !excluded(p, info->name)) return ACT_QUANT;
    if (p->keep != BITNET_DTYPE_INVALID && bitnet_dtype_is_float(info->dtype) && info->dtype != p->keep) return ACT_CAST;
    return ACT_COPY;
}

/* Reconstruction statistics of one quantized tensor (w is f32 [rows x cols]). */
typedef struct {
    double zeros, rel_rms, smin, smax, smean;
} qstats;

static int tensor_stats(bitnet_backend *be, const float *w, uint64_t rows, uint64_t cols, const bitnet_tensor *q,
                        uint64_t nsc, int acts, qstats *s)
{
    uint64_t n = rows * cols;
    float *back = malloc((size_t)(n ? n : 1) * sizeof *back);
    if (!back) return -1;
    bitnet_status st = acts ? bitnet_dequantize_acts(be, q->data, rows, cols, q->scales, back)
                            : bitnet_dequantize_weights(be, q->data, rows, cols, q->info.scale_kind, q->info.group,
                                                        q->scales, back);
    if (st) {
        free(back);
        return -1;
    }
    double err = 0, ref = 0;
    uint64_t zeros = 0;
    for (uint64_t i = 0; i < n; i++) {
        double e = (double)w[i] - back[i];
        err += e * e;
        ref += (double)w[i] * w[i];
        zeros += back[i] == 0.0f;
    }
    free(back);
    s->zeros = n ? (double)zeros / (double)n : 0;
    s->rel_rms = ref > 0 ? sqrt(err / ref) : 0;
    s->smin = INFINITY, s->smax = -INFINITY, s->smean = 0;
    for (uint64_t i = 0; i < nsc; i++) {
        double v = q->scales[i];
        s->smin = v < s->smin ? v : s->smin;
        s->smax = v > s->smax ? v : s->smax;
        s->smean += v / (double)nsc;
    }
    return 0;
}

/* Quantizes t (float) into out.  Returns an exit status. */
static int quantize_tensor(bitnet_backend *be, const plan *p, const bitnet_tensor *t, size_t index, bitnet_tensor *out,
                           int want_stats, qstats *qs)
{
    uint64_t n, rows, cols, nsc;
    bitnet_status st;
    const char *name = t->info.name;
    if (!bitnet_dtype_is_float(t->info.dtype)) {
        msg_err("tensor '%s' (#%zu): dtype %s is not a float type%s; cannot quantize it", name, index,
                bitnet_dtype_name(t->info.dtype), bitnet_dtype_is_ternary(t->info.dtype) ? " (already ternary)" : "");
        return EXIT_FAIL;
    }
    if ((st = bitnet_tensor_elements(&t->info, &n))) return tool_fail(st, "tensor '%s' (#%zu)", name, index);
    bitnet_tensor_rows_cols(&t->info, &rows, &cols);
    float *w = (float *)t->data, *tmp = NULL;
    if (t->info.dtype != BITNET_F32) {
        if (!(tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp))) return tool_fail(BITNET_E_NOMEM, "tensor '%s'", name);
        if ((st = bitnet_cast(t->info.dtype, t->data, BITNET_F32, tmp, (size_t)n))) {
            free(tmp);
            return tool_fail(st, "tensor '%s' (#%zu)", name, index);
        }
        w = tmp;
    }
    memset(out, 0, sizeof *out);
    out->info = t->info;
    int acts = p->activations->count > 0;
    out->info.dtype = acts ? BITNET_I8 : BITNET_T2;
    out->info.scale_kind = acts ? BITNET_SCALE_ROW : p->kind;
    out->info.group = acts ? 0 : p->kind == BITNET_SCALE_GROUP ? p->group : 0;
    int rc = EXIT_OK;
    if ((st = bitnet_tensor_alloc(out)) || (st = bitnet_tensor_n_scales(&out->info, &nsc))) {
        rc = tool_fail(st, "tensor '%s' (#%zu)", name, index);
        goto done;
    }
    st = acts ? bitnet_quantize_acts(be, w, rows, cols, out->data, out->scales)
              : bitnet_quantize_weights(be, w, rows, cols, out->info.scale_kind, out->info.group, out->data, out->scales);
    if (st) {
        rc = tool_fail(st, "tensor '%s' (#%zu)", name, index);
        goto done;
    }
    if (want_stats && tensor_stats(be, w, rows, cols, out, nsc, acts, qs)) {
        rc = tool_fail(BITNET_E_NOMEM, "tensor '%s': statistics", name);
        goto done;
    }
    if (!acts && p->base3) { /* T2 -> T3 (smaller, for storage) */
        bitnet_tensor t3 = {0};
        t3.info = out->info;
        t3.info.dtype = BITNET_T3;
        if ((st = bitnet_tensor_alloc(&t3)) || (st = bitnet_t2_to_t3(out->data, rows, cols, t3.data))) {
            bitnet_tensor_release(&t3);
            rc = tool_fail(st, "tensor '%s' (#%zu): base-3 packing", name, index);
            goto done;
        }
        memcpy(t3.scales, out->scales, (size_t)nsc * sizeof(float));
        bitnet_tensor_release(out);
        *out = t3;
    }
done:
    free(tmp);
    if (rc) bitnet_tensor_release(out);
    return rc;
}

/* The command line without the options that cannot change the output bytes. */
static char **meta_argv(int argc, char **argv, int *n)
{
    static const char *const drop_val[] = {"--threads", "--device", "--report"};
    static const char *const drop[] = {"--stats", "-v", "--verbose", "-q", "--quiet", "-f", "--force"};
    char **v = calloc((size_t)argc + 1, sizeof *v);
    if (!v) return NULL;
    *n = 0;
    v[(*n)++] = (char *)"bitnet-quantize";
    for (int i = 1; i < argc; i++) {
        int skip = 0;
        for (size_t k = 0; k < sizeof drop_val / sizeof *drop_val && !skip; k++) {
            size_t l = strlen(drop_val[k]);
            if (strcmp(argv[i], drop_val[k]) == 0) skip = 2;
            else if (strncmp(argv[i], drop_val[k], l) == 0 && argv[i][l] == '=') skip = 1;
        }
        for (size_t k = 0; k < sizeof drop / sizeof *drop && !skip; k++)
            if (strcmp(argv[i], drop[k]) == 0) skip = 1;
        if (skip == 2) i++;
        if (!skip) v[(*n)++] = argv[i];
    }
    return v;
}

static int parse_scale(const char *s, plan *p)
{
    if (strcmp(s, "tensor") == 0) p->kind = BITNET_SCALE_TENSOR;
    else if (strcmp(s, "row") == 0) p->kind = BITNET_SCALE_ROW;
    else if (strcmp(s, "group") == 0) p->kind = BITNET_SCALE_GROUP, p->group = 128;
    else if (strncmp(s, "group:", 6) == 0) {
        char *end;
        unsigned long g = strtoul(s + 6, &end, 10);
        if (*end || g < 32 || g > (1ul << 30) || (g & (g - 1))) return -1;
        p->kind = BITNET_SCALE_GROUP;
        p->group = (uint32_t)g;
    } else
        return -1;
    return 0;
}

static const char *kind_name(bitnet_scale_kind k)
{
    return k == BITNET_SCALE_TENSOR ? "tensor" : k == BITNET_SCALE_ROW ? "row" : k == BITNET_SCALE_GROUP ? "group" : "none";
}

int main(int argc, char **argv)
{
    tool_init("bitnet-quantize");
    tool_std_args std = tool_std_args_new();
    tool_dev_args dev = tool_dev_args_new();
    plan p = {0};
    struct arg_file *in = arg_file1(NULL, NULL, "INPUT", "input model ('-' is standard input)");
    struct arg_file *out = arg_file0("o", "output", "OUTPUT", "output .bnt file ('-' is standard output)");
    p.tensor = arg_strn("t", "tensor", "GLOB", 0, 10000, "quantize exactly the tensors matching GLOB (repeatable)");
    p.exclude = arg_strn(NULL, "exclude", "GLOB", 0, 10000, "also leave tensors matching GLOB in float (repeatable)");
    p.no_default = arg_lit0(NULL, "no-default-excludes", "drop the default excludes (embeddings, norms, heads)");
    p.activations = arg_lit0(NULL, "activations", "quantize float tensors to int8, absmax per row");
    struct arg_lit *dry = arg_lit0("n", "dry-run", "list what would be done, write nothing");
    struct arg_str *scale = arg_str0(NULL, "scale", "tensor|row|group:G", "absmean scale per tensor (default), row, "
                                     "or group of G columns (power of two >= 32; 'group' = 128)");
    struct arg_str *pack = arg_str0(NULL, "pack", "2bit|base3", "ternary layout: t2 (default) or t3");
    struct arg_str *keep = arg_str0(NULL, "keep-dtype", "DTYPE", "cast the float tensors left unquantized to DTYPE (f16)");
    struct arg_int *level = arg_int0(NULL, "level", "N", "zlib level 0..9 (default 6)");
    struct arg_file *report = arg_file0(NULL, "report", "FILE.json", "write a per-tensor report as JSON");
    tool_hf_args hfa = tool_hf_args_new();
    struct arg_end *end = arg_end(20);
    void *table[] = {in, out, p.tensor, p.exclude, p.no_default, scale, pack, p.activations, keep, level, dry, report,
                     hfa.mode, hfa.scale, dev.device, dev.threads, dev.stats, std.force, std.help, std.version, std.quiet, std.verbose, end};
    FILE *fin = NULL;
    bitnet_reader *r = NULL;
    bitnet_writer *w = NULL;
    bitnet_backend *be = NULL;
    tool_out o = {0}, ro = {0};
    bitnet_tensor t = {0}, q = {0};
    tool_hf hf = {0};
    json_t *rep = NULL;
    char **mv = NULL;
    int *hits = NULL;
    bitnet_status st;
    size_t index = 0, nquant = 0;
    const int progress = isatty(STDERR_FILENO) && tool_verbosity >= 1;

    int done, rc = tool_parse(argc, argv, table, &std, purpose, &done);
    if (rc || done) goto out;
    if ((rc = tool_hf_init(&hf, &hfa, 0))) goto out;
    rc = EXIT_USAGE;
    p.kind = BITNET_SCALE_TENSOR;
    p.keep = BITNET_DTYPE_INVALID;
    if (scale->count && parse_scale(scale->sval[0], &p)) {
        msg_err("--scale: '%s' is not tensor, row, group or group:G (G a power of two >= 32)", scale->sval[0]);
        goto out;
    }
    if (pack->count) {
        if (strcmp(pack->sval[0], "base3") == 0) p.base3 = 1;
        else if (strcmp(pack->sval[0], "2bit") != 0) {
            msg_err("--pack: '%s' is not 2bit or base3", pack->sval[0]);
            goto out;
        }
    }
    if (keep->count && (bitnet_dtype_parse(keep->sval[0], &p.keep) || !bitnet_dtype_is_float(p.keep))) {
        msg_err("--keep-dtype: '%s' is not a float dtype (f16, bf16, f32, f64)", keep->sval[0]);
        goto out;
    }
    if (level->count && (level->ival[0] < 0 || level->ival[0] > 9)) {
        msg_err("--level must be 0..9");
        goto out;
    }
    if (p.activations->count && (scale->count || pack->count)) {
        msg_err("--activations quantizes to int8 with per-row scales: --scale and --pack do not apply");
        goto out;
    }
    if (!dry->count && !out->count) {
        msg_err("no output: give -o OUTPUT (or -n for a dry run)");
        goto out;
    }
    if (out->count && tool_out_format(out->filename[0], NULL) != BITNET_FMT_BNT) {
        msg_err("%s: the output must be .bnt (ternary codes and scales have no place in .npy or safetensors)",
                out->filename[0]);
        goto out;
    }
    if (!(hits = calloc((size_t)p.tensor->count + 1, sizeof *hits))) {
        rc = tool_fail(BITNET_E_NOMEM, "setup");
        goto out;
    }
    if ((rc = tool_backend(&dev, &be))) goto out;
    if ((rc = tool_in_open(in->filename[0], &fin))) goto out;
    if (report->count && (rc = tool_out_check(report->filename[0]))) goto out;
    if ((st = bitnet_reader_create(&r, fin, BITNET_FMT_AUTO))) {
        rc = tool_fail(st, "%s", in->filename[0]);
        goto out;
    }
    if (!dry->count) {
        if ((rc = tool_out_open(&o, out->filename[0], std.force->count > 0))) goto out;
        bitnet_bnt_writer_opts opts = {level->count ? level->ival[0] : -1, 0, bitnet_backend_threads(be), 0};
        if ((st = bitnet_writer_create(&w, o.f, BITNET_FMT_BNT, &opts))) {
            rc = tool_fail(st, "%s", out->filename[0]);
            goto out;
        }
        for (size_t i = 0; i < bitnet_reader_meta_count(r); i++) { /* the input's metadata, then ours */
            const char *k = bitnet_reader_meta_key(r, i);
            if (!strcmp(k, "producer") || !strcmp(k, "command") || !strcmp(k, "source") || !strcmp(k, "quantization"))
                continue;
            if ((st = bitnet_writer_meta(w, k, bitnet_reader_meta_value(r, i)))) {
                rc = tool_fail(st, "%s: metadata '%s'", out->filename[0], k);
                goto out;
            }
        }
        int mn;
        if (!(mv = meta_argv(argc, argv, &mn))) {
            rc = tool_fail(BITNET_E_NOMEM, "setup");
            goto out;
        }
        tool_record_meta(w, mn, mv);
        char qdesc[256];
        if (p.activations->count)
            snprintf(qdesc, sizeof qdesc, "{\"method\":\"absmax\",\"dtype\":\"i8\",\"scale\":\"row\"}");
        else
            snprintf(qdesc, sizeof qdesc, "{\"method\":\"absmean\",\"dtype\":\"%s\",\"scale\":\"%s\",\"group\":%u}",
                     p.base3 ? "t3" : "t2", kind_name(p.kind), p.group);
        if ((st = bitnet_writer_meta(w, "source", in->filename[0])) || (st = bitnet_writer_meta(w, "quantization", qdesc))) {
            rc = tool_fail(st, "%s: metadata", out->filename[0]);
            goto out;
        }
    }
    if (report->count && !(rep = json_array())) {
        rc = tool_fail(BITNET_E_NOMEM, "report");
        goto out;
    }
    const int want_stats = report->count || tool_verbosity >= 2;
    char group_str[32];
    snprintf(group_str, sizeof group_str, ":%u", p.group);
    while ((st = tool_hf_next(&hf, r, &t)) == BITNET_OK) {
        int expl;
        action a = decide(&p, &t.info, &expl);
        char shape[256];
        bitnet_shape_str(&t.info, shape, sizeof shape);
        for (int i = 0; i < p.tensor->count; i++) hits[i] += bitnet_name_match(p.tensor->sval[i], t.info.name);
        if (progress && !dry->count) fprintf(stderr, "\r%s: [%zu] %-60.60s", tool_name, index, t.info.name);
        if (dry->count) {
            if (a == ACT_QUANT && !bitnet_dtype_is_float(t.info.dtype)) {
                msg_err("tensor '%s' (#%zu): dtype %s is not a float type; cannot quantize it", t.info.name, index,
                        bitnet_dtype_name(t.info.dtype));
                rc = EXIT_FAIL;
                goto out;
            }
            if (a == ACT_QUANT && p.activations->count)
                printf("quantize  %s %s %s -> i8, scale row\n", t.info.name, shape, bitnet_dtype_name(t.info.dtype));
            else if (a == ACT_QUANT)
                printf("quantize  %s %s %s -> %s, scale %s%s\n", t.info.name, shape, bitnet_dtype_name(t.info.dtype),
                       p.base3 ? "t3" : "t2", kind_name(p.kind), p.kind == BITNET_SCALE_GROUP ? group_str : "");
            else if (a == ACT_CAST)
                printf("cast      %s %s %s -> %s\n", t.info.name, shape, bitnet_dtype_name(t.info.dtype),
                       bitnet_dtype_name(p.keep));
            else
                printf("copy      %s %s %s\n", t.info.name, shape, bitnet_dtype_name(t.info.dtype));
            bitnet_tensor_release(&t);
            index++;
            continue;
        }
        qstats qs = {0};
        const bitnet_tensor *put = &t;
        if (a == ACT_QUANT) {
            if ((rc = quantize_tensor(be, &p, &t, index, &q, want_stats, &qs))) goto out;
            put = &q;
            nquant++;
        } else if (a == ACT_CAST) {
            uint64_t n;
            q.info = t.info;
            q.info.dtype = p.keep;
            if ((st = bitnet_tensor_elements(&t.info, &n)) || (st = bitnet_tensor_alloc(&q)) ||
                (st = bitnet_cast(t.info.dtype, t.data, p.keep, q.data, (size_t)n))) {
                rc = tool_fail(st, "tensor '%s' (#%zu): cast", t.info.name, index);
                goto out;
            }
            put = &q;
        }
        if ((st = bitnet_writer_put(w, put))) {
            rc = tool_fail(st, "%s: tensor '%s'", out->filename[0], put->info.name);
            goto out;
        }
        if (a == ACT_QUANT && want_stats) {
            msg_info("%s %s: %s, scale %s (%g..%g), zeros %.2f%%, relative RMS error %.4f", t.info.name, shape,
                     bitnet_dtype_name(q.info.dtype), kind_name(q.info.scale_kind), qs.smin, qs.smax, 100 * qs.zeros,
                     qs.rel_rms);
        } else {
            msg_info("%s %s: %s %s", t.info.name, shape, a == ACT_CAST ? "cast to" : "copied",
                     bitnet_dtype_name(put->info.dtype));
        }
        if (rep) {
            json_t *e = json_object(), *dims = json_array();
            for (uint32_t i = 0; i < t.info.rank; i++) json_array_append_new(dims, json_integer((json_int_t)t.info.dims[i]));
            json_object_set_new(e, "name", json_string(t.info.name));
            json_object_set_new(e, "shape", dims);
            json_object_set_new(e, "action", json_string(a == ACT_QUANT ? "quantize" : a == ACT_CAST ? "cast" : "copy"));
            json_object_set_new(e, "dtype_in", json_string(bitnet_dtype_name(t.info.dtype)));
            json_object_set_new(e, "dtype_out", json_string(bitnet_dtype_name(put->info.dtype)));
            if (a == ACT_QUANT) {
                json_object_set_new(e, "scale", json_string(kind_name(q.info.scale_kind)));
                if (q.info.group) json_object_set_new(e, "group", json_integer(q.info.group));
                json_object_set_new(e, "scale_min", json_real(qs.smin));
                json_object_set_new(e, "scale_max", json_real(qs.smax));
                json_object_set_new(e, "scale_mean", json_real(qs.smean));
                json_object_set_new(e, "zeros", json_real(qs.zeros));
                json_object_set_new(e, "rel_rms_error", json_real(qs.rel_rms));
            }
            json_array_append_new(rep, e);
        }
        bitnet_tensor_release(&t);
        bitnet_tensor_release(&q);
        index++;
    }
    if (progress && !dry->count) fprintf(stderr, "\r%*s\r", 80, "");
    if (st != BITNET_END) {
        rc = tool_fail(st, "%s", in->filename[0]);
        goto out;
    }
    for (int i = 0; i < p.tensor->count; i++)
        if (!hits[i]) {
            msg_err("%s: -t '%s' matches no tensor (%zu tensor%s in the input)", in->filename[0], p.tensor->sval[i],
                    index, index == 1 ? "" : "s");
            rc = EXIT_FAIL;
            goto out;
        }
    if (!dry->count) {
        if ((st = bitnet_writer_finish(w))) {
            rc = tool_fail(st, "%s", out->filename[0]);
            goto out;
        }
        if ((rc = tool_out_commit(&o))) goto out;
        msg_info("%zu of %zu tensors quantized into %s", nquant, index, out->filename[0]);
        if (nquant == 0) msg_warn("no tensor was quantized (see -n for the selection)");
    }
    if (rep) {
        if ((rc = tool_out_open(&ro, report->filename[0], 1))) goto out;
        if (json_dumpf(rep, ro.f, JSON_INDENT(2)) != 0 || fputc('\n', ro.f) == EOF) {
            msg_err("%s: write failed", report->filename[0]);
            rc = EXIT_IO;
            goto out;
        }
        if ((rc = tool_out_commit(&ro))) goto out;
    }
    rc = EXIT_OK;
out:
    if (rc) {
        if (progress) fprintf(stderr, "\r%*s\r", 80, "");
        tool_out_abort(&o);
        tool_out_abort(&ro);
    }
    tool_backend_stats(&dev, be);
    bitnet_tensor_release(&t);
    bitnet_tensor_release(&q);
    bitnet_writer_free(w);
    tool_hf_free(&hf);
    bitnet_reader_free(r);
    bitnet_backend_free(be);
    tool_in_close(fin);
    json_decref(rep);
    free(mv);
    free(hits);
    arg_freetable(table, sizeof table / sizeof table[0]);
    return rc;
}
