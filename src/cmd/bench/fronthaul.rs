//! Decompressed PRBs per second of the GPU fronthaul stage itself: the composed `[fronthaul]`
//! kernel (`pw_bulk`: a thread checks each frame, a warp decodes the PRBs of a round's frames)
//! over device-resident O-RAN U-plane frames from the `gen` port's O-RAN mode (273 PRBs, BFP9
//! and BFP14, `--fh-eaxcs` eAxCs, `--fh-slots` slots, receive times on every frame so the Ta4
//! windows are judged), no host in the loop, timed with CUDA events; against the Rust stage on
//! one CPU thread over the same frames (the median of `fronthaul_cpu`'s table, measured first
//! in the same run). Checked in the same run: the stage's PRB counter grew by every PRB of
//! every pass, and every slot grid the GPU holds equals the CPU stage's, sample for sample.

use anyhow::Context as _;
use pipeline::burst::{Burst, FrameDesc};
use pipeline::internal::executor::gpu::abi::Desc;
use pipeline::internal::executor::gpu::{GpuExecutor, GpuOptions, Mode, PipelineDesc};
use pktwarp_fronthaul::config::{CompConfig, CompHdr, CompMethodName, SinkConfig};
use pktwarp_fronthaul::gpu as fgpu;
use pktwarp_fronthaul::oran_gen::{build_uplane_frames, OranGenOptions};
use pktwarp_fronthaul::{FnSink, FronthaulConfig, FronthaulStage, SlotGrid};
use serde_json::json;
use std::sync::{Arc, Mutex};

use super::fronthaul_cpu::CpuRow;
use super::inputs::median;
use super::{Args, Json, Table};

/// A multiple of the 2.56 s frame cycle (ns since the Unix epoch): the receive times' origin.
const RADIO_EPOCH: u64 = 1_795_961_014_000_000_000 / 2_560_000_000 * 2_560_000_000;
/// 100 MHz at 30 kHz: PRBs of one carrier, and a 4T4R cell's PRBs per second (4 eAxCs x 14
/// symbols x 273 PRBs x 2000 slots).
const CARRIER_PRBS: u16 = 273;
pub(super) const CELL_PRBS_PER_S: f64 = 4.0 * 14.0 * 273.0 * 2000.0;

struct Row {
    width: u8,
    frames: usize,
    prbs_per_pass: u64,
    gpu_prbs_per_s: f64,
    cpu_prbs_per_s: f64,
    counted: bool,
    grids_equal: bool,
    gpu_ms: Vec<f64>,
}

/// The table: one row per compression width; `cpu`: the CPU table's rows (the CPU peer).
pub fn section(a: &Args, cpu: &[CpuRow], md: &mut Table, js: &mut Json) -> anyhow::Result<()> {
    md.line(format!(
        "\n### Fronthaul decompression on device-resident frames: [fronthaul] (composed: a thread checks a frame, a warp decodes its PRBs), {CARRIER_PRBS} PRBs, {} eAxCs x {} slots, 50 PRBs / 2 sections a packet\n",
        a.fh_eaxcs, a.fh_slots
    ));
    md.line("| compression | frames | PRBs a pass | GPU M PRB/s | CPU M PRB/s (1 thread) | GPU / CPU | 100 MHz 4T4R cells | PRBs counted | grids == CPU |".into());
    md.line("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |".into());
    let mut rows = Vec::new();
    for &width in &a.fh_widths {
        let cpu_prbs_per_s = cpu
            .iter()
            .find(|r| r.width == width)
            .map_or(f64::NAN, CpuRow::stage_median);
        let r = bench_width(a, width, cpu_prbs_per_s)
            .with_context(|| format!("fronthaul BFP{width}"))?;
        md.line(format!(
            "| BFP{} | {} | {} | {:.0} | {:.1} | {:.1}x | {:.0} | {} | {} |",
            r.width,
            r.frames,
            r.prbs_per_pass,
            r.gpu_prbs_per_s / 1e6,
            r.cpu_prbs_per_s / 1e6,
            r.gpu_prbs_per_s / r.cpu_prbs_per_s,
            r.gpu_prbs_per_s / CELL_PRBS_PER_S,
            r.counted,
            r.grids_equal
        ));
        rows.push(
            json!({"comp": format!("bfp{}", r.width), "frames": r.frames,
            "eaxcs": a.fh_eaxcs, "slots": a.fh_slots, "prbs_per_pass": r.prbs_per_pass,
            "gpu_prbs_per_s": r.gpu_prbs_per_s, "cpu_prbs_per_s": r.cpu_prbs_per_s,
            "cells_100mhz_4t4r": r.gpu_prbs_per_s / CELL_PRBS_PER_S,
            "prbs_counted": r.counted, "grids_equal": r.grids_equal, "gpu_ms_runs": r.gpu_ms}),
        );
    }
    js.insert("fronthaul".into(), json!(rows));
    Ok(())
}

