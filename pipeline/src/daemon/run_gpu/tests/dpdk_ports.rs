//! Several DPDK ports on the GPU host side's mbuf path (cargo feature `dpdk`, real net_pcap
//! devices, the stand-in device), DPDK l3fwd style: every port receives (one receive thread
//! per port and RX queue), each forwarded frame leaves as the mbuf it arrived in on the port
//! its verdict's `out_port` names (an ACL `set: { port }`), a frame routed to a port with no
//! transmit side is a `tx_error` drop, and a mirror port that also receives takes its copies
//! by reference. Counts, frames and tallies are the CPU executor's zero-copy path's on the same
//! config; the plan is the daemon's (`mbuf_plan`).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::dpdk_mbufs::{eal, frames, hook, seen};
use super::*;
use crate::port::dpdk::DpdkPort;

/// The capture RX queue `q` of port `name` reads.
fn input(dir: &Path, name: &str, q: usize) -> std::path::PathBuf {
    dir.join(format!("in_{name}_{q}.pcap"))
}

/// The capture TX queue `q` of port `name` writes.
fn output(dir: &Path, name: &str, q: usize) -> std::path::PathBuf {
    dir.join(format!("out_{name}_{q}.pcap"))
}

/// A `ports:` entry: the DPDK port `name` on net_pcap device `vdev` with `rxq` RX queues
/// (queue q reading [`input`] q) and `txq` TX queues (queue q writing [`output`] q), ending
/// 300 ms after its last frame.
fn port_yaml(name: &str, vdev: &str, dir: &Path, (rxq, txq): (usize, usize)) -> String {
    let rx: String = (0..rxq)
        .map(|q| format!(",rx_pcap={}", input(dir, name, q).display()))
        .collect();
    let tx: String = (0..txq)
        .map(|q| format!(",tx_pcap={}", output(dir, name, q).display()))
        .collect();
    format!(
        "  - name: {name}\n    dpdk:\n      eal_args: {eal}\n      \
         vdev: \"{vdev}{rx}{tx}\"\n      mempool_size: 1023\n      \
         rx_queues: {rxq}\n      tx_queues: {txq}\n      idle_end_ms: 300\n",
        eal = eal()
    )
}

/// The second port's name and RX queues, and the queues (`queues.count`: `a`'s RX queues and
/// each port's TX queues).
type Shape<'a> = (&'a str, usize, usize);

/// Ports `a` and `second` (each with its own captures in: `a` the first half of [`frames`],
/// `second` the rest, spread over its RX queues), `output`, and an ACL of `rules` (default
/// pass) then the stages `more`.
fn yaml(tag: &str, dir: &Path, (second, rxq, nq): Shape, case: Case) -> String {
    let (output, rules, more) = case;
    let all = frames();
    let (a, b) = all.split_at(all.len() / 2);
    for (name, part, n) in [("a", a, nq), (second, b, rxq)] {
        for q in 0..n {
            let mine: Vec<Vec<u8>> = part.iter().skip(q).step_by(n).cloned().collect();
            crate::testdata::write_pcap(&input(dir, name, q), 1, &mine).expect("input");
        }
    }
    let rules_path = dir.join("rules.yaml");
    std::fs::write(&rules_path, format!("rules:\n{rules}")).expect("rules");
    format!(
        "ports:\n{}{}output: {output}\nqueues: {{ count: {nq}, burst: 32, ring_slots: 4 }}\n\
         pipeline:\n  - parse\n  - acl: {{ rules: {}, default: pass }}\n{more}  - count\n\
         executor: {{ kind: cpu }}\n",
        port_yaml("a", &format!("net_pcap_gp{tag}a"), dir, (nq, nq)),
        port_yaml(second, &format!("net_pcap_gp{tag}b"), dir, (rxq, nq)),
        rules_path.display()
    )
}

/// A config's `output:`, its ACL rules and the stages after the ACL.
type Case<'a> = (&'a str, &'a str, &'a str);

