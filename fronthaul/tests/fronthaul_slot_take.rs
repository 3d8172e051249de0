//! What the host's completion poll can read while the GPU kernel takes a ring entry for a new
//! slot. The poll reads the slot states while the kernel runs, so it may look between the
//! kernel's writes of one entry; a sequential host run never shows that instant, so the CUDA
//! stage's `pw_fh_slot_add` is compiled here with its compare-and-swap watched
//! (gpu-kernels/host/fronthaul_slot_host.cpp): the entry as another reader sees it right when
//! the new slot's tag goes in. Its receive time must already be the new slot's: the poll takes
//! it as the slot's first receive time, and the previous occupant's (2 x max_open_slots slots
//! older) timed the slot out at once, closed partial and out of order, its later packets
//! refused (10 of 2000 slots of configs/fronthaul.yaml on the GPU executor).

use pktwarp_fronthaul::gpu::{entry_bytes, Layout};
use pktwarp_fronthaul::live::{Closed, Completer, GridSource};
use pktwarp_fronthaul::FronthaulConfig;

extern "C" {
    fn pw_host_fh_slot_add_watched(
        state: *mut u64,
        mu: u32,
        tag: u32,
        n: u32,
        ts: u64,
        seen: *mut u64,
    ) -> u32;
}

/// One `pw_fh_slot_add` on the entry `state` (tag_prbs, last_ns): how many swaps changed its
/// tag, and the entry as read right after the last of them.
fn add_watched(state: &mut [u64; 2], tag: u32, n: u32, ts: u64) -> (u32, [u64; 2]) {
    let mut seen = [0u64; 2];
    // SAFETY: FFI into the host build; `state` and `seen` are two u64 words each, alive and
    // exclusively borrowed for the call, which reads and writes only those.
    let takes = unsafe {
        pw_host_fh_slot_add_watched(state.as_mut_ptr(), 1, tag, n, ts, seen.as_mut_ptr())
    };
    (takes, seen)
}

/// 30 kHz slots of 0.5 ms; slot `s`'s symbol `sym` received at its radio time.
fn at(slot: u64, sym: u64) -> u64 {
    slot * 500_000 + sym * 500_000 / 14
}

fn word(tag: u32, prbs: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(prbs)
}

#[test]
fn a_reader_at_a_take_sees_the_new_slots_receive_time() {
    // Slot 1363 (tag 1364) takes the entry from slot 1347 (tag 1348), 16 slots older.
    let old_ns = at(1347, 13);
    let mut st = [word(1348, 112), old_ns];
    let (takes, seen) = add_watched(&mut st, 1364, 2, at(1363, 0));
    assert_eq!(takes, 1);
    assert_eq!(seen[0], word(1364, 2), "the take's own word");
    assert_eq!(
        seen[1],
        at(1363, 0),
        "a reader that sees the new tag reads the previous occupant's time ({old_ns}) as the new slot's"
    );
    assert_eq!(st, [word(1364, 2), at(1363, 0)]);
    // Later frames of the slot: no take, the time is the latest.
    let (takes, _) = add_watched(&mut st, 1364, 2, at(1363, 5));
    assert_eq!(takes, 0);
    assert_eq!(st, [word(1364, 4), at(1363, 5)]);
    // A frame of the slot the entry moved past is not counted, its time not kept.
    let (takes, _) = add_watched(&mut st, 1348, 2, at(1347, 13));
    assert_eq!(takes, 0);
    assert_eq!(st, [word(1364, 4), at(1363, 5)]);
}

/// Slot states as a GPU's buffer holds them; an entry's cells are all its tag's (the counts
/// decide complete here, the cells only what a closed slot holds).
struct States {
    l: Layout,
    words: Vec<u64>,
}

impl GridSource for States {
    fn slot_states(&self) -> anyhow::Result<Vec<u8>> {
        Ok(self.words.iter().flat_map(|w| w.to_le_bytes()).collect())
    }

    fn entry(&self, r: usize, samples: bool) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
        let (gb, mb) = entry_bytes(&self.l);
        let tag = (self.words[2 * r] >> 32) as u32;
        let marks = tag.to_le_bytes().repeat(mb / 4);
        Ok((vec![0; if samples { gb } else { 0 }], marks))
    }

    fn mark_closed(&self, _r: usize, _tag: u32) -> anyhow::Result<()> {
        Ok(())
    }
}

#[test]
fn a_poll_at_the_instant_of_a_take_does_not_time_the_new_slot_out() {
    // configs/fronthaul.yaml's slot rule (8 open slots: a ring of 16, a 4 ms timeout) on a
    // small carrier.
    let cfg = FronthaulConfig {
        carrier_prbs: 4,
        numerology: 1,
        eaxcs: vec![0, 1],
        max_open_slots: 8,
        slot_timeout_us: 4000,
        ..FronthaulConfig::default()
    };
    let l = Layout::new(&cfg).unwrap();
    assert_eq!(l.ring, 16);
    let mut src = States {
        l: l.clone(),
        words: vec![0; 2 * l.ring],
    };
    // Slot 1362 (tag 1363, entry 2) half there: one eAxC's frames ran ahead of the other's.
    src.words[4] = word(1363, 56);
    src.words[5] = at(1362, 13);
    // Slot 1363 (tag 1364) takes entry 3 from slot 1347, closed long ago; the poll looks at
    // the instant of the take.
    let mut st = [word(1348, 112), at(1347, 13)];
    let (takes, seen) = add_watched(&mut st, 1364, 2, at(1363, 0));
    assert_eq!(takes, 1);
    src.words[6] = seen[0];
    src.words[7] = seen[1];
    let mut c = Completer::new(&cfg).unwrap();
    let mut closed: Vec<(u32, bool)> = Vec::new();
    let mut poll = |c: &mut Completer, src: &States| {
        c.poll(&[src], &mut |cl: Closed| {
            closed.push((cl.grid.key.number(1), cl.grid.complete))
        })
        .unwrap();
        std::mem::take(&mut closed)
    };
    let first = poll(&mut c, &src);
    assert_eq!(
        first,
        vec![],
        "slot 1363 closed (timed out) as it opened, before slot 1362"
    );
    assert_eq!(c.open_slots(), 2);
    // Both slots' frames all in: they close complete, in order.
    src.words[4] = word(1363, 112);
    src.words[6] = word(1364, 112);
    src.words[7] = at(1363, 13);
    assert_eq!(poll(&mut c, &src), vec![(1362, true), (1363, true)]);
}
