//! The DDoS scrubber (configs/ddos-scrubber.yaml: parse -> acl -> rate_limit -> count) on the
//! GPU host side. The stand-in runs the CPU pipeline at submit and then moves the rate-limit
//! tables' counters to its "device" (per stage and queue, laid out as `pw_rl_counters`), so
//! they reach the stage only as a GPU's do: read back by the host side and folded in
//! (stage::rate_limit_gpu). The kernel itself is pipeline/tests/rate_limit_cuda_host.rs, and on
//! the GPU machine scripts/gpu-rate-limit-check.sh.

use std::collections::HashMap;

use super::*;
use crate::stage::rate_limit::queue_counters_at;
use pktwarp_flow::rate::{RateCounters, COUNTERS_BYTES};

/// The stand-in's `rate_limit` counters, by (stage, queue).
pub(super) type DeviceCounters = Mutex<HashMap<(usize, usize), RateCounters>>;

/// Moves queue `q`'s rate-limit table counters (every `rate_limit` stage of `p`) to `dev`.
pub(super) fn to_device(p: &Pipeline, q: usize, dev: &DeviceCounters) {
    for (k, s) in p.stages.iter().enumerate() {
        let Some(rl) = s.rate_limit() else { continue };
        let c = rl.take_queue_counters(q as u16);
        let mut d = dev.lock().unwrap();
        let sum = d.entry((k, q)).or_default();
        sum.created += c.created;
        sum.reused += c.reused;
        for (s, r) in sum.rules.iter_mut().zip(c.rules) {
            s.matched += r.matched;
            s.limited += r.limited;
            s.table_full += r.table_full;
        }
    }
}

/// The stand-in's answer to `read_queue_state`: a `rate_limit` stage's counters, where the
/// executor lays them out in its per-queue state (an error for any other read).
pub(super) fn read(
    p: &Pipeline,
    dev: &DeviceCounters,
    (k, i, q): (usize, usize, usize),
    at: usize,
    len: usize,
) -> anyhow::Result<Vec<u8>> {
    let Some(rl) = p.stages.get(k).and_then(Stage::rate_limit) else {
        anyhow::bail!("stage {k} keeps no per-queue state on the stand-in");
    };
    let want = queue_counters_at(&rl.config()) as usize;
    if (i, at, len) != (0, want, COUNTERS_BYTES) {
        anyhow::bail!("stage {k}: state {i}, {len} bytes at {at}: not the counters ({want})");
    }
    let d = dev.lock().unwrap();
    Ok(d.get(&(k, q)).copied().unwrap_or_default().to_bytes())
}

/// The scrubber's traffic with receive times (the generator port stamps wall-clock times, which
/// would make the refills differ run to run): `n` frames, 20 us apart, of SYNs from sixteen
/// sources (60%), UDP flows (20%), DNS responses (10%) and ICMP echo (10%).
fn capture(dir: &Path, n: u32) -> PathBuf {
    use crate::port::pcap::{CaptureWriter, WriteFormat};
    use pktwarp_flow::testgen::{echo_frame, tcp_frame, udp_frame, Tcp};
    use std::net::IpAddr;
    let path = dir.join(format!("scrub-{n}.pcap"));
    let mut w = CaptureWriter::create(&path, WriteFormat::Pcap, 65535).expect("capture");
    for i in 0..n {
        let src = IpAddr::from([203, 0, 113, 1 + (i % 16) as u8]);
        let dst = IpAddr::from([192, 0, 2, (i % 16) as u8]);
        let port = 1024 + (i % 50_000) as u16;
        let f = match i % 10 {
            0..=5 => {
                let syn = Tcp {
                    flags: 0x02,
                    ..Tcp::default()
                };
                tcp_frame(None, (src, port), (dst, 80), syn)
            }
            6 | 7 => udp_frame(None, (src, 4000 + (i % 8) as u16), (dst, 5000), 40),
            8 => udp_frame(None, (src, 53), (dst, port), 60),
            _ => echo_frame(None, src, dst, true, 1, i as u16),
        };
        w.write_frame(&f, f.len() as u32, 1_000_000_000 + u64::from(i) * 20_000)
            .expect("write");
    }
    w.flush().expect("flush");
    path
}

