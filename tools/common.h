/*
 * common.h - what every bitnet-* tool shares: exit statuses, messages,
 * the common flags (argtable2), atomic outputs, reading FILE[:TENSOR].
 * Tools are thin: parse flags -> call the library -> report.
 */
#ifndef BITNET_TOOLS_COMMON_H
#define BITNET_TOOLS_COMMON_H

#include <argtable2.h>
#include <stdio.h>

#include "bitnet.h"

/* Exit statuses, the same for every tool (documented in each man page). */
enum {
    EXIT_OK = 0,      /* success */
    EXIT_FAIL = 1,    /* data or verification failure: bad/corrupt input, a check failed */
    EXIT_USAGE = 2,   /* bad flags or arguments */
    EXIT_IO = 3,      /* cannot open, read or write a file */
    EXIT_DEVICE = 4   /* the requested device is missing or failed */
};

extern const char *tool_name;
extern int tool_verbosity; /* 0 = -q, 1 = default, 2 = -v */

void tool_init(const char *name);
void msg_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));   /* always */
void msg_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* unless -q */
void msg_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* with -v */
/* Prints "tool: what: strerror (detail)" and returns the exit status for st. */
int tool_fail(bitnet_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int tool_exit_code(bitnet_status st);

/* Flags every tool has.  Build the table with tool_common_args_add(). */
typedef struct {
    struct arg_lit *help, *version, *quiet, *verbose, *force;
} tool_std_args;
typedef struct {
    struct arg_str *device;
    struct arg_int *threads;
    struct arg_lit *stats;
} tool_dev_args;
tool_std_args tool_std_args_new(void);
tool_dev_args tool_dev_args_new(void);

/* Parses argv against table (NULL-terminated list ending with an arg_end).
 * Handles --help (usage + glossary on stdout, returns 0 with *done=1),
 * --version, -q/-v, and errors (returns EXIT_USAGE).  `synopsis_extra` is
 * printed after the generated usage line in --help. */
int tool_parse(int argc, char **argv, void **table, const tool_std_args *std, const char *purpose, int *done);

/* Creates the backend from --device/--threads (or BITNET_DEVICE), with
 * warnings routed to stderr.  Returns an exit status. */
int tool_backend(const tool_dev_args *dev, bitnet_backend **be);
/* Prints the backend's statistics to stderr when --stats was given. */
void tool_backend_stats(const tool_dev_args *dev, const bitnet_backend *be);

/* Output: "-" is stdout (refused when a terminal unless force); otherwise a
 * bitnet_outfile (a regular file is written through a temporary renamed over
 * it by tool_out_commit; a device, FIFO or socket directly).  tool_out_abort
 * leaves the target as it was; so does SIGINT/SIGTERM/SIGHUP/SIGPIPE (after
 * tool_init).  Both are safe to call again. */
typedef struct {
    FILE *f;
    bitnet_outfile *out;
    int is_stdout;
} tool_out;
int tool_out_open(tool_out *o, const char *path, int force);
/* What tool_out_open would refuse, checked up front by a tool that writes
 * only after its work ("-" always passes).  Returns an exit status. */
int tool_out_check(const char *path);
int tool_out_commit(tool_out *o);
void tool_out_abort(tool_out *o);

/* Input "-" is stdin; a leftover temporary of an interrupted write
 * (bitnet_outfile_is_temp) is refused with EXIT_USAGE. */
int tool_in_open(const char *path, FILE **f);
void tool_in_close(FILE *f);

/* Splits "FILE:TENSOR" at the last ':' when what precedes is an existing
 * file or "-" (so names with ':' still work); tensor is NULL without one.
 * Returns malloc'd file (caller frees). */
char *tool_split_spec(const char *spec, const char **tensor);
/* Loads one tensor from FILE[:TENSOR] (any format; without :TENSOR the file
 * must hold exactly one tensor).  Returns an exit status. */
int tool_load_tensor(const char *spec, bitnet_tensor *t);

/* Casts t's data to f32 in place (from any dtype bitnet_cast reads); on
 * failure says so ("WHAT: cannot convert to f32") and leaves t as it was.
 * Returns an exit status. */
int tool_cast_f32(const char *what, bitnet_tensor *t);

/* Output format from -o's magic-free choice: by extension (.npy, .safetensors,
 * else .bnt) unless `to` names one. */
bitnet_format tool_out_format(const char *path, const char *to);
/* Metadata every written file gets: producing tool and version, command line. */
void tool_record_meta(bitnet_writer *w, int argc, char **argv);
/* Writes the one tensor y to path ('-' is standard output) atomically, in the
 * format tool_out_format(path, to) gives (so '-' without `to` is bnt), with
 * tool_record_meta's metadata where the format holds any.  Returns an exit
 * status (messages already printed). */
int tool_write_tensor(const char *path, const char *to, int force, const bitnet_tensor *y, int argc, char **argv);
/* The same for n tensors in one file (.bnt or .safetensors; .npy holds one). */
int tool_write_tensors(const char *path, const char *to, int force, const bitnet_tensor *const *ys, int n, int argc,
                       char **argv);

/* The Hugging Face BitNet layout: u8 "NAME" [out/4, in] + float "NAME_scale"
 * pairs become one ternary tensor NAME (t2; f32 when to_float).  mode: 0 off,
 * 1 auto (pairs found by name; lone tensors pass as they are), 2 on (a u8
 * 2-D tensor without its scale is an error). */
typedef struct {
    struct arg_str *mode, *scale;
} tool_hf_args;
tool_hf_args tool_hf_args_new(void);
typedef struct {
    int mode, to_float;
    bitnet_hf_scale_op op;
    bitnet_tensor *held;   /* waiting for their partner */
    size_t n_held, cap;
    size_t n_ready, next_ready; /* at the end: held tensors go out as they are */
    int at_end;
} tool_hf;
/* Reads --hf-bitnet/--hf-scale into h.  Returns an exit status. */
int tool_hf_init(tool_hf *h, const tool_hf_args *a, int to_float);
/* bitnet_reader_next with the pairs joined (a pair comes out when its second
 * half is read).  A half whose partner the header does not list passes at
 * once, in order; where the format lists no tensors up front (.bnt, .npy)
 * halves wait for a partner and lone ones come out at the end. */
bitnet_status tool_hf_next(tool_hf *h, bitnet_reader *r, bitnet_tensor *t);
void tool_hf_free(tool_hf *h);

#endif
