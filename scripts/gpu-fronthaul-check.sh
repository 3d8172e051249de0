#!/usr/bin/env bash
# On the GPU machine: the fronthaul stage on the GPU executor against the CPU executor, and its
# decompressed PRBs per second.
#  1. gen -> pcap: the generator's O-RAN mode (273 PRBs, 2 eAxCs, BFP9 / BFP14, 50 PRBs and 2
#     sections a packet, VLAN 100) written to a capture by the CPU executor.
#  2. That capture replayed at radio speed (rate CHECK_PPS: 2 eAxCs x 14 symbols x 6 packets a
#     0.5 ms slot) through parse -> fronthaul -> count with executor cpu and with executor gpu,
#     each slot grid to a raw sink: every .iq and .json file must be byte-identical (the GPU's
#     slots complete during the run, fronthaul::live: SLOTS = 40 is more than its ring of
#     2 x max_open_slots = 16 entries holds), and the summaries' fronthaul counts equal (PRBs,
#     U-plane packets, slots complete / partial, errors, per eAxC packets, PRBs and Ta4 windows
#     early / on time / late / untimed: both judge the capture's receive times; sequence gaps /
#     duplicates / out of order); the slot completion latency p50 / p99 of each executor is
#     printed. Then the BFP9 capture with sequence ids dropped, repeated and moved, one queue:
#     per eAxC gaps / duplicates / out of order equal on CPU, GPU and the rules computed by the
#     script, each kind non-zero ("sequence ids ...: equal").
#  3. Decompressed PRB/s, BFP9 and BFP14: a capture of BENCH_SLOTS slots replayed LOOPS times
#     (default once: a lap replayed again repeats its slots, which the stage refuses as closed,
#     so only the first lap would decode while every lap counted in the time), unpaced, sink
#     none, executor gpu and cpu; PRB/s = the summary's fronthaul PRBs / elapsed_s, and the
#     frames per second of the same capture through parse -> count alone (the transport without
#     the stage). This is the whole daemon (pcap replay, ingest, PCIe, kernel), not the decoder
#     alone; also given as 100 MHz 4T4R cells (30.6 M PRB/s each). A run with refused packets
#     (slot_closed) is reported as not measured.
#  5. (STEPS shipped) configs/fronthaul.yaml as shipped (its unpaced generator, 2000 slots = 1 s
#     of radio time), the file itself with `--set executor.kind=...` and a $SINK sink per run,
#     executor cpu and gpu: every PRB decoded (2000 x 14 x 2 x 273), every slot complete, none
#     lost, no packet refused, one slot file per slot, the files byte-identical, and the GPU run
#     within 1.0 s of wall time per second of radio time (the summary's elapsed_s, GPU setup
#     excluded). One line: "shipped config: PASS|FAIL: ...".
#  4. The kernel alone: `pktwarp bench --skip throughput,e2e,l3fwd,latency` (its fronthaul
#     section): the composed [fronthaul] kernel over device-resident frames (gen O-RAN, 273
#     PRBs, BFP9 / BFP14, 32 eAxCs x 32 slots), PRB/s against the Rust stage on one thread; fails
#     when the PRB counter or the slot grids (GPU == CPU) do not check.
# Usage (repository root): scripts/gpu-fronthaul-check.sh [BIN_DIR] [OUT]
#   BIN_DIR  folder with the pktwarp binary (default .carry)
#   OUT      results folder (default $OUT, else ./gpu-results)
# Environment: SLOTS (40), CHECK_PPS (336000), BENCH_SLOTS (1000), LOOPS (1), QUEUES (2: each
#   eAxC steered to its own queue by configs/rules/fronthaul-gen.steering.yaml; 1: no steering),
#   PLACEMENT (device, as configs/fronthaul.yaml; or mapped) of the GPU executor's rings, MODE
#   (persistent; or launch) of its kernels.
#   STEPS (shipped,check,seq,bench,kernel: which of steps 5, 2 (check, seq), 3 and 4 run), SINK (raw; or
#   npy: the file sink steps 2 and 5 compare).
# Exit status: 0 when every comparison is equal, 1 otherwise.
set -u
BIN=${1:-.carry}
RES=${2:-${OUT:-./gpu-results}}
SLOTS=${SLOTS:-40}
STEPS=${STEPS:-shipped,check,seq,bench,kernel}
want() { [[ ",$STEPS," == *",$1,"* ]]; }
CHECK_PPS=${CHECK_PPS:-336000}
BENCH_SLOTS=${BENCH_SLOTS:-1000}
LOOPS=${LOOPS:-1}
QUEUES=${QUEUES:-2}
PLACEMENT=${PLACEMENT:-device}
MODE=${MODE:-persistent}
SINK=${SINK:-raw}
case $SINK in
  raw | npy) ;;
  *) echo "gpu-fronthaul-check: SINK must be raw or npy, not '$SINK'" >&2; exit 2 ;;
