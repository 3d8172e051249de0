#!/usr/bin/env python3
"""Checks that no function is longer than --max-fn lines (default 150) and no source file longer
than --max-file lines (default 1000), in the Rust and CUDA / C / C++ sources git tracks.

A function's length runs from the line of its signature (`fn NAME`, or a C function's name) to
the line of its closing brace, found by a lexer that skips comments, strings (raw ones too) and
character literals, so braces inside generated-code templates do not count.

Usage (repository root): scripts/check-sizes.py [--max-fn N] [--max-file N] [--list N] [PATH...]
                         scripts/check-sizes.py --self-test
  PATH     files to check (default: every tracked *.rs, *.cu, *.cuh, *.h, *.c, *.cc, *.cpp)
  --list N print the N longest functions as well
Exit status 1 when something is over a limit, naming each file (and function, with its first
line) and its length.

Allowed exceptions live in ALLOWED below, each with its reason.
"""
import argparse
import re
import subprocess
import sys

RUST = (".rs",)
C_LIKE = (".cu", ".cuh", ".h", ".c", ".cc", ".cpp")

# path -> why it may be longer than the file limit (functions are never exempt).
ALLOWED_FILES = {}


def strip_rust(text):
    """The text with comments, strings and char literals blanked (newlines kept), so that
    braces and keywords left are code."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif re.match(r'(br|r)#*"', text[i:i + 260]) and not is_ident_char(text, i - 1):
            m = re.match(r'(br|r)(#*)"', text[i:])
            end = '"' + m.group(2)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(blank(text[i:j]))
            i = j
        elif c == '"' or (c == "b" and text.startswith('b"', i) and not is_ident_char(text, i - 1)):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i:j + 1]))
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{1F600}', b'x'), else a lifetime or label.
            m = re.match(r"'(\\(u\{[0-9a-fA-F]{1,6}\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'", text[i:i + 12])
            if m:
                out.append(blank(m.group(0)))
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_c(text):
    """As strip_rust, for C / C++ / CUDA (no nesting comments, no raw strings R"(...)")."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(blank(text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i:j + 1]))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_ident_char(text, i):
    return i >= 0 and (text[i].isalnum() or text[i] == "_")


def blank(s):
    return "".join("\n" if ch == "\n" else " " for ch in s)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def match_brace(code, open_pos):
    depth = 0
    for j in range(open_pos, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def rust_functions(code):
    """(name, first line, last line) of every `fn` with a body."""
    for m in re.finditer(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", code):
        depth, j = 0, m.end()
        while j < len(code):
            ch = code[j]
            if ch in "([<":
                depth += 1
            elif ch in ")]>":
                # `->` is not a closing bracket.
                if not (ch == ">" and code[j - 1] == "-"):
                    depth -= 1
            elif ch == ";" and depth <= 0:
                j = -1  # a declaration without a body
                break
            elif ch == "{" and depth <= 0:
                break
            j += 1
        if j < 0 or j >= len(code):
            continue
        end = match_brace(code, j)
        yield m.group(1), line_of(code, m.start()), line_of(code, end)


C_NOT_FUNCTIONS = re.compile(r"\b(struct|union|enum|class|namespace|extern\s*$)\b")


def c_functions(code):
    """(name, first line, last line) of every top-level C / CUDA function definition: a `{` at
    depth 0 after a parameter list."""
    depth, start = 0, 0
    i = 0
    while i < len(code):
        ch = code[i]
        if ch == "{":
            if depth == 0:
                head = code[start:i]
                m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*\([^;{}]*\)\s*(const\s*)?$", head)
                if m and not C_NOT_FUNCTIONS.search(head):
                    end = match_brace(code, i)
                    yield m.group(1), line_of(code, start + m.start()), line_of(code, end)
                    i = end + 1
                    start = i
                    continue
                if re.search(r'extern\s*$', head.rstrip()) or re.search(r"\bnamespace\b", head):
                    # extern "C" { ... } / namespace: its contents are top level.
                    start = i + 1
                    i += 1
                    continue
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        elif ch in ";#" and depth == 0:
            if ch == "#":
                # A preprocessor line: skip it (continuations too).
                j = i
                while True:
                    k = code.find("\n", j)
                    if k < 0:
                        k = len(code)
                        break
                    if code[k - 1] != "\\":
                        break
                    j = k + 1
                i = k
            start = i + 1
        i += 1


def tracked(exts):
    out = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if p.endswith(exts)]


def self_test():
    """The lexer and the limits on made-up sources: braces in strings, raw strings, chars and
    comments do not count; a body one line over the limit is caught; a C function too."""
    body = "\n".join("    let x = 1;" for _ in range(148))
    rs = (
        'fn short() { let s = "}}}{"; let r = r#"{ "# ; let c = \'{\'; /* { */ }\n'
        "fn at_limit<'a>(x: &'a str) -> Vec<u8> where u8: Copy {\n" + body + "\n}\n"
        "fn over() {\n" + body + "\n    let y = 2;\n}\n"
        "trait T { fn decl(&self); }\n"
    )
    got = {n: b - a + 1 for n, a, b in rust_functions(strip_rust(rs))}
    assert got == {"short": 1, "at_limit": 150, "over": 151}, got
    c = 'struct S { int a; };\nstatic const char *s = "{";\n__device__ int f(int a) {\n  return a; /* } */\n}\n'
    got = {n: b - a + 1 for n, a, b in c_functions(strip_c(c))}
    assert got == {"f": 3}, got
    print("check-sizes: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-fn", type=int, default=150)
    ap.add_argument("--max-file", type=int, default=1000)
    ap.add_argument("--list", type=int, default=0)
    ap.add_argument("paths", nargs="*")
    a = ap.parse_args()
    paths = a.paths or tracked(RUST + C_LIKE)
    over, fns = [], []
    for p in paths:
        try:
            text = open(p, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError) as e:
            print(f"{p}: cannot read: {e}", file=sys.stderr)
            return 2
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > a.max_file and p not in ALLOWED_FILES:
            over.append(f"{p}: {lines} lines (limit {a.max_file}): split it by what its parts do")
        if p.endswith(RUST):
            found = rust_functions(strip_rust(text))
        elif p.endswith(C_LIKE):
            found = c_functions(strip_c(text))
        else:
            continue
        for name, first, last in found:
            n = last - first + 1
            fns.append((n, p, first, name))
            if n > a.max_fn:
                over.append(f"{p}:{first}: fn {name} is {n} lines (limit {a.max_fn})")
    for n, p, first, name in sorted(fns, reverse=True)[: a.list]:
        print(f"{n:5} {p}:{first} {name}")
    for o in over:
        print(o)
    if over:
        print(f"check-sizes: {len(over)} over the limits", file=sys.stderr)
        return 1
    print(f"check-sizes: {len(paths)} files, {len(fns)} functions within {a.max_fn} lines a function and {a.max_file} a file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
