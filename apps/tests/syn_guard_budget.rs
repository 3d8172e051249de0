//! syn-guard's per-source SYN budget (apps/syn-guard/syn-guard-budget.yaml: `syn_guard`, then a
//! `rate_limit` rule of SYNs without ACK keyed by source): the CPU pipeline's verdicts and the
//! rate-limit table compiled from CUDA for the host (gpu-kernels/cuda/rate_limit.cuh) agree on
//! property-generated SYN traffic, frame by frame, in every counter and in the table's bytes
//! after every burst, for several emulated GPU thread counts; a flooding source is cut to its
//! budget at the right frame while the others pass.

use std::net::IpAddr;
use std::path::PathBuf;

use pipeline::burst::FrameDesc;
use pipeline::config::{Config, StageConfig};
use pipeline::counters::QueueCounters;
use pipeline::meta::PacketMeta;
use pipeline::stage::{Pipeline, Stage};
use pipeline::verdict::{DropReason, Verdict};
use pktwarp_flow::rate::{RateConfig, RateCounters, RateEntry, RateResult, RateTable};
use pktwarp_flow::testgen::{self, Tcp};
use pktwarp_kernels::host::ffi;
use proptest::prelude::*;

fn budget_config(edit: impl Fn(String) -> String) -> Config {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/syn-guard/syn-guard-budget.yaml"
    ));
    let text = edit(std::fs::read_to_string(&path).unwrap());
    pipeline::config::parse_str(&text, &path).unwrap()
}

fn rate_config(cfg: &Config) -> RateConfig {
    cfg.pipeline
        .iter()
        .find_map(|s| match &s.value {
            StageConfig::RateLimit(r) => Some(r.clone()),
            _ => None,
        })
        .expect("the config has a rate_limit stage")
}

/// The host-compiled CUDA table: a copy of a Rust table's entries and counters.
struct CudaRate {
    entries: Vec<RateEntry>,
    counters: RateCounters,
    abi_of: RateTable,
}

impl CudaRate {
    fn burst(&mut self, metas: &[PacketMeta], now: &[u64], nthreads: u32) -> Vec<RateResult> {
        let n = metas.len();
        assert_eq!(now.len(), n);
        let abi = self.abi_of.abi(self.entries.as_mut_ptr() as u64);
        let mut out = vec![RateResult::default(); n];
        // SAFETY: `abi.entries` points at self.entries (the table's whole array, alive and
        // exclusively borrowed for the call); metas, now and out have n elements of the layouts
        // rate_limit.cuh declares (pinned by pktwarp-flow's tests); counters is a RateCounters.
        let rc = unsafe {
            ffi::pw_host_rl_burst(
                &abi as *const _ as *const u8,
                &mut self.counters as *mut _ as *mut u64,
                n as u32,
                metas.as_ptr() as *const u8,
                now.as_ptr(),
                out.as_mut_ptr() as *mut u8,
                nthreads,
            )
        };
        assert_eq!(rc, 0);
        out
    }
}

fn syn(src: IpAddr, sport: u16, dport: u16, flags: u16) -> Vec<u8> {
    let dst: IpAddr = if src.is_ipv4() {
        "192.0.2.1".parse().unwrap()
    } else {
        "2001:db8:ffff::1".parse().unwrap()
    };
    testgen::tcp_frame(
        None,
        (src, sport),
        (dst, dport),
        Tcp {
            flags,
            seq: 7,
            ack: 0,
            win: 1000,
            len: 0,
            wscale: None,
        },
    )
}

/// What a run shows: each frame's verdict, and the frames that reached `rate_limit` (parse and
/// syn_guard passed them) with their metadata and receive times, burst by burst.
struct Run {
    verdicts: Vec<Verdict>,
    bursts: Vec<(Vec<usize>, Vec<PacketMeta>, Vec<u64>)>,
}

/// Runs `frames` (bytes, receive time) through the CPU pipeline in bursts of `burst`.
fn run(p: &Pipeline, frames: &[(Vec<u8>, u64)], burst: usize) -> Run {
    let c = QueueCounters::new(p.stages.len(), 0);
    let mut out = Run {
        verdicts: Vec::new(),
        bursts: Vec::new(),
    };
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    for (k, chunk) in frames.chunks(burst).enumerate() {
        let descs = chunk.iter().map(|(f, t)| {
            let d = FrameDesc {
                len: f.len() as u32,
                wire_len: f.len() as u32,
                timestamp_ns: *t,
                ..FrameDesc::default()
            };
            (d, f.as_slice())
        });
        p.run_frames(descs, &mut metas, &mut verdicts, &c);
        let mut reached = (Vec::new(), Vec::new(), Vec::new());
        for (i, v) in verdicts.iter().enumerate() {
            if !matches!(
                v.reason,
                Some(DropReason::ParseError | DropReason::StageDrop)
            ) {
                reached.0.push(k * burst + i);
                reached.1.push(metas[i]);
                reached.2.push(chunk[i].1);
            }
        }
        out.bursts.push(reached);
        out.verdicts.extend_from_slice(&verdicts);
    }
    // Every frame was counted once: passed or dropped with its reason.
    let drops: u64 = DropReason::ALL.iter().map(|r| c.drop_count(*r)).sum();
    assert_eq!(c.passed.get() + drops, frames.len() as u64);
    out
}

