//! Composed pipelines on the GPU executor (the composed template of pktwarp-kernels): each
//! stage's parameter block in device memory, named by one table of addresses the kernel reads
//! per burst, and each queue's stage counter blocks, read back into the CPU executor's counters.

use super::abi::{
    QueueCounters, StageCounters, ACL_CTR_DEFAULT, ACL_CTR_MATCHED, MAX_STAGES, PARSE_CTR_ERRORS,
};
use super::driver::{Context, DeviceBuffer, PinnedBuffer, Stream};
use super::{lock, GpuExecutor, KernelImage, Retired};
use pktwarp_kernels::{StageKind, StageSpec, Template};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The device buffers the stages own (a slot grid, a state table), allocated zeroed once for
/// the executor and kept across parameter reloads: every published parameter set names the same
/// buffers.
#[derive(Default)]
pub(crate) struct StageBuffers {
    /// Per stage, its buffers in the order of `KernelImage::buffers[k]`.
    per_stage: Vec<Vec<(pktwarp_kernels::StageBuffer, DeviceBuffer)>>,
    /// Per stage, its per-queue state (`KernelImage::queue_state[k]`): one buffer of `bytes`
    /// times the executor's queues, queue q's part at `bytes * q`.
    per_queue: Vec<Vec<(pktwarp_kernels::StageBuffer, DeviceBuffer)>>,
    /// Queues the per-queue state covers (written beside its address into the block).
    queues: u32,
}

impl StageBuffers {
    /// Allocates (zeroed) every buffer of `image` (composed template; none for the fused one),
    /// and its per-queue state for `n_queues` queues. Called before any kernel runs, so the
    /// plain allocation does not wait for one.
    pub(crate) fn allocate(
        ctx: &Context,
        image: &KernelImage,
        n_queues: usize,
    ) -> anyhow::Result<StageBuffers> {
        let mut per_stage = Vec::new();
        for (k, list) in image.buffers.iter().enumerate() {
            let mut bufs = Vec::new();
            for b in list {
                if b.bytes == 0 {
                    anyhow::bail!("stage {k}: buffer `{}` has size 0", b.name);
                }
                let d = DeviceBuffer::new(ctx, b.bytes).map_err(|e| {
                    anyhow::anyhow!("stage {k}: buffer `{}` ({} bytes): {e}", b.name, b.bytes)
                })?;
                d.zero()?;
                bufs.push((b.clone(), d));
            }
            per_stage.push(bufs);
        }
        let queues = u32::try_from(n_queues)
            .map_err(|_| anyhow::anyhow!("{n_queues} queues do not fit 32 bits"))?;
        let mut per_queue = Vec::new();
        for (k, list) in image.queue_state.iter().enumerate() {
            let mut bufs = Vec::new();
            for b in list {
                let total = queue_state_bytes(b, n_queues).map_err(|e| {
                    anyhow::anyhow!("pipeline[{k}] (`{}`): {e}", stage_name(image, k))
                })?;
                let d = DeviceBuffer::new(ctx, total).map_err(|e| {
                    anyhow::anyhow!(
                        "pipeline[{k}] (`{}`): per-queue state `{}` ({n_queues} queues x {} \
                         bytes = {total} bytes of GPU memory): {e}",
                        stage_name(image, k),
                        b.name,
                        b.bytes
                    )
                })?;
                d.zero()?;
                tracing::info!(
                    stage = stage_name(image, k),
                    state = %b.name,
                    queues = n_queues,
                    bytes_per_queue = b.bytes,
                    "per-queue stage state: {total} bytes of GPU memory"
                );
                bufs.push((b.clone(), d));
            }
            per_queue.push(bufs);
        }
        Ok(StageBuffers {
            per_stage,
            per_queue,
            queues,
        })
    }

    /// Stage `k`'s buffer `i`: its device address and size.
    pub(crate) fn get(&self, k: usize, i: usize) -> Option<&DeviceBuffer> {
        self.per_stage.get(k)?.get(i).map(|(_, d)| d)
    }

    /// Stage `k`'s per-queue state `i`: the buffer of every queue, and one queue's bytes.
    pub(crate) fn queue_state(&self, k: usize, i: usize) -> Option<(&DeviceBuffer, usize)> {
        self.per_queue.get(k)?.get(i).map(|(b, d)| (d, b.bytes))
    }

