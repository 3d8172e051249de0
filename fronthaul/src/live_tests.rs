//! The completion poll over fake GPU rings (the buffers as the kernel leaves them).

use super::*;
use crate::bfp::PRB_SAMPLES;
use crate::config::SinkConfig;
use std::cell::RefCell;

/// One GPU's buffers of the stage, written as `pw_stage_fronthaul` writes them.
struct FakeGpu {
    l: Layout,
    states: RefCell<Vec<u8>>,
    grid: RefCell<Vec<u8>>,
    marks: RefCell<Vec<u8>>,
    closed: RefCell<Vec<u32>>,
    reads: RefCell<usize>,
}

impl FakeGpu {
    fn new(l: &Layout) -> FakeGpu {
        let b = l.buffers();
        FakeGpu {
            l: l.clone(),
            grid: RefCell::new(vec![0; b[super::super::gpu::BUF_GRID].1]),
            marks: RefCell::new(vec![0; b[super::super::gpu::BUF_MARKS].1]),
            states: RefCell::new(vec![0; b[super::super::gpu::BUF_SLOT_STATE].1]),
            closed: RefCell::new(vec![0; l.ring]),
            reads: RefCell::new(0),
        }
    }

    /// Stores PRB (e, sym, prb) of slot `tag` with every sample `v`, received at `ts`, as the
    /// kernel does: refused when the host closed the slot (or a later one of its entry), else
    /// the cell, its mark, then the entry's count (a new tag takes the entry). Returns whether
    /// it stored.
    fn store(&self, tag: u32, e: usize, sym: usize, prb: usize, v: i16, ts: u64) -> bool {
        let r = (tag as usize - 1) % self.l.ring;
        let cycle = crate::grid::cycle_slots(self.l.numerology);
        if crate::grid::at_or_after(self.closed.borrow()[r], tag, cycle) {
            return false;
        }
        let cell = r * self.l.cells() + (e * 14 + sym) * self.l.prbs + prb;
        let mut g = self.grid.borrow_mut();
        for k in 0..PRB_SAMPLES {
            let at = (cell * PRB_SAMPLES + k) * 2;
            g[at..at + 2].copy_from_slice(&v.to_le_bytes());
        }
        let mut m = self.marks.borrow_mut();
        let dup = m[cell * 4..cell * 4 + 4] == tag.to_le_bytes();
        m[cell * 4..cell * 4 + 4].copy_from_slice(&tag.to_le_bytes());
        let mut s = self.states.borrow_mut();
        let w = u64::from_le_bytes(s[r * 16..r * 16 + 8].try_into().unwrap());
        let add = u64::from(!dup);
        let took = (w >> 32) as u32 != tag;
        let w = if took {
            (u64::from(tag) << 32) | add
        } else {
            w + add
        };
        s[r * 16..r * 16 + 8].copy_from_slice(&w.to_le_bytes());
        // A slot taking the entry restarts its receive time.
        let last = u64::from_le_bytes(s[r * 16 + 8..r * 16 + 16].try_into().unwrap());
        let last = if took { ts } else { last.max(ts) };
        s[r * 16 + 8..r * 16 + 16].copy_from_slice(&last.to_le_bytes());
        true
    }

    /// Every PRB of eAxC index `e` of slot `tag`.
    fn fill(&self, tag: u32, e: usize, v: i16, ts: u64) {
        for sym in 0..14 {
            for prb in 0..self.l.prbs {
                self.store(tag, e, sym, prb, v, ts);
            }
        }
    }
}

impl GridSource for FakeGpu {
    fn slot_states(&self) -> anyhow::Result<Vec<u8>> {
        Ok(self.states.borrow().clone())
    }

    fn entry(&self, r: usize, samples: bool) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
        *self.reads.borrow_mut() += 1;
        let (gb, mb) = entry_bytes(&self.l);
        Ok((
            if samples {
                self.grid.borrow()[r * gb..(r + 1) * gb].to_vec()
            } else {
                Vec::new()
            },
            self.marks.borrow()[r * mb..(r + 1) * mb].to_vec(),
        ))
    }

    fn mark_closed(&self, r: usize, tag: u32) -> anyhow::Result<()> {
        self.closed.borrow_mut()[r] = tag;
        Ok(())
    }
}

