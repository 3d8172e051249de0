//! The `syn_guard` stage: one semantics, two implementations (Rust here, CUDA in
//! [`SYN_GUARD_CUDA`]), held equal by the tests.
//!
//! Semantics (stateless, per frame, on the outer TCP header the `parse` stage found):
//! 1. a TCP frame with SYN and FIN, or SYN and RST, set is dropped (`bad_flags`): no stack sends
//!    those, scanners and floods do;
//! 2. a SYN (SYN set, ACK clear) is counted (`syn`), and dropped when its source port is below
//!    `min_src_port` (`low_src_port`: clients connect from ephemeral ports, floods often from
//!    fixed low ones) or its destination port is one of `blocked_dst_ports`
//!    (`blocked_dst_port`);
//! 3. everything else passes untouched. Drops have reason `stage_drop`.
//!
//! The stage is stateless (the stage ABI gives a stage a read-only parameter block). The
//! per-source SYN budget, which needs a table every frame writes, is the built-in `rate_limit`
//! stage after this one (apps/syn-guard/syn-guard-budget.yaml: SYNs without ACK, one token
//! bucket per source; docs/rate-limit.md), whose table has its CUDA twin
//! (gpu-kernels/cuda/rate_limit.cuh), held equal by apps/tests/syn_guard_budget.rs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context;
use pipeline::meta::PacketMeta;
use pipeline::stage::{BuiltStage, CustomStage, GpuStage, StageFactory};
use pipeline::verdict::{Action, Verdict};

/// The stage's name in configs and metrics.
pub const NAME: &str = "syn_guard";

/// Most entries of `blocked_dst_ports` (the CUDA parameter block holds this many).
pub const MAX_BLOCKED: usize = 16;

const TCP_FIN: u16 = 0x01;
const TCP_SYN: u16 = 0x02;
const TCP_RST: u16 = 0x04;
const TCP_ACK: u16 = 0x10;
const PROTO_TCP: u8 = 6;

/// The counters, in the order of `counters->v[1..]` on the GPU.
pub const COUNTERS: [&str; 4] = ["syn", "bad_flags", "low_src_port", "blocked_dst_port"];

/// The stage's options (`- custom: { name: syn_guard, min_src_port: 1024, ... }`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynGuardOptions {
    /// SYNs from a source port below this are dropped. Default 1024 (0 turns the rule off).
    pub min_src_port: u16,
    /// SYNs to these destination ports are dropped (at most 16). Default none.
    pub blocked_dst_ports: Vec<u16>,
}

impl Default for SynGuardOptions {
    fn default() -> Self {
        SynGuardOptions {
            min_src_port: 1024,
            blocked_dst_ports: Vec::new(),
        }
    }
}

/// A port number option.
fn port(v: &serde_json::Value) -> anyhow::Result<u16> {
    v.as_u64()
        .and_then(|n| u16::try_from(n).ok())
        .ok_or_else(|| anyhow::anyhow!("a port number 0-65535, got {v}"))
}

impl SynGuardOptions {
    /// Reads the options from the config (everything under `custom:` but `name`); an error
    /// names the option.
    pub fn from_json(v: &serde_json::Value) -> anyhow::Result<Self> {
        let mut o = SynGuardOptions::default();
        let Some(map) = v.as_object() else {
            anyhow::bail!("options must be a map, got {v}");
        };
        for (key, val) in map {
            match key.as_str() {
                "min_src_port" => o.min_src_port = port(val).context("min_src_port")?,
                "blocked_dst_ports" => {
                    let list = val.as_array().ok_or_else(|| {
                        anyhow::anyhow!("blocked_dst_ports: a list of port numbers, got {val}")
                    })?;
                    if list.len() > MAX_BLOCKED {
                        anyhow::bail!(
                            "blocked_dst_ports: {} ports, at most {MAX_BLOCKED}",
                            list.len()
                        );
                    }
                    o.blocked_dst_ports = list
                        .iter()
                        .enumerate()
                        .map(|(i, p)| port(p).with_context(|| format!("blocked_dst_ports[{i}]")))
                        .collect::<anyhow::Result<_>>()?;
                }
                other => anyhow::bail!(
                    "unknown option `{other}` (syn_guard has min_src_port, blocked_dst_ports)"
                ),
            }
        }
        Ok(o)
    }

