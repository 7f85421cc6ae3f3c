/*
 * runtime.c - the OpenCL device: enumeration across platforms, context,
 * in-order queue, capabilities, launches (timed when profiling is on), and
 * OpenCL error reporting (call, status name, file, line).
 *
 * Profiling is off unless asked for (bitnet_backend_set_profiling: --stats,
 * bitnet-bench's kernel timer).  On NVIDIA's driver (H100, 580.159.04,
 * tests/device/latency.c) a kernel enqueued with an event on a profiling
 * queue took 11.2 us of host time against 4.3 us on a plain queue without
 * one, and four commands between a 64 KB write and read took 66.6 us end to
 * end against 27.2 us: the events and timestamps were most of the fixed cost
 * of a call.
 */
#include "ocl_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *bn_cl_errname(cl_int err)
{
    switch (err) {
#define E(x) case x: return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP) E(CL_IMAGE_FORMAT_MISMATCH)
    E(CL_IMAGE_FORMAT_NOT_SUPPORTED) E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET) E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE) E(CL_LINK_PROGRAM_FAILURE)
    E(CL_DEVICE_PARTITION_FAILED) E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE)
    E(CL_INVALID_CONTEXT) E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR)
    E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) E(CL_INVALID_IMAGE_SIZE)
    E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM)
    E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL_DEFINITION)
    E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST)
    E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT) E(CL_INVALID_BUFFER_SIZE)
    E(CL_INVALID_MIP_LEVEL) E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PROPERTY)
    E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS) E(CL_INVALID_LINKER_OPTIONS)
    E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "CL_UNKNOWN_ERROR";
    }
}

static bitnet_status status_of(cl_int err)
{
    switch (err) {
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_INVALID_BUFFER_SIZE: return BITNET_E_DEVICE_MEMORY;
    case CL_BUILD_PROGRAM_FAILURE:
    case CL_COMPILE_PROGRAM_FAILURE:
    case CL_LINK_PROGRAM_FAILURE:
    case CL_COMPILER_NOT_AVAILABLE: return BITNET_E_BUILD;
    case CL_DEVICE_NOT_FOUND:
    case -1001: return BITNET_E_NO_DEVICE;
    default: return BITNET_E_DEVICE;
    }
}

/* "lib/opencl/x.c" rather than a build machine's absolute path. */
static const char *short_file(const char *file)
{
    const char *p = strstr(file, "lib/");
    return p ? p : file;
}

bitnet_status bn_cl_fail(cl_int err, const char *call, const char *file, int line)
{
    return bn_fail(status_of(err), "%s failed: %s (%d) at %s:%d", call, bn_cl_errname(err), (int)err,
                   short_file(file), line);
}

bitnet_status bn_cl_fail_test(cl_int err, const char *call, const char *file, int line)
{
    return bn_fail(status_of(err), "%s failed: %s (%d) at %s:%d (simulated failure)", call,
                   bn_cl_errname(err), (int)err, short_file(file), line);
}

/* ---- enumeration ------------------------------------------------------------ */

bitnet_status bn_ocl_list(cl_platform_id **plat_out, cl_device_id **dev_out, int *n_out)
{
    *plat_out = NULL;
    *dev_out = NULL;
    *n_out = 0;
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    if (err == -1001 || np == 0) return BITNET_OK; /* no platform: an empty list */
    if (err != CL_SUCCESS) return bn_cl_fail(err, "clGetPlatformIDs(0, NULL, &n)", __FILE__, __LINE__);
    cl_platform_id *ps = calloc(np, sizeof *ps);
    if (!ps) return bn_fail(BITNET_E_NOMEM, "opencl: out of memory");
    err = clGetPlatformIDs(np, ps, NULL);
    if (err != CL_SUCCESS) {
        free(ps);
        return bn_cl_fail(err, "clGetPlatformIDs(n, ids, NULL)", __FILE__, __LINE__);
    }
    cl_platform_id *plat = NULL;
    cl_device_id *dev = NULL;
    int n = 0;
    for (cl_uint i = 0; i < np; i++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) continue;
        cl_platform_id *p2 = realloc(plat, (size_t)(n + (int)nd) * sizeof *p2);
        if (p2) plat = p2;
        cl_device_id *d2 = realloc(dev, (size_t)(n + (int)nd) * sizeof *d2);
        if (d2) dev = d2;
        if (!p2 || !d2) {
            free(plat);
            free(dev);
            free(ps);
            return bn_fail(BITNET_E_NOMEM, "opencl: out of memory");
        }
        if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, nd, dev + n, NULL) != CL_SUCCESS) continue;
        for (cl_uint j = 0; j < nd; j++) plat[n + (int)j] = ps[i];
        n += (int)nd;
    }
    free(ps);
    *plat_out = plat;
    *dev_out = dev;
    *n_out = n;
    return BITNET_OK;
}

