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

/* A signal while an output is being written: remove its temporary (the
 * target stays as it was), then die of the signal so that the parent sees
 * the conventional status (128 + n). */
static void on_signal(int sig)
{
    bitnet_outfile_unlink_pending();
    signal(sig, SIG_DFL);
    raise(sig);
}

void tool_init(const char *name)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    tool_name = name;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
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
    /* an error code means ARG_EMALLOC only where arg_end itself reported it:
     * each argument type numbers its own errors (arg_lit's "too many" is 2 too) */
    for (int i = 0; i < end->count; i++)
        if (end->parent[i] == end && end->error[i] == ARG_EMALLOC) {
            msg_err("out of memory");
            return EXIT_FAIL;
        }
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
    /* --stats reports kernel times: they need profiling (off by default, it costs) */
    if (dev->stats && dev->stats->count && (st = bitnet_backend_set_profiling(*be, 1)) != BITNET_OK) {
        bitnet_backend_free(*be);
        *be = NULL;
        return tool_fail(st, "--stats");
    }
    msg_info("device: %s", bitnet_backend_describe(*be));
    return EXIT_OK;
}

void tool_backend_stats(const tool_dev_args *dev, const bitnet_backend *be)
{
    if (!be || !dev->stats || !dev->stats->count) return; /* stats is NULL when argtable ran out of memory */
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
    bitnet_status st = bitnet_outfile_open(&o->out, path);
    if (st) return tool_fail(st, "%s", path);
    o->f = bitnet_outfile_stream(o->out);
    return EXIT_OK;
}

int tool_out_check(const char *path)
{
    if (strcmp(path, "-") == 0) return EXIT_OK;
    bitnet_status st = bitnet_outfile_check(path);
    return st ? tool_fail(st, "%s", path) : EXIT_OK;
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
        o->is_stdout = 0;
        return rc;
    }
    if (!o->out) return EXIT_IO;
    bitnet_status st = bitnet_outfile_commit(o->out);
    o->out = NULL;
    o->f = NULL;
    return st ? tool_fail(st, "cannot write the output") : EXIT_OK;
}

void tool_out_abort(tool_out *o)
{
    bitnet_outfile_abort(o->out);
    o->out = NULL;
    o->f = NULL;
    o->is_stdout = 0;
}

