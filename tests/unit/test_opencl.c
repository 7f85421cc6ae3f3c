/*
 * test_opencl.c - the OpenCL runtime on whatever platform is installed
 * (PoCL in CI): embedded kernels against the reference, device selection,
 * the disk cache of binaries (hits, corruption), the buffer pool, fallback
 * under auto for every BITNET_TEST_FAIL step, errors under opencl, build
 * logs, launch limits, lazy creation, calibration (its thresholds file
 * written through a symbolic link: the link stays) and the roofline.
 * Every test skips when there is no OpenCL device.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "testutil.h"
#include "opencl/ocl.h"

static int have_device;
static char tmpdir[256];

#define NEED_DEVICE()              \
    do {                           \
        if (!have_device) skip();  \
    } while (0)

static int warn_count, info_count;
static char last_warn[2048];
static void logger(void *user, bitnet_log_level level, const char *msg)
{
    (void)user;
    if (level == BITNET_LOG_WARN) {
        warn_count++;
        snprintf(last_warn, sizeof last_warn, "%s", msg);
    } else {
        info_count++;
    }
}

static float *random_floats(uint64_t n, uint32_t seed) { return tu_lcg_floats(n, seed, 3, 997.0f); }

/* A fresh, empty cache directory for one test. */
static void fresh_cache(const char *name)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, name);
    mkdir(dir, 0755);
    setenv("XDG_CACHE_HOME", dir, 1);
}

static void clean_env(void)
{
    unsetenv("BITNET_TEST_FAIL");
    unsetenv("BITNET_TEST_PERTURB");
    unsetenv("BITNET_KERNEL_DIR");
    unsetenv("BITNET_CACHE");
    unsetenv("BITNET_AUTO_MIN_BYTES");
    unsetenv("BITNET_CALIBRATE_MAX");
    warn_count = info_count = 0;
    last_warn[0] = 0;
}

/* Runs scale on be over n elements and checks it exactly against the definition. */
static void check_scale(bitnet_backend *be, uint64_t n, uint32_t seed)
{
    float *x = random_floats(n, seed), *y = malloc(n * 4), *r = malloc(n * 4);
    const float alpha = 0.8125f;
    bitnet_status st = bitnet_scale(be, x, n, alpha, y);
    if (st != BITNET_OK) fail_msg("scale n=%llu: %s: %s", (unsigned long long)n, bitnet_strerror(st), bitnet_error_detail());
    assert_int_equal(bitnet_scale_ref(x, n, alpha, r), BITNET_OK);
    for (uint64_t i = 0; i < n; i++) {
        assert_true(r[i] == alpha * x[i]);
        if (y[i] != r[i]) fail_msg("n %llu: y[%llu] = %a, want %a", (unsigned long long)n, (unsigned long long)i, y[i], r[i]);
    }
    free(x);
    free(y);
    free(r);
}

static int count_opencl_stats(bitnet_backend *be, const char *device)
{
    bitnet_op_stats st[16];
    size_t n = bitnet_backend_op_stats(be, st, 16);
    int c = 0;
    for (size_t i = 0; i < n && i < 16; i++)
        if (strcmp(st[i].device, device) == 0) c += (int)st[i].calls;
    return c;
}

/* ---- kernels ------------------------------------------------------------------------ */

