/*
 * llc.c - the host's last-level cache, as Linux's sysfs describes it: the
 * data or unified caches of the highest level found under
 * cpuN/cache/indexM, each instance (its shared_cpu_list) counted once and
 * the instances added, since a run's threads may use all of them.  The
 * rotation of input sets and the roofline's size follow it, so that an
 * L3 of hundreds of MiB (a server's, or one of many instances) does not pass
 * for memory bandwidth.
 */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLC_MAX_INSTANCES 1024

typedef struct {
    char cpus[256]; /* shared_cpu_list */
    uint64_t bytes;
} llc_instance;

/* The first line of dir/name into buf, without its newline; 0 on success. */
static int read_line(const char *dir, const char *name, char *buf, size_t n)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) return -1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    const int ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* "32768K", "300M", "1G" or a plain count of bytes; 0 when malformed or too large. */
static uint64_t parse_size(const char *s)
{
    char *end;
    if (*s < '0' || *s > '9') return 0; /* strtoull would take a sign or blanks */
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return 0;
    uint64_t unit = 1;
    if (*end == 'K') unit = 1ull << 10, end++;
    else if (*end == 'M') unit = 1ull << 20, end++;
    else if (*end == 'G') unit = 1ull << 30, end++;
    if (*end != '\0' || v > UINT64_MAX / unit) return 0;
    return (uint64_t)v * unit;
}

/* Whether s is prefix followed by one or more digits (cpu12, index3). */
static int is_numbered(const char *s, const char *prefix)
{
    const size_t n = strlen(prefix);
    if (strncmp(s, prefix, n) != 0 || s[n] == '\0') return 0;
    for (s += n; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

uint64_t bench_host_llc(const char *cpu_root)
{
    llc_instance *inst = calloc(LLC_MAX_INSTANCES, sizeof *inst);
    DIR *cpus = inst ? opendir(cpu_root) : NULL;
    size_t ninst = 0;
    long best = 0;
    if (!cpus) {
        free(inst);
        return 0;
    }
    for (struct dirent *e; (e = readdir(cpus)) != NULL;) {
        char cache[4096];
        if (!is_numbered(e->d_name, "cpu")) continue;
        if ((size_t)snprintf(cache, sizeof cache, "%s/%s/cache", cpu_root, e->d_name) >= sizeof cache) continue;
        DIR *idx = opendir(cache);
        if (!idx) continue;
        for (struct dirent *x; (x = readdir(idx)) != NULL;) {
            char dir[4096], level[32], type[32], size[32];
            llc_instance one;
            if (!is_numbered(x->d_name, "index")) continue;
            if ((size_t)snprintf(dir, sizeof dir, "%s/%s", cache, x->d_name) >= sizeof dir) continue;
            if (read_line(dir, "level", level, sizeof level) || read_line(dir, "size", size, sizeof size) ||
                read_line(dir, "shared_cpu_list", one.cpus, sizeof one.cpus))
                continue;
            if (read_line(dir, "type", type, sizeof type) == 0 && strcmp(type, "Instruction") == 0) continue;
            const long lv = strtol(level, NULL, 10);
            if ((one.bytes = parse_size(size)) == 0 || lv < best) continue;
            if (lv > best) best = lv, ninst = 0; /* a higher level: forget the lower one's instances */
            size_t i = 0;
            while (i < ninst && strcmp(inst[i].cpus, one.cpus) != 0) i++;
            if (i == ninst && ninst < LLC_MAX_INSTANCES) inst[ninst++] = one;
        }
        closedir(idx);
    }
    closedir(cpus);
    uint64_t total = 0;
    for (size_t i = 0; i < ninst; i++) total = inst[i].bytes > UINT64_MAX - total ? UINT64_MAX : total + inst[i].bytes;
    free(inst);
    return total;
}
