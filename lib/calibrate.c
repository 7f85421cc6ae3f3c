/*
 * calibrate.c - auto-dispatch thresholds and the roofline.
 *
 * Calibration times every op that has an OpenCL implementation, end to end
 * (transfers included), on the CPU and on OpenCL at sizes from 4 KiB to
 * 64 MiB of data moved, and keeps for each op the smallest size from which
 * OpenCL wins at every larger size.  The result is stored as JSON in the
 * cache directory, thresholds-<device key>.json, and loaded by "auto".
 *
 * The roofline: copy and read bandwidth of the backend's device (OpenCL
 * kernels, or memcpy and a read loop on every CPU thread) and host<->device
 * transfer rates.
 */
#include "backend_impl.h"
#include "opencl/ocl.h"

#include <dirent.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)
#define NEVER ((uint64_t)INT64_MAX)

/* ---- thresholds file --------------------------------------------------------- */

static int thresholds_path(const bitnet_backend *be, char *path, size_t size)
{
    char dir[4096];
    if (!be->device_key[0] || !bitnet_cache_dir(dir, sizeof dir)) return -1;
    int n = snprintf(path, size, "%s/thresholds-%s.json", dir, be->device_key);
    return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

void bn_thresholds_load(bitnet_backend *be)
{
    char path[4200];
    if (thresholds_path(be, path, sizeof path) != 0) return;
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) return;
    json_t *th = json_object_get(root, "thresholds");
    int loaded = 0;
    for (int i = 0; i < BN_N_OPS && json_is_object(th); i++) {
        json_t *v = json_object_get(th, bn_ops[i].name);
        if (json_is_integer(v) && json_integer_value(v) >= 0) {
            be->threshold[i] = (uint64_t)json_integer_value(v);
            loaded++;
        }
    }
    json_decref(root);
    if (loaded) bn_backend_log(be, BITNET_LOG_INFO, "auto: thresholds from %s", path);
}

uint64_t bn_thresholds_floor(void)
{
    uint64_t floor = UINT64_MAX;
    for (int i = 0; i < BN_N_OPS; i++)
        if (bn_ops[i].default_threshold < floor) floor = bn_ops[i].default_threshold;
    char dir[4096], path[4400];
    DIR *d = bitnet_cache_dir(dir, sizeof dir) ? opendir(dir) : NULL;
    if (!d) return floor;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "thresholds-", 11) != 0 || n < 16 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        json_error_t jerr;
        json_t *root = json_load_file(path, 0, &jerr);
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(root, "thresholds"), k, v) {
            if (json_is_integer(v) && json_integer_value(v) >= 0 && (uint64_t)json_integer_value(v) < floor)
                floor = (uint64_t)json_integer_value(v);
        }
        json_decref(root);
    }
    closedir(d);
    return floor;
}

static bitnet_status thresholds_store(bitnet_backend *be, json_t *doc, char *path, size_t size)
{
    char dir[4096];
    if (thresholds_path(be, path, size) != 0 || !bitnet_cache_dir(dir, sizeof dir))
        return bn_fail(BITNET_E_IO, "calibration: no cache directory (set XDG_CACHE_HOME or HOME)");
    /* the directory, and its parent for ~/.cache */
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        mkdir(parent, 0755);
    }
    mkdir(dir, 0755);
    bitnet_outfile *o;
    bitnet_status st = bitnet_outfile_open(&o, path);
    if (st) return st;
    if (json_dumpf(doc, bitnet_outfile_stream(o), JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0) {
        bitnet_outfile_abort(o);
        return bn_fail(BITNET_E_IO, "calibration: cannot write %s", path);
    }
    return bitnet_outfile_commit(o);
}

/* ---- calibration ------------------------------------------------------------------ */

/* Public op entry points, referenced weakly: an op whose file is not linked
 * in is simply not calibrated. */
#define WEAK(f) extern __typeof__(f) f __attribute__((weak))
WEAK(bitnet_quantize_weights);
WEAK(bitnet_quantize_acts);
WEAK(bitnet_dequantize_weights);
WEAK(bitnet_dequantize_acts);
WEAK(bitnet_bitlinear);
WEAK(bitnet_matmul_f32);
WEAK(bitnet_binary);
WEAK(bitnet_unary);
WEAK(bitnet_softmax);
WEAK(bitnet_reduce);
WEAK(bitnet_layernorm);
WEAK(bitnet_permute);

