//! The `verify:` section: the daemon checks itself.
//!
//! ```yaml
//! verify:
//!   sample: 1000   # re-run one burst in 1000 on the CPU reference and compare; 0 or absent: off
//! ```
//!
//! See [`crate::verify::sampler`] for what is compared and how the data path is kept free.

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

/// `verify.sample` is on only for pipelines the reference can re-run: a `fronthaul` stage keeps
/// every frame it decodes (its slot grid and sequence tracking), and a `rate_limit` stage takes
/// a token per frame, so a second run would record the sampled frames twice.
pub(super) fn check_verify(cfg: &Config) -> Result<(), ConfigError> {
    let Some(v) = &cfg.verify else { return Ok(()) };
    if v.value.sample == 0 {
        return Ok(());
    }
    if let Some(i) = cfg
        .pipeline
        .iter()
        .position(|s| matches!(s.value, StageConfig::Fronthaul(_)))
    {
        return Err(ConfigError {
            file: cfg.path.clone(),
            line: v.referenced.line() as u32,
            column: v.referenced.column() as u32,
            key: "verify.sample".into(),
            message: format!(
                "cannot re-run pipeline[{i}] (fronthaul): it keeps state from every frame \
                 (slot grid, sequence ids), which a second run would record twice; remove \
                 `verify:` or set `sample: 0`"
            ),
        });
    }
    if let Some(i) = cfg
        .pipeline
        .iter()
        .position(|s| matches!(s.value, StageConfig::RateLimit(_)))
    {
        return Err(ConfigError {
            file: cfg.path.clone(),
            line: v.referenced.line() as u32,
            column: v.referenced.column() as u32,
            key: "verify.sample".into(),
            message: format!(
                "cannot re-run pipeline[{i}] (rate_limit): every frame takes a token from its \
                 bucket, which a second run would take twice; remove `verify:` or set \
                 `sample: 0`"
            ),
        });
    }
    Ok(())
}

/// The sampling verifier is wired into the CPU executor only: with `verify.sample` on, the GPU
/// executor is refused (rather than run unchecked while the config says it is checked).
pub fn check_executor(cfg: &Config, executor: &str) -> Result<(), ConfigError> {
    match &cfg.verify {
        Some(v) if v.value.sample > 0 && executor != "cpu" => Err(ConfigError {
            file: cfg.path.clone(),
            line: v.referenced.line() as u32,
            column: v.referenced.column() as u32,
            key: "verify.sample".into(),
            message: format!(
                "the {executor} executor was chosen, and the sampling verifier runs beside the \
                 CPU executor only: set `executor.kind: cpu`, or remove `verify:` (or \
                 `sample: 0`) and check the GPU offline with `pktwarp verify CONFIG`"
            ),
        }),
        _ => Ok(()),
    }
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

    #[test]
    fn off_on_and_refused_with_fronthaul() {
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
        let text = "ports:\n  - name: wire\n    gen: { count: 10 }\npipeline:\n  - fronthaul: {}\n\
                    verify: { sample: 5 }\n";
        let e = match crate::config::parse_str(text, Path::new("v.yaml")) {
            Ok(_) => panic!("verify accepted with a fronthaul stage"),
            Err(e) => e,
        };
        assert_eq!((e.key.as_str(), e.line), ("verify.sample", 6), "{e}");
        assert!(e.message.contains("fronthaul"), "{e}");
    }

    /// The GPU executor is refused with sampling on (it has no verifier), the CPU one taken.
    #[test]
    fn sampling_refuses_the_gpu_executor() {
        let cfg = crate::config::parse_str(
            &format!("{BASE}verify: {{ sample: 3 }}\n"),
            Path::new("v.yaml"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let e = super::check_executor(&cfg, "gpu").expect_err("gpu refused");
        assert_eq!((e.key.as_str(), e.line), ("verify.sample", 7), "{e}");
        assert!(super::check_executor(&cfg, "cpu").is_ok());
        let off = crate::config::parse_str(BASE, Path::new("v.yaml")).unwrap();
        assert!(super::check_executor(&off, "gpu").is_ok());
    }
}