static void test_scale_on_opencl(void **state)
{
    (void)state;
    NEED_DEVICE();
    clean_env();
    fresh_cache("scale");
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "opencl", 2), BITNET_OK);
    assert_non_null(strstr(bitnet_backend_describe(be), "opencl:"));
    static const uint64_t sizes[] = {1, 3, 17, 255, 4097, 1u << 20};
    /* profiling off (the default): calls and bytes are counted, no kernel time */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) check_scale(be, sizes[i], (uint32_t)i + 1);
    bitnet_op_stats st[8];
    size_t n = bitnet_backend_op_stats(be, st, 8);
    assert_int_equal(n, 1);
    assert_int_equal(st[0].calls, 6);
    assert_int_equal(st[0].h2d_bytes, (1 + 3 + 17 + 255 + 4097 + (1u << 20)) * 4);
    assert_true(st[0].kernel_ms == 0);
    /* on: the same calls, and the kernel time of each */
    bitnet_backend_stats_reset(be);
    assert_int_equal(bitnet_backend_set_profiling(be, 1), BITNET_OK);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) check_scale(be, sizes[i], (uint32_t)i + 1);
    n = bitnet_backend_op_stats(be, st, 8);
    assert_int_equal(n, 1);
    assert_string_equal(st[0].op, "scale");
    assert_string_equal(st[0].device, "opencl");
    assert_int_equal(st[0].calls, 6);
    uint64_t total = 1 + 3 + 17 + 255 + 4097 + (1u << 20);
    assert_int_equal(st[0].h2d_bytes, total * 4);
    assert_int_equal(st[0].d2h_bytes, total * 4);
    assert_int_equal(st[0].bytes_moved, total * 8);
    assert_true(st[0].kernel_ms > 0);
    char buf[4096];
    bitnet_backend_stats_format(be, buf, sizeof buf);
    assert_non_null(strstr(buf, "opencl buffer pool"));
    bitnet_backend_free(be);
}

static void test_perturb_on_opencl(void **state)
{
    (void)state;
    NEED_DEVICE();
    clean_env();
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "opencl", 1), BITNET_OK);
    setenv("BITNET_TEST_PERTURB", "scale", 1);
    uint64_t n = 4097;
    float *x = random_floats(n, 77), *y = malloc(n * 4);
    assert_int_equal(bitnet_scale(be, x, n, 3.0f, y), BITNET_OK);
    int diffs = 0;
    for (uint64_t i = 0; i < n; i++) diffs += y[i] != 3.0f * x[i];
    assert_int_equal(diffs, 1);
    clean_env();
    free(x);
    free(y);
    bitnet_backend_free(be);
}

extern const struct {
    const char *name;
    const char *src;
    size_t len;
} bn_embedded_kernels[];

/* Every kernels/<family>.cl builds alone after common.cl with its default
 * tunables: asking for a kernel that no file has must fail at kernel
 * creation (CL_INVALID_KERNEL_NAME), never at the build. */
static void test_every_family_builds(void **state)
{
    (void)state;
    NEED_DEVICE();
    clean_env();
    bn_ocl *o;
    assert_int_equal(bn_ocl_create(&o, -1, NULL), BITNET_OK);
    int families = 0;
    for (size_t i = 0; bn_embedded_kernels[i].name; i++) {
        cl_kernel k;
        bitnet_status st = bn_ocl_kernel(o, bn_embedded_kernels[i].name, "bn_no_such_kernel", "", &k);
        if (st != BITNET_E_DEVICE || !strstr(bitnet_error_detail(), "CL_INVALID_KERNEL_NAME"))
            fail_msg("kernels/%s.cl: %s: %s", bn_embedded_kernels[i].name, bitnet_strerror(st), bitnet_error_detail());
        families++;
    }
    assert_true(families >= 2); /* common and scale at least */
    bn_ocl_free(o);
}

/* ---- selection ------------------------------------------------------------------------ */

static void test_device_index(void **state)
{
    (void)state;
    NEED_DEVICE();
    clean_env();
    bn_ocl_caps caps;
    int count = 0;
    assert_int_equal(bn_ocl_probe(0, &caps, &count), BITNET_OK);
    assert_true(count >= 1);
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "opencl:0", 1), BITNET_OK);
    assert_non_null(strstr(bitnet_backend_describe(be), "opencl:0"));
    assert_non_null(strstr(bitnet_backend_describe(be), caps.name));
    bitnet_backend_free(be);
    char spec[32];
    snprintf(spec, sizeof spec, "opencl:%d", count);
    assert_int_equal(bitnet_backend_create(&be, spec, 1), BITNET_E_NO_DEVICE);
    assert_null(be);
    char want[64];
    snprintf(want, sizeof want, "no OpenCL device %d", count);
    assert_non_null(strstr(bitnet_error_detail(), want));
    assert_non_null(strstr(bitnet_error_detail(), "opencl:0"));
    assert_int_equal(bitnet_backend_create(&be, "opencl:99999", 1), BITNET_E_NO_DEVICE);
}