#define COLS 1024u
#define TOKENS 16u

typedef struct {
    float *f1, *f2, *f3, *sc;
    int8_t *i8;
    uint8_t *t2;
    uint64_t max_bytes;
} cal_data;

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void cal_data_free(cal_data *d)
{
    free(d->f1);
    free(d->f2);
    free(d->f3);
    free(d->sc);
    free(d->i8);
    free(d->t2);
}

static bitnet_status cal_data_init(cal_data *d, uint64_t max_bytes)
{
    memset(d, 0, sizeof *d);
    d->max_bytes = max_bytes;
    /* f32 buffers of max_bytes; T2 and int8 codes of max_bytes (bitlinear's
     * weights are all of its bytes); a scale per row of the most rows (T2) */
    size_t nf = (size_t)(max_bytes / 4) + TOKENS * COLS, nb = (size_t)max_bytes + TOKENS * COLS;
    size_t rows = (size_t)(max_bytes / (COLS / 4)) + TOKENS;
    d->f1 = malloc(nf * sizeof(float));
    d->f2 = malloc(nf * sizeof(float));
    d->f3 = malloc(nf * sizeof(float));
    d->sc = malloc(rows * sizeof(float));
    d->i8 = malloc(nb);
    d->t2 = malloc(nb);
    if (!d->f1 || !d->f2 || !d->f3 || !d->sc || !d->i8 || !d->t2) {
        cal_data_free(d);
        return bn_fail(BITNET_E_NOMEM, "calibration: out of memory");
    }
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < nf; i++) {
        uint64_t r = rng_next(&s);
        float v = (float)((int)(r % 2001) - 1000) / 1000.0f;
        d->f1[i] = v != 0.0f ? v : 0.5f;
        d->f2[i] = (float)((int)((r >> 16) % 1999) - 999) / 997.0f + 1.5f;
    }
    for (size_t i = 0; i < nb; i++) {
        uint64_t r = rng_next(&s);
        d->i8[i] = (int8_t)((int)((r >> 32) % 255) - 127);
        uint8_t b = 0;
        for (int k = 0; k < 4; k++) b = (uint8_t)(b | (((r >> (40 + 3 * k)) % 3) << (2 * k)));
        d->t2[i] = b;
    }
    for (size_t i = 0; i < rows; i++) d->sc[i] = 0.01f + (float)(i % 97) / 100.0f;
    return BITNET_OK;
}

/* Runs op idx once over about `bytes` bytes of data moved.  *ran = 0 when
 * the op cannot be called (not linked in). */
