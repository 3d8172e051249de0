//! What the daemon's GPU host side needs of the GPU, queue by queue. [`MultiGpu`] is the real
//! one; the tests put a stand-in behind the same trait (the CPU pipeline run at submit), so the
//! threading around it runs in CI, where there is no GPU.

use crate::burst::{Burst, FrameDesc};
use crate::executor::gpu::abi::{StageCounters, TxDesc, Verdict};
use crate::executor::gpu::multi::MultiGpu;
use crate::executor::gpu::{AclTablesRef, Restarted, SubmitError};

/// A finished burst's TX ring, as its kernel left it: the frames to send, in order, and the
/// slot's data area they lie in (frames as the stages left them).
pub(crate) struct TxView<'a> {
    pub descs: &'a [TxDesc],
    pub data: &'a [u8],
    /// Each descriptor's send time (a pipeline that sets them), else empty.
    pub times: &'a [u64],
}

/// What [`QueueDevice::poll`] calls for each finished burst.
pub(crate) type PollFn<'a> = dyn FnMut(u32, &[Verdict], Option<TxView<'_>>) + 'a;

/// Frames copied into host memory a device reads ([`QueueDevice::host_frames`]).
pub(crate) struct HostFrames {
    /// The device address of the first byte.
    pub base: u64,
    /// Where the host reads the same bytes, and how many there are: the TX threads send a
    /// frame no stage changed from here (see [`super::FrameStore`]).
    pub host: *const u8,
    pub len: usize,
    /// Keeps the memory allocated. Dropped only once the device's kernels have stopped, not
    /// when the last burst naming it is reaped: freeing pinned memory (`cuMemFreeHost`) waits
    /// for every kernel of the context, and a persistent kernel returns only on its exit flag
    /// (after the run) or its idle timeout, so a free during the run stalls its thread that
    /// long (the host side hands it back instead: `HostOutcome::pinned`).
    pub keep: Box<dyn Send>,
    /// How the GPU gets the frames (for the `gpu_ingest` reason).
    pub read: &'static str,
}