fn stage_rules(p: &Pipeline) -> Vec<(String, [u64; 3])> {
    p.stages
        .iter()
        .find_map(|s| match s {
            Stage::RateLimit(r) => Some(r.rule_counters()),
            _ => None,
        })
        .expect("a rate_limit stage")
}

/// The frames that reached the budget through the Rust table (a fresh one from the config) and
/// through CUDA copies with each thread count: the same results, counters and table bytes after
/// every burst, and the pipeline dropped exactly the frames the tables limit.
fn agree(cfg: &Config, p: &Pipeline, r: &Run, threads: &[u32]) -> RateTable {
    let mut rust = RateTable::from_config(&rate_config(cfg)).unwrap();
    let mut cudas: Vec<CudaRate> = threads
        .iter()
        .map(|_| CudaRate {
            entries: rust.entries().to_vec(),
            counters: rust.counters(),
            abi_of: rust.clone(),
        })
        .collect();
    for (idx, metas, now) in &r.bursts {
        let mut want = vec![RateResult::default(); metas.len()];
        rust.apply_burst(metas, now, &mut want).unwrap();
        for (c, &nt) in cudas.iter_mut().zip(threads) {
            assert_eq!(c.burst(metas, now, nt), want, "{nt} threads");
            assert_eq!(c.counters, rust.counters(), "{nt} threads");
            assert!(c.entries == rust.entries(), "table bytes, {nt} threads");
        }
        for (&i, w) in idx.iter().zip(&want) {
            let limited = r.verdicts[i].reason == Some(DropReason::RateLimited);
            assert_eq!(
                limited,
                w.drop == 1,
                "frame {i}: {:?} vs {w:?}",
                r.verdicts[i]
            );
        }
    }
    let k = rust.counters().rules[0];
    assert_eq!(
        stage_rules(p),
        [(
            "syn_budget".to_string(),
            [k.matched, k.limited, k.table_full]
        )]
    );
    rust
}

#[test]
fn the_budget_config_runs_syn_guard_then_the_budget_on_either_executor() {
    let cfg = budget_config(|t| t);
    let p = pipeline::daemon::build_pipeline_with(&cfg, &syn_guard::registry()).unwrap();
    assert_eq!(
        p.stage_names(),
        ["parse", "syn_guard", "rate_limit", "count"]
    );
    // rate_limit runs on the GPU executor too (its counters read back from the device).
    assert_eq!(p.gpu_refusal(), None);
    let rc = rate_config(&cfg);
    let rule = &rc.rules[0].value;
    assert_eq!((rule.rate_pps, rule.burst()), (100, 200));
}

/// One source floods 1000 SYNs 1 ms apart (100/s, burst 200): SYNs 0..=221 pass (the burst
/// and what refills meanwhile), then one every 10 ms from SYN 230 on; three clients' SYNs,
/// and the flood's own ACKs, pass.
#[test]
fn a_flooding_source_is_cut_to_its_budget() {
    let cfg = budget_config(|t| t);
    let p = pipeline::daemon::build_pipeline_with(&cfg, &syn_guard::registry()).unwrap();
    let flooder: IpAddr = "198.51.100.66".parse().unwrap();
    let mut frames = Vec::new();
    for i in 0..1000u64 {
        let t = 1_000_000_000 + i * 1_000_000;
        frames.push((syn(flooder, 2000 + i as u16, 80, 0x02), t));
        if i % 100 == 0 {
            let client: IpAddr = format!("10.1.0.{}", i / 100 % 3 + 1).parse().unwrap();
            frames.push((syn(client, 40000, 443, 0x02), t));
            frames.push((syn(flooder, 2000, 80, 0x10), t));
        }
    }
    let r = run(&p, &frames, 32);
    let flood: Vec<usize> = (0..frames.len())
        .filter(|&i| frames[i].0[26..30] == [198, 51, 100, 66] && frames[i].0[47] == 0x02)
        .collect();
    let passed: Vec<usize> = flood
        .iter()
        .enumerate()
        .filter(|(_, &i)| r.verdicts[i].reason.is_none())
        .map(|(n, _)| n)
        .collect();
    let want: Vec<usize> = (0..=221).chain((230..1000).step_by(10)).collect();
    assert_eq!(passed, want);
    let others_pass = (0..frames.len())
        .filter(|i| !flood.contains(i))
        .all(|i| r.verdicts[i].reason.is_none());
    assert!(others_pass, "a client or an ACK was dropped");
    let t = agree(&cfg, &p, &r, &[1, 4, 32]);
    assert_eq!(t.counters().rules[0].limited, 1000 - 299);
}

