/* common.c - shared plumbing of the bitnet-* tools (see common.h). */
#include "common.h"

#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *tool_name = "bitnet";
int tool_verbosity = 1;

static char *pending_tmp; /* removed on SIGINT/SIGTERM */

static void on_signal(int sig)
{
    if (pending_tmp) unlink(pending_tmp);
    signal(sig, SIG_DFL);
    raise(sig);
}

void tool_init(const char *name)
{
    tool_name = name;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN); /* a closed pipe becomes a write error we report */
}

static void vmsg(const char *kind, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: %s", tool_name, kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void msg_err(const char *fmt, ...) { va_list ap; va_start(ap, fmt); vmsg("", fmt, ap); va_end(ap); }
void msg_warn(const char *fmt, ...)
{
    if (tool_verbosity < 1) return;
    va_list ap; va_start(ap, fmt); vmsg("warning: ", fmt, ap); va_end(ap);
}
void msg_info(const char *fmt, ...)
{
    if (tool_verbosity < 2) return;
    va_list ap; va_start(ap, fmt); vmsg("", fmt, ap); va_end(ap);
}

int tool_exit_code(bitnet_status st)
{
    switch (st) {
    case BITNET_OK: case BITNET_END: return EXIT_OK;
    case BITNET_E_IO: return EXIT_IO;
    case BITNET_E_INVALID: return EXIT_USAGE;
    case BITNET_E_DEVICE: case BITNET_E_BUILD: case BITNET_E_DEVICE_MEMORY: case BITNET_E_NO_DEVICE: return EXIT_DEVICE;
    default: return EXIT_FAIL;
    }
}

int tool_fail(bitnet_status st, const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *detail = bitnet_error_detail();
    if (detail && *detail)
        fprintf(stderr, "%s: %s: %s (%s)\n", tool_name, what, bitnet_strerror(st), detail);
    else
        fprintf(stderr, "%s: %s: %s\n", tool_name, what, bitnet_strerror(st));
    return tool_exit_code(st);
}

tool_std_args tool_std_args_new(void)
{
    tool_std_args a;
    a.help = arg_lit0("h", "help", "print this help and exit");
    a.version = arg_lit0(NULL, "version", "print the version and exit");
    a.quiet = arg_lit0("q", "quiet", "print only errors");
    a.verbose = arg_litn("v", "verbose", 0, 2, "print more (twice: debug messages, e.g. OpenCL builds)");
    a.force = arg_lit0("f", "force", "write binary data to a terminal anyway");
    return a;
}

tool_dev_args tool_dev_args_new(void)
{
    tool_dev_args d;
    d.device = arg_str0(NULL, "device", "cpu|opencl|opencl:N|auto", "where to compute (default: $BITNET_DEVICE, else cpu)");
    d.threads = arg_int0(NULL, "threads", "N", "CPU threads (default: all cores)");
    d.stats = arg_lit0(NULL, "stats", "print per-op kernel/transfer times and buffer statistics to stderr");
    return d;
}

int tool_parse(int argc, char **argv, void **table, const tool_std_args *std, const char *purpose, int *done)
{
    struct arg_end *end = NULL;
    int n = 0;
    *done = 0;
    if (arg_nullcheck(table) != 0) {
        msg_err("out of memory");
        return EXIT_FAIL;
    }
    while (1) {
        struct arg_hdr *h = table[n];
        if (h->flag & ARG_TERMINATOR) { end = (struct arg_end *)h; break; }
        n++;
    }
    int nerr = arg_parse(argc, argv, table);
    if (std->help->count) {
        printf("Usage: %s", tool_name);
        arg_print_syntax(stdout, table, "\n");
        printf("%s\n\n", purpose);
        arg_print_glossary(stdout, table, "  %-28s %s\n");
        printf("\nExit status: 0 ok, 1 data or verification failure, 2 usage error, 3 I/O error, 4 device error.\n"
               "See %s(1).\n", tool_name);
        *done = 1;
        return EXIT_OK;
    }
    if (std->version->count) {
        printf("%s %s\n", tool_name, bitnet_version());
        *done = 1;
        return EXIT_OK;
    }
    if (nerr > 0) {
        arg_print_errors(stderr, end, tool_name);
        fprintf(stderr, "Try '%s --help' for more information.\n", tool_name);
        return EXIT_USAGE;
    }
    if (std->quiet->count) tool_verbosity = 0;
    if (std->verbose->count) tool_verbosity = 1 + std->verbose->count;
    return EXIT_OK;
}

static void log_to_stderr(void *user, bitnet_log_level level, const char *msg)
{
    (void)user;
    if (level == BITNET_LOG_WARN) msg_warn("%s", msg);
    else if (level == BITNET_LOG_INFO) msg_info("%s", msg);
    else if (tool_verbosity > 2) msg_info("%s", msg);
}

int tool_backend(const tool_dev_args *dev, bitnet_backend **be)
{
    const char *spec = dev->device->count ? dev->device->sval[0] : NULL;
    int threads = dev->threads->count ? dev->threads->ival[0] : 0;
    if (threads < 0) {
        msg_err("--threads must be >= 0 (0 = all cores)");
        return EXIT_USAGE;
    }
    bitnet_status st = bitnet_backend_create(be, spec, threads);
    if (st) {
        if (st == BITNET_E_INVALID) return tool_fail(st, "--device");
        return tool_fail(st, "cannot use device '%s'", spec ? spec : getenv("BITNET_DEVICE") ? getenv("BITNET_DEVICE") : "cpu");
    }
    bitnet_backend_set_log(*be, log_to_stderr, NULL);
    msg_info("device: %s", bitnet_backend_describe(*be));
    return EXIT_OK;
}

void tool_backend_stats(const tool_dev_args *dev, const bitnet_backend *be)
{
    if (!dev->stats->count || !be) return;
    char buf[16384];
    bitnet_backend_stats_format(be, buf, sizeof buf);
    fprintf(stderr, "%s", buf);
}

int tool_out_open(tool_out *o, const char *path, int force)
{
    memset(o, 0, sizeof *o);
    if (strcmp(path, "-") == 0) {
        if (!force && isatty(STDOUT_FILENO)) {
            msg_err("refusing to write binary data to a terminal (use -o FILE, a pipe, or -f)");
            return EXIT_USAGE;
        }
        o->f = stdout;
        o->is_stdout = 1;
        return EXIT_OK;
    }
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        msg_err("%s: is a directory", path);
        return EXIT_IO;
    }
    size_t n = strlen(path);
    o->path = strdup(path);
    o->tmp = malloc(n + 16);
    if (!o->path || !o->tmp) {
        msg_err("out of memory");
        tool_out_abort(o);
        return EXIT_FAIL;
    }
    /* The temporary lives next to the target so that rename() is atomic. */
    snprintf(o->tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        msg_err("%s: cannot create: %s", path, strerror(errno));
        free(o->tmp);
        o->tmp = NULL;
        tool_out_abort(o);
        return EXIT_IO;
    }
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask); /* mkstemp makes 0600; give the usual mode */
    o->f = fdopen(fd, "wb");
    if (!o->f) {
        close(fd);
        tool_out_abort(o);
        return EXIT_IO;
    }
    pending_tmp = o->tmp;
    return EXIT_OK;
}