fn cfg(max_open: u16, timeout_us: u64) -> FronthaulConfig {
    FronthaulConfig {
        carrier_prbs: 3,
        numerology: 1,
        eaxcs: vec![7, 9],
        max_open_slots: max_open,
        slot_timeout_us: timeout_us,
        sink: SinkConfig::None,
        ..FronthaulConfig::default()
    }
}

/// (tag of the slot, complete, filled PRBs, latest receive time) of each closed slot.
type Seen = Vec<(u32, bool, usize, u64)>;

fn tag_of(g: &SlotGrid) -> u32 {
    ((u32::from(g.key.frame_id) * 10 + u32::from(g.key.subframe_id)) << 1)
        + u32::from(g.key.slot_id)
        + 1
}

fn poll(c: &mut Completer, gpus: &[&FakeGpu], seen: &mut Seen) -> usize {
    let srcs: Vec<&dyn GridSource> = gpus.iter().map(|g| *g as &dyn GridSource).collect();
    c.poll(&srcs, &mut |cl: Closed| {
        seen.push((
            tag_of(&cl.grid),
            cl.grid.complete,
            cl.grid.filled_count(),
            cl.last_ns,
        ))
    })
    .unwrap()
}

#[test]
fn a_slot_closes_complete_once_with_its_samples() {
    let c0 = cfg(2, 1_000_000);
    let mut c = Completer::new(&c0).unwrap();
    let g = FakeGpu::new(c.layout());
    let mut seen = Seen::new();
    g.fill(5, 0, -3, 100);
    assert_eq!(poll(&mut c, &[&g], &mut seen), 0, "half the eAxCs: open");
    assert_eq!(c.open_slots(), 1);
    g.fill(5, 1, 4, 250);
    g.store(5, 1, 0, 0, 4, 120); // a duplicate PRB: not counted twice
    let srcs: [&dyn GridSource; 1] = [&g];
    let mut grids = Vec::new();
    c.poll(&srcs, &mut |cl| grids.push(cl)).unwrap();
    assert_eq!(grids.len(), 1);
    let got = &grids[0];
    assert!(got.grid.complete);
    assert_eq!(got.last_ns, 250);
    assert_eq!(got.grid.eaxc_ids, vec![7, 9]);
    assert_eq!(got.grid.prb_i16(0, 13, 2), Some(&[-3i16; 24][..]));
    assert_eq!(got.grid.prb_i16(1, 0, 0), Some(&[4i16; 24][..]));
    // Seen again on later polls, never closed again; finish has nothing left.
    assert_eq!(poll(&mut c, &[&g], &mut seen), 0);
    assert_eq!(c.finish(&srcs, &mut |_| panic!("closed twice")).unwrap(), 0);
    assert_eq!(*g.reads.borrow(), 1, "the entry read once");
}

#[test]
fn a_closed_slot_refuses_later_packets_and_what_was_delivered_stays() {
    let c0 = cfg(2, 1_000_000);
    let mut c = Completer::new(&c0).unwrap();
    let g = FakeGpu::new(c.layout());
    let mut seen = Seen::new();
    // Slot 5 partial: the eviction by slots 6 and 7 closes it (two open at most).
    g.store(5, 0, 0, 0, 1, 10);
    poll(&mut c, &[&g], &mut seen);
    g.store(6, 0, 0, 0, 1, 20);
    g.store(7, 0, 0, 0, 1, 30);
    poll(&mut c, &[&g], &mut seen);
    assert_eq!(seen, [(5, false, 1, 10)]);
    // Slot 5's ring entry: (5 - 1) % 4.
    assert_eq!(
        g.closed.borrow()[0],
        5,
        "the closed word written before the read-back"
    );
    // Its later packets are refused: the ring entry keeps what was delivered.
    assert!(!g.store(5, 0, 0, 1, 9, 40));
    assert!(!g.store(5, 1, 3, 2, 9, 40));
    let st = g.slot_states().unwrap();
    assert_eq!(super::super::gpu::entry_state(&st, 0), (5, 1, 10));
    // Never opened or delivered again, also at the end.
    poll(&mut c, &[&g], &mut seen);
    let srcs: [&dyn GridSource; 1] = [&g];
    c.finish(&srcs, &mut |cl| {
        seen.push((
            tag_of(&cl.grid),
            cl.grid.complete,
            cl.grid.filled_count(),
            0,
        ))
    })
    .unwrap();
    assert_eq!(seen.iter().filter(|s| s.0 == 5).count(), 1, "{seen:?}");
    // A slot a whole ring later takes the entry; the closed word still refuses slot 5.
    assert!(g.store(5 + 4, 0, 0, 0, 2, 50));
    assert!(!g.store(5, 0, 0, 0, 2, 50));
}

