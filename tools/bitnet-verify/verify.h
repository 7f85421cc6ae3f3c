/*
 * verify.h - the parts of bitnet-verify (internal to the tool): one file per
 * mode, plus shared helpers for loading tensors and reading them as numbers.
 */
#ifndef BITNET_VERIFY_H
#define BITNET_VERIFY_H

#include "../common.h"

#include <jansson.h>
#include <stdint.h>

/* Integrity: every byte of every FILE through the library's readers. */
int verify_integrity(char **files, int n);

/* Compare: bounds on the differences; with no bound given the tensors must be equal. */
typedef struct {
    int exact;          /* --exact, or no bound given */
    int have_nmse, have_max_abs;
    double nmse, max_abs;
} verify_bounds;
int verify_compare(const char *a, const char *b, const verify_bounds *bounds);

/* Fidelity: QUANTIZED recomputed from SOURCE with the reference quantizers;
 * spectrum: also the singular values of each quantized weight and of its
 * quantization error (spectrum.c); json: those as one JSON document on
 * stdout (the text lines go to stderr then). */
int verify_fidelity(const char *source, const char *quantized, int spectrum, int json);
/* One layer's spectrum, printed to txt and appended to layers (may be NULL). */
int verify_spectrum(bitnet_backend *be, const bitnet_tensor *src, const bitnet_tensor *q, FILE *txt, json_t *layers);

/* Backends: every op on every device against its _ref. */
typedef struct {
    const char *devices; /* comma-separated list, NULL: cpu + every OpenCL device */
    int level;           /* 0 --quick, 1 default, 2 --full */
    uint64_t seed;
    int json;
    int threads;         /* CPU threads, 0 = all cores */
    int stats;           /* print each backend's statistics to stderr */
} verify_backends_opts;
int verify_backends(const verify_backends_opts *o);

/* ---- shared helpers (util.c) ---- */

/* All tensors of one file, in file order. */
typedef struct {
    bitnet_tensor *t;
    size_t n;
    int *used; /* per tensor, for the caller's bookkeeping */
} vt_list;
/* Loads every tensor of path ("-" = stdin); returns an exit status, reports errors. */
int vt_load_all(const char *path, vt_list *l);
void vt_list_free(vt_list *l);
bitnet_tensor *vt_find(vt_list *l, const char *name, size_t *index);

/* Elements of t as doubles (ternary: q * d with the stored scales); malloc'd. */
bitnet_status vt_to_f64(const bitnet_tensor *t, double **out, uint64_t *n);
/* Ternary codes of t, one int8 in {-1,0,1} per element (T2 or T3); malloc'd. */
bitnet_status vt_codes(const bitnet_tensor *t, int8_t **out);
/* Index of the scale of element (r, c). */
uint64_t vt_scale_index(bitnet_scale_kind kind, uint32_t group, uint64_t cols, uint64_t r, uint64_t c);
/* "t2 [512, 784] row" style description into buf. */
const char *vt_describe(const bitnet_tensor_info *info, char *buf, size_t size);
const char *vt_scale_kind_name(bitnet_scale_kind k);
/* Both tensors have the same rank and dims. */
int vt_same_shape(const bitnet_tensor_info *a, const bitnet_tensor_info *b);

#endif