    /// The parameter block the CUDA code reads (`sg_params`, little-endian as host and GPU
    /// are): min_src_port u16, n_blocked u16, blocked u16[16].
    pub fn params(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(4 + 2 * MAX_BLOCKED);
        p.extend_from_slice(&self.min_src_port.to_le_bytes());
        p.extend_from_slice(&(self.blocked_dst_ports.len() as u16).to_le_bytes());
        for i in 0..MAX_BLOCKED {
            let port = self.blocked_dst_ports.get(i).copied().unwrap_or(0);
            p.extend_from_slice(&port.to_le_bytes());
        }
        p
    }
}

/// The Rust implementation (CPU executor, and the reference).
pub struct SynGuard {
    opts: SynGuardOptions,
    counts: [AtomicU64; 4],
}

impl SynGuard {
    pub fn new(opts: SynGuardOptions) -> Self {
        SynGuard {
            opts,
            counts: Default::default(),
        }
    }

    fn hit(&self, counter: usize, v: &mut Verdict) {
        self.counts[counter].fetch_add(1, Ordering::Relaxed);
        if counter > 0 {
            v.action = Action::Drop;
        }
    }
}

impl CustomStage for SynGuard {
    fn process(&self, _frame: &[u8], m: &PacketMeta, v: &mut Verdict) {
        let f = m.tcp_flags;
        if m.ip_proto != PROTO_TCP || f & TCP_SYN == 0 {
            return;
        }
        if f & (TCP_FIN | TCP_RST) != 0 {
            return self.hit(1, v);
        }
        if f & TCP_ACK != 0 {
            return;
        }
        self.hit(0, v);
        if m.src_port < self.opts.min_src_port {
            return self.hit(2, v);
        }
        if self.opts.blocked_dst_ports.contains(&m.dst_port) {
            self.hit(3, v);
        }
    }

    fn counter_names(&self) -> Vec<String> {
        COUNTERS.iter().map(|s| s.to_string()).collect()
    }

    fn counters(&self) -> Vec<u64> {
        self.counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }
}

/// The CUDA implementation (the stage ABI of gpu-kernels/cuda/pktwarp_abi.h): the same rules, in
/// the same order, with the same counters (`v[1..4]` = [`COUNTERS`]).
pub const SYN_GUARD_CUDA: &str = r#"
#define SG_MAX_BLOCKED 16u
typedef struct sg_params {
    uint16_t min_src_port;
    uint16_t n_blocked;
    uint16_t blocked[SG_MAX_BLOCKED];
} sg_params;

PW_DEVICE void syn_guard(const pw_frame *f, pw_packet_meta *m, pw_verdict *v, const void *params,
                         pw_stage_counters *c) {
    (void)f;
    const sg_params *p = (const sg_params *)params;
    const uint32_t fl = m->tcp_flags;
    if (m->ip_proto != 6u || !(fl & 0x02u)) return;
    if (fl & 0x05u) { /* SYN with FIN or RST */
        PW_ADD64(&c->v[2], 1);
        v->action = (uint8_t)PW_ACTION_DROP;
        return;
    }
    if (fl & 0x10u) return; /* SYN-ACK */
    PW_ADD64(&c->v[1], 1);
    if (m->src_port < p->min_src_port) {
        PW_ADD64(&c->v[3], 1);
        v->action = (uint8_t)PW_ACTION_DROP;
        return;
    }
    const uint32_t n = p->n_blocked < SG_MAX_BLOCKED ? p->n_blocked : SG_MAX_BLOCKED;
    for (uint32_t i = 0; i < n; i++) {
        if (m->dst_port == p->blocked[i]) {
            PW_ADD64(&c->v[4], 1);
            v->action = (uint8_t)PW_ACTION_DROP;
            return;
        }
    }
}
"#;

/// Builds `syn_guard` stages from their YAML options.
pub struct SynGuardFactory;

impl StageFactory for SynGuardFactory {
    fn build(&self, options: &serde_json::Value) -> anyhow::Result<BuiltStage> {
        let opts = SynGuardOptions::from_json(options)?;
        let gpu = GpuStage {
            source: SYN_GUARD_CUDA.to_string(),
            function: "syn_guard".into(),
            params: opts.params(),
            counter_names: COUNTERS.iter().map(|s| s.to_string()).collect(),
            buffers: Vec::new(),
        };
        Ok(BuiltStage {
            cpu: Arc::new(SynGuard::new(opts)),
            gpu: Some(gpu),
        })
    }
}

/// The registry a syn-guard binary runs with: the built-ins and `syn_guard`.
pub fn registry() -> pipeline::stage::StageRegistry {
    let mut r = pipeline::stage::StageRegistry::default();
    // The name is a constant that satisfies the registry's rules and nothing else is registered.
    r.register(NAME, Arc::new(SynGuardFactory))
        .expect("syn_guard registers in an empty registry");
    r
}
