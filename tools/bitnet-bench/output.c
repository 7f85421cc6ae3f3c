/*
 * output.c - result rows as an aligned table (default), Markdown, CSV, JSON
 * (one document) or JSON Lines (one object per row).  Human formats show
 * times with units; machine formats give milliseconds and raw numbers, with
 * an empty cell (CSV) or null (JSON) where a column does not apply.
 */
#include "bench.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

/* Columns 17.. are the energy columns (--energy): shown by the human
 * formats only when asked for; always present in CSV and JSON. */
enum { NCOL = 23, NBASE = 17, CELL = 192 };

static const char *const human_head[NCOL] = {"op", "variant", "device", "shape", "tokens", "time", "min", "max",
                                             "spread", "reps", "timer", "e2e", "GB/s", "GOP/s", "%peak",
                                             "speedup", "check", "W", "idle W", "mJ/op", "mJ/op>idle",
                                             "mJ/token", "mJ/token>idle"};
static const char *const csv_head[] = {"op", "variant", "device", "shape", "m", "k", "tokens", "time_ms", "min_ms",
                                       "max_ms", "spread", "reps", "timer", "e2e_ms", "bytes", "gbs", "gops",
                                       "pct_peak", "speedup", "check", "note", "sets", "watts", "idle_watts",
                                       "j_op", "j_op_above_idle", "j_token", "j_token_above_idle"};

/* Joules per token of a row with tokens (NAN otherwise). */
static double per_token(const bench_row *r, double j)
{
    return r->has_tokens && r->tokens > 0 ? j / (double)r->tokens : NAN;
}
enum { NCSV = sizeof csv_head / sizeof csv_head[0] };

int bench_format_parse(const char *s, bench_format *f)
{
    static const char *const names[] = {"table", "md", "csv", "json", "jsonl"};
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *f = (bench_format)i;
            return 0;
        }
    return 1;
}

static void num(char *out, double v, const char *fmt)
{
    if (isnan(v)) snprintf(out, CELL, "-");
    else snprintf(out, CELL, fmt, v);
}

static void human_cells(const bench_row *r, char c[NCOL][CELL])
{
    snprintf(c[0], CELL, "%s", r->op);
    snprintf(c[1], CELL, "%s", *r->variant ? r->variant : "-");
    snprintf(c[2], CELL, "%s", r->device);
    snprintf(c[3], CELL, "%s", r->shape);
    if (r->has_tokens) snprintf(c[4], CELL, "%llu", (unsigned long long)r->tokens);
    else snprintf(c[4], CELL, "-");
    bench_fmt_time(r->med_ms, c[5], CELL);
    bench_fmt_time(r->min_ms, c[6], CELL);
    bench_fmt_time(r->max_ms, c[7], CELL);
    num(c[8], r->spread * 100, "%.1f%%");
    snprintf(c[9], CELL, "%d", r->reps);
    snprintf(c[10], CELL, "%s", r->timer);
    bench_fmt_time(r->e2e_ms, c[11], CELL);
    num(c[12], r->gbs, r->gbs < 10 ? "%.3f" : "%.1f");
    num(c[13], r->gops, r->gops < 10 ? "%.3f" : "%.1f");
    num(c[14], r->pct, "%.0f%%");
    num(c[15], r->speedup, "%.2fx");
    snprintf(c[16], CELL, "%s", r->check);
    num(c[17], r->watts, "%.1f");
    num(c[18], r->idle_w, "%.1f");
    num(c[19], r->j_op * 1e3, "%.4g");
    num(c[20], r->j_op_above * 1e3, "%.4g");
    num(c[21], per_token(r, r->j_op) * 1e3, "%.4g");
    num(c[22], per_token(r, r->j_op_above) * 1e3, "%.4g");
}

