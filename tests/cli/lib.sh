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
run() { "$@" >"$T/out" 2>"$T/err"; rc=$?; }

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
