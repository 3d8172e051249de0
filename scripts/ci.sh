#!/usr/bin/env bash
# The whole test suite: installs what it needs (apt packages, pinned pip CUDA compiler parts,
# cargo-fuzz), then formatting, lints, every test, every kernel compiled for sm_90, the DPDK
# feature tests on real DPDK virtual devices, and a short fuzz run. Needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# Run alone (not from .ci/run, which does the same around this script and the hostile steps):
# the corpus tests that did not run are named in one line at the end (README "Test data").
if [ -z "${PKTWARP_NOT_RUN_FILE:-}" ]; then
  export PKTWARP_NOT_RUN_FILE=${TMPDIR:-/tmp}/pktwarp-not-run.txt
  rm -f "$PKTWARP_NOT_RUN_FILE"
  trap 'bash scripts/not-run-summary.sh' EXIT
fi
step() { printf '\n==== %s ====\n' "$*"; }

step "dependencies"
bash scripts/install-deps.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "sizes: no function over 150 lines, no source file over 1000"
python3 scripts/check-sizes.py --self-test
python3 scripts/check-sizes.py

step "layers: each crate and each module of pipeline imports only the layers below it"
python3 scripts/check-layers.py --self-test
python3 scripts/check-layers.py

step "public API: pipeline's user-facing paths are those of docs/public-api.txt; the embedding example is the README's, under 30 lines"
python3 scripts/check-api.py --self-test
python3 scripts/check-api.py

step "GPU suite manifest: well formed, every script it runs exists"
LIST=1 scripts/gpu-suite.sh >/dev/null
grep -v '^#' scripts/gpu-suite.manifest | grep -o 'scripts/[a-z0-9-]*\.sh' | sort -u | while read -r s; do
  [ -x "$s" ] || { echo "gpu-suite.manifest runs $s, which is not an executable script"; exit 1; }
done

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo doc: no broken or private intra-doc links in the documented crates"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p pipeline -p pktwarp-fronthaul -p pktwarp

step "cargo test"
cargo test --workspace --no-fail-fast 2>&1 | tee /tmp/pktwarp-test.log
grep -E "^test result:" /tmp/pktwarp-test.log | awk '{p+=$4; f+=$6; i+=$8} END {printf "%d passed, %d failed, %d skipped\n", p, f, i}' > /tmp/pktwarp-test-total.txt

step "inspect matcher against Hyperscan (feature hyperscan: libhs from install-deps)"
cargo clippy -p pktwarp-inspect --all-targets --features hyperscan -- -D warnings
cargo test -p pktwarp-inspect --features hyperscan --test matcher_hyperscan

step "route tables at full size (release: minutes in a debug build)"
cargo test --release -p flow-rules --test route_file -- --ignored

for s in check-kernels test-dpdk test-daemon test-ipfix-check fuzz-smoke; do
  if [ -f "scripts/$s.sh" ]; then
    step "$s"
    bash "scripts/$s.sh"
  fi
done

step "summary"
cat /tmp/pktwarp-test-total.txt
