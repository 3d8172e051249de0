#!/usr/bin/env bash
# The daemon's GPU ingest against the engine alone, same machine, same call (docs/gpu-ingest.md):
# `pktwarp bench` end to end first (64 B rows, both placements, the same queue counts), then
# `pktwarp run` on the GPU executor through parse + acl (acl1_10K, classbench) + count, no output
# port, 64 B frames, one receive thread per queue, for every combination of
#   source:    pcap (acl1_10K's trace as a capture, built once with gen, in page cache, LOOPS laps)
#              or gen (the same trace and size, the same number of frames: a pooled generator)
#   ingest:    copy (`executor.gpu.by_reference: false`: the receive threads copy every frame
#              into the slot bursts) or ref (the loaded frames copied once into pinned memory,
#              descriptors per frame)
#   placement: mapped (by reference: the kernel reads each frame where it is) or device (by
#              reference: the GPU gathers the frames into the device ring slots)
#   queues:    QUEUES (default 1 4 8 12)
# The daemon's GPU side: slots of GPU_BURST frames (256: a mapped ring's kernel gathers a
# by-reference slot of 256 64 B frames into shared memory whole; 1024, the bench's burst, would be
# read in place), CTAS persistent CTAs per queue (the bench's 16).
# Prints one table: each run's Mpps and its ratio to the bench's end-to-end figure of the same
# placement and queue count, then the best by-reference pcap run against the best bench figure
# per queue count. Checks that every run counted every frame alike (rx frames, drops, counted,
# rule hits: the by-reference generator's frames differ from the copied ones only in the IPv4
# identification, which no stage's verdict reads) and took the ingest path asked for.
# Whole call about 250-400 s on an H100 (16 cores); runs past BUDGET seconds are skipped and said.
# Usage: scripts/gpu-ingest-bench.sh [BIN_DIR] [OUT]   (GPU machine, repository root)
#   BIN_DIR folder with the pktwarp binary (default .carry)   OUT results (default $OUT, else ./gpu-results)
#   DATA=DIR folder with classbench/ (default .carry/data)    LOOPS=N laps of the capture (default 60)
#   QUEUES="1 4 8 12"   REPS=N daemon runs per cell (default 1)   BUDGET=S (default 470)
#   SOURCES="pcap gen"  INGESTS="copy ref"  PLACEMENTS="mapped device"  E2E_SECONDS=S (default 1.5)
#   GPU_BURST=N frames a GPU slot (default 256)   CTAS=N per queue (default 16, the bench's)
#   RING=N queues.ring_slots in RX bursts of 256 (default 64: 64 slots of 256 frames a queue)
set -u
start=$(date +%s)
BIN=${1:-.carry}/pktwarp
RES=${2:-${OUT:-./gpu-results}}/ingest-bench
DATA=${DATA:-.carry/data}
LOOPS=${LOOPS:-60}
QUEUES=${QUEUES:-"1 4 8 12"}
REPS=${REPS:-1}
BUDGET=${BUDGET:-470}
SOURCES=${SOURCES:-"pcap gen"}
INGESTS=${INGESTS:-"copy ref"}
PLACEMENTS=${PLACEMENTS:-"mapped device"}
E2E_SECONDS=${E2E_SECONDS:-1.5}
GPU_BURST=${GPU_BURST:-256}
CTAS=${CTAS:-16}
RING=${RING:-64}
CB=$DATA/classbench
mkdir -p "$RES"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x "$BIN" ] || { echo "gpu-ingest-bench: $BIN is not an executable" >&2; exit 2; }
rules=$CB/acl1_10K
trace=$CB/acl1_10K_trace
[ -e "$trace" ] || trace=$trace.gz
[ -e "$rules" ] && [ -e "$trace" ] || { echo "gpu-ingest-bench: no acl1_10K (and _trace) under $CB" >&2; exit 2; }
fails=0
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc)"
  echo "binary: $(sha256sum "$BIN" | cut -c1-16)"
} | tee "$RES/ingest-bench.txt"
# The bench first: its figure is the yardstick, so it is had even if the budget runs out.
qlist=$(echo "$QUEUES" | tr ' ' ',')
t0=$(date +%s)
timeout 240 "$BIN" bench --classbench "$CB" --sets acl1_10K --skip throughput,l3fwd,latency,fronthaul \
  --e2e-queues "$qlist" --e2e-seconds "$E2E_SECONDS" --out "$RES/bench" > "$RES/bench.log" 2>&1 \
  || { fails=$((fails + 1)); echo "bench: failed"; tail -5 "$RES/bench.log"; }
echo "bench: $(( $(date +%s) - t0 )) s" | tee -a "$RES/ingest-bench.txt"
# The capture: every trace header once, as a 64 B frame.
cap=$tmp/acl1-64.pcap
"$(dirname "$0")/trace-capture.sh" "$BIN" "$trace" "$cap" "$RES/make-capture" || exit 1
cat "$cap" > /dev/null   # into the page cache
frames=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rx_frames"])' "$RES/make-capture.json")
echo "capture: $(stat -c %s "$cap") bytes, $frames frames, $LOOPS laps a run ($((frames * LOOPS)) frames)" \
  | tee -a "$RES/ingest-bench.txt"