esac
PW=$BIN/pktwarp
mkdir -p "$RES"
LOG=$RES/fronthaul-check.log
MD=$RES/fronthaul-check.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PKTWARP_KERNEL_CACHE=$tmp/kcache
fails=0
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }

# gen_pcap WIDTH SLOTS FILE: the generator's frames to a capture.
gen_pcap() {
  cat >"$tmp/gen.yaml" <<EOF
ports:
  - name: ru
    gen:
      oran: { numerology: 1, carrier_prbs: 273, eaxcs: [0, 1], comp_method: bfp, iq_width: $1,
              comp_hdr: static, prbs_per_packet: 50, sections_per_packet: 2, slots: $2, vlan: 100 }
  - name: out
    pcap: { tx: { path: $3 } }
pipeline: [count]
executor: { kind: cpu }
output: { port: out }
EOF
  "$PW" run --quiet --json "$tmp/gen.yaml" >"$tmp/gen.json" 2>>"$LOG"
}

# The rule file that puts each eAxC on its own queue (2 queues).
STEER_RULES=$PWD/configs/rules/fronthaul-gen.steering.yaml
# fh_config WIDTH CAPTURE LOOPS EXECUTOR SINK [RATE [PIPELINE]]: parse -> fronthaul -> count on
# the capture (PIPELINE "transport": parse -> count alone).
fh_config() {
  local steer="" pipe
  [ "$QUEUES" = 2 ] && steer="steering: { rules: $STEER_RULES }"
  if [ "${7:-}" = transport ]; then
    pipe="pipeline: [parse, count]"
  else
    # The capture's timestamps are when the generator's frames were written, not radio time:
    # no slot may time out on them (both executors' timeouts run on the receive times).
    pipe="pipeline:
  - parse
  - fronthaul:
      carrier_prbs: 273
      numerology: 1
      comp: { method: bfp, iq_width: $1, hdr: static }
      eaxcs: [0, 1]
      max_open_slots: 8
      slot_timeout_us: 10000000
      sink: $5
  - count"
  fi
  # 32-frame GPU slots, as configs/fronthaul.yaml has: a fronthaul slot of 256 large frames
  # only adds completion latency.
  cat >"$tmp/fh-$4.yaml" <<EOF
ports:
  - name: ru
    pcap: { rx: { path: $2, loops: $3, rate: ${6:-unlimited} } }
queues: { count: $QUEUES, burst: 32, ring_slots: 4 }
$steer
$pipe
executor: { kind: $4, gpu: { burst_size: 32, placement: $PLACEMENT, mode: $MODE } }
EOF
}

