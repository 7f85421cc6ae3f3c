# test_devices.sh - the device listing and the device flags as the tools
# see them: OpenCL present (PoCL in CI) or hidden from the loader.
. "$(dirname "$0")/lib.sh"

expect_rc 0 "info --devices" bitnet-info --devices
expect_out '^cpu: ' "the CPU is listed"
expect_out 'simd: \(scalar\|avx2\|avx-vnni\|avx512\|avx512-vnni\|amx\)' "its SIMD level is named"
if grep -q 'opencl:0' "$T/out"; then
    expect_out 'compute units' "an OpenCL device shows its compute units"
    expect_out 'max work-group' "and its work-group limit"
else
    expect_out 'no platform' "no OpenCL: said so"
fi
expect_rc 0 "info --devices --json" bitnet-info --devices --json
expect_out '"platforms"' "JSON has the platforms"
expect_out '"simd"' "JSON has the CPU SIMD level"

# the loader finds no driver: still the CPU, and a clear word about OpenCL
expect_rc 0 "info --devices with no OpenCL" env OCL_ICD_VENDORS=/nonexistent-bitnet bitnet-info --devices
expect_out 'opencl: no platform found' "no platform is reported"
expect_out '^cpu: ' "the CPU is still listed"

# BITNET_SIMD caps what the listing reports
expect_rc 0 "info --devices with BITNET_SIMD=scalar" env BITNET_SIMD=scalar bitnet-info --devices
expect_out 'simd: scalar' "the cap shows"

if [ -x "$BIN/bitnet-bench" ]; then
    expect_rc 2 "an unknown --device form is a usage error" bitnet-bench --device gpu
    expect_err 'opencl:N' "the message lists the valid forms"
    expect_rc 4 "--device opencl with no OpenCL is a device error" env OCL_ICD_VENDORS=/nonexistent-bitnet \
        bitnet-bench --device opencl
    expect_err 'no OpenCL platform' "and says why"
fi
