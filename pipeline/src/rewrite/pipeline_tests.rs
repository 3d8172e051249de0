//! The rewrite stages inside a pipeline: `run_burst_mut` rewrites a burst in place (lengths
//! included) exactly as the ops applied one by one to a copy, and the read-only paths give the
//! same verdicts, metadata and counters.

use std::net::IpAddr;

use crate::burst::{Burst, FrameDesc};
use crate::counters::QueueCounters;
use crate::port::gen::{build_frame, FrameSpec};
use crate::rewrite::config::{DscpConfig, L2fwdConfig, MacMode, RouteConfig, VlanConfig, VlanPush};
use crate::rewrite::{Dscp, L2fwd, Outcome, RewriteOp, Route, Ttl, Vlan};
use crate::stage::config::StageConfig;
use crate::stage::parse::parse_frame;
use crate::stage::{build, Pipeline};
use crate::verdict::{Action, DropReason, Verdict};
use crate::wire::ipv4;

const ROUTES: &str = "routes:
  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:0a', port: a }
  - { prefix: 10.1.0.0/16, via: '02:00:00:00:00:0b', port: b }
  - { prefix: '2001:db8::/32', via: '02:00:00:00:00:0c', port: b }
";

fn frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let dsts = [
        "10.9.9.9",
        "10.1.2.3",
        "11.0.0.1",
        "2001:db8::5",
        "2001:db9::1",
    ];
    for (i, d) in dsts.iter().cycle().take(40).enumerate() {
        let dst: IpAddr = d.parse().unwrap();
        let src: IpAddr = if dst.is_ipv4() {
            "192.0.2.1".parse().unwrap()
        } else {
            "2001:db8:ffff::1".parse().unwrap()
        };
        let mut s = FrameSpec::tcp(src, dst, 1000 + i as u16, 80, 64 + (i as u16 * 7) % 200);
        if i % 3 == 0 {
            s.vlan = Some(100 + i as u16);
        }
        let mut f = build_frame(&s);
        // TTL 0, 1, 2 and 64 in turn (IPv4 with its checksum; IPv6 hop limit).
        let ttl = [64u8, 1, 2, 0][i % 4];
        let l3 = usize::from(parse_frame(&f).l3_offset);
        if dst.is_ipv4() {
            let mut p = ipv4::Packet::new_checked(&mut f[l3..]).unwrap();
            p.set_ttl(ttl);
            p.fill_checksum();
        } else {
            f[l3 + 7] = ttl;
        }
        out.push(f);
    }
    // Not IP, and cut short (parse errors).
    let mut arp = vec![0u8; 42];
    arp[12] = 8;
    arp[13] = 6;
    out.push(arp);
    out.push(out[0][..20].to_vec());
    out
}

fn route_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pw-rw-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("routes.yaml"), ROUTES).unwrap();
    d
}

fn stages() -> Vec<StageConfig> {
    vec![
        StageConfig::Parse,
        StageConfig::Vlan(VlanConfig::Push(VlanPush {
            vid: 7,
            pcp: 5,
            tpid: None,
        })),
        StageConfig::Route(RouteConfig {
            routes: "routes.yaml".into(),
        }),
        StageConfig::Ttl,
        StageConfig::Dscp(DscpConfig { set: 46 }),
        StageConfig::L2fwd(L2fwdConfig {
            mac: Some(MacMode::Swap),
            src: None,
            dst: None,
        }),
        StageConfig::Count,
    ]
}

