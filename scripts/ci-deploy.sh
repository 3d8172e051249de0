#!/usr/bin/env bash
# The fleet deployment, offline: the Kustomize overlays (deploy/kubernetes/overlays/{cpu,gpu})
# rendered without kubectl and checked equal to the committed deploy/kubernetes/rendered/*.yaml
# (and to `kubectl kustomize` where kubectl is installed); every rendered resource validated
# against the Kubernetes schemas (pinned kubernetes-validate, strict; the
# NetworkAttachmentDefinition CRD against deploy/kubernetes/schemas/); the config in each
# overlay's ConfigMap validated by `pktwarp validate` (the gpu one with the dpdk feature, the VF
# address a placeholder); the systemd unit verified and scored. The dashboard and alerts are
# checked by scripts/test-daemon.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "ci-deploy: FAILED: $*" >&2; exit 1; }
# Checked first: a missing tool fails the step, it is never skipped.
command -v systemd-analyze >/dev/null ||
  fail "systemd-analyze not found (Debian: package systemd; scripts/install-deps.sh installs it)"
python3 deploy/kubernetes/check.py check || fail "overlays (see above)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cargo build -q --features dpdk --bin pktwarp
BIN=${CARGO_TARGET_DIR:-target}/debug/pktwarp
for o in cpu gpu; do
  python3 - "$o" "$tmp" <<'PY' || fail "cannot extract the $o ConfigMap"
import sys, yaml
o, tmp = sys.argv[1], sys.argv[2]
cm = [d for d in yaml.safe_load_all(open(f"deploy/kubernetes/rendered/{o}.yaml"))
      if d and d["kind"] == "ConfigMap"][0]
for name, text in cm["data"].items():
    # The pod's paths and the VF address the container substitutes at start.
    text = text.replace("/etc/pktwarp/", "").replace("@VF_PCI@", "0000:00:00.0")
    open(f"{tmp}/{o}-{name}" if name != "rules.yaml" else f"{tmp}/rules.yaml", "w").write(text)
PY
  "$BIN" validate "$tmp/$o-pktwarp.yaml" || fail "pktwarp validate on the $o overlay's config"
done
unit=deploy/systemd/pktwarp.service
# The binary is not installed here: that one complaint is expected, any other fails.
problems=$(systemd-analyze verify "$unit" 2>&1 | grep -v "pktwarp: No such file\|Command .* is not executable" || true)
[ -z "$problems" ] || { echo "$problems" >&2; fail "systemd-analyze verify $unit"; }
# Exposure above 3.0 (the unit scores 2.6 OK) fails: the hardening must not regress.
security=$(systemd-analyze security --offline=true --root=/ --threshold=30 "$unit" 2>&1) || {
  echo "$security" >&2
  fail "systemd-analyze security $unit: exposure above 3.0, or the check could not run"
}
echo "ci-deploy: systemd-analyze security: $(echo "$security" | tail -n1)"
echo "ci-deploy: overlays rendered and valid, configs valid, systemd unit verified"
