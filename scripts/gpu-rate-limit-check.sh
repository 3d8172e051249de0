#!/usr/bin/env bash
# On the GPU machine: the rate_limit stage on the GPU executor against the CPU executor.
#  1. The DDoS scrubber (configs/ddos-scrubber.yaml: parse -> acl -> rate_limit -> count) on a
#     capture written here with fixed receive times (the token buckets refill by them; the
#     generator port stamps wall-clock times, which differ run to run): SYNs from sixteen
#     sources, UDP flows, DNS responses and ICMP echo, 20 us apart. Executor cpu and gpu, one
#     queue and four, modes persistent and launch, rings mapped and device: the summaries equal
#     (frames, drops by reason with `rate_limited`, counted, the ACL's hits, and the rate_limit
#     section: created / reused and every rule's matched / limited / table_full, which the GPU
#     daemon reads back from each queue's device state) and the passed frames identical (one
#     queue: in order; four: as multisets). With syn-guard in BIN_DIR, the same for
#     apps/syn-guard/syn-guard-budget.yaml (a user stage, then rate_limit) on that capture.
#  2. A SIGHUP on the GPU executor while the capture replays: the rules renamed and re-rated
#     (a config written here), the new parameter block published (`gpu_params_swap` in the log),
#     and the summary's rate_limit section holding the old rule's counts and the new one's.
# Usage (repository root): scripts/gpu-rate-limit-check.sh [BIN_DIR] [DATA] [OUT]
#   BIN_DIR folder with pktwarp (and syn-guard) (default .carry); DATA unused (kept for the
#   common signature); OUT results folder (default ./gpu-results).
# SECOND=cpu runs both sides on the CPU executor (checks the script without a GPU).
# Exit status: 0 when every comparison is equal and the reload was seen, 1 otherwise.
set -u
BIN=${1:-.carry}
RES=${3:-${OUT:-./gpu-results}}
PW=$BIN/pktwarp
SECOND=${SECOND:-gpu}
FRAMES=${FRAMES:-400000}
# The reload run replays the capture this many times (long enough to be running at the SIGHUP).
RELOAD_LOOPS=${RELOAD_LOOPS:-400}
mkdir -p "$RES"
LOG=$RES/rate-limit-check.log
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PKTWARP_KERNEL_CACHE=$tmp/kcache
fails=0
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }

# The capture: frame i at 1 s + i * 20 us; 60% SYNs from 203.0.113.1-16, 20% UDP flows, 10% DNS
# responses (source port 53), 10% ICMP echo; destinations 192.0.2.0-15.
python3 - "$tmp/scrub.pcap" "$FRAMES" <<'PY'
import struct, sys
path, n = sys.argv[1], int(sys.argv[2])
def ip4(src, dst, proto, l4):
    h = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(l4), 0x1234, 0, 64, proto, 0, bytes(src), bytes(dst))
    f = bytes([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 8, 0]) + h + l4
    return f + bytes(max(0, 60 - len(f)))