static bitnet_status run_op(bitnet_backend *be, int idx, uint64_t bytes, cal_data *d, int *ran)
{
    const char *name = bn_ops[idx].name;
    uint64_t rows = bytes / (8 * COLS);
    if (rows == 0) rows = 1;
    *ran = 1;
    bitnet_shape s2 = {2, {rows, COLS}}, s1 = {1, {bytes / 12 ? bytes / 12 : 1}}, ys;
    if (!strcmp(name, "scale")) return bitnet_scale(be, d->f1, bytes / 8 ? bytes / 8 : 1, 0.75f, d->f2);
    if (!strcmp(name, "unary") && bitnet_unary)
        return bitnet_unary(be, BITNET_UN_RELU, d->f1, bytes / 8 ? bytes / 8 : 1, 0.0f, d->f2);
    if (!strcmp(name, "binary") && bitnet_binary) return bitnet_binary(be, BITNET_BIN_ADD, d->f1, &s1, d->f2, &s1, d->f3);
    if (!strcmp(name, "softmax") && bitnet_softmax) return bitnet_softmax(be, d->f1, &s2, -1, 0, d->f2);
    if (!strcmp(name, "layernorm") && bitnet_layernorm)
        return bitnet_layernorm(be, d->f1, rows, COLS, NULL, NULL, 1e-5f, d->f2);
    if (!strcmp(name, "permute") && bitnet_permute) {
        const uint32_t perm[2] = {1, 0};
        return bitnet_permute(be, d->f1, &s2, perm, d->f2);
    }
    uint64_t rows4 = bytes / (4 * COLS) ? bytes / (4 * COLS) : 1;
    bitnet_shape s4 = {2, {rows4, COLS}};
    if (!strcmp(name, "reduce") && bitnet_reduce) return bitnet_reduce(be, BITNET_RED_SUM, d->f1, &s4, 2u, d->f2, &ys);
    if (!strcmp(name, "quantize_weights") && bitnet_quantize_weights)
        return bitnet_quantize_weights(be, d->f1, rows4, COLS, BITNET_SCALE_ROW, 0, d->t2, d->sc);
    if (!strcmp(name, "dequantize_weights") && bitnet_dequantize_weights)
        return bitnet_dequantize_weights(be, d->t2, rows4, COLS, BITNET_SCALE_ROW, 0, d->sc, d->f2);
    uint64_t rows5 = bytes / (5 * COLS) ? bytes / (5 * COLS) : 1;
    if (!strcmp(name, "quantize_acts") && bitnet_quantize_acts)
        return bitnet_quantize_acts(be, d->f1, rows5, COLS, d->i8, d->sc);
    if (!strcmp(name, "dequantize_acts") && bitnet_dequantize_acts)
        return bitnet_dequantize_acts(be, d->i8, rows5, COLS, d->sc, d->f2);
    if (!strcmp(name, "matmul_f32") && bitnet_matmul_f32)
        return bitnet_matmul_f32(be, d->f1, TOKENS, COLS, d->f2, rows4, NULL, BITNET_ACT_NONE, d->f3);
    if (!strcmp(name, "bitlinear") && bitnet_bitlinear) {
        uint64_t out = bytes / (COLS / 4) ? bytes / (COLS / 4) : 1;
        bitnet_ternary_matrix w = {d->t2, out, COLS, BITNET_SCALE_ROW, 0, d->sc};
        bitnet_bitlinear_io io = {0};
        io.tokens = TOKENS;
        io.x = d->f1;
        io.act = BITNET_ACT_NONE;
        io.y = d->f3;
        return bitnet_bitlinear(be, &w, &io);
    }
    *ran = 0;
    return BITNET_OK;
}

/* Best wall time of a few runs of op idx on the forced device (-1 on error).
 * *reported gets the bytes the op itself reports (what thresholds compare). */
static double time_op(bitnet_backend *be, int idx, uint64_t bytes, cal_data *d, int force, double rival_ms,
                      uint64_t *reported, bitnet_status *st_out)
{
    be->force = force;
    double best = -1;
    *st_out = BITNET_OK;
    for (int r = 0; r < 3; r++) {
        bitnet_backend_stats_reset(be);
        int ran = 0;
        double t0 = bn_now_ms();
        bitnet_status st = run_op(be, idx, bytes, d, &ran);
        double ms = bn_now_ms() - t0;
        if (st != BITNET_OK || !ran) {
            *st_out = st != BITNET_OK ? st : BITNET_E_UNSUPPORTED;
            best = -1;
            break;
        }
        if (be->nstats > 0 && be->stats[0].s.calls > 0) *reported = be->stats[0].s.bytes_moved / be->stats[0].s.calls;
        if (r > 0 && (best < 0 || ms < best)) best = ms; /* the first run warms up (builds, pages) */
        if (r == 0 && rival_ms >= 0 && ms > 3 * rival_ms + 5) { /* already far behind: decided */
            best = ms;
            break;
        }
        if (ms > 50 && r > 0) { /* slow: one measured run is enough */
            if (best < 0) best = ms;
            break;
        }
    }
    be->force = BN_FORCE_NONE;
    return best;
}

static void put(char *buf, size_t size, size_t *pos, const char *fmt, ...) BN_PRINTF(4, 5);
static void put(char *buf, size_t size, size_t *pos, const char *fmt, ...)
{
    if (!buf || *pos >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *pos, size - *pos, fmt, ap);
    va_end(ap);
    if (n > 0) *pos = *pos + (size_t)n < size ? *pos + (size_t)n : size - 1;
}

