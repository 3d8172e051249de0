#!/usr/bin/env bash
# The one GPU-machine run of the GPU data path: verify (CPU reference vs GPU executor, every frame)
# on the tcpdump corpus, the ClassBench acl1/fw1/ipc1 10K traces with their rule sets and 10 million
# generated frames (malformed ones included), then `pktwarp bench` (stage throughput, end to end,
# latency). Builds nothing: it runs a binary built on the development machine.
#
# Usage (from the repository root): scripts/gpu-run.sh [BIN] [DATA] [OUT]
#   BIN  pktwarp binary        (default .carry/pktwarp)
#   DATA folder with pcaps/ and classbench/ (default .carry/data; ../shared/data works too)
#   OUT  results folder        (default $OUT, else ./gpu-results)
# Each step has its own time limit so one hang cannot eat the whole run; the log records every
# command with its exit code, and the bench table is printed last.
# ONLY=REGEX runs just the steps whose name matches (e.g. ONLY='reload|devices').
# ACL hot swap on the GPU: reload-torture-* swap the ACL table 100 times under traffic and check
# every verdict against the CPU reference of the generation its burst carried. Several GPUs:
# verify-devices and bench-devices run queues on several GPU executors (`0,0`: two on GPU 0 when
# only one GPU is there; DEVICES=0,1 on a two-GPU machine).
set -u
BIN=${1:-.carry/pktwarp}
DATA=${2:-.carry/data}
RES=${3:-${OUT:-./gpu-results}}
mkdir -p "$RES"
LOG=$RES/gpu-run.log
export RUST_LOG=${RUST_LOG:-info,pipeline::stage::acl=error}
CB=$DATA/classbench
fails=0
DEVICES=${DEVICES:-0,0}
step() { # step NAME SECONDS CMD...
  local name=$1 secs=$2; shift 2
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then return 0; fi
  echo "=== $name: $*" | tee -a "$LOG"
  local t0=$(date +%s%N)
  timeout "$secs" "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$LOG"
  [ "$rc" = 0 ] || fails=$((fails + 1))
}
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc)"
  echo "binary: $(sha256sum "$BIN" | cut -c1-16)"
} 2>&1 | tee -a "$LOG"

