/*
 * run.c - one run: the devices and their rooflines, every configuration of
 * the plan measured on every device, then the roofline percentages and the
 * speedups against the baseline (measured on the side when the baseline
 * device or op is not part of the run; those rows stay hidden).
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1ull << 20)

void bench_progress(const char *what, const char *shape, const char *device)
{
    static size_t count;
    if (tool_verbosity < 1 || !isatty(STDERR_FILENO)) return;
    if (!what) fprintf(stderr, "\r\033[K");
    else fprintf(stderr, "\r\033[K[%zu] %s %s on %s ...", ++count, what, shape, device);
    fflush(stderr);
}

int bench_devices_open(bench_devices *d, const char *list, int threads)
{
    char names[BENCH_MAX_DEVS][BENCH_NAME];
    d->threads = threads;
    d->n = bench_split(list, names, BENCH_MAX_DEVS);
    if (d->n == 0) {
        msg_err("--device: empty list");
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < d->n; i++) {
        bench_device *dv = &d->dev[i];
        bitnet_status st = bitnet_backend_create(&d->be[i], names[i], threads);
        if (st) return tool_fail(st, "cannot use device '%s'", names[i]);
        *dv = (bench_device){.copy_gbs = NAN, .read_gbs = NAN, .peak_gbs = NAN, .roof_mib = NAN, .llc_mib = NAN};
        memcpy(dv->spec, names[i], sizeof dv->spec); /* both BENCH_NAME bytes */
        snprintf(dv->describe, sizeof dv->describe, "%s", bitnet_backend_describe(d->be[i]));
        msg_info("device %s: %s", dv->spec, dv->describe);
    }
    return EXIT_OK;
}

void bench_devices_close(bench_devices *d)
{
    for (size_t i = 0; i < BENCH_MAX_DEVS; i++) {
        bitnet_backend_free(d->be[i]);
        d->be[i] = NULL;
    }
    bitnet_backend_free(d->baseline);
    d->baseline = NULL;
}

void bench_rooflines(bench_devices *d, uint64_t bytes0, int grow, uint64_t llc_bytes)
{
    for (size_t i = 0; i < d->n; i++) {
        bench_device *dv = &d->dev[i];
        uint64_t bytes = bytes0;
        dv->llc_mib = (double)llc_bytes / (double)MIB;
        dv->roof_mib = NAN;
        bench_progress("roofline", "", dv->spec);
        /* The library keeps the best of several runs.  When allowed, the
         * buffers grow (x4, up to 4 GiB) while one copy takes under 2 ms, so
         * that launch overhead stays small on fast devices; a size the device
         * cannot hold ends the growth. */
        bitnet_status st = bitnet_backend_bandwidth(d->be[i], bytes, &dv->copy_gbs, &dv->read_gbs);
        while (!st && grow && bytes <= 1024 * MIB && 2.0 * (double)bytes / (dv->copy_gbs * 1e6) < 2.0) {
            double c = 0, r = 0;
            bytes *= 4;
            if (bitnet_backend_bandwidth(d->be[i], bytes, &c, &r)) break;
            dv->copy_gbs = fmax(dv->copy_gbs, c);
            dv->read_gbs = fmax(dv->read_gbs, r);
        }
        if (st) {
            msg_warn("%s: no roofline: %s (%s)", dv->spec, bitnet_strerror(st), bitnet_error_detail());
            dv->copy_gbs = dv->read_gbs = NAN;
        } else {
            dv->peak_gbs = fmax(dv->copy_gbs, dv->read_gbs);
            dv->roof_mib = (double)bytes / (double)MIB;
            msg_info("%s: roofline over %llu MiB", dv->spec, (unsigned long long)(bytes / MIB));
        }
    }
}

static bench_row *row_push(bench_rows *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        bench_row *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            msg_err("out of memory");
            return NULL;
        }
        l->v = v, l->cap = cap;
    }
    return &l->v[l->n++];
}

static void print_stats(const bench_devices *d, bitnet_backend *be, const bench_row *r)
{
    char buf[16384];
    if (!d->stats || !be) return;
    bitnet_backend_stats_format(be, buf, sizeof buf);
    fprintf(stderr, "%s: stats for %s %s %s on %s:\n%s", tool_name, r->op, r->variant, r->shape, r->device, buf);
}

/* Measures one configuration into a new row; returns its exit status. */
static int measure(bench_rows *rows, const bench_op *op, const bench_opts *o, bitnet_backend *be, const char *device,
                   int dev, uint64_t m, uint64_t k, uint64_t tokens, const char *variant, const bench_devices *d)
{
    char label[64];
    bench_row *r = row_push(rows);
    if (!r) return EXIT_FAIL;
    snprintf(label, sizeof label, "%llux%llu", (unsigned long long)m, (unsigned long long)k);
    bench_progress(op->name, label, device);
    int rc = bench_measure(op, o, be, device, m, k, tokens, variant, r);
    r->dev = dev;
    print_stats(d, be, r);
    return rc;
}

