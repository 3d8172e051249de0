#!/usr/bin/env bash
# The one GPU-machine run of issue 4: verify (CPU reference vs GPU executor, every frame) on the
# tcpdump corpus, the ClassBench acl1/fw1/ipc1 10K traces with their rule sets and 10 million
# generated frames (malformed ones included), then `pktwarp bench` (stage throughput, end to end,
# latency). Builds nothing: it runs a binary built on the development machine.
#
# Usage (from the repository root): scripts/gpu-run.sh [BIN] [DATA] [OUT]
#   BIN  pktwarp binary        (default .carry/pktwarp)
#   DATA folder with pcaps/ and classbench/ (default .carry/data; ../shared/data works too)
#   OUT  results folder        (default $OUT, else ./gpu-results)
# Each step has its own time limit so one hang cannot eat the whole run; the log records every
# command with its exit code, and the bench table is printed last.
set -u
BIN=${1:-.carry/pktwarp}
DATA=${2:-.carry/data}
RES=${3:-${OUT:-./gpu-results}}
mkdir -p "$RES"
LOG=$RES/gpu-run.log
export RUST_LOG=${RUST_LOG:-info,pipeline::stage::acl=error}
CB=$DATA/classbench
fails=0
step() { # step NAME SECONDS CMD...
  local name=$1 secs=$2; shift 2
  echo "=== $name: $*" | tee -a "$LOG"
  local t0=$(date +%s%N)
  timeout "$secs" "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$LOG"
  [ "$rc" = 0 ] || fails=$((fails + 1))
}
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc)"
  echo "binary: $(sha256sum "$BIN" | cut -c1-16)"
} 2>&1 | tee -a "$LOG"

step verify-tcpdump 60 "$BIN" verify --input "$DATA/pcaps" --mode persistent,launch --placement device,mapped --json "$RES/verify-tcpdump.json"
step verify-acl1 90 "$BIN" verify --trace "$CB/acl1_10K_trace.gz" --rules "$CB/acl1_10K" --mode persistent,launch,graph --placement device,mapped --json "$RES/verify-acl1.json"
step verify-fw1 45 "$BIN" verify --trace "$CB/fw1_10K_trace.gz" --rules "$CB/fw1_10K" --mode persistent --placement device,mapped --queues 3 --ctas 2 --json "$RES/verify-fw1.json"
step verify-ipc1 45 "$BIN" verify --trace "$CB/ipc1_10K_trace.gz" --rules "$CB/ipc1_10K" --mode persistent --placement device,mapped --json "$RES/verify-ipc1.json"
step verify-gen10M 120 "$BIN" verify --gen 10000000 --malformed 0.05 --ipv6 0.2 --rules "$CB/acl1_10K" --mode persistent --placement device --queues 2 --ctas 4 --json "$RES/verify-gen.json"
step bench 220 "$BIN" bench --classbench "$CB" --out "$RES"

echo "=== summary: $fails step(s) failed" | tee -a "$LOG"
grep -h "^verify " "$LOG"
[ -f "$RES/bench.md" ] && cat "$RES/bench.md"
exit $((fails > 0))