static void test_devices_listing(void **state)
{
    (void)state;
    NEED_DEVICE();
    bn_ocl_caps caps;
    assert_int_equal(bn_ocl_probe(0, &caps, NULL), BITNET_OK);
    char *js;
    assert_int_equal(bitnet_devices_json(&js), BITNET_OK);
    json_error_t err;
    json_t *doc = json_loads(js, 0, &err);
    assert_non_null(doc);
    json_t *dev = json_array_get(json_object_get(json_array_get(json_object_get(doc, "platforms"), 0), "devices"), 0);
    assert_non_null(dev);
    assert_string_equal(json_string_value(json_object_get(dev, "name")), caps.name);
    assert_string_equal(json_string_value(json_object_get(dev, "device")), "opencl:0");
    assert_true(json_integer_value(json_object_get(dev, "max_work_group_size")) == (json_int_t)caps.max_wg);
    assert_true(json_is_boolean(json_object_get(json_object_get(dev, "extensions"), "cl_khr_fp64")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "cpu"), "simd")), bitnet_cpu_simd_name());
    json_decref(doc);
    free(js);
    char *text;
    assert_int_equal(bitnet_devices_text(&text), BITNET_OK);
    assert_non_null(strstr(text, caps.name));
    assert_non_null(strstr(text, "opencl:0"));
    assert_non_null(strstr(text, "cpu:"));
    free(text);
}

static void test_auto_is_lazy(void **state)
{
    (void)state;
    NEED_DEVICE();
    clean_env();
    fresh_cache("lazy");
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "auto", 1), BITNET_OK);
    check_scale(be, 255, 4); /* far below any threshold */
    assert_non_null(strstr(bitnet_backend_describe(be), "first large op"));
    assert_int_equal(count_opencl_stats(be, "opencl"), 0);
    assert_int_equal(count_opencl_stats(be, "cpu"), 1);
    bn_ocl_cache_stats cs;
    bn_ocl_cache_stats_get(&cs);
    uint64_t before = cs.hits + cs.misses;
    setenv("BITNET_AUTO_MIN_BYTES", "0", 1); /* now everything may go */
    check_scale(be, 4097, 5);
    assert_int_equal(count_opencl_stats(be, "opencl"), 1);
    bn_ocl_cache_stats_get(&cs);
    assert_int_equal(cs.hits + cs.misses, before + 1); /* one program, built on demand */
    assert_non_null(strstr(bitnet_backend_describe(be), "opencl:"));
    clean_env();
    bitnet_backend_free(be);
}

/* ---- disk cache ---------------------------------------------------------------------- */

/* Path of the only *.bin in the cache directory. */
static int find_bin(char *path, size_t size)
{
    char dir[512];
    assert_non_null(bitnet_cache_dir(dir, sizeof dir));
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strlen(e->d_name) > 4 && strcmp(e->d_name + strlen(e->d_name) - 4, ".bin") == 0) {
            snprintf(path, size, "%s/%s", dir, e->d_name);
            n++;
        }
    closedir(d);
    return n;
}

static void one_scale_backend(void)
{
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "opencl", 1), BITNET_OK);
    check_scale(be, 1000, 11);
    bitnet_backend_free(be);
}

