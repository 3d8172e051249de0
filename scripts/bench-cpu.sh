#!/usr/bin/env bash
# CPU executor throughput: gen -> parse -> count (and gen -> parse -> acl -> count with the
# shipped inline-filter rules) on 1 and 2 workers, release build, 3 runs each, median Mpps.
# Usage: scripts/bench-cpu.sh [frames] [workers...]   (default 4000000 frames, workers 1 2)
#        BIN=path/to/pktwarp scripts/bench-cpu.sh ...   (use a built binary, build nothing)
#        CB=DIR: also gen (the ClassBench acl1_10K trace replayed) -> parse -> acl (acl1_10K's
#        9780 rules) -> count; RUNS=3 runs per figure (median). Each line also prints the
#        speed-up over the first worker count.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-4000000}
shift || true
WORKERS=${*:-1 2}
if [ -z "${BIN:-}" ]; then
  cargo build --release -q
  BIN=${CARGO_TARGET_DIR:-target}/release/pktwarp
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r configs/rules "$tmp/rules"
RUNS=${RUNS:-3}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-28s %8s %10s %8s\n' "pipeline" "workers" "Mpps" "speedup"
PIPES=("parse, count" "parse, acl: { rules: rules/inline-filter.rules.yaml }, count")
if [ -n "${CB:-}" ]; then
  cp "$CB/acl1_10K" "$tmp/acl1_10K"
  cp "$CB/acl1_10K_trace" "$tmp/acl1_10K_trace" 2>/dev/null || zcat "$CB/acl1_10K_trace.gz" > "$tmp/acl1_10K_trace"
  PIPES+=("parse, acl: { rules: acl1_10K, format: classbench }, count")
fi
for stages in "${PIPES[@]}"; do
  base=""
  for q in $WORKERS; do
    # One generator port per worker: each port has its own ingest thread, as each NIC queue
    # would, so the generator is not the bottleneck being measured.
    {
      echo "ports:"
      for p in $(seq 1 "$q"); do
        echo "  - name: g$p"
        if [[ $stages == *acl1_10K* ]]; then
          # The ClassBench headers the rules were made for (most match a rule), looped.
          echo "    gen: { count: $((N / q)), size: 64, seed: $p, trace: acl1_10K_trace }"
        else
          echo "    gen: { count: $((N / q)), size: 64, seed: $p, flows: { flow_count: 4096 } }"
        fi
      done
      echo "queues: { count: $q, burst: 64, ring_slots: 256 }"
      echo "pipeline: [$stages]"
      echo "executor: { kind: cpu }"
      echo "metrics: { enabled: false }"
    } > "$tmp/b.yaml"
    r=$(for _ in $(seq "$RUNS"); do "$BIN" run --quiet --json "$tmp/b.yaml" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["mpps"])'; done | median)
    name=$(echo "$stages" | sed 's/: {[^}]*}//g; s/, / -> /g')
    [[ $stages == *acl1_10K* ]] && name="$name (acl1_10K)"
    [ -n "$base" ] || base=$r
    printf '%-28s %8s %10.3f %8.2f\n' "$name" "$q" "$r" "$(awk -v r="$r" -v b="$base" 'BEGIN { print (b > 0 ? r / b : 0) }')"
  done
done