int tool_out_commit(tool_out *o)
{
    int rc = EXIT_OK;
    if (o->is_stdout) {
        if (fflush(stdout) != 0 || ferror(stdout)) {
            msg_err("write to standard output failed: %s", strerror(errno));
            rc = EXIT_IO;
        }
        o->f = NULL;
        return rc;
    }
    if (!o->f) return EXIT_IO;
    if (fflush(o->f) != 0 || ferror(o->f) || fsync(fileno(o->f)) != 0) {
        msg_err("%s: write failed: %s", o->path, strerror(errno));
        tool_out_abort(o);
        return EXIT_IO;
    }
    if (fclose(o->f) != 0) {
        o->f = NULL;
        msg_err("%s: write failed: %s", o->path, strerror(errno));
        tool_out_abort(o);
        return EXIT_IO;
    }
    o->f = NULL;
    if (rename(o->tmp, o->path) != 0) {
        msg_err("%s: cannot rename into place: %s", o->path, strerror(errno));
        tool_out_abort(o);
        return EXIT_IO;
    }
    pending_tmp = NULL;
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
    return EXIT_OK;
}

void tool_out_abort(tool_out *o)
{
    if (o->f && !o->is_stdout) fclose(o->f);
    o->f = NULL;
    if (o->tmp) unlink(o->tmp);
    if (pending_tmp == o->tmp) pending_tmp = NULL;
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
}

int tool_in_open(const char *path, FILE **f)
{
    if (strcmp(path, "-") == 0) {
        *f = stdin;
        return EXIT_OK;
    }
    *f = fopen(path, "rb");
    if (!*f) {
        msg_err("%s: cannot open: %s", path, strerror(errno));
        return EXIT_IO;
    }
    return EXIT_OK;
}

void tool_in_close(FILE *f)
{
    if (f && f != stdin) fclose(f);
}

char *tool_split_spec(const char *spec, const char **tensor)
{
    *tensor = NULL;
    struct stat sb;
    char *file = strdup(spec);
    if (!file) return NULL;
    if (strcmp(spec, "-") == 0 || stat(spec, &sb) == 0) return file;
    /* Last ':' first; earlier ones too, since a tensor name may hold ':'. */
    for (size_t i = strlen(spec); i-- > 0;) {
        if (spec[i] != ':') continue;
        file[i] = 0;
        if (strcmp(file, "-") == 0 || stat(file, &sb) == 0) {
            *tensor = spec + i + 1;
            return file;
        }
        file[i] = ':';
    }
    return file;
}

