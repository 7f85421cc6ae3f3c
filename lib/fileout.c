/*
 * fileout.c - output files that never destroy anything (see bitnet.h,
 * "output files"): the one implementation behind every file the tools write
 * and every file the library writes itself (kernel cache, thresholds).
 *
 * The target is classified once, at open, after following symbolic links:
 *   regular file or absent  -> ".NAME.bnpart.XXXXXX" next to it, renamed over
 *                              it at commit (its mode kept), the directory
 *                              synced after the rename (best effort);
 *   device, FIFO, socket    -> written directly (a socket is connected to);
 *   directory, anything else -> BITNET_E_IO before any work.
 * Temporaries not yet committed are listed in a fixed table of slots that an
 * async-signal-safe function walks to unlink them (a signal handler's job).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define TEMP_MARK ".bnpart."
#define TEMP_RANDOM 6     /* mkstemp's XXXXXX */
#define TEMP_NAME_MAX 200 /* of the target's name kept in the temporary's */
#define LINK_DEPTH 40     /* as the kernel's ELOOP limit */
#define PENDING_SLOTS 64

struct bitnet_outfile {
    FILE *f;
    char *path; /* the target, symbolic links followed */
    char *tmp;  /* NULL when written directly */
    int slot;   /* in pending[], -1 if none */
    int created; /* tmp exists */
    int keep_mode;
    mode_t mode;
};

/* Temporaries of this process not yet renamed or removed. */
static char *volatile pending[PENDING_SLOTS];

static int pending_add(char *tmp)
{
    for (int i = 0; i < PENDING_SLOTS; i++) {
        char *expected = NULL;
        if (__atomic_compare_exchange_n(&pending[i], &expected, tmp, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            return i;
    }
    return -1; /* more than 64 at once: still correct, only not cleaned up by a signal */
}

static void pending_drop(int slot)
{
    if (slot >= 0) __atomic_store_n(&pending[slot], NULL, __ATOMIC_SEQ_CST);
}

void bitnet_outfile_unlink_pending(void)
{
    int saved = errno;
    for (int i = 0; i < PENDING_SLOTS; i++) {
        char *p = __atomic_load_n(&pending[i], __ATOMIC_SEQ_CST);
        if (p) unlink(p);
    }
    errno = saved;
}

int bitnet_outfile_is_temp(const char *path)
{
    if (!path) return 0;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base), m = strlen(TEMP_MARK);
    if (base[0] != '.' || n < 1 + m + TEMP_RANDOM) return 0;
    return memcmp(base + n - TEMP_RANDOM - m, TEMP_MARK, m) == 0;
}

/* path with every symbolic link of its last component followed (malloc'd).
 * A dangling link gives the path it names: the file is created there. */
static bitnet_status follow_links(const char *path, char **out)
{
    char *cur = strdup(path);
    if (!cur) return bn_fail(BITNET_E_NOMEM, "%s: out of memory", path);
    for (int depth = 0;; depth++) {
        struct stat sb;
        if (lstat(cur, &sb) != 0 || !S_ISLNK(sb.st_mode)) break;
        if (depth == LINK_DEPTH) {
            free(cur);
            return bn_fail(BITNET_E_IO, "%s: too many levels of symbolic links", path);
        }
        char link[PATH_MAX];
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0) {
            bitnet_status st = bn_fail(BITNET_E_IO, "%s: cannot read the link: %s", cur, strerror(errno));
            free(cur);
            return st;
        }
        link[n] = 0;
        char *next;
        const char *slash = strrchr(cur, '/');
        if (link[0] == '/' || !slash) {
            next = strdup(link);
        } else { /* relative to the link's directory */
            size_t dirlen = (size_t)(slash - cur) + 1;
            next = malloc(dirlen + (size_t)n + 1);
            if (next) {
                memcpy(next, cur, dirlen);
                memcpy(next + dirlen, link, (size_t)n + 1);
            }
        }
        free(cur);
        if (!next) return bn_fail(BITNET_E_NOMEM, "%s: out of memory", path);
        cur = next;
    }
    *out = cur;
    return BITNET_OK;
}

/* The temporary's template: DIR/.NAME.bnpart.XXXXXX (malloc'd). */
static char *temp_template(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dirlen;
    size_t baselen = strlen(base);
    if (baselen > TEMP_NAME_MAX) baselen = TEMP_NAME_MAX;
    size_t n = dirlen + 1 + baselen + strlen(TEMP_MARK) + TEMP_RANDOM + 1;
    char *t = malloc(n);
    if (!t) return NULL;
    snprintf(t, n, "%.*s.%.*s%sXXXXXX", (int)dirlen, path, (int)baselen, base, TEMP_MARK);
    return t;
}

