//! Steering rules installed in the "NIC" for real: net_tap implements rte_flow with the
//! kernel's TC flower classifier (a multiq root qdisc, flower filters with skbedit actions).
//! Inside a network namespace this test creates, the binary reruns itself, opens net_tap with 4
//! RX queues, and installs the rule set the way `pktwarp run` does (`offload_rules`: all of it
//! in the device or none), sends frames into the tap interface from the kernel side (an
//! AF_PACKET socket), and checks every frame lands in its rule's queue.
//!
//! Where the kernel lacks what net_tap needs (the child probes it with `tc`: this sandbox's
//! kernel is built without `CONFIG_NET_CLS_FLOWER`, `CONFIG_NET_SCH_MULTIQ` and
//! `CONFIG_NET_ACT_SKBEDIT`, and without modules), the whole set is refused, nothing stays in
//! the device, and the same frames are checked through the port's software fallback; the
//! test then says the in-device claim was not exercised (a listed skip). net_tap reports any
//! TC refusal as "overlapping rules or Kernel too old for flower support" with EEXIST ("File
//! exists") whatever the kernel said, so that message does not mean leftover rules.

#![cfg(feature = "dpdk")]

mod dpdk_common;

use std::process::Command;
use std::time::{Duration, Instant};

use dpdk_common::frame;
use flow_rules::steering::SteerRuleSet;
use pipeline::burst::Burst;
use pipeline::internal::port::dpdk::{DpdkPort, FlowOutcome};
use pipeline::internal::testdata::{ip, run_child_in_netns, Netns};
use pipeline::port::RxPort;

const CHILD_ENV: &str = "PKTWARP_TAP_CHILD";

const RULES: &str = "\
queues: 4
rules:
  - name: gtpu-to-3
    match: {udp: {dst_port: 2152}}
    actions: [{queue: 3}]
  - name: web-to-1
    match: {tcp: {dst_port: 80}}
    actions: [{queue: 1}]
  - name: ecpri-to-2
    match: {eth: {ether_type: 0xAEFE}}
    actions: [{queue: 2}]
";

