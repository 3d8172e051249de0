//! A user stage in a running pipeline: its name, its YAML options, its two implementations, and
//! its counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::stage::registry::{check_built, BuiltStage, GpuStage, StageRegistry};
use crate::stage::run::CustomStage;

/// A `custom:` stage, ready to run.
pub struct CustomSlot {
    name: String,
    options: serde_json::Value,
    built: BuiltStage,
    reads_meta: bool,
    counter_names: Vec<String>,
    /// The stage's counters as a GPU executor last read them from the device (summed over its
    /// queues), same order as `counter_names`: the CPU implementation never ran there, so
    /// [`CustomSlot::counters`] adds these to the CPU's.
    gpu_counts: Vec<AtomicU64>,
}

impl CustomSlot {
    /// Builds the stage registered under `name` from its options.
    pub fn from_registry(
        name: &str,
        options: &serde_json::Value,
        registry: &StageRegistry,
    ) -> anyhow::Result<CustomSlot> {
        let built = registry.build(name, options)?;
        let reads_meta = registry.get(name).is_none_or(|f| f.reads_meta());
        Ok(Self::with_parts(name, options.clone(), built, reads_meta))
    }

    /// A stage made by the application itself, outside any registry and config (checked as the
    /// registry checks a factory's output). `reads_meta`: whether it needs `parse` before it.
    pub fn new(name: &str, built: BuiltStage, reads_meta: bool) -> anyhow::Result<CustomSlot> {
        check_built(&built).map_err(|e| anyhow::anyhow!("custom stage `{name}`: {e:#}"))?;
        Ok(Self::with_parts(
            name,
            serde_json::Value::Null,
            built,
            reads_meta,
        ))
    }

    fn with_parts(
        name: &str,
        options: serde_json::Value,
        built: BuiltStage,
        reads_meta: bool,
    ) -> CustomSlot {
        let counter_names = built.cpu.counter_names();
        CustomSlot {
            name: name.to_string(),
            options,
            gpu_counts: counter_names.iter().map(|_| AtomicU64::new(0)).collect(),
            counter_names,
            built,
            reads_meta,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options it was built from (`null` for a stage made outside a config).
    pub fn options(&self) -> &serde_json::Value {
        &self.options
    }

    pub fn reads_meta(&self) -> bool {
        self.reads_meta
    }

    /// The Rust implementation (CPU executor, and the reference).
    pub fn cpu(&self) -> &Arc<dyn CustomStage> {
        &self.built.cpu
    }

    /// The CUDA implementation, when the stage has one.
    pub fn gpu(&self) -> Option<&GpuStage> {
        self.built.gpu.as_ref()
    }

    pub fn counter_names(&self) -> &[String] {
        &self.counter_names
    }

    /// Publishes the stage's counters as a GPU executor read them from the device (`v[1..]` of
    /// the stage's counter block, summed over queues; extra values are ignored).
    pub fn set_gpu_counters(&self, values: &[u64]) {
        for (slot, v) in self.gpu_counts.iter().zip(values) {
            slot.store(*v, Ordering::Relaxed);
        }
    }

    /// Each named counter's value: what the CPU implementation counted plus what the GPU
    /// executor published (one of the two is zero in a run). A stage reporting fewer values
    /// than names reads 0 for the missing ones.
    pub fn counters(&self) -> Vec<(&str, u64)> {
        let cpu = self.built.cpu.counters();
        self.counter_names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let c = cpu.get(i).copied().unwrap_or(0);
                let g = self.gpu_counts[i].load(Ordering::Relaxed);
                (n.as_str(), c.wrapping_add(g))
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
