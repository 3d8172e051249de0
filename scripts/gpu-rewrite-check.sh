#!/usr/bin/env bash
# On the GPU machine: the rewrite stages and GPU-initiated TX.
#  1. l2fwd and l3fwd (the shipped configs, generator input, one queue and four) on executor cpu
#     and executor gpu: every output capture's frames identical (one queue: in order; four: as
#     sets, queues interleave differently in each run); the summaries' counts equal.
#  1b. Frames sent from the ring slot they ran in (the slot held until its frames are sent):
#     l3fwd on one queue with a ring of 2 slots (every submit waits for the TX thread to
#     release a slot) on mapped and device rings, persistent and launch modes: captures
#     identical in order to the CPU executor's, counts equal, and the run log's tx_path
#     event says gpu_slot.
#  2. A responder and the slow path: ARP and ICMP / ICMPv6 echo requests for the responder's
#     addresses (and others, and UDP to port 53 that an ACL rule sends to the host): the GPU's
#     replies, pass-through frames and slow-path frames identical to the CPU's; replies present.
#     Timed send: parse -> tx_time on a replayed capture; record times (the send times the
#     TX ring carries) and bytes identical to the CPU executor's.
#  3. `pktwarp bench` l3fwd end to end (64 B, parse -> route -> ttl -> l2fwd -> count, TX ring),
#     against 595.2 Mpps (400 GbE), device and mapped rings, 1 to 12 queues.
# Usage (repository root): scripts/gpu-rewrite-check.sh [BIN_DIR] [DATA] [OUT]
#   BIN_DIR folder with pktwarp (default .carry); DATA with classbench/ (default .carry/data).
# Exit status: 0 when every comparison is equal and the bench ran, 1 otherwise.
set -u
BIN=${1:-.carry}
DATA=${2:-.carry/data}
RES=${3:-${OUT:-./gpu-results}}
PW=$BIN/pktwarp
# The executor compared with the CPU's (SECOND=cpu checks the script itself on a machine
# without a GPU: both sides then run the CPU executor).
SECOND=${SECOND:-gpu}
mkdir -p "$RES"
LOG=$RES/rewrite-check.log
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PKTWARP_KERNEL_CACHE=$tmp/kcache
fails=0
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }

# frames_equal MODE A B: the pcap files' frames equal (MODE order: in order; set: as multisets).
frames_equal() {
  python3 - "$@" <<'PY'
import struct, sys
def frames(p):
    b = open(p, 'rb').read()
    if len(b) < 24: return []
    e = '<' if b[:4] in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1') else '>'
    out, i = [], 24
    while i + 16 <= len(b):
        incl = struct.unpack(e + 'I', b[i + 8:i + 12])[0]
        out.append(b[i + 16:i + 16 + incl]); i += 16 + incl
    return out
mode, a, b = sys.argv[1:4]
fa, fb = frames(a), frames(b)
if mode == 'set': fa, fb = sorted(fa), sorted(fb)
diff = next((k for k, (x, y) in enumerate(zip(fa, fb)) if x != y), None)
print(f"{len(fa)} vs {len(fb)} frames" + ("" if diff is None else f", first difference at {diff}"))
sys.exit(0 if (len(fa) == len(fb) and diff is None and len(fa) > 0) else 1)
PY
}

# run_cfg SRC NAME KIND QUEUES SIDE [GPU-OPTIONS]: the shipped config SRC changed by --set only:
# its outputs under $tmp/NAME-SIDE (ref: the CPU executor's run, dut: the one compared with it),
# 40000 frames, QUEUES queues, executor KIND; with GPU-OPTIONS, `executor.gpu` set to them and a
# ring of 2 slots.
declare -A OUTPUTS=( # each config's pcap outputs: port index and file name
  [configs/l2fwd.yaml]="1:l2fwd.pcap"
  [configs/l3fwd.yaml]="1:l3fwd-port0.pcap 2:l3fwd-port1.pcap"
)
run_cfg() {
  local src=$1 name=$2 kind=$3 nq=$4 d=$tmp/$2-$5 gpu=${6:-}
  mkdir -p "$d"
  local set=(--set ports.0.gen.count=40000 --set "queues.count=$nq" --set "executor.kind=$kind"
    --set metrics.enabled=false)
  for o in ${OUTPUTS[$src]}; do set+=(--set "ports.${o%%:*}.pcap.tx.path=$d/${o#*:}"); done
  [ -n "$gpu" ] && set+=(--set "executor.gpu=$gpu" --set queues.ring_slots=2)
  timeout 300 "$PW" run --json "$src" "${set[@]}" >"$d/summary.json" 2>"$d/run.log"
  local rc=$?
  say "$name $kind ($nq queues): exit $rc, executor $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("executor"))' "$d/summary.json" 2>/dev/null)"
  [ $rc = 0 ] || { tail -5 "$d/run.log" | tee -a "$LOG"; fails=$((fails + 1)); }
}

