#!/usr/bin/env bash
# Proves scripts/check-kernels.sh fails on a spill, as its header says: it is run with a stand-in
# nvcc (PKTWARP_NVCC) that reports CUDA 13.0 and, for every kernel it "compiles", ptxas -v lines
# with spill stores/loads. check-kernels must exit non-zero naming the spill; with the same
# stand-in reporting no spill it must not report one. PKTWARP_BIN: the pktwarp binary (else it is built).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fake() { # fake NVCC_PATH SPILL_BYTES
  cat > "$1" <<FAKE
#!/usr/bin/env bash
if [ "\${1:-}" = --version ]; then echo "Cuda compilation tools, release 13.0, V13.0.88"; echo "Build cuda_13.0"; exit 0; fi
out=""; prev=""
for a in "\$@"; do [ "\$prev" = -o ] && out=\$a; prev=\$a; done
[ -n "\$out" ] && : > "\$out"
echo "ptxas info    : Compiling entry function 'pw_fake_kernel' for 'sm_90'"
echo "ptxas info    : Function properties for pw_fake_kernel"
echo "    16 bytes stack frame, $2 bytes spill stores, $2 bytes spill loads"
echo "ptxas info    : Used 255 registers, 384 bytes cmem[0]" >&2
FAKE
  chmod +x "$1"
}
fake "$tmp/nvcc-spill" 8
fake "$tmp/nvcc-clean" 0
if [ -z "${PKTWARP_BIN:-}" ]; then
  cargo build -q -p pktwarp -p pktwarp-apps --bins
  PKTWARP_BIN=${CARGO_TARGET_DIR:-target}/debug/pktwarp
fi
export PKTWARP_BIN
rc=0
PKTWARP_NVCC="$tmp/nvcc-spill" bash scripts/check-kernels.sh >"$tmp/spill.log" 2>&1 || rc=$?
if [ "$rc" = 0 ]; then
  cat "$tmp/spill.log"; echo "test-check-kernels: FAILED: check-kernels passed a kernel that spills 8 bytes" >&2; exit 1
fi
grep -q "spills registers" "$tmp/spill.log" || { cat "$tmp/spill.log"; echo "test-check-kernels: FAILED: exit $rc without naming the spill" >&2; exit 1; }
# No spill reported: no spill failure (check-kernels may still fail for other reasons, which
# its own CI step reports; this test is about the spill check alone).
PKTWARP_NVCC="$tmp/nvcc-clean" bash scripts/check-kernels.sh >"$tmp/clean.log" 2>&1 || true
if grep -q "spills registers" "$tmp/clean.log"; then
  cat "$tmp/clean.log"; echo "test-check-kernels: FAILED: a spill was found where ptxas reported none" >&2; exit 1
fi
grep -q "pw_fake_kernel" "$tmp/clean.log" || { cat "$tmp/clean.log"; echo "test-check-kernels: FAILED: no kernel was reported" >&2; exit 1; }
echo "test-check-kernels: a reported spill fails check-kernels (exit $rc), none reported: no spill failure"
