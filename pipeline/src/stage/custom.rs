//! A user stage in a running pipeline: its name, its YAML options, its two implementations, and
//! its counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::stage::descriptor::StageNeeds;
use crate::stage::registry::{
    check_built, check_needs, BuiltStage, GpuStage, StageFactory, StageRegistry,
};
use crate::stage::run::CustomStage;

/// A `custom:` stage, ready to run. A reload with other options rebuilds it aside (by the
/// factory that built it) and publishes the new build with one pointer swap, as the ACL tables
/// are: a worker loads the build once per frame, and the GPU executor publishes the new CUDA
/// parameter block by epoch.
pub struct CustomSlot {
    name: String,
    /// The options and implementations in force.
    built: ArcSwap<Built>,
    /// The factory that built it (`None` for a stage made outside a registry: not reloadable).
    factory: Option<Arc<dyn StageFactory>>,
    /// What it needs of the data path (its descriptor's or its factory's `needs`).
    needs: StageNeeds,
    /// Its descriptor, when it was registered with one.
    descriptor: Option<&'static crate::stage::descriptor::StageDescriptor>,
    counter_names: Vec<String>,
    /// The stage's counters as a GPU executor last read them from the device (summed over its
    /// queues), same order as `counter_names`: the CPU implementation never ran there, so
    /// [`CustomSlot::counters`] adds these to the CPU's.
    gpu_counts: Vec<AtomicU64>,
    /// What replaced CPU builds had counted (a rebuilt stage starts its own counters at 0).
    carried: Vec<AtomicU64>,
    /// Builds published since the first (the stage's part of the pipeline's stage-parameter
    /// generation).
    rebuilds: AtomicU64,
}

/// One build of a custom stage: the options it was built from and its implementations.
pub struct Built {
    pub options: serde_json::Value,
    pub stage: BuiltStage,
}

/// The Rust implementation in force, held for the call (a reload publishing a new build
/// meanwhile does not free this one).
pub struct CpuRef(arc_swap::Guard<Arc<Built>>);

impl std::ops::Deref for CpuRef {
    type Target = dyn CustomStage;
    fn deref(&self) -> &Self::Target {
        &*self.0.stage.cpu
    }
}

impl CustomSlot {
    /// Builds the stage registered under `name` from its options.
    pub fn from_registry(
        name: &str,
        options: &serde_json::Value,
        registry: &StageRegistry,
    ) -> anyhow::Result<CustomSlot> {
        let factory = registry.get(name);
        let needs = registry.needs(name).unwrap_or(StageNeeds::META);
        check_needs(&needs).map_err(|e| anyhow::anyhow!("custom stage `{name}`: {e:#}"))?;
        let built = registry.build(name, options)?;
        let mut slot = Self::with_parts(name, options.clone(), built, needs);
        slot.factory = factory;
        slot.descriptor = registry.descriptor(name);
        Ok(slot)
    }

    /// A built-in that comes through the registry door: built by its factory from its options,
    /// described by its descriptor (its name is reserved, so it is in no registry).
    pub(crate) fn builtin(
        d: &'static crate::stage::descriptor::StageDescriptor,
        factory: Arc<dyn StageFactory>,
        options: &serde_json::Value,
    ) -> anyhow::Result<CustomSlot> {
        let built = factory
            .build(options)
            .and_then(|b| check_built(&b).map(|()| b))
            .map_err(|e| anyhow::anyhow!("stage `{}`: {e:#}", d.name))?;
        let mut slot = Self::with_parts(d.name, options.clone(), built, d.needs);
        slot.factory = Some(factory);
        slot.descriptor = Some(d);
        Ok(slot)
    }

    /// A stage built outside a factory, as its descriptor describes it (its needs, reasons and
    /// GPU side). Not rebuilt by a reload: such a stage's options need a restart.
    pub fn with_descriptor(
        d: &'static crate::stage::descriptor::StageDescriptor,
        built: BuiltStage,
    ) -> anyhow::Result<CustomSlot> {
        check_built(&built).map_err(|e| anyhow::anyhow!("stage `{}`: {e:#}", d.name))?;
        let mut slot = Self::with_parts(d.name, serde_json::Value::Null, built, d.needs);
        slot.descriptor = Some(d);
        Ok(slot)
    }

