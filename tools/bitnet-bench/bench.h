/*
 * bench.h - bitnet-bench internals: options, the op table, one measured
 * configuration (a "case"), result rows, and the shared method helpers.
 *
 * Each op lives in its own file (op_*.c) and exports one bench_op object;
 * ops.c refers to them weakly, so an op file that is absent (because the
 * library call it times has not landed) simply drops out of the tool.
 */
#ifndef BITNET_BENCH_H
#define BITNET_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "../common.h"

#define BENCH_MAX_VARIANTS 16
#define BENCH_NAME 40

/* What the shape of an op means. */
typedef enum {
    BENCH_SHAPE_MATRIX, /* m x k: rows (out) x cols (in) */
    BENCH_SHAPE_VECTOR  /* n = m * k elements */
} bench_shape_kind;

typedef struct {
    double min_time_s;     /* --min-time */
    int min_reps, warmup, max_reps;
    uint64_t seed;
    uint64_t llc_bytes;    /* assumed last-level cache (--llc, else the host's, at least 64 MiB) */
    uint64_t max_mem;      /* bound on the rotated working set */
    uint64_t roof_bytes;   /* bytes for the per-device roofline */
    int no_check;
    int force_e2e;         /* --timer e2e: ignore kernel times */
    int keep_weights;      /* --keep-weights: ops with weights keep them on the device */
    int resident;          /* --resident: operands in bitnet_buffers, one read per call */
    int chain;             /* --chain N (with --resident): N calls back to back and one wait a sample; 0 off */
    int energy;            /* --energy: read energy counters around the timed calls */
    const char *scales;    /* --scale list */
    const char *tmpdir;    /* for the file op */
    const char *net;       /* --net: the network of the mlp op */
} bench_opts;

typedef struct bench_case bench_case;

typedef struct {
    const char *name;
    const char *alias;      /* accepted by --op too (the library's op name), or NULL */
    bench_shape_kind shape;
    int uses_tokens;        /* product ops and activation quantization */
    int host_only;          /* needs no backend: measured once, device "host" */
    int device_only;        /* host<->device op: not run on the CPU backend */
    int product;            /* GOP/s = 2 m k tokens */
    int has_baseline_blas;  /* --baseline openblas applies */
    /* Fills variant names (scale kinds, zlib levels...); returns the count;
     * NULL means one unnamed variant.  On bad --scale etc. returns 0 and says why. */
    size_t (*variants)(const bench_opts *o, char out[][BENCH_NAME], size_t max);
    /* Bytes one call must move (each input read once, each output written
     * once) and bytes one rotated set of buffers holds. */
    void (*sizes)(const bench_case *c, uint64_t *moved, uint64_t *set_bytes);
    /* Allocates c->nsets rotated sets holding random data. */
    bitnet_status (*setup)(bench_case *c);
    /* One call on set `set`.  *ms may be set to a time the op measured
     * itself (roofline, transfers, file i/o); else the caller's clock counts. */
    bitnet_status (*run)(bench_case *c, bitnet_backend *be, size_t set, double *ms);
    /* Compares the output of set 0 (after one run) with the reference; 0 ok,
     * else writes a reason. */
    int (*check)(bench_case *c, char *why, size_t n);
    void (*teardown)(bench_case *c);
    /* (optional) Keeps (keep = 1) or forgets (0) the weights of every set on
     * be's device: --keep-weights (bench_keep_bufs does one operand); with
     * --resident (or for a resident op) places the operands in device
     * buffers (keep = 1) or frees them (0). */
    bitnet_status (*keep)(bench_case *c, bitnet_backend *be, int keep);
    int resident;           /* always measured with its operands in device buffers (keep is called) */
    int net;                /* runs the --net network: once per device and token count, no shapes */
} bench_op;

