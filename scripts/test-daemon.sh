#!/usr/bin/env bash
# End-to-end check of the metrics endpoint with a real Prometheus (Debian's `prometheus`
# package, installed by scripts/install-deps.sh), everything on loopback:
#   1. pktwarp runs a `gen` port (COUNT frames at PPS frames/s, ~25 s) on the CPU executor with
#      `control.linger`, so /metrics stays up after the input ends;
#   2. `promtool check metrics` lints the exposition (during the run and at the end);
#   3. Prometheus scrapes it every second; through Prometheus' HTTP API the script checks that
#      rate(pktwarp_rx_frames_total[10s]) is > 0 and within 20% of PPS while traffic flows, and
#      that sum(pktwarp_rx_frames_total) equals COUNT once the generator has ended;
#   4. SIGTERM: pktwarp drains, prints its JSON summary (rx_frames == COUNT) and exits 0.
# Bounded: every wait has a deadline; the whole script takes ~60 s. Cleans up on any exit.
set -euo pipefail
cd "$(dirname "$0")/.."

# 50 s of traffic: the rate is measured ~12 s after Prometheus scrapes pktwarp, and Prometheus
# alone took up to ~30 s to start on a loaded machine (a run with 25 s of traffic failed:
# "the generator ended before the rate could be measured").
COUNT=${COUNT:-100000}
PPS=${PPS:-2000}

command -v prometheus >/dev/null || { echo "test-daemon: prometheus not installed (scripts/install-deps.sh)" >&2; exit 1; }
command -v promtool >/dev/null || { echo "test-daemon: promtool not installed" >&2; exit 1; }

cargo build -q --bin pktwarp
BIN="${CARGO_TARGET_DIR:-target}/debug/pktwarp"

