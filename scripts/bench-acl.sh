#!/usr/bin/env bash
# ACL classifier benchmark: pktwarp's single-core classifier against DPDK rte_acl
# (dpdk-test-acl --alg=avx2) on the same rule sets and traces, same run, both pinned to one CPU.
#   1. parity: for every set, `pktwarp classify` equals rte_acl's answers line for line
#      (dpdk-test-acl --alg=scalar --verbose=3 on the same files, run here; for the 10K
#      ClassBench sets also expected_dpdk_acl/*.match);
#   2. rate (Mpps): ROUNDS interleaved rounds (rte_acl avx2, then pktwarp, on each set in turn);
#      the median of each side and the ratio of the medians; min-max of each in brackets;
#   3. with BUILD_MEM=1, the 100K sets' build time and memory (rte_acl: wall time minus that of
#      a 1-rule file, its "runtime memory footprint" line, peak RSS; pktwarp: as it prints).
# Sets: the ClassBench acl1 / fw1 / ipc1 at 10K and 100K rules (../shared/data/classbench;
# the 100K ones gzipped), and ClassBench-like IPv6 sets generated here with `pktwarp acl-gen`
# (seeded: the same files every run), classified by `dpdk-test-acl --ipv6`.
# Usage: scripts/bench-acl.sh [ITER (passes over each trace, default 10)]
#   env: ROUNDS=5, SETS="acl1_10K ... ipv6_fw_10000" (names: <classbench set> or
#        ipv6_<acl|fw>_<rules>), DATA=../shared/data/classbench, CPU=0 (the CPU both run on),
#        BIN=pktwarp binary (else cargo build --release), DPDK_TEST_ACL=dpdk-test-acl,
#        EAL_EXTRA="" (more EAL arguments, e.g. -d PMDS), BUILD_MEM=1, SKIP_PARITY=1.
set -euo pipefail

ITER=${1:-10}
ROUNDS=${ROUNDS:-5}
CPU=${CPU:-0}
SETS=${SETS:-acl1_10K fw1_10K ipc1_10K acl1_100K fw1_100K ipc1_100K ipv6_acl_1000 ipv6_acl_10000 ipv6_fw_10000}
root=$(cd "$(dirname "$0")/.." && pwd)
data=${DATA:-$root/../shared/data/classbench}
tacl=${DPDK_TEST_ACL:-dpdk-test-acl}
read -r -a eal_extra <<< "${EAL_EXTRA:-}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

command -v "$tacl" >/dev/null || { echo "$tacl not found (Debian dpdk-dev; scripts/install-deps.sh)" >&2; exit 1; }
[ -d "$data" ] || { echo "no ClassBench data at $data" >&2; exit 1; }
if [ -z "${BIN:-}" ]; then
  echo "== build (release)"
  (cd "$root" && cargo build --release -p pktwarp --quiet)
  BIN=${CARGO_TARGET_DIR:-$root/target}/release/pktwarp
fi
pin=""
command -v taskset >/dev/null && pin="taskset -c $CPU"

echo "date: $(date -u +%FT%TZ)"
echo "machine: $(lscpu | sed -n 's/^Model name:\s*//p' | head -1), $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "pktwarp: $BIN ($(sha256sum "$BIN" | cut -c1-16)); peer: $tacl; CPU $CPU; $ITER passes, $ROUNDS rounds"

