/*
 * bitnet-bench - times the library's ops on each device against the
 * device's measured roofline, checks every configuration against the CPU
 * reference, and reports a table (or Markdown, CSV, JSON) and a plot.
 * The method lives in bitnet-bench/method.c, the ops in bitnet-bench/op_*.c,
 * the formats in bitnet-bench/output.c and bitnet-bench/plot.c.
 */
#include "bitnet-bench/bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_OPS 32
#define MAX_DEVS 8
#define MAX_SHAPES 256
#define MAX_TOKENS 16
#define MIB (1ull << 20)
#define MAX_ELEMS (1ull << 34) /* per operand: 64 GiB of floats */

typedef struct {
    uint64_t m, k;
    int single; /* given as one number N: N x N for matrix ops, N elements for vector ops */
} shape_t;

typedef struct {
    bench_row *v;
    size_t n, cap;
} row_list;

static const char purpose[] =
    "Time the library's ops on each device against its measured memory roofline; every configuration is\n"
    "checked once against the CPU reference (a failed check makes the exit status 1).";

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    if (!*s || *s == '-') return 1;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end || x == 0) return 1;
    *v = x;
    return 0;
}

static int add_shape(shape_t *sh, size_t *n, const char *s)
{
    char buf[64];
    const char *x = strchr(s, 'x');
    if (*n >= MAX_SHAPES || strlen(s) >= sizeof buf) return 1;
    shape_t t = {0, 0, !x};
    if (x) {
        memcpy(buf, s, (size_t)(x - s));
        buf[x - s] = 0;
        if (parse_u64(buf, &t.m) || parse_u64(x + 1, &t.k)) return 1;
    } else if (parse_u64(s, &t.m)) {
        return 1;
    } else {
        t.k = t.m;
    }
    if (t.single ? t.m > MAX_ELEMS : (t.m > (1ull << 24) || t.k > (1ull << 24) || t.m * t.k > MAX_ELEMS)) return 1;
    sh[(*n)++] = t;
    return 0;
}

/* A:B:xF (multiply) or A:B:+S (add), A and B included. */
static int add_sweep(shape_t *sh, size_t *n, const char *s)
{
    unsigned long long a, b, step;
    char op;
    if (sscanf(s, "%llu:%llu:%c%llu", &a, &b, &op, &step) != 4 || a == 0 || b < a || (op != 'x' && op != '+') ||
        (op == 'x' && step < 2) || step == 0)
        return 1;
    for (unsigned long long v = a; v <= b; v = op == 'x' ? v * step : v + step) {
        char buf[32];
        snprintf(buf, sizeof buf, "%llu", v);
        if (add_shape(sh, n, buf)) return 1;
    }
    return 0;
}

/* Every distinct 2-D shape of a model file. */
static int add_model(shape_t *sh, size_t *n, const char *path)
{
    FILE *f = NULL;
    bitnet_reader *r = NULL;
    bitnet_tensor t = {0};
    bitnet_status st;
    int rc = tool_in_open(path, &f);
    if (rc) return rc;
    if ((st = bitnet_reader_create(&r, f, BITNET_FMT_AUTO))) {
        rc = tool_fail(st, "%s", path);
        goto out;
    }
    while ((st = bitnet_reader_next(r, &t)) == BITNET_OK) {
        if (t.info.rank == 2) {
            size_t i = 0;
            while (i < *n && !(sh[i].m == t.info.dims[0] && sh[i].k == t.info.dims[1] && !sh[i].single)) i++;
            if (i == *n && *n < MAX_SHAPES) sh[(*n)++] = (shape_t){t.info.dims[0], t.info.dims[1], 0};
        }
        bitnet_tensor_release(&t);
    }
    if (st != BITNET_END) rc = tool_fail(st, "%s", path);
out:
    bitnet_reader_free(r);
    tool_in_close(f);
    return rc;
}

static bench_row *row_push(row_list *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        bench_row *v = realloc(l->v, cap * sizeof *v);
        if (!v) return NULL;
        l->v = v, l->cap = cap;
    }
    return &l->v[l->n++];
}

static void progress(const char *what, const char *shape, const char *device, size_t done)
{
    if (tool_verbosity < 1 || !isatty(STDERR_FILENO)) return;
    if (!what) fprintf(stderr, "\r\033[K");
    else fprintf(stderr, "\r\033[K[%zu] %s %s on %s ...", done + 1, what, shape, device);
    fflush(stderr);
}

