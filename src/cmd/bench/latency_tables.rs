//! The latency tables of `pktwarp bench`: every burst size, placement and mode; the mapped
//! ring's transports in interleaved rounds; and where a 32-frame burst's time goes (the GPU-side
//! steps of traced bursts), each row one change from the default configuration.

use anyhow::Context as _;
use pipeline::burst::Burst;
use pipeline::internal::executor::gpu::{AclTablesRef, Mode, Placement};
use pipeline::verify::Reference;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

use super::inputs::{load_rules, pct, trace_frames};
use super::latency::{host_jitter, latency, LatCase, STALL, STEPS};
use super::{Args, Json, Table};

/// Verdicts checked against the reference so far, and how many differed.
type Checked = (u64, u64);

/// Pins the latency host thread (unless `--latency-unpinned`), probes its core's stalls, then
/// the three latency tables; the thread's CPU set is restored at the end.
pub fn section(
    a: &Args,
    rules0: &Path,
    trace0: &Path,
    md: &mut Table,
    js: &mut Json,
) -> anyhow::Result<()> {
    let pinned = if a.latency_unpinned {
        None
    } else {
        let cpu = match a.latency_cpu {
            Some(c) => c,
            None => *pipeline::internal::affinity::allowed_cpus()
                .context("latency: the process's CPU set")?
                .last()
                .ok_or_else(|| anyhow::anyhow!("latency: no CPU to pin the host thread to"))?,
        };
        let saved = pipeline::internal::affinity::pin_current_thread(cpu)
            .with_context(|| format!("latency: pinning the host thread to CPU {cpu}"))?;
        Some((cpu, saved))
    };
    js.insert(
        "latency_host_cpu".into(),
        json!(pinned.as_ref().map(|(c, _)| *c)),
    );
    js.insert("latency_gap_us".into(), json!(a.latency_gap_us));
    let jit = host_jitter(Duration::from_millis(500));
    js.insert(
        "latency_host_jitter".into(),
        json!({"stalls_per_s": jit.stalls_per_s, "max_us": jit.max_us, "lost_share": jit.lost,
            "stall_us": STALL.as_secs_f64() * 1e6}),
    );
    let acl = load_rules(rules0)?;
    let tables = acl.tables();
    let reference = &acl.reference;
    let base = trace_frames(trace0, 64)?;
    md.line(format!(
        "\n### Latency per burst, 64 B frames, parse + acl {} + count, light load (us: p50 / p99 / p99.9; next burst {}; host thread {})\n",
        a.sets[0],
        if a.latency_gap_us > 0.0 {
            format!("after a random 0-{} us", a.latency_gap_us)
        } else {
            "at once (closed loop)".to_string()
        },
        pinned.as_ref().map_or("not pinned".to_string(), |(c, _)| format!("pinned to CPU {c}"))
    ));
    md.line(format!(
        "Host thread off its CPU for {} us or more (back-to-back clock reads at least that far \
         apart, on the latency thread's core, for 0.5 s before these rows): {:.0} times a second, \
         longest {:.1} us, {:.2}% of the time. A burst during which that happened is \"stalled\" \
         below.\n",
        STALL.as_micros(),
        jit.stalls_per_s,
        jit.max_us,
        100.0 * jit.lost
    ));
    md.line("| burst | placement | persistent | launch | graph (8 bursts) | launch p99 / persistent p99 |".into());
    md.line("| ---: | --- | --- | --- | --- | ---: |".into());
    let mut chk: Checked = (0, 0);
    main_table(a, &base, tables, reference, md, js, &mut chk)?;
    transport_table(a, &base, tables, reference, md, js, &mut chk)?;
    report_verdicts(md, js, "", chk.0, chk.1);
    decomposition_table(a, &base, tables, reference, md, js, &mut chk)?;
    if let Some((_, saved)) = &pinned {
        pipeline::internal::affinity::restore(saved)
            .context("latency: restoring the host thread's CPU set")?;
    }

    Ok(())
}

