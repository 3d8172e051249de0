#!/usr/bin/env bash
# Builds and tests pktwarp's DPDK support (cargo feature `dpdk`) against the installed DPDK,
# with a real EAL on virtual devices (no hugepages, no PCI): net_pcap, net_null, net_ring,
# memif (two processes) and af_xdp (veth pair in a network namespace; needs root, skipped with
# the reason otherwise). Each tests/dpdk_*.rs file is its own process, so its own EAL.
# Needs: libdpdk-dev (pkg-config libdpdk >= 22.11), libclang (bindgen), dpdk's PMD plugins.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! pkg-config --exists 'libdpdk >= 22.11'; then
  echo "test-dpdk: libdpdk >= 22.11 not found by pkg-config; install it with scripts/install-deps.sh (Debian: libdpdk-dev dpdk-dev)" >&2
  exit 1
fi
echo "test-dpdk: DPDK $(pkg-config --modversion libdpdk)"

# Lint what only this feature compiles (the bindings crate, pipeline::port::dpdk, the DPDK
# tests). The rest of the workspace is linted by .ci/run without the feature; only findings in
# the DPDK paths fail here.
lint() {
  cargo clippy "$@" --all-targets --no-deps --message-format=json -- -W clippy::all 2>/dev/null \
    | python3 -c '
import json, sys
bad = 0
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    msg = m.get("message") if m.get("reason") == "compiler-message" else None
    if not msg or msg.get("level") not in ("warning", "error"):
        continue
    spans = [s["file_name"] for s in msg.get("spans", []) if s.get("is_primary")]
    if any(("port/dpdk/" in f) or ("tests/dpdk_" in f) or ("dpdk-sys" in f) for f in spans):
        bad += 1
        sys.stderr.write(msg.get("rendered") or msg.get("message", "") + "\n")
sys.exit(1 if bad else 0)
'
}
lint -p dpdk-sys --features bindings
lint -p pipeline --features dpdk
lint -p pktwarp --features dpdk

cargo test -p dpdk-sys --features bindings
# Unit tests of the module (Toeplitz vectors, option checks).
cargo test -p pipeline --features dpdk --lib port::dpdk
# The GPU host side (a stand-in device) on DPDK ports (one receive thread per RX queue, the
# received mbufs sent themselves, several ports): its
# own process (its own EAL).
cargo test -p pipeline --features dpdk --lib run_gpu::tests::dpdk
for t in pipeline/tests/dpdk_*.rs; do
  name=$(basename "$t" .rs)
  [ "$name" = dpdk_bench ] && continue
  cargo test -p pipeline --features dpdk --test "$name" -- --nocapture
done
# End-to-end through the CLI, when the daemon's config knows `kind: dpdk`.
if ls tests/dpdk_*.rs >/dev/null 2>&1; then
  for t in tests/dpdk_*.rs; do
    cargo test -p pktwarp --features dpdk --test "$(basename "$t" .rs)" -- --nocapture
  done
fi
