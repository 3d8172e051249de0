//! End to end for l3fwd on the GPU: host bursts -> ring -> persistent kernel running the
//! composed `parse -> route -> ttl -> l2fwd -> count` pipeline in place in the ring -> the TX
//! ring (what to send, where) drained by the host, one feeding host thread per queue, against
//! 400 GbE line rate (595.2 Mpps at 64 B). The first burst of every queue is checked against the
//! CPU executor's pipeline byte for byte (frames sent, their bytes, their output ports).

use pipeline::burst::Burst;
use pipeline::internal::executor::gpu::abi::{self, TxDesc};
use pipeline::internal::executor::gpu::{
    GpuExecutor, GpuOptions, Mode, PipelineDesc, Placement, SubmitError,
};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

use super::end_to_end::round_up;
use super::inputs::trace_frames;
use super::{Args, Json, Table};

/// Routes for the trace's destinations: two prefixes on two ports and a default route (every
/// frame is routed; TTL 1 frames, if any, are dropped as the CPU drops them).
const ROUTES: &str =
    "routes:\n  - { prefix: 0.0.0.0/1, via: '02:00:00:00:01:01', port: port0 }\n  \
- { prefix: 128.0.0.0/1, via: '02:00:00:00:01:02', port: port1 }\n  \
- { prefix: 0.0.0.0/0, via: '02:00:00:00:01:03', port: port0 }\n  \
- { prefix: '::/0', via: '02:00:00:00:02:01', port: port1 }\n";

/// The two pipelines measured: l3fwd, and the same lookups without rewriting (nothing written
/// back to the ring: what the frames' write-back costs).
const PIPELINES: [(&str, &str); 2] = [
    (
        "parse, route, ttl, l2fwd, count",
        "  - ttl\n  - l2fwd: { src: '02:00:00:00:00:fe' }\n",
    ),
    ("parse, route, count (reads only)", ""),
];

/// An l3fwd pipeline (`rewrites`: the stages between route and count) of a config with two
/// output ports (the config is only parsed: no port is opened).
fn l3fwd_pipeline(dir: &Path, rewrites: &str) -> anyhow::Result<pipeline::daemon::Prepared> {
    std::fs::write(dir.join("routes.yaml"), ROUTES)?;
    let d = dir.display();
    let yaml = format!(
        "ports:\n  - name: in\n    gen: {{ count: 1 }}\n  - name: port0\n    pcap: {{ tx: {{ path: {d}/p0.pcap }} }}\n  \
         - name: port1\n    pcap: {{ tx: {{ path: {d}/p1.pcap }} }}\n\
         pipeline:\n  - parse\n  - route: {{ routes: {d}/routes.yaml }}\n{rewrites}  \
         - count\nexecutor: {{ kind: cpu }}\noutput: {{ port: port0 }}\n"
    );
    let cfg = pipeline::config::parse_str(&yaml, &dir.join("l3fwd.yaml"))?;
    pipeline::daemon::prepare(cfg)
}

struct Outcome {
    pps: f64,
    frames: u64,
    sent: u64,
    ring_full: u64,
    checked: u64,
    mismatches: u64,
    /// The feeding threads' time handing bursts over and reaping them (TX descriptors
    /// included), per burst reaped, in microseconds: where a queue's host side goes.
    submit_us: f64,
    reap_us: f64,
}

/// The CPU executor's answer for one burst: (bytes, output port) of every frame it sends.
fn cpu_sends(p: &pipeline::stage::Pipeline, b: &Burst) -> Vec<(Vec<u8>, u16)> {
    let mut b = b.clone();
    let (mut m, mut v) = (Vec::new(), Vec::new());
    let c = pipeline::counters::QueueCounters::new(p.stages.len(), 0);
    p.run_burst_mut(&mut b, &mut m, &mut v, &c);
    b.frames()
        .zip(&v)
        .filter(|(_, v)| v.action != pipeline::verdict::Action::Drop)
        .map(|((_, f), v)| (f.to_vec(), v.out_port))
        .collect()
}

