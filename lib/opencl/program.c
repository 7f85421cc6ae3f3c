/*
 * program.c - OpenCL programs: sources (kernels/common.cl + the family's
 * file, embedded in the library or read from $BITNET_KERNEL_DIR), builds
 * kept per (family, options) for the device's life, kernels created once,
 * and the disk cache of compiled binaries.
 *
 * Cache entry: <cache dir>/<key>.bin, key = FNV-1a 64 over the full source
 * text, the build options, the device name, the driver version and the
 * platform version.  The file starts with a 32-byte header
 *     "BNCLBIN1" | key u64 | binary length u64 | CRC-32 of the binary u32 | 0 u32
 * (little-endian) so that a truncated or corrupt file is caught before the
 * driver sees it; such a file is rebuilt and rewritten silently.  Writes go
 * through bitnet_outfile (lib/fileout.c).  BITNET_CACHE=0 disables it.
 */
#include "ocl_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

extern const struct {
    const char *name;
    const char *src;
    size_t len;
} bn_embedded_kernels[];

#define CACHE_MAGIC "BNCLBIN1"
#define CACHE_HEADER 32
#define CACHE_MAX (256u << 20)

static bn_ocl_cache_stats cache_stats;

void bn_ocl_cache_stats_get(bn_ocl_cache_stats *out)
{
    out->hits = __atomic_load_n(&cache_stats.hits, __ATOMIC_RELAXED);
    out->misses = __atomic_load_n(&cache_stats.misses, __ATOMIC_RELAXED);
    out->corrupt = __atomic_load_n(&cache_stats.corrupt, __ATOMIC_RELAXED);
    out->writes = __atomic_load_n(&cache_stats.writes, __ATOMIC_RELAXED);
}
#define COUNT(field) __atomic_add_fetch(&cache_stats.field, 1, __ATOMIC_RELAXED)

uint64_t bn_fnv1a64(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* ---- sources ----------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 16384;
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* The text of kernels/<name>.cl (malloc'd). */
static bitnet_status load_source(const char *name, char **src, size_t *len)
{
    const char *dir = getenv("BITNET_KERNEL_DIR");
    if (dir && *dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.cl", dir, name);
        *src = read_file(path, len);
        if (*src) return BITNET_OK;
        if (errno != ENOENT) return bn_fail(BITNET_E_IO, "cannot read %s: %s", path, strerror(errno));
    }
    for (size_t i = 0; bn_embedded_kernels[i].name; i++)
        if (strcmp(bn_embedded_kernels[i].name, name) == 0) {
            *len = bn_embedded_kernels[i].len;
            *src = malloc(*len + 1);
            if (!*src) return bn_fail(BITNET_E_NOMEM, "opencl: out of memory");
            memcpy(*src, bn_embedded_kernels[i].src, *len);
            (*src)[*len] = 0;
            return BITNET_OK;
        }
    return bn_fail(BITNET_E_BUILD, "no OpenCL source kernels/%s.cl in the library", name);
}

/* common.cl + "\n#line 1\n" + <family>.cl */
static bitnet_status family_source(const char *family, char **out, size_t *outlen)
{
    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    bitnet_status st = load_source("common", &a, &la);
    if (st == BITNET_OK && strcmp(family, "common") != 0) st = load_source(family, &b, &lb);
    if (st != BITNET_OK) {
        free(a);
        return st;
    }
    static const char sep[] = "\n#line 1\n";
    size_t n = la + (b ? sizeof sep - 1 + lb : 0);
    char *s = malloc(n + 1);
    if (!s) {
        free(a);
        free(b);
        return bn_fail(BITNET_E_NOMEM, "opencl: out of memory");
    }
    memcpy(s, a, la);
    if (b) {
        memcpy(s + la, sep, sizeof sep - 1);
        memcpy(s + la + sizeof sep - 1, b, lb);
    }
    s[n] = 0;
    free(a);
    free(b);
    *out = s;
    *outlen = n;
    return BITNET_OK;
}

/* ---- disk cache ------------------------------------------------------------------ */

static int cache_enabled(void)
{
    const char *v = getenv("BITNET_CACHE");
    return !(v && strcmp(v, "0") == 0);
}

/* mkdir -p for the directory itself (parents included). */
static int mkdir_p(const char *dir)
{
    char tmp[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof tmp) return -1;
    memcpy(tmp, dir, n + 1);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return (mkdir(tmp, 0755) == 0 || errno == EEXIST) ? 0 : -1;
}

static int cache_path(uint64_t key, char *path, size_t size)
{
    char dir[4096];
    if (!bitnet_cache_dir(dir, sizeof dir)) return -1;
    int n = snprintf(path, size, "%s/%016llx.bin", dir, (unsigned long long)key);
    return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

/* The cached binary for key, checked (NULL when absent or bad). */
static unsigned char *cache_load(uint64_t key, size_t *len)
{
    char path[4200];
    if (cache_path(key, path, sizeof path) != 0) return NULL;
    size_t n;
    char *buf = read_file(path, &n);
    if (!buf) return NULL;
    const uint8_t *h = (const uint8_t *)buf;
    if (n < CACHE_HEADER || memcmp(h, CACHE_MAGIC, 8) != 0 || bn_ld64(h + 8) != key ||
        bn_ld64(h + 16) != n - CACHE_HEADER || n - CACHE_HEADER > CACHE_MAX ||
        (uint32_t)crc32(0L, h + CACHE_HEADER, (uInt)(n - CACHE_HEADER)) != bn_ld32(h + 24)) {
        COUNT(corrupt);
        free(buf);
        return NULL;
    }
    unsigned char *bin = malloc(n - CACHE_HEADER);
    if (bin) memcpy(bin, buf + CACHE_HEADER, n - CACHE_HEADER);
    *len = n - CACHE_HEADER;
    free(buf);
    return bin;
}

/* Writes key's entry through bitnet_outfile (a temporary renamed into place:
 * two processes, or two threads, storing one key leave one whole entry);
 * failures only cost a rebuild next time. */
static void cache_store(uint64_t key, const unsigned char *bin, size_t len)
{
    char dir[4096], path[4200];
    if (len == 0 || len > CACHE_MAX || !bitnet_cache_dir(dir, sizeof dir) || mkdir_p(dir) != 0) return;
    if (cache_path(key, path, sizeof path) != 0) return;
    bitnet_outfile *o;
    if (bitnet_outfile_open(&o, path) != BITNET_OK) return;
    FILE *f = bitnet_outfile_stream(o);
    uint8_t h[CACHE_HEADER] = {0};
    memcpy(h, CACHE_MAGIC, 8);
    bn_st64(h + 8, key);
    bn_st64(h + 16, len);
    bn_st32(h + 24, (uint32_t)crc32(0L, bin, (uInt)len));
    if (fwrite(h, 1, sizeof h, f) != sizeof h || fwrite(bin, 1, len, f) != len) {
        bitnet_outfile_abort(o);
        return;
    }
    if (bitnet_outfile_commit(o) == BITNET_OK) COUNT(writes);
}

static unsigned char *program_binary(cl_program prog, size_t *len)
{
    size_t n = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || n == 0) return NULL;
    unsigned char *bin = malloc(n);
    if (!bin) return NULL;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) != CL_SUCCESS) {
        free(bin);
        return NULL;
    }
    *len = n;
    return bin;
}