    /// Writes each buffer's device address into its stage's parameter block.
    fn patch(&self, params: &mut [Vec<u8>]) -> anyhow::Result<()> {
        for (k, list) in self.per_stage.iter().enumerate() {
            for (spec, d) in list {
                let block = params.get_mut(k).ok_or_else(|| {
                    anyhow::anyhow!("stage {k} has buffers but no parameter block")
                })?;
                let end = spec.addr_at.checked_add(8).filter(|&e| e <= block.len());
                let Some(end) = end else {
                    anyhow::bail!(
                        "stage {k}: buffer `{}` has its address at byte {} of a {}-byte \
                         parameter block",
                        spec.name,
                        spec.addr_at,
                        block.len()
                    );
                };
                block[spec.addr_at..end].copy_from_slice(&d.ptr.to_le_bytes());
            }
        }
        for (k, list) in self.per_queue.iter().enumerate() {
            for (spec, d) in list {
                let block = params.get_mut(k).ok_or_else(|| {
                    anyhow::anyhow!("stage {k} has per-queue state but no parameter block")
                })?;
                let Some(end) = spec.addr_at.checked_add(12).filter(|&e| e <= block.len()) else {
                    anyhow::bail!(
                        "stage {k}: per-queue state `{}` has its address at byte {} of a \
                         {}-byte parameter block",
                        spec.name,
                        spec.addr_at,
                        block.len()
                    );
                };
                let at = spec.addr_at;
                block[at..at + 8].copy_from_slice(&d.ptr.to_le_bytes());
                block[at + 8..end].copy_from_slice(&self.queues.to_le_bytes());
            }
        }
        Ok(())
    }
}

/// Bytes of a per-queue state buffer for `n_queues` queues: a size of 0 or one that overflows
/// is an error naming the buffer.
pub(crate) fn queue_state_bytes(
    b: &pktwarp_kernels::StageBuffer,
    n_queues: usize,
) -> anyhow::Result<usize> {
    if b.bytes == 0 {
        anyhow::bail!("per-queue state `{}` has size 0", b.name);
    }
    b.bytes.checked_mul(n_queues).ok_or_else(|| {
        anyhow::anyhow!(
            "per-queue state `{}`: {n_queues} queues x {} bytes overflows",
            b.name,
            b.bytes
        )
    })
}

fn stage_name(image: &KernelImage, k: usize) -> &str {
    image.stages.get(k).map_or("?", |s| s.name.as_str())
}

/// The parameter blocks of one published set (epoch): every burst names one set in its slot
/// header, so a burst runs wholly with one set; a replaced set is freed once every queue has
/// reaped past the last burst that named it (as the ACL tables are).
pub(crate) struct StageParams {
    _blocks: Vec<DeviceBuffer>,
    table: DeviceBuffer,
    /// The pipeline's stage-parameter generation this set was built from.
    pub(crate) generation: u64,
    /// Stream-ordered allocation and free: never waits for the persistent kernel.
    _stream: Stream,
}

impl StageParams {
    /// Uploads one set of parameter blocks (`params[k]`: stage k's, empty for none) with the
    /// buffers' addresses patched in; returns once the copies are complete.
    pub(crate) fn upload(
        ctx: &Context,
        params: &[Vec<u8>],
        buffers: &StageBuffers,
        generation: u64,
    ) -> anyhow::Result<StageParams> {
        if params.len() > MAX_STAGES {
            anyhow::bail!(
                "{} stage parameter blocks, at most {MAX_STAGES}",
                params.len()
            );
        }
        let mut params = params.to_vec();
        buffers.patch(&mut params)?;
        let stream = Stream::new(ctx)?;
        let mut addrs = [0u64; MAX_STAGES];
        let mut blocks = Vec::new();
        for (k, p) in params.iter().enumerate() {
            if p.is_empty() {
                continue;
            }
            // SAFETY: `stream` outlives the buffers (declared before them here, and StageParams
            // declares `_stream` after them, so it drops last). No kernel sees the addresses
            // before this returns; after that a set is dropped only once every queue has reaped
            // past the last burst that named it (Retirement) or after shutdown waited for the
            // kernels, and the bulk runs that hold it (DeviceFrames) wait for their kernel.
            let b = unsafe { DeviceBuffer::new_async(ctx, p.len(), &stream) }?;
            b.upload_on(&stream, p)?;
            addrs[k] = b.ptr;
            blocks.push(b);
        }
        // SAFETY: as for the blocks above.
        let table = unsafe { DeviceBuffer::new_async(ctx, 8 * MAX_STAGES, &stream) }?;
        let bytes: Vec<u8> = addrs.iter().flat_map(|a| a.to_le_bytes()).collect();
        table.upload_on(&stream, &bytes)?;
        Ok(StageParams {
            _blocks: blocks,
            table,
            generation,
            _stream: stream,
        })
    }

