#!/usr/bin/env python3
"""Checks the layering of the library: each layer imports only the layers below it.

Two levels:
- crates: the workspace's path dependencies (`cargo metadata`) must follow CRATE_ORDER (a crate
  may depend only on crates listed before it); Cargo already refuses a cycle, this also refuses
  an upward edge such as pktwarp-core depending on pipeline; an application crate
  (APPLICATION_CRATES: pktwarp-fronthaul) is a dependency of no crate below it, not even a
  dev-dependency (the library's tests do not reach it either);
- the modules of the `pipeline` crate: every `crate::MODULE` path in a top-level module's
  non-test code must name a module of the same or a lower layer of MODULE_LAYERS.

An edge that breaks the order is an error, unless KNOWN_UPWARD lists it with its reason: those
are the debt still to pay (none now: the fronthaul, the last application welded into the
library, is the crate pktwarp-fronthaul on the stage API). A listed edge that no longer exists is
an error too, so the list only shrinks.

A third check keeps the application out of the engine: the executors, the daemon and the control
thread (STAGE_BLIND) know no stage that an application brings: the word `fronthaul` (any case,
comments included) appears in none of their files. They reach a stage through the stage API
(host sides, reports, exported families); `pktwarp-fronthaul` sits above `pipeline` in
CRATE_ORDER, so `pipeline` may never depend on it.

Usage (repository root): scripts/check-layers.py [--graph]
                         scripts/check-layers.py --self-test
  --graph  print the module graph (edge counts) as well
Exit status 1 on an upward edge or a stale KNOWN_UPWARD entry, naming the files that import.
"""
import json
import os
import re
import subprocess
import sys

# Bottom to top. A crate may depend only on crates before it.
CRATE_ORDER = [
    "dpdk-sys",
    "pktwarp-kernels",
    "pktwarp-wire",
    "flow-rules",
    "pktwarp-core",
    "pktwarp-flow",
    "pktwarp-inspect",
    "pipeline",
    "pktwarp-fronthaul",
    "pktwarp",
    "pktwarp-apps",
]

# The pipeline crate's top-level modules, bottom to top; modules of one layer may import each
# other. Every top-level module must be listed.
MODULE_LAYERS = [
    # stages: the Rust implementations and their options (rewrite stages are stages too)
    {"stage", "rewrite"},
    # the CPU reference and the frame-by-frame comparison: `pktwarp verify` and the daemon's
    # sampled self-check (verify: { sample: N }) both run it
    {"verify"},
    {"steer"},  # software steering and RSS over queues
    {"port"},  # pcap, gen, dpdk, tap ports; output destinations
    {"executor"},  # cpu workers, GPU queues and kernels
    {"config"},  # the YAML document: parses and checks, opens nothing
    {"prepare"},  # a config turned into a pipeline, steering and an executor choice
    {"control"},  # the control thread: metrics, reload, watchdog, signals
    {"daemon"},  # runs a prepared config end to end
    {"testdata"},  # fixtures for tests and benches
]

# (from, to) -> why the upward edge is still there.
KNOWN_UPWARD = {}

# Applications on the library: no crate below one depends on it, dev-dependencies included.
APPLICATION_CRATES = ["pktwarp-fronthaul"]

# The top-level modules of `pipeline` that must not name an application's stage, and the words
# they may not hold (case-insensitive, whole or as a prefix: `FronthaulStage` is caught too).
STAGE_BLIND = ["executor", "daemon", "control"]
APPLICATION_WORDS = ["fronthaul"]

SRC = "pipeline/src"


def strip_comments(src):
    return re.sub(r"//[^\n]*", "", src)


