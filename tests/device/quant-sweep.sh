#!/bin/bash
# quant-sweep.sh - OpenCL weight quantization on the GPU machine: kernel time
# of quantize_weights for a 4096x4096 f32 matrix (tensor, row and group:128
# scales) against the copy kernel, for the default settings and a few
# BITNET_QUANT_OPTS combinations (lib/opencl/quantize.c: Q_GWG work-group
# size of the sums, Q_PER_CU work-groups per compute unit for a tensor,
# Q_ITEM_F4 float4 words per work-item of rows and groups, Q_PACK_WG
# work-group size of the packing).  "vs copy" is the kernel time over the
# copy kernel's (which reads and writes the matrix once: the time of two
# reads at copy bandwidth); the target is <= 1.5.  Every run also checks the
# results against the CPU reference (check column; a failure shows "FAIL").
# Runs in well under a minute; needs bitnet-bench on PATH.
# usage: bash tests/device/quant-sweep.sh [SHAPE]   (default 4096x4096)
set -u
shape=${1:-4096x4096}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
combos=(
    ""
    "-DQ_PER_CU=4"
    "-DQ_PER_CU=16"
    "-DQ_GWG=512 -DQ_PER_CU=4"
    "-DQ_GWG=128 -DQ_PER_CU=16"
    "-DQ_ITEM_F4=8"
    "-DQ_ITEM_F4=2 -DQ_PACK_WG=128"
)
bench() { # $1: ops, $2: json output; BITNET_QUANT_OPTS from the environment
    timeout 25 bitnet-bench --device opencl --op "$1" --shape "$shape" --scale tensor,row,group:128 \
        --baseline none --min-time 0.2 --min-reps 20 --warmup 3 --format json -o "$2" 2> "$2.err"
}
# microseconds of (op, variant) in a csv rendering; "-" when missing
us() { awk -F, -v op="$2" -v va="$3" '$1 == op && $2 == va { printf "%.1f", $8 * 1000; f = 1 } END { if (!f) printf "-" }' "$1"; }
chk() { awk -F, '$1 == "quantize_weights" && $20 != "ok" { bad = 1 } END { print bad ? "FAIL" : "ok" }' "$1"; }

# the default selection, exactly as the issue measures it (plus the copy roofline)
unset BITNET_QUANT_OPTS
if ! bench copy,quantize_weights "$tmp/d.json"; then
    echo "bitnet-bench failed:"; cat "$tmp/d.json.err"; exit 1
fi
bitnet-bench --from "$tmp/d.json" --format md
bitnet-bench --from "$tmp/d.json" --format csv > "$tmp/d.csv"
copy=$(us "$tmp/d.csv" copy copy)
echo
printf '%-34s %9s %9s %9s %9s %7s %5s\n' "BITNET_QUANT_OPTS" "tensor us" "row us" "group us" "copy us" "vs copy" "check"
row() { # $1 label, $2 csv
    local t r g
    t=$(us "$2" quantize_weights tensor); r=$(us "$2" quantize_weights row); g=$(us "$2" quantize_weights group:128)
    printf '%-34s %9s %9s %9s %9s %7s %5s\n' "$1" "$t" "$r" "$g" "$copy" \
        "$(awk -v t="$t" -v c="$copy" 'BEGIN { if (t + 0 > 0 && c + 0 > 0) printf "%.2f", t / c; else printf "-" }')" "$(chk "$2")"
}
row "(defaults)" "$tmp/d.csv"
i=0
for opts in "${combos[@]}"; do
    i=$((i + 1))
    [ -n "$opts" ] || continue
    if [ $(( $(date +%s) - start )) -gt 48 ]; then echo "(time budget spent: $opts and later skipped)"; break; fi
    if BITNET_QUANT_OPTS="$opts" bench quantize_weights "$tmp/$i.json"; then
        bitnet-bench --from "$tmp/$i.json" --format csv > "$tmp/$i.csv"
        row "$opts" "$tmp/$i.csv"
    else
        printf '%-34s failed: %s\n' "$opts" "$(tail -1 "$tmp/$i.json.err")"
    fi
done
echo "elapsed $(( $(date +%s) - start )) s"