/// What the kernel lacks for net_tap's rte_flow (`None`: it has it all), found by doing what
/// net_tap does on a scratch tap device: a multiq root qdisc, an ingress qdisc, and a flower
/// filter with an skbedit queue_mapping action (net_tap's QUEUE).
fn tc_flower_missing() -> Option<String> {
    let tc = |args: &[&str]| -> Result<(), String> {
        let out = Command::new("tc")
            .args(args)
            .output()
            .map_err(|e| format!("tc: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`tc {}`: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    if let Err(e) = ip(&["tuntap", "add", "pwprobe0", "mode", "tap"]) {
        return Some(format!("no scratch tap device: {e}"));
    }
    let mut missing = Vec::new();
    for step in [
        &[
            "qdisc", "add", "dev", "pwprobe0", "root", "handle", "1:", "multiq",
        ][..],
        &["qdisc", "add", "dev", "pwprobe0", "ingress"][..],
        &[
            "filter",
            "add",
            "dev",
            "pwprobe0",
            "parent",
            "ffff:",
            "protocol",
            "ip",
            "prio",
            "1",
            "flower",
            "ip_proto",
            "udp",
            "action",
            "skbedit",
            "queue_mapping",
            "1",
        ][..],
    ] {
        if let Err(e) = tc(step) {
            missing.push(e);
        }
    }
    let _ = ip(&["link", "del", "pwprobe0"]);
    (!missing.is_empty()).then(|| missing.join("; "))
}

/// Sends raw frames out of `iface` (kernel TX on the tap = the PMD's RX).
fn inject(iface: &str, frames: &[Vec<u8>]) -> Result<(), String> {
    let name = std::ffi::CString::new(iface).map_err(|e| e.to_string())?;
    // SAFETY: plain libc calls with valid arguments; the fd is closed at the end.
    unsafe {
        let ifindex = libc::if_nametoindex(name.as_ptr());
        if ifindex == 0 {
            return Err(format!("no interface {iface}"));
        }
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
        if fd < 0 {
            return Err("AF_PACKET socket refused".into());
        }
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = ifindex as i32;
        sll.sll_halen = 6;
        for f in frames {
            let rc = libc::sendto(
                fd,
                f.as_ptr().cast(),
                f.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            if rc < 0 {
                libc::close(fd);
                return Err(format!("sendto: {}", std::io::Error::last_os_error()));
            }
        }
        libc::close(fd);
    }
    Ok(())
}

#[test]
#[ignore = "run by tap_rte_flow_rules_steer_in_the_device inside its network namespace"]
fn tap_child() {
    if std::env::var(CHILD_ENV).is_err() {
        return;
    }
    let mut o = dpdk_common::vdev("net_tap0,iface=pwtap0");
    o.rx_queues = 4;
    o.tx_queues = 4;
    let port = match DpdkPort::open(&o, 0) {
        Ok(p) => p,
        Err(e) => {
            println!("TAP-SKIP: the kernel refused a tap device: {e}");
            return;
        }
    };
    let set = SteerRuleSet::parse(RULES, "tap.steering.yaml").expect("rules");
    let missing = tc_flower_missing();
    // As `pktwarp run` installs a config's rules: all in the device, or none.
    let offload = port.offload_rules(&set.rules);
    println!("TAP-OFFLOAD {offload:?}");
    let in_nic = match (&missing, &offload) {
        (None, Ok(flows)) => {
            assert!(port.steered_in_nic());
            assert_eq!(*flows, 3, "one rte_flow rule per steering rule");
            assert_eq!(counter(&port.counters(), "pktwarp_flow_rules_hw"), 3);
            assert_eq!(counter(&port.counters(), "pktwarp_steering_in_nic"), 1);
            true
        }
        (None, Err(e)) => panic!("the kernel has TC flower but net_tap refused the rules: {e}"),
        (Some(why), Ok(_)) => {
            panic!("the probe found the kernel lacking ({why}) yet net_tap took the rules")
        }
        (Some(_), Err(e)) => {
            // Nothing of the set stays in the device, and the port says so.
            assert!(
                e.starts_with("rule gtpu-to-3:"),
                "names the first rule refused: {e}"
            );
            assert!(!port.steered_in_nic());
            assert_eq!(counter(&port.counters(), "pktwarp_flow_rules_hw"), 0);
            assert_eq!(counter(&port.counters(), "pktwarp_steering_in_nic"), 0);
            // The library's per-rule fallback: every rule steered in software by the port.
            let outcomes = port.install_rules(&set.rules);
            for o in &outcomes {
                println!("TAP-RULE {o:?}");
                assert!(matches!(o, FlowOutcome::Software { .. }), "{o:?}");
            }
            false
        }
    };
    assert!(port.wait_link_up(Duration::from_secs(5)), "tap link up");
    // Frames from the kernel side: 3 kinds x 20.
    let mut frames = Vec::new();
    for i in 0..20u32 {
        frames.push(frame(
            17,
            [10, 3, 0, 1],
            [10, 3, 0, 2],
            40000 + i as u16,
            2152,
            120,
            i,
        ));
        frames.push(frame(
            6,
            [10, 3, 0, 1],
            [10, 3, 0, 2],
            40000 + i as u16,
            80,
            120,
            i,
        ));
        let mut e = frame(17, [0; 4], [0; 4], 0, 0, 64, i);
        e[12..14].copy_from_slice(&0xAEFEu16.to_be_bytes());
        e[14..18].copy_from_slice(&[0x10, 0x00, 0x00, 0x20]);
        frames.push(e);
    }
    inject("pwtap0", &frames).expect("inject frames");
    let mut rx = port.rx(&[]).expect("rx");
    let mut burst = Burst::default();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let _ = rx.rx_burst(&mut burst, 64).expect("rx");
    }
    // The kernel may add its own frames (IPv6 neighbour discovery): keep ours.
    let (mut gtpu, mut web, mut ecpri) = (0, 0, 0);
    for (d, f) in burst.frames() {
        let et = u16::from_be_bytes([f[12], f[13]]);
        if et == 0xAEFE {
            assert_eq!(d.queue, 2, "eCPRI frame");
            ecpri += 1;
        } else if et == 0x0800 && f.len() >= 38 && f[23] == 17 && f[36..38] == [0x08, 0x68] {
            assert_eq!(d.queue, 3, "GTP-U frame");
            gtpu += 1;
        } else if et == 0x0800 && f.len() >= 38 && f[23] == 6 && f[36..38] == [0, 80] {
            assert_eq!(d.queue, 1, "web frame");
            web += 1;
        }
    }
    assert_eq!((gtpu, web, ecpri), (20, 20, 20), "every frame received");
    match missing {
        None => println!("TAP-OK: 3 of 3 rules in the device (rte_flow), 60 frames in their queues, in_nic={in_nic}"),
        Some(why) => println!("TAP-NO-FLOWER: {why}; the rules were refused as a set and the 60 frames checked through the port's software fallback"),
    }
}

fn counter(c: &[(String, u64)], name: &str) -> u64 {
    c.iter().find(|(k, _)| k == name).map_or(0, |(_, v)| *v)
}

#[test]
fn tap_rte_flow_rules_steer_in_the_device() {
    let ns = format!("pwtap{}", std::process::id());
    if let Err(e) = ip(&["netns", "add", &ns]) {
        pipeline::internal::testdata::skip(
            file!(),
            "tap_rte_flow_rules_steer_in_the_device",
            &format!("tap: cannot create a network namespace here: {e}"),
        );
        return;
    }
    let _guard = Netns(ns.clone());
    let (ok, stdout, stderr) = run_child_in_netns(&ns, "tap_child", CHILD_ENV);
    assert!(ok, "tap child failed:\n{stdout}\n{stderr}");
    if let Some(line) = stdout.lines().find(|l| l.contains("TAP-SKIP")) {
        pipeline::internal::testdata::skip(
            file!(),
            "tap_rte_flow_rules_steer_in_the_device",
            &format!("tap: {line}\n{stderr}"),
        );
        return;
    }
    for l in stdout.lines().filter(|l| l.contains("TAP-")) {
        println!("{l}");
    }
    if let Some(line) = stdout.lines().find(|l| l.contains("TAP-NO-FLOWER")) {
        // The software half passed; the device half cannot run on this kernel: say so.
        pipeline::internal::testdata::skip(
            file!(),
            "tap_rte_flow_rules_steer_in_the_device",
            &format!("tap: the kernel cannot steer in the device: {line}"),
        );
        return;
    }
    assert!(
        stdout.contains("TAP-OK"),
        "child did not run its checks:\n{stdout}\n{stderr}"
    );
}
