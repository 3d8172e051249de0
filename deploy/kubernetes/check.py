#!/usr/bin/env python3
"""Renders and validates the Kustomize overlays without kubectl (scripts/ci-deploy.sh).

  check.py render OVERLAY      print the overlay rendered (the subset of Kustomize used here:
                               `resources` (files and folders with a kustomization.yaml) and
                               `patches` of strategic-merge files, merged by Kubernetes' keys)
  check.py check               every overlay: the fresh render equals rendered/<overlay>.yaml
                               (and `kubectl kustomize`'s, when kubectl is installed), then every
                               document validates against the Kubernetes schemas offline
                               (kubernetes-validate, strict), NetworkAttachmentDefinition against
                               schemas/network-attachment-definition.json (a CRD: not in them)
Needs PyYAML and the pinned kubernetes-validate (scripts/install-deps.sh).
"""
import json
import os
import shutil
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
OVERLAYS = ["cpu", "gpu"]
# The Kubernetes version the manifests are validated against (kubernetes-validate's schemas).
K8S_VERSION = "1.32.0"
# Strategic-merge keys of the lists used here (Kubernetes' patchMergeKey); other lists replace.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
}


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def merge(base, patch, key=None):
    """Kubernetes strategic merge of `patch` into `base` (maps recursively, keyed lists by key)."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            elif k in out:
                out[k] = merge(out[k], v, k)
            else:
                out[k] = v
        return out
    mk = MERGE_KEYS.get(key)
    if mk and isinstance(base, list) and isinstance(patch, list):
        # As Kubernetes (and Kustomize) merge: items new in the patch come first, in its order.
        out, new = list(base), []
        for item in patch:
            for i, b in enumerate(out):
                if isinstance(b, dict) and b.get(mk) == item.get(mk):
                    out[i] = merge(b, item)
                    break
            else:
                new.append(item)
        return new + out
    return patch


def ident(doc):
    return (doc.get("kind"), doc.get("metadata", {}).get("name"))


def render(folder):
    k = yaml.safe_load(open(os.path.join(folder, "kustomization.yaml")))
    unknown = set(k) - {"apiVersion", "kind", "resources", "patches"}
    if unknown:
        sys.exit(f"{folder}/kustomization.yaml: {sorted(unknown)} not supported by check.py")
    docs = []
    for r in k.get("resources", []):
        p = os.path.normpath(os.path.join(folder, r))
        docs.extend(render(p) if os.path.isdir(p) else load_all(p))
    for patch in k.get("patches", []):
        for pd in load_all(os.path.join(folder, patch["path"])):
            hits = [i for i, d in enumerate(docs) if ident(d) == ident(pd)]
            if len(hits) != 1:
                sys.exit(f"{folder}: patch {patch['path']} {ident(pd)} matches {len(hits)} resources")
            docs[hits[0]] = merge(docs[hits[0]], pd)
    return docs


def by_ident(docs):
    out = {ident(d): d for d in docs}
    if len(out) != len(docs):
        sys.exit("two resources with the same kind and name")
    return out


def validate(doc, where):
    if doc.get("kind") == "NetworkAttachmentDefinition":
        import jsonschema

        schema = json.load(open(os.path.join(HERE, "schemas/network-attachment-definition.json")))
        jsonschema.validate(doc, schema)
        # The CNI config is itself JSON that Multus parses.
        cni = json.loads(doc["spec"]["config"])
        assert cni.get("type") and cni.get("cniVersion"), f"{where}: CNI config lacks type/cniVersion"
        return
    import kubernetes_validate

    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def check():
    failed = False
    for o in OVERLAYS:
        fresh = by_ident(render(os.path.join(HERE, "overlays", o)))
        committed_path = os.path.join(HERE, "rendered", f"{o}.yaml")
        committed = by_ident(load_all(committed_path))
        if fresh != committed:
            print(f"check.py: rendered/{o}.yaml differs from a fresh render of overlays/{o}:"
                  f" run `deploy/kubernetes/check.py render {o} > deploy/kubernetes/rendered/{o}.yaml`",
                  file=sys.stderr)
            failed = True
        if shutil.which("kubectl"):
            out = subprocess.run(["kubectl", "kustomize", os.path.join(HERE, "overlays", o)],
                                 capture_output=True, text=True, check=True).stdout
            if by_ident([d for d in yaml.safe_load_all(out) if d]) != fresh:
                print(f"check.py: kubectl kustomize overlays/{o} renders differently", file=sys.stderr)
                failed = True
            else:
                print(f"check.py: overlays/{o}: kubectl kustomize agrees")
        for ident_, doc in sorted(fresh.items(), key=lambda kv: str(kv[0])):
            where = f"rendered/{o}.yaml {ident_[0]}/{ident_[1]}"
            try:
                validate(doc, where)
            except Exception as e:  # every validation error is reported, then the step fails
                print(f"check.py: {where}: invalid: {e}", file=sys.stderr)
                failed = True
        print(f"check.py: overlays/{o}: {len(fresh)} resources rendered and validated")
    return 1 if failed else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "render":
        docs = render(os.path.join(HERE, "overlays", argv[2]))
        docs.sort(key=lambda d: (d["kind"], d["metadata"]["name"]))
        sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=True, default_flow_style=False))
        return 0
    if len(argv) == 2 and argv[1] == "check":
        return check()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
