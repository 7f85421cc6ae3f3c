#!/bin/sh
# demo.sh - `make demo`: the toolkit's main job on real trained weights.
#  1. convert a real BitNet b1.58-trained MLP (safetensors) to .bnt, list it,
#     verify it, convert one tensor back to .npy and check it is unchanged;
#  2. quantize it to ternary through share/convert.mk (the Makefile fragment
#     users install), show the per-tensor report, check fidelity;
#  3. run the ternary network as a shell pipeline of bitnet-op and
#     bitnet-matmul (layernorm -> BitLinear + bias -> relu -> ... -> argmax) on
#     four input images, on the CPU and on OpenCL, and show both agree.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
BIN="$top/${BUILD:-build}/bin"
PATH="$BIN:$PATH"
model="$top/testdata/real/hep-bitnet-mnist-b158.safetensors"
inputs="$top/testdata/demo/digits.npy"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
say() { printf '\n== %s\n' "$*"; }

say "1. convert the real model to .bnt, list and verify it"
bitnet-convert "$model" -o "$work/model.bnt"
bitnet-info "$work/model.bnt"
bitnet-verify "$work/model.bnt"
bitnet-convert "$work/model.bnt" -t layers.0.weight -o "$work/w0.npy"
bitnet-convert "$model" -t layers.0.weight -o "$work/w0-direct.npy"
cmp "$work/w0.npy" "$work/w0-direct.npy"
echo "layers.0.weight: .bnt -> .npy is byte-identical to safetensors -> .npy"

say "2. quantize it to ternary with share/convert.mk (make -j2), then check fidelity"
mkdir -p "$work/models"
cp "$model" "$work/models/"
make -s -j2 -f "$top/share/convert.mk" SRC="$work/models" QUANTIZE_FLAGS="-v"
q="$work/models/hep-bitnet-mnist-b158.bnt"
bitnet-info "$q"
bitnet-verify --fidelity "$model" "$q"

say "3. the ternary MLP as a pipeline, on cpu and on opencl"
run_net() { # device -> prints the predicted class of each input
    dev=$1
    x="$inputs"
    for l in 0 2 4 6; do
        act="--act relu"
        [ "$l" = 6 ] && act=""
        bitnet-op layernorm --device "$dev" --weight "$q:layers.$l.norm.weight" --bias "$q:layers.$l.norm.bias" "$x" -o - |
            bitnet-matmul --device "$dev" -w "$q:layers.$l.weight" --bias "$q:layers.$l.bias" $act -x - -o "$work/h$l-$dev.bnt"
        x="$work/h$l-$dev.bnt"
    done
    bitnet-op argmax --device "$dev" --axis -1 "$x" -o "$work/pred-$dev.npy"
    bitnet-convert "$x" --to npy -o "$work/logits-$dev.npy"
}
run_net cpu
if bitnet-info --devices 2>/dev/null | grep -q 'opencl:0'; then
    run_net opencl
    bitnet-verify --compare "$work/logits-cpu.npy" "$work/logits-opencl.npy" --exact
    bitnet-verify --compare "$work/pred-cpu.npy" "$work/pred-opencl.npy" --exact
    echo "cpu and opencl give identical logits and predictions"
else
    echo "no OpenCL device: skipping the OpenCL run"
fi
say "4. the same network end to end with every tensor on the device (bitnet-bench --op mlp)"
devs=cpu
bitnet-info --devices 2>/dev/null | grep -q 'opencl:0' && devs=cpu,opencl
bitnet-bench --op mlp --net "$q" --tokens 1,4 --device "$devs" --min-time 0.2 --format md
printf "predicted classes for stroke drawings of 0, 1, 4, 7 (synthetic inputs, and a network trained\nwith its own BitLinear variant: this shows the pipeline, not the model's accuracy):\n"
od -An -v -td8 -j128 "$work/pred-cpu.npy"
