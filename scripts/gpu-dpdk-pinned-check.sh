#!/usr/bin/env bash
# On the GPU machine: a DPDK port whose RX pool is pinned host memory mapped for the GPU
# (`gpu_buffers: pinned`, docs/dpdk.md "Pinned host buffers") received by reference on the GPU
# executor, against the CPU executor on the same port and capture. A net_pcap vdev replays
# acl1_10K's trace as 64 B frames (built once with gen) through parse -> acl (acl1_10K) -> count
# and sends what passes out of the same port into a capture (the received mbufs themselves):
#   - GPU, mapped rings (the kernel reads every frame in the pinned pool) and device rings (the
#     GPU gathers them from it), one queue (the output in order) and four (as a multiset);
#   - every run: rx frames, counted frames and bytes, drops by reason, rule hits and the ACL
#     default equal to the CPU executor's; the output capture's frames equal to the CPU's; the
#     run's gpu_ingest says by_reference, its gpu_tx says mbuf.
# Usage: scripts/gpu-dpdk-pinned-check.sh BUNDLE DATA OUT   (GPU machine, repository root)
#   BUNDLE: a scripts/cpu-peer-bundle.sh folder with PKTWARP_DPDK_BIN (bin/pktwarp, lib/, pmds/
#   with net_pcap); DATA: folder with classbench/acl1_10K and its trace.
set -u
[ $# -eq 3 ] || { sed -n '2,15p' "$0"; exit 2; }
BUNDLE=$(cd "$1" && pwd) || exit 2
DATA=$(cd "$2" && pwd) || exit 2
RES=$3/dpdk-pinned
mkdir -p "$RES"
# shellcheck source=/dev/null
. "$BUNDLE/env.sh"
BIN=$BUNDLE/bin/pktwarp
[ -x "$BIN" ] || { echo "gpu-dpdk-pinned-check: no $BIN" >&2; exit 2; }
ls "$PW_DPDK_PMDS" | grep -q net_pcap || { echo "gpu-dpdk-pinned-check: no net_pcap driver in the bundle" >&2; exit 2; }
rules=$DATA/classbench/acl1_10K
trace=$DATA/classbench/acl1_10K_trace
[ -e "$trace" ] || trace=$trace.gz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  echo "binary: $(sha256sum "$BIN" | cut -c1-16)"
} | tee "$RES/check.txt"
cap=$tmp/in.pcap
"$(dirname "$0")/trace-capture.sh" "$BIN" "$trace" "$cap" "$RES/make" || exit 1
fails=0
# run NAME EXECUTOR QUEUES PLACEMENT BUFFERS
run() {
  local name=$1 q=$2
  cat > "$tmp/$name.yaml" <<YAML
ports:
  - name: wire
    dpdk:
      eal_args: [--no-huge, --no-pci, --no-shconf, -m, "1024", --file-prefix=pwpin$$-$name, -l, "0", -d, "$PW_DPDK_PMDS", "--log-level=*:warning"]
      vdev: "net_pcap0,rx_pcap=$cap,tx_pcap=$RES/out-$name.pcap"
      rx_queues: 1
      tx_queues: 1
      mempool_size: 16383
      idle_end_ms: 500
      gpu_buffers: $5
queues: { count: $q, burst: 32$([ "$q" -gt 1 ] && echo ", tx_threads: one") }
pipeline: [parse, { acl: { rules: $rules, format: classbench } }, count]
output: { port: wire }
executor: { kind: $3$([ "$4" != - ] && echo ", gpu: { placement: $4 }") }
metrics: { enabled: false }
YAML
  timeout 120 "$BIN" run --quiet --json "$tmp/$name.yaml" > "$RES/run-$name.json" 2> "$RES/run-$name.log"
  local rc=$?
  [ "$rc" = 0 ] || { fails=$((fails + 1)); echo "run $name: exit $rc"; tail -5 "$RES/run-$name.log"; }
}
for q in 1 4; do
  run "cpu-$q" "$q" cpu - host
  for pl in mapped device; do
    run "gpu-$pl-$q" "$q" gpu "$pl" pinned
  done
done
python3 - "$RES" <<'PY' | tee -a "$RES/check.txt" || fails=$((fails + 1))
import json, os, struct, sys
res = sys.argv[1]
def summary(name):
    try:
        return json.load(open(os.path.join(res, f"run-{name}.json")))
    except (OSError, ValueError):
        return None
def frames(name):
    b = open(os.path.join(res, f"out-{name}.pcap"), "rb").read()
    out, at = [], 24
    while at + 16 <= len(b):
        n = struct.unpack_from("<I", b, at + 8)[0]
        out.append(b[at + 16:at + 16 + n]); at += 16 + n
    return out
def key(s):
    return (s["rx_frames"], s["counted"], sorted(map(tuple, s["drops"])),
            sorted(map(tuple, s["top_rules"])), s["acl_default"], s["tx_frames"])
bad = 0
for q in (1, 4):
    cpu = summary(f"cpu-{q}")
    if cpu is None:
        print(f"cpu-{q}: no summary"); bad += 1; continue
    want = frames(f"cpu-{q}")
    for pl in ("mapped", "device"):
        name = f"gpu-{pl}-{q}"
        s = summary(name)
        if s is None:
            print(f"{name}: no summary"); bad += 1; continue
        why = []
        if key(s) != key(cpu): why.append(f"counts {key(s)} != cpu {key(cpu)}")
        got = frames(name)
        if (got if q == 1 else sorted(got)) != (want if q == 1 else sorted(want)):
            why.append(f"output differs ({len(got)} frames, cpu {len(want)})")
        paths = [g["path"] for g in s.get("gpu_ingest", [])]
        if paths != ["by_reference"]: why.append(f"gpu_ingest {s.get('gpu_ingest')}")
        tx = (s.get("gpu_tx") or {}).get("path")
        if tx != "mbuf": why.append(f"gpu_tx {s.get('gpu_tx')}")
        bad += bool(why)
        print(f"{name}: {s['rx_frames']} frames, {s['tx_frames']} sent, {s['mpps']:.2f} Mpps: "
              + ("EQUAL to the CPU executor" if not why else "; ".join(why)))
print(f"dpdk pinned check: {bad} failure(s)")
sys.exit(1 if bad else 0)
PY
[ "$fails" = 0 ] || { echo "gpu-dpdk-pinned-check: $fails failure(s)"; exit 1; }
