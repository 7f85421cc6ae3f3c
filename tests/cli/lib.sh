# lib.sh - sourced by every CLI test: TAP assertions over the real binaries.
# Each check prints "ok N - what" or "not ok N - what" (tests/run.sh counts them).
set -u
BIN=${BIN:?BIN must point at the built tools}
TESTDATA=${TESTDATA:?}
PATH="$BIN:$PATH"
# The same tools linked with the test variant of the library (test hooks
# BITNET_TEST_PERTURB / BITNET_TEST_FAIL on); the shipped ones ignore them.
TEST_BIN=${TEST_BIN:-$(dirname "$BIN")/test-bin}
export BITNET_CACHE_DIR_TEST=1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export XDG_CACHE_HOME="$T/cache"
_n=0

ok() { _n=$((_n + 1)); echo "ok $_n - $*"; }
notok() { _n=$((_n + 1)); echo "not ok $_n - $*"; }

# run CMD...: runs it, keeping status in $rc, stdout in $T/out, stderr in $T/err.
# Under the sanitizer build, LeakSanitizer's own tracer now and then dies
# with SIGSEGV while it stops the OpenCL driver's threads ("LeakSanitizer has
# encountered a fatal error", no leak report): that run is made again, up to
# three times (a loaded 2-core machine once saw it twice in a row, on
# bitnet-bench --calibrate --device opencl).
run() {
    "$@" >"$T/out" 2>"$T/err"; rc=$?
    _again=0
    while [ "$rc" -ne 0 ] && [ "$_again" -lt 3 ] && grep -q 'LeakSanitizer has encountered a fatal error' "$T/err" &&
        ! grep -q 'ERROR: LeakSanitizer: detected memory leaks' "$T/err"; do
        _again=$((_again + 1))
        echo "# LeakSanitizer's tracer failed (not a leak report): running again ($_again): $*"
        "$@" >"$T/out" 2>"$T/err"; rc=$?
    done
}

# expect_rc N what CMD... : the command must exit with status N.
expect_rc() {
    want=$1; what=$2; shift 2
    run "$@"
    if [ "$rc" -eq "$want" ]; then ok "$what"; else
        notok "$what (exit $rc, wanted $want)"; sed 's/^/#   /' "$T/err" | head -5; fi
}
# expect_err PATTERN what: the last run's stderr matches the grep pattern.
expect_err() {
    if grep -q -e "$1" "$T/err"; then ok "$2"; else
        notok "$2 (stderr lacks '$1')"; sed 's/^/#   /' "$T/err" | head -5; fi
}
expect_out() {
    if grep -q -e "$1" "$T/out"; then ok "$2"; else
        notok "$2 (stdout lacks '$1')"; sed 's/^/#   /' "$T/out" | head -5; fi
}
# check what CMD...: passes when the command succeeds (for plain assertions).
check() { what=$1; shift; if "$@"; then ok "$what"; else notok "$what"; fi; }

# ---- .npy files written and read in shell (test_op.sh, test_linalg.sh) ----
# mknpy FILE DESCR SHAPE WORD... : a .npy v1 file; each WORD is the hex of one
# element as written in big-endian order (f32 1.0 = 3f800000, f16 1.0 = 3c00).
mknpy() {
    f=$1; descr=$2; shape=$3; shift 3
    h="{'descr': '$descr', 'fortran_order': False, 'shape': $shape, }"
    len=${#h}
    pad=$(( (64 - (10 + len + 1) % 64) % 64 ))
    hl=$((len + pad + 1))
    {
        printf '\223NUMPY\001\000'
        printf "\\$(printf %o $((hl % 256)))\\$(printf %o $((hl / 256)))"
        printf '%s' "$h"
        printf "%${pad}s\n" ""
        for w in "$@"; do
            i=${#w}
            while [ "$i" -gt 0 ]; do
                byte=$(printf '%s' "$w" | cut -c$((i - 1))-$i)
                printf "\\$(printf %o "0x$byte")"
                i=$((i - 2))
            done
        done
    } >"$f"
}

# npyvals FILE [TYPE]: the elements of a .npy file, one per line (od TYPE, default f4).
npyvals() {
    hl=$(od -A n -t u1 -j 8 -N 2 "$1" | awk '{print $1 + 256 * $2}')
    od -A n -v -t "${2:-f4}" -j $((10 + hl)) "$1" | tr -s ' \t' '\n\n' | grep -v '^$'
}

# near FILE "V1 V2 ..." [TOL]: every element within TOL (relative, default 1e-6) of the list.
near() {
    npyvals "$1" >"$T/vals" || return 1
    printf '%s\n' $2 >"$T/want"
    [ "$(wc -l <"$T/vals")" -eq "$(wc -l <"$T/want")" ] || { echo "# got $(tr '\n' ' ' <"$T/vals")"; return 1; }
    paste "$T/vals" "$T/want" | awk -v tol="${3:-1e-6}" '
        function isnan(s) { return s ~ /nan/ }
        { if (isnan($1) || isnan($2)) { if (!(isnan($1) && isnan($2))) bad = 1; next }
          if ($1 ~ /inf/ || $2 ~ /inf/) { if ($1 != $2) bad = 1; next }
          d = $1 - $2; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; if (m < 1) m = 1
          if (d > tol * m) bad = 1 }
        END { exit bad }' || { echo "# got $(tr '\n' ' ' <"$T/vals") want $2"; return 1; }
}
# exact FILE "V1 V2 ..." [TYPE]: elements printed by od equal the list.
exact() {
    got=$(npyvals "$1" "${3:-f4}" | tr '\n' ' ')
    [ "$got" = "$2 " ] || { echo "# got '$got' want '$2 '"; return 1; }
}
