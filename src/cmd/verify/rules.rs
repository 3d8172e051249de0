//! The rule sets `pktwarp verify` runs: the acl stage of the reference and the very bytes of its
//! compiled tables, which the GPU walks.

use flow_rules::acl::RuleFormat;
use pipeline::internal::executor::gpu::AclTablesRef;
use pipeline::internal::stage::acl::AclStage;
use pipeline::verdict::Action;
use pipeline::verify::Reference;
use std::path::Path;

/// A rule set: the reference pipeline (parse -> acl -> count, the CPU executor's) built on it,
/// and its flat image for the GPU.
pub struct Acl {
    pub reference: Reference,
    pub bytes: Vec<u8>,
    pub n_rules: u32,
    default_action: u8,
}

/// Loads ClassBench rules, or YAML ones for `.yaml` / `.yml`, with `default` for frames no rule
/// matches.
pub fn load_acl(path: &Path, default: Action) -> anyhow::Result<Acl> {
    let name = path.to_string_lossy();
    let format = if name.ends_with(".yaml") || name.ends_with(".yml") {
        RuleFormat::Yaml
    } else {
        RuleFormat::ClassBench
    };
    let stage = AclStage::load(path, format, default)?;
    if let Some(r) = stage.first_ct_rule() {
        // verify runs parse and acl alone: without `conntrack` every frame is untracked.
        anyhow::bail!(
            "{}: key `ct`: rule sets with `ct:` rules need a `conntrack` stage, which verify \
             does not run (scripts/gpu-conntrack-check.sh compares the stateful firewall on \
             both executors)",
            r.loc
        );
    }
    let bytes = stage.classifier.image_bytes();
    let n_rules = stage.classifier.header().num_rules;
    let default_action = stage.default as u8;
    Ok(Acl {
        reference: Reference::new(Some(stage)),
        bytes,
        n_rules,
        default_action,
    })
}

impl Acl {
    pub fn tables(&self) -> AclTablesRef<'_> {
        AclTablesRef {
            bytes: &self.bytes,
            n_rules: self.n_rules,
        }
    }

    pub fn default_action(&self) -> u8 {
        self.default_action
    }
}
