//! The `acl` stage: builds the classification key from the packet metadata and the ingress port,
//! walks the compiled flat tables (the same bytes the CUDA matcher walks), and turns the first
//! matching rule's action into the frame's verdict. No match: the configured default.
//!
//! A rule may also rewrite (`set: { dscp, dst_mac, port }`, [`flow_rules::acl::rewrite`]): when
//! it matches and its verdict is not drop, the DSCP is set as the `dscp` stage sets it (IPv4
//! checksum updated incrementally), then the destination MAC as `l2fwd`'s `dst`, then the output
//! port as `route` sets it. A stage whose rule set rewrites makes the pipeline a rewriting one
//! ([`crate::stage::Pipeline::rewrites`]); on the GPU it is `pw_stage_acl_rw` (composed template).

use std::path::{Path, PathBuf};

use flow_rules::abi::{AclKey, ACL_NO_MATCH};
use flow_rules::acl::ct::CtClassifiers;
use flow_rules::acl::{self, AclClassifier, AclRuleSet, RuleFormat, Verdict as RuleVerdict};

use crate::meta::PacketMeta;
use crate::rewrite::{Dscp, L2fwd};
use crate::stage::config::{AclStageConfig, DefaultAction, RuleFormat as CfgFormat};
use crate::verdict::{Action, Verdict};

/// The result of classifying one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AclResult {
    /// Rule index (file order) or `ACL_NO_MATCH`.
    pub rule: u32,
    pub action: Action,
    pub mark: u32,
}

/// A compiled rule set, shared read-only by every worker.
pub struct AclStage {
    pub rules: AclRuleSet,
    pub classifier: AclClassifier,
    /// A classifier per connection state when a rule has `ct:` (the state in the metadata,
    /// from the `conntrack` stage, picks one); `None`: `classifier` serves every frame.
    pub ct: Option<CtClassifiers>,
    pub default: Action,
    pub path: PathBuf,
    /// Rule-set generation these tables were published as (0 at start; set by
    /// `Pipeline::reload_acl`). Travels with the tables so a burst's generation is exactly the
    /// tables it was classified with.
    pub generation: u64,
}

/// `pw_acl_key_from_meta`: the key of a parsed frame.
#[inline]
pub fn key_from_meta(m: &PacketMeta, port: u16) -> AclKey {
    acl::key_from_fields(
        m.ip_version,
        m.src_ip,
        m.dst_ip,
        m.ip_proto,
        m.src_port,
        m.dst_port,
        m.ip_tos,
        m.tcp_flags,
        m.vlan_count,
        m.vlan_tci[0],
        port,
    )
}

fn action_of(v: RuleVerdict) -> Action {
    match v {
        RuleVerdict::Pass => Action::Pass,
        RuleVerdict::Drop => Action::Drop,
        RuleVerdict::Mirror => Action::Mirror,
        RuleVerdict::ToHost => Action::ToHost,
    }
}

/// Shadowed-rule warnings logged one by one when a rule set loads; the rest are counted in one
/// line.
pub const MAX_SHADOW_WARNINGS: usize = 5;

impl AclStage {
    /// Loads, validates and compiles the stage's rule file; shadowed rules are logged. A rule's
    /// `set: { port }` must name one of `tx_ports` (the config's ports with a transmit side;
    /// `None`: the rule set's own first-use order, see [`flow_rules::acl::rewrite`]).
    pub fn from_config(
        c: &AclStageConfig,
        resolve: &impl Fn(&Path) -> PathBuf,
        tx_ports: Option<&[String]>,
    ) -> anyhow::Result<AclStage> {
        let path = resolve(&c.rules);
        let format = match c.format {
            Some(CfgFormat::Yaml) => RuleFormat::Yaml,
            Some(CfgFormat::Classbench) => RuleFormat::ClassBench,
            None => {
                let name = path.to_string_lossy();
                if name.ends_with(".yaml") || name.ends_with(".yml") {
                    RuleFormat::Yaml
                } else {
                    RuleFormat::ClassBench
                }
            }
        };
        let default = match c.default {
            DefaultAction::Pass => Action::Pass,
            DefaultAction::Drop => Action::Drop,
        };
        Self::load_for(&path, format, default, tx_ports)
    }

    pub fn load(path: &Path, format: RuleFormat, default: Action) -> anyhow::Result<AclStage> {
        Self::load_for(path, format, default, None)
    }

