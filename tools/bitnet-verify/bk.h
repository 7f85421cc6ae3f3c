/*
 * bk.h - the --backends harness of bitnet-verify (internal): shape classes,
 * random inputs, error metrics, and one result line per op x device x class.
 * bk_quant.c tests quantization, packing, BitLinear and the float product;
 * bk_ops.c the tensor ops; backends.c runs them all on each device.
 */
#ifndef BITNET_VERIFY_BK_H
#define BITNET_VERIFY_BK_H

#include "verify.h"

#include <stdint.h>

/* One matrix-shaped case: m rows (tokens), k columns (inputs), n outputs. */
typedef struct {
    uint64_t m, k, n;
} bk_mat;

/* A shape class: vector lengths and matrix shapes. */
typedef struct {
    const char *name;
    const uint64_t *vec;
    size_t nvec;
    const bk_mat *mat;
    size_t nmat;
} bk_class;

typedef enum {
    BK_ULP,        /* max distance in ulps of the reference (0 = bit-exact) */
    BK_NMSE,       /* sum (got - ref)^2 / sum ref^2 */
    BK_MISMATCH    /* count of differing codes, bytes or scales */
} bk_metric;

typedef struct bk_state bk_state; /* results, random state, options (backends.c) */

typedef struct {
    bk_state *st;
    const char *device;        /* as given: "cpu", "opencl:0", ... */
    bitnet_backend *be;        /* NULL for host-only checks */
    const bk_class *cls;
    /* the op line being accumulated */
    const char *op;
    bk_metric metric;
    double bound, err;
    int failed, device_error;
    char note[512];
} bk_ctx;

/* Starts an op line: the worst error over the cases that follow is reported. */
void bk_begin(bk_ctx *c, const char *op, bk_metric metric, double bound);
/* Adds one case's error; `what` describes the case (shape, variant). */
void bk_add(bk_ctx *c, double err, const char *what);
/* Records the statuses of the reference and the fast call; returns 1 when
 * the case failed there (the outputs are then not compared). */
int bk_status(bk_ctx *c, bitnet_status ref, bitnet_status fast, const char *what);
/* An input both paths must refuse with `want`: fails the line otherwise. */
void bk_same_error(bk_ctx *c, bitnet_status want, bitnet_status ref, bitnet_status fast, const char *what);
/* Ends the op line: prints (or stores, for --json) PASS/FAIL. */
void bk_end(bk_ctx *c);

/* Random inputs (never all zero): uniform in [lo, hi), zero replaced. */
void bk_fill(bk_ctx *c, float *x, uint64_t n, float lo, float hi);
uint64_t bk_rand(bk_ctx *c);
/* Random ternary codes in {-1,0,1}, packed T2; q (optional) gets the codes. */
void bk_codes(bk_ctx *c, int8_t *q, uint64_t n);

/* Metrics.  ulps: |got - ref| in ulps of max(|ref|, 2^-16 * max|ref|), so that
 * values far below the output's magnitude are measured at that magnitude;
 * a NaN or Inf mismatch is infinite. */
double bk_ulps(const float *got, const float *ref, uint64_t n);
double bk_nmse(const float *got, const double *ref, uint64_t n);
uint64_t bk_diff_bytes(const void *a, const void *b, uint64_t n);
uint64_t bk_diff_f32(const float *a, const float *b, uint64_t n); /* bit patterns */

/* Allocation that never returns NULL (exits on failure: test tool). */
void *bk_alloc(uint64_t n, uint64_t size);
/* Fills a buffer with 0xA5 bytes, so that unwritten outputs show. */
void bk_poison(void *p, uint64_t bytes);

void bk_run_quant(bk_ctx *c, int level);   /* quantize, dequantize, bitlinear, matmul */
void bk_run_pack(bk_ctx *c);               /* t2/t3 packing round trips (host) */
void bk_run_ops(bk_ctx *c, int level);     /* binary, unary, softmax, reduce, norms, permute, scale */

#endif
