/*
 * plot.c - --plot FILE.png|FILE.svg: throughput (GB/s) against bytes moved
 * per call, one line per op (and variant) and device, each device's measured
 * roofline as a dashed horizontal line.  gnuplot runs as a separate process
 * on a data file and a script written to a temporary directory; the picture
 * is then moved into place atomically.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int same_series(const bench_row *a, const bench_row *b)
{
    return strcmp(a->op, b->op) == 0 && strcmp(a->variant, b->variant) == 0 && strcmp(a->device, b->device) == 0 &&
           a->tokens == b->tokens;
}

static int plottable(const bench_row *r) { return !r->hidden && !isnan(r->gbs) && r->bytes > 0; }

/* Writes the data (one gnuplot index per series, sorted by size) and the
 * script; returns the number of series. */
static int write_files(FILE *data, FILE *gp, const char *datapath, const char *outpath, int svg,
                       const bench_row *rows, size_t n, const bench_device *devs, size_t ndev)
{
    char *done = calloc(n ? n : 1, 1);
    int series = 0;
    if (!done) return -1;
    if (svg) fprintf(gp, "set terminal svg size 1200,800 dynamic\n");
    else fprintf(gp, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) set terminal pngcairo size 1200,800; "
                     "else set terminal png size 1200,800\n");
    fprintf(gp, "set output '%s'\nset title 'bitnet-bench: throughput against size'\n"
                "set xlabel 'bytes moved per call'\nset ylabel 'GB/s'\nset logscale x 2\nset logscale y 10\nset format x '%%.0s%%cB'\n"
                "set grid\nset key outside right top\nplot ",
            outpath);
    for (size_t i = 0; i < n; i++) {
        if (done[i] || !plottable(&rows[i])) continue;
        /* collect the series, in order of size (insertion into the data file
         * by repeated minimum: series are short) */
        for (;;) {
            size_t best = n;
            for (size_t j = i; j < n; j++)
                if (!done[j] && plottable(&rows[j]) && same_series(&rows[i], &rows[j]) &&
                    (best == n || rows[j].bytes < rows[best].bytes))
                    best = j;
            if (best == n) break;
            done[best] = 1;
            fprintf(data, "%.0f %.6g\n", rows[best].bytes, rows[best].gbs);
        }
        fprintf(data, "\n\n");
        char title[160];
        int len = snprintf(title, sizeof title, "%s%s%s", rows[i].op, *rows[i].variant ? " " : "", rows[i].variant);
        if (rows[i].has_tokens && len > 0 && (size_t)len < sizeof title)
            len += snprintf(title + len, sizeof title - (size_t)len, " %llu tok", (unsigned long long)rows[i].tokens);
        if (len > 0 && (size_t)len < sizeof title) snprintf(title + len, sizeof title - (size_t)len, " (%s)", rows[i].device);
        for (char *p = title; *p; p++)
            if (*p == '\'' || *p == '_') *p = *p == '_' ? ' ' : '"';
        fprintf(gp, "%s'%s' index %d with linespoints title '%s'", series ? ", \\\n     " : "", datapath, series, title);
        series++;
    }
    for (size_t d = 0; d < ndev; d++)
        if (!isnan(devs[d].peak_gbs))
            fprintf(gp, "%s%.6g with lines dashtype 2 linewidth 2 title '%s roofline %.1f GB/s'", series++ ? ", \\\n     " : "",
                    devs[d].peak_gbs, devs[d].spec, devs[d].peak_gbs);
    fprintf(gp, "\n");
    free(done);
    return series;
}

static int copy_out(const char *from, const char *to)
{
    tool_out o;
    char buf[65536];
    size_t got;
    int rc;
    FILE *in = fopen(from, "rb");
    if (!in) {
        msg_err("--plot: gnuplot produced no picture");
        return EXIT_IO;
    }
    if ((rc = tool_out_open(&o, to, 1))) {
        fclose(in);
        return rc;
    }
    while ((got = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, got, o.f) != got) break;
    int bad = ferror(in) || ferror(o.f);
    fclose(in);
    if (bad) {
        msg_err("%s: write failed", to);
        tool_out_abort(&o);
        return EXIT_IO;
    }
    return tool_out_commit(&o);
}

int bench_plot(const char *path, const bench_row *rows, size_t n, const bench_device *devs, size_t ndev)
{
    const char *ext = strrchr(path, '.');
    int svg = ext && strcmp(ext, ".svg") == 0, rc = EXIT_IO, status = 0;
    const char *tmp = getenv("TMPDIR");
    char dir[4096], datap[4200], gpp[4200], outp[4200];
    FILE *data = NULL, *gp = NULL;
    pid_t pid;

    snprintf(dir, sizeof dir, "%s/bitnet-bench-plot.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        msg_err("--plot: cannot create a temporary directory: %s", strerror(errno));
        return EXIT_IO;
    }
    snprintf(datap, sizeof datap, "%s/data.txt", dir);
    snprintf(gpp, sizeof gpp, "%s/plot.gp", dir);
    snprintf(outp, sizeof outp, "%s/plot.%s", dir, svg ? "svg" : "png");
    if (!(data = fopen(datap, "w")) || !(gp = fopen(gpp, "w"))) {
        msg_err("--plot: cannot write in %s: %s", dir, strerror(errno));
        goto out;
    }
    int series = write_files(data, gp, datap, outp, svg, rows, n, devs, ndev);
    int bad = fclose(data) != 0;
    bad |= fclose(gp) != 0;
    data = gp = NULL;
    if (series < 0 || bad) {
        msg_err("--plot: cannot write the gnuplot input");
        goto out;
    }
    if (series == 0) {
        msg_err("--plot: no result has a throughput to plot");
        rc = EXIT_FAIL;
        goto out;
    }
    char *argv[] = {"gnuplot", gpp, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    int err = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err) {
        msg_err("--plot: cannot run gnuplot: %s%s", strerror(err), err == ENOENT ? " (is gnuplot installed?)" : "");
        goto out;
    }
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        msg_err("--plot: gnuplot failed (status %d)", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        goto out;
    }
    rc = copy_out(outp, path);
out:
    if (data) fclose(data);
    if (gp) fclose(gp);
    unlink(datap);
    unlink(gpp);
    unlink(outp);
    rmdir(dir);
    return rc;
}
