#!/usr/bin/env bash
# GPU check of the parse stage: the CUDA parser (gpu-kernels/parse.cuh) run on a real GPU must
# produce the Rust parser's metadata byte for byte on the corpus, its truncations and mutations;
# also prints pw_parse throughput on device-resident frames (a 1024-frame IMIX-like mix,
# replicated to 8.4M frames).
#
#   scripts/parse-gpu-check.sh inputs DIR    # here: writes DIR/{frames,mix,expected}.bin
#   scripts/parse-gpu-check.sh gpu DIR OUT   # on the GPU machine (nvcc): writes OUT/gpu_metas.bin
#   scripts/parse-gpu-check.sh compare DIR   # here, with gpu_metas.bin copied into DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
case "${1:-}" in
  inputs)
    PW_GPU_CHECK_DIR="$(realpath -m "$2")" cargo test -p pipeline --test parse_gpu_check -- --ignored write_inputs --nocapture
    ;;
  gpu)
    nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
    "$nvcc" -O3 -arch=sm_90 -Igpu-kernels -Xptxas -v -o "$3/parse_gpu_check" scripts/parse-gpu-check/parse_gpu_check.cu
    "$3/parse_gpu_check" "$2" "$3"
    ;;
  compare)
    PW_GPU_CHECK_DIR="$(realpath -m "$2")" cargo test -p pipeline --test parse_gpu_check -- --ignored compare --nocapture
    ;;
  *)
    sed -n '2,12p' "$0"
    exit 2
    ;;
esac
