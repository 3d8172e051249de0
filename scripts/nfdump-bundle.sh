#!/usr/bin/env bash
# Collects nfdump's collector and reader (nfcapd, nfdump) with the shared libraries they need
# (ldd, glibc left out: the target's newer glibc runs them) into one folder that runs on a
# machine without nfdump installed (the GPU machine: Ubuntu 24.04, no apt, no network), as
# scripts/cpu-peer-bundle.sh carries DPDK:
#
#   OUTDIR/bin/{nfcapd,nfdump}   stripped
#   OUTDIR/lib/*.so*             LD_LIBRARY_PATH=OUTDIR/lib
#   OUTDIR/env.sh                sets LD_LIBRARY_PATH and PATH
#
# It then checks the bundle from a clean environment (env -i): every library resolves, and an
# IPFIX message sent to the bundled nfcapd on loopback comes back out of the bundled nfdump.
# scripts/gpu-ipfix-check.sh uses it. Usage: scripts/nfdump-bundle.sh [OUTDIR (default .carry/nfdump)]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.carry/nfdump}
limit_mb=16
for b in nfcapd nfdump; do
  command -v "$b" >/dev/null || { echo "nfdump-bundle: $b not found (Debian nfdump; scripts/install-deps.sh)" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bins=("$(command -v nfcapd)" "$(command -v nfdump)")
cp "${bins[@]}" "$out/bin/"
# Libraries: the closure of both binaries, glibc's own libraries left out.
skip='^(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libresolv|linux-vdso)\.so'
for f in "${bins[@]}"; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  base=$(basename "$lib")
  [[ $base =~ $skip ]] && continue
  cp -L "$lib" "$out/lib/$base"
done
strip --strip-unneeded "$out"/bin/* "$out"/lib/* 2>/dev/null || true
cat >"$out/env.sh" <<'EOF'
# Source me: the bundle's nfcapd and nfdump with their libraries.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$here/bin:$PATH"
EOF
size_kb=$(du -sk "$out" | cut -f1)
echo "bundle: $out, $((size_kb / 1024)) MB ($(ls "$out/lib" | wc -l) libraries), $("${bins[1]}" -V 2>&1 | head -1)"
[ "$size_kb" -le $((limit_mb * 1024)) ] || { echo "nfdump-bundle: over $limit_mb MB" >&2; exit 1; }

# From a clean environment: every library resolves inside the bundle or glibc ...
abs=$(cd "$out" && pwd)
for b in "$abs"/bin/*; do
  if env -i LD_LIBRARY_PATH="$abs/lib" ldd "$b" | grep -q 'not found'; then
    echo "nfdump-bundle: $(basename "$b") misses libraries:" >&2
    env -i LD_LIBRARY_PATH="$abs/lib" ldd "$b" | grep 'not found' >&2
    exit 1
  fi
done
# ... and one IPFIX flow (template + record) sent to the bundled nfcapd is read back by the
# bundled nfdump with its addresses, ports, packets and bytes.
tmp=$(mktemp -d)
trap 'kill "$nfpid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
nfpid=
port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$tmp/flows"
env -i LD_LIBRARY_PATH="$abs/lib" "$abs/bin/nfcapd" -b 127.0.0.1 -p "$port" -w "$tmp/flows" >"$tmp/nfcapd.log" 2>&1 &
nfpid=$!
python3 - "$port" <<'PY'
import socket, struct, sys, time
port = int(sys.argv[1])
# Wait until nfcapd holds the port (a bind then fails).
for _ in range(200):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.1", port)); s.close(); time.sleep(0.025)
    except OSError:
        break
else:
    sys.exit("nfdump-bundle: nfcapd does not listen")
# Template 256: src, dst (IPv4), sport, dport, proto, packets, octets, start, end (ms).
fields = [(8, 4), (12, 4), (7, 2), (11, 2), (4, 1), (2, 8), (1, 8), (152, 8), (153, 8)]
tmpl = struct.pack("!HH", 256, len(fields)) + b"".join(struct.pack("!HH", i, l) for i, l in fields)
tset = struct.pack("!HH", 2, 4 + len(tmpl)) + tmpl
now = int(time.time() * 1000)
rec = (bytes([10, 1, 2, 3]) + bytes([192, 0, 2, 7]) + struct.pack("!HHB", 40000, 443, 6)
       + struct.pack("!QQQQ", 7, 4321, now - 2000, now - 1000))
dset = struct.pack("!HH", 256, 4 + len(rec)) + rec
body = tset + dset
msg = struct.pack("!HHIII", 10, 16 + len(body), now // 1000, 1, 1) + body
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(msg, ("127.0.0.1", port))
time.sleep(0.5)
PY
kill -TERM "$nfpid"
for _ in $(seq 100); do kill -0 "$nfpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$nfpid" 2>/dev/null && { echo "nfdump-bundle: nfcapd did not stop on SIGTERM" >&2; exit 1; }
nfpid=
env -i TZ=UTC LD_LIBRARY_PATH="$abs/lib" "$abs/bin/nfdump" -R "$tmp/flows" -o csv >"$tmp/flows.csv" 2>"$tmp/nfdump.log" ||
  { echo "nfdump-bundle: nfdump -R failed:" >&2; cat "$tmp/nfdump.log" "$tmp/nfcapd.log" >&2; exit 1; }
python3 - "$tmp/flows.csv" <<'PY' || { cat "$tmp/nfcapd.log" >&2; exit 1; }
import sys
lines = open(sys.argv[1]).read().splitlines()
head = lines[0].split(",")
rows = []
for l in lines[1:]:
    if not l or l.startswith("Summary"):
        break  # the summary follows the flows
    rows.append(dict(zip(head, l.split(","))))
want = {"sa": "10.1.2.3", "da": "192.0.2.7", "sp": "40000", "dp": "443", "ipkt": "7", "ibyt": "4321"}
ok = len(rows) == 1 and all(rows[0].get(k, "").strip() == v for k, v in want.items())
if not ok:
    sys.exit(f"nfdump-bundle: the flow sent is not what nfdump read: {rows}")
PY
echo "bundle runs from a clean environment: nfcapd received one IPFIX flow, nfdump read it back"
