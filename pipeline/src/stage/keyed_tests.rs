//! Keyed stages (a config key of their own) and `gen` port modes, as a crate above the library
//! registers them: `- mark_all: { mark: 7 }` and `gen: { ramp: { frames: 5 } }`.

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Deserialize;

use crate::config::{parse_str, ConfigError, StageConfig};
use crate::meta::PacketMeta;
use crate::port::gen::mode::{GenMode, GenSource, ModeOptions};
use crate::port::pace::Rate;
use crate::port::{PortError, RxPort, RxStatus};
use crate::stage::descriptor::{GpuImpl, StageDescriptor, StageNeeds};
use crate::stage::keyed::{KeyedOptions, KeyedStage};
use crate::stage::registry::BuiltStage;
use crate::stage::CustomStage;
use crate::verdict::Verdict;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkOptions {
    mark: u32,
    #[serde(default)]
    log: Option<PathBuf>,
}

struct MarkAll {
    mark: u32,
    log: Option<PathBuf>,
    frames: AtomicU64,
}

impl CustomStage for MarkAll {
    fn process(&self, _: &[u8], _: &PacketMeta, v: &mut Verdict) {
        v.mark = self.mark;
        self.frames.fetch_add(1, Ordering::Relaxed);
    }
}

static DESCRIPTOR: StageDescriptor = StageDescriptor {
    name: "mark_all",
    usage: "`mark_all: { mark, log }`",
    summary: "marks every frame (a test stage)",
    needs: StageNeeds::NONE,
    drop_reasons: &[],
    counters: &[],
    gpu: GpuImpl::CpuOnly,
    reloads: false,
};

struct Key;

impl KeyedStage for Key {
    fn descriptor(&self) -> &'static StageDescriptor {
        &DESCRIPTOR
    }
    fn check(&self, at: &KeyedOptions<'_>) -> Result<Arc<dyn Any + Send + Sync>, ConfigError> {
        let o: MarkOptions = at.parse()?;
        if o.mark == 0 {
            return Err(ConfigError {
                file: PathBuf::new(),
                line: 0,
                column: 0,
                key: format!("pipeline[{}].mark_all.mark", at.index),
                message: "must be > 0".into(),
            });
        }
        Ok(Arc::new(o))
    }
    fn build(
        &self,
        options: &(dyn Any + Send + Sync),
        resolve: &dyn Fn(&Path) -> PathBuf,
    ) -> anyhow::Result<BuiltStage> {
        let o = options.downcast_ref::<MarkOptions>().unwrap();
        Ok(BuiltStage {
            cpu: Arc::new(MarkAll {
                mark: o.mark,
                log: o.log.as_deref().map(resolve),
                frames: AtomicU64::new(0),
            }),
            gpu: None,
        })
    }
    fn rerun_refusal(&self) -> Option<&'static str> {
        Some("it counts every frame")
    }
}

static KEY: Key = Key;

/// A `gen` mode: `frames` frames of 60 zero bytes, numbered in their first byte.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RampOptions {
    frames: u8,
}

struct Ramp;

#[derive(Debug)]
struct RampRx {
    left: u8,
    next: u8,
    port: u16,
}

impl RxPort for RampRx {
    fn rx_burst(
        &mut self,
        burst: &mut crate::burst::Burst,
        max: usize,
    ) -> Result<RxStatus, PortError> {
        let mut n = 0;
        while n < max && self.left > 0 {
            let mut f = vec![0u8; 60];
            f[0] = self.next;
            let d = crate::burst::FrameDesc {
                len: 60,
                wire_len: 60,
                port: self.port,
                ..Default::default()
            };
            burst.push(&f, d);
            self.next += 1;
            self.left -= 1;
            n += 1;
        }
        Ok(if n > 0 {
            RxStatus::Frames(n)
        } else {
            RxStatus::End
        })
    }
    fn name(&self) -> &str {
        "gen:ramp"
    }
}