def strip_test_items(src):
    """The source without `#[cfg(test)]` items (a module block or a one-line item)."""
    out, i = [], 0
    while True:
        j = src.find("#[cfg(test)]", i)
        if j < 0:
            out.append(src[i:])
            return "".join(out)
        out.append(src[i:j])
        brace, semi = src.find("{", j), src.find(";", j)
        if semi != -1 and (brace == -1 or semi < brace):
            i = semi + 1
            continue
        depth, p = 0, brace
        while p < len(src):
            if src[p] == "{":
                depth += 1
            elif src[p] == "}":
                depth -= 1
                if depth == 0:
                    break
            p += 1
        i = p + 1


def is_test_file(rel):
    parts = rel.split("/")
    name = parts[-1]
    return name == "tests.rs" or name.endswith("_tests.rs") or "tests" in parts[:-1]


def imports(src, modules, own):
    """The top-level modules `src` names through `crate::`."""
    found = set()
    for m in re.finditer(r"crate::(\w+)", src):
        found.add(m.group(1))
    for m in re.finditer(r"crate::\{([^}]*)\}", src):
        found.update(re.findall(r"(?:^|[,\s{])(\w+)", m.group(1)))
    return {t for t in found if t in modules and t != own}


def module_edges(root):
    """{(from, to): [files]} over the non-test code of `root`'s top-level modules."""
    modules = {e[:-3] if e.endswith(".rs") else e for e in os.listdir(root) if e != "lib.rs"}
    edges = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            if rel == "lib.rs" or is_test_file(rel):
                continue
            top = rel.split("/")[0]
            top = top[:-3] if top.endswith(".rs") else top
            with open(path, encoding="utf-8") as fh:
                src = strip_test_items(strip_comments(fh.read()))
            for t in imports(src, modules, top):
                edges.setdefault((top, t), []).append(os.path.join(root, rel))
    return modules, edges


def check_modules(modules, edges, layers, known):
    errors = []
    level = {}
    for i, layer in enumerate(layers):
        for m in layer:
            level[m] = i
    for m in sorted(modules - set(level)):
        errors.append(f"{SRC}/{m}: a top-level module that MODULE_LAYERS does not place")
    upward = set()
    for (a, b), files in sorted(edges.items()):
        if a not in level or b not in level or level[b] <= level[a]:
            continue
        upward.add((a, b))
        if (a, b) not in known:
            errors.append(
                f"`{a}` imports `{b}`, a layer above it, in: {', '.join(sorted(set(files)))}"
            )
    for a, b in sorted(set(known) - upward):
        errors.append(f"KNOWN_UPWARD lists `{a}` -> `{b}`, which is gone: take it off the list")
    return errors


def check_stage_blind(root, modules, words):
    """`file:line: word` for each line of `modules` (folders or files under `root`) naming a word."""
    pat = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
    errors = []
    paths = []
    for m in modules:
        top = os.path.join(root, m)
        if os.path.isfile(top + ".rs"):
            paths.append(top + ".rs")
        for dirpath, _, files in os.walk(top):
            paths += [os.path.join(dirpath, f) for f in files if f.endswith(".rs")]
    for path in sorted(paths):
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                m = pat.search(line)
                if m:
                    errors.append(
                        f"{path}:{n}: names `{m.group(0)}`, an application's stage: the "
                        f"executors, daemon and control reach stages through the stage API only"
                    )
    return errors


def check_crates():
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    meta = json.loads(out)
    names = {p["name"] for p in meta["packages"]}
    errors = [f"crate `{a}` is not in the workspace" for a in APPLICATION_CRATES if a not in names]
    return errors + crate_errors(meta["packages"], CRATE_ORDER, APPLICATION_CRATES)


def crate_errors(packages, order, applications):
    """The upward path dependencies of `packages` (cargo metadata's) against `order`."""
    errors = []
    rank = {n: i for i, n in enumerate(order)}
    for p in packages:
        name = p["name"]
        if name not in rank:
            errors.append(f"crate `{name}`: not placed in CRATE_ORDER")
            continue
        for d in p["dependencies"]:
            if d.get("path") is None or d["name"] not in rank:
                continue
            if rank[d["name"]] < rank[name]:
                continue
            if d.get("kind") != "dev":
                errors.append(f"crate `{name}` depends on `{d['name']}`, which is not below it")
            elif d["name"] in applications:
                errors.append(
                    f"crate `{name}` dev-depends on the application `{d['name']}` above it: "
                    f"its tests belong in that crate"
                )
    return errors


