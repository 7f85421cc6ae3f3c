/*
 * bitnet-verify - checks files, compares tensors, checks quantized models
 * against the reference quantizers, and runs every op of the library on
 * every device against its scalar reference.  Modes live in tools/bitnet-verify/.
 */
#include "bitnet-verify/verify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char purpose[] =
    "Verifies bitnet files and backends.\n"
    "  bitnet-verify FILE...                  read every byte, check every structure and CRC\n"
    "  bitnet-verify --compare A[:T] B[:T]    compare two tensors or two files tensor by tensor\n"
    "  bitnet-verify --fidelity SRC QUANT     recompute a quantized model with the reference quantizers\n"
    "  bitnet-verify --fidelity --spectrum SRC QUANT   and the singular values of each layer's quantization error\n"
    "  bitnet-verify --backends               run every op on every device against its reference";

int main(int argc, char **argv)
{
    tool_init("bitnet-verify");
    tool_std_args std = tool_std_args_new();
    tool_dev_args dev = tool_dev_args_new();
    struct arg_lit *backends = arg_lit0(NULL, "backends", "run every op on each device against the CPU reference");
    struct arg_str *devices = arg_str0(NULL, "device", "LIST",
                                       "--backends: devices to check, comma-separated (default: cpu and every OpenCL device)");
    struct arg_lit *quick = arg_lit0(NULL, "quick", "--backends: one shape per shape class");
    struct arg_lit *full = arg_lit0(NULL, "full", "--backends: add the large shape class");
    struct arg_str *seed = arg_str0(NULL, "seed", "N", "--backends: seed of the random inputs (default 1)");
    struct arg_lit *json = arg_lit0(NULL, "json", "--backends, --fidelity --spectrum: print the results as JSON");
    struct arg_lit *compare = arg_lit0(NULL, "compare", "compare A[:TENSOR] with B[:TENSOR]");
    struct arg_dbl *nmse = arg_dbl0(NULL, "nmse", "X", "--compare: pass when NMSE <= X");
    struct arg_dbl *max_abs = arg_dbl0(NULL, "max-abs", "X", "--compare: pass when every |a-b| <= X");
    struct arg_lit *exact = arg_lit0(NULL, "exact", "--compare: elements, codes and scales must be equal (default)");
    struct arg_lit *fidelity = arg_lit0(NULL, "fidelity", "check QUANTIZED against SOURCE");
    struct arg_lit *spectrum = arg_lit0(NULL, "spectrum",
                                        "--fidelity: singular values of each weight and of its quantization error, and "
                                        "the error energy a rank-8/32/128 correction removes");
    struct arg_file *files = arg_filen(NULL, NULL, "FILE", 0, 1000, "input files ('-' is standard input)");
    struct arg_end *end = arg_end(20);
    void *table[] = {backends, devices, quick, full, seed, json, compare, nmse, max_abs, exact, fidelity, spectrum, files,
                     dev.threads, dev.stats, std.help, std.version, std.quiet, std.verbose, end};
    int done, rc = tool_parse(argc, argv, table, &std, purpose, &done);
    if (rc || done) goto out;
    rc = EXIT_USAGE;
    int modes = (backends->count > 0) + (compare->count > 0) + (fidelity->count > 0);
    if (modes > 1) {
        msg_err("--backends, --compare and --fidelity are separate modes: give one");
        goto out;
    }
    if (!backends->count && (quick->count || full->count || seed->count || devices->count ||
                             (json->count && !spectrum->count))) {
        msg_err("--device, --quick, --full, --seed and --json belong to --backends (--json also to --spectrum)");
        goto out;
    }
    if (spectrum->count && !fidelity->count) {
        msg_err("--spectrum belongs to --fidelity");
        goto out;
    }
    if (!compare->count && (nmse->count || max_abs->count || exact->count)) {
        msg_err("--nmse, --max-abs and --exact belong to --compare");
        goto out;
    }
    if (backends->count) {
        verify_backends_opts o = {NULL, 1, 1, 0, 0, 0};
        if (files->count) {
            msg_err("--backends takes no files");
            goto out;
        }
        if (quick->count && full->count) {
            msg_err("--quick and --full exclude each other");
            goto out;
        }
        if (seed->count) {
            char *e;
            errno = 0;
            o.seed = strtoull(seed->sval[0], &e, 0);
            if (errno || e == seed->sval[0] || *e || seed->sval[0][0] == '-') {
                msg_err("--seed: '%s' is not a non-negative integer", seed->sval[0]);
                goto out;
            }
        }
        o.devices = devices->count ? devices->sval[0] : NULL;
        o.level = quick->count ? 0 : full->count ? 2 : 1;
        o.json = json->count > 0;
        o.threads = dev.threads->count ? dev.threads->ival[0] : 0;
        o.stats = dev.stats->count > 0;
        if (o.threads < 0) {
            msg_err("--threads must be >= 0 (0 = all cores)");
            goto out;
        }
        rc = verify_backends(&o);
        goto out;
    }
    if (compare->count) {
        verify_bounds b;
        memset(&b, 0, sizeof b);
        if (files->count != 2) {
            msg_err("--compare takes two inputs: A[:TENSOR] B[:TENSOR]");
            goto out;
        }
        if (exact->count && (nmse->count || max_abs->count)) {
            msg_err("--exact excludes --nmse and --max-abs");
            goto out;
        }
        if ((nmse->count && !(nmse->dval[0] >= 0)) || (max_abs->count && !(max_abs->dval[0] >= 0))) {
            msg_err("bounds must be non-negative numbers");
            goto out;
        }
        b.have_nmse = nmse->count > 0;
        b.have_max_abs = max_abs->count > 0;
        b.nmse = b.have_nmse ? nmse->dval[0] : 0;
        b.max_abs = b.have_max_abs ? max_abs->dval[0] : 0;
        b.exact = !b.have_nmse && !b.have_max_abs;
        rc = verify_compare(files->filename[0], files->filename[1], &b);
        goto out;
    }
    if (fidelity->count) {
        if (files->count != 2) {
            msg_err("--fidelity takes two files: SOURCE QUANTIZED");
            goto out;
        }
        rc = verify_fidelity(files->filename[0], files->filename[1], spectrum->count > 0, json->count > 0);
        goto out;
    }
    if (files->count < 1) {
        msg_err("no input: give FILE... ('-' for standard input), or a mode (--help)");
        goto out;
    }
    {
        int nstdin = 0;
        for (int i = 0; i < files->count; i++) nstdin += strcmp(files->filename[i], "-") == 0;
        if (nstdin > 1) {
            msg_err("standard input can be read only once");
            goto out;
        }
    }
    rc = verify_integrity((char **)files->filename, files->count);
out:
    fflush(stdout);
    arg_freetable(table, sizeof table / sizeof table[0]);
    /* no binary output, so no -f; --device is a list here, not one device */
    void *unused[] = {std.force, dev.device};
    arg_freetable(unused, 2);
    return rc;
}
