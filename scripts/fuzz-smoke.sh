#!/usr/bin/env bash
# CI fuzz smoke run of the `parse` target (Rust parser vs the host build of the CUDA parser):
# installs cargo-fuzz if missing, seeds the corpus from the test captures, fuzzes for
# FUZZ_SECONDS (default 60) on the stable toolchain (`-s none`: no sanitizer, which needs nightly).
# Exit status is non-zero on any crash or disagreement; the input is left in fuzz/artifacts/parse.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
secs=${FUZZ_SECONDS:-60}
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
scripts/fuzz-seed.sh fuzz/corpus/parse
# -rss_limit_mb: the largest seed is an 80 KB frame; the default limit is plenty, set for clarity.
cargo fuzz run -s none parse fuzz/corpus/parse -- \
  -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1
# The config, rule-file and capture parsers and the fronthaul decoder (fuzz/README.md),
# FUZZ_PARSER_SECONDS each (default
# 10), seeded with the shipped configs and rule files.
mkdir -p fuzz/corpus/config fuzz/corpus/rules fuzz/corpus/pcap fuzz/corpus/fronthaul
cp configs/*.yaml fuzz/corpus/config/ 2>/dev/null || true
cp configs/rules/* fuzz/corpus/rules/ 2>/dev/null || true
# fronthaul: arbitrary frames through the Rust and the host-compiled CUDA O-RAN decoders and
# the stage (unseeded here: libFuzzer starts from an empty input).
for t in config rules pcap fronthaul; do
  cargo fuzz run -s none "$t" "fuzz/corpus/$t" -- \
    -max_total_time="${FUZZ_PARSER_SECONDS:-10}" -rss_limit_mb=2048 -print_final_stats=1
done
