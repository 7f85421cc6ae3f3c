/*
 * test_fileout.c - bitnet_outfile: a regular target is replaced only at
 * commit (readers of the old file keep it whole until then), abort leaves it
 * byte for byte, the mode is kept, symbolic links are followed, directories
 * and unwritable targets are refused up front, a device and a listening Unix
 * socket are written directly (the bytes arrive whole, the node stays),
 * unlink_pending removes every open temporary, and the temporary names are
 * recognised by bitnet_outfile_is_temp.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "bitnet.h"
#include "testutil.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_fileout.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static int same_text(const char *path, const char *text)
{
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strcmp(buf, text) == 0;
}

static void replace_and_abort(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/a.bnt", dir);
    put(path, "old");
    chmod(path, 0640);
    bitnet_outfile *o;
    assert_int_equal(bitnet_outfile_open(&o, path), BITNET_OK);
    fputs("new contents", bitnet_outfile_stream(o));
    fflush(bitnet_outfile_stream(o));
    assert_true(same_text(path, "old")); /* nothing visible before commit */
    assert_int_equal(tu_temps_in(dir), 1);
    bitnet_outfile_abort(o);
    assert_true(same_text(path, "old"));
    assert_int_equal(tu_temps_in(dir), 0);

    assert_int_equal(bitnet_outfile_open(&o, path), BITNET_OK);
    fputs("new contents", bitnet_outfile_stream(o));
    assert_int_equal(bitnet_outfile_commit(o), BITNET_OK);
    assert_true(same_text(path, "new contents"));
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0640);
    assert_int_equal(tu_temps_in(dir), 0);
    bitnet_outfile_abort(NULL);
}

static void links_followed(void **state)
{
    (void)state;
    char target[128], link[128];
    snprintf(target, sizeof target, "%s/t.bnt", dir);
    snprintf(link, sizeof link, "%s/l.bnt", dir);
    put(target, "old");
    assert_int_equal(symlink("t.bnt", link), 0);
    bitnet_outfile *o;
    assert_int_equal(bitnet_outfile_open(&o, link), BITNET_OK);
    fputs("through the link", bitnet_outfile_stream(o));
    assert_int_equal(bitnet_outfile_commit(o), BITNET_OK);
    struct stat sb;
    assert_int_equal(lstat(link, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    assert_true(same_text(target, "through the link"));
}

static void refused_up_front(void **state)
{
    (void)state;
    bitnet_outfile *o = (bitnet_outfile *)1;
    assert_int_equal(bitnet_outfile_check(dir), BITNET_E_IO);
    assert_non_null(strstr(bitnet_error_detail(), "is a directory"));
    assert_int_equal(bitnet_outfile_open(&o, dir), BITNET_E_IO);
    assert_null(o);
    char missing[128];
    snprintf(missing, sizeof missing, "%s/no/such/dir/x.bnt", dir);
    assert_int_equal(bitnet_outfile_check(missing), BITNET_E_IO);
    assert_int_equal(bitnet_outfile_open(&o, missing), BITNET_E_IO);
    assert_int_equal(bitnet_outfile_check(""), BITNET_E_INVALID);
    char fresh[128];
    snprintf(fresh, sizeof fresh, "%s/fresh.bnt", dir);
    assert_int_equal(bitnet_outfile_check(fresh), BITNET_OK);
    assert_int_equal(access(fresh, F_OK), -1); /* check creates nothing */
}

/* Device nodes of our own when we may make them (as root), so that a broken
 * implementation could not replace the machine's; the real ones otherwise
 * (a non-root rename into /dev fails). */
static void device_written_directly(void **state)
{
    (void)state;
    char null_path[128], full_path[128];
    snprintf(null_path, sizeof null_path, "%s/null", dir);
    snprintf(full_path, sizeof full_path, "%s/full", dir);
    if (mknod(null_path, S_IFCHR | 0666, makedev(1, 3)) != 0 || mknod(full_path, S_IFCHR | 0666, makedev(1, 7)) != 0) {
        if (geteuid() == 0) skip();
        snprintf(null_path, sizeof null_path, "/dev/null");
        snprintf(full_path, sizeof full_path, "/dev/full");
    }
    bitnet_outfile *o;
    assert_int_equal(bitnet_outfile_open(&o, null_path), BITNET_OK);
    fputs("nothing", bitnet_outfile_stream(o));
    assert_int_equal(bitnet_outfile_commit(o), BITNET_OK);
    struct stat sb;
    assert_int_equal(stat(null_path, &sb), 0);
    assert_true(S_ISCHR(sb.st_mode));
    assert_int_equal(bitnet_outfile_open(&o, full_path), BITNET_OK);
    for (int i = 0; i < 10000; i++) fputs("more than a buffer ", bitnet_outfile_stream(o));
    assert_int_equal(bitnet_outfile_commit(o), BITNET_E_IO);
    assert_int_equal(stat(full_path, &sb), 0);
    assert_true(S_ISCHR(sb.st_mode));
    assert_int_equal(tu_temps_in(dir), 0);
}

/* The far end of a Unix socket: accepts one connection, reads it to EOF.
 * Bounded in time: an implementation that never connects fails the test
 * instead of hanging it. */
typedef struct {
    int listener;
    unsigned char *got;
    size_t cap, n;
    int ok;
} sock_reader;

static void *read_socket(void *arg)
{
    sock_reader *r = arg;
    struct pollfd p = {.fd = r->listener, .events = POLLIN};
    if (poll(&p, 1, 20000) != 1) return NULL;
    int fd = accept(r->listener, NULL, NULL);
    if (fd < 0) return NULL;
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (;;) {
        ssize_t k = read(fd, r->got + r->n, r->cap - r->n);
        if (k <= 0) {
            r->ok = k == 0;
            break;
        }
        r->n += (size_t)k;
        if (r->n == r->cap) { /* more than was written: keep reading to EOF, then fail */
            unsigned char spare[256];
            r->ok = read(fd, spare, sizeof spare) == 0;
            r->n += !r->ok;
            break;
        }
    }
    close(fd);
    return NULL;
}

static void socket_written_directly(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/sock", dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(path) < sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(l >= 0);
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(l, 1), 0);

    /* more than the socket's buffers hold: the writer must wait for the reader */
    enum { N = 1 << 20 };
    unsigned char *want = malloc(N);
    sock_reader r = {.listener = l, .got = malloc(N + 1), .cap = N + 1};
    assert_non_null(want);
    assert_non_null(r.got);
    for (size_t i = 0; i < N; i++) want[i] = (unsigned char)(i * 2654435761u >> 13);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, read_socket, &r), 0);

    bitnet_outfile *o;
    assert_int_equal(bitnet_outfile_check(path), BITNET_OK);
    assert_int_equal(bitnet_outfile_open(&o, path), BITNET_OK);
    assert_int_equal(tu_temps_in(dir), 0); /* no temporary next to a socket */
    assert_int_equal(fwrite(want, 1, N / 2, bitnet_outfile_stream(o)), N / 2);
    for (size_t i = N / 2; i < N; i++) fputc(want[i], bitnet_outfile_stream(o));
    assert_int_equal(bitnet_outfile_commit(o), BITNET_OK);
    assert_int_equal(pthread_join(th, NULL), 0);
    close(l);

    assert_true(r.ok);
    assert_int_equal(r.n, N);
    assert_memory_equal(r.got, want, N);
    struct stat sb;
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISSOCK(sb.st_mode));
    assert_int_equal(tu_temps_in(dir), 0);
    free(want);
    free(r.got);
}