# compare_summaries CPU.json GPU.json: the fronthaul counts both must agree on.
compare_summaries() {
  python3 - "$1" "$2" <<'PY' 2>&1 | tee -a "$LOG"
import json, sys
def load(f):
    t = open(f).read()
    return json.loads(t[t.index('{'):])
try:
    a, b = load(sys.argv[1]), load(sys.argv[2])
except (OSError, ValueError) as e:
    print(f'summaries: DIFFERENT: a run gave no JSON summary ({e})')
    sys.exit(1)
fa, fb = a['fronthaul'][0], b['fronthaul'][0]
bad = []
for k in ['frames', 'uplane', 'cplane', 'not_ecpri', 'rejected', 'prbs', 'slots_complete',
          'slots_partial', 'slots_lost', 'sink_errors', 'duplicate_prbs', 'saturated_samples', 'eaxc_unexpected', 'errors']:
    if fa[k] != fb[k]:
        bad.append(f'{k}: cpu {fa[k]} gpu {fb[k]}')
for ea, eb in zip(fa['per_eaxc'], fb['per_eaxc']):
    for k in ['eaxc', 'packets', 'prbs', 'duplicate_prbs', 'slots_complete', 'slots_partial',
              'early', 'on_time', 'late', 'untimed', 'seq_gaps', 'seq_duplicates',
              'seq_out_of_order']:
        if ea[k] != eb[k]:
            bad.append(f'eAxC {ea["eaxc"]} {k}: cpu {ea[k]} gpu {eb[k]}')
for k in ['rx_frames', 'drops']:
    if a[k] != b[k]:
        bad.append(f'{k}: cpu {a[k]} gpu {b[k]}')
lat = lambda f: (f'{f.get("slot_latency_p50_ns", 0) / 1e3:.1f} / {f.get("slot_latency_p99_ns", 0) / 1e3:.1f} us'
                 f' over {f.get("slot_latency_count", 0)}')
print(f'summaries: {fa["prbs"]} PRBs, {fa["slots_complete"]} complete slots, executor {b["executor"]}: '
      + ('equal' if not bad else 'DIFFERENT: ' + '; '.join(bad))
      + f'; slot completion latency p50 / p99: cpu {lat(fa)}, gpu {lat(fb)}')
sys.exit(1 if bad else 0)
PY
  return "${PIPESTATUS[0]}"
}

echo "# fronthaul: GPU executor against CPU executor ($(date -u +%FT%TZ))" >"$MD"
echo >>"$MD"