static int connect_socket(const char *path)
{
    struct sockaddr_un sa;
    if (strlen(path) >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static void outfile_free(bitnet_outfile *o)
{
    free(o->tmp);
    free(o->path);
    free(o);
}

bitnet_status bitnet_outfile_open(bitnet_outfile **out, const char *path)
{
    if (!out) return bn_fail(BITNET_E_INVALID, "bitnet_outfile_open: NULL");
    *out = NULL;
    if (!path || !*path) return bn_fail(BITNET_E_INVALID, "empty output path");
    bitnet_outfile *o = calloc(1, sizeof *o);
    if (!o) return bn_fail(BITNET_E_NOMEM, "%s: out of memory", path);
    o->slot = -1;
    bitnet_status st = follow_links(path, &o->path);
    if (st) {
        free(o);
        return st;
    }
    struct stat sb;
    int fd;
    if (stat(o->path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        if (S_ISDIR(sb.st_mode)) {
            st = bn_fail(BITNET_E_IO, "%s: is a directory", o->path);
            goto fail;
        }
        if (S_ISSOCK(sb.st_mode))
            fd = connect_socket(o->path);
        else if (S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) || S_ISFIFO(sb.st_mode))
            fd = open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        else {
            st = bn_fail(BITNET_E_IO, "%s: not a file, device, FIFO or socket", o->path);
            goto fail;
        }
        if (fd < 0) {
            st = bn_fail(BITNET_E_IO, "%s: cannot open: %s", o->path, strerror(errno));
            goto fail;
        }
    } else {
        o->keep_mode = stat(o->path, &sb) == 0;
        o->mode = sb.st_mode & 07777;
        if (!(o->tmp = temp_template(o->path))) {
            st = bn_fail(BITNET_E_NOMEM, "%s: out of memory", o->path);
            goto fail;
        }
        fd = mkostemp(o->tmp, O_CLOEXEC);
        if (fd < 0) {
            st = bn_fail(BITNET_E_IO, "%s: cannot create a file in its directory: %s", o->path, strerror(errno));
            goto fail;
        }
        o->created = 1;
        o->slot = pending_add(o->tmp);
        mode_t mode = o->mode;
        if (!o->keep_mode) { /* a new file: what open(2) would give */
            mode_t mask = umask(0);
            umask(mask);
            mode = 0666 & ~mask;
        }
        if (fchmod(fd, mode) != 0) { /* mkstemp makes 0600 */
            st = bn_fail(BITNET_E_IO, "%s: cannot set the mode: %s", o->tmp, strerror(errno));
            close(fd);
            goto fail;
        }
    }
    if (!(o->f = fdopen(fd, "wb"))) {
        st = bn_fail(BITNET_E_NOMEM, "%s: out of memory", o->path);
        close(fd);
        goto fail;
    }
    *out = o;
    return BITNET_OK;
fail:
    if (o->created) unlink(o->tmp);
    pending_drop(o->slot);
    outfile_free(o);
    return st;
}

bitnet_status bitnet_outfile_check(const char *path)
{
    if (!path || !*path) return bn_fail(BITNET_E_INVALID, "empty output path");
    char *target;
    bitnet_status st = follow_links(path, &target);
    if (st) return st;
    struct stat sb;
    if (stat(target, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        st = bn_fail(BITNET_E_IO, "%s: is a directory", target);
    } else if (stat(target, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        if (!S_ISSOCK(sb.st_mode) && access(target, W_OK) != 0)
            st = bn_fail(BITNET_E_IO, "%s: cannot write: %s", target, strerror(errno));
    } else { /* regular or new: the temporary goes into its directory */
        const char *slash = strrchr(target, '/');
        char *dir = slash ? strndup(target, slash == target ? 1 : (size_t)(slash - target)) : strdup(".");
        if (!dir) st = bn_fail(BITNET_E_NOMEM, "%s: out of memory", path);
        else if (access(dir, W_OK | X_OK) != 0)
            st = bn_fail(BITNET_E_IO, "%s: cannot create a file in its directory: %s", target, strerror(errno));
        free(dir);
    }
    free(target);
    return st;
}

FILE *bitnet_outfile_stream(const bitnet_outfile *o) { return o ? o->f : NULL; }

/* Syncs the directory holding path (after a rename, for durability). */
static int sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

bitnet_status bitnet_outfile_commit(bitnet_outfile *o)
{
    if (!o) return bn_fail(BITNET_E_INVALID, "bitnet_outfile_commit: NULL");
    bitnet_status st = BITNET_OK;
    int bad = fflush(o->f) != 0 || ferror(o->f);
    int e = errno;
    if (!bad && o->tmp && fsync(fileno(o->f)) != 0) {
        bad = 1;
        e = errno;
    }
    if (fclose(o->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    o->f = NULL;
    if (bad) {
        st = bn_fail(BITNET_E_IO, "%s: write failed: %s", o->path, strerror(e ? e : EIO));
    } else if (o->tmp) {
        if (rename(o->tmp, o->path) != 0) {
            st = bn_fail(BITNET_E_IO, "%s: cannot rename into place: %s", o->path, strerror(errno));
        } else {
            pending_drop(o->slot);
            o->slot = -1;
            free(o->tmp);
            o->tmp = NULL;
            /* Best effort: the new file is whole and in place; a failure
             * here must not turn into an error exit that claims the target
             * was left as it was. */
            (void)sync_dir(o->path);
        }
    }
    if (o->tmp) unlink(o->tmp);
    pending_drop(o->slot);
    outfile_free(o);
    return st;
}

void bitnet_outfile_abort(bitnet_outfile *o)
{
    if (!o) return;
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    pending_drop(o->slot);
    outfile_free(o);
}
