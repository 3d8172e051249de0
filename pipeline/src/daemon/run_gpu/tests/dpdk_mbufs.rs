//! DPDK in and out on the GPU host side (cargo feature `dpdk`, a real EAL on net_ring, the
//! stand-in device): the received mbufs are kept with their slot and sent themselves once
//! reaped (`mbufs`): every mbuf the output port sends is one the input received, the frames and
//! counts are the CPU executor's (its zero-copy path on the same devices), and every mbuf went
//! back to its pool.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::*;
use crate::port::dpdk::{sys, DpdkPort};

/// One net_pcap device `wire` (its capture in, its capture out: `output.port` is the port
/// itself), one queue, `pipeline`; the same EAL arguments as the other DPDK tests of this
/// binary (one EAL per process). The input ends 300 ms after its last frame.
fn yaml(tag: &str, dir: &Path, pipeline: &str) -> String {
    let eal = eal();
    format!(
        "ports:\n  - name: wire\n    dpdk:\n      eal_args: {eal}\n      \
         vdev: \"net_pcap_gm{tag},rx_pcap={},tx_pcap={}\"\n      mempool_size: 1023\n      \
         rx_queues: 1\n      tx_queues: 1\n      idle_end_ms: 300\n\
         output: {{ port: wire }}\nqueues: {{ count: 1, burst: 32, ring_slots: 4 }}\n{pipeline}",
        dir.join("in.pcap").display(),
        dir.join("out.pcap").display()
    )
}