/* ---- builds ------------------------------------------------------------------------ */

/* The build log of prog (malloc'd, NUL-terminated) or NULL. */
static char *build_log(bn_ocl *o, cl_program prog)
{
    size_t n = 0;
    char *log = NULL;
    if (clGetProgramBuildInfo(prog, o->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS && n > 0) {
        log = malloc(n + 1);
        if (log && clGetProgramBuildInfo(prog, o->device, CL_PROGRAM_BUILD_LOG, n, log, NULL) == CL_SUCCESS)
            log[n] = 0;
        else if (log)
            log[0] = 0;
    }
    return log;
}

static bitnet_status build_failed(bn_ocl *o, cl_program prog, cl_int err, const char *family, const char *opts)
{
    char *log = build_log(o, prog);
    bitnet_status st = bn_fail(BITNET_E_BUILD,
                               "building kernels/%s.cl with '%s' on %s failed: clBuildProgram: %s (%d); build log:\n%s",
                               family, opts, o->caps.name, bn_cl_errname(err), (int)err,
                               log && log[0] ? log : "(empty)");
    free(log);
    return st;
}

static bitnet_status build(bn_ocl *o, const char *family, const char *options, cl_program *out)
{
    char opts[1024];
    int on = snprintf(opts, sizeof opts, "%s%s-cl-std=CL1.2", options, *options ? " " : "");
    if (on < 0 || (size_t)on >= sizeof opts) return bn_fail(BITNET_E_INVALID, "build options too long");
    if (bn_test_fail("build"))
        return bn_cl_fail_test(CL_BUILD_PROGRAM_FAILURE, "clBuildProgram(program, 1, &device, options, NULL, NULL)",
                               __FILE__, __LINE__);
    char *src = NULL;
    size_t len = 0;
    bitnet_status st = family_source(family, &src, &len);
    if (st != BITNET_OK) return st;
    uint64_t key = BN_FNV_INIT;
    key = bn_fnv1a64(key, src, len + 1);
    key = bn_fnv1a64(key, opts, strlen(opts) + 1);
    key = bn_fnv1a64(key, o->caps.name, strlen(o->caps.name) + 1);
    key = bn_fnv1a64(key, o->caps.driver, strlen(o->caps.driver) + 1);
    key = bn_fnv1a64(key, o->caps.platform_version, strlen(o->caps.platform_version) + 1);
    int use_cache = cache_enabled();
    cl_int err;
    double t0 = bn_now_ms();
    if (use_cache) {
        size_t blen = 0;
        unsigned char *bin = cache_load(key, &blen);
        if (bin) {
            const unsigned char *bins[1] = {bin};
            cl_int bstatus = CL_SUCCESS;
            cl_program prog = clCreateProgramWithBinary(o->ctx, 1, &o->device, &blen, bins, &bstatus, &err);
            free(bin);
            if (prog && err == CL_SUCCESS && bstatus == CL_SUCCESS &&
                clBuildProgram(prog, 1, &o->device, opts, NULL, NULL) == CL_SUCCESS) {
                COUNT(hits);
                free(src);
                bn_ocl_log(o, BITNET_LOG_DEBUG, "opencl: kernels/%s.cl (%s) loaded from the cache in %.1f ms",
                               family, opts, bn_now_ms() - t0);
                *out = prog;
                return BITNET_OK;
            }
            if (prog) clReleaseProgram(prog);
            COUNT(corrupt); /* the driver refused it: rebuild below */
        }
        COUNT(misses);
    }
    const char *srcs[1] = {src};
    cl_program prog = clCreateProgramWithSource(o->ctx, 1, srcs, &len, &err);
    free(src);
    if (!prog) return bn_cl_fail(err, "clCreateProgramWithSource(ctx, 1, src, len, &err)", __FILE__, __LINE__);
    err = clBuildProgram(prog, 1, &o->device, opts, NULL, NULL);
    if (err != CL_SUCCESS) {
        st = build_failed(o, prog, err, family, opts);
        clReleaseProgram(prog);
        return st;
    }
    bn_ocl_log(o, BITNET_LOG_DEBUG, "opencl: built kernels/%s.cl (%s) in %.1f ms", family, opts,
                   bn_now_ms() - t0);
    char *log = build_log(o, prog); /* warnings of a good build, for -v -v */
    size_t sp = 0;
    while (log && log[sp] && strchr(" \t\r\n", log[sp])) sp++;
    if (log && log[sp]) bn_ocl_log(o, BITNET_LOG_DEBUG, "opencl: build log of kernels/%s.cl:\n%s", family, log + sp);
    free(log);
    if (use_cache) {
        size_t blen = 0;
        unsigned char *bin = program_binary(prog, &blen);
        if (bin) cache_store(key, bin, blen);
        free(bin);
    }
    *out = prog;
    return BITNET_OK;
}

bitnet_status bn_ocl_kernel(bn_ocl *o, const char *family, const char *name, const char *options, cl_kernel *k)
{
    if (!options) options = "";
    bn_ocl_prog *p = NULL;
    for (size_t i = 0; i < o->nprogs; i++)
        if (strcmp(o->progs[i].family, family) == 0 && strcmp(o->progs[i].options, options) == 0) {
            p = &o->progs[i];
            break;
        }
    if (!p) {
        if (strlen(family) >= sizeof p->family) return bn_fail(BITNET_E_INVALID, "kernel family name too long");
        bn_ocl_prog *np = realloc(o->progs, (o->nprogs + 1) * sizeof *np);
        if (!np) return bn_fail(BITNET_E_NOMEM, "opencl: out of memory");
        o->progs = np;
        p = &o->progs[o->nprogs];
        memset(p, 0, sizeof *p);
        p->options = strdup(options);
        if (!p->options) return bn_fail(BITNET_E_NOMEM, "opencl: out of memory");
        bitnet_status st = build(o, family, options, &p->prog);
        if (st != BITNET_OK) {
            free(p->options);
            return st;
        }
        snprintf(p->family, sizeof p->family, "%s", family);
        o->nprogs++;
    }
    for (size_t i = 0; i < p->nkernels; i++)
        if (strcmp(p->kernels[i].name, name) == 0) {
            *k = p->kernels[i].k;
            return BITNET_OK;
        }
    if (strlen(name) >= sizeof p->kernels[0].name) return bn_fail(BITNET_E_INVALID, "kernel name too long");
    bn_ocl_kern *nk = realloc(p->kernels, (p->nkernels + 1) * sizeof *nk);
    if (!nk) return bn_fail(BITNET_E_NOMEM, "opencl: out of memory");
    p->kernels = nk;
    cl_int err;
    cl_kernel kk = clCreateKernel(p->prog, name, &err);
    if (!kk) {
        char call[160];
        snprintf(call, sizeof call, "clCreateKernel(kernels/%s.cl, \"%s\")", family, name);
        return bn_cl_fail(err, call, __FILE__, __LINE__);
    }
    snprintf(nk[p->nkernels].name, sizeof nk[p->nkernels].name, "%s", name);
    nk[p->nkernels].k = kk;
    p->nkernels++;
    *k = kk;
    return BITNET_OK;
}

void bn_ocl_programs_free(bn_ocl *o)
{
    for (size_t i = 0; i < o->nprogs; i++) {
        bn_ocl_prog *p = &o->progs[i];
        for (size_t j = 0; j < p->nkernels; j++) clReleaseKernel(p->kernels[j].k);
        free(p->kernels);
        free(p->options);
        clReleaseProgram(p->prog);
    }
    free(o->progs);
    o->progs = NULL;
    o->nprogs = 0;
}