static void write_human(FILE *f, int md, const bench_row *rows, size_t n)
{
    char c[NCOL][CELL];
    size_t w[NCOL];
    int ncol = NBASE;
    for (size_t i = 0; i < n; i++)
        if (rows[i].energy && !rows[i].hidden) ncol = NCOL;
    for (int j = 0; j < NCOL; j++) w[j] = strlen(human_head[j]);
    for (size_t i = 0; i < n; i++) {
        if (rows[i].hidden) continue;
        human_cells(&rows[i], c);
        for (int j = 0; j < NCOL; j++)
            if (strlen(c[j]) > w[j]) w[j] = strlen(c[j]);
    }
    /* text columns left-aligned, numbers right-aligned */
    for (size_t i = 0; i <= n; i++) {
        if (i > 0 && rows[i - 1].hidden) continue;
        if (i > 0) human_cells(&rows[i - 1], c);
        for (int j = 0; j < ncol; j++) {
            const char *s = i ? c[j] : human_head[j];
            int left = j <= 3 || j == 10 || j == NBASE - 1;
            if (md) fprintf(f, "| %*s %s", left ? -(int)w[j] : (int)w[j], s, j == ncol - 1 ? "|" : "");
            else {
                int width = j == ncol - 1 && !(i > 0 && *rows[i - 1].note) ? 0 : (int)w[j];
                fprintf(f, "%*s%s", left ? -width : width, s, j == ncol - 1 ? "" : "  ");
            }
        }
        if (i > 0 && *rows[i - 1].note && !md) fprintf(f, "  # %s", rows[i - 1].note);
        fputc('\n', f);
        if (i == 0 && md) {
            for (int j = 0; j < ncol; j++) {
                int left = j <= 3 || j == 10 || j == NBASE - 1;
                fprintf(f, "|%s", left ? ":" : "-");
                for (size_t k = 0; k < w[j]; k++) fputc('-', f);
                fprintf(f, "%s", left ? "-" : ":");
            }
            fprintf(f, "|\n");
        }
    }
    if (md) { /* the notes: a list after a blank line, each item a line of its own */
        int first = 1;
        for (size_t i = 0; i < n; i++)
            if (!rows[i].hidden && *rows[i].note) {
                fprintf(f, "%s- %s %s on %s: %s\n", first ? "\n" : "", rows[i].op, rows[i].shape, rows[i].device,
                        rows[i].note);
                first = 0;
            }
    }
}

