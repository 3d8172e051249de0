#!/usr/bin/env bash
# GPU check of the inspect stage's full check: the CUDA evaluator (gpu-kernels/cuda/inspect_eval.cuh)
# run on a real GPU must give every candidate's match flag and every frame's verdict that the Rust
# evaluator gives, on the ET Open 2019 rules (headers opened) over the tcpdump captures; also
# prints the batch's time.
#
#   tools/gpu-probes/inspect-gpu-check.sh inputs DIR   # here (needs the corpus): writes DIR/*.bin
#   tools/gpu-probes/inspect-gpu-check.sh gpu DIR OUT  # on the GPU machine (nvcc): builds, compares
set -euo pipefail
self=$(realpath "$0")
root=$(cd "$(dirname "$self")/../.." && pwd)
cd "$root"
case "${1:-}" in
  inputs)
    PW_INSP_GPU_DIR="$(realpath -m "$2")" cargo test -p pktwarp-inspect --test eval_cuda_host -- --ignored write_gpu_inputs --nocapture
    ;;
  gpu)
    nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
    mkdir -p "$3"
    "$nvcc" -O3 -std=c++17 -arch=sm_90 -Igpu-kernels/cuda -Xptxas -v -o "$3/inspect_gpu_check" tools/gpu-probes/inspect_gpu_check.cu
    "$3/inspect_gpu_check" "$2"
    ;;
  *)
    sed -n '2,8p' "$self"
    exit 2
    ;;
esac