static uint64_t calibrate_max_bytes(void)
{
    const char *v = getenv("BITNET_CALIBRATE_MAX");
    uint64_t m = 64 * MiB;
    if (v && *v) {
        char *end;
        unsigned long long x = strtoull(v, &end, 10);
        if (!*end && x >= 4096 && x <= 64 * MiB) m = x;
    }
    return m;
}

bitnet_status bitnet_backend_calibrate(bitnet_backend *be, char *report, size_t size)
{
    size_t pos = 0;
    if (report && size) report[0] = 0;
    if (!be) return bn_fail(BITNET_E_INVALID, "calibrate: NULL backend");
    if (be->mode == BN_MODE_CPU)
        return bn_fail(BITNET_E_UNSUPPORTED, "calibration compares OpenCL with the CPU: use --device auto or opencl");
    bitnet_status st = bn_backend_ensure_ocl(be);
    if (st != BITNET_OK) return st;
    const bn_ocl_caps *caps = bn_ocl_get_caps(be->ocl);
    bn_backend_set_device_key(be, caps->name, caps->driver, caps->platform_version);
    cal_data d;
    uint64_t max_bytes = calibrate_max_bytes();
    st = cal_data_init(&d, max_bytes);
    if (st != BITNET_OK) return st;

    /* keep the caller's statistics */
    bn_stat_entry *saved = malloc(sizeof be->stats);
    size_t nsaved = be->nstats;
    if (saved) memcpy(saved, be->stats, sizeof be->stats);

    json_t *doc = json_object(), *th = json_object(), *meas = json_object();
    json_object_set_new(doc, "device", json_string(caps->name));
    json_object_set_new(doc, "driver", json_string(caps->driver));
    json_object_set_new(doc, "device_key", json_string(be->device_key));
    put(report, size, &pos, "calibrating %s (sizes 4 KiB..%llu KiB of data moved)\n", caps->name,
        (unsigned long long)(max_bytes / 1024));
    for (int i = 0; i < BN_N_OPS; i++) {
        void *fn;
        memcpy(&fn, (const char *)&bn_ocl_ops + bn_ops[i].slot, sizeof fn);
        if (!fn) continue;
        uint64_t rep[16];
        double cpu_ms[16], ocl_ms[16];
        int n = 0;
        bitnet_status ost = BITNET_OK;
        /* From the largest size down: the threshold is the smallest size from
         * which OpenCL wins at every larger one, so the first size where the
         * CPU wins ends the search (often at once). */
        uint64_t b = 4096, thr = NEVER;
        while (b * 4 <= max_bytes) b *= 4;
        /* build the programs first, so that no timed run includes a build
         * (a failure here shows again below, where it is reported) */
        int ran = 0;
        be->force = BN_FORCE_OPENCL;
        (void)run_op(be, i, 4096, &d, &ran);
        be->force = BN_FORCE_NONE;
        bitnet_error_clear();
        if (!ran) continue; /* not linked in */
        json_t *rows = json_array();
        for (; b >= 4096 && n < 16; b /= 4, n++) {
            bitnet_status cst;
            uint64_t r_cpu = b, r_ocl = b;
            cpu_ms[n] = time_op(be, i, b, &d, BN_FORCE_CPU, -1, &r_cpu, &cst);
            ocl_ms[n] = cpu_ms[n] < 0 ? -1 : time_op(be, i, b, &d, BN_FORCE_OPENCL, cpu_ms[n], &r_ocl, &ost);
            rep[n] = r_cpu;
            if (cpu_ms[n] < 0 || ocl_ms[n] < 0) {
                if (cpu_ms[n] < 0) ost = cst;
                break;
            }
            json_t *row = json_object();
            json_object_set_new(row, "bytes", json_integer((json_int_t)rep[n]));
            json_object_set_new(row, "cpu_ms", json_real(cpu_ms[n]));
            json_object_set_new(row, "opencl_ms", json_real(ocl_ms[n]));
            json_array_insert_new(rows, 0, row);
            if (ocl_ms[n] >= cpu_ms[n]) {
                n++;
                break;
            }
            thr = rep[n];
        }
        if (ost == BITNET_E_UNSUPPORTED) { /* not linked in */
            json_decref(rows);
            continue;
        }
        json_object_set_new(meas, bn_ops[i].name, rows);
        if (ost != BITNET_OK) thr = NEVER;
        be->threshold[i] = thr;
        if (thr < be->floor) be->floor = thr;
        json_object_set_new(th, bn_ops[i].name, json_integer((json_int_t)thr));
        if (ost != BITNET_OK)
            put(report, size, &pos, "%-18s OpenCL failed (%s: %s): stays on the CPU\n", bn_ops[i].name,
                bitnet_strerror(ost), bitnet_error_detail());
        else if (thr == NEVER)
            put(report, size, &pos, "%-18s the CPU wins at %llu KiB (%.3f ms vs %.3f ms on OpenCL): stays on the CPU\n",
                bn_ops[i].name, (unsigned long long)(rep[n - 1] / 1024), cpu_ms[n - 1], ocl_ms[n - 1]);
        else
            put(report, size, &pos, "%-18s OpenCL from %llu KiB\n", bn_ops[i].name, (unsigned long long)(thr / 1024));
        bitnet_error_clear();
    }
    json_object_set_new(doc, "thresholds", th);
    json_object_set_new(doc, "measurements", meas);
    char path[4200];
    st = thresholds_store(be, doc, path, sizeof path);
    if (st == BITNET_OK) put(report, size, &pos, "thresholds written to %s\n", path);
    json_decref(doc);
    cal_data_free(&d);
    if (saved) {
        memcpy(be->stats, saved, sizeof be->stats);
        be->nstats = nsaved;
        free(saved);
    }
    return st;
}

