//! Stage throughput on device-resident frames: frames uploaded once ([`DeviceFrames`]), the
//! pipeline run over all of them per pass (`pw_bulk`), timed with CUDA events; and the
//! host->device copy bandwidth.

use std::ffi::c_void;
use std::sync::Arc;

use super::abi::{self, Desc, QueueCounters, QueueDesc, Verdict};
use super::driver::{Context, DeviceBuffer, Event, PinnedBuffer, Stream};
use super::tables::TableVersion;
use super::{lock, GpuExecutor};

impl GpuExecutor {
    /// Copies frames to device memory for [`GpuExecutor::run_bulk`]. Stream-ordered
    /// allocations: safe while the persistent kernel runs (a plain cuMemFree would wait for it).
    pub fn upload_frames(&self, data: &[u8], descs: &[Desc]) -> anyhow::Result<DeviceFrames> {
        let stream = Stream::new(&self.ctx)?;
        // SAFETY: `stream` outlives the buffers (declared before them here; DeviceFrames
        // declares `stream` after them). The only work that uses them is run_bulk's kernel and
        // the copies of this file, all on `stream` itself (ordered before the free).
        let alloc = |len: usize| unsafe { DeviceBuffer::new_async(&self.ctx, len, &stream) };
        let d = alloc(data.len())?;
        d.upload_on(&stream, data)?;
        let nb = std::mem::size_of_val(descs);
        let ds = alloc(nb)?;
        // SAFETY: Desc is repr(C) plain data.
        ds.upload_on(&stream, unsafe {
            std::slice::from_raw_parts(descs.as_ptr() as *const u8, nb)
        })?;
        let v = alloc(descs.len() * std::mem::size_of::<Verdict>())?;
        let counters = alloc(std::mem::size_of::<QueueCounters>())?;
        counters.zero_on(&stream)?;
        // The table in force now, kept alive by the frames (a later swap cannot free it).
        let table = self.current_table();
        let params = self.current_params();
        let n_rules = table.as_ref().map_or(0, |t| t.n_rules);
        // Its own per-rule hits: bulk runs must not add to the queues' counters.
        let hits = alloc(n_rules as usize * 8)?;
        hits.zero_on(&stream)?;
        let qd = QueueDesc {
            pipeline: self.pipeline_flags & !abi::PIPE_META_OUT,
            counters: counters.ptr,
            rule_hits: if n_rules > 0 && self.pipeline_flags & abi::PIPE_COUNT != 0 {
                hits.ptr
            } else {
                0
            },
            ctas: 1,
            // Composed pipelines: the first queue's stage counters and the parameter table.
            stage_counters: self
                .queues
                .first()
                .and_then(|q| lock(q).stage_counters.as_ref().map(|b| b.ptr))
                .unwrap_or(0),
            stage_params: params.as_ref().map_or(0, |p| p.table_addr()),
            acl_tables: table.as_ref().map_or(0, |t| t.tables_addr()),
            n_rules,
            default_action: table
                .as_ref()
                .map_or(self.default_action, |t| t.default_action),
            ..Default::default()
        };
        let qdb = alloc(std::mem::size_of::<QueueDesc>())?;
        // SAFETY: QueueDesc is repr(C) plain data.
        qdb.upload_on(&stream, unsafe {
            std::slice::from_raw_parts(
                &qd as *const QueueDesc as *const u8,
                std::mem::size_of::<QueueDesc>(),
            )
        })?;
        Ok(DeviceFrames {
            _table: table,
            _params: params,
            data: d,
            descs: ds,
            verdicts: v,
            counters,
            hits,
            qdesc: qdb,
            n: descs.len() as u32,
            stream,
        })
    }

