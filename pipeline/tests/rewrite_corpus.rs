//! The rewrite operations over real captures (tcpdump's Ethernet test captures, listed by
//! `../shared/data/pcaps/INDEX.tsv`) and generated frames:
//! - `l2fwd: { mac: swap }` exchanges the two MACs and changes nothing else, frame by frame;
//! - after `ttl`, `dscp`, `vlan` push and `route` (and l2fwd), tshark with checksum validation
//!   on finds every IPv4 / TCP / UDP checksum valid in every rewritten frame whose checksums
//!   were valid on the way in (captures taken with checksum offload carry wrong ones, which an
//!   incremental update rightly keeps wrong), and every generated frame valid.

use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use flow_rules::route::RouteFile;
use pipeline::internal::port::gen::{build_frame, FrameSpec};
use pipeline::internal::port::pcap::{CaptureWriter, WriteFormat};
use pipeline::internal::rewrite::{
    Dscp, DscpConfig, L2fwd, Outcome, RewriteOp, Route, Ttl, Vlan, VlanConfig,
};
use pipeline::internal::stage::parse::parse_frame;
use pipeline::verdict::Verdict;

/// Every frame of every Ethernet capture in INDEX.tsv (files the reader refuses part-way keep
/// the frames read before the error: several are cut on purpose); None without the corpus
/// outside CI (`require_corpus`).
fn corpus() -> Option<Vec<Vec<u8>>> {
    let frames = pipeline::internal::testdata::corpus_ethernet_frames()?;
    assert!(frames.len() > 5000, "only {} corpus frames", frames.len());
    Some(frames)
}

#[test]
fn l2fwd_swap_changes_the_two_macs_and_nothing_else() {
    let op = L2fwd::swap();
    let (mut swapped, mut short) = (0, 0);
    let Some(corpus) = corpus() else { return };
    for orig in corpus {
        let mut f = orig.clone();
        let mut m = parse_frame(&f);
        let out = op.apply(&mut f, &mut m, &Verdict::PASS);
        assert_eq!(f.len(), orig.len());
        if orig.len() < 14 {
            assert_eq!((out, &f), (Outcome::Skipped, &orig));
            short += 1;
            continue;
        }
        assert_eq!(out, Outcome::Done);
        assert_eq!(f[..6], orig[6..12]);
        assert_eq!(f[6..12], orig[..6]);
        assert_eq!(f[12..], orig[12..]);
        swapped += 1;
    }
    assert!(swapped > 5000, "{swapped} swapped, {short} short");
}

/// Per frame, per protocol (ip, tcp, udp): the checksum statuses tshark reports (0 bad, 1 good,
/// 2 unverified; one per occurrence: tunnels have two).
fn tshark_status(pcap: &Path) -> Vec<[Vec<u8>; 3]> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "ip.checksum.status",
            "-e",
            "tcp.checksum.status",
            "-e",
            "udp.checksum.status",
            "-E",
            "separator=/t",
        ])
        .output()
        .expect("tshark (installed by scripts/install-deps.sh)");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            let col = |i: usize| -> Vec<u8> {
                c.get(i)
                    .map(|s| s.split(',').filter_map(|v| v.trim().parse().ok()).collect())
                    .unwrap_or_default()
            };
            [col(1), col(2), col(3)]
        })
        .collect()
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut w = CaptureWriter::create(path, WriteFormat::Pcap, 262_144).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(f, f.len() as u32, i as u64 * 1000).unwrap();
    }
    w.flush().unwrap();
}

/// Generated TCP / UDP / ICMP frames over IPv4 and IPv6, some tagged.
fn generated() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for i in 0..600u32 {
        let (s, d): (IpAddr, IpAddr) = if i % 3 == 0 {
            (
                format!("2001:db8::{:x}", i + 1).parse().unwrap(),
                format!("2001:db8:1::{:x}", i * 7 + 3).parse().unwrap(),
            )
        } else {
            (
                format!("10.{}.{}.1", i % 200, i % 7).parse().unwrap(),
                format!("192.168.{}.{}", i % 250, i % 251).parse().unwrap(),
            )
        };
        let mut spec = FrameSpec::tcp(s, d, 1000 + i as u16, 80, 64 + (i % 1400) as u16);
        spec.proto = [6u8, 17, 1][(i % 3) as usize];
        spec.vlan = (i % 5 == 0).then_some(100 + i as u16 % 4000);
        spec.ip_id = i as u16;
        v.push(build_frame(&spec));
    }
    v
}