#[test]
fn the_oldest_closes_partial_past_max_open_and_complete_ones_first() {
    let mut c = Completer::new(&cfg(2, 1_000_000)).unwrap();
    let g = FakeGpu::new(c.layout());
    let mut seen = Seen::new();
    g.store(1, 0, 0, 0, 1, 10);
    g.store(2, 0, 0, 0, 1, 20);
    poll(&mut c, &[&g], &mut seen);
    // Slot 3 opens (three open: slot 1 closes partial) and slot 2 completes in the same poll.
    g.store(3, 0, 0, 0, 1, 30);
    g.fill(2, 0, 1, 40);
    g.fill(2, 1, 1, 41);
    poll(&mut c, &[&g], &mut seen);
    assert_eq!(
        seen,
        [(2, true, 84, 41)],
        "two open after 2 completed: none evicted"
    );
    g.store(4, 0, 0, 0, 1, 50);
    poll(&mut c, &[&g], &mut seen);
    assert_eq!(
        seen[1],
        (1, false, 1, 10),
        "three open: the oldest, 1, evicted"
    );
    let srcs: [&dyn GridSource; 1] = [&g];
    let mut rest = Seen::new();
    c.finish(&srcs, &mut |cl| {
        rest.push((
            tag_of(&cl.grid),
            cl.grid.complete,
            cl.grid.filled_count(),
            cl.last_ns,
        ))
    })
    .unwrap();
    assert_eq!(
        rest,
        [(3, false, 1, 30), (4, false, 1, 50)],
        "in opening order"
    );
}

#[test]
fn without_samples_a_slot_still_counts_per_eaxc() {
    let mut c = Completer::new(&cfg(2, 1_000_000)).unwrap();
    c.samples = false;
    let g = FakeGpu::new(c.layout());
    g.fill(2, 0, 7, 0);
    g.store(2, 1, 0, 0, 7, 0);
    let srcs: [&dyn GridSource; 1] = [&g];
    let mut got = Vec::new();
    c.finish(&srcs, &mut |cl| got.push(cl.grid)).unwrap();
    assert_eq!(got.len(), 1);
    assert!(!got[0].complete);
    assert_eq!((got[0].filled_for(0), got[0].filled_for(1)), (42, 1));
    assert_eq!(
        got[0].prb_i16(0, 0, 0),
        Some(&[0i16; 24][..]),
        "samples not read"
    );
}

#[test]
fn a_slot_times_out_on_the_frames_receive_times_not_the_host_clock() {
    let mut c = Completer::new(&cfg(8, 500)).unwrap();
    let g = FakeGpu::new(c.layout());
    let mut seen = Seen::new();
    let t0 = 1_000_000_000;
    g.store(9, 1, 3, 2, 1, t0);
    poll(&mut c, &[&g], &mut seen);
    // The host's clock moves on (a generator slower than radio time): nothing times out.
    std::thread::sleep(Duration::from_millis(2));
    poll(&mut c, &[&g], &mut seen);
    g.store(11, 0, 0, 0, 1, t0 + 400_000);
    poll(&mut c, &[&g], &mut seen);
    assert!(seen.is_empty(), "{seen:?}");
    // A frame received 501 us after the slot's first one: the slot times out.
    g.store(11, 0, 0, 1, 1, t0 + 501_000);
    poll(&mut c, &[&g], &mut seen);
    assert_eq!(seen, [(9, false, 1, t0)]);
    // Later packets of a closed slot are not delivered again.
    g.store(9, 1, 3, 1, 1, t0 + 502_000);
    poll(&mut c, &[&g], &mut seen);
    assert_eq!(seen.len(), 1);
}