/// The scrubber (its pipeline as shipped) on [`capture`] of `frames` frames, over `queues`.
fn scrubber(frames: u32, queues: u32) -> Prepared {
    let dir = std::env::temp_dir().join(format!("pw-standin-rl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let pcap = capture(&dir, frames);
    let yaml = std::fs::read_to_string(configs_dir().join("ddos-scrubber.yaml")).expect("config");
    let (ports, rest) = yaml.split_at(yaml.find("queues:").expect("queues"));
    assert!(ports.contains("gen:"), "the shipped input is the generator");
    let yaml = format!(
        "ports:\n  - name: wire\n    pcap:\n      rx: {{ path: {} }}\n{}",
        pcap.display(),
        rest.replace(
            "queues:\n  count: 1\n",
            &format!("queues:\n  count: {queues}\n")
        )
    );
    assert!(yaml.contains(&format!("count: {queues}\n")));
    prepared(&yaml)
}

/// The summary's `rate_limit` counters: the table's and each rule's (`RULE.result`).
fn rate_counters(s: &Summary) -> serde_json::Value {
    let v = serde_json::to_value(s).expect("summary");
    v["custom_stages"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == "rate_limit"))
        .map(|x| x["counters"].clone())
        .expect("a rate_limit section")
}

fn counter(v: &serde_json::Value, name: &str) -> u64 {
    v.as_array()
        .and_then(|a| a.iter().find(|c| c[0] == name))
        .and_then(|c| c[1].as_u64())
        .unwrap_or_else(|| panic!("no counter {name} in {v}"))
}

#[test]
fn the_ddos_scrubber_counts_and_limits_as_the_cpu_executor() {
    for queues in [1, 2] {
        let what = format!("{queues} queue(s)");
        let cpu = run_cpu_ref(&scrubber(20_000, queues), false);
        let p = scrubber(20_000, queues);
        assert_eq!(p.pipeline.gpu_refusal(), None, "{what}");
        assert!(crate::executor::gpu::compose::is_composed(&p.pipeline));
        let gpu = run_fake(&p, 4, 1, false);
        assert_same_counts(&gpu.s, &cpu.s, &what);
        let (g, c) = (rate_counters(&gpu.s), rate_counters(&cpu.s));
        assert_eq!(g, c, "{what}");
        // Not a comparison of zeros: the SYN flood is limited, every rule took frames.
        assert!(counter(&c, "syn_flood.limited") > 1000, "{what}: {c}");
        for rule in ["syn_flood", "icmp", "udp_flow"] {
            assert!(
                counter(&c, &format!("{rule}.matched")) > 0,
                "{what}: {rule}: {c}"
            );
        }
        assert!(counter(&c, "created") > 16, "{what}: {c}");
        let limited = cpu.s.drops.iter().find(|d| d.0 == "rate_limited");
        assert_eq!(
            limited.map(|d| d.1),
            Some(
                (0..4)
                    .map(|r| counter(&c, &format!("{}.limited", rule_name(r))))
                    .sum()
            ),
            "{what}: drops {:?}",
            cpu.s.drops
        );
    }
}

fn rule_name(i: usize) -> &'static str {
    ["syn_flood", "dns_reflection", "icmp", "udp_flow"][i]
}

/// The scrubber's stage configs with rule 0 renamed and its rate raised (a reload that changes
/// the keys: the buckets start afresh) or only its rate raised (the buckets are kept).
fn reloaded(p: &Prepared, rename: bool) -> Vec<config::StageConfig> {
    let mut cfgs: Vec<config::StageConfig> =
        p.cfg.pipeline.iter().map(|s| s.value.clone()).collect();
    let i = cfgs
        .iter()
        .position(|c| matches!(c, config::StageConfig::RateLimit(_)))
        .expect("rate_limit");
    let text = std::fs::read_to_string(configs_dir().join("ddos-scrubber.yaml")).expect("config");
    let start = text.find("  - rate_limit:\n").expect("a rate_limit stage") + 16;
    let end = text[start..].find("  - count").expect("count after it") + start;
    let mut body: String = text[start..end]
        .lines()
        .map(|l| l.get(6..).unwrap_or("").to_string() + "\n")
        .collect();
    body = body.replace("rate_pps: 100\n", "rate_pps: 150\n");
    if rename {
        body = body.replace("name: syn_flood", "name: syn_budget");
    }
    cfgs[i] = config::StageConfig::RateLimit(serde_saphyr::from_str(&body).expect("rules"));
    cfgs
}

fn section_of(p: &Prepared) -> Vec<(String, [u64; 3])> {
    let rl = p.pipeline.stages.iter().find_map(Stage::rate_limit);
    rl.expect("rate_limit").rule_counters()
}

