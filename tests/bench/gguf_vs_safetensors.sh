#!/bin/sh
# gguf_vs_safetensors.sh - conversion speed of the same 1 GiB of f32 tensors
# from GGUF and from safetensors to .bnt (the GGUF target: >= 80% of the
# safetensors speed).  Generates the inputs (numpy + gguf + safetensors
# Python packages) in a scratch folder, runs each conversion RUNS times
# alternately under /usr/bin/time, prints every run, the medians and, last,
# the row of the README's table (the peak RSS is the largest of the runs).
# usage: sh tests/bench/gguf_vs_safetensors.sh [BUILD_BIN_DIR] [RUNS] [LEVEL]
set -eu
BIN=${1:-build/bin}
RUNS=${2:-5}
LEVEL=${3:-0}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 - "$W" <<'PY'
import sys, numpy as np, gguf
from safetensors.numpy import save_file
w = sys.argv[1]
rng = np.random.default_rng(0)
ts = {"blk.%d.weight" % i: rng.standard_normal((4096, 1024), dtype=np.float32) for i in range(64)}  # 64 x 16 MiB
g = gguf.GGUFWriter(w + "/m.gguf", arch="bench")
for k, v in ts.items():
    g.add_tensor(k, v)
g.write_header_to_file(); g.write_kv_data_to_file(); g.write_tensors_to_file(); g.close()
save_file(ts, w + "/m.safetensors")
PY
ls -l "$W"/m.gguf "$W"/m.safetensors
for i in $(seq "$RUNS"); do
    for f in gguf safetensors; do
        /usr/bin/time -f "%e %M" -o "$W/t" "$BIN/bitnet-convert" --level "$LEVEL" "$W/m.$f" -o "$W/o.bnt" -f
        echo "$f $(cat "$W/t")" | tee -a "$W/all"
    done
done
# med FORMAT COLUMN: the median of COLUMN (2 seconds, 3 max RSS KiB) over FORMAT's runs
med() { grep "^$1 " "$W/all" | awk -v c="$2" '{print $c}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for f in gguf safetensors; do
    echo "$f median $(med "$f" 2) s"
    echo "$f max RSS (median) $(med "$f" 3) KiB"
done
# the README's table row: level, runs, the two medians, their ratio (GGUF
# speed over safetensors speed = safetensors time over GGUF time), peak RSS
g=$(med gguf 2) s=$(med safetensors 2) rss=$(awk '{print $3}' "$W/all" | sort -n | tail -1)
awk -v l="$LEVEL" -v r="$RUNS" -v g="$g" -v s="$s" -v m="$rss" \
    'BEGIN { printf "| %s | %s | %.3g s | %.3g s | %.2f× | %.1f MiB |\n", l, r, g, s, s / g, m / 1024 }'
