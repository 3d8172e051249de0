#!/usr/bin/env bash
# The GPU suite's one runner: runs the checks of scripts/gpu-suite.manifest (all, or those whose
# name matches ONLY and whose group matches GROUP), each under its own time limit so one hang
# cannot eat the call, and prints one results table (also written to OUT/results.md and, as TSV,
# OUT/results.tsv). Builds nothing: it runs what scripts/gpu-carry.sh put in the carried folder.
#
# Usage (repository root, on the GPU machine): scripts/gpu-suite.sh [CARRY] [DATA] [OUT]
#   CARRY  carried folder: pktwarp, syn-guard, tests/, probes/ (default .carry)
#   DATA   folder with pcaps/ and classbench/ (default CARRY/data; ../shared/data works too)
#   OUT    results folder (default $OUT, else ./gpu-results); each check writes under OUT/NAME/
# ONLY=REGEX  checks whose name matches (e.g. ONLY='^verify-(acl1|fw6)$')
# GROUP=REGEX checks whose group matches (verify, gpu-tests, daemon, fronthaul, inspect, bench, ...)
# LIST=1      print the selected checks and exit
# Exit status: 0 when every selected check that ran passed, 1 otherwise.
set -u
CARRY=${1:-.carry}
DATA=${2:-$CARRY/data}
RES=${3:-${OUT:-./gpu-results}}
MANIFEST=${MANIFEST:-scripts/gpu-suite.manifest}
export CARRY DATA
export BIN=$CARRY/pktwarp TESTS=$CARRY/tests CB=$DATA/classbench
export A6=${TMPDIR:-/tmp}/pktwarp-acl6 DEVICES=${DEVICES:-0,0}
export RUST_LOG=${RUST_LOG:-info,pipeline::stage::acl=error}
[ -f "$MANIFEST" ] || { echo "gpu-suite: no manifest at $MANIFEST (run from the repository root)" >&2; exit 2; }

# The selected manifest lines (NAME, SECONDS, GROUP, NEEDS, COMMAND), comments dropped.
selected() {
  local n=0
  while IFS=$'\t' read -r name secs group needs cmd; do
    n=$((n + 1))
    [[ -z $name || $name == \#* ]] && continue
    if [[ -z $cmd || ! $secs =~ ^[0-9]+$ ]]; then
      echo "gpu-suite: $MANIFEST:$n: expected NAME<TAB>SECONDS<TAB>GROUP<TAB>NEEDS<TAB>COMMAND" >&2
      return 2
    fi
    [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]] && continue
    [ -n "${GROUP:-}" ] && ! [[ $group =~ $GROUP ]] && continue
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$secs" "$group" "$needs" "$cmd"
  done <"$MANIFEST"
}

checks=$(selected) || exit 2
if [ -z "$checks" ]; then
  echo "gpu-suite: no check selected (ONLY='${ONLY:-}' GROUP='${GROUP:-}')" >&2
  exit 2
fi
if [ -n "${LIST:-}" ]; then
  printf '%s\n' "$checks" | awk -F'\t' '{ printf "%-32s %5ss  %s\n", $1, $2, $3 }'
  exit 0
fi

mkdir -p "$RES"
LOG=$RES/gpu-suite.log
TSV=$RES/results.tsv
: >"$TSV"
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc)"
  echo "carried: $(cat "$CARRY/COMMIT" 2>/dev/null || echo unknown), binary $(sha256sum "$BIN" 2>/dev/null | cut -c1-16)"
} 2>&1 | tee -a "$LOG"

fails=0
while IFS=$'\t' read -r name secs group needs cmd; do
  STEP=$RES/$name
  export STEP
  mkdir -p "$STEP"
  need=$(eval "printf '%s' \"$needs\"")
  if [ "$needs" != "-" ] && [ ! -e "$need" ]; then
    printf '%s\t%s\tnot run\t0\tmissing %s\n' "$name" "$group" "$need" >>"$TSV"
    echo "=== $name: not run, missing $need" | tee -a "$LOG"
    continue
  fi
  echo "=== $name ($group, limit ${secs}s): $cmd" | tee -a "$LOG"
  t0=$(date +%s%N)
  timeout "$secs" bash -c "$cmd" </dev/null 2>&1 | tee "$STEP/output.log" >>"$LOG"
  rc=${PIPESTATUS[0]}
  ms=$((($(date +%s%N) - t0) / 1000000))
  last=$(grep -v '^[[:space:]]*$' "$STEP/output.log" | tail -1 | tr '\t' ' ' | cut -c1-160)
  case $rc in
    0) result=pass ;;
    124 | 137) result="TIMEOUT (${secs}s)"; fails=$((fails + 1)) ;;
    *) result="FAIL (exit $rc)"; fails=$((fails + 1)) ;;
  esac
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$group" "$result" "$ms" "$last" >>"$TSV"
  echo "=== $name: $result in $ms ms" | tee -a "$LOG"
done <<<"$checks"

{
  echo "| check | group | result | seconds | last line |"
  echo "|---|---|---|---:|---|"
  while IFS=$'\t' read -r name group result ms last; do
    printf '| %s | %s | %s | %d.%03d | %s |\n' "$name" "$group" "$result" $((ms / 1000)) $((ms % 1000)) "${last//|/\\|}"
  done <"$TSV"
  echo
  echo "$fails failed of $(wc -l <"$TSV") selected"
} | tee "$RES/results.md"
exit $((fails > 0))
