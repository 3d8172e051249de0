#!/usr/bin/env bash
# On the GPU machine: IPFIX flow export from the GPU executor into a real collector, against the
# CPU executor's export of the same capture in the same call. The carried pktwarp daemon runs
# parse -> conntrack -> flow_stats -> count on one capture made of the tcpdump corpus' Ethernet
# captures (DATA/pcaps/tcpdump, laid one after another: each capture's frames keep their order
# and spacing, gaps capped at 60 s, 2 s between captures; frames over MAX_FRAME bytes left out,
# as a GPU ring slot may not hold them and the check is of the export), exporting to the carried nfcapd
# (CARRY/nfdump, scripts/nfdump-bundle.sh) on loopback; `nfdump -R` of each executor's flows
# must be equal: the same flows (addresses, ports, protocol) with the same packets and bytes per
# direction, and the same start, duration and TCP flags. The CPU executor's export equals
# tshark's conversation statistics in CI (pipeline/tests/flow_export.rs), so CPU == GPU closes
# the chain to tshark. Also per run: exit 0, the executor asked for, the exporter's records
# (its `ipfix_export_end` log line) all at nfdump, no send error, no record dropped.
# Usage (repository root): scripts/gpu-ipfix-check.sh [CARRY] [DATA] [OUT]
#   CARRY  folder with pktwarp and nfdump/ (default .carry); DATA with pcaps/ (default CARRY/data);
#   OUT    results folder (default ./gpu-results).
#   env: SECOND (or EXECUTOR): the executor compared with the CPU's (default gpu; cpu checks the
#        script on a machine without a GPU), QUEUES (default "1 4"), NFDUMP (the bundle folder),
#        GPU_OPTS (an executor.gpu mapping, e.g. "{ mode: launch }"), MAX_FRAME (default 9216),
#        TABLE: `conntrack` (default: flow_stats over conntrack's table) or `own` (parse ->
#        flow_stats -> count, flow_stats with a table of its own).
# Exit status: 0 when every comparison is equal, 1 otherwise.
set -u
CARRY=${1:-.carry}
DATA=${2:-$CARRY/data}
RES=${3:-${OUT:-./gpu-results}}
PW=$CARRY/pktwarp
NF=${NFDUMP:-$CARRY/nfdump}
SECOND=${SECOND:-${EXECUTOR:-gpu}}
QUEUES=${QUEUES:-1 4}
GPU_OPTS=${GPU_OPTS:-}
MAX_FRAME=${MAX_FRAME:-9216}
TABLE=${TABLE:-conntrack}
case "$TABLE" in
  conntrack) STAGES=$'  - conntrack:\n      entries: 65536\n  - flow_stats:\n      active_timeout_s: 604800' ;;
  own) STAGES=$'  - flow_stats:\n      entries: 65536\n      active_timeout_s: 604800' ;;
  *) echo "ipfix-check: TABLE=$TABLE: conntrack or own" >&2; exit 1 ;;
esac
mkdir -p "$RES"
LOG=$RES/ipfix-check.log
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }
for f in "$PW" "$NF/bin/nfcapd" "$NF/bin/nfdump"; do
  [ -x "$f" ] || { say "ipfix-check: $f missing (scripts/gpu-carry.sh, scripts/nfdump-bundle.sh)"; exit 1; }
done
[ -d "$DATA/pcaps/tcpdump" ] || { say "ipfix-check: no $DATA/pcaps/tcpdump"; exit 1; }
NFLIB=$(cd "$NF/lib" && pwd)
tmp=$(mktemp -d)
nfpid=
trap '[ -n "$nfpid" ] && kill "$nfpid" 2>/dev/null; rm -rf "$tmp"' EXIT
export PKTWARP_KERNEL_CACHE=$tmp/kcache
fails=0