static void test_disk_cache(void **state)
{
    (void)state;
    NEED_DEVICE();
    clean_env();
    fresh_cache("disk");
    bn_ocl_cache_stats a, b;
    bn_ocl_cache_stats_get(&a);
    one_scale_backend();
    bn_ocl_cache_stats_get(&b);
    assert_int_equal(b.misses, a.misses + 1);
    assert_int_equal(b.hits, a.hits);
    assert_int_equal(b.writes, a.writes + 1);
    char path[1024];
    assert_int_equal(find_bin(path, sizeof path), 1);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_true(sb.st_size > 32);

    /* a second backend loads the binary */
    one_scale_backend();
    bn_ocl_cache_stats_get(&a);
    assert_int_equal(a.hits, b.hits + 1);
    assert_int_equal(a.misses, b.misses);

    /* corrupt one byte of the binary: detected by the CRC, rebuilt, rewritten */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 32 + (sb.st_size - 32) / 2, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 32 + (sb.st_size - 32) / 2, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
    one_scale_backend();
    bn_ocl_cache_stats_get(&b);
    assert_int_equal(b.corrupt, a.corrupt + 1);
    assert_int_equal(b.misses, a.misses + 1);
    assert_int_equal(b.writes, a.writes + 1);
    one_scale_backend(); /* the rewritten entry is good */
    bn_ocl_cache_stats_get(&a);
    assert_int_equal(a.hits, b.hits + 1);

    /* a truncated file likewise */
    assert_int_equal(truncate(path, 20), 0);
    one_scale_backend();
    bn_ocl_cache_stats_get(&b);
    assert_int_equal(b.corrupt, a.corrupt + 1);
    assert_int_equal(b.writes, a.writes + 1);

    one_scale_backend(); /* rewritten again */
    bn_ocl_cache_stats_get(&a);
    assert_int_equal(a.hits, b.hits + 1);

    /* an entry made for another key (another driver version, say) put under
     * this key's name: a whole, well-checksummed binary with the wrong key in
     * its header is discarded too, never given to the driver */
    f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 8, SEEK_SET);
    c = fgetc(f);
    fseek(f, 8, SEEK_SET);
    fputc(c ^ 0x01, f);
    fclose(f);
    one_scale_backend();
    bn_ocl_cache_stats_get(&b);
    assert_int_equal(b.corrupt, a.corrupt + 1);
    assert_int_equal(b.writes, a.writes + 1);

    /* a wrong length in the header, likewise */
    f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 16, SEEK_SET);
    fputc(0x7f, f);
    fclose(f);
    one_scale_backend();
    bn_ocl_cache_stats_get(&a);
    assert_int_equal(a.corrupt, b.corrupt + 1);
    assert_int_equal(a.writes, b.writes + 1);
    b = a;

    /* every write went through a temporary that is gone */
    char dir[512];
    assert_non_null(bitnet_cache_dir(dir, sizeof dir));
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) assert_false(bitnet_outfile_is_temp(e->d_name));
    closedir(d);

    /* BITNET_CACHE=0: neither read nor written */
    setenv("BITNET_CACHE", "0", 1);
    one_scale_backend();
    bn_ocl_cache_stats_get(&a);
    assert_int_equal(a.hits, b.hits);
    assert_int_equal(a.misses, b.misses);
    assert_int_equal(a.writes, b.writes);
    clean_env();
}

/* ---- pool ------------------------------------------------------------------------------ */

