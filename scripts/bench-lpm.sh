#!/usr/bin/env bash
# Route LPM lookups per second on one core: DPDK's rte_lpm / rte_lpm6 (dpdk-test's
# lpm_perf_autotest / lpm6_perf_autotest, Debian package dpdk-dev on Debian 12) and pktwarp's
# flow_rules::route tables (flow-rules/benches/route.rs, same table shapes, uniformly random
# destinations), in the same run, with the ratio ours / DPDK.
#
# DPDK reports cycles per lookup; they become lookups/s with the TSC frequency its EAL logs.
# Both run pinned to one CPU (DPDK: -l $CPU; ours: taskset). Note: on a loaded or small
# machine DPDK's test spends most of its time adding the 1M routes (its rule list is searched
# linearly per add), several minutes; only the lookup figures are compared.
#
# Usage: scripts/bench-lpm.sh [CPU]    (env LPM_TIMEOUT: seconds per DPDK test, default 3600;
#        LPM_SKIP_V4=1: leave out DPDK's slow IPv4 test, its rows then read n/a)
set -euo pipefail
cd "$(dirname "$0")/.."
CPU=${1:-0}
T=${LPM_TIMEOUT:-3600}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

command -v dpdk-test >/dev/null || { echo "dpdk-test not found (scripts/install-deps.sh installs dpdk-dev)" >&2; exit 1; }

run_dpdk() { # test-name log
  DPDK_TEST=$1 timeout "$T" stdbuf -oL -eL dpdk-test --no-huge --no-pci -m 2048 -l "$CPU" \
    --log-level=lib.eal:debug >"$2" 2>&1 || { echo "dpdk-test $1 failed (rc $?); tail of its log:" >&2; tail -5 "$2" >&2; exit 1; }
}

echo "== building the pktwarp benchmark (release)" >&2
cargo bench -p flow-rules --bench route --no-run >/dev/null 2>&1 || cargo bench -p flow-rules --bench route --no-run
if [ -z "${LPM_SKIP_V4:-}" ]; then
  echo "== DPDK lpm_perf_autotest (slow: 1M route adds)" >&2
  run_dpdk lpm_perf_autotest "$out/lpm.log"
else
  : >"$out/lpm.log"
fi
echo "== DPDK lpm6_perf_autotest" >&2
run_dpdk lpm6_perf_autotest "$out/lpm6.log"
echo "== pktwarp flow_rules::route" >&2
PW_LPM_PLAIN=1 taskset -c "$CPU" cargo bench -q -p flow-rules --bench route 2>"$out/ours.err" >"$out/ours.txt"

tsc_khz=$(grep -ho 'TSC frequency is ~[0-9]*' "$out/lpm.log" "$out/lpm6.log" | grep -o '[0-9]*$' | head -1)
[ -n "$tsc_khz" ] || { echo "no TSC frequency in the DPDK log" >&2; exit 1; }

cycles() { # log pattern -> cycles per lookup
  { grep "$2" "$1" || true; } | head -1 | sed -E 's/.*: *([0-9.]+) cycles.*/\1/'
}
ours() { { grep "^$1:" "$out/ours.txt" || true; } | awk '{print $(NF-1)}'; }

printf '%-36s %16s %16s %8s\n' "lookup (one core, TSC ${tsc_khz} kHz)" "DPDK lookups/s" "pktwarp lookups/s" "ratio"
row() { # label dpdk-log pattern our-key
  local c o d
  c=$(cycles "$2" "$3"); o=$(ours "$4")
  if [ -z "$c" ] || [ -z "$o" ]; then printf '%-36s %16s %16s %8s\n' "$1" "${c:-n/a}" "${o:-n/a}" "n/a"; return; fi
  d=$(awk -v k="$tsc_khz" -v c="$c" 'BEGIN{printf "%.0f", k*1000/c}')
  printf '%-36s %16s %16s %8s\n' "$1" "$d" "$o" "$(awk -v o="$o" -v d="$d" 'BEGIN{printf "%.2f", o/d}')"
}
row "IPv4 single (rte_lpm_lookup)" "$out/lpm.log" "Average LPM Lookup:" "lpm4 single"
row "IPv4 bulk (rte_lpm_lookup_bulk)" "$out/lpm.log" "BULK LPM Lookup:" "lpm4 bulk"
row "IPv4 x4 (rte_lpm_lookupx4) vs bulk" "$out/lpm.log" "LPM LookupX4:" "lpm4 bulk"
row "IPv6 single, 1000 routes, all hit" "$out/lpm6.log" "Average LPM Lookup:" "lpm6 hit"
row "IPv6 bulk vs our single (all hit)" "$out/lpm6.log" "BULK LPM Lookup:" "lpm6 hit"
grep -h "routes\|Average LPM Add\|fails" "$out/lpm.log" "$out/lpm6.log" | sed 's/^/dpdk: /' >&2 || true
sed 's/^/pktwarp: /' "$out/ours.err" >&2