with open(path, 'wb') as out:
    out.write(struct.pack('<IHHiIII', 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))
    for i in range(n):
        src, dst, port = [203, 0, 113, 1 + i % 16], [192, 0, 2, i % 16], 1024 + i % 50000
        k = i % 10
        if k <= 5:
            f = ip4(src, dst, 6, struct.pack('!HHIIBBHHH', port, 80, 0, 0, 0x50, 0x02, 0, 0, 0))
        elif k <= 7:
            f = ip4(src, dst, 17, struct.pack('!HHHH', 4000 + i % 8, 5000, 48, 0) + bytes(40))
        elif k == 8:
            f = ip4(src, dst, 17, struct.pack('!HHHH', 53, port, 68, 0) + bytes(60))
        else:
            f = ip4(src, dst, 1, struct.pack('!BBHHH', 8, 0, 0, 1, i & 0xffff) + bytes(16))
        t = 1_000_000_000 + i * 20_000
        out.write(struct.pack('<IIII', t // 10**9, t % 10**9, len(f), len(f)) + f)
PY
say "input: $FRAMES frames, $(stat -c %s "$tmp/scrub.pcap") bytes"

# frames_equal MODE A B: the pcap files' frames equal (MODE order: in order; set: as multisets).
frames_equal() {
  python3 - "$@" <<'PY'
import struct, sys
def frames(p):
    try: b = open(p, 'rb').read()
    except OSError: return []
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

# counts JSON: what both executors must agree on (custom_stages holds the rate_limit section).
counts() {
  python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))
keys = ("rx_frames", "tx_frames", "tx_bytes", "drops", "counted", "top_rules", "acl_default", "custom_stages")
if "rx_frames" not in s: print("no summary"); sys.exit(1)
print(json.dumps({k: s.get(k) for k in keys}, sort_keys=True))' "$1"
}

# run_one BINARY CONFIG DIR KIND QUEUES [MODE PLACEMENT]: the config on the capture, passed
# frames to DIR/out.pcap, the summary in DIR/summary.json. Ports 0 and 1 are replaced (--set).
run_one() {
  local bin=$1 cfg=$2 d=$3 kind=$4 nq=$5 mode=${6:-} placement=${7:-}
  mkdir -p "$d"
  local gpu=()
  [ -n "$mode" ] && gpu=(--set "executor.gpu={ mode: $mode, placement: $placement }")
  timeout 600 "$bin" run --json "$cfg" \
    --set "ports.0={ name: wire, pcap: { rx: { path: $tmp/scrub.pcap } } }" \
    --set "ports.1={ name: out, pcap: { tx: { path: $d/out.pcap } } }" \
    --set "output={ port: out }" --set "queues.count=$nq" --set "executor.kind=$kind" \
    --set "metrics={ enabled: false }" "${gpu[@]}" >"$d/summary.json" 2>"$d/run.log"
  local rc=$?
  [ $rc = 0 ] || { say "$d: exit $rc"; tail -5 "$d/run.log" | tee -a "$LOG"; fails=$((fails + 1)); }
}

# compare NAME BINARY CONFIG QUEUES MODE PLACEMENT: cpu against $SECOND.
compare() {
  local name=$1 bin=$2 cfg=$3 nq=$4
  local order=$([ "$nq" = 1 ] && echo order || echo set)
  run_one "$bin" "$cfg" "$tmp/$name-cpu" cpu "$nq"
  run_one "$bin" "$cfg" "$tmp/$name-dut" "$SECOND" "$nq" "$5" "$6"
  r=$(frames_equal "$order" "$tmp/$name-cpu/out.pcap" "$tmp/$name-dut/out.pcap")
  rc=$?
  say "  $name passed frames: $r $([ $rc = 0 ] && echo EQUAL || echo DIFFERS)"
  [ $rc = 0 ] || fails=$((fails + 1))
  a=$(counts "$tmp/$name-cpu/summary.json"); b=$(counts "$tmp/$name-dut/summary.json")
  if [ "$a" = "$b" ] && echo "$a" | grep -q '"rate_limited", [1-9]'; then
    say "  $name counts: equal $b"
  else
    say "  $name counts DIFFER (or nothing limited): cpu $a $SECOND $b"; fails=$((fails + 1))
  fi
}

# 1. Equality.
for nq in 1 4; do
  for opts in "persistent mapped" "persistent device" "launch device"; do
    set -- $opts
    compare "scrubber-q$nq-$1-$2" "$PW" configs/ddos-scrubber.yaml $nq $1 $2
  done
done
if [ -x "$BIN/syn-guard" ]; then
  compare "syn-guard-budget" "$BIN/syn-guard" apps/syn-guard/syn-guard-budget.yaml 1 persistent mapped
else
  say "  syn-guard-budget: not run ($BIN/syn-guard missing)"
fi

# 2. SIGHUP on the executor under test: the capture replayed (loops) while the rules change.
d=$tmp/reload
mkdir -p "$d"
write_rules() { # NAME RATE: the scrubber written from this template, its SYN rule NAME at RATE.
  cat >"$d/c.yaml" <<EOF
ports:
  - name: wire
    pcap: { rx: { path: $tmp/scrub.pcap, loops: $RELOAD_LOOPS } }
queues: { count: 1, burst: 64 }
pipeline:
  - parse
  - rate_limit:
      entries: 65536
      rules:
        - { name: $1, match: { proto: tcp, tcp_flags: "syn !ack" }, key: src, rate_pps: $2, burst: 200 }
        - { name: udp_flow, match: { proto: udp }, key: flow, rate_pps: 20000, burst: 40000 }
  - count
executor: { kind: $SECOND }
metrics: { enabled: false }
EOF
}
write_rules syn_flood 100
RUST_LOG=info timeout 600 "$PW" run --json "$d/c.yaml" >"$d/summary.json" 2>"$d/run.log" &
pid=$!
sleep 3
write_rules syn_budget 150
kill -HUP $pid 2>/dev/null
wait $pid
rc=$?
swaps=$(grep -c 'gpu_params_swap' "$d/run.log")
section=$(python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))
c = dict(next(x for x in s["custom_stages"] if x["name"] == "rate_limit")["counters"])
print(c.get("syn_flood.matched", 0), c.get("syn_budget.matched", 0))' "$d/summary.json" 2>/dev/null || echo "0 0")
set -- $section
if [ $rc = 0 ] && [ "${1:-0}" -gt 0 ] && [ "${2:-0}" -gt 0 ] && { [ "$SECOND" = cpu ] || [ "$swaps" -ge 1 ]; }; then
  say "  reload: exit 0, $swaps parameter swap(s), syn_flood matched $1, syn_budget matched $2"
else
  say "  reload FAILED: exit $rc, $swaps swap(s), syn_flood / syn_budget matched: $section"
  tail -5 "$d/run.log" | tee -a "$LOG"
  fails=$((fails + 1))
fi
say "rate-limit check: $fails failure(s)"
[ $fails = 0 ]