impl GenMode for Ramp {
    fn key(&self) -> &'static str {
        "ramp"
    }
    fn parse(&self, at: &ModeOptions<'_>) -> Result<Arc<dyn Any + Send + Sync>, ConfigError> {
        let o: RampOptions = at.parse()?;
        Ok(Arc::new(o))
    }
    fn check(&self, options: &(dyn Any + Send + Sync)) -> Result<(), String> {
        match options.downcast_ref::<RampOptions>() {
            Some(o) if o.frames == 0 => Err("gen.ramp.frames: must be > 0".into()),
            Some(_) => Ok(()),
            None => Err("gen.ramp: another mode's options".into()),
        }
    }
    fn open(
        &self,
        options: &(dyn Any + Send + Sync),
        _rate: Rate,
        port: u16,
    ) -> Result<Box<dyn GenSource>, PortError> {
        let o = options.downcast_ref::<RampOptions>().unwrap();
        Ok(Box::new(RampRx {
            left: o.frames,
            next: 0,
            port,
        }))
    }
}

static RAMP: Ramp = Ramp;

fn register() {
    crate::stage::keyed::register(&KEY).unwrap();
    crate::port::gen::mode::register(&RAMP).unwrap();
}

const PORTS: &str = "ports:\n  - name: g\n    gen: { count: 10 }\n";

fn parse(text: &str) -> Result<crate::config::Config, ConfigError> {
    register();
    parse_str(text, Path::new("/cfg/k.yaml"))
}

#[test]
fn a_keyed_stage_is_read_checked_and_built_from_its_key() {
    let cfg = parse(&format!(
        "{PORTS}pipeline:\n  - parse\n  - mark_all: {{ mark: 7, log: x.log }}\n  - count\n"
    ))
    .unwrap();
    assert!(matches!(&cfg.pipeline[1].value, StageConfig::Keyed(k) if k.options.is_some()));
    assert_eq!(cfg.pipeline[1].value.name(), "mark_all");
    let p = crate::daemon::build_pipeline(&cfg).unwrap();
    assert_eq!(p.stage_names(), ["parse", "mark_all", "count"]);
    let s = p.stages[1]
        .custom_as::<MarkAll>()
        .expect("the stage, as its own type");
    assert_eq!(s.log.as_deref(), Some(Path::new("/cfg/x.log")), "resolved");
    let mut v = Verdict::PASS;
    p.stages[1]
        .custom_as::<MarkAll>()
        .unwrap()
        .process(&[0; 60], &PacketMeta::default(), &mut v);
    assert_eq!((v.mark, s.frames.load(Ordering::Relaxed)), (7, 1));
    // No CUDA: the GPU executor refuses it by name.
    assert!(p
        .gpu_refusal()
        .unwrap()
        .contains("`mark_all` (pipeline[1])"));
}

#[test]
fn a_keyed_stages_errors_name_file_line_and_key() {
    let e = parse(&format!(
        "{PORTS}pipeline:\n  - parse\n  - mark_all:\n      mark: 7\n      lgo: x\n"
    ))
    .unwrap_err();
    assert_eq!(
        (e.line, e.file.as_path()),
        (8, Path::new("/cfg/k.yaml")),
        "{e}"
    );
    assert!(e.message.contains("lgo"), "{e}");
    assert!(e.key.contains("lgo"), "{e}");
    let e = parse(&format!("{PORTS}pipeline:\n  - mark_all: {{ mark: 0 }}\n")).unwrap_err();
    assert_eq!(
        (e.key.as_str(), e.line),
        ("pipeline[0].mark_all.mark", 5),
        "{e}"
    );
    let e = parse(&format!("{PORTS}pipeline:\n  - mark_all\n")).unwrap_err();
    assert!(e.message.contains("takes options"), "{e}");
    let e = parse(&format!(
        "{PORTS}pipeline:\n  - mark_all: {{ mark: 1 }}\n    count: 1\n"
    ))
    .unwrap_err();
    assert!(e.message.contains("one key"), "{e}");
    // An unknown stage names the keyed ones with the built-ins.
    let e = parse(&format!("{PORTS}pipeline:\n  - mark_al: {{}}\n")).unwrap_err();
    assert!(
        e.message.contains("mark_all") && e.message.contains("acl"),
        "{e}"
    );
    assert_eq!(e.line, 5, "{e}");
    // The built-ins are read as before: an error inside one keeps its line.
    let e = parse(&format!(
        "{PORTS}pipeline:\n  - parse\n  - acl:\n      rules: r.yaml\n      bogus: 1\n"
    ))
    .unwrap_err();
    assert_eq!(e.line, 8, "{e}");
}

