//! A registered stage that writes the frame, as the built-in rewrite stages do: its needs say
//! `writes_frame` with 4 bytes of frame room, so the CPU executor hands it the frame writable
//! (`CustomStage::process_mut`) and the kernel generator defines `PW_PIPELINE_WRITES` (its CUDA
//! function takes `pw_frame *`). The stage list is built from config values through a
//! `StageRegistry` as the daemon builds it; every frame comes out of `Pipeline::run_burst_mut`
//! and of the generated host build of the same list (`HostPipeline`, run in place with the same
//! room) with the same bytes, length, wire length, metadata and verdict (output port included),
//! and the stage's counters agree.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pipeline::burst::{Burst, FrameDesc};
use pipeline::counters::QueueCounters;
use pipeline::internal::executor::gpu::compose::stage_set;
use pipeline::internal::stage::config::{CustomStageConfig, StageConfig};
use pipeline::internal::stage::{
    build_with, BuiltStage, CustomStage, FrameMut, GpuStage, Stage, StageFactory, StageNeeds,
    StageRegistry,
};
use pipeline::meta::PacketMeta;
use pipeline::verdict::{Action, Verdict};
use pktwarp_kernels::host::{HostFrame, HostPipeline, META_BYTES, VERDICT_BYTES};

/// IPv4 frames: the destination MAC becomes the stage's `mac` and a 4-byte trailer
/// (`c0 ff ee <ttl>`) is appended in the frame room (no room: dropped, counted `no_room`).
/// IPv6 frames go to output port 1. Counters: `stamped`, `no_room`.
struct Stamp {
    mac: [u8; 6],
    stamped: AtomicU64,
    no_room: AtomicU64,
}

impl CustomStage for Stamp {
    fn process(&self, _: &[u8], _: &PacketMeta, _: &mut Verdict) {
        unreachable!("a stage that writes the frame is called through process_mut")
    }
    fn process_mut(&self, f: &mut FrameMut<'_>, m: &mut PacketMeta, v: &mut Verdict) {
        if m.ip_version == 6 {
            v.out_port = 1;
        }
        if m.ip_version != 4 || f.len() < 14 {
            return;
        }
        f.bytes_mut()[..6].copy_from_slice(&self.mac);
        let n = f.len();
        if !f.set_len(n + 4) {
            self.no_room.fetch_add(1, Ordering::Relaxed);
            v.action = Action::Drop;
            return;
        }
        f.bytes_mut()[n..].copy_from_slice(&[0xC0, 0xFF, 0xEE, m.ip_ttl]);
        self.stamped.fetch_add(1, Ordering::Relaxed);
    }
    fn counter_names(&self) -> Vec<String> {
        vec!["stamped".into(), "no_room".into()]
    }
    fn counters(&self) -> Vec<u64> {
        let c = [&self.stamped, &self.no_room];
        c.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }
}

const STAMP_CUDA: &str = "
PW_DEVICE void stamp(pw_frame *f, pw_packet_meta *m, pw_verdict *v, const void *params,
                     pw_stage_counters *c) {
    const uint8_t *mac = (const uint8_t *)params;
    if (m->ip_version == 6u) v->out_port = 1u;
    if (m->ip_version != 4u || f->len < 14u) return;
    for (int i = 0; i < 6; i++) f->data[i] = mac[i];
    if (f->len + 4u > f->cap) {
        PW_ADD64(&c->v[2], 1);
        v->action = (uint8_t)PW_ACTION_DROP;
        return;
    }
    f->data[f->len] = 0xC0u; f->data[f->len + 1u] = 0xFFu; f->data[f->len + 2u] = 0xEEu;
    f->data[f->len + 3u] = m->ip_ttl;
    f->len += 4u;
    f->wire_len += 4u;
    PW_ADD64(&c->v[1], 1);
}
";

struct StampFactory;
impl StageFactory for StampFactory {
    fn build(&self, o: &serde_json::Value) -> anyhow::Result<BuiltStage> {
        let last = o.get("last").and_then(|v| v.as_u64()).unwrap_or(0xAB) as u8;
        let mac = [0x02, 0, 0, 0, 0, last];
        let cpu = Arc::new(Stamp {
            mac,
            stamped: AtomicU64::new(0),
            no_room: AtomicU64::new(0),
        });
        let gpu = GpuStage {
            source: STAMP_CUDA.into(),
            function: "stamp".into(),
            params: mac.to_vec(),
            counter_names: cpu.counter_names(),
            buffers: Vec::new(),
        };
        Ok(BuiltStage {
            cpu,
            gpu: Some(gpu),
        })
    }
    fn needs(&self) -> StageNeeds {
        StageNeeds {
            reads_meta: true,
            writes_frame: true,
            frame_room: 4,
            ..StageNeeds::NONE
        }
    }
}

