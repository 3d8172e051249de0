#!/usr/bin/env bash
# Interleaved `pktwarp bench` comparison of pktwarp binaries on the GPU machine (no-regression
# checks of a change against the binary before it): round 1 runs every binary once, round 2
# again, ..., so slow drifts of the machine hit every binary alike. Each run writes its
# bench.md / bench.json under OUT/NAME-ROUND; at the end every run's table rows are printed one
# after another, binary by binary, for a side-by-side read. Builds nothing.
#
# Usage (repository root):
#   scripts/gpu-bench-ab.sh [-r ROUNDS] [-d DATA] [-o OUT] NAME=BIN [NAME=BIN ...] [-- BENCH_ARGS]
#   ROUNDS  runs per binary (default 1)   DATA  folder with classbench/ (default .carry/data)
#   OUT     results (default $OUT/bench-ab, else ./gpu-bench-ab)
#   BENCH_ARGS  passed to every `bench` (e.g. --skip fronthaul --e2e-seconds 1)
set -u
ROUNDS=1
DATA=.carry/data
RES=${OUT:+$OUT/bench-ab}
RES=${RES:-./gpu-bench-ab}
while getopts "r:d:o:" o; do
  case $o in
    r) ROUNDS=$OPTARG ;;
    d) DATA=$OPTARG ;;
    o) RES=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    *=*) bins+=("$1") ;;
    *) echo "gpu-bench-ab: expected NAME=BIN, got '$1'" >&2; exit 2 ;;
  esac
  shift
done
[ "${1:-}" = "--" ] && shift
[ ${#bins[@]} -gt 0 ] || { echo "gpu-bench-ab: name at least one NAME=BIN" >&2; exit 2; }
mkdir -p "$RES"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$RES/gpu.txt"
fails=0
for r in $(seq 1 "$ROUNDS"); do
  for nb in "${bins[@]}"; do
    name=${nb%%=*} bin=${nb#*=}
    out=$RES/$name-$r
    mkdir -p "$out"
    echo "=== $name round $r: $bin bench $*"
    t0=$(date +%s)
    timeout 540 "$bin" bench --classbench "$DATA/classbench" --out "$out" "$@" >"$out/stdout.txt" 2>"$out/stderr.txt"
    rc=$?
    echo "=== $name round $r: exit $rc in $(($(date +%s) - t0)) s"
    [ "$rc" = 0 ] || { fails=$((fails + 1)); tail -5 "$out/stderr.txt"; }
  done
done
for nb in "${bins[@]}"; do
  name=${nb%%=*}
  for r in $(seq 1 "$ROUNDS"); do
    echo "##### $name-$r"
    grep -E '^\|' "$RES/$name-$r/bench.md" 2>/dev/null | grep -vE '^\| ?-' || echo "(no bench.md)"
  done
done
exit $((fails > 0))
