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
}
