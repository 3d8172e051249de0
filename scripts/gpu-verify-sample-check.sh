#!/usr/bin/env bash
# On the GPU machine: the daemon checks its GPU results (`verify: { sample: N }` on the GPU
# executor). configs/inline-filter.yaml on the GPU with `verify.sample=100` must sample frames
# (sampled_frames > 0) and find no mismatch; then the rate with `sample: 1000` is compared with
# sampling off (runs alternated, RUNS of each; the goal: within 10%).
# Usage (repository root): scripts/gpu-verify-sample-check.sh [BIN] [OUT]
set -u
BIN=${1:-.carry/pktwarp}
RES=${2:-${OUT:-./gpu-results}}
FRAMES=${FRAMES:-2000000}
RUNS=${RUNS:-3}
# The executor under check (`cpu` only to try this script where there is no GPU).
KIND=${KIND:-gpu}
mkdir -p "$RES"
LOG=$RES/verify-sample-check.log
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export RUST_LOG=${RUST_LOG:-info,pipeline::stage::acl=error}
CFG=configs/inline-filter.yaml
fails=0

# run NAME SAMPLE: the JSON summary in $tmp/NAME.json, the log in $tmp/NAME.log
run() {
  timeout 300 "$BIN" run --json "$CFG" --set "executor.kind=$KIND" --set "verify.sample=$2" \
    --set "ports.0.gen.count=$FRAMES" --set metrics.enabled=false \
    >"$tmp/$1.json" 2>"$tmp/$1.log"
  local rc=$?
  echo "$1 (sample $2): exit $rc"
  [ "$rc" = 0 ] || { fails=$((fails + 1)); tail -5 "$tmp/$1.log"; }
}

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  echo "binary: $(sha256sum "$BIN" | cut -c1-16)"
  run check 100
  cp "$tmp/check.log" "$RES/verify-sample-gpu.log" 2>/dev/null
  grep -h "verify_mismatch" "$tmp/check.log" | head -5
  for i in $(seq 1 "$RUNS"); do
    run "off$i" 0
    run "on$i" 1000
  done
  python3 - "$tmp" "$RUNS" "$KIND" <<'PY' || fails=$((fails + 1))
import json, sys
tmp, runs, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(name):
    try:
        t = open(f"{tmp}/{name}.json").read()
        return json.loads(t[t.index('{'):])
    except (OSError, ValueError) as e:
        print(f"FAIL {name}: no JSON summary ({e})")
        return None
ok = True
def check(c, what):
    global ok
    print(('ok   ' if c else 'FAIL ') + what)
    ok &= bool(c)
s = load("check")
v = (s or {}).get("verify") or {}
check(s is not None and s.get("executor") == kind, f"ran on the {kind} executor: {s and s.get('executor')}")
check(v.get("sample") == 100, f"verify section present, sample {v.get('sample')}")
check(v.get("sampled_frames", 0) > 0, f"sampled {v.get('sampled_frames', 0)} frames in {v.get('sampled_bursts', 0)} bursts (skipped busy {v.get('skipped_busy', 0)})")
check(v.get("mismatch_frames", -1) == 0, f"mismatching frames: {v.get('mismatch_frames')}")
check(v.get("counter_mismatches", -1) == 0, f"counter mismatches: {v.get('counter_mismatches')}")
rates = {"off": [], "on": []}
for k in rates:
    for i in range(1, runs + 1):
        r = load(f"{k}{i}")
        if r is not None:
            rates[k].append(r["mpps"])
            if k == "on":
                rv = r.get("verify") or {}
                check(rv.get("mismatch_frames", -1) == 0 and rv.get("sampled_frames", 0) > 0,
                      f"sample 1000 run {i}: sampled {rv.get('sampled_frames')}, mismatches {rv.get('mismatch_frames')}")
print("off Mpps:", ", ".join(f"{x:.3f}" for x in rates["off"]))
print("sample 1000 Mpps:", ", ".join(f"{x:.3f}" for x in rates["on"]))
if rates["off"] and rates["on"]:
    off = sum(rates["off"]) / len(rates["off"])
    on = sum(rates["on"]) / len(rates["on"])
    check(on >= 0.9 * off, f"sample 1000 / off = {on / off:.3f} (mean {on:.3f} / {off:.3f} Mpps; goal >= 0.90)")
else:
    check(False, "rates of both settings")
sys.exit(0 if ok else 1)
PY
  if [ "$fails" = 0 ]; then
    echo "verify-sample: sampled on the $KIND executor, 0 mismatches, sample 1000 within 10% of off"
  else
    echo "verify-sample: FAIL ($fails)"
  fi
} 2>&1 | tee "$LOG"
grep -q "^verify-sample: sampled" "$LOG"
