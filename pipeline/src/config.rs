//! The YAML config of `pktwarp run`: ports, queues, steering, the pipeline's stages, the executor
//! and the output. Unknown keys and bad values are errors that name the file, line, column and key.
//!
//! ```yaml
//! ports:
//!   - name: wire
//!     pcap:
//!       rx: { path: capture.pcap, loops: 10 }
//!   - name: out
//!     pcap:
//!       tx: { path: out.pcap }
//! queues: { count: 2 }
//! pipeline:
//!   - parse
//!   - acl: { rules: configs/rules/inline-filter.rules.yaml }
//!   - count
//! executor: { kind: auto }
//! output: { port: out }
//! verify: { sample: 1000 }   # re-check one burst in 1000 on the CPU reference
//! ```
//!
//! Relative paths inside a config (capture files, rule files) are resolved against the folder of
//! the config file, so a config works from any working directory.

mod bounded;
mod flow_export;
mod keyed;
mod locate;
mod output;
mod overrides;
pub mod settings;
pub mod verify;
use locate::{int_range, key_at};

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::port::gen::GenOptions;
use crate::port::pcap::{PcapRxOptions, PcapTxOptions};
pub use crate::stage::config::{
    AclStageConfig, CustomStageConfig, DefaultAction, RuleFormat, StageConfig,
};
pub use overrides::Override;
pub use pktwarp_core::config_error::ConfigError;
pub use pktwarp_core::ring::OnFull;

/// The whole config file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Sources and sinks of frames. At least one port must receive.
    pub ports: Vec<Spanned<PortConfig>>,
    /// RX queues per receiving port and their rings.
    #[serde(default)]
    pub queues: QueuesConfig,
    /// Software steering over the queues (RSS on the 5-tuple when absent).
    #[serde(default)]
    pub steering: Option<SteeringConfig>,
    /// The ordered stages every queue runs (a keyed stage's entry is read as its crate
    /// registered it: `crate::stage::keyed`).
    #[serde(deserialize_with = "crate::stage::keyed::stage_list")]
    pub pipeline: Vec<Spanned<StageConfig>>,
    /// Which executor runs the pipeline.
    #[serde(default)]
    pub executor: ExecutorConfig,
    /// Where frames with a pass (or mirror) verdict go. No output: they are counted and released.
    #[serde(default)]
    pub output: Option<OutputConfig>,
    /// The Prometheus endpoint (`listen`, `enabled`, `rule_series_cap`); see
    /// [`settings`]. Default: served on 127.0.0.1:9108.
    #[serde(default)]
    pub metrics: settings::MetricsConfig,
    /// Reload, watchdog and shutdown (`watch_rules`, `on_stall`, `drain_timeout_ms`, ...); see
    /// [`settings`].
    #[serde(default)]
    pub control: settings::ControlConfig,
    /// Sampled self-checking against the CPU reference (`sample: N`); see [`verify`].
    /// Absent: off.
    #[serde(default)]
    pub verify: Option<Spanned<verify::VerifyConfig>>,
    /// IPFIX flow export of a `flow_stats` stage's records (`collector`, ...; docs/ipfix.md).
    #[serde(default)]
    pub ipfix: Option<Spanned<pktwarp_flow::ipfix::IpfixConfig>>,
    /// Where to find this config's relative paths: the config file's folder (set by [`load`]).
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// The config file (set by [`load`]).
    #[serde(skip)]
    pub path: PathBuf,
    /// The command line's `--set` changes it was read with ([`load_with`]); a reload reads the
    /// file with them again.
    #[serde(skip)]
    pub overrides: Vec<Override>,
}

/// One port: a name and exactly one backend section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// Name used by `output.port`, logs, the summary and metrics labels.
    pub name: String,
    /// File replay (`rx`) and record (`tx`): pcap and pcapng.
    #[serde(default)]
    pub pcap: Option<PcapPortConfig>,
    /// The built-in traffic generator (receive side only), with the modes registered
    /// (`crate::port::gen::mode`).
    #[serde(default, deserialize_with = "crate::port::gen::mode::gen_section")]
    pub gen: Option<GenOptions>,
    /// Any DPDK poll-mode driver, receive and transmit (cargo feature `dpdk`; docs/dpdk.md).
    #[cfg(feature = "dpdk")]
    #[serde(default)]
    pub dpdk: Option<crate::port::dpdk::DpdkPortOptions>,
}