/// Every burst size (16, 32, 256) x placement x mode, parse + acl, untraced.
fn main_table(
    a: &Args,
    base: &Burst,
    tables: AclTablesRef<'_>,
    reference: &Reference,
    md: &mut Table,
    js: &mut Json,
    chk: &mut Checked,
) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    // Stalled bursts of the 32-frame mapped rows, persistent then launch: (stalled, of, p99
    // without them).
    let mut stall_rows: Vec<(usize, usize, f64)> = Vec::new();
    for &burst in &[16u32, 32, 256] {
        for placement in [Placement::Device, Placement::Mapped] {
            let mut cells = Vec::new();
            let mut p99 = [0f64; 3];
            for (k, mode) in [Mode::Persistent, Mode::Launch, Mode::Graph]
                .into_iter()
                .enumerate()
            {
                let lat = latency(
                    a,
                    base,
                    LatCase::full(tables, reference, mode, placement, burst),
                )?;
                chk.0 += lat.checked;
                chk.1 += lat.mismatches;
                let tagged = lat.tagged;
                let (stalled, unstalled) = (lat.stalled, lat.unstalled);
                let lat = lat.samples;
                let (p50, p_99, p999) = (pct(&lat, 0.5), pct(&lat, 0.99), pct(&lat, 0.999));
                // NaN (JSON null) when every burst stalled.
                let p99_unstalled = if unstalled.is_empty() {
                    f64::NAN
                } else {
                    pct(&unstalled, 0.99)
                };
                if burst == 32 && placement == Placement::Mapped && mode != Mode::Graph {
                    stall_rows.push((stalled, lat.len(), p99_unstalled));
                }
                p99[k] = p_99;
                cells.push(format!("{p50:.2} / {p_99:.2} / {p999:.2}"));
                rows.push(
                    json!({"burst": burst, "placement": format!("{placement:?}"),
                    "mode": format!("{mode:?}"), "p50_us": p50, "p99_us": p_99, "p999_us": p999,
                    "max_us": lat[lat.len() - 1], "samples": lat.len(), "tagged": tagged,
                    "stalled_bursts": stalled, "p99_unstalled_us": nan_null(p99_unstalled)}),
                );
            }
            md.line(format!(
                "| {burst} | {placement:?} | {} | {} | {} | {:.2}x |",
                cells[0],
                cells[1],
                cells[2],
                p99[1] / p99[0]
            ));
        }
    }
    js.insert("latency".into(), json!(rows));
    if let [(ps, pn, pp), (ls, ln, lp)] = stall_rows[..] {
        md.line(format!(
            "\n32 frames, mapped: stalled bursts persistent {ps} of {pn} ({:.2}%), launch {ls} of \
             {ln} ({:.2}%); p99 of the bursts without a stall: persistent {pp:.2}, launch {lp:.2} \
             ({:.2}x). The goals are judged on every burst (the table).",
            100.0 * ps as f64 / pn as f64,
            100.0 * ls as f64 / ln as f64,
            lp / pp
        ));
    }

    Ok(())
}

/// The transport choices on a mapped ring, untraced, interleaved three times (the runs
/// move by a microsecond or more at p99 between rounds): tagged words (the default for these
/// bursts) and untagged.
fn transport_table(
    a: &Args,
    base: &Burst,
    tables: AclTablesRef<'_>,
    reference: &Reference,
    md: &mut Table,
    js: &mut Json,
    chk: &mut Checked,
) -> anyhow::Result<()> {
    md.line("\n### Mapped ring transport, persistent, untraced, three interleaved rounds (us: p50 / p99 / p99.9)\n".into());
    md.line("| burst | tagged (default) | untagged |".into());
    md.line("| ---: | --- | --- |".into());
    let mut trows = Vec::new();
    for &burst in &[16u32, 32] {
        for _round in 0..3 {
            let mut cells = Vec::new();
            for tagged in [None, Some(false)] {
                let r = latency(
                    a,
                    base,
                    LatCase {
                        tagged,
                        ..LatCase::full(
                            tables,
                            reference,
                            Mode::Persistent,
                            Placement::Mapped,
                            burst,
                        )
                    },
                )?;
                chk.0 += r.checked;
                chk.1 += r.mismatches;
                let l = &r.samples;
                let (p50, p_99, p999) = (pct(l, 0.5), pct(l, 0.99), pct(l, 0.999));
                cells.push(format!("{p50:.2} / {p_99:.2} / {p999:.2}"));
                trows.push(json!({"burst": burst, "tagged": r.tagged,
                    "p50_us": p50, "p99_us": p_99, "p999_us": p999}));
            }
            md.line(format!("| {burst} | {} | {} |", cells[0], cells[1]));
        }
    }
    js.insert("latency_transport".into(), json!(trows));
    Ok(())
}

