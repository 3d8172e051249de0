//! A prepared config on the CPU executor (copying or, DPDK to DPDK, zero-copy forwarding).

use std::sync::Arc;

use super::{summarize, OpenPorts, Prepared, Summary};
#[cfg(feature = "dpdk")]
use crate::executor::cpu::CpuRunSpec;
use crate::executor::cpu::{self, CpuShared};

/// Runs a prepared config on the CPU executor to the end of its input (or until `shared.stop`).
pub fn run_cpu(p: &Prepared, shared: &Arc<CpuShared>, ports: OpenPorts) -> Summary {
    let spec = p.cpu_spec();
    #[cfg(feature = "dpdk")]
    if let Some(mut s) = run_cpu_zero_copy(p, &spec, shared, &ports) {
        // The copying handles were never polled; dropping them (and the plan's clones) closes
        // the devices.
        drop(ports);
        s.forwarding = "zero_copy".into();
        return s;
    }
    let mut ports = ports;
    let dests = ports.take_out();
    let out = cpu::run_out(&spec, shared, ports.rx, dests);
    summarize_cpu_run(p, shared, out)
}

/// The summary of a CPU executor run (either forwarding path): the shared counters, the run's
/// time and errors, and its ports' own counters.
fn summarize_cpu_run(p: &Prepared, shared: &CpuShared, out: cpu::RunOutcome) -> Summary {
    let mut s = summarize(
        &shared.counters,
        &p.pipeline,
        out.elapsed,
        &p.choice,
        out.errors,
    );
    s.port_counters = out.port_counters;
    s.receive_threads = out.receive_threads;
    s.outputs = out.out;
    s.verify = shared.verify.summary();
    s
}

/// The zero-copy path (DPDK in and out, see `cpu::zero_copy`) when the ports allow it: logs
/// which forwarding path runs and why, and returns `None` to let the copying path run.
#[cfg(feature = "dpdk")]
fn run_cpu_zero_copy(
    p: &Prepared,
    spec: &CpuRunSpec,
    shared: &Arc<CpuShared>,
    ports: &OpenPorts,
) -> Option<Summary> {
    let why_not: Option<String> = match (ports.dpdk_rx.as_slice(), &ports.dpdk_tx) {
        _ if ports.out.to_host.is_some() => {
            Some("output.to_host is set (the slow path takes copies on the TX threads)".into())
        }
        _ if ports.out.mirror.is_some() && ports.dpdk_mirror.is_none() => {
            Some("the mirror port is not a DPDK port (a copy to it needs the TX threads)".into())
        }
        ([Some(rx)], Some(tx)) => cpu::zero_copy::zero_copy_refusal(spec, rx, tx).or_else(|| {
            let m = ports.dpdk_mirror.as_ref()?;
            cpu::zero_copy::mirror_refusal(spec, m)
        }),
        ([Some(_)], None) => Some("the output port is not a DPDK port (or there is none)".into()),
        ([_], _) => Some("the input port is not a DPDK port".into()),
        (many, _) => Some(format!("{} input ports (zero-copy takes one)", many.len())),
    };
    if let Some(why) = why_not {
        tracing::info!(event = "forwarding_path", path = "copy", reason = %why, "forwarding by copy: {why}");
        return None;
    }
    let (rx, tx) = match (ports.dpdk_rx.first(), &ports.dpdk_tx) {
        (Some(Some(rx)), Some(tx)) => (rx, tx),
        _ => return None,
    };
    tracing::info!(
        event = "forwarding_path",
        path = "zero_copy",
        input = %rx.setup().name,
        output = %tx.setup().name,
        queues = spec.queues,
        "forwarding zero-copy: DPDK {} -> DPDK {}, mbufs passed along, one worker per queue",
        rx.setup().name,
        tx.setup().name
    );
    Some(summarize_cpu_run(
        p,
        shared,
        cpu::zero_copy::run_mirrored(spec, shared, rx, tx, ports.dpdk_mirror.as_ref()),
    ))
}