impl PortConfig {
    /// Whether the port has a `dpdk` section (always false without the `dpdk` feature).
    pub fn is_dpdk(&self) -> bool {
        #[cfg(feature = "dpdk")]
        {
            self.dpdk.is_some()
        }
        #[cfg(not(feature = "dpdk"))]
        {
            false
        }
    }
}

/// The `pcap` backend: a receive side, a transmit side, or both.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapPortConfig {
    #[serde(default)]
    pub rx: Option<PcapRxOptions>,
    #[serde(default)]
    pub tx: Option<PcapTxOptions>,
}

/// RX queues and their rings.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueuesConfig {
    /// Number of RX queues (one CPU worker, or one GPU CTA group, per queue). Default 1.
    #[serde(deserialize_with = "bounded::whole::<_, u16, 1, 1024>")]
    pub count: u16,
    /// Frames per burst handed from the ingest to a queue. Default 32.
    #[serde(deserialize_with = "bounded::whole::<_, u16, 1, 4096>")]
    pub burst: u16,
    /// Bursts each queue's ring holds (power of two). Default 256.
    #[serde(deserialize_with = "bounded::whole::<_, u32, 2, { MAX_RING_SLOTS as u64 }>")]
    pub ring_slots: u32,
    /// Ring-full policy. Default `wait`.
    pub on_full: OnFull,
    /// Receive threads of the CPU executor: `per_queue` (default: one per (port, queue) where
    /// the port splits by queue) or `per_port` (docs/ports.md).
    pub rx_threads: RxThreadsMode,
    /// TX threads of both executors: `per_queue` (default: one per queue, `pw-tx{q}`, on TX
    /// queue q of a DPDK port) or `one` (`pw-tx` for every queue; docs/ports.md).
    pub tx_threads: TxThreadsMode,
    /// CPUs the receive threads are pinned to: queue q's on `cores[q % len]`. Unset: not pinned.
    pub cores: Option<Vec<usize>>,
}

/// `queues.rx_threads`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RxThreadsMode {
    #[default]
    PerQueue,
    PerPort,
}

/// `queues.tx_threads`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TxThreadsMode {
    #[default]
    PerQueue,
    One,
}

impl Default for QueuesConfig {
    fn default() -> Self {
        QueuesConfig {
            count: 1,
            burst: 32,
            ring_slots: 256,
            on_full: OnFull::Wait,
            rx_threads: RxThreadsMode::PerQueue,
            tx_threads: TxThreadsMode::PerQueue,
            cores: None,
        }
    }
}

/// Steering: a rule file, applied by the NIC (a DPDK port that takes the whole set) or by the
/// ingest in software (RSS when no rule decides).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteeringConfig {
    /// Steering rule file (YAML). Relative to the config file.
    #[serde(default)]
    pub rules: Option<PathBuf>,
    /// Whether DPDK ports try to steer the rules in the NIC (docs/steering.md, "Who steers").
    #[serde(default)]
    pub offload: SteeringOffload,
}

/// `steering.offload`: `auto` installs the rules in each DPDK port's NIC that takes them all
/// (software steering for the others); `off` steers every port in software.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SteeringOffload {
    #[default]
    Auto,
    Off,
}

impl<'de> Deserialize<'de> for SteeringOffload {
    /// By hand so a wrong scalar (a number, `true`, another word) is answered with the two
    /// allowed ones. As a string: YAML 1.1 would read `off` as a boolean.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Words;
        impl serde::de::Visitor<'_> for Words {
            type Value = SteeringOffload;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`auto` or `off`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                match v {
                    "auto" => Ok(SteeringOffload::Auto),
                    "off" => Ok(SteeringOffload::Off),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
        }
        d.deserialize_str(Words)
    }
}

