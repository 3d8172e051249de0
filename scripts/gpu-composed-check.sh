#!/usr/bin/env bash
# On the GPU machine: composed pipelines against the CPU executor. For each stage list
# (shipped inline filter, in-order subsets, other orders, the syn-guard user stage), `pktwarp run`
# (or `syn-guard run`) on the same generated traffic with executor cpu and gpu, output to a
# pcap: the frames written must be the same multiset (same bytes, same count; with one queue the
# same order) and the summary's counts equal. Then the NVRTC compile time of a generated kernel
# with an empty on-disk cache and again with the cache filled.
# Usage (repository root): scripts/gpu-composed-check.sh [BIN_DIR] [OUT]
#   BIN_DIR  folder with pktwarp (and syn-guard) binaries (default .carry)
#   OUT      results folder (default $OUT, else ./gpu-results)
set -u
BIN=${1:-.carry}
RES=${2:-${OUT:-./gpu-results}}
FRAMES=${FRAMES:-1000000}
mkdir -p "$RES"
LOG=$RES/composed-check.log
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
RULES=$(pwd)/configs/rules/inline-filter.rules.yaml
fails=0
export RUST_LOG=${RUST_LOG:-info,pipeline::stage::acl=error}
export PKTWARP_KERNEL_CACHE=$tmp/kcache

# config NAME QUEUES EXECUTOR STAGES: a gen config writing to $tmp/NAME-EXECUTOR.pcap.
config() {
  local name=$1 queues=$2 exec=$3 stages=$4
  cat >"$tmp/$name-$exec.yaml" <<EOF
ports:
  - name: wire
    gen: { count: $FRAMES, size: 64, seed: 11, malformed_ratio: 0.02, tcp_flags: 2,
           flows: { src: 10.0.0.0/8, dst: 192.168.0.0/16, src_ports: 1-65535, dst_ports: 1-1023, ipv6_share: 0.1 } }
  - name: out
    pcap: { tx: { path: $tmp/$name-$exec.pcap } }
queues: { count: $queues, burst: 64 }
pipeline:
$(echo -e "$stages" | sed "s|RULES|$RULES|")
executor: { kind: $exec }
output: { port: out }
EOF
}

# Frames of a pcap as sorted hex lines (or in order with ORDERED=1), for comparison.
frames() {
  python3 - "$1" "${2:-0}" <<'PY'
import struct, sys
data = open(sys.argv[1], 'rb').read()
# Microsecond or nanosecond pcap, either byte order.
le = data[:4] in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1')
fmt = '<IIII' if le else '>IIII'
off, out = 24, []
while off + 16 <= len(data):
    _, _, incl, _ = struct.unpack(fmt, data[off:off + 16])
    out.append(data[off + 16:off + 16 + incl].hex())
    off += 16 + incl
if sys.argv[2] != '1':
    out.sort()
print('\n'.join(out))
PY
}

# Counts of two `--json` summaries, ignoring times, rates and the executor's own description.
same_counts() {
  python3 - "$1" "$2" <<'PY'
import json, re, sys
skip = re.compile(r'(rate|secs|seconds|elapsed|mpps|gbps|time|latency|executor|choice|occupancy|ms$|_ns|reason|port_counters|errors)', re.I)
def flat(x, p=''):
    if isinstance(x, dict):
        for k, v in x.items():
            if not skip.search(k):
                yield from flat(v, f'{p}.{k}')
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from flat(v, f'{p}[{i}]')
    else:
        yield p, x
def load(f):
    t = open(f).read()
    return dict(flat(json.loads(t[t.index('{'):])))
a, b = load(sys.argv[1]), load(sys.argv[2])
diff = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
for k in diff[:20]:
    print(f'  {k}: cpu {a.get(k)} gpu {b.get(k)}')
if not diff:
    print(f'{len(a)} counts')
sys.exit(1 if diff or not a else 0)
PY
}