/// What one run did: its summary, each port's output capture (by config name), the mbufs the
/// ports received and sent (all ports), and each port's mbufs in use before and after.
struct Ran {
    s: Summary,
    out: HashMap<String, Vec<Vec<u8>>>,
    received: HashSet<usize>,
    sent: Vec<usize>,
    in_use: Vec<(u64, u64)>,
}

/// Runs `yaml` (in `dir`) on the CPU executor (`run_cpu`, zero-copy where it can) or, `gpu`,
/// the GPU host side over the stand-in with the daemon's mbuf plan.
fn run(dir: &Path, yaml: &str, gpu: bool) -> Ran {
    let p = prepared(yaml);
    let mut ports = open_ports(&p.cfg).expect("ports");
    let devs: Vec<DpdkPort> = ports.dpdk_rx.iter().flatten().cloned().collect();
    let names = ports.rx_names.clone();
    assert_eq!(devs.len(), 2, "two DPDK ports");
    devs.iter().for_each(hook);
    let before: Vec<u64> = devs.iter().map(DpdkPort::mbufs_in_use).collect();
    let shared = Arc::new(cpu::CpuShared::new(&p.cpu_spec()));
    let mut s = if gpu {
        let dev = CpuStandIn::new(&p, 2, 1);
        let mut spec = host_spec(&p, GpuSlots::of(&p.cfg), p.pipeline.acl().is_some(), 0);
        spec.mbufs = super::super::mbuf_plan(&p, &ports);
        assert!(spec.mbufs.is_some(), "the daemon plans the mbuf path");
        let mut out = ports.take_out();
        let (r, s, _pinned) = summarized(&p, &shared, || {
            host::run(&dev, &spec, &shared, &mut ports.rx, &mut out)
        });
        r.expect("host run");
        s
    } else {
        crate::daemon::run_cpu(&p, &shared, ports)
    };
    // The zero-copy path names its tallies by device (`dpdk:<device>`), the TX threads by
    // port: both by port here.
    for o in &mut s.outputs {
        if let Some(k) = devs
            .iter()
            .position(|d| o.name == format!("dpdk:{}", d.setup().name))
        {
            o.name = names[k].clone();
        }
    }
    let in_use = devs
        .iter()
        .zip(before)
        .map(|(d, b)| (b, d.mbufs_in_use()))
        .collect();
    let (mut received, mut sent) = (HashSet::new(), Vec::new());
    for d in &devs {
        let (r, s) = seen(d.setup().port_id);
        received.extend(r);
        sent.extend(s);
    }
    // The captures are written out when the devices close (their last handles dropped).
    drop(devs);
    let out = names
        .iter()
        .map(|n| {
            let mut f = Vec::new();
            for path in (0..).map(|q| output(dir, n, q)).take_while(|p| p.exists()) {
                // A device that sent nothing may leave its capture empty.
                if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
                    f.extend(crate::testdata::capture_frames(&path).expect("output"));
                }
            }
            // Two inputs (and queues) interleave: each port's frames compared as a set.
            f.sort();
            (n.clone(), f)
        })
        .collect();
    Ran {
        s,
        out,
        received,
        sent,
        in_use,
    }
}

/// The frames a run lost on the way out (`tx_error`).
fn tx_error(s: &Summary) -> u64 {
    s.drops
        .iter()
        .find(|(k, _)| k == "tx_error")
        .map_or(0, |(_, n)| *n)
}

/// Every frame received counted once by its verdict or drop; a frame routed to a port with
/// no transmit side counts twice (passed, then `tx_error`), as on the copying path.
fn accounted(s: &Summary, what: &str) {
    assert_eq!(
        handled(s) + dropped(s) - tx_error(s),
        s.rx_frames,
        "{what}: received = counted + drops"
    );
}

/// Each tally as (role, port, frames, bytes, failed), sorted.
fn tallies(s: &Summary) -> Vec<(String, String, u64, u64, u64)> {
    let mut t: Vec<_> = s
        .outputs
        .iter()
        .map(|o| {
            (
                o.role.to_string(),
                o.name.clone(),
                o.frames,
                o.bytes,
                o.failed,
            )
        })
        .collect();
    t.sort();
    t
}

