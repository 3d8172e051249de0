//! The chain the inspect stage runs on: frames through the flow table (pktwarp-flow, what the
//! `conntrack` stage does), their metadata's `ct_state` / `ct_dir` into the evaluator's frame,
//! then `flow:` and flowbits on two TCP connections. Expected outcomes from Suricata's
//! documented semantics (docs.suricata.io, "Flow Keywords": to_server is the direction from
//! the connection's opener; flowbits set on a request are seen by its flow's response only).

use pktwarp_core::meta::PacketMeta;
use pktwarp_flow::testgen::{tcp_frame, Tcp};
use pktwarp_flow::{FlowConfig, FlowTable};
use pktwarp_inspect::eval::state::{StateConfig, Stateful};
use pktwarp_inspect::eval::{decode::decode, matching, program::Program};
use pktwarp_inspect::rules::{load_str, LoadOptions};
use pktwarp_kernels::host::ffi;
use std::net::IpAddr;

fn parse(frame: &[u8]) -> PacketMeta {
    let mut m = PacketMeta::default();
    // SAFETY: the frame pointer and length describe a live slice; `m` is a PacketMeta, the
    // record pw_host_parse writes (pw_packet_meta, its layout pinned by core's tests).
    unsafe {
        ffi::pw_host_parse(
            frame.as_ptr(),
            frame.len() as u32,
            &mut m as *mut _ as *mut u8,
        )
    };
    m
}

/// A TCP segment with `payload` from `src` to `dst`.
fn seg(src: (IpAddr, u16), dst: (IpAddr, u16), flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    let t = Tcp {
        flags,
        seq,
        ack: 1,
        win: 65535,
        len: payload.len() as u16,
        wscale: None,
    };
    let mut f = tcp_frame(None, src, dst, t);
    if !payload.is_empty() {
        let at = f.len() - payload.len();
        f[at..].copy_from_slice(payload);
    }
    f
}

const RULES: &str = r#"
alert tcp any any -> any any (msg:"request"; flow:to_server,established; content:"GET /secret"; flowbits:set,asked; flowbits:noalert; sid:1;)
alert tcp any any -> any any (msg:"answer to a request"; flow:to_client,established; content:"secret-data"; flowbits:isset,asked; sid:2;)
alert tcp any any -> any any (msg:"wrong way"; flow:to_server; content:"secret-data"; sid:3;)
alert tcp any any -> any any (msg:"opening"; flow:not_established,to_server; flags:S; sid:4;)
alert tcp any any -> any any (msg:"answers"; flow:to_client; flags:SA; threshold:type limit, track by_dst, count 1, seconds 60; sid:5;)
"#;

#[test]
fn flow_direction_state_and_flowbits_through_the_flow_table() {
    let opts = LoadOptions {
        flow_table: true,
        ..LoadOptions::default()
    };
    let rep = load_str(RULES, "chain.rules", &opts).unwrap();
    assert_eq!(rep.loaded.len(), 5, "{rep}");
    let mut p = Program::new();
    for l in &rep.loaded {
        p.add(&l.rule).unwrap();
    }
    let rules: Vec<_> = rep.loaded.iter().map(|l| &l.rule).collect();
    let mut state = Stateful::new(&rules, StateConfig::default());
    let mut table = FlowTable::from_config(&FlowConfig {
        entries: 64,
        strict: false,
        hash_seed: 1,
        timeouts: Default::default(),
    })
    .unwrap();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let srv = (ip("192.0.2.1"), 80);
    let (c1, c2) = ((ip("10.0.0.1"), 40000), (ip("10.0.0.2"), 40001));
    let req = b"GET /secret HTTP/1.1\r\nHost: x\r\n\r\n";
    let resp = b"HTTP/1.1 200 OK\r\n\r\nsecret-data";
    // (frame, sids expected to fire)
    let frames: Vec<(Vec<u8>, Vec<u32>)> = vec![
        (seg(c1, srv, 0x02, 100, b""), vec![4]),
        (seg(srv, c1, 0x12, 500, b""), vec![5]),
        (seg(c1, srv, 0x10, 101, b""), vec![]),
        (seg(c1, srv, 0x18, 101, req), vec![]),
        (seg(srv, c1, 0x18, 501, resp), vec![2]),
        // A second client: its answer has no request on its flow; limit 1 by_dst lets its
        // SYN+ACK (another destination) fire once too.
        (seg(c2, srv, 0x02, 7, b""), vec![4]),
        (seg(srv, c2, 0x12, 9, b""), vec![5]),
        (seg(c2, srv, 0x10, 8, b""), vec![]),
        (seg(srv, c2, 0x18, 10, resp), vec![]),
        // The first client's flow again: its bit is still set.
        (seg(srv, c1, 0x18, 600, resp), vec![2]),
    ];
    for (i, (bytes, want)) in frames.iter().enumerate() {
        let mut meta = parse(bytes);
        table
            .apply(&meta, bytes, (i as u64 + 1) * 1_000_000)
            .store(&mut meta);
        let mut f = decode(bytes).unwrap();
        f.ct_state = meta.ct_state;
        f.ct_dir = meta.ct_dir;
        let hits = matching(&p, &f);
        let fired: Vec<u32> = state
            .apply(&f, (i as u64 + 1) * 1_000_000, &hits)
            .into_iter()
            .map(|r| p.rules[r].sid)
            .collect();
        assert_eq!(
            &fired, want,
            "frame {i}: ct {} dir {}",
            meta.ct_state, meta.ct_dir
        );
    }
    assert_eq!(state.flows(), 1);
}
