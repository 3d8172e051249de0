#!/usr/bin/env bash
# What connection tracking costs on the CPU executor: gen -> parse -> conntrack -> acl -> count
# against the same pipeline without conntrack (gen -> parse -> acl -> count), same rules (the
# shipped inline-filter ACL, no `ct:` rule, so both may run burst-wise), same generated traffic
# (FLOWS flows: every frame after a flow's first updates its entry), same queues, in the same
# run: RUNS interleaved rounds (without, then with), the median of each and their ratio (goal:
# at least 0.5).
# Usage: scripts/bench-conntrack.sh [frames] [workers...]   (default 4000000 frames, workers 1)
#        BIN=path/to/pktwarp (else cargo build --release), RUNS=5, FLOWS=65536, ENTRIES=262144
#        (the table per queue).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-4000000}
shift || true
WORKERS=${*:-1}
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p pktwarp
  BIN=${CARGO_TARGET_DIR:-target}/release/pktwarp
fi
RUNS=${RUNS:-5}
FLOWS=${FLOWS:-65536}
ENTRIES=${ENTRIES:-262144}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r configs/rules "$tmp/rules"
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
acl="acl: { rules: rules/inline-filter.rules.yaml }"

echo "date: $(date -u +%FT%TZ)"
echo "machine: $(lscpu | sed -n 's/^Model name:\s*//p' | head -1), $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "pktwarp: $BIN ($(sha256sum "$BIN" | cut -c1-16)); $N frames of $FLOWS flows, 64 B; conntrack entries $ENTRIES a queue; $RUNS rounds"
printf '%-8s %14s %14s %8s  %s\n' "workers" "without Mpps" "with Mpps" "ratio" "rounds (without / with)"
for q in $WORKERS; do
  write() { # stages file
    {
      echo "ports:"
      for p in $(seq 1 "$q"); do
        echo "  - name: g$p"
        echo "    gen: { count: $((N / q)), size: 64, seed: $p, flows: { flow_count: $FLOWS } }"
      done
      echo "queues: { count: $q, burst: 64, ring_slots: 256 }"
      echo "pipeline: [$1]"
      echo "executor: { kind: cpu }"
      echo "metrics: { enabled: false }"
    } > "$2"
  }
  write "parse, $acl, count" "$tmp/without.yaml"
  write "parse, conntrack: { entries: $ENTRIES }, $acl, count" "$tmp/with.yaml"
  a=()
  b=()
  for _ in $(seq "$RUNS"); do
    for k in without with; do
      r=$("$BIN" run --quiet --json "$tmp/$k.yaml" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["mpps"])')
      if [ "$k" = without ]; then a+=("$r"); else b+=("$r"); fi
    done
  done
  ma=$(printf '%s\n' "${a[@]}" | median)
  mb=$(printf '%s\n' "${b[@]}" | median)
  printf '%-8s %14.3f %14.3f %8.2f  %s / %s\n' "$q" "$ma" "$mb" \
    "$(awk -v a="$ma" -v b="$mb" 'BEGIN { print (a > 0 ? b / a : 0) }')" "${a[*]}" "${b[*]}"
done
