//! Queues spread over several GPUs: one [`GpuExecutor`] per entry of `executor.gpu.devices`
//! (its own context, kernel module, rings and persistent CTA group), queue k on entry
//! `k % n` (round-robin), so each queue's ring and kernel live on one GPU. [`MultiGpu`] offers
//! the single executor's queue API over global queue numbers; with one device it is a thin shell
//! around one executor.
//!
//! A device index named twice gets two executors on that GPU (not deduplicated): `--devices 0,0`
//! exercises the whole multi-GPU path on a one-GPU machine. Their persistent CTAs must fit on
//! the GPU together, which construction checks. Every executor is built before any persistent
//! kernel starts (a module load waits for the kernels running on its GPU).

use std::sync::Arc;
use std::time::Duration;

use super::{
    AclTablesRef, CountersSnapshot, GpuExecutor, GpuOptions, KernelImage, PipelineDesc, SubmitError,
};
use crate::burst::Burst;
use crate::meta::PacketMeta;

use super::abi::Verdict;

/// `executor.gpu.devices`: device indices, or every visible GPU.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Devices {
    All,
    List(Vec<u32>),
}

impl<'de> serde::Deserialize<'de> for Devices {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Devices;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of GPU indices such as [0, 1], or `all`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Devices, E> {
                if v == "all" {
                    Ok(Devices::All)
                } else {
                    Err(E::custom(format!(
                        "`{v}`: expected a list of GPU indices such as [0, 1], or `all`"
                    )))
                }
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Devices, A::Error> {
                let mut out = Vec::new();
                while let Some(i) = a.next_element::<u32>()? {
                    out.push(i);
                }
                Ok(Devices::List(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// The GPU of each executor, in order: `devices` resolved against the `count` GPUs present, or
/// `[device]` without it. A missing GPU is an error naming the index and how many exist.
pub fn resolve_devices(opts: &GpuOptions, count: u32) -> Result<Vec<u32>, String> {
    let list = match &opts.devices {
        None => vec![opts.device],
        Some(Devices::All) => (0..count).collect(),
        Some(Devices::List(l)) => l.clone(),
    };
    if list.is_empty() {
        return Err(match &opts.devices {
            Some(Devices::All) => "executor.gpu.devices: `all`, but no GPU is present".into(),
            _ => "executor.gpu.devices: the list names no GPU".into(),
        });
    }
    for (i, &d) in list.iter().enumerate() {
        if d >= count {
            let key = if opts.devices.is_some() {
                format!("executor.gpu.devices[{i}]")
            } else {
                "executor.gpu.device".to_string()
            };
            return Err(format!(
                "{key}: GPU {d} does not exist: {count} GPU(s) present{}",
                if count > 0 {
                    format!(" (indices 0..={})", count - 1)
                } else {
                    String::new()
                }
            ));
        }
    }
    Ok(list)
}

/// Queue k -> (executor k % n, its local queue k / n). Every executor needs a queue.
pub fn assign_queues(n_execs: usize, n_queues: usize) -> Result<Vec<(usize, usize)>, String> {
    if n_execs == 0 {
        return Err("no GPU executor".into());
    }
    if n_queues < n_execs {
        return Err(format!(
            "executor.gpu.devices names {n_execs} GPUs but there are {n_queues} queue(s): every \
             GPU needs at least one queue (raise queues.count)"
        ));
    }
    Ok((0..n_queues).map(|k| (k % n_execs, k / n_execs)).collect())
}

/// The `gpu` metrics label (device index) of each of `n_queues` queues, as [`MultiGpu::new`]
/// places them; empty when the devices cannot be resolved (no driver: the executor then fails
/// to start with the reason).
pub fn queue_gpu_labels(opts: &GpuOptions, n_queues: usize) -> Vec<String> {
    let Ok(count) = super::driver::device_count() else {
        return Vec::new();
    };
    let Ok(devices) = resolve_devices(opts, count) else {
        return Vec::new();
    };
    match assign_queues(devices.len(), n_queues) {
        Ok(map) => map.iter().map(|&(e, _)| devices[e].to_string()).collect(),
        Err(_) => Vec::new(),
    }
}

/// How the queues take frames handed over by reference ([`MultiGpu::host_frames`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostFramesRead {
    /// Device rings: gathered into the ring slots (the copy engine reads them over PCIe).
    Gathered,
    /// Mapped rings: each kernel reads its frames where they are, through the descriptors.
    InPlace,
    /// Some queues of each.
    Both,
}

impl HostFramesRead {
    /// How the GPU gets the frames, for the `gpu_ingest` reason.
    pub fn describe(self) -> &'static str {
        match self {
            HostFramesRead::Gathered => "the GPU gathers the frames into the device ring slots",
            HostFramesRead::InPlace => {
                "each queue's kernel reads the frames where they are, through the descriptors \
                 (mapped rings: no frame byte in the ring)"
            }
            HostFramesRead::Both => {
                "device rings gather the frames into their slots, mapped rings' kernels read \
                 them where they are"
            }
        }
    }
}

/// Several GPU executors behind global queue numbers.
pub struct MultiGpu {
    execs: Vec<GpuExecutor>,
    devices: Vec<u32>,
    map: Vec<(usize, usize)>,
    /// Where the stages' host sides learn when bursts were handed over.
    handed: Option<Arc<crate::stage::gpu_host::HandedLog>>,
}

impl MultiGpu {
    /// One executor per resolved device, queues round-robin. `opts.devices` (or `opts.device`)
    /// picks the GPUs.
    pub fn new(
        opts: GpuOptions,
        pipeline: PipelineDesc<'_>,
        n_queues: usize,
        image: &KernelImage,
    ) -> anyhow::Result<MultiGpu> {
        opts.validate().map_err(anyhow::Error::msg)?;
        let count = match super::driver::device_count() {
            Ok(c) => c,
            Err(e) => anyhow::bail!("executor gpu: no usable GPU: {e}"),
        };
        let devices = resolve_devices(&opts, count).map_err(anyhow::Error::msg)?;
        let map = assign_queues(devices.len(), n_queues).map_err(anyhow::Error::msg)?;
        let mut execs: Vec<GpuExecutor> = Vec::with_capacity(devices.len());
        for (e, &dev) in devices.iter().enumerate() {
            let local = map.iter().filter(|(x, _)| *x == e).count();
            let mut o = opts.clone();
            o.device = dev;
            o.devices = None;
            // Persistent CTAs of earlier executors on the same GPU.
            let beside: usize = execs
                .iter()
                .zip(&devices)
                .filter(|(_, &d)| d == dev)
                .map(|(x, _)| x.persistent_ctas())
                .sum();
            let ex = GpuExecutor::new_beside(o, pipeline, local, image, beside)
                .map_err(|err| anyhow::anyhow!("GPU {dev} (executor {e}): {err:#}"))?;
            execs.push(ex);
        }
        // Persistent kernels start only once every executor is built: building one (module
        // load, setup copies) on a GPU whose persistent kernel already runs waits for that
        // kernel to end (seen on the H200: `--devices 0,0` hung until the step's time limit).
        for (ex, dev) in execs.iter_mut().zip(&devices) {
            ex.start()
                .map_err(|err| anyhow::anyhow!("GPU {dev}: {err:#}"))?;
        }
        Ok(MultiGpu {
            execs,
            devices,
            map,
            handed: None,
        })
    }

    /// Records every burst handed over from now on in `log` (by its frames' receive times).
    pub fn set_handed_log(&mut self, log: Arc<crate::stage::gpu_host::HandedLog>) {
        self.handed = Some(log);
    }

    pub fn n_queues(&self) -> usize {
        self.map.len()
    }

    /// The executors, in device-list order.
    pub fn executors(&self) -> &[GpuExecutor] {
        &self.execs
    }

    /// The device index of each executor.
    pub fn devices(&self) -> &[u32] {
        &self.devices
    }

    /// The GPU (device index) queue `q` runs on.
    pub fn device_of(&self, q: usize) -> Option<u32> {
        self.map.get(q).map(|&(e, _)| self.devices[e])
    }

    /// (executor, local queue) of queue `q`.
    pub fn route(&self, q: usize) -> Option<(usize, usize)> {
        self.map.get(q).copied()
    }

    fn at(&self, q: usize) -> anyhow::Result<(&GpuExecutor, usize)> {
        let (e, l) = self
            .map
            .get(q)
            .copied()
            .ok_or_else(|| anyhow::anyhow!("no queue {q}"))?;
        Ok((&self.execs[e], l))
    }

    /// Bytes of frame data one burst may carry (the same on every executor).
    pub fn slot_data_capacity(&self) -> u32 {
        self.execs
            .iter()
            .map(GpuExecutor::slot_data_capacity)
            .min()
            .unwrap_or(0)
    }

    pub fn submit(&self, q: usize, burst: &Burst) -> Result<u32, SubmitError> {
        let (e, l) = self.map.get(q).copied().ok_or(SubmitError::NoQueue(q))?;
        let seq = self.execs[e].submit(l, burst).map_err(|err| match err {
            SubmitError::RingFull { slots, .. } => SubmitError::RingFull { queue: q, slots },
            SubmitError::NoQueue(_) => SubmitError::NoQueue(q),
            other => other,
        })?;
        if let Some(h) = &self.handed {
            h.record(burst, std::time::Instant::now());
        }
        Ok(seq)
    }

    /// Why some queue cannot take bursts whose frames are in GPU `gpu`'s memory (it runs on
    /// another GPU, or its ring cannot: [`GpuExecutor::gpu_frames_refusal`]); `None` when
    /// every queue can.
    pub fn gpu_frames_refusal(&self, gpu: u32) -> Option<String> {
        for (q, &(e, l)) in self.map.iter().enumerate() {
            let on = self.devices[e];
            if on != gpu {
                return Some(format!(
                    "queue {q} runs on GPU {on} and the frames are in GPU {gpu}'s memory"
                ));
            }
            if let Some(why) = self.execs[e].gpu_frames_refusal(l) {
                return Some(format!("queue {q}: {why}"));
            }
        }
        None
    }

    /// `bytes` copied once into pinned host memory mapped for the queues' GPU, for frames
    /// handed over by reference (see [`GpuExecutor::pinned_copy`]): the device address of its
    /// first byte, the buffer, and how the queues take the frames (`HostFramesRead`). Refused
    /// where [`MultiGpu::host_frames_read`] refuses, for the first GPU.
    pub fn host_frames(
        &self,
        bytes: &[u8],
    ) -> Result<(u64, super::driver::PinnedBuffer, HostFramesRead), String> {
        let gpu = *self.devices.first().ok_or("no GPU")?;
        let read = self.host_frames_read(gpu)?;
        let b = self.execs[0].pinned_copy(bytes)?;
        Ok((b.dev_ptr(), b, read))
    }

    /// How the queues take frames in pinned host memory mapped for GPU `gpu` (by reference:
    /// loaded frames, or a DPDK port's pinned RX pool), or why not: some queue runs on another
    /// GPU, or cannot take frames by address ([`GpuExecutor::host_frames_refusal`]).
    pub fn host_frames_read(&self, gpu: u32) -> Result<HostFramesRead, String> {
        let (mut mapped, mut device) = (0, 0);
        for (q, &(e, l)) in self.map.iter().enumerate() {
            let on = self.devices[e];
            if on != gpu {
                return Err(format!(
                    "queue {q} runs on GPU {on} and the frames are pinned for GPU {gpu}"
                ));
            }
            match self.execs[e].host_frames_refusal(l) {
                Ok(true) => mapped += 1,
                Ok(false) => device += 1,
                Err(why) => return Err(format!("queue {q}: {why}")),
            }
        }
        Ok(match (mapped, device) {
            (_, 0) => HostFramesRead::InPlace,
            (0, _) => HostFramesRead::Gathered,
            _ => HostFramesRead::Both,
        })
    }

    /// [`GpuExecutor::submit_gpu_frames`] on queue `q`'s executor.
    ///
    /// # Safety
    /// As [`GpuExecutor::submit_gpu_frames`], on the GPU [`MultiGpu::device_of`] names for `q`.
    pub unsafe fn submit_gpu_frames(
        &self,
        q: usize,
        descs: &[crate::burst::FrameDesc],
        srcs: &[u64],
        bytes: usize,
    ) -> Result<u32, SubmitError> {
        let (e, l) = self.map.get(q).copied().ok_or(SubmitError::NoQueue(q))?;
        // SAFETY: the caller's promise, for this queue's GPU.
        let seq =
            unsafe { self.execs[e].submit_gpu_frames(l, descs, srcs, bytes) }.map_err(|err| {
                match err {
                    SubmitError::RingFull { slots, .. } => {
                        SubmitError::RingFull { queue: q, slots }
                    }
                    SubmitError::NoQueue(_) => SubmitError::NoQueue(q),
                    other => other,
                }
            })?;
        if let Some(h) = &self.handed {
            h.record_descs(descs, std::time::Instant::now());
        }
        Ok(seq)
    }

    pub fn flush(&self, q: usize) -> anyhow::Result<()> {
        let (ex, l) = self.at(q)?;
        ex.flush(l)
    }

    pub fn in_flight(&self, q: usize) -> u32 {
        self.at(q).map_or(0, |(ex, l)| ex.in_flight(l))
    }

    pub fn poll(
        &self,
        q: usize,
        f: impl FnMut(u32, &[Verdict], Option<&[PacketMeta]>),
    ) -> anyhow::Result<usize> {
        let (ex, l) = self.at(q)?;
        ex.poll(l, f)
    }

    /// [`GpuExecutor::poll_bursts`] of queue `q`.
    pub fn poll_bursts(
        &self,
        q: usize,
        f: impl FnMut(&super::Reaped<'_>),
    ) -> anyhow::Result<usize> {
        let (ex, l) = self.at(q)?;
        ex.poll_bursts(l, f)
    }

    pub fn poll_tagged(
        &self,
        q: usize,
        f: impl FnMut(u32, u64, &[Verdict], Option<&[PacketMeta]>),
    ) -> anyhow::Result<usize> {
        let (ex, l) = self.at(q)?;
        ex.poll_tagged(l, f)
    }

    pub fn drain(
        &self,
        q: usize,
        timeout: Duration,
        f: impl FnMut(u32, &[Verdict], Option<&[PacketMeta]>),
    ) -> anyhow::Result<()> {
        let (ex, l) = self.at(q)?;
        ex.drain(l, timeout, f)
    }

    /// (status, heartbeat, empty polls) of queue `q`'s kernel.
    pub fn queue_state(&self, q: usize) -> Option<(u32, u32, u64)> {
        self.at(q).ok().and_then(|(ex, l)| ex.queue_state(l))
    }

    /// Publishes a new ACL table on every GPU (see [`GpuExecutor::publish_acl`]).
    pub fn publish_acl(
        &self,
        tables: &AclTablesRef<'_>,
        generation: u64,
        default_action: u8,
    ) -> anyhow::Result<()> {
        for (ex, d) in self.execs.iter().zip(&self.devices) {
            ex.publish_acl(tables, generation, default_action)
                .map_err(|e| anyhow::anyhow!("GPU {d}: {e:#}"))?;
        }
        Ok(())
    }

    /// Publishes a new set of stage parameter blocks on every GPU (composed template; see
    /// [`GpuExecutor::publish_stage_params`]).
    pub fn publish_stage_params(&self, params: &[Vec<u8>], generation: u64) -> anyhow::Result<()> {
        for (ex, d) in self.execs.iter().zip(&self.devices) {
            ex.publish_stage_params(params, generation)
                .map_err(|e| anyhow::anyhow!("GPU {d}: {e:#}"))?;
        }
        Ok(())
    }

    /// Stops queue `q`'s kernel (see [`GpuExecutor::stop_queue`]).
    pub fn stop_queue(&self, q: usize, wait: std::time::Duration) -> anyhow::Result<()> {
        let (ex, l) = self.at(q)?;
        ex.stop_queue(l, wait)
    }

    /// Restarts queue `q`'s stopped kernel (see [`GpuExecutor::relaunch_queue`]).
    pub fn relaunch_queue(&self, q: usize) -> anyhow::Result<super::Restarted> {
        let (ex, l) = self.at(q)?;
        ex.relaunch_queue(l)
    }

    /// [`GpuExecutor::read_queue_state`] of queue `q` (on its GPU, as its local queue).
    pub fn read_queue_state(
        &self,
        k: usize,
        i: usize,
        q: usize,
        offset: usize,
        len: usize,
    ) -> anyhow::Result<Vec<u8>> {
        let (ex, l) = self.at(q)?;
        ex.read_queue_state(k, i, l, offset, len)
    }

    /// [`GpuExecutor::write_queue_state`] of queue `q` (on its GPU, as its local queue).
    pub fn write_queue_state(
        &self,
        k: usize,
        i: usize,
        q: usize,
        offset: usize,
        src: &[u8],
    ) -> anyhow::Result<()> {
        let (ex, l) = self.at(q)?;
        ex.write_queue_state(k, i, l, offset, src)
    }

    /// Replaced ACL tables not yet freed, over every GPU.
    pub fn retired_tables(&self) -> usize {
        self.execs.iter().map(GpuExecutor::retired_tables).sum()
    }

    /// Counters in global queue order; per-rule hits summed over the GPUs.
    pub fn counters(&self) -> anyhow::Result<CountersSnapshot> {
        let per: Vec<CountersSnapshot> = self
            .execs
            .iter()
            .map(GpuExecutor::counters)
            .collect::<anyhow::Result<_>>()?;
        let mut out = CountersSnapshot::default();
        for &(e, l) in &self.map {
            out.queues
                .push(per[e].queues.get(l).copied().unwrap_or_default());
            out.host
                .push(per[e].host.get(l).copied().unwrap_or_default());
            out.stages
                .push(per[e].stages.get(l).cloned().unwrap_or_default());
        }
        for s in &per {
            if out.rule_hits.len() < s.rule_hits.len() {
                out.rule_hits.resize(s.rule_hits.len(), 0);
            }
            for (a, b) in out.rule_hits.iter_mut().zip(&s.rule_hits) {
                *a += b;
            }
        }
        Ok(out)
    }

    /// Counters per executor (per GPU entry), in device-list order.
    pub fn counters_per_executor(&self) -> anyhow::Result<Vec<CountersSnapshot>> {
        self.execs.iter().map(GpuExecutor::counters).collect()
    }

    /// [`GpuExecutor::hold_reaped_slots`] on every GPU.
    pub fn hold_reaped_slots(&self) {
        for ex in &self.execs {
            ex.hold_reaped_slots();
        }
    }

    /// [`GpuExecutor::release`] of burst `seq` of queue `q`.
    pub fn release(&self, q: usize, seq: u32) {
        if let Ok((ex, l)) = self.at(q) {
            ex.release(l, seq);
        }
    }

    /// How long [`MultiGpu::shutdown`] waits for every GPU's kernels together (see
    /// [`GpuExecutor::set_stop_wait`]).
    pub fn set_stop_wait(&mut self, wait: Duration) {
        for ex in &mut self.execs {
            ex.set_stop_wait(wait);
        }
    }

    /// Stops every executor's kernels (every exit flag first, then one wait for all). The
    /// first error names its GPU; a [`super::KernelStillRunning`] stays downcastable.
    pub fn shutdown(&mut self) -> anyhow::Result<()> {
        use super::teardown::KernelOwner;
        let Some(wait) = self.execs.first().map(|ex| ex.stop_wait) else {
            return Ok(());
        };
        for ex in &mut self.execs {
            ex.request_stop();
        }
        let deadline = std::time::Instant::now() + wait;
        let mut first = None;
        for (ex, d) in self.execs.iter_mut().zip(&self.devices) {
            if let Err(e) = ex.shutdown_by(deadline) {
                first.get_or_insert(e.context(format!("GPU {d}")));
            }
        }
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(devices: Option<Devices>) -> GpuOptions {
        GpuOptions {
            devices,
            ..Default::default()
        }
    }

    #[test]
    fn devices_parse_from_yaml() {
        let o: GpuOptions = serde_saphyr::from_str("devices: [0, 1]\n").unwrap();
        assert_eq!(o.devices, Some(Devices::List(vec![0, 1])));
        let o: GpuOptions = serde_saphyr::from_str("devices: all\n").unwrap();
        assert_eq!(o.devices, Some(Devices::All));
        let e = serde_saphyr::from_str::<GpuOptions>("devices: some\n").unwrap_err();
        assert!(e.to_string().contains("`all`"), "{e}");
        let o: GpuOptions = serde_saphyr::from_str("devices: []\n").unwrap();
        assert!(o.validate().unwrap_err().contains("devices"));
    }

    #[test]
    fn missing_gpu_is_a_clear_error() {
        let e = resolve_devices(&opts(Some(Devices::List(vec![0, 2]))), 2).unwrap_err();
        assert_eq!(
            e,
            "executor.gpu.devices[1]: GPU 2 does not exist: 2 GPU(s) present (indices 0..=1)"
        );
        let e = resolve_devices(&opts(None), 0).unwrap_err();
        assert!(
            e.starts_with("executor.gpu.device: GPU 0 does not exist: 0 GPU(s)"),
            "{e}"
        );
        let e = resolve_devices(&opts(Some(Devices::All)), 0).unwrap_err();
        assert!(e.contains("no GPU"), "{e}");
        assert_eq!(
            resolve_devices(&opts(Some(Devices::All)), 3).unwrap(),
            vec![0, 1, 2]
        );
        assert_eq!(resolve_devices(&opts(None), 1).unwrap(), vec![0]);
    }

    /// GPU 0 named twice: two executors on GPU 0, queues alternate between them.
    #[test]
    fn duplicate_device_gets_two_executors() {
        let d = resolve_devices(&opts(Some(Devices::List(vec![0, 0]))), 1).unwrap();
        assert_eq!(d, vec![0, 0]);
        let m = assign_queues(d.len(), 5).unwrap();
        assert_eq!(m, vec![(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]);
        let e = assign_queues(2, 1).unwrap_err();
        assert!(e.contains("2 GPUs") && e.contains("1 queue"), "{e}");
    }

    #[test]
    fn no_gpu_is_a_clean_error() {
        if super::super::driver::driver_present() {
            crate::testdata::skip(
                file!(),
                "no_gpu_is_a_clean_error",
                "a CUDA driver is present on this machine",
            );
            return;
        }
        let image = KernelImage {
            binary: None,
            ..pktwarp_kernels::builtin_image()
        };
        let pd = PipelineDesc {
            parse: true,
            acl: None,
            count: true,
            default_action: 0,
        };
        let err = MultiGpu::new(opts(Some(Devices::List(vec![0, 1]))), pd, 2, &image)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("no usable GPU"), "{err}");
    }
}