struct bench_case {
    const bench_op *op;
    const bench_opts *opts;
    uint64_t m, k, tokens;
    char variant[BENCH_NAME];
    size_t nsets;
    void *st;              /* the op's state */
    int chained;           /* set by the method once the check is done when --chain: resident runs read nothing */
};

/* One result row. */
typedef struct {
    char op[BENCH_NAME], variant[BENCH_NAME], device[BENCH_NAME], shape[64];
    uint64_t m, k, tokens;
    int has_tokens;
    int dev;               /* index into the device list, -1 for host */
    double med_ms, min_ms, max_ms, spread, e2e_ms;
    int reps;
    int sets;              /* rotated buffer sets */
    const char *timer;     /* "kernel", "e2e" or "self" */
    double bytes, ops;     /* per call */
    double gbs, gops, pct, speedup; /* NAN when not applicable */
    char check[16];        /* ok, FAIL, skip, error */
    char note[160];
    int hidden;            /* measured only as a baseline */
    int energy;            /* --energy was asked for: the energy columns apply */
    double watts, idle_w;  /* mean power over the timed calls, idle power (NAN: no counter) */
    double j_op, j_op_above; /* joules per call: total, above idle */
    int ran_on_cpu;        /* an OpenCL device had no kernel: the CPU ran it */
} bench_row;

typedef struct {
    char spec[BENCH_NAME];
    char describe[256];
    double copy_gbs, read_gbs, peak_gbs; /* NAN when not measured */
    double roof_mib;       /* the roofline's buffer size in MiB (NAN when not measured) */
    double llc_mib;        /* the cache the run's rotation assumed (--llc), MiB */
} bench_device;

#define BENCH_MAX_OPS 32
#define BENCH_MAX_DEVS 8
#define BENCH_MAX_SHAPES 256
#define BENCH_MAX_TOKENS 16
#define BENCH_MAX_ELEMS (1ull << 34) /* per operand: 64 GiB of floats */

/* What to measure: ops with their variants, shapes, token counts. */
typedef struct {
    uint64_t m, k;
    int single; /* given as one number N: N x N for matrix ops, N elements for others */
} bench_shape;

typedef struct {
    const bench_op *ops[BENCH_MAX_OPS];
    char variants[BENCH_MAX_OPS][BENCH_MAX_VARIANTS][BENCH_NAME];
    size_t nvar[BENCH_MAX_OPS], nops;
    bench_shape shapes[BENCH_MAX_SHAPES];
    size_t nshapes;
    uint64_t tokens[BENCH_MAX_TOKENS];
    size_t ntok;
} bench_plan;

/* The devices of one run, with their rooflines. */
typedef struct {
    bitnet_backend *be[BENCH_MAX_DEVS];
    bench_device dev[BENCH_MAX_DEVS];
    size_t n;
    int threads;
    bitnet_backend *baseline; /* created for --baseline DEV when DEV is not listed */
    int stats;                /* --stats */
} bench_devices;

typedef struct {
    bench_row *v;
    size_t n, cap;
} bench_rows;

/* plan.c: each returns an exit status and says what is wrong. */
int bench_plan_ops(bench_plan *p, const char *list, const bench_opts *o); /* NULL: every op */
int bench_plan_shapes(bench_plan *p, const char *list);                   /* "MxK,N,..." */
int bench_plan_sweep(bench_plan *p, const char *spec);                    /* A:B:xF or A:B:+S */
int bench_plan_model(bench_plan *p, const char *path);
int bench_plan_tokens(bench_plan *p, const char *list);

/* run.c */
/* Creates the backends of a comma-separated device list; an exit status. */
int bench_devices_open(bench_devices *d, const char *list, int threads);
void bench_devices_close(bench_devices *d);
/* Measures each device's roofline; grow: let the size grow on fast devices. */
void bench_rooflines(bench_devices *d, uint64_t bytes, int grow, uint64_t llc_bytes);
/* The host's last-level cache in bytes from sysfs (cpu_root: the directory
 * of cpu0, cpu1...), all instances of the highest level added; 0 when it
 * does not say. */
