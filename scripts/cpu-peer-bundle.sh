#!/usr/bin/env bash
# Collects the CPU peers (DPDK 22.11's dpdk-test-acl and dpdk-testpmd), the shared libraries
# they need (ldd, glibc left out: the target's newer glibc runs them), the net_null / net_ring /
# net_pcap / vdev bus drivers testpmd loads with -d (net_pcap brings libpcap), and pktwarp's DPDK forwarding benchmark
# (pipeline/tests/dpdk_bench.rs, release, --features dpdk), into one folder that runs on a
# machine without DPDK installed (the GPU machine's host: Ubuntu 24.04, no apt):
#
#   OUTDIR/bin/{dpdk-test-acl,dpdk-testpmd,dpdk_bench}   stripped
#   OUTDIR/lib/*.so*                                      stripped; LD_LIBRARY_PATH=OUTDIR/lib
#   OUTDIR/pmds/                                          EAL -d OUTDIR/pmds
#   OUTDIR/env.sh                                         sets LD_LIBRARY_PATH and PW_DPDK_PMDS
#
# It then checks the bundle from a clean environment (env -i) and refuses a bundle over 40 MB.
# scripts/cpu-bench-remote.sh runs the comparisons from it.
# Usage: scripts/cpu-peer-bundle.sh [OUTDIR (default .carry/dpdk)]   (env: SKIP_BENCH_BIN=1 to
#        leave out dpdk_bench, e.g. when it does not build; PKTWARP_DPDK_BIN=PATH adds a
#        `--features dpdk` pktwarp daemon as bin/pktwarp, for scripts/gpu-daemon-dpdk-bench.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.carry/dpdk}
limit_mb=48
pmd_dir=$(pkg-config --variable=pmdsdir libdpdk 2>/dev/null || true)
[ -d "$pmd_dir" ] || pmd_dir=$(ls -d /usr/lib/x86_64-linux-gnu/dpdk/pmds-* 2>/dev/null | head -1)
for b in dpdk-test-acl dpdk-testpmd; do
  command -v "$b" >/dev/null || { echo "cpu-peer-bundle: $b not found (Debian dpdk)" >&2; exit 1; }
