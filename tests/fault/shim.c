/*
 * shim.c - fault injection by LD_PRELOAD, for tests/fault/campaign.sh.
 *
 *   BN_FAULT=CALL:N   the Nth call of class CALL fails (counting from 1):
 *       write    write, fwrite, fputc, fputs, fflush (never on stderr), as a
 *                full disk: ENOSPC (BN_FAULT_ERRNO=EIO for an I/O error)
 *       short    write, fwrite of more than one byte (never on stderr): a
 *                short count and no error; half the bytes asked for are
 *                written (fwrite: the whole items among them are counted),
 *                as write(2) may do and as a careless caller would not see
 *       fsync    fsync, fdatasync: EIO
 *       rename   rename: EIO
 *       malloc   malloc, calloc, realloc (non-zero sizes): NULL, ENOMEM
 *       clCreateBuffer          NULL, CL_MEM_OBJECT_ALLOCATION_FAILURE
 *       clEnqueueNDRangeKernel  CL_OUT_OF_RESOURCES
 *       clBuildProgram          CL_BUILD_PROGRAM_FAILURE
 *   BN_FAULT_LOG=FILE at exit, one line per class: "CALL COUNT", then
 *                     "fired CALL:N" when the fault was injected.
 *   BN_FAULT_TRACE=1  print the stack where the fault is injected.
 * Writes and allocations are counted (and failed) only when called from the
 * program itself or from the libraries it uses for its own data (jansson,
 * zlib, argtable2): faults inside the OpenCL driver's compiler, which aborts
 * on them by design, are not what this campaign is about.  OpenCL calls are
 * counted wherever they come from.  The shim takes itself out of LD_PRELOAD,
 * so that programs the driver starts (a linker) run without it.
 * Counters are atomic.
 * Under AddressSanitizer run with ASAN_OPTIONS=verify_asan_link_order=0; the
 * allocation calls go on to the sanitizer's through RTLD_NEXT.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <execinfo.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { C_WRITE, C_SHORT, C_FSYNC, C_RENAME, C_MALLOC, C_CLBUF, C_CLRUN, C_CLBUILD, C_N };
static const char *const names[C_N] = {"write", "short", "fsync", "rename", "malloc", "clCreateBuffer",
                                       "clEnqueueNDRangeKernel", "clBuildProgram"};
static unsigned long counts[C_N];
static int fault_class = -1;
static unsigned long fault_n;
static int fired;
static int write_errno = ENOSPC;
static int ready; /* configuration read */

static void configure(void)
{
    if (ready) return;
    ready = 1;
    const char *f = getenv("BN_FAULT");
    if (f) {
        const char *colon = strchr(f, ':');
        for (int i = 0; colon && i < C_N; i++)
            if (strlen(names[i]) == (size_t)(colon - f) && strncmp(f, names[i], (size_t)(colon - f)) == 0) {
                fault_class = i;
                fault_n = strtoul(colon + 1, NULL, 10);
            }
    }
    const char *e = getenv("BN_FAULT_ERRNO");
    if (e && strcmp(e, "EIO") == 0) write_errno = EIO;
}

/* ---- whose call is it: the program's, or a library's it uses for its data */
static uintptr_t main_base;
static __thread int in_check;

static int first_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(uintptr_t *)data = (uintptr_t)info->dlpi_addr;
    return 1; /* the first object is the program */
}

static int ours(const void *caller)
{
    if (!ready || in_check) return 0; /* before the constructor: the sanitizer may not be up */
    in_check = 1;
    Dl_info di;
    int r = 0;
    if (dladdr(caller, &di) && di.dli_fbase) {
        if ((uintptr_t)di.dli_fbase == main_base) r = 1;
        else if (di.dli_fname && (strstr(di.dli_fname, "libjansson") || strstr(di.dli_fname, "libz.") ||
                                  strstr(di.dli_fname, "libargtable2")))
            r = 1;
    }
    in_check = 0;
    return r;
}
#define OURS() ours(__builtin_return_address(0))

