#!/usr/bin/env python3
"""Keeps the public API of the `pipeline` crate from growing silently.

Lists the user-facing public paths of `pipeline` by reading its source (stable Rust has no
machine-readable public API, `cargo doc --output-format json` is nightly-only): from
pipeline/src/lib.rs, every `pub` item and `pub use` re-export, and, through each `pub mod`
(file or inline) and each `pub use` of a crate module, that module's `pub` items, recursively.
Items are module-level items (fn, struct, enum, trait, type, const, static, union, mod, macro,
re-export); methods and fields belong to their type's line. `pub(crate)` / `pub(super)` /
`pub(in ...)` items and `#[cfg(test)]` items are not public. A re-export of another crate's
module (`pub use pktwarp_core::meta`) is one line: that crate's surface is its own.

`pipeline::internal` is the unstable namespace for the workspace's own crates and the tests
(its doc says so): it is one line and is not descended into.

It also holds the embedding example to what the README promises: apps/examples/embed.rs is
under EMBED_MAX_LINES lines, and the README's ```rust block that shows it is that file (blank
lines and the file's `//!` header aside).

The list is compared with docs/public-api.txt. A path in the source but not in the file (a new
public item: document it and add it, or make it `pub(crate)`) or in the file but not in the
source (removed: take it out of the file) is an error.

Usage (repository root): scripts/check-api.py            compare, exit 1 on a difference
                         scripts/check-api.py --write    rewrite docs/public-api.txt
                         scripts/check-api.py --list     print the list
                         scripts/check-api.py --self-test
"""
import os
import re
import sys
import tempfile

CRATE = "pipeline"
SRC = "pipeline/src"
LIST = "docs/public-api.txt"
EMBED = "apps/examples/embed.rs"
EMBED_MAX_LINES = 30
README = "README.md"
# Inline modules that are public on purpose but not part of the stable surface.
UNSTABLE = {"internal"}

ITEM = re.compile(
    r"pub\s+(?:(?:const|async|unsafe|extern\s*(?:\"[^\"]*\")?)\s+)*"
    r"(fn|struct|enum|trait|type|const|static|union|mod)\s+(?:mut\s+)?([A-Za-z_][A-Za-z0-9_]*)"
)


