/*
 * backend.c - backend creation ("cpu", "opencl", "opencl:N", "auto"), the
 * per-op choice of device, the fallback to the CPU under auto, statistics,
 * logging and the test hooks.  The OpenCL device under auto is created
 * lazily, on the first op large enough to go there, so small workloads never
 * pay for a context or a program build.
 */
#include "backend_impl.h"
#include "opencl/ocl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB (1024ull * 1024ull)

const bn_op_desc bn_ops[BN_N_OPS] = {
    {"quantize_weights", offsetof(bn_backend_ops, quantize_weights), 4 * MiB},
    {"quantize_acts", offsetof(bn_backend_ops, quantize_acts), 4 * MiB},
    {"dequantize_weights", offsetof(bn_backend_ops, dequantize_weights), 4 * MiB},
    {"dequantize_acts", offsetof(bn_backend_ops, dequantize_acts), 4 * MiB},
    {"bitlinear", offsetof(bn_backend_ops, bitlinear), 16 * MiB},
    {"matmul_f32", offsetof(bn_backend_ops, matmul_f32), 16 * MiB},
    {"binary", offsetof(bn_backend_ops, binary), 4 * MiB},
    {"unary", offsetof(bn_backend_ops, unary), 4 * MiB},
    {"softmax", offsetof(bn_backend_ops, softmax), 4 * MiB},
    {"reduce", offsetof(bn_backend_ops, reduce), 4 * MiB},
    {"layernorm", offsetof(bn_backend_ops, layernorm), 4 * MiB},
    {"permute", offsetof(bn_backend_ops, permute), 4 * MiB},
    {"scale", offsetof(bn_backend_ops, scale), 4 * MiB},
    {"cholesky", offsetof(bn_backend_ops, cholesky), 16 * MiB},
    {"qr", offsetof(bn_backend_ops, qr), 4 * MiB},
    {"svd", offsetof(bn_backend_ops, svd), 4 * MiB},
    {"cholesky_solve", offsetof(bn_backend_ops, cholesky_solve), 16 * MiB},
    {"lstsq", offsetof(bn_backend_ops, lstsq), 4 * MiB},
};

int bn_op_index(size_t slot)
{
    for (int i = 0; i < BN_N_OPS; i++)
        if (bn_ops[i].slot == slot) return i;
    return -1;
}

int bn_op_index_by_name(const char *name)
{
    for (int i = 0; i < BN_N_OPS; i++)
        if (strcmp(bn_ops[i].name, name) == 0) return i;
    return -1;
}

static void *slot_fn(const bn_backend_ops *ops, size_t slot)
{
    void *fn;
    memcpy(&fn, (const char *)ops + slot, sizeof fn);
    return fn;
}

/* ---- clock, logging, test hooks ---------------------------------------- */

void bn_backend_log(bitnet_backend *be, bitnet_log_level level, const char *fmt, ...)
{
    if (!be || !be->log) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    be->log(be->log_user, level, msg);
}

void bitnet_backend_set_log(bitnet_backend *be, bitnet_log_fn fn, void *user)
{
    if (!be) return;
    be->log = fn;
    be->log_user = user;
}

/* bn_test_perturb and bn_test_fail: lib/testhooks.c. */

/* ---- cache directory --------------------------------------------------- */

const char *bitnet_cache_dir(char *buf, size_t size)
{
    if (!buf || size == 0) return NULL;
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(buf, size, "%s/bitnet", xdg);
    else if (home && *home)
        n = snprintf(buf, size, "%s/.cache/bitnet", home);
    else
        n = -1; /* nowhere sensible: no cache */
    if (n < 0 || (size_t)n >= size) {
        buf[0] = 0;
        return NULL;
    }
    return buf;
}

/* ---- creation ------------------------------------------------------------ */