# files SET -> "rules trace ipv6(0|1)" in $tmp (decompressed / generated)
prepare() {
  local s=$1
  case $s in
    ipv6_*)
      local p=${s#ipv6_}; p=${p%%_*}; local n=${s##*_}
      "$BIN" acl-gen --profile "$p" --rules "$n" --seed 1 --out "$tmp" --name "$s" >/dev/null
      echo "$tmp/$s $tmp/${s}_trace 1" ;;
    *)
      if [ -f "$data/$s.gz" ]; then
        zcat "$data/$s.gz" > "$tmp/$s"; zcat "$data/${s}_trace.gz" > "$tmp/${s}_trace"
      else
        cp "$data/$s" "$tmp/$s"; cp "$data/${s}_trace" "$tmp/${s}_trace"
      fi
      echo "$tmp/$s $tmp/${s}_trace 0" ;;
  esac
}
tacl_run() { # rules trace ipv6 alg verbose iter
  local v6=(); [ "$3" = 1 ] && v6=(--ipv6)
  "$tacl" --no-huge --no-pci --no-shconf -m 2048 -l "$CPU" --file-prefix=pwacl$$ "${eal_extra[@]}" -- \
    --rulesf="$1" --tracef="$2" --rulenum="$(wc -l < "$1")" --tracenum="$(wc -l < "$2")" \
    --iter="$6" --alg="$4" --verbose="$5" "${v6[@]}" 2>/dev/null
}
rte_rate() { tacl_run "$1" "$2" "$3" avx2 0 "$ITER" | sed -n 's/.*, \([0-9.]*\) pkt\/sec.*/\1/p' | awk '{printf "%.3f", $1 / 1e6}'; }
pw_rate() {
  $pin "$BIN" classify --rules "$1" --format classbench --trace "$2" --bench "$ITER" \
    --max-warnings 0 2>/dev/null | tail -1 | awk '{print $1}'
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
span() { printf '%s\n' "$@" | sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%s-%s", lo, hi}'; }

declare -A R T V
for s in $SETS; do read -r R[$s] T[$s] V[$s] < <(prepare "$s"); done

if [ -z "${SKIP_PARITY:-}" ]; then
  echo "== parity: pktwarp classify vs rte_acl (dpdk-test-acl --alg=scalar --verbose=3, this run)"
  for s in $SETS; do
    "$BIN" classify --rules "${R[$s]}" --format classbench --trace "${T[$s]}" --max-warnings 0 \
      > "$tmp/pw.out" 2>/dev/null
    tacl_run "${R[$s]}" "${T[$s]}" "${V[$s]}" scalar 3 1 |
      sed -n 's/.*5tuple: [0-9]*, category: 0, result: \([0-9]*\).*/\1/p' |
      awk '{print ($1 == 4294967295 ? -1 : $1)}' > "$tmp/rte.out"
    n=$(wc -l < "${T[$s]}")
    misses=$(grep -c -- '^-1$' "$tmp/rte.out" || true)
    if [ "$(wc -l < "$tmp/rte.out")" -eq "$n" ] && cmp -s "$tmp/pw.out" "$tmp/rte.out"; then
      extra=""
      if [ -f "$data/expected_dpdk_acl/${s}_trace.match" ]; then
        cmp -s "$tmp/pw.out" "$data/expected_dpdk_acl/${s}_trace.match" ||
          { echo "$s: DIFFERS from expected_dpdk_acl" >&2; exit 1; }
        extra=", and expected_dpdk_acl"
      fi
      echo "$s: identical to rte_acl$extra ($n lines, $misses match nothing)"
    else
      echo "$s: DIFFERS from rte_acl ($(wc -l < "$tmp/rte.out") answers for $n lines)" >&2
      exit 1
    fi
  done
fi

echo "== rate: $ITER passes over each trace, $ROUNDS interleaved rounds, CPU $CPU"
declare -A RA PA
for r in $(seq "$ROUNDS"); do
  for s in $SETS; do
    RA[$s]="${RA[$s]:-} $(rte_rate "${R[$s]}" "${T[$s]}" "${V[$s]}")"
    PA[$s]="${PA[$s]:-} $(pw_rate "${R[$s]}" "${T[$s]}")"
  done
  echo "  round $r done ($(cut -d' ' -f1 /proc/loadavg) load)"
done
echo "| set | rules | headers | rte_acl avx2 Mpps (median, range) | pktwarp Mpps (median, range) | pktwarp / rte_acl |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for s in $SETS; do
  # shellcheck disable=SC2086
  a=$(median ${RA[$s]}); p=$(median ${PA[$s]})
  # shellcheck disable=SC2086
  printf '| %s | %s | %s | %s (%s) | %s (%s) | %s |\n' "$s" "$(wc -l < "${R[$s]}")" "$(wc -l < "${T[$s]}")" \
    "$a" "$(span ${RA[$s]})" "$p" "$(span ${PA[$s]})" \
    "$(awk -v p="$p" -v a="$a" 'BEGIN { if (a > 0) printf "%.2f", p / a; else print "n/a" }')"
done

if [ -n "${BUILD_MEM:-}" ]; then
  echo "== 100K: build time and memory"
  head -1 "$data/acl1_10K" > "$tmp/one_rule"
  head -1 "$data/acl1_10K_trace" > "$tmp/one_trace"
  rte_run() { # rules trace -> "wall_s rss_kb footprint_bytes build_bytes"
    /usr/bin/time -f 'TIME %e %M' "$tacl" --no-huge --no-pci --no-shconf -m 2048 -l "$CPU" \
      --file-prefix=pwacl$$ "${eal_extra[@]}" --log-level=lib.acl:debug -- --rulesf="$1" --tracef="$2" \
      --rulenum=100000 --tracenum=1 --iter=1 --alg=avx2 --verbose=0 > "$tmp/rte.log" 2>&1 || true
    awk '/^TIME/ {t=$2; m=$3} /^total:/ {f=$2} /memory consumed:/ {b=$3} END {print t, m, f, b}' "$tmp/rte.log"
  }
  read -r base_t _ _ _ <<< "$(rte_run "$tmp/one_rule" "$tmp/one_trace")"
  printf '%-10s %12s %14s %14s %12s | %12s %14s %12s\n' set rte_build_s rte_tables_B rte_buildmem_B rte_rss_KB pw_build_s pw_tables_B pw_rss_KB
  for s in $SETS; do
    case $s in *_100K) ;; *) continue ;; esac
    read -r t rss fp bm <<< "$(rte_run "${R[$s]}" "$tmp/one_trace")"
    rb=$(echo "$t - $base_t" | bc -l)
    /usr/bin/time -f 'TIME %e %M' "$BIN" classify --rules "${R[$s]}" --format classbench \
      --trace "$tmp/one_trace" --bench 1 --max-warnings 0 > "$tmp/pw.log" 2>&1
    pb=$(awk '/^build:/ {printf "%.3f", $2 / 1000}' "$tmp/pw.log")
    pm=$(awk '/^table memory:/ {print $3}' "$tmp/pw.log")
    prss=$(awk '/^TIME/ {print $3}' "$tmp/pw.log")
    printf '%-10s %12.3f %14s %14s %12s | %12s %14s %12s\n' "$s" "$rb" "$fp" "$bm" "$rss" "$pb" "$pm" "$prss"
  done
fi
