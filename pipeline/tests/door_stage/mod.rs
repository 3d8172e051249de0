//! `swap_macs`, a built-in-style stage in one folder: its descriptor, its options parser, its
//! Rust implementation, and its CUDA (swap_macs.cuh) with its parameter block. Adding it to a
//! binary is one line: `registry.register_stage(&door_stage::DESCRIPTOR, door_stage::factory())`.
//!
//! Frames of IP protocol `proto` (default 17, UDP) get their source and destination MACs
//! swapped; such a frame sent to the broadcast MAC is dropped instead (`no_route`: its reason,
//! named in its descriptor). Counters: `swapped`, `broadcast`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pipeline::meta::PacketMeta;
use pipeline::stage::{
    BuiltStage, CustomStage, FrameMut, GpuImpl, GpuStage, StageDescriptor, StageFactory, StageNeeds,
};
use pipeline::verdict::{DropReason, Verdict};

pub const DESCRIPTOR: StageDescriptor = StageDescriptor {
    name: "swap_macs",
    usage: "`custom: { name: swap_macs, proto }`",
    summary: "swaps the MACs of frames of one IP protocol; drops those to the broadcast MAC",
    needs: StageNeeds {
        reads_meta: true,
        writes_frame: true,
        ..StageNeeds::NONE
    },
    drop_reasons: &[DropReason::NoRoute],
    counters: &["swapped", "broadcast"],
    gpu: GpuImpl::Own,
    reloads: false,
};

pub fn factory() -> Arc<dyn StageFactory> {
    Arc::new(Factory)
}

struct SwapMacs {
    proto: u8,
    swapped: AtomicU64,
    broadcast: AtomicU64,
}

impl CustomStage for SwapMacs {
    fn process(&self, _: &[u8], _: &PacketMeta, _: &mut Verdict) {}
    fn process_mut(&self, f: &mut FrameMut<'_>, m: &mut PacketMeta, v: &mut Verdict) {
        if f.len() < 14 || m.ip_proto != self.proto {
            return;
        }
        let b = f.bytes_mut();
        if b[..6] == [0xFF; 6] {
            self.broadcast.fetch_add(1, Ordering::Relaxed);
            *v = Verdict::drop(DropReason::NoRoute);
            return;
        }
        let (dst, src) = b[..12].split_at_mut(6);
        dst.swap_with_slice(src);
        self.swapped.fetch_add(1, Ordering::Relaxed);
    }
    fn counter_names(&self) -> Vec<String> {
        DESCRIPTOR.counters.iter().map(|c| c.to_string()).collect()
    }
    fn counters(&self) -> Vec<u64> {
        let c = [&self.swapped, &self.broadcast];
        c.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }
}

struct Factory;
impl StageFactory for Factory {
    fn build(&self, o: &serde_json::Value) -> anyhow::Result<BuiltStage> {
        let proto = match o.get("proto") {
            None => 17,
            Some(p) => p
                .as_u64()
                .and_then(|p| u8::try_from(p).ok())
                .ok_or_else(|| anyhow::anyhow!("option `proto`: an IP protocol 0-255, got {p}"))?,
        };
        let cpu = Arc::new(SwapMacs {
            proto,
            swapped: AtomicU64::new(0),
            broadcast: AtomicU64::new(0),
        });
        let gpu = GpuStage {
            source: include_str!("swap_macs.cuh").into(),
            function: "pw_test_swap_macs".into(),
            params: u32::from(proto).to_le_bytes().to_vec(),
            counter_names: cpu.counter_names(),
            buffers: Vec::new(),
        };
        Ok(BuiltStage {
            cpu,
            gpu: Some(gpu),
        })
    }
}