done
[ -d "$pmd_dir" ] || { echo "cpu-peer-bundle: no DPDK PMD folder found" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/pmds"
bins=("$(command -v dpdk-test-acl)" "$(command -v dpdk-testpmd)")
if [ -z "${SKIP_BENCH_BIN:-}" ]; then
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
  bench=$(cargo test --release -q -p pipeline --features dpdk --test dpdk_bench --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import sys,json
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]=="dpdk_bench": print(m["executable"])' | tail -1)
  [ -x "$bench" ] || { echo "cpu-peer-bundle: dpdk_bench did not build (SKIP_BENCH_BIN=1 leaves it out)" >&2; exit 1; }
  cp "$bench" "$out/bin/dpdk_bench"
  bins+=("$bench")
fi
cp "${bins[0]}" "${bins[1]}" "$out/bin/"
if [ -n "${PKTWARP_DPDK_BIN:-}" ]; then
  [ -x "$PKTWARP_DPDK_BIN" ] || { echo "cpu-peer-bundle: $PKTWARP_DPDK_BIN is not an executable" >&2; exit 1; }
  cp "$PKTWARP_DPDK_BIN" "$out/bin/pktwarp"
  bins+=("$PKTWARP_DPDK_BIN")
fi
# The drivers a vdev run needs live in lib/ under their sonames (testpmd also links some of
# them directly); pmds/ holds links to them named as EAL's -d loads them (*.so.<ABI version>),
# so a driver already mapped is the same file, not a second copy (EAL would panic).
drivers=()
for p in librte_bus_vdev librte_net_null librte_net_ring librte_mempool_ring librte_net_pcap; do
  f=$(readlink -f "$pmd_dir/$p.so" 2>/dev/null || true)
  [ -f "$f" ] || { echo "cpu-peer-bundle: driver $p not in $pmd_dir" >&2; exit 1; }
  drivers+=("$f")
done
# Libraries: the closure of every binary and driver, glibc's own libraries left out.
skip='^(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libresolv|linux-vdso)\.so'
for f in "${bins[@]}" "${drivers[@]}"; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  base=$(basename "$lib")
  [[ $base =~ $skip ]] && continue
  cp -L "$lib" "$out/lib/$base"
done
for f in "${drivers[@]}"; do
  soname=$(objdump -p "$f" | awk '/SONAME/ {print $2}')
  [ -e "$out/lib/$soname" ] || cp -L "$f" "$out/lib/$soname"
  ln -s "../lib/$soname" "$out/pmds/$(basename "$f")"
done
strip --strip-unneeded "$out"/bin/* "$out"/lib/* 2>/dev/null || true
# EAL also loads every driver of its built-in folder (the system's pmds-23.0) when that folder
# exists: on a machine with another DPDK there, or here, that loads a second copy of drivers
# the bundle already has (EAL panics: "Cannot initialize tailq"). The bundled EAL gets a path
# of the same length that does not exist; the bundle's drivers come with -d.
python3 - "$out/lib" "$pmd_dir" <<'PY'
import glob, sys
libdir, pmd = sys.argv[1], sys.argv[2].encode()
fake = b"/nonexistent/pktwarp-bundle".ljust(len(pmd), b"x")[: len(pmd)]
for f in glob.glob(libdir + "/librte_eal.so*"):
    b = open(f, "rb").read()
    n = b.count(pmd + b"\0")
    if n == 0:
        sys.exit(f"cpu-peer-bundle: {f}: built-in driver path {pmd.decode()} not found")
    open(f, "wb").write(b.replace(pmd + b"\0", fake + b"\0"))
    print(f"{f}: built-in driver path replaced ({n}x)")
PY
cat > "$out/env.sh" <<'EOF'
# Source me: the bundle's libraries and drivers.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$here/lib:$here/pmds${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PW_DPDK_PMDS="$here/pmds"
export PATH="$here/bin:$PATH"
EOF

size_kb=$(du -sk "$out" | cut -f1)
echo "bundle: $out, $((size_kb / 1024)) MB ($(ls "$out/lib" | wc -l) libraries, $(ls "$out/pmds" | wc -l) drivers)"
[ "$size_kb" -le $((limit_mb * 1024)) ] || { echo "cpu-peer-bundle: over $limit_mb MB" >&2; exit 1; }

# From a clean environment: every library resolves inside the bundle or glibc, and both run.
abs=$(cd "$out" && pwd)
for b in "$abs"/bin/*; do
  if env -i LD_LIBRARY_PATH="$abs/lib:$abs/pmds" ldd "$b" | grep -q 'not found'; then
    echo "cpu-peer-bundle: $(basename "$b") misses libraries:" >&2
    env -i LD_LIBRARY_PATH="$abs/lib:$abs/pmds" ldd "$b" | grep 'not found' >&2
    exit 1
  fi
done
env -i LD_LIBRARY_PATH="$abs/lib:$abs/pmds" "$abs/bin/dpdk-test-acl" --help >/dev/null 2>&1 ||
  env -i LD_LIBRARY_PATH="$abs/lib:$abs/pmds" "$abs/bin/dpdk-test-acl" --no-huge --no-pci -m 64 -- --help 2>&1 |
  grep -q -- '--rulesf' || { echo "cpu-peer-bundle: dpdk-test-acl does not run from the bundle" >&2; exit 1; }
# testpmd starts io forwarding on two net_null ports and exits at end of input.
env -i LD_LIBRARY_PATH="$abs/lib:$abs/pmds" timeout 60 "$abs/bin/dpdk-testpmd" --no-huge --no-pci \
  --no-shconf -m 256 -d "$abs/pmds" --file-prefix=pwbundle$$ -l 0,1 --vdev=net_null0 --vdev=net_null1 \
  -- --forward-mode=io --nb-cores=1 --total-num-mbufs=4096 </dev/null > "$abs/testpmd-check.log" 2>&1 || true
grep -q 'io packet forwarding' "$abs/testpmd-check.log" ||
  { echo "cpu-peer-bundle: dpdk-testpmd does not run from the bundle ($abs/testpmd-check.log)" >&2; exit 1; }
rm -f "$abs/testpmd-check.log"
echo "bundle runs from a clean environment: dpdk-test-acl, dpdk-testpmd (net_null from $abs/pmds)"
