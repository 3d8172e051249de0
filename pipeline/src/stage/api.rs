//! The stage API: what a stage implements in Rust ([`CustomStage`]) and what the executors hand
//! it. A registered stage gets what the built-in stages get: the frame writable with room after
//! it ([`FrameMut`], when its needs say `writes_frame`), host hooks called by either executor's
//! host side ([`StageHooks`]), and metric families and a summary section of its own
//! ([`StageMetricFamily`], [`CustomStage::summary_section`]).

use std::time::Duration;

use crate::meta::PacketMeta;
use crate::verdict::Verdict;

/// Where and when a frame came in ([`CustomStage::process_rx`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxInfo {
    /// The RX queue (its worker runs the frame; both directions of a flow share one).
    pub queue: u16,
    /// The receive time (ns since the Unix epoch): the capture's or generator's timestamp, 0
    /// when the port gives none.
    pub timestamp_ns: u64,
}

/// A stage as the `Any` it is, so that the crate that made it finds its own type again in a
/// running pipeline ([`crate::stage::Stage::custom_as`]): every `'static` stage has it.
pub trait AsAnyArc {
    fn as_any_arc(self: std::sync::Arc<Self>) -> std::sync::Arc<dyn std::any::Any + Send + Sync>;
}

impl<T: std::any::Any + Send + Sync> AsAnyArc for T {
    fn as_any_arc(self: std::sync::Arc<Self>) -> std::sync::Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

/// A stage written on the library (CPU executor): runs on every frame that reaches it, after the
/// stages before it, and may change the frame's verdict (a drop stops the pipeline for that
/// frame). Shared by every worker, so per-frame state must be atomic or per-thread.
pub trait CustomStage: Send + Sync + AsAnyArc {
    /// Called once per frame. `meta` is filled when a `parse` stage ran before this one.
    fn process(&self, frame: &[u8], meta: &PacketMeta, verdict: &mut Verdict);

    /// [`CustomStage::process`] with where and when the frame came in (the CPU executor calls
    /// this one for a stage that does not write the frame). Default: `process`.
    fn process_rx(&self, frame: &[u8], rx: RxInfo, meta: &PacketMeta, verdict: &mut Verdict) {
        let _ = rx;
        self.process(frame, meta, verdict);
    }

    /// Called instead of [`CustomStage::process`] for a stage whose needs say `writes_frame`
    /// (`StageFactory::needs`): the frame is writable and may grow into the room after it
    /// (`StageNeeds::frame_room`), and what the stage leaves is what is transmitted. `meta` is
    /// writable too (a stage that moves headers re-parses, as `vlan` does). The verdict's
    /// `out_port` picks the output port. Default: the read-only `process`.
    fn process_mut(&self, frame: &mut FrameMut<'_>, meta: &mut PacketMeta, verdict: &mut Verdict) {
        self.process(frame.bytes(), meta, verdict);
    }

    /// Names of the stage's counters (at most 7; the same as its CUDA implementation's
    /// `GpuStage::counter_names`). Default: none.
    fn counter_names(&self) -> Vec<String> {
        Vec::new()
    }

    /// The values of the named counters, same order as [`CustomStage::counter_names`], so the
    /// CPU and GPU executors report the same counters. Default: none.
    fn counters(&self) -> Vec<u64> {
        Vec::new()
    }

    /// The stage's host hooks, called by the executor's host side (not per frame). Default:
    /// none.
    fn hooks(&self) -> Option<&dyn StageHooks> {
        None
    }

    /// Metric families of the stage's own, beside its named counters
    /// (`pktwarp_stage_counter_total`): declared once per build, sampled at every scrape by
    /// [`CustomStage::metric_samples`]. Default: none.
    fn metric_families(&self) -> Vec<StageMetricFamily> {
        Vec::new()
    }

    /// The samples of the stage's families now: (family index in
    /// [`CustomStage::metric_families`], label values in the family's label order, value).
    /// Samples naming no declared family, or with another number of label values, are left out.
    fn metric_samples(&self) -> Vec<(usize, Vec<String>, f64)> {
        Vec::new()
    }

