/*
 * amx.c - finding AMX (INT8 tiles) at run time: CPUID says the CPU has
 * AMX-TILE and AMX-INT8, XCR0 says the OS manages the tile state, and Linux
 * grants this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM), which
 * it must ask for before the first tile instruction.
 */
#include "cpu.h"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BN_ARCH_REQ_XCOMP_PERM 0x1023
#define BN_XFEATURE_XTILEDATA 18

int bn_amx_usable(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0; /* OSXSAVE */
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    if (!(d & (1u << 24)) || !(d & (1u << 25))) return 0; /* AMX-TILE, AMX-INT8 */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & (3u << 17)) != (3u << 17)) return 0; /* XTILECFG, XTILEDATA */
    return syscall(SYS_arch_prctl, BN_ARCH_REQ_XCOMP_PERM, BN_XFEATURE_XTILEDATA) == 0;
}
#else
int bn_amx_usable(void) { return 0; }
#endif
