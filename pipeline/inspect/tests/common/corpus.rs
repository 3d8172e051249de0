//! Realistic inputs for the matcher's oracle test and benchmark, from the shared corpus: the
//! fast patterns of the ET Open rules (a simple scan for `content:"..."`, only to build a
//! pattern set: the rule parser proper is `rules`) and the L4 payloads of tcpdump's captures.
#![allow(dead_code)]

use std::path::Path;

/// One pattern per active (uncommented) rule: its longest `content`, with the `nocase` that
/// follows it (Suricata's default fast pattern is the longest content); duplicates dropped.
pub fn etopen_fast_patterns(dir: &Path) -> Vec<(Vec<u8>, bool)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rules"))
        .collect();
    files.sort();
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for line in text.split(|&b| b == b'\n') {
            if line.first() == Some(&b'#') || line.is_empty() {
                continue;
            }
            let best = contents(line)
                .into_iter()
                .max_by_key(|(b, _)| b.len())
                .filter(|(b, _)| !b.is_empty() && b.len() <= 255);
            if let Some(p) = best {
                if seen.insert(p.clone()) {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// The `content` strings of one rule line, decoded (`|41 42|` hex, `\"` `\;` `\\`), each with
/// whether a `nocase` comes before the next `content`; a negated one (`content:!"..."`) as empty.
pub fn contents(line: &[u8]) -> Vec<(Vec<u8>, bool)> {
    const KEY: &[u8] = b"content:";
    let mut out: Vec<(Vec<u8>, bool)> = Vec::new();
    let mut i = 0;
    while i + KEY.len() <= line.len() {
        if &line[i..i + KEY.len()] != KEY {
            if out.last().is_some() && line[i..].starts_with(b"nocase") {
                if let Some(last) = out.last_mut() {
                    last.1 = true;
                }
            }
            i += 1;
            continue;
        }
        i += KEY.len();
        let mut negated = false;
        while i < line.len() && (line[i] == b' ' || line[i] == b'!') {
            negated |= line[i] == b'!';
            i += 1;
        }
        if i >= line.len() || line[i] != b'"' {
            continue;
        }
        i += 1;
        let (bytes, end) = decode(line, i);
        // A negated content cannot be a fast pattern (its absence is what matches); an empty
        // one stands in so its `nocase` is not taken for the content before it.
        out.push((if negated { Vec::new() } else { bytes }, false));
        i = end;
    }
    out
}

/// Decodes a content string from `i` to its closing quote: the bytes and the offset past it.
fn decode(line: &[u8], mut i: usize) -> (Vec<u8>, usize) {
    let mut bytes = Vec::new();
    let mut hex = false;
    let mut nib: Option<u8> = None;
    while i < line.len() {
        let c = line[i];
        i += 1;
        match c {
            b'"' if !hex => return (bytes, i),
            b'\\' if !hex && i < line.len() => {
                bytes.push(line[i]);
                i += 1;
            }
            b'|' => {
                hex = !hex;
                nib = None;
            }
            _ if hex => {
                if let Some(v) = (c as char).to_digit(16) {
                    match nib.take() {
                        Some(h) => bytes.push(h << 4 | v as u8),
                        None => nib = Some(v as u8),
                    }
                }
            }
            _ => bytes.push(c),
        }
    }
    (bytes, i)
}

/// The non-empty TCP / UDP payloads of the Ethernet captures listed in `pcaps/INDEX.tsv` under
/// `tcpdump/` (classic pcap, IPv4 / IPv6, one VLAN tag at most), at most `max_bytes` in all.
pub fn tcpdump_payloads(pcaps: &Path, max_bytes: usize) -> Vec<Vec<u8>> {
    let index = std::fs::read_to_string(pcaps.join("INDEX.tsv"))
        .unwrap_or_else(|e| panic!("{}: {e}", pcaps.join("INDEX.tsv").display()));
    let mut out = Vec::new();
    let mut total = 0;
    for line in index.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 3 || !cols[0].starts_with("tcpdump/") || !cols[2].starts_with("ether") {
            continue;
        }
        let Ok(file) = std::fs::read(pcaps.join(cols[0])) else {
            continue;
        };
        for frame in pcap_frames(&file) {
            if let Some(p) = l4_payload(frame) {
                if !p.is_empty() && total < max_bytes {
                    total += p.len();
                    out.push(p.to_vec());
                }
            }
        }
    }
    out
}

fn pcap_frames(f: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    if f.len() < 24 {
        return out;
    }
    let le = match &f[..4] {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => return out,
    };
    let u32at = |i: usize| {
        let b = [f[i], f[i + 1], f[i + 2], f[i + 3]];
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let mut i = 24;
    while i + 16 <= f.len() {
        let caplen = u32at(i + 8) as usize;
        let end = i + 16 + caplen;
        if end > f.len() {
            break;
        }
        out.push(&f[i + 16..end]);
        i = end;
    }
    out
}

fn l4_payload(f: &[u8]) -> Option<&[u8]> {
    let mut et = u16::from_be_bytes([*f.get(12)?, *f.get(13)?]);
    let mut at = 14;
    if et == 0x8100 {
        et = u16::from_be_bytes([*f.get(16)?, *f.get(17)?]);
        at = 18;
    }
    let (proto, l4) = match et {
        0x0800 => {
            let ihl = (*f.get(at)? & 0x0f) as usize * 4;
            (*f.get(at + 9)?, at + ihl)
        }
        0x86dd => (*f.get(at + 6)?, at + 40),
        _ => return None,
    };
    let start = match proto {
        6 => l4 + (*f.get(l4 + 12)? >> 4) as usize * 4,
        17 => l4 + 8,
        _ => return None,
    };
    f.get(start..)
}

/// HTTP-like requests and responses (headers, a little body), `n` of them, deterministic.
pub fn http_like(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let paths = [
        "/index.html",
        "/wp-login.php",
        "/api/v1/items?id=42",
        "/cgi-bin/test.cgi",
        "/images/logo.png",
    ];
    let agents = [
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64)",
        "curl/7.68.0",
        "Wget/1.20.3",
        "python-requests/2.22",
    ];
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..n)
        .map(|i| {
            let p = paths[next() as usize % paths.len()];
            let a = agents[next() as usize % agents.len()];
            let n_body = next() % 600;
            let body: String = (0..n_body)
                .map(|k| (b'a' + ((k + next()) % 26) as u8) as char)
                .collect();
            let head = if i % 2 == 0 {
                format!(
                    "GET {p} HTTP/1.1\r\nHost: www.example{}.com\r\nUser-Agent: {a}\r\n\
                     Accept: */*\r\nCookie: session={}\r\n\r\n",
                    next() % 100,
                    next()
                )
            } else {
                format!(
                    "HTTP/1.1 200 OK\r\nServer: Apache/2.4.29 (Ubuntu)\r\n\
                     Content-Type: text/html; charset=UTF-8\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                )
            };
            format!("{head}{body}").into_bytes()
        })
        .collect()
}
