//! Rules with flowbits, noalert, threshold and detection_filter, and connection traffic that
//! makes them decide: few hosts, several frames per flow and per source in one burst, both
//! directions of a flow on one queue, receive times that open and close windows (and a jump
//! past the flows' idle time).

use super::{pattern_bytes, Rng, PATTERNS};
use pipeline::burst::FrameDesc;

const NAMES: &[&str] = &["fa", "fb", "fc", "fd", "fe"];

fn pat(g: &mut Rng) -> &'static str {
    PATTERNS[g.below(6) as usize]
}

fn filter(g: &mut Rng) -> String {
    let track = *g.pick(&["by_src", "by_dst", "by_rule", "by_both"]);
    let secs = 1 + g.below(3);
    if g.chance(30) {
        let track = *g.pick(&["by_src", "by_dst"]);
        format!(
            "detection_filter:track {track}, count {}, seconds {secs}; ",
            g.below(4)
        )
    } else {
        let kind = *g.pick(&["limit", "threshold", "both"]);
        format!(
            "threshold:type {kind}, track {track}, count {}, seconds {secs}; ",
            1 + g.below(4)
        )
    }
}

fn flowbits(g: &mut Rng) -> String {
    let mut o = String::new();
    for _ in 0..1 + g.below(2) {
        let n = *g.pick(NAMES);
        match g.below(8) {
            0 | 1 => o.push_str(&format!("flowbits:set,{n}; ")),
            2 => o.push_str(&format!("flowbits:unset,{n}; ")),
            3 => o.push_str(&format!("flowbits:toggle,{n}; ")),
            4 | 5 => o.push_str(&format!("flowbits:isset,{n}; ")),
            6 => o.push_str(&format!("flowbits:isnotset,{n}; ")),
            _ => o.push_str(&format!("flowbits:isset,{n}|{}; ", g.pick(NAMES))),
        }
    }
    if g.chance(20) {
        o.push_str("flowbits:noalert; ");
    }
    o
}

/// `n` rules from `seed`: flowbits chains (setters, readers, toggles, OR-groups, noalert),
/// thresholds of every type and track, detection_filters, both together, every action; a few
/// rules without state and a few without content (candidates on every frame).
pub fn state_rules(seed: u64, n: usize) -> String {
    let mut g = Rng::new(seed);
    let mut out = String::new();
    for i in 0..n {
        let action = *g.pick(&["alert", "alert", "alert", "alert", "drop", "pass", "reject"]);
        let proto = *g.pick(&["tcp", "tcp", "udp", "ip"]);
        let mut o = String::new();
        if !g.chance(15) {
            o.push_str(&format!("content:\"{}\"; ", pat(&mut g)));
        }
        if g.chance(15) {
            o.push_str("flow:established; ");
        }
        match g.below(6) {
            0 | 1 => o.push_str(&flowbits(&mut g)),
            2 | 3 => o.push_str(&filter(&mut g)),
            4 => {
                o.push_str(&flowbits(&mut g));
                o.push_str(&filter(&mut g));
            }
            _ => {}
        }
        out.push_str(&format!(
            "{action} {proto} any any -> any any (msg:\"s{i}\"; {o}sid:{};)\n",
            7000 + i
        ));
    }
    out
}

/// A host's IPv4 address: clients in 10.0.0.0/24 (the tests' HOME_NET), servers (100 and up)
/// in 198.51.100.0/24 (outside it).
fn addr(h: u8) -> [u8; 4] {
    if h >= 100 {
        [198, 51, 100, h]
    } else {
        [10, 0, 0, h]
    }
}

fn eth_ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, proto, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(l4);
    f
}

fn eth_ipv6(proto: u8, src: u8, dst: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd];
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    f.extend_from_slice(&[proto, 64]);
    for h in [src, dst] {
        f.extend_from_slice(&[0x20, 1, 0x0d, 0xb8]);
        f.extend_from_slice(&[0; 11]);
        f.push(h);
    }
    f.extend_from_slice(l4);
    f
}