/// The fronthaul flags checked before any table runs, each error naming its flag.
pub(super) fn check_args(a: &Args) -> anyhow::Result<()> {
    check_shape(a.fh_eaxcs, a.fh_slots)?;
    if a.fh_widths.is_empty() {
        anyhow::bail!("--fh-widths: give at least one width (1..=16)");
    }
    if let Some(w) = a.fh_widths.iter().find(|w| !(1..=16).contains(*w)) {
        anyhow::bail!("--fh-widths: {w} is not a BFP iqWidth (1..=16)");
    }
    if a.fh_rounds == 0 {
        anyhow::bail!("--fh-rounds: must be at least 1");
    }
    Ok(())
}

/// The generator's options and the stage's config for one width. The ring holds every slot
/// (`2 x max_open_slots` = 32 >= `--fh-slots`), so no two slots share grid cells and the grids
/// can be compared after the passes.
pub(super) fn setup(a: &Args, width: u8) -> anyhow::Result<(OranGenOptions, FronthaulConfig)> {
    setup_shape(width, a.fh_eaxcs, a.fh_slots)
}

/// `--fh-eaxcs` and `--fh-slots` in range: the GPU stage's eAxC limit, and slots its ring holds.
fn check_shape(eaxcs: usize, slots: u64) -> anyhow::Result<()> {
    if !(1..=fgpu::MAX_EAXCS).contains(&eaxcs) {
        anyhow::bail!("--fh-eaxcs: {eaxcs} is not in 1..={}", fgpu::MAX_EAXCS);
    }
    if !(1..=32).contains(&slots) {
        anyhow::bail!("--fh-slots: {slots} is not in 1..=32");
    }
    Ok(())
}

/// [`setup`] for `eaxcs` eAxCs x `slots` slots.
pub(super) fn setup_shape(
    width: u8,
    eaxcs: usize,
    slots: u64,
) -> anyhow::Result<(OranGenOptions, FronthaulConfig)> {
    check_shape(eaxcs, slots)?;
    let o = OranGenOptions {
        numerology: 1,
        carrier_prbs: CARRIER_PRBS,
        eaxcs: (0..eaxcs as u16).collect(),
        comp_method: CompMethodName::Bfp,
        iq_width: width,
        comp_hdr: CompHdr::Static,
        prbs_per_packet: 50,
        sections_per_packet: 2,
        slots,
        seed: u64::from(width),
        vlan: Some(100),
        ..OranGenOptions::default()
    };
    o.validate().map_err(|e| anyhow::anyhow!("gen oran: {e}"))?;
    let cfg = FronthaulConfig {
        carrier_prbs: CARRIER_PRBS,
        numerology: 1,
        comp: CompConfig {
            method: CompMethodName::Bfp,
            iq_width: width,
            hdr: CompHdr::Static,
        },
        eaxcs: o.eaxcs.clone(),
        max_open_slots: 16,
        slot_timeout_us: u64::MAX / 1000,
        sink: SinkConfig::None,
        ..FronthaulConfig::default()
    };
    Ok((o, cfg))
}

/// The generated frames, each with its receive time (100 us after its symbol starts).
pub(super) fn frames_of(o: &OranGenOptions) -> Burst {
    let mut frames = Burst::default();
    for f in build_uplane_frames(o) {
        let ts = RADIO_EPOCH + f.timestamp_ns + 100_000;
        frames.push(
            &f.data,
            FrameDesc {
                wire_len: f.data.len() as u32,
                timestamp_ns: ts,
                ..FrameDesc::default()
            },
        );
    }
    frames
}

