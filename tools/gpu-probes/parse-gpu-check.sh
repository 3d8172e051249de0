#!/usr/bin/env bash
# GPU check of the parse stage: the CUDA parser (gpu-kernels/cuda/parse.cuh) run on a real GPU
# must produce the Rust parser's metadata byte for byte on the corpus, its truncations and
# mutations; also prints pw_parse throughput on device-resident frames (a 1024-frame IMIX-like
# mix, replicated to 8.4M frames).
#
#   tools/gpu-probes/parse-gpu-check.sh inputs DIR   # here: writes DIR/{frames,mix,expected}.bin
#   tools/gpu-probes/parse-gpu-check.sh gpu DIR OUT  # on the GPU machine (nvcc): OUT/gpu_metas.bin
#   tools/gpu-probes/parse-gpu-check.sh compare DIR  # here, with gpu_metas.bin copied into DIR
set -euo pipefail
self=$(realpath "$0")
root=$(cd "$(dirname "$self")/../.." && pwd)
cd "$root"
# The stage headers moved from gpu-kernels/ to gpu-kernels/cuda/; take whichever this tree has.
KDIR=gpu-kernels/cuda
[ -d "$KDIR" ] || KDIR=gpu-kernels
case "${1:-}" in
  inputs)
    PW_GPU_CHECK_DIR="$(realpath -m "$2")" cargo test -p pipeline --test parse_gpu_check -- --ignored write_inputs --nocapture
    ;;
  gpu)
    nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
    "$nvcc" -O3 -arch=sm_90 -I"$KDIR" -Xptxas -v -o "$3/parse_gpu_check" tools/gpu-probes/parse_gpu_check.cu
    "$3/parse_gpu_check" "$2" "$3"
    ;;
  compare)
    PW_GPU_CHECK_DIR="$(realpath -m "$2")" cargo test -p pipeline --test parse_gpu_check -- --ignored compare --nocapture
    ;;
  *)
    sed -n '2,9p' "$self"
    exit 2
    ;;
esac
