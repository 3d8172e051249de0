#!/usr/bin/env bash
# The CPU data path against DPDK on a machine with no DPDK, no Rust and no apt (the GPU
# machine's 16-core host), from carried files only:
#   BUNDLE  the folder scripts/cpu-peer-bundle.sh made (dpdk-test-acl, dpdk-testpmd, dpdk_bench,
#           their libraries and the vdev drivers)            default .carry/dpdk
#   BIN     a release pktwarp binary                        default .carry/pktwarp
#   DATA    the classbench/ folder of ../shared/data        default .carry/data/classbench
#           ({acl1,fw1,ipc1}_10K{,_trace}, *_100K{,_trace}.gz, expected_dpdk_acl/)
# Writes under OUT (default ./cpu-bench-out): acl.txt, dpdk.txt, cpu-scaling.txt,
# dpdk-scaling.txt, machine.txt, and summary.txt (every table, for BENCHMARKS.md).
#   1. ACL: scripts/bench-acl.sh (parity with rte_acl on every set, then rte_acl avx2 vs
#      pktwarp classify, ROUNDS interleaved, medians) on CPU $ACL_CPU;
#   2. forwarding: scripts/bench-dpdk.sh (testpmd io vs pktwarp zero-copy, with and without
#      parse + count, net_null and net_ring, medians of ROUNDS);
#   3. scaling, CPU executor: scripts/bench-cpu.sh with WORKERS workers (gen -> parse -> count,
#      -> acl 16 rules, -> acl acl1_10K);
#   4. scaling, DPDK ports: N forwarders at once, each its own process, CPU and pair of
#      net_null ports (testpmd io with N forwarding cores and 2N ports; pktwarp dpdk_bench zc
#      and zc_stages as N processes), summed Mpps.
# Usage: scripts/cpu-bench-remote.sh   (env: STEPS="acl dpdk cpu dpdkscale", ROUNDS=5,
#        WORKERS="1 2 4 8 16", FRAMES=32000000, ACL_ITER=10, SECS=4)
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=$(cd "${BUNDLE:-.carry/dpdk}" && pwd) || { echo "no bundle (scripts/cpu-peer-bundle.sh)" >&2; exit 1; }
BIN=$(readlink -f "${BIN:-.carry/pktwarp}")
DATA=$(cd "${DATA:-.carry/data/classbench}" && pwd) || { echo "no ClassBench data" >&2; exit 1; }
OUT=${OUT:-$PWD/cpu-bench-out}
STEPS=${STEPS:-acl dpdk cpu dpdkscale}
ROUNDS=${ROUNDS:-5}
WORKERS=${WORKERS:-1 2 4 8 16}
FRAMES=${FRAMES:-32000000}
ACL_ITER=${ACL_ITER:-10}
SECS=${SECS:-4}
NCPU=$(nproc)
ACL_CPU=${ACL_CPU:-2}
mkdir -p "$OUT"
# shellcheck disable=SC1091
source "$BUNDLE/env.sh"
[ -x "$BIN" ] || { echo "no pktwarp binary at $BIN" >&2; exit 1; }
{
  echo "date: $(date -u +%FT%TZ)"
  lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|L2|L3|Flags)' | cut -c1-200
  echo "load: $(cat /proc/loadavg)"
  echo "pktwarp: $BIN sha256 $(sha256sum "$BIN" | cut -c1-16)"
} > "$OUT/machine.txt"
cat "$OUT/machine.txt"
step() { # name timeout_s command...
  local name=$1 t=$2; shift 2
  echo "== $name ($(date -u +%T))"
  timeout "$t" "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  echo "   exit $rc; $(tail -1 "$OUT/$name.txt")"
}

