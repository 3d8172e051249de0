//! The generator's frame pool: each distinct frame (one header of a fixed flow set or trace,
//! times one frame size) is built once, on first use, and every later frame of that kind is
//! one copy from the pool with the per-frame field written in place (the IPv4 identification
//! and header checksum, or the IPv6 flow label). Random headers drawn afresh per frame and
//! malformed frames are built per frame instead. A port split by queue hands the pool over
//! whole ([`FramePool::store`]) so a receiver that copies it once into memory the GPU reads
//! then takes descriptors into it (by reference: every frame as built, identification 0).

use std::sync::Arc;

use super::frame::{write_frame, FrameSpec};
use crate::burst::{Burst, FrameDesc};
use crate::wire::checksum;

/// Most frame bytes the pool holds; frames past it are built per frame.
pub const POOL_MAX_BYTES: usize = 256 << 20;
/// Most distinct frames the pool indexes (headers x sizes); a larger set is built per frame.
pub const POOL_MAX_ENTRIES: usize = 1 << 20;

const UNBUILT: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    pub(super) offset: usize,
    pub(super) len: u32,
    /// Offset of the IP header in the frame.
    l3: u16,
    v6: bool,
}

/// Built frames by key (`header index * sizes + size index`).
#[derive(Debug)]
pub(super) struct FramePool {
    index: Vec<u32>,
    entries: Vec<Entry>,
    /// Shared once the pool is complete ([`FramePool::store`]); written only while it is
    /// this pool's alone.
    data: Arc<Vec<u8>>,
}

impl FramePool {
    /// A pool for `keys` distinct frames, or `None` when there are too many to index.
    pub(super) fn new(keys: usize) -> Option<FramePool> {
        if keys == 0 || keys > POOL_MAX_ENTRIES {
            return None;
        }
        Some(FramePool {
            index: vec![UNBUILT; keys],
            entries: Vec::new(),
            data: Arc::default(),
        })
    }

    /// Appends the frame `spec` (whose key is `key`) to `burst` from the pool, building it on
    /// first use; false when the pool cannot hold it (the caller builds it).
    pub(super) fn push(
        &mut self,
        key: usize,
        spec: &FrameSpec,
        burst: &mut Burst,
        desc: FrameDesc,
    ) -> bool {
        match self.entry(key, spec) {
            Some(e) => {
                self.push_entry(e, spec.ip_id, burst, desc, 0);
                true
            }
            None => false,
        }
    }

    /// The frame of `key` (built from `spec` on first use); `None` when the pool cannot hold
    /// it.
    pub(super) fn entry(&mut self, key: usize, spec: &FrameSpec) -> Option<Entry> {
        let &slot = self.index.get(key)?;
        if slot == UNBUILT {
            self.build(key, spec)
        } else {
            Some(self.entries[slot as usize])
        }
    }

    /// The bytes of a built frame (identification 0).
    pub(super) fn bytes(&self, e: Entry) -> &[u8] {
        &self.data[e.offset..e.offset + e.len as usize]
    }

    /// The built frames, each at its entry's `offset` with identification 0, shared.
    pub(super) fn store(&self) -> Arc<Vec<u8>> {
        Arc::clone(&self.data)
    }

    /// Keys the pool indexes.
    pub(super) fn keys(&self) -> usize {
        self.index.len()
    }

    /// Appends a copy of the built frame `e` with identification `ip_id` to `burst`, `room`
    /// spare bytes after it.
    pub(super) fn push_entry(
        &self,
        e: Entry,
        ip_id: u16,
        burst: &mut Burst,
        desc: FrameDesc,
        room: usize,
    ) {
        let at = burst.data.len();
        burst.push_with_room(
            self.bytes(e),
            FrameDesc {
                len: e.len,
                wire_len: e.len,
                ..desc
            },
            room,
        );
        stamp(&mut burst.data[at..at + e.len as usize], e, ip_id);
    }

    fn build(&mut self, key: usize, spec: &FrameSpec) -> Option<Entry> {
        // A copy only if the store was handed out (it never is before the pool is complete).
        let data = Arc::make_mut(&mut self.data);
        let offset = data.len();
        let base = FrameSpec { ip_id: 0, ..*spec };
        let (cap, _) = write_frame(data, &base);
        if data.len() > POOL_MAX_BYTES || self.entries.len() >= UNBUILT as usize {
            data.truncate(offset);
            return None;
        }
        let v6 = spec.src_ip.is_ipv6() || spec.dst_ip.is_ipv6();
        let e = Entry {
            offset,
            len: cap as u32,
            l3: if spec.vlan.is_some() { 18 } else { 14 },
            v6,
        };
        self.index[key] = self.entries.len() as u32;
        self.entries.push(e);
        Some(e)
    }
}

/// Writes the per-frame identification into a copy of a pooled frame built with 0.
fn stamp(f: &mut [u8], e: Entry, ip_id: u16) {
    let l3 = usize::from(e.l3);
    let id = ip_id.to_be_bytes();
    if e.v6 {
        // The flow label's low 16 bits; no IPv6 header checksum, and the L4 checksums do not
        // cover it.
        if let Some(b) = f.get_mut(l3 + 2..l3 + 4) {
            b.copy_from_slice(&id);
        }
        return;
    }
    let Some(h) = f.get_mut(l3..l3 + 20) else {
        return;
    };
    h[4..6].copy_from_slice(&id);
    h[10..12].copy_from_slice(&[0, 0]);
    let c = checksum::finish(checksum::sum(0, h));
    h[10..12].copy_from_slice(&c.to_be_bytes());
}
