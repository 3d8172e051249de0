#!/usr/bin/env python3
"""Independent oracle for Suricata content matching (content, nocase, offset, depth,
distance, within), built on Python's re.

Input (argv[1]): lines
  RULE                               starts a rule
  C <hex> <nocase 0/1> <offset> <depth> <distance> <within>   one content ('-' = unset)
  PAYLOAD <hex>                      a payload (all rules are checked on all payloads)
Output: one line per rule, one character per payload, '1' = match.

Semantics, from Suricata's rule documentation: offset/depth count from the start of the
buffer (depth from the offset); distance/within count from the end of the previous
content match (within from there plus the distance; a negative distance that reaches
before the start is clamped at 0, the within end is not); a rule matches when some choice
of occurrences satisfies every content in order (Suricata retries earlier relative matches).
"""
import re
import sys


def occurrences(pat, nocase, buf, start, end):
    """Starts of pat fully inside buf[start:end], overlapping ones too."""
    flags = re.IGNORECASE if nocase else 0
    rx = re.compile(b"(?=" + re.escape(pat) + b")", flags)
    start = max(start, 0)
    end = min(end, len(buf))
    return [m.start() for m in rx.finditer(buf, start) if m.start() + len(pat) <= end]


def window(c, cursor, n):
    pat, nocase, off, depth, dist, within = c
    if dist is not None or within is not None:
        d = dist or 0
        start = 0 if (d < 0 and -d > cursor) else cursor + d
        end = n if within is None else min(n, cursor + d + within)
        return start, end
    start = off or 0
    end = n if depth is None else min(n, (off or 0) + depth)
    return start, end


def matches(rule, buf, i=0, cursor=0):
    if i == len(rule):
        return True
    c = rule[i]
    start, end = window(c, cursor, len(buf))
    for p in occurrences(c[0], c[1], buf, start, end):
        if matches(rule, buf, i + 1, p + len(c[0])):
            return True
    return False


def main():
    rules, payloads = [], []
    for line in open(sys.argv[1]):
        f = line.split()
        if not f:
            continue
        if f[0] == "RULE":
            rules.append([])
        elif f[0] == "C":
            num = lambda s: None if s == "-" else int(s)
            rules[-1].append((bytes.fromhex(f[1]), f[2] == "1", num(f[3]), num(f[4]),
                              num(f[5]), num(f[6])))
        elif f[0] == "PAYLOAD":
            payloads.append(bytes.fromhex(f[1]) if len(f) > 1 else b"")
    for r in rules:
        # Suricata inspects no empty buffer.
        print("".join("1" if (len(p) > 0 and matches(r, p)) else "0" for p in payloads))


main()