static void info_str(cl_device_id d, cl_device_info what, char *buf, size_t size)
{
    buf[0] = 0;
    if (clGetDeviceInfo(d, what, size - 1, buf, NULL) != CL_SUCCESS) buf[0] = 0;
    buf[size - 1] = 0;
}

void bn_ocl_fill_caps(cl_platform_id p, cl_device_id d, bn_ocl_caps *c)
{
    memset(c, 0, sizeof *c);
    info_str(d, CL_DEVICE_NAME, c->name, sizeof c->name);
    info_str(d, CL_DEVICE_VENDOR, c->vendor, sizeof c->vendor);
    info_str(d, CL_DRIVER_VERSION, c->driver, sizeof c->driver);
    info_str(d, CL_DEVICE_OPENCL_C_VERSION, c->c_version, sizeof c->c_version);
    if (clGetPlatformInfo(p, CL_PLATFORM_VERSION, sizeof c->platform_version - 1, c->platform_version, NULL) !=
        CL_SUCCESS)
        c->platform_version[0] = 0;
    cl_device_type type = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    c->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
    c->is_nvidia = strstr(c->vendor, "NVIDIA") != NULL || strstr(c->vendor, "nvidia") != NULL;
    size_t extlen = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &extlen) == CL_SUCCESS && extlen > 0) {
        char *ext = malloc(extlen + 1);
        if (ext && clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, extlen, ext, NULL) == CL_SUCCESS) {
            ext[extlen] = 0;
            if (strstr(ext, "cl_khr_fp64")) c->has_fp64 = 1;
        }
        free(ext);
    }
    cl_device_fp_config fp = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp, &fp, NULL) == CL_SUCCESS && fp) c->has_fp64 = 1;
    cl_bool unified = CL_FALSE;
    clGetDeviceInfo(d, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
    c->unified_memory = unified == CL_TRUE;
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof c->compute_units, &c->compute_units, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof c->clock_mhz, &c->clock_mhz, NULL);
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof c->global_mem, &c->global_mem, NULL);
    cl_uint align_bits = 0;
    clGetDeviceInfo(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
    c->base_align = align_bits >= 8 ? align_bits / 8 : 4096;
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof c->local_mem, &c->local_mem, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof c->max_alloc, &c->max_alloc, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof c->max_wg, &c->max_wg, NULL);
    if (c->max_wg == 0) c->max_wg = 1;
}

/* Picks the device for `index` (< 0: first GPU, else the first device). */
static bitnet_status pick(int index, cl_platform_id *p, cl_device_id *d, int *picked, int *count)
{
    cl_platform_id *plat;
    cl_device_id *dev;
    int n;
    bitnet_status st = bn_ocl_list(&plat, &dev, &n);
    if (st != BITNET_OK) return st;
    if (count) *count = n;
    if (n == 0) {
        free(plat);
        free(dev);
        return bn_fail(BITNET_E_NO_DEVICE, "no OpenCL platform or device found (is an OpenCL driver installed? "
                                           "'clinfo -l' lists them)");
    }
    int at = index;
    if (index < 0) {
        at = 0;
        for (int i = 0; i < n; i++) {
            cl_device_type type = 0;
            clGetDeviceInfo(dev[i], CL_DEVICE_TYPE, sizeof type, &type, NULL);
            if (type & CL_DEVICE_TYPE_GPU) {
                at = i;
                break;
            }
        }
    } else if (index >= n) {
        free(plat);
        free(dev);
        return bn_fail(BITNET_E_NO_DEVICE, "no OpenCL device %d: %d device%s found (opencl:0..opencl:%d; "
                                           "'bitnet-info --devices' lists them)",
                       index, n, n == 1 ? "" : "s", n - 1);
    }
    *p = plat[at];
    *d = dev[at];
    *picked = at;
    free(plat);
    free(dev);
    return BITNET_OK;
}