def strip(text):
    """The source without comments, string and char literals (kept as placeholders), so that
    braces and `pub` inside them do not count."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:]) and not re.match(r"\w", text[i - 1 : i]):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            i = n if end < 0 else end + 1 + len(hashes)
            out.append('""')
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            # kept (a `#[path]` needs it) without what would look like structure
            out.append('"' + re.sub(r"[{};\[\]]|\bpub\b", "_", text[i + 1 : j]) + '"')
            i = j + 1
        elif c == "'" and re.match(r"'(?:\\.[^']*|[^\\'])'", text[i:]):
            m = re.match(r"'(?:\\.[^']*|[^\\'])'", text[i:])
            i += m.end()
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def top_level(body):
    """The module-level statements of a module body: (text before the item's first `{` or `;`,
    the braced body or None, whether a `#[cfg(test)]` precedes it)."""
    items = []
    i, n = 0, len(body)
    start = 0
    while i < n:
        c = body[i]
        if c == "#" and body.startswith("#[", i) or body.startswith("#![", i):
            # attributes: skip to the matching `]`
            j = body.find("[", i)
            depth = 0
            while j < n:
                if body[j] == "[":
                    depth += 1
                elif body[j] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            i = j + 1
            continue
        if c == ";":
            items.append((body[start : i + 1], None))
            i += 1
            start = i
        elif c == "{":
            depth, j = 0, i
            while j < n:
                if body[j] == "{":
                    depth += 1
                elif body[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            head = body[start:i]
            inner = body[i + 1 : j]
            # `pub use a::{b, c};` and `struct X { .. }` both end here; a use tree ends at `;`
            if re.search(r"\buse\b", head) and not re.search(r"\b(fn|impl|mod|trait)\b", head):
                k = body.find(";", j)
                items.append((body[start : k + 1], None))
                i = k + 1
            else:
                items.append((head, inner))
                i = j + 1
            start = i
        else:
            i += 1
    return items


def is_test(stmt):
    return re.search(r"#\[cfg\(\s*test\s*\)\]", stmt) is not None


def expand_use(tree):
    """`a::{b, c::{d as e}}` -> [(path, visible name)]."""
    tree = re.sub(r"\s+", " ", tree).strip()
    brace = tree.find("{")
    if brace < 0:
        m = re.match(r"(.*?)\s+as\s+(\w+)$", tree)
        if m:
            return [(m.group(1).strip(), m.group(2))]
        return [(tree, tree.split("::")[-1])]
    head, body = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p.strip():
            for path, name in expand_use(head + p.strip()):
                if path.endswith("::self"):
                    path = path[: -len("::self")]
                    name = path.split("::")[-1] if name == "self" else name
                out.append((path, name))
    return out


class Crate:
    def __init__(self, src):
        self.src = src
        self.bodies = {}  # module path (tuple) -> stripped body
        self.load((), os.path.join(src, "lib.rs"))

    def load(self, modpath, filename):
        with open(filename) as f:
            body = strip(f.read())
        self.bodies[modpath] = body
        self.load_children(modpath, body, filename)

    def load_children(self, modpath, body, filename):
        base = os.path.dirname(filename)
        stem = os.path.splitext(os.path.basename(filename))[0]
        if stem not in ("lib", "mod"):
            base = os.path.join(base, stem)
        for head, inner in top_level(body):
            if is_test(head):
                continue
            m = re.search(r"\bmod\s+(\w+)", head)
            if not m or re.search(r"\b(fn|impl|trait|use)\b", head.split("mod")[0]):
                continue
            name = m.group(1)
            if inner is not None:
                self.bodies[modpath + (name,)] = inner
                self.load_children(modpath + (name,), inner, os.path.join(base, name, "mod.rs"))
                continue
            pm = re.search(r"#\[path\s*=\s*\"([^\"]*)\"\]", head)
            candidates = [os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")]
            if pm:
                candidates = [os.path.join(os.path.dirname(filename), pm.group(1))]
            for c in candidates:
                if os.path.exists(c):
                    self.load(modpath + (name,), c)
                    break

    def resolve(self, modpath, path):
        """A `use` path as a module path of this crate, or None for another crate."""
        segs = path.split("::")
        if segs[0] == "crate":
            return tuple(segs[1:])
        if segs[0] == "self":
            return modpath + tuple(segs[1:])
        if segs[0] == "super":
            base = list(modpath)
            while segs and segs[0] == "super":
                base.pop()
                segs = segs[1:]
            return tuple(base) + tuple(segs)
        if modpath + (segs[0],) in self.bodies:
            return modpath + tuple(segs)
        return None

    def public(self, modpath, prefix, out, seen):
        if modpath in seen:
            return
        seen.add(modpath)
        for head, inner in top_level(self.bodies[modpath]):
            if is_test(head):
                continue
            h = re.sub(r"#!?\[[^\]]*\]", "", head).strip()
            if not h.startswith("pub") or re.match(r"pub\s*\(", h):
                continue
            if re.match(r"pub\s+use\b", h):
                tree = re.sub(r"^pub\s+use\s+", "", h).rstrip(";").strip()
                for path, name in expand_use(tree):
                    target = self.resolve(modpath, path)
                    if name == "*":
                        if target is not None and target in self.bodies:
                            self.public(target, prefix, out, set())
                        else:
                            out.add(f"{prefix}::* = {path}")
                        continue
                    if target is not None and target in self.bodies:
                        out.add(f"{prefix}::{name} (mod)")
                        self.public(target, f"{prefix}::{name}", out, seen)
                    elif target is None:
                        out.add(f"{prefix}::{name} = {path}")
                    else:
                        out.add(f"{prefix}::{name} (use)")
                continue
            m = re.match(r"pub\s+macro_rules!\s*(\w+)", h)
            if m:
                out.add(f"{prefix}::{m.group(1)} (macro)")
                continue
            m = ITEM.match(h)
            if not m:
                continue
            kind, name = m.groups()
            if kind == "mod":
                if name in UNSTABLE and modpath == ():
                    out.add(f"{prefix}::{name} (mod, unstable: not listed further)")
                    continue
                out.add(f"{prefix}::{name} (mod)")
                if modpath + (name,) in self.bodies:
                    self.public(modpath + (name,), f"{prefix}::{name}", out, seen)
                continue
            out.add(f"{prefix}::{name} ({kind})")


def public_api(src):
    out = set()
    Crate(src).public((), CRATE, out, set())
    return sorted(out)


def compare(listed, found):
    errors = []
    for p in sorted(set(found) - set(listed)):
        errors.append(f"new public path, not in {LIST}: {p}")
    for p in sorted(set(listed) - set(found)):
        errors.append(f"listed in {LIST} but no longer public: {p}")
    return errors


def code_lines(text):
    return [l.rstrip() for l in text.splitlines() if l.strip() and not l.startswith("//!")]


def check_embed(example, readme):
    """Errors of the embedding example: too long, or not the README's copy."""
    errors = []
    n = len(example.splitlines())
    if n >= EMBED_MAX_LINES:
        errors.append(f"{EMBED} has {n} lines; the embedding example stays under {EMBED_MAX_LINES}")
    blocks = re.findall(r"```rust\n(.*?)```", readme, re.S)
    want = code_lines(example)
    if not any(code_lines(b) == want for b in blocks):
        errors.append(f"no ```rust block of {README} is {EMBED} (blank lines and //! aside)")
    return errors


