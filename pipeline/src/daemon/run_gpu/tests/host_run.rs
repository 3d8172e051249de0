//! The GPU host side run and summarized as run_gpu does, and the accounting every run's
//! summary must satisfy: shared by the tests that drive `host::run` themselves.

use super::*;

/// Times `run` (a `host::run` call, with whatever the caller does around it) and summarizes
/// it: the run's result, its summary and the pinned frames, for the caller to drop once the
/// device's kernels have stopped.
pub(super) fn summarized(
    p: &Prepared,
    shared: &cpu::CpuShared,
    run: impl FnOnce() -> host::HostOutcome,
) -> (anyhow::Result<()>, Summary, Vec<GpuHold>) {
    let t = Instant::now();
    let o = run();
    let mut s = summarize(
        &shared.counters,
        &p.pipeline,
        t.elapsed(),
        &p.choice,
        o.errors,
    );
    s.receive_threads = o.receive_threads;
    s.gpu_ingest = o.gpu_ingest;
    s.gpu_tx = o.tx;
    s.outputs = o.outputs;
    (o.result, s, o.pinned)
}

/// The frames that passed, were mirrored or went to the host, on every queue.
pub(super) fn handled(s: &Summary) -> u64 {
    s.queues
        .iter()
        .map(|q| q.passed + q.mirrored + q.to_host)
        .sum()
}

/// The frames dropped, for any reason.
pub(super) fn dropped(s: &Summary) -> u64 {
    s.drops.iter().map(|(_, n)| n).sum()
}

/// Every frame received passed, was mirrored, went to the host or was dropped with a reason.
pub(super) fn accounted(s: &Summary, what: &str) {
    assert_eq!(
        handled(s) + dropped(s),
        s.rx_frames,
        "{what}: received = counted + drops"
    );
}
