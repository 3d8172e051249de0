#!/usr/bin/env bash
# DPDK RX queue scaling: `pktwarp run` on a net_null port (an endless source of 64 B frames)
# with N RX queues, N pipeline queues and N receive cores (one receive thread per RX queue,
# pinned by queues.cores; the process's other threads kept off those cores with taskset where
# the machine has others; CONFINE=1 keeps the whole process on the N cores instead), for N in
# QUEUES, on each executor in EXECUTORS; and `dpdk-testpmd --forward-mode=io` on the same vdev
# with N RX/TX queues and N forwarding lcores on the same N cores (its main lcore shares the
# first), in the same run. Each pktwarp run is stopped by SIGTERM after SECS seconds; its Mpps is the
# summary's (frames received / run time), and the run must be clean: exit 0, N receive threads,
# every queue receiving (per_queue), received = counted + drops. testpmd's Mpps is the median of its
# per-second Rx-pps reports after the first two.
# Prints per N: testpmd Mpps, per executor its Mpps, the per-core ratio to testpmd (same N,
# same cores) and the scaling against its own 1-queue figure (Mpps(N) / (N x Mpps(1))).
#
# Usage: scripts/bench-dpdk-queues.sh [OUT (default $OUT, else ./bench-results)]
#   env: QUEUES (default "1 2 4 8"; an N above the CPU count is skipped and said so),
#        EXECUTORS (default "cpu gpu"; gpu only where nvidia-smi sees a GPU, else said so;
#        gpu-pinned: the GPU executor with the port's RX pool in pinned host memory mapped for
#        the GPU, `gpu_buffers: pinned`, received by reference: the run must say so),
#        SECS (default 6), REPS (default 1; medians), PIPELINE (default "[count]"),
#        BURST (queues.burst, default 32, testpmd's --burst too), RX_THREADS (queues.rx_threads,
#        default per_queue; per_port: one receive thread for the port, for comparison),
#        PKTWARP_BIN (a `--features dpdk` pktwarp; default: cargo build --release),
#        TESTPMD (default dpdk-testpmd), FIRST_CPU (the first core; default 1 where N < CPUs),
#        CONFINE (1: the whole pktwarp process on the N cores, as testpmd; default 0).
#   On the GPU machine (no DPDK installed): BUNDLE=a scripts/cpu-peer-bundle.sh folder built
#   with PKTWARP_DPDK_BIN (it carries bin/pktwarp, bin/dpdk-testpmd, the DPDK .so files in lib/
#   and the net_null PMD in pmds/; env.sh sets LD_LIBRARY_PATH and PW_DPDK_PMDS, passed to
#   both as EAL -d): the same way the net_null daemon figures of BENCHMARKS.md were made.
set -uo pipefail
cd "$(dirname "$0")/.."
RES=${1:-${OUT:-./bench-results}}
QUEUES=${QUEUES:-"1 2 4 8"}
SECS=${SECS:-6}
REPS=${REPS:-1}
PIPELINE=${PIPELINE:-"[count]"}
BURST=${BURST:-32}
RX_THREADS=${RX_THREADS:-per_queue}
NCPU=$(nproc)
EAL_D=()
if [ -n "${BUNDLE:-}" ]; then
  BUNDLE=$(cd "$BUNDLE" && pwd)
  # shellcheck source=/dev/null
  . "$BUNDLE/env.sh"
  PKTWARP_BIN=${PKTWARP_BIN:-$BUNDLE/bin/pktwarp}
  TESTPMD=${TESTPMD:-$BUNDLE/bin/dpdk-testpmd}
fi
[ -n "${PW_DPDK_PMDS:-}" ] && EAL_D=(-d "$PW_DPDK_PMDS")
TESTPMD=${TESTPMD:-dpdk-testpmd}
command -v "$TESTPMD" >/dev/null || { echo "bench-dpdk-queues: $TESTPMD not found (apt-get install dpdk, or BUNDLE=)" >&2; exit 2; }
if [ -z "${PKTWARP_BIN:-}" ]; then
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
  cargo build --release -q -p pktwarp --features dpdk || { echo "bench-dpdk-queues: build failed" >&2; exit 2; }
  PKTWARP_BIN=$CARGO_TARGET_DIR/release/pktwarp
