/*
 * devices.c - the device listing of bitnet-info --devices: every OpenCL
 * platform and device (index N as in --device opencl:N) and the CPU, as
 * JSON (jansson) and as text built from the same JSON document.
 */
#include "ocl_impl.h"
#include "../cpu/cpu.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const used_extensions[] = {
    "cl_khr_fp64", "cl_khr_fp16", "cl_khr_int64_base_atomics", "cl_khr_global_int32_base_atomics",
    "cl_khr_local_int32_base_atomics", "cl_khr_subgroups", "cl_intel_subgroups", "cl_khr_byte_addressable_store",
    "cl_nv_device_attribute_query", "cl_khr_integer_dot_product", "cl_arm_integer_dot_product_int8",
};

static int has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == 0 || p[n] == ' ')) return 1;
    return 0;
}

static void cpu_model(char *buf, size_t size)
{
    snprintf(buf, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            const char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ' || *p == '\t') p++;
                snprintf(buf, size, "%s", p);
                buf[strcspn(buf, "\n")] = 0;
            }
            break;
        }
    fclose(f);
}

static json_t *device_json(int index, cl_platform_id p, cl_device_id d)
{
    bn_ocl_caps c;
    bn_ocl_fill_caps(p, d, &c);
    size_t extlen = 0;
    char *ext = NULL;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &extlen) == CL_SUCCESS && (ext = malloc(extlen + 1))) {
        if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, extlen, ext, NULL) != CL_SUCCESS) extlen = 0;
        ext[extlen] = 0;
    }
    cl_device_type type = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    const char *tname = (type & CL_DEVICE_TYPE_GPU)           ? "gpu"
                        : (type & CL_DEVICE_TYPE_CPU)         ? "cpu"
                        : (type & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                                                              : "other";
    json_t *exts = json_object();
    for (size_t i = 0; i < sizeof used_extensions / sizeof used_extensions[0]; i++)
        json_object_set_new(exts, used_extensions[i], json_boolean(ext && has_word(ext, used_extensions[i])));
    json_t *o = json_object();
    char spec[32];
    snprintf(spec, sizeof spec, "opencl:%d", index);
    json_object_set_new(o, "index", json_integer(index));
    json_object_set_new(o, "device", json_string(spec));
    json_object_set_new(o, "name", json_string(c.name));
    json_object_set_new(o, "vendor", json_string(c.vendor));
    json_object_set_new(o, "type", json_string(tname));
    json_object_set_new(o, "driver_version", json_string(c.driver));
    json_object_set_new(o, "opencl_c_version", json_string(c.c_version));
    json_object_set_new(o, "compute_units", json_integer(c.compute_units));
    json_object_set_new(o, "clock_mhz", json_integer(c.clock_mhz));
    json_object_set_new(o, "global_mem_bytes", json_integer((json_int_t)c.global_mem));
    json_object_set_new(o, "local_mem_bytes", json_integer((json_int_t)c.local_mem));
    json_object_set_new(o, "max_alloc_bytes", json_integer((json_int_t)c.max_alloc));
    json_object_set_new(o, "max_work_group_size", json_integer((json_int_t)c.max_wg));
    json_object_set_new(o, "unified_memory", json_boolean(c.unified_memory));
    json_object_set_new(o, "fp16", json_boolean(ext && has_word(ext, "cl_khr_fp16")));
    json_object_set_new(o, "fp64", json_boolean(c.has_fp64));
    json_object_set_new(o, "extensions", exts);
    free(ext);
    return o;
}

static json_t *platform_json(cl_platform_id p)
{
    json_t *o = json_object();
    static const struct { cl_platform_info what; const char *key; } fields[] = {
        {CL_PLATFORM_NAME, "name"}, {CL_PLATFORM_VENDOR, "vendor"}, {CL_PLATFORM_VERSION, "version"}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        char buf[512] = "";
        if (clGetPlatformInfo(p, fields[i].what, sizeof buf - 1, buf, NULL) != CL_SUCCESS) buf[0] = 0;
        buf[sizeof buf - 1] = 0;
        json_object_set_new(o, fields[i].key, json_string(buf));
    }
    json_object_set_new(o, "devices", json_array());
    return o;
}

/* The whole listing as a JSON document (NULL when out of memory). */
static json_t *devices_doc(void)
{
    json_t *root = json_object();
    char model[256];
    cpu_model(model, sizeof model);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    json_t *cpu = json_object();
    json_object_set_new(cpu, "device", json_string("cpu"));
    json_object_set_new(cpu, "model", json_string(model));
    json_object_set_new(cpu, "simd", json_string(bitnet_cpu_simd_name()));
    json_object_set_new(cpu, "threads", json_integer(cores > 0 ? cores : 1));
    json_object_set_new(root, "cpu", cpu);
    json_t *plats = json_array();
    json_object_set_new(root, "platforms", plats);
    cl_platform_id *plat;
    cl_device_id *dev;
    int n;
    if (bn_ocl_list(&plat, &dev, &n) != BITNET_OK) {
        json_object_set_new(root, "opencl_error", json_string(bitnet_error_detail()));
        n = 0;
        plat = NULL;
        dev = NULL;
    }
    json_t *cur = NULL;
    cl_platform_id curp = NULL;
    for (int i = 0; i < n; i++) {
        if (!cur || plat[i] != curp) {
            cur = platform_json(plat[i]);
            curp = plat[i];
            json_array_append_new(plats, cur);
        }
        json_array_append_new(json_object_get(cur, "devices"), device_json(i, plat[i], dev[i]));
    }
    free(plat);
    free(dev);
    json_object_set_new(root, "opencl_devices", json_integer(n));
    return root;
}