/// This binary's EAL arguments (one EAL per process), as a YAML list.
pub(super) fn eal() -> String {
    let quoted: Vec<String> = crate::port::dpdk::eal::test_args()
        .iter()
        .map(|a| format!("{a:?}"))
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// The mbuf addresses each port received and sent, by port id (RX and TX callbacks).
type Seen = HashMap<u16, (HashSet<usize>, Vec<usize>)>;
static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

fn record(port: u16, pkts: *mut *mut sys::rte_mbuf, nb: u16, tx: bool) {
    // SAFETY: DPDK hands the callback `nb` valid mbuf pointers at `pkts`; only the pointer
    // values are read.
    let mbufs = unsafe { std::slice::from_raw_parts(pkts, usize::from(nb)) };
    let mut g = SEEN.lock().unwrap();
    let e = g.get_or_insert_with(HashMap::new).entry(port).or_default();
    for &m in mbufs {
        if tx {
            e.1.push(m as usize);
        } else {
            e.0.insert(m as usize);
        }
    }
}

unsafe extern "C" fn seen_rx(
    port: u16,
    _queue: u16,
    pkts: *mut *mut sys::rte_mbuf,
    nb: u16,
    _max: u16,
    _user: *mut std::ffi::c_void,
) -> u16 {
    record(port, pkts, nb, false);
    nb
}

unsafe extern "C" fn seen_tx(
    port: u16,
    _queue: u16,
    pkts: *mut *mut sys::rte_mbuf,
    nb: u16,
    _user: *mut std::ffi::c_void,
) -> u16 {
    record(port, pkts, nb, true);
    nb
}

/// Records the mbufs `port` receives and sends on each of its queues (see [`seen`]).
pub(super) fn hook(port: &DpdkPort) {
    let id = port.setup().port_id;
    // A port id is reused after a close, and its callbacks stay installed: once per id, queue
    // and direction.
    static HOOKED: Mutex<Vec<(u16, u16, bool)>> = Mutex::new(Vec::new());
    let mut hooked = HOOKED.lock().unwrap();
    for (queues, tx) in [
        (port.setup().rx_queues, false),
        (port.setup().tx_queues, true),
    ] {
        for q in 0..queues {
            if hooked.contains(&(id, q, tx)) {
                continue;
            }
            hooked.push((id, q, tx));
            // SAFETY: a started port with queue q; the callbacks match DPDK's types and live
            // for the whole process; no user parameter.
            let cb = unsafe {
                if tx {
                    sys::rte_eth_add_tx_callback(id, q, Some(seen_tx), std::ptr::null_mut())
                } else {
                    sys::rte_eth_add_rx_callback(id, q, Some(seen_rx), std::ptr::null_mut())
                }
            };
            assert!(!cb.is_null(), "port {id} queue {q}");
        }
    }
}

/// The mbufs port `id` received and sent (in order) since it was hooked; taken (call it while
/// the port is still open: its id may go to another test's port once closed).
pub(super) fn seen(id: u16) -> (HashSet<usize>, Vec<usize>) {
    SEEN.lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .remove(&id)
        .unwrap_or_default()
}

/// The capture's frames that fit one mbuf (no chains on either path).
pub(super) fn frames() -> Vec<Vec<u8>> {
    let all =
        crate::testdata::capture_frames(&crate::testdata::multi_proto_pcap()).expect("capture");
    all.into_iter().filter(|f| f.len() <= 1500).collect()
}

/// What one run did: its summary, the frames written, the mbufs the port received and sent,
/// and its mbufs in use before and after.
struct Ran {
    s: Summary,
    out: Vec<Vec<u8>>,
    received: HashSet<usize>,
    sent: Vec<usize>,
    in_use: (u64, u64),
}

/// One run on the CPU executor (`run_cpu`: zero-copy where it can) or, `gpu: Some(can_hold)`,
/// the GPU host side over the stand-in with the received mbufs sent themselves.
fn run(tag: &str, pipeline: &str, gpu: Option<bool>) -> Ran {
    run_mirrored(tag, pipeline, gpu, false)
}

/// [`run`], with `mirror` (GPU only) the port's TX queue 0 as the mirror port too.
fn run_mirrored(tag: &str, pipeline: &str, gpu: Option<bool>, mirror: bool) -> Ran {
    let dir = std::env::temp_dir().join(format!("pw-gpu-mbufs-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    crate::testdata::write_pcap(&dir.join("in.pcap"), 1, &frames()).expect("input");
    let p = prepared(&yaml(tag, &dir, pipeline));
    let mut ports = open_ports(&p.cfg).expect("ports");
    let port: DpdkPort = ports.dpdk_out[0].clone().expect("dpdk wire");
    let id = port.setup().port_id;
    hook(&port);
    let before = port.mbufs_in_use();
    let shared = Arc::new(cpu::CpuShared::new(&p.cpu_spec()));
    let s = match gpu {
        None => crate::daemon::run_cpu(&p, &shared, ports),
        Some(can_hold) => {
            let mut dev = CpuStandIn::new(&p, 2, 1);
            dev.can_hold = can_hold;
            let mut spec = host_spec(&p, GpuSlots::of(&p.cfg), p.pipeline.acl().is_some(), 0);
            // The plan as the daemon makes it.
            spec.mbufs = Some(super::super::mbufs::MbufPlan {
                rx: vec![port.clone()],
                tx: vec![Some(port.clone())],
                default: Some(0),
                mirror: mirror.then(|| port.clone()),
            });
            let mut out = ports.take_out();
            if mirror {
                let m: Box<dyn crate::port::TxPort> = Box::new(port.tx(0).expect("tx"));
                out.mirror = Some(m);
            }
            let (r, s, _pinned) = summarized(&p, &shared, || {
                host::run(&dev, &spec, &shared, &mut ports.rx, &mut out)
            });
            r.expect("host run");
            s
        }
    };
    let after = port.mbufs_in_use();
    let (received, sent) = seen(id);
    // The capture is written out when the device closes (its last handle dropped).
    drop(port);
    let out = crate::testdata::capture_frames(&dir.join("out.pcap")).expect("output");
    Ran {
        s,
        out,
        received,
        sent,
        in_use: (before, after),
    }
}

#[test]
fn dpdk_in_and_out_sends_the_received_mbufs_and_counts_as_the_cpu_executor() {
    let rewriting = "pipeline:\n  - parse\n  - l2fwd: { mac: swap }\n  - ttl\n  - count\n\
                     executor: { kind: cpu }\n";
    let mut cpu: Option<Ran> = None;
    for (tag, pipeline, gpu, what) in [
        ("a", INLINE, None, "cpu"),
        ("b", INLINE, Some(true), "gpu, no rewrite"),
        ("c", rewriting, None, "cpu rewriting"),
        ("d", rewriting, Some(true), "gpu rewriting, held slots"),
        ("e", rewriting, Some(false), "gpu rewriting, copied out"),
    ] {
        let r = run(tag, pipeline, gpu);
        let s = &r.s;
        assert_eq!(s.rx_frames as usize, frames().len(), "{what}");
        accounted(s, what);
        assert!(s.tx_frames > 0, "{what}");
        assert_eq!(
            r.out.len() as u64,
            s.tx_frames,
            "{what}: the output has what was counted"
        );
        assert_eq!(
            r.in_use.1, r.in_use.0,
            "{what}: every mbuf back in its pool"
        );
        let Some(_) = gpu else {
            // The reference: the CPU executor's zero-copy path, rewriting in the mbufs too.
            assert_eq!(s.forwarding, "zero_copy", "{what}");
            // The check below can tell: the copying path sends mbufs of the TX pool.
            let own = r.sent.iter().all(|m| r.received.contains(m));
            assert!(own, "{what}: mbufs sent are the received ones");
            cpu = Some(r);
            continue;
        };
        let t = s.gpu_tx.as_ref().expect("tx path");
        assert_eq!(t.path, super::super::tx::MBUF, "{what}: {t:?}");
        assert_eq!(
            t.reason.contains("one copy per frame"),
            pipeline != INLINE,
            "{what}: {t:?}"
        );
        // The mbuf sent is one the port received: none was copied into a TX mbuf.
        assert_eq!(r.sent.len() as u64, s.tx_frames, "{what}");
        assert!(
            r.sent.iter().all(|m| r.received.contains(m)),
            "{what}: a TX mbuf sent"
        );
        let c = cpu.as_ref().expect("the CPU run first");
        assert_same_counts(s, &c.s, what);
        assert_same_frames(&r.out, &c.out, what);
        let o = s
            .outputs
            .iter()
            .find(|o| o.role == "output")
            .expect("tally");
        assert_eq!((o.frames, o.failed), (s.tx_frames, 0), "{what}");
    }
}

/// Each reason the GPU executor keeps the copying TX path on a DPDK config, named.
#[test]
fn the_mbuf_path_names_why_it_is_refused() {
    let dir = std::env::temp_dir().join(format!("pw-gpu-mbufs-no-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    crate::testdata::write_pcap(&dir.join("in.pcap"), 1, &frames()).expect("input");
    let tx_time = "pipeline:\n  - parse\n  - tx_time: { delay_ns: 10 }\nexecutor: { kind: cpu }\n";
    let slow = dir.join("slow.pcap");
    let to_host = INLINE.replace(
        "executor:",
        &format!(
            "output: {{ port: wire, to_host: {{ pcap: {} }} }}\nexecutor:",
            slow.display()
        ),
    );
    let cases = [
        ("n0", yaml("n0", &dir, tx_time), "tx_time"),
        (
            "n1",
            yaml("n1", &dir, &to_host).replace("output: { port: wire }\n", ""),
            "to_host",
        ),
        (
            "n2",
            yaml("n2", &dir, INLINE).replace(
                "ports:\n",
                &format!("ports:\n{}", gen_port("g", 10, 1, "64")),
            ),
            "the input port g is not a DPDK port",
        ),
        (
            // A second output port that is a capture file: its frames would need the
            // copying TX beside the mbufs'.
            "n3",
            yaml("n3", &dir, INLINE).replace(
                "ports:\n",
                &format!(
                    "ports:\n  - name: alt\n    pcap: {{ tx: {{ path: {} }} }}\n",
                    dir.join("alt.pcap").display()
                ),
            ),
            "the output port alt is not a DPDK port",
        ),
    ];
    for (tag, yaml, why) in cases {
        let p = prepared(&yaml);
        let ports = open_ports(&p.cfg).expect("ports");
        let e = super::super::mbufs::plan(&p, &ports)
            .err()
            .unwrap_or_else(|| panic!("{tag}: the mbuf path was not refused"));
        assert!(e.contains(why), "{tag}: {e}");
    }
}

/// A `mirror` verdict: the frame's mbuf goes to the output and, a second reference to it, to
/// the mirror port (here the same device's TX queue): sent twice, never copied.
#[test]
fn a_mirrored_frame_is_sent_twice_from_the_mbuf_it_arrived_in() {
    let rules =
        std::env::temp_dir().join(format!("pw-gpu-mbufs-{}.rules.yaml", std::process::id()));
    std::fs::write(&rules, "rules:\n  - { proto: udp, action: mirror }\n").expect("rules");
    let pipeline = format!(
        "pipeline:\n  - parse\n  - acl: {{ rules: {}, default: pass }}\n  - count\n\
         executor: {{ kind: cpu }}\n",
        rules.display()
    );
    let r = run_mirrored("m", &pipeline, Some(true), true);
    let s = &r.s;
    accounted(s, "mirror");
    let (passed, mirrored): (u64, u64) = s
        .queues
        .iter()
        .map(|q| (q.passed, q.mirrored))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert!(
        passed > 0 && mirrored > 0,
        "{passed} passed, {mirrored} mirrored"
    );
    let tally = |role: &str| {
        s.outputs
            .iter()
            .find(|o| o.role == role)
            .map(|o| (o.frames, o.failed))
    };
    assert_eq!(tally("output"), Some((passed + mirrored, 0)));
    assert_eq!(tally("mirror"), Some((mirrored, 0)));
    // Every mbuf sent is one received; each mirrored one twice.
    assert_eq!(r.sent.len() as u64, passed + 2 * mirrored);
    assert!(r.sent.iter().all(|m| r.received.contains(m)));
    // (An address seen again may also be a recycled mbuf: at least the mirrored ones repeat.)
    let distinct: HashSet<usize> = r.sent.iter().copied().collect();
    assert!(
        r.sent.len() - distinct.len() >= mirrored as usize,
        "mirror copies share their mbuf"
    );
    assert_eq!(r.out.len() as u64, passed + 2 * mirrored);
    assert_eq!(r.in_use.1, r.in_use.0, "every mbuf back in its pool");
}