fi
[ -x "$PKTWARP_BIN" ] || { echo "bench-dpdk-queues: no pktwarp at $PKTWARP_BIN" >&2; exit 2; }
EXECUTORS=${EXECUTORS:-"cpu gpu"}
if [[ " $EXECUTORS " == *" gpu"* ]] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu executor: not run (no GPU here: nvidia-smi sees none)"
  EXECUTORS=$(printf '%s\n' $EXECUTORS | grep -v '^gpu' | paste -sd' ')
fi
mkdir -p "$RES/dpdk-queues"
R=$RES/dpdk-queues
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The N cores of a run: FIRST_CPU.. (default 1 when N leaves CPU 0 free, else 0).
cores() {
  local n=$1 first=${FIRST_CPU:-}
  [ -n "$first" ] || { if [ "$n" -lt "$NCPU" ]; then first=1; else first=0; fi; }
  seq -s, "$first" $((first + n - 1))
}

# testpmd io on net_null, N queues on the cores $2: prints its median Rx Mpps.
testpmd_run() {
  local n=$1 list=$2 log=$tmp/testpmd-$1.log lc
  # Main lcore 0 on the first core (it only prints stats), forwarding lcores 1..N one a core.
  lc="0@${list%%,*}"
  local i=1
  for c in ${list//,/ }; do lc="$lc,$i@$c"; i=$((i + 1)); done
  "$TESTPMD" --no-huge --no-pci --no-shconf -m 1024 "${EAL_D[@]}" --file-prefix=tpq$$ \
    --lcores "$lc" --log-level='*:warning' --vdev=net_null0,size=64 -- \
    --forward-mode=io --port-topology=loop --nb-cores="$n" --rxq="$n" --txq="$n" \
    --burst="$BURST" --stats-period=1 --no-lsc-interrupt --total-num-mbufs=$((16384 * n)) \
    </dev/null >"$log" 2>&1 &
  local pid=$!
  sleep $((SECS + 2))
  kill -INT "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  cp "$log" "$R/testpmd-q$n.log"
  python3 - "$log" <<'PY'
import re, statistics, sys
v = [int(x) for x in re.findall(r"Rx-pps:\s+(\d+)", open(sys.argv[1], errors="replace").read())]
v = v[2:] or v
print(f"{statistics.median(v) / 1e6:.3f}" if v else "0")
PY
}

# pktwarp run on executor $1 with N queues on cores $3, rep $4: prints its Mpps (0: not clean).
pktwarp_run() {
  local ex=$1 n=$2 list=$3 name=$1-q$2-$4 kind=${1%%-*} pinned=""
  [ "$ex" = gpu-pinned ] && pinned="gpu_buffers: pinned"
  cat > "$tmp/$name.yaml" <<EOF
ports:
  - name: wire
    dpdk:
      eal_args: [--no-huge, --no-pci, --no-shconf, -m, "2048", --file-prefix=pwq$$-$name, -l, "${list%%,*}"${EAL_D:+, -d, "$PW_DPDK_PMDS"}]
      vdev: "net_null0,size=64"
      rx_queues: $n
      mempool_size: $((16384 * n - 1))
      $pinned
queues:
  count: $n
  burst: $BURST
  rx_threads: $RX_THREADS
  cores: [$list]
pipeline: $PIPELINE
executor:
  kind: $kind
metrics: { enabled: false }
EOF
  local where=()
  if [ "${CONFINE:-0}" = 1 ]; then
    where=(taskset -c "$list")
  else
    local others
    others=$(seq 0 $((NCPU - 1)) | grep -vxF -f <(tr , '\n' <<<"$list") | paste -sd,)
    [ -n "$others" ] && where=(taskset -c "$others")
  fi
  "${where[@]}" "$PKTWARP_BIN" run --quiet --json "$tmp/$name.yaml" >"$R/$name.json" 2>"$R/$name.log" &
  local pid=$!
  sleep 2
  python3 scripts/thread-cpu.py "$pid" $((SECS > 4 ? SECS - 3 : 1)) >"$R/$name.threads" 2>&1
  sleep 1
  kill -TERM "$pid" 2>/dev/null
  local waited=0
  while kill -0 "$pid" 2>/dev/null && [ $waited -lt 30 ]; do sleep 1; waited=$((waited + 1)); done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid"
  local rc=$?
  python3 - "$R/$name.json" "$n" "$rc" "$ex" "$RX_THREADS" <<'PY'
import json, sys
path, n, rc, ex = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
pinned, ex = ex == "gpu-pinned", ex.split("-")[0]
threads = n if sys.argv[5] == "per_queue" else 1
try:
    s = json.loads([l for l in open(path) if l.lstrip().startswith("{")][-1])
except (OSError, IndexError, ValueError):
    print("0 no-summary"); sys.exit()
drops = sum(d[1] for d in s.get("drops", []))
counted = sum(c[1] for c in s.get("counted", []))
why = []
if rc != 0: why.append(f"exit {rc}")
if s.get("executor") != ex: why.append(f"executor {s.get('executor')}")
if pinned and not any(g.get("path") == "by_reference" for g in s.get("gpu_ingest", [])):
    why.append("not by reference: " + "; ".join(g.get("reason", "") for g in s.get("gpu_ingest", [])))
if s.get("receive_threads") != threads: why.append(f"{s.get('receive_threads')} receive threads")
# One thread per port spreads net_null's identical frames by software RSS: one queue gets all.
if threads == n and any(q.get("rx_frames", 0) == 0 for q in s.get("queues", [])):
    why.append("a queue received nothing")
if s.get("rx_frames", 0) == 0 or counted + drops != s["rx_frames"]: why.append("rx != counted + drops")
print(f"{s.get('mpps', 0):.3f}" if not why else "0 " + ",".join(why))
PY
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

{
  echo "date: $(date -u +%FT%TZ)"
  echo "machine: $(lscpu | sed -n 's/^Model name:\s*//p' | head -1), $NCPU CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
  echo "pktwarp: $PKTWARP_BIN ($(sha256sum "$PKTWARP_BIN" | cut -c1-16)); pipeline $PIPELINE; burst $BURST; rx_threads $RX_THREADS; confine ${CONFINE:-0}; $SECS s a run, $REPS rep(s)"
} | tee "$R/summary.txt"
fails=0
declare -A M
for n in $QUEUES; do
  if [ "$n" -gt "$NCPU" ]; then
    echo "q$n: skipped ($n queues need $n cores; this machine has $NCPU)" | tee -a "$R/summary.txt"
    continue
  fi
  list=$(cores "$n")
  t=()
  declare -A runs=()
  for r in $(seq "$REPS"); do
    t+=("$(testpmd_run "$n" "$list")")
    for ex in $EXECUTORS; do
      read -r m why < <(pktwarp_run "$ex" "$n" "$list" "$r")
      [ "$m" = 0 ] && { fails=$((fails + 1)); echo "q$n $ex rep $r: NOT CLEAN ($why); see $R/$ex-q$n-$r.log"; }
      runs[$ex]="${runs[$ex]:-} $m"
    done
  done
  M[testpmd,$n]=$(median "${t[@]}")
  line="q$n cores $list: testpmd io ${M[testpmd,$n]} Mpps"
  for ex in $EXECUTORS; do
    # shellcheck disable=SC2086
    M[$ex,$n]=$(median ${runs[$ex]})
    line="$line | $ex ${M[$ex,$n]} Mpps (runs:${runs[$ex]})"
  done
  echo "$line" | tee -a "$R/summary.txt"
done
for k in "${!M[@]}"; do echo "$k ${M[$k]}"; done > "$tmp/medians"
python3 - "$tmp/medians" "$EXECUTORS" "$fails" <<'PY' | tee -a "$R/summary.txt"
import sys
m = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    who, n = k.split(",")
    m[(who, int(n))] = float(v)
execs, fails = sys.argv[2].split(), int(sys.argv[3])
ns = sorted({n for (_, n) in m})
print("--- Mpps; per core against testpmd io (same N, same cores); scaling: Mpps(N) / (N x Mpps(1))")
print(f"{'N':>2} {'testpmd':>8} {'scale':>5}" + "".join(f" | {e:>4} {'Mpps':>8} {'/tpmd':>5} {'scale':>5}" for e in execs))
last = []
for n in ns:
    def scale(who):
        one = m.get((who, 1))
        return f"{m[(who, n)] / (n * one):.2f}" if one else "-"
    t = m.get(("testpmd", n), 0)
    row = f"{n:>2} {t:8.3f} {scale('testpmd'):>5}"
    last = []
    for e in execs:
        v = m.get((e, n), 0)
        ratio = f"{v / t:.2f}" if t else "-"
        row += f" | {e:>4} {v:8.3f} {ratio:>5} {scale(e):>5}"
        last.append(f"{e} {v:.2f} Mpps ({ratio} of testpmd, scaling {scale(e)})")
    print(row)
print(f"=== dpdk queue scaling, N={ns[-1] if ns else '-'}: " + "; ".join(last) + f"; {fails} run(s) not clean")
PY
exit $((fails > 0))