bitnet_status bitnet_devices_json(char **out)
{
    if (!out) return bn_fail(BITNET_E_INVALID, "bitnet_devices_json: NULL output");
    *out = NULL;
    json_t *doc = devices_doc();
    if (!doc) return bn_fail(BITNET_E_NOMEM, "device listing: out of memory");
    *out = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(doc);
    return *out ? BITNET_OK : bn_fail(BITNET_E_NOMEM, "device listing: out of memory");
}

typedef struct {
    char *buf;
    size_t len, cap;
    int failed;
} strbuf;

static void sb_printf(strbuf *sb, const char *fmt, ...) BN_PRINTF(2, 3);
static void sb_printf(strbuf *sb, const char *fmt, ...)
{
    if (sb->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, sb->buf ? sb->cap - sb->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            sb->failed = 1;
            return;
        }
        if (sb->buf && sb->len + (size_t)n < sb->cap) {
            sb->len += (size_t)n;
            return;
        }
        size_t cap = (sb->cap ? sb->cap * 2 : 4096) + (size_t)n;
        char *b = realloc(sb->buf, cap);
        if (!b) {
            sb->failed = 1;
            return;
        }
        sb->buf = b;
        sb->cap = cap;
    }
}

static const char *str(json_t *o, const char *k) { const char *s = json_string_value(json_object_get(o, k)); return s ? s : ""; }
static long long num(json_t *o, const char *k) { return (long long)json_integer_value(json_object_get(o, k)); }
static const char *yes(json_t *o, const char *k) { return json_is_true(json_object_get(o, k)) ? "yes" : "no"; }

bitnet_status bitnet_devices_text(char **out)
{
    if (!out) return bn_fail(BITNET_E_INVALID, "bitnet_devices_text: NULL output");
    *out = NULL;
    json_t *doc = devices_doc();
    if (!doc) return bn_fail(BITNET_E_NOMEM, "device listing: out of memory");
    strbuf sb = {0};
    json_t *cpu = json_object_get(doc, "cpu");
    sb_printf(&sb, "cpu: %s\n  simd: %s, threads: %lld\n", str(cpu, "model"), str(cpu, "simd"), num(cpu, "threads"));
    json_t *plats = json_object_get(doc, "platforms");
    if (json_array_size(plats) == 0)
        sb_printf(&sb, "opencl: no platform found%s%s\n", json_object_get(doc, "opencl_error") ? ": " : "",
                  str(doc, "opencl_error"));
    size_t i, j;
    json_t *p, *d;
    json_array_foreach(plats, i, p) {
        sb_printf(&sb, "platform %zu: %s (%s, %s)\n", i, str(p, "name"), str(p, "vendor"), str(p, "version"));
        json_array_foreach(json_object_get(p, "devices"), j, d) {
            sb_printf(&sb, "  %s: %s (%s, %s)\n", str(d, "device"), str(d, "name"), str(d, "vendor"), str(d, "type"));
            sb_printf(&sb, "    driver %s, %s\n", str(d, "driver_version"), str(d, "opencl_c_version"));
            sb_printf(&sb, "    %lld compute units at %lld MHz; global memory %.1f GiB, local %lld KiB, "
                           "max allocation %.1f GiB; max work-group %lld\n",
                      num(d, "compute_units"), num(d, "clock_mhz"), (double)num(d, "global_mem_bytes") / (1 << 30),
                      num(d, "local_mem_bytes") / 1024, (double)num(d, "max_alloc_bytes") / (1 << 30),
                      num(d, "max_work_group_size"));
            sb_printf(&sb, "    unified memory %s, fp16 %s, fp64 %s\n", yes(d, "unified_memory"), yes(d, "fp16"),
                      yes(d, "fp64"));
            sb_printf(&sb, "    extensions:");
            const char *k;
            json_t *v;
            int any = 0;
            json_object_foreach(json_object_get(d, "extensions"), k, v) if (json_is_true(v)) {
                sb_printf(&sb, " %s", k);
                any = 1;
            }
            sb_printf(&sb, "%s\n", any ? "" : " (none of those used)");
        }
    }
    json_decref(doc);
    if (sb.failed || !sb.buf) {
        free(sb.buf);
        return bn_fail(BITNET_E_NOMEM, "device listing: out of memory");
    }
    *out = sb.buf;
    return BITNET_OK;
}
