#!/usr/bin/env bash
# CPU executor throughput: gen -> parse -> count (and gen -> parse -> acl -> count with the
# shipped inline-filter rules) on 1 and 2 workers, release build, 3 runs each, median Mpps.
# Usage: scripts/bench-cpu.sh [frames] [workers...]   (default 4000000 frames, workers 1 2)
#        BIN=path/to/pktwarp scripts/bench-cpu.sh ...   (use a built binary, build nothing)
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
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-28s %8s %10s\n' "pipeline" "workers" "Mpps"
for stages in "parse, count" "parse, acl: { rules: rules/inline-filter.rules.yaml }, count"; do
  for q in $WORKERS; do
    # One generator port per worker: each port has its own ingest thread, as each NIC queue
    # would, so the generator is not the bottleneck being measured.
    {
      echo "ports:"
      for p in $(seq 1 "$q"); do
        echo "  - name: g$p"
        echo "    gen: { count: $((N / q)), size: 64, seed: $p, flows: { flow_count: 4096 } }"
      done
      echo "queues: { count: $q, burst: 64, ring_slots: 256 }"
      echo "pipeline: [$stages]"
      echo "executor: { kind: cpu }"
      echo "metrics: { enabled: false }"
    } > "$tmp/b.yaml"
    r=$(for i in 1 2 3; do "$BIN" run --quiet --json "$tmp/b.yaml" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["mpps"])'; done | median)
    name=$(echo "$stages" | sed 's/: {[^}]*}//g; s/, / -> /g')
    printf '%-28s %8s %10.3f\n' "$name" "$q" "$r"
  done
done
