#!/bin/sh
# stage.sh - copies what a GPU-machine run needs into .device/ (ignored by
# git): the tools, the unit-test programs, the CLI tests and test data.  The
# GPU machine has no compiler packages for our dependencies, so binaries are
# built here and carried (see tests/device/run.sh).
set -eu
BUILD=${1:-build}
[ -d .device ] || { echo "stage.sh: run the device 'prepare' script first (.device/ missing)" >&2; exit 2; }
# CLBlast is not on the GPU machine: carry its run-time package too (env.sh
# unpacks every .deb in .device/debs).
ls .device/debs/libclblast1_*.deb >/dev/null 2>&1 ||
    (mkdir -p .device/debs && cd .device/debs && apt-get download -qq libclblast1 2>&1 |
        grep -v '^W: Download is performed unsandboxed' || true)
rm -rf .device/bin .device/test-bin .device/tests .device/t
mkdir -p .device/bin .device/test-bin .device/tests .device/t
cp "$BUILD"/bin/bitnet-* .device/bin/
cp "$BUILD"/test-bin/bitnet-* .device/test-bin/
cp "$BUILD"/tests/test_* .device/tests/ 2>/dev/null || true
cp -r tests/cli tests/run.sh tests/device .device/t/
cp -r testdata .device/t/testdata
echo "staged: $(du -sh .device | cut -f1) in .device/"