static void test_pool(void **state)
{
    (void)state;
    NEED_DEVICE();
    clean_env();
    bn_ocl *o;
    assert_int_equal(bn_ocl_create(&o, -1, NULL), BITNET_OK);
    cl_mem m[3];
    for (int i = 0; i < 3; i++) assert_int_equal(bn_ocl_alloc(o, 1000, &m[i]), BITNET_OK);
    bitnet_pool_stats ps;
    bn_ocl_pool_stats(o, &ps);
    assert_int_equal(ps.allocs, 3);
    assert_int_equal(ps.misses, 3);
    assert_int_equal(ps.hits, 0);
    assert_true(ps.bytes_in_use >= 3000);
    uint64_t peak = ps.bytes_in_use;
    for (int i = 0; i < 3; i++) bn_ocl_release(o, m[i]);
    bn_ocl_pool_stats(o, &ps);
    assert_int_equal(ps.releases, 3);
    assert_int_equal(ps.bytes_in_use, 0);
    assert_int_equal(ps.peak_bytes, peak);
    /* same size class: reused */
    assert_int_equal(bn_ocl_alloc(o, 1000, &m[0]), BITNET_OK);
    assert_int_equal(bn_ocl_alloc(o, 900, &m[1]), BITNET_OK);
    /* a much larger one: new */
    assert_int_equal(bn_ocl_alloc(o, 1 << 20, &m[2]), BITNET_OK);
    bn_ocl_pool_stats(o, &ps);
    assert_int_equal(ps.allocs, 6);
    assert_int_equal(ps.hits, 2);
    assert_int_equal(ps.misses, 4);
    assert_true(ps.peak_bytes >= (1 << 20));
    /* the buffers work */
    uint8_t in[1000], out[1000];
    for (int i = 0; i < 1000; i++) in[i] = (uint8_t)(i * 7);
    assert_int_equal(bn_ocl_upload(o, m[0], 0, in, sizeof in), BITNET_OK);
    assert_int_equal(bn_ocl_download(o, m[0], 0, out, sizeof out), BITNET_OK);
    assert_memory_equal(in, out, sizeof in);
    for (int i = 0; i < 3; i++) bn_ocl_release(o, m[i]);
    bn_ocl_release(o, NULL);
    /* larger than the device allows */
    const bn_ocl_caps *caps = bn_ocl_get_caps(o);
    cl_mem big;
    assert_int_equal(bn_ocl_alloc(o, (size_t)caps->max_alloc + 1, &big), BITNET_E_DEVICE_MEMORY);
    assert_non_null(strstr(bitnet_error_detail(), "CL_DEVICE_MAX_MEM_ALLOC_SIZE"));
    bn_ocl_free(o);
}

static void test_launch_limits(void **state)
{
    (void)state;
    NEED_DEVICE();
    clean_env();
    bn_ocl *o;
    assert_int_equal(bn_ocl_create(&o, -1, NULL), BITNET_OK);
    cl_kernel k, k2;
    assert_int_equal(bn_ocl_kernel(o, "scale", "scale", "", &k), BITNET_OK);
    assert_int_equal(bn_ocl_kernel(o, "scale", "scale", "", &k2), BITNET_OK);
    assert_ptr_equal(k, k2); /* created once */
    assert_int_equal(bn_ocl_kernel(o, "scale", "no_such_kernel", "", &k2), BITNET_E_DEVICE);
    assert_non_null(strstr(bitnet_error_detail(), "clCreateKernel"));
    assert_non_null(strstr(bitnet_error_detail(), "CL_INVALID_KERNEL_NAME"));
    assert_int_equal(bn_ocl_kernel(o, "no_such_family", "x", "", &k2), BITNET_E_BUILD);
    size_t wg = bn_ocl_kernel_wg(o, k);
    size_t local = wg * 2, global = local * 2;
    assert_int_equal(bn_ocl_run(o, k, 1, &global, &local, "scale"), BITNET_E_DEVICE);
    assert_non_null(strstr(bitnet_error_detail(), "CL_KERNEL_WORK_GROUP_SIZE"));
    local = 4;
    global = 6;
    assert_int_equal(bn_ocl_run(o, k, 1, &global, &local, "scale"), BITNET_E_INVALID);
    /* a real CL error carries the call, the status name, file and line */
    assert_int_equal(bn_cl_fail(CL_OUT_OF_RESOURCES, "clFoo(x)", "/abs/path/lib/opencl/x.c", 12), BITNET_E_DEVICE);
    assert_string_equal(bitnet_error_detail(), "clFoo(x) failed: CL_OUT_OF_RESOURCES (-5) at lib/opencl/x.c:12");
    assert_int_equal(bn_cl_fail(CL_MEM_OBJECT_ALLOCATION_FAILURE, "c", "f.c", 1), BITNET_E_DEVICE_MEMORY);
    assert_int_equal(bn_cl_fail(CL_BUILD_PROGRAM_FAILURE, "c", "f.c", 1), BITNET_E_BUILD);
    assert_string_equal(bn_cl_errname(-30), "CL_INVALID_VALUE");
    bn_ocl_free(o);
}

/* ---- failures ---------------------------------------------------------------------------- */

static const char *const steps[] = {"create", "build", "alloc", "run"};