# counts JSON: the counts both executors must agree on.
counts() {
  python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))
keys = ("rx_frames", "tx_frames", "tx_bytes", "drops", "counted", "outputs", "custom_stages")
missing = [k for k in keys[:3] if k not in s]
if missing: print("missing " + ",".join(missing)); sys.exit(1)
d = {k: s.get(k) for k in keys}
d["outputs"] = [(o.get("role"), o.get("frames"), o.get("bytes"), o.get("failed")) for o in (s.get("outputs") or [])]
print(json.dumps(d, sort_keys=True))' "$1"
}

compare_run() { # NAME QUEUES MODE OUTPUTS...
  local name=$1 nq=$2 mode=$3; shift 3
  for o in "$@"; do
    local r
    r=$(frames_equal "$mode" "$tmp/$name-ref/$o" "$tmp/$name-dut/$o")
    local rc=$?
    say "  $name ($nq queues) $o: $r $([ $rc = 0 ] && echo EQUAL || echo DIFFERS)"
    [ $rc = 0 ] || fails=$((fails + 1))
  done
  if [ "$(counts "$tmp/$name-ref/summary.json")" = "$(counts "$tmp/$name-dut/summary.json")" ]; then
    say "  $name ($nq queues) counts: equal $(counts "$tmp/$name-dut/summary.json")"
  else
    say "  $name ($nq queues) counts DIFFER: cpu $(counts "$tmp/$name-ref/summary.json") gpu $(counts "$tmp/$name-dut/summary.json")"
    fails=$((fails + 1))
  fi
}

for nq in 1 4; do
  mode=$([ $nq = 1 ] && echo order || echo set)
  run_cfg configs/l2fwd.yaml "l2fwd$nq" cpu $nq ref; run_cfg configs/l2fwd.yaml "l2fwd$nq" "$SECOND" $nq dut
  compare_run "l2fwd$nq" $nq $mode l2fwd.pcap
  run_cfg configs/l3fwd.yaml "l3fwd$nq" cpu $nq ref; run_cfg configs/l3fwd.yaml "l3fwd$nq" "$SECOND" $nq dut
  compare_run "l3fwd$nq" $nq $mode l3fwd-port0.pcap l3fwd-port1.pcap
done

# 1b. Frames sent from the ring slot: a ring of two slots keeps every slot held while the TX
# thread writes, on each ring placement and mode.
for opts in "persistent mapped" "persistent device" "launch mapped" "launch device"; do
  set -- $opts
  name="slot-$1-$2"
  run_cfg configs/l3fwd.yaml "$name" cpu 1 ref
  run_cfg configs/l3fwd.yaml "$name" "$SECOND" 1 dut "{ mode: $1, placement: $2 }"
  compare_run "$name" 1 order l3fwd-port0.pcap l3fwd-port1.pcap
  if [ "$SECOND" = gpu ]; then
    if grep -q 'tx_path.*gpu_slot' "$tmp/$name-dut/run.log"; then
      say "  $name: sent from the held slots (tx_path gpu_slot)"
    else
      say "  $name: NO tx_path gpu_slot in the run log"; fails=$((fails + 1))
    fi
  fi
done

# 2. Responder and slow path, from a crafted capture.
python3 - "$tmp/resp-in.pcap" <<'PY'
import struct, sys
def csum(b):
    if len(b) % 2: b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while s > 0xffff: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
eth = lambda dst, et: dst + bytes([2, 0, 0, 0, 0, 7]) + struct.pack('!H', et)
def ip4(src, dst, proto, payload):
    h = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(payload), 1, 0, 64, proto, 0, bytes(src), bytes(dst))
    return h[:10] + struct.pack('!H', csum(h)) + h[12:] + payload
def icmp4(t, ident):
    b = struct.pack('!BBHHH', t, 0, 0, ident, 1) + bytes(range(32))
    return b[:2] + struct.pack('!H', csum(b)) + b[4:]
