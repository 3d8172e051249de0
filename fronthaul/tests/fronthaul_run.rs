//! `configs/fronthaul.yaml` run to its end on the CPU executor (the shipped config, fewer slots
//! so it runs in seconds): the gen port's `oran:` mode produces the U-plane frames of N slots and
//! ends; every slot closes complete, every PRB of the slot files equals what the generator
//! encoded, every packet on time, no sequence error, no decode error.

use std::path::{Path, PathBuf};

use pipeline::config;
use pipeline::daemon;
use pipeline::daemon::CpuShared;
use pktwarp_fronthaul::grid::GridData;
use pktwarp_fronthaul::oran_gen::OranGenOptions;
use pktwarp_fronthaul::raw::read_slot;
use pktwarp_fronthaul::FronthaulCounters;
use pktwarp_fronthaul::FronthaulStage;

fn configs() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs"))
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-fh-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The shipped config with `slots` slots and `sink` as the stage's sink, written into `dir`.
pub fn shipped_config(dir: &Path, slots: u64, sink: &str) -> PathBuf {
    // The binary registers the stage's config key; a test does so itself.
    pktwarp_fronthaul::register();
    let text = std::fs::read_to_string(configs().join("fronthaul.yaml")).unwrap();
    let rules = configs().join("rules/fronthaul-gen.steering.yaml");
    let text = text
        .replace("slots: 2000 ", &format!("slots: {slots} "))
        .replace(
            "rules/fronthaul-gen.steering.yaml",
            &rules.display().to_string(),
        )
        .replace("sink: none ", &format!("sink: {sink} "));
    assert!(
        text.contains(&format!("slots: {slots} ")),
        "slots key moved"
    );
    let path = dir.join("fronthaul.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The generator options of the config at `path`.
fn gen_options(path: &Path) -> OranGenOptions {
    let v: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    serde_json::from_value(v["ports"][0]["gen"]["oran"].clone()).unwrap()
}

fn run(path: &Path) -> (daemon::Summary, FronthaulCounters) {
    let cfg = config::load(path).unwrap();
    let p = daemon::prepare(cfg).unwrap();
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    let s = daemon::run_cpu(&p, &shared, ports);
    let Some(f) = p.pipeline.stages.get(1).and_then(FronthaulStage::of) else {
        panic!("stage 1 is fronthaul");
    };
    (s, f.counters())
}

/// The int16 samples of an `.npy` slot file (after its header).
fn npy_i16(path: &Path) -> Vec<i16> {
    let b = std::fs::read(path).unwrap();
    let hl = usize::from(u16::from_le_bytes([b[8], b[9]]));
    b[10 + hl..]
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect()
}

#[test]
fn the_shipped_config_runs_to_the_end_with_every_slot_complete() {
    let dir = tmpdir("run");
    let slots_dir = dir.join("slots");
    let path = shipped_config(
        &dir,
        6,
        &format!("{{ npy: {{ dir: {} }} }}", slots_dir.display()),
    );
    let o = gen_options(&path);
    assert_eq!(o.slots, 6);
    let (s, c) = run(&path);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.executor, "cpu");
    assert_eq!(
        s.rx_frames,
        o.frame_count(),
        "every generated frame, then the end"
    );
    assert_eq!(o.frame_count(), 6 * 14 * 2 * 6);
    let prbs = 6 * 14 * 2 * 273;
    assert_eq!(c.uplane, o.frame_count());
    assert_eq!(c.prbs, prbs);
    assert_eq!(
        (c.slots_complete, c.slots_partial),
        (6, 0),
        "{}",
        c.summary()
    );
    assert_eq!(c.errors_total(), 0, "{}", c.summary());
    assert_eq!(c.duplicate_prbs, 0);
    assert_eq!(c.per_eaxc.len(), 2);
    // The run summary's fronthaul block says the same.
    let f = &pktwarp_fronthaul::report::from_summary(&s.stage_reports).unwrap()[0];
    assert_eq!((f.position, f.prbs, f.rejected), (1, prbs, 0));
    assert_eq!((f.slots_complete, f.slots_partial), (6, 0));
    assert_eq!(f.per_eaxc.len(), 2);
    assert_eq!(f.per_eaxc[1].on_time, 6 * 14 * 6);
    for e in &c.per_eaxc {
        assert_eq!(e.packets, 6 * 14 * 6, "eAxC {}", e.eaxc);
        assert_eq!(e.prbs, 6 * 14 * 273);
        assert_eq!((e.early, e.on_time, e.late), (0, 6 * 14 * 6, 0));
        assert_eq!(
            (e.seq_gaps, e.seq_duplicates, e.seq_out_of_order),
            (0, 0, 0)
        );
        assert_eq!((e.slots_complete, e.slots_partial), (6, 0));
    }
    // Every PRB of every slot file is what the generator encoded.
    let mut files: Vec<PathBuf> = std::fs::read_dir(&slots_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "npy"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 6);
    let mut checked = 0u64;
    for (n, f) in files.iter().enumerate() {
        let r = o.radio(n as u64, 0);
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let want_name = format!(
            "_f{}_sf{}_s{}_complete.npy",
            r.frame_id, r.subframe_id, r.slot_id
        );
        assert!(name.ends_with(&want_name), "{name} vs {want_name}");
        let data = npy_i16(f);
        assert_eq!(data.len(), 2 * 14 * 273 * 24);
        for (i, cell) in data.chunks_exact(24).enumerate() {
            let (e, sym, prb) = (i / (14 * 273), (i / 273) % 14, i % 273);
            let want = o.expected(e, n as u64, sym as u8, prb as u16);
            let got: Vec<i32> = cell.iter().map(|&x| i32::from(x)).collect();
            assert_eq!(got, want, "slot {n} eAxC {e} symbol {sym} PRB {prb}");
            checked += 1;
        }
    }
    assert_eq!(checked, prbs);
}

#[test]
fn the_raw_sink_writes_what_gen_encoded_and_reads_back() {
    let dir = tmpdir("raw");
    let path = shipped_config(
        &dir,
        3,
        &format!("{{ raw: {} }}", dir.join("slots").display()),
    );
    let o = gen_options(&path);
    let (_, c) = run(&path);
    assert_eq!((c.slots_complete, c.slots_partial), (3, 0));
    let mut sidecars: Vec<PathBuf> = std::fs::read_dir(dir.join("slots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    sidecars.sort();
    assert_eq!(sidecars.len(), 3);
    for (n, side) in sidecars.iter().enumerate() {
        let (m, data) = read_slot(side).unwrap();
        let r = o.radio(n as u64, 0);
        assert_eq!(
            (m.frame_id, m.subframe_id, m.slot_id),
            (r.frame_id, r.subframe_id, r.slot_id)
        );
        assert_eq!(m.shape, [2, 14, 273, 12, 2]);
        assert_eq!(
            (m.eaxcs.clone(), m.numerology, m.carrier_prbs),
            (vec![0, 1], 1, 273)
        );
        assert!(m.complete);
        assert_eq!(m.prbs_filled_per_eaxc, [14 * 273, 14 * 273]);
        let GridData::Int16(v) = data else {
            panic!("int16 grid")
        };
        for (i, cell) in v.chunks_exact(24).enumerate() {
            let (e, sym, prb) = (i / (14 * 273), (i / 273) % 14, i % 273);
            let got: Vec<i32> = cell.iter().map(|&x| i32::from(x)).collect();
            assert_eq!(got, o.expected(e, n as u64, sym as u8, prb as u16));
        }
    }
}

#[test]
fn bad_oran_generator_options_are_refused_by_key() {
    let dir = tmpdir("bad");
    let good = std::fs::read_to_string(shipped_config(&dir, 2, "none")).unwrap();
    for (from, to, key) in [
        ("iq_width: 9\n", "iq_width: 0\n", "gen.oran.iq_width"),
        ("        vlan: 100", "        vlan: 5000", "gen.oran.vlan"),
        (
            "      oran:\n",
            "      count: 5\n      oran:\n",
            "gen.count",
        ),
        (
            "      oran:\n",
            "      trace: x.txt\n      oran:\n",
            "gen.trace",
        ),
        ("slots: 2 ", "slotz: 2 ", "slotz"),
        ("iq_slots: 20\n", "iq_slots: 0\n", "gen.oran.iq_slots"),
        ("iq_slots: 20\n", "iq_slots: -3\n", "iq_slots"),
    ] {
        assert!(good.contains(from), "{from:?}");
        let path = dir.join("bad.yaml");
        std::fs::write(&path, good.replacen(from, to, 1)).unwrap();
        let e = match config::load(&path) {
            Err(e) => e.to_string(),
            Ok(cfg) => match daemon::prepare(cfg).and_then(|p| daemon::open_ports(&p.cfg)) {
                Err(e) => format!("{e:#}"),
                Ok(_) => panic!("{key}: accepted"),
            },
        };
        assert!(e.contains(key), "{key}: {e}");
    }
}

/// Slots the sink fails to write (its folder removed under the run) fail the run: counted in
/// the stage's summary line and `sink_errors`, and an error of the run's summary (exit 1).
#[test]
fn sink_write_failures_fail_the_run() {
    let dir = tmpdir("sinkfail");
    let slots_dir = dir.join("slots");
    let path = shipped_config(&dir, 3, &format!("{{ raw: {} }}", slots_dir.display()));
    let cfg = config::load(&path).unwrap();
    let p = daemon::prepare(cfg).unwrap();
    std::fs::remove_dir_all(&slots_dir).expect("the sink made its folder");
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    let s = daemon::run_cpu(&p, &shared, ports);
    let f = &pktwarp_fronthaul::report::from_summary(&s.stage_reports).unwrap()[0];
    assert_eq!((f.slots_complete, f.sink_errors), (3, 3), "{f:?}");
    assert!(f.lines()[0].contains(", 3 sink errors,"), "{:?}", f.lines());
    assert!(
        s.errors
            .iter()
            .any(|e| e.contains("sink failed to deliver 3 slots")),
        "{:?}",
        s.errors
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sink whose first file is a FIFO nobody reads (a writer that hangs): the run still ends,
/// after the sink writer's stall limit, with its summary and the slots counted as sink errors.
#[cfg(unix)]
#[test]
fn a_sink_that_blocks_does_not_hang_the_end_of_the_run() {
    let dir = tmpdir("sinkfifo");
    let slots_dir = dir.join("slots");
    std::fs::create_dir_all(&slots_dir).unwrap();
    let fifo = slots_dir.join("slot_000000_f0_sf0_s0_complete.iq.partial");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let path = shipped_config(&dir, 3, &format!("{{ raw: {} }}", slots_dir.display()));
    let t = std::time::Instant::now();
    let (s, c) = run(&path);
    let took = t.elapsed();
    assert!(
        took < pktwarp_fronthaul::sink::STALL * 3,
        "the end of the run waited {took:?}"
    );
    assert_eq!((c.slots_complete, c.sink_errors), (3, 3), "{c:?}");
    assert!(!s.errors.is_empty());
    // Let the writer (blocked opening the FIFO) go, then clean up.
    let _ = std::fs::File::open(&fifo);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shipped generator's pool (`iq_slots: 20`, one radio frame) past its end: slot 20 + n
/// carries slot n's samples under its own radio time (file name, frame and subframe ids), every
/// slot still complete and equal to what the generator says it encoded, sequence ids unbroken
/// across the pool's wrap.
#[test]
fn the_shipped_generator_repeats_one_radio_frame_of_iq_under_new_radio_times() {
    let dir = tmpdir("pool");
    let slots_dir = dir.join("slots");
    let path = shipped_config(
        &dir,
        23,
        &format!("{{ npy: {{ dir: {} }} }}", slots_dir.display()),
    );
    let o = gen_options(&path);
    assert_eq!(o.iq_slots, Some(20), "the shipped config's pool");
    let (s, c) = run(&path);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(
        (c.slots_complete, c.slots_partial),
        (23, 0),
        "{}",
        c.summary()
    );
    for e in &c.per_eaxc {
        let seq = (e.seq_gaps, e.seq_duplicates, e.seq_out_of_order);
        assert_eq!(seq, (0, 0, 0), "eAxC {}", e.eaxc);
        assert_eq!((e.early, e.on_time, e.late), (0, 23 * 14 * 6, 0));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&slots_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "npy"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 23);
    for n in 20..23 {
        let r = o.radio(n as u64, 0);
        let name = files[n].file_name().unwrap().to_string_lossy().into_owned();
        let want = format!(
            "_f{}_sf{}_s{}_complete.npy",
            r.frame_id, r.subframe_id, r.slot_id
        );
        assert!(name.ends_with(&want), "{name} vs {want}");
        assert_eq!(npy_i16(&files[n]), npy_i16(&files[n - 20]), "slot {n}");
        assert_ne!(npy_i16(&files[n]), npy_i16(&files[n - 19]), "slot {n}");
        let e1 = o.expected(1, n as u64, 13, 272);
        let cell = &npy_i16(&files[n])[((14 + 13) * 273 + 272) * 24..][..24];
        let got: Vec<i32> = cell.iter().map(|&x| i32::from(x)).collect();
        assert_eq!(got, e1, "slot {n}, eAxC 1, symbol 13, PRB 272");
    }
}

/// scripts/gpu-fronthaul-check.sh (step `shipped`) runs the shipped file itself with `--set`
/// overrides, the executor and a raw sink per run: those keys still reach the stage, and the
/// CPU run writes one slot file per slot, every slot complete.
#[test]
fn the_check_scripts_overrides_of_the_shipped_config_reach_the_stage() {
    pktwarp_fronthaul::register();
    let dir = tmpdir("set");
    let set = |s: &str| config::Override::parse(s).unwrap();
    let path = configs().join("fronthaul.yaml");
    let gpu = config::load_with(&path, &[set("executor.kind=gpu")]).unwrap();
    assert_eq!(gpu.executor.kind, config::ExecutorKind::Gpu);
    let sets = [
        set("executor.kind=cpu"),
        set(&format!(
            "pipeline.1.fronthaul.sink={{ raw: {} }}",
            dir.display()
        )),
        set("ports.0.gen.oran.slots=20"),
    ];
    let p = daemon::prepare(config::load_with(&path, &sets).unwrap()).unwrap();
    let ports = daemon::open_ports(&p.cfg).unwrap();
    let shared = CpuShared::new(&p.cpu_spec());
    let s = daemon::run_cpu(&p, &shared, ports);
    let f = p
        .pipeline
        .stages
        .get(1)
        .and_then(FronthaulStage::of)
        .unwrap();
    let c = f.counters();
    assert_eq!(
        (c.slots_complete, c.slots_partial, c.slots_lost),
        (20, 0, 0)
    );
    assert!(s.rx_frames > 0);
    let iq = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            n.to_string_lossy().ends_with("_complete.iq")
        })
        .count();
    assert_eq!(iq, 20, "one raw slot file per slot");
    let _ = std::fs::remove_dir_all(&dir);
}