static void print_stats(const tool_dev_args *dev, bitnet_backend *be, const bench_row *r)
{
    char buf[16384];
    if (!dev->stats->count || !be) return;
    bitnet_backend_stats_format(be, buf, sizeof buf);
    fprintf(stderr, "%s: stats for %s %s %s on %s:\n%s", tool_name, r->op, r->variant, r->shape, r->device, buf);
}

int main(int argc, char **argv)
{
    tool_init("bitnet-bench");
    tool_std_args std = tool_std_args_new();
    tool_dev_args dev = tool_dev_args_new();
    struct arg_str *a_op = arg_strn(NULL, "op", "OP[,OP...]", 0, 16, "ops to time (default: all; see bitnet-bench(1))");
    struct arg_str *a_shape = arg_strn(NULL, "shape", "MxK|N", 0, 64, "shape: M out rows x K in; N = NxN, or N elements");
    struct arg_str *a_sweep = arg_strn(NULL, "sweep", "A:B:xF|A:B:+S", 0, 8, "sizes A..B (square, or elements)");
    struct arg_file *a_model = arg_filen(NULL, "model", "FILE", 0, 8, "every distinct 2-D weight shape of a model file");
    struct arg_str *a_tokens = arg_str0(NULL, "tokens", "N[,N...]", "token counts for products (default 1)");
    struct arg_str *a_scale = arg_str0(NULL, "scale", "LIST", "scale kinds (default tensor,row,group:128)");
    struct arg_str *a_base = arg_str0(NULL, "baseline", "cpu|openblas|none|DEV", "speedup reference (default cpu)");
    struct arg_int *a_reps = arg_int0(NULL, "min-reps", "N", "timed repetitions at least (default 10)");
    struct arg_dbl *a_time = arg_dbl0(NULL, "min-time", "S", "timed seconds at least (default 0.5)");
    struct arg_int *a_warm = arg_int0(NULL, "warmup", "N", "untimed calls first (default 2)");
    struct arg_int *a_maxreps = arg_int0(NULL, "max-reps", "N", "timed repetitions at most (default 100000)");
    struct arg_int *a_seed = arg_int0(NULL, "seed", "N", "random input seed (default 1)");
    struct arg_int *a_llc = arg_int0(NULL, "llc", "MiB", "assumed last-level cache (default 64)");
    struct arg_int *a_maxmem = arg_int0(NULL, "max-mem", "MiB", "bound on rotated buffers (default half the memory)");
    struct arg_int *a_roof = arg_int0(NULL, "roofline-size", "MiB", "bytes of the roofline copy (default 256, grown on fast devices)");
    struct arg_str *a_timer = arg_str0(NULL, "timer", "auto|e2e", "auto: kernel time on OpenCL; e2e: always end to end");
    struct arg_lit *a_nocheck = arg_lit0(NULL, "no-check", "skip the reference checks");
    struct arg_str *a_format = arg_str0(NULL, "format", "table|md|csv|json|jsonl", "output format (default table)");
    struct arg_file *a_out = arg_file0("o", "output", "FILE", "write results to FILE (default stdout)");
    struct arg_file *a_plot = arg_file0(NULL, "plot", "FILE.png|FILE.svg", "plot GB/s against size with gnuplot");
    struct arg_file *a_from = arg_file0(NULL, "from", "FILE.json", "report earlier --format json results (no measuring)");
    struct arg_lit *a_cal = arg_lit0(NULL, "calibrate", "calibrate auto-dispatch for each device and print the report");
    struct arg_lit *a_list = arg_lit0(NULL, "list-devices", "list devices (as bitnet-info --devices) and exit");
    struct arg_end *end = arg_end(20);
    void *table[] = {a_op, a_shape, a_sweep, a_model, a_tokens, a_scale, dev.device, dev.threads, a_base, a_reps,
                     a_time, a_warm, a_maxreps, a_seed, a_llc, a_maxmem, a_roof, a_timer, a_nocheck, a_format,
                     a_out, a_plot, a_from, a_cal, a_list, dev.stats, std.help, std.version, std.quiet, std.verbose,
                     std.force, end};
    bitnet_backend *bes[MAX_DEVS] = {0}, *base_be = NULL;
    bench_device devs[MAX_DEVS];
    char devnames[MAX_DEVS][BENCH_NAME], opnames[MAX_OPS][BENCH_NAME], toknames[MAX_TOKENS][BENCH_NAME];
    const bench_op *ops[MAX_OPS];
    shape_t shapes[MAX_SHAPES];
    uint64_t tokens[MAX_TOKENS];
    size_t nops = 0, ndev = 0, nshapes = 0, ntok = 0;
    row_list rows = {0};
    bench_format fmt = BENCH_FMT_TABLE;
    int done, rc, worst = EXIT_OK;

    if ((rc = tool_parse(argc, argv, table, &std, purpose, &done)) || done) goto cleanup;
    rc = EXIT_USAGE;

    /* options */
    bench_opts o = {.min_time_s = 0.5, .min_reps = 10, .warmup = 2, .max_reps = 100000, .seed = 1,
                    .llc_bytes = 64 * MIB, .roof_bytes = 256 * MIB, .scales = "tensor,row,group:128"};
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    o.max_mem = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize / 2 : 4096 * MIB;
    if (a_reps->count) o.min_reps = a_reps->ival[0];
    if (a_time->count) o.min_time_s = a_time->dval[0];
    if (a_warm->count) o.warmup = a_warm->ival[0];
    if (a_maxreps->count) o.max_reps = a_maxreps->ival[0];
    if (a_seed->count) o.seed = (uint64_t)a_seed->ival[0];
    if (a_llc->count) o.llc_bytes = (uint64_t)(a_llc->ival[0] > 0 ? a_llc->ival[0] : 0) * MIB;
    if (a_maxmem->count) o.max_mem = (uint64_t)(a_maxmem->ival[0] > 0 ? a_maxmem->ival[0] : 0) * MIB;
    if (a_roof->count) o.roof_bytes = (uint64_t)(a_roof->ival[0] > 0 ? a_roof->ival[0] : 0) * MIB;
    if (a_scale->count) o.scales = a_scale->sval[0];
    o.no_check = a_nocheck->count > 0;
    o.tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (o.min_reps < 1 || o.min_time_s < 0 || o.warmup < 0 || o.max_reps < o.min_reps || o.max_mem == 0 ||
        o.roof_bytes == 0 || (a_seed->count && a_seed->ival[0] < 0)) {
        msg_err("--min-reps, --max-reps, --max-mem and --roofline-size must be positive, --min-time, --warmup and --seed not negative");
        goto cleanup;
    }
    if (a_timer->count) {
        if (strcmp(a_timer->sval[0], "e2e") == 0) o.force_e2e = 1;
        else if (strcmp(a_timer->sval[0], "auto") != 0) { msg_err("--timer: auto or e2e"); goto cleanup; }
    }
    if (a_format->count && bench_format_parse(a_format->sval[0], &fmt)) {
        msg_err("--format: table, md, csv, json or jsonl");
        goto cleanup;
    }
    if (dev.threads->count && dev.threads->ival[0] < 0) {
        msg_err("--threads must be >= 0 (0 = all cores)");
        goto cleanup;
    }
    const int threads = dev.threads->count ? dev.threads->ival[0] : 0;

    if (a_list->count) {
        char *text = NULL;
        bitnet_status st = fmt == BENCH_FMT_JSON || fmt == BENCH_FMT_JSONL ? bitnet_devices_json(&text) : bitnet_devices_text(&text);
        if (st) { rc = tool_fail(st, "listing devices"); goto cleanup; }
        fputs(text, stdout); /* as bitnet-info --devices prints it */
        if (*text && text[strlen(text) - 1] != '\n') putchar('\n');
        free(text);
        rc = fflush(stdout) ? EXIT_IO : EXIT_OK;
        goto cleanup;
    }

    if (a_from->count) { /* results measured elsewhere (a machine without gnuplot): report them */
        FILE *in = NULL;
        if ((rc = tool_in_open(a_from->filename[0], &in))) goto cleanup;
        rc = bench_read_json(in, a_from->filename[0], &rows.v, &rows.n, devs, &ndev, MAX_DEVS);
        tool_in_close(in);
        if (rc) goto cleanup;
        for (size_t i = 0; i < rows.n; i++)
            if (strcmp(rows.v[i].check, "FAIL") == 0 || strcmp(rows.v[i].check, "error") == 0) worst = EXIT_FAIL;
        goto report;
    }

    /* devices */
    const char *devspec = dev.device->count ? dev.device->sval[0] : getenv("BITNET_DEVICE");
    ndev = bench_split(devspec && *devspec ? devspec : "cpu", devnames, MAX_DEVS);
    if (ndev == 0) { msg_err("--device: empty list"); goto cleanup; }
    for (size_t d = 0; d < ndev; d++) {
        bitnet_status st = bitnet_backend_create(&bes[d], devnames[d], threads);
        if (st) {
            rc = tool_fail(st, "cannot use device '%s'", devnames[d]);
            goto cleanup;
        }
        devs[d] = (bench_device){.copy_gbs = NAN, .read_gbs = NAN, .peak_gbs = NAN};
        snprintf(devs[d].spec, sizeof devs[d].spec, "%s", devnames[d]);
        snprintf(devs[d].describe, sizeof devs[d].describe, "%s", bitnet_backend_describe(bes[d]));
        msg_info("device %s: %s", devnames[d], devs[d].describe);
    }
    if (a_cal->count) {
        rc = EXIT_OK;
        for (size_t d = 0; d < ndev; d++) {
            char report[8192] = "";
            bitnet_status st = bitnet_backend_calibrate(bes[d], report, sizeof report);
            if (st == BITNET_E_UNSUPPORTED) { /* the CPU alone has nothing to calibrate */
                printf("%s: %s\nnot calibrated: %s\n", devnames[d], devs[d].describe, bitnet_error_detail());
                continue;
            }
            if (st) { rc = tool_fail(st, "calibrating %s", devnames[d]); goto cleanup; }
            printf("%s: %s\n%s%s", devnames[d], devs[d].describe, report,
                   *report && report[strlen(report) - 1] != '\n' ? "\n" : "");
        }
        if (fflush(stdout)) rc = EXIT_IO;
        goto cleanup;
    }

    /* ops, shapes, tokens */
    if (a_op->count) {
        for (int i = 0; i < a_op->count; i++) {
            size_t got = bench_split(a_op->sval[i], opnames + nops, MAX_OPS - nops);
            for (size_t j = nops; j < nops + got; j++) {
                if (!(ops[j] = bench_op_find(opnames[j]))) {
                    const bench_op *all[MAX_OPS];
                    size_t na = bench_op_all(all, MAX_OPS);
                    msg_err("--op: unknown op '%s'; this build has:", opnames[j]);
                    for (size_t k = 0; k < na; k++) fprintf(stderr, " %s", all[k]->name);
                    fputc('\n', stderr);
                    goto cleanup;
                }
            }
            nops += got;
        }
    } else {
        nops = bench_op_all(ops, MAX_OPS);
    }
    for (int i = 0; i < a_shape->count; i++) {
        char list[MAX_SHAPES][BENCH_NAME];
        size_t got = bench_split(a_shape->sval[i], list, MAX_SHAPES);
        for (size_t j = 0; j < got; j++)
            if (add_shape(shapes, &nshapes, list[j])) {
                msg_err("--shape: '%s' is not MxK or N (positive; M, K at most 2^24; at most 2^34 elements)", list[j]);
                goto cleanup;
            }
    }
    for (int i = 0; i < a_sweep->count; i++)
        if (add_sweep(shapes, &nshapes, a_sweep->sval[i])) {
            msg_err("--sweep: '%s' is not A:B:xF or A:B:+S with 0 < A <= B (or too many sizes)", a_sweep->sval[i]);
            goto cleanup;
        }
    for (int i = 0; i < a_model->count; i++)
        if ((rc = add_model(shapes, &nshapes, a_model->filename[i]))) goto cleanup;
    rc = EXIT_USAGE;
    if (nshapes == 0) {
        if (a_model->count) { msg_err("--model: no 2-D tensor found"); rc = EXIT_FAIL; goto cleanup; }
        add_shape(shapes, &nshapes, "4096x4096");
    }
    ntok = bench_split(a_tokens->count ? a_tokens->sval[0] : "1", toknames, MAX_TOKENS);
    for (size_t i = 0; i < ntok; i++)
        if (parse_u64(toknames[i], &tokens[i]) || tokens[i] > (1u << 20)) {
            msg_err("--tokens: '%s' is not a positive count", toknames[i]);
            goto cleanup;
        }
    if (ntok == 0) { msg_err("--tokens: empty list"); goto cleanup; }
    char variants[MAX_OPS][BENCH_MAX_VARIANTS][BENCH_NAME];
    size_t nvar[MAX_OPS];
    for (size_t i = 0; i < nops; i++) {
        nvar[i] = ops[i]->variants ? ops[i]->variants(&o, variants[i], BENCH_MAX_VARIANTS) : 1;
        if (!ops[i]->variants) variants[i][0][0] = 0;
        if (nvar[i] == 0) goto cleanup;
    }
    const char *baseline = a_base->count ? a_base->sval[0] : "cpu";

    /* rooflines, once per device, before anything else runs */
    for (size_t d = 0; d < ndev; d++) {
        progress("roofline", "", devnames[d], 0);
        /* The library keeps the best of several runs.  Unless --roofline-size
         * was given, the buffers grow (x4, up to 4 GiB) while one copy takes
         * under 2 ms, so that launch overhead stays small on fast devices;
         * a size the device cannot hold ends the growth. */
        uint64_t bytes = o.roof_bytes;
        bitnet_status st = bitnet_backend_bandwidth(bes[d], bytes, &devs[d].copy_gbs, &devs[d].read_gbs);
        while (!st && !a_roof->count && bytes < 4096 * MIB && 2.0 * (double)bytes / (devs[d].copy_gbs * 1e6) < 2.0) {
            double c = 0, r = 0;
            bytes *= 4;
            if (bitnet_backend_bandwidth(bes[d], bytes, &c, &r)) break;
            devs[d].copy_gbs = fmax(devs[d].copy_gbs, c);
            devs[d].read_gbs = fmax(devs[d].read_gbs, r);
        }
        msg_info("%s: roofline over %llu MiB", devnames[d], (unsigned long long)(bytes / MIB));
        if (st) {
            msg_warn("%s: no roofline: %s (%s)", devnames[d], bitnet_strerror(st), bitnet_error_detail());
            devs[d].copy_gbs = devs[d].read_gbs = NAN;
        } else {
            devs[d].peak_gbs = fmax(devs[d].copy_gbs, devs[d].read_gbs);
        }
    }

    /* measure */
    size_t count = 0;
    for (size_t i = 0; i < nops; i++) {
        const bench_op *op = ops[i];
        for (size_t d = 0; d < (op->host_only ? 1 : ndev); d++) {
            if (op->device_only && strncmp(devnames[d], "cpu", 3) == 0) continue;
            for (size_t s = 0; s < nshapes; s++)
                for (size_t v = 0; v < nvar[i]; v++)
                    for (size_t t = 0; t < (op->uses_tokens ? ntok : 1); t++) {
                        uint64_t m = shapes[s].m, k = shapes[s].k;
                        if (op->shape == BENCH_SHAPE_VECTOR && shapes[s].single) k = 1;
                        if (op->shape == BENCH_SHAPE_MATRIX && shapes[s].single && m > MAX_ELEMS / m) {
                            if (v == 0 && t == 0)
                                msg_warn("%s: %llux%llu is too large, skipped", op->name, (unsigned long long)m,
                                         (unsigned long long)m);
                            continue;
                        }
                        bench_row *r = row_push(&rows);
                        if (!r) { msg_err("out of memory"); rc = EXIT_FAIL; goto cleanup; }
                        char label[64];
                        snprintf(label, sizeof label, "%llux%llu", (unsigned long long)m, (unsigned long long)k);
                        progress(op->name, label, op->host_only ? "host" : devnames[d], count++);
                        int mrc = bench_measure(op, &o, op->host_only ? NULL : bes[d], op->host_only ? "host" : devnames[d],
                                                m, k, op->uses_tokens ? tokens[t] : 1, variants[i][v], r);
                        r->dev = op->host_only ? -1 : (int)d;
                        print_stats(&dev, op->host_only ? NULL : bes[d], r);
                        if (mrc > worst) worst = mrc;
                    }
        }
    }

    /* roofline percentages and speedups */
    for (size_t i = 0; i < rows.n; i++) {
        bench_row *r = &rows.v[i];
        int d = r->dev;
        if (d < 0)
            for (size_t j = 0; j < ndev; j++)
                if (strcmp(devnames[j], "cpu") == 0) d = (int)j;
        if (bench_op_find(r->op)->device_only) continue; /* transfers are bounded by the bus, not memory */
        if (d >= 0 && !r->ran_on_cpu && !isnan(r->gbs) && devs[d].peak_gbs > 0) r->pct = 100.0 * r->gbs / devs[d].peak_gbs;
    }
    if (strcmp(baseline, "none") != 0) {
        int blas = strcmp(baseline, "openblas") == 0;
        const char *bdev = blas ? "cpu" : baseline;
        const bench_op *mm = bench_op_find("matmul_f32");
        size_t nvisible = rows.n;
        for (size_t i = 0; i < nvisible; i++) {
            bench_row r = rows.v[i];
            const bench_op *op = bench_op_find(r.op);
            if (r.dev < 0 || isnan(r.med_ms) || (blas && (!op->has_baseline_blas || !mm))) continue;
            if (!blas && strcmp(r.device, bdev) == 0) { rows.v[i].speedup = 1.0; continue; }
            const char *bop = blas ? "matmul_f32" : r.op, *bvar = blas ? "" : r.variant;
            size_t j = 0;
            for (; j < rows.n; j++) {
                const bench_row *b = &rows.v[j];
                if (strcmp(b->device, bdev) == 0 && strcmp(b->op, bop) == 0 && strcmp(b->variant, bvar) == 0 &&
                    b->m == r.m && b->k == r.k && b->tokens == r.tokens)
                    break;
            }
            if (j == rows.n) { /* measure the baseline now, kept out of the output */
                bitnet_backend *be = NULL;
                for (size_t d = 0; d < ndev; d++)
                    if (strcmp(devnames[d], bdev) == 0) be = bes[d];
                if (!be && !base_be) {
                    bitnet_status st = bitnet_backend_create(&base_be, bdev, threads);
                    if (st) { rc = tool_fail(st, "--baseline: cannot use device '%s'", bdev); goto cleanup; }
                }
                if (!be) be = base_be;
                bench_row *b = row_push(&rows);
                if (!b) { msg_err("out of memory"); rc = EXIT_FAIL; goto cleanup; }
                progress(bop, r.shape, bdev, count++);
                int mrc = bench_measure(blas ? mm : op, &o, be, bdev, r.m, r.k, r.tokens, bvar, b);
                b->hidden = 1;
                b->dev = -2;
                if (mrc > worst) worst = mrc;
            }
            if (rows.v[j].med_ms > 0) rows.v[i].speedup = rows.v[j].med_ms / rows.v[i].med_ms;
        }
    }
    progress(NULL, NULL, NULL, 0);

report:;
    FILE *outf = stdout;
    tool_out out = {0};
    if (a_out->count && strcmp(a_out->filename[0], "-") != 0) {
        if ((rc = tool_out_open(&out, a_out->filename[0], 1))) goto cleanup;
        outf = out.f;
    }
    rc = bench_write(outf, fmt, rows.v, rows.n, devs, ndev);
    if (outf != stdout) {
        if (rc) tool_out_abort(&out);
        else rc = tool_out_commit(&out);
    } else if (fflush(stdout) || ferror(stdout)) {
        msg_err("write to standard output failed");
        rc = EXIT_IO;
    }
    if (rc) goto cleanup;
    if (a_plot->count && (rc = bench_plot(a_plot->filename[0], rows.v, rows.n, devs, ndev))) goto cleanup;
    if (fmt == BENCH_FMT_TABLE && tool_verbosity >= 1)
        for (size_t d = 0; d < ndev; d++)
            if (!isnan(devs[d].peak_gbs))
                fprintf(stderr, "%s: %s roofline: copy %.1f GB/s, read %.1f GB/s (%s)\n", tool_name, devs[d].spec,
                        devs[d].copy_gbs, devs[d].read_gbs, devs[d].describe);
    rc = worst;
cleanup:
    for (size_t d = 0; d < MAX_DEVS; d++) bitnet_backend_free(bes[d]);
    bitnet_backend_free(base_be);
    free(rows.v);
    arg_freetable(table, sizeof table / sizeof table[0]);
    return rc;
}