/* ---- roofline ------------------------------------------------------------------------- */

typedef struct {
    const float *src;
    float *dst;
    double *sums; /* one per range start / grain */
    uint64_t grain;
} bw_args;

/* Non-zero contents: on virtual machines pages of zeros can read several
 * times faster than real data, which would inflate the roofline. */
static void fill_range(void *vp, uint64_t b, uint64_t e)
{
    const bw_args *a = vp;
    float *src = (float *)a->src;
    for (uint64_t i = b; i < e; i++) {
        src[i] = 1.0f + (float)(i & 1023) * 0.5f;
        a->dst[i] = -src[i];
    }
}

static void copy_range(void *vp, uint64_t b, uint64_t e)
{
    const bw_args *a = vp;
    memcpy(a->dst + b, a->src + b, (size_t)(e - b) * sizeof(float));
}

/* Integer adds over 16-byte vectors, four independent chains: the loop is
 * bound by loads, not by the latency of a float accumulator chain. */
typedef uint64_t bn_v2u64 __attribute__((vector_size(16)));
static void read_range(void *vp, uint64_t b, uint64_t e)
{
    const bw_args *a = vp;
    const unsigned char *p = (const unsigned char *)(a->src + b);
    size_t bytes = (size_t)(e - b) * sizeof(float), i = 0;
    bn_v2u64 acc0 = {0, 0}, acc1 = acc0, acc2 = acc0, acc3 = acc0, v0, v1, v2, v3;
    for (; i + 64 <= bytes; i += 64) {
        memcpy(&v0, p + i, 16);
        memcpy(&v1, p + i + 16, 16);
        memcpy(&v2, p + i + 32, 16);
        memcpy(&v3, p + i + 48, 16);
        acc0 += v0;
        acc1 += v1;
        acc2 += v2;
        acc3 += v3;
    }
    acc0 += acc1 + acc2 + acc3;
    uint64_t s = acc0[0] + acc0[1];
    for (; i < bytes; i++) s += p[i];
    a->sums[b / a->grain] = (double)s;
}