/// A reload between two runs over the same pipeline (its tables and counts kept): the rules
/// renamed or only re-rated, the per-rule counters (old names kept) equal the CPU executor's.
#[test]
fn a_reload_between_runs_counts_as_the_cpu_executor() {
    for rename in [false, true] {
        let (c, g) = (scrubber(6000, 1), scrubber(6000, 1));
        run_cpu_ref(&c, false);
        run_fake(&g, 4, 1, false);
        for p in [&c, &g] {
            let r = p.pipeline.reload_stage_options(&reloaded(p, rename));
            assert_eq!(r.expect("reload").rebuilt, ["rate_limit"]);
        }
        let cpu = run_cpu_ref(&c, false);
        let gpu = run_fake(&g, 4, 1, false);
        assert_same_counts(&gpu.s, &cpu.s, "after the reload");
        assert_eq!(
            rate_counters(&gpu.s),
            rate_counters(&cpu.s),
            "rename {rename}"
        );
        let names: Vec<String> = section_of(&g).into_iter().map(|r| r.0).collect();
        let first = if rename { "syn_budget" } else { "syn_flood" };
        assert_eq!(names[0], first, "{names:?}");
        assert_eq!(names.len(), if rename { 5 } else { 4 }, "{names:?}");
    }
}

/// SYNs from four sources, `n` each, received at `t` ns.
fn syns(n: u16, t: u64) -> Burst {
    let mut b = Burst::with_capacity(4 * n as usize, 4 * n as usize * 64);
    for i in 0..n {
        for src in 1..=4u8 {
            let f = pktwarp_flow::testgen::tcp_frame(
                None,
                (std::net::IpAddr::from([203, 0, 113, src]), 1024 + i),
                (std::net::IpAddr::from([192, 0, 2, 1]), 80),
                pktwarp_flow::testgen::Tcp {
                    flags: 0x02,
                    ..Default::default()
                },
            );
            let desc = crate::burst::FrameDesc {
                timestamp_ns: t,
                ..Default::default()
            };
            b.push(&f, desc);
        }
    }
    b
}

/// A reload that renames a rule while the run goes: the counts of bursts before the new
/// parameter block is published go under the old name (folded just before the publish), those
/// after it under the new one, as the CPU executor's table counts them.
#[test]
fn a_reload_while_running_folds_before_the_publish() {
    let (g, c) = (scrubber(1, 1), scrubber(1, 1));
    let dev = CpuStandIn::new(&g, 8, 0);
    let stages = g.pipeline.stages.len();
    let counters = vec![Arc::new(QueueCounters::new(
        stages,
        g.pipeline.rule_count(),
    ))];
    let mut live = reload::LiveStageCounters::new(true, &g.pipeline);
    let mut params = reload::ParamsPublisher::new(true, g.pipeline.params_generation());
    let cq = QueueCounters::new(stages, c.pipeline.rule_count());
    let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
    let mut run = |b: &Burst| {
        dev.submit(0, b).expect("submit");
        let n = dev.poll(0, &mut |_, _, _| {}).expect("poll");
        assert_eq!(n, 1);
        c.pipeline.run_burst(b, &mut metas, &mut verdicts, &cq);
    };
    for _ in 0..6 {
        run(&syns(50, 1_000_000));
    }
    live.publish_params(&mut params, &g.pipeline, &dev, &counters)
        .expect("nothing to publish");
    assert!(dev.params_published.lock().unwrap().is_empty());
    for p in [&g, &c] {
        p.pipeline
            .reload_stage_options(&reloaded(p, true))
            .expect("reload");
    }
    live.publish_params(&mut params, &g.pipeline, &dev, &counters)
        .expect("publish");
    assert_eq!(dev.params_published.lock().unwrap().len(), 1);
    for _ in 0..2 {
        run(&syns(50, 2_000_000));
    }
    live.check(&g.pipeline, &dev, &counters, true)
        .expect("fold");
    let (got, want) = (section_of(&g), section_of(&c));
    assert_eq!(got, want);
    let of = |n: &str| got.iter().find(|r| r.0 == n).expect(n).1;
    // 300 a source before (200 pass, 100 limited), 100 after (fresh buckets: all pass).
    assert_eq!(of("syn_flood"), [1200, 400, 0], "{got:?}");
    assert_eq!(of("syn_budget"), [400, 0, 0], "{got:?}");
}