static void describe_update(bitnet_backend *be)
{
    char cpu[96];
    snprintf(cpu, sizeof cpu, "cpu (%s, %d thread%s)", bitnet_cpu_simd_name(), bn_pool_threads(be->cpu->pool),
             bn_pool_threads(be->cpu->pool) == 1 ? "" : "s");
    if (be->mode == BN_MODE_CPU) {
        snprintf(be->desc, sizeof be->desc, "%s", cpu);
        return;
    }
    char dev[300];
    if (be->ocl) {
        const bn_ocl_caps *c = bn_ocl_get_caps(be->ocl);
        snprintf(dev, sizeof dev, "opencl:%d (%.120s, %.60s)", bn_ocl_index(be->ocl), c->name, c->vendor);
    } else if (be->mode == BN_MODE_AUTO && be->ocl_disabled) {
        snprintf(dev, sizeof dev, "opencl unavailable");
    } else {
        snprintf(dev, sizeof dev, "opencl on first large op");
    }
    if (be->mode == BN_MODE_OPENCL)
        snprintf(be->desc, sizeof be->desc, "%s + %s", dev, cpu);
    else
        snprintf(be->desc, sizeof be->desc, "auto: %s, else %s", dev, cpu);
}

static bitnet_status parse_spec(const char *spec, int *mode, int *index)
{
    *index = -1;
    if (strcmp(spec, "cpu") == 0) {
        *mode = BN_MODE_CPU;
        return BITNET_OK;
    }
    if (strcmp(spec, "auto") == 0) {
        *mode = BN_MODE_AUTO;
        return BITNET_OK;
    }
    if (strcmp(spec, "opencl") == 0) {
        *mode = BN_MODE_OPENCL;
        return BITNET_OK;
    }
    if (strncmp(spec, "opencl:", 7) == 0) {
        const char *p = spec + 7;
        long v = 0;
        int digits = 0;
        for (; *p >= '0' && *p <= '9' && v < 100000; p++, digits++) v = v * 10 + (*p - '0');
        if (digits > 0 && *p == 0 && v < 100000) {
            *mode = BN_MODE_OPENCL;
            *index = (int)v;
            return BITNET_OK;
        }
    }
    return bn_fail(BITNET_E_INVALID,
                   "unknown device '%.200s': valid forms are cpu, opencl, opencl:N (N = index in "
                   "'bitnet-info --devices'), auto",
                   spec);
}

bitnet_status bitnet_backend_create(bitnet_backend **out, const char *spec, int threads)
{
    if (!out) return bn_fail(BITNET_E_INVALID, "bitnet_backend_create: NULL output pointer");
    *out = NULL;
    if (!spec || !*spec) spec = getenv("BITNET_DEVICE");
    if (!spec || !*spec) spec = "cpu";
    int mode = BN_MODE_CPU, index = -1;
    bitnet_status st = parse_spec(spec, &mode, &index);
    if (st != BITNET_OK) return st;
    bitnet_backend *be = calloc(1, sizeof *be);
    if (!be) return bn_fail(BITNET_E_NOMEM, "backend: out of memory");
    be->mode = mode;
    be->ocl_index = index;
    pthread_mutex_init(&be->mu, NULL);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&be->op_mu, &ma);
    pthread_mutexattr_destroy(&ma);
    for (int i = 0; i < BN_N_OPS; i++) be->threshold[i] = bn_ops[i].default_threshold;
    if (mode == BN_MODE_AUTO) be->floor = bn_thresholds_floor();
    st = bn_cpu_create(&be->cpu, threads);
    if (st == BITNET_OK && mode == BN_MODE_OPENCL) st = bn_backend_ensure_ocl(be);
    if (st != BITNET_OK) {
        bitnet_backend_free(be);
        return st;
    }
    describe_update(be);
    *out = be;
    return BITNET_OK;
}