    /// [`AclStage::load`] with the output ports `set: { port }` names resolve against.
    pub fn load_for(
        path: &Path,
        format: RuleFormat,
        default: Action,
        tx_ports: Option<&[String]>,
    ) -> anyhow::Result<AclStage> {
        let mut rules = acl::load_rules(path, format)?;
        rules.resolve_ports(tx_ports)?;
        let classifier = rules.compile();
        let ct = CtClassifiers::build(&rules);
        // Capped as `pktwarp classify` caps them: a large generated rule set can shadow tens
        // of thousands of rules, and one log line each drowns the log.
        for w in rules.warnings.iter().take(MAX_SHADOW_WARNINGS) {
            tracing::warn!("{w}");
        }
        if rules.warnings.len() > MAX_SHADOW_WARNINGS {
            tracing::warn!(
                event = "shadowed_rules",
                file = %path.display(),
                shadowed = rules.warnings.len(),
                shown = MAX_SHADOW_WARNINGS,
                "{}: {} shadowed rules in all ({MAX_SHADOW_WARNINGS} shown; `pktwarp classify` \
                 lists them)",
                path.display(),
                rules.warnings.len()
            );
        }
        Ok(AclStage {
            rules,
            classifier,
            ct,
            default,
            path: path.to_path_buf(),
            generation: 0,
        })
    }

    pub fn rule_count(&self) -> usize {
        self.rules.rules.len()
    }

    /// Whether a rule has `set:` (a rewrite of the frame or of its output port).
    pub fn has_rewrites(&self) -> bool {
        self.classifier.has_rewrites()
    }

    /// Whether a rule's `set:` changes frame bytes (`dscp`, `dst_mac`); `set: { port }` alone
    /// routes without writing, so the frames stay read-only (and, on the zero-copy paths, are
    /// sent as they arrived).
    pub fn writes_frames(&self) -> bool {
        self.classifier.writes_frames()
    }

    /// Rule `rule`'s `set: { port }` on a read-only frame it matched (`v`: the verdict the
    /// stage set): what [`AclStage::apply_rewrite`] does for a rule set that writes no bytes.
    #[inline]
    pub fn apply_route(&self, rule: u32, v: &mut Verdict) {
        if v.action == Action::Drop {
            return;
        }
        if let Some(p) = self.classifier.rewrite(rule).and_then(|rw| rw.out_port) {
            v.out_port = p;
        }
    }

    /// Applies rule `rule`'s rewrite to a frame it matched (`v`: the verdict the stage set);
    /// nothing for a drop, a rule without `set:` or no match.
    #[inline]
    pub fn apply_rewrite(
        &self,
        rule: u32,
        frame: &mut [u8],
        meta: &mut PacketMeta,
        v: &mut Verdict,
    ) {
        if v.action == Action::Drop {
            return;
        }
        let Some(rw) = self.classifier.rewrite(rule) else {
            return;
        };
        // The dscp and l2fwd stages' own rewrites, so the semantics are theirs exactly.
        if let Some(dscp) = rw.dscp {
            let _ = Dscp { dscp }.apply(frame, meta, v);
        }
        if let Some(mac) = rw.dst_mac {
            let op = L2fwd {
                swap: false,
                src: None,
                dst: Some(mac),
            };
            let _ = op.apply(frame, meta, v);
        }
        if let Some(p) = rw.out_port {
            v.out_port = p;
        }
    }

    /// The image the GPU classifies with (little-endian words): the classifier's, or, for a
    /// rule set with `ct:` rules, the per-state classifiers' (`CtClassifiers::gpu_image`,
    /// which the composed acl stage picks from by the frame's `ct_state`).
    pub fn gpu_image_bytes(&self) -> Vec<u8> {
        match &self.ct {
            Some(c) => c
                .gpu_image(self.rules.rules.len())
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect(),
            None => self.classifier.image_bytes(),
        }
    }

    /// The first rule with a `ct:` condition: such a rule set needs a `conntrack` stage
    /// before its `acl` stage.
    pub fn first_ct_rule(&self) -> Option<&acl::AclRule> {
        self.rules.first_ct_rule()
    }

    #[inline]
    pub fn classify(&self, m: &PacketMeta, port: u16) -> AclResult {
        let key = key_from_meta(m, port);
        let rule = match &self.ct {
            Some(c) => c.classify(&key, m.ct_state),
            None => self.classifier.classify(&key),
        };
        self.result(rule)
    }

