//! `pktwarp classify`: classify a header trace against a rule file and print, per trace line, the
//! 0-based index of the first matching rule or -1 (the `expected_dpdk_acl/*.match` format).
//! With `--bench N`, classify the whole trace N times on this core and print the rate instead.

use anyhow::Context;
use flow_rules::abi::{AclKey, ACL_NO_MATCH};
use flow_rules::acl::{classbench, load_rules, read_text, RuleFormat};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Format {
    Classbench,
    Yaml,
}

#[derive(clap::Args)]
pub struct Args {
    /// Rule file (`.gz` is decompressed).
    #[arg(long)]
    rules: PathBuf,
    /// Rule file format; default: yaml for .yaml/.yml, else classbench.
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Header trace (`.gz` is decompressed): addresses as 32-bit decimals, dotted quads or IPv6
    /// text, the family per line.
    #[arg(long)]
    trace: PathBuf,
    /// Classify the whole trace N times on one core and print the rate instead of the matches.
    #[arg(long, value_name = "N")]
    bench: Option<u32>,
    /// How many shadowed-rule warnings to print (the total is always printed).
    #[arg(long, default_value_t = 5)]
    max_warnings: usize,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let format = match args.format {
        Some(Format::Yaml) => RuleFormat::Yaml,
        Some(Format::Classbench) => RuleFormat::ClassBench,
        None => {
            let name = args.rules.to_string_lossy();
            if name.ends_with(".yaml") || name.ends_with(".yml") {
                RuleFormat::Yaml
            } else {
                RuleFormat::ClassBench
            }
        }
    };
    let mut set = load_rules(&args.rules, format)?;
    if let Some(r) = set.first_ct_rule() {
        anyhow::bail!(
            "{}: key `ct`: trace headers have no connection state, so `classify` cannot match \
             this rule set; `ct:` rules run in a pipeline with a `conntrack` stage",
            r.loc
        );
    }
    let trace_text = read_text(&args.trace)?;
    let trace = classbench::parse_trace(&args.trace, &trace_text)?;
    drop(trace_text);
    let cls = set.compile();
    for w in set.warnings.iter().take(args.max_warnings) {
        errln!("{w}");
    }
    if set.warnings.len() > args.max_warnings {
        errln!(
            "{}: {} shadowed rules in all ({} shown)",
            args.rules.display(),
            set.warnings.len(),
            args.max_warnings
        );
    }
    let keys: Vec<AclKey> = trace.iter().map(|t| t.key).collect();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match args.bench {
        None => {
            let mut res = vec![0u32; keys.len()];
            cls.classify_batch(&keys, &mut res);
            for &m in &res {
                if m == ACL_NO_MATCH {
                    writeln!(out, "-1")?;
                } else {
                    writeln!(out, "{m}")?;
                }
            }
        }
        Some(n) => {
            let s = cls.stats();
            writeln!(out, "rules: {}", s.rules)?;
            writeln!(out, "build: {:.3} ms", s.build_time.as_secs_f64() * 1e3)?;
            writeln!(
                out,
                "table memory: {} bytes (image {}, CPU leaf blocks and tree copy {})",
                s.image_bytes + s.cpu_lanes_bytes,
                s.image_bytes,
                s.cpu_lanes_bytes
            )?;
            writeln!(out, "tables: {s}")?;
            writeln!(out, "trace: {} headers x {} iterations", keys.len(), n)?;
            // The whole trace in bursts, as the acl stage and dpdk-test-acl classify.
            let mut res = vec![0u32; keys.len()];
            let t0 = Instant::now();
            let mut sum = 0u64;
            for _ in 0..n {
                cls.classify_batch(std::hint::black_box(&keys), &mut res);
                sum = sum.wrapping_add(u64::from(res.get(res.len() / 2).copied().unwrap_or(0)));
            }
            let dt = t0.elapsed().as_secs_f64();
            std::hint::black_box(sum);
            let pkts = keys.len() as f64 * f64::from(n);
            writeln!(
                out,
                "time: {dt:.3} s, {:.1} ns/pkt",
                dt * 1e9 / pkts.max(1.0)
            )?;
            writeln!(out, "{:.3} Mpps", pkts / dt.max(1e-9) / 1e6)?;
        }
    }
    out.flush().context("writing output")?;
    Ok(0)
}