void bitnet_backend_free(bitnet_backend *be)
{
    if (!be) return;
    if (be->ocl) bn_ocl_free(be->ocl);
    if (be->cpu) bn_cpu_ops.free(be->cpu);
    pthread_mutex_destroy(&be->mu);
    pthread_mutex_destroy(&be->op_mu);
    free(be);
}

const char *bitnet_backend_describe(const bitnet_backend *be) { return be ? be->desc : "(no backend)"; }
int bitnet_backend_threads(const bitnet_backend *be) { return be ? bn_pool_threads(be->cpu->pool) : 0; }

/* The backend used when an op is called with be == NULL: the CPU, all cores. */
static bitnet_backend *default_be;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static void default_init(void)
{
    if (bitnet_backend_create(&default_be, "cpu", 0) != BITNET_OK) default_be = NULL;
}

bn_pool *bn_backend_pool(bitnet_backend *be) { return be && be->cpu ? be->cpu->pool : NULL; }

bitnet_backend *bn_backend_or_default(bitnet_backend *be)
{
    if (be) return be;
    pthread_once(&default_once, default_init);
    return default_be;
}

/* ---- selection ------------------------------------------------------------ */

static void stats_add_kernel(void *user, const char *op, double ms);
static void stats_add_transfer(void *user, const char *op, int to_device, uint64_t bytes, double ms);

static void host_log(void *user, bitnet_log_level level, const char *msg)
{
    bitnet_backend *be = user;
    if (be->log) be->log(be->log_user, level, msg);
}

bitnet_status bn_backend_ensure_ocl(bitnet_backend *be)
{
    if (be->ocl) return BITNET_OK;
    const bn_host host = {be, stats_add_kernel, stats_add_transfer, host_log};
    bitnet_status st = bn_ocl_create(&be->ocl, be->ocl_index, &host);
    if (st == BITNET_OK && be->profiling && (st = bn_ocl_set_profiling(be->ocl, 1)) != BITNET_OK) {
        bn_ocl_free(be->ocl);
        be->ocl = NULL;
    }
    if (st == BITNET_OK) describe_update(be);
    return st;
}

bitnet_status bitnet_backend_set_profiling(bitnet_backend *be, int on)
{
    if (!be) return bn_fail(BITNET_E_INVALID, "bitnet_backend_set_profiling: NULL backend");
    pthread_mutex_lock(&be->op_mu);
    be->profiling = on != 0;
    const bitnet_status st = be->ocl ? bn_ocl_set_profiling(be->ocl, be->profiling) : BITNET_OK;
    pthread_mutex_unlock(&be->op_mu);
    return st;
}

void bn_backend_set_device_key(bitnet_backend *be, const char *name, const char *driver, const char *platform)
{
    uint64_t h = BN_FNV_INIT;
    h = bn_fnv1a64(h, name, strlen(name) + 1);
    h = bn_fnv1a64(h, driver, strlen(driver) + 1);
    h = bn_fnv1a64(h, platform, strlen(platform) + 1);
    snprintf(be->device_key, sizeof be->device_key, "%016llx", (unsigned long long)h);
}

/* auto: the first time an op could go to OpenCL, look the device up (no
 * context yet) and load its calibrated thresholds. */
void bn_backend_auto_probe(bitnet_backend *be)
{
    be->ocl_probed = 1;
    bn_ocl_caps caps;
    int count = 0;
    if (bn_ocl_probe(be->ocl_index, &caps, &count) != BITNET_OK) {
        be->ocl_disabled = 1;
        bn_backend_log(be, BITNET_LOG_INFO, "auto: no OpenCL device (%s); everything runs on the CPU",
                       bitnet_error_detail());
        bitnet_error_clear();
        describe_update(be);
        return;
    }
    bn_backend_set_device_key(be, caps.name, caps.driver, caps.platform_version);
    bn_thresholds_load(be);
}

static uint64_t env_min_bytes(void)
{
    const char *v = getenv("BITNET_AUTO_MIN_BYTES");
    if (!v || !*v) return UINT64_MAX;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    return (errno || *end) ? UINT64_MAX : (uint64_t)x;
}