/// Which executor runs the pipeline.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// The GPU when one is usable, else the CPU (the choice and its reason are logged).
    #[default]
    Auto,
    /// A run-to-completion worker thread per queue.
    Cpu,
    /// Persistent (or launch / graph) CUDA kernels; an error when no GPU is usable.
    Gpu,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorConfig {
    /// `auto` (default), `cpu` or `gpu`.
    #[serde(default)]
    pub kind: ExecutorKind,
    /// GPU executor options (mode, placement, device, devices: [0, 1] or `all` to spread the
    /// queues over several GPUs, ...). A GPU slot holds the larger of `queues.burst` and
    /// `burst_size` (default 256) frames: RX bursts are gathered into it while the input is
    /// busy (a queue's kernel takes one slot at a time); a ring holds the frames
    /// `queues.ring_slots x queues.burst` allow (at least 2 slots). `ring_slots` here is only
    /// for library users.
    #[serde(default)]
    pub gpu: crate::executor::gpu::GpuOptions,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    /// Name of a port with a transmit side: the default output (frames no `route` sent to a
    /// port of their own).
    pub port: Spanned<String>,
    /// Name of a port with a transmit side that gets a copy of every `mirror` frame.
    #[serde(default)]
    pub mirror: Option<Spanned<String>>,
    /// The slow path for `to_host` frames: `{ pcap: FILE }` (recorded; relative to the config),
    /// `{ port: NAME }` (a port with a transmit side) or `{ tap: { name: IFNAME } }` (a Linux
    /// TAP device: the host's stack receives them). Without it they are counted only.
    #[serde(default)]
    pub to_host: Option<Spanned<ToHostConfig>>,
}

/// `output.to_host`: exactly one of `pcap`, `port` and `tap`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToHostConfig {
    /// A capture file the slow-path frames are written to (pcap).
    #[serde(default)]
    pub pcap: Option<PathBuf>,
    /// A port of this config with a transmit side.
    #[serde(default)]
    pub port: Option<String>,
    /// A TAP device the frames are written to (made and brought up when the run starts).
    #[serde(default)]
    pub tap: Option<crate::port::tap::TapOptions>,
}

/// serde's "unknown variant" of a `pipeline:` entry, said with the stage registry's names.
fn unknown_stage(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown variant `")?;
    let (name, tail) = rest.split_once('`')?;
    // Only the stage enum lists `custom` among its variants.
    if !tail.contains(crate::stage::descriptor::CUSTOM_KEY) {
        return None;
    }
    let keyed = crate::stage::keyed::all();
    let names: Vec<&str> = crate::stage::BUILTINS
        .iter()
        .map(|d| d.name)
        .chain(keyed.iter().map(|k| k.descriptor().name))
        .collect();
    Some(format!(
        "unknown stage `{name}`: the built-in stages are {}; a stage the binary registered is \
         written `custom: {{ name: NAME, ... }}`",
        names.join(", ")
    ))
}

/// Longest config file read: 16 MiB (a config is a few KiB; rule sets live in their own files).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Most bursts a queue's ring may hold (`queues.ring_slots`).
pub const MAX_RING_SLOTS: u32 = 1 << 16;

/// Loads and validates a config file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = flow_rules::input::read_text_bounded(path, MAX_CONFIG_BYTES, "config")
        .map_err(|e| ConfigError::whole(path, "", format!("cannot read: {e}")))?;
    parse_str(&text, path)
}

/// Loads a config file with command-line changes (`--set KEY=VALUE`, [`Override`]) applied.
/// Errors the file has by itself keep their line; those only the changed document has carry no
/// line and name the changes.
pub fn load_with(path: &Path, overrides: &[Override]) -> Result<Config, ConfigError> {
    if overrides.is_empty() {
        return load(path);
    }
    let text = flow_rules::input::read_text_bounded(path, MAX_CONFIG_BYTES, "config")
        .map_err(|e| ConfigError::whole(path, "", format!("cannot read: {e}")))?;
    let changed = overrides::apply(&text, overrides).map_err(|e| {
        // A file that is not YAML: its own error, with its line.
        match parse_str(&text, path) {
            Err(own) => own,
            Ok(_) => ConfigError::whole(path, "", e),
        }
    })?;
    let mut cfg = parse_str(&changed, path).map_err(|mut e| {
        // Where the file is wrong by itself, that error (it has the file's line); else the
        // changed document's, which has no line of the file.
        if let Err(own) = parse_str(&text, path) {
            return own;
        }
        let list: Vec<&str> = overrides.iter().map(Override::as_str).collect();
        e.line = 0;
        e.column = 0;
        e.message = format!(
            "{} (in the config as changed by --set {})",
            e.message,
            list.join(", --set ")
        );
        e
    })?;
    cfg.overrides = overrides.to_vec();
    Ok(cfg)
}

/// Parses and validates config text; `path` names it in errors and anchors relative paths.
pub fn parse_str(text: &str, path: &Path) -> Result<Config, ConfigError> {
    let mut cfg: Config = serde_saphyr::from_str(text).map_err(|e| yaml_error(e, text, path))?;
    cfg.path = path.to_path_buf();
    cfg.base_dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    keyed::check_keyed(&mut cfg, text)?;
    keyed::check_gen_modes(&mut cfg, text)?;
    validate(&mut cfg)?;
    Ok(cfg)
}