#[test]
fn two_gpus_complete_a_slot_together_and_merge_their_cells() {
    let mut c = Completer::new(&cfg(4, 1_000_000)).unwrap();
    let (a, b) = (FakeGpu::new(c.layout()), FakeGpu::new(c.layout()));
    let mut seen = Seen::new();
    a.fill(12, 0, 5, 70);
    poll(&mut c, &[&a, &b], &mut seen);
    assert!(seen.is_empty(), "eAxC 9 not there yet");
    b.fill(12, 1, 6, 60);
    let srcs: [&dyn GridSource; 2] = [&a, &b];
    let mut got = Vec::new();
    c.poll(&srcs, &mut |cl| got.push(cl)).unwrap();
    assert_eq!(got.len(), 1);
    assert!(got[0].grid.complete);
    assert_eq!(got[0].last_ns, 70);
    assert_eq!(got[0].grid.prb_i16(0, 0, 0), Some(&[5i16; 24][..]));
    assert_eq!(got[0].grid.prb_i16(1, 0, 0), Some(&[6i16; 24][..]));
}

#[test]
fn an_entry_taken_by_a_later_slot_closes_the_earlier_with_what_is_left() {
    // Ring of 2 entries (max_open 1): slot 1 and slot 3 share entry 0.
    let mut c = Completer::new(&cfg(1, 1_000_000)).unwrap();
    assert_eq!(c.layout().ring, 2);
    let g = FakeGpu::new(c.layout());
    let mut seen = Seen::new();
    g.store(1, 0, 0, 0, 1, 0);
    g.store(1, 0, 0, 1, 1, 0);
    poll(&mut c, &[&g], &mut seen);
    g.store(3, 0, 0, 0, 2, 0); // entry 0 now slot 3's; PRB 1 still slot 1's
    poll(&mut c, &[&g], &mut seen);
    assert_eq!(seen, [(1, false, 1, 0)]);
}

#[test]
fn new_tags_open_in_frame_cycle_order_across_the_wrap() {
    // The last slot of the cycle (tag 5120 at 30 kHz) and the first of the next (tag 1)
    // appear in one poll: 5120 is the older.
    let mut c = Completer::new(&cfg(8, 1_000_000)).unwrap();
    let g = FakeGpu::new(c.layout());
    let mut seen = Seen::new();
    g.store(5119, 0, 0, 0, 1, 0);
    poll(&mut c, &[&g], &mut seen);
    g.store(1, 0, 0, 0, 1, 0);
    g.store(5120, 0, 0, 0, 1, 0);
    poll(&mut c, &[&g], &mut seen);
    let srcs: [&dyn GridSource; 1] = [&g];
    c.finish(&srcs, &mut |cl| seen.push((tag_of(&cl.grid), false, 0, 0)))
        .unwrap();
    let tags: Vec<u32> = seen.iter().map(|s| s.0).collect();
    assert_eq!(tags, [5119, 5120, 1]);
}

#[test]
fn a_config_without_eaxcs_has_no_completer() {
    let e = Completer::new(&FronthaulConfig::default()).unwrap_err();
    assert!(e.contains("fronthaul.eaxcs"), "{e}");
}