# shipped_check: configs/fronthaul.yaml itself (its generator, unpaced) on both executors, the
# file as shipped with two --set overrides: the executor and a $SINK sink per run.
shipped_check() {
  local ex sink
  for ex in cpu gpu; do
    rm -rf "$tmp/shipped-$ex"
    mkdir -p "$tmp/shipped-$ex"
    if [ "$SINK" = npy ]; then sink="{ npy: { dir: $tmp/shipped-$ex } }"; else sink="{ raw: $tmp/shipped-$ex }"; fi
    "$PW" run --quiet --json configs/fronthaul.yaml --set "executor.kind=$ex" \
      --set "pipeline.1.fronthaul.sink=$sink" >"$tmp/sum-shipped-$ex.json" 2>>"$LOG" ||
      say "shipped config: run on $ex failed (exit $?; see $LOG)"
  done
  cp "$tmp/sum-shipped-cpu.json" "$tmp/sum-shipped-gpu.json" "$RES/" 2>/dev/null
  local same=DIFFER
  diff -r "$tmp/shipped-cpu" "$tmp/shipped-gpu" >>"$LOG" 2>&1 && same=equal
  python3 - "$tmp/sum-shipped-cpu.json" "$tmp/sum-shipped-gpu.json" "$same" "$tmp/shipped-cpu" "$tmp/shipped-gpu" "$SINK" <<'PY' 2>&1 | tee -a "$LOG"
import json, os, sys
# configs/fronthaul.yaml: 2000 slots of 0.5 ms (numerology 1) = 1 s of radio time, 2 eAxCs of
# 273 PRBs, 14 symbols a slot.
slots, radio_s = 2000, 1.0
want_prbs = slots * 14 * 2 * 273
ext = '.npy' if sys.argv[6] == 'npy' else '.iq'
def load(f):
    try:
        t = open(f).read()
        return json.loads(t[t.index('{'):])
    except (OSError, ValueError) as e:
        return None
ok = sys.argv[3] == 'equal'
parts, bad = [], []
for name, f, d in (('cpu', sys.argv[1], sys.argv[4]), ('gpu', sys.argv[2], sys.argv[5])):
    s = load(f)
    files = sum(1 for x in os.listdir(d) if x.endswith(ext)) if os.path.isdir(d) else 0
    if s is None:
        bad.append(f'{name}: no JSON summary')
        parts.append(f'{name}: no summary')
        continue
    fh = s['fronthaul'][0]
    el = s['elapsed_s']
    per = el / radio_s
    closed = sum(e.get('slot_closed', 0) for e in fh['per_eaxc'])
    if fh['prbs'] != want_prbs: bad.append(f'{name}: {fh["prbs"]} of {want_prbs} PRBs')
    if fh['slots_complete'] != slots or fh['slots_partial'] != 0:
        bad.append(f'{name}: {fh["slots_complete"]} complete / {fh["slots_partial"]} partial of {slots} slots')
    if fh.get('slots_lost', 0): bad.append(f'{name}: {fh["slots_lost"]} slots lost')
    if closed: bad.append(f'{name}: {closed} packets refused as closed')
    if files != slots: bad.append(f'{name}: {files} {ext} files for {slots} slots')
    if name == 'gpu' and per > 1.0: bad.append(f'gpu: {per:.3f} s wall per radio second (> 1.0)')
    parts.append(f'{name} {fh["prbs"]}/{want_prbs} PRBs, {fh["slots_complete"]}/{slots} complete, '
                 f'{fh.get("slots_lost", 0)} lost, {files} files, {per:.3f} s wall per radio s')
if not ok: bad.append(f'{sys.argv[6]} slot files differ (diff in the log)')
print(f'shipped config: {"PASS" if not bad else "FAIL"}: ' + '; '.join(parts)
      + f'; slot files cpu vs gpu {sys.argv[3]}' + ('' if not bad else ' -- ' + '; '.join(bad)))
sys.exit(0 if not bad else 1)
PY
  return "${PIPESTATUS[0]}"
}
if want shipped; then shipped_check >>"$MD" || fails=$((fails + 1)); fi
for w in 9 14; do
  want check || break
  cap=$tmp/bfp$w.pcap
  gen_pcap "$w" "$SLOTS" "$cap" || { say "BFP$w: gen -> pcap failed"; fails=$((fails + 1)); continue; }
  for ex in cpu gpu; do
    mkdir -p "$tmp/raw-$w-$ex"
    if [ "$SINK" = npy ]; then sink="{ npy: { dir: $tmp/raw-$w-$ex } }"; else sink="{ raw: $tmp/raw-$w-$ex }"; fi
    fh_config "$w" "$cap" 1 "$ex" "$sink" "{ pps: $CHECK_PPS }"
    "$PW" run --quiet --json "$tmp/fh-$ex.yaml" >"$tmp/sum-$w-$ex.json" 2>>"$LOG" ||
      { say "BFP$w: run on $ex failed (see $LOG)"; fails=$((fails + 1)); }
  done
  n_cpu=$(ls "$tmp/raw-$w-cpu" | wc -l)
  n_gpu=$(ls "$tmp/raw-$w-gpu" | wc -l)
  if [ "$n_cpu" -gt 0 ] && diff -r "$tmp/raw-$w-cpu" "$tmp/raw-$w-gpu" >>"$LOG" 2>&1; then
    say "BFP$w: $SINK slot files equal ($n_cpu files for $SLOTS slots)"
    echo "- BFP$w, $SLOTS slots: $n_cpu $SINK-sink files byte-identical, CPU and GPU" >>"$MD"
  else
    say "BFP$w: $SINK slot files DIFFER (cpu $n_cpu files, gpu $n_gpu files; diff in $LOG)"
    echo "- BFP$w, $SLOTS slots: $SINK-sink files DIFFER (cpu $n_cpu, gpu $n_gpu files)" >>"$MD"
    fails=$((fails + 1))
  fi
  compare_summaries "$tmp/sum-$w-cpu.json" "$tmp/sum-$w-gpu.json" >>"$MD" || fails=$((fails + 1))
  cp "$tmp/sum-$w-cpu.json" "$tmp/sum-$w-gpu.json" "$RES/" 2>/dev/null
done

