//! Receiving into GPU memory: a port whose NIC writes frames straight into GPU memory
//! (GPUDirect RDMA: a DPDK port with `gpu_buffers` in GPU memory, [`super::dpdk::DpdkRx`])
//! hands the GPU executor each frame's device address instead of its bytes. The executor's
//! ingest gathers the frames device to device into the queue's ring slot; the buffers stay the
//! port's (held by [`GpuRxBurst`]) until that burst is done.

use super::{PortError, RxPort};

/// One frame received into GPU memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuFrame {
    /// Device address of the first byte (in the primary context of GPU [`GpuRx::gpu`]).
    pub addr: u64,
    /// Bytes at `addr` (the first segment's, for a chained frame).
    pub len: u32,
    /// The frame's length on the wire (more than `len` when the NIC chained it).
    pub wire_len: u32,
    /// RX queue (the NIC's choice: its RSS or its steering rules).
    pub queue: u16,
    /// The NIC's RSS hash (0 when it gave none).
    pub rss_hash: u32,
    /// The NIC's steering mark (rte_flow MARK id; 0 when none), as `FrameDesc::mark`.
    pub mark: u32,
}

/// Frames received into GPU memory, and what keeps their buffers from being reused (a DPDK
/// port's mbufs): dropping the hold gives them back to the port.
pub struct GpuRxBurst {
    pub frames: Vec<GpuFrame>,
    /// Receive time (ns since the epoch), one per burst.
    pub timestamp_ns: u64,
    /// The port's ownership of the buffers behind `frames`.
    pub hold: Box<dyn Send>,
}

/// What one [`GpuRx::rx_gpu_burst`] call produced.
pub enum GpuRxStatus {
    Frames(GpuRxBurst),
    /// Nothing now; call again.
    Idle,
    /// The source is exhausted.
    End,
}

/// A receive side whose frames are in GPU memory (see the module doc).
pub trait GpuRx: RxPort {
    /// The GPU (device ordinal) whose memory holds the frames.
    fn gpu(&self) -> u32;
    /// Receives up to `max` frames without copying them.
    fn rx_gpu_burst(&mut self, max: usize) -> Result<GpuRxStatus, PortError>;
}