#[test]
fn the_stage_counts_gpu_slots_and_their_latency_and_keeps_them_over_the_counters() {
    use crate::FronthaulStage;
    let c0 = cfg(2, 1_000_000);
    let stage = FronthaulStage::from_config(&c0).unwrap();
    let mut c = Completer::new(&c0).unwrap();
    let g = FakeGpu::new(c.layout());
    g.fill(3, 0, 1, 10);
    g.fill(3, 1, 1, 10);
    g.store(4, 0, 0, 0, 1, 20);
    let srcs: [&dyn GridSource; 1] = [&g];
    let handed = Instant::now() - Duration::from_millis(2);
    c.finish(&srcs, &mut |cl| {
        stage.close_gpu_slot(&cl.grid, (cl.last_ns == 10).then_some(handed))
    })
    .unwrap();
    let got = stage.counters();
    assert_eq!((got.slots_complete, got.slots_partial), (1, 1));
    assert_eq!(got.slot_latency_count, 1, "the complete slot only");
    assert!(
        got.slot_latency_p50_ns >= 2_000_000,
        "{}",
        got.slot_latency_p50_ns
    );
    assert_eq!(got.per_eaxc[0].slots_complete, 1);
    assert_eq!(got.per_eaxc[1].slots_partial, 1);
    // The GPU's counters at the end replace the stage's, but for the slot counts.
    let mut gc = crate::FronthaulCounters {
        prbs: 99,
        ..Default::default()
    };
    gc.per_eaxc = got
        .per_eaxc
        .iter()
        .map(|e| crate::EaxcCounters {
            eaxc: e.eaxc,
            packets: 5,
            ..Default::default()
        })
        .collect();
    stage.absorb_gpu_counters(gc);
    let after = stage.counters();
    assert_eq!((after.prbs, after.per_eaxc[0].packets), (99, 5));
    assert_eq!((after.slots_complete, after.slots_partial), (1, 1));
    assert_eq!(after.per_eaxc[0].slots_complete, 1);
    assert_eq!(after.slot_latency_count, 1);
}

#[test]
fn the_cpu_stage_measures_each_complete_slot() {
    use crate::oran_gen::{build_uplane_frames, OranGenOptions};
    use crate::FronthaulStage;
    let o = OranGenOptions {
        carrier_prbs: 12,
        eaxcs: vec![1, 2],
        prbs_per_packet: 6,
        slots: 3,
        ..OranGenOptions::default()
    };
    let c0 = FronthaulConfig {
        carrier_prbs: o.carrier_prbs,
        numerology: o.numerology,
        eaxcs: o.eaxcs.clone(),
        comp: crate::config::CompConfig {
            method: o.comp_method,
            iq_width: o.iq_width,
            hdr: o.comp_hdr,
        },
        sink: SinkConfig::None,
        ..FronthaulConfig::default()
    };
    let stage = FronthaulStage::from_config(&c0).unwrap();
    let frames: Vec<_> = build_uplane_frames(&o).collect();
    // The last packet of the last slot withheld: two slots complete, one stays partial.
    for f in &frames[..frames.len() - 1] {
        let mut v = pipeline::verdict::Verdict::PASS;
        stage.process_untimed(&f.data, &pipeline::meta::PacketMeta::default(), &mut v);
    }
    stage.flush();
    let got = stage.counters();
    assert_eq!((got.slots_complete, got.slots_partial), (2, 1));
    assert_eq!(got.slot_latency_count, 2);
    assert!(got.slot_latency_p99_ns >= got.slot_latency_p50_ns);
}

