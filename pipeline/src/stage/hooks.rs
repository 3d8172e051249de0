//! The registered stages' host hooks ([`crate::stage::api::StageHooks`]) as both executors'
//! host sides call them: `start` before the first frame, `epoch_published` when a new
//! stage-parameter generation is in force, `periodic` when due, `end` after the last frame.
//! Each call goes to the build in force at the time (a reload's new build gets the calls from
//! its `epoch_published` on).

use std::time::{Duration, Instant};

use crate::stage::api::{HookCtx, StageHooks, MIN_PERIODIC};
use crate::stage::run::{Pipeline, Stage};

/// One run's hook calls.
pub struct HookDriver {
    executor: &'static str,
    /// Per stage with hooks: its position and when its `periodic` is next due.
    stages: Vec<(usize, Option<Instant>)>,
    generation: u64,
}

impl HookDriver {
    /// Calls every stage's `start`; `generation`: the stage-parameter generation in force.
    pub fn start(p: &Pipeline, executor: &'static str, generation: u64) -> HookDriver {
        let now = Instant::now();
        let mut stages = Vec::new();
        for (i, _) in p.stages.iter().enumerate() {
            let ctx = HookCtx {
                executor,
                position: i,
            };
            let due = with_hooks(p, i, |h| {
                h.start(&ctx);
                interval(h).map(|d| now + d)
            });
            if let Some(due) = due {
                stages.push((i, due));
            }
        }
        HookDriver {
            executor,
            stages,
            generation,
        }
    }

    /// Whether no stage has hooks (the executor then needs no hook thread).
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// Calls `epoch_published` when `generation` is newer than the last one told.
    pub fn epoch(&mut self, p: &Pipeline, generation: u64) {
        if generation == self.generation {
            return;
        }
        self.generation = generation;
        for (i, _) in &self.stages {
            let ctx = self.ctx(*i);
            with_hooks(p, *i, |h| h.epoch_published(&ctx, generation));
        }
    }

    /// Calls each `periodic` that is due.
    pub fn tick(&mut self, p: &Pipeline) {
        let now = Instant::now();
        let executor = self.executor;
        for (i, due) in &mut self.stages {
            let Some(at) = *due else { continue };
            if now < at {
                continue;
            }
            let ctx = HookCtx {
                executor,
                position: *i,
            };
            *due = with_hooks(p, *i, |h| {
                h.periodic(&ctx);
                interval(h).map(|d| now + d)
            })
            .flatten();
        }
    }

    /// [`HookDriver::epoch`] then [`HookDriver::tick`]: the host side's one call per round.
    pub fn poll(&mut self, p: &Pipeline, generation: u64) {
        self.epoch(p, generation);
        self.tick(p);
    }

    /// How long the host side may sleep before the next `periodic` is due (at most `max`).
    pub fn sleep_for(&self, max: Duration) -> Duration {
        let now = Instant::now();
        self.stages
            .iter()
            .filter_map(|(_, d)| *d)
            .map(|d| d.saturating_duration_since(now))
            .fold(max, Duration::min)
    }

    /// Calls every stage's `end`.
    pub fn end(self, p: &Pipeline) {
        for (i, _) in &self.stages {
            let ctx = self.ctx(*i);
            with_hooks(p, *i, |h| h.end(&ctx));
        }
    }

    fn ctx(&self, position: usize) -> HookCtx {
        HookCtx {
            executor: self.executor,
            position,
        }
    }
}

fn interval(h: &dyn StageHooks) -> Option<Duration> {
    h.periodic_interval().map(|d| d.max(MIN_PERIODIC))
}

/// `f` on the hooks of stage `i`'s build in force, when it has hooks.
fn with_hooks<T>(p: &Pipeline, i: usize, f: impl FnOnce(&dyn StageHooks) -> T) -> Option<T> {
    match p.stages.get(i) {
        Some(Stage::Custom(c)) => c.cpu().hooks().map(f),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::PacketMeta;
    use crate::stage::api::CustomStage;
    use crate::stage::custom::CustomSlot;
    use crate::stage::registry::BuiltStage;
    use crate::verdict::Verdict;
    use std::sync::{Arc, Mutex};

    /// Records its hook calls as `start@1`, `epoch 3`, `periodic`, `end`.
    #[derive(Default)]
    pub(crate) struct Recorder {
        pub calls: Mutex<Vec<String>>,
        pub every: Option<Duration>,
    }
    impl StageHooks for Recorder {
        fn start(&self, c: &HookCtx) {
            self.push(format!("start@{} {}", c.position, c.executor));
        }
        fn epoch_published(&self, _: &HookCtx, g: u64) {
            self.push(format!("epoch {g}"));
        }
        fn periodic_interval(&self) -> Option<Duration> {
            self.every
        }
        fn periodic(&self, _: &HookCtx) {
            self.push("periodic".into());
        }
        fn end(&self, _: &HookCtx) {
            self.push("end".into());
        }
    }
    impl Recorder {
        fn push(&self, s: String) {
            self.calls.lock().unwrap_or_else(|p| p.into_inner()).push(s);
        }
    }
    struct Hooked(Arc<Recorder>);
    impl CustomStage for Hooked {
        fn process(&self, _: &[u8], _: &PacketMeta, _: &mut Verdict) {}
        fn hooks(&self) -> Option<&dyn StageHooks> {
            Some(&*self.0)
        }
    }

    #[test]
    fn hooks_run_in_order_and_periodic_when_due() {
        let rec = Arc::new(Recorder {
            every: Some(Duration::from_millis(1)),
            ..Recorder::default()
        });
        let cpu = Arc::new(Hooked(Arc::clone(&rec)));
        let slot = CustomSlot::new("hooked", BuiltStage { cpu, gpu: None }, false).unwrap();
        let p = Pipeline::new(vec![Stage::Count, Stage::Custom(Box::new(slot))]);
        let mut d = HookDriver::start(&p, "cpu", 0);
        assert!(!d.is_empty());
        d.epoch(&p, 0); // not newer: no call
        d.tick(&p); // not due yet (the interval is raised to MIN_PERIODIC)
        std::thread::sleep(MIN_PERIODIC);
        assert_eq!(d.sleep_for(Duration::from_secs(1)), Duration::ZERO);
        d.tick(&p);
        d.epoch(&p, 2);
        d.end(&p);
        let calls = rec.calls.lock().unwrap().clone();
        assert_eq!(calls, ["start@1 cpu", "periodic", "epoch 2", "end"]);
        // No hooks: nothing to drive.
        let plain = Pipeline::new(vec![Stage::Count]);
        assert!(HookDriver::start(&plain, "gpu", 0).is_empty());
    }
}
