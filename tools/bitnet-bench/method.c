/*
 * method.c - how bitnet-bench measures: random non-zero inputs from a fixed
 * seed, rotated buffer sets so that a working set that fits in the last-level
 * cache does not pass for memory bandwidth, warm-up calls, then repetitions
 * until both --min-reps and --min-time are reached; median, min, max and
 * spread of the samples.  On an OpenCL device a sample is the kernel time the
 * backend's statistics report (profiling events, on for that pass only), and
 * the e2e column comes from a second pass with profiling off, as a caller
 * runs; on the CPU a sample is the monotonic clock around the whole public
 * call.  Each configuration is
 * checked once against the CPU reference before it is timed.
 */
#include "bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

uint64_t bench_rand(uint64_t *state) /* splitmix64 */
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void bench_fill_f32(float *x, uint64_t n, uint64_t seed, float lo, float hi)
{
    uint64_t s = seed;
    const float span = hi - lo, fallback = hi != 0.0f ? hi * 0.5f : lo * 0.5f;
    for (uint64_t i = 0; i < n; i += 2) {
        uint64_t r = bench_rand(&s);
        float a = lo + span * (float)(uint32_t)r * 0x1p-32f;
        float b = lo + span * (float)(uint32_t)(r >> 32) * 0x1p-32f;
        x[i] = a != 0.0f ? a : fallback;
        if (i + 1 < n) x[i + 1] = b != 0.0f ? b : fallback;
    }
}

void bench_fill_t2(uint8_t *t2, uint64_t rows, uint64_t cols, uint64_t seed)
{
    uint64_t s = seed, r = 0;
    int left = 0;
    const uint64_t blocks = (cols + BITNET_T2_BLOCK - 1) / BITNET_T2_BLOCK;
    for (uint64_t row = 0; row < rows; row++)
        for (uint64_t b = 0; b < blocks; b++) {
            uint8_t *blk = t2 + (row * blocks + b) * BITNET_T2_BLOCK_BYTES;
            memset(blk, 0, BITNET_T2_BLOCK_BYTES);
            for (unsigned k = 0; k < 4; k++)
                for (unsigned j = 0; j < 32; j++) {
                    uint64_t c = b * BITNET_T2_BLOCK + 32 * k + j;
                    unsigned code = 1;
                    if (c < cols) {
                        if (left == 0) { r = bench_rand(&s); left = 32; }
                        code = (unsigned)(r % 3);
                        r /= 3;
                        left--;
                    }
                    blk[j] |= (uint8_t)(code << (2 * k));
                }
        }
}

void **bench_bufs_new(size_t nsets, size_t bytes)
{
    void **b = calloc(nsets, sizeof *b);
    size_t rounded = (bytes + 63) / 64 * 64;
    if (!b) return NULL;
    if (rounded == 0) rounded = 64;
    for (size_t i = 0; i < nsets; i++) {
        b[i] = aligned_alloc(64, rounded);
        if (!b[i]) {
            bench_bufs_free(b, nsets);
            return NULL;
        }
    }
    return b;
}

void bench_bufs_replicate(void **b, size_t nsets, size_t bytes)
{
    for (size_t i = 1; i < nsets; i++) memcpy(b[i], b[0], bytes);
}

void bench_bufs_free(void **b, size_t nsets)
{
    if (!b) return;
    for (size_t i = 0; i < nsets; i++) free(b[i]);
    free(b);
}

int bench_check_bytes(const void *y, const void *ref, size_t n, const char *what, char *why, size_t wn)
{
    const uint8_t *a = y, *b = ref;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            snprintf(why, wn, "%s differ from the reference at byte %zu (0x%02x, want 0x%02x)", what, i, a[i], b[i]);
            return 1;
        }
    return 0;
}