/// A set of GPU queues. Every call names its queue and takes `&self`: each queue's thread
/// submits to and polls its own queue while the others do the same, and one thread publishes
/// ACL tables to all of them.
///
/// # Safety
/// After [`QueueDevice::hold_slots`] returned true, the bytes of each finished burst's
/// [`TxView::data`] stay at that address, unchanged and not written by anyone, until
/// [`QueueDevice::release`] names the burst (the TX thread reads them after the poll returned).
pub(crate) unsafe trait QueueDevice: Sync {
    /// Bytes of frame data one burst may carry.
    fn slot_data_capacity(&self) -> usize;
    /// Hands a burst to queue `q`; its sequence number, or why not.
    fn submit(&self, q: usize, burst: &Burst) -> Result<u32, SubmitError>;
    /// Why some queue cannot take bursts whose frames are in GPU `gpu`'s memory; `None` when
    /// every queue can ([`QueueDevice::submit_gpu_frames`]).
    fn gpu_frames_refusal(&self, gpu: u32) -> Option<String> {
        let _ = gpu;
        Some("this device takes no frames in GPU memory".into())
    }
    /// Hands queue `q` a burst whose frames are in GPU memory: frame `i` is `descs[i].len`
    /// bytes at device address `srcs[i]`, placed at `descs[i].offset` of the slot's `bytes`.
    ///
    /// # Safety
    /// Every `srcs[i]..+descs[i].len` is device memory of the GPU [`Self::gpu_frames_refusal`]
    /// accepted, allocated and unchanged until the burst is polled back.
    unsafe fn submit_gpu_frames(
        &self,
        q: usize,
        descs: &[FrameDesc],
        srcs: &[u64],
        bytes: usize,
    ) -> Result<u32, SubmitError> {
        let _ = (descs, srcs, bytes);
        Err(SubmitError::Gpu(format!(
            "queue {q}: this device takes no frames in GPU memory"
        )))
    }
    /// `bytes` (a capture's frames) copied once into host memory the device reads (pinned,
    /// mapped), so bursts can name its frames by address ([`QueueDevice::submit_gpu_frames`]:
    /// a device ring gathers them into its slot, a mapped ring's kernel reads them in place):
    /// the address of its first byte and what keeps it allocated. `Err(why)` where it cannot.
    fn host_frames(&self, bytes: &[u8]) -> Result<HostFrames, String> {
        let _ = bytes;
        Err("this device reads no frames from host memory".into())
    }
    /// How the queues take bursts whose frames lie in pinned host memory mapped for GPU `gpu`
    /// at their host addresses (a DPDK port's `gpu_buffers: pinned` RX pool), handed by address
    /// ([`QueueDevice::submit_gpu_frames`]: a device ring gathers them, a mapped ring's kernel
    /// reads them in place), for the `gpu_ingest` reason; `Err(why)` where some queue cannot.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    fn pinned_frames(&self, gpu: u32) -> Result<&'static str, String> {
        let _ = gpu;
        Err("this device reads no frames from host memory".into())
    }
    /// Starts what `submit` only staged (graph mode); a no-op elsewhere.
    fn flush(&self, q: usize) -> anyhow::Result<()>;
    /// Calls `f(seq, verdicts, tx)` for every burst of `q` finished since the last call, in
    /// submit order, and frees their slots; `tx` is the burst's TX ring where the queue has
    /// one (composed pipelines). Errors when the queue's kernel stopped.
    fn poll(&self, q: usize, f: &mut PollFn<'_>) -> anyhow::Result<usize>;
    /// Asks that every finished burst's slot stay out of reuse until [`QueueDevice::release`]
    /// names it (called before the first submit); true when it does, and the caller then
    /// releases every burst it reaped. False: a slot is free again once its poll returned.
    fn hold_slots(&self) -> bool {
        false
    }
    /// Burst `seq` of queue `q` is sent (see [`QueueDevice::hold_slots`]).
    fn release(&self, q: usize, seq: u32) {
        let _ = (q, seq);
    }
    /// The queue kernel's heartbeat word (for the watchdog), when it has one.
    fn heartbeat(&self, q: usize) -> Option<u32>;
    /// Makes every burst submitted from now on, on every queue, classify with `tables`.
    fn publish_acl(
        &self,
        tables: &AclTablesRef<'_>,
        generation: u64,
        default_action: u8,
    ) -> anyhow::Result<()>;
    /// Makes every burst submitted from now on, on every queue, run with these stage
    /// parameter blocks (composed template).
    fn publish_stage_params(&self, params: &[Vec<u8>], generation: u64) -> anyhow::Result<()> {
        let _ = (params, generation);
        anyhow::bail!("this device cannot swap stage parameters")
    }
    /// Each queue's stage counter blocks now (composed template; empty otherwise).
    fn stage_counters(&self) -> anyhow::Result<Vec<Vec<StageCounters>>> {
        Ok(Vec::new())
    }
    /// `len` bytes at `offset` of queue `q`'s part of stage `k`'s per-queue state `i` (see
    /// `GpuExecutor::read_queue_state`): a table's counters, read while the run goes.
    fn read_queue_state(
        &self,
        k: usize,
        i: usize,
        q: usize,
        offset: usize,
        len: usize,
    ) -> anyhow::Result<Vec<u8>> {
        let _ = (i, offset, len);
        anyhow::bail!("queue {q}: this device keeps no per-queue state of stage {k}")
    }
    /// Writes `src` at `offset` of queue `q`'s part of stage `k`'s per-queue state `i` (see
    /// `GpuExecutor::write_queue_state`): flow export's ring tails and swept buckets.
    fn write_queue_state(
        &self,
        k: usize,
        i: usize,
        q: usize,
        offset: usize,
        src: &[u8],
    ) -> anyhow::Result<()> {
        let _ = (i, offset, src);
        anyhow::bail!("queue {q}: this device keeps no per-queue state of stage {k}")
    }
    /// Stops queue `q`'s kernel (see `GpuExecutor::stop_queue`); polls then reap what it
    /// finished.
    fn stop_queue(&self, q: usize) -> anyhow::Result<()> {
        anyhow::bail!("queue {q}: this device cannot restart a queue")
    }
    /// Gives up the burst the stopped kernel held and starts it again (see
    /// `GpuExecutor::relaunch_queue`).
    fn relaunch_queue(&self, q: usize) -> anyhow::Result<Restarted> {
        anyhow::bail!("queue {q}: this device cannot restart a queue")
    }
}

