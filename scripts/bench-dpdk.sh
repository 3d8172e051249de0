#!/usr/bin/env bash
# pktwarp's DPDK port forwarding vs dpdk-testpmd io forwarding, same virtual devices, same run.
#
# Both forward on one CPU (the last one), paired ports (RX 0 -> TX 1, RX 1 -> TX 0), burst 32:
#   net_null: infinite source/sink (RX allocates mbufs, TX frees them);
#   net_ring: loopback rings primed with one burst of 32 per port (testpmd --tx-first).
# Each side runs ROUNDS times, alternating; the medians and their ratio are printed last.
# Usage: scripts/bench-dpdk.sh [seconds-per-run (default 4)] [rounds (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${1:-4}
ROUNDS=${2:-3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
NCPU=$(nproc)
FWD_CPU=$((NCPU - 1))
MAIN_CPU=0
[ "$NCPU" -gt 1 ] || { echo "bench-dpdk: needs 2 CPUs (testpmd's main lcore + a forwarding lcore)" >&2; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "bench-dpdk: dpdk-testpmd not found (apt-get install dpdk)" >&2; exit 1; }

cargo test --release -q -p pipeline --features dpdk --test dpdk_bench --no-run 2>/dev/null
BIN=$(cargo test --release -q -p pipeline --features dpdk --test dpdk_bench --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import sys,json
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]=="dpdk_bench": print(m["executable"])' | tail -1)
[ -x "$BIN" ] || { echo "bench-dpdk: could not build the benchmark binary" >&2; exit 1; }

# testpmd: sums the ports' Rx-pps over the last reports of a run (the first is warm-up).
testpmd_mpps() { # $1 = device kind
  local vdevs extra=()
  case $1 in
    net_null) vdevs=(--vdev=net_null0 --vdev=net_null1) ;;
    net_ring) vdevs=(--vdev=net_ring0 --vdev=net_ring1); extra=(--tx-first) ;;
  esac
  local log; log=$(mktemp)
  timeout -s INT $((SECS + 2)) dpdk-testpmd --no-huge --no-pci --no-shconf -m 512 \
    --file-prefix=tpbench$$ -l "$MAIN_CPU,$FWD_CPU" --log-level='*:warning' "${vdevs[@]}" -- \
    --forward-mode=io --nb-cores=1 --burst=32 --stats-period=1 --no-lsc-interrupt \
    --total-num-mbufs=16384 "${extra[@]}" </dev/null >"$log" 2>&1 || true
  python3 - "$log" <<'PY'
import re, sys, statistics
txt = open(sys.argv[1], errors="replace").read()
# Each stats report lists every port's "Rx-pps:"; group them per report (2 ports).
vals = [int(v) for v in re.findall(r"Rx-pps:\s+(\d+)", txt)]
reports = [sum(vals[i:i+2]) for i in range(0, len(vals) - 1, 2)]
reports = reports[1:] or reports
print(f"{statistics.median(reports)/1e6:.3f}" if reports else "0")
PY
  rm -f "$log"
}

pktwarp_mpps() { # $1 = device kind
  PKTWARP_BENCH_SECONDS=$SECS PKTWARP_BENCH_LCORE=$FWD_CPU taskset -c "$FWD_CPU" \
    "$BIN" --exact "bench_$1" --ignored --nocapture --test-threads=1 2>/dev/null \
    | grep -o "PKTWARP_MPPS $1 [0-9.]*" | awk '{print $3}'
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "date: $(date -u +%FT%TZ)"
echo "machine: $(lscpu | sed -n 's/^Model name:\s*//p' | head -1), $NCPU CPUs; DPDK $(pkg-config --modversion libdpdk)"
echo "forwarding CPU: $FWD_CPU; $SECS s per run, $ROUNDS rounds"
declare -A T P
for dev in net_null net_ring; do
  t=(); p=()
  for r in $(seq "$ROUNDS"); do
    t+=("$(testpmd_mpps "$dev")")
    p+=("$(pktwarp_mpps "$dev")")
    echo "  $dev round $r: testpmd ${t[-1]} Mpps, pktwarp ${p[-1]} Mpps"
  done
  T[$dev]=$(median "${t[@]}")
  P[$dev]=$(median "${p[@]}")
done
echo
echo "| device | testpmd io (Mpps) | pktwarp dpdk port (Mpps) | ratio |"
echo "| --- | --- | --- | --- |"
for dev in net_null net_ring; do
  ratio=$(awk -v p="${P[$dev]}" -v t="${T[$dev]}" 'BEGIN { if (t > 0) printf "%.2f", p / t; else print "n/a" }')
  echo "| $dev | ${T[$dev]} | ${P[$dev]} | $ratio |"
done