# The DPDK port scaling table: N forwarders at once (see the header).
dpdk_scale() {
  echo "| forwarders | testpmd io Mpps | pktwarp zc Mpps | ratio | pktwarp zc + parse + count Mpps | ratio |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
  for n in $WORKERS; do
    [ $((n + 1)) -le "$NCPU" ] || { echo "| $n | (needs $((n + 1)) CPUs) | | | | |"; continue; }
    vdevs=(); for p in $(seq 0 $((2 * n - 1))); do vdevs+=(--vdev=net_null$p); done
    log=$(mktemp)
    dpdk-testpmd --no-huge --no-pci --no-shconf -m $((512 * n)) -d "$BUNDLE/pmds" \
      --file-prefix=tpscale$$ -l "0-$n" --log-level='*:warning' "${vdevs[@]}" -- \
      --forward-mode=io --nb-cores="$n" --burst=32 --stats-period=1 --no-lsc-interrupt \
      --total-num-mbufs=$((16384 * n)) </dev/null > "$log" 2>&1 &
    tp=$!
    sleep $((SECS + 3)); kill -INT "$tp" 2>/dev/null; wait "$tp" 2>/dev/null
    # The last full report: the sum of every port's Rx-pps.
    t=$(python3 - "$log" "$((2 * n))" <<'PY'
import re, sys
txt = open(sys.argv[1], errors="replace").read()
blocks = txt.split("Port statistics")[1:]
n = int(sys.argv[2])
full = [b for b in blocks if len(re.findall(r"Rx-pps:\s+(\d+)", b)) >= n]
vals = [sum(int(v) for v in re.findall(r"Rx-pps:\s+(\d+)", b)[:n]) for b in full[1:-1] or full]
vals.sort()
print(f"{vals[len(vals) // 2] / 1e6:.3f}" if vals else "0")
PY
)
    rm -f "$log"
    pw() { # way -> summed Mpps of n processes
      local pids=() outs=() i
      for i in $(seq 1 "$n"); do
        o=$(mktemp); outs+=("$o")
        PKTWARP_BENCH_SECONDS=$SECS PKTWARP_BENCH_LCORE=$i taskset -c "$i" \
          "$BUNDLE/bin/dpdk_bench" --exact "bench_net_null_$1" --ignored --nocapture --test-threads=1 > "$o" 2>&1 &
        pids+=($!)
      done
      wait "${pids[@]}"
      cat "${outs[@]}" | awk '/^PKTWARP_MPPS / {s += $3} END {printf "%.3f", s}'
      rm -f "${outs[@]}"
    }
    z=$(pw zc); zs=$(pw zc_stages)
    r() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
    echo "| $n | $t | $z | $(r "$z" "$t") | $zs | $(r "$zs" "$t") |"
  done
}

for s in $STEPS; do
  case $s in
    acl)
      step acl 3000 env BIN="$BIN" DATA="$DATA" DPDK_TEST_ACL="$BUNDLE/bin/dpdk-test-acl" \
        CPU="$ACL_CPU" ROUNDS="$ROUNDS" BUILD_MEM=1 scripts/bench-acl.sh "$ACL_ITER" ;;
    dpdk)
      step dpdk 1800 env BENCH_BIN="$BUNDLE/bin/dpdk_bench" TESTPMD="$BUNDLE/bin/dpdk-testpmd" \
        EAL_EXTRA="-d $BUNDLE/pmds" PW_DPDK_PMDS="$BUNDLE/pmds" MAIN_CPU=0 FWD_CPU=1 \
        scripts/bench-dpdk.sh "$SECS" "$ROUNDS" ;;
    cpu)
      step cpu-scaling 3000 env BIN="$BIN" CB="$DATA" RUNS=3 scripts/bench-cpu.sh "$FRAMES" $WORKERS ;;
    dpdkscale)
      echo "== dpdk-scaling ($(date -u +%T))"
      dpdk_scale > "$OUT/dpdk-scaling.txt" 2>&1
      echo "   $(tail -1 "$OUT/dpdk-scaling.txt")" ;;
  esac
done
{
  cat "$OUT/machine.txt"
  for f in acl dpdk cpu-scaling dpdk-scaling; do
    [ -f "$OUT/$f.txt" ] || continue
    echo; echo "## $f"; grep -E '^\||identical|DIFFERS|round|^set|^[a-z0-9_]+_100K|^parse|Mpps|speedup|workers' "$OUT/$f.txt"
  done
} > "$OUT/summary.txt"
echo "summary: $OUT/summary.txt"
