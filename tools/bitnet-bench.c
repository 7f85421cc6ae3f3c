/*
 * bitnet-bench - times the library's ops on each device against the
 * device's measured roofline, checks every configuration against the CPU
 * reference, and reports a table (or Markdown, CSV, JSON) and a plot.
 * Flags -> plan (bitnet-bench/plan.c) -> run (run.c, method.c, op_*.c) ->
 * report (output.c, plot.c).
 */
#include "bitnet-bench/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1ull << 20)

static const char purpose[] =
    "Time the library's ops on each device against its measured memory roofline; every configuration is\n"
    "checked once against the CPU reference (a failed check makes the exit status 1).";

static int list_devices(int json)
{
    char *text = NULL;
    bitnet_status st = json ? bitnet_devices_json(&text) : bitnet_devices_text(&text);
    if (st) return tool_fail(st, "listing devices");
    fputs(text, stdout); /* as bitnet-info --devices prints it */
    if (*text && text[strlen(text) - 1] != '\n') putchar('\n');
    free(text);
    return fflush(stdout) ? EXIT_IO : EXIT_OK;
}

static int calibrate(const bench_devices *d)
{
    for (size_t i = 0; i < d->n; i++) {
        char report[8192] = "";
        bitnet_status st = bitnet_backend_calibrate(d->be[i], report, sizeof report);
        if (st == BITNET_E_UNSUPPORTED) { /* the CPU alone has nothing to calibrate */
            printf("%s: %s\nnot calibrated: %s\n", d->dev[i].spec, d->dev[i].describe, bitnet_error_detail());
            continue;
        }
        if (st) return tool_fail(st, "calibrating %s", d->dev[i].spec);
        printf("%s: %s\n%s%s", d->dev[i].spec, d->dev[i].describe, report,
               *report && report[strlen(report) - 1] != '\n' ? "\n" : "");
    }
    return fflush(stdout) ? EXIT_IO : EXIT_OK;
}

/* Results measured elsewhere (a machine without gnuplot). */
static int load_results(const char *path, bench_rows *rows, bench_devices *d, int *worst)
{
    FILE *in = NULL;
    int rc = tool_in_open(path, &in);
    if (rc) return rc;
    rc = bench_read_json(in, path, &rows->v, &rows->n, d->dev, &d->n, BENCH_MAX_DEVS);
    tool_in_close(in);
    for (size_t i = 0; i < rows->n; i++)
        if (strcmp(rows->v[i].check, "FAIL") == 0 || strcmp(rows->v[i].check, "error") == 0) *worst = EXIT_FAIL;
    return rc;
}

static int report(const char *out_path, bench_format fmt, const char *plot, const bench_rows *rows,
                  const bench_devices *d)
{
    FILE *outf = stdout;
    tool_out out = {0};
    int rc;
    if (out_path && strcmp(out_path, "-") != 0) {
        if ((rc = tool_out_open(&out, out_path, 1))) return rc;
        outf = out.f;
    }
    rc = bench_write(outf, fmt, rows->v, rows->n, d->dev, d->n);
    if (outf != stdout) {
        if (rc) tool_out_abort(&out);
        else rc = tool_out_commit(&out);
    } else if (fflush(stdout) || ferror(stdout)) {
        msg_err("write to standard output failed");
        rc = EXIT_IO;
    }
    if (!rc && plot) rc = bench_plot(plot, rows->v, rows->n, d->dev, d->n);
    if (!rc && fmt == BENCH_FMT_TABLE && tool_verbosity >= 1)
        for (size_t i = 0; i < d->n; i++)
            if (!isnan(d->dev[i].peak_gbs))
                fprintf(stderr, "%s: %s roofline: copy %.1f GB/s, read %.1f GB/s (%s)\n", tool_name, d->dev[i].spec,
                        d->dev[i].copy_gbs, d->dev[i].read_gbs, d->dev[i].describe);
    return rc;
}

