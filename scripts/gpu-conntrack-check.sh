#!/usr/bin/env bash
# On the GPU machine: connection tracking on the GPU executor against the CPU executor.
#  1. The stateful firewall (configs/stateful-firewall.yaml: parse -> conntrack -> acl -> count,
#     its inside network the generated clients') on generated connection traffic with churn
#     (`pktwarp flow-gen`: handshakes, data, FIN / RST teardowns, abandoned connections, UDP,
#     ICMP echo and errors, flows that idle out), replayed from a pcap (record times are the
#     receive times both executors' tables age flows by), on executor cpu and executor gpu, one
#     queue and four, a large table and one small enough to evict: the summaries equal (frames,
#     drops by reason, counted, the ACL's rule hits and defaults, the conntrack counters
#     created / expired / early_evicted / table_full / untracked / invalid) and the passed
#     frames' capture (output port) identical byte for byte (one queue: in order; four: as
#     sets). Modes persistent and launch, rings mapped and device; persistent also with four
#     CTAs a burst (burst_ctas 4: the owned layout, each CTA its part of the table's buckets).
#  2. Throughput, both pipelines in the same call on the same GPU: parse -> conntrack -> acl ->
#     count against parse -> acl -> count (the same rules without `ct:`), the daemon end to end
#     on the replayed capture (Mpps from its summary), 1 and 4 queues. Conntrack runs with each
#     executor.gpu option set of CT_OPTS (`;`-separated, empty: the defaults), the plain
#     pipeline with the defaults and with device rings; each conntrack line prints its ratio to
#     the plain run of the same ring placement.
# Usage (repository root): scripts/gpu-conntrack-check.sh [BIN_DIR] [DATA] [OUT]
#   env: STEPS (check,throughput: which of 1 and 2 run), FRAMES, LOOPS, SECOND, CT_OPTS.
#   BIN_DIR folder with pktwarp (default .carry); DATA unused (kept for the common signature);
#   OUT results folder (default ./gpu-results).
# Exit status: 0 when every comparison is equal and the throughput runs ran, 1 otherwise.
set -u
BIN=${1:-.carry}
RES=${3:-${OUT:-./gpu-results}}
PW=$BIN/pktwarp
# The executor compared with the CPU's (SECOND=cpu checks the script itself on a machine
# without a GPU: both sides then run the CPU executor).
SECOND=${SECOND:-gpu}
FRAMES=${FRAMES:-200000}
STEPS=${STEPS:-check,throughput}
want() { case ",$STEPS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
mkdir -p "$RES"
LOG=$RES/conntrack-check.log
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PKTWARP_KERNEL_CACHE=$tmp/kcache
fails=0
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }

if ! "$PW" flow-gen --out "$tmp/conn.pcap" --frames "$FRAMES" --concurrent 256 --clients 4000 --idle-pct 1 --seed 3 >>"$LOG" 2>&1; then
  say "flow-gen failed"; exit 1
fi
say "input: $(tail -1 "$LOG")"

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