step verify-tcpdump 60 "$BIN" verify --input "$DATA/pcaps" --mode persistent,launch --placement device,mapped --json "$RES/verify-tcpdump.json"
step verify-acl1 90 "$BIN" verify --trace "$CB/acl1_10K_trace.gz" --rules "$CB/acl1_10K" --mode persistent,launch,graph --placement device,mapped --json "$RES/verify-acl1.json"
step verify-fw1 45 "$BIN" verify --trace "$CB/fw1_10K_trace.gz" --rules "$CB/fw1_10K" --mode persistent --placement device,mapped --queues 3 --ctas 2 --json "$RES/verify-fw1.json"
step verify-ipc1 45 "$BIN" verify --trace "$CB/ipc1_10K_trace.gz" --rules "$CB/ipc1_10K" --mode persistent --placement device,mapped --json "$RES/verify-ipc1.json"
# IPv6 ClassBench-style sets made here by `pktwarp acl-gen` (seeded; the `dpdk-test-acl --ipv6`
# formats `classify` reads): the GPU's IPv6 ACL against the CPU reference, whole bursts and
# small ones (lanes shared), tagged without metadata, and a reload torture between two IPv6 sets.
A6=${TMPDIR:-/tmp}/pktwarp-acl6
step acl-gen-acl6 60 "$BIN" acl-gen --profile acl --rules 10000 --seed 1 --out "$A6" --name acl6_10K
step acl-gen-fw6 60 "$BIN" acl-gen --profile fw --rules 10000 --seed 1 --out "$A6" --name fw6_10K
step verify-acl6 90 "$BIN" verify --trace "$A6/acl6_10K_trace" --rules "$A6/acl6_10K" --mode persistent,launch,graph --placement device,mapped --json "$RES/verify-acl6.json"
step verify-fw6 60 "$BIN" verify --trace "$A6/fw6_10K_trace" --rules "$A6/fw6_10K" --mode persistent --placement device,mapped --queues 3 --ctas 2 --default-drop --json "$RES/verify-fw6.json"
step verify-groups-acl6 60 "$BIN" verify --trace "$A6/acl6_10K_trace" --rules "$A6/acl6_10K" --burst 32 --mode persistent,launch --placement device,mapped --json "$RES/verify-groups-acl6.json"
step verify-tagged-nometa-fw6 60 "$BIN" verify --trace "$A6/fw6_10K_trace" --rules "$A6/fw6_10K" --burst 16 --slot-data-bytes 2048 --tagged true --mode persistent --placement mapped --no-meta --json "$RES/verify-tagged-nometa-fw6.json"
step reload-torture-ipv6 90 "$BIN" verify --trace "$A6/acl6_10K_trace" --rules "$A6/acl6_10K" --rules-b "$A6/fw6_10K" --reload-torture 100 --swap-every 4 --mode persistent --placement mapped --queues 2 --json "$RES/torture-ipv6.json"
step verify-gen10M 120 "$BIN" verify --gen 10000000 --malformed 0.05 --ipv6 0.2 --rules "$CB/acl1_10K" --mode persistent --placement device --queues 2 --ctas 4 --json "$RES/verify-gen.json"
# Small bursts: spare threads share each frame's ACL lookup (groups of 8, 32, 16 and 4 lanes).
step verify-groups-acl1 60 "$BIN" verify --trace "$CB/acl1_10K_trace.gz" --rules "$CB/acl1_10K" --burst 32 --mode persistent,launch,graph --placement device,mapped --json "$RES/verify-groups-acl1.json"
step verify-groups-fw1 60 "$BIN" verify --trace "$CB/fw1_10K_trace.gz" --rules "$CB/fw1_10K" --burst 8 --mode persistent,launch --placement mapped --queues 2 --ctas 2 --json "$RES/verify-groups-fw1.json"
step verify-groups-ipc1 60 "$BIN" verify --trace "$CB/ipc1_10K_trace.gz" --rules "$CB/ipc1_10K" --burst 16 --mode persistent --placement device,mapped --json "$RES/verify-groups-ipc1.json"
# The smallest group: 2 lanes per frame (64 frames, 128 threads) on ipc1_10K (5 trees, leaves of
# up to 66 records), so a leaf takes many 2-record chunks.
step verify-groups-ipc1-narrow 60 "$BIN" verify --trace "$CB/ipc1_10K_trace.gz" --rules "$CB/ipc1_10K" --burst 64 --block-threads 128 --mode persistent,launch --placement mapped --json "$RES/verify-groups-ipc1-narrow.json"
step verify-groups-gen 90 "$BIN" verify --gen 2000000 --malformed 0.05 --ipv6 0.2 --rules "$CB/acl1_10K" --burst 64 --mode persistent --placement mapped --queues 2 --ctas 2 --json "$RES/verify-groups-gen.json"
# Tagged words (persistent kernel, mapped rings whose burst image fits the 24 KiB staging area:
# small slots): the slot polled whole, verdicts back tagged. The reload torture checks every
# verdict without metadata out, i.e. with completion seen by the verdicts' tags alone.
step verify-tagged-acl1 60 "$BIN" verify --trace "$CB/acl1_10K_trace.gz" --rules "$CB/acl1_10K" --burst 32 --slot-data-bytes 4096 --tagged true --mode persistent --placement mapped --queues 2 --ctas 2 --json "$RES/verify-tagged-acl1.json"
step verify-tagged-fw1 60 "$BIN" verify --trace "$CB/fw1_10K_trace.gz" --rules "$CB/fw1_10K" --burst 16 --slot-data-bytes 2048 --tagged true --mode persistent --placement mapped --block-threads 512 --json "$RES/verify-tagged-fw1.json"
step verify-tagged-ipc1 60 "$BIN" verify --trace "$CB/ipc1_10K_trace.gz" --rules "$CB/ipc1_10K" --burst 8 --slot-data-bytes 1024 --tagged true --mode persistent --placement mapped --block-threads 64 --json "$RES/verify-tagged-ipc1.json"
step verify-tagged-ipc1-narrow 60 "$BIN" verify --trace "$CB/ipc1_10K_trace.gz" --rules "$CB/ipc1_10K" --burst 64 --slot-data-bytes 8192 --tagged true --mode persistent --placement mapped --block-threads 128 --json "$RES/verify-tagged-ipc1-narrow.json"
step verify-tagged-gen 90 "$BIN" verify --gen 2000000 --malformed 0.05 --ipv6 0.2 --rules "$CB/acl1_10K" --burst 64 --slot-data-bytes 16384 --tagged true --mode persistent --placement mapped --queues 2 --json "$RES/verify-tagged-gen.json"
# A tagged burst shared by a group of CTAs (burst_ctas): each CTA's frames from pw_part_range, 2
# and 4 CTAs (shifts), 3 (a division); generated frames of every size (malformed ones too), with
# and without metadata back.
step verify-tagged-parts2-acl1 60 "$BIN" verify --trace "$CB/acl1_10K_trace.gz" --rules "$CB/acl1_10K" --burst 32 --slot-data-bytes 4096 --tagged true --mode persistent --placement mapped --burst-ctas 2 --queues 2 --json "$RES/verify-tagged-parts2-acl1.json"
step verify-tagged-parts3-ipc1 60 "$BIN" verify --trace "$CB/ipc1_10K_trace.gz" --rules "$CB/ipc1_10K" --burst 16 --slot-data-bytes 2048 --tagged true --mode persistent --placement mapped --burst-ctas 3 --json "$RES/verify-tagged-parts3-ipc1.json"
step verify-tagged-parts4-gen 90 "$BIN" verify --gen 2000000 --malformed 0.05 --ipv6 0.2 --rules "$CB/acl1_10K" --burst 32 --slot-data-bytes 16384 --tagged true --mode persistent --placement mapped --burst-ctas 4 --queues 2 --json "$RES/verify-tagged-parts4-gen.json"
step verify-tagged-parts4-nometa-gen 90 "$BIN" verify --gen 2000000 --malformed 0.05 --ipv6 0.2 --rules "$CB/acl1_10K" --burst 32 --slot-data-bytes 16384 --tagged true --mode persistent --placement mapped --burst-ctas 4 --no-meta --json "$RES/verify-tagged-parts4-nometa-gen.json"
step reload-torture-tagged 90 "$BIN" verify --trace "$CB/acl1_10K_trace.gz" --rules "$CB/acl1_10K" --rules-b "$CB/fw1_10K" --reload-torture 100 --swap-every 4 --burst 32 --slot-data-bytes 4096 --tagged true --mode persistent --placement mapped --queues 2 --ctas 2 --json "$RES/torture-tagged.json"
step reload-torture-tagged-parts2 90 "$BIN" verify --trace "$CB/acl1_10K_trace.gz" --rules "$CB/acl1_10K" --rules-b "$CB/fw1_10K" --reload-torture 100 --swap-every 4 --burst 32 --slot-data-bytes 4096 --tagged true --mode persistent --placement mapped --queues 2 --burst-ctas 2 --json "$RES/torture-tagged-parts2.json"
# Without metadata written back (--no-meta: verdicts and counters compared), as a daemon runs:
# the kernels' two-pass small-burst path then takes its parse fast path (pw_parse_fast_key) for
# the frames it covers. Bursts of 32 (two or more lanes per frame): the general persistent and
# launch kernels on the corpus, the small-burst kernel (tagged) on the traces and generated frames.
step verify-nometa-tcpdump 60 "$BIN" verify --input "$DATA/pcaps" --burst 32 --mode persistent,launch --placement device,mapped --no-meta --json "$RES/verify-nometa-tcpdump.json"
step verify-nometa-acl1 60 "$BIN" verify --trace "$CB/acl1_10K_trace.gz" --rules "$CB/acl1_10K" --burst 32 --slot-data-bytes 4096 --tagged true --mode persistent --placement mapped --no-meta --json "$RES/verify-nometa-acl1.json"
step verify-nometa-fw1 60 "$BIN" verify --trace "$CB/fw1_10K_trace.gz" --rules "$CB/fw1_10K" --burst 32 --slot-data-bytes 4096 --tagged true --mode persistent --placement mapped --no-meta --json "$RES/verify-nometa-fw1.json"
step verify-nometa-ipc1 60 "$BIN" verify --trace "$CB/ipc1_10K_trace.gz" --rules "$CB/ipc1_10K" --burst 32 --slot-data-bytes 4096 --tagged true --mode persistent --placement mapped --no-meta --json "$RES/verify-nometa-ipc1.json"
step verify-nometa-gen 90 "$BIN" verify --gen 2000000 --malformed 0.05 --ipv6 0.2 --rules "$CB/acl1_10K" --burst 32 --slot-data-bytes 4096 --tagged true --mode persistent --placement mapped --no-meta --json "$RES/verify-nometa-gen.json"
# Composed pipelines: a stage's parameter block swaps by epoch at the burst boundary and its own
# device buffer reads back (pipeline/tests/gpu_stage_params.rs, a `cargo test --no-run` binary
# carried as $TESTS/gpu_stage_params); on_stall: restart on a stalled queue.
TESTS=${TESTS:-$(dirname "$BIN")/tests}
[ -x "$TESTS/gpu_stage_params" ] && step stage-params 120 env CI=true "$TESTS/gpu_stage_params" --nocapture
# Reaped slots held until released (the daemon sends frames from them): a held slot is never
# reused, a release frees exactly its slot (pipeline/tests/gpu_held_slots.rs).
[ -x "$TESTS/gpu_held_slots" ] && step held-slots 120 env CI=true "$TESTS/gpu_held_slots" --nocapture
# A kernel that never returns: shutdown gives up, the executor leaks rather than frees under it,
# and the process exits (pipeline/tests/gpu_teardown.rs).
[ -x "$TESTS/gpu_teardown" ] && step teardown 180 env CI=true "$TESTS/gpu_teardown" --nocapture
# Frames already in GPU memory (the GPUDirect receive path, a port playing the NIC with
# cuMemAlloc buffers) gathered into device ring slots, persistent and launch: counts equal to
# the CPU executor's, every buffer given back (pipeline/tests/gpu_direct_ingest.rs).
[ -x "$TESTS/gpu_direct_ingest" ] && step gpu-direct-ingest 180 env CI=true "$TESTS/gpu_direct_ingest" --nocapture
# conntrack on the GPU: the stateful firewall frame by frame (ct_state, action, rule) and its
# counters equal to the CPU executor's, bursts of 32 and 256, every mode and placement
# (pipeline/tests/gpu_conntrack.rs); the daemon-level check is scripts/gpu-conntrack-check.sh.
[ -x "$TESTS/gpu_conntrack" ] && step conntrack 300 env CI=true "$TESTS/gpu_conntrack" --nocapture
step restart 300 scripts/gpu-restart-check.sh "$BIN" "$RES"
step bench 220 "$BIN" bench --classbench "$CB" --out "$RES"
step reload-torture-persistent 90 "$BIN" verify --trace "$CB/acl1_10K_trace.gz" --rules "$CB/acl1_10K" --rules-b "$CB/fw1_10K" --reload-torture 100 --swap-every 4 --mode persistent --placement device --queues 2 --ctas 2 --json "$RES/torture-persistent.json"
step reload-torture-launch-mapped 90 "$BIN" verify --trace "$CB/acl1_10K_trace.gz" --rules "$CB/acl1_10K" --rules-b "$CB/fw1_10K" --reload-torture 100 --swap-every 3 --mode launch --placement mapped --queues 3 --json "$RES/torture-launch.json"
step reload-torture-devices 90 "$BIN" verify --trace "$CB/acl1_10K_trace.gz" --rules "$CB/acl1_10K" --rules-b "$CB/fw1_10K" --reload-torture 100 --mode persistent --placement device --devices "$DEVICES" --queues 4 --ctas 2 --json "$RES/torture-devices.json"
step verify-devices 90 "$BIN" verify --trace "$CB/acl1_10K_trace.gz" --rules "$CB/acl1_10K" --mode persistent,graph --placement device,mapped --devices "$DEVICES" --queues 4 --ctas 2 --json "$RES/verify-devices.json"
step bench-devices 120 "$BIN" bench --classbench "$CB" --sets acl1_10K --skip throughput,e2e,latency --frames 4194304 --devices "$DEVICES" --out "$RES/devices"

echo "=== summary: $fails step(s) failed" | tee -a "$LOG"
grep -h "^verify \|^reload-torture " "$LOG"
[ -f "$RES/bench.md" ] && cat "$RES/bench.md"
[ -f "$RES/devices/bench.md" ] && cat "$RES/devices/bench.md"
exit $((fails > 0))
