//! Bursts whose frames are already in GPU memory (a GPUDirect NIC's receive buffers): the slot's
//! header and descriptors go from the staging slot to the device ring as for any burst, and the
//! frames are gathered device to device into the slot's data area on the queue's stream (one
//! batched copy call), before the producer index is published in the same stream order. No
//! frame byte passes through host memory.

use std::sync::atomic::{AtomicU8, Ordering};

use super::driver::Stream;
use super::{Mode, Placement};
use crate::burst::FrameDesc;

/// Why a burst of frames in GPU memory cannot go into a queue: the ring must be in device
/// memory (a mapped ring is host memory: the frames would cross PCIe twice), untagged, and
/// the mode one that copies at submit (`graph` replays copies captured from the staging slot).
pub(crate) fn refusal(placement: Placement, tagged: bool, mode: Mode) -> Option<&'static str> {
    if placement != Placement::Device {
        Some("frames in GPU memory need executor.gpu.placement: device (this queue's ring is mapped host memory)")
    } else if tagged {
        Some("frames in GPU memory cannot go into a tagged queue")
    } else if mode == Mode::Graph {
        Some("frames in GPU memory need executor.gpu.mode persistent or launch (graph replays host copies)")
    } else {
        None
    }
}

/// Why a queue cannot take bursts whose frames were loaded once into pinned host memory
/// (by reference): a device ring gathers them into its slot as it gathers frames in GPU memory
/// ([`refusal`]); a mapped ring's kernel reads each where it is, through its descriptor
/// (`PW_SLOT_REFS`), unless the queue is tagged (its slot is one tagged image) or has a TX
/// ring (a composed pipeline sends from the slot's data area, where its stages may rewrite).
pub(crate) fn host_refusal(
    placement: Placement,
    tagged: bool,
    mode: Mode,
    tx_ring: bool,
) -> Option<&'static str> {
    match placement {
        Placement::Device => refusal(placement, tagged, mode),
        Placement::Mapped if tagged => {
            Some("frames by reference cannot go into a tagged queue (executor.gpu.tagged)")
        }
        Placement::Mapped if tx_ring => Some(
            "a composed pipeline's TX ring sends from the slot's data area, so a mapped ring \
             takes the frames' bytes",
        ),
        Placement::Mapped => None,
    }
}

/// Bytes of a by-reference burst's data area in a mapped ring: the frames' base address
/// (`u64`), padded to a 16-byte granule.
pub(crate) const REFS_DATA: usize = 16;

/// A by-reference burst for a mapped ring: the base address its frames are read from (the
/// lowest of `srcs`, rounded down to 16 bytes: the kernel stages each frame's 16-byte granules
/// from there, `pw_stage_refs`) and, in `out`, `descs` with each offset from that base. Every
/// frame must end within 4 GiB of the base (a descriptor's offset is 32 bits).
pub(crate) fn by_reference(
    descs: &[FrameDesc],
    srcs: &[u64],
    out: &mut Vec<FrameDesc>,
) -> Result<u64, String> {
    if srcs.len() != descs.len() {
        return Err(format!(
            "{} frame addresses for {} descriptors",
            srcs.len(),
            descs.len()
        ));
    }
    if srcs.contains(&0) {
        return Err("a frame has no address (0)".into());
    }
    let base = srcs.iter().copied().min().unwrap_or(0) & !15;
    out.clear();
    for (i, (d, &src)) in descs.iter().zip(srcs).enumerate() {
        let off = src - base;
        let fits = off
            .checked_add(u64::from(d.len))
            .is_some_and(|end| end <= u64::from(u32::MAX));
        if !fits {
            return Err(format!(
                "frame {i} ({} bytes at {src:#x}) lies past 4 GiB from the burst's first frame \
                 ({base:#x})",
                d.len
            ));
        }
        out.push(FrameDesc {
            offset: off as u32,
            ..*d
        });
    }
    Ok(base)
}

/// Checks a burst of frames in GPU memory against its slot: one source address per
/// descriptor, every frame inside the burst's `bytes`, which fit the slot's data area
/// (`cap`). Checked in every build: the copies write where the descriptors say.
pub(crate) fn check(
    descs: &[FrameDesc],
    srcs: &[u64],
    bytes: usize,
    cap: usize,
) -> Result<(), String> {
    if srcs.len() != descs.len() {
        return Err(format!(
            "{} frame addresses for {} descriptors",
            srcs.len(),
            descs.len()
        ));
    }
    if bytes > cap {
        return Err(format!("{bytes} bytes of frames exceed the slot's {cap}"));
    }
    for (i, (d, &src)) in descs.iter().zip(srcs).enumerate() {
        let end = u64::from(d.offset) + u64::from(d.len);
        if end > bytes as u64 {
            return Err(format!(
                "frame {i} ({} bytes at {}) lies outside the burst's {bytes} bytes",
                d.len, d.offset
            ));
        }
        if src == 0 || src.checked_add(u64::from(d.len)).is_none() {
            return Err(format!("frame {i} has no valid device address ({src:#x})"));
        }
    }
    Ok(())
}