def ip6(src, dst, nh, payload):
    return struct.pack('!IHBB', 6 << 28, len(payload), nh, 64) + src + dst + payload
def icmp6(src, dst, t, ident):
    b = struct.pack('!BBHHH', t, 0, 0, ident, 1) + bytes(range(32))
    ph = src + dst + struct.pack('!I3xB', len(b), 58)
    return b[:2] + struct.pack('!H', csum(ph + b)) + b[4:]
def udp4(src, dst, dport):
    b = struct.pack('!HHHH', 40000, dport, 8 + 18, 0) + bytes(18)
    return ip4(src, dst, 17, b)
def arp(tip):
    return struct.pack('!HHBBH6s4s6s4s', 1, 0x0800, 6, 4, 1, bytes([2, 0, 0, 0, 0, 7]), bytes([192, 0, 2, 50]), bytes(6), bytes(tip))
bc, us = b'\xff' * 6, bytes([2, 0, 0, 0, 0, 0x99])
a6 = lambda last: bytes.fromhex('20010db8000000000000000000000000')[:15] + bytes([last])
frames = []
for i in range(200):
    frames.append(eth(bc, 0x0806) + arp([192, 0, 2, 1 if i % 2 == 0 else 99]))
    frames.append(eth(us, 0x0800) + ip4([192, 0, 2, 50], [192, 0, 2, 1 if i % 3 else 98], 1, icmp4(8, i)))
    frames.append(eth(us, 0x86dd) + ip6(a6(0x50), a6(1 if i % 3 else 0x98), 58, icmp6(a6(0x50), a6(1 if i % 3 else 0x98), 128, i)))
    frames.append(eth(us, 0x0800) + udp4([192, 0, 2, 50], [198, 51, 100, 1], 53 if i % 2 else 80))
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    for i, fr in enumerate(frames):
        fr = fr + bytes(max(0, 60 - len(fr)))
        f.write(struct.pack('<IIII', i // 1000000, i % 1000000, len(fr), len(fr)) + fr)
PY
for side in ref dut; do
  k=$([ $side = ref ] && echo cpu || echo "$SECOND")
  d=$tmp/resp1-$side; mkdir -p "$d"
  cat >"$d/c.yaml" <<YAML
ports:
  - name: a
    pcap: { rx: { path: $tmp/resp-in.pcap }, tx: { path: $d/a.pcap } }
  - name: b
    pcap: { tx: { path: $d/b.pcap } }
queues: { count: 1 }
pipeline:
  - parse
  - acl: { rules: $d/rules.yaml, default: pass }
  - respond: { mac: '02:00:00:00:00:99', ipv4: [192.0.2.1], ipv6: ['2001:db8::1'] }
  - count
executor: { kind: $k }
output: { port: b, to_host: { pcap: $d/slow.pcap } }
YAML
  printf 'rules:\n  - { proto: udp, dst_port: 53, action: to-host }\n' >"$d/rules.yaml"
  timeout 300 "$PW" run --json "$d/c.yaml" >"$d/summary.json" 2>"$d/run.log"
  rc=$?
  say "respond $k: exit $rc"
  [ $rc = 0 ] || { tail -5 "$d/run.log" | tee -a "$LOG"; fails=$((fails + 1)); }
done
compare_run resp1 1 order a.pcap b.pcap slow.pcap
say "  replies from the GPU out of port a: $(python3 -c 'import sys,os; print(os.path.getsize(sys.argv[1]))' "$tmp/resp1-dut/a.pcap") bytes of capture"

# 2b. ACL rules that rewrite (set: dscp / dst_mac / port), mirror and to-host, on generated
# traffic whose destination ports hit them.
for side in ref dut; do
  k=$([ $side = ref ] && echo cpu || echo "$SECOND")
  d=$tmp/aclrw-$side; mkdir -p "$d"
  cat >"$d/rules.yaml" <<'RULES'
rules:
  - { name: low, proto: udp, dst_port: 1-300, action: pass, set: { dscp: 46, dst_mac: '02:00:00:00:00:aa', port: alt } }
  - { name: mid, proto: tcp, dst_port: 301-600, action: mirror, set: { dscp: 10, port: out } }
  - { name: v6, dst: '2001:db8::/32', action: to-host, set: { dst_mac: '02:00:00:00:00:bb' } }
  - { name: drop, dst_port: 601-700, action: drop }
RULES
  cat >"$d/c.yaml" <<YAML
ports:
  - name: g
    gen: { count: 40000, size: imix, seed: 3, flows: { dst_ports: 1-1023, ipv6_share: 0.2 } }
  - name: out
    pcap: { tx: { path: $d/out.pcap } }
  - name: alt
    pcap: { tx: { path: $d/alt.pcap } }
  - name: mon
    pcap: { tx: { path: $d/mon.pcap } }
queues: { count: 1 }
pipeline:
  - parse
  - acl: { rules: $d/rules.yaml, default: pass }
  - count
executor: { kind: $k }
output: { port: out, mirror: mon, to_host: { pcap: $d/slow.pcap } }
YAML
  timeout 300 "$PW" run --json "$d/c.yaml" >"$d/summary.json" 2>"$d/run.log"
  rc=$?
  say "acl rewrite $k: exit $rc$(grep -o 'Composed template\|Fused template' "$d/run.log" | head -1 | sed 's/^/, /')"
  [ $rc = 0 ] || { tail -5 "$d/run.log" | tee -a "$LOG"; fails=$((fails + 1)); }
done
compare_run aclrw 1 order out.pcap alt.pcap mon.pcap slow.pcap

# 2c. Timed send: a replayed capture (its record times are the receive times) through
# parse -> tx_time -> count; the GPU's TX ring carries each frame's send time, which the pcap
# output writes as the record time: records (time and bytes) identical to the CPU's, and every
# time the input's plus the delay.
for side in ref dut; do
  k=$([ $side = ref ] && echo cpu || echo "$SECOND")
  d=$tmp/timed-$side; mkdir -p "$d"
  cat >"$d/c.yaml" <<YAML
ports:
  - name: a
    pcap: { rx: { path: $tmp/resp-in.pcap, loops: 20 } }
  - name: out
    pcap: { tx: { path: $d/out.pcap } }
queues: { count: 1 }
pipeline:
  - parse
  - tx_time: { delay_ns: 1500 }
  - count
executor: { kind: $k }
output: { port: out }
YAML
  timeout 300 "$PW" run --json "$d/c.yaml" >"$d/summary.json" 2>"$d/run.log"
  rc=$?
  say "timed send $k: exit $rc"
  [ $rc = 0 ] || { tail -5 "$d/run.log" | tee -a "$LOG"; fails=$((fails + 1)); }
done
compare_run timed 1 order out.pcap
r=$(python3 - "$tmp/timed-ref/out.pcap" "$tmp/timed-dut/out.pcap" <<'PY'
import struct, sys
def recs(p):
    b = open(p, 'rb').read()
    ns = b[:4] == b'\x4d\x3c\xb2\xa1'
    out, i = [], 24
    while i + 16 <= len(b):
        s, f, incl = struct.unpack('<III', b[i:i + 12])
        out.append((s * 10**9 + (f if ns else f * 1000), b[i + 16:i + 16 + incl])); i += 16 + incl
    return out
a, b = recs(sys.argv[1]), recs(sys.argv[2])
# The input's first record is at time 0, i.e. without a receive time: no send time, so it is
# stamped with the wall clock when sent (after 10^15 ns), in both runs at another moment.
wall = lambda t: t > 10**15
bad = sum(1 for (t, _), (u, _) in zip(a, b) if t != u and not (wall(t) and wall(u)))
untimed = sum(1 for t, _ in a if wall(t))
print(f"{len(a)} vs {len(b)} records, {bad} with another time ({untimed} without a send time)")
sys.exit(0 if a and len(a) == len(b) and bad == 0 and untimed == 1 else 1)
PY
)
rc=$?
say "  timed send record times: $r $([ $rc = 0 ] && echo EQUAL || echo DIFFER)"
[ $rc = 0 ] || fails=$((fails + 1))

# 3. l3fwd end to end against 400 GbE.
say "=== bench l3fwd"
timeout 300 "$PW" bench --classbench "$DATA/classbench" --sets acl1_10K --skip throughput,e2e,latency,fronthaul \
  --e2e-seconds "${E2E_SECONDS:-2}" --e2e-queues "${E2E_QUEUES:-1,4,8,12}" --e2e-ctas "${E2E_CTAS:-10}" --out "$RES/bench-l3fwd" 2>&1 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
say "rewrite check: $fails failure(s)"
[ $fails = 0 ]