ncpu=$(nproc)
skipped=0
for q in $QUEUES; do
  # Receive threads on cores 1..q (core 0 left to the queue and control threads).
  last=$((q < ncpu - 1 ? q : ncpu - 1))
  cores=$(seq -s, 1 "$last")
  for src in $SOURCES; do
    case $src in
      pcap) port="pcap: { rx: { path: $cap, loops: $LOOPS } }" ;;
      gen) port="gen: { trace: $trace, size: 64, count: $((frames * LOOPS)) }" ;;
      *) echo "gpu-ingest-bench: unknown source $src" >&2; exit 2 ;;
    esac
    for ing in $INGESTS; do
      byref=true
      [ "$ing" = copy ] && byref=false
      for pl in $PLACEMENTS; do
        name=$src-$ing-$pl-$q
        cat > "$tmp/$name.yaml" <<YAML
ports:
  - name: in
    $port
queues: { count: $q, burst: 256, ring_slots: $RING, rx_threads: per_queue, cores: [$cores] }
pipeline: [parse, { acl: { rules: $rules, format: classbench } }, count]
executor:
  kind: gpu
  gpu: { placement: $pl, by_reference: $byref, burst_size: $GPU_BURST, ctas_per_queue: $CTAS,
         slot_data_bytes: $((GPU_BURST * 128)) }
metrics: { enabled: false }
YAML
        for r in $(seq 1 "$REPS"); do
          if [ $(( $(date +%s) - start )) -ge "$BUDGET" ]; then
            skipped=$((skipped + 1))
            continue
          fi
          timeout 60 "$BIN" run --quiet --json "$tmp/$name.yaml" > "$RES/run-$name-$r.json" 2> "$RES/run-$name-$r.log"
          rc=$?
          [ "$rc" = 0 ] || { fails=$((fails + 1)); echo "run $name rep $r: exit $rc"; tail -5 "$RES/run-$name-$r.log"; }
        done
      done
    done
  done
done
[ "$skipped" = 0 ] || echo "budget: $skipped run(s) skipped past $BUDGET s" | tee -a "$RES/ingest-bench.txt"
python3 - "$RES" "$REPS" "$QUEUES" "$SOURCES" "$INGESTS" "$PLACEMENTS" <<'PY' | tee -a "$RES/ingest-bench.txt" || fails=$((fails + 1))
import json, os, statistics, sys
res, reps = sys.argv[1], int(sys.argv[2])
queues, sources, ingests, placements = ([x for x in a.split()] for a in sys.argv[3:7])
queues = [int(q) for q in queues]
def load(p):
    try:
        return json.load(open(p)) if os.path.getsize(p) else None
    except (OSError, ValueError):
        return None
bench = load(os.path.join(res, "bench", "bench.json")) or {}
e2e = {(r["placement"].lower(), r["queues"]): r["pps"] / 1e6 for r in bench.get("e2e", []) if r.get("size") == 64}
keys = ["rx_frames", "drops", "counted", "acl_default", "top_rules"]
want_path = {"copy": "staged", "ref": "by_reference"}
ref, bad, notes, best = None, 0, [], {}
rows = []
for src in sources:
    for ing in ingests:
        for pl in placements:
            cells = []
            for q in queues:
                name = f"{src}-{ing}-{pl}-{q}"
                runs = [load(os.path.join(res, f"run-{name}-{r}.json")) for r in range(1, reps + 1)]
                ok = [s for s in runs if s]
                for s in ok:
                    ref = ref or s
                    diff = [k for k in keys if s.get(k) != ref.get(k)]
                    if diff or s.get("executor") != "gpu":
                        notes.append(f"{name}: executor={s.get('executor')}, counts differ from the first run on {diff}")
                        bad += 1
                    paths = [g.get("path") for g in s.get("gpu_ingest", [])]
                    if paths != [want_path[ing]]:
                        why = "; ".join(g.get("reason", "") for g in s.get("gpu_ingest", []))
                        notes.append(f"{name}: ingest {paths}, not {want_path[ing]}: {why}")
                        bad += 1
                if not ok:
                    cells.append("-")
                    continue
                mpps = statistics.median(s["mpps"] for s in ok)
                b = e2e.get((pl, q))
                cells.append(f"{mpps:6.2f} ({mpps / b:.2f})" if b else f"{mpps:6.2f}")
                if src == "pcap" and ing == "ref":
                    best[q] = max(best.get(q, 0.0), mpps)
            rows.append(f"| {src} | {ing} | {pl} | " + " | ".join(cells) + " |")
print("\n64 B, parse + acl1_10K + count, Mpps (ratio to bench e2e of the same placement and queues)\n")
print("| source | ingest | placement | " + " | ".join(f"{q} q" for q in queues) + " |")
print("| --- | --- | --- | " + " | ".join("---:" for _ in queues) + " |")
for pl in ["mapped", "device"]:
    print(f"| bench e2e | - | {pl} | " + " | ".join(f"{e2e[(pl, q)]:6.2f}" if (pl, q) in e2e else "-" for q in queues) + " |")
for r in rows:
    print(r)
print("\nbest pcap by reference / best bench e2e (either placement): " + ", ".join(
    f"{q} q {best[q] / max(e2e.get((p, q), 0.0) for p in ('mapped', 'device')):.2f}"
    if q in best and any((p, q) in e2e for p in ("mapped", "device")) else f"{q} q -"
    for q in queues))
for n in notes:
    print("!! " + n)
sys.exit(1 if bad else 0)
PY
echo "=== ingest bench: $fails failure(s), $(( $(date +%s) - start )) s"
exit $((fails > 0))
