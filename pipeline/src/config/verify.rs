//! The `verify:` section: the daemon checks itself.
//!
//! ```yaml
//! verify:
//!   sample: 1000   # re-run one burst in 1000 on the CPU reference and compare; 0 or absent: off
//! ```
//!
//! See `crate::verify::sampler` for what is compared and how the data path is kept free.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{Config, ConfigError, StageConfig};

/// `verify:` — sampled self-checking of the executor against the CPU reference.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyConfig {
    /// Re-run one burst in `sample` (per queue) on the CPU reference beside the executor.
    /// 0: off (the default).
    #[serde(default)]
    pub sample: u64,
}

/// The sampling period a config asks for: 0 when `verify:` is absent or off.
pub fn sample_of(v: &Option<Spanned<VerifyConfig>>) -> u64 {
    v.as_ref().map_or(0, |v| v.value.sample)
}

/// `verify.sample` is on only for pipelines the reference can re-run: a stage that keeps state
/// from every frame would record the sampled frames twice (the reason per stage below).
pub(super) fn check_verify(cfg: &Config) -> Result<(), ConfigError> {
    let Some(v) = &cfg.verify else { return Ok(()) };
    if v.value.sample == 0 {
        return Ok(());
    }
    let stateful = cfg
        .pipeline
        .iter()
        .enumerate()
        .find_map(|(i, s)| rerun_refusal(&s.value).map(|why| (i, s.value.name(), why)));
    if let Some((i, name, why)) = stateful {
        return Err(ConfigError {
            file: cfg.path.clone(),
            line: v.referenced.line() as u32,
            column: v.referenced.column() as u32,
            key: "verify.sample".into(),
            message: format!(
                "cannot re-run pipeline[{i}] ({name}): {why}; remove `verify:` or set `sample: 0`"
            ),
        });
    }
    Ok(())
}

/// Why a second run of a sampled burst through `stage` would change what it keeps (`None`: it
/// keeps nothing per frame).
fn rerun_refusal(stage: &StageConfig) -> Option<&'static str> {
    Some(match stage {
        StageConfig::Keyed(k) => return k.stage.rerun_refusal(),
        StageConfig::RateLimit(_) => {
            "every frame takes a token from its bucket, which a second run would take twice"
        }
        StageConfig::Conntrack(_) | StageConfig::FlowStats(_) => {
            "every frame moves its flow's state, times and counters in the flow table, which a \
             second run would move twice"
        }
        StageConfig::Inspect(_) => {
            "its alerts go to the EVE log and its flowbits and thresholds move with every frame, \
             which a second run would write twice"
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    const BASE: &str =
        "ports:\n  - name: wire\n    gen: { count: 10 }\npipeline:\n  - parse\n  - count\n";

    fn err(verify: &str) -> crate::config::ConfigError {
        let text = format!("{BASE}{verify}");
        match crate::config::parse_str(&text, Path::new("v.yaml")) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e,
        }
    }

    /// A negative, a string, an unknown key: each refused at its line (7: after the 6 lines of
    /// BASE), naming the key.
    #[test]
    fn bad_values_name_the_key_and_line() {
        for (text, key) in [
            ("verify:\n  sample: -1\n", "sample"),
            ("verify:\n  sample: \"x\"\n", "sample"),
            ("verify:\n  sample: 10\n  samples: 3\n", "samples"),
        ] {
            let e = err(text);
            let shown = e.to_string();
            assert!(e.key.ends_with(key), "{text:?}: key {:?} in {shown}", e.key);
            assert!(e.line >= 7, "{text:?}: line {} in {shown}", e.line);
            assert!(shown.contains("v.yaml:"), "{shown}");
        }
        // The unknown key's own line.
        assert_eq!(err("verify:\n  sample: 10\n  samples: 3\n").line, 9);
        assert_eq!(err("verify:\n  sample: -1\n").line, 8);
    }

    /// A keyed stage that keeps state is refused as these are
    /// (`stage::keyed_tests::verify_refuses_a_keyed_stage_that_keeps_state`).
    #[test]
    fn off_and_on() {
        let ok = |v: &str| {
            crate::config::parse_str(&format!("{BASE}{v}"), Path::new("v.yaml"))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(super::sample_of(&ok("").verify), 0);
        assert_eq!(super::sample_of(&ok("verify: { sample: 0 }\n").verify), 0);
        assert_eq!(super::sample_of(&ok("verify: {}\n").verify), 0);
        assert_eq!(
            super::sample_of(&ok("verify: { sample: 1000 }\n").verify),
            1000
        );
    }

    /// The flow-table stages and `inspect` keep state per frame: a re-run would move it twice.
    #[test]
    fn refused_with_stages_that_keep_state_per_frame() {
        let ipfix = "ipfix: { collector: '127.0.0.1:4739' }\n";
        for (stage, extra, want) in [
            (
                "conntrack: { entries: 1024 }",
                "",
                "pipeline[1] (conntrack): every frame moves its flow's state",
            ),
            (
                "flow_stats: { entries: 1024 }",
                ipfix,
                "pipeline[1] (flow_stats): every frame moves",
            ),
        ] {
            let text = format!(
                "ports:\n  - name: wire\n    gen: {{ count: 10 }}\npipeline:\n  - parse\n  \
                 - {stage}\nverify: {{ sample: 5 }}\n{extra}"
            );
            let e = match crate::config::parse_str(&text, Path::new("v.yaml")) {
                Ok(_) => panic!("verify accepted with `{stage}`"),
                Err(e) => e,
            };
            assert_eq!((e.key.as_str(), e.line), ("verify.sample", 7), "{e}");
            assert!(e.message.contains(want), "{e}");
        }
        let c: crate::stage::inspect::InspectStageConfig =
            serde_saphyr::from_str("rules: [a.rules]").unwrap();
        let inspect = crate::config::StageConfig::Inspect(c);
        assert!(super::rerun_refusal(&inspect).is_some_and(|w| w.contains("EVE log")));
        assert!(super::rerun_refusal(&crate::config::StageConfig::Parse).is_none());
    }
}
