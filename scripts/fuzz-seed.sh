#!/usr/bin/env bash
# Seeds the `parse` fuzz corpus with the Ethernet frames of the test captures (the tcpdump corpus,
# multi_proto.pcap and the O-RAN captures in ../shared/data/pcaps), one file per distinct frame.
# Usage: scripts/fuzz-seed.sh [OUT_DIR]   (default fuzz/corpus/parse)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${PKTWARP_DATA:-$root/../shared/data}
out=${1:-$root/fuzz/corpus/parse}
if [ ! -d "$data/pcaps/tcpdump" ]; then
  # Required in CI; elsewhere the fuzz run starts from an unseeded corpus and the summary of
  # the test run names this step (README "Test data").
  case "${CI:-}" in
    ""|0|false|FALSE|False) ;;
    *) echo "fuzz-seed: test data not found at $data (set PKTWARP_DATA); CI requires the corpus" >&2
       exit 1 ;;
  esac
  echo "fuzz-seed: not run (no corpus at $data; set PKTWARP_DATA): the parse fuzz run starts unseeded" >&2
  if [ -n "${PKTWARP_NOT_RUN_FILE:-}" ]; then
    echo "scripts/fuzz-seed.sh (seeds of the parse fuzz run)" >>"$PKTWARP_NOT_RUN_FILE"
  fi
  mkdir -p "$out"
  exit 0
fi
mkdir -p "$out"
python3 - "$data" "$out" <<'PY'
# Minimal pcap / pcapng frame extractor (Ethernet link type only); corrupt files end early.
import hashlib, os, struct, sys, glob
data, out = sys.argv[1], sys.argv[2]
MAX_PER_FILE = 200

def pcap_frames(b):
    magic = b[:4]
    if magic in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1'): e = '<'
    elif magic in (b'\xa1\xb2\xc3\xd4', b'\xa1\xb2\x3c\x4d'): e = '>'
    else: return
    if len(b) < 24 or struct.unpack(e + 'I', b[20:24])[0] & 0xffff != 1: return
    i = 24
    while i + 16 <= len(b):
        incl = struct.unpack(e + 'I', b[i + 8:i + 12])[0]
        if i + 16 + incl > len(b): return
        yield b[i + 16:i + 16 + incl]
        i += 16 + incl

def pcapng_frames(b):
    i, e, links = 0, '<', []
    while i + 12 <= len(b):
        btype = struct.unpack('<I', b[i:i + 4])[0]
        if btype == 0x0A0D0D0A:
            e = '<' if b[i + 8:i + 12] == b'\x4d\x3c\x2b\x1a' else '>'
            links = []
        blen = struct.unpack(e + 'I', b[i + 4:i + 8])[0]
        if blen < 12 or i + blen > len(b): return
        body = b[i + 8:i + blen - 4]
        if btype == 1 and len(body) >= 2:
            links.append(struct.unpack(e + 'H', body[:2])[0])
        elif btype == 6 and len(body) >= 20:
            iface, _, _, cap, _ = struct.unpack(e + 'IIIII', body[:20])
            if iface < len(links) and links[iface] == 1 and 20 + cap <= len(body):
                yield body[20:20 + cap]
        elif btype == 3 and len(body) >= 4 and links and links[0] == 1:
            yield body[4:]
        i += blen

files = sorted(glob.glob(os.path.join(data, 'pcaps', '**', '*.pcap*'), recursive=True))
files += sorted(glob.glob(os.path.join(data, 'oran', '*.pcap')))
seen = 0
for f in files:
    b = open(f, 'rb').read()
    gen = pcapng_frames(b) if b[:4] == b'\x0a\x0d\x0d\x0a' else pcap_frames(b)
    for n, fr in enumerate(gen):
        if n >= MAX_PER_FILE: break
        name = hashlib.sha1(fr).hexdigest()
        p = os.path.join(out, name)
        if not os.path.exists(p):
            open(p, 'wb').write(fr)
            seen += 1
print(f"fuzz-seed: {seen} new frames from {len(files)} captures in {out}")
PY
