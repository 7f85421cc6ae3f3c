#!/bin/sh
# install-deps.sh - installs the Debian/Ubuntu packages the toolkit needs,
# only those missing (apt-get as root, through sudo otherwise).  Run by
# `make demo` and `make check`; CI and `make torture` run it with --ci (also
# clang and its sanitizer runtime for the fuzzers, valgrind, gnuplot).
set -eu
PKGS="build-essential pkg-config zlib1g-dev libargtable2-dev libjansson-dev libcmocka-dev
libopenblas-dev libclblast-dev ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo mandoc"
[ "${1:-}" = --ci ] && PKGS="$PKGS clang libclang-rt-14-dev gnuplot-nox valgrind"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -n "$missing" ] || [ "${1:-}" = --ci ] || exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps.sh: missing packages:$missing (no apt-get here: install them by hand)" >&2
    exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps.sh: installing:${missing:- (none missing)}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
[ -z "$missing" ] || $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