static int64_t ordered_bits(float f)
{
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

int bench_check_ulp(const float *y, const float *ref, uint64_t n, uint32_t max_ulp, char *why, size_t wn)
{
    for (uint64_t i = 0; i < n; i++) {
        if (isnan(y[i]) || isnan(ref[i])) {
            if (isnan(y[i]) && isnan(ref[i])) continue;
            snprintf(why, wn, "element %llu is %g, reference %g", (unsigned long long)i, y[i], ref[i]);
            return 1;
        }
        int64_t d = ordered_bits(y[i]) - ordered_bits(ref[i]);
        if (d < 0) d = -d;
        if (d > (int64_t)max_ulp) {
            snprintf(why, wn, "element %llu is %.9g, reference %.9g (%lld ulp > %u)", (unsigned long long)i, y[i],
                     ref[i], (long long)d, max_ulp);
            return 1;
        }
    }
    return 0;
}

int bench_check_nmse(const float *y, const float *ref, uint64_t n, double bound, char *why, size_t wn)
{
    double err = 0, pow = 0;
    for (uint64_t i = 0; i < n; i++) {
        double d = (double)y[i] - (double)ref[i];
        err += d * d;
        pow += (double)ref[i] * (double)ref[i];
    }
    double nmse = pow > 0 ? err / pow : err;
    if (!(nmse <= bound)) {
        snprintf(why, wn, "NMSE %.3g > %.0e", nmse, bound);
        return 1;
    }
    return 0;
}

int bench_parse_scale(const char *s, bitnet_scale_kind *kind, uint32_t *group)
{
    *group = 0;
    if (strcmp(s, "tensor") == 0) { *kind = BITNET_SCALE_TENSOR; return 0; }
    if (strcmp(s, "row") == 0) { *kind = BITNET_SCALE_ROW; return 0; }
    if (strncmp(s, "group:", 6) == 0) {
        char *end;
        unsigned long g = strtoul(s + 6, &end, 10);
        if (*end || g == 0 || g > UINT32_MAX || s[6] == '-') return 1;
        *kind = BITNET_SCALE_GROUP;
        *group = (uint32_t)g;
        return 0;
    }
    return 1;
}

size_t bench_split(const char *s, char out[][BENCH_NAME], size_t max)
{
    size_t n = 0;
    while (*s && n < max) {
        size_t len = strcspn(s, ",");
        if (len > 0 && len < BENCH_NAME) {
            memcpy(out[n], s, len);
            out[n][len] = 0;
            n++;
        }
        s += len;
        if (*s == ',') s++;
    }
    return n;
}

const char *bench_fmt_time(double ms, char *buf, size_t n)
{
    if (isnan(ms)) snprintf(buf, n, "-");
    else if (ms < 1.0) snprintf(buf, n, "%.1f us", ms * 1e3);
    else if (ms < 1000.0) snprintf(buf, n, "%.3f ms", ms);
    else snprintf(buf, n, "%.3f s", ms / 1e3);
    return buf;
}

/* Device kernel time so far (ms) from the backend's statistics, and whether
 * any op ran on the CPU side of the backend. */
static double kernel_ms(bitnet_backend *be, int *on_device, int *on_cpu)
{
    bitnet_op_stats st[64];
    double sum = 0;
    size_t n = be ? bitnet_backend_op_stats(be, st, 64) : 0;
    for (size_t i = 0; i < n && i < 64; i++) {
        if (strcmp(st[i].device, "cpu") == 0) {
            if (st[i].calls) *on_cpu = 1;
            continue;
        }
        if (st[i].calls) *on_device = 1;
        sum += st[i].kernel_ms;
    }
    return sum;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_sorted(const double *v, size_t n)
{
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int row_error(bench_row *row, bitnet_status st, const char *what)
{
    const char *d = bitnet_error_detail();
    snprintf(row->check, sizeof row->check, "error");
    snprintf(row->note, sizeof row->note, "%s: %s%s%s", what, bitnet_strerror(st), d && *d ? ": " : "", d ? d : "");
    msg_err("%s %s on %s: %s", row->op, row->shape, row->device, row->note);
    return tool_exit_code(st) ? tool_exit_code(st) : EXIT_FAIL;
}

int bench_measure(const bench_op *op, const bench_opts *o, bitnet_backend *be, const char *device, uint64_t m,
                  uint64_t k, uint64_t tokens, const char *variant, bench_row *row)
{
    bench_case c = {.op = op, .opts = o, .m = m, .k = k, .tokens = tokens, .nsets = 1};
    uint64_t moved = 0, set_bytes = 0;
    double *samples = NULL, *e2e = NULL;
    size_t cap = 0, n = 0, e2e_n = 0;
    int rc = EXIT_OK, on_device = 0, on_cpu = 0, kept = 0, on_dev_kept = 0;
    bitnet_status st;

    memset(row, 0, sizeof *row);
    bitnet_error_clear(); /* a row's error note must not carry an earlier row's detail */
    snprintf(row->op, sizeof row->op, "%s", op->name);
    snprintf(row->variant, sizeof row->variant, "%s", variant ? variant : "");
    snprintf(c.variant, sizeof c.variant, "%s", row->variant);
    snprintf(row->device, sizeof row->device, "%s", device);
    if (op->shape == BENCH_SHAPE_VECTOR) snprintf(row->shape, sizeof row->shape, "%llu", (unsigned long long)(m * k));
    else snprintf(row->shape, sizeof row->shape, "%llux%llu", (unsigned long long)m, (unsigned long long)k);
    row->m = m, row->k = k, row->tokens = tokens, row->has_tokens = op->uses_tokens;
    row->med_ms = row->min_ms = row->max_ms = row->spread = row->e2e_ms = NAN;
    row->gbs = row->gops = row->pct = row->speedup = NAN;
    row->watts = row->idle_w = row->j_op = row->j_op_above = NAN;
    row->energy = o->energy;
    row->timer = "e2e";
    snprintf(row->check, sizeof row->check, "%s", o->no_check || !op->check ? "-" : "ok");

    op->sizes(&c, &moved, &set_bytes);
    row->bytes = (double)moved;
    row->ops = op->product ? 2.0 * (double)m * (double)k * (double)tokens : 0.0;
    if (set_bytes > o->max_mem) {
        snprintf(row->check, sizeof row->check, "error");
        snprintf(row->note, sizeof row->note, "needs %llu MiB, more than --max-mem", (unsigned long long)(set_bytes >> 20));
        msg_err("%s %s: %s", row->op, row->shape, row->note);
        return EXIT_USAGE;
    }
    if (set_bytes > 0) {
        uint64_t want = (4 * o->llc_bytes + set_bytes - 1) / set_bytes;
        uint64_t fit = o->max_mem / set_bytes;
        if (want > fit) want = fit;
        if (want > 65536) want = 65536; /* tiny sets: latency, not bandwidth */
        c.nsets = want ? (size_t)want : 1;
    }
    row->sets = (int)c.nsets;
    if ((st = op->setup(&c))) {
        rc = row_error(row, st, "setup");
        goto out;
    }
    if (op->net) { /* the network's size is known now */
        op->sizes(&c, &moved, &set_bytes);
        row->bytes = (double)moved;
    }
    if ((o->keep_weights || o->resident || op->resident) && op->keep && be) { /* before the first call: the check reads the kept copy */
        kept = 1;
        if ((st = op->keep(&c, be, 1))) {
            rc = row_error(row, st, "keep");
            goto out;
        }
        on_dev_kept = bitnet_backend_kept_bytes(be) > 0;
    }
    if (be) bitnet_backend_stats_reset(be);
    double self_ms = -1;
    if ((st = op->run(&c, be, 0, &self_ms))) {
        if (st == BITNET_E_UNSUPPORTED) { /* not an error: this device lacks it */
            const char *d = bitnet_error_detail();
            snprintf(row->check, sizeof row->check, "skip");
            snprintf(row->note, sizeof row->note, "unsupported%s%s", d && *d ? ": " : "", d ? d : "");
            goto out;
        }
        rc = row_error(row, st, "run");
        goto out;
    }
    if (!o->no_check && op->check) {
        char why[160] = "";
        if (op->check(&c, why, sizeof why)) {
            snprintf(row->check, sizeof row->check, "FAIL");
            snprintf(row->note, sizeof row->note, "%s", why);
            char tok[48] = "";
            if (op->uses_tokens) snprintf(tok, sizeof tok, " tokens=%llu", (unsigned long long)tokens);
            msg_err("%s %s%s%s%s on %s: check FAILED: %s", row->op, row->shape, *row->variant ? " " : "",
                    row->variant, tok, device, why);
            rc = EXIT_FAIL;
        }
    }
    c.chained = o->chain > 0; /* from here on: resident runs read nothing back, the method waits */
    const int chain = o->chain > 0 ? o->chain : 1;
    for (int i = 0; i < o->warmup; i++)
        if ((st = op->run(&c, be, (size_t)(i + 1) % c.nsets, &self_ms)) || (c.chained && be && (st = bitnet_backend_sync(be)))) {
            rc = row_error(row, st, "run");
            goto out;
        }
    /* Pass 0 times the kernels (profiling on, which costs the caller: on
     * NVIDIA's driver an event and timestamps per command); where it did,
     * pass 1 times the caller's view again with profiling off, and its
     * wall times are the e2e column. */
    bench_energy en;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && (strcmp(row->timer, "kernel") != 0 || !n)) break;
        if (be && (st = bitnet_backend_set_profiling(be, pass == 0 && !o->force_e2e))) {
            rc = row_error(row, st, "profiling");
            goto out;
        }
        const size_t n_kernel = n;
        if (pass == 1) n = 0; /* e2e[] is timed again; samples[] keeps the kernel times */
        if (o->energy) bench_energy_start(&en, device);
        const double start = bench_now_ms();
        while ((int)n < o->max_reps && ((int)n < o->min_reps || bench_now_ms() - start < o->min_time_s * 1e3)) {
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                double *a = realloc(samples, ncap * sizeof *a), *b = a ? realloc(e2e, ncap * sizeof *b) : NULL;
                if (a) samples = a;
                if (!a || !b) {
                    rc = row_error(row, BITNET_E_NOMEM, "samples");
                    goto out;
                }
                e2e = b;
                cap = ncap;
            }
            int dev_now = 0;
            double k0 = kernel_ms(be, &dev_now, &on_cpu);
            self_ms = -1;
            double t0 = bench_now_ms();
            st = BITNET_OK;
            for (int j = 0; j < chain && !st; j++) /* a chain: sets rotated, one wait at the end */
                st = op->run(&c, be, (n * (size_t)chain + (size_t)j + 1) % c.nsets, &self_ms);
            if (!st && c.chained && be) st = bitnet_backend_sync(be);
            double t1 = bench_now_ms();
            if (st) {
                rc = row_error(row, st, "run");
                goto out;
            }
            t1 = t0 + (t1 - t0) / chain; /* the mean call */
            dev_now = 0;
            double kms = (kernel_ms(be, &dev_now, &on_cpu) - k0) / chain;
            on_device |= dev_now;
            e2e[n] = t1 - t0;
            if (pass == 1) { /* the kernel times of pass 0 stay */
                n++;
                continue;
            }
            if (self_ms >= 0) {
                samples[n] = self_ms;
                row->timer = "self";
            } else if (dev_now && kms > 0 && !o->force_e2e) {
                samples[n] = kms;
                row->timer = "kernel";
            } else {
                samples[n] = t1 - t0;
            }
            n++;
        }
        e2e_n = n;                 /* e2e[0..n) is the last pass's */
        if (pass == 1) n = n_kernel; /* the rows count pass 0's kernel samples */
    }
    if (be) bitnet_backend_set_profiling(be, 0);
    const size_t last_n = e2e_n; /* the reps of the last pass, which the energy covers */
    if (o->energy && last_n) {
        double sec, idle;
        const double j = bench_energy_stop(&en, &sec, &idle);
        if (!isnan(j) && sec > 0) {
            row->watts = j / sec;
            row->idle_w = idle;
            row->j_op = j / ((double)last_n * chain);
            row->j_op_above = isnan(idle) ? NAN : (row->watts - idle) * sec / ((double)last_n * chain);
        } else {
            size_t used = strlen(row->note);
            snprintf(row->note + used, sizeof row->note - used, "%sno energy counter for %s (RAPL/NVML not exposed)",
                     used ? "; " : "", device);
        }
    }
    if (be && strncmp(device, "opencl", 6) == 0 && on_cpu && !on_device && !op->host_only) {
        size_t used = strlen(row->note);
        snprintf(row->note + used, sizeof row->note - used, "%sran on the CPU (no OpenCL kernel for this op)",
                 used ? "; " : "");
        row->ran_on_cpu = 1;
    }
    if (c.chained) {
        size_t used = strlen(row->note);
        snprintf(row->note + used, sizeof row->note - used, "%schains of %d calls, one wait each", used ? "; " : "",
                 o->chain);
    }
    if (on_dev_kept) { /* end-to-end time: activations up + kernel + outputs down */
        size_t used = strlen(row->note);
        snprintf(row->note + used, sizeof row->note - used, "%sweights kept on the device", used ? "; " : "");
    }
    qsort(samples, n, sizeof *samples, cmp_double);
    qsort(e2e, e2e_n, sizeof *e2e, cmp_double);
    row->reps = (int)n;
    if (n) {
        row->med_ms = median_sorted(samples, n);
        row->min_ms = samples[0];
        row->max_ms = samples[n - 1];
        row->spread = row->med_ms > 0 ? (row->max_ms - row->min_ms) / row->med_ms : NAN;
        row->e2e_ms = median_sorted(e2e, e2e_n);
        if (row->med_ms > 0) {
            if (moved) row->gbs = (double)moved / (row->med_ms * 1e6);
            if (op->product) row->gops = row->ops / (row->med_ms * 1e6);
        }
    }
out:
    free(samples);
    free(e2e);
    if (kept) op->keep(&c, be, 0);
    if (op->teardown) op->teardown(&c);
    return rc;
}

