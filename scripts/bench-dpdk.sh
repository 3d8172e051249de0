#!/usr/bin/env bash
# pktwarp's DPDK port forwarding vs dpdk-testpmd io forwarding, same virtual devices, same run.
#
# Both forward on one CPU (the last one), paired ports (RX 0 -> TX 1, RX 1 -> TX 0), burst 32:
#   net_null: infinite source/sink (RX allocates mbufs, TX frees them);
#   net_ring: loopback rings primed with one burst of 32 per port (testpmd --tx-first).
# pktwarp runs three ways (pipeline/tests/dpdk_bench.rs): zc = zero-copy mbuf forwarding, no
# stages (the like-for-like comparison with testpmd io); zc+stages = zero-copy with the parse
# and count stages run on every frame; copy = the copying RxPort/TxPort path.
# Each runs ROUNDS times, alternating; the medians and their ratios to testpmd are printed last.
# Usage: scripts/bench-dpdk.sh [seconds-per-run (default 4)] [rounds (default 3)]
#   env: BENCH_BIN=built dpdk_bench (no cargo), TESTPMD=dpdk-testpmd, EAL_EXTRA="-d PMDS"
#   (testpmd) with PW_DPDK_PMDS=PMDS (dpdk_bench), FWD_CPU / MAIN_CPU (default last / 0).
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${1:-4}
ROUNDS=${2:-3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
NCPU=$(nproc)
FWD_CPU=${FWD_CPU:-$((NCPU - 1))}
MAIN_CPU=${MAIN_CPU:-0}
[ "$NCPU" -gt 1 ] || { echo "bench-dpdk: needs 2 CPUs (testpmd's main lcore + a forwarding lcore)" >&2; exit 1; }
TESTPMD=${TESTPMD:-dpdk-testpmd}
read -r -a EAL_EXTRA <<< "${EAL_EXTRA:-}"   # e.g. "-d BUNDLE/pmds" (scripts/cpu-peer-bundle.sh)
command -v "$TESTPMD" >/dev/null || { echo "bench-dpdk: $TESTPMD not found (apt-get install dpdk)" >&2; exit 1; }

if [ -n "${BENCH_BIN:-}" ]; then
  BIN=$BENCH_BIN   # a built pipeline/tests/dpdk_bench (no cargo on this machine)
else
cargo test --release -q -p pipeline --features dpdk --test dpdk_bench --no-run 2>/dev/null
BIN=$(cargo test --release -q -p pipeline --features dpdk --test dpdk_bench --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import sys,json
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]=="dpdk_bench": print(m["executable"])' | tail -1)
fi
[ -x "$BIN" ] || { echo "bench-dpdk: could not build the benchmark binary" >&2; exit 1; }

# testpmd: prints "<Mpps per wall second> <Mpps per CPU second of the forwarding lcore>" over
# SECS seconds of forwarding: the window starts and ends right after a stats report (1 s
# period), packets are the difference of the reports' cumulative RX-packets, CPU time the
# difference of the worker thread's utime+stime in /proc (the second figure does not depend on
# how busy the shared machine is).
reports() { grep -c "Port statistics" "$1" 2>/dev/null || true; }
next_report() { # $1 log, $2 count to exceed, $3 pid; waits up to 60 s
  local i=0
  while [ "$(reports "$1")" -le "$2" ] && kill -0 "$3" 2>/dev/null && [ $i -lt 3000 ]; do
    sleep 0.02; i=$((i + 1))
  done
}
testpmd_mpps() { # $1 = device kind
  local vdevs extra=()
  case $1 in
    net_null) vdevs=(--vdev=net_null0 --vdev=net_null1) ;;
    net_ring) vdevs=(--vdev=net_ring0 --vdev=net_ring1); extra=(--tx-first) ;;
  esac
  local log; log=$(mktemp)
  "$TESTPMD" --no-huge --no-pci --no-shconf -m 512 "${EAL_EXTRA[@]}" \
    --file-prefix=tpbench$$ -l "$MAIN_CPU,$FWD_CPU" --log-level='*:warning' "${vdevs[@]}" -- \
    --forward-mode=io --nb-cores=1 --burst=32 --stats-period=1 --no-lsc-interrupt \
    --total-num-mbufs=16384 "${extra[@]}" </dev/null >"$log" 2>&1 &
  local pid=$! tid="" n0 n1 k0=0 k1=0 i=0
  while [ -z "$tid" ] && [ $i -lt 3000 ] && kill -0 "$pid" 2>/dev/null; do
    for t in /proc/$pid/task/*; do
      if grep -q worker "$t/comm" 2>/dev/null; then tid=${t##*/}; fi
    done
    sleep 0.02; i=$((i + 1))
  done
  n0=$(reports "$log"); next_report "$log" "$n0" "$pid"   # warm-up: one report period
  n0=$(reports "$log"); next_report "$log" "$n0" "$pid"; n0=$(reports "$log")
  [ -n "$tid" ] && k0=$(awk '{print $14 + $15}' "/proc/$pid/task/$tid/stat" 2>/dev/null || echo 0)
  sleep "$((SECS - 1))"
  n1=$(reports "$log"); next_report "$log" "$n1" "$pid"; n1=$(reports "$log")
  [ -n "$tid" ] && k1=$(awk '{print $14 + $15}' "/proc/$pid/task/$tid/stat" 2>/dev/null || echo 0)
  kill -INT "$pid" 2>/dev/null; wait "$pid" || true
  python3 - "$log" "$n0" "$n1" "$((k1 - k0))" "$(getconf CLK_TCK)" <<'PY'