static bn_target cpu_target(bitnet_backend *be)
{
    bn_target t = {&bn_cpu_ops, be->cpu, 0};
    return t;
}

/* The op's transfers are booked under its name. */
static bn_target ocl_target(bitnet_backend *be, const char *op, int can_fallback)
{
    bn_ocl_ops.op_begin(be->ocl, op ? op : "?");
    bn_target t = {&bn_ocl_ops, be->ocl, can_fallback};
    return t;
}

bn_target bn_backend_cpu_target(bitnet_backend *be)
{
    be = bn_backend_or_default(be);
    return cpu_target(be);
}

bn_target bn_backend_select(bitnet_backend *be, size_t slot, const char *op, uint64_t bytes)
{
    be = bn_backend_or_default(be);
    int idx = bn_op_index(slot);
    int has_ocl = slot_fn(&bn_ocl_ops, slot) != NULL;
    if (be->force == BN_FORCE_CPU || be->mode == BN_MODE_CPU) return cpu_target(be);
    if (be->force == BN_FORCE_OPENCL || be->mode == BN_MODE_OPENCL) {
        if (has_ocl && bn_backend_ensure_ocl(be) == BITNET_OK) return ocl_target(be, op, 0);
        if (!has_ocl && idx >= 0 && !(be->info_logged & (1u << idx))) {
            be->info_logged |= 1u << idx;
            bn_backend_log(be, BITNET_LOG_INFO, "%s has no OpenCL implementation; it runs on the CPU", op);
        }
        return cpu_target(be);
    }
    /* auto */
    if (!has_ocl || be->ocl_disabled || idx < 0) return cpu_target(be);
    uint64_t min = env_min_bytes();
    /* below every known threshold: do not even look for a device (that
     * alone initialises the OpenCL driver, tens of milliseconds) */
    if (min == UINT64_MAX && bytes < be->floor) return cpu_target(be);
    if (!be->ocl_probed) bn_backend_auto_probe(be);
    if (be->ocl_disabled) return cpu_target(be);
    if (bytes < (min != UINT64_MAX ? min : be->threshold[idx])) return cpu_target(be);
    if (!be->ocl) {
        bitnet_status st = bn_backend_ensure_ocl(be);
        if (st != BITNET_OK) {
            bn_backend_fallback(be, op, st);
            return cpu_target(be);
        }
    }
    return ocl_target(be, op, 1);
}

void bn_backend_fallback(bitnet_backend *be, const char *op, bitnet_status st)
{
    be = bn_backend_or_default(be);
    be->ocl_disabled = 1;
    if (!be->warned) {
        be->warned = 1;
        bn_backend_log(be, BITNET_LOG_WARN, "OpenCL failed in %s (%s: %s); running on the CPU from now on",
                       op ? op : "?", bitnet_strerror(st), bitnet_error_detail());
    }
    bitnet_error_clear();
    describe_update(be);
}

/* ---- statistics -------------------------------------------------------------- */

/* The entry for (op, device), created on first use; NULL when the table is full.
 * Called with be->mu held. */
static bn_stat_entry *stat_entry(bitnet_backend *be, const char *op, const char *device)
{
    for (size_t i = 0; i < be->nstats; i++)
        if (strcmp(be->stats[i].s.op, op) == 0 && strcmp(be->stats[i].s.device, device) == 0)
            return &be->stats[i];
    if (be->nstats == BN_MAX_STATS) return NULL;
    bn_stat_entry *e = &be->stats[be->nstats++];
    memset(e, 0, sizeof *e);
    snprintf(e->s.op, sizeof e->s.op, "%s", op);
    snprintf(e->s.device, sizeof e->s.device, "%s", device);
    return e;
}

