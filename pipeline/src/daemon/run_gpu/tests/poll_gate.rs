//! The stages' host sides pace the GPU executor's input ([`PollGate`]): a host side that reads
//! what the kernel left in a ring it reuses (a stage's per-slot states) must see every
//! entry before the kernel moves on past it, however fast the input (the generator, unpaced)
//! and however slow the poll (a slot read back and written to disk per poll). Here a slow
//! host side polls beside the stand-in device, which runs each burst at its submit, and counts
//! the frames run between two of its polls.

use std::time::Duration;

use super::*;
use crate::daemon::run_gpu::stage_host;
use crate::stage::gpu_host::{GpuHostSide, PollGate, StageGpuMemory};

/// The stand-in seen as the stage memory a host side reads: every word is the frames it ran
/// (submitted) so far, over every queue.
struct Ran<'a>(&'a CpuStandIn);

impl Ran<'_> {
    fn frames(&self) -> u64 {
        (0..self.0.queues.len())
            .map(|q| self.0.queue(q).counters.stage_frames[0].get())
            .sum()
    }
}

impl StageGpuMemory for Ran<'_> {
    fn gpus(&self) -> usize {
        1
    }
    fn read_buffer(&self, _: usize, _: usize, _: usize) -> anyhow::Result<Vec<u8>> {
        Ok(self.frames().to_le_bytes().to_vec())
    }
    fn read_buffer_range(
        &self,
        g: usize,
        k: usize,
        i: usize,
        _: usize,
        _: usize,
    ) -> anyhow::Result<Vec<u8>> {
        self.read_buffer(g, k, i)
    }
    fn set_buffer_word(
        &self,
        _: usize,
        _: usize,
        _: usize,
        _: usize,
        _: u32,
    ) -> anyhow::Result<()> {
        Ok(())
    }
    fn counter_blocks(&self) -> anyhow::Result<Vec<[u64; 8]>> {
        Ok(Vec::new())
    }
    fn ring_slots(&self) -> u32 {
        self.0.slots
    }
}

/// A host side whose poll takes `slow`; it records the most frames the device ran between
/// two of its polls, and fails its poll `fail_at` (if any).
struct Slow {
    limit: Option<u64>,
    slow: Duration,
    last: Option<u64>,
    most: Arc<Mutex<u64>>,
    polls: u32,
    fail_at: Option<u32>,
}

impl Slow {
    fn look(&mut self, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
        let b = mem.read_buffer(0, 0, 0)?;
        let ran = u64::from_le_bytes(b[..8].try_into()?);
        if let Some(l) = self.last {
            let mut m = self.most.lock().unwrap();
            *m = (*m).max(ran - l);
        }
        self.last = Some(ran);
        Ok(())
    }
}

impl GpuHostSide for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn poll_interval(&self) -> Duration {
        Duration::from_micros(20)
    }
    fn frames_per_poll(&self) -> Option<u64> {
        self.limit
    }
    fn poll(&mut self, _: &Pipeline, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
        self.polls += 1;
        if Some(self.polls) == self.fail_at {
            anyhow::bail!("read failed at poll {}", self.polls);
        }
        self.look(mem)?;
        std::thread::sleep(self.slow);
        Ok(())
    }
    fn finish(mut self: Box<Self>, _: &Pipeline, mem: &dyn StageGpuMemory) -> anyhow::Result<()> {
        self.look(mem)
    }
}

const FRAMES: u64 = 4000;

fn config() -> Prepared {
    prepared(&format!(
        "ports:\n{}queues: {{ count: 2, burst: 32, ring_slots: 4 }}\n\
         pipeline: [parse, count]\nexecutor: {{ kind: cpu, gpu: {{ burst_size: 32 }} }}\n",
        gen_port("a", FRAMES, 5, "64")
    ))
}

/// A run over the stand-in with `side` polled beside it; the summary, the frames most run
/// between two polls, and the polling's result.
fn run_beside(p: &Prepared, side: Slow) -> (Summary, u64, anyhow::Result<()>) {
    let dev = CpuStandIn::new(p, 4, 2);
    let most = Arc::clone(&side.most);
    let sides: Vec<Box<dyn GpuHostSide>> = vec![Box::new(side)];
    let gate = stage_host::gate_for(&sides);
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let mem = Ran(&dev);
    let r = stage_host::polled(&p.pipeline, &mem, sides, gate, |m: &Ran<'_>, gate| {
        let mut ports = open_ports(&p.cfg).expect("ports");
        let mut spec = host_spec(p, GpuSlots::of(&p.cfg), false, 0);
        spec.gate = gate;
        let mut out = crate::port::out::OutPorts::single(None);
        let t = Instant::now();
        let o = host::run(m.0, &spec, &shared, &mut ports.rx, &mut out);
        o.result.expect("host run");
        summarize(
            &shared.counters,
            &p.pipeline,
            t.elapsed(),
            &p.choice,
            o.errors,
        )
    });
    match r {
        Ok((s, sides)) => {
            stage_host::finish(&p.pipeline, &mem, sides).expect("finish");
            let most = *most.lock().unwrap();
            (s, most, Ok(()))
        }
        Err(e) => (
            summarize(
                &shared.counters,
                &p.pipeline,
                Duration::ZERO,
                &p.choice,
                Vec::new(),
            ),
            *most.lock().unwrap(),
            Err(e),
        ),
    }
}

fn slow(limit: Option<u64>, fail_at: Option<u32>) -> Slow {
    Slow {
        limit,
        slow: Duration::from_millis(2),
        last: None,
        most: Arc::default(),
        polls: 0,
        fail_at,
    }
}

#[test]
fn a_slow_host_side_poll_holds_the_input_to_its_frames_per_poll() {
    let p = config();
    let cpu = run_cpu_ref(&p, false);
    // Unpaced: the input runs far ahead of a poll that takes 2 ms.
    let (s, most, r) = run_beside(&p, slow(None, None));
    r.unwrap();
    assert_same_counts(&s, &cpu.s, "no gate");
    assert!(
        most > 256,
        "without a gate the GPU ran {most} frames between two polls"
    );
    // Paced: never more than 64 frames (two bursts of 32) between two polls, every frame
    // still counted as on the CPU.
    let (s, most, r) = run_beside(&p, slow(Some(64), None));
    r.unwrap();
    assert_same_counts(&s, &cpu.s, "gated");
    assert!(
        most <= 64,
        "{most} frames between two polls, past the side's 64"
    );
}

#[test]
fn a_failed_pacing_poll_opens_the_gate_and_the_run_still_ends() {
    let p = config();
    let (s, _, r) = run_beside(&p, slow(Some(32), Some(3)));
    let e = r.expect_err("the poll's error");
    assert!(format!("{e:#}").contains("read failed at poll 3"), "{e:#}");
    let frames: u64 = s.queues.iter().map(|q| q.rx_frames).sum();
    assert_eq!(
        frames, FRAMES,
        "every frame went through once the gate opened"
    );
}

#[test]
fn the_gate_is_the_least_frames_per_poll_of_the_sides_that_pace() {
    let none: Vec<Box<dyn GpuHostSide>> = vec![Box::new(slow(None, None))];
    assert!(stage_host::gate_for(&none).is_none());
    let two: Vec<Box<dyn GpuHostSide>> = vec![
        Box::new(slow(Some(300), None)),
        Box::new(slow(None, None)),
        Box::new(slow(Some(100), None)),
    ];
    let g: Arc<PollGate> = stage_host::gate_for(&two).expect("a gate");
    assert!(g.try_take(100) && !g.try_take(1), "limit 100");
}