/// The ops one by one on a `Vec` copy: the reference for the in-place pipeline.
fn reference(p: &Pipeline, f: &[u8], ports: &[u16]) -> (Vec<u8>, Verdict) {
    let dir = route_dir();
    let route = Route::load(
        &RouteConfig {
            routes: "routes.yaml".into(),
        },
        &dir,
    )
    .unwrap();
    let ops = [
        RewriteOp::Vlan(Vlan::Push {
            tpid: 0x8100,
            tci: (5 << 13) | 7,
        }),
        RewriteOp::Route(route),
        RewriteOp::Ttl(Ttl),
        RewriteOp::Dscp(Dscp::new(&DscpConfig { set: 46 }).unwrap()),
        RewriteOp::L2fwd(L2fwd::swap()),
    ];
    assert_eq!(p.stages.len(), ops.len() + 2);
    let mut f = f.to_vec();
    let mut m = parse_frame(&f);
    if m.status != 0 {
        return (f, Verdict::drop(DropReason::ParseError));
    }
    let mut v = Verdict::PASS;
    for op in &ops {
        match op.apply(&mut f, &mut m, &v) {
            Outcome::Drop(why) => {
                // The port an earlier route chose stays (a dropped frame goes nowhere).
                v.action = Action::Drop;
                v.reason = Some(why.reason());
                break;
            }
            Outcome::Forward { port } => v.out_port = ports[usize::from(port)],
            _ => {}
        }
    }
    (f, v)
}

