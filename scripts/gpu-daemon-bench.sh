#!/usr/bin/env bash
# The daemon's rate on the GPU executor against the CPU executor, same config, same machine:
# `pktwarp run --json` on the shipped inline-filter config (gen, 64 B, 1% malformed, parse + acl
# + count, 2 queues) and on a gen 64 B config with 8 queues (the same pipeline), each with
# executor cpu and gpu (default mode and placement, then persistent/device, persistent/mapped),
# REPS times each. Prints the Mpps of every run, the median per executor and the GPU/CPU ratio,
# and checks that every run's counts equal the CPU run's (frames, drops by reason, rule hits,
# default, counted frames and bytes), as gpu-daemon-check.sh does.
# Usage: scripts/gpu-daemon-bench.sh [BIN] [OUT]   (run on the GPU machine, repository root)
#   BIN  pktwarp binary (default .carry/pktwarp)   OUT  results folder (default $OUT, else ./gpu-results)
#   REPS=N runs per executor (default 3); FRAMES=N frames per run (default 4000000).
set -u
BIN=${1:-.carry/pktwarp}
RES=${2:-${OUT:-./gpu-results}}
REPS=${REPS:-3}
FRAMES=${FRAMES:-4000000}
mkdir -p "$RES"
fails=0
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc)"
  echo "binary: $(sha256sum "$BIN" | cut -c1-16)"
} | tee "$RES/daemon-bench.txt"
# The shipped inline filter, changed by --set only: FRAMES frames and a queue count per config.
declare -A QUEUES=([inline]=2 [gen64-8q]=8)
# run CONFIG EXECUTOR TAG REP [GPU-OPTIONS]: results in bench-CONFIG-TAG-REP.{json,log}
run() {
  local name=$1-$3-$4
  local set=(--set "ports.0.gen.count=$FRAMES" --set "queues.count=${QUEUES[$1]}"
    --set "executor.kind=$2" --set metrics.enabled=false)
  [ -n "${5:-}" ] && set+=(--set "executor.gpu=$5")
  timeout 300 "$BIN" run --quiet --json configs/inline-filter.yaml "${set[@]}" > "$RES/bench-$name.json" 2> "$RES/bench-$name.log"
  local rc=$?
  [ "$rc" = 0 ] || { fails=$((fails + 1)); echo "run $name: exit $rc"; tail -5 "$RES/bench-$name.log"; }
}
for c in inline gen64-8q; do
  for r in $(seq 1 "$REPS"); do
    run $c cpu cpu $r
    run $c gpu gpu $r
    run $c gpu gpu-persistent-device $r "{ mode: persistent, placement: device }"
    run $c gpu gpu-persistent-mapped $r "{ mode: persistent, placement: mapped }"
  done
done
python3 - "$RES" "$REPS" <<'PY' | tee -a "$RES/daemon-bench.txt" || fails=$((fails + 1))
import json, os, statistics, sys
res, reps = sys.argv[1], int(sys.argv[2])
keys = ["rx_frames", "rx_bytes", "drops", "top_rules", "acl_default", "counted"]
def load(n):
    p = os.path.join(res, f"bench-{n}.json")
    return json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else None
bad = 0
for cfg in ["inline", "gen64-8q"]:
    ref = load(f"{cfg}-cpu-1")
    cpu_mpps = None
    for ex in ["cpu", "gpu", "gpu-persistent-device", "gpu-persistent-mapped"]:
        runs = [load(f"{cfg}-{ex}-{r}") for r in range(1, reps + 1)]
        ok = [s for s in runs if s is not None]
        for r, s in enumerate(runs, 1):
            if s is None:
                print(f"{cfg} {ex} run {r}: missing summary"); bad += 1; continue
            diff = [k for k in keys if ref is None or s.get(k) != ref.get(k)]
            if diff or (ex != "cpu" and s["executor"] != "gpu"):
                print(f"{cfg} {ex} run {r}: executor={s['executor']} DIFFERS from cpu on {', '.join(diff)}")
                bad += 1
        if not ok:
            continue
        mpps = [s["mpps"] for s in ok]
        med = statistics.median(mpps)
        cpu_mpps = med if ex == "cpu" else cpu_mpps
        ratio = f", {med / cpu_mpps:.2f}x cpu" if cpu_mpps and ex != "cpu" else ""
        print(f"{cfg:9} {ex:22} median {med:7.3f} Mpps{ratio}  (runs: "
              + " ".join(f"{m:.3f}" for m in mpps) + f"; {ok[0]['rx_frames']} frames, "
              + f"{len(ok[0]['queues'])} queues)")
sys.exit(1 if bad else 0)
PY
echo "=== daemon bench: $fails failure(s)"
exit $((fails > 0))
