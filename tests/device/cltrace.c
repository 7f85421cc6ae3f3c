/*
 * cltrace.c - an LD_PRELOAD shim that times the OpenCL calls a program makes
 * (host wall time inside each call) and, at exit, writes per-call totals and
 * the last CLTRACE_RING calls as a timeline (start relative to the previous
 * call's end: the time spent outside OpenCL) to $CLTRACE (default stderr).
 * A probe for the GPU machine, not part of the library or its tests.
 *
 *   cc -O2 -shared -fPIC -o cltrace.so tests/device/cltrace.c -ldl
 *   CLTRACE=/tmp/t.txt LD_PRELOAD=./cltrace.so bitnet-bench ...
 *
 * CLTRACE_KTIME=1 also gives each kernel's device time by name (count, mean,
 * min, total): every queue is made with profiling and every launch gets an
 * event (the first KT_MAX launches), which changes the host-side costs.
 * CLTRACE_PTX=dir writes each program it sees built as dir/prog-N.txt: its
 * build options, then its binary for the first device (PTX text on NVIDIA),
 * to count instructions, spills (ld.local/st.local) and unrolling.
 */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { F_ND, F_WRITE, F_READ, F_FILL, F_COPY, F_WAIT, F_FINISH, F_FLUSH, F_PROF, F_EVINFO, F_SETARG, F_KWG,
       F_CREATEBUF, F_RELMEM, F_SUB, F_RELEV, F_MAP, F_NF };
static const char *names[F_NF] = {"NDRange", "Write", "Read", "Fill", "Copy", "WaitForEvents", "Finish", "Flush",
                                  "ProfilingInfo", "EventInfo", "SetKernelArg", "KernelWGInfo", "CreateBuffer",
                                  "ReleaseMem", "SubBuffer", "ReleaseEvent", "MapBuffer"};
static double tot[F_NF];
static unsigned long cnt[F_NF];
#define RING (1 << 18)
static struct { int f; double start, dur; size_t bytes; int blocking; } ring[RING];
static unsigned long nring;
static double last_end;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void rec(int f, double t0, size_t bytes, int blocking)
{
    const double t1 = now_us();
    tot[f] += t1 - t0;
    cnt[f]++;
    if (f == F_SETARG || f == F_KWG || f == F_PROF || f == F_RELEV || f == F_EVINFO) return; /* totals only */
    unsigned long i = nring++ % RING;
    ring[i].f = f;
    ring[i].start = t0 - last_end;
    ring[i].dur = t1 - t0;
    ring[i].bytes = bytes;
    ring[i].blocking = blocking;
    last_end = t1;
}

/* One wrapper: the real function found once, the call timed and booked
 * under F with BYTES and BLOCK (expressions of the parameters). */
#define WRAP(ret, name, F, BYTES, BLOCK, PARAMS, ARGS)          \
    ret name PARAMS                                             \
    {                                                           \
        static __typeof__(name) *real;                          \
        if (!real) *(void **)&real = dlsym(RTLD_NEXT, #name);   \
        const double t0 = now_us();                             \
        ret r = real ARGS;                                      \
        rec(F, t0, BYTES, BLOCK);                               \
        return r;                                               \
    }

/* CLTRACE_KTIME: launches with their events, read at exit */
#define KT_MAX 100000
static struct { cl_kernel k; cl_event e; } kt[KT_MAX];
static unsigned long nkt;
static int ktime = -1;
static int ktime_on(void)
{
    if (ktime < 0) {
        const char *v = getenv("CLTRACE_KTIME");
        ktime = v && *v && *v != '0';
    }
    return ktime;
}

cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint d, const size_t *o, const size_t *g,
                              const size_t *l, cl_uint n, const cl_event *w, cl_event *e)
{
    static __typeof__(clEnqueueNDRangeKernel) *real;
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "clEnqueueNDRangeKernel");
    const double t0 = now_us();
    cl_event mine = NULL;
    const int keep = ktime_on() && nkt < KT_MAX;
    cl_int r = real(q, k, d, o, g, l, n, w, e ? e : keep ? &mine : NULL);
    rec(F_ND, t0, 0, e != NULL);
    if (keep && r == CL_SUCCESS) {
        kt[nkt].k = k;
        kt[nkt].e = e ? *e : mine;
        if (e) clRetainEvent(*e);
        clRetainKernel(k);
        nkt++;
    }
    return r;
}