/// Where the time goes: the same 32-frame burst with fewer stages, and with one thread per
/// frame (32 threads: no cooperative ACL lookup, fewer staging loads in flight), with the
/// GPU-side steps of each burst (%globaltimer in the kernel).
fn decomposition_table(
    a: &Args,
    base: &Burst,
    tables: AclTablesRef<'_>,
    reference: &Reference,
    md: &mut Table,
    js: &mut Json,
    chk: &mut Checked,
) -> anyhow::Result<()> {
    md.line(
        "\n### Latency decomposition, burst 32, persistent (us: p50 / p99 / p99.9; GPU steps: median (p99))\n".into(),
    );
    md.line("| stages | threads x CTAs per burst | placement | tagged | total | seen->staged | stages | of which parse pass | to done | counters (after done) | outside the GPU | of which host submit |".into());
    md.line(
        "| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |".into(),
    );
    let mut rows = Vec::new();
    let cases = decomp_cases(tables);
    for Decomp {
        name,
        parse,
        acl,
        threads,
        burst_ctas,
        tagged,
    } in cases
    {
        for placement in [Placement::Device, Placement::Mapped] {
            if tagged == Some(false) && placement == Placement::Device {
                continue; // the same as the row above: device rings are never tagged
            }
            let r = latency(
                a,
                base,
                LatCase {
                    tables: acl,
                    parse,
                    mode: Mode::Persistent,
                    placement,
                    burst: 32,
                    threads,
                    trace: true,
                    burst_ctas,
                    tagged,
                    reference: acl.map(|_| reference),
                },
            )?;
            chk.0 += r.checked;
            chk.1 += r.mismatches;
            let lat = &r.samples;
            let (p50, p_99, p999) = (pct(lat, 0.5), pct(lat, 0.99), pct(lat, 0.999));
            let m = step_pct(&r.steps, 0.5);
            let m99 = step_pct(&r.steps, 0.99);
            let (th, parts) = (r.threads, r.parts);
            let parse_pass = if m[6].is_nan() {
                "-".to_string()
            } else {
                format!("{:.2} ({:.2})", m[6], m99[6])
            };
            md.line(format!(
                "| {name} | {th} x {parts} | {placement:?} | {} | {p50:.2} / {p_99:.2} / {p999:.2} | {:.2} ({:.2}) | {:.2} ({:.2}) | {parse_pass} | {:.2} ({:.2}) | {:.2} ({:.2}) | {:.2} ({:.2}) | {:.2} ({:.2}) |",
                if r.tagged { "yes" } else { "no" },
                m[0], m99[0], m[1], m99[1], m[2], m99[2], m[3], m99[3], m[4], m99[4], m[5], m99[5]
            ));
            rows.push(
                json!({"stages": name, "threads": th, "ctas_per_burst": parts, "placement": format!("{placement:?}"), "tagged": r.tagged,
                "p50_us": p50, "p99_us": p_99, "p999_us": p999, "traced": r.steps.len(),
                "gpu_steps_median_us": {"seen_to_staged": m[0], "stages": m[1], "parse_pass": nan_null(m[6]),
                    "to_done": m[2], "counters_after_done": m[3], "outside_gpu": m[4], "host_submit": m[5]},
                "gpu_steps_p99_us": {"seen_to_staged": m99[0], "stages": m99[1], "parse_pass": nan_null(m99[6]),
                    "to_done": m99[2], "counters_after_done": m99[3], "outside_gpu": m99[4], "host_submit": m99[5]}}),
            );
        }
    }
    js.insert("latency_decomposition".into(), json!(rows));
    report_verdicts(
        md,
        js,
        ", every latency row with parse + acl so far",
        chk.0,
        chk.1,
    );
    Ok(())
}