/// ttl, dscp 46, vlan push, route (a default route per family), l2fwd swap; `None` when a
/// stage drops the frame (TTL 0 / 1).
fn rewrite(ops: &[RewriteOp], orig: &[u8]) -> Option<Vec<u8>> {
    let mut f = orig.to_vec();
    let mut m = parse_frame(&f);
    for op in ops {
        if let Outcome::Drop(_) = op.apply(&mut f, &mut m, &Verdict::PASS) {
            return None;
        }
    }
    Some(f)
}

#[test]
fn tshark_finds_every_checksum_valid_after_rewrites() {
    let routes = "routes:
  - { prefix: 0.0.0.0/0, via: '02:00:00:00:00:fe', port: out }
  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:0a', port: out }
  - { prefix: '::/0', via: '02:00:00:00:00:fd', port: out }
";
    let table = RouteFile::parse(routes, "test.routes.yaml")
        .unwrap()
        .build()
        .unwrap();
    let ops = [
        RewriteOp::Ttl(Ttl),
        RewriteOp::Dscp(Dscp::new(&DscpConfig { set: 46 }).unwrap()),
        RewriteOp::Vlan(
            Vlan::new(
                &serde_saphyr::from_str::<VlanConfig>("{ push: { vid: 42, pcp: 5 } }").unwrap(),
            )
            .unwrap(),
        ),
        RewriteOp::Route(Route::new(Arc::new(table))),
        RewriteOp::L2fwd(L2fwd::swap()),
    ];
    let dir = std::env::temp_dir().join(format!("pw-rewrite-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // Without the corpus (outside CI) the generated frames alone are checked.
    let corpus = corpus();
    let have_corpus = corpus.is_some();
    let corpus = corpus.unwrap_or_default();
    let gen = generated();
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    let mut is_gen = Vec::new();
    for (g, f) in corpus
        .iter()
        .map(|f| (false, f))
        .chain(gen.iter().map(|f| (true, f)))
    {
        if let Some(out) = rewrite(&ops, f) {
            inputs.push(f.clone());
            outputs.push(out);
            is_gen.push(g);
        }
    }
    write_pcap(&dir.join("in.pcap"), &inputs);
    write_pcap(&dir.join("out.pcap"), &outputs);
    let before = tshark_status(&dir.join("in.pcap"));
    let after = tshark_status(&dir.join("out.pcap"));
    assert_eq!((before.len(), after.len()), (inputs.len(), outputs.len()));

    let mut checked = [0usize; 3];
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        let all_good_before = b.iter().flatten().all(|s| *s != 0);
        if is_gen[i] {
            assert!(
                all_good_before,
                "generated frame {i} has a bad checksum before rewriting: {b:?}"
            );
        }
        if !all_good_before {
            continue;
        }
        for p in 0..3 {
            assert!(
                a[p].iter().all(|s| *s != 0),
                "frame {i} (pcap frame {}): {} checksum bad after the rewrites (before {:?}, after {:?})",
                i + 1,
                ["ip", "tcp", "udp"][p],
                b,
                a
            );
            // The same checksums are verified before and after (the rewrites add no header tshark
            // would not check the same way).
            assert_eq!(a[p].len(), b[p].len(), "frame {i}: {p}");
            checked[p] += a[p].iter().filter(|s| **s == 1).count();
        }
    }
    // Enough checksums were verified to mean something: the corpus's thousands, or the
    // generated frames' own (400 IPv4 headers, 200 TCP over IPv6, 200 UDP over IPv4).
    let least = if have_corpus {
        [3000, 500, 500]
    } else {
        [399, 199, 199]
    };
    assert!(
        (0..3).all(|p| checked[p] > least[p]),
        "{checked:?}, wanted more than {least:?}"
    );
    eprintln!(
        "{} frames rewritten ({} generated); good checksums verified after: ip {}, tcp {}, udp {}",
        outputs.len(),
        is_gen.iter().filter(|g| **g).count(),
        checked[0],
        checked[1],
        checked[2]
    );
    std::fs::remove_dir_all(&dir).ok();
}
