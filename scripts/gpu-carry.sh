#!/usr/bin/env bash
# Builds what a GPU-machine run needs, from one commit, into .carry/ (ignored by git): the
# release pktwarp and syn-guard binaries (the built-in kernel compiled in by the pinned nvcc),
# the GPU test binaries (debug build is enough: the kernels they run are the same), all
# stripped, the probes the suite runs (.carry/probes, pinned nvcc), and the small inputs
# (pcaps, ClassBench 10K sets and traces). The GPU machine has no Rust toolchain: it runs these
# (scripts/gpu-run.sh, gpu-composed-check.sh, gpu-restart-check.sh, gpu-daemon-bench.sh).
# Usage (repository root): scripts/gpu-carry.sh [COMMIT] (default HEAD); builds in a git
# worktree so edits in the working tree do not leak into the binaries.
set -eu
COMMIT=${1:-HEAD}
ROOT=$(pwd)
WT=${WT:-/tmp/pktwarp-carry-wt}
# Its own target dir: a shared one would hand the main checkout this build's build-script
# output (the embedded kernel and cuda/ paths of the worktree).
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/carry}
rev=$(git rev-parse --short "$COMMIT")
git worktree remove --force "$WT" 2>/dev/null || true
git worktree add --detach "$WT" "$COMMIT" >/dev/null
trap 'git -C "$ROOT" worktree remove --force "$WT" 2>/dev/null || true' EXIT
cd "$WT"
cargo build --release -p pktwarp -p pktwarp-apps --bins
# name<TAB>path of each carried GPU test binary.
tests=$(cargo test --no-run -p pipeline --test gpu_stage_params --test gpu_held_slots --test gpu_device_ring_laps --test gpu_teardown --test gpu_direct_ingest --test gpu_by_reference --test gpu_conntrack --test gpu_rate_limit --test gpu_flow_stats --test gpu_inspect --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"].startswith("gpu_"):
        print(m["target"]["name"] + "\t" + m["executable"])')
mkdir -p "$ROOT/.carry/tests" "$ROOT/.carry/data"
for b in pktwarp syn-guard; do
  objcopy --strip-debug "$CARGO_TARGET_DIR/release/$b" "$ROOT/.carry/$b"
done
printf '%s\n' "$tests" | while IFS=$'\t' read -r name path; do
  objcopy --strip-debug "$path" "$ROOT/.carry/tests/$name"
done
# Probes the suite runs (tools/gpu-probes), built here with the pinned nvcc (CUDA 13.0, the
# runtime linked in statically): the GPU machine needs only the driver. flow_table_bench: the
# flow table's lookups, updates and inserts per second with 10 M flows resident.
NVCC=${PKTWARP_NVCC:-}
if [ -z "$NVCC" ] && [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then NVCC=$CUDA_HOME/bin/nvcc; fi
if [ -z "$NVCC" ]; then
  d=$(python3 -c 'import nvidia;print(nvidia.__path__[0])' 2>/dev/null || true)
  [ -n "$d" ] && [ -x "$d/cu13/bin/nvcc" ] && NVCC=$d/cu13/bin/nvcc
fi
[ -n "$NVCC" ] && [ -x "$NVCC" ] || { echo "gpu-carry: no nvcc (scripts/install-deps.sh, or set PKTWARP_NVCC)" >&2; exit 1; }
mkdir -p "$ROOT/.carry/probes"
nvdir=$(dirname "$NVCC")/..
for p in flow_table_bench; do
  "$NVCC" -O3 -std=c++17 -arch=sm_90 -Igpu-kernels/cuda -L"$nvdir/lib" -L"$nvdir/lib64" \
    -o "$ROOT/.carry/probes/$p" "tools/gpu-probes/$p.cu"
done
# nfdump's collector and reader with their libraries, for scripts/gpu-ipfix-check.sh (the GPU
# machine has no nfdump and no apt).
if [ ! -x "$ROOT/.carry/nfdump/bin/nfcapd" ]; then
  scripts/nfdump-bundle.sh "$ROOT/.carry/nfdump"
fi
echo "$rev" >"$ROOT/.carry/COMMIT"
DATA=${PKTWARP_DATA:-$ROOT/../shared/data}
if [ ! -d "$ROOT/.carry/data/classbench" ]; then
  mkdir -p "$ROOT/.carry/data/classbench"
  cp -r "$DATA/pcaps" "$ROOT/.carry/data/"
  for s in acl1 fw1 ipc1; do
    cp "$DATA/classbench/${s}_10K" "$ROOT/.carry/data/classbench/"
    # The scripts name the gzipped trace (the data folder may hold either).
    if [ -f "$DATA/classbench/${s}_10K_trace.gz" ]; then
      cp "$DATA/classbench/${s}_10K_trace.gz" "$ROOT/.carry/data/classbench/"
    else
      gzip -c "$DATA/classbench/${s}_10K_trace" >"$ROOT/.carry/data/classbench/${s}_10K_trace.gz"
    fi
  done
fi
# The ET Open rules for scripts/gpu-inspect-check.sh.
if [ ! -d "$ROOT/.carry/data/ids" ] && [ -d "$DATA/ids" ]; then
  cp -r "$DATA/ids" "$ROOT/.carry/data/"
fi
du -sh "$ROOT/.carry"/* | sed "s|$ROOT/||"
echo "carry built from $rev"