bitnet_status bench_keep_bufs(bitnet_backend *be, int keep, void **b, size_t nsets, uint64_t bytes)
{
    for (size_t i = 0; i < nsets && b; i++) {
        if (!keep) {
            bitnet_backend_forget(be, b[i]);
            continue;
        }
        bitnet_status st = bitnet_backend_keep(be, b[i], (size_t)bytes);
        if (st != BITNET_OK) return st;
    }
    return BITNET_OK;
}

size_t bench_scale_variants(const bench_opts *o, char out[][BENCH_NAME], size_t max)
{
    size_t n = bench_split(o->scales, out, max);
    for (size_t i = 0; i < n; i++) {
        bitnet_scale_kind kind;
        uint32_t group;
        if (bench_parse_scale(out[i], &kind, &group)) {
            msg_err("--scale: '%s' is not tensor, row or group:G", out[i]);
            return 0;
        }
    }
    if (n == 0) msg_err("--scale: empty list");
    return n;
}

uint64_t bench_n_scales(bitnet_scale_kind kind, uint32_t group, uint64_t rows, uint64_t cols)
{
    switch (kind) {
    case BITNET_SCALE_TENSOR: return 1;
    case BITNET_SCALE_ROW: return rows;
    case BITNET_SCALE_GROUP: return rows * ((cols + group - 1) / group);
    default: return 0;
    }
}