#[test]
fn the_cpu_stage_refuses_the_packets_of_a_closed_slot() {
    use crate::oran_gen::{build_uplane_frames, OranGenOptions};
    use crate::{FnSink, FronthaulStage};
    use std::sync::{Arc, Mutex as StdMutex};
    let o = OranGenOptions {
        carrier_prbs: 12,
        eaxcs: vec![1, 2],
        prbs_per_packet: 6,
        slots: 3,
        ..OranGenOptions::default()
    };
    let c0 = FronthaulConfig {
        carrier_prbs: o.carrier_prbs,
        numerology: o.numerology,
        eaxcs: o.eaxcs.clone(),
        ..FronthaulConfig::default()
    };
    let seen: Arc<StdMutex<Vec<SlotGrid>>> = Arc::default();
    let s2 = seen.clone();
    let sink = FnSink(move |g: &SlotGrid| s2.lock().unwrap().push(g.clone()));
    let stage = FronthaulStage::with_sink(&c0, Box::new(sink)).unwrap();
    let frames: Vec<_> = build_uplane_frames(&o).collect();
    let run = |fs: &[crate::oran_gen::OranFrame], want: pipeline::verdict::Verdict| {
        for f in fs {
            let mut v = pipeline::verdict::Verdict::PASS;
            stage.process_untimed(&f.data, &pipeline::meta::PacketMeta::default(), &mut v);
            assert_eq!(v, want);
        }
    };
    run(&frames, pipeline::verdict::Verdict::PASS);
    let before = stage.counters();
    assert_eq!(before.slots_complete, 3);
    // The first slot again (56 packets: 14 symbols x 2 eAxCs x 2), its bytes changed so a
    // stored copy would show: every packet refused, nothing stored, no slot opened again.
    let per_slot = frames.len() / 3;
    let late: Vec<_> = frames[..per_slot]
        .iter()
        .map(|f| {
            let mut f = f.clone();
            let n = f.data.len();
            f.data[n - 1] ^= 0x55;
            f
        })
        .collect();
    // Refused frames are dropped, so the queue's totals account for them.
    let refused = pipeline::verdict::Verdict::drop(pipeline::verdict::DropReason::FronthaulReject);
    run(&late, refused);
    stage.flush();
    let got = stage.counters();
    assert_eq!((got.slots_complete, got.slots_partial), (3, 0));
    assert_eq!((got.prbs, got.duplicate_prbs), (before.prbs, 0));
    for (e, b) in got.per_eaxc.iter().zip(&before.per_eaxc) {
        assert_eq!(e.slot_closed, per_slot as u64 / 2, "eAxC {}", e.eaxc);
        assert_eq!(e.slot_closed_prbs, 14 * 12, "eAxC {}", e.eaxc);
        assert_eq!(e.packets, b.packets + per_slot as u64 / 2);
        assert_eq!(e.prbs, b.prbs);
        // Their sequence ids were judged as any packet's: behind the stream.
        assert_eq!(e.seq_out_of_order, per_slot as u64 / 2);
    }
    assert_eq!(seen.lock().unwrap().len(), 3, "delivered once each");
    assert!(got.summary().contains("56 packets after their slot closed"));
}

/// GPU counters as the completion poll reads them, set by the test between polls.
#[derive(Default)]
struct FakeCounters {
    block: RefCell<[u64; 8]>,
    /// Per GPU: `fronthaul.eaxc_counters`.
    eaxc: RefCell<Vec<Vec<u8>>>,
}

impl crate::gpu::CounterSource for FakeCounters {
    fn stage_block(&self, k: usize) -> [u64; 8] {
        assert_eq!(k, 1, "the fronthaul stage's position");
        *self.block.borrow()
    }

    fn stage_buffers(&self, _k: usize, i: usize) -> anyhow::Result<Vec<Vec<u8>>> {
        use crate::gpu::{BUF_EAXC_COUNTERS, BUF_STATS, STATS};
        match i {
            BUF_EAXC_COUNTERS => Ok(self.eaxc.borrow().clone()),
            BUF_STATS => Ok(vec![vec![0; STATS * 8]]),
            _ => anyhow::bail!("buffer {i} not read for counters"),
        }
    }
}