static void test_fallback_under_auto(void **state)
{
    (void)state;
    NEED_DEVICE();
    for (size_t s = 0; s < 4; s++) {
        clean_env();
        fresh_cache("fallback");
        setenv("BITNET_TEST_FAIL", steps[s], 1);
        setenv("BITNET_AUTO_MIN_BYTES", "0", 1);
        bitnet_backend *be;
        assert_int_equal(bitnet_backend_create(&be, "auto", 2), BITNET_OK);
        bitnet_backend_set_log(be, logger, NULL);
        check_scale(be, 4097, 21);
        check_scale(be, 17, 22);
        check_scale(be, 1 << 20, 23);
        if (warn_count != 1) fail_msg("step %s: %d warnings", steps[s], warn_count);
        assert_non_null(strstr(last_warn, "OpenCL failed in scale"));
        assert_non_null(strstr(last_warn, "running on the CPU from now on"));
        assert_non_null(strstr(last_warn, "simulated failure"));
        assert_int_equal(count_opencl_stats(be, "cpu"), 3);
        assert_int_equal(count_opencl_stats(be, "opencl"), 0);
        bitnet_backend_free(be);
    }
    clean_env();
}

static void test_errors_under_opencl(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const bitnet_status want[] = {BITNET_E_DEVICE, BITNET_E_BUILD, BITNET_E_DEVICE_MEMORY, BITNET_E_DEVICE};
    static const char *const call[] = {"clCreateContext", "clBuildProgram", "clCreateBuffer", "clEnqueueNDRangeKernel"};
    for (size_t s = 0; s < 4; s++) {
        clean_env();
        fresh_cache("errors");
        setenv("BITNET_TEST_FAIL", steps[s], 1);
        bitnet_backend *be = NULL;
        bitnet_status st = bitnet_backend_create(&be, "opencl", 1);
        if (s > 0) {
            assert_int_equal(st, BITNET_OK);
            bitnet_backend_set_log(be, logger, NULL);
            float x[64] = {1}, y[64];
            st = bitnet_scale(be, x, 64, 2.0f, y);
        }
        assert_int_equal(st, want[s]);
        const char *d = bitnet_error_detail();
        if (!strstr(d, call[s]) || !strstr(d, "lib/opencl/") || !strstr(d, ".c:"))
            fail_msg("step %s: detail '%s'", steps[s], d);
        assert_int_equal(warn_count, 0); /* no fallback under opencl */
        bitnet_backend_free(be);
    }
    clean_env();
}

static void test_build_log(void **state)
{
    (void)state;
    NEED_DEVICE();
    clean_env();
    fresh_cache("buildlog");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/kernels", tmpdir);
    mkdir(dir, 0755);
    char path[600];
    snprintf(path, sizeof path, "%s/scale.cl", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("__kernel void scale(__global float *y) { y[0] = undefined_thing_xyz; }\n", f);
    fclose(f);
    setenv("BITNET_KERNEL_DIR", dir, 1);
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "opencl", 1), BITNET_OK);
    float x[8] = {1}, y[8];
    assert_int_equal(bitnet_scale(be, x, 8, 1.0f, y), BITNET_E_BUILD);
    const char *d = bitnet_error_detail();
    assert_non_null(strstr(d, "kernels/scale.cl"));
    assert_non_null(strstr(d, "build log"));
    assert_non_null(strstr(d, "undefined_thing_xyz"));
    bitnet_backend_free(be);
    /* under auto the same failure falls back with one warning */
    setenv("BITNET_AUTO_MIN_BYTES", "0", 1);
    assert_int_equal(bitnet_backend_create(&be, "auto", 1), BITNET_OK);
    bitnet_backend_set_log(be, logger, NULL);
    check_scale(be, 255, 3);
    check_scale(be, 256, 3);
    assert_int_equal(warn_count, 1);
    assert_non_null(strstr(last_warn, "undefined_thing_xyz"));
    bitnet_backend_free(be);
    clean_env();
}

/* ---- calibration and roofline ----------------------------------------------------------- */