bitnet_status bench_f32io_setup(bench_case *c, int n_in, uint64_t in_n, uint64_t out_n, float lo, float hi)
{
    bench_f32io *s = bench_state_new(c, sizeof *s);
    if (!s) return BITNET_E_NOMEM;
    s->n_in = n_in, s->in_n = in_n, s->out_n = out_n;
    for (int i = 0; i < n_in; i++)
        if (!(s->in[i] = bench_bufs_f32(c->nsets, in_n, c->opts->seed + (uint64_t)i, lo, hi))) return BITNET_E_NOMEM;
    if (!(s->out = bench_bufs_new(c->nsets, out_n * 4))) return BITNET_E_NOMEM;
    return BITNET_OK;
}

void bench_f32io_teardown(bench_case *c)
{
    bench_f32io *s = c->st;
    if (s) bench_state_free(c, 3, s->in[0], s->in[1], s->out);
}

void *bench_state_new(bench_case *c, size_t size)
{
    return c->st = calloc(1, size);
}

void bench_state_free(bench_case *c, int nbufs, ...)
{
    va_list ap;
    va_start(ap, nbufs);
    for (int i = 0; i < nbufs; i++) bench_bufs_free(va_arg(ap, void **), c->nsets);
    va_end(ap);
    free(c->st);
    c->st = NULL;
}

