//! The host's side of the ended-flow ring the CUDA flow table writes (`pw_flow_ring` of
//! cuda/flow.cuh): the flows that end inside a frame's table visit on the GPU (aged out in its
//! bucket, evicted for a new flow, reopened by a SYN), which the CPU table keeps in its own list
//! ([`crate::FlowTable::take_ended`]). Flow export on the GPU executor drains it
//! (docs/flow-export-gpu.md).
//!
//! Layout: a 64-byte header (head: records reserved so far; tail: records the host has taken,
//! written by the host; lost: records that found the ring full; cap: slots), then `cap` u64
//! stamps (slot i's is its record's sequence number + 1 once the record is written: the GPU
//! writes the record, then the stamp), then `cap` records (the entry as it was, its `reserved`
//! the cause). Sequence number s lives in slot s % cap.

use crate::table::{Ended, FlowEntry, FlowRecord, ENTRY_SIZE};

/// Bytes of the header.
pub const HEADER_BYTES: usize = 64;
/// Where the host writes the records it has taken (u64) in the header.
pub const TAIL_AT: usize = 8;

/// `pw_flow_ring`'s header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingHeader {
    pub head: u64,
    pub tail: u64,
    pub lost: u64,
    pub cap: u32,
}

/// Bytes of a ring of `cap` slots.
pub fn ring_bytes(cap: u32) -> usize {
    HEADER_BYTES + cap as usize * (8 + ENTRY_SIZE)
}

/// An empty ring of `cap` slots, as the device holds it at start.
pub fn new_ring(cap: u32) -> Vec<u8> {
    let mut b = vec![0u8; ring_bytes(cap)];
    b[24..28].copy_from_slice(&cap.to_le_bytes());
    b
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let w: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(w))
}

/// The header of a ring image (at least [`HEADER_BYTES`]); `None` when too short.
pub fn header(b: &[u8]) -> Option<RingHeader> {
    let cap: [u8; 4] = b.get(24..28)?.try_into().ok()?;
    Some(RingHeader {
        head: u64_at(b, 0)?,
        tail: u64_at(b, 8)?,
        lost: u64_at(b, 16)?,
        cap: u32::from_le_bytes(cap),
    })
}

/// Where sequence number `seq`'s stamp and record are in a ring of `cap` slots.
pub fn slot_offsets(cap: u32, seq: u64) -> (usize, usize) {
    let slot = (seq % u64::from(cap.max(1))) as usize;
    let stamp = HEADER_BYTES + 8 * slot;
    let record = HEADER_BYTES + 8 * cap as usize + ENTRY_SIZE * slot;
    (stamp, record)
}

/// One record's bytes ([`ENTRY_SIZE`]) as the flow's record and why it ended; `None` for bytes
/// that are no record (a short slice, an unknown cause).
pub fn decode(rec: &[u8]) -> Option<(FlowRecord, Ended)> {
    if rec.len() != ENTRY_SIZE {
        return None;
    }
    let mut e = FlowEntry::default();
    crate::table::entry_bytes_mut(std::slice::from_mut(&mut e)).copy_from_slice(rec);
    let why = match e.reserved {
        1 => Ended::Expired,
        2 => Ended::Evicted,
        3 => Ended::Reopened,
        _ => return None,
    };
    e.reserved = 0;
    Some((FlowRecord::of(&e), why))
}

/// A record's bytes as the device writes them: the entry, its `reserved` the cause.
pub fn encode(e: &FlowEntry, why: Ended) -> Vec<u8> {
    let mut e = *e;
    e.reserved = match why {
        Ended::Expired => 1,
        Ended::Evicted => 2,
        Ended::Reopened => 3,
    };
    crate::table::entry_bytes(std::slice::from_ref(&e)).to_vec()
}

/// Takes the written records of a whole ring image from its tail on, in sequence order, up to
/// the first slot not yet stamped, and moves the image's tail past them (what the host writes
/// back to the device). A record that does not decode ends the drain with an error naming its
/// sequence number (its slot is left for the next drain).
pub fn drain(image: &mut [u8], out: &mut Vec<(FlowRecord, Ended)>) -> Result<u64, String> {
    let h = header(image).ok_or("a flow ring shorter than its header")?;
    if image.len() < ring_bytes(h.cap) {
        return Err(format!(
            "a flow ring of {} slots needs {} bytes, got {}",
            h.cap,
            ring_bytes(h.cap),
            image.len()
        ));
    }
    let mut tail = h.tail;
    let mut result = Ok(0);
    while tail < h.head {
        let (stamp, record) = slot_offsets(h.cap, tail);
        if u64_at(image, stamp) != Some(tail + 1) {
            break;
        }
        match decode(&image[record..record + ENTRY_SIZE]) {
            Some(r) => out.push(r),
            None => {
                result = Err(format!("flow ring record {tail}: not a flow record"));
                break;
            }
        }
        tail += 1;
    }
    image[TAIL_AT..TAIL_AT + 8].copy_from_slice(&tail.to_le_bytes());
    result.map(|_: u64| tail - h.tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_or_foreign_image_is_an_error_not_a_panic() {
        let mut out = Vec::new();
        assert!(drain(&mut [0u8; 10], &mut out).is_err());
        let mut r = new_ring(4);
        r.truncate(100);
        assert!(drain(&mut r, &mut out).unwrap_err().contains("4 slots"));
        // A stamped record with no known cause.
        let mut r = new_ring(2);
        r[0..8].copy_from_slice(&1u64.to_le_bytes());
        let (stamp, _) = slot_offsets(2, 0);
        r[stamp..stamp + 8].copy_from_slice(&1u64.to_le_bytes());
        assert!(drain(&mut r, &mut out).unwrap_err().contains("record 0"));
        assert!(out.is_empty());
        assert_eq!(decode(&[0u8; 3]), None);
    }

    #[test]
    fn an_unstamped_slot_waits_for_the_next_drain() {
        let mut r = new_ring(2);
        r[0..8].copy_from_slice(&1u64.to_le_bytes()); // reserved, not yet written
        let mut out = Vec::new();
        assert_eq!(drain(&mut r, &mut out), Ok(0));
        assert_eq!(header(&r).map(|h| h.tail), Some(0));
    }
}