int tool_load_tensor(const char *spec, bitnet_tensor *t)
{
    const char *tensor;
    FILE *f = NULL;
    bitnet_reader *r = NULL;
    int rc;
    char *file = tool_split_spec(spec, &tensor);
    if (!file) {
        msg_err("out of memory");
        return EXIT_FAIL;
    }
    memset(t, 0, sizeof *t);
    if ((rc = tool_in_open(file, &f))) goto out;
    bitnet_status st = bitnet_reader_create(&r, f, BITNET_FMT_AUTO);
    if (st) { rc = tool_fail(st, "%s", file); goto out; }
    if (tensor) {
        st = bitnet_reader_find(r, tensor, t);
        if (st) { rc = tool_fail(st, "%s: tensor '%s'", file, tensor); goto out; }
    } else {
        st = bitnet_reader_next(r, t);
        if (st == BITNET_END) { msg_err("%s: holds no tensor", file); rc = EXIT_FAIL; goto out; }
        if (st) { rc = tool_fail(st, "%s", file); goto out; }
        bitnet_tensor extra = {0};
        st = bitnet_reader_next(r, &extra);
        if (st == BITNET_OK) {
            msg_err("%s holds more than one tensor ('%s', '%s', ...): name one as %s:TENSOR", file, t->info.name,
                    extra.info.name, file);
            bitnet_tensor_release(&extra);
            bitnet_tensor_release(t);
            rc = EXIT_USAGE;
            goto out;
        }
        if (st != BITNET_END) { bitnet_tensor_release(t); rc = tool_fail(st, "%s", file); goto out; }
    }
    rc = EXIT_OK;
out:
    bitnet_reader_free(r);
    tool_in_close(f);
    free(file);
    return rc;
}

bitnet_format tool_out_format(const char *path, const char *to)
{
    bitnet_format f;
    if (to && bitnet_format_parse(to, &f) == BITNET_OK) return f;
    size_t n = strlen(path);
    if (n >= 4 && strcmp(path + n - 4, ".npy") == 0) return BITNET_FMT_NPY;
    if (n >= 12 && strcmp(path + n - 12, ".safetensors") == 0) return BITNET_FMT_SAFETENSORS;
    return BITNET_FMT_BNT;
}

void tool_record_meta(bitnet_writer *w, int argc, char **argv)
{
    char tool[128], cmd[4096];
    size_t used = 0;
    snprintf(tool, sizeof tool, "%s %s", tool_name, bitnet_version());
    cmd[0] = 0;
    for (int i = 0; i < argc && used + 1 < sizeof cmd; i++)
        used += (size_t)snprintf(cmd + used, sizeof cmd - used, "%s%s", i ? " " : "", argv[i]);
    bitnet_writer_meta(w, "producer", tool);
    bitnet_writer_meta(w, "command", cmd);
}

int tool_write_tensors(const char *path, const char *to, int force, const bitnet_tensor *const *ys, int n, int argc,
                       char **argv)
{
    tool_out out;
    bitnet_writer *w = NULL;
    bitnet_format fmt = tool_out_format(path, to);
    int rc = tool_out_open(&out, path, force);
    if (rc) return rc;
    bitnet_status st = bitnet_writer_create(&w, out.f, fmt, NULL);
    if (!st && fmt != BITNET_FMT_NPY) tool_record_meta(w, argc, argv);
    for (int i = 0; i < n && !st; i++) st = bitnet_writer_put(w, ys[i]);
    if (!st) st = bitnet_writer_finish(w);
    bitnet_writer_free(w);
    if (st) {
        tool_out_abort(&out);
        return tool_fail(st, "%s", path);
    }
    return tool_out_commit(&out);
}

int tool_write_tensor(const char *path, const char *to, int force, const bitnet_tensor *y, int argc, char **argv)
{
    return tool_write_tensors(path, to, force, &y, 1, argc, argv);
}

int tool_cast_f32(const char *what, bitnet_tensor *t)
{
    if (t->info.dtype == BITNET_F32) return EXIT_OK;
    uint64_t n;
    bitnet_status st = bitnet_tensor_elements(&t->info, &n);
    float *f = st ? NULL : malloc(n ? n * sizeof(float) : 1);
    if (!st && !f) st = BITNET_E_NOMEM;
    if (!st) st = bitnet_cast(t->info.dtype, t->data, BITNET_F32, f, n);
    if (st) {
        free(f);
        return tool_fail(st, "%s: cannot convert to f32", what);
    }
    free(t->data);
    t->data = f;
    t->info.dtype = BITNET_F32;
    return EXIT_OK;
}