def read_list(path):
    with open(path) as f:
        return [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]


HEADER = """# The public API of the `pipeline` crate, one path a line (scripts/check-api.py writes and
# checks it; CI fails when the source and this list differ). A new line here is a new promise to
# embedding users: document the item, or keep it `pub(crate)` / under `pipeline::internal`.
"""


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "a"))

        def write(rel, text):
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)

        write(
            "lib.rs",
            "//! doc with pub fn fake() {}\n"
            "pub mod a;\npub(crate) mod b;\npub use b::{Kept, Other as Renamed};\n"
            "pub use other_crate::module;\n#[cfg(test)]\npub mod tests;\n"
            "pub mod internal {\n    pub mod b { pub use crate::b::*; }\n}\n"
            "pub fn entry(s: &str) -> char { let _ = \"pub fn hidden() {\"; '{' }\n",
        )
        write("a/mod.rs", "pub struct A { pub x: u8 }\npub(crate) fn hidden() {}\nmod c;\npub use c::C;\n")
        write("a/c.rs", "pub enum C { X }\nimpl C { pub fn m(&self) {} }\n")
        write("b.rs", "pub struct Kept;\npub struct Other;\npub struct NotExported;\n")
        got = public_api(d)
        want = [
            "pipeline::a (mod)",
            "pipeline::a::A (struct)",
            "pipeline::a::C (use)",
            "pipeline::entry (fn)",
            "pipeline::internal (mod, unstable: not listed further)",
            "pipeline::Kept (use)",
            "pipeline::module = other_crate::module",
            "pipeline::Renamed (use)",
        ]
        assert sorted(got) == sorted(want), f"self-test: got {got}"
        # a new item in a public module is caught, and so is one that went away
        write("a/c.rs", "pub enum C { X }\npub fn grown_but_private_module() {}\n")
        write("a/mod.rs", "pub struct A { pub x: u8 }\nmod c;\npub use c::C;\npub fn grown() {}\n")
        errors = compare(want, public_api(d))
        assert errors == [f"new public path, not in {LIST}: pipeline::a::grown (fn)"], errors
        write("b.rs", "pub struct Kept;\npub struct Other;\n")
        write("lib.rs", "pub mod a;\npub(crate) mod b;\npub use b::Kept;\n")
        errors = compare(want, public_api(d))
        assert any("no longer public: pipeline::Renamed" in e for e in errors), errors
    example = "//! doc\nuse a::b;\nfn main() {}\n"
    assert check_embed(example, "text\n```rust\nuse a::b;\n\nfn main() {}\n```\n") == []
    assert len(check_embed(example, "```rust\nuse a::c;\nfn main() {}\n```\n")) == 1
    assert len(check_embed(example * 11, "```rust\n" + example * 11 + "```\n")) == 1
    print("check-api: self-test passed")


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        self_test()
        return 0
    found = public_api(SRC)
    if args == ["--list"]:
        print("\n".join(found))
        return 0
    if args == ["--write"]:
        with open(LIST, "w") as f:
            f.write(HEADER + "\n".join(found) + "\n")
        print(f"check-api: wrote {len(found)} paths to {LIST}")
        return 0
    if args:
        print(__doc__, file=sys.stderr)
        return 2
    errors = compare(read_list(LIST), found)
    with open(EMBED) as e, open(README) as r:
        embed_errors = check_embed(e.read(), r.read())
    for e in errors + embed_errors:
        print(f"check-api: {e}", file=sys.stderr)
    if embed_errors and not errors:
        return 1
    if errors:
        print(
            "check-api: the public API of pipeline changed; if on purpose, document it and run "
            "scripts/check-api.py --write",
            file=sys.stderr,
        )
        return 1
    print(f"check-api: {len(found)} public paths of {CRATE}, as listed in {LIST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