cl_command_queue clCreateCommandQueue(cl_context c, cl_device_id dv, cl_command_queue_properties p, cl_int *err)
{
    static __typeof__(clCreateCommandQueue) *real;
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "clCreateCommandQueue");
    return real(c, dv, ktime_on() ? p | CL_QUEUE_PROFILING_ENABLE : p, err);
}

/* CLTRACE_PTX=dir: each program built writes its binary for the first
 * device (PTX on NVIDIA) to dir/prog-N.txt, the build options on line 1. */
cl_int clBuildProgram(cl_program p, cl_uint nd, const cl_device_id *dl, const char *opts,
                      void(CL_CALLBACK *notify)(cl_program, void *), void *ud)
{
    static __typeof__(clBuildProgram) *real;
    static int nprog;
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "clBuildProgram");
    const cl_int r = real(p, nd, dl, opts, notify, ud);
    const char *dir = getenv("CLTRACE_PTX");
    size_t sizes[8] = {0};
    if (r != CL_SUCCESS || !dir || clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof sizes, sizes, NULL) != CL_SUCCESS ||
        !sizes[0])
        return r;
    unsigned char *bins[8] = {malloc(sizes[0])};
    if (bins[0] && clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) == CL_SUCCESS) {
        char path[4096];
        snprintf(path, sizeof path, "%s/prog-%d.txt", dir, nprog++);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "// options: %s\n", opts ? opts : "");
            fwrite(bins[0], 1, sizes[0], f);
            fclose(f);
        }
    }
    free(bins[0]);
    return r;
}