/// One generated frame: a SYN (or another flag mix) from one of a few sources, IPv4 or IPv6,
/// from a low or an ephemeral port, to a blocked or an open port; a gap after the frame before.
fn frame_strategy() -> impl Strategy<Value = (Vec<u8>, u64)> {
    (
        0usize..6,
        0usize..8,
        any::<bool>(),
        0usize..3,
        0u64..40_000_000,
    )
        .prop_map(|(src, flags, low, dport, gap)| {
            let src: IpAddr = [
                "10.0.0.1",
                "10.0.0.2",
                "10.0.0.3",
                "10.0.0.4",
                "2001:db8::1",
                "2001:db8::2",
            ][src]
                .parse()
                .unwrap();
            // SYN most often; SYN+ACK, ACK and data pass the budget; SYN+FIN / SYN+RST are
            // syn_guard's drops.
            let flags = [0x02, 0x02, 0x02, 0x02, 0x12, 0x10, 0x03, 0x06][flags];
            let sport = if low { 80 } else { 40000 };
            let dport = [23, 80, 443][dport];
            // Half the frames arrive at the same time as the one before.
            (
                syn(src, sport, dport, flags),
                if gap < 20_000_000 { 0 } else { gap },
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// The shipped budget rule with a small rate and burst (so generated traffic runs over it),
    /// and a table of one bucket in some cases (so it fills): Rust == host CUDA.
    #[test]
    fn property_traffic_budget_rust_equals_cuda(
        frames in proptest::collection::vec(frame_strategy(), 1..300),
        burst in 1usize..64,
        small in any::<bool>(),
    ) {
        let entries = if small { "entries: 8 " } else { "entries: 65536 " };
        let cfg = budget_config(|t| {
            t.replace("rate_pps: 100", "rate_pps: 20")
                .replace("burst: 200", "burst: 3")
                .replace("entries: 65536 ", entries)
        });
        let p = pipeline::daemon::build_pipeline_with(&cfg, &syn_guard::registry()).unwrap();
        let mut now = 1_000_000_000u64;
        let frames: Vec<(Vec<u8>, u64)> = frames
            .into_iter()
            .map(|(f, gap)| {
                now += gap;
                (f, now)
            })
            .collect();
        let r = run(&p, &frames, burst);
        agree(&cfg, &p, &r, &[1, 3, 32]);
    }
}

/// `syn-guard run` on the budget config: the generator's eight sources run over their budgets,
/// the SYNs over it are `rate_limited` drops, every frame is sent or dropped, and the summary
/// has the budget rule's counts.
#[test]
fn syn_guard_runs_the_budget_config() {
    let dir = std::env::temp_dir().join(format!("syn-guard-budget-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/syn-guard/syn-guard-budget.yaml"
    ));
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace(
            "/tmp/syn-guard-budget-clean.pcap",
            &dir.join("clean.pcap").to_string_lossy(),
        )
        .replace("count: 100000", "count: 20000");
    let cfg = dir.join("cfg.yaml");
    std::fs::write(&cfg, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_syn-guard"))
        .args(["run", "--json", "--quiet"])
        .arg(&cfg)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["rx_frames"], 20000, "{s}");
    let drop = |reason: &str| {
        s["drops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d[0] == reason)
            .and_then(|d| d[1].as_u64())
            .unwrap_or(0)
    };
    let limited = drop("rate_limited");
    assert!(limited > 1000, "{s}");
    let all: u64 = s["drops"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d[1].as_u64())
        .sum();
    assert_eq!(s["tx_frames"].as_u64().unwrap() + all, 20000, "{s}");
    let rl = s["custom_stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "rate_limit")
        .unwrap_or_else(|| panic!("no rate_limit section: {s}"));
    let counters: Vec<(String, u64)> = serde_json::from_value(rl["counters"].clone()).unwrap();
    assert!(
        counters.contains(&("syn_budget.limited".to_string(), limited)),
        "{counters:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