/// The error of a YAML error `e` of the config `text` at `path`: its file, line, column and
/// key, the allowed range of a number out of range, the stages where a key is no stage.
pub(crate) fn yaml_error(e: serde_saphyr::Error, text: &str, path: &Path) -> ConfigError {
    let (line, column) = e
        .location()
        .map(|l| (l.line() as u32, l.column() as u32))
        .unwrap_or((0, 0));
    let mut message = e.without_snippet().to_string().trim().to_string();
    // The location leads the error already (`file:line:column:`).
    if let Some(m) = message.strip_suffix(&format!(" at line {line}, column {column}")) {
        message = m.to_string();
    } else {
        message = message.replace(&format!(" at line {line}, column {column} "), " ");
    }
    if let Some(r) = int_range(&message) {
        message = format!("{message} (allowed range {r})");
    }
    if let Some(m) = unknown_stage(&message) {
        message = m;
    }
    ConfigError {
        file: path.to_path_buf(),
        line,
        column,
        key: key_at(text, line, column),
        message,
    }
}

fn validate(cfg: &mut Config) -> Result<(), ConfigError> {
    let file = cfg.path.clone();
    validate_ports(&file, cfg)?;
    validate_queues(&file, &cfg.queues)?;
    validate_pipeline(&file, cfg)?;
    flow_export::check_flow_export(&file, cfg)?;
    if let Err((key, msg)) = settings::validate(&cfg.metrics, &cfg.control) {
        return Err(ConfigError::whole(&file, key, msg));
    }
    check_file_roles(cfg)?;
    output::check_output(cfg)?;
    verify::check_verify(cfg)?;
    validate_output(&file, cfg)
}

/// At least one port, one receiving; each with one backend, a unique name and valid options.
fn validate_ports(file: &Path, cfg: &Config) -> Result<(), ConfigError> {
    if cfg.ports.is_empty() {
        return Err(ConfigError::whole(
            file,
            "ports",
            "at least one port is needed",
        ));
    }
    let mut names = std::collections::HashSet::new();
    let mut receivers = 0;
    for (i, p) in cfg.ports.iter().enumerate() {
        let key = format!("ports[{i}]");
        let backends =
            p.value.pcap.is_some() as u8 + p.value.gen.is_some() as u8 + p.value.is_dpdk() as u8;
        if backends != 1 {
            return Err(ConfigError::at(
                file,
                p,
                key,
                format!(
                    "port `{}` needs exactly one backend section (pcap, gen or dpdk), found {backends}",
                    p.value.name
                ),
            ));
        }
        if !names.insert(p.value.name.clone()) {
            return Err(ConfigError::at(
                file,
                p,
                format!("{key}.name"),
                format!("duplicate port name `{}`", p.value.name),
            ));
        }
        if let Some(pc) = &p.value.pcap {
            if pc.rx.is_none() && pc.tx.is_none() {
                return Err(ConfigError::at(
                    file,
                    p,
                    format!("{key}.pcap"),
                    "a pcap port needs `rx`, `tx` or both",
                ));
            }
        }
        check_port_options(file, i, p)?;
        #[cfg(feature = "dpdk")]
        if let Some(d) = &p.value.dpdk {
            if let Err(why) = d.validate() {
                return Err(ConfigError::at(file, p, format!("{key}.dpdk"), why));
            }
            let (tq, nq) = (d.tx_queues, cfg.queues.count);
            if tq != 0 && tq < nq && cfg.queues.tx_threads == TxThreadsMode::PerQueue {
                let why = format!("port `{}` has {tq} TX queues but queues.count is {nq}: each queue's TX thread sends on its own TX queue; give tx_queues: {nq} (or leave it out: as many as queues.count), or queues.tx_threads: one", p.value.name);
                return Err(ConfigError::at(
                    file,
                    p,
                    format!("{key}.dpdk.tx_queues"),
                    why,
                ));
            }
        }
        if p.value.gen.is_some()
            || p.value.is_dpdk()
            || p.value.pcap.as_ref().is_some_and(|pc| pc.rx.is_some())
        {
            receivers += 1;
        }
    }
    if receivers == 0 {
        return Err(ConfigError::whole(
            file,
            "ports",
            "no port receives: add a pcap `rx` or a gen port",
        ));
    }
    Ok(())
}