int tool_in_open(const char *path, FILE **f)
{
    if (strcmp(path, "-") == 0) {
        *f = stdin;
        return EXIT_OK;
    }
    if (bitnet_outfile_is_temp(path)) {
        msg_err("%s: not read: the unfinished temporary file of an interrupted write (see bitnet(7))", path);
        return EXIT_USAGE;
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
    if (n >= 5 && strcmp(path + n - 5, ".gguf") == 0) return BITNET_FMT_GGUF;
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

/* ---- the Hugging Face BitNet layout ------------------------------------------ */

tool_hf_args tool_hf_args_new(void)
{
    tool_hf_args a;
    a.mode = arg_str0(NULL, "hf-bitnet", "auto|on|off",
                      "u8 NAME + NAME_scale pairs (Hugging Face BitNet layout) become ternary tensors (default auto)");
    a.scale = arg_str0(NULL, "hf-scale", "mul|div",
                       "the pairs' scale multiplies (AutoBitLinear, default) or divides (BitLinear) the codes");
    return a;
}

int tool_hf_init(tool_hf *h, const tool_hf_args *a, int to_float)
{
    memset(h, 0, sizeof *h);
    h->mode = 1;
    h->to_float = to_float;
    if (a->mode->count) {
        const char *m = a->mode->sval[0];
        if (!strcmp(m, "off")) h->mode = 0;
        else if (!strcmp(m, "on")) h->mode = 2;
        else if (strcmp(m, "auto")) {
            msg_err("--hf-bitnet: '%s' is not auto, on or off", m);
            return EXIT_USAGE;
        }
    }
    if (a->scale->count) {
        const char *m = a->scale->sval[0];
        if (!strcmp(m, "div")) h->op = BITNET_HF_SCALE_DIV;
        else if (strcmp(m, "mul")) {
            msg_err("--hf-scale: '%s' is not mul or div", m);
            return EXIT_USAGE;
        }
    }
    return EXIT_OK;
}

void tool_hf_free(tool_hf *h)
{
    for (size_t i = 0; i < h->n_held; i++) bitnet_tensor_release(&h->held[i]);
    free(h->held);
    memset(h, 0, sizeof *h);
}

static int is_packed(const bitnet_tensor *t) { return t->info.dtype == BITNET_U8 && t->info.rank == 2; }

static const char *scale_suffix = "_scale";

/* The held tensor called name (with suffix appended when given), or -1. */
static long find_held(const tool_hf *h, const char *name, const char *suffix)
{
    size_t nl = strlen(name), sl = suffix ? strlen(suffix) : 0;
    for (size_t i = 0; i < h->n_held; i++) {
        const char *hn = h->held[i].info.name;
        if (strlen(hn) == nl + sl && !strncmp(hn, name, nl) && (!suffix || !strcmp(hn + nl, suffix))) return (long)i;
    }
    return -1;
}

static bitnet_status hold(tool_hf *h, bitnet_tensor *t)
{
    if (h->n_held == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 8;
        bitnet_tensor *n = realloc(h->held, cap * sizeof *n);
        if (!n) return BITNET_E_NOMEM;
        h->held = n;
        h->cap = cap;
    }
    h->held[h->n_held++] = *t;
    memset(t, 0, sizeof *t);
    return BITNET_OK;
}

static void unhold(tool_hf *h, long i)
{
    h->held[i] = h->held[--h->n_held];
}

static bitnet_status join(tool_hf *h, bitnet_tensor *packed, bitnet_tensor *scale, bitnet_tensor *t)
{
    bitnet_status st = h->to_float ? bitnet_hf_dequantize(packed, scale, h->op, t) : bitnet_hf_unpack(packed, scale, h->op, t);
    if (!st)
        msg_info("%s: Hugging Face BitNet layout [%llu, %llu] u8 + %s -> %s [%llu, %llu] (scale %s)", packed->info.name,
                 (unsigned long long)packed->info.dims[0], (unsigned long long)packed->info.dims[1], scale->info.name,
                 bitnet_dtype_name(t->info.dtype), (unsigned long long)t->info.dims[0],
                 (unsigned long long)t->info.dims[1], h->op == BITNET_HF_SCALE_MUL ? "multiplies" : "divides");
    bitnet_tensor_release(packed);
    bitnet_tensor_release(scale);
    return st;
}

/* Whether the partner called name may still come: the header lists it, or
 * the format lists no tensors up front (.bnt, .npy). */
static int partner_may_come(bitnet_reader *r, const char *name) { return bitnet_reader_has_tensor(r, name) != 0; }

/* A pair's halves wait in h->held for each other; a tensor whose partner the
 * header does not list goes out at once, so that memory stays bounded and
 * the order is kept. */
bitnet_status tool_hf_next(tool_hf *h, bitnet_reader *r, bitnet_tensor *t)
{
    bitnet_tensor x;
    bitnet_status st;
    memset(t, 0, sizeof *t);
    if (!h->mode) return bitnet_reader_next(r, t);
    for (;;) {
        if (h->at_end) { /* lone halves go out as they are */
            if (!h->n_held) return BITNET_END;
            *t = h->held[0];
            memmove(h->held, h->held + 1, (h->n_held - 1) * sizeof *h->held);
            h->n_held--;
            return BITNET_OK;
        }
        if ((st = bitnet_reader_next(r, &x)) == BITNET_END) {
            h->at_end = 1;
            for (size_t i = 0; i < h->n_held && h->mode == 2; i++)
                if (is_packed(&h->held[i])) {
                    msg_err("tensor '%s': u8 without a '%s%s' tensor (--hf-bitnet on)", h->held[i].info.name,
                            h->held[i].info.name, scale_suffix);
                    return BITNET_E_NOT_FOUND;
                }
            continue;
        }
        if (st) return st;
        const char *n = x.info.name;
        size_t nl = strlen(n), sl = strlen(scale_suffix);
        long i = -1;
        if (is_packed(&x)) {
            char partner[BITNET_MAX_NAME + 8];
            if ((i = find_held(h, n, scale_suffix)) >= 0) {
                bitnet_tensor sc = h->held[i];
                unhold(h, i);
                return join(h, &x, &sc, t);
            }
            snprintf(partner, sizeof partner, "%s%s", n, scale_suffix);
            if (!partner_may_come(r, partner)) {
                if (h->mode == 2) {
                    msg_err("tensor '%s': u8 without a '%s' tensor (--hf-bitnet on)", n, partner);
                    bitnet_tensor_release(&x);
                    return BITNET_E_NOT_FOUND;
                }
                *t = x;
                return BITNET_OK;
            }
        } else if (nl > sl && !strcmp(n + nl - sl, scale_suffix) && bitnet_dtype_is_float(x.info.dtype)) {
            char base[BITNET_MAX_NAME + 1];
            memcpy(base, n, nl - sl);
            base[nl - sl] = 0;
            if ((i = find_held(h, base, NULL)) >= 0 && is_packed(&h->held[i])) {
                bitnet_tensor pk = h->held[i];
                unhold(h, i);
                return join(h, &pk, &x, t);
            }
            if (!partner_may_come(r, base)) {
                *t = x;
                return BITNET_OK;
            }
        } else {
            *t = x;
            return BITNET_OK;
        }
        if ((st = hold(h, &x))) {
            bitnet_tensor_release(&x);
            return st;
        }
    }
}