    /// The first set: `image.params` (composed template); `None` for the fused template.
    pub(crate) fn initial(
        ctx: &Context,
        image: &KernelImage,
        buffers: &StageBuffers,
    ) -> anyhow::Result<Option<StageParams>> {
        if image.template != Template::Composed {
            return Ok(None);
        }
        Self::upload(ctx, &image.params, buffers, 0).map(Some)
    }

    /// Device address of the `u64[MAX_STAGES]` table.
    pub(crate) fn table_addr(&self) -> u64 {
        self.table.ptr
    }
}

impl GpuExecutor {
    /// The stage parameter set in force (composed template), if any.
    pub(crate) fn current_params(&self) -> Option<Arc<StageParams>> {
        self.params_current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The stage-parameter generation in force (0: the set the executor started with).
    pub fn params_generation(&self) -> u64 {
        self.current_params().map_or(0, |p| p.generation)
    }

    /// Parameter hot swap (composed template): uploads a new set of stage parameter blocks
    /// (`params[k]`: stage k's, the same stages as the running kernel; the stages' buffers keep
    /// their addresses) and makes every burst submitted from now on, on every queue, name it.
    /// The set it replaces is freed once every queue has reaped past the last burst that named
    /// it. The running kernels are not touched, so a burst runs wholly with one set.
    pub fn publish_stage_params(&self, params: &[Vec<u8>], generation: u64) -> anyhow::Result<()> {
        if self.stage_params.is_none() {
            anyhow::bail!(
                "the GPU executor runs the fused template, whose stages have no parameter blocks"
            );
        }
        if params.len() != self.stage_specs.len() {
            anyhow::bail!(
                "{} parameter blocks for the {} stages of the running kernel",
                params.len(),
                self.stage_specs.len()
            );
        }
        let new = Arc::new(StageParams::upload(
            &self.ctx,
            params,
            &self.stage_buffers,
            generation,
        )?);
        let mut cur = self
            .params_current
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut ends = Vec::with_capacity(self.queues.len());
        for qm in self.queues.iter() {
            let mut q = lock(qm);
            q.params = new.table_addr();
            ends.push(q.next_seq);
        }
        if let Some(old) = cur.replace(new) {
            // The first set stays alive with the executor (the queue descriptors name it).
            let first = self
                .stage_params
                .as_ref()
                .is_some_and(|f| Arc::ptr_eq(f, &old));
            if !first {
                let mut r = self.retired.lock().unwrap_or_else(|p| p.into_inner());
                r.retire(Retired::Params(old), ends);
                self.retired_len.store(r.len(), Ordering::Relaxed);
            }
        }
        drop(cur);
        self.reclaim_tables();
        Ok(())
    }

    /// Stage `k`'s buffer `i`, as it is now (a copy on the side stream; never waits for the
    /// persistent kernel, so a buffer the kernel is writing reads as some mix of old and new).
    pub fn read_stage_buffer(&self, k: usize, i: usize) -> anyhow::Result<Vec<u8>> {
        let b = self
            .stage_buffers
            .get(k, i)
            .ok_or_else(|| anyhow::anyhow!("stage {k} has no buffer {i}"))?;
        // The calling thread may have another GPU's context current (a stage's host side reads
        // every GPU's buffers in turn).
        self.ctx.bind()?;
        let mut out = vec![0u8; b.len];
        b.download_on(&self.aux_stream, &mut out)?;
        Ok(out)
    }

    /// `len` bytes of stage `k`'s buffer `i` from `offset` (a stage's host side reads part of
    /// a buffer this way while the kernel runs). An error when the range is
    /// not inside the buffer.
    pub fn read_stage_buffer_range(
        &self,
        k: usize,
        i: usize,
        offset: usize,
        len: usize,
    ) -> anyhow::Result<Vec<u8>> {
        let b = self.stage_range(k, i, offset, len)?;
        self.read_range(b, offset, len)
    }

    /// `len` bytes at `offset` of local queue `queue`'s part of stage `k`'s per-queue state
    /// `i` (a table's counters, read while the kernel runs: counters the kernel adds to
    /// atomically read as some value they held). An error when the range is not inside that
    /// queue's part.
    pub fn read_queue_state(
        &self,
        k: usize,
        i: usize,
        queue: usize,
        offset: usize,
        len: usize,
    ) -> anyhow::Result<Vec<u8>> {
        let (b, start) = self.queue_state_range(k, i, queue, offset, len)?;
        self.read_range(b, start, len)
    }

    /// Writes `src` at `offset` of local queue `queue`'s part of stage `k`'s per-queue state
    /// `i`, and waits for it (flow export's host side: a ring's tail, a quiet queue's swept
    /// buckets). The kernel may run meanwhile; what it writes there at the same time is the
    /// caller's to rule out. An error when the range is not inside that queue's part.
    pub fn write_queue_state(
        &self,
        k: usize,
        i: usize,
        queue: usize,
        offset: usize,
        src: &[u8],
    ) -> anyhow::Result<()> {
        let (b, start) = self.queue_state_range(k, i, queue, offset, src.len())?;
        self.ctx.bind()?;
        b.upload_range_on(&self.aux_stream, start, src)?;
        Ok(())
    }

    /// Stage `k`'s per-queue state `i` and where `len` bytes at `offset` of queue `queue`'s
    /// part start in it, checked to lie inside that part.
    fn queue_state_range(
        &self,
        k: usize,
        i: usize,
        queue: usize,
        offset: usize,
        len: usize,
    ) -> anyhow::Result<(&DeviceBuffer, usize)> {
        let (b, per_queue) = self
            .stage_buffers
            .queue_state(k, i)
            .ok_or_else(|| anyhow::anyhow!("stage {k} has no per-queue state {i}"))?;
        let start = per_queue
            .checked_mul(queue)
            .and_then(|base| base.checked_add(offset))
            .filter(|_| offset.checked_add(len).is_some_and(|end| end <= per_queue))
            .filter(|s| s.checked_add(len).is_some_and(|end| end <= b.len))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "stage {k} per-queue state {i}: {len} bytes at {offset} of queue {queue} \
                     past its {per_queue} bytes a queue ({} in all)",
                    b.len
                )
            })?;
        Ok((b, start))
    }

    /// `len` bytes of `b` from `offset` (checked by the caller), through the pinned bounce
    /// buffer when they fit it.
    fn read_range(&self, b: &DeviceBuffer, offset: usize, len: usize) -> anyhow::Result<Vec<u8>> {
        self.ctx.bind()?;
        let mut out = vec![0u8; len];
        if len <= READ_BOUNCE_BYTES {
            let mut bounce = self.read_bounce.lock().unwrap_or_else(|p| p.into_inner());
            if bounce.is_none() {
                *bounce = Some(PinnedBuffer::new(&self.ctx, READ_BOUNCE_BYTES)?);
            }
            if let Some(pb) = bounce.as_mut() {
                b.download_range_via(&self.aux_stream, offset, pb, &mut out)?;
                return Ok(out);
            }
        }
        b.download_range_on(&self.aux_stream, offset, &mut out)?;
        Ok(out)
    }

    /// Writes `src` into stage `k`'s buffer `i` at `offset` while the kernel runs, and waits
    /// for it (for a host side that changes a stage's state). An error when the range is not
    /// inside the buffer.
    pub fn write_stage_buffer_range(
        &self,
        k: usize,
        i: usize,
        offset: usize,
        src: &[u8],
    ) -> anyhow::Result<()> {
        let b = self.stage_range(k, i, offset, src.len())?;
        self.ctx.bind()?;
        b.upload_range_on(&self.aux_stream, offset, src)?;
        Ok(())
    }

    /// Sets the 32-bit word at `offset` of stage `k`'s buffer `i` while the kernel runs, without
    /// waiting for it; the stage-buffer reads after it are ordered behind it (the same stream).
    /// A stage's host side marks a slot closed this way: a synchronous copy per closed slot
    /// waited behind the ingest's DMA and held a completion poll ~80 us a slot on the H200.
    pub fn set_stage_word(
        &self,
        k: usize,
        i: usize,
        offset: usize,
        value: u32,
    ) -> anyhow::Result<()> {
        if offset % 4 != 0 {
            anyhow::bail!("stage {k} buffer {i}: no 32-bit word at {offset} (not 4-aligned)");
        }
        let b = self.stage_range(k, i, offset, 4)?;
        self.ctx.bind()?;
        b.set_u32_on(&self.aux_stream, offset, value)?;
        Ok(())
    }

    /// Stage `k`'s buffer `i`, checked to hold `len` bytes from `offset`.
    fn stage_range(
        &self,
        k: usize,
        i: usize,
        offset: usize,
        len: usize,
    ) -> anyhow::Result<&DeviceBuffer> {
        let b = self
            .stage_buffers
            .get(k, i)
            .ok_or_else(|| anyhow::anyhow!("stage {k} has no buffer {i}"))?;
        if offset.checked_add(len).is_none_or(|end| end > b.len) {
            anyhow::bail!(
                "stage {k} buffer {i}: {len} bytes at {offset} past its {} bytes",
                b.len
            );
        }
        Ok(b)
    }

    /// Stage `k`'s buffer `i`: its device address and size (for a consumer on the GPU, such as
    /// a PHY reading a slot grid in place).
    pub fn stage_buffer(&self, k: usize, i: usize) -> Option<(u64, usize)> {
        self.stage_buffers.get(k, i).map(|b| (b.ptr, b.len))
    }
}

