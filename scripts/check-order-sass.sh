#!/usr/bin/env bash
# check-order-sass.sh CUBIN KERNEL...: fails when, in one of the named kernels of CUBIN, a
# shared-memory store sits between a WARPSYNC.ALL and the block barrier after it. The per-flow
# order of cuda/flow_order.cuh spins on another lane's shared store (publish / done / skip); a
# store ptxas sinks below the WARPSYNC.ALL it puts before a round's barrier hangs the warp when
# a lane waits for a lower lane of its own warp (it never reaches the WARPSYNC, and the lower lane
# waits there before its store). scripts/check-kernels.sh runs it on the flow-table probe, whose
# straight-line rounds (tools/gpu-probes/flow_table_bench.cu, fb_update) showed it.
# nvdisasm: $PKTWARP_NVDISASM, else beside nvcc ($NVCC's folder).
set -euo pipefail
cubin=$1
shift
DIS=${PKTWARP_NVDISASM:-}
if [ -z "$DIS" ] && [ -n "${NVCC:-}" ] && [ -x "$(dirname "$NVCC")/nvdisasm" ]; then DIS=$(dirname "$NVCC")/nvdisasm; fi
if [ -z "$DIS" ] || [ ! -x "$DIS" ]; then
  echo "check-order-sass: no nvdisasm (scripts/install-deps.sh installs it beside nvcc, or set PKTWARP_NVDISASM)" >&2
  exit 2
fi
"$DIS" -c "$cubin" | awk -v kernels="$*" '
  BEGIN { n = split(kernels, want, " ") }
  /^[[:space:]]*\/\/-+ \.text\./ {
    on = 0; name = $0
    for (i = 1; i <= n; i++) if (index($0, want[i])) { on = 1; seen[want[i]] = 1 }
    ws = 0; next
  }
  !on { next }
  /WARPSYNC/ { ws = 1; at = $0; next }
  /BAR\.SYNC|BAR\.ARV|BAR\.RED/ { ws = 0; next }
  ws && /[[:space:]]STS[.[:space:]]/ {
    printf "check-order-sass: %s: a shared store after a WARPSYNC, before the barrier:\n  %s\n  %s\n", name, at, $0
    bad = 1
  }
  END {
    for (i = 1; i <= n; i++) if (!(want[i] in seen)) { printf "check-order-sass: no kernel %s in the module\n", want[i]; bad = 1 }
    exit bad
  }'