/// The decomposition's rows: the default 32-frame persistent configuration with one thing
/// changed each.
fn decomp_cases(tables: AclTablesRef<'_>) -> [Decomp<'_>; 10] {
    // Each row: the default 32-frame persistent configuration with one thing changed.
    let full = Decomp {
        name: "parse + acl + count",
        parse: true,
        acl: Some(tables),
        ..Decomp::default()
    };
    [
        Decomp {
            name: "count only (transport)",
            ..Decomp::default()
        },
        Decomp {
            name: "parse + count",
            parse: true,
            ..Decomp::default()
        },
        full,
        Decomp {
            name: "parse + acl + count, 1 CTA per burst",
            burst_ctas: Some(1),
            ..full
        },
        Decomp {
            name: "parse + acl + count, 2 CTAs per burst",
            burst_ctas: Some(2),
            ..full
        },
        Decomp {
            name: "parse + acl + count, 4 CTAs per burst",
            burst_ctas: Some(4),
            ..full
        },
        Decomp {
            name: "parse + acl + count, 1 CTA of 32 threads",
            threads: Some(32),
            burst_ctas: Some(1),
            ..full
        },
        Decomp {
            name: "parse + acl + count, 1 CTA of 256 threads",
            threads: Some(256),
            burst_ctas: Some(1),
            ..full
        },
        Decomp {
            name: "count only (transport), untagged",
            tagged: Some(false),
            ..Decomp::default()
        },
        Decomp {
            name: "parse + acl + count, untagged",
            tagged: Some(false),
            ..full
        },
    ]
}

/// One row of the latency decomposition (None: the executor's default).
#[derive(Clone, Copy, Default)]
struct Decomp<'a> {
    name: &'a str,
    parse: bool,
    acl: Option<AclTablesRef<'a>>,
    threads: Option<u32>,
    burst_ctas: Option<u32>,
    tagged: Option<bool>,
}

/// The latency verdict check so far: a line of the table (`what` qualifies it) and
/// `latency_verdicts` in the JSON (the last call's totals stay).
fn report_verdicts(md: &mut Table, js: &mut Json, what: &str, checked: u64, bad: u64) {
    md.line(format!(
        "\nVerdicts checked against the CPU executor{what}: {checked}, mismatches: {bad}{}",
        if bad > 0 { " !!" } else { "" }
    ));
    js.insert(
        "latency_verdicts".into(),
        json!({"checked": checked, "mismatches": bad}),
    );
}

/// JSON null for NaN (a step no burst took).
fn nan_null(x: f64) -> serde_json::Value {
    if x.is_nan() {
        serde_json::Value::Null
    } else {
        json!(x)
    }
}

/// Percentile `p` of each GPU step column (NaN samples, a step the burst did not take, left
/// out; NaN when no burst took it).
fn step_pct(steps: &[[f64; STEPS]], p: f64) -> [f64; STEPS] {
    let mut m = [0f64; STEPS];
    for (i, slot) in m.iter_mut().enumerate() {
        let mut col: Vec<f64> = steps.iter().map(|s| s[i]).filter(|x| !x.is_nan()).collect();
        if col.is_empty() {
            *slot = f64::NAN;
        } else {
            col.sort_by(f64::total_cmp);
            *slot = pct(&col, p);
        }
    }
    m
}