/// Reads of stage buffers up to this size go through the executor's pinned bounce buffer.
const READ_BOUNCE_BYTES: usize = 64 << 10;

/// A queue's `pw_stage_counters[MAX_STAGES]`, zeroed.
pub(crate) fn new_counters(ctx: &Context) -> anyhow::Result<DeviceBuffer> {
    let b = DeviceBuffer::new(ctx, MAX_STAGES * std::mem::size_of::<StageCounters>())?;
    b.zero()?;
    Ok(b)
}

/// Reads a queue's stage counters.
pub(crate) fn read_counters(
    buf: &DeviceBuffer,
    stream: &Stream,
) -> anyhow::Result<Vec<StageCounters>> {
    let mut c = vec![StageCounters::default(); MAX_STAGES];
    // SAFETY: StageCounters is repr(C) plain u64s; the slice covers exactly the vector.
    let raw = unsafe {
        std::slice::from_raw_parts_mut(
            c.as_mut_ptr() as *mut u8,
            std::mem::size_of_val(c.as_slice()),
        )
    };
    buf.download_on(stream, raw)?;
    Ok(c)
}

/// The composed template counts parse errors and ACL matches in the built-in stages' own
/// blocks, not in the queue counters (as the fused template does): fold them in, so the queue
/// counters read the same under both templates.
pub(crate) fn fold_builtin(stages: &[StageSpec], sc: &[StageCounters], c: &mut QueueCounters) {
    for (s, k) in stages.iter().zip(sc) {
        match s.kind {
            StageKind::Parse => c.parse_errors += k.v[PARSE_CTR_ERRORS],
            StageKind::Acl | StageKind::AclRewrite => {
                c.acl_matched += k.v[ACL_CTR_MATCHED];
                c.acl_no_match += k.v[ACL_CTR_DEFAULT];
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_stage_counters_fold_into_the_queue_counters() {
        let stages: Vec<StageSpec> = ["count", "parse", "acl"]
            .iter()
            .filter_map(|n| StageSpec::builtin(n))
            .collect();
        let mut sc = vec![StageCounters::default(); 3];
        sc[1].v[PARSE_CTR_ERRORS] = 5;
        sc[2].v[ACL_CTR_MATCHED] = 7;
        sc[2].v[ACL_CTR_DEFAULT] = 11;
        sc[0].v[1] = 999; // count's bytes: not a queue counter
        let mut c = QueueCounters::default();
        fold_builtin(&stages, &sc, &mut c);
        assert_eq!((c.parse_errors, c.acl_matched, c.acl_no_match), (5, 7, 11));
    }
}