static void test_calibrate(void **state)
{
    (void)state;
    NEED_DEVICE();
    clean_env();
    fresh_cache("calibrate");
    setenv("BITNET_CALIBRATE_MAX", "65536", 1);
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "auto", 1), BITNET_OK);
    float x[100] = {0}, y[100];
    assert_int_equal(bitnet_scale(be, x, 100, 1.0f, y), BITNET_OK); /* a user stat to keep */
    char report[4096];
    bitnet_status st = bitnet_backend_calibrate(be, report, sizeof report);
    if (st != BITNET_OK) fail_msg("%s: %s", bitnet_strerror(st), bitnet_error_detail());
    assert_non_null(strstr(report, "scale"));
    assert_non_null(strstr(report, "thresholds written to "));
    bitnet_op_stats ops[8];
    assert_int_equal(bitnet_backend_op_stats(be, ops, 8), 1);
    assert_int_equal(ops[0].calls, 1);
    const char *p = strstr(report, "thresholds written to ") + strlen("thresholds written to ");
    char path[1024];
    snprintf(path, sizeof path, "%s", p);
    path[strcspn(path, "\n")] = 0;
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    assert_non_null(doc);
    json_t *th = json_object_get(json_object_get(doc, "thresholds"), "scale");
    assert_true(json_is_integer(th));
    size_t nmeas = json_array_size(json_object_get(json_object_get(doc, "measurements"), "scale"));
    assert_true(nmeas >= 1 && nmeas <= 3); /* 64 KiB down to where the CPU wins, at most 4 KiB */
    bitnet_backend_free(be);
    /* a new auto backend obeys the file: scale from 0 bytes goes to OpenCL... */
    json_object_set_new(json_object_get(doc, "thresholds"), "scale", json_integer(0));
    assert_int_equal(json_dump_file(doc, path, 0), 0);
    assert_int_equal(bitnet_backend_create(&be, "auto", 1), BITNET_OK);
    bitnet_backend_set_log(be, logger, NULL);
    check_scale(be, 4097, 8);
    assert_int_equal(count_opencl_stats(be, "opencl"), 1);
    assert_true(info_count >= 1); /* "thresholds from <file>" */
    bitnet_backend_free(be);
    /* ...and from 1 MiB it does not at 32 KiB */
    json_object_set_new(json_object_get(doc, "thresholds"), "scale", json_integer(1 << 20));
    assert_int_equal(json_dump_file(doc, path, 0), 0);
    assert_int_equal(bitnet_backend_create(&be, "auto", 1), BITNET_OK);
    check_scale(be, 4097, 8);
    assert_int_equal(count_opencl_stats(be, "opencl"), 0);
    check_scale(be, 1 << 18, 8); /* 2 MiB moved */
    assert_int_equal(count_opencl_stats(be, "opencl"), 1);
    bitnet_backend_free(be);
    json_decref(doc);
    assert_int_equal(bitnet_backend_create(&be, "cpu", 1), BITNET_OK);
    assert_int_equal(bitnet_backend_calibrate(be, report, sizeof report), BITNET_E_UNSUPPORTED);
    bitnet_backend_free(be);
    clean_env();
}

/* The thresholds file is an output like any other: where it is a symbolic
 * link, the link stays and the file it names gets the new content. */