#[test]
fn in_place_equals_the_ops_one_by_one() {
    let dir = route_dir();
    let p = build(&stages(), |r| dir.join(r)).unwrap();
    assert_eq!(p.frame_room(), 4);
    assert!(p.rewrites());
    let input = frames();
    let mut burst = Burst::default();
    for (i, f) in input.iter().enumerate() {
        let d = FrameDesc {
            port: (i % 2) as u16,
            ..FrameDesc::default()
        };
        burst.push_with_room(f, d, p.frame_room());
    }
    let c = QueueCounters::new(p.stages.len(), 0);
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    p.run_burst_mut(&mut burst, &mut metas, &mut verdicts, &c);
    let mut drops = [0u64; DropReason::COUNT];
    let mut counted_bytes = 0u64;
    for (i, f) in input.iter().enumerate() {
        // Built without the config's ports: the table's own order (a, b).
        let (want, wv) = reference(&p, f, &[0, 1]);
        assert_eq!(verdicts[i], wv, "frame {i}");
        if wv.action == Action::Drop {
            drops[wv.reason.unwrap() as usize] += 1;
            continue;
        }
        assert_eq!(burst.frame(i), &want[..], "frame {i}");
        assert_eq!(burst.descs[i].len as usize, f.len() + 4);
        assert_eq!(
            metas[i],
            parse_frame(&want),
            "frame {i}: meta of the rewritten frame"
        );
        counted_bytes += want.len() as u64;
        // Every rewritten IPv4 header checksum holds.
        let m = parse_frame(&want);
        if m.ip_version == 4 {
            let l3 = usize::from(m.l3_offset);
            assert!(ipv4::Packet::new_checked(&want[l3..])
                .unwrap()
                .verify_checksum());
            assert_eq!(m.ip_ttl, parse_frame(f).ip_ttl - 1, "frame {i}");
        }
    }
    assert!(drops[DropReason::TtlExpired as usize] > 0);
    assert!(drops[DropReason::NoRoute as usize] > 0);
    assert!(drops[DropReason::ParseError as usize] > 0);
    for r in DropReason::ALL {
        assert_eq!(c.drop_count(r), drops[r as usize], "{}", r.name());
    }
    assert_eq!(
        c.stage_bytes[6].get(),
        counted_bytes,
        "count sees the grown frames"
    );
    assert!(c.passed.get() > 0);
    // The read-only path: same verdicts, metadata and counters, frames untouched.
    let mut ro = Burst::default();
    for f in &input {
        ro.push(f, FrameDesc::default());
    }
    let c2 = QueueCounters::new(p.stages.len(), 0);
    let (mut m2, mut v2) = (Vec::new(), Vec::new());
    p.run_burst(&ro, &mut m2, &mut v2, &c2);
    assert_eq!(v2, verdicts);
    assert_eq!(m2, metas);
    assert_eq!(c2.passed.get(), c.passed.get());
    assert_eq!(c2.stage_bytes[6].get(), counted_bytes);
    for (i, f) in input.iter().enumerate() {
        assert_eq!(ro.frame(i), &f[..]);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn vlan_pop_shrinks_and_no_room_is_a_counted_drop() {
    let p = build(
        &[StageConfig::Parse, StageConfig::Vlan(VlanConfig::Pop(true))],
        |r| r.to_path_buf(),
    )
    .unwrap();
    assert_eq!(p.frame_room(), 0);
    let input = frames();
    let mut burst = Burst::default();
    for f in &input {
        burst.push(f, FrameDesc::default());
    }
    let c = QueueCounters::new(p.stages.len(), 0);
    let (mut m, mut v) = (Vec::new(), Vec::new());
    p.run_burst_mut(&mut burst, &mut m, &mut v, &c);
    for (i, f) in input.iter().enumerate() {
        if v[i].action == Action::Drop {
            continue;
        }
        let tagged = f[12] == 0x81;
        assert_eq!(burst.frame(i).len(), f.len() - if tagged { 4 } else { 0 });
        assert_eq!(&burst.frame(i)[12..], &f[12 + if tagged { 4 } else { 0 }..]);
    }
    // A push over frames given no room (a hand-made burst) drops them as too_long, unchanged.
    let push = build(
        &[StageConfig::Vlan(VlanConfig::Push(VlanPush {
            vid: 1,
            pcp: 0,
            tpid: None,
        }))],
        |r| r.to_path_buf(),
    )
    .unwrap();
    let mut b = Burst::default();
    b.push(&input[1], FrameDesc::default());
    b.push(&input[2], FrameDesc::default());
    let c = QueueCounters::new(1, 0);
    push.run_burst_mut(&mut b, &mut m, &mut v, &c);
    assert_eq!(v[0], Verdict::drop(DropReason::TooLong));
    assert_eq!(b.frame(0), &input[1][..]);
    assert_eq!(c.drop_count(DropReason::TooLong), 2);
}

#[test]
fn config_keys_and_bad_values() {
    let parse = |pipeline: &str| {
        let text = format!("ports:\n  - name: g\n    gen: {{ count: 1 }}\npipeline:\n{pipeline}");
        crate::config::parse_str(&text, std::path::Path::new("/tmp/c.yaml"))
    };
    let c = parse(
        "  - parse\n  - l2fwd: { mac: swap }\n  - vlan: { push: { vid: 3 } }\n  - ttl\n  - dscp: { set: 10 }\n",
    )
    .unwrap();
    let names: Vec<&str> = c.pipeline.iter().map(|s| s.value.name()).collect();
    assert_eq!(names, ["parse", "l2fwd", "vlan", "ttl", "dscp"]);
    for (text, key, line) in [
        (
            "  - parse\n  - vlan: { push: { vid: 5000 } }\n",
            "pipeline[1].vlan.vid",
            6,
        ),
        (
            "  - parse\n  - dscp: { set: 64 }\n",
            "pipeline[1].dscp.set",
            6,
        ),
        ("  - l2fwd: {}\n", "pipeline[0].l2fwd.mac", 5),
        ("  - ttl\n", "pipeline[0]", 5),
        ("  - route: { routes: r.yaml }\n", "pipeline[0]", 5),
    ] {
        let e = parse(text).unwrap_err();
        assert_eq!((e.key.as_str(), e.line), (key, line), "{e}");
        assert!(e.to_string().contains("c.yaml"), "{e}");
    }
    assert!(parse("  - ttl: { min: 2 }\n").is_err());
    assert!(parse("  - l2fwd: { mac: flip }\n").is_err());
}

#[test]
fn reload_routes_swaps_tables_between_bursts_and_refuses_bad_files() {
    let dir = std::env::temp_dir().join(format!("pw-rw-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("routes.yaml");
    std::fs::write(&file, ROUTES).unwrap();
    let p = build(
        &[
            StageConfig::Parse,
            StageConfig::Route(RouteConfig {
                routes: "routes.yaml".into(),
            }),
        ],
        |r| dir.join(r),
    )
    .unwrap();
    let f = build_frame(&FrameSpec::tcp(
        "192.0.2.1".parse().unwrap(),
        "10.1.2.3".parse().unwrap(),
        1,
        2,
        64,
    ));
    let run = || {
        let mut b = Burst::default();
        b.push(&f, FrameDesc::default());
        let c = QueueCounters::new(2, 0);
        let (mut m, mut v) = (Vec::new(), Vec::new());
        p.run_burst_mut(&mut b, &mut m, &mut v, &c);
        (b.frame(0)[..6].to_vec(), v[0])
    };
    assert_eq!(run().0, [2, 0, 0, 0, 0, 0x0b]);
    // The /16 now goes elsewhere; the next burst sees it.
    std::fs::write(
        &file,
        ROUTES.replace(
            "10.1.0.0/16, via: '02:00:00:00:00:0b'",
            "10.1.0.0/16, via: '02:00:00:00:00:0e'",
        ),
    )
    .unwrap();
    assert_eq!(p.reload_routes().unwrap(), vec![(2, 1, 1)]);
    assert_eq!(run().0, [2, 0, 0, 0, 0, 0x0e]);
    // A bad file: refused with its name and line, the running table stays.
    std::fs::write(
        &file,
        "routes:\n  - { prefix: 10.1.0.0/99, via: '02:00:00:00:00:0f', port: a }\n",
    )
    .unwrap();
    let e = p.reload_routes().unwrap_err().to_string();
    assert!(e.contains("routes.yaml:2"), "{e}");
    assert_eq!(run().0, [2, 0, 0, 0, 0, 0x0e]);
    // Removing the route: no_route from the next burst on.
    std::fs::write(
        &file,
        "routes:\n  - { prefix: 11.0.0.0/8, via: '02:00:00:00:00:0f', port: a }\n",
    )
    .unwrap();
    p.reload_routes().unwrap();
    assert_eq!(run().1, Verdict::drop(DropReason::NoRoute));
    std::fs::remove_dir_all(&dir).ok();
}

/// The next hops' MACs of a route stage's GPU block (`pw_route_params.hops`, `n_hops`).
fn gpu_next_hop_macs(p: &Pipeline, k: usize) -> Vec<[u8; 6]> {
    let set = crate::executor::gpu::compose::stage_set(p).expect("a GPU stage set");
    let b = &set.params[k];
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
    let (hops, n) = (word(48), word(56));
    (0..n)
        .map(|i| b[hops + 8 * i..hops + 8 * i + 6].try_into().unwrap())
        .collect()
}

#[test]
fn a_route_reload_moves_the_params_generation_and_the_gpu_block_follows() {
    let dir = std::env::temp_dir().join(format!("pw-rw-gpugen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("routes.yaml");
    std::fs::write(&file, ROUTES).unwrap();
    let p = build(
        &[
            StageConfig::Parse,
            StageConfig::Route(RouteConfig {
                routes: "routes.yaml".into(),
            }),
            StageConfig::Ttl,
        ],
        |r| dir.join(r),
    )
    .unwrap();
    assert_eq!(p.gpu_refusal(), None);
    assert_eq!(p.params_generation(), 0);
    let macs = gpu_next_hop_macs(&p, 1);
    assert!(macs.contains(&[2, 0, 0, 0, 0, 0x0b]), "{macs:?}");
    std::fs::write(
        &file,
        ROUTES.replace("'02:00:00:00:00:0b'", "'02:00:00:00:00:0e'"),
    )
    .unwrap();
    p.reload_routes().unwrap();
    assert_eq!(p.params_generation(), 1, "a new route table is a new set");
    let macs = gpu_next_hop_macs(&p, 1);
    assert!(macs.contains(&[2, 0, 0, 0, 0, 0x0e]), "{macs:?}");
    assert!(!macs.contains(&[2, 0, 0, 0, 0, 0x0b]), "{macs:?}");
    // A refused file publishes nothing: same generation, same block.
    std::fs::write(&file, "routes: [ { prefix: 10.0.0.0/40 } ]\n").unwrap();
    assert!(p.reload_routes().is_err());
    assert_eq!(p.params_generation(), 1);
    assert_eq!(gpu_next_hop_macs(&p, 1), macs);
    std::fs::write(&file, ROUTES).unwrap();
    p.reload_routes().unwrap();
    assert_eq!(p.params_generation(), 2);
    std::fs::remove_dir_all(&dir).ok();
}