/// `n` frames of connections between 6 clients and 3 servers (IPv4, some IPv6): each frame
/// picks a live connection (a new one now and then, from a pool of client ports), sends a
/// segment either way (SYN, SYN+ACK, then data with planted patterns), TCP mostly, UDP too.
/// A connection's frames stay on one of two queues (a hash of the tuple, both ways the same).
/// Receive times go up by 0 to 40 ms a frame, with one jump of 700 s (past the flows' idle
/// time) at the middle.
pub fn conn_traffic(seed: u64, n: usize) -> Vec<(FrameDesc, Vec<u8>)> {
    conn_traffic_planted(seed, n, &[])
}

/// [`conn_traffic`] whose data segments carry one of `plants` half the time (server ports 80,
/// 443, 53, 21, 25, 8080).
pub fn conn_traffic_planted(seed: u64, n: usize, plants: &[Vec<u8>]) -> Vec<(FrameDesc, Vec<u8>)> {
    let mut g = Rng::new(seed);
    let clients: [u8; 6] = [1, 2, 3, 4, 5, 6];
    let servers: [u8; 3] = [100, 101, 102];
    // A connection: (client, server, client port, server port, proto, v6, frames so far).
    let mut conns: Vec<(u8, u8, u16, u16, u8, bool, u32)> = Vec::new();
    let mut t = 1_700_000_000_000_000_000u64;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if conns.is_empty() || g.chance(12) {
            let c = (
                *g.pick(&clients),
                *g.pick(&servers),
                40000 + g.below(24) as u16,
                if plants.is_empty() {
                    *g.pick(&[80u16, 443, 53])
                } else {
                    *g.pick(&[80u16, 443, 53, 21, 25, 8080])
                },
                *g.pick(&[6u8, 6, 6, 17]),
                g.chance(10),
                0,
            );
            conns.push(c);
            if conns.len() > 40 {
                conns.remove(0);
            }
        }
        let at = g.below(conns.len() as u64) as usize;
        let (cl, sv, cp, sp, proto, v6, k) = conns[at];
        conns[at].6 += 1;
        let reply = k == 1 || (k > 1 && g.chance(45));
        let (sport, dport) = if reply { (sp, cp) } else { (cp, sp) };
        let mut pay = Vec::new();
        if (k >= 2 || proto == 17) && !plants.is_empty() && g.chance(50) {
            pay.extend_from_slice(&plants[g.below(plants.len() as u64) as usize]);
        } else if k >= 2 || proto == 17 {
            for _ in 0..g.below(3) {
                pay.extend((0..g.below(12)).map(|_| g.next() as u8));
                pay.extend(pattern_bytes(PATTERNS[g.below(6) as usize]));
            }
        }
        let mut l4 = Vec::new();
        l4.extend_from_slice(&sport.to_be_bytes());
        l4.extend_from_slice(&dport.to_be_bytes());
        if proto == 6 {
            let flags = match k {
                0 => 0x02,
                1 => 0x12,
                _ => 0x18,
            };
            l4.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        } else {
            l4.extend_from_slice(&((8 + pay.len()) as u16).to_be_bytes());
            l4.extend_from_slice(&[0, 0]);
        }
        l4.extend_from_slice(&pay);
        let (s, d) = if reply { (sv, cl) } else { (cl, sv) };
        let f = if v6 {
            eth_ipv6(proto, s, d, &l4)
        } else {
            eth_ipv4(proto, addr(s), addr(d), &l4)
        };
        t += g.below(40) * 1_000_000;
        if i == n / 2 {
            t += 700_000_000_000;
        }
        let queue = ((u32::from(cl) + u32::from(sv) + u32::from(cp) + u32::from(sp)) % 2) as u16;
        let d = FrameDesc {
            wire_len: f.len().max(60) as u32,
            timestamp_ns: t,
            queue,
            ..FrameDesc::default()
        };
        let mut f = f;
        if f.len() < 60 {
            f.resize(60, 0);
        }
        out.push((d, f));
    }
    out
}
