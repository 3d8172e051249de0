#!/usr/bin/env bash
# The C++ side under AddressSanitizer: the CUDA stage code compiled for the host (the kernels
# crate's `host` feature, host/*.cpp, and the generated pipelines HostPipeline compiles at run
# time) built with -fsanitize=address (PKTWARP_HOST_SANITIZE=address, read by
# gpu-kernels/build.rs and gpu-kernels/src/host.rs), then the host differential tests run under
# it. First a canary: a parse told a 16-byte frame is 1500 bytes long must be reported, or the
# sanitizer is not in the build and a clean run proves nothing. Any ASan report fails the step.
# Own target folder (target/asan by default): the normal build is not invalidated.
set -euo pipefail
cd "$(dirname "$0")/.."
export PKTWARP_HOST_SANITIZE=address
export CARGO_TARGET_DIR=${ASAN_TARGET_DIR:-$PWD/target/asan}
# rustc links the ASan runtime as an ordinary library, not first: allowed explicitly. Leaks are
# not checked (the Rust test harness and statics own memory until exit by design).
export ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0:halt_on_error=1:abort_on_error=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "ci-asan: canary (must be reported)"
if cargo test -q -p pktwarp --test hostile_asan -- --ignored --exact asan_canary_out_of_bounds_parse >"$log" 2>&1; then
  cat "$log"; echo "ci-asan: FAILED: the out-of-bounds canary ran clean: the host C++ is not under ASan" >&2; exit 1
fi
if ! grep -q "AddressSanitizer: heap-buffer-overflow" "$log"; then
  cat "$log"; echo "ci-asan: FAILED: the canary failed without an ASan report" >&2; exit 1
fi
echo "ci-asan: canary reported: $(grep -m1 'AddressSanitizer' "$log")"

# The host differential tests: parse (Rust == C++ on the generated capture, property frames,
# mutations), the fast key, the composed pipelines (HostPipeline .so under ASan too), the ACL
# matcher (flow-rules' properties and generated IPv6 sets), the flow table and the rate-limit
# table (pktwarp-flow), the inspect evaluator.
echo "ci-asan: host differential tests under ASan"
cargo test -p pipeline --test parse_cuda_host --test parse_fast_key --test pipeline_cuda_host --test parse_multi_proto
cargo test -p flow-rules --test acl_props --test acl_ipv6_gen
cargo test -p pktwarp-flow --test flow_cuda_host --test linux_tcp --test layout --test rate_cuda_host
# The inspect stage's full check (generated rules, keyword edges, hostile payloads, ET Open).
cargo test -p pktwarp-inspect --test eval_cuda_host
echo "ci-asan: no AddressSanitizer report"