static void pending_unlinked(void **state)
{
    (void)state;
    char p1[128], p2[128];
    snprintf(p1, sizeof p1, "%s/p1", dir);
    snprintf(p2, sizeof p2, "%s/p2", dir);
    bitnet_outfile *a, *b;
    assert_int_equal(bitnet_outfile_open(&a, p1), BITNET_OK);
    assert_int_equal(bitnet_outfile_open(&b, p2), BITNET_OK);
    assert_int_equal(tu_temps_in(dir), 2);
    bitnet_outfile_unlink_pending(); /* what a signal handler calls */
    assert_int_equal(tu_temps_in(dir), 0);
    bitnet_outfile_abort(a);
    bitnet_outfile_abort(b);
    assert_int_equal(access(p1, F_OK), -1);
}

static void temp_names(void **state)
{
    (void)state;
    assert_true(bitnet_outfile_is_temp(".m.bnt.bnpart.a1B2c3"));
    assert_true(bitnet_outfile_is_temp("/x/y/.m.bnpart.zzzzzz"));
    assert_false(bitnet_outfile_is_temp("m.bnt.bnpart.a1B2c3")); /* not a dot file */
    assert_false(bitnet_outfile_is_temp(".m.bnt"));
    assert_false(bitnet_outfile_is_temp(".bnpart/m.bnt"));
    assert_false(bitnet_outfile_is_temp(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(replace_and_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(links_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(refused_up_front, setup, teardown),
        cmocka_unit_test_setup_teardown(device_written_directly, setup, teardown),
        cmocka_unit_test_setup_teardown(socket_written_directly, setup, teardown),
        cmocka_unit_test_setup_teardown(pending_unlinked, setup, teardown),
        cmocka_unit_test(temp_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
