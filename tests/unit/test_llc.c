/* test_llc.c - bitnet-bench's reading of the host's last-level cache from
 * sysfs (tools/bitnet-bench/llc.c, built into this test), on trees made here:
 * instances shared by several CPUs counted once, separate instances added,
 * the highest level winning wherever it appears, instruction caches and
 * malformed or missing entries skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../tools/bitnet-bench/llc.c"

#define KIB (1ull << 10)
#define MIB (1ull << 20)

static char root[256];

static void put(const char *dir, const char *name, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* cpuC/cache/indexI with these files (NULL: absent). */
static void cache(int cpu, int index, const char *level, const char *type, const char *size, const char *shared)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/cpu%d", root, cpu);
    mkdir(dir, 0700);
    snprintf(dir, sizeof dir, "%s/cpu%d/cache", root, cpu);
    mkdir(dir, 0700);
    snprintf(dir, sizeof dir, "%s/cpu%d/cache/index%d", root, cpu, index);
    assert_int_equal(mkdir(dir, 0700), 0);
    if (level) put(dir, "level", level);
    if (type) put(dir, "type", type);
    if (size) put(dir, "size", size);
    if (shared) put(dir, "shared_cpu_list", shared);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "%s/bn-llc-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

/* Two CPUs with private L1/L2 and one shared L3: the L3 once. */
static void test_shared_once(void **state)
{
    (void)state;
    for (int c = 0; c < 2; c++) {
        cache(c, 0, "1\n", "Data\n", "48K\n", c ? "1\n" : "0\n");
        cache(c, 1, "1\n", "Instruction\n", "32K\n", c ? "1\n" : "0\n");
        cache(c, 2, "2\n", "Unified\n", "2048K\n", c ? "1\n" : "0\n");
        cache(c, 3, "3\n", "Unified\n", "307200K\n", "0-1\n");
    }
    assert_int_equal(bench_host_llc(root), 300 * MIB);
}

/* Four CPUs in two L3 instances (as two CCXs): both added. */
static void test_instances_added(void **state)
{
    (void)state;
    for (int c = 0; c < 4; c++) {
        cache(c, 0, "1", "Data", "32K", "x");
        cache(c, 3, "3", "Unified", "32768K", c < 2 ? "0-1" : "2-3");
    }
    assert_int_equal(bench_host_llc(root), 64 * MIB);
}

/* A level-4 cache seen only on a later CPU replaces the level 3 counted
 * before it; an instruction cache of a higher level is not the LLC; entries
 * that cannot be read or parsed are skipped; directories that are not
 * cpuN or indexN are not walked. */
static void test_highest_level_and_junk(void **state)
{
    (void)state;
    char dir[1024];
    cache(0, 0, "3", "Unified", "16M", "0");
    cache(0, 1, "5", "Instruction", "1G", "0");  /* instruction: not counted */
    cache(0, 2, "4", "Unified", "12x", "0");     /* malformed size */
    cache(0, 4, "4", "Unified", NULL, "0");      /* no size */
    cache(1, 0, "3", "Unified", "16M", "1");
    cache(1, 1, "4", "Unified", "128M", "0-1");
    cache(2, 0, "4", NULL, "128M", "0-1");       /* no type file: counted, same instance */
    cache(2, 1, "4", "Unified", "1G", NULL);     /* no shared_cpu_list */
    snprintf(dir, sizeof dir, "%s/cpufreq", root);
    mkdir(dir, 0700);
    snprintf(dir, sizeof dir, "%s/cpu1/cache/indexes", root);
    mkdir(dir, 0700);
    put(dir, "level", "9");
    put(dir, "size", "1G");
    put(dir, "shared_cpu_list", "0");
    assert_int_equal(bench_host_llc(root), 128 * MIB);
}

/* Sizes in every unit, and those that would overflow. */
static void test_sizes(void **state)
{
    (void)state;
    assert_int_equal(parse_size("1024"), 1024);
    assert_int_equal(parse_size("32K"), 32 * KIB);
    assert_int_equal(parse_size("300M"), 300 * MIB);
    assert_int_equal(parse_size("2G"), 2048 * MIB);
    assert_int_equal(parse_size(""), 0);
    assert_int_equal(parse_size("K"), 0);
    assert_int_equal(parse_size("12KB"), 0);
    assert_int_equal(parse_size("-5K"), 0);
    assert_int_equal(parse_size("-5"), 0);
    assert_int_equal(parse_size(" 5"), 0);
    assert_int_equal(parse_size("18446744073709551615"), UINT64_MAX);
    assert_int_equal(parse_size("18446744073709551615K"), 0);
    assert_int_equal(parse_size("99999999999999999999"), 0);
}

/* No tree, or one without caches: 0 (the tool then assumes 64 MiB). */
static void test_nothing(void **state)
{
    (void)state;
    char dir[1024];
    assert_int_equal(bench_host_llc("/nonexistent/bn-llc"), 0);
    snprintf(dir, sizeof dir, "%s/cpu0", root);
    mkdir(dir, 0700);
    assert_int_equal(bench_host_llc(root), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shared_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_instances_added, setup, teardown),
        cmocka_unit_test_setup_teardown(test_highest_level_and_junk, setup, teardown),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test_setup_teardown(test_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
