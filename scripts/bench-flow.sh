#!/usr/bin/env bash
# Flow table operations per second on one core: pktwarp's FlowTable (pipeline/flow/benches/
# flow_ops.rs) against DPDK's rte_hash (`dpdk-test` hash_perf_autotest, Debian package dpdk-dev)
# in the same run, same key size (ours: size_of FlowKey, printed by the bench; the autotest's
# row of that size), same table (2^19 entries, 75% full, every key in its first bucket), both
# pinned to one CPU. One table with the ratio ours / DPDK.
#
# The autotest's column used is "Operations with 8-byte data, without pre-computed hash
# values" (our table computes the hash and keeps a 128-byte entry a flow). Its operations map
# to ours as:  add -> Add;  lookup_hit -> Lookup;  lookup_miss -> Lookup (the autotest times
# no miss: its hit stands in);  update (find + write state and counters) -> Lookup (rte_hash
# finds and returns the data pointer, writes nothing);  update_burst (32 a call) ->
# Lookup_bulk (16 a call). DPDK prints cycles per operation; they become operations/s with the
# TSC frequency its EAL logs. Only the autotest's first section (no locks, all keys in their
# primary bucket) is run: the script stops it there.
#
# Usage: scripts/bench-flow.sh [CPU]     (env ROUNDS: our rounds, median, default 3;
#        DPDK_TIMEOUT: seconds for the autotest's section, default 900)
set -euo pipefail
cd "$(dirname "$0")/.."
CPU=${1:-0}
T=${DPDK_TIMEOUT:-900}
out=$(mktemp -d)
dpid=""
cleanup() { [ -n "$dpid" ] && kill "$dpid" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT

command -v dpdk-test >/dev/null || { echo "dpdk-test not found (scripts/install-deps.sh installs dpdk-dev)" >&2; exit 1; }

echo "== building the pktwarp benchmark (release)" >&2
cargo bench -q -p pktwarp-flow --bench flow_ops --no-run 2>/dev/null || cargo bench -p pktwarp-flow --bench flow_ops --no-run

echo "date: $(date -u +%FT%TZ)"
echo "machine: $(lscpu | sed -n 's/^Model name:\s*//p' | head -1), $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty'); CPU $CPU"

echo "== DPDK hash_perf_autotest (first section)" >&2
DPDK_TEST=hash_perf_autotest stdbuf -oL -eL dpdk-test --no-huge --no-pci -m 1024 -l "$CPU" \
  --no-shconf --file-prefix=pwflow$$ --log-level=lib.eal:debug >"$out/dpdk.log" 2>&1 &
dpid=$!
waited=0
until grep -qs "PRIMARY OR SECONDARY" "$out/dpdk.log"; do
  if ! kill -0 "$dpid" 2>/dev/null; then
    grep -q "PRIMARY OR SECONDARY\|Test OK" "$out/dpdk.log" && break
    echo "dpdk-test ended early; tail of its log:" >&2; tail -5 "$out/dpdk.log" >&2; exit 1
  fi
  [ "$waited" -lt "$T" ] || { echo "dpdk-test took over ${T}s" >&2; exit 1; }
  sleep 1; waited=$((waited + 1))
done
kill "$dpid" 2>/dev/null || true
wait "$dpid" 2>/dev/null || true
dpid=""

echo "== pktwarp flow_ops" >&2
taskset -c "$CPU" cargo bench -q -p pktwarp-flow --bench flow_ops 2>"$out/ours.err" >"$out/ours.txt"
cat "$out/ours.err" >&2

keysize=$(sed -n 's/.*key \([0-9]*\) bytes.*/\1/p' "$out/ours.err")
tsc_khz=$(grep -o 'TSC frequency is ~[0-9]*' "$out/dpdk.log" | grep -o '[0-9]*$' | head -1)
[ -n "$keysize" ] || { echo "the bench printed no key size" >&2; exit 1; }
[ -n "$tsc_khz" ] || { echo "no TSC frequency in the DPDK log" >&2; exit 1; }

# The row of our key size in "Operations with 8-byte data" / "Without pre-computed hash values":
# Keysize Add Lookup Lookup_bulk Delete (cycles).
row=$(awk -v k="$keysize" '
  /Operations with 8-byte data/ { data = 1 }
  /Without pre-computed hash/ { nohash = 1; next }
  /With pre-computed hash/ { nohash = 0 }
  data && nohash && $1 == k { print; exit }' "$out/dpdk.log")
[ -n "$row" ] || { echo "no row for key size $keysize in the DPDK log" >&2; exit 1; }
read -r _ c_add c_lookup c_bulk _ <<<"$row"

ours() { awk -v n="$1" '$1 == "op" && $2 == n { print $4 }' "$out/ours.txt"; }
mops() { awk -v k="$tsc_khz" -v c="$1" 'BEGIN { printf "%.3f", k / 1000 / c }'; }

echo "key size $keysize bytes; 2^19 entries, 75% load; DPDK TSC $tsc_khz kHz"
printf '%-14s %12s  %-30s %12s %7s\n' "operation" "pktwarp M/s" "DPDK rte_hash (cycles)" "DPDK M/s" "ratio"
line() { # name dpdk-label cycles
  local o d
  o=$(ours "$1"); d=$(mops "$3")
  printf '%-14s %12s  %-30s %12s %7s\n' "$1" "${o:-n/a}" "$2 ($3)" "$d" \
    "$(awk -v o="${o:-0}" -v d="$d" 'BEGIN { printf "%.2f", (d > 0 ? o / d : 0) }')"
}
line add "Add" "$c_add"
line lookup_hit "Lookup" "$c_lookup"
line lookup_miss "Lookup (hit stands in)" "$c_lookup"
line update "Lookup (no write)" "$c_lookup"
line update_burst "Lookup_bulk (16)" "$c_bulk"