#[test]
fn gpu_counters_reach_the_summary_and_metrics_while_the_run_goes() {
    use crate::gpu::{CTR_PRBS, CTR_UPLANE, EAXC_COUNTER_BYTES};
    use crate::FronthaulStage;
    use pipeline::stage::Stage;
    let c0 = cfg(2, 1_000_000);
    let p = pipeline::stage::Pipeline::new(vec![
        Stage::Parse,
        FronthaulStage::from_config(&c0).unwrap().into_stage(),
        Stage::Count,
    ]);
    let mut live = LiveStages::new(&p).unwrap();
    let t0 = Instant::now();
    assert!(live.counters_due(t0), "the first poll reads them");
    assert!(!live.counters_due(t0 + COUNTERS_EVERY / 2));
    assert!(live.counters_due(t0 + COUNTERS_EVERY));
    let src = FakeCounters::default();
    // Two GPUs, eAxC index 1 (id 9): packets (word 0) and early (word 5) on each.
    let per_gpu = |packets: u64, early: u64| {
        let mut b = vec![0u8; 2 * EAXC_COUNTER_BYTES];
        b[EAXC_COUNTER_BYTES..EAXC_COUNTER_BYTES + 8].copy_from_slice(&packets.to_le_bytes());
        b[EAXC_COUNTER_BYTES + 40..EAXC_COUNTER_BYTES + 48].copy_from_slice(&early.to_le_bytes());
        b
    };
    let metric = |fam: &str, want: &str| -> u64 {
        crate::report::metric_families(&p)
            .into_iter()
            .find(|f| f.0 == fam)
            .map_or(0, |f| {
                f.1.iter()
                    .filter(|(l, _)| l.iter().any(|(k, v)| *k == "eaxc" && v == "9"))
                    .filter(|(l, _)| want.is_empty() || l.iter().any(|(_, v)| v == want))
                    .map(|(_, v)| *v)
                    .sum()
            })
    };
    for (round, packets) in [(1u64, 3u64), (2, 10)] {
        src.block.borrow_mut()[CTR_UPLANE] = 2 * packets;
        src.block.borrow_mut()[CTR_PRBS] = 12 * packets;
        *src.eaxc.borrow_mut() = vec![per_gpu(packets, round), per_gpu(packets, 0)];
        live.absorb_counters(&p, &src).unwrap();
        let f = FronthaulStage::of(&p.stages[1]).unwrap();
        let c = f.counters();
        assert_eq!(
            (c.uplane, c.prbs),
            (2 * packets, 12 * packets),
            "round {round}"
        );
        assert_eq!(c.per_eaxc[1].packets, 2 * packets, "summed over the GPUs");
        assert_eq!(c.per_eaxc[1].early, round);
        let lines = crate::report::summaries(&p)[0].lines();
        let want = format!("eAxC 9: {} packets", 2 * packets);
        assert!(lines.iter().any(|l| l.starts_with(&want)), "{lines:?}");
        assert_eq!(metric("pktwarp_fronthaul_packets_total", ""), 2 * packets);
        assert_eq!(metric("pktwarp_fronthaul_arrivals_total", "early"), round);
    }
}

#[test]
fn a_lapped_sequence_log_is_reported_with_its_count() {
    assert_eq!(super::lost_warning(1, 0), None);
    let w = super::lost_warning(1, 11).expect("a warning");
    assert!(w.contains("position 1") && w.contains("11 packets"), "{w}");
}

#[test]
fn a_complete_slot_without_a_sink_closes_without_reading_its_entry_back() {
    let mut c = Completer::new(&cfg(4, 1_000_000)).unwrap();
    c.samples = false;
    let g = FakeGpu::new(c.layout());
    g.fill(3, 0, 1, 10);
    g.fill(3, 1, 2, 20);
    let srcs: [&dyn GridSource; 1] = [&g];
    let mut closed = Vec::new();
    assert_eq!(c.poll(&srcs, &mut |cl| closed.push(cl)).unwrap(), 1);
    assert!(closed[0].grid.complete);
    assert_eq!(closed[0].last_ns, 20);
    assert_eq!(*g.reads.borrow(), 0, "complete: no read-back");
    // A partial one (evicted at the end) is still read back for its marks.
    g.fill(4, 0, 1, 30);
    assert_eq!(c.poll(&srcs, &mut |cl| closed.push(cl)).unwrap(), 0);
    assert_eq!(c.finish(&srcs, &mut |cl| closed.push(cl)).unwrap(), 1);
    assert!(!closed[1].grid.complete);
    assert_eq!(*g.reads.borrow(), 1, "partial: its marks read back");
}