# The shared capture: the corpus' classic pcap files of link type Ethernet, one after another.
python3 - "$DATA/pcaps/tcpdump" "$tmp/corpus.pcap" "$MAX_FRAME" <<'PY' | tee -a "$LOG"
import glob, os, struct, sys
src, dst, max_frame = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = open(dst, "wb")
out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
now_us, files, frames, big = 1_700_000_000 * 10**6, 0, 0, 0
for path in sorted(glob.glob(os.path.join(src, "*"))):
    b = open(path, "rb").read()
    if len(b) < 24:
        continue
    magic = b[:4]
    kinds = {b"\xd4\xc3\xb2\xa1": ("<", 1000), b"\xa1\xb2\xc3\xd4": (">", 1000),
             b"\x4d\x3c\xb2\xa1": ("<", 1), b"\xa1\xb2\x3c\x4d": (">", 1)}
    if magic not in kinds:
        continue  # pcapng and others
    e, ns_per = kinds[magic]
    if struct.unpack(e + "I", b[20:24])[0] & 0xFFFF != 1:
        continue  # not Ethernet
    i, prev, n = 24, None, 0
    while i + 16 <= len(b):
        sec, frac, incl, orig = struct.unpack(e + "IIII", b[i:i + 16])
        if incl > 262144 or i + 16 + incl > len(b):
            break  # a truncated or broken record ends the file, as a reader stops there
        t = sec * 10**6 + frac * ns_per // 1000
        if prev is not None:
            now_us += min(max(t - prev, 0), 60 * 10**6)
        prev = t
        if incl > max_frame:
            big += 1
        else:
            out.write(struct.pack("<IIII", now_us // 10**6, now_us % 10**6, incl, max(orig, incl)))
            out.write(b[i + 16:i + 16 + incl])
            n += 1
        i += 16 + incl
    if n:
        files += 1
        frames += n
        now_us += 2 * 10**6
print(f"capture: {frames} frames of {files} Ethernet captures of the tcpdump corpus ({big} over {max_frame} bytes left out)")
if frames == 0:
    sys.exit(1)
PY
[ "${PIPESTATUS[0]}" = 0 ] || { say "ipfix-check: no capture made"; exit 1; }

# free_port: a UDP port on loopback nothing holds now.
free_port() {
  python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# rx_queue PORT: bytes waiting in the receive queue of the loopback UDP socket on PORT (-1: no
# such socket).
rx_queue() {
  python3 - "$1" <<'PY'
import sys
local = "0100007F:%04X" % int(sys.argv[1])
for line in open("/proc/net/udp").read().splitlines()[1:]:
    t = line.split()
    if len(t) > 4 and t[1] == local:
        print(int(t[4].split(":")[1], 16))
        break
else:
    print(-1)
PY
}

# export_run NAME KIND NQ: the daemon on executor KIND with NQ queues, exporting to a fresh
# nfcapd; its flows in $tmp/NAME.csv, its log in $tmp/NAME/run.log. Returns 1 on a failure.
export_run() {
  local name=$1 kind=$2 nq=$3 d=$tmp/$1 port
  mkdir -p "$d/flows"
  port=$(free_port)
  env -i LD_LIBRARY_PATH="$NFLIB" "$NF/bin/nfcapd" -b 127.0.0.1 -p "$port" -w "$d/flows" >"$d/nfcapd.log" 2>&1 &
  nfpid=$!
  local i
  for i in $(seq 200); do
    [ "$(rx_queue "$port")" -ge 0 ] && break
    sleep 0.025
  done
  [ "$(rx_queue "$port")" -ge 0 ] || { say "$name: nfcapd does not listen on $port"; return 1; }
  local gpu=""
  [ -n "$GPU_OPTS" ] && [ "$kind" != cpu ] && gpu="  gpu: $GPU_OPTS"
  cat >"$d/c.yaml" <<EOF
ports:
  - name: wire
    pcap:
      rx: { path: $tmp/corpus.pcap }
queues:
  count: $nq
  burst: 32
pipeline:
  - parse
$STAGES
  - count
ipfix:
  collector: "127.0.0.1:$port"
  observation_domain: 1
executor:
  kind: $kind
$gpu
metrics: { enabled: false }
EOF
  RUST_LOG=info timeout 300 "$PW" run --json "$d/c.yaml" >"$d/summary.json" 2>"$d/run.log"
  local rc=$?
  # Everything sent is read by nfcapd before it stops (SIGTERM ends its receive loop).
  for i in $(seq 200); do
    [ "$(rx_queue "$port")" -le 0 ] && break
    sleep 0.025
  done
  sleep 0.3
  kill -TERM "$nfpid" 2>/dev/null
  for i in $(seq 100); do kill -0 "$nfpid" 2>/dev/null || break; sleep 0.1; done
  kill "$nfpid" 2>/dev/null
  nfpid=
  env -i TZ=UTC LD_LIBRARY_PATH="$NFLIB" "$NF/bin/nfdump" -R "$d/flows" -o csv >"$tmp/$name.csv" 2>"$d/nfdump.log" ||
    { say "$name: nfdump -R failed: $(head -3 "$d/nfdump.log")"; return 1; }
  python3 - "$d/summary.json" "$d/run.log" "$tmp/$name.csv" "$kind" "$rc" "$name" <<'PY' | tee -a "$LOG"
import json, re, sys
summary, log, csv, kind, rc, name = sys.argv[1:7]
bad = []
if rc != "0":
    bad.append(f"exit {rc}: " + " | ".join(open(log, errors="replace").read().splitlines()[-3:]))
try:
    js = json.load(open(summary))
except (OSError, ValueError):
    js = {}
ex = js.get("executor", "no summary")
drops = {d[0]: d[1] for d in js.get("drops", []) if d[1]}
if not str(ex).startswith(kind):
    bad.append(f"executor {ex!r}, not {kind}")
end = re.findall(r"ipfix_export_end.*", open(log, errors="replace").read())
vals = {k: int(v) for k, v in re.findall(r"(records_exported|send_errors|records_dropped)=(\d+)", end[-1])} if end else {}
lines = open(csv).read().splitlines()
flows = 0
for l in lines[1:]:
    if not l or l.startswith("Summary"):
        break
    flows += 1
if not vals:
    bad.append("no ipfix_export_end line in the log")
elif (vals.get("send_errors"), vals.get("records_dropped")) != (0, 0) or vals.get("records_exported") != flows:
    bad.append(f"exporter {vals}, {flows} flows at nfdump")
if flows == 0:
    bad.append("no flow at nfdump")
print(f"{name}: executor {ex}, {js.get('rx_frames')} frames, drops {drops}, {flows} flows at nfdump, exporter {vals}"
      + ("" if not bad else " FAILED: " + "; ".join(bad)))
sys.exit(1 if bad else 0)
PY
  [ "${PIPESTATUS[0]}" = 0 ]
}

# compare A B: nfdump's flows of the two runs as multisets.
compare() {
  python3 - "$tmp/$1.csv" "$tmp/$2.csv" "$1" "$2" <<'PY' | tee -a "$LOG"
import collections, sys
def flows(p):
    lines = open(p).read().splitlines()
    head = [h.strip() for h in lines[0].split(",")]
    out = []
    for l in lines[1:]:
        if not l or l.startswith("Summary"):
            break
        r = dict(zip(head, (v.strip() for v in l.split(","))))
        key = (r["sa"], r["da"], r["sp"], r["dp"], r["pr"])
        out.append((key, (r["ipkt"], r["ibyt"], r["opkt"], r["obyt"]), (r["ts"], r["td"], r["flg"])))
    return out
a, b, na, nb = flows(sys.argv[1]), flows(sys.argv[2]), sys.argv[3], sys.argv[4]
counts = lambda fl: collections.Counter((k, c) for k, c, _ in fl)
full = lambda fl: collections.Counter(fl)
ca, cb = counts(a), counts(b)
pk = lambda fl: sum(int(c[0]) + int(c[2]) for _, c, _ in fl)
if ca != cb:
    only_a, only_b = list((ca - cb).elements()), list((cb - ca).elements())
    print(f"{na} vs {nb}: flows or counts differ: {len(only_a)} only in {na}, {len(only_b)} only in {nb}; first: {only_a[:2]} / {only_b[:2]}")
    sys.exit(1)
if full(a) != full(b):
    d = list((full(a) - full(b)).elements())[:2], list((full(b) - full(a)).elements())[:2]
    print(f"{na} vs {nb}: packets and bytes equal, but start / duration / flags differ: {d[0]} / {d[1]}")
    sys.exit(1)
print(f"{na} == {nb}: {len(a)} flows, {pk(a)} packets, equal packets and bytes per direction, start, duration and flags")
PY
  [ "${PIPESTATUS[0]}" = 0 ]
}

for nq in $QUEUES; do
  ok=1
  export_run "reference-cpu-q$nq" cpu "$nq" || ok=0
  export_run "$SECOND-q$nq" "$SECOND" "$nq" || ok=0
  if [ $ok = 1 ]; then
    compare "reference-cpu-q$nq" "$SECOND-q$nq" || fails=$((fails + 1))
  else
    fails=$((fails + 1))
  fi
done
if [ $fails = 0 ]; then
  say "ipfix-check: the $SECOND executor's IPFIX flows at nfcapd equal the CPU executor's (queues: $QUEUES, table: $TABLE)"
else
  say "ipfix-check: $fails comparison(s) failed (log: $LOG)"
fi
[ $fails = 0 ]