/* 1 when this call (of class c) is the one to fail. */
static int hit(int c)
{
    unsigned long n = __atomic_add_fetch(&counts[c], 1, __ATOMIC_SEQ_CST);
    if (!ready) return 0;
    if (c == fault_class && n == fault_n) {
        fired = 1;
        if (getenv("BN_FAULT_TRACE")) { /* where the fault hit, for a reproducer */
            void *frames[24];
            backtrace_symbols_fd(frames, backtrace(frames, 24), STDERR_FILENO);
        }
        return 1;
    }
    return 0;
}

/* ---- allocation: dlsym itself allocates, so early calls use a static arena. */
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static _Alignas(16) char arena[65536];
static size_t arena_used;
static int resolving;

static void *arena_alloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (arena_used + n > sizeof arena) return NULL;
    void *p = arena + arena_used;
    arena_used += n;
    return p;
}
static int in_arena(const void *p) { return (const char *)p >= arena && (const char *)p < arena + sizeof arena; }

static int resolve_alloc(void)
{
    if (real_free) return 1;
    if (resolving) return 0;
    resolving = 1;
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    resolving = 0;
    return real_free != NULL;
}

void *malloc(size_t n)
{
    if (!resolve_alloc()) return arena_alloc(n);
    if (n && OURS() && hit(C_MALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return real_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    if (!resolve_alloc()) return arena_alloc(a * b); /* arena memory is zero */
    if (a && b && OURS() && hit(C_MALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return real_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    if (!resolve_alloc()) return NULL;
    if (in_arena(p)) {
        void *q = real_malloc(n);
        if (q) memcpy(q, p, n < (size_t)(arena + sizeof arena - (char *)p) ? n : (size_t)(arena + sizeof arena - (char *)p));
        return q;
    }
    if (n && OURS() && hit(C_MALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return real_realloc(p, n);
}

void free(void *p)
{
    if (!p || in_arena(p)) return;
    if (resolve_alloc()) real_free(p);
}

/* ---- writes ---------------------------------------------------------------- */
#define REAL(type, name, args) \
    static type(*real_##name) args; \
    if (!real_##name) real_##name = (type(*) args)dlsym(RTLD_NEXT, #name)

static int is_stderr(FILE *f) { return f == stderr || (f && fileno(f) == STDERR_FILENO); }
static void stream_error(FILE *f) { f->_flags |= 0x20; /* glibc _IO_ERR_SEEN: ferror() is now true */ }

ssize_t write(int fd, const void *buf, size_t n)
{
    REAL(ssize_t, write, (int, const void *, size_t));
    if (fd != STDERR_FILENO && OURS()) {
        if (hit(C_WRITE)) {
            errno = write_errno;
            return -1;
        }
        if (n > 1 && hit(C_SHORT)) return real_write(fd, buf, n / 2);
    }
    return real_write(fd, buf, n);
}

size_t fwrite(const void *buf, size_t size, size_t n, FILE *f)
{
    REAL(size_t, fwrite, (const void *, size_t, size_t, FILE *));
    size_t bytes;
    if (!is_stderr(f) && size && n && OURS()) {
        if (hit(C_WRITE)) {
            errno = write_errno;
            stream_error(f);
            return 0;
        }
        if (!__builtin_mul_overflow(size, n, &bytes) && bytes > 1 && hit(C_SHORT))
            return real_fwrite(buf, 1, bytes / 2, f) / size; /* no error flag: only the count says it */
    }
    return real_fwrite(buf, size, n, f);
}

int fputc(int c, FILE *f)
{
    REAL(int, fputc, (int, FILE *));
    if (!is_stderr(f) && OURS() && hit(C_WRITE)) {
        errno = write_errno;
        stream_error(f);
        return EOF;
    }
    return real_fputc(c, f);
}

int fputs(const char *s, FILE *f)
{
    REAL(int, fputs, (const char *, FILE *));
    if (!is_stderr(f) && OURS() && hit(C_WRITE)) {
        errno = write_errno;
        stream_error(f);
        return EOF;
    }
    return real_fputs(s, f);
}

int fflush(FILE *f)
{
    REAL(int, fflush, (FILE *));
    if (f && !is_stderr(f) && OURS() && hit(C_WRITE)) {
        errno = write_errno;
        stream_error(f);
        return EOF;
    }
    return real_fflush(f);
}

int fsync(int fd)
{
    REAL(int, fsync, (int));
    if (OURS() && hit(C_FSYNC)) {
        errno = EIO;
        return -1;
    }
    return real_fsync(fd);
}

int fdatasync(int fd)
{
    REAL(int, fdatasync, (int));
    if (OURS() && hit(C_FSYNC)) {
        errno = EIO;
        return -1;
    }
    return real_fdatasync(fd);
}

int rename(const char *from, const char *to)
{
    REAL(int, rename, (const char *, const char *));
    if (OURS() && hit(C_RENAME)) {
        errno = EIO;
        return -1;
    }
    return real_rename(from, to);
}

/* ---- OpenCL ------------------------------------------------------------------ */
cl_mem clCreateBuffer(cl_context ctx, cl_mem_flags flags, size_t size, void *host, cl_int *err)
{
    REAL(cl_mem, clCreateBuffer, (cl_context, cl_mem_flags, size_t, void *, cl_int *));
    if (hit(C_CLBUF)) {
        if (err) *err = CL_MEM_OBJECT_ALLOCATION_FAILURE;
        return NULL;
    }
    return real_clCreateBuffer(ctx, flags, size, host, err);
}

cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off, const size_t *gws,
                              const size_t *lws, cl_uint nev, const cl_event *wait, cl_event *ev)
{
    REAL(cl_int, clEnqueueNDRangeKernel, (cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *,
                                          const size_t *, cl_uint, const cl_event *, cl_event *));
    if (hit(C_CLRUN)) return CL_OUT_OF_RESOURCES;
    return real_clEnqueueNDRangeKernel(q, k, dim, off, gws, lws, nev, wait, ev);
}

cl_int clBuildProgram(cl_program p, cl_uint n, const cl_device_id *devs, const char *opts,
                      void(CL_CALLBACK *notify)(cl_program, void *), void *user)
{
    REAL(cl_int, clBuildProgram, (cl_program, cl_uint, const cl_device_id *, const char *,
                                  void(CL_CALLBACK *)(cl_program, void *), void *));
    if (hit(C_CLBUILD)) return CL_BUILD_PROGRAM_FAILURE;
    return real_clBuildProgram(p, n, devs, opts, notify, user);
}

/* ---- set-up and report ------------------------------------------------------- */
__attribute__((constructor)) static void shim_init(void)
{
    dl_iterate_phdr(first_object, &main_base);
    unsetenv("LD_PRELOAD");
    configure();
}

__attribute__((destructor)) static void shim_report(void)
{
    const char *log = getenv("BN_FAULT_LOG");
    if (!log) return;
    int saved = fault_class;
    fault_class = -1; /* nothing fails from here on */
    char line[128];
    REAL(int, open, (const char *, int, ...));
    int fd = real_open(log, 01 | 0100 | 02000, 0644); /* O_WRONLY | O_CREAT | O_APPEND */
    if (fd < 0) return;
    for (int i = 0; i < C_N; i++) {
        int n = snprintf(line, sizeof line, "%s %lu\n", names[i], counts[i]);
        if (write(fd, line, (size_t)n) < 0) break;
    }
    if (fired) {
        int n = snprintf(line, sizeof line, "fired %s:%lu\n", names[saved], fault_n);
        if (write(fd, line, (size_t)n) < 0) fired = 0;
    }
    close(fd);
}
