#!/usr/bin/env bash
# On the GPU machine: the `inspect` stage on the GPU executor against the CPU executor.
#  1. The IDS pipeline of configs/ids.yaml (parse -> conntrack -> inspect -> count, alerts to the
#     host and an EVE log) with `gpu_rules_only: true` (the rules the GPU stage takes: every rule
#     that loads, flowbits / threshold included), on executor cpu and executor gpu, 1 queue and 4: the shipped rules on the
#     shipped capture (configs/ids.pcap), and the shared ET Open rules on it and on the largest
#     Ethernet captures of the tcpdump corpus. The summaries equal (frames, drops by reason,
#     counted, the inspect stage's counters and top rules, conntrack's), the passed frames
#     and the frames sent to the host identical (1 queue: in order; 4: as sets), and the EVE
#     lines equal as sets (the GPU's come through its alert ring, in ring order).
#  2. Throughput: 1518-byte generated frames (5% with planted contents two ET Open rules alert
#     on: sids 2100498, 2001597) through
#     parse -> inspect -> count with ET Open (gpu_rules_only) on the GPU executor, end to end
#     (Gbit/s and Mpps from the summary), against parse -> count on the GPU and the same
#     inspect pipeline on the CPU executor, same call, 4 queues.
# Usage (repository root): scripts/gpu-inspect-check.sh [CARRY] [DATA] [OUT]
#   CARRY folder with pktwarp (default .carry); DATA with ids/etopen-2019 and pcaps/ (default
#   CARRY/data); OUT results folder (default ./gpu-results).
# SECOND=cpu checks the script on a machine without a GPU (both sides on the CPU executor).
# Exit status: 0 when every comparison is equal and the throughput runs ran, 1 otherwise.
set -u
CARRY=${1:-.carry}
DATA=${2:-$CARRY/data}
RES=${3:-${OUT:-./gpu-results}}
PW=$CARRY/pktwarp
SECOND=${SECOND:-gpu}
CAPTURES=${CAPTURES:-4}
TP_FRAMES=${TP_FRAMES:-2000000}
ET=$DATA/ids/etopen-2019
mkdir -p "$RES"
LOG=$RES/inspect-check.log
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PKTWARP_KERNEL_CACHE=$tmp/kcache
fails=0
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }
[ -d "$ET" ] || { say "no ET Open rules at $ET"; exit 1; }
ROOT=$(pwd)

# frames_equal MODE A B: the pcap files' frames equal (MODE order: in order; set: as multisets;
# two missing or empty files are equal).
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
sys.exit(0 if (len(fa) == len(fb) and diff is None) else 1)
PY
}

# make_cfg DIR KIND QUEUES RULES INPUT [THROUGHPUT]: the IDS pipeline on capture INPUT (or, with
# THROUGHPUT = inspect | plain, generated 1518-byte frames without output files).
make_cfg() {
  python3 - "$@" "$ROOT" "$TP_FRAMES" <<'PY'
import sys
d, kind, nq, rules, inp = sys.argv[1:6]
tp = sys.argv[6] if len(sys.argv) > 8 else ""
root, tp_frames = sys.argv[-2], sys.argv[-1]
insp = f"""  - inspect:
      rules: ["{rules}"]
      strict: false
      gpu_rules_only: true
      vars: {{ HOME_NET: "[10.0.0.0/8,172.16.0.0/12,192.168.0.0/16]", EXTERNAL_NET: "!$HOME_NET" }}
"""
if tp:
    port = f"""  - name: wire
    gen:
      count: {tp_frames}
      size: 1518
      seed: 7
      flows: {{ src: 10.0.0.0/8, dst: 192.168.0.0/16, dst_ports: 1-1023 }}
      payload:
        ratio: 0.05
        fill: random
        plant: [{{ text: "uid=0(root)" }}, {{ hex: "55 4b 30 30 37 36 30 53 37 47 31 30" }}, {{ text: "cmd.exe" }}]
"""
    stages = "  - parse\n" + (insp if tp == "inspect" else "") + "  - count\n"
    out = ""
else:
    port = f"""  - name: wire
    pcap:
      rx: {{ path: {inp} }}
  - name: out
    pcap:
      tx: {{ path: {d}/out.pcap }}
"""
    stages = ("  - parse\n  - conntrack: { entries: 65536 }\n" + insp + "      alert_to: host\n"
              + f"      eve: {{ path: {d}/eve.json, queue: 1048576 }}\n  - count\n")
    out = f"output:\n  port: out\n  to_host:\n    pcap: {d}/host.pcap\n"
open(f"{d}/c.yaml", "w").write(f"""ports:
{port}queues:
  count: {nq}
  burst: 32
pipeline:
{stages}executor:
  kind: {kind}
{out}metrics: {{ enabled: false }}
""")
PY
}

# run_dir DIR NAME: runs DIR/c.yaml, the summary in DIR/summary.json.
run_dir() {
  local d=$1 name=$2
  timeout 600 "$PW" run --json "$d/c.yaml" >"$d/summary.json" 2>"$d/run.log"
  local rc=$?
  say "$name: exit $rc, executor $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("executor"))' "$d/summary.json" 2>/dev/null)"
  [ $rc = 0 ] || { tail -5 "$d/run.log" | tee -a "$LOG"; fails=$((fails + 1)); }
}

# counts JSON: what both executors must agree on (the inspect section without its generation).
counts() {
  python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))
if "rx_frames" not in s: print("no summary"); sys.exit(1)
keys = ("rx_frames", "tx_frames", "tx_bytes", "drops", "counted", "custom_stages")
print(json.dumps({k: s.get(k) for k in keys}, sort_keys=True))' "$1"
}

alerts() {
  python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))
