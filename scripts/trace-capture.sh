#!/usr/bin/env bash
# Writes a capture of every header of a ClassBench trace once, as a frame of SIZE bytes, with
# `pktwarp run` (a gen port replaying the trace into a pcap port, CPU executor); the run's
# summary goes to LOG_PREFIX.json, its log to LOG_PREFIX.log. Used by the GPU scripts that
# replay a trace as a capture (gpu-ingest-bench.sh, gpu-dpdk-pinned-check.sh).
# Usage: scripts/trace-capture.sh BIN TRACE OUT.pcap LOG_PREFIX [SIZE (default 64)]
set -u
[ $# -ge 4 ] || { sed -n '2,6p' "$0"; exit 2; }
bin=$1 trace=$2 cap=$3 log=$4 size=${5:-64}
yaml=$(mktemp --suffix=.yaml)
trap 'rm -f "$yaml"' EXIT
cat > "$yaml" <<YAML
ports:
  - name: g
    gen: { trace: $trace, size: $size }
  - name: out
    pcap: { tx: { path: $cap } }
queues: { count: 1 }
pipeline: [count]
executor: { kind: cpu }
output: { port: out }
metrics: { enabled: false }
YAML
"$bin" run --quiet --json "$yaml" > "$log.json" 2> "$log.log" \
  || { echo "trace-capture: building $cap from $trace failed"; tail -5 "$log.log"; exit 1; }