bitnet_status bn_ocl_probe(int index, bn_ocl_caps *caps, int *count)
{
    cl_platform_id p;
    cl_device_id d;
    int at;
    if (count) *count = 0;
    bitnet_status st = pick(index, &p, &d, &at, count);
    if (st == BITNET_OK) bn_ocl_fill_caps(p, d, caps);
    return st;
}

void bn_ocl_op_begin(void *ctx, const char *op)
{
    bn_ocl *o = ctx;
    const char *s = op ? op : "?";
    size_t n = strlen(s);
    if (n >= sizeof o->op) n = sizeof o->op - 1;
    memcpy(o->op, s, n);
    o->op[n] = 0;
}

void bn_ocl_log(bn_ocl *o, bitnet_log_level level, const char *fmt, ...)
{
    if (!o->host.log) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    o->host.log(o->host.user, level, msg);
}

void bn_ocl_stat_transfer(bn_ocl *o, int to_device, uint64_t bytes, double ms)
{
    if (o->host.transfer) o->host.transfer(o->host.user, o->op, to_device, bytes, ms);
}

bitnet_status bn_ocl_create(bn_ocl **out, int index, const bn_host *host)
{
    *out = NULL;
    bn_ocl *o = calloc(1, sizeof *o);
    if (!o) return bn_fail(BITNET_E_NOMEM, "opencl: out of memory");
    if (host) o->host = *host;
    snprintf(o->op, sizeof o->op, "?");
    bitnet_status st = pick(index, &o->platform, &o->device, &o->index, NULL);
    if (st != BITNET_OK) {
        free(o);
        return st;
    }
    bn_ocl_fill_caps(o->platform, o->device, &o->caps);
    if (bn_test_fail("create")) {
        free(o);
        return bn_cl_fail_test(CL_DEVICE_NOT_AVAILABLE, "clCreateContext(props, 1, &device, NULL, NULL, &err)",
                               __FILE__, __LINE__);
    }
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)o->platform, 0};
    cl_int err;
    o->ctx = clCreateContext(props, 1, &o->device, NULL, NULL, &err);
    if (!o->ctx) {
        free(o);
        return bn_cl_fail(err, "clCreateContext(props, 1, &device, NULL, NULL, &err)", __FILE__, __LINE__);
    }
    o->queue = clCreateCommandQueue(o->ctx, o->device, 0, &err);
    if (!o->queue) {
        st = bn_cl_fail(err, "clCreateCommandQueue(ctx, device, 0, &err)", __FILE__, __LINE__);
        bn_ocl_free(o);
        return st;
    }
    *out = o;
    return BITNET_OK;
}

