#!/usr/bin/env bash
# Interleaved latency comparison of pktwarp binaries on the GPU machine (the A/B method of the
# GPU latency work in docs/perf-log.md): round 1 runs every binary once, round 2 again, ..., so
# slow drifts of the machine hit every binary alike. Each run is `BIN bench --sets acl1_10K --skip
# throughput,e2e` (latency table, transport rounds, traced decomposition; every verdict checked
# against the CPU executor), then one summary table is printed: per run the 16- and 32-frame
# persistent mapped rows, the launch ratio, the traced 32-frame decomposition and the verdict
# check. Builds nothing.
#
# Usage (repository root):
#   scripts/gpu-latency-ab.sh [-r ROUNDS] [-b BURSTS] [-g GAP_US] [-d DATA] [-o OUT] NAME=BIN [NAME=BIN ...]
#   scripts/gpu-latency-ab.sh --summarize OUT      (the table again, from OUT/NAME-ROUND/bench.md)
#   ROUNDS  runs per binary (default 2)     BURSTS  bursts timed per configuration (default 3000)
#   DATA    folder with classbench/ (default .carry/data)   OUT  results (default $OUT/ab, ./gpu-ab)
#   GAP_US  bench --latency-gap-us (default: the bench's own; binaries before it lack the flag)
set -u
summarize() { # summarize OUT
  python3 - "$1" <<'PY'
import os, re, sys
out = sys.argv[1]
runs = sorted(d for d in os.listdir(out) if os.path.isfile(os.path.join(out, d, "bench.md")))
if not runs:
    sys.exit(f"gpu-latency-ab: no NAME-ROUND/bench.md under {out}")
def cell(md, burst):
    m = re.search(rf"^\| {burst} \| Mapped \| ([^|]+) \| ([^|]+) \| [^|]+ \| ([0-9.]+)x \|", md, re.M)
    if not m:
        return "-", "-", "-"
    p = [x.strip() for x in m.group(1).split("/")]
    return f"{p[0]} / {p[1]}", m.group(2).split("/")[1].strip(), m.group(3) + "x"
def decomp(md):
    m = re.search(r"^\| parse \+ acl \+ count \| \d+ x 1 \| Mapped \| yes \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|", md, re.M)
    if not m:
        return "-", "-", "-", "-"
    pp = m.group(4).strip() if "of which parse pass" in md else "-"  # older tables lack the column
    return m.group(1).split("/")[0].strip(), m.group(2).strip(), m.group(3).strip(), pp
def stalls(md):
    # Binaries older than the stall accounting (2026-11-30) print neither line.
    j = re.search(r"^Host thread off its CPU .*?: ([0-9.]+) times a second", md, re.M)
    m = re.search(r"^32 frames, mapped: stalled bursts persistent (\d+) of \d+ \(([0-9.]+)%\), launch \d+ of \d+ "
                  r"\(([0-9.]+)%\); p99 of the bursts without a stall: persistent ([0-9.NaN]+), launch ([0-9.NaN]+) \(([0-9.NaNinf]+)x\)", md, re.M)
    if not m:
        return "-", "-", "-"
    return (j.group(1) if j else "-"), f"{m.group(2)}% / {m.group(3)}%", f"{m.group(4)} ({m.group(6)}x)"
def checked(md):
    m = re.search(r"^Verdicts checked against the CPU executor: (\d+), mismatches: (\d+)", md, re.M)
    return f"{m.group(1)} / {m.group(2)}" if m else "-"
print("| run | 16 frames p50 / p99 | 32 frames p50 / p99 | 32: launch p99 | launch / persistent p99 "
      "| traced 32: total p50 | seen->staged | stages | of which parse pass | host stalls / s "
      "| 32: stalled bursts persistent / launch | 32: persistent p99 without them (launch / persistent) | verdicts checked / mismatches |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for r in runs:
    md = open(os.path.join(out, r, "bench.md")).read()
    c16, c32 = cell(md, 16), cell(md, 32)
    t, s, st, pp = decomp(md)
    js, sb, su = stalls(md)
    print(f"| {r} | {c16[0]} | {c32[0]} | {c32[1]} | {c32[2]} | {t} | {s} | {st} | {pp} | {js} | {sb} | {su} | {checked(md)} |")
PY
}
if [ "${1:-}" = "--summarize" ]; then
  summarize "${2:?usage: $0 --summarize OUT}"
  exit $?
fi
ROUNDS=2 BURSTS=3000 DATA=.carry/data RES=${OUT:+$OUT/ab} GAP=()
RES=${RES:-./gpu-ab}
while getopts "r:b:g:d:o:" opt; do
  case $opt in
    r) ROUNDS=$OPTARG ;; b) BURSTS=$OPTARG ;; d) DATA=$OPTARG ;; o) RES=$OPTARG ;;
    g) GAP=(--latency-gap-us "$OPTARG") ;;
    *) echo "usage: $0 [-r ROUNDS] [-b BURSTS] [-g GAP_US] [-d DATA] [-o OUT] NAME=BIN ..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-r ROUNDS] [-b BURSTS] [-g GAP_US] [-d DATA] [-o OUT] NAME=BIN ..." >&2; exit 2; }
for nb in "$@"; do
  case $nb in
    *=*) [ -x "${nb#*=}" ] || { echo "gpu-latency-ab: ${nb#*=} is not an executable" >&2; exit 2; } ;;
    *) echo "gpu-latency-ab: '$nb' is not NAME=BIN" >&2; exit 2 ;;
  esac
done
mkdir -p "$RES"
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader 2>&1
  for nb in "$@"; do echo "${nb%%=*}: ${nb#*=} $(sha256sum "${nb#*=}" | cut -c1-16)"; done
} | tee "$RES/ab.log"
fails=0
for r in $(seq 1 "$ROUNDS"); do
  for nb in "$@"; do
    name=${nb%%=*} bin=${nb#*=}
    t0=$(date +%s)
    timeout 120 "$bin" bench --classbench "$DATA/classbench" --sets acl1_10K --skip throughput,e2e \
      --latency-bursts "$BURSTS" "${GAP[@]}" --out "$RES/$name-$r" > "$RES/$name-$r.log" 2>&1
    rc=$?
    echo "$name round $r: exit $rc in $(( $(date +%s) - t0 )) s" | tee -a "$RES/ab.log"
    [ "$rc" = 0 ] || fails=$((fails + 1))
  done
done
summarize "$RES" | tee -a "$RES/ab.log"
exit $((fails > 0))
