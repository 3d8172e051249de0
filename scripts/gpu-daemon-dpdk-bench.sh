#!/usr/bin/env bash
# The daemon on DPDK ports, GPU executor against CPU executor, same config, same machine:
# `pktwarp run --json` (a `--features dpdk` build) on a net_null vdev (an endless source of 64 B
# frames) with QUEUES RX queues and the inline filter's pipeline (parse + acl + count), each run
# stopped by SIGTERM after SECS seconds (the daemon drains and prints its summary). Executors:
# cpu, gpu (default mode and placement), gpu persistent/device; REPS runs each, interleaved.
# Prints the Mpps of every run, the median per executor and the GPU/CPU ratio, and checks that
# every run ended cleanly with frames counted, no frame unaccounted for (rx = counted + drops).
# Each run's per-thread CPU (scripts/thread-cpu.py) is printed with its median run.
# Usage (GPU machine, repository root): scripts/gpu-daemon-dpdk-bench.sh BUNDLE [OUT]
#   BUNDLE  a scripts/cpu-peer-bundle.sh folder built with PKTWARP_DPDK_BIN (bin/pktwarp)
#   OUT     results folder (default $OUT, else ./gpu-results)
#   env: REPS (default 3), SECS (default 6), QUEUES (default "2 8"), BURST (queues.burst, 64)
set -u
BUNDLE=$(cd "${1:?usage: gpu-daemon-dpdk-bench.sh BUNDLE [OUT]}" && pwd)
RES=${2:-${OUT:-./gpu-results}}
REPS=${REPS:-3}
SECS=${SECS:-6}
BURST=${BURST:-64}
QUEUES=${QUEUES:-"2 8"}
# shellcheck source=/dev/null
. "$BUNDLE/env.sh"
BIN=$BUNDLE/bin/pktwarp
[ -x "$BIN" ] || { echo "no $BIN: build the bundle with PKTWARP_DPDK_BIN"; exit 2; }
mkdir -p "$RES/dpdk"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r configs/rules "$tmp/rules"
fails=0
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc)"
  echo "binary: $(sha256sum "$BIN" | cut -c1-16)"
} | tee "$RES/dpdk/daemon-dpdk-bench.txt"
# run QUEUES EXECUTOR TAG REP [GPU-OPTIONS]
run() {
  local q=$1 name=q$1-$3-$4
  cat > "$tmp/$name.yaml" <<EOF
ports:
  - name: wire
    dpdk:
      eal_args: [--no-huge, --no-pci, --no-shconf, -m, "2048", --file-prefix=pwb$$-$name, -l, "0", -d, "$PW_DPDK_PMDS"]
      vdev: "net_null0,size=64"
      rx_queues: $q
      tx_queues: 1
queues:
  count: $q
  burst: $BURST
pipeline:
  - parse
  - acl:
      rules: rules/inline-filter.rules.yaml
      default: pass
  - count
executor:
  kind: $2
EOF
  [ -n "${5:-}" ] && printf '  gpu: %s\n' "$5" >> "$tmp/$name.yaml"
  "$BIN" run --quiet --json "$tmp/$name.yaml" > "$RES/dpdk/$name.json" 2> "$RES/dpdk/$name.log" &
  local pid=$!
  # Which thread is saturated: each named thread's CPU over the middle of the run.
  sleep 2
  python3 scripts/thread-cpu.py "$pid" $((SECS > 4 ? SECS - 3 : 1)) > "$RES/dpdk/$name.threads" 2>&1
  sleep 1
  kill -TERM "$pid" 2>/dev/null
  local waited=0
  while kill -0 "$pid" 2>/dev/null && [ $waited -lt 30 ]; do sleep 1; waited=$((waited + 1)); done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid"
  local rc=$?
  [ "$rc" = 0 ] || { fails=$((fails + 1)); echo "run $name: exit $rc"; tail -5 "$RES/dpdk/$name.log"; }
}
for q in $QUEUES; do
  for r in $(seq 1 "$REPS"); do
    run "$q" cpu cpu "$r"
    run "$q" gpu gpu "$r"
    run "$q" gpu gpu-persistent-device "$r" "{ mode: persistent, placement: device }"
  done
done
python3 - "$RES/dpdk" "$REPS" "$QUEUES" <<'PY' | tee -a "$RES/dpdk/daemon-dpdk-bench.txt" || fails=$((fails + 1))
import json, os, statistics, sys
res, reps, queues = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def load(n):
    p = os.path.join(res, f"{n}.json")
    return json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else None
bad = 0
for q in queues:
    cpu_mpps = None
    for ex in ["cpu", "gpu", "gpu-persistent-device"]:
        runs = [load(f"q{q}-{ex}-{r}") for r in range(1, reps + 1)]
        ok = []
        for r, s in enumerate(runs, 1):
            if s is None:
                print(f"q{q} {ex} run {r}: missing summary"); bad += 1; continue
            drops = sum(n for _, n in s.get("drops", []))
            counted = sum(c[1] for c in s.get("counted", []))  # [stage index, frames, bytes]
            want = "cpu" if ex == "cpu" else "gpu"
            if s.get("executor") != want or s.get("rx_frames", 0) == 0 or counted + drops != s["rx_frames"]:
                print(f"q{q} {ex} run {r}: executor={s.get('executor')} rx={s.get('rx_frames')} "
                      f"counted={counted} drops={drops}: NOT CLEAN"); bad += 1; continue
            ok.append(s)
        if not ok:
            continue
        mpps = [s["mpps"] for s in ok]
        med = statistics.median(mpps)
        cpu_mpps = med if ex == "cpu" else cpu_mpps
        ratio = f", {med / cpu_mpps:.2f}x cpu" if cpu_mpps and ex != "cpu" else ""
        print(f"net_null q{q:<2} {ex:22} median {med:7.3f} Mpps{ratio}  (runs: "
              + " ".join(f"{m:.3f}" for m in mpps) + ")")
        t = os.path.join(res, f"q{q}-{ex}-1.threads")
        if os.path.exists(t):
            for line in open(t).read().splitlines()[:10]:
                print("    " + line)
sys.exit(1 if bad else 0)
PY
echo "=== daemon dpdk bench: $fails failure(s)"
exit $((fails > 0))