bitnet_status bn_ocl_set_profiling(bn_ocl *o, int on)
{
    on = on != 0;
    if (on == o->profiling) return BITNET_OK;
    bitnet_status st = bn_ocl_finish(o); /* every command of the old queue done, its times booked */
    if (st != BITNET_OK) return st;
    cl_int err;
    cl_command_queue q = clCreateCommandQueue(o->ctx, o->device, on ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
    if (!q) return bn_cl_fail(err, "clCreateCommandQueue(ctx, device, properties, &err)", __FILE__, __LINE__);
    bn_ocl_side_free(o); /* made again with the new property when next wanted */
    clReleaseCommandQueue(o->queue);
    o->queue = q;
    o->profiling = on;
    return BITNET_OK;
}

int bn_ocl_profiling(const bn_ocl *o) { return o->profiling; }

void bn_ocl_free(bn_ocl *o)
{
    if (!o) return;
    if (o->queue) {
        clFinish(o->queue);
        bn_ocl_collect(o);
    }
    free(o->pending);
    bn_ocl_checks_free(o);
    bn_ocl_staging_free(o);
    bn_ocl_programs_free(o);
    bn_ocl_keep_free(o);
    bn_ocl_pool_free(o);
    if (o->queue) clReleaseCommandQueue(o->queue);
    if (o->ctx) clReleaseContext(o->ctx);
    free(o);
}

const bn_ocl_caps *bn_ocl_get_caps(const bn_ocl *o) { return &o->caps; }
cl_context bn_ocl_context(const bn_ocl *o) { return o->ctx; }
cl_command_queue bn_ocl_queue(const bn_ocl *o) { return o->queue; }
cl_device_id bn_ocl_device(const bn_ocl *o) { return o->device; }
int bn_ocl_index(const bn_ocl *o) { return o->index; }
double bn_ocl_last_kernel_ms(const bn_ocl *o) { return o->last_kernel_ms; }

/* ---- launches --------------------------------------------------------------- */

/* ---- tunables from the environment ------------------------------------------------ */

int bn_ocl_env_on(const char *name)
{
    const char *e = getenv(name);
    return e && *e && strcmp(e, "0") != 0;
}

long bn_ocl_opt_value(const char *opts, const char *name, long def, int *found)
{
    const size_t n = strlen(name);
    for (const char *p = opts; (p = strstr(p, "-D")) != NULL; p += 2)
        if (strncmp(p + 2, name, n) == 0 && p[2 + n] == '=') {
            char *end;
            const long v = strtol(p + 3 + n, &end, 10);
            if (end != p + 3 + n && v >= 0) { /* the last one wins, as in the compiler */
                def = v;
                if (found) *found = 1;
            }
        }
    return def;
}

bitnet_status bn_ocl_args(bn_ocl *o, cl_kernel k, int n, ...)
{
    (void)o;
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        size_t size = va_arg(ap, size_t);
        const void *p = va_arg(ap, const void *);
        cl_int err = clSetKernelArg(k, (cl_uint)i, size, p);
        if (err != CL_SUCCESS) {
            va_end(ap);
            char call[64];
            snprintf(call, sizeof call, "clSetKernelArg(kernel, %d, %zu, arg)", i, size);
            return bn_cl_fail(err, call, __FILE__, __LINE__);
        }
    }
    va_end(ap);
    return BITNET_OK;
}

bitnet_status bn_ocl_arg_at(bn_ocl *o, cl_kernel k, int index, size_t size, const void *p)
{
    (void)o;
    cl_int err = clSetKernelArg(k, (cl_uint)index, size, p);
    if (err == CL_SUCCESS) return BITNET_OK;
    char call[64];
    snprintf(call, sizeof call, "clSetKernelArg(kernel, %d, %zu, arg)", index, size);
    return bn_cl_fail(err, call, __FILE__, __LINE__);
}

size_t bn_ocl_kernel_wg(bn_ocl *o, cl_kernel k)
{
    size_t wg = 0;
    if (clGetKernelWorkGroupInfo(k, o->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) != CL_SUCCESS ||
        wg == 0)
        wg = 1;
    return wg;
}

static void kernel_name(cl_kernel k, char *buf, size_t size)
{
    if (clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, size - 1, buf, NULL) != CL_SUCCESS) snprintf(buf, size, "?");
    buf[size - 1] = 0;
}

