//! A registered stage's host hooks and frame writes on both executors' host sides: the CPU
//! executor and the GPU host side over the stand-in device call `start`, `periodic`,
//! `epoch_published` (after a reload of the stage's options) and `end` in that order, and a
//! stage that writes the frame has its bytes transmitted by both.

use std::time::Duration;

use super::*;
use crate::stage::api::{HookCtx, StageHooks};
use crate::stage::registry::{BuiltStage, GpuStage, StageFactory, StageRegistry};
use crate::stage::{CustomStage, FrameMut, StageNeeds};

/// Every hook call, as `start@<position> <executor>`, `periodic`, `epoch <g>`, `end`.
#[derive(Default)]
struct Calls(Mutex<Vec<String>>);

impl Calls {
    fn push(&self, s: String) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(s);
    }
    fn snapshot(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    fn has(&self, s: &str) -> bool {
        self.snapshot().iter().any(|c| c == s)
    }
}

impl StageHooks for Calls {
    fn start(&self, c: &HookCtx) {
        self.push(format!("start@{} {}", c.position, c.executor));
    }
    fn epoch_published(&self, _: &HookCtx, g: u64) {
        self.push(format!("epoch {g}"));
    }
    fn periodic_interval(&self) -> Option<Duration> {
        Some(Duration::from_millis(10))
    }
    fn periodic(&self, _: &HookCtx) {
        self.push("periodic".into());
    }
    fn end(&self, _: &HookCtx) {
        self.push("end".into());
    }
}

/// Sets the last byte of the source MAC to its `byte` option; its hooks record into `calls`
/// (shared by every build, so a reload's build records into it too).
struct SrcByte {
    byte: u8,
    calls: Arc<Calls>,
}

impl CustomStage for SrcByte {
    fn process(&self, _: &[u8], _: &PacketMeta, _: &mut crate::verdict::Verdict) {}
    fn process_mut(
        &self,
        f: &mut FrameMut<'_>,
        _: &mut PacketMeta,
        _: &mut crate::verdict::Verdict,
    ) {
        if let Some(b) = f.bytes_mut().get_mut(11) {
            *b = self.byte;
        }
    }
    fn hooks(&self) -> Option<&dyn StageHooks> {
        Some(&*self.calls)
    }
}

struct Factory(Arc<Calls>);
impl StageFactory for Factory {
    fn build(&self, o: &serde_json::Value) -> anyhow::Result<BuiltStage> {
        let byte = o.get("byte").and_then(|b| b.as_u64()).unwrap_or(0x77) as u8;
        Ok(BuiltStage {
            cpu: Arc::new(SrcByte {
                byte,
                calls: Arc::clone(&self.0),
            }),
            // The stand-in runs the Rust side; the CUDA side is for the GPU executor's checks.
            gpu: Some(GpuStage {
                source: "PW_DEVICE void src_byte(pw_frame *f, pw_packet_meta *m, pw_verdict *v, \
                         const void *p, pw_stage_counters *c) {}"
                    .into(),
                function: "src_byte".into(),
                params: vec![byte],
                counter_names: Vec::new(),
                buffers: Vec::new(),
            }),
        })
    }
    fn needs(&self) -> StageNeeds {
        StageNeeds {
            writes_frame: true,
            ..StageNeeds::NONE
        }
    }
}

fn prepared_hooked(frames: u64) -> (Prepared, Arc<Calls>) {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 2, burst: 32, ring_slots: 8 }}\npipeline:\n  - parse\n  \
         - custom: {{ name: src_byte, byte: 0x77 }}\n  - count\nexecutor: {{ kind: cpu }}\n",
        gen_port("a", frames, 5, "imix")
    );
    let cfg = config::parse_str(&yaml, &configs_dir().join("test.yaml")).expect("config");
    let calls = Arc::new(Calls::default());
    let mut r = StageRegistry::default();
    r.register("src_byte", Arc::new(Factory(Arc::clone(&calls))))
        .unwrap();
    (
        crate::daemon::prepare_with(cfg, &r).expect("prepare"),
        calls,
    )
}

/// While the run goes: once a `periodic` was called, reloads the stage's options, waits for
/// `epoch 1`, then stops the run (each wait bounded: a missing call fails the test, never
/// hangs it).
fn reload_then_stop(p: &Prepared, shared: &cpu::CpuShared, calls: &Calls) {
    let wait = |what: &str| {
        let t = Instant::now();
        while !calls.has(what) && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    wait("periodic");
    let mut cfgs: Vec<config::StageConfig> =
        p.cfg.pipeline.iter().map(|s| s.value.clone()).collect();
    if let config::StageConfig::Custom(c) = &mut cfgs[1] {
        c.options = serde_json::json!({ "byte": 0x78 });
    }
    p.pipeline.reload_stage_options(&cfgs).expect("reload");
    wait("epoch 1");
    shared.stop.store(true, Ordering::Relaxed);
}

fn assert_order(calls: &[String], executor: &str) {
    assert_eq!(
        calls.first().map(String::as_str),
        Some(&*format!("start@1 {executor}"))
    );
    assert_eq!(calls.last().map(String::as_str), Some("end"), "{calls:?}");
    let epoch = calls.iter().position(|c| c == "epoch 1");
    let periodic = calls.iter().position(|c| c == "periodic");
    assert!(
        periodic.is_some() && periodic < epoch,
        "{executor}: {calls:?}"
    );
    let middle = &calls[1..calls.len() - 1];
    assert!(
        middle.iter().all(|c| c == "periodic" || c == "epoch 1"),
        "{executor}: {calls:?}"
    );
    assert_eq!(calls.iter().filter(|c| *c == "epoch 1").count(), 1);
}

#[test]
fn hooks_are_called_in_order_on_both_executors() {
    // A generator without end: the run ends by `stop` once the reload was heard.
    let (p, calls) = prepared_hooked(100_000_000);
    let spec = p.cpu_spec();
    let shared = cpu::CpuShared::new(&spec);
    let ports = open_ports(&p.cfg).expect("ports");
    std::thread::scope(|sc| {
        sc.spawn(|| reload_then_stop(&p, &shared, &calls));
        cpu::run(&spec, &shared, ports.rx, None)
    });
    assert_order(&calls.snapshot(), "cpu");

    let (p, calls) = prepared_hooked(100_000_000);
    let dev = CpuStandIn::new(&p, 4, 1);
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let (r, _) = std::thread::scope(|sc| {
        sc.spawn(|| reload_then_stop(&p, &shared, &calls));
        run_host(&p, &dev, &shared, None)
    });
    r.expect("host run");
    assert_order(&calls.snapshot(), "gpu");
    // The GPU side heard of the epoch once the device had the new parameter block.
    let published = dev.params_published.lock().unwrap().clone();
    assert_eq!(published.len(), 1);
    assert_eq!(published[0].1[1], [0x78]);
}

#[test]
fn a_writing_user_stage_transmits_what_it_wrote_on_both_executors() {
    let (p, _) = prepared_hooked(3000);
    assert!(p.pipeline.rewrites());
    let cpu = run_cpu_ref(&p, true);
    let gpu = run_fake(&p, 4, 1, true);
    assert_same_counts(&gpu.s, &cpu.s, "writing user stage");
    let (mut g, mut c) = (gpu.tx.clone(), cpu.tx.clone());
    g.sort();
    c.sort();
    assert_same_frames(&g, &c, "writing user stage");
    assert!(c.len() > 1000, "{} frames sent", c.len());
    assert!(
        c.iter().all(|f| f.len() < 12 || f[11] == 0x77),
        "the stage's byte went out"
    );
}