def self_test():
    layers = [{"a"}, {"b"}, {"c"}]
    mods = {"a", "b", "c"}
    assert check_modules(mods, {("b", "a"): ["x"]}, layers, {}) == []
    errs = check_modules(mods, {("a", "c"): ["f.rs"]}, layers, {})
    assert len(errs) == 1 and "`a` imports `c`" in errs[0] and "f.rs" in errs[0], errs
    assert check_modules(mods, {("a", "c"): ["f"]}, layers, {("a", "c"): "why"}) == []
    stale = check_modules(mods, {}, layers, {("a", "c"): "why"})
    assert len(stale) == 1 and "gone" in stale[0], stale
    unplaced = check_modules(mods | {"d"}, {}, layers, {})
    assert len(unplaced) == 1 and "does not place" in unplaced[0], unplaced
    dep = lambda n, kind=None: {"name": n, "path": "/x", "kind": kind}
    pkgs = [
        {"name": "lib", "dependencies": [dep("core")]},
        {"name": "core", "dependencies": [dep("tool", "dev")]},
        {"name": "app", "dependencies": [dep("lib")]},
        {"name": "tool", "dependencies": [dep("lib")]},
    ]
    order, apps = ["core", "lib", "app", "tool"], ["app"]
    assert crate_errors(pkgs, order, apps) == [], crate_errors(pkgs, order, apps)
    pkgs[0]["dependencies"].append(dep("app"))
    errs = crate_errors(pkgs, order, apps)
    assert len(errs) == 1 and "`lib` depends on `app`" in errs[0], errs
    pkgs[0]["dependencies"][-1]["kind"] = "dev"
    errs = crate_errors(pkgs, order, apps)
    assert len(errs) == 1 and "dev-depends on the application `app`" in errs[0], errs
    src = "use crate::a::X;\n#[cfg(test)]\nmod tests { use crate::c::Y; }\nfn f() { crate::{b, a}; }"
    assert imports(strip_test_items(src), mods, "z") == {"a", "b"}
    assert imports(strip_comments("// crate::c::x\n"), mods, "z") == set()
    assert is_test_file("daemon/run_gpu/tests/gpu.rs") and is_test_file("stage/x_tests.rs")
    assert not is_test_file("stage/run.rs")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "daemon", "run"))
        with open(os.path.join(d, "daemon", "run", "x.rs"), "w") as fh:
            fh.write("use a;\n// the Fronthaul poll\n")
        with open(os.path.join(d, "control.rs"), "w") as fh:
            fh.write("fn f() {}\n")
        errs = check_stage_blind(d, ["daemon", "control", "executor"], ["fronthaul"])
        assert len(errs) == 1 and "x.rs:2" in errs[0] and "Fronthaul" in errs[0], errs
    print("check-layers: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    modules, edges = module_edges(SRC)
    if "--graph" in sys.argv[1:]:
        for (a, b), files in sorted(edges.items()):
            print(f"{a} -> {b}: {len(files)}")
    errors = check_crates() + check_modules(modules, edges, MODULE_LAYERS, KNOWN_UPWARD)
    errors += check_stage_blind(SRC, STAGE_BLIND, APPLICATION_WORDS)
    for e in errors:
        print(f"check-layers: {e}", file=sys.stderr)
    if errors:
        return 1
    print(
        f"check-layers: {len(CRATE_ORDER)} crates and {len(modules)} modules of {SRC} in order; "
        f"{len(KNOWN_UPWARD) or 'no'} known upward edges; "
        f"{', '.join(APPLICATION_CRATES)} above the library; "
        f"{', '.join(STAGE_BLIND)} name no application stage"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