// SAFETY: holding reaped slots, a finished burst's data area (the mapped ring slot, or a device
// ring's staging slot) is rewritten only by a submit into that slot, which waits for the
// burst's release (GpuExecutor::first_unfree); the executor outlives the host side's threads.
unsafe impl QueueDevice for MultiGpu {
    fn slot_data_capacity(&self) -> usize {
        MultiGpu::slot_data_capacity(self) as usize
    }

    fn submit(&self, q: usize, burst: &Burst) -> Result<u32, SubmitError> {
        MultiGpu::submit(self, q, burst)
    }

    fn gpu_frames_refusal(&self, gpu: u32) -> Option<String> {
        MultiGpu::gpu_frames_refusal(self, gpu)
    }

    unsafe fn submit_gpu_frames(
        &self,
        q: usize,
        descs: &[FrameDesc],
        srcs: &[u64],
        bytes: usize,
    ) -> Result<u32, SubmitError> {
        // SAFETY: the caller's promise.
        unsafe { MultiGpu::submit_gpu_frames(self, q, descs, srcs, bytes) }
    }

    fn host_frames(&self, bytes: &[u8]) -> Result<HostFrames, String> {
        let (base, buf, read) = MultiGpu::host_frames(self, bytes)?;
        Ok(HostFrames {
            base,
            host: buf.host_ptr(),
            // The buffer may be larger than asked (at least one byte): the frames are these.
            len: bytes.len().min(buf.len()),
            keep: Box::new(buf),
            read: read.describe(),
        })
    }

    fn pinned_frames(&self, gpu: u32) -> Result<&'static str, String> {
        self.host_frames_read(gpu).map(|r| r.describe())
    }

    fn flush(&self, q: usize) -> anyhow::Result<()> {
        MultiGpu::flush(self, q)
    }

    fn poll(&self, q: usize, f: &mut PollFn<'_>) -> anyhow::Result<usize> {
        MultiGpu::poll_bursts(self, q, |r| {
            let tx = match (r.tx, r.data) {
                (Some(descs), Some(data)) => Some(TxView {
                    descs,
                    data,
                    times: r.tx_times,
                }),
                _ => None,
            };
            f(r.seq, r.verdicts, tx)
        })
    }

    fn hold_slots(&self) -> bool {
        self.hold_reaped_slots();
        true
    }

    fn release(&self, q: usize, seq: u32) {
        MultiGpu::release(self, q, seq);
    }

    fn heartbeat(&self, q: usize) -> Option<u32> {
        self.queue_state(q).map(|(_, heartbeat, _)| heartbeat)
    }

    fn publish_acl(
        &self,
        tables: &AclTablesRef<'_>,
        generation: u64,
        default_action: u8,
    ) -> anyhow::Result<()> {
        MultiGpu::publish_acl(self, tables, generation, default_action)
    }

    fn publish_stage_params(&self, params: &[Vec<u8>], generation: u64) -> anyhow::Result<()> {
        MultiGpu::publish_stage_params(self, params, generation)
    }

    fn stage_counters(&self) -> anyhow::Result<Vec<Vec<StageCounters>>> {
        Ok(self.counters()?.stages)
    }

    fn read_queue_state(
        &self,
        k: usize,
        i: usize,
        q: usize,
        offset: usize,
        len: usize,
    ) -> anyhow::Result<Vec<u8>> {
        MultiGpu::read_queue_state(self, k, i, q, offset, len)
    }

    fn write_queue_state(
        &self,
        k: usize,
        i: usize,
        q: usize,
        offset: usize,
        src: &[u8],
    ) -> anyhow::Result<()> {
        MultiGpu::write_queue_state(self, k, i, q, offset, src)
    }

    fn stop_queue(&self, q: usize) -> anyhow::Result<()> {
        MultiGpu::stop_queue(self, q, STOP_WAIT)
    }

    fn relaunch_queue(&self, q: usize) -> anyhow::Result<Restarted> {
        MultiGpu::relaunch_queue(self, q)
    }
}

/// How long a stopped queue's kernel may take to return before the restart fails.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
