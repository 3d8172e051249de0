#!/usr/bin/env bash
# The whole payload inspection (prefilter + candidate rule checks, the loaded ET Open 2019 set)
# on the GPU machine in one call: the CPU engine on 1 core and on all cores (16), Hyperscan
# block mode as the same prefilter on 1 and 16 cores (a scratch per thread), and the GPU
# (tools/gpu-probes/inspect_bench_gpu.cu on the very frames the CPU rows ran), for 64 / 512 /
# 1460-byte payloads; once with the loaded rules, once with the flow-table-only rules added.
# Writes OUT/table.md (the two CPU tables and the GPU rows) and OUT/log.txt.
#
# The GPU machine has no Rust toolchain, no internet and no libhyperscan: the benchmark binary
# is built here with Debian's libhs.a linked in (PKTWARP_HS_STATIC=1; it needs only libc,
# libm, libstdc++ and libgcc_s there) and carried with the corpus it reads (about 25 MB):
#
#   # here, at the repository root (one release build):
#   PKTWARP_HS_STATIC=1 cargo build --release -p pktwarp-inspect --features hyperscan --example inspect-bench
#   mkdir -p .carry/inspect-bench/data/ids .carry/inspect-bench/data/pcaps
#   cp "${CARGO_TARGET_DIR:-target}/release/examples/inspect-bench" .carry/inspect-bench/
#   strip .carry/inspect-bench/inspect-bench
#   cp -r "${PKTWARP_DATA:-../shared/data}/ids/etopen-2019" .carry/inspect-bench/data/ids/
#   cp -r "${PKTWARP_DATA:-../shared/data}/pcaps/INDEX.tsv" "${PKTWARP_DATA:-../shared/data}/pcaps/tcpdump" \
#         .carry/inspect-bench/data/pcaps/
#   ldd .carry/inspect-bench/inspect-bench     # no libhs line
#   # on the GPU machine (device tool: carry [".carry/inspect-bench"], about 4 minutes):
#   scripts/gpu-inspect-bench.sh .carry/inspect-bench "$OUT"
#
# Usage: scripts/gpu-inspect-bench.sh BIN_DIR OUT   (env: NVCC, default /usr/local/cuda/bin/nvcc
#        or the pip one; THREADS, default nproc; SECS per row, default 2; REPS GPU batches, 20;
#        DUMP, the frame dumps' folder, default /tmp/inspect-bench-dump: large, not under OUT)
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,27p' "$0"; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "$1" && pwd)
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
threads=${THREADS:-$(nproc)}
secs=${SECS:-2}
reps=${REPS:-20}
dump=${DUMP:-/tmp/inspect-bench-dump}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ ! -x "$nvcc" ]; then
  pip_nvcc=$(python3 -c 'import nvidia; print(nvidia.__path__[0])' 2>/dev/null)/cu13/bin/nvcc || true
  [ -x "${pip_nvcc:-}" ] && nvcc=$pip_nvcc
fi
[ -x "$bin/inspect-bench" ] || { echo "gpu-inspect-bench: no $bin/inspect-bench (see the header)" >&2; exit 2; }
[ -x "$nvcc" ] || { echo "gpu-inspect-bench: no nvcc (set NVCC)" >&2; exit 2; }
log=$out/log.txt
: >"$log"
{
  echo "# inspect-bench on $(hostname), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/# GPU: /' || true
} | tee -a "$log"
probe=$(mktemp -d)/inspect_bench_gpu
"$nvcc" -O3 -std=c++17 -arch=sm_90 -I"$root/gpu-kernels/cuda" -o "$probe" "$root/tools/gpu-probes/inspect_bench_gpu.cu" 2>&1 | tee -a "$log"
table=$out/table.md
: >"$table"
status=0
for set in loaded flow; do
  flag=()
  [ "$set" = flow ] && flag=(--flow-rules)
  rm -rf "$dump"
  printf '\n## CPU, rule set: %s\n\n' "$set" | tee -a "$table" "$log"
  # The CPU rows (1 and $threads threads, pktwarp and Hyperscan) and the frames for the GPU.
  "$bin/inspect-bench" --rules "$bin/data/ids/etopen-2019" --pcaps "$bin/data/pcaps" \
    --threads "$threads" --secs "$secs" --dump "$dump" "${flag[@]}" 2>&1 | tee -a "$log" |
    grep -E '^(\||rules|[0-9]+ B:)' | awk '/^\| payload/ { print "" } { print }' | tee -a "$table" || status=1
  printf '\n## GPU, rule set: %s\n\n' "$set" | tee -a "$table" "$log"
  echo "| walker | scope | ms a batch | Gbit/s | Mpps |" >>"$table"
  echo "| --- | --- | --- | --- | --- |" >>"$table"
  for size in 64 512 1460; do
    echo "### $size B" >>"$log"
    "$probe" "$dump/$size" "$reps" 2>&1 | tee -a "$log" | sed -n "s/^| /| $size B, /p" >>"$table" || status=1
  done
done
rm -rf "$dump"
echo "gpu-inspect-bench: wrote $table (exit $status)"
exit $status
