/* status.c - status codes, their text, and per-thread detail messages. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const status_text[BITNET_STATUS_COUNT] = {
    [BITNET_OK] = "success",
    [BITNET_END] = "no more tensors",
    [BITNET_E_INVALID] = "invalid argument",
    [BITNET_E_NOMEM] = "out of memory",
    [BITNET_E_IO] = "input/output error",
    [BITNET_E_FORMAT] = "malformed input",
    [BITNET_E_VERSION] = "unsupported format version",
    [BITNET_E_CHECKSUM] = "checksum mismatch",
    [BITNET_E_TRUNCATED] = "input is truncated",
    [BITNET_E_LIMIT] = "input exceeds a hard limit",
    [BITNET_E_OVERFLOW] = "size overflow",
    [BITNET_E_UNSUPPORTED] = "unsupported",
    [BITNET_E_SHAPE] = "shape mismatch",
    [BITNET_E_DTYPE] = "wrong dtype",
    [BITNET_E_NOT_FOUND] = "tensor not found",
    [BITNET_E_NUMERIC] = "non-finite value",
    [BITNET_E_DEVICE] = "device error",
    [BITNET_E_BUILD] = "device program build failed",
    [BITNET_E_DEVICE_MEMORY] = "device out of memory",
    [BITNET_E_NO_DEVICE] = "no such device",
};

const char *bitnet_strerror(bitnet_status st)
{
    if ((unsigned)st >= BITNET_STATUS_COUNT) return "unknown status";
    return status_text[st];
}

const char *bitnet_version(void) { return BITNET_VERSION_STRING; }

#define DETAIL_SIZE 4096
static _Thread_local char detail[DETAIL_SIZE];

const char *bitnet_error_detail(void) { return detail; }
void bitnet_error_clear(void) { detail[0] = 0; }

bitnet_status bn_fail(bitnet_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return st;
}

void bn_detail_prefix(const char *fmt, ...)
{
    char prefix[DETAIL_SIZE], old[DETAIL_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, detail, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof detail - 3) n = sizeof detail - 3;
    memcpy(detail, prefix, n);
    if (old[0]) {
        memcpy(detail + n, ": ", 2);
        n += 2;
        size_t m = strlen(old);
        if (m > sizeof detail - 1 - n) m = sizeof detail - 1 - n;
        memcpy(detail + n, old, m);
        n += m;
    }
    detail[n] = 0;
}

void bn_to_le(void *buf, size_t n, size_t size)
{
    if (bn_host_is_le() || size < 2) return;
    uint8_t *p = buf;
    for (size_t i = 0; i < n; i++, p += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}
