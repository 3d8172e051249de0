#!/usr/bin/env bash
# A short GPU-machine run: equality smoke after a kernel change (verify on acl1_10K with lookup
# groups, device and mapped rings, persistent and launch; verify on the pcap corpus, the chunked
# path), then the fronthaul tables of `pktwarp bench` (the Rust stage on one host thread vs the
# scalar decoder, then the composed [fronthaul] kernel on device-resident frames). Builds
# nothing: it runs a binary built on the development machine (see scripts/gpu-carry.sh).
#
# Usage (repository root): scripts/gpu-fronthaul-bench.sh [BIN] [DATA] [OUT]
#   BIN  pktwarp binary (default .carry/pktwarp); DATA folder with pcaps/ and
#   classbench/acl1_10K{,_trace[.gz]} (default .carry/data); OUT results (default $OUT, else
#   ./gpu-results). ROUNDS: --fh-rounds (default 5).
set -u
BIN=${1:-.carry/pktwarp}
DATA=${2:-.carry/data}
RES=${3:-${OUT:-./gpu-results}}
ROUNDS=${ROUNDS:-5}
mkdir -p "$RES"
export RUST_LOG=${RUST_LOG:-warn}
trace=$DATA/classbench/acl1_10K_trace
[ -e "$trace" ] || trace=$trace.gz
fails=0
run() { # run NAME SECONDS CMD...
  local name=$1 secs=$2; shift 2
  echo "=== $name: $*" | tee -a "$RES/log.txt"
  timeout "$secs" "$@" > "$RES/$name.txt" 2>&1
  local rc=$?
  tail -4 "$RES/$name.txt" | tee -a "$RES/log.txt"
  echo "=== $name: exit $rc" | tee -a "$RES/log.txt"
  [ "$rc" = 0 ] || fails=$((fails + 1))
}
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "cpus $(nproc); $(uptime)"
} | tee "$RES/log.txt"
run verify-groups-acl1 60 "$BIN" verify --trace "$trace" --rules "$DATA/classbench/acl1_10K" --burst 32 \
  --mode persistent,launch --placement device,mapped --json "$RES/verify-groups-acl1.json"
run verify-pcaps 60 "$BIN" verify --input "$DATA/pcaps" --mode persistent --placement device,mapped \
  --json "$RES/verify-pcaps.json"
run bench-fronthaul 240 "$BIN" bench --skip throughput,e2e,l3fwd,latency --fh-rounds "$ROUNDS" --out "$RES/bench"
echo "load after: $(uptime)" | tee -a "$RES/log.txt"
cat "$RES/bench/bench.md" 2>/dev/null
echo "gpu-fronthaul-bench: $fails step(s) failed" | tee -a "$RES/log.txt"
[ "$fails" = 0 ]