    /// The stage's host side on the GPU executor, for the stage at pipeline `position`
    /// ([`crate::stage::gpu_host::GpuHostSide`]: work on its device buffers while the run
    /// goes, and at its end); `handed` says when bursts went to the GPU. Asked once, of the
    /// build in force when the run starts (a reload's new build does not replace it); an error
    /// fails the run's start. Default: none.
    fn gpu_host_side(
        &self,
        _position: usize,
        _handed: &std::sync::Arc<crate::stage::gpu_host::HandedLog>,
    ) -> anyhow::Result<Option<Box<dyn crate::stage::gpu_host::GpuHostSide>>> {
        Ok(None)
    }

    /// A stage of the kernel library (`pktwarp_kernels::codegen::LIBRARY_STAGES`, under the
    /// stage's name) that comes through the registry door (`inspect`, `fronthaul`): its GPU
    /// parameter block and buffers now, as its CUDA function reads them, or why the GPU
    /// executor cannot run it with these options (the error names what, by file and line).
    /// Default: `None`, not such a stage (its CUDA, if any, is
    /// [`crate::stage::BuiltStage::gpu`]).
    fn gpu_library(&self) -> Option<Result<crate::stage::GpuParams, String>> {
        None
    }

    /// For such a stage: its state per queue on the GPU (one device buffer of `bytes` for every
    /// queue, zeroed at start; the executor writes the base address at `addr_at` of the block
    /// and the queue count at `addr_at + 8`), as [`crate::stage::Stage::gpu_queue_state`] of a
    /// built-in stage. Fixed for the run: a reload's block keeps the buffers the kernel has.
    /// Default: none.
    fn gpu_queue_state(&self) -> Vec<pktwarp_kernels::StageBuffer> {
        Vec::new()
    }

    /// Why `executor.kind: auto` keeps a pipeline with this stage on the CPU although the
    /// stage runs on the GPU (its GPU implementation is not yet shown equal on a GPU);
    /// `executor.kind: gpu` still runs it there. Default: none.
    fn gpu_caution(&self) -> Option<&'static str> {
        None
    }

    /// For such a stage: the generation of what [`CustomStage::gpu_library`] gives, moved on by
    /// a reload of its files, so the GPU host side publishes the new block by epoch
    /// ([`crate::stage::Pipeline::params_generation`]). Default: 0.
    fn params_generation(&self) -> u64 {
        0
    }

    /// Metric families this kind of stage exports under full names of its own, with labels of
    /// its choosing ([`crate::stage::report::ExportedFamily`]), declared once per kind: the
    /// pipeline exposes those of the first stage of each kind. Default: none.
    fn exported_families(&self) -> &'static [crate::stage::report::ExportedFamily] {
        &[]
    }

    /// The samples of [`CustomStage::exported_families`] now, over every stage of this kind in
    /// `pipeline` (asked of the first one only). Default: none.
    fn exported_samples(
        &self,
        _pipeline: &crate::stage::Pipeline,
    ) -> Vec<crate::stage::report::ExportedSamples> {
        Vec::new()
    }

    /// The stage's part of the run summary under a key of its own, for the stage at pipeline
    /// `position` ([`crate::stage::report::StageReport`]: a JSON entry, text lines, errors that
    /// fail the run); called once at the end of the run. Default: none.
    fn summary_report(&self, _position: usize) -> Option<crate::stage::report::StageReport> {
        None
    }

    /// The stage's own section of the run summary (`custom_stages[].section`): any JSON value.
    /// Default: none.
    fn summary_section(&self) -> Option<serde_json::Value> {
        None
    }

    /// For a reload that leaves the stage's options as they are: re-reads the stage's own
    /// files (a rule set) and builds them aside. `Ok(Some(r))`: `r.publish` puts them in
    /// force (called only once every other part of the reload was built); `Ok(None)`: the
    /// stage has no files; an error leaves the stage as it is. Default: `Ok(None)`.
    fn reload_files(&self) -> anyhow::Result<Option<FilesReload>> {
        Ok(None)
    }
}

