/*
 * calibrate.c - auto-dispatch thresholds (measured, stored as JSON in the
 * cache directory) and the roofline measurements for bitnet-bench.
 */
#include "backend_impl.h"
#include "opencl/ocl.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static int thresholds_path(const bitnet_backend *be, char *path, size_t size)
{
    char dir[4096];
    if (!be->device_key[0] || !bitnet_cache_dir(dir, sizeof dir)) return -1;
    int n = snprintf(path, size, "%s/thresholds-%s.json", dir, be->device_key);
    return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

void bn_thresholds_load(bitnet_backend *be)
{
    char path[4200];
    if (thresholds_path(be, path, sizeof path) != 0) return;
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) return;
    json_t *th = json_object_get(root, "thresholds");
    int loaded = 0;
    for (int i = 0; i < BN_N_OPS && json_is_object(th); i++) {
        json_t *v = json_object_get(th, bn_ops[i].name);
        if (json_is_integer(v) && json_integer_value(v) >= 0) {
            be->threshold[i] = (uint64_t)json_integer_value(v);
            loaded++;
        }
    }
    json_decref(root);
    if (loaded) bn_backend_log(be, BITNET_LOG_INFO, "auto: thresholds from %s", path);
}

bitnet_status bitnet_backend_calibrate(bitnet_backend *be, char *report, size_t size)
{
    (void)be;
    if (report && size) report[0] = 0;
    return bn_fail(BITNET_E_UNSUPPORTED, "calibration: not implemented yet");
}