int main(int argc, char **argv)
{
    tool_init("bitnet-bench");
    tool_std_args std = tool_std_args_new();
    tool_dev_args dev = tool_dev_args_new();
    if (dev.device) { /* a list here: every device is measured */
        dev.device->hdr.datatype = "DEV[,DEV...]";
        dev.device->hdr.glossary = "devices to measure: cpu, opencl, opencl:N, auto (default: $BITNET_DEVICE, else cpu)";
    }
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
    struct arg_int *a_llc = arg_int0(NULL, "llc", "MiB", "assumed last-level cache (default the host's, at least 64)");
    struct arg_int *a_maxmem = arg_int0(NULL, "max-mem", "MiB", "bound on rotated buffers (default half the memory)");
    struct arg_int *a_roof = arg_int0(NULL, "roofline-size", "MiB", "bytes of the roofline copy (default 256 or 4 x --llc, grown on fast devices)");
    struct arg_str *a_timer = arg_str0(NULL, "timer", "auto|e2e", "auto: kernel time on OpenCL; e2e: always end to end");
    struct arg_lit *a_nocheck = arg_lit0(NULL, "no-check", "skip the reference checks");
    struct arg_lit *a_keep =
        arg_lit0(NULL, "keep-weights", "bitlinear, matmul_f32, quantize_weights: weights stay on the device");
    struct arg_file *a_net = arg_file0(NULL, "net", "FILE", "the ternary MLP the mlp op runs end to end (layers.N.*)");
    struct arg_lit *a_resident =
        arg_lit0(NULL, "resident", "bitlinear, quantize_weights: operands in device buffers, one read per call");
    struct arg_int *a_chain = arg_int0(NULL, "chain", "N",
                                       "with --resident: N calls back to back, one wait; a sample is their mean");
    struct arg_lit *a_energy = arg_lit0(NULL, "energy", "read energy counters (RAPL, NVML) around each configuration");
    struct arg_file *a_rapl = arg_file0(NULL, "rapl-dir", "DIR",
                                        "with --energy: where the RAPL domains are (default /sys/class/powercap)");
    struct arg_str *a_format = arg_str0(NULL, "format", "table|md|csv|json|jsonl", "output format (default table)");
    struct arg_file *a_out = arg_file0("o", "output", "FILE", "write results to FILE (default stdout)");
    struct arg_file *a_plot = arg_file0(NULL, "plot", "FILE.png|FILE.svg", "plot GB/s against size with gnuplot");
    struct arg_file *a_from = arg_file0(NULL, "from", "FILE.json", "report earlier --format json results (no measuring)");
    struct arg_lit *a_cal = arg_lit0(NULL, "calibrate", "calibrate auto-dispatch for each device and print the report");
    struct arg_lit *a_list = arg_lit0(NULL, "list-devices", "list devices (as bitnet-info --devices) and exit");
    struct arg_end *end = arg_end(20);
    void *table[] = {a_op, a_shape, a_sweep, a_model, a_tokens, a_scale, dev.device, dev.threads, a_base, a_reps,
                     a_time, a_warm, a_maxreps, a_seed, a_llc, a_maxmem, a_roof, a_timer, a_nocheck, a_keep, a_resident, a_chain,
                     a_net, a_energy, a_rapl, a_format, a_out, a_plot, a_from, a_cal, a_list, dev.stats, std.help, std.version, std.quiet,
                     std.verbose, std.force, end};
    bench_devices devs = {0};
    bench_rows rows = {0};
    bench_plan *plan = calloc(1, sizeof *plan);
    bench_format fmt = BENCH_FMT_TABLE;
    int done, rc, worst = EXIT_OK;

    if ((rc = tool_parse(argc, argv, table, &std, purpose, &done)) || done) goto cleanup;
    if (!plan) {
        msg_err("out of memory");
        rc = EXIT_FAIL;
        goto cleanup;
    }
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
    if (a_maxmem->count) o.max_mem = (uint64_t)(a_maxmem->ival[0] > 0 ? a_maxmem->ival[0] : 0) * MIB;
    if (a_llc->count) {
        o.llc_bytes = (uint64_t)(a_llc->ival[0] > 0 ? a_llc->ival[0] : 0) * MIB;
    } else { /* the host's, so that a server's L3 of hundreds of MiB is rotated past */
        uint64_t host = bench_host_llc("/sys/devices/system/cpu");
        const char *from = "sysfs";
#ifdef _SC_LEVEL3_CACHE_SIZE
        if (host == 0) { /* no cache directories (some containers): the C library's, from CPUID (one instance) */
            const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
            host = l3 > 0 ? (uint64_t)l3 : 0;
            from = "sysconf";
        }
#endif
        if (host > o.llc_bytes) o.llc_bytes = host < 65536 * MIB ? host : 65536 * MIB;
        msg_info("last-level cache: %llu MiB (%s: %llu MiB%s)", (unsigned long long)(o.llc_bytes / MIB), from,
                 (unsigned long long)(host / MIB), host > 64 * MIB ? "" : "; at least 64 assumed");
    }
    if (a_roof->count) {
        o.roof_bytes = (uint64_t)(a_roof->ival[0] > 0 ? a_roof->ival[0] : 0) * MIB;
    } else if (4 * o.llc_bytes > o.roof_bytes) { /* a read past the cache, where memory allows its two buffers */
        const uint64_t want = 4 * o.llc_bytes, room = o.max_mem / 2;
        if (room >= want) o.roof_bytes = want;
        else if (room > o.roof_bytes) o.roof_bytes = room;
    }
    if (a_scale->count) o.scales = a_scale->sval[0];
    o.no_check = a_nocheck->count > 0;
    o.keep_weights = a_keep->count > 0;
    o.resident = a_resident->count > 0;
    if (a_chain->count) {
        if (a_chain->ival[0] < 1 || !o.resident) {
            msg_err("--chain N needs N >= 1 and --resident (only device-resident calls can run without a wait)");
            goto cleanup;
        }
        o.chain = a_chain->ival[0];
    }
    if (a_net->count) o.net = a_net->filename[0];
    o.energy = a_energy->count > 0;
    const char *rapl_dir = a_rapl->count ? a_rapl->filename[0] : "/sys/class/powercap";
    if (a_rapl->count && !o.energy) {
        msg_err("--rapl-dir is for --energy");
        goto cleanup;
    }
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
    const char *out_path = a_out->count ? a_out->filename[0] : NULL, *plot = a_plot->count ? a_plot->filename[0] : NULL;

    if ((out_path && (rc = tool_out_check(out_path))) || (plot && (rc = tool_out_check(plot)))) goto cleanup;
    if (a_list->count) {
        rc = list_devices(fmt == BENCH_FMT_JSON || fmt == BENCH_FMT_JSONL);
        goto cleanup;
    }
    if (a_from->count) {
        if (!(rc = load_results(a_from->filename[0], &rows, &devs, &worst))) rc = report(out_path, fmt, plot, &rows, &devs);
        if (!rc) rc = worst;
        goto cleanup;
    }

    /* plan: ops, shapes, tokens */
    rc = a_op->count ? EXIT_OK : bench_plan_ops(plan, NULL, &o);
    for (int i = 0; i < a_op->count && !rc; i++) rc = bench_plan_ops(plan, a_op->sval[i], &o);
    if (rc) goto cleanup;
    for (int i = 0; i < a_shape->count; i++)
        if ((rc = bench_plan_shapes(plan, a_shape->sval[i]))) goto cleanup;
    for (int i = 0; i < a_sweep->count; i++)
        if ((rc = bench_plan_sweep(plan, a_sweep->sval[i]))) goto cleanup;
    for (int i = 0; i < a_model->count; i++)
        if ((rc = bench_plan_model(plan, a_model->filename[i]))) goto cleanup;
    if (plan->nshapes == 0 && (rc = bench_plan_shapes(plan, "4096x4096"))) goto cleanup;
    if ((rc = bench_plan_tokens(plan, a_tokens->count ? a_tokens->sval[0] : "1"))) goto cleanup;

    /* devices */
    const char *devspec = dev.device->count ? dev.device->sval[0] : getenv("BITNET_DEVICE");
    if ((rc = bench_devices_open(&devs, devspec && *devspec ? devspec : "cpu", dev.threads->count ? dev.threads->ival[0] : 0)))
        goto cleanup;
    devs.stats = dev.stats->count > 0;
    if (a_cal->count) {
        rc = calibrate(&devs);
        goto cleanup;
    }

    /* measure: rooflines first, then every configuration, then comparisons */
    if (o.energy) {
        /* counters tick every millisecond (RAPL) to every 100 ms (NVML): time enough calls */
        if (o.min_time_s < 2.0) o.min_time_s = 2.0;
        bench_progress("idle power", "", "");
        bench_energy_open(2.0, rapl_dir);
        if (*bench_energy_sources()) msg_info("energy counters: %s", bench_energy_sources());
        else msg_warn("--energy: no energy counter exposed here (no readable RAPL under %s, no NVML)", rapl_dir);
    }
    bench_rooflines(&devs, o.roof_bytes, !a_roof->count, o.llc_bytes);
    worst = bench_run(plan, &o, &devs, &rows);
    rc = bench_compare(a_base->count ? a_base->sval[0] : "cpu", &o, &devs, &rows);
    if (rc > worst) worst = rc;
    bench_progress(NULL, NULL, NULL);
    rc = report(out_path, fmt, plot, &rows, &devs);
    if (!rc) rc = worst;
cleanup:
    bench_energy_close();
    bench_devices_close(&devs);
    free(rows.v);
    free(plan);
    arg_freetable(table, sizeof table / sizeof table[0]);
    return rc;
}