# make_cfg DIR KIND QUEUES ENTRIES [GPU-OPTIONS] [PLAIN] [LOOPS]: the stateful firewall on the
# generated capture, its inside network 10.0.0.0/16 (the generator's clients), passed frames to
# DIR/out.pcap (with LOOPS > 1, a throughput run: no output port); PLAIN: parse -> acl -> count
# with the same rules less their `ct:` conditions.
make_cfg() {
  local d=$1 kind=$2 nq=$3 entries=$4 gpu=${5:-} plain=${6:-} loops=${7:-1}
  mkdir -p "$d"
  sed -e 's|10\.1\.0\.0/16|10.0.0.0/16|' configs/rules/stateful-firewall.rules.yaml >"$d/rules.yaml"
  if [ -n "$plain" ]; then
    sed -i -e '/^ *ct: /d' "$d/rules.yaml"
  fi
  python3 - "$d" "$kind" "$nq" "$entries" "$gpu" "$plain" "$loops" "$tmp/conn.pcap" <<'PY'
import sys
d, kind, nq, entries, gpu, plain, loops, pcap = sys.argv[1:9]
stages = "  - parse\n"
if not plain:
    stages += f"  - conntrack:\n      entries: {entries}\n      timeouts: {{ tcp_established: 3600, udp_unreplied: 30 }}\n"
stages += f"  - acl:\n      rules: {d}/rules.yaml\n      default: drop\n  - count\n"
ex = f"executor:\n  kind: {kind}\n" + (f"  gpu: {gpu}\n" if gpu else "")
out = "" if loops != "1" else f"  - name: out\n    pcap:\n      tx: {{ path: {d}/out.pcap }}\n"
output = "" if loops != "1" else "output:\n  port: out\n"
open(f"{d}/c.yaml", "w").write(f"""ports:
  - name: wire
    pcap:
      rx: {{ path: {pcap}, loops: {loops} }}
{out}queues:
  count: {nq}
  burst: 32
pipeline:
{stages}{ex}{output}metrics: {{ enabled: false }}
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

# counts JSON: what both executors must agree on.
counts() {
  python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))
keys = ("rx_frames", "tx_frames", "tx_bytes", "drops", "counted", "top_rules", "acl_default", "custom_stages")
if "rx_frames" not in s: print("no summary"); sys.exit(1)
print(json.dumps({k: s.get(k) for k in keys}, sort_keys=True))' "$1"
}

# 1. Frame by frame and counts.
want check && for nq in 1 4; do
  mode=$([ $nq = 1 ] && echo order || echo set)
  for entries in 1048576 256; do
    for opts in "persistent mapped 1" "persistent device 1" "launch device 1" \
      "persistent mapped 4" "persistent device 4"; do
      set -- $opts
      name="sfw-q$nq-e$entries-$1-$2-x$3"
      make_cfg "$tmp/$name-ref" cpu $nq $entries
      make_cfg "$tmp/$name-dut" "$SECOND" $nq $entries "{ mode: $1, placement: $2, burst_ctas: $3 }"
      run_dir "$tmp/$name-ref" "$name cpu"
      run_dir "$tmp/$name-dut" "$name $SECOND"
      r=$(frames_equal $mode "$tmp/$name-ref/out.pcap" "$tmp/$name-dut/out.pcap")
      rc=$?
      say "  $name passed frames: $r $([ $rc = 0 ] && echo EQUAL || echo DIFFERS)"
      [ $rc = 0 ] || fails=$((fails + 1))
      a=$(counts "$tmp/$name-ref/summary.json"); b=$(counts "$tmp/$name-dut/summary.json")
      if [ "$a" = "$b" ]; then
        say "  $name counts: equal $b"
      else
        say "  $name counts DIFFER: cpu $a $SECOND $b"; fails=$((fails + 1))
      fi
    done
  done
done

# 2. Throughput: with and without conntrack, same capture (replayed LOOPS times), same call.
LOOPS=${LOOPS:-20}
CT_OPTS=${CT_OPTS-";{ burst_ctas: 4 };{ burst_ctas: 8 };{ placement: device };{ placement: device, burst_ctas: 4 };{ placement: device, burst_ctas: 8 }"}
# tp_run DIR NAME GPU-OPTIONS PLAIN: one throughput run; its Mpps in TP ("?" when it failed).
tp_run() {
  make_cfg "$1" "$SECOND" $nq 1048576 "$3" "$4" "$LOOPS"
  run_dir "$1" "$2"
  TP=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["mpps"], 3))' "$1/summary.json" 2>/dev/null || echo "?")
}
ratio() { python3 -c 'import sys; a, b = sys.argv[1:3]; print(f"{float(a) / float(b):.2f}" if a != "?" and b not in ("?", "0", "0.0") else "?")' "$1" "$2"; }
want throughput && for nq in 1 4; do
  say "throughput ($nq queues, $FRAMES x $LOOPS frames, $SECOND executor):"
  tp_run "$tmp/tp-plain-$nq-mapped" "tp-plain-$nq" "" plain
  plain_m=$TP
  tp_run "$tmp/tp-plain-$nq-device" "tp-plain-$nq-device" "{ placement: device }" plain
  plain_d=$TP
  say "  plain (defaults): $plain_m Mpps; plain { placement: device }: $plain_d Mpps"
  k=0
  IFS=';' read -r -a ct_sets <<<"$CT_OPTS"
  [ -z "$CT_OPTS" ] && ct_sets=("")
  for o in "${ct_sets[@]}"; do
    k=$((k + 1))
    tp_run "$tmp/tp-ct-$nq-$k" "tp-conntrack-$nq-$k" "$o" ""
    m=$TP
    base=$plain_m
    case "$o" in *device*) base=$plain_d ;; esac
    say "  conntrack ${o:-(defaults)}: $m Mpps, ratio conntrack/plain $(ratio "$m" "$base")"
  done
done
say "conntrack check: $fails failure(s)"
[ $fails = 0 ]
