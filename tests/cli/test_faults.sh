#!/bin/sh
# test_faults.sh - the quick fault campaign in `make check`: a spread of N for
# every faulted call along a real conversion, quantization and BitLinear run
# (CPU, OpenCL, auto); `make torture` runs every N (tests/fault/campaign.sh).
exec sh "$(dirname "$0")/../fault/campaign.sh" quick
