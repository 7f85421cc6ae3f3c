/*
 * testhooks.c - the planted faults that tests use to prove failures are
 * caught (see backend.h).  Compiled twice: into the shipped libbitnet.a
 * without BITNET_TEST_HOOKS, where both hooks are always 0 and no variable
 * of the environment can make a shipped program misbehave; and into the test
 * variant libbitnet-test.a with -DBITNET_TEST_HOOKS, where
 * BITNET_TEST_PERTURB=op[,op...] and BITNET_TEST_FAIL=step[,step...] switch
 * them on (man/bitnet.7, "Test hooks").
 */
#include "backend.h"

#ifdef BITNET_TEST_HOOKS
#include <stdlib.h>
#include <string.h>

/* 1 when the comma-separated list in $var holds word. */
static int env_list_has(const char *var, const char *word)
{
    const char *v = getenv(var);
    if (!v || !*v || !word) return 0;
    size_t n = strlen(word);
    for (const char *p = v; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && memcmp(p, word, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

int bn_test_perturb(const char *op) { return env_list_has("BITNET_TEST_PERTURB", op); }
int bn_test_fail(const char *step) { return env_list_has("BITNET_TEST_FAIL", step); }
#else
int bn_test_perturb(const char *op) { (void)op; return 0; }
int bn_test_fail(const char *step) { (void)step; return 0; }
#endif
