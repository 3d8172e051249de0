//! memif between two processes: this test binary runs itself a second time as the memif client
//! (its own EAL), which echoes every frame back; the server side (this process) sends frames
//! and checks they come back byte for byte. The socket lives in a fresh temp dir.

#![cfg(feature = "dpdk")]

mod dpdk_common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dpdk_common::frame;
use pipeline::burst::Burst;
use pipeline::internal::port::dpdk::DpdkPort;
use pipeline::port::{RxPort, RxStatus, TxPort};

const ROLE_ENV: &str = "PKTWARP_MEMIF_CHILD_SOCKET";
const FRAMES: usize = 2000;

/// The client side, run only as the child process (ignored in a plain run).
#[test]
#[ignore = "run by memif_between_two_processes as the second process"]
fn memif_echo_child() {
    let Ok(socket) = std::env::var(ROLE_ENV) else {
        return;
    };
    let port = DpdkPort::open(
        &dpdk_common::vdev(&format!("net_memif0,role=client,id=7,socket={socket}")),
        0,
    )
    .expect("memif client");
    assert!(port.wait_link_up(Duration::from_secs(10)), "client link up");
    let mut rx = port.rx(&[]).expect("rx");
    let mut tx = port.tx(0).expect("tx");
    let mut burst = Burst::default();
    let mut echoed = 0usize;
    let deadline = Instant::now() + Duration::from_secs(20);
    while echoed < FRAMES && Instant::now() < deadline {
        burst.clear();
        match rx.rx_burst(&mut burst, 32).expect("rx") {
            RxStatus::Frames(_) => {
                let mut off = 0;
                // Retry until the server has room: an echo must not lose frames.
                while off < burst.len() {
                    off += tx
                        .tx_burst(&mut burst.frames().skip(off).map(|(_, f)| f))
                        .expect("tx");
                }
                echoed += burst.len();
            }
            _ => std::thread::yield_now(),
        }
    }
    assert_eq!(echoed, FRAMES, "child echoed every frame");
    // Give the server time to read the last frames before the link goes down.
    std::thread::sleep(Duration::from_millis(300));
}

#[test]
fn memif_between_two_processes() {
    let dir = dpdk_common::scratch("memif");
    let socket = dir.join("memif.sock");
    let port = DpdkPort::open(
        &dpdk_common::vdev(&format!(
            "net_memif0,role=server,id=7,socket={}",
            socket.display()
        )),
        0,
    )
    .expect("memif server");
    assert_eq!(port.setup().driver, "net_memif");

    let exe = std::env::current_exe().expect("test binary path");
    let child = Command::new(exe)
        .args(["--exact", "memif_echo_child", "--ignored", "--nocapture"])
        .env(ROLE_ENV, &socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the memif client process");

    assert!(
        port.wait_link_up(Duration::from_secs(10)),
        "memif peer connected"
    );
    let frames: Vec<Vec<u8>> = (0..FRAMES as u32)
        .map(|i| {
            frame(
                17,
                [10, 1, 0, 1],
                [10, 1, 0, 2],
                5000,
                6000,
                64 + (i as usize * 13) % 1400,
                i,
            )
        })
        .collect();
    let mut tx = port.tx(0).expect("tx");
    let mut rx = port.rx(&[]).expect("rx");
    let mut got = Burst::default();
    let mut next = 0usize;
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < FRAMES && Instant::now() < deadline {
        if next < FRAMES {
            let end = (next + 32).min(FRAMES);
            next += tx
                .tx_burst(&mut frames[next..end].iter().map(|f| f.as_slice()))
                .expect("tx");
        }
        let _ = rx.rx_burst(&mut got, 64).expect("rx");
    }
    let out = child.wait_with_output().expect("client process");
    assert!(
        out.status.success(),
        "client failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(got.len(), FRAMES, "every frame came back");
    for (i, (_, f)) in got.frames().enumerate() {
        assert_eq!(f, frames[i].as_slice(), "frame {i}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
