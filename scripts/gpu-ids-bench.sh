#!/usr/bin/env bash
# The IDS pipeline's rate through the daemon at 1518 B (payload inspection's goal: at least
# 400 Gbit/s of 1518 B frames through the whole pipeline): `pktwarp run` on a pooled `gen` port
# (1518 B frames of a fixed flow set, built once, handed to the queues by reference) through
# parse -> conntrack -> inspect (the ET Open 2019 set, flow-table rules included: strict: false)
# -> count, no output port, on the GPU executor with QUEUES queues (one receive thread each);
# with CPU=1 also the same config on the CPU executor (every core but one) and on the GPU with
# as many frames (CPU_FRAMES), whose counts (counted frames and bytes, drops by reason) must be
# equal. Loading the set takes most of a minute per run, so that pair is off by default: the
# inspect stage's GPU == CPU equality is what the inspect-gpu and inspect-check steps check.
# Prints per run: frames, Mpps, Gbit/s of frame bytes and of wire bits (frame + 20 B of
# preamble and gap: 400 Gbit/s of wire is 32.5 Mpps of 1518 B frames), and checks that every run
# received every frame (rx_frames == FRAMES) on the executor asked for.
# Usage: scripts/gpu-ids-bench.sh [BIN_DIR] [OUT]   (GPU machine, repository root)
#   BIN_DIR folder with the pktwarp binary (default .carry)   OUT results (default $OUT, else ./gpu-results)
#   DATA=DIR folder with ids/etopen-2019 (default BIN_DIR/data)   FRAMES=N per run (default 20000000)
#   QUEUES="8 12" (GPU executor)   CPU=1 and CPU_FRAMES=N (default 2000000): the CPU pair
#   GPU_BURST=N frames a GPU slot (default 256)   CTAS=N per queue (default 1: conntrack keeps per-queue
#   state in arrival order and refuses more)
set -u
BINDIR=${1:-.carry}
BIN=$BINDIR/pktwarp
RES=${2:-${OUT:-./gpu-results}}/ids-bench
DATA=${DATA:-$BINDIR/data}
FRAMES=${FRAMES:-20000000}
CPU_FRAMES=${CPU_FRAMES:-2000000}
QUEUES=${QUEUES:-"8 12"}
CPU=${CPU:-0}
GPU_BURST=${GPU_BURST:-256}
CTAS=${CTAS:-1}
mkdir -p "$RES"
[ -x "$BIN" ] || { echo "gpu-ids-bench: $BIN is not an executable" >&2; exit 2; }
rules=$(cd "$DATA/ids/etopen-2019" 2>/dev/null && pwd) || { echo "gpu-ids-bench: no $DATA/ids/etopen-2019" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ncpu=$(nproc)
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $ncpu"
  echo "binary: $(sha256sum "$BIN" | cut -c1-16)"
} | tee "$RES/ids-bench.txt"
fails=0
# config NAME EXECUTOR QUEUES FRAMES
config() {
  local q=$3 last cores
  last=$((q < ncpu - 1 ? q : ncpu - 1))
  cores=$(seq -s, 1 "$last")
  cat > "$tmp/$1.yaml" <<YAML
ports:
  - name: in
    gen:
      count: $4
      size: 1518
      seed: 7
      flows: { src: 10.0.0.0/16, dst: 192.168.0.0/16, dst_ports: 1-1023, flow_count: 4096 }
queues: { count: $q, burst: 256, rx_threads: per_queue, cores: [$cores] }
pipeline:
  - parse
  - conntrack: { entries: 1048576 }
  - inspect:
      rules: ["$rules/*.rules"]
      strict: false
      vars: { HOME_NET: "[10.0.0.0/8,172.16.0.0/12,192.168.0.0/16]", EXTERNAL_NET: "!\$HOME_NET" }
      eve: { path: $tmp/$1-eve.json }
  - count
executor:
  kind: $2
  gpu: { placement: mapped, by_reference: true, burst_size: $GPU_BURST, ctas_per_queue: $CTAS,
         slot_data_bytes: $((GPU_BURST * 1536)) }
metrics: { enabled: false }
YAML
}
run() {
  local name=$1
  timeout 280 "$BIN" run --quiet --json "$tmp/$name.yaml" > "$RES/run-$name.json" 2> "$RES/run-$name.log"
  local rc=$?
  [ "$rc" = 0 ] || { fails=$((fails + 1)); echo "run $name: exit $rc"; tail -5 "$RES/run-$name.log"; }
}
if [ "$CPU" = 1 ]; then
  config cpu cpu $((ncpu - 1)) "$CPU_FRAMES"
  run cpu
  config gpu-check gpu 8 "$CPU_FRAMES"
  run gpu-check
fi
for q in $QUEUES; do
  config "gpu-$q" gpu "$q" "$FRAMES"
  run "gpu-$q"
done
python3 - "$RES" "$FRAMES" "$CPU_FRAMES" "$QUEUES" "$CPU" <<'PY' | tee -a "$RES/ids-bench.txt" || fails=$((fails + 1))
import json, os, sys
res, frames, cpu_frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
queues, pair = sys.argv[4].split(), sys.argv[5] == "1"
def load(name):
    p = os.path.join(res, f"run-{name}.json")
    try:
        return json.load(open(p)) if os.path.getsize(p) else None
    except (OSError, ValueError):
        return None
bad = 0
def row(name, want, executor):
    global bad
    s = load(name)
    if s is None:
        print(f"{name:>10}: no summary"); bad += 1; return None
    wire = s["mpps"] * 1e6 * (1518 + 20) * 8 / 1e9
    ok = s["rx_frames"] == want and s["executor"] == executor
    bad += 0 if ok else 1
    ing = ",".join(f'{g["path"]}' for g in s.get("gpu_ingest", []))
    print(f'{name:>10}: {s["executor"]:>3} {s["rx_frames"]:>10} frames{"" if ok else " (want %d on %s)" % (want, executor)}'
          f' {s["elapsed_s"]:7.3f} s {s["mpps"]:7.2f} Mpps {s["gbps"]:7.1f} Gbit/s frames'
          f' {wire:7.1f} Gbit/s wire ({wire / 400:.2f} of 400) ingest {ing or "-"}')
    return s
def key(s):
    return (s["counted"], sorted(map(tuple, s["drops"])), s["rx_bytes"])
cpu = row("cpu", cpu_frames, "cpu") if pair else None
chk = row("gpu-check", cpu_frames, "gpu") if pair else None
if cpu and chk:
    same = key(cpu) == key(chk)
    print(f"gpu-check counts == cpu counts: {same}")
    bad += 0 if same else 1
best = 0.0
for q in queues:
    s = row(f"gpu-{q}", frames, "gpu")
    if s:
        best = max(best, s["mpps"] * 1e6 * 1538 * 8 / 1e9)
print(f"best GPU: {best:.1f} Gbit/s of wire at 1518 B ({best / 400:.2f} of the 400 Gbit/s goal)")
sys.exit(1 if bad else 0)
PY
[ "$fails" = 0 ] || { echo "gpu-ids-bench: $fails failure(s)"; exit 1; }
