/*
 * energy.c - --energy: energy counters read around a configuration's timed
 * calls.  CPU devices read RAPL (the package domains intel-rapl:N under
 * /sys/class/powercap or --rapl-dir, microjoules, wrapping at
 * max_energy_range_uj); OpenCL devices read NVML's total energy of the first
 * NVIDIA GPU (libnvidia-ml.so.1, loaded at run time when present;
 * millijoules).  Idle power is measured once per source before anything
 * runs, so rows give both the total and the part above idle.
 */
#include "bench.h"

#include <dlfcn.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MAX_RAPL 16

typedef int (*nvml_fn0)(void);
typedef int (*nvml_handle_fn)(unsigned, void **);
typedef int (*nvml_energy_fn)(void *, unsigned long long *);

static struct {
    int opened;
    /* RAPL packages */
    char path[MAX_RAPL][512];
    double range_j[MAX_RAPL];
    int nrapl;
    double rapl_idle_w;
    /* NVML */
    void *lib;
    void *gpu;
    nvml_energy_fn energy;
    double nvml_idle_w;
} E = {.rapl_idle_w = NAN, .nvml_idle_w = NAN};

static int read_u64(const char *path, unsigned long long *v)
{
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    int ok = fscanf(f, "%llu", v) == 1;
    fclose(f);
    return !ok;
}

static void rapl_open(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d) return;
    while ((e = readdir(d)) && E.nrapl < MAX_RAPL) {
        /* intel-rapl:N is a package; intel-rapl:N:M its parts (counted in it) */
        unsigned n;
        char tail;
        if (sscanf(e->d_name, "intel-rapl:%u%c", &n, &tail) != 1) continue;
        char *p = E.path[E.nrapl], r[sizeof E.path[0]]; /* the slot is taken only when the domain counts */
        unsigned long long v, range;
        if ((size_t)snprintf(p, sizeof E.path[0], "%s/intel-rapl:%u/energy_uj", dir, n) >= sizeof E.path[0] ||
            (size_t)snprintf(r, sizeof r, "%s/intel-rapl:%u/max_energy_range_uj", dir, n) >= sizeof r)
            continue; /* a path too long to read */
        if (read_u64(p, &v) || read_u64(r, &range) || range == 0) continue; /* absent, not readable, or no range */
        E.range_j[E.nrapl] = (double)range * 1e-6;
        E.nrapl++;
    }
    closedir(d);
}

static void nvml_open(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    nvml_fn0 init = (nvml_fn0)dlsym(lib, "nvmlInit_v2");
    nvml_handle_fn handle = (nvml_handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    nvml_energy_fn energy = (nvml_energy_fn)dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption");
    unsigned long long mj;
    void *gpu = NULL;
    if (!init || !handle || !energy || init() != 0 || handle(0, &gpu) != 0 || energy(gpu, &mj) != 0) {
        dlclose(lib);
        return;
    }
    E.lib = lib, E.gpu = gpu, E.energy = energy;
}

/* Joules so far on a source (monotonic within a run, RAPL wraps undone by
 * the caller); NAN when it has none. */
static double rapl_raw(int i)
{
    unsigned long long v;
    return read_u64(E.path[i], &v) ? NAN : (double)v * 1e-6;
}

static double nvml_joules(void)
{
    unsigned long long mj;
    return E.energy && E.energy(E.gpu, &mj) == 0 ? (double)mj * 1e-3 : NAN;
}

void bench_energy_start(bench_energy *e, const char *device)
{
    memset(e, 0, sizeof *e);
    e->gpu = strncmp(device, "opencl", 6) == 0;
    if (e->gpu) e->j0[0] = nvml_joules();
    else
        for (int i = 0; i < E.nrapl; i++) e->j0[i] = rapl_raw(i);
    /* the clock starts after the reads (and stops before them): a slow read,
     * a FIFO under --rapl-dir, does not stretch the window */
    e->t0 = bench_now_ms();
}

/* Joules since bench_energy_start; NAN when the device has no counter. */
double bench_energy_stop(bench_energy *e, double *seconds, double *idle_w)
{
    *seconds = (bench_now_ms() - e->t0) * 1e-3;
    if (e->gpu) {
        *idle_w = E.nvml_idle_w;
        return E.energy ? nvml_joules() - e->j0[0] : NAN;
    }
    *idle_w = E.rapl_idle_w;
    if (!E.nrapl) return NAN;
    double j = 0;
    for (int i = 0; i < E.nrapl; i++) {
        double d = rapl_raw(i) - e->j0[i];
        if (d < 0) d += E.range_j[i]; /* wrapped once */
        j += d;
    }
    return j;
}

const char *bench_energy_sources(void)
{
    static char s[96];
    snprintf(s, sizeof s, "%s%s%s", E.nrapl ? "RAPL" : "", E.nrapl && E.energy ? ", " : "", E.energy ? "NVML" : "");
    return s;
}

/* Finds the sources (RAPL under rapl_dir) and measures idle power over
 * `idle_s` seconds. */
void bench_energy_open(double idle_s, const char *rapl_dir)
{
    if (E.opened) return;
    E.opened = 1;
    rapl_open(rapl_dir);
    nvml_open();
    if (!E.nrapl && !E.energy) return;
    bench_energy c, g;
    bench_energy_start(&c, "cpu");
    bench_energy_start(&g, "opencl");
    struct timespec ts = {(time_t)idle_s, (long)((idle_s - (double)(time_t)idle_s) * 1e9)};
    nanosleep(&ts, NULL);
    double sec, unused;
    double jc = bench_energy_stop(&c, &sec, &unused);
    if (E.nrapl && sec > 0) E.rapl_idle_w = jc / sec;
    double jg = bench_energy_stop(&g, &sec, &unused);
    if (E.energy && sec > 0) E.nvml_idle_w = jg / sec;
}

void bench_energy_close(void)
{
    if (E.lib) {
        nvml_fn0 shut = (nvml_fn0)dlsym(E.lib, "nvmlShutdown");
        if (shut) shut();
        dlclose(E.lib);
    }
    E.lib = NULL, E.energy = NULL;
}
