#!/usr/bin/env bash
# On the GPU machine: the fronthaul stage's slot completion latency and frame rate on the GPU
# executor, whole daemon (pcap replay -> ingest -> rings -> kernel -> completion poll, sink none),
# by ring placement (mapped, device, mapped with 8-slot rings), at radio speed (336,000 pps: two
# eAxCs of a 100 MHz 30 kHz carrier, 6 packets a symbol) and unpaced. Each run prints its summary
# line and the completion poll's own time (event=fronthaul_completion_poll).
# Usage (repository root): [SLOTS=1000] [VARIANTS_ONLY="device mapped"] scripts/gpu-fronthaul-latency.sh [BIN_DIR]
#   BIN_DIR: folder with the pktwarp binary (default .carry)
set -u
PW=${1:-.carry}/pktwarp
# name|extra executor.gpu keys; VARIANTS="device mapped" picks some by name.
ALL=("mapped|" "device|, placement: device" "mapped-r8|, ring_slots: 8")
VARIANTS=()
for v in "${ALL[@]}"; do
  if [ -z "${VARIANTS_ONLY:-}" ] || [[ " $VARIANTS_ONLY " == *" ${v%%|*} "* ]]; then VARIANTS+=("$v"); fi
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export PKTWARP_KERNEL_CACHE=$tmp/kc
for w in 9 14; do
cat >"$tmp/gen.yaml" <<E
ports:
  - name: ru
    gen:
      oran: { numerology: 1, carrier_prbs: 273, eaxcs: [0, 1], comp_method: bfp, iq_width: $w,
              comp_hdr: static, prbs_per_packet: 50, sections_per_packet: 2, slots: ${SLOTS:-200}, vlan: 100 }
  - name: out
    pcap: { tx: { path: $tmp/c$w.pcap } }
pipeline: [count]
executor: { kind: cpu }
output: { port: out }
E
"$PW" run --quiet --json "$tmp/gen.yaml" >/dev/null 2>&1
for v in "${VARIANTS[@]}"; do
name=${v%%|*}; extra=${v#*|}
for rate in "{ pps: 336000 }" unlimited; do
cat >"$tmp/r.yaml" <<E
ports:
  - name: ru
    pcap: { rx: { path: $tmp/c$w.pcap, rate: $rate } }
queues: { count: 2, burst: 32, ring_slots: 4 }
steering: { rules: $PWD/configs/rules/fronthaul-gen.steering.yaml }
pipeline:
  - parse
  - fronthaul:
      carrier_prbs: 273
      numerology: 1
      comp: { method: bfp, iq_width: $w, hdr: static }
      eaxcs: [0, 1]
      max_open_slots: 8
      slot_timeout_us: 10000000
      sink: none
  - count
executor: { kind: gpu, gpu: { burst_size: 32 $extra } }
E
NO_COLOR=1 "$PW" run --json "$tmp/r.yaml" >"$tmp/r.json" 2>"$tmp/r.err" || { echo "BFP$w $name FAILED"; tail -3 "$tmp/r.err"; continue; }
python3 - "$tmp/r.json" "BFP$w $name $rate" <<'P'
import json,sys
t=open(sys.argv[1]).read(); s=json.loads(t[t.index('{'):]); f=s['fronthaul'][0]
print(f"{sys.argv[2]:36s} el {s['elapsed_s']:.3f}s {s['rx_frames']/s['elapsed_s']/1e6:.3f} Mfps complete {f['slots_complete']} partial {f['slots_partial']} lat p50/p99 {f['slot_latency_p50_ns']/1e3:.0f}/{f['slot_latency_p99_ns']/1e3:.0f} us")
P
grep -o "fronthaul slot completion poll.*" "$tmp/r.err" | head -1
done; done; done
