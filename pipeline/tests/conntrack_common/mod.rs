//! The stateful firewall and connection traffic for the conntrack tests (host-built CUDA and
//! the GPU executor against the CPU executor).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pipeline::burst::FrameDesc;
use pipeline::config;
use pipeline::daemon;
use pipeline::stage::Pipeline;
use pktwarp_flow::testgen::{generate, GenConfig};

/// The repository: the working folder when it has the configs (a test binary carried to the
/// GPU machine runs in a copy of the repository, not where it was built), else the checkout
/// the test was built in.
fn root() -> PathBuf {
    if Path::new("configs/stateful-firewall.yaml").exists() {
        return PathBuf::from(".");
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The shipped stateful firewall with `entries` per queue, its inside network the generator's
/// clients (10.0.0.0/16), prepared as the daemon prepares it.
pub fn firewall(entries: u64, name: &str) -> Arc<Pipeline> {
    firewall_edited(entries, name, &|t| t)
}

/// [`firewall`] with the config's text changed by `edit` first (a stage added to its pipeline).
pub fn firewall_edited(entries: u64, name: &str, edit: &dyn Fn(String) -> String) -> Arc<Pipeline> {
    let d = std::env::temp_dir().join(format!("pktwarp-ct-host-{}-{name}", std::process::id()));
    std::fs::create_dir_all(d.join("rules")).unwrap();
    let c = root().join("configs");
    std::fs::copy(
        c.join("stateful-firewall.pcap"),
        d.join("stateful-firewall.pcap"),
    )
    .unwrap();
    let rules = std::fs::read_to_string(c.join("rules/stateful-firewall.rules.yaml")).unwrap();
    assert!(rules.contains("10.1.0.0/16"));
    std::fs::write(
        d.join("rules/stateful-firewall.rules.yaml"),
        rules.replace("10.1.0.0/16", "10.0.0.0/16"),
    )
    .unwrap();
    let text = std::fs::read_to_string(c.join("stateful-firewall.yaml")).unwrap();
    assert!(text.contains("entries: 65536"));
    let text = edit(text.replace("entries: 65536", &format!("entries: {entries}")));
    std::fs::write(d.join("c.yaml"), text + "metrics: { enabled: false }\n").unwrap();
    let cfg = config::load(&d.join("c.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg)
        .unwrap_or_else(|e| panic!("{e:#}"))
        .pipeline;
    assert_eq!(
        p.gpu_refusal(),
        None,
        "the GPU executor runs the stateful firewall"
    );
    p
}

/// Receive queue of a frame: the XOR of its IP addresses' bytes (the same both ways, as the
/// flow-key steering of a config with `conntrack` keeps a flow on one queue), modulo 2.
pub fn queue_of(f: &[u8]) -> u16 {
    let off = if f.len() > 14 && f[12..14] == [0x81, 0x00] {
        4
    } else {
        0
    };
    let et = f
        .get(12 + off..14 + off)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    let addrs = match et {
        0x0800 => f.get(26 + off..34 + off),
        0x86dd => f.get(22 + off..54 + off),
        _ => None,
    };
    addrs.map_or(0, |a| a.iter().fold(0u8, |x, b| x ^ b) as u16 & 1)
}

pub fn traffic(seed: u64, frames: usize) -> Vec<(FrameDesc, Vec<u8>)> {
    let g = GenConfig {
        seed,
        frames,
        concurrent: 48,
        idle_pct: 2,
        ..GenConfig::default()
    };
    generate(&g)
        .into_iter()
        .map(|f| {
            let d = FrameDesc {
                queue: queue_of(&f.bytes),
                len: f.bytes.len() as u32,
                wire_len: f.bytes.len() as u32,
                timestamp_ns: f.time_ns,
                ..FrameDesc::default()
            };
            (d, f.bytes)
        })
        .collect()
}