fn validate_queues(file: &Path, q: &QueuesConfig) -> Result<(), ConfigError> {
    if q.count == 0 || q.count > 1024 {
        return Err(ConfigError::whole(file, "queues.count", "must be 1..=1024"));
    }
    if q.burst == 0 || q.burst > 4096 {
        return Err(ConfigError::whole(file, "queues.burst", "must be 1..=4096"));
    }
    if !q.ring_slots.is_power_of_two() || q.ring_slots < 2 || q.ring_slots > MAX_RING_SLOTS {
        return Err(ConfigError::whole(
            file,
            "queues.ring_slots",
            format!(
                "must be a power of two in 2 ..= {MAX_RING_SLOTS}, got {}",
                q.ring_slots
            ),
        ));
    }
    if let Some(cores) = &q.cores {
        validate_cores(file, cores)?;
    }
    Ok(())
}

/// `queues.cores`: not empty, each CPU in range and listed once (whether the process may run
/// on it is `pktwarp validate`'s check).
fn validate_cores(file: &Path, cores: &[usize]) -> Result<(), ConfigError> {
    if cores.is_empty() {
        return Err(ConfigError::whole(
            file,
            "queues.cores",
            "empty: list the CPUs to pin the receive threads to, or leave it out",
        ));
    }
    let max = libc::CPU_SETSIZE as usize;
    for (i, &c) in cores.iter().enumerate() {
        if c >= max {
            return Err(ConfigError::whole(
                file,
                format!("queues.cores[{i}]"),
                format!("CPU {c} is out of range (0 ..= {})", max - 1),
            ));
        }
        if cores[..i].contains(&c) {
            return Err(ConfigError::whole(
                file,
                format!("queues.cores[{i}]"),
                format!("CPU {c} is listed twice"),
            ));
        }
    }
    Ok(())
}

/// The stage list: its length, order and each stage's own checks.
fn validate_pipeline(file: &Path, cfg: &Config) -> Result<(), ConfigError> {
    if cfg.pipeline.is_empty() {
        return Err(ConfigError::whole(
            file,
            "pipeline",
            "at least one stage is needed",
        ));
    }
    if cfg.pipeline.len() > crate::stage::run::MAX_STAGES {
        return Err(ConfigError::whole(
            file,
            "pipeline",
            format!(
                "at most {} stages, this pipeline has {}",
                crate::stage::run::MAX_STAGES,
                cfg.pipeline.len()
            ),
        ));
    }
    check_order(file, &cfg.pipeline, |_| false)?;
    for (i, s) in cfg.pipeline.iter().enumerate() {
        if let StageConfig::Conntrack(c) = &s.value {
            c.validate().map_err(|e| match e {
                pktwarp_flow::FlowError::Config { key, message } => {
                    ConfigError::at(file, s, format!("pipeline[{i}].conntrack.{key}"), message)
                }
                other => ConfigError::at(
                    file,
                    s,
                    format!("pipeline[{i}].conntrack"),
                    other.to_string(),
                ),
            })?;
        }
        if let StageConfig::RateLimit(r) = &s.value {
            check_rate_limit(file, i, s, r)?;
        }
        if let StageConfig::Inspect(c) = &s.value {
            c.check().map_err(|(key, message)| {
                ConfigError::at(file, s, format!("pipeline[{i}].inspect.{key}"), message)
            })?;
        }
        if matches!(s.value, StageConfig::TxTime(_))
            && cfg.executor.gpu.tagged == Some(true)
            && cfg.executor.kind != ExecutorKind::Cpu
        {
            // Send times reach the ports in the GPU's TX ring, which tagged queues lack.
            return Err(ConfigError::at(
                file,
                s,
                format!("pipeline[{i}].tx_time"),
                "sets send times, which the GPU executor carries in its TX ring: not with \
                 `executor.gpu.tagged: true` (tagged queues have no TX ring); leave `tagged` \
                 unset",
            ));
        }
        if let Err(e) = crate::rewrite::check_stage(&s.value) {
            return Err(ConfigError::at(
                file,
                s,
                format!("pipeline[{i}].{}.{}", e.stage, e.key),
                e.message,
            ));
        }
    }
    Ok(())
}