#[test]
fn verify_refuses_a_keyed_stage_that_keeps_state() {
    let e = parse(&format!(
        "{PORTS}pipeline:\n  - mark_all: {{ mark: 1 }}\nverify: {{ sample: 5 }}\n"
    ))
    .unwrap_err();
    assert_eq!((e.key.as_str(), e.line), ("verify.sample", 6), "{e}");
    assert!(e.message.contains("it counts every frame"), "{e}");
}

#[test]
fn a_key_is_registered_once_and_never_a_builtins() {
    register();
    register();
    struct Parse;
    impl KeyedStage for Parse {
        fn descriptor(&self) -> &'static StageDescriptor {
            &crate::stage::parse::DESCRIPTOR
        }
        fn check(&self, _: &KeyedOptions<'_>) -> Result<Arc<dyn Any + Send + Sync>, ConfigError> {
            unreachable!()
        }
        fn build(
            &self,
            _: &(dyn Any + Send + Sync),
            _: &dyn Fn(&Path) -> PathBuf,
        ) -> anyhow::Result<BuiltStage> {
            unreachable!()
        }
    }
    static PARSE: Parse = Parse;
    assert!(crate::stage::keyed::register(&PARSE).is_err());
    static OTHER: Key = Key;
    assert!(
        crate::stage::keyed::register(&OTHER).is_err(),
        "a second stage under the key"
    );
    assert!(crate::stage::descriptor::is_reserved("mark_all"));
    assert!(crate::port::gen::mode::register(&RAMP).is_ok());
}

#[test]
fn a_gen_mode_makes_the_ports_frames() {
    let cfg =
        parse("ports:\n  - name: g\n    gen: { ramp: { frames: 3 } }\npipeline:\n  - count\n")
            .unwrap();
    let g = cfg.ports[0].value.gen.as_ref().unwrap();
    assert_eq!(g.mode.as_ref().map(|m| m.mode.key()), Some("ramp"));
    let mut rx = crate::port::gen::GenRx::new(g, 0).unwrap();
    let mut b = crate::burst::Burst::default();
    assert!(matches!(
        rx.rx_burst(&mut b, 8).unwrap(),
        RxStatus::Frames(3)
    ));
    assert_eq!(b.frames().map(|(_, f)| f[0]).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(matches!(rx.rx_burst(&mut b, 8).unwrap(), RxStatus::End));
}

#[test]
fn a_gen_modes_errors_name_their_key() {
    let at = |gen: &str| {
        parse(&format!(
            "ports:\n  - name: g\n    gen: {gen}\npipeline:\n  - count\n"
        ))
        .unwrap_err()
    };
    let e = at("{ ramp: { frames: 0 } }");
    assert_eq!(
        (e.key.as_str(), e.line),
        ("ports[0].gen.ramp.frames", 2),
        "{e}"
    );
    // An unknown key of the mode's: at its own line, named.
    let e = parse(
        "ports:\n  - name: g\n    gen:\n      ramp:\n        framez: 1\npipeline:\n  - count\n",
    )
    .unwrap_err();
    assert_eq!(e.line, 5, "{e}");
    assert!(
        e.message.contains("framez") && e.key.contains("framez"),
        "{e}"
    );
    let e = at("{ count: 5, ramp: { frames: 1 } }");
    assert!(
        e.key.ends_with("gen.count") && e.message.contains("ramp"),
        "{e}"
    );
    let e = at("{ rampp: { frames: 1 } }");
    assert!(e.message.contains("rampp"), "{e}");
}

/// A reload compares the config's sections as their Debug text: a keyed stage's or a gen mode's
/// changed options show there (a change that needs a restart is reported so).
#[test]
fn changed_keyed_options_show_in_the_configs_text() {
    let cfg = |mark: u32, frames: u32| {
        parse(&format!(
            "ports:\n  - name: g\n    gen: {{ ramp: {{ frames: {frames} }} }}\npipeline:\n  - \
             mark_all: {{ mark: {mark} }}\n"
        ))
        .unwrap()
    };
    let (a, b, c) = (cfg(7, 3), cfg(8, 3), cfg(7, 4));
    let stage = |c: &crate::config::Config| format!("{:?}", c.pipeline[0].value);
    let port = |c: &crate::config::Config| format!("{:?}", c.ports[0].value);
    assert_eq!(stage(&a), stage(&cfg(7, 3)));
    assert_ne!(stage(&a), stage(&b));
    assert_eq!(port(&a), port(&b));
    assert_ne!(port(&a), port(&c));
    assert_ne!(a.ports[0].value.gen, c.ports[0].value.gen);
}