/// The CPU executor's zero-copy run and the GPU host side's of one config: the same counts,
/// output frames and tallies; the sent mbufs the received ones (on the GPU where every port
/// splits by RX queue: `shape.1` is `shape.2`); every mbuf back.
fn cpu_and_gpu(tag: &str, shape: Shape, case: Case) -> (Ran, Ran) {
    let dir = std::env::temp_dir().join(format!("pw-gpu-ports-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let cpu = run(&dir, &yaml(&format!("{tag}c"), &dir, shape, case), false);
    let gpu = run(&dir, &yaml(&format!("{tag}g"), &dir, shape, case), true);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(cpu.s.forwarding, "zero_copy", "{:?}", cpu.s);
    let t = gpu.s.gpu_tx.as_ref().expect("tx path");
    assert_eq!(t.path, super::super::tx::MBUF, "{t:?}");
    for (r, what) in [(&cpu, "cpu"), (&gpu, "gpu")] {
        assert!(r.s.errors.is_empty(), "{what}: {:?}", r.s.errors);
        assert_eq!(r.s.rx_frames as usize, frames().len(), "{what}");
        accounted(&r.s, what);
        assert!(
            r.in_use.iter().all(|(b, a)| a == b),
            "{what}: {:?}",
            r.in_use
        );
        if what == "cpu" || shape.1 == shape.2 {
            assert!(
                r.sent.iter().all(|m| r.received.contains(m)),
                "{what}: every mbuf sent is one received"
            );
        }
    }
    assert_same_counts(&gpu.s, &cpu.s, tag);
    assert_eq!(tallies(&gpu.s), tallies(&cpu.s), "{tag}: the tallies");
    assert_eq!(gpu.out, cpu.out, "{tag}: each port's output");
    (cpu, gpu)
}

/// The tally's frames of `role` on `port`.
fn took(s: &Summary, role: &str, port: &str) -> Option<u64> {
    s.outputs
        .iter()
        .find(|o| o.role == role && o.name == port)
        .map(|o| o.frames)
}

/// Two ports, each receiving and sending: UDP frames leave on `b` (`set: { port: b }`), ICMP
/// is dropped, the rest leave on `a`; each as the mbuf it arrived in.
#[test]
fn each_frame_leaves_as_its_mbuf_on_the_port_its_verdict_names() {
    routed("r", "", 1);
}

/// The same on two queues: each port split by its two RX queues (four receive threads), each
/// TX thread sending on its own TX queue of both ports.
#[test]
fn two_queues_send_on_their_own_tx_queue_of_each_port() {
    routed("q", "", 2);
}

/// [`each_frame_leaves_as_its_mbuf_on_the_port_its_verdict_names`] with the MACs swapped on
/// the GPU: each frame written back into its own mbuf before it leaves on its port.
#[test]
fn rewritten_frames_leave_on_their_ports_in_their_own_mbufs() {
    routed("w", "  - l2fwd: { mac: swap }\n", 1);
}

fn routed(tag: &str, more: &str, nq: usize) {
    let rules =
        "  - { proto: udp, action: pass, set: { port: b } }\n  - { proto: icmp, action: drop }\n";
    let (_, gpu) = cpu_and_gpu(tag, ("b", nq, nq), ("{ port: a }", rules, more));
    let s = &gpu.s;
    // `set: { port }` alone routes without writing: the frames leave as received; a rewriting
    // stage beside it has them written back into their mbufs.
    let t = s.gpu_tx.as_ref().map(|t| t.reason.as_str()).unwrap_or("");
    if more.is_empty() {
        assert!(t.contains("no copy on the TX side"), "{t}");
    } else {
        assert!(t.contains("one copy per frame"), "{t}");
    }
    let (a, b) = (took(s, "output", "a"), took(s, "output", "b"));
    assert!(
        a.is_some_and(|n| n > 0) && b.is_some_and(|n| n > 0),
        "both ports send: {:?}",
        s.outputs
    );
    assert_eq!(a.unwrap_or(0) + b.unwrap_or(0), s.tx_frames);
    assert_eq!(tx_error(s), 0, "{s:?}");
    // One receive thread per port and RX queue, every queue busy.
    assert_eq!(s.receive_threads, 2 * nq);
    assert!(s.queues.iter().all(|q| q.rx_frames > 0), "{:?}", s.queues);
    assert_eq!(gpu.out["a"].len() as u64, a.unwrap_or(0));
    assert_eq!(gpu.out["b"].len() as u64, b.unwrap_or(0));
    // Every mbuf sent is one received, none sent twice.
    assert_eq!(gpu.sent.len() as u64, s.tx_frames);
    let distinct: HashSet<usize> = gpu.sent.iter().copied().collect();
    assert_eq!(distinct.len(), gpu.sent.len());
}

/// A DPDK mirror port that also receives (its frames go to `a` too): UDP frames are mirrored
/// (a second reference to their mbuf), sent as received (no stage writes a frame); then with
/// ICMP routed to the mirror port, which has no output transmit side: `tx_error`, as on the
/// copying path.
#[test]
fn a_mirror_port_that_receives_takes_its_copies_by_reference() {
    let mirror = "  - { proto: udp, action: mirror }\n";
    let to_m = format!("{mirror}  - {{ proto: icmp, action: pass, set: {{ port: m }} }}\n");
    for (tag, rules) in [("m", mirror), ("n", to_m.as_str())] {
        mirrored(tag, rules, rules != mirror);
    }
}

fn mirrored(tag: &str, rules: &str, routed_to_mirror: bool) {
    let (_, gpu) = cpu_and_gpu(tag, ("m", 1, 1), ("{ port: a, mirror: m }", rules, ""));
    let s = &gpu.s;
    let t = s.gpu_tx.as_ref().map(|t| t.reason.as_str()).unwrap_or("");
    // Routing to the mirror port by `set: { port }` writes no frame either.
    assert!(t.contains("no copy on the TX side"), "{t}");
    let mirrored: u64 = s.queues.iter().map(|q| q.mirrored).sum();
    assert!(mirrored > 0, "{s:?}");
    assert_eq!(
        tx_error(s) > 0,
        routed_to_mirror,
        "the ICMP frames routed to the mirror port: {s:?}"
    );
    assert_eq!(took(s, "mirror", "m"), Some(mirrored));
    assert_eq!(took(s, "output", "a"), Some(s.tx_frames));
    assert_eq!(gpu.out["m"].len() as u64, mirrored);
    // The output's sends and the mirror's, each an mbuf received.
    assert_eq!(gpu.sent.len() as u64, s.tx_frames + mirrored);
}

/// Port `b` with two RX queues for one pipeline queue does not split by RX queue: one thread
/// receives it by copy and its frames leave by the copying TX (from the TX pool), while `a`'s
/// slots keep their mbufs and send them: both ways in one run, counts and frames as the CPU
/// executor's.
#[test]
fn a_port_that_does_not_split_by_queue_goes_the_copying_way_beside_the_mbufs() {
    let rules = "  - { proto: udp, action: pass, set: { port: b } }\n";
    let (_, gpu) = cpu_and_gpu("s", ("b", 2, 1), ("{ port: a }", rules, ""));
    let ingest: Vec<(&str, &str)> = (gpu.s.gpu_ingest.iter())
        .map(|g| (g.port.as_str(), g.reason.as_str()))
        .collect();
    assert!(
        ingest.iter().any(|(_, r)| r.contains("mbufs are kept")),
        "{ingest:?}"
    );
    let own = gpu.sent.iter().filter(|m| gpu.received.contains(m)).count();
    assert!(own > 0, "a's frames leave as their mbufs");
    assert!(own < gpu.sent.len(), "b's leave from the TX pool");
    assert_eq!(gpu.sent.len() as u64, gpu.s.tx_frames);
}
