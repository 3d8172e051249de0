//! Per-eAxC sequence tracking and the Ta4 timing window.

use super::config::Ta4Window;
use super::decode::SYMBOLS_PER_SLOT;
use pipeline::wire::oran::RadioRepr;

/// What one packet's 8-bit sequence id says about the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqEvent {
    /// The expected id (or the first packet).
    InOrder,
    /// Ahead of the expected id: this many packets are missing (so far).
    Gap(u8),
    /// The same id as the last packet.
    Duplicate,
    /// Behind the expected id (a late packet of an earlier gap, or reordering).
    OutOfOrder,
}

/// The sequence state of one eAxC.
#[derive(Clone, Copy, Debug, Default)]
pub struct SeqTracker {
    next: Option<u8>,
}

impl SeqTracker {
    /// Ids within 128 ahead of the expected one are gaps, the rest behind it: the window
    /// halves the 8-bit space, as RTP-style trackers do.
    pub fn observe(&mut self, seq: u8) -> SeqEvent {
        let Some(next) = self.next else {
            self.next = Some(seq.wrapping_add(1));
            return SeqEvent::InOrder;
        };
        if seq == next {
            self.next = Some(next.wrapping_add(1));
            return SeqEvent::InOrder;
        }
        if seq == next.wrapping_sub(1) {
            return SeqEvent::Duplicate;
        }
        let ahead = seq.wrapping_sub(next);
        if ahead < 128 {
            self.next = Some(seq.wrapping_add(1));
            SeqEvent::Gap(ahead)
        } else {
            SeqEvent::OutOfOrder
        }
    }
}

/// A packet's arrival against its symbol's Ta4 window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    Early,
    OnTime,
    Late,
}

/// Frames in the frameId cycle (8 bits) and the cycle's length.
const FRAMES: i64 = 256;
const FRAME_NS: i64 = 10_000_000;
pub const CYCLE_NS: i64 = FRAMES * FRAME_NS;

/// Radio time: where each (frameId, subframeId, slotId, symbolId) starts.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub numerology: u8,
    pub ta4: Ta4Window,
    /// Start of frame 0 in ns since the Unix epoch, modulo the 2.56 s cycle.
    pub offset_ns: u64,
}

impl Timing {
    pub fn slot_ns(&self) -> i64 {
        1_000_000 >> self.numerology.min(6)
    }

    /// Offset of the symbol's start in the 2.56 s cycle (symbols of equal length: the longer
    /// first cyclic prefix of each half subframe is ignored, 0.5 us at 30 kHz).
    pub fn symbol_in_cycle_ns(&self, r: &RadioRepr) -> i64 {
        let slot = self.slot_ns();
        i64::from(r.frame_id) * FRAME_NS
            + i64::from(r.subframe_id) * 1_000_000
            + i64::from(r.slot_id) * slot
            + i64::from(r.symbol_id) * slot / i64::from(SYMBOLS_PER_SLOT)
    }

    /// Arrival minus the start of the symbol's occurrence nearest to the arrival, in ns.
    pub fn delay_ns(&self, r: &RadioRepr, arrival_ns: u64) -> i64 {
        let t = (arrival_ns.wrapping_sub(self.offset_ns) % CYCLE_NS as u64) as i64;
        let mut d = t - self.symbol_in_cycle_ns(r);
        if d > CYCLE_NS / 2 {
            d -= CYCLE_NS;
        } else if d < -CYCLE_NS / 2 {
            d += CYCLE_NS;
        }
        d
    }

    pub fn classify(&self, r: &RadioRepr, arrival_ns: u64) -> Arrival {
        let d = self.delay_ns(r, arrival_ns);
        if d < self.ta4.min_ns {
            Arrival::Early
        } else if d > self.ta4.max_ns {
            Arrival::Late
        } else {
            Arrival::OnTime
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_events() {
        let mut t = SeqTracker::default();
        assert_eq!(t.observe(250), SeqEvent::InOrder);
        assert_eq!(t.observe(251), SeqEvent::InOrder);
        assert_eq!(t.observe(251), SeqEvent::Duplicate);
        assert_eq!(t.observe(1), SeqEvent::Gap(5)); // 252..=255 and 0 missing
        assert_eq!(t.observe(255), SeqEvent::OutOfOrder);
        assert_eq!(t.observe(2), SeqEvent::InOrder);
    }

    #[test]
    fn ta4_window_by_numerology() {
        let t = Timing {
            numerology: 1,
            ta4: Ta4Window {
                min_ns: 50_000,
                max_ns: 331_000,
            },
            offset_ns: 0,
        };
        let r = RadioRepr {
            frame_id: 2,
            subframe_id: 3,
            slot_id: 1,
            symbol_id: 7,
            ..RadioRepr::default()
        };
        // frame 2 = 20 ms, subframe 3 = 3 ms, slot 1 = 0.5 ms, symbol 7 = 0.25 ms.
        let start = 23_750_000u64;
        assert_eq!(t.symbol_in_cycle_ns(&r), start as i64);
        let cycle = CYCLE_NS as u64;
        let base = 1_795_961_014 * 1_000_000_000 / cycle * cycle;
        assert_eq!(t.classify(&r, base + start + 10_000), Arrival::Early);
        assert_eq!(t.classify(&r, base + start + 100_000), Arrival::OnTime);
        assert_eq!(t.classify(&r, base + start + 400_000), Arrival::Late);
        // Before the symbol (the previous cycle's end is nearer): early, negative delay.
        assert_eq!(t.delay_ns(&r, base + start - 5_000), -5_000);
        // Across the cycle boundary: frame 255's last symbol, arrival just after the wrap.
        let r = RadioRepr {
            frame_id: 255,
            subframe_id: 9,
            slot_id: 1,
            symbol_id: 13,
            ..RadioRepr::default()
        };
        let d = t.delay_ns(&r, base + cycle + 10_000);
        assert_eq!(d, 10_000 + 500_000 - 500_000 * 13 / 14);
        let t0 = Timing { numerology: 0, ..t };
        assert_eq!(t0.slot_ns(), 1_000_000);
    }
}