/// A stage's files, built aside by [`CustomStage::reload_files`], ready to publish.
pub struct FilesReload {
    /// What was read, for the reload's log line (`12 rules from local.rules`).
    pub what: String,
    /// Puts the new files in force (one swap).
    pub publish: Box<dyn FnOnce() + Send>,
}

/// A writable frame: its bytes, and the room after them it may grow into.
pub struct FrameMut<'a> {
    buf: &'a mut [u8],
    len: &'a mut usize,
}

impl<'a> FrameMut<'a> {
    /// The frame is `buf[..*len]`; the rest of `buf` is its room.
    pub fn new(buf: &'a mut [u8], len: &'a mut usize) -> FrameMut<'a> {
        *len = (*len).min(buf.len());
        FrameMut { buf, len }
    }

    /// The frame's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..*self.len]
    }

    /// The frame's bytes, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..*self.len]
    }

    /// The frame's length.
    pub fn len(&self) -> usize {
        *self.len
    }

    /// Whether the frame has no bytes.
    pub fn is_empty(&self) -> bool {
        *self.len == 0
    }

    /// The frame and its room: the bytes it may grow into follow [`FrameMut::len`].
    pub fn buffer_mut(&mut self) -> &mut [u8] {
        self.buf
    }

    /// Bytes the frame may grow by.
    pub fn room(&self) -> usize {
        self.buf.len() - *self.len
    }

    /// Sets the frame's length (shrinking it, or growing it into its room: the bytes grown
    /// into are whatever the room held). False, and no change, past the room.
    pub fn set_len(&mut self, len: usize) -> bool {
        if len > self.buf.len() {
            return false;
        }
        *self.len = len;
        true
    }
}

/// What the host side tells a stage about the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HookCtx {
    /// `cpu` or `gpu`.
    pub executor: &'static str,
    /// The stage's position in the pipeline.
    pub position: usize,
}

/// A stage's host hooks: called on the executor's host side (never on the data path), one call
/// at a time per stage, in this order: `start` once before the first frame; `epoch_published`
/// each time a new stage-parameter generation is in force (the CPU executor: when a reload
/// publishes one; the GPU executor: once the GPU has the new parameter blocks); `periodic`
/// every `periodic_interval`; `end` once after the last frame. A hook must return quickly: the
/// host thread that calls it also publishes reloads.
pub trait StageHooks: Send + Sync {
    fn start(&self, _ctx: &HookCtx) {}
    fn epoch_published(&self, _ctx: &HookCtx, _generation: u64) {}
    /// How often `periodic` runs (`None`: never). At least [`MIN_PERIODIC`] apart.
    fn periodic_interval(&self) -> Option<Duration> {
        None
    }
    fn periodic(&self, _ctx: &HookCtx) {}
    fn end(&self, _ctx: &HookCtx) {}
}

/// Shortest interval between two `periodic` calls (a shorter one asked for is raised to it).
pub const MIN_PERIODIC: Duration = Duration::from_millis(10);

/// The kind of a stage's metric family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
}

/// A metric family a stage exposes: `pktwarp_<name>` with the stage's `stage` and `position`
/// labels, then `labels`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageMetricFamily {
    /// The family's name after `pktwarp_` (a counter's ends in `_total`).
    pub name: String,
    pub help: String,
    pub kind: MetricKind,
    /// Label names of the family's own.
    pub labels: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_grows_within_its_room_only() {
        let mut buf = [1u8, 2, 3, 0, 0];
        let mut len = 3;
        let mut f = FrameMut::new(&mut buf, &mut len);
        assert_eq!(f.bytes(), [1, 2, 3]);
        assert_eq!(f.room(), 2);
        assert!(!f.set_len(6));
        assert_eq!(f.len(), 3);
        assert!(f.set_len(5));
        f.bytes_mut()[4] = 9;
        assert_eq!(f.room(), 0);
        assert!(f.set_len(1));
        assert_eq!(f.bytes(), [1]);
        assert_eq!(len, 1);
        assert_eq!(buf[4], 9);
        // A length past the buffer is clamped, never read past.
        let mut short = [0u8; 2];
        let mut l = 7;
        assert_eq!(FrameMut::new(&mut short, &mut l).len(), 2);
    }
}
