/*
 * backend_impl.h - the inside of struct bitnet_backend, shared by
 * lib/backend.c (creation, selection, statistics) and lib/calibrate.c
 * (thresholds, roofline).  Nothing else should include it.
 */
#ifndef BITNET_BACKEND_IMPL_H
#define BITNET_BACKEND_IMPL_H

#include "backend.h"
#include "cpu/cpu.h"

#include <pthread.h>

typedef struct bn_ocl bn_ocl;

enum { BN_MODE_CPU, BN_MODE_OPENCL, BN_MODE_AUTO };
enum { BN_FORCE_NONE, BN_FORCE_CPU, BN_FORCE_OPENCL };

/* The ops that dispatch, in table order: name, slot, default auto threshold. */
typedef struct {
    const char *name;
    size_t slot;
    uint64_t default_threshold; /* bytes moved */
} bn_op_desc;
#define BN_N_OPS 18
extern const bn_op_desc bn_ops[BN_N_OPS];
int bn_op_index(size_t slot);                 /* -1 if not a dispatching slot */
int bn_op_index_by_name(const char *name);    /* -1 if unknown */

#define BN_MAX_STATS 64
typedef struct {
    bitnet_op_stats s;
    double host_ms;
} bn_stat_entry;

struct bitnet_backend {
    int mode;
    int ocl_index;          /* opencl:N; -1 = first GPU, else first device */
    bn_cpu *cpu;
    bn_ocl *ocl;            /* NULL until needed under auto */
    int ocl_probed;         /* auto: device looked up, thresholds loaded */
    int ocl_disabled;       /* auto: no device, or a failure made us fall back */
    int warned;             /* the one fallback warning was given */
    int force;              /* BN_FORCE_*: calibration and roofline */
    int profiling;          /* bitnet_backend_set_profiling: applied to the device when it is made */
    uint64_t threshold[BN_N_OPS];
    uint64_t floor;         /* auto: below this no op looks at OpenCL at all */
    char device_key[17];    /* hex hash naming the thresholds file */
    bitnet_log_fn log;
    void *log_user;
    char desc[512];
    pthread_mutex_t op_mu;  /* recursive: one op (or buffer call) at a time */
    pthread_mutex_t mu;     /* statistics */
    uint64_t buf_bytes, buf_peak; /* bytes of live bitnet_buffers, and their peak */
    bn_stat_entry stats[BN_MAX_STATS];
    size_t nstats;
    uint32_t info_logged;   /* bit per op: "runs on the CPU" said once */
};

/* The backend used when be is NULL: the CPU, all cores. */
bitnet_backend *bn_backend_or_default(bitnet_backend *be);
/* auto: looks the OpenCL device up once (no context) and loads its thresholds. */
void bn_backend_auto_probe(bitnet_backend *be);
/* Creates the OpenCL device of be if not done yet (auto: lazily). */
bitnet_status bn_backend_ensure_ocl(bitnet_backend *be);
/* Names the device (device_key) from its name, driver and platform versions. */
void bn_backend_set_device_key(bitnet_backend *be, const char *name, const char *driver, const char *platform);
/* The smallest threshold of any calibrated device or default (no OpenCL
 * call: reads the thresholds files of the cache directory). */
uint64_t bn_thresholds_floor(void);
/* Reads thresholds-<device_key>.json from the cache directory if present. */
void bn_thresholds_load(bitnet_backend *be);

#endif
