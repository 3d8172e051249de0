#!/usr/bin/env bash
# CI check of the GPU machine's IPFIX scripts without a GPU: builds the nfdump bundle
# (scripts/nfdump-bundle.sh, which checks itself from env -i) and runs scripts/gpu-ipfix-check.sh
# with the CPU executor standing in for the GPU one (SECOND=cpu), on the tcpdump corpus, with the
# debug pktwarp, over conntrack's table and with flow_stats' own (TABLE). Only the GPU executor's
# own run is then left to the GPU machine.
# Needs nfdump (scripts/install-deps.sh) and the test corpus (../shared/data or PKTWARP_DATA);
# without the corpus it says so and exits 0, unless CI=true (then 1).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${PKTWARP_DATA:-../shared/data}
if [ ! -d "$DATA/pcaps/tcpdump" ]; then
  echo "test-ipfix-check: NOT RUN: no corpus at $DATA/pcaps/tcpdump (set PKTWARP_DATA)" >&2
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
cargo build -q --bin pktwarp
tmp=$(mktemp -d /tmp/pktwarp-test-ipfix.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/carry"
cp "${CARGO_TARGET_DIR:-target}/debug/pktwarp" "$tmp/carry/pktwarp"
scripts/nfdump-bundle.sh "$tmp/carry/nfdump"
for table in conntrack own; do
  TABLE=$table SECOND=cpu scripts/gpu-ipfix-check.sh "$tmp/carry" "$DATA" "$tmp/out-$table"
done