void bn_backend_record(bitnet_backend *be, const bn_target *t, const char *op, double ms, uint64_t bytes)
{
    if (!be || !t) return;
    pthread_mutex_lock(&be->mu);
    int on_cpu = t->ops == &bn_cpu_ops;
    bn_stat_entry *e = stat_entry(be, op ? op : "?", t->ops->name);
    if (e) {
        e->s.calls++;
        e->host_ms += ms;
        if (on_cpu) e->s.kernel_ms += ms;
        e->s.bytes_moved += bytes;
    }
    pthread_mutex_unlock(&be->mu);
}

static void stats_add_kernel(void *user, const char *op, double ms)
{
    bitnet_backend *be = user;
    pthread_mutex_lock(&be->mu);
    bn_stat_entry *e = stat_entry(be, op ? op : "?", "opencl");
    if (e) e->s.kernel_ms += ms;
    pthread_mutex_unlock(&be->mu);
}

static void stats_add_transfer(void *user, const char *op, int to_device, uint64_t bytes, double ms)
{
    bitnet_backend *be = user;
    pthread_mutex_lock(&be->mu);
    bn_stat_entry *e = stat_entry(be, op ? op : "?", "opencl");
    if (e) {
        if (to_device) {
            e->s.h2d_ms += ms;
            e->s.h2d_bytes += bytes;
        } else {
            e->s.d2h_ms += ms;
            e->s.d2h_bytes += bytes;
        }
    }
    pthread_mutex_unlock(&be->mu);
}

size_t bitnet_backend_op_stats(const bitnet_backend *be, bitnet_op_stats *out, size_t max)
{
    if (!be) return 0;
    bitnet_backend *m = (bitnet_backend *)be; /* the lock only */
    pthread_mutex_lock(&m->mu);
    size_t n = be->nstats;
    for (size_t i = 0; i < n && i < max && out; i++) out[i] = be->stats[i].s;
    pthread_mutex_unlock(&m->mu);
    return n;
}

void bitnet_backend_pool_stats(const bitnet_backend *be, bitnet_pool_stats *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!be) return;
    if (be->ocl) bn_ocl_pool_stats(be->ocl, out);
    bitnet_backend *m = (bitnet_backend *)be; /* the lock only */
    pthread_mutex_lock(&m->mu);
    out->buffer_bytes = be->buf_bytes;
    out->buffer_peak_bytes = be->buf_peak;
    pthread_mutex_unlock(&m->mu);
}

void bitnet_backend_stats_reset(bitnet_backend *be)
{
    if (!be) return;
    pthread_mutex_lock(&be->mu);
    be->nstats = 0;
    pthread_mutex_unlock(&be->mu);
}

/* Appends to buf at *pos, never past size. */
static void put(char *buf, size_t size, size_t *pos, const char *fmt, ...) BN_PRINTF(4, 5);
static void put(char *buf, size_t size, size_t *pos, const char *fmt, ...)
{
    if (*pos >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *pos, size - *pos, fmt, ap);
    va_end(ap);
    if (n > 0) *pos = *pos + (size_t)n < size ? *pos + (size_t)n : size - 1;
}

