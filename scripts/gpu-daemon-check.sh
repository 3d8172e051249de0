#!/usr/bin/env bash
# The daemon on the GPU executor against the CPU executor: `pktwarp run` on the shipped
# inline-filter config (generated traffic with malformed frames, parse + acl + count, 2 queues),
# once with executor cpu and once per GPU mode/placement; the summaries must agree on every
# count (frames, drops by reason, per-rule hits, default, counted frames and bytes).
# Usage: scripts/gpu-daemon-check.sh [BIN] [OUT]   (run on the GPU machine)
set -u
BIN=${1:-.carry/pktwarp}
RES=${2:-${OUT:-./gpu-results}}
mkdir -p "$RES"
fails=0
run() { # run NAME KIND [GPU-OPTIONS]: the shipped config, changed by --set only
  local set=(--set "executor.kind=$2" --set ports.0.gen.count=1000000 --set metrics.enabled=false)
  [ -n "${3:-}" ] && set+=(--set "executor.gpu=$3")
  echo "=== run $1"
  timeout 120 "$BIN" run --quiet --json configs/inline-filter.yaml "${set[@]}" > "$RES/daemon-$1.json" 2> "$RES/daemon-$1.log"
  local rc=$?
  echo "=== run $1: exit $rc"
  [ "$rc" = 0 ] || { fails=$((fails + 1)); tail -5 "$RES/daemon-$1.log"; }
}
run cpu cpu
run gpu-persistent-device gpu "{ mode: persistent, placement: device }"
run gpu-persistent-mapped gpu "{ mode: persistent, placement: mapped }"
run gpu-launch-device gpu "{ mode: launch, placement: device }"
python3 - "$RES" <<'PY' || fails=$((fails + 1))
import json, sys, os
res = sys.argv[1]
def load(n):
    p = os.path.join(res, f"daemon-{n}.json")
    return json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else None
ref = load("cpu")
keys = ["rx_frames", "rx_bytes", "drops", "top_rules", "acl_default", "counted"]
bad = 0
for n in ["gpu-persistent-device", "gpu-persistent-mapped", "gpu-launch-device"]:
    s = load(n)
    if ref is None or s is None:
        print(f"daemon {n}: missing summary"); bad += 1; continue
    diff = [k for k in keys if s.get(k) != ref.get(k)]
    print(f"daemon {n}: executor={s['executor']} {s['mpps']:.3f} Mpps (cpu {ref['mpps']:.3f}); "
          + ("equal to cpu on " + ", ".join(keys) if not diff else "DIFFERS on " + ", ".join(diff)))
    for k in diff:
        print(f"  {k}: cpu={ref.get(k)} gpu={s.get(k)}")
    bad += bool(diff) or s["executor"] != "gpu"
sys.exit(1 if bad else 0)
PY
echo "=== daemon check: $fails failure(s)"
exit $((fails > 0))