fn verdict_bytes(v: &Verdict) -> [u8; VERDICT_BYTES] {
    let mut b = [0u8; VERDICT_BYTES];
    b[0] = v.action as u8;
    b[1] = v.reason.map_or(0xFF, |r| r as u8);
    b[2..4].copy_from_slice(&v.out_port.to_le_bytes());
    b[4..8].copy_from_slice(&v.rule.to_le_bytes());
    b[8..12].copy_from_slice(&v.mark.to_le_bytes());
    b
}

fn frames() -> Vec<(FrameDesc, Vec<u8>)> {
    let mut frames = pipeline::internal::testdata::multi_proto_frames();
    frames.extend(
        pipeline::internal::testdata::mixed_frames(400)
            .into_iter()
            .map(|(f, _)| f),
    );
    frames
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let d = FrameDesc {
                port: (i % 3) as u16,
                len: f.len() as u32,
                wire_len: f.len() as u32 + (i % 2) as u32,
                ..FrameDesc::default()
            };
            (d, f)
        })
        .collect()
}

/// Runs the frames through the CPU pipeline and the host-compiled CUDA with `room` bytes after
/// each; returns (frames stamped, frames to port 1, frames dropped for want of room).
fn differential(room: Option<usize>) -> (usize, usize, u64) {
    let mut reg = StageRegistry::default();
    reg.register("stamp", Arc::new(StampFactory)).unwrap();
    let custom = StageConfig::Custom(CustomStageConfig {
        name: "stamp".into(),
        options: serde_json::json!({ "last": 0x5A }),
    });
    let stages = [StageConfig::Parse, custom, StageConfig::Count];
    let cpu = build_with(&stages, |p| p.to_path_buf(), &reg).expect("builds");
    assert!(
        cpu.rewrites(),
        "a writing user stage makes the list rewrite"
    );
    assert_eq!(cpu.frame_room(), 4);
    let room = room.unwrap_or(cpu.frame_room());
    let set = stage_set(&cpu).expect("specs");
    assert!(pktwarp_kernels::codegen::pipeline_writes(&set.specs));
    let host = HostPipeline::compile(&set.specs).unwrap_or_else(|e| panic!("{e}"));
    let params: Vec<&[u8]> = set.params.iter().map(Vec::as_slice).collect();
    let c = QueueCounters::new(stages.len(), 0);
    let mut gc = [[0u64; 8]; pktwarp_kernels::MAX_STAGES];
    let (mut stamped, mut to_one) = (0, 0);
    let all = frames();
    for chunk in all.chunks(32) {
        let mut burst = Burst::default();
        for (d, f) in chunk {
            burst.push_with_room(f, *d, room);
        }
        let (mut metas, mut verdicts) = (Vec::new(), Vec::new());
        cpu.run_burst_mut(&mut burst, &mut metas, &mut verdicts, &c);
        for (i, (d, f)) in chunk.iter().enumerate() {
            let mut buf = f.clone();
            buf.resize(f.len() + room, 0);
            let mut hf = HostFrame {
                len: f.len(),
                wire_len: d.wire_len,
                port: d.port,
                ..HostFrame::default()
            };
            let (mut gm, mut gv) = ([0xAAu8; META_BYTES], [0x55u8; VERDICT_BYTES]);
            host.run_frame_mut(&mut buf, &mut hf, &params, None, &mut gm, &mut gv, &mut gc);
            buf.truncate(hf.len);
            let cv = verdict_bytes(&verdicts[i]);
            assert_eq!(buf, burst.frame(i), "frame {i}: bytes");
            assert_eq!(
                hf.wire_len, burst.descs[i].wire_len,
                "frame {i}: wire length"
            );
            assert_eq!(&gm, metas[i].as_bytes(), "frame {i}: metadata");
            assert_eq!((&gv[..4], &gv[4..12]), (&cv[..4], &cv[4..12]), "frame {i}");
            stamped += usize::from(buf.len() == f.len() + 4 && buf[..6] != f[..6]);
            to_one += usize::from(verdicts[i].out_port == 1);
        }
    }
    let Stage::Custom(slot) = &cpu.stages[1] else {
        panic!("stage 1 is the user stage")
    };
    let cpu_counts: Vec<u64> = slot.counters().iter().map(|(_, v)| *v).collect();
    assert_eq!(&gc[1][1..3], &cpu_counts[..], "the stage's own counters");
    assert_eq!(gc[1][0], c.stage_frames[1].get());
    assert_eq!(
        gc[2][1],
        c.stage_bytes[2].get(),
        "count bytes after the rewrite"
    );
    (stamped, to_one, cpu_counts[1])
}

#[test]
fn a_writing_user_stage_equals_its_cuda_with_frame_room() {
    let (stamped, to_one, no_room) = differential(None);
    // The comparison covered rewritten and grown frames and a set output port.
    assert!(stamped > 100, "{stamped} frames stamped");
    assert!(to_one > 0, "no IPv6 frame went to port 1");
    assert_eq!(no_room, 0);
}

#[test]
fn without_the_room_both_sides_drop_the_same_frames() {
    let (stamped, _, no_room) = differential(Some(0));
    assert_eq!(stamped, 0);
    assert!(no_room > 100, "{no_room} frames dropped for want of room");
}