/// How the copies are issued: not tried yet, one `cuMemcpyBatchAsync` per burst, or (where the
/// driver refused the batch) one `cuMemcpyDtoDAsync` per frame. Process-wide: it is the
/// driver's property.
static HOW: AtomicU8 = AtomicU8::new(HOW_UNKNOWN);
const HOW_UNKNOWN: u8 = 0;
const HOW_BATCH: u8 = 1;
const HOW_SINGLE: u8 = 2;

/// How this process copies frames in GPU memory into slots: `cuMemcpyBatchAsync`,
/// `cuMemcpyDtoDAsync` (one per frame, where the driver refused the batch), or `none yet`.
pub fn gather_copies() -> &'static str {
    match HOW.load(Ordering::Relaxed) {
        HOW_BATCH => "cuMemcpyBatchAsync",
        HOW_SINGLE => "cuMemcpyDtoDAsync",
        _ => "none yet",
    }
}

/// Reusable arrays for one burst's copies (the batch call takes them mutable).
#[derive(Default)]
pub(crate) struct Scratch {
    dsts: Vec<u64>,
    srcs: Vec<u64>,
    sizes: Vec<usize>,
}

/// Copies frame `i` from `srcs[i]` to `data + descs[i].offset` on `stream`.
///
/// # Safety
/// [`check`] passed for these arguments; `data` is the device address of the slot's data area
/// (at least `bytes` long) and no kernel reads it before the copies complete (stream order);
/// every `srcs[i]..+descs[i].len` is device memory of this context that stays unchanged until
/// the copies complete.
pub(crate) unsafe fn copy(
    stream: &Stream,
    data: u64,
    descs: &[FrameDesc],
    srcs: &[u64],
    s: &mut Scratch,
) -> anyhow::Result<()> {
    s.dsts.clear();
    s.srcs.clear();
    s.sizes.clear();
    for (d, &src) in descs.iter().zip(srcs) {
        if d.len > 0 {
            s.dsts.push(data + u64::from(d.offset));
            s.srcs.push(src);
            s.sizes.push(d.len as usize);
        }
    }
    if s.dsts.is_empty() {
        return Ok(());
    }
    if HOW.load(Ordering::Relaxed) != HOW_SINGLE {
        // SAFETY: the arrays hold count entries each; the ranges are device memory (caller).
        match unsafe { stream.copy_dtod_batch(&mut s.dsts, &mut s.srcs, &mut s.sizes) } {
            Ok(()) => {
                if HOW.swap(HOW_BATCH, Ordering::Relaxed) == HOW_UNKNOWN {
                    tracing::info!(
                        "GPU ingest: frames in GPU memory gathered with cuMemcpyBatchAsync"
                    );
                }
                return Ok(());
            }
            Err(e) if HOW.load(Ordering::Relaxed) == HOW_UNKNOWN => {
                HOW.store(HOW_SINGLE, Ordering::Relaxed);
                tracing::warn!(
                    "GPU ingest: cuMemcpyBatchAsync refused ({e}); frames in GPU memory are \
                     gathered with one cuMemcpyDtoDAsync each"
                );
            }
            Err(e) => return Err(e.into()),
        }
    }
    for ((&dst, &src), &len) in s.dsts.iter().zip(&s.srcs).zip(&s.sizes) {
        // SAFETY: as above, one range at a time.
        unsafe { stream.copy_dtod(dst, src, len)? };
    }
    Ok(())
}

impl super::GpuExecutor {
    /// `bytes` copied once into pinned host memory mapped into this executor's context (a
    /// capture replayed by reference: its frames are then gathered into the slots like frames
    /// in GPU memory, read by the GPU over PCIe, with no per-frame copy on the host). Drop it
    /// only once this executor's kernels have stopped ([`super::GpuExecutor::shutdown`]):
    /// `cuMemFreeHost` waits for every kernel of the context, so a drop while the persistent
    /// kernel runs blocks until its exit flag or idle timeout.
    pub fn pinned_copy(&self, bytes: &[u8]) -> Result<super::driver::PinnedBuffer, String> {
        // A granule past the end: the kernel reads a referenced frame's whole 16-byte granules.
        let b = super::driver::PinnedBuffer::new(&self.ctx, bytes.len() + 16)
            .map_err(|e| format!("pinned host memory of {} bytes: {e}", bytes.len()))?;
        // SAFETY: just allocated with at least `bytes.len()` bytes; no kernel knows it yet.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), b.host_ptr(), bytes.len()) };
        Ok(b)
    }