# Sequence ids out of order, duplicated and missing: the BFP9 capture mutated (frames dropped,
# repeated right after themselves, and moved after a later frame of their eAxC), run through
# one queue (an eAxC's arrival order is its queue's) on both executors. Each eAxC's gaps /
# duplicates / out of order must equal on CPU and GPU and what SeqTracker's rules give on the
# mutated capture (computed here), each kind non-zero.
seq_check() {
  local cap=$tmp/seq-src.pcap mut=$tmp/seq.pcap
  gen_pcap 9 "$SLOTS" "$cap" || { say "sequence ids: gen -> pcap failed"; return 1; }
  python3 - "$cap" "$mut" "$tmp/seq-want.json" <<'PY' 2>&1 | tee -a "$LOG"
import json, struct, sys
src, dst, want = sys.argv[1:4]
b = open(src, 'rb').read()
hdr, recs, at = b[:24], [], 24
while at + 16 <= len(b):
    n = struct.unpack_from('<I', b, at + 8)[0]
    recs.append((b[at:at + 16], b[at + 16:at + 16 + n]))
    at += 16 + n
def ids(f):
    o = 12
    while f[o:o + 2] in (b'\x81\x00', b'\x88\xa8'):
        o += 4
    assert f[o:o + 2] == b'\xae\xfe', 'an eCPRI frame'
    return struct.unpack_from('>H', f, o + 6)[0], f[o + 8]
frames = [f for _, f in recs]
out, k = [], 0
while k < len(frames):
    f = frames[k]
    if k % 50 == 17:
        k += 1
        continue
    out.append(f)
    if k % 37 == 5:
        out.append(f)
    if k % 23 == 11 and k + 2 < len(frames) and ids(frames[k + 2])[0] == ids(f)[0]:
        out[-1], frames[k + 2] = frames[k + 2], f
    k += 1
times = [h for h, _ in recs][:len(out)] + [recs[-1][0]] * max(0, len(out) - len(recs))
with open(dst, 'wb') as w:
    w.write(hdr)
    for h, f in zip(times, out):
        w.write(h[:8] + struct.pack('<II', len(f), len(f)) + f)
nxt, cnt = {}, {}
for f in out:
    e, s = ids(f)
    c = cnt.setdefault(e, [0, 0, 0])
    if e not in nxt:
        nxt[e] = (s + 1) & 255
        continue
    n = nxt[e]
    if s == n:
        nxt[e] = (n + 1) & 255
    elif s == (n - 1) & 255:
        c[1] += 1
    elif (s - n) & 255 < 128:
        c[0] += (s - n) & 255
        nxt[e] = (s + 1) & 255
    else:
        c[2] += 1
json.dump({str(e): c for e, c in cnt.items()}, open(want, 'w'))
print(f'sequence ids: {len(recs)} frames -> {len(out)}; want (gaps, duplicates, out of order) by eAxC {cnt}')
PY
  [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
  local q=$QUEUES
  QUEUES=1
  for ex in cpu gpu; do
    mkdir -p "$tmp/raw-seq-$ex"
    fh_config 9 "$mut" 1 "$ex" "{ raw: $tmp/raw-seq-$ex }" "{ pps: $CHECK_PPS }"
    "$PW" run --quiet --json "$tmp/fh-$ex.yaml" >"$tmp/sum-seq-$ex.json" 2>>"$LOG" ||
      { say "sequence ids: run on $ex failed (see $LOG)"; QUEUES=$q; return 1; }
  done
  QUEUES=$q
  cp "$tmp/sum-seq-cpu.json" "$tmp/sum-seq-gpu.json" "$RES/" 2>/dev/null
  python3 - "$tmp/sum-seq-cpu.json" "$tmp/sum-seq-gpu.json" "$tmp/seq-want.json" <<'PY' 2>&1 | tee -a "$LOG"
import json, sys
def load(f):
    t = open(f).read()
    return json.loads(t[t.index('{'):])
cpu, gpu = load(sys.argv[1]), load(sys.argv[2])
want = json.load(open(sys.argv[3]))
keys = ['seq_gaps', 'seq_duplicates', 'seq_out_of_order']
got = lambda s: {str(e['eaxc']): [e[k] for k in keys] for e in s['fronthaul'][0]['per_eaxc']}
c, g = got(cpu), got(gpu)
tot = [sum(v[i] for v in want.values()) for i in range(3)]
ok = c == want and g == want and all(t > 0 for t in tot)
print(f'sequence ids (gaps, duplicates, out of order) by eAxC: want {want}, cpu {c}, gpu {g}: '
      + ('equal' if ok else 'DIFFERENT (or a kind never seen)'))
sys.exit(0 if ok else 1)
PY
  return "${PIPESTATUS[0]}"
}
echo >>"$MD"
if want seq; then seq_check >>"$MD" || fails=$((fails + 1)); fi

echo >>"$MD"
echo "## Decompressed PRB/s ($BENCH_SLOTS slots x $LOOPS loops, $QUEUES queues, whole daemon)" >>"$MD"
echo >>"$MD"
echo "| width | executor | PRBs | elapsed s | PRB/s | 100 MHz 4T4R cells | frames/s | transport alone (parse -> count) frames/s |" >>"$MD"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |" >>"$MD"
for w in 9 14; do
  want bench || break
  cap=$tmp/bench$w.pcap
  gen_pcap "$w" "$BENCH_SLOTS" "$cap" || { say "BFP$w: bench capture failed"; fails=$((fails + 1)); continue; }
  for ex in gpu cpu; do
    fh_config "$w" "$cap" "$LOOPS" "$ex" none unlimited transport
    "$PW" run --quiet --json "$tmp/fh-$ex.yaml" >"$tmp/transport-$w-$ex.json" 2>>"$LOG" ||
      say "BFP$w: transport run on $ex failed (see $LOG)"
    fh_config "$w" "$cap" "$LOOPS" "$ex" none
    if "$PW" run --quiet --json "$tmp/fh-$ex.yaml" >"$tmp/bench-$w-$ex.json" 2>>"$LOG"; then
      python3 - "$tmp/bench-$w-$ex.json" "$w" "$ex" "$tmp/transport-$w-$ex.json" <<'PY' | tee -a "$LOG" >>"$MD"
import json, sys
def load(f):
    t = open(f).read()
    return json.loads(t[t.index('{'):])
s = load(sys.argv[1])
f = s['fronthaul'][0]
prbs, el = f['prbs'], s['elapsed_s']
closed = sum(e.get('slot_closed', 0) for e in f['per_eaxc'])
rate = prbs / el if el > 0 else 0.0
fps = s['rx_frames'] / el if el > 0 else 0.0
try:
    t = load(sys.argv[4])
    tfps = f"{t['rx_frames'] / t['elapsed_s'] / 1e6:.3f} M" if t['elapsed_s'] > 0 else '-'
except (OSError, ValueError, KeyError):
    tfps = '-'
if closed:
    print(f'| BFP{sys.argv[2]} | {sys.argv[3]} | not measured: {closed} packets refused as closed | | | | | |')
else:
    print(f'| BFP{sys.argv[2]} | {sys.argv[3]} | {prbs} | {el:.3f} | {rate / 1e6:.1f} M | {rate / 30.6e6:.2f} | {fps / 1e6:.3f} M | {tfps} |')
PY
      cp "$tmp/bench-$w-$ex.json" "$RES/"
    else
      say "BFP$w: bench run on $ex failed (see $LOG)"
      fails=$((fails + 1))
    fi
  done
done
echo >>"$MD"
echo "## The kernel alone: decompressed PRB/s on device-resident frames" >>"$MD"
if ! want kernel; then
  echo "(not run: STEPS=$STEPS)" >>"$MD"
elif "$PW" bench --skip throughput,e2e,l3fwd,latency --out "$RES/fh-bench" >>"$LOG" 2>&1; then
  cat "$RES/fh-bench/bench.md" >>"$MD"
  # The GPU table (9 columns): columns 8 and 9, PRBs counted and grids == CPU; the CPU table
  # (10 columns): column 10, grids == the scalar decoder's.
  if grep '^| BFP' "$RES/fh-bench/bench.md" | awk -F'|' '
      NF == 11 && ($9 !~ /true/ || $10 !~ /true/) { bad = 1 }
      NF == 12 && $11 !~ /true/ { bad = 1 }
      END { exit !bad }'; then
    say "bench: a PRB count or a grid comparison failed (see $RES/fh-bench/bench.md)"
    fails=$((fails + 1))
  fi
else
  say "bench: pktwarp bench failed (see $LOG)"
  fails=$((fails + 1))
fi
cat "$MD"
say "fronthaul check: $fails failure(s)"
[ "$fails" -eq 0 ]