int bench_run(const bench_plan *p, const bench_opts *o, bench_devices *d, bench_rows *rows)
{
    int worst = EXIT_OK;
    for (size_t i = 0; i < p->nops; i++) {
        const bench_op *op = p->ops[i];
        if (op->device_only && d->n > 0) {
            size_t on_cpu = 0;
            for (size_t j = 0; j < d->n; j++) on_cpu += strncmp(d->dev[j].spec, "cpu", 3) == 0;
            if (on_cpu == d->n) msg_warn("%s: not run on the CPU backend (no host<->device copies)", op->name);
        }
        if (op->net && !o->net) {
            msg_warn("%s: needs --net FILE, skipped", op->name);
            continue;
        }
        for (size_t j = 0; j < (op->host_only ? 1 : d->n); j++) {
            if (op->device_only && strncmp(d->dev[j].spec, "cpu", 3) == 0) continue;
            if (op->net) { /* one configuration per token count; the shape names the file */
                for (size_t t = 0; t < p->ntok; t++) {
                    int rc = measure(rows, op, o, d->be[j], d->dev[j].spec, (int)j, 1, 1, p->tokens[t], "", d);
                    const char *base = strrchr(o->net, '/');
                    snprintf(rows->v[rows->n - 1].shape, sizeof rows->v[0].shape, "%.63s", base ? base + 1 : o->net);
                    if (rc > worst) worst = rc;
                }
                continue;
            }
            for (size_t s = 0; s < p->nshapes; s++)
                for (size_t v = 0; v < p->nvar[i]; v++)
                    for (size_t t = 0; t < (op->uses_tokens ? p->ntok : 1); t++) {
                        uint64_t m = p->shapes[s].m, k = p->shapes[s].k;
                        if (op->shape == BENCH_SHAPE_VECTOR && p->shapes[s].single) k = 1;
                        if (op->shape == BENCH_SHAPE_MATRIX && p->shapes[s].single && m > BENCH_MAX_ELEMS / m) {
                            if (v == 0 && t == 0)
                                msg_warn("%s: %llux%llu is too large, skipped", op->name, (unsigned long long)m,
                                         (unsigned long long)m);
                            continue;
                        }
                        int rc = measure(rows, op, o, op->host_only ? NULL : d->be[j],
                                         op->host_only ? "host" : d->dev[j].spec, op->host_only ? -1 : (int)j, m, k,
                                         op->uses_tokens ? p->tokens[t] : 1, p->variants[i][v], d);
                        if (rc > worst) worst = rc;
                    }
        }
    }
    return worst;
}

static void peaks(const bench_devices *d, bench_rows *rows)
{
    int cpu = -1;
    for (size_t j = 0; j < d->n; j++)
        if (strcmp(d->dev[j].spec, "cpu") == 0) cpu = (int)j;
    for (size_t i = 0; i < rows->n; i++) {
        bench_row *r = &rows->v[i];
        int dev = r->dev == -1 ? cpu : r->dev; /* host ops: the CPU's roofline */
        if (bench_op_find(r->op)->device_only) continue; /* transfers are bounded by the bus, not memory */
        if (dev >= 0 && !r->ran_on_cpu && !isnan(r->gbs) && d->dev[dev].peak_gbs > 0)
            r->pct = 100.0 * r->gbs / d->dev[dev].peak_gbs;
    }
}

int bench_compare(const char *baseline, const bench_opts *o, bench_devices *d, bench_rows *rows)
{
    int worst = EXIT_OK;
    peaks(d, rows);
    if (strcmp(baseline, "none") == 0) return EXIT_OK;
    const int blas = strcmp(baseline, "openblas") == 0;
    const char *bdev = blas ? "cpu" : baseline;
    const bench_op *mm = bench_op_find("matmul_f32");
    const size_t visible = rows->n;
    for (size_t i = 0; i < visible; i++) {
        const bench_row r = rows->v[i]; /* a copy: measuring may move the rows */
        const bench_op *op = bench_op_find(r.op);
        if (r.dev < 0 || isnan(r.med_ms) || (blas && (!op->has_baseline_blas || !mm))) continue;
        if (!blas && strcmp(r.device, bdev) == 0) {
            rows->v[i].speedup = 1.0;
            continue;
        }
        const bench_op *bop = blas ? mm : op;
        const char *bvar = blas ? "" : r.variant;
        size_t j = 0;
        while (j < rows->n && !(strcmp(rows->v[j].device, bdev) == 0 && strcmp(rows->v[j].op, bop->name) == 0 &&
                                strcmp(rows->v[j].variant, bvar) == 0 && rows->v[j].m == r.m &&
                                rows->v[j].k == r.k && rows->v[j].tokens == r.tokens))
            j++;
        if (j == rows->n) { /* measure the baseline now, kept out of the output */
            bitnet_backend *be = NULL;
            for (size_t k = 0; k < d->n; k++)
                if (strcmp(d->dev[k].spec, bdev) == 0) be = d->be[k];
            if (!be && !d->baseline) {
                bitnet_status st = bitnet_backend_create(&d->baseline, bdev, d->threads);
                if (st) return tool_fail(st, "--baseline: cannot use device '%s'", bdev);
            }
            if (!be) be = d->baseline;
            int rc = measure(rows, bop, o, be, bdev, -2, r.m, r.k, r.tokens, bvar, d);
            if (rc > worst) worst = rc;
            if (j == rows->n) return EXIT_FAIL; /* out of memory */
            rows->v[j].hidden = 1;
        }
        if (rows->v[j].med_ms > 0) rows->v[i].speedup = rows->v[j].med_ms / rows->v[i].med_ms;
    }
    return worst;
}