    /// Why queue `queue` cannot take bursts whose frames are loaded in pinned host memory
    /// (`host_refusal`); `None` when it can, and then whether its kernel reads them in
    /// place (a mapped ring) rather than a gather copying them into its slots.
    pub fn host_frames_refusal(&self, queue: usize) -> Result<bool, String> {
        let Some(qm) = self.queues.get(queue) else {
            return Err(format!("no queue {queue}"));
        };
        let q = super::lock(qm);
        match host_refusal(q.placement, q.tagged, self.opts.mode, q.tx.is_some()) {
            Some(why) => Err(why.to_string()),
            None => Ok(q.placement == Placement::Mapped),
        }
    }

    /// Why queue `queue` cannot take bursts whose frames are in GPU memory
    /// ([`super::GpuExecutor::submit_gpu_frames`]); `None` when it can.
    pub fn gpu_frames_refusal(&self, queue: usize) -> Option<String> {
        let Some(qm) = self.queues.get(queue) else {
            return Some(format!("no queue {queue}"));
        };
        let q = super::lock(qm);
        refusal(q.placement, q.tagged, self.opts.mode).map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(offset: u32, len: u32) -> FrameDesc {
        FrameDesc {
            offset,
            len,
            ..FrameDesc::default()
        }
    }

    #[test]
    fn check_refuses_what_would_write_outside_the_slot() {
        let d = [desc(0, 64), desc(128, 60)];
        assert!(check(&d, &[0x1000, 0x2000], 188, 4096).is_ok());
        let e = check(&d, &[0x1000], 188, 4096).unwrap_err();
        assert!(e.contains("1 frame addresses for 2 descriptors"), "{e}");
        let e = check(&d, &[0x1000, 0x2000], 187, 4096).unwrap_err();
        assert!(e.contains("frame 1 (60 bytes at 128) lies outside"), "{e}");
        let e = check(&d, &[0x1000, 0x2000], 5000, 4096).unwrap_err();
        assert!(e.contains("exceed the slot's 4096"), "{e}");
        let e = check(&d, &[0x1000, 0], 188, 4096).unwrap_err();
        assert!(e.contains("frame 1 has no valid device address"), "{e}");
        let e = check(&d, &[u64::MAX - 10, 0x2000], 188, 4096).unwrap_err();
        assert!(e.contains("frame 0 has no valid device address"), "{e}");
    }

    #[test]
    fn by_reference_offsets_are_from_the_lowest_address() {
        let d = [desc(0, 64), desc(64, 60), desc(124, 0)];
        let mut out = Vec::new();
        let base = by_reference(&d, &[0x5000, 0x1000, 0x1040], &mut out).unwrap();
        assert_eq!(base, 0x1000);
        let offs: Vec<(u32, u32)> = out.iter().map(|d| (d.offset, d.len)).collect();
        assert_eq!(offs, [(0x4000, 64), (0, 60), (0x40, 0)]);
        // The base is 16-byte aligned; each frame keeps its place in its granule.
        let base = by_reference(&d, &[0x5003, 0x100b, 0x1047], &mut out).unwrap();
        assert_eq!(base, 0x1000);
        let offs: Vec<u32> = out.iter().map(|d| d.offset).collect();
        assert_eq!(offs, [0x4003, 0xb, 0x47]);
        let far = 0x1000 + u64::from(u32::MAX);
        let e = by_reference(&d, &[0x1000, far, 0x1040], &mut out).unwrap_err();
        assert!(e.contains("frame 1 (60 bytes"), "{e}");
        let e = by_reference(&d, &[0x1000, 0, 0x1040], &mut out).unwrap_err();
        assert!(e.contains("no address"), "{e}");
        let e = by_reference(&d, &[0x1000], &mut out).unwrap_err();
        assert!(e.contains("1 frame addresses for 3"), "{e}");
    }

    #[test]
    fn mapped_rings_read_loaded_frames_in_place_unless_tagged_or_sending_from_the_slot() {
        assert!(host_refusal(Placement::Mapped, false, Mode::Persistent, false).is_none());
        assert!(host_refusal(Placement::Mapped, false, Mode::Graph, false).is_none());
        let e = host_refusal(Placement::Mapped, true, Mode::Persistent, false).unwrap();
        assert!(e.contains("tagged"), "{e}");
        let e = host_refusal(Placement::Mapped, false, Mode::Persistent, true).unwrap();
        assert!(e.contains("TX ring"), "{e}");
        // Device rings gather, as frames in GPU memory.
        assert!(host_refusal(Placement::Device, false, Mode::Launch, true).is_none());
        assert!(host_refusal(Placement::Device, false, Mode::Graph, false).is_some());
    }

    #[test]
    fn only_untagged_device_rings_outside_graph_mode_take_device_frames() {
        assert!(refusal(Placement::Device, false, Mode::Persistent).is_none());
        assert!(refusal(Placement::Device, false, Mode::Launch).is_none());
        let e = refusal(Placement::Mapped, false, Mode::Persistent).unwrap();
        assert!(e.contains("placement: device"), "{e}");
        assert!(refusal(Placement::Device, true, Mode::Persistent).is_some());
        let e = refusal(Placement::Device, false, Mode::Graph).unwrap();
        assert!(e.contains("persistent or launch"), "{e}");
    }
}