static void test_calibrate_through_link(void **state)
{
    (void)state;
    NEED_DEVICE();
    clean_env();
    fresh_cache("calibrate-link");
    setenv("BITNET_CALIBRATE_MAX", "65536", 1);
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "auto", 1), BITNET_OK);
    char report[4096];
    bitnet_status st = bitnet_backend_calibrate(be, report, sizeof report);
    if (st != BITNET_OK) fail_msg("%s: %s", bitnet_strerror(st), bitnet_error_detail());
    const char *p = strstr(report, "thresholds written to ");
    assert_non_null(p);
    char path[1024], cache[1024], kept[1024], target[1100];
    snprintf(path, sizeof path, "%s", p + strlen("thresholds written to "));
    path[strcspn(path, "\n")] = 0;
    snprintf(cache, sizeof cache, "%s", path);
    *strrchr(cache, '/') = 0;

    /* the file moves elsewhere, a link takes its place */
    snprintf(kept, sizeof kept, "%s/calibrate-link/kept", tmpdir);
    assert_int_equal(mkdir(kept, 0755), 0);
    snprintf(target, sizeof target, "%s/thresholds.json", kept);
    FILE *f = fopen(target, "w");
    assert_non_null(f);
    fputs("old\n", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(symlink(target, path), 0);
    struct stat before;
    assert_int_equal(stat(target, &before), 0);

    st = bitnet_backend_calibrate(be, report, sizeof report);
    if (st != BITNET_OK) fail_msg("%s: %s", bitnet_strerror(st), bitnet_error_detail());
    bitnet_backend_free(be);
    struct stat sb;
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode)); /* still the link */
    char link[1100];
    ssize_t n = readlink(path, link, sizeof link - 1);
    assert_true(n > 0);
    link[n] = 0;
    assert_string_equal(link, target);
    assert_int_equal(stat(target, &sb), 0);
    assert_true(sb.st_ino != before.st_ino); /* replaced whole by a rename, not rewritten in place */
    json_error_t err;
    json_t *doc = json_load_file(target, 0, &err); /* the new content, whole */
    assert_non_null(doc);
    assert_true(json_is_integer(json_object_get(json_object_get(doc, "thresholds"), "scale")));
    json_decref(doc);
    assert_int_equal(tu_temps_in(cache), 0);
    assert_int_equal(tu_temps_in(kept), 0);
    clean_env();
}

static void test_roofline(void **state)
{
    (void)state;
    NEED_DEVICE();
    clean_env();
    bitnet_backend *be;
    assert_int_equal(bitnet_backend_create(&be, "opencl", 1), BITNET_OK);
    double c = 0, r = 0;
    assert_int_equal(bitnet_backend_bandwidth(be, 8 << 20, &c, &r), BITNET_OK);
    assert_true(c > 0 && r > 0);
    assert_int_equal(bitnet_backend_transfer_rate(be, 4 << 20, 0, &c, &r), BITNET_OK);
    assert_true(c > 0 && r > 0);
    assert_int_equal(bitnet_backend_transfer_rate(be, 4 << 20, 1, &c, &r), BITNET_OK);
    assert_true(c > 0 && r > 0);
    assert_int_equal(bitnet_backend_bandwidth(be, 10, &c, &r), BITNET_E_INVALID);
    bitnet_backend_free(be);
    assert_int_equal(bitnet_backend_create(&be, "cpu", 2), BITNET_OK);
    assert_int_equal(bitnet_backend_bandwidth(be, 8 << 20, &c, &r), BITNET_OK);
    assert_true(c > 0 && r > 0);
    assert_int_equal(bitnet_backend_transfer_rate(be, 4 << 20, 0, &c, &r), BITNET_E_UNSUPPORTED);
    bitnet_backend_free(be);
}

static int rm_rf(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    return system(cmd);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/bitnet-test-opencl-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    bn_ocl_caps caps;
    have_device = bn_ocl_probe(-1, &caps, NULL) == BITNET_OK;
    if (!have_device) fprintf(stderr, "# no OpenCL device: every test skips\n");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_on_opencl),
        cmocka_unit_test(test_perturb_on_opencl),
        cmocka_unit_test(test_every_family_builds),
        cmocka_unit_test(test_device_index),
        cmocka_unit_test(test_devices_listing),
        cmocka_unit_test(test_auto_is_lazy),
        cmocka_unit_test(test_disk_cache),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_launch_limits),
        cmocka_unit_test(test_fallback_under_auto),
        cmocka_unit_test(test_errors_under_opencl),
        cmocka_unit_test(test_build_log),
        cmocka_unit_test(test_calibrate),
        cmocka_unit_test(test_calibrate_through_link),
        cmocka_unit_test(test_roofline),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rm_rf(tmpdir);
    return rc;
}
