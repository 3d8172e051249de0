#!/usr/bin/env bash
# The daemon's GPU ingest against the engine alone, same machine, same call: `pktwarp run` on the
# GPU executor replaying a 64 B capture (acl1_10K's trace, built once with gen and then in the
# page cache) through parse + acl (acl1_10K, classbench) + count, no output port, with 1, 4, 8
# and 12 queues, one receive thread per queue, each with `placement: mapped` (the default: the
# receive threads copy the frames into the slot bursts) and `placement: device` (the capture
# handed over by reference: copied once into pinned memory, descriptors in the ring, the GPU
# gathers the frames); each run's `gpu_ingest` path and `receive_threads` are printed. Then
# `pktwarp bench` end to end (64 B rows, same queue counts). Prints each run's Mpps, the
# bench's, and the ratio daemon / bench per queue count and placement; checks that every daemon
# run counted every frame alike (rx frames, drops, counted, rule hits).
# Usage: scripts/gpu-ingest-bench.sh [BIN_DIR] [OUT]   (GPU machine, repository root)
#   BIN_DIR folder with the pktwarp binary (default .carry)   OUT results (default $OUT, else ./gpu-results)
#   DATA=DIR folder with classbench/ (default .carry/data)    LOOPS=N laps of the capture (default 40)
#   QUEUES="1 4 8 12"   REPS=N daemon runs per queue count and placement (default 2)
set -u
BIN=${1:-.carry}/pktwarp
RES=${2:-${OUT:-./gpu-results}}/ingest-bench
DATA=${DATA:-.carry/data}
LOOPS=${LOOPS:-40}
QUEUES=${QUEUES:-"1 4 8 12"}
REPS=${REPS:-2}
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
# The capture: every trace header once, as a 64 B frame.
cap=$tmp/acl1-64.pcap
cat > "$tmp/make.yaml" <<YAML
ports:
  - name: g
    gen: { trace: $trace, size: 64 }
  - name: out
    pcap: { tx: { path: $cap } }
queues: { count: 1 }
pipeline: [count]
executor: { kind: cpu }
output: { port: out }
metrics: { enabled: false }
YAML
"$BIN" run --quiet --json "$tmp/make.yaml" > "$RES/make-capture.json" 2> "$RES/make-capture.log" \
  || { echo "gpu-ingest-bench: building the capture failed"; tail -5 "$RES/make-capture.log"; exit 1; }
cat "$cap" > /dev/null   # into the page cache
echo "capture: $(stat -c %s "$cap") bytes, $LOOPS laps a run" | tee -a "$RES/ingest-bench.txt"
ncpu=$(nproc)
for q in $QUEUES; do
  # Receive threads on cores 1..q (core 0 left to the queue and control threads).
  last=$((q < ncpu - 1 ? q : ncpu - 1))
  cores=$(seq -s, 1 "$last")
  for pl in mapped device; do
    cat > "$tmp/run-$pl-$q.yaml" <<YAML
ports:
  - name: in
    pcap: { rx: { path: $cap, loops: $LOOPS } }
queues: { count: $q, burst: 256, ring_slots: 64, rx_threads: per_queue, cores: [$cores] }
pipeline: [parse, { acl: { rules: $rules, format: classbench } }, count]
executor: { kind: gpu, gpu: { placement: $pl } }
metrics: { enabled: false }
YAML
    for r in $(seq 1 "$REPS"); do
      timeout 300 "$BIN" run --quiet --json "$tmp/run-$pl-$q.yaml" > "$RES/run-$pl-$q-$r.json" 2> "$RES/run-$pl-$q-$r.log"
      rc=$?
      [ "$rc" = 0 ] || { fails=$((fails + 1)); echo "run $pl q=$q rep $r: exit $rc"; tail -5 "$RES/run-$pl-$q-$r.log"; }
    done
  done
done
qlist=$(echo "$QUEUES" | tr ' ' ',')
timeout 600 "$BIN" bench --classbench "$CB" --sets acl1_10K --skip throughput,l3fwd,latency,fronthaul \
  --e2e-queues "$qlist" --out "$RES/bench" > "$RES/bench.log" 2>&1 \
  || { fails=$((fails + 1)); echo "bench: failed"; tail -5 "$RES/bench.log"; }
python3 - "$RES" "$REPS" "$QUEUES" <<'PY' | tee -a "$RES/ingest-bench.txt" || fails=$((fails + 1))
import json, os, statistics, sys
res, reps, queues = sys.argv[1], int(sys.argv[2]), [int(q) for q in sys.argv[3].split()]
def load(p):
    return json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else None
bench = load(os.path.join(res, "bench", "bench.json")) or {}
e2e = {(r["placement"], r["queues"]): r["pps"] for r in bench.get("e2e", []) if r.get("size") == 64}
keys = ["rx_frames", "drops", "counted", "acl_default", "top_rules"]
ref, bad = None, 0
for q in queues:
    for pl in ["mapped", "device"]:
        runs = [load(os.path.join(res, f"run-{pl}-{q}-{r}.json")) for r in range(1, reps + 1)]
        ok = [s for s in runs if s]
        for s in ok:
            ref = ref or s
            diff = [k for k in keys if s.get(k) != ref.get(k)]
            if diff or s.get("executor") != "gpu":
                print(f"{pl} q={q}: executor={s.get('executor')}, counts differ from the first run on {diff}")
                bad += 1
        if len(ok) < len(runs):
            print(f"{pl} q={q}: {len(runs) - len(ok)} run(s) without a summary")
            bad += 1
        if not ok:
            continue
        mpps = statistics.median(s["mpps"] for s in ok)
        ingest = ", ".join(g["path"] for g in ok[0].get("gpu_ingest", []))
        p = pl.capitalize()
        ratio = (f"bench {e2e[(p, q)] / 1e6:7.1f} Mpps, daemon/bench {mpps * 1e6 / e2e[(p, q)]:.3f}"
                 if (p, q) in e2e else "no bench row")
        print(f"queues {q:2} {pl:6}: daemon {mpps:7.2f} Mpps (runs: " + " ".join(f"{s['mpps']:.2f}" for s in ok)
              + f"; {ok[0].get('receive_threads')} receive threads; ingest {ingest})  {ratio}")
sys.exit(1 if bad else 0)
PY
echo "=== ingest bench: $fails failure(s)"
exit $((fails > 0))