static bitnet_status cpu_bandwidth(bitnet_backend *be, uint64_t bytes, double *copy_gbs, double *read_gbs)
{
    size_t sz;
    if (bn_u64_to_size(bytes, &sz)) return bn_fail(BITNET_E_OVERFLOW, "bandwidth: size too large");
    uint64_t n = sz / sizeof(float);
    int threads = bn_pool_threads(be->cpu->pool);
    bw_args a = {malloc(sz), malloc(sz), calloc((size_t)threads + 1, sizeof(double)), 0};
    if (!a.src || !a.dst || !a.sums) {
        free((void *)a.src);
        free(a.dst);
        free(a.sums);
        return bn_fail(BITNET_E_NOMEM, "bandwidth: cannot allocate 2 x %zu bytes", sz);
    }
    a.grain = (n + (uint64_t)threads - 1) / (uint64_t)threads;
    if (a.grain == 0) a.grain = 1;
    bn_parallel_for(be->cpu->pool, n, a.grain, fill_range, &a);
    double best_copy = 0, best_read = 0;
    for (int r = 0; r < 6; r++) {
        double t0 = bn_now_ms();
        bn_parallel_for(be->cpu->pool, n, a.grain, copy_range, &a);
        double t1 = bn_now_ms();
        bn_parallel_for(be->cpu->pool, n, a.grain, read_range, &a);
        double t2 = bn_now_ms();
        if (r == 0) continue;
        if (best_copy == 0 || t1 - t0 < best_copy) best_copy = t1 - t0;
        if (best_read == 0 || t2 - t1 < best_read) best_read = t2 - t1;
    }
    volatile double sink = a.sums[0];
    (void)sink;
    *copy_gbs = best_copy > 0 ? 2.0 * (double)(n * 4) / (best_copy * 1e6) : 0;
    *read_gbs = best_read > 0 ? (double)(n * 4) / (best_read * 1e6) : 0;
    free((void *)a.src);
    free(a.dst);
    free(a.sums);
    return BITNET_OK;
}

/* OpenCL when the backend has (or, under auto, can have) a device. */
static int wants_ocl(bitnet_backend *be)
{
    if (be->mode == BN_MODE_OPENCL) return 1;
    if (be->mode != BN_MODE_AUTO || be->ocl_disabled) return 0;
    if (be->ocl) return 1;
    bn_ocl_caps caps;
    if (bn_ocl_probe(be->ocl_index, &caps, NULL) != BITNET_OK) {
        bitnet_error_clear();
        return 0;
    }
    return 1;
}

bitnet_status bitnet_backend_bandwidth(bitnet_backend *be, uint64_t bytes, double *copy_gbs, double *read_gbs)
{
    if (!be || !copy_gbs || !read_gbs) return bn_fail(BITNET_E_INVALID, "bandwidth: NULL argument");
    *copy_gbs = *read_gbs = 0;
    if (bytes < 4096 || bytes > (16ull << 30))
        return bn_fail(BITNET_E_INVALID, "bandwidth: size %llu out of range (4 KiB..16 GiB)", (unsigned long long)bytes);
    if (!wants_ocl(be)) return cpu_bandwidth(be, bytes, copy_gbs, read_gbs);
    bitnet_status st = bn_backend_ensure_ocl(be);
    if (st != BITNET_OK) return st;
    return bn_ocl_bandwidth(be->ocl, bytes, copy_gbs, read_gbs);
}

bitnet_status bitnet_backend_transfer_rate(bitnet_backend *be, uint64_t bytes, int pinned, double *h2d_gbs,
                                           double *d2h_gbs)
{
    if (!be || !h2d_gbs || !d2h_gbs) return bn_fail(BITNET_E_INVALID, "transfer rate: NULL argument");
    *h2d_gbs = *d2h_gbs = 0;
    if (bytes == 0 || bytes > (16ull << 30))
        return bn_fail(BITNET_E_INVALID, "transfer rate: size %llu out of range", (unsigned long long)bytes);
    if (!wants_ocl(be))
        return bn_fail(BITNET_E_UNSUPPORTED, "transfer rates need an OpenCL device (--device opencl or auto)");
    bitnet_status st = bn_backend_ensure_ocl(be);
    if (st != BITNET_OK) return st;
    return bn_ocl_transfer_rate(be->ocl, bytes, pinned, h2d_gbs, d2h_gbs);
}
