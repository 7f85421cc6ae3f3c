/*
 * ocl_impl.h - the inside of struct bn_ocl, shared by runtime.c (device,
 * queue, launches), program.c (sources, builds, disk cache) and pool.c
 * (buffers).  Family host code uses ocl.h only.
 */
#ifndef BITNET_OCL_IMPL_H
#define BITNET_OCL_IMPL_H

#include "ocl.h"

typedef struct {
    char name[64];
    cl_kernel k;
} bn_ocl_kern;

typedef struct {
    char family[64];
    char *options;
    cl_program prog;
    bn_ocl_kern *kernels;
    size_t nkernels;
} bn_ocl_prog;

typedef struct {
    cl_mem m;
    size_t size;
} bn_ocl_buf;

typedef struct {
    const void *host; /* a kept weight operand: host[0..bytes) lives in m */
    size_t bytes;
    cl_mem m;
} bn_ocl_kept;

typedef struct {
    cl_event ev;
    char op[32];
    int kind;       /* 0 kernel, 1 upload, 2 download */
    uint64_t bytes; /* of a transfer */
} bn_ocl_pending;

typedef struct {
    cl_mem m;       /* CL_MEM_ALLOC_HOST_PTR: page-locked host memory */
    void *ptr;      /* mapped once, for the buffer's life */
    size_t size;
    cl_event busy;  /* the transfer reading or writing it (NULL: free) */
    int held;       /* bn_ocl_read_staged: its data not read out yet */
} bn_ocl_pin;

#define BN_OCL_SLOTS 16

typedef struct {
    cl_mem flag;    /* uints the op's kernel sets on failure (bn_ocl_flag_get) */
    size_t n;
    char what[120]; /* the error it means */
} bn_ocl_check;

struct bn_ocl {
    bn_host host;   /* stats and log of the layer above */
    char op[32];    /* the op whose commands are being enqueued */
    int index;
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;
    int profiling;  /* queue made with CL_QUEUE_PROFILING_ENABLE; kernels then carry events */
    bn_ocl_caps caps;
    bn_ocl_prog *progs;
    size_t nprogs;
    /* pool: buffers handed out (a tsearch tree of bn_ocl_buf nodes by
     * handle), and idle ones kept for reuse, oldest first */
    void *used;
    bn_ocl_buf *idle;
    size_t nidle, capidle;
    size_t idle_bytes;
    bitnet_pool_stats pstats;
    /* launched kernels whose time is not collected yet */
    bn_ocl_pending *pending;
    size_t npending, cappending;
    double last_kernel_ms;
    /* pinned staging memory of host transfers (staging.c) */
    cl_command_queue aux; /* maps the staging buffers without waiting for the ops */
    cl_command_queue upq, downq; /* a pipelined call's uploads and downloads beside the ops (staging.c) */
    int side_failed;             /* the device gave no such queue: the ops' own is used */
    bn_ocl_pin *pins;
    size_t npins, cappins, pinned_bytes;
    struct bn_pool *copy_pool; /* threads of the staging copies (staging.c) */
    int copy_pool_failed;
    /* failure flags of enqueued ops, read at the next wait (operand.c) */
    bn_ocl_check *checks;
    size_t nchecks, capchecks;
    /* the status buffer: BN_OCL_SLOTS slots of slot_bytes, each a sub-buffer
     * handed out as a failure flag, so that one read at a wait brings the
     * flags of every op since the last (operand.c); slot_used: a bit a slot */
    cl_mem status, slot[BN_OCL_SLOTS];
    size_t slot_bytes;
    unsigned slot_used;
    int status_failed; /* could not be made: flags are pooled buffers */
    uint64_t device_peak;
    /* kept weights (keep.c): a tsearch tree of bn_ocl_kept nodes by host address */
    void *kept;
    uint64_t kept_bytes;
};

/* Adds an enqueued command's event to the pending list (timed at the next
 * collect); finishes the queue first when the list is full. */
bitnet_status bn_ocl_pending_push(bn_ocl *o, cl_event ev, const char *op, int kind, uint64_t bytes);
void bn_ocl_programs_free(bn_ocl *o);
void bn_ocl_pool_free(bn_ocl *o);
void bn_ocl_keep_free(bn_ocl *o); /* drops every kept weight */
void bn_ocl_staging_free(bn_ocl *o);
void bn_ocl_checks_free(bn_ocl *o);
/* The kept copy holding host[0..bytes), or NULL. */
cl_mem bn_ocl_kept_find(const bn_ocl *o, const void *host, size_t bytes);
/* Updates the device-memory peak (pool in use + idle + kept). */
void bn_ocl_note_peak(bn_ocl *o);
/* A simulated failure (BITNET_TEST_FAIL) reported like a real one. */
bitnet_status bn_cl_fail_test(cl_int err, const char *call, const char *file, int line);
/* Fills caps for one device. */
void bn_ocl_fill_caps(cl_platform_id p, cl_device_id d, bn_ocl_caps *caps);
/* Every device of every platform, in listing order (opencl:N). */
bitnet_status bn_ocl_list(cl_platform_id **plat, cl_device_id **dev, int *n);

#endif
