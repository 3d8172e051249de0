//! Sampled verification (`verify: { sample: N }`) on the GPU host side over the stand-in:
//! bursts copied as submitted and checked against the reference with what the "GPU" returned;
//! a right result gives no mismatch, a wrong one (the stand-in's `corrupt`) is caught, counted,
//! and its frames go to the slow path.

use super::*;
use crate::testdata::capture_frames;
use crate::verify::sampler::VerifySummary;

/// A wrong result the stand-in returns for its first frame of every burst (what sampled
/// verification must catch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Corrupt {
    /// Frame 0's action flipped (pass and drop).
    Verdict,
    /// A byte of the first frame its TX ring names flipped in the slot's data area.
    Bytes,
}

pub(super) fn corrupt_verdict(c: Option<Corrupt>, v: &mut [Verdict]) {
    use crate::executor::gpu::abi::{ACTION_DROP, ACTION_PASS};
    if let (Some(Corrupt::Verdict), Some(x)) = (c, v.first_mut()) {
        x.action = if x.action == ACTION_DROP {
            ACTION_PASS
        } else {
            ACTION_DROP
        };
    }
}

pub(super) fn corrupt_bytes(c: Option<Corrupt>, slot: &mut [u8], descs: &[TxDesc]) {
    if let (Some(Corrupt::Bytes), Some(d)) = (c, descs.first()) {
        slot[d.offset as usize + 20] ^= 0xFF;
    }
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-gpu-vs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `pipeline` on two generated ports over `queues` queues, output and slow path captures in
/// `dir`, one burst in `sample` checked.
fn config(dir: &Path, pipeline: &str, queues: u32, sample: u64) -> String {
    let d = dir.display();
    format!(
        "ports:\n{}{}  - name: out\n    pcap: {{ tx: {{ path: {d}/out.pcap }} }}\n\
         queues: {{ count: {queues}, burst: 32, ring_slots: 8 }}\n\
         pipeline:\n{pipeline}\
         executor: {{ kind: cpu }}\n\
         output:\n  port: out\n  to_host: {{ pcap: {d}/slow.pcap }}\n\
         verify: {{ sample: {sample} }}\n",
        gen_port("g0", 3000, 1, "imix"),
        gen_port("g1", 2000, 2, "64"),
    )
}

const FILTER: &str =
    "  - parse\n  - acl: { rules: rules/inline-filter.rules.yaml, default: pass }\n  \
                      - count\n";

/// Rewrites every frame (composed template: the stand-in returns a TX ring).
const REWRITE: &str = "  - parse\n  - ttl\n  - vlan: { push: { vid: 7 } }\n  \
                       - l2fwd: { src: '02:00:00:00:00:fe' }\n  - count\n";

/// Runs the GPU host side over the stand-in (returning `corrupt` results); the summary with
/// its verify section, and the frames the slow path took.
fn run(dir: &Path, yaml: &str, corrupt: Option<Corrupt>) -> (Summary, VerifySummary, usize) {
    let p = prepared(yaml);
    let shared = Arc::new(cpu::CpuShared::new(&p.cpu_spec()));
    let mut ports = open_ports(&p.cfg).expect("ports");
    let mut dev = CpuStandIn::new(&p, 8, 2);
    dev.corrupt = corrupt;
    let spec = host_spec(&p, GpuSlots::of(&p.cfg), p.pipeline.acl().is_some(), 0);
    let mut out = ports.take_out();
    let t = Instant::now();
    let o = host::run(&dev, &spec, &shared, &mut ports.rx, &mut out);
    o.result.expect("host run");
    drop(out);
    let s = summarize(
        &shared.counters,
        &p.pipeline,
        t.elapsed(),
        &p.choice,
        o.errors,
    );
    let v = shared.verify.summary().expect("sampling on");
    let slow = capture_frames(&dir.join("slow.pcap")).unwrap().len();
    (s, v, slow)
}

/// The CPU executor's run of `yaml`, outputs included.
fn run_cpu(yaml: &str) -> Summary {
    let p = prepared(yaml);
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let mut ports = open_ports(&p.cfg).expect("ports");
    let out = ports.take_out();
    let o = cpu::run_out(&p.cpu_spec(), &shared, ports.rx, out);
    summarize(
        &shared.counters,
        &p.pipeline,
        o.elapsed,
        &p.choice,
        o.errors,
    )
}

fn to_host(s: &Summary) -> u64 {
    s.queues.iter().map(|q| q.to_host).sum()
}

fn assert_clean(v: &VerifySummary, what: &str) {
    assert!(
        v.sampled_bursts > 0 && v.sampled_frames > 0,
        "{what}: {v:?}"
    );
    assert_eq!(
        (v.mismatch_frames, v.counter_mismatches, v.captured_frames),
        (0, 0, 0),
        "{what}: {v:?}"
    );
}

#[test]
fn right_results_give_no_mismatch_and_the_same_counts() {
    for (name, pipeline, rewrites) in [("filter", FILTER, false), ("rewrite", REWRITE, true)] {
        let d = tmpdir(name);
        let yaml = config(&d, pipeline, 2, 3);
        let (s, v, slow) = run(&d, &yaml, None);
        assert_eq!(prepared(&yaml).pipeline.rewrites(), rewrites, "{name}");
        assert_clean(&v, name);
        assert_eq!(v.sample, 3);
        assert_eq!(slow as u64, to_host(&s), "{name}: only to-host frames");
        // Sampling changes nothing the run does.
        let off = config(&d, pipeline, 2, 0);
        assert_same_counts(&s, &run_cpu(&off), name);
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn a_flipped_verdict_is_caught_counted_and_sent_to_the_slow_path() {
    let d = tmpdir("flip");
    let (s, v, slow) = run(&d, &config(&d, FILTER, 2, 1), Some(Corrupt::Verdict));
    assert!(v.sampled_bursts > 0, "{v:?}");
    // Frame 0 of every sampled burst, and no other.
    assert_eq!(v.mismatch_frames, v.sampled_bursts, "{v:?}");
    assert_eq!(v.captured_frames + v.capture_dropped, v.mismatch_frames);
    assert!(v.captured_frames > 0, "{v:?}");
    assert_eq!(
        v.counter_mismatches, 0,
        "counters are not compared on the GPU"
    );
    assert_eq!(slow as u64, to_host(&s) + v.captured_frames, "{v:?}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_wrong_rewritten_byte_is_caught() {
    let d = tmpdir("bytes");
    let (_, v, _) = run(&d, &config(&d, REWRITE, 1, 1), Some(Corrupt::Bytes));
    assert!(v.sampled_bursts > 0, "{v:?}");
    assert_eq!(v.mismatch_frames, v.sampled_bursts, "{v:?}");
    assert!(v.captured_frames > 0, "{v:?}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn sampling_off_samples_nothing() {
    let d = tmpdir("off");
    let p = prepared(&config(&d, FILTER, 1, 0));
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let dev = CpuStandIn::new(&p, 8, 2);
    let (r, _) = run_host(&p, &dev, &shared, None);
    r.expect("host run");
    assert!(shared.verify.summary().is_none());
    let _ = std::fs::remove_dir_all(&d);
}
