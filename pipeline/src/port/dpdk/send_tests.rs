//! A burst split by output port (net_ring ports: what a port sends on TX queue 0 comes back on
//! its RX queue 0): each frame leaves as its own mbuf on the port `dest` names, each part is
//! counted once, a failed port's frames count as failed and are freed while the others are
//! still sent, and every mbuf goes back to its pool.

use std::time::{Duration, Instant};

use super::*;
use crate::port::dpdk::{DpdkPort, DpdkPortOptions};
use crate::port::RxStatus;

fn ring(name: &str, index: u16) -> DpdkPort {
    let mut o = DpdkPortOptions::vdev(&[], name);
    o.eal_args = super::super::eal::test_args();
    o.mempool_size = 1023;
    o.rx_descriptors = 256;
    o.tx_descriptors = 256;
    DpdkPort::open(&o, index).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `n` frames of 60.. bytes, frame i's first byte i.
fn frames(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| vec![i as u8; 60 + i]).collect()
}

/// Up to `want` frames of `port`'s RX queue 0 into `burst` (empty), within 5 s.
fn receive(port: &DpdkPort, burst: &mut MbufBurst, want: usize) {
    let mut rx = port.rx(&[0]).expect("rx");
    let deadline = Instant::now() + Duration::from_secs(5);
    while burst.is_empty() && Instant::now() < deadline {
        match rx.rx_mbufs(burst, want).expect("rx_mbufs") {
            RxStatus::Frames(_) => {}
            _ => std::thread::yield_now(),
        }
    }
}

/// What came back on `port`'s RX queue 0: each frame's first byte and mbuf address.
fn drained(port: &DpdkPort) -> Vec<(u8, usize)> {
    let mut burst = MbufBurst::new();
    receive(port, &mut burst, 64);
    let got = (0..burst.len())
        .map(|i| (burst.frame(i)[0], burst.mbuf_addr(i)))
        .collect();
    burst.clear();
    got
}

#[test]
fn each_frame_leaves_as_its_mbuf_on_its_port_and_a_failed_port_counts_its_frames() {
    let (a, b) = (ring("net_ring_send_a", 0), ring("net_ring_send_b", 1));
    let idle = (a.mbufs_in_use(), b.mbufs_in_use());
    let mut outs = MbufOuts::new(vec![
        Some(a.tx(0).expect("tx a")),
        Some(b.tx(0).expect("tx b")),
        None,
    ]);
    let mut prime = a.tx(0).expect("prime a");
    for failed in [false, true] {
        let fs = frames(12);
        let sent = prime.tx_burst(&mut fs.iter().map(|f| f.as_slice()));
        assert_eq!(sent.expect("prime"), 12);
        let mut burst = MbufBurst::new();
        receive(&a, &mut burst, 12);
        assert_eq!(burst.len(), 12);
        let addr: Vec<usize> = (0..12).map(|i| burst.mbuf_addr(i)).collect();
        if failed {
            outs.fail(0);
        }
        // Frame i: to a, to b, nowhere, to the closed output 2; frames 10 and 11 have no
        // entry (freed too).
        let mut dest: Vec<u16> = (0..10).map(|i| [0, 1, NOWHERE, 2][i % 4]).collect();
        let mut took = Vec::new();
        let r = outs.send(&mut burst, &mut dest, |k, s| took.push((k, s)));
        assert!(r.is_ok(), "{r:?}");
        assert!(burst.is_empty() && dest.is_empty());
        let bytes = |is: &[usize]| is.iter().map(|i| 60 + *i as u64).sum::<u64>();
        let to_a = BurstSent {
            sent: 3,
            bytes: bytes(&[0, 4, 8]),
            failed: 0,
        };
        let to_a = if failed {
            BurstSent {
                failed: 3,
                ..BurstSent::default()
            }
        } else {
            to_a
        };
        let to_b = BurstSent {
            sent: 3,
            bytes: bytes(&[1, 5, 9]),
            failed: 0,
        };
        assert_eq!(took, vec![(0, to_a), (1, to_b)], "failed: {failed}");
        let want_a: Vec<(u8, usize)> = if failed {
            Vec::new()
        } else {
            [0, 4, 8].iter().map(|i| (*i as u8, addr[*i])).collect()
        };
        assert_eq!(drained(&a), want_a, "failed: {failed}");
        let want_b: Vec<(u8, usize)> = [1, 5, 9].iter().map(|i| (*i as u8, addr[*i])).collect();
        assert_eq!(drained(&b), want_b, "failed: {failed}");
    }
    drop((outs, prime));
    assert_eq!(
        (a.mbufs_in_use(), b.mbufs_in_use()),
        idle,
        "every mbuf back"
    );
}