uint64_t bench_host_llc(const char *cpu_root);
/* Measures every configuration of the plan into rows; returns the worst exit status. */
int bench_run(const bench_plan *p, const bench_opts *o, bench_devices *d, bench_rows *rows);
/* Fills %peak, and speedups against the baseline (measuring hidden rows as
 * needed); returns the worst exit status. */
int bench_compare(const char *baseline, const bench_opts *o, bench_devices *d, bench_rows *rows);
/* Progress line on stderr when it is a terminal; what NULL clears it. */
void bench_progress(const char *what, const char *shape, const char *device);

/* ops.c */
size_t bench_op_all(const bench_op **out, size_t max);
const bench_op *bench_op_find(const char *name);

/* method.c: clock, random data, rotated buffers, measurement, checks. */
double bench_now_ms(void);
uint64_t bench_rand(uint64_t *state);
/* Uniform in [lo, hi), never exactly zero. */
void bench_fill_f32(float *x, uint64_t n, uint64_t seed, float lo, float hi);
/* Random valid T2 codes for [rows x cols] (padding code 1), into t2. */
void bench_fill_t2(uint8_t *t2, uint64_t rows, uint64_t cols, uint64_t seed);
/* nsets buffers of `bytes`, 64-byte aligned; NULL on failure (all freed). */
void **bench_bufs_new(size_t nsets, size_t bytes);
/* Copies buffer 0 into the others (rotated sets hold the same data). */
void bench_bufs_replicate(void **b, size_t nsets, size_t bytes);
void bench_bufs_free(void **b, size_t nsets);
/* Checks: 0 when within bound, else a reason in why. */
int bench_check_bytes(const void *y, const void *ref, size_t n, const char *what, char *why, size_t wn);
int bench_check_ulp(const float *y, const float *ref, uint64_t n, uint32_t max_ulp, char *why, size_t wn);
int bench_check_nmse(const float *y, const float *ref, uint64_t n, double bound, char *why, size_t wn);
/* Parses a scale kind "tensor", "row", "group:G". */
int bench_parse_scale(const char *s, bitnet_scale_kind *kind, uint32_t *group);
/* Splits the comma-separated list s into out (at most max names). */
size_t bench_split(const char *s, char out[][BENCH_NAME], size_t max);
/* The --scale list as variants (0 and a message on a bad entry). */
size_t bench_scale_variants(const bench_opts *o, char out[][BENCH_NAME], size_t max);
/* Number of scales of a [rows x cols] ternary matrix. */
uint64_t bench_n_scales(bitnet_scale_kind kind, uint32_t group, uint64_t rows, uint64_t cols);

/* The state of a plain f32 op: n_in inputs of in_n floats (random in
 * [lo, hi)), one output of out_n floats, each in c->nsets rotated sets. */
typedef struct {
    void **in[2], **out;
    int n_in;
    uint64_t in_n, out_n;
} bench_f32io;
bitnet_status bench_f32io_setup(bench_case *c, int n_in, uint64_t in_n, uint64_t out_n, float lo, float hi);
void bench_f32io_teardown(bench_case *c);
#define BENCH_F32IO(c) ((bench_f32io *)(c)->st)

/* Shared setup/teardown pieces of the op files.
 * The op's state: calloc'd, stored in c->st (freed by bench_state_free). */
void *bench_state_new(bench_case *c, size_t size);
/* Frees the nbufs rotated buffer sets given after it (each a void **, NULL
 * allowed), then the state c->st itself; c->st becomes NULL. */
void bench_state_free(bench_case *c, int nbufs, ...);
/* nsets rotated buffers of n floats uniform in [lo, hi) (bench_fill_f32
 * with seed), the same data in each set; NULL on failure. */