pub fn section(a: &Args, trace0: &Path, md: &mut Table, js: &mut Json) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("pktwarp-bench-l3fwd-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    md.line("\n### End to end, l3fwd on the GPU: host bursts -> ring -> persistent kernel (parse -> route -> ttl -> l2fwd -> count, in place) -> TX ring drained by the host\n".into());
    md.line(format!(
        "up to {} persistent CTAs of {} threads per queue (fewer where queues x CTAs would not fit the SMs), one feeding host thread per queue, bursts of 1024 64-byte frames; \"sent\" = TX descriptors the host read (every frame routed: a default route); the first burst of each queue checked against the CPU pipeline byte for byte; the read-only pipeline (mapped rings) shows what writing the frames back costs\n",
        a.e2e_ctas, a.l3fwd_threads
    ));
    md.line("| pipeline | frame | placement | queues | Mpps in | Mpps sent | % of 400GbE pps | ring-full retries | host submit us / burst | host reap us / burst | checked | mismatches |".into());
    md.line(
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
            .into(),
    );
    let base = trace_frames(trace0, 64)?;
    // The composed kernel's registers hold one CTA of 256 threads an SM (two of 128), so
    // queues x CTAs must fit that (the verdict path's 16 a queue does not at 12 queues).
    let sms = pipeline::internal::executor::gpu::probe(a.device)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .multiprocessors as usize;
    let ctas_fit = sms * (256 / a.l3fwd_threads.max(32) as usize).max(1);
    let mut rows = Vec::new();
    for (k, (name, rewrites)) in PIPELINES.iter().enumerate() {
        let p = l3fwd_pipeline(&dir, rewrites)?;
        let image = pipeline::daemon::image_for_pipeline(&p.pipeline)?;
        let placements: &[Placement] = if k == 0 {
            &[Placement::Device, Placement::Mapped]
        } else {
            &[Placement::Mapped]
        };
        for &placement in placements {
            for &nq in &a.e2e_queues {
                let ctas = a.e2e_ctas.min((ctas_fit / nq.max(1)).max(1) as u32);
                let shape = Shape {
                    placement,
                    queues: nq,
                    burst: 1024,
                    ctas,
                };
                let r = run(a, &p.pipeline, &image, &base, shape)?;
                md.line(format!(
                    "| {name} | 64 | {placement:?} | {nq} | {:.1} | {:.1} | {:.1}% | {} | {:.2} | {:.2} | {} | {} |",
                    r.pps / 1e6,
                    r.sent as f64 / r.frames.max(1) as f64 * r.pps / 1e6,
                    r.pps / 595.2e6 * 100.0,
                    r.ring_full,
                    r.submit_us,
                    r.reap_us,
                    r.checked,
                    r.mismatches
                ));
                rows.push(
                    json!({"pipeline": name, "placement": format!("{placement:?}"), "queues": nq,
                    "pps": r.pps, "frames": r.frames, "sent": r.sent, "checked": r.checked,
                    "mismatches": r.mismatches, "submit_us_per_burst": r.submit_us,
                    "reap_us_per_burst": r.reap_us}),
                );
                if r.mismatches > 0 {
                    anyhow::bail!(
                        "l3fwd e2e ({name}): {} frames differ from the CPU pipeline",
                        r.mismatches
                    );
                }
            }
        }
    }
    js.insert("l3fwd_e2e".into(), json!(rows));
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// One measured configuration: ring placement, queues, frames a burst, CTAs a queue.
#[derive(Clone, Copy)]
struct Shape {
    placement: Placement,
    queues: usize,
    burst: u32,
    ctas: u32,
}

fn run(
    a: &Args,
    p: &pipeline::stage::Pipeline,
    image: &pipeline::daemon::KernelImage,
    base: &Burst,
    shape: Shape,
) -> anyhow::Result<Outcome> {
    let Shape {
        placement,
        queues: nq,
        burst,
        ctas,
    } = shape;
    let bytes: usize = base
        .frames()
        .take(burst as usize)
        .map(|(_, f)| f.len())
        .sum();
    let opts = GpuOptions {
        mode: Mode::Persistent,
        placement,
        burst_size: burst,
        ring_slots: 64,
        slot_data_bytes: Some(round_up(bytes.max(1) * 2, 4096) as u32),
        device: a.device,
        ctas_per_queue: ctas,
        block_threads: Some(a.l3fwd_threads),
        nt_stores: !a.cached_stores,
        ..Default::default()
    };
    let pd = PipelineDesc {
        parse: true,
        acl: None,
        count: true,
        default_action: abi::ACTION_PASS,
    };
    let ex = GpuExecutor::new(opts, pd, nq, image)?;
    let bursts: Vec<Burst> = pipeline::verify::split_bursts(base, burst as usize, usize::MAX)
        .into_iter()
        .map(|(_, b)| b)
        .filter(|b| b.len() == burst as usize)
        .collect();
    if bursts.is_empty() {
        anyhow::bail!("trace too short for bursts of {burst}");
    }
    let expect: Vec<Vec<(Vec<u8>, u16)>> = bursts.iter().map(|b| cpu_sends(p, b)).collect();
    let dur = Duration::from_secs_f64(a.e2e_seconds);
    let t0 = Instant::now();
    let results: Vec<anyhow::Result<[u64; 8]>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..nq)
            .map(|q| {
                let (ex, bursts, expect) = (&ex, &bursts, &expect);
                s.spawn(move || feed(ex, q, bursts, expect, dur))
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a feeder thread panicked")))
            })
            .collect()
    });
    let secs = t0.elapsed().as_secs_f64();
    let mut t = [0u64; 8];
    for r in results {
        for (acc, x) in t.iter_mut().zip(r?) {
            *acc += x;
        }
    }
    Ok(Outcome {
        pps: t[0] as f64 / secs,
        frames: t[0],
        sent: t[1],
        ring_full: t[2],
        checked: t[3],
        mismatches: t[4],
        submit_us: t[5] as f64 / 1e3 / t[7].max(1) as f64,
        reap_us: t[6] as f64 / 1e3 / t[7].max(1) as f64,
    })
}

