#!/usr/bin/env bash
# ACL classifier benchmark: pktwarp's single-core classifier against DPDK rte_acl
# (dpdk-test-acl, --alg=avx2 and --alg=scalar) on the same ClassBench rule sets and traces, in the
# same run, both pinned to CPU 0.
#   1. builds pktwarp (release) and checks `pktwarp classify` output against
#      expected_dpdk_acl/*.match for the 10K sets, and the 100K sets against the linear
#      first-match reference (release test, whole trace);
#   2. classification rate (Mpps) of each on acl1_10K, fw1_10K, ipc1_10K, and the ratio
#      pktwarp / rte_acl; each figure is the best of $REPEAT interleaved runs (the dev machine is
#      shared, so the best run is the least disturbed one);
#   3. 100K sets: build time and memory of each. rte_acl: build time = wall time of
#      dpdk-test-acl on the 100K rules minus that on a 1-rule file (same EAL start-up, one
#      packet classified), table memory = its "runtime memory footprint" log line, build memory =
#      its "memory consumed" line; peak RSS of both processes from /usr/bin/time.
# Usage: scripts/bench-acl.sh [ITER]   (env: REPEAT=5, DATA=../shared/data/classbench,
#        SKIP_PARITY=1 to skip step 1 when re-measuring)
set -euo pipefail

ITER=${1:-10}
REPEAT=${REPEAT:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
data=${DATA:-$root/../shared/data/classbench}
target=${CARGO_TARGET_DIR:-$root/target}
bin=$target/release/pktwarp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

command -v dpdk-test-acl >/dev/null || { echo "dpdk-test-acl not found (Debian dpdk-dev; scripts/install-deps.sh)" >&2; exit 1; }
[ -d "$data" ] || { echo "no ClassBench data at $data" >&2; exit 1; }

echo "== build (release)"
(cd "$root" && cargo build --release -p pktwarp --quiet)
pin=""
command -v taskset >/dev/null && pin="taskset -c 0"

if [ -z "${SKIP_PARITY:-}" ]; then
echo "== parity: pktwarp classify vs expected_dpdk_acl (10K sets)"
for s in acl1_10K fw1_10K ipc1_10K; do
    "$bin" classify --rules "$data/$s" --format classbench --trace "$data/${s}_trace" \
        --max-warnings 0 > "$tmp/$s.out" 2>/dev/null
    if cmp -s "$tmp/$s.out" "$data/expected_dpdk_acl/${s}_trace.match"; then
        echo "$s: identical ($(wc -l < "$tmp/$s.out") lines)"
    else
        echo "$s: DIFFERS from expected_dpdk_acl" >&2
        exit 1
    fi
done
echo "== parity: 100K sets vs linear first-match reference (whole traces, release)"
(cd "$root" && PW_ACL_100K_STEP=1 cargo test --release -p flow-rules --test classbench_parity --quiet -- 100k 2>&1 | grep -E "test result|FAILED|panicked")
fi

rte_rate() { # set alg -> Mpps
    dpdk-test-acl --no-huge --no-pci -m 2048 -l 0 -- --rulesf="$1" --tracef="$2" \
        --rulenum=100000 --tracenum=100000 --iter="$ITER" --alg="$3" --verbose=0 2>/dev/null |
        sed -n 's/.*, \([0-9.]*\) pkt\/sec.*/\1/p' | awk '{printf "%.3f", $1 / 1e6}'
}
pw_rate() {
    $pin "$bin" classify --rules "$1" --format classbench --trace "$2" --bench "$ITER" \
        --max-warnings 0 2>/dev/null | tail -1 | awk '{print $1}'
}
best() { printf '%s\n' "$@" | sort -g | tail -1; }

echo "== rate: $ITER passes over each trace, best of $REPEAT, one core"
printf '%-10s %14s %16s %13s %14s %16s\n' set rte_avx2_Mpps rte_scalar_Mpps pktwarp_Mpps ratio_vs_avx2 ratio_vs_scalar
for s in acl1_10K fw1_10K ipc1_10K; do
    a=(); c=(); p=()
    for _ in $(seq "$REPEAT"); do
        a+=("$(rte_rate "$data/$s" "$data/${s}_trace" avx2)")
        c+=("$(rte_rate "$data/$s" "$data/${s}_trace" scalar)")
        p+=("$(pw_rate "$data/$s" "$data/${s}_trace")")
    done
    A=$(best "${a[@]}"); C=$(best "${c[@]}"); P=$(best "${p[@]}")
    printf '%-10s %14s %16s %13s %14.2f %16.2f\n' "$s" "$A" "$C" "$P" \
        "$(echo "$P / $A" | bc -l)" "$(echo "$P / $C" | bc -l)"
done

echo "== 100K: build time and memory"
head -1 "$data/acl1_10K" > "$tmp/one_rule"
head -1 "$data/acl1_10K_trace" > "$tmp/one_trace"
rte_run() { # rules trace -> "wall_s rss_kb footprint_bytes build_bytes"
    /usr/bin/time -f 'TIME %e %M' dpdk-test-acl --no-huge --no-pci -m 2048 -l 0 \
        --log-level=lib.acl:debug -- --rulesf="$1" --tracef="$2" --rulenum=100000 \
        --tracenum=1 --iter=1 --alg=avx2 --verbose=0 > "$tmp/rte.log" 2>&1 || true
    awk '/^TIME/ {t=$2; m=$3} /^total:/ {f=$2} /memory consumed:/ {b=$3} END {print t, m, f, b}' "$tmp/rte.log"
}
read -r base_t _ _ _ <<< "$(rte_run "$tmp/one_rule" "$tmp/one_trace")"
printf '%-10s %12s %14s %14s %12s | %12s %14s %12s\n' set rte_build_s rte_tables_B rte_buildmem_B rte_rss_KB pw_build_s pw_tables_B pw_rss_KB
for s in acl1_100K fw1_100K ipc1_100K; do
    zcat "$data/$s.gz" > "$tmp/$s"
    zcat "$data/${s}_trace.gz" > "$tmp/${s}_trace"
    read -r t rss fp bm <<< "$(rte_run "$tmp/$s" "$tmp/one_trace")"
    rb=$(echo "$t - $base_t" | bc -l)
    /usr/bin/time -f 'TIME %e %M' "$bin" classify --rules "$tmp/$s" --format classbench \
        --trace "$tmp/one_trace" --bench 1 --max-warnings 0 > "$tmp/pw.log" 2>&1
    pb=$(awk '/^build:/ {printf "%.3f", $2 / 1000}' "$tmp/pw.log")
    pm=$(awk '/^table memory:/ {print $3}' "$tmp/pw.log")
    prss=$(awk '/^TIME/ {print $3}' "$tmp/pw.log")
    printf '%-10s %12.3f %14s %14s %12s | %12s %14s %12s\n' "$s" "$rb" "$fp" "$bm" "$rss" "$pb" "$pm" "$prss"
    grep '^tables:' "$tmp/pw.log" | sed "s/^/    pktwarp $s /"
    rm -f "$tmp/$s" "$tmp/${s}_trace"
done