bitnet_status bn_ocl_run(bn_ocl *o, cl_kernel k, cl_uint dims, const size_t *global, const size_t *local,
                         const char *op)
{
    char kname[64];
    if (dims < 1 || dims > 3 || !global) return bn_fail(BITNET_E_INVALID, "bn_ocl_run: bad dimensions");
    if (local) {
        size_t total = 1, wg = bn_ocl_kernel_wg(o, k);
        for (cl_uint i = 0; i < dims; i++) {
            if (local[i] == 0 || global[i] % local[i] != 0) {
                kernel_name(k, kname, sizeof kname);
                return bn_fail(BITNET_E_INVALID, "kernel %s: global size %zu is not a multiple of local size %zu",
                               kname, global[i], local[i]);
            }
            total *= local[i];
        }
        if (total > wg) {
            kernel_name(k, kname, sizeof kname);
            return bn_fail(BITNET_E_DEVICE, "kernel %s: work-group of %zu items exceeds CL_KERNEL_WORK_GROUP_SIZE "
                                            "%zu on %s",
                           kname, total, wg, o->caps.name);
        }
    }
    for (cl_uint i = 0; i < dims; i++)
        if (global[i] == 0) return BITNET_OK; /* nothing to do */
    if (bn_test_fail("run"))
        return bn_cl_fail_test(CL_OUT_OF_RESOURCES, "clEnqueueNDRangeKernel(queue, kernel, ...)", __FILE__, __LINE__);
    /* with profiling on, room for the event first: a launch is not undone */
    if (o->profiling && o->npending == o->cappending && o->npending < 256) {
        size_t cap = o->cappending ? o->cappending * 2 : 16;
        bn_ocl_pending *p = realloc(o->pending, cap * sizeof *p);
        if (!p) return bn_fail(BITNET_E_NOMEM, "opencl: out of memory");
        o->pending = p;
        o->cappending = cap;
    }
    if (o->profiling && o->npending == o->cappending) {
        bitnet_status st = bn_ocl_finish(o);
        if (st != BITNET_OK) return st;
    }
    /* No clFlush after the launch: tried on an H200 (2026-11-27, three
     * alternating rounds, end-to-end medians), it took one token of
     * 4096x4096 with kept weights from 38-39 to 33 us, but left 16384x16384
     * unchanged and made device-resident calls and the feed-forward block
     * 2-4 us slower. */
    cl_event ev = NULL; /* without profiling none: nothing to time */
    cl_int err = clEnqueueNDRangeKernel(o->queue, k, dims, NULL, global, local, 0, NULL, o->profiling ? &ev : NULL);
    if (err != CL_SUCCESS) {
        kernel_name(k, kname, sizeof kname);
        char call[128];
        snprintf(call, sizeof call, "clEnqueueNDRangeKernel(queue, %s, ...)", kname);
        return bn_cl_fail(err, call, __FILE__, __LINE__);
    }
    return o->profiling ? bn_ocl_pending_push(o, ev, op, 0, 0) : BITNET_OK;
}

bitnet_status bn_ocl_pending_push(bn_ocl *o, cl_event ev, const char *op, int kind, uint64_t bytes)
{
    if (!o->profiling) { /* no times to collect: a transfer's bytes are booked now */
        clReleaseEvent(ev);
        if (kind && o->host.transfer) o->host.transfer(o->host.user, op ? op : "?", kind == 1, bytes, 0.0);
        return BITNET_OK;
    }
    if (o->npending == o->cappending) { /* only when the growth in bn_ocl_run or below failed */
        size_t cap = o->cappending ? o->cappending * 2 : 16;
        bn_ocl_pending *p = cap <= 256 ? realloc(o->pending, cap * sizeof *p) : NULL;
        if (p) {
            o->pending = p;
            o->cappending = cap;
        } else {
            cl_int err = clWaitForEvents(1, &ev); /* the list stays as it is: time it now */
            clReleaseEvent(ev);
            if (err != CL_SUCCESS) return bn_cl_fail(err, "clWaitForEvents(1, &ev)", __FILE__, __LINE__);
            return BITNET_OK;
        }
    }
    bn_ocl_pending *p = &o->pending[o->npending++];
    p->ev = ev;
    p->kind = kind;
    p->bytes = bytes;
    snprintf(p->op, sizeof p->op, "%s", op ? op : "?");
    return BITNET_OK;
}

void bn_ocl_collect(bn_ocl *o)
{
    for (size_t i = 0; i < o->npending; i++) {
        cl_ulong t0 = 0, t1 = 0;
        cl_event ev = o->pending[i].ev;
        if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) == CL_SUCCESS &&
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS && t1 >= t0) {
            const double ms = (double)(t1 - t0) / 1e6;
            if (o->pending[i].kind && o->host.transfer)
                o->host.transfer(o->host.user, o->pending[i].op, o->pending[i].kind == 1, o->pending[i].bytes, ms);
            else if (!o->pending[i].kind && o->host.kernel_time)
                o->host.kernel_time(o->host.user, o->pending[i].op, o->last_kernel_ms = ms);
            else if (!o->pending[i].kind)
                o->last_kernel_ms = ms;
        }
        clReleaseEvent(ev);
    }
    o->npending = 0;
}

bitnet_status bn_ocl_finish(bn_ocl *o)
{
    cl_int err = clFinish(o->queue);
    if (err != CL_SUCCESS) {
        for (size_t i = 0; i < o->npending; i++) clReleaseEvent(o->pending[i].ev);
        o->npending = 0;
        return bn_cl_fail(err, "clFinish(queue)", __FILE__, __LINE__);
    }
    bn_ocl_collect(o);
    return BITNET_OK;
}
