#!/usr/bin/env bash
# CPU executor throughput: gen -> parse -> count (and gen -> parse -> acl -> count with the
# shipped inline-filter rules) on 1 and 2 workers, release build, 3 runs each, median Mpps.
# Usage: scripts/bench-cpu.sh [frames]   (default 4000000)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-4000000}
cargo build --release -q
BIN=${CARGO_TARGET_DIR:-target}/release/pktwarp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r configs/rules "$tmp/rules"
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-28s %8s %10s\n' "pipeline" "workers" "Mpps"
for stages in "parse, count" "parse, acl: { rules: rules/inline-filter.rules.yaml }, count"; do
  for q in 1 2; do
    cat > "$tmp/b.yaml" <<YAML
ports:
  - name: g
    gen: { count: $N, size: 64, seed: 5, flows: { flow_count: 4096 } }
queues: { count: $q, burst: 64, ring_slots: 256 }
pipeline: [$stages]
executor: { kind: cpu }
YAML
    r=$(for i in 1 2 3; do "$BIN" run --quiet --json "$tmp/b.yaml" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["mpps"])'; done | median)
    name=$(echo "$stages" | sed 's/: {[^}]*}//g; s/, / -> /g')
    printf '%-28s %8s %10.3f\n' "$name" "$q" "$r"
  done
done