void **bench_bufs_f32(size_t nsets, uint64_t n, uint64_t seed, float lo, float hi);
/* nsets rotated buffers of random T2 codes for [rows x cols] (bench_fill_t2);
 * NULL on failure. */
void **bench_bufs_t2(size_t nsets, uint64_t rows, uint64_t cols, uint64_t seed);
/* The geometry of a ternary [c->m x c->k] matrix of the case's --scale
 * variant: scale kind and group, T2 bytes, number of scales. */
typedef struct {
    bitnet_scale_kind kind;
    uint32_t group;
    uint64_t t2_bytes, nd;
} bench_ternary;
void bench_ternary_of(const bench_case *c, bench_ternary *t);
/* The end of a check against a reference: ref (n floats, NULL when it could
 * not be allocated) is the reference output and st its status; y must be
 * within max_ulp ulps of it, or when nmse > 0 have NMSE <= nmse.  Frees ref;
 * 0 ok, else the reason in why. */
int bench_check_f32_ref(float *ref, bitnet_status st, const float *y, uint64_t n, uint32_t max_ulp, double nmse,
                        char *why, size_t wn);
/* Products whose scalar reference would take seconds: above BENCH_CHECK_FULL
 * multiply-adds (M x K x tokens) bench_check_sampled says so, and the check
 * takes BENCH_CHECK_ROWS rows spread over the output, row i of them being
 * bench_check_row(c, i) (the first and the last among them), every token. */
#define BENCH_CHECK_FULL (1ull << 28)
#define BENCH_CHECK_ROWS 64
int bench_check_sampled(const bench_case *c);
uint64_t bench_check_row(const bench_case *c, uint64_t i);
/* Keeps (keep = 1) or forgets (0) each of the nsets buffers of `bytes` on be's device. */
bitnet_status bench_keep_bufs(bitnet_backend *be, int keep, void **b, size_t nsets, uint64_t bytes);
/* A setup for ops that allocate nothing (the library times its own buffers). */
bitnet_status bench_setup_none(bench_case *c);

/* Measures one configuration on be (NULL for host ops) into row. */
int bench_measure(const bench_op *op, const bench_opts *o, bitnet_backend *be, const char *device,
                  uint64_t m, uint64_t k, uint64_t tokens, const char *variant, bench_row *row);
/* Human-readable time ("12.3 us", "4.56 ms", "1.23 s"). */
const char *bench_fmt_time(double ms, char *buf, size_t n);

/* output.c */
typedef enum { BENCH_FMT_TABLE, BENCH_FMT_MD, BENCH_FMT_CSV, BENCH_FMT_JSON, BENCH_FMT_JSONL } bench_format;
int bench_format_parse(const char *s, bench_format *f);
int bench_write(FILE *f, bench_format fmt, const bench_row *rows, size_t n, const bench_device *devs, size_t ndev);
/* Reads back a --format json document (rows malloc'd); returns an exit status. */
int bench_read_json(FILE *f, const char *name, bench_row **rows, size_t *n, bench_device *devs, size_t *ndev,
                    size_t maxdev);

/* energy.c: RAPL for CPU devices, NVML for OpenCL ones (the first NVIDIA GPU). */
typedef struct {
    int gpu;
    double t0, j0[16];
} bench_energy;
/* Finds the counters and measures idle power for idle_s seconds (once). */
void bench_energy_open(double idle_s, const char *rapl_dir);
void bench_energy_close(void);
/* "RAPL", "NVML", "RAPL, NVML" or "" (none exposed). */
const char *bench_energy_sources(void);
void bench_energy_start(bench_energy *e, const char *device);
/* Joules since start (NAN when the device has no counter); *seconds elapsed, *idle_w idle power. */
double bench_energy_stop(bench_energy *e, double *seconds, double *idle_w);

/* plot.c: returns an exit status. */
int bench_plot(const char *path, const bench_row *rows, size_t n, const bench_device *devs, size_t ndev);

#endif