c = [x for x in s.get("custom_stages", []) if x.get("name") == "inspect"]
print(dict(c[0]["counters"]).get("alerts", "?") if c else "?")' "$1" 2>/dev/null
}

# compare NAME RULES INPUT: cpu against $SECOND, 1 and 4 queues.
compare() {
  local base=$1 rules=$2 inp=$3
  for nq in 1 4; do
    local mode name=$base-q$nq
    mode=$([ $nq = 1 ] && echo order || echo set)
    mkdir -p "$tmp/$name-ref" "$tmp/$name-dut"
    make_cfg "$tmp/$name-ref" cpu $nq "$rules" "$inp"
    make_cfg "$tmp/$name-dut" "$SECOND" $nq "$rules" "$inp"
    run_dir "$tmp/$name-ref" "$name cpu"
    run_dir "$tmp/$name-dut" "$name $SECOND"
    for f in out host; do
      r=$(frames_equal $mode "$tmp/$name-ref/$f.pcap" "$tmp/$name-dut/$f.pcap")
      rc=$?
      say "  $name $f frames: $r $([ $rc = 0 ] && echo EQUAL || echo DIFFERS)"
      [ $rc = 0 ] || fails=$((fails + 1))
    done
    if cmp -s <(sort "$tmp/$name-ref/eve.json" 2>/dev/null) <(sort "$tmp/$name-dut/eve.json" 2>/dev/null); then
      say "  $name EVE lines: equal ($(wc -l <"$tmp/$name-ref/eve.json" 2>/dev/null || echo 0) lines, as sets)"
    else
      say "  $name EVE lines DIFFER: $(wc -l <"$tmp/$name-ref/eve.json") vs $(wc -l <"$tmp/$name-dut/eve.json")"
      fails=$((fails + 1))
    fi
    a=$(counts "$tmp/$name-ref/summary.json"); b=$(counts "$tmp/$name-dut/summary.json")
    if [ "$a" = "$b" ]; then
      say "  $name counts: equal ($(alerts "$tmp/$name-ref/summary.json") alerts)"
    else
      say "  $name counts DIFFER: cpu $a"; say "    $SECOND $b"; fails=$((fails + 1))
    fi
  done
}

# 1. Equal results.
compare shipped "$ROOT/configs/rules/ids.rules" "$ROOT/configs/ids.pcap"
compare etopen-ids "$ET/*.rules" "$ROOT/configs/ids.pcap"
if [ -f "$DATA/pcaps/INDEX.tsv" ]; then
  # Every Ethernet capture of the corpus (classic pcap) as one capture, record times made
  # increasing; and the largest of them alone.
  python3 - "$DATA/pcaps" "$tmp/corpus.pcap" <<'PY'
import os, struct, sys
d, out = sys.argv[1:3]
recs = []
for line in open(os.path.join(d, "INDEX.tsv")):
    c = line.rstrip("\n").split("\t")
    if len(c) < 3 or not c[2].startswith("ether "): continue
    try: b = open(os.path.join(d, c[0]), "rb").read()
    except OSError: continue
    if len(b) < 24 or b[:4] not in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d"): continue
    e = "<" if b[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    if struct.unpack(e + "I", b[20:24])[0] & 0xffff != 1: continue
    i = 24
    while i + 16 <= len(b):
        incl = struct.unpack(e + "I", b[i + 8:i + 12])[0]
        if incl > 262144 or i + 16 + incl > len(b): break
        recs.append(b[i + 16:i + 16 + incl]); i += 16 + incl
with open(out, "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1))
    for k, r in enumerate(recs):
        f.write(struct.pack("<IIII", 1700000000 + k // 1000000, k % 1000000, len(r), len(r)) + r)
print(f"{len(recs)} frames")
PY
  say "corpus capture: $(python3 -c 'import os,sys; print(os.path.getsize(sys.argv[1]))' "$tmp/corpus.pcap") bytes"
  compare etopen-corpus "$ET/*.rules" "$tmp/corpus.pcap"
  caps=$(awk -F'\t' '$3 ~ /^ether / {print $1}' "$DATA/pcaps/INDEX.tsv" | while read -r f; do
    [ -f "$DATA/pcaps/$f" ] && echo "$(stat -c %s "$DATA/pcaps/$f") $f"; done | sort -rn | head -"$CAPTURES" | cut -d' ' -f2)
  for f in $caps; do
    compare "etopen-$(basename "$f" | tr -c 'A-Za-z0-9\n' '_')" "$ET/*.rules" "$DATA/pcaps/$f"
  done
else
  say "no tcpdump corpus at $DATA/pcaps: the corpus captures were not compared"
  fails=$((fails + 1))
fi

# 2. Throughput, same call: inspect on the second executor, plain on it, inspect on the CPU.
line="throughput (4 queues, $TP_FRAMES frames of 1518 B, ET Open with gpu_rules_only):"
for which in "inspect $SECOND" "plain $SECOND" "inspect cpu"; do
  set -- $which
  d=$tmp/tp-$1-$2
  mkdir -p "$d"
  make_cfg "$d" "$2" 4 "$ET/*.rules" - "$1"
  run_dir "$d" "tp $1 $2"
  r=$(python3 - "$d/summary.json" <<'PY' 2>/dev/null || echo "?"
import json, sys
s = json.load(open(sys.argv[1]))
c = [x for x in s.get("custom_stages", []) if x.get("name") == "inspect"]
a = dict(c[0]["counters"]).get("alerts") if c else "-"
print(f"{s['gbps']:.2f} Gbit/s {s['mpps']:.3f} Mpps ({a} alerts)")
PY
)
  line="$line $1/$2 $r;"
done
say "$line"
say "inspect check: $fails failure(s)"
[ $fails = 0 ]
