//! The `acl` stage: builds the classification key from the packet metadata and the ingress port,
//! walks the compiled flat tables (the same bytes the CUDA matcher walks), and turns the first
//! matching rule's action into the frame's verdict. No match: the configured default.

use std::path::{Path, PathBuf};

use flow_rules::abi::{AclKey, ACL_NO_MATCH};
use flow_rules::acl::{self, AclClassifier, AclRuleSet, RuleFormat, Verdict as RuleVerdict};

use crate::config::{AclStageConfig, DefaultAction, RuleFormat as CfgFormat};
use crate::meta::PacketMeta;
use crate::verdict::Action;

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
    pub default: Action,
    pub path: PathBuf,
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

impl AclStage {
    /// Loads, validates and compiles the stage's rule file; shadowed rules are logged.
    pub fn from_config(
        c: &AclStageConfig,
        resolve: &impl Fn(&Path) -> PathBuf,
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
        Self::load(&path, format, default)
    }

    pub fn load(path: &Path, format: RuleFormat, default: Action) -> anyhow::Result<AclStage> {
        let mut rules = acl::load_rules(path, format)?;
        let classifier = rules.compile();
        for w in &rules.warnings {
            tracing::warn!("{w}");
        }
        Ok(AclStage {
            rules,
            classifier,
            default,
            path: path.to_path_buf(),
        })
    }

    pub fn rule_count(&self) -> usize {
        self.rules.rules.len()
    }

    #[inline]
    pub fn classify(&self, m: &PacketMeta, port: u16) -> AclResult {
        let key = key_from_meta(m, port);
        let rule = self.classifier.classify(&key);
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
