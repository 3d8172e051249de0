#!/usr/bin/env bash
# The GPU data path's core checks, as one call: the suite's verify, gpu-tests and engine-bench
# groups (scripts/gpu-suite.manifest: verify on the tcpdump corpus, the ClassBench and IPv6 sets,
# generated frames and reload tortures; the carried GPU cargo tests; `pktwarp bench`).
# Usage (repository root): scripts/gpu-run.sh [BIN] [DATA] [OUT]
#   BIN  pktwarp binary (default .carry/pktwarp; its folder is the carried folder)
#   DATA folder with pcaps/ and classbench/ (default .carry/data)   OUT results (default $OUT)
# ONLY=REGEX narrows to checks by name, GROUP=REGEX picks other groups (scripts/gpu-suite.sh).
set -u
BIN=${1:-.carry/pktwarp}
[ "$(basename "$BIN")" = pktwarp ] || { echo "gpu-run: BIN must be a carried pktwarp binary ($BIN)" >&2; exit 2; }
export GROUP=${GROUP:-^(verify|gpu-tests|engine-bench)$}
rc=0
scripts/gpu-suite.sh "$(dirname "$BIN")" "${2:-.carry/data}" "${3:-${OUT:-./gpu-results}}" || rc=$?
RES=${3:-${OUT:-./gpu-results}}
for t in "$RES/bench/bench.md" "$RES/bench-devices/devices/bench.md"; do [ -f "$t" ] && cat "$t"; done
exit $rc