/// One queue's feeder: submits bursts round-robin for `dur`, drains the TX ring of every burst
/// finished; the first burst's sends compared with the CPU's. [frames, sent, ring-full
/// retries, checked, mismatches, ns in submit, ns in polls that reaped, bursts reaped].
fn feed(
    ex: &GpuExecutor,
    q: usize,
    bursts: &[Burst],
    expect: &[Vec<(Vec<u8>, u16)>],
    dur: Duration,
) -> anyhow::Result<[u64; 8]> {
    let mut out = [0u64; 8];
    let mut i = q % bursts.len();
    let mut first: Option<(u32, usize)> = None;
    let start = Instant::now();
    let on_burst = |r: &pipeline::internal::executor::gpu::Reaped<'_>,
                    out: &mut [u64; 8],
                    first: Option<(u32, usize)>| {
        out[0] += r.verdicts.len() as u64;
        let tx: &[TxDesc] = r.tx.unwrap_or(&[]);
        out[1] += tx.len() as u64;
        if let (Some((s0, bi)), Some(data)) = (first, r.data) {
            if r.seq == s0 {
                let got: Vec<(Vec<u8>, u16)> = tx
                    .iter()
                    .map(|d| {
                        let a = d.offset as usize;
                        (
                            data.get(a..a + d.len as usize).unwrap_or(&[]).to_vec(),
                            d.out_port,
                        )
                    })
                    .collect();
                out[3] += expect[bi].len().max(got.len()) as u64;
                out[4] += expect[bi].iter().zip(&got).filter(|(e, g)| e != g).count() as u64
                    + expect[bi].len().abs_diff(got.len()) as u64;
            }
        }
    };
    while start.elapsed() < dur {
        let t0 = Instant::now();
        match ex.submit(q, &bursts[i]) {
            Ok(seq) => {
                out[5] += t0.elapsed().as_nanos() as u64;
                first.get_or_insert((seq, i));
                i = (i + 1) % bursts.len();
            }
            Err(SubmitError::RingFull { .. }) => out[2] += 1,
            Err(e) => return Err(e.into()),
        }
        let t1 = Instant::now();
        let reaped = ex.poll_bursts(q, |r| on_burst(r, &mut out, first))?;
        if reaped > 0 {
            out[6] += t1.elapsed().as_nanos() as u64;
            out[7] += reaped as u64;
        }
    }
    let t = Instant::now();
    while ex.in_flight(q) > 0 {
        if t.elapsed() > Duration::from_secs(10) {
            anyhow::bail!("queue {q}: bursts still in flight after 10 s");
        }
        ex.poll_bursts(q, |r| on_burst(r, &mut out, first))?;
    }
    Ok(out)
}
