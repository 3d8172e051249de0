//! How the GPU executor receives a port whose frames are in GPU memory (a GPUDirect DPDK port):
//! `in_place` (the frames are gathered device to device into the queue's ring slot, no byte
//! through host memory; the queue is the NIC's choice) or `staged` (the port copies each frame
//! to host memory as for any port, and the ingest steers and stages it as usual). In place is
//! chosen when nothing on the host needs the frame bytes:
//! - steering: the port's NIC steers the whole rule set, or there are no rules (the NIC's RSS
//!   picks the queue). A rule the NIC refused is applied in software, which reads the frame on
//!   the CPU: such a port is staged, not refused, since `gpu_buffers: auto` chose GPU memory
//!   without the user asking;
//! - output: the config transmits nothing (the output ports send from host memory; frames
//!   received in GPU memory would need a copy back, which is not built);
//! - rings: every queue runs on the GPU holding the frames, in device memory, outside `graph`
//!   mode (see `executor::gpu::gather`).
//!
//! A DPDK port whose RX pool is pinned host memory mapped for the GPU (`gpu_buffers: pinned`,
//! [`decide_pinned`]) goes `by_reference` (descriptors and pool addresses; the host reads the
//! frames as any mbuf's, so software steering and transmitting are no reasons to copy), or
//! `staged` where a queue cannot take frames by address or `verify.sample` is on.
//!
//! The choice is logged per port (`event=gpu_ingest`) and reported in the summary.

use crate::daemon::summary::GpuIngest;

/// What decides one port's path.
#[derive(Clone, Debug, Default)]
pub(crate) struct Facts {
    /// The config has an output port, mirror or slow path.
    pub transmits: bool,
    /// The config has steering rules and the port's NIC did not take all of them.
    pub software_steering: bool,
    /// Why the GPU queues cannot take frames in this port's GPU memory (`None`: they can).
    pub rings: Option<String>,
}

pub(crate) const IN_PLACE: &str = "in_place";
pub(crate) const STAGED: &str = "staged";

/// The path of port `port`, whose frames are in GPU memory.
pub(crate) fn decide(port: &str, f: &Facts) -> GpuIngest {
    let staged = if f.software_steering {
        Some(
            "steering rules the NIC did not take are applied in software, which reads each \
             frame on the CPU"
                .to_string(),
        )
    } else if f.transmits {
        Some(
            "the config transmits frames: output ports send from host memory (frames \
             received in GPU memory are not copied back)"
                .to_string(),
        )
    } else {
        f.rings.clone()
    };
    let (path, reason) = match staged {
        Some(why) => (
            STAGED,
            format!("{why}; each frame is copied to host memory"),
        ),
        None => (
            IN_PLACE,
            "frames gathered from the NIC's GPU buffers into the ring slots on the GPU".into(),
        ),
    };
    GpuIngest {
        port: port.to_string(),
        path: path.to_string(),
        reason,
    }
}

/// Logs a port's path (one line per port at start).
pub(crate) fn log(g: &GpuIngest) {
    tracing::info!(
        event = "gpu_ingest",
        port = %g.port,
        path = %g.path,
        reason = %g.reason,
        "port {} received by the GPU executor {}: {}",
        g.port,
        g.path,
        g.reason
    );
}

/// A port whose frames are in host memory (pcap, gen, a DPDK port in host memory), handed
/// over by reference: its loaded frames (a capture, a generator's frame pool) copied once into
/// pinned memory the GPU reads.
pub(crate) const BY_REFERENCE: &str = "by_reference";

/// How a port whose frames are in host memory reaches the GPU: by reference (`how` is
/// `Ok(how the GPU gets them)`; `note`: what differs from the frames copied) or copied by its
/// receive threads, and why (`Err(why)`; logged, and in the summary).
pub(crate) fn host_port(
    port: &str,
    per_queue: bool,
    how: Result<&str, &str>,
    note: Option<&str>,
) -> GpuIngest {
    let (path, reason) = match how {
        Ok(read) => {
            let mut r = format!(
                "its loaded frames were copied once into pinned host memory the GPU reads: each \
                 queue's receive thread hands descriptors and {read} (no per-frame copy on the \
                 host)"
            );
            if let Some(n) = note {
                r.push_str("; ");
                r.push_str(n);
            }
            (BY_REFERENCE, r)
        }
        Err(why) if per_queue => (
            STAGED,
            format!(
                "each queue's receive thread copies the queue's frames into its slot burst: {why}"
            ),
        ),
        Err(why) => (
            STAGED,
            format!("one receive thread steers each frame and copies it into its queue's slot burst: {why}"),
        ),
    };
    let g = GpuIngest {
        port: port.to_string(),
        path: path.to_string(),
        reason,
    };
    log(&g);
    g
}

/// What decides the path of a DPDK port whose RX pool is pinned host memory mapped for the GPU
/// (`gpu_buffers: pinned`). The CPU reads these frames as any mbuf's, so software steering is
/// no reason to copy them (the receive thread reads the headers where they are). The option
/// is the switch: `executor.gpu.by_reference` (loaded frames copied once into pinned memory)
/// has no say here, there is no copy to save.
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
pub(crate) struct PinnedFacts {
    /// `verify.sample` is on (it re-runs bursts on the CPU from their bytes in the burst).
    pub verify: bool,
    /// How the queues take frames by address in pinned host memory (`Ok`: read in place by a
    /// mapped ring's kernel, or gathered into a device ring's slot), or why they cannot.
    pub rings: Result<&'static str, String>,
    /// Why one receive thread takes every RX queue and steers each frame (the port does not
    /// split by queue); `None`: a thread per RX queue.
    pub one_thread: Option<String>,
    /// DPDK in and out: the received mbufs leave themselves after the reap (`mbufs`).
    pub sends_mbufs: bool,
}