/// A `rate_limit` stage's checks: an error about a rule is at that rule's line.
fn check_rate_limit(
    file: &Path,
    i: usize,
    s: &Spanned<StageConfig>,
    r: &pktwarp_flow::rate::RateConfig,
) -> Result<(), ConfigError> {
    r.validate().map_err(|e| {
        let (key, message) = match e {
            pktwarp_flow::FlowError::Config { key, message } => (key, message),
            other => (String::new(), other.to_string()),
        };
        let mut err = ConfigError::at(file, s, format!("pipeline[{i}].rate_limit.{key}"), message);
        // `rules[N]...`: at rule N.
        let rule = key
            .strip_prefix("rules[")
            .and_then(|k| k.split(']').next())
            .and_then(|n| n.parse::<usize>().ok());
        if let Some((line, column)) = rule.map(|n| r.rule_location(n)).filter(|l| l.0 > 0) {
            (err.line, err.column) = (line, column);
        }
        err
    })
}

/// `output.port` names a port with a transmit side.
fn validate_output(file: &Path, cfg: &Config) -> Result<(), ConfigError> {
    if let Some(out) = &cfg.output {
        let name = &out.port.value;
        let port = cfg.ports.iter().find(|p| &p.value.name == name);
        match port {
            None => {
                return Err(ConfigError::at(
                    file,
                    &out.port,
                    "output.port",
                    format!("no port named `{name}`"),
                ))
            }
            Some(p)
                if !p.value.is_dpdk() && p.value.pcap.as_ref().is_none_or(|pc| pc.tx.is_none()) =>
            {
                return Err(ConfigError::at(
                    file,
                    &out.port,
                    "output.port",
                    format!("port `{name}` has no transmit side (a pcap port with `tx`)"),
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The option checks of a port's backend (the same the ports make when they open), as errors
/// naming the port's line and the key (`ports[0].gen.rate`).
fn check_port_options(file: &Path, i: usize, p: &Spanned<PortConfig>) -> Result<(), ConfigError> {
    let key = format!("ports[{i}]");
    let checks = [
        p.value.gen.as_ref().map(|g| g.check()),
        p.value
            .pcap
            .as_ref()
            .and_then(|pc| pc.rx.as_ref().map(|r| r.check())),
        p.value
            .pcap
            .as_ref()
            .and_then(|pc| pc.tx.as_ref().map(|t| t.check())),
    ];
    if let Some(e) = checks.into_iter().flatten().find_map(Result::err) {
        // The option checks start their message with the key: `gen.rate: must be ...`.
        let (sub, msg) = e.split_once(": ").unwrap_or(("", e.as_str()));
        return Err(ConfigError::at(
            file,
            p,
            format!("{key}.{sub}"),
            msg.to_string(),
        ));
    }
    Ok(())
}

/// No file is both read and written: a pcap TX path that is also an input (a pcap RX file, a
/// gen trace, the config, an ACL rule or route file, another TX path) would overwrite it when
/// the port opens.
fn check_file_roles(cfg: &Config) -> Result<(), ConfigError> {
    let mut inputs: Vec<(String, PathBuf)> = Vec::new();
    let mut outputs: Vec<(String, PathBuf, &Spanned<PortConfig>)> = Vec::new();
    for (i, p) in cfg.ports.iter().enumerate() {
        if let Some(pc) = &p.value.pcap {
            if let Some(r) = &pc.rx {
                inputs.push((format!("ports[{i}].pcap.rx.path"), cfg.resolve(&r.path)));
            }
            if let Some(t) = &pc.tx {
                outputs.push((format!("ports[{i}].pcap.tx.path"), cfg.resolve(&t.path), p));
            }
        }
        if let Some(t) = p.value.gen.as_ref().and_then(|g| g.trace.as_ref()) {
            inputs.push((format!("ports[{i}].gen.trace"), cfg.resolve(t)));
        }
    }
    // The files a reload reads again (rules, routes) and the config itself are inputs too.
    inputs.push(("the config file".to_string(), cfg.path.clone()));
    for (i, s) in cfg.pipeline.iter().enumerate() {
        match &s.value {
            StageConfig::Acl(a) => {
                inputs.push((format!("pipeline[{i}].acl.rules"), cfg.resolve(&a.rules)))
            }
            StageConfig::Route(r) => inputs.push((
                format!("pipeline[{i}].route.routes"),
                cfg.resolve(&r.routes),
            )),
            _ => {}
        }
    }
    let slow = cfg.output.as_ref().and_then(|o| o.to_host.as_ref());
    if let (Some(span), Some(f)) = (slow, slow.and_then(|t| t.value.pcap.as_ref())) {
        // The slow path's capture is one more output file.
        for (k, p) in inputs
            .iter()
            .map(|(k, p)| (k, p))
            .chain(outputs.iter().map(|(k, p, _)| (k, p)))
        {
            if same_file(p, &cfg.resolve(f)) {
                return Err(ConfigError::at(
                    &cfg.path,
                    span,
                    "output.to_host.pcap",
                    format!(
                        "{} is also `{k}`: recording to it would overwrite it; write to another file",
                        cfg.resolve(f).display()
                    ),
                ));
            }
        }
    }
    for (j, (key, out, span)) in outputs.iter().enumerate() {
        let earlier = outputs[..j].iter().map(|(k, p, _)| (k, p));
        let clash = inputs
            .iter()
            .map(|(k, p)| (k, p))
            .chain(earlier)
            .find(|(_, p)| same_file(p, out))
            .map(|(k, _)| k.clone());
        if let Some(other) = clash {
            return Err(ConfigError::at(
                &cfg.path,
                *span,
                key.clone(),
                format!(
                    "{} is also `{other}`: recording to it would overwrite it; write to \
                     another file",
                    out.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Whether two paths name one file: equal as written, or (where they exist) the same file
/// once symbolic links and `..` are resolved, or two hard links of one file.
fn same_file(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    let canon = |p: &Path| -> Option<PathBuf> {
        // The output may not exist yet: resolve its folder and keep its name.
        std::fs::canonicalize(p).ok().or_else(|| {
            let parent = p.parent().filter(|d| !d.as_os_str().is_empty())?;
            Some(std::fs::canonicalize(parent).ok()?.join(p.file_name()?))
        })
    };
    if matches!((canon(a), canon(b)), (Some(x), Some(y)) if x == y) {
        return true;
    }
    // Hard links: two names, one inode.
    use std::os::unix::fs::MetadataExt;
    matches!((std::fs::metadata(a), std::fs::metadata(b)),
        (Ok(x), Ok(y)) if x.dev() == y.dev() && x.ino() == y.ino())
}

/// Stage order: a stage that reads the packet metadata (`acl`; a custom stage when
/// `custom_reads_meta` says so) needs a `parse` stage before it.
fn check_order(
    file: &Path,
    stages: &[Spanned<StageConfig>],
    custom_reads_meta: impl Fn(&str) -> bool,
) -> Result<(), ConfigError> {
    let mut parsed = false;
    for (i, s) in stages.iter().enumerate() {
        let reads_meta = match &s.value {
            StageConfig::Parse => {
                parsed = true;
                false
            }
            StageConfig::Keyed(k) => k.stage.descriptor().needs.reads_meta,
            StageConfig::Count
            | StageConfig::L2fwd(_)
            | StageConfig::Vlan(_)
            | StageConfig::TxTime(_) => false,
            StageConfig::Acl(_) | StageConfig::Ttl | StageConfig::Dscp(_) => true,
            StageConfig::Conntrack(_)
            | StageConfig::FlowStats(_)
            | StageConfig::RateLimit(_)
            | StageConfig::Inspect(_) => true,
            StageConfig::Route(_) | StageConfig::Respond(_) => true,
            StageConfig::Custom(c) => custom_reads_meta(&c.name),
        };
        if reads_meta && !parsed {
            let name = s.value.name();
            return Err(ConfigError::at(
                file,
                s,
                format!("pipeline[{i}]"),
                format!(
                    "the `{name}` stage reads the packet metadata and needs a `parse` stage \
                     before it"
                ),
            ));
        }
    }
    Ok(())
}

/// Checks the config's `custom:` stages against the stages a binary registered: each name is
/// registered (an error names the stage, its line, key `pipeline[i].custom.name` and the
/// registered names), and one that reads the packet metadata has `parse` before it.
pub fn check_custom_stages(
    cfg: &Config,
    registry: &crate::stage::StageRegistry,
) -> Result<(), ConfigError> {
    for (i, s) in cfg.pipeline.iter().enumerate() {
        if let StageConfig::Custom(c) = &s.value {
            if registry.get(&c.name).is_none() {
                return Err(ConfigError::at(
                    &cfg.path,
                    s,
                    format!("pipeline[{i}].custom.name"),
                    format!(
                        "unknown custom stage `{}`: {}",
                        c.name,
                        registry.names_for_error()
                    ),
                ));
            }
            if let Some(Err(e)) = registry
                .needs(&c.name)
                .map(|n| crate::stage::registry::check_needs(&n))
            {
                return Err(ConfigError::at(
                    &cfg.path,
                    s,
                    format!("pipeline[{i}].custom.name"),
                    format!("custom stage `{}`: {e:#}", c.name),
                ));
            }
        }
    }
    check_order(&cfg.path, &cfg.pipeline, |name| {
        registry.needs(name).is_none_or(|n| n.reads_meta)
    })
}

impl Config {
    /// The config's receiving and transmitting port names, which verdicts and frame
    /// descriptors index.
    pub fn port_names(&self) -> crate::rewrite::stage::PortNames {
        let rx = self
            .ports
            .iter()
            .filter(|p| {
                let v = &p.value;
                v.gen.is_some() || v.is_dpdk() || v.pcap.as_ref().is_some_and(|pc| pc.rx.is_some())
            })
            .map(|p| p.value.name.clone())
            .collect();
        crate::rewrite::stage::PortNames {
            tx: self.tx_port_names(),
            rx,
        }
    }

    /// From the config's `steering:` section and `queues.count`. Shadowed rules are logged.
    pub fn build_steering(&self) -> anyhow::Result<crate::steer::Steering> {
        let queues = self.queues.count;
        let mut s = crate::steer::Steering::rss_only(queues)?;
        if let Some(path) = self.steering.as_ref().and_then(|st| st.rules.as_ref()) {
            let set = flow_rules::steering::SteerRuleSet::load(self.resolve(path))?;
            for w in &set.warnings {
                tracing::warn!("{w}");
            }
            s = crate::steer::Steering::from_rules(&set, queues)?;
        }
        // A queue's flow table (conntrack, flow_stats) must see both directions of its flows.
        if self.has_conntrack() {
            s = s.with_flow_steering();
        } else if self.symmetric_rss() {
            s = s.with_symmetric_rss();
        }
        Ok(s)
    }

    /// Whether the pipeline keeps per-flow state that must see both directions of a flow on
    /// one queue: a flow table (`conntrack`, `flow_stats`) or a `rate_limit` rule keyed by
    /// `flow`. Then RSS hashes with the symmetric key, in software and in the NIC (a DPDK
    /// port's RSS key and its rte_flow RSS actions).
    pub fn symmetric_rss(&self) -> bool {
        self.has_conntrack()
            || self.pipeline.iter().any(|s| match &s.value {
                StageConfig::RateLimit(r) => r
                    .rules
                    .iter()
                    .any(|rule| rule.value.key == pktwarp_flow::rate::KeySpec::Flow),
                _ => false,
            })
    }

    /// Whether the pipeline has a flow table (a `conntrack` or `flow_stats` stage): then
    /// software steering spreads frames by their flow key.
    pub fn has_conntrack(&self) -> bool {
        self.pipeline.iter().any(|s| {
            matches!(
                s.value,
                StageConfig::Conntrack(_) | StageConfig::FlowStats(_)
            )
        })
    }

    /// The ports with a transmit side, in config order: a verdict's `out_port` is an index in
    /// this list (a `route` next hop names one of them).
    pub fn tx_port_names(&self) -> Vec<String> {
        self.ports
            .iter()
            .filter(|p| {
                p.value.is_dpdk() || p.value.pcap.as_ref().is_some_and(|pc| pc.tx.is_some())
            })
            .map(|p| p.value.name.clone())
            .collect()
    }

    /// Resolves a path from the config against the config file's folder.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;

    #[test]
    fn the_key_of_an_error_is_found_after_a_multibyte_char() {
        assert_eq!(key_at("aΘb: 1", 1, 6), "b");
        assert_eq!(key_at("  rate: x", 1, 9), "rate");
        assert_eq!(key_at("no colon here", 1, 5), "");
        // At a key (an entry's start): that key, not the one before it; a value with colons
        // (a MAC) is not a key.
        assert_eq!(key_at("  - tx_time: { delay_ns: 1.5 }", 1, 16), "delay_ns");
        assert_eq!(key_at("  src: aa:bb:cc:dd:ee:ff", 1, 8), "src");
        // The fuzz input that found the byte offset inside 'Θ': an error, never a panic.
        let text = "# (first match wins), drop what the # lΘwd: [\nports: 3\n";
        assert!(parse_str(text, Path::new("fuzz.yaml")).is_err());
    }
}