# check NAME QUEUES RUNNER STAGES
check() {
  local name=$1 queues=$2 runner=$3 stages=$4 ok=1
  for exec in cpu gpu; do
    config "$name" "$queues" "$exec" "$stages"
    timeout 300 "$runner" run --json "$tmp/$name-$exec.yaml" >"$tmp/$name-$exec.json" 2>"$tmp/$name-$exec.log"
    local rc=$?
    if [ "$rc" != 0 ]; then
      echo "composed $name: $exec run failed (exit $rc)"; tail -5 "$tmp/$name-$exec.log"; ok=0
    fi
  done
  cp "$tmp/$name-gpu.log" "$RES/composed-$name-gpu.log" 2>/dev/null
  if [ "$ok" = 1 ]; then
    local ordered=0
    [ "$queues" = 1 ] && ordered=1
    frames "$tmp/$name-cpu.pcap" "$ordered" >"$tmp/a.txt"
    frames "$tmp/$name-gpu.pcap" "$ordered" >"$tmp/b.txt"
    local n
    n=$(wc -l <"$tmp/a.txt")
    if cmp -s "$tmp/a.txt" "$tmp/b.txt"; then
      echo "composed $name ($queues queue(s)): $n frames written, identical$( [ "$ordered" = 1 ] && echo ' in order')"
    else
      echo "composed $name: the written frames differ ($n cpu, $(wc -l <"$tmp/b.txt") gpu)"; ok=0
    fi
    local counts
    if counts=$(same_counts "$tmp/$name-cpu.json" "$tmp/$name-gpu.json"); then
      echo "composed $name: summary counts equal ($counts compared)"
    else
      echo "$counts"; echo "composed $name: summary counts differ (above)"; ok=0
    fi
    grep -h "GPU pipeline\|kernels from" "$tmp/$name-gpu.log" | head -2
  fi
  [ "$ok" = 1 ] || fails=$((fails + 1))
}

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  echo "binary: $(sha256sum "$BIN/pktwarp" | cut -c1-16)"
  P="$BIN/pktwarp"
  ACL="  - acl: { rules: RULES }"
  check inline-filter-1q 1 "$P" "  - parse\n$ACL\n  - count"
  check inline-filter-4q 4 "$P" "  - parse\n$ACL\n  - count"
  check parse-count 2 "$P" "  - parse\n  - count"
  check count-only 2 "$P" "  - count"
  check count-parse-acl 1 "$P" "  - count\n  - parse\n$ACL"
  check count-parse-acl-4q 4 "$P" "  - count\n  - parse\n$ACL"
  check parse-acl-count-count 2 "$P" "  - parse\n$ACL\n  - count\n  - count"
  if [ -x "$BIN/syn-guard" ]; then
    SG="  - custom: { name: syn_guard, min_src_port: 1024, blocked_dst_ports: [23, 445] }"
    check syn-guard 1 "$BIN/syn-guard" "  - parse\n$SG\n  - count"
    check syn-guard-acl 2 "$BIN/syn-guard" "  - parse\n$SG\n$ACL\n  - count"
  fi
  # NVRTC at start: an empty cache compiles, a restart reads the cache.
  rm -rf "$PKTWARP_KERNEL_CACHE"
  for pass in cold warm; do
    config nvrtc-$pass 1 gpu "  - count\n  - parse\n$ACL\n  - count"
    t0=$(date +%s%N)
    timeout 300 "$P" run --json "$tmp/nvrtc-$pass-gpu.yaml" >/dev/null 2>"$tmp/nvrtc-$pass.log"
    echo "nvrtc $pass: run exit $? in $(( ($(date +%s%N) - t0) / 1000000 )) ms; $(grep -ho 'kernels from .* in [0-9.]* s' "$tmp/nvrtc-$pass.log" | head -1)"
  done
  echo "=== composed: $fails check(s) failed"
} 2>&1 | tee "$LOG"
grep -q "=== composed: 0 check(s) failed" "$LOG"