/// How every pinned port's reason begins.
pub(crate) const PINNED_POOL: &str = "its RX mempool is pinned host memory mapped for the GPU";

/// The path of pinned port `port` (`by_reference` or `staged`, and why).
#[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
pub(crate) fn decide_pinned(port: &str, f: &PinnedFacts) -> GpuIngest {
    let refused = if f.verify {
        Some("verify.sample re-runs sampled bursts on the CPU from their bytes in the burst".into())
    } else {
        f.rings.as_ref().err().cloned()
    };
    let (path, reason) = match (refused, &f.rings) {
        (Some(why), _) => (
            STAGED,
            format!(
                "{PINNED_POOL}, but {why}: its receive thread copies each frame into the slot \
                 burst"
            ),
        ),
        (None, read) => {
            let read = read.as_ref().map_or("", |r| r);
            let who = match &f.one_thread {
                None => "each RX queue's receive thread hands".to_string(),
                Some(why) => format!(
                    "one receive thread ({why}) steers each frame, reading its headers where they \
                     are, and hands"
                ),
            };
            let until = if f.sends_mbufs {
                "the TX thread sends them themselves after the reap"
            } else {
                "the burst is reaped (or sent)"
            };
            (
                BY_REFERENCE,
                format!(
                    "{PINNED_POOL}: {who} descriptors and {read} (no frame byte copied on the \
                     host); each frame's mbuf stays with its slot until {until}"
                ),
            )
        }
    };
    GpuIngest {
        port: port.to_string(),
        path: path.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_only_when_nothing_on_the_host_reads_the_frames() {
        let ok = Facts::default();
        let g = decide("nic0", &ok);
        assert_eq!((g.port.as_str(), g.path.as_str()), ("nic0", IN_PLACE));
        let cases = [
            (
                Facts {
                    software_steering: true,
                    ..ok.clone()
                },
                "applied in software",
            ),
            (
                Facts {
                    transmits: true,
                    ..ok.clone()
                },
                "transmits frames",
            ),
            (
                Facts {
                    rings: Some("queue 1: needs placement: device".into()),
                    ..ok.clone()
                },
                "queue 1: needs placement: device",
            ),
        ];
        for (f, why) in cases {
            let g = decide("nic0", &f);
            assert_eq!(g.path, STAGED, "{f:?}");
            assert!(g.reason.contains(why), "{f:?}: {}", g.reason);
            assert!(g.reason.ends_with("copied to host memory"), "{}", g.reason);
        }
        // Steering is named first: it is the reason a NIC-level fix would address.
        let all = Facts {
            software_steering: true,
            transmits: true,
            rings: Some("x".into()),
        };
        assert!(decide("p", &all).reason.contains("software"));
    }

    #[test]
    fn a_pinned_port_goes_by_reference_unless_a_queue_or_an_option_refuses() {
        let ok = PinnedFacts {
            verify: false,
            rings: Ok("the GPU reads them in place"),
            one_thread: None,
            sends_mbufs: false,
        };
        let g = decide_pinned("nic0", &ok);
        assert_eq!((g.port.as_str(), g.path.as_str()), ("nic0", BY_REFERENCE));
        assert!(
            g.reason.contains("the GPU reads them in place"),
            "{}",
            g.reason
        );
        assert!(
            g.reason.contains("each RX queue's receive thread"),
            "{}",
            g.reason
        );
        assert!(
            g.reason.contains("until the burst is reaped"),
            "{}",
            g.reason
        );
        // Software steering reads the headers in pinned memory: still by reference.
        let steered = PinnedFacts {
            one_thread: Some("rules applied in software".into()),
            sends_mbufs: true,
            ..ok.clone()
        };
        let g = decide_pinned("nic0", &steered);
        assert_eq!(g.path, BY_REFERENCE, "{}", g.reason);
        assert!(g
            .reason
            .contains("one receive thread (rules applied in software)"));
        assert!(g.reason.contains("sends them themselves"), "{}", g.reason);
        let cases = [
            (
                PinnedFacts {
                    verify: true,
                    ..ok.clone()
                },
                "verify.sample",
            ),
            (
                PinnedFacts {
                    rings: Err("queue 0: frames by reference cannot go into a tagged queue".into()),
                    ..ok.clone()
                },
                "tagged queue",
            ),
            (
                PinnedFacts {
                    rings: Err("queue 1: a composed pipeline's TX ring sends from the slot".into()),
                    ..ok.clone()
                },
                "TX ring",
            ),
        ];
        for (f, why) in cases {
            let g = decide_pinned("nic0", &f);
            assert_eq!(g.path, STAGED, "{f:?}");
            assert!(g.reason.contains(why), "{f:?}: {}", g.reason);
            assert!(g.reason.contains("pinned host memory"), "{}", g.reason);
            assert!(g.reason.ends_with("copies each frame into the slot burst"));
        }
    }
}