    /// The stage's result for the classifier's answer `rule` (a rule index, or `ACL_NO_MATCH`:
    /// the default action).
    #[inline]
    pub fn result(&self, rule: u32) -> AclResult {
        if rule == ACL_NO_MATCH {
            return AclResult {
                rule,
                action: self.default,
                mark: 0,
            };
        }
        let a = self.classifier.action(rule);
        AclResult {
            rule,
            action: action_of(a.verdict),
            mark: a.mark.unwrap_or(0),
        }
    }
}

/// The `acl` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: crate::stage::descriptor::StageDescriptor =
    crate::stage::descriptor::StageDescriptor {
        name: "acl",
        usage: "`acl: { rules, default }`",
        summary: "first matching rule's action: pass, drop, mirror, to-host, mark, and what it rewrites (`set:`, below); `kill -HUP` reloads the rules",
        needs: crate::stage::descriptor::StageNeeds::META,
        drop_reasons: &[crate::verdict::DropReason::AclDrop],
        counters: &[],
        gpu: crate::stage::descriptor::GpuImpl::Fused,
        reloads: true,
    };

#[cfg(test)]
mod tests {
    use super::*;
    use flow_rules::abi::VLAN_NONE;

    /// Rust `key_from_meta` == CUDA `pw_acl_key_from_meta` (host build of acl.cuh) on
    /// pseudo-random metadata: IPv4, IPv6, non-IP, tagged and untagged, all flag bits.
    #[test]
    fn key_from_meta_equals_cuda() {
        let mut x = 0x9E37_79B9u32;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for i in 0..5000u32 {
            let mut m = PacketMeta {
                ip_version: [0, 4, 6, 4, 5][(i % 5) as usize],
                ip_proto: next() as u8,
                ip_tos: next() as u8,
                src_port: next() as u16,
                dst_port: next() as u16,
                tcp_flags: next() as u16 & 0x1FF,
                vlan_count: (next() % 3) as u8,
                vlan_tci: [next() as u16, next() as u16],
                ..PacketMeta::default()
            };
            for w in 0..4 {
                m.src_ip[w] = next();
                m.dst_ip[w] = next();
            }
            let port = next() as u16;
            let rust = key_from_meta(&m, port);
            let mut cuda = AclKey::default();
            // SAFETY: `m` is a valid #[repr(C)] pw_packet_meta (layout pinned by meta.rs tests),
            // `cuda` a valid pw_acl_key; both outlive the call, which only reads / writes them.
            unsafe {
                flow_rules::acl::cuda_host::pw_host_acl_key_from_meta(
                    (&m as *const PacketMeta).cast(),
                    port,
                    &mut cuda,
                )
            };
            assert_eq!(rust, cuda, "meta {m:?}");
            if m.ip_version != 4 && m.ip_version != 6 {
                assert_eq!(rust.ip_version, 0);
                assert_eq!((rust.src_ip, rust.proto, rust.dst_port), ([0; 4], 0, 0));
            }
            if m.vlan_count == 0 {
                assert_eq!(rust.vlan_id, VLAN_NONE);
            } else {
                assert_eq!(rust.vlan_id, m.vlan_tci[0] & 0xFFF);
            }
            assert_eq!(
                rust.dscp,
                if rust.ip_version != 0 {
                    m.ip_tos >> 2
                } else {
                    0
                }
            );
        }
    }

    #[test]
    fn stage_applies_rule_actions_and_default() {
        let p = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../configs/rules/inline-filter.rules.yaml"
        ));
        let st = AclStage::load(p, RuleFormat::Yaml, Action::Pass).unwrap();
        let mut m = PacketMeta {
            ip_version: 4,
            ip_proto: 6,
            dst_port: 23,
            tcp_flags: 0x10,
            ..PacketMeta::default()
        };
        m.src_ip[0] = 0x0A01_0203;
        let r = st.classify(&m, 0);
        assert_eq!(r.action, Action::Drop);
        assert_eq!(
            st.rules.rules[r.rule as usize].name.as_deref(),
            Some("telnet")
        );
        m.dst_port = 53;
        m.ip_proto = 17;
        let r = st.classify(&m, 0);
        assert_eq!((r.action, r.mark), (Action::Mirror, 53));
        m.dst_port = 443;
        m.ip_proto = 6;
        let r = st.classify(&m, 0);
        assert_eq!((r.rule, r.action), (ACL_NO_MATCH, Action::Pass));
        // Non-IP frames match only L2-only rules; this rule set has none.
        let arp = PacketMeta {
            ether_type: 0x0806,
            ..PacketMeta::default()
        };
        assert_eq!(st.classify(&arp, 0).rule, ACL_NO_MATCH);
    }
}
