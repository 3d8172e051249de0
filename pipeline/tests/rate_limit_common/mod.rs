//! The DDoS scrubber's rate limits (configs/ddos-scrubber.yaml) and traffic for them, shared by
//! the rate_limit tests (host-built CUDA and the GPU machine's).

use crate::conntrack_common::traffic;
use pipeline::burst::FrameDesc;
use pipeline::internal::stage::config::StageConfig;
use pipeline::stage::Pipeline;
use pktwarp_flow::rate::RateConfig;

/// The scrubber's rules (configs/ddos-scrubber.yaml) with `entries` buckets a queue.
pub fn rules(entries: u64) -> RateConfig {
    rules_edited(entries, &|t| t.to_string())
}

/// [`rules`] with the config's text changed by `edit` first (a reload's new rules).
pub fn rules_edited(entries: u64, edit: &dyn Fn(&str) -> String) -> RateConfig {
    // Built in: the GPU machine runs the carried test binary far from the source tree.
    let text = edit(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../configs/ddos-scrubber.yaml"
    )));
    let start = text.find("  - rate_limit:\n").expect("a rate_limit stage") + 16;
    let end = text[start..].find("  - count").expect("count after it") + start;
    let body: String = text[start..end]
        .lines()
        .map(|l| l.get(6..).unwrap_or("").to_string() + "\n")
        .collect();
    let body = body.replace("entries: 65536", &format!("entries: {entries}"));
    serde_saphyr::from_str(&body).unwrap_or_else(|e| panic!("{e}\n{body}"))
}

pub fn scrubber(entries: u64) -> Pipeline {
    let stages = [
        StageConfig::Parse,
        StageConfig::RateLimit(rules(entries)),
        StageConfig::Count,
    ];
    pipeline::internal::stage::build(&stages, |x| x.to_path_buf()).expect("pipeline")
}

/// A TCP SYN from `src` (port `sport`) to 192.0.2.1:80.
pub fn syn(src: [u8; 4], sport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 54];
    f[12] = 0x08;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&40u16.to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&[192, 0, 2, 1]);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    f[46] = 0x50;
    f[47] = 0x02;
    f
}

/// Connection traffic with a SYN flood woven in: sixteen sources, one SYN every 10 us in turn
/// (6250 a second each against the rule's 100 and burst 200), on queue 0.
pub fn with_flood(seed: u64, frames: usize, flood: usize) -> Vec<(FrameDesc, Vec<u8>)> {
    let mut out = traffic(seed, frames);
    let t0 = out.first().map_or(0, |f| f.0.timestamp_ns);
    for i in 0..flood {
        let f = syn([203, 0, 113, 1 + (i % 16) as u8], 1024 + (i % 60000) as u16);
        let d = FrameDesc {
            queue: 0,
            len: f.len() as u32,
            wire_len: f.len() as u32,
            timestamp_ns: t0 + 10_000 * i as u64,
            ..FrameDesc::default()
        };
        out.push((d, f));
    }
    // Arrival order is time order (stable: equal times keep the generator's order).
    out.sort_by_key(|f| f.0.timestamp_ns);
    out
}