TMP=$(mktemp -d /tmp/pktwarp-test-daemon.XXXXXX)
PW_PID=""
PROM_PID=""
cleanup() {
  local rc=$?
  [ -n "$PROM_PID" ] && kill "$PROM_PID" 2>/dev/null && wait "$PROM_PID" 2>/dev/null
  [ -n "$PW_PID" ] && kill -KILL "$PW_PID" 2>/dev/null && wait "$PW_PID" 2>/dev/null
  if [ "$rc" -ne 0 ]; then
    echo "---- pktwarp log (tail) ----" >&2; tail -n 20 "$TMP/pktwarp.log" >&2 || true
    echo "---- prometheus log (tail) ----" >&2; tail -n 20 "$TMP/prometheus.log" >&2 || true
  fi
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT

fail() { echo "test-daemon: FAIL: $*" >&2; exit 1; }

# GET a URL on loopback, print the body (python3 is on every machine; curl may not be).
get() {
  python3 - "$1" <<'EOF'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
    sys.stdout.write(r.read().decode())
EOF
}

# Instant query through Prometheus' HTTP API; prints the value of the single result, or "none".
query() {
  python3 - "$PROM" "$1" <<'EOF'
import json, sys, urllib.parse, urllib.request
url = "http://%s/api/v1/query?%s" % (sys.argv[1], urllib.parse.urlencode({"query": sys.argv[2]}))
with urllib.request.urlopen(url, timeout=5) as r:
    d = json.load(r)
res = d.get("data", {}).get("result", [])
print(res[0]["value"][1] if d.get("status") == "success" and res else "none")
EOF
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Polls `cmd` every 0.5 s until it succeeds or `secs` pass.
wait_for() {
  local secs=$1 what=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@"; do
    [ "$SECONDS" -lt "$end" ] || fail "timed out after ${secs}s waiting for $what"
    sleep 0.5
  done
}

# The deploy/ files: Prometheus config and alert rules (with their unit tests), the Grafana
# dashboard, the Kubernetes config; every pktwarp_* name they use must be one pktwarp exports.
promtool check rules deploy/prometheus/alerts.yml >/dev/null || fail "promtool check rules"
(cd deploy/prometheus && promtool test rules alerts_test.yml >/dev/null) || fail "promtool test rules"
(cd deploy/prometheus && promtool check config prometheus.yml >/dev/null) || fail "promtool check config (deploy)"
python3 - <<'EOF' || fail "deploy/ files refer to metrics pktwarp does not export, or are malformed"
import json, pathlib, re, sys
# The families are declared where their owners live (control's table, the stages' own
# exported families, the IPFIX exporter; the fronthaul crate's): every pktwarp_* string literal
# of the library and of the stage crates the binary registers.
src = "".join(p.read_text() for d in ["pipeline/src", "fronthaul/src"]
              for p in pathlib.Path(d).rglob("*.rs"))
known = set(re.findall(r'"(pktwarp_[a-z0-9_]+)"', src))
json.load(open("deploy/grafana/pktwarp-dashboard.json"))
bad = []
for f in ["deploy/grafana/pktwarp-dashboard.json", "deploy/prometheus/alerts.yml", "deploy/README.md"]:
    # A name with `*` in it (`pktwarp_fronthaul_*_total`) stands for a family of names: at
    # least one exported name must fit it.
    for name in set(re.findall(r"pktwarp_[a-z0-9_*]+", open(f).read())):
        if "*" in name:
            fits = re.compile("^" + re.escape(name).replace(r"\*", "[a-z0-9_]*") + "$")
            if not any(fits.match(k) for k in known):
                bad.append((f, name))
            continue
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in known and base not in known:
            bad.append((f, name))
if bad or len(known) < 20:
    print("unknown metric names:", bad, "known:", len(known), file=sys.stderr)
    sys.exit(1)
EOF
python3 - "$TMP" <<'EOF' || fail "cannot extract the Kubernetes ConfigMap"
# The ConfigMap's `data:` entries are `  NAME: |` block scalars indented by 4 (no PyYAML needed).
import re, sys
files, cur = {}, None
for line in open("deploy/kubernetes/base/configmap.yaml").read().split("---")[0].splitlines():
    m = re.match(r"^  ([A-Za-z0-9_.-]+): \|$", line)
    if m:
        cur = files.setdefault(m.group(1), [])
    elif cur is not None and (line.startswith("    ") or not line.strip()):
        cur.append(line[4:])
    else:
        cur = None
assert set(files) == {"pktwarp.yaml", "rules.yaml"}, files.keys()
for name, lines in files.items():
    text = "\n".join(lines).replace("rules.yaml", "k8s-rules.yaml")
    open("%s/k8s-%s" % (sys.argv[1], name), "w").write(text + "\n")
EOF
"$BIN" validate "$TMP/k8s-pktwarp.yaml" >/dev/null || fail "pktwarp validate on the Kubernetes config"
echo "deploy/: promtool rules, alert tests, dashboard and Kubernetes config: ok"

cp configs/rules/inline-filter.rules.yaml "$TMP/rules.yaml"
cat > "$TMP/cfg.yaml" <<EOF
ports:
  - name: wire
    gen:
      count: $COUNT
      rate: { pps: $PPS }
      size: 64
      flows: { src: 10.0.0.0/8, dst: 192.168.0.0/16, dst_ports: 1-1023 }
queues: { count: 2, burst: 32 }
pipeline:
  - parse
  - acl: { rules: rules.yaml }
  - count
executor: { kind: cpu }
metrics: { listen: 127.0.0.1:0 }
control: { linger: true, drain_timeout_ms: 5000 }
EOF

"$BIN" --log-json run --quiet --json "$TMP/cfg.yaml" > "$TMP/summary.json" 2> "$TMP/pktwarp.log" &
PW_PID=$!
has_addr() { grep -qs '"event":"metrics_listen"' "$TMP/pktwarp.log"; }
wait_for 20 "pktwarp's metrics endpoint" has_addr
ADDR=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    try: v = json.loads(l)
    except ValueError: continue
    if v.get("fields", {}).get("event") == "metrics_listen": print(v["fields"]["addr"]); break' "$TMP/pktwarp.log")
echo "pktwarp metrics on $ADDR"

get "http://$ADDR/metrics" > "$TMP/m1.txt"
promtool check metrics < "$TMP/m1.txt" || fail "promtool check metrics (during the run)"
echo "promtool check metrics: ok ($(grep -vc '^#' "$TMP/m1.txt") samples)"

PROM="127.0.0.1:$(free_port)"
cat > "$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: pktwarp
    static_configs:
      - targets: ["$ADDR"]
EOF
promtool check config "$TMP/prometheus.yml" >/dev/null || fail "promtool check config"
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/data" \
  --web.listen-address="$PROM" --log.level=warn > "$TMP/prometheus.log" 2>&1 &
PROM_PID=$!
ready() { get "http://$PROM/-/ready" >/dev/null 2>&1; }
wait_for 30 "Prometheus ready on $PROM" ready
up() { [ "$(query 'up{job="pktwarp"}')" = "1" ]; }
wait_for 15 "Prometheus scraping pktwarp (up == 1)" up

# While traffic flows: the rate over 10 s of 1 s scrapes.
sleep 12
grep -q '"event":"linger"' "$TMP/pktwarp.log" && fail "the generator ended before the rate could be measured (raise COUNT)"
RATE=$(query 'sum(rate(pktwarp_rx_frames_total{job="pktwarp"}[10s]))')
echo "Prometheus: sum(rate(pktwarp_rx_frames_total[10s])) = $RATE frames/s (generator: $PPS)"
python3 - "$RATE" "$PPS" <<'EOF' || fail "received-frames rate $RATE does not match the generator's $PPS/s"
import sys
r, pps = float(sys.argv[1]) if sys.argv[1] != "none" else 0.0, float(sys.argv[2])
sys.exit(0 if r > 0 and abs(r - pps) <= 0.2 * pps else 1)
EOF

# After the generator ends: the total Prometheus stored equals what it sent.
ended() { grep -q '"event":"linger"' "$TMP/pktwarp.log"; }
wait_for 60 "the generator to finish" ended
total_ok() { [ "$(query 'sum(pktwarp_rx_frames_total{job="pktwarp"})')" = "$COUNT" ]; }
wait_for 10 "sum(pktwarp_rx_frames_total) == $COUNT in Prometheus" total_ok
echo "Prometheus: sum(pktwarp_rx_frames_total) = $COUNT (generator count)"
DROPS=$(query 'sum(pktwarp_drops_total{reason="ring_full"})')
[ "$DROPS" = "0" ] || fail "ring_full drops: $DROPS"

get "http://$ADDR/metrics" > "$TMP/m2.txt"
promtool check metrics < "$TMP/m2.txt" || fail "promtool check metrics (final)"

kill -TERM "$PW_PID"
end=$((SECONDS + 15))
while kill -0 "$PW_PID" 2>/dev/null; do
  [ "$SECONDS" -lt "$end" ] || fail "pktwarp did not exit within 15 s of SIGTERM"
  sleep 0.2
done
set +e
wait "$PW_PID"
RC=$?
set -e
PW_PID=""
[ "$RC" -eq 0 ] || fail "pktwarp exited $RC after SIGTERM"
RX=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rx_frames"])' "$TMP/summary.json")
[ "$RX" = "$COUNT" ] || fail "summary rx_frames $RX != $COUNT"
echo "test-daemon: pktwarp drained and exited 0; summary rx_frames = $RX"