    /// Runs the pipeline over all frames `reps` times; returns the GPU time of each pass in
    /// milliseconds (CUDA events).
    pub fn run_bulk(&self, f: &DeviceFrames, reps: usize) -> anyhow::Result<Vec<f64>> {
        self.ctx.bind()?;
        let threads = 256u32;
        let per_sm = self.f_bulk.occupancy(threads)?.max(1);
        // Per-queue state changed in flow order (conntrack) takes one block: several would
        // apply frames of one flow at once.
        let grid = if pktwarp_kernels::codegen::pipeline_orders_flows(&self.stage_specs) {
            1
        } else {
            (per_sm * self.ctx.info.multiprocessors).min(f.n.div_ceil(threads).max(1))
        };
        let mut out = Vec::with_capacity(reps);
        let (e0, e1) = (Event::new(&self.ctx)?, Event::new(&self.ctx)?);
        for _ in 0..reps {
            let mut qd = f.qdesc.ptr;
            let mut data = f.data.ptr;
            let mut descs = f.descs.ptr;
            let mut n = f.n;
            let mut v = f.verdicts.ptr;
            let mut params = [
                &mut qd as *mut u64 as *mut c_void,
                &mut data as *mut u64 as *mut c_void,
                &mut descs as *mut u64 as *mut c_void,
                &mut n as *mut u32 as *mut c_void,
                &mut v as *mut u64 as *mut c_void,
            ];
            f.stream.record(&e0)?;
            // SAFETY: matches pw_bulk(const pw_queue_desc*, const uint8_t*, const pw_desc*,
            // uint32_t, pw_verdict*); all buffers hold n entries.
            unsafe { self.f_bulk.launch(&f.stream, grid, threads, &mut params)? };
            f.stream.record(&e1)?;
            e1.synchronize()?;
            out.push(e0.elapsed_ms(&e1)? as f64);
        }
        Ok(out)
    }

    /// The verdicts of the last bulk run.
    pub fn bulk_verdicts(&self, f: &DeviceFrames) -> anyhow::Result<Vec<Verdict>> {
        let mut v = vec![Verdict::default(); f.n as usize];
        let nb = std::mem::size_of_val(v.as_slice());
        // SAFETY: Verdict is repr(C) plain data; the buffer is exactly nb bytes.
        let raw = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, nb) };
        self.ctx.bind()?;
        f.verdicts.download_on(&f.stream, raw)?;
        Ok(v)
    }
}

/// Host->device copy bandwidth from pinned memory on device `device` (bytes per second),
/// `bytes` per copy, median of `reps`. Call it when no persistent kernel runs: freeing the
/// buffers synchronises the device.
pub fn measure_htod(device: u32, bytes: usize, reps: usize) -> anyhow::Result<f64> {
    let ctx = Context::new(device).map_err(|e| anyhow::anyhow!("{e}"))?;
    let src = PinnedBuffer::new(&ctx, bytes)?;
    let dst = DeviceBuffer::new(&ctx, bytes)?;
    let s = Stream::new(&ctx)?;
    let (e0, e1) = (Event::new(&ctx)?, Event::new(&ctx)?);
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        s.record(&e0)?;
        // SAFETY: both buffers hold `bytes`.
        unsafe { s.copy_htod(dst.ptr, src.host, bytes)? };
        s.record(&e1)?;
        e1.synchronize()?;
        t.push(e0.elapsed_ms(&e1)? as f64);
    }
    t.sort_by(f64::total_cmp);
    Ok(bytes as f64 / (t[t.len() / 2] / 1e3))
}

/// Frames resident in device memory, for stage throughput.
pub struct DeviceFrames {
    _table: Option<Arc<TableVersion>>,
    _params: Option<Arc<super::stages::StageParams>>,
    data: DeviceBuffer,
    descs: DeviceBuffer,
    verdicts: DeviceBuffer,
    counters: DeviceBuffer,
    hits: DeviceBuffer,
    qdesc: DeviceBuffer,
    n: u32,
    stream: Stream,
}

impl DeviceFrames {
    pub fn len(&self) -> usize {
        self.n as usize
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Per-rule hits accumulated over every bulk run so far.
    pub fn rule_hits(&self) -> anyhow::Result<Vec<u64>> {
        let mut raw = vec![0u8; self.hits.len];
        self.hits.download_on(&self.stream, &mut raw)?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect())
    }

    /// Counters accumulated over every bulk run so far.
    pub fn counters(&self) -> anyhow::Result<QueueCounters> {
        let mut c = QueueCounters::default();
        // SAFETY: QueueCounters is repr(C) plain data of exactly this size.
        let raw = unsafe {
            std::slice::from_raw_parts_mut(
                &mut c as *mut QueueCounters as *mut u8,
                std::mem::size_of::<QueueCounters>(),
            )
        };
        self.counters.download_on(&self.stream, raw)?;
        Ok(c)
    }
}
