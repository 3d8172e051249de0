#!/usr/bin/env bash
# On the GPU machine: `on_stall: restart`. The GPU executor's test knob stalls queue 1's persistent
# kernel on one burst; the watchdog must see its heartbeat stop, restart that queue's kernel alone,
# and the run must end normally with exactly that burst's frames counted as `kernel_stall` and every
# other frame counted as the CPU executor counts it (the other queues never paused). Then the same
# with the stall on a queue whose kernel is given no restart (`on_stall: exit`): the daemon must
# exit 4.
# Usage (repository root): scripts/gpu-restart-check.sh [BIN] [OUT]
set -u
BIN=${1:-.carry/pktwarp}
RES=${2:-${OUT:-./gpu-results}}
FRAMES=${FRAMES:-2000000}
mkdir -p "$RES"
LOG=$RES/restart-check.log
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
RULES=$(pwd)/configs/rules/inline-filter.rules.yaml
export RUST_LOG=${RUST_LOG:-info,pipeline::stage::acl=error}
fails=0

# config NAME EXECUTOR-LINE CONTROL-LINE
config() {
  cat >"$tmp/$1.yaml" <<YAML
ports:
  - name: wire
    gen: { count: $FRAMES, size: 64, seed: 7, malformed_ratio: 0.01,
           flows: { src: 10.0.0.0/8, dst: 192.168.0.0/16, dst_ports: 1-1023 } }
queues: { count: 4, burst: 64, ring_slots: 16 }
pipeline:
  - parse
  - acl: { rules: $RULES }
  - count
$2
$3
metrics: { enabled: false }
YAML
}

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  echo "binary: $(sha256sum "$BIN" | cut -c1-16)"
  config cpu "executor: { kind: cpu }" ""
  config gpu "executor: { kind: gpu, gpu: { mode: persistent, test_stall: { queue: 1, burst: 200 } } }" \
    "control: { on_stall: restart, stall_after_ms: 300 }"
  config gpu-exit "executor: { kind: gpu, gpu: { mode: persistent, test_stall: { queue: 2, burst: 50 } } }" \
    "control: { on_stall: exit, stall_after_ms: 300 }"
  timeout 300 "$BIN" run --json "$tmp/cpu.yaml" >"$tmp/cpu.json" 2>"$tmp/cpu.log"
  echo "cpu run: exit $?"
  t0=$(date +%s%N)
  timeout 300 "$BIN" run --json "$tmp/gpu.yaml" >"$tmp/gpu.json" 2>"$tmp/gpu.log"
  rc=$?
  echo "gpu run with a stall on queue 1: exit $rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  cp "$tmp/gpu.log" "$RES/restart-gpu.log"
  grep -h "stall\|kernel_restart" "$tmp/gpu.log" | head -6
  [ "$rc" = 0 ] || fails=$((fails + 1))
  python3 - "$tmp/cpu.json" "$tmp/gpu.json" <<'PY' || fails=$((fails + 1))
import json, sys
def load(f):
    t = open(f).read()
    return json.loads(t[t.index('{'):])
cpu, gpu = load(sys.argv[1]), load(sys.argv[2])
drops = lambda d: {k: v for k, v in d}
lost = drops(gpu['drops']).get('kernel_stall', 0)
ok = True
def check(c, what):
    global ok
    print(('ok   ' if c else 'FAIL ') + what)
    ok &= bool(c)
check(0 < lost <= 64, f"one burst lost: kernel_stall = {lost} frames (burst 64)")
check(gpu['rx_frames'] == cpu['rx_frames'], f"rx_frames {gpu['rx_frames']} == cpu {cpu['rx_frames']}")
total = sum(q['passed'] + q['mirrored'] + q['to_host'] for q in gpu['queues']) + sum(v for _, v in gpu['drops'])
check(total == gpu['rx_frames'], f"received {gpu['rx_frames']} == passed + drops {total}")
for g, c in zip(gpu['queues'], cpu['queues']):
    q = g['queue']
    gd, cd = drops(g['drops']), drops(c['drops'])
    stall = gd.pop('kernel_stall', 0)
    cd.pop('kernel_stall', None)
    if q == 1:
        g_out = g['passed'] + sum(gd.values())
        c_out = c['passed'] + sum(cd.values())
        check(g_out + stall == c_out and stall == lost, f"queue 1: {g_out} + {stall} lost == cpu {c_out}")
    else:
        check((g['rx_frames'], g['passed'], gd) == (c['rx_frames'], c['passed'], cd), f"queue {q} equal to the cpu executor ({g['passed']} passed)")
sys.exit(0 if ok else 1)
PY
  timeout 120 "$BIN" run --json "$tmp/gpu-exit.yaml" >"$tmp/gpu-exit.json" 2>"$tmp/gpu-exit.log"
  rc=$?
  echo "gpu run with a stall and on_stall: exit: exit $rc (want 4)"
  grep -h "stall" "$tmp/gpu-exit.log" | head -3
  [ "$rc" = 4 ] || fails=$((fails + 1))
  echo "restart-check: $fails failure(s)"
} 2>&1 | tee "$LOG"
exit $(( $(grep -c '^restart-check: 0 failure' "$LOG") == 1 ? 0 : 1 ))