void **bench_bufs_f32(size_t nsets, uint64_t n, uint64_t seed, float lo, float hi)
{
    void **b = bench_bufs_new(nsets, n * 4);
    if (!b) return NULL;
    bench_fill_f32(b[0], n, seed, lo, hi);
    bench_bufs_replicate(b, nsets, n * 4);
    return b;
}

void **bench_bufs_t2(size_t nsets, uint64_t rows, uint64_t cols, uint64_t seed)
{
    const uint64_t bytes = rows * bitnet_t2_row_bytes(cols);
    void **b = bench_bufs_new(nsets, bytes);
    if (!b) return NULL;
    bench_fill_t2(b[0], rows, cols, seed);
    bench_bufs_replicate(b, nsets, bytes);
    return b;
}

void bench_ternary_of(const bench_case *c, bench_ternary *t)
{
    bench_parse_scale(c->variant, &t->kind, &t->group);
    t->t2_bytes = c->m * bitnet_t2_row_bytes(c->k);
    t->nd = bench_n_scales(t->kind, t->group, c->m, c->k);
}

int bench_check_f32_ref(float *ref, bitnet_status st, const float *y, uint64_t n, uint32_t max_ulp, double nmse,
                        char *why, size_t wn)
{
    int bad = 1;
    if (!ref) snprintf(why, wn, "out of memory for the reference");
    else if (st) snprintf(why, wn, "reference failed: %s", bitnet_strerror(st));
    else if (nmse > 0) bad = bench_check_nmse(y, ref, n, nmse, why, wn);
    else bad = bench_check_ulp(y, ref, n, max_ulp, why, wn);
    free(ref);
    return bad;
}

int bench_check_sampled(const bench_case *c)
{
    return c->m > BENCH_CHECK_ROWS && c->m * c->k * c->tokens > BENCH_CHECK_FULL;
}

uint64_t bench_check_row(const bench_case *c, uint64_t i) { return i * (c->m - 1) / (BENCH_CHECK_ROWS - 1); }

bitnet_status bench_setup_none(bench_case *c)
{
    (void)c;
    return BITNET_OK;
}
