#!/usr/bin/env bash
# CI steps for hostile input, faults and fleets, after scripts/ci.sh: check-kernels proven to fail
# on a spill (scripts/test-check-kernels.sh), the host C++ under AddressSanitizer
# (scripts/ci-asan.sh), the Kubernetes overlays rendered and validated offline and the systemd unit
# checked (scripts/ci-deploy.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n==== %s ====\n' "$*"; }
for s in test-check-kernels ci-asan ci-deploy; do
  step "$s"
  bash "scripts/$s.sh"
done
