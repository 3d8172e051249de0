//! Rules, traffic and pipelines for the inspect tests that hold the GPU stage equal to the CPU
//! (host-built CUDA, the GPU executor).

#![allow(dead_code)]

pub mod http;
pub mod state;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pipeline::burst::FrameDesc;
use pipeline::internal::stage::config::StageConfig;
use pipeline::stage::{Pipeline, Stage};

/// A small xorshift generator: the same frames and rules for a seed, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

/// Patterns the rules look for and the traffic plants.
pub const PATTERNS: &[&str] = &[
    "probe-me",
    "KILL-ME",
    "trusted-peer",
    "|90 90 90 90|",
    "c2-test",
    "pktwarp-marker",
    "GET ",
    "USER root",
    "|00 01 02|",
    "abcabcab",
];

/// The bytes of a Suricata content (`|hex|` parts).
pub fn pattern_bytes(p: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut hex = false;
    for part in p.split('|') {
        if hex {
            out.extend(
                part.split_whitespace()
                    .map(|h| u8::from_str_radix(h, 16).expect("hex")),
            );
        } else {
            out.extend_from_slice(part.as_bytes());
        }
        hex = !hex;
    }
    out
}

/// A fixed rule set over the payload: content modifiers, byte tests, dsize, ICMP, flags, ports,
/// addresses, a rule without content, each action; with `flow`, rules of connection state.
pub fn fixed_rules(flow: bool) -> String {
    let mut r = String::from(
        "alert tcp any any -> any 80 (msg:\"probe\"; content:\"probe-me\"; sid:1001;)
drop tcp any any -> any any (msg:\"kill\"; content:\"kill-me\"; nocase; sid:1002;)
pass tcp any any -> any any (msg:\"trusted\"; content:\"trusted-peer\"; sid:1003;)
alert tcp $EXTERNAL_NET any -> $HOME_NET any (msg:\"nops\"; content:\"|90 90 90 90|\"; depth:64; sid:1004;)
alert udp any any -> any 53 (msg:\"c2\"; content:\"c2-test\"; nocase; offset:2; sid:1005;)
alert icmp any any -> any any (msg:\"marker\"; itype:8; content:\"pktwarp-marker\"; sid:1006;)
alert tcp any any -> any any (msg:\"get then 1.1\"; content:\"GET \"; depth:4; content:\"HTTP/1.1\"; distance:0; within:200; sid:1007;)
reject tcp any any -> any 21 (msg:\"ftp root\"; content:\"USER root\"; isdataat:2,relative; sid:1008;)
alert ip any any -> any any (msg:\"seq\"; content:\"|00 01 02|\"; byte_test:1,>,100,0,relative; sid:1009;)
alert tcp any any -> any any (msg:\"not after\"; content:\"abcabcab\"; content:!\"zz\"; distance:0; sid:1010;)
alert udp any any -> any any (msg:\"big udp\"; dsize:>500; sid:1011;)
alert tcp any any -> any any (msg:\"syn fin\"; flags:SF; sid:1012;)
alert tcp any any <> 10.0.0.0/8 any (msg:\"jump\"; content:\"|00 01 02|\"; byte_jump:1,0,relative; content:\"A\"; within:4; sid:1013;)
alert udp any any -> any any (msg:\"udp byte\"; byte_test:2,=,0x4142,0; sid:1014;)
",
    );
    if flow {
        r.push_str(
            "alert tcp any any -> any any (msg:\"est to server\"; flow:established,to_server; content:\"probe-me\"; sid:1101;)
alert tcp any any -> any any (msg:\"to client\"; flow:to_client; content:\"abcabcab\"; sid:1102;)
drop tcp any any -> any any (msg:\"not est\"; flow:not_established; content:\"USER root\"; sid:1103;)
",
        );
    }
    r
}

/// A rule set made from `seed`: each rule a random header and a few options of the payload.
pub fn random_rules(seed: u64, n: usize, flow: bool) -> String {
    let mut g = Rng::new(seed);
    let mut out = String::new();
    for i in 0..n {
        let action = g.pick(&["alert", "alert", "alert", "drop", "pass", "reject"]);
        let proto = g.pick(&["tcp", "udp", "ip", "icmp"]);
        let src = g.pick(&["any", "10.0.0.0/8", "$HOME_NET", "!192.168.1.0/24"]);
        let dst = g.pick(&["any", "any", "$EXTERNAL_NET", "[8.8.8.8,10.0.0.1]"]);
        let sport = g.pick(&["any", "any", "1024:", "![80,443]"]);
        let dport = g.pick(&["any", "any", "80", "53", "[21,80,2000:3000]"]);
        let dir = g.pick(&["->", "->", "<>"]);
        let mut opts = String::new();
        let k = 1 + g.below(3);
        for j in 0..k {
            let pat = g.pick(PATTERNS);
            match g.below(9) {
                0 | 1 => opts.push_str(&format!("content:\"{pat}\"; ")),
                7 => {
                    // A pcre of the pattern's bytes and a tail: relative, caseless, `$` ...
                    let re: String = pattern_bytes(pat)
                        .iter()
                        .map(|&b| {
                            if b.is_ascii_alphanumeric() {
                                (b as char).to_string()
                            } else {
                                format!("\\x{b:02x}")
                            }
                        })
                        .collect();
                    let tail = g.pick(&[
                        "",
                        "[^\\r\\n]*$",
                        "\\s*",
                        "(?:-[a-z]+)+",
                        "\\b",
                        ".{0,16}?\\d",
                    ]);
                    let flags = g.pick(&["", "i", "R", "s", "m", "Ri", "G", "iE"]);
                    let neg = if j > 0 && g.chance(20) { "!" } else { "" };
                    opts.push_str(&format!("pcre:{neg}\"/{re}{tail}/{flags}\"; "));
                }
                2 => opts.push_str(&format!("content:\"{pat}\"; nocase; ")),
                3 => opts.push_str(&format!(
                    "content:\"{pat}\"; offset:{}; depth:{}; ",
                    g.below(20),
                    20 + g.below(200)
                )),
                4 if j > 0 => opts.push_str(&format!(
                    "content:\"{pat}\"; distance:{}; within:{}; ",
                    g.below(10),
                    20 + g.below(300)
                )),
                5 if j > 0 => opts.push_str(&format!("content:!\"{pat}\"; ")),
                6 => opts.push_str(&format!("dsize:>{}; ", g.below(400))),
                _ => opts.push_str(&format!(
                    "byte_test:1,{},{},{}; ",
                    g.pick(&["<", ">", "=", "&"]),
                    g.below(256),
                    g.below(16)
                )),
            }
        }
        if flow && g.chance(30) {
            let f = g.pick(&[
                "established",
                "to_server",
                "established,to_client",
                "not_established",
            ]);
            opts.push_str(&format!("flow:{f}; "));
        }
        out.push_str(&format!(
            "{action} {proto} {src} {sport} {dir} {dst} {dport} (msg:\"r{i}\"; {opts}sid:{};)\n",
            2000 + i
        ));
    }
    out
}

fn eth(et: u16, vlan: Option<u16>) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    if let Some(v) = vlan {
        f.extend_from_slice(&[0x81, 0, (v >> 8) as u8, v as u8]);
    }
    f.extend_from_slice(&et.to_be_bytes());
    f
}

fn payload(g: &mut Rng) -> Vec<u8> {
    let mut p = Vec::new();
    // HTTP starts, whole heads and split ones, and near misses (what `heads_split` counts).
    const HEADS: &[&[u8]] = &[
        b"GET /a HTTP/1.1\r\nHost: x\r\n",
        b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.1 200 OK\r\nServer: y\n\n",
        b"HTTP/1.0 20x OK\r\n",
        b"HTTP/1.1",
        b"HTTP/",
        b"GET",
        b"GET ",
        b"get / HTTP/1.1\r\n",
        b"  GET   /x   HTTP/1.0  \r\nA: b\r\n",
        b"M-SEARCH * HTTP/1.1\r\n\r\n",
        b"GET / FTP/1.1\r\n",
        b"GET /\r\n",
        b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA / HTTP/1.1\r\n",
        b"POST /p HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        b"\r\n",
        b" x",
    ];
    if g.chance(40) {
        p.extend_from_slice(HEADS[g.below(HEADS.len() as u64) as usize]);
    }
    let n = g.below(4) as usize;
    for _ in 0..n {
        for _ in 0..g.below(40) {
            p.push(g.next() as u8);
        }
        let pat: &str = g.pick::<&str>(PATTERNS);
        let mut b = pattern_bytes(pat);
        if g.chance(30) {
            b.iter_mut().for_each(|c| *c = c.to_ascii_lowercase());
        }
        p.extend_from_slice(&b);
        if g.chance(30) {
            p.extend_from_slice(&[0x00, 0x01, 0x02, g.next() as u8, b'A']);
        }
    }
    if g.chance(10) {
        p.resize(p.len() + 400 + g.below(700) as usize, b'x');
    }
    if g.chance(20) {
        p.extend((0..g.below(64)).map(|_| g.next() as u8));
    }
    p
}

fn ipv4(g: &mut Rng, proto: u8, l4: &[u8], src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let opts = if g.chance(10) { 4 } else { 0 };
    let total = (20 + opts + l4.len()) as u16;
    let frag: u16 = if g.chance(5) { 0x0010 } else { 0 };
    let mut v = vec![0x45 + (opts / 4) as u8, 0];
    v.extend_from_slice(&total.to_be_bytes());
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(&frag.to_be_bytes());
    v.extend_from_slice(&[64, proto, 0, 0]);
    v.extend_from_slice(&src);
    v.extend_from_slice(&dst);
    v.extend(std::iter::repeat_n(1u8, opts));
    v.extend_from_slice(l4);
    v
}

fn ipv6(g: &mut Rng, proto: u8, l4: &[u8]) -> Vec<u8> {
    let ext = g.chance(30);
    let plen = (l4.len() + if ext { 8 } else { 0 }) as u16;
    let mut v = vec![0x60, 0, 0, 0];
    v.extend_from_slice(&plen.to_be_bytes());
    v.extend_from_slice(&[if ext { 0 } else { proto }, 64]);
    v.extend_from_slice(&[0x20, 1, 0x0d, 0xb8]);
    v.extend((0..12).map(|_| g.below(3) as u8));
    v.extend_from_slice(&[0xfd, 0, 0, 0]);
    v.extend((0..12).map(|_| g.below(3) as u8));
    if ext {
        v.extend_from_slice(&[proto, 0, 1, 4, 0, 0, 0, 0]);
    }
    v.extend_from_slice(l4);
    v
}

fn l4(g: &mut Rng, proto: u8, sport: u16, dport: u16, pay: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    match proto {
        6 => {
            v.extend_from_slice(&sport.to_be_bytes());
            v.extend_from_slice(&dport.to_be_bytes());
            v.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
            let opts = if g.chance(20) { 12 } else { 0 };
            v.push((((20 + opts) / 4) << 4) as u8);
            v.push(*g.pick(&[0x18, 0x10, 0x02, 0x12, 0x03, 0x11, 0x00]));
            v.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
            v.extend(std::iter::repeat_n(1u8, opts));
        }
        17 => {
            v.extend_from_slice(&sport.to_be_bytes());
            v.extend_from_slice(&dport.to_be_bytes());
            v.extend_from_slice(&((8 + pay.len()) as u16).to_be_bytes());
            v.extend_from_slice(&[0, 0]);
        }
        1 => v.extend_from_slice(&[*g.pick(&[8, 0, 3]), 0, 0, 0, 0, 1, 0, 1]),
        _ => {}
    }
    v.extend_from_slice(pay);
    v
}

/// One frame: Ethernet (a VLAN tag at times), IPv4 or IPv6, TCP / UDP / ICMP / GRE, at times
/// inside VXLAN or GTP-U, a payload with planted patterns; some cut short.
pub fn frame(g: &mut Rng) -> Vec<u8> {
    let hosts: [[u8; 4]; 5] = [
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        [192, 168, 1, 7],
        [8, 8, 8, 8],
        [172, 16, 3, 4],
    ];
    let proto = *g.pick(&[6, 6, 6, 17, 17, 1, 47]);
    let (sport, dport) = (
        *g.pick(&[1234, 40000, 80, 53]),
        *g.pick(&[80, 53, 21, 443, 2500, 4000]),
    );
    let pay = payload(g);
    let inner_l4 = l4(g, proto, sport, dport, &pay);
    let (src, dst) = (*g.pick(&hosts), *g.pick(&hosts));
    let mut f = match g.below(10) {
        0 => {
            let mut f = eth(0x86dd, None);
            f.extend(ipv6(g, proto, &inner_l4));
            f
        }
        1 => {
            // VXLAN: inner Ethernet + IPv4 in UDP 4789.
            let mut inner = vec![8, 0, 0, 0, 0, 0, 0, 0];
            inner[3] = 7;
            inner.extend(eth(0x0800, None));
            inner.extend(ipv4(g, proto, &inner_l4, src, dst));
            let outer = l4(g, 17, 5555, 4789, &inner);
            let mut f = eth(0x0800, None);
            f.extend(ipv4(g, 17, &outer, [192, 0, 2, 1], [192, 0, 2, 2]));
            f
        }
        2 => {
            // GTP-U (G-PDU) carrying IPv4, UDP 2152.
            let ip = ipv4(g, proto, &inner_l4, src, dst);
            let mut gtp = vec![0x30, 0xff];
            gtp.extend_from_slice(&(ip.len() as u16).to_be_bytes());
            gtp.extend_from_slice(&[0, 0, 0, 9]);
            gtp.extend(ip);
            let outer = l4(g, 17, 2152, 2152, &gtp);
            let mut f = eth(0x0800, None);
            f.extend(ipv4(g, 17, &outer, [192, 0, 2, 1], [192, 0, 2, 2]));
            f
        }
        3 => {
            let mut f = eth(0x0806, None);
            f.extend_from_slice(&[0; 28]);
            f
        }
        _ => {
            let vlan = g.chance(20).then_some(5);
            let mut f = eth(0x0800, vlan);
            f.extend(ipv4(g, proto, &inner_l4, src, dst));
            f
        }
    };
    if g.chance(5) {
        let cut = 14 + g.below(f.len() as u64) as usize;
        f.truncate(cut.min(f.len()));
    }
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

/// `n` frames over two queues, receive times 1 us apart.
pub fn traffic(seed: u64, n: usize) -> Vec<(FrameDesc, Vec<u8>)> {
    let mut g = Rng::new(seed);
    (0..n)
        .map(|i| {
            let f = frame(&mut g);
            let d = FrameDesc {
                wire_len: f.len() as u32,
                timestamp_ns: 1_700_000_000_000_000_000 + i as u64 * 1000,
                queue: (i % 2) as u16,
                ..FrameDesc::default()
            };
            (d, f)
        })
        .collect()
}

/// `parse [-> conntrack] -> inspect -> count` over the rule file `rules`, alerts to
/// `alert_to`.
pub fn pipeline(rules: &Path, conntrack: bool, alert_to: &str) -> Arc<Pipeline> {
    pipeline_eve(rules, conntrack, alert_to, None)
}

/// [`pipeline`] with an EVE log at `eve`.
pub fn pipeline_eve(
    rules: &Path,
    conntrack: bool,
    alert_to: &str,
    eve: Option<&Path>,
) -> Arc<Pipeline> {
    let eve = eve.map_or(String::new(), |e| {
        format!("    eve: {{ path: \"{}\" }}\n", e.display())
    });
    pipeline_with(rules, conntrack, alert_to, &eve)
}

/// [`pipeline`] with `extra` (lines of the inspect stage's options, indented 4) added.
pub fn pipeline_with(rules: &Path, conntrack: bool, alert_to: &str, extra: &str) -> Arc<Pipeline> {
    let eve = extra;
    let ct = if conntrack {
        "- conntrack: { entries: 4096 }\n"
    } else {
        ""
    };
    let yaml = format!(
        "- parse\n{ct}- inspect:\n    rules: [\"{}\"]\n    strict: false\n    vars: {{ HOME_NET: \"[10.0.0.0/8,192.168.0.0/16]\", EXTERNAL_NET: \"!$HOME_NET\" }}\n    alert_to: {alert_to}\n{eve}- count\n",
        rules.display()
    );
    let stages: Vec<StageConfig> = serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{e}"));
    Arc::new(
        pipeline::internal::stage::build(&stages, |x| x.to_path_buf())
            .unwrap_or_else(|e| panic!("{e:#}")),
    )
}

/// A scratch folder of the test's own.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-insp-gpu-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The ET Open rules the GPU stage takes (payload and HTTP rules without state), as one rule file in
/// `dir`: each rule of the shared set that loads is kept when `pktwarp_inspect::gpu` accepts
/// it. None without the corpus (outside CI).
pub fn etopen_gpu_subset(dir: &Path, flow_table: bool) -> Option<(PathBuf, usize)> {
    use pktwarp_inspect::engine::{RuleSet, SetConfig};
    let et = flow_rules::input::require_corpus("ids/etopen-2019")?;
    let cfg = SetConfig {
        rules: vec![et.join("*.rules")],
        vars: Default::default(),
        strict: false,
        flow_table,
        gpu_rules_only: false,
        state: Default::default(),
    };
    let set = RuleSet::load(&cfg, &pktwarp_inspect::alert::Classifications::standard())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut out = String::new();
    let mut files: std::collections::HashMap<String, Vec<String>> = Default::default();
    let (mut kept, mut http) = (0, 0);
    for i in 0..set.len() as u32 {
        if pktwarp_inspect::gpu::rule_refusal(&set, i).is_some() {
            continue;
        }
        http += usize::from(reads_http(&set, i));
        let (file, line) = set.origin(i).expect("origin");
        let lines = files.entry(file.to_string()).or_insert_with(|| {
            std::fs::read_to_string(file)
                .expect("rule file")
                .lines()
                .map(str::to_string)
                .collect()
        });
        out.push_str(&lines[line - 1]);
        out.push('\n');
        kept += 1;
    }
    eprintln!(
        "ET Open (flow table {flow_table}): {} rules loaded; the GPU takes {kept}, {http} of \
         them reading HTTP buffers (payload rules alone: {})",
        set.len(),
        kept - http
    );
    let path = dir.join("etopen-gpu.rules");
    std::fs::write(&path, out).unwrap();
    Some((path, kept))
}

/// Whether rule `i` of `set` reads an HTTP buffer (or needs an HTTP head).
pub fn reads_http(set: &pktwarp_inspect::engine::RuleSet, i: u32) -> bool {
    let p = set.program();
    let r = &p.rules[i as usize];
    let (s, n) = (r.ops[0] as usize, r.ops[1] as usize);
    r.http != 0 || p.ops[s..s + n].iter().any(|o| o.buffer != 0)
}

/// Every frame of the tcpdump captures of the corpus (INDEX.tsv's Ethernet ones); None
/// without the corpus (outside CI).
pub fn corpus_frames() -> Option<Vec<(FrameDesc, Vec<u8>)>> {
    pipeline::internal::testdata::corpus_ethernet_descs(|i, f| FrameDesc {
        wire_len: f.len() as u32,
        timestamp_ns: 1_700_000_000_000_000_000 + i as u64 * 1000,
        queue: 0,
        ..FrameDesc::default()
    })
}

/// The CPU stage's hits by sid (its `pktwarp_inspect_rule_hits_total` samples).
pub fn sid_hits(slot: &pipeline::internal::stage::CustomSlot) -> BTreeMap<u32, u64> {
    slot.cpu()
        .metric_samples()
        .into_iter()
        .filter(|s| s.0 == 0)
        .map(|(_, l, v)| (l[0].parse().expect("a sid"), v as u64))
        .collect()
}

/// The sid of each rule index of the stage's set (the order the GPU's hit buffer has).
pub fn rule_sids(p: &Pipeline, k: usize) -> Vec<u32> {
    rule_set(p, k)
        .catalog()
        .rules
        .iter()
        .map(|r| r.sid)
        .collect()
}

/// The stage's rule set, loaded again from its options (the same rule indices).
pub fn rule_set(p: &Pipeline, k: usize) -> pktwarp_inspect::engine::RuleSet {
    let Stage::Custom(slot) = &p.stages[k] else {
        unreachable!()
    };
    let opts = slot.options();
    let cfg = pipeline::internal::stage::inspect::InspectStageConfig::from_options(&opts)
        .expect("options");
    pktwarp_inspect::engine::RuleSet::load(
        &pktwarp_inspect::engine::SetConfig {
            rules: cfg.rules.clone(),
            vars: cfg.vars.clone(),
            strict: cfg.strict,
            flow_table: cfg.flow_table,
            gpu_rules_only: cfg.gpu_rules_only,
            state: Default::default(),
        },
        &pktwarp_inspect::alert::Classifications::standard(),
    )
    .expect("rules")
}