static void dump_ktime(FILE *f)
{
    if (!nkt) return;
    struct { char name[64]; unsigned long n; double tot, min; } agg[64];
    int na = 0;
    unsigned long lost = 0;
    for (unsigned long i = 0; i < nkt; i++) {
        cl_ulong s0 = 0, s1 = 0;
        char name[64] = "?";
        clGetKernelInfo(kt[i].k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
        if (clWaitForEvents(1, &kt[i].e) != CL_SUCCESS ||
            clGetEventProfilingInfo(kt[i].e, CL_PROFILING_COMMAND_START, sizeof s0, &s0, NULL) != CL_SUCCESS ||
            clGetEventProfilingInfo(kt[i].e, CL_PROFILING_COMMAND_END, sizeof s1, &s1, NULL) != CL_SUCCESS) {
            lost++;
            continue;
        }
        const double us = (double)(s1 - s0) / 1e3;
        int a = 0;
        while (a < na && strcmp(agg[a].name, name) != 0) a++;
        if (a == na) {
            if (na == 64) { lost++; continue; }
            snprintf(agg[na].name, sizeof agg[na].name, "%s", name);
            agg[na].n = 0;
            agg[na].tot = 0;
            agg[na].min = 1e300;
            na++;
        }
        agg[a].n++;
        agg[a].tot += us;
        if (us < agg[a].min) agg[a].min = us;
    }
    fprintf(f, "# kernels (device time, us): name, count, mean, min, total%s\n", lost ? " (some not timed)" : "");
    for (int a = 0; a < na; a++)
        fprintf(f, "%-24s %8lu %10.2f %10.2f %12.1f\n", agg[a].name, agg[a].n, agg[a].tot / (double)agg[a].n,
                agg[a].min, agg[a].tot);
}

WRAP(cl_int, clEnqueueWriteBuffer, F_WRITE, sz, b,
     (cl_command_queue q, cl_mem m, cl_bool b, size_t off, size_t sz, const void *p, cl_uint n, const cl_event *w,
      cl_event *e),
     (q, m, b, off, sz, p, n, w, e))
WRAP(cl_int, clEnqueueReadBuffer, F_READ, sz, b,
     (cl_command_queue q, cl_mem m, cl_bool b, size_t off, size_t sz, void *p, cl_uint n, const cl_event *w,
      cl_event *e),
     (q, m, b, off, sz, p, n, w, e))
WRAP(cl_int, clEnqueueFillBuffer, F_FILL, sz, 0,
     (cl_command_queue q, cl_mem m, const void *pat, size_t ps, size_t off, size_t sz, cl_uint n, const cl_event *w,
      cl_event *e),
     (q, m, pat, ps, off, sz, n, w, e))
WRAP(cl_int, clEnqueueCopyBuffer, F_COPY, sz, 0,
     (cl_command_queue q, cl_mem a, cl_mem b, size_t oa, size_t ob, size_t sz, cl_uint n, const cl_event *w,
      cl_event *e),
     (q, a, b, oa, ob, sz, n, w, e))
WRAP(cl_int, clWaitForEvents, F_WAIT, n, 1, (cl_uint n, const cl_event *e), (n, e))
WRAP(cl_int, clFinish, F_FINISH, 0, 1, (cl_command_queue q), (q))
WRAP(cl_int, clFlush, F_FLUSH, 0, 0, (cl_command_queue q), (q))
WRAP(cl_int, clGetEventProfilingInfo, F_PROF, 0, 0, (cl_event e, cl_profiling_info p, size_t s, void *v, size_t *r_),
     (e, p, s, v, r_))
WRAP(cl_int, clGetEventInfo, F_EVINFO, 0, 0, (cl_event e, cl_event_info p, size_t s, void *v, size_t *r_),
     (e, p, s, v, r_))
WRAP(cl_int, clSetKernelArg, F_SETARG, 0, 0, (cl_kernel k, cl_uint i, size_t s, const void *v), (k, i, s, v))
WRAP(cl_int, clGetKernelWorkGroupInfo, F_KWG, 0, 0,
     (cl_kernel k, cl_device_id d, cl_kernel_work_group_info p, size_t s, void *v, size_t *r_), (k, d, p, s, v, r_))
WRAP(cl_mem, clCreateBuffer, F_CREATEBUF, sz, 0, (cl_context c, cl_mem_flags f, size_t sz, void *h, cl_int *err),
     (c, f, sz, h, err))
WRAP(cl_int, clReleaseMemObject, F_RELMEM, 0, 0, (cl_mem m), (m))
WRAP(cl_mem, clCreateSubBuffer, F_SUB, 0, 0,
     (cl_mem m, cl_mem_flags f, cl_buffer_create_type t, const void *i, cl_int *err), (m, f, t, i, err))
WRAP(cl_int, clReleaseEvent, F_RELEV, 0, 0, (cl_event e), (e))
WRAP(void *, clEnqueueMapBuffer, F_MAP, sz, b,
     (cl_command_queue q, cl_mem m, cl_bool b, cl_map_flags f, size_t off, size_t sz, cl_uint n, const cl_event *w,
      cl_event *e, cl_int *err),
     (q, m, b, f, off, sz, n, w, e, err))

static void dump(void)
{
    unsigned long any = 0;
    for (int i = 0; i < F_NF; i++) any += cnt[i];
    if (!any) return; /* a process that made no OpenCL call (timeout, env) leaves the file alone */
    const char *path = getenv("CLTRACE");
    FILE *f = path && *path ? fopen(path, "w") : stderr;
    if (!f) return;
    dump_ktime(f);
    fprintf(f, "# totals: call, count, total us, mean us\n");
    for (int i = 0; i < F_NF; i++)
        if (cnt[i]) fprintf(f, "%-14s %10lu %12.1f %8.2f\n", names[i], cnt[i], tot[i], tot[i] / (double)cnt[i]);
    fprintf(f, "# timeline of the last calls before the teardown: host us before the call (outside OpenCL), call, us inside, bytes\n");
    /* the teardown (a run of releases, finishes and waits) left out */
    unsigned long end = nring, lo = nring > RING ? nring - RING : 0;
    while (end > lo && (ring[(end - 1) % RING].f == F_RELMEM || ring[(end - 1) % RING].f == F_FINISH ||
                        ring[(end - 1) % RING].f == F_WAIT))
        end--;
    const unsigned long n = end - lo < 160 ? end - lo : 160;
    for (unsigned long k = 0; k < n; k++) {
        const unsigned long i = (end - n + k) % RING;
        fprintf(f, "%8.1f  %-14s %8.1f %10zu%s\n", ring[i].start, names[ring[i].f], ring[i].dur, ring[i].bytes,
                ring[i].blocking ? " blocking/event" : "");
    }
    if (f != stderr) fclose(f);
}

__attribute__((destructor)) static void at_exit(void) { dump(); }

/* killed by timeout: the calls up to the stop are what is wanted */
static void on_term(int sig)
{
    (void)sig;
    dump();
    _exit(124);
}

__attribute__((constructor)) static void init(void) { signal(SIGTERM, on_term); }
