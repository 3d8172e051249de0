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
    let inputs: Option<Vec<_>> = ports.dpdk_rx.iter().map(Option::as_ref).collect();
    let open_out = |k: usize| {
        ports.out.ports.get(k).is_some_and(Option::is_some)
            || (ports.out.default == Some(k) && ports.tx.is_some())
    };
    let non_dpdk_out = (0..ports.out.ports.len())
        .find(|&k| open_out(k) && ports.dpdk_out.get(k).is_none_or(Option::is_none));
    let why_not: Option<String> = match &inputs {
        _ if ports.out.to_host.is_some() => {
            Some("output.to_host is set (the slow path takes copies on the TX threads)".into())
        }
        _ if ports.out.mirror.is_some() && ports.dpdk_mirror.is_none() => {
            Some("the mirror port is not a DPDK port (a copy to it needs the TX threads)".into())
        }
        None => Some("an input port is not a DPDK port".into()),
        Some(_) if non_dpdk_out.is_some() => Some(format!(
            "the output port {} is not a DPDK port",
            non_dpdk_out
                .and_then(|k| ports.out.names.get(k))
                .map_or("?", String::as_str)
        )),
        Some(v) if v.is_empty() => Some("no input port".into()),
        // Without `output.port` (a sink, or frames only routed) the copying path runs, with
        // its receive threads and their events.
        Some(_) if ports.out.default.is_none() => Some("there is no output.port".into()),
        Some(_) => None,
    };
    let zc = inputs.map(|inputs| cpu::zero_copy::ZeroCopyPorts {
        inputs,
        outputs: ports.dpdk_out.iter().map(Option::as_ref).collect(),
        default: ports.out.default,
        mirror: ports.dpdk_mirror.as_ref(),
    });
    let why_not = why_not.or_else(|| {
        zc.as_ref()
            .and_then(|z| cpu::zero_copy::ports_refusal(spec, z))
    });
    let zc = match (why_not, zc) {
        (None, Some(zc)) => zc,
        (why, _) => {
            let why = why.unwrap_or_default();
            tracing::info!(event = "forwarding_path", path = "copy", reason = %why, "forwarding by copy: {why}");
            return None;
        }
    };
    let names = |v: &[&crate::port::dpdk::DpdkPort]| {
        v.iter()
            .map(|p| p.setup().name.clone())
            .collect::<Vec<_>>()
            .join(",")
    };
    let outs: Vec<_> = zc.outputs.iter().flatten().copied().collect();
    tracing::info!(
        event = "forwarding_path",
        path = "zero_copy",
        input = %names(&zc.inputs),
        output = %names(&outs),
        queues = spec.queues,
        "forwarding zero-copy: DPDK {} -> DPDK {}, mbufs passed along, one worker per queue",
        names(&zc.inputs),
        names(&outs)
    );
    Some(summarize_cpu_run(
        p,
        shared,
        cpu::zero_copy::run_ports(spec, shared, &zc),
    ))
}