import re, sys, statistics
txt = open(sys.argv[1], errors="replace").read()
n0, n1, ticks, hz = (int(a) for a in sys.argv[2:6])
blocks = txt.split("Port statistics")[1:]          # one per report, 2 ports each
def cum(k):  # cumulative RX-packets of both ports in report k (1-based)
    return sum(int(v) for v in re.findall(r"RX-packets:\s+(\d+)", blocks[k - 1])[:2])
def pps(k):
    return sum(int(v) for v in re.findall(r"Rx-pps:\s+(\d+)", blocks[k - 1])[:2])
if n1 > n0 and len(blocks) >= n1:
    wall = statistics.median(pps(k) for k in range(n0 + 1, n1 + 1)) / 1e6
    pk = cum(n1) - cum(n0)
    cpu = pk / (ticks / hz) / 1e6 if ticks > 0 else 0.0
else:
    wall = cpu = 0.0
print(f"{wall:.3f} {cpu:.3f}")
PY
  rm -f "$log"
}

pktwarp_mpps() { # $1 = device kind, $2 = way (zc, zc_stages, copy); prints "<Mpps per wall second> <Mpps per CPU second>"
  PKTWARP_BENCH_SECONDS=$SECS PKTWARP_BENCH_LCORE=$FWD_CPU taskset -c "$FWD_CPU" \
    "$BIN" --exact "bench_$1_$2" --ignored --nocapture --test-threads=1 2>/dev/null \
    | python3 -c '
import re, sys
t = sys.stdin.read()
w = re.search(r"PKTWARP_MPPS \S+ ([0-9.]+)", t)
c = re.search(r"PKTWARP_MPPS_CPU \S+ ([0-9.]+)", t)
print(w.group(1) if w else "0", c.group(1) if c else "0")'
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "date: $(date -u +%FT%TZ)"
echo "machine: $(lscpu | sed -n 's/^Model name:\s*//p' | head -1), $NCPU CPUs; DPDK $(pkg-config --modversion libdpdk 2>/dev/null || echo bundled); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "forwarding CPU: $FWD_CPU; $SECS s per run, $ROUNDS rounds"
WAYS=(zc zc_stages copy)
declare -A TW TC PW PC
for dev in net_null net_ring; do
  tw=(); tc=()
  declare -A pw=() pc=()
  for r in $(seq "$ROUNDS"); do
    read -r a b < <(testpmd_mpps "$dev"); tw+=("$a"); tc+=("$b")
    line="  $dev round $r: testpmd ${tw[-1]} Mpps (${tc[-1]} per CPU-s)"
    for w in "${WAYS[@]}"; do
      read -r a b < <(pktwarp_mpps "$dev" "$w")
      pw[$w]="${pw[$w]:-} $a"; pc[$w]="${pc[$w]:-} $b"
      line="$line, pktwarp $w $a Mpps ($b per CPU-s)"
    done
    echo "$line"
  done
  TW[$dev]=$(median "${tw[@]}"); TC[$dev]=$(median "${tc[@]}")
  for w in "${WAYS[@]}"; do
    # shellcheck disable=SC2086
    PW[$dev.$w]=$(median ${pw[$w]}); PC[$dev.$w]=$(median ${pc[$w]})
  done
  unset pw pc
done
ratio() { awk -v p="$1" -v t="$2" 'BEGIN { if (t > 0) printf "%.2f", p / t; else print "n/a" }'; }
echo
echo "Medians. Mpps per wall second, and per second the forwarding thread was on a CPU; ratio = pktwarp / testpmd io."
echo "| device | forwarder | Mpps | ratio | Mpps/CPU-s | ratio |"
echo "| --- | --- | --- | --- | --- | --- |"
for dev in net_null net_ring; do
  echo "| $dev | testpmd io | ${TW[$dev]} | 1 | ${TC[$dev]} | 1 |"
  for w in "${WAYS[@]}"; do
    case $w in zc) name="pktwarp zero-copy, no stages" ;; zc_stages) name="pktwarp zero-copy, parse + count" ;; copy) name="pktwarp copying path" ;; esac
    echo "| $dev | $name | ${PW[$dev.$w]} | $(ratio "${PW[$dev.$w]}" "${TW[$dev]}") | ${PC[$dev.$w]} | $(ratio "${PC[$dev.$w]}" "${TC[$dev]}") |"
  done
done