void bitnet_backend_stats_format(const bitnet_backend *be, char *buf, size_t size)
{
    if (!buf || size == 0) return;
    buf[0] = 0;
    if (!be) return;
    size_t pos = 0;
    bitnet_backend *m = (bitnet_backend *)be;
    pthread_mutex_lock(&m->mu);
    put(buf, size, &pos, "backend: %s\n", be->desc);
    put(buf, size, &pos, "%-18s %-6s %8s %11s %11s %10s %10s %10s %8s\n", "op", "device", "calls", "host ms",
        "kernel ms", "h2d MB", "d2h MB", "xfer ms", "GB/s");
    for (size_t i = 0; i < be->nstats; i++) {
        const bn_stat_entry *e = &be->stats[i];
        double gbs = e->host_ms > 0 ? (double)e->s.bytes_moved / (e->host_ms * 1e6) : 0.0;
        put(buf, size, &pos, "%-18s %-6s %8llu %11.3f %11.3f %10.2f %10.2f %10.3f %8.2f\n", e->s.op, e->s.device,
            (unsigned long long)e->s.calls, e->host_ms, e->s.kernel_ms, (double)e->s.h2d_bytes / 1e6,
            (double)e->s.d2h_bytes / 1e6, e->s.h2d_ms + e->s.d2h_ms, gbs);
    }
    pthread_mutex_unlock(&m->mu);
    if (be->ocl) {
        bitnet_pool_stats p;
        bn_ocl_pool_stats(be->ocl, &p);
        put(buf, size, &pos,
            "opencl buffer pool: %llu allocs, %llu hits, %llu misses, %llu releases, %.2f MB in use, "
            "%.2f MB peak\n",
            (unsigned long long)p.allocs, (unsigned long long)p.hits, (unsigned long long)p.misses,
            (unsigned long long)p.releases, (double)p.bytes_in_use / 1e6, (double)p.peak_bytes / 1e6);
    }
}

/* ---- device-resident weights ---------------------------------------------------- */

bitnet_status bitnet_backend_keep(bitnet_backend *be, const void *p, size_t bytes)
{
    if (!p || bytes == 0)
        return bn_fail(BITNET_E_INVALID, "bitnet_backend_keep: %s", !p ? "NULL pointer" : "0 bytes");
    if (!be || be->mode == BN_MODE_CPU || !bn_ocl_ops.keep) return BITNET_OK;
    if (be->mode == BN_MODE_AUTO) {
        if (!be->ocl_probed) bn_backend_auto_probe(be);
        if (be->ocl_disabled) return BITNET_OK;
    }
    const int had_ocl = be->ocl != NULL;
    bitnet_status st = bn_backend_ensure_ocl(be);
    if (st == BITNET_OK) {
        bn_ocl_ops.op_begin(be->ocl, "keep"); /* the upload is booked under "keep" */
        st = bn_ocl_ops.keep(be->ocl, p, bytes);
    }
    if (st == BITNET_OK || be->mode != BN_MODE_AUTO) return st;
    /* auto: nothing kept, and the ops read host memory as before */
    if (!had_ocl && !be->ocl) {
        bn_backend_fallback(be, "keep", st);
    } else {
        bn_backend_log(be, BITNET_LOG_WARN, "could not keep %zu bytes on the device (%s: %s); they stay in host memory",
                       bytes, bitnet_strerror(st), bitnet_error_detail());
        bitnet_error_clear();
    }
    return BITNET_OK;
}

void bitnet_backend_forget(bitnet_backend *be, const void *p)
{
    if (be && be->ocl && p && bn_ocl_ops.forget) bn_ocl_ops.forget(be->ocl, p);
}

uint64_t bitnet_backend_kept_bytes(const bitnet_backend *be) { return be && be->ocl ? bn_ocl_kept_bytes(be->ocl) : 0; }

/* ---- the plumbing op ------------------------------------------------------------ */

bitnet_status bitnet_scale(bitnet_backend *be, const float *x, uint64_t n, float alpha, float *y)
{
    uint64_t bytes;
    if (n && (!x || !y)) return bn_fail(BITNET_E_INVALID, "scale: NULL buffer");
    if (bn_mul_u64(n, 8, &bytes) || n > BITNET_MAX_ELEMENTS)
        return bn_fail(BITNET_E_OVERFLOW, "scale: %llu elements is too many", (unsigned long long)n);
    if (n == 0) return BITNET_OK;
    bitnet_status st;
    bn_operand opd[] = {BN_IN(x, n * 4), BN_OUT(y, n * 4)};
    BN_DISPATCH(st, be, scale, "scale", bytes, opd, x, n, alpha, y);
    return st;
}
