//! The RSS key a port programs (RSS and rte_flow RSS actions) against the software steering's:
//! equal per config, and symmetric when the pipeline keeps per-flow state.

use super::*;

/// The key programmed into the NIC is the one the software RSS hashes with, for a
/// pipeline with and without per-flow state (the daemon sets `symmetric_rss` from the
/// config as it opens the port).
#[test]
fn nic_key_is_the_software_rss_key() {
    assert_eq!(STANDARD_RSS_KEY, crate::rss::RSS_KEY_MS);
    let stage = |s: &str| {
        let yaml = format!(
            "ports: [{{name: wire, gen: {{count: 10}}}}]\npipeline: [parse, {s}, count]\n{}",
            if s.contains("flow_stats") {
                "ipfix: {collector: \"127.0.0.1:4739\"}\n"
            } else {
                ""
            }
        );
        crate::config::parse_str(&yaml, std::path::Path::new("t.yaml"))
            .unwrap_or_else(|e| panic!("{s}: {e}"))
    };
    let rate = |key: &str| {
        format!("{{rate_limit: {{entries: 64, rules: [{{name: r, key: {key}, rate_pps: 10}}]}}}}")
    };
    for (s, symmetric) in [
        ("{conntrack: {entries: 1024}}".to_string(), true),
        ("{flow_stats: {entries: 1024}}".to_string(), true),
        (rate("flow"), true),
        (rate("src"), false),
        ("ttl".to_string(), false),
    ] {
        let cfg = stage(&s);
        assert_eq!(cfg.symmetric_rss(), symmetric, "{s}");
        let mut opts = super::super::DpdkPortOptions::vdev(&[], "net_null0");
        opts.symmetric_rss = cfg.symmetric_rss();
        let steering = cfg.build_steering().expect("steering");
        assert_eq!(opts.rss_key(), steering.rss_key(), "{s}");
    }
}

/// Many flows (TCP / UDP over IPv4 and IPv6): under the key a port of a stateful pipeline
/// programs, at the device's key size (40 as mlx5, 52 as i40e / ice), both directions of
/// each flow hash alike, so they reach one RX queue; under the standard key they do not.
#[test]
fn both_directions_of_a_flow_reach_one_queue_under_the_installed_key() {
    use crate::rss::{toeplitz_reference, Reta};
    use std::net::{Ipv4Addr, Ipv6Addr};
    let reta = Reta::new(8).expect("reta");
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // (forward input, reverse input) as the NIC hashes them: src, dst, sport, dport.
    let mut flows = Vec::new();
    for i in 0..2000 {
        let (r, ports) = (next(), next());
        let (sp, dp) = ((ports >> 16) as u16, ports as u16);
        let (a, b) = if i % 2 == 0 {
            let (a, b) = (Ipv4Addr::from(r as u32), Ipv4Addr::from((r >> 32) as u32));
            (a.octets().to_vec(), b.octets().to_vec())
        } else {
            let b = (u128::from(r) << 64) | u128::from(next());
            (
                Ipv6Addr::from(u128::from(next()) << 32).octets().to_vec(),
                Ipv6Addr::from(b).octets().to_vec(),
            )
        };
        let input = |x: &[u8], y: &[u8], p: u16, q: u16| {
            let mut v = [x, y].concat();
            v.extend_from_slice(&p.to_be_bytes());
            v.extend_from_slice(&q.to_be_bytes());
            v
        };
        flows.push((input(&a, &b, sp, dp), input(&b, &a, dp, sp)));
    }
    let mut opts = super::super::DpdkPortOptions::vdev(&[], "net_null0");
    for size in [40, 52] {
        opts.symmetric_rss = true;
        let key = super::super::open::device_rss_key(opts.rss_key(), size).expect("key");
        assert_eq!(key.len(), size);
        for (fwd, rev) in &flows {
            let (h, g) = (toeplitz_reference(&key, fwd), toeplitz_reference(&key, rev));
            assert_eq!(reta.queue(h), reta.queue(g), "size {size}: {fwd:?}");
            // The padded key hashes as the 40-byte key the software uses.
            assert_eq!(h, RSS_SYMMETRIC.hash(fwd));
        }
        opts.symmetric_rss = false;
        let key = super::super::open::device_rss_key(opts.rss_key(), size).expect("key");
        let split = flows
            .iter()
            .filter(|(f, r)| {
                reta.queue(toeplitz_reference(&key, f)) != reta.queue(toeplitz_reference(&key, r))
            })
            .count();
        assert!(split > flows.len() / 2, "standard key: {split} flows split");
    }
    assert!(super::super::open::device_rss_key(&STANDARD_RSS_KEY, 16).is_none());
    assert!(super::super::open::device_rss_key(&STANDARD_RSS_KEY, 0).is_none());
}

/// A port with the symmetric key puts it in its rte_flow RSS actions, and a rule's `rss:`
/// fate steered in software hashes with it: both directions of a flow take one queue.
#[test]
fn rss_actions_and_software_rss_fate_use_the_port_key() {
    let yaml = "rules:\n  - name: spread\n    match: {tcp: {}}\n    actions: [{rss: {queues: [0, 1, 2, 3]}}]\n";
    let set = flow_rules::steering::SteerRuleSet::parse(yaml, "r.yaml").expect("rules");
    for symmetric in [false, true] {
        let default = DefaultRss {
            queues: 4,
            types: 0,
            symmetric,
        };
        let a = rule_actions(&set.rules[0], default);
        let want = if symmetric {
            &crate::rss::RSS_KEY_SYMMETRIC
        } else {
            &STANDARD_RSS_KEY
        };
        // SAFETY: the action points at a static 40-byte key.
        let key = unsafe { std::slice::from_raw_parts(a.rss_conf.key, 40) };
        assert_eq!((key, a.rss_conf.key_len), (&want[..], 40));
        let sw = SoftwareSteering {
            rules: set.rules.clone(),
            in_hw: vec![false],
            matcher: Some(SteerMatcher::new(&set.rules)),
            symmetric,
        };
        let mut split = 0;
        for i in 0..256u32 {
            let mut k = SteerKey {
                ether_type: 0x0800,
                ip_version: 4,
                ip_proto: 6,
                l4: true,
                ..SteerKey::default()
            };
            (k.src_ip[0], k.dst_ip[0]) = (0x0a00_0000 | i, 0xc0a8_0000 | (i * 7));
            (k.src_port, k.dst_port) = (1024 + i as u16 * 3, 80);
            let fwd = sw.steer_key(&k);
            std::mem::swap(&mut k.src_ip, &mut k.dst_ip);
            std::mem::swap(&mut k.src_port, &mut k.dst_port);
            let rev = sw.steer_key(&k);
            assert!(matches!(fwd, Some(SwFate::Queue(_))));
            if symmetric {
                assert_eq!(fwd, rev, "flow {i}");
            } else if fwd != rev {
                split += 1;
            }
        }
        assert!(symmetric || split > 0, "the standard key splits some flows");
    }
}