fn bench_width(a: &Args, width: u8, cpu_prbs_per_s: f64) -> anyhow::Result<Row> {
    let (o, cfg) = setup(a, width)?;
    let frames = frames_of(&o);
    let prbs_per_pass = o.slots * o.eaxcs.len() as u64 * 14 * u64::from(CARRIER_PRBS);

    // GPU: the composed [fronthaul] kernel over device-resident frames.
    let img = fgpu::kernel_image(&cfg)?;
    let opts = GpuOptions {
        mode: Mode::Launch,
        burst_size: 32,
        ring_slots: 4,
        device: a.device,
        ..Default::default()
    };
    let pd = PipelineDesc {
        parse: false,
        acl: None,
        count: false,
        default_action: pipeline::verdict::Action::Pass as u8,
    };
    let ex = GpuExecutor::new(opts, pd, 1, &img)?;
    let descs: Vec<Desc> = frames.descs.iter().map(Desc::from).collect();
    let dev = ex.upload_frames(&frames.data, &descs)?;
    const WARM: usize = 3;
    const PASSES: usize = 10;
    ex.run_bulk(&dev, WARM)?;
    let ms = ex.run_bulk(&dev, PASSES)?;
    let gpu_prbs_per_s = prbs_per_pass as f64 / (median(&mut ms.clone()) / 1e3);
    let snap = ex.counters()?;
    let decoded: u64 = snap
        .stages
        .iter()
        .filter_map(|q| q.first())
        .map(|b| b.v[fgpu::CTR_PRBS])
        .sum();
    let counted = decoded == prbs_per_pass * (WARM + PASSES) as u64;
    let l = fgpu::Layout::new(&cfg).map_err(|e| anyhow::anyhow!(e))?;
    let gpu_slots = fgpu::read_slots(
        &l,
        &ex.read_stage_buffer(0, fgpu::BUF_GRID)?,
        &ex.read_stage_buffer(0, fgpu::BUF_MARKS)?,
        &ex.read_stage_buffer(0, fgpu::BUF_SLOT_STATE)?,
    );
    drop(dev);
    drop(ex);

    // CPU: the Rust stage on one thread keeping every slot (the comparison).
    let seen: Arc<Mutex<Vec<SlotGrid>>> = Arc::default();
    let keep = seen.clone();
    let sink = FnSink(move |g: &SlotGrid| keep.lock().expect("sink").push(g.clone()));
    let reference = FronthaulStage::with_sink(&cfg, Box::new(sink)).map_err(anyhow::Error::msg)?;
    cpu_pass(&reference, &frames);
    let grids_equal = same_grids(&gpu_slots, &seen.lock().expect("sink"));
    Ok(Row {
        width,
        frames: frames.len(),
        prbs_per_pass,
        gpu_prbs_per_s,
        cpu_prbs_per_s,
        counted,
        grids_equal,
        gpu_ms: ms,
    })
}

fn cpu_pass(st: &FronthaulStage, frames: &Burst) {
    let meta = pipeline::meta::PacketMeta::default();
    for (d, f) in frames.frames() {
        let mut v = pipeline::verdict::Verdict::PASS;
        st.process_at(f, d.timestamp_ns, &meta, &mut v);
    }
    st.flush();
}

/// Every GPU slot is one of the CPU's, with the same PRBs filled and the same samples, and the
/// GPU holds every slot the CPU closed.
fn same_grids(gpu: &[SlotGrid], cpu: &[SlotGrid]) -> bool {
    gpu.len() == cpu.len()
        && gpu.iter().all(|g| {
            cpu.iter().any(|c| {
                c.key == g.key
                    && c.filled_count() == g.filled_count()
                    && c.complete == g.complete
                    && c.data() == g.data()
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: Args,
    }

    fn args(extra: &[&str]) -> Args {
        let mut v = vec!["bench"];
        v.extend_from_slice(extra);
        Cli::try_parse_from(v).expect("bench args").a
    }

    #[test]
    fn bad_sizes_are_refused_by_name() {
        let e = setup(&args(&["--fh-slots", "33"]), 9).unwrap_err();
        assert!(e.to_string().contains("--fh-slots: 33"), "{e}");
        let e = setup(&args(&["--fh-eaxcs", "0"]), 9).unwrap_err();
        assert!(e.to_string().contains("--fh-eaxcs: 0"), "{e}");
        let (o, cfg) = setup(&args(&["--fh-eaxcs", "2", "--fh-slots", "3"]), 14).unwrap();
        assert_eq!((o.eaxcs.len(), o.slots, cfg.comp.iq_width), (2, 3, 14));
        assert!(
            fgpu::Layout::new(&cfg).unwrap().ring >= 32,
            "the ring holds every slot"
        );
    }

    #[test]
    fn grids_compare_by_key_arrivals_and_samples() {
        let (o, cfg) = setup(&args(&["--fh-eaxcs", "2", "--fh-slots", "2"]), 9).unwrap();
        let mut frames = Burst::default();
        for f in build_uplane_frames(&o) {
            frames.push(&f.data, FrameDesc::default());
        }
        let run = || {
            let seen: Arc<Mutex<Vec<SlotGrid>>> = Arc::default();
            let keep = seen.clone();
            let sink = FnSink(move |g: &SlotGrid| keep.lock().unwrap().push(g.clone()));
            let st = FronthaulStage::with_sink(&cfg, Box::new(sink)).unwrap();
            cpu_pass(&st, &frames);
            let v = seen.lock().unwrap().clone();
            v
        };
        let (a, b) = (run(), run());
        assert_eq!(a.len(), 2);
        assert!(a.iter().all(|g| g.complete));
        assert!(same_grids(&a, &b));
        assert!(!same_grids(&a[..1], &b), "a slot missing");
        // One sample changed: different.
        let l = fgpu::Layout::new(&cfg).unwrap();
        let words: Vec<u16> = match a[0].data() {
            pktwarp_fronthaul::grid::GridData::Int16(v) => {
                v.iter().map(|&x| x as u16 ^ 1).collect()
            }
            _ => unreachable!("int16 grid"),
        };
        let mut changed =
            SlotGrid::restore(a[0].key, 2, l.prbs, l.format, l.beta, &words, &|_| true);
        changed.eaxc_ids = a[0].eaxc_ids.clone();
        assert!(!same_grids(&[changed, a[1].clone()], &b));
    }
}