static void csv_field(FILE *f, const char *s, int last)
{
    if (strpbrk(s, ",\"\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"') fputc('"', f);
            fputc(*s == '\n' ? ' ' : *s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

static void csv_num(FILE *f, double v, const char *fmt)
{
    char b[64] = "";
    if (!isnan(v)) snprintf(b, sizeof b, fmt, v);
    csv_field(f, b, 0);
}

static void write_csv(FILE *f, const bench_row *rows, size_t n)
{
    for (int j = 0; j < NCSV; j++) csv_field(f, csv_head[j], j == NCSV - 1);
    for (size_t i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        char b[64];
        if (r->hidden) continue;
        csv_field(f, r->op, 0);
        csv_field(f, r->variant, 0);
        csv_field(f, r->device, 0);
        csv_field(f, r->shape, 0);
        csv_num(f, (double)r->m, "%.0f");
        csv_num(f, (double)r->k, "%.0f");
        csv_num(f, r->has_tokens ? (double)r->tokens : NAN, "%.0f");
        csv_num(f, r->med_ms, "%.6g");
        csv_num(f, r->min_ms, "%.6g");
        csv_num(f, r->max_ms, "%.6g");
        csv_num(f, r->spread, "%.4g");
        snprintf(b, sizeof b, "%d", r->reps);
        csv_field(f, b, 0);
        csv_field(f, r->timer, 0);
        csv_num(f, r->e2e_ms, "%.6g");
        csv_num(f, r->bytes, "%.0f");
        csv_num(f, r->gbs, "%.6g");
        csv_num(f, r->gops, "%.6g");
        csv_num(f, r->pct, "%.4g");
        csv_num(f, r->speedup, "%.4g");
        csv_field(f, r->check, 0);
        csv_field(f, r->note, 0);
        snprintf(b, sizeof b, "%d", r->sets);
        csv_field(f, b, 0);
        csv_num(f, r->watts, "%.6g");
        csv_num(f, r->idle_w, "%.6g");
        csv_num(f, r->j_op, "%.6g");
        csv_num(f, r->j_op_above, "%.6g");
        csv_num(f, per_token(r, r->j_op), "%.6g");
        b[0] = 0;
        if (!isnan(per_token(r, r->j_op_above))) snprintf(b, sizeof b, "%.6g", per_token(r, r->j_op_above));
        csv_field(f, b, 1);
    }
}

static json_t *jnum(double v) { return isnan(v) ? json_null() : json_real(v); }

static json_t *row_json(const bench_row *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "op", json_string(r->op));
    json_object_set_new(o, "variant", json_string(r->variant));
    json_object_set_new(o, "device", json_string(r->device));
    json_object_set_new(o, "shape", json_string(r->shape));
    json_object_set_new(o, "m", json_integer((json_int_t)r->m));
    json_object_set_new(o, "k", json_integer((json_int_t)r->k));
    json_object_set_new(o, "tokens", r->has_tokens ? json_integer((json_int_t)r->tokens) : json_null());
    json_object_set_new(o, "time_ms", jnum(r->med_ms));
    json_object_set_new(o, "min_ms", jnum(r->min_ms));
    json_object_set_new(o, "max_ms", jnum(r->max_ms));
    json_object_set_new(o, "spread", jnum(r->spread));
    json_object_set_new(o, "reps", json_integer(r->reps));
    json_object_set_new(o, "timer", json_string(r->timer));
    json_object_set_new(o, "e2e_ms", jnum(r->e2e_ms));
    json_object_set_new(o, "bytes", json_real(r->bytes));
    json_object_set_new(o, "gbs", jnum(r->gbs));
    json_object_set_new(o, "gops", jnum(r->gops));
    json_object_set_new(o, "pct_peak", jnum(r->pct));
    json_object_set_new(o, "speedup", jnum(r->speedup));
    json_object_set_new(o, "check", json_string(r->check));
    json_object_set_new(o, "note", json_string(r->note));
    json_object_set_new(o, "sets", json_integer(r->sets));
    json_object_set_new(o, "energy", json_boolean(r->energy));
    json_object_set_new(o, "watts", jnum(r->watts));
    json_object_set_new(o, "idle_watts", jnum(r->idle_w));
    json_object_set_new(o, "j_op", jnum(r->j_op));
    json_object_set_new(o, "j_op_above_idle", jnum(r->j_op_above));
    json_object_set_new(o, "j_token", jnum(per_token(r, r->j_op)));
    json_object_set_new(o, "j_token_above_idle", jnum(per_token(r, r->j_op_above)));
    return o;
}

static int dump(FILE *f, json_t *j, size_t flags)
{
    int rc = json_dumpf(j, f, flags | JSON_PRESERVE_ORDER);
    json_decref(j);
    fputc('\n', f);
    return rc;
}

int bench_write(FILE *f, bench_format fmt, const bench_row *rows, size_t n, const bench_device *devs, size_t ndev)
{
    switch (fmt) {
    case BENCH_FMT_TABLE: write_human(f, 0, rows, n); break;
    case BENCH_FMT_MD: write_human(f, 1, rows, n); break;
    case BENCH_FMT_CSV: write_csv(f, rows, n); break;
    case BENCH_FMT_JSONL:
        for (size_t i = 0; i < n; i++)
            if (!rows[i].hidden && dump(f, row_json(&rows[i]), JSON_COMPACT)) return EXIT_IO;
        break;
    case BENCH_FMT_JSON: {
        json_t *doc = json_object(), *jd = json_array(), *jr = json_array();
        json_object_set_new(doc, "tool", json_string("bitnet-bench"));
        json_object_set_new(doc, "version", json_string(bitnet_version()));
        for (size_t i = 0; i < ndev; i++) {
            json_t *d = json_object();
            json_object_set_new(d, "device", json_string(devs[i].spec));
            json_object_set_new(d, "describe", json_string(devs[i].describe));
            json_object_set_new(d, "copy_gbs", jnum(devs[i].copy_gbs));
            json_object_set_new(d, "read_gbs", jnum(devs[i].read_gbs));
            json_object_set_new(d, "peak_gbs", jnum(devs[i].peak_gbs));
            json_object_set_new(d, "roofline_mib", jnum(devs[i].roof_mib));
            json_object_set_new(d, "llc_mib", jnum(devs[i].llc_mib));
            json_array_append_new(jd, d);
        }
        for (size_t i = 0; i < n; i++)
            if (!rows[i].hidden) json_array_append_new(jr, row_json(&rows[i]));
        json_object_set_new(doc, "devices", jd);
        json_object_set_new(doc, "results", jr);
        if (dump(f, doc, JSON_INDENT(2))) return EXIT_IO;
        break;
    }
    }
    return ferror(f) ? EXIT_IO : EXIT_OK;
}

static double jget_num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void jget_str(json_t *o, const char *key, char *out, size_t n)
{
    const char *s = json_string_value(json_object_get(o, key));
    snprintf(out, n, "%s", s ? s : "");
}

int bench_read_json(FILE *f, const char *name, bench_row **rows, size_t *n, bench_device *devs, size_t *ndev,
                    size_t maxdev)
{
    json_error_t err;
    json_t *doc = json_loadf(f, 0, &err), *jd, *jr, *v;
    size_t i;
    *rows = NULL, *n = 0, *ndev = 0;
    if (!doc) {
        msg_err("%s: line %d: %s", name, err.line, err.text);
        return EXIT_FAIL;
    }
    jd = json_object_get(doc, "devices");
    jr = json_object_get(doc, "results");
    const char *tool = json_string_value(json_object_get(doc, "tool"));
    if (!json_is_array(jd) || !json_is_array(jr) || !tool || strcmp(tool, "bitnet-bench") != 0) {
        msg_err("%s: not the --format json output of bitnet-bench", name);
        json_decref(doc);
        return EXIT_FAIL;
    }
    json_array_foreach(jd, i, v) {
        if (*ndev == maxdev) break;
        bench_device *d = &devs[(*ndev)++];
        jget_str(v, "device", d->spec, sizeof d->spec);
        jget_str(v, "describe", d->describe, sizeof d->describe);
        d->copy_gbs = jget_num(v, "copy_gbs");
        d->read_gbs = jget_num(v, "read_gbs");
        d->peak_gbs = jget_num(v, "peak_gbs");
        d->roof_mib = jget_num(v, "roofline_mib"); /* NAN from the files of earlier versions */
        d->llc_mib = jget_num(v, "llc_mib");
    }
    if (json_array_size(jr) && !(*rows = calloc(json_array_size(jr), sizeof **rows))) {
        json_decref(doc);
        msg_err("out of memory");
        return EXIT_FAIL;
    }
    json_array_foreach(jr, i, v) {
        bench_row *r = &(*rows)[(*n)++];
        static const char *const timers[] = {"kernel", "e2e", "self"};
        char timer[16];
        jget_str(v, "op", r->op, sizeof r->op);
        jget_str(v, "variant", r->variant, sizeof r->variant);
        jget_str(v, "device", r->device, sizeof r->device);
        jget_str(v, "shape", r->shape, sizeof r->shape);
        jget_str(v, "check", r->check, sizeof r->check);
        jget_str(v, "note", r->note, sizeof r->note);
        jget_str(v, "timer", timer, sizeof timer);
        r->timer = "e2e";
        for (int t = 0; t < 3; t++)
            if (strcmp(timer, timers[t]) == 0) r->timer = timers[t];
        r->m = (uint64_t)json_integer_value(json_object_get(v, "m"));
        r->k = (uint64_t)json_integer_value(json_object_get(v, "k"));
        r->has_tokens = json_is_integer(json_object_get(v, "tokens"));
        r->tokens = r->has_tokens ? (uint64_t)json_integer_value(json_object_get(v, "tokens")) : 1;
        r->med_ms = jget_num(v, "time_ms");
        r->min_ms = jget_num(v, "min_ms");
        r->max_ms = jget_num(v, "max_ms");
        r->spread = jget_num(v, "spread");
        r->reps = (int)json_integer_value(json_object_get(v, "reps"));
        r->sets = (int)json_integer_value(json_object_get(v, "sets"));
        r->e2e_ms = jget_num(v, "e2e_ms");
        r->bytes = jget_num(v, "bytes");
        r->gbs = jget_num(v, "gbs");
        r->gops = jget_num(v, "gops");
        r->pct = jget_num(v, "pct_peak");
        r->speedup = jget_num(v, "speedup");
        r->energy = json_is_true(json_object_get(v, "energy"));
        r->watts = jget_num(v, "watts");
        r->idle_w = jget_num(v, "idle_watts");
        r->j_op = jget_num(v, "j_op");
        r->j_op_above = jget_num(v, "j_op_above_idle");
        r->dev = -1;
        for (size_t d = 0; d < *ndev; d++)
            if (strcmp(devs[d].spec, r->device) == 0) r->dev = (int)d;
    }
    json_decref(doc);
    return EXIT_OK;
}