    /// A stage made by the application itself, outside any registry and config (checked as the
    /// registry checks a factory's output). `reads_meta`: whether it needs `parse` before it.
    pub fn new(name: &str, built: BuiltStage, reads_meta: bool) -> anyhow::Result<CustomSlot> {
        let needs = StageNeeds {
            reads_meta,
            ..StageNeeds::NONE
        };
        Self::with_needs(name, built, needs)
    }

    /// [`CustomSlot::new`] with the stage's whole needs (a stage that writes the frame, ...).
    pub fn with_needs(
        name: &str,
        built: BuiltStage,
        needs: StageNeeds,
    ) -> anyhow::Result<CustomSlot> {
        let named = |e: anyhow::Error| anyhow::anyhow!("custom stage `{name}`: {e:#}");
        check_needs(&needs).map_err(named)?;
        check_built(&built).map_err(named)?;
        Ok(Self::with_parts(
            name,
            serde_json::Value::Null,
            built,
            needs,
        ))
    }

    fn with_parts(
        name: &str,
        options: serde_json::Value,
        built: BuiltStage,
        needs: StageNeeds,
    ) -> CustomSlot {
        let counter_names = built.cpu.counter_names();
        CustomSlot {
            name: name.to_string(),
            gpu_counts: counter_names.iter().map(|_| AtomicU64::new(0)).collect(),
            carried: counter_names.iter().map(|_| AtomicU64::new(0)).collect(),
            counter_names,
            built: ArcSwap::from_pointee(Built {
                options,
                stage: built,
            }),
            factory: None,
            needs,
            descriptor: None,
            rebuilds: AtomicU64::new(0),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options in force (`null` for a stage made outside a config).
    pub fn options(&self) -> serde_json::Value {
        self.built.load().options.clone()
    }

    pub fn reads_meta(&self) -> bool {
        self.needs.reads_meta
    }

    /// What the stage needs of the data path.
    pub fn needs(&self) -> StageNeeds {
        self.needs
    }

    /// Its descriptor, when it was registered with one
    /// ([`crate::stage::StageRegistry::register_stage`]).
    pub fn descriptor(&self) -> Option<&'static crate::stage::descriptor::StageDescriptor> {
        self.descriptor
    }

    /// The Rust implementation in force (CPU executor, and the reference).
    pub fn cpu(&self) -> CpuRef {
        CpuRef(self.built.load())
    }

    /// The Rust implementation in force, as a shared handle.
    pub fn cpu_arc(&self) -> Arc<dyn CustomStage> {
        Arc::clone(&self.built.load().stage.cpu)
    }

    /// The CUDA implementation in force, when the stage has one.
    pub fn gpu(&self) -> Option<GpuStage> {
        self.built.load().stage.gpu.clone()
    }

    pub fn counter_names(&self) -> &[String] {
        &self.counter_names
    }

    /// Rebuilds the stage aside from new `options`, when they differ from those in force
    /// (`None`: no change); [`CustomSlot::publish`] puts the build in force. The new build must
    /// keep the stage's shape: the same counters, CUDA function, source and buffers (those are
    /// compiled into the running kernel); only the options and the CUDA parameter block's
    /// contents may change.
    pub fn rebuild(&self, options: &serde_json::Value) -> anyhow::Result<Option<Built>> {
        let cur = self.built.load_full();
        if cur.options == *options {
            return Ok(None);
        }
        let Some(f) = &self.factory else {
            anyhow::bail!(
                "custom stage `{}` was made outside a stage registry and cannot be rebuilt",
                self.name
            );
        };
        let new = f
            .build(options)
            .and_then(|b| check_built(&b).map(|()| b))
            .map_err(|e| anyhow::anyhow!("custom stage `{}`: {e:#}", self.name))?;
        if new.cpu.counter_names() != self.counter_names {
            anyhow::bail!(
                "custom stage `{}`: the new options change the stage's counters; restart to \
                 apply them",
                self.name
            );
        }
        if new.cpu.metric_families() != cur.stage.cpu.metric_families() {
            anyhow::bail!(
                "custom stage `{}`: the new options change the stage's metric families; restart \
                 to apply them",
                self.name
            );
        }
        let same_kernel = match (&cur.stage.gpu, &new.gpu) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                a.function == b.function
                    && a.source == b.source
                    && a.buffers == b.buffers
                    && a.params.len() == b.params.len()
            }
            _ => false,
        };
        if !same_kernel {
            anyhow::bail!(
                "custom stage `{}`: the new options change its CUDA code, buffers or parameter \
                 block size, which are compiled into the running kernel; restart to apply them",
                self.name
            );
        }
        Ok(Some(Built {
            options: options.clone(),
            stage: new,
        }))
    }

    /// Puts a build from [`CustomSlot::rebuild`] in force with one swap. The replaced build's
    /// counts carry over, so the stage's counters never go back.
    pub fn publish(&self, new: Built) {
        let old = self.built.swap(Arc::new(new));
        for (c, v) in self.carried.iter().zip(old.stage.cpu.counters()) {
            c.fetch_add(v, Ordering::Relaxed);
        }
        // After the swap: a reader that sees the new count finds the new build in force.
        self.rebuilds.fetch_add(1, Ordering::AcqRel);
    }

    /// Builds published since the first.
    pub fn rebuilds(&self) -> u64 {
        self.rebuilds.load(Ordering::Acquire)
    }

    /// Publishes the stage's counters as a GPU executor read them from the device (`v[1..]` of
    /// the stage's counter block, summed over queues; extra values are ignored).
    pub fn set_gpu_counters(&self, values: &[u64]) {
        for (slot, v) in self.gpu_counts.iter().zip(values) {
            slot.store(*v, Ordering::Relaxed);
        }
    }

    /// Each named counter's value: what the CPU implementation counted (over every build)
    /// plus what the GPU executor published (one of the two is zero in a run). A stage
    /// reporting fewer values than names reads 0 for the missing ones.
    pub fn counters(&self) -> Vec<(&str, u64)> {
        let cpu = self.built.load().stage.cpu.counters();
        self.counter_names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let c = cpu.get(i).copied().unwrap_or(0);
                let g = self.gpu_counts[i].load(Ordering::Relaxed);
                let k = self.carried[i].load(Ordering::Relaxed);
                (n.as_str(), c.wrapping_add(g).wrapping_add(k))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::PacketMeta;
    use crate::verdict::Verdict;

    struct Two;
    impl CustomStage for Two {
        fn process(&self, _: &[u8], _: &PacketMeta, _: &mut Verdict) {}
        fn counter_names(&self) -> Vec<String> {
            vec!["a".into(), "b".into()]
        }
        fn counters(&self) -> Vec<u64> {
            vec![5]
        }
    }

    #[test]
    fn counters_sum_cpu_and_gpu_and_pad_missing_values() {
        let s = CustomSlot::new(
            "two",
            BuiltStage {
                cpu: Arc::new(Two),
                gpu: None,
            },
            false,
        )
        .unwrap();
        assert_eq!(s.counters(), [("a", 5), ("b", 0)]);
        s.set_gpu_counters(&[1, 2, 3]);
        assert_eq!(s.counters(), [("a", 6), ("b", 2)]);
        assert_eq!(s.name(), "two");
        assert!(s.options().is_null());
    }

    #[test]
    fn a_bad_stage_made_by_hand_is_refused_naming_it() {
        struct Many;
        impl CustomStage for Many {
            fn process(&self, _: &[u8], _: &PacketMeta, _: &mut Verdict) {}
            fn counter_names(&self) -> Vec<String> {
                (0..8).map(|i| format!("c{i}")).collect()
            }
        }
        let e = CustomSlot::new(
            "many",
            BuiltStage {
                cpu: Arc::new(Many),
                gpu: None,
            },
            true,
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("custom stage `many`"), "{e}");
        assert!(e.to_string().contains("at most 7"), "{e}");
    }
}
