//! Steering rules installed in the "NIC" for real: net_tap implements rte_flow with the
//! kernel's TC flower classifier. Inside a network namespace this test creates, the binary
//! reruns itself, opens net_tap with 4 RX queues, installs steering rules (the ones net_tap
//! takes go to rte_flow, the rest to software), sends frames into the tap interface from the
//! kernel side (an AF_PACKET socket), and checks every frame lands in its rule's queue.

#![cfg(feature = "dpdk")]

mod dpdk_common;

use std::time::{Duration, Instant};

use dpdk_common::frame;
use flow_rules::steering::SteerRuleSet;
use pipeline::burst::Burst;
use pipeline::port::dpdk::{DpdkPort, FlowOutcome};
use pipeline::port::RxPort;
use pipeline::testdata::{ip, run_child_in_netns, Netns};

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
    match: {ecpri: {}}
    actions: [{queue: 2}]
";

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
    let outcomes = port.install_rules(&set.rules);
    for o in &outcomes {
        println!("TAP-RULE {o:?}");
    }
    let hw = outcomes
        .iter()
        .filter(|o| matches!(o, FlowOutcome::Hardware { .. }))
        .count();
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
    println!(
        "TAP-OK: {hw} of {} rules in the device (rte_flow), 60 frames in their queues",
        outcomes.len()
    );
}

#[test]
fn tap_rte_flow_rules_steer_in_the_device() {
    let ns = format!("pwtap{}", std::process::id());
    if let Err(e) = ip(&["netns", "add", &ns]) {
        pipeline::testdata::skip(
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
        pipeline::testdata::skip(
            file!(),
            "tap_rte_flow_rules_steer_in_the_device",
            &format!("tap: {line}\n{stderr}"),
        );
        return;
    }
    for l in stdout.lines().filter(|l| l.contains("TAP-")) {
        println!("{l}");
    }
    assert!(
        stdout.contains("TAP-OK"),
        "child did not run its checks:\n{stdout}\n{stderr}"
    );
}
