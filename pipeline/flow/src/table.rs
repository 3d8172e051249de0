//! The flow table: fixed capacity, one flat array of [`FlowEntry`] in buckets of
//! [`BUCKET_ENTRIES`], aged on the frames' receive times, with Linux-style early drop when a
//! bucket is full. The semantics are docs/flow-table.md's; `gpu-kernels/cuda/flow.cuh` implements
//! the same on the same bytes (`pw_flow_entry`, `pw_flow_table`, `pw_flow_counters`), and the
//! differential tests hold the two equal.

use pktwarp_core::meta::PacketMeta;

use crate::config::{tclass, FlowConfig, FlowError, Timeouts};
use crate::key::{self, classify, FlowKey, Kind, NoFlow, Packet};
use crate::tcp::{self, st};
use crate::window;

mod image;

/// Entries per bucket: a bucket is one 1 KiB run of the array.
pub const BUCKET_ENTRIES: usize = 8;
/// The largest table (entries): bucket indices stay in a u32 and the table under 256 GiB.
pub const MAX_ENTRIES: u64 = 1 << 31;
/// Size of [`FlowEntry`] in bytes (`PW_FLOW_ENTRY_SIZE`).
pub const ENTRY_SIZE: usize = 128;

/// One direction's TCP sequence-window state (`strict`), Linux's `ip_ct_tcp_state` reduced.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpWindow {
    /// Highest sequence number + length sent.
    pub end: u32,
    /// Highest acknowledgement + window the other side advertised.
    pub maxend: u32,
    /// Largest window sent (scaled), at least 1 once the direction was seen.
    pub maxwin: u32,
    /// Window scale from the SYN's option (0..=14).
    pub scale: u8,
    /// `window::WF_*`.
    pub flags: u8,
    pub reserved: u16,
}

/// An entry type whose bytes a CUDA copy of its table holds as they are.
///
/// # Safety
/// The type is `repr(C)` and made of integers with no padding (its layout test pins every
/// field's offset contiguous), so every byte of it is initialised.
pub(crate) unsafe trait PlainEntry: Sized {}

// SAFETY: FlowEntry is repr(C), ENTRY_SIZE bytes of integers with no padding (pinned by
// tests/layout.rs).
unsafe impl PlainEntry for FlowEntry {}

/// A table's entry array as bytes.
pub(crate) fn entry_bytes<T: PlainEntry>(entries: &[T]) -> &[u8] {
    // SAFETY: PlainEntry types have no padding, so every byte is initialised; the slice covers
    // exactly the entries' memory (size_of_val) and borrows them.
    unsafe {
        std::slice::from_raw_parts(
            entries.as_ptr() as *const u8,
            std::mem::size_of_val(entries),
        )
    }
}

/// A table's entry array as bytes to write (a CUDA copy's bytes read back).
pub(crate) fn entry_bytes_mut<T: PlainEntry>(entries: &mut [T]) -> &mut [u8] {
    // SAFETY: PlainEntry types are integers with no padding, so every byte pattern is a valid
    // value; the slice covers exactly the entries' memory and borrows them exclusively.
    unsafe {
        std::slice::from_raw_parts_mut(
            entries.as_mut_ptr() as *mut u8,
            std::mem::size_of_val(entries),
        )
    }
}

/// One flow (`pw_flow_entry`, 128 bytes). Index 0 of the per-direction arrays is the original
/// direction (the one of the frame that created the flow), 1 the reply. What a bucket visit reads
/// of every entry (key, state, flags, last seen) is in its first 64 bytes: one cache line.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowEntry {
    pub key: FlowKey,
    /// TCP: a [`tcp::st`] state; 0 for other protocols.
    pub state: u8,
    /// [`ef`] bits.
    pub flags: u8,
    pub reserved: u16,
    /// OR of the TCP flags seen.
    pub tcp_flags: [u16; 2],
    pub last_seen_ns: u64,
    pub first_seen_ns: u64,
    pub packets: [u64; 2],
    /// IP bytes (IPv4 total length, IPv6 40 + payload length).
    pub bytes: [u64; 2],
    pub window: [TcpWindow; 2],
}

/// [`FlowEntry::flags`] bits (`PW_FLOW_EF_*`).
pub mod ef {
    /// The slot holds a flow.
    pub const OCCUPIED: u8 = 0x01;
    /// The original direction goes from key endpoint a to b.
    pub const ORIG_FROM_A: u8 = 0x02;
    /// A frame in the reply direction was seen.
    pub const SEEN_REPLY: u8 = 0x04;
    /// Never evicted early (TCP: established after a reply; UDP: traffic after a reply).
    pub const ASSURED: u8 = 0x08;
}

/// Table counters (`pw_flow_counters`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowCounters {
    /// Flows created (a TCP connection reopened in TIME_WAIT / CLOSE counts again).
    pub created: u64,
    /// Entries reclaimed because they aged out (visited buckets and sweeps).
    pub expired: u64,
    /// Unassured entries evicted to make room for a new flow.
    pub early_evicted: u64,
    /// New flows refused: the bucket was full of assured flows.
    pub table_full: u64,
    /// Frames with no flow (non-IP, fragments, ICMP other than echo).
    pub untracked: u64,
    /// Invalid frames (malformed, or refused by the state machine or the window check).
    pub invalid: u64,
}

/// The user-facing connection state of a frame (`PW_CT_*`), what an ACL `ct:` match tests.
pub mod ct {
    /// No flow: untracked frame or table full.
    pub const UNTRACKED: u8 = 0;
    /// No reply seen yet.
    pub const NEW: u8 = 1;
    /// A reply was seen (this frame may be it).
    pub const ESTABLISHED: u8 = 2;
    /// An ICMP / ICMPv6 error about a tracked flow.
    pub const RELATED: u8 = 3;
    pub const INVALID: u8 = 4;
    /// TCP FIN_WAIT, CLOSE_WAIT, LAST_ACK.
    pub const CLOSING: u8 = 5;
    /// TCP TIME_WAIT, CLOSE.
    pub const CLOSED: u8 = 6;

    /// The names, by number: the ACL's `ct:` match reads the same list.
    pub const NAMES: [&str; 7] = flow_rules::acl::ct::NAMES;
}

/// What the table did with a frame (`PW_FLOW_*`).
pub mod outcome {
    pub const TRACKED: u8 = 0;
    pub const UNTRACKED: u8 = 1;
    pub const TABLE_FULL: u8 = 2;
    pub const INVALID: u8 = 3;
}

/// A frame's result (`pw_flow_result`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowResult {
    /// [`ct`] state.
    pub ct_state: u8,
    /// 0 original, 1 reply (0 without a flow).
    pub dir: u8,
    /// [`outcome`].
    pub outcome: u8,
    pub reserved: u8,
}

impl FlowResult {
    /// The frame's direction as the metadata carries it (`PacketMeta::ct_dir`): 1 from the
    /// flow's originator, 2 from the other side, 0 when the table did not track the frame.
    pub const fn ct_dir(&self) -> u8 {
        if self.outcome == outcome::TRACKED {
            self.dir + 1
        } else {
            0
        }
    }

    /// Writes the result into the frame's metadata (`ct_state`, `ct_dir`), as flow.cuh's
    /// `pw_flow_meta_store` does.
    pub fn store(&self, m: &mut PacketMeta) {
        m.ct_state = self.ct_state;
        m.ct_dir = self.ct_dir();
    }

    const fn of(ct_state: u8, dir: u8, outcome: u8) -> Self {
        FlowResult {
            ct_state,
            dir,
            outcome,
            reserved: 0,
        }
    }
}

/// The table's parameters as flow.cuh reads them (`pw_flow_table`, 152 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowTableAbi {
    /// Address of the first entry (host or device memory).
    pub entries: u64,
    pub nbuckets: u32,
    pub seed: u32,
    /// 1: TCP sequence-window checking.
    pub strict: u32,
    pub reserved: u32,
    /// Timeouts by class ([`Timeouts::to_ns_array`]).
    pub timeout_ns: [u64; tclass::COUNT],
}

/// A flow as flow export reports it: the original direction's endpoints first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRecord {
    pub key: FlowKey,
    /// Source address and port of the original direction (port: the echo id for ICMP).
    pub src: ([u32; 4], u16),
    pub dst: ([u32; 4], u16),
    pub first_seen_ns: u64,
    pub last_seen_ns: u64,
    /// [original, reply].
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    pub tcp_flags: [u16; 2],
    /// TCP state ([`tcp::st`]); 0 for other protocols.
    pub tcp_state: u8,
    /// A reply was seen.
    pub replied: bool,
    pub assured: bool,
}

impl FlowRecord {
    pub fn of(e: &FlowEntry) -> Self {
        let a = (e.key.addr[0], e.key.port[0]);
        let b = (e.key.addr[1], e.key.port[1]);
        let (src, dst) = if e.flags & ef::ORIG_FROM_A != 0 {
            (a, b)
        } else {
            (b, a)
        };
        FlowRecord {
            key: e.key,
            src,
            dst,
            first_seen_ns: e.first_seen_ns,
            last_seen_ns: e.last_seen_ns,
            packets: e.packets,
            bytes: e.bytes,
            tcp_flags: e.tcp_flags,
            tcp_state: e.state,
            replied: e.flags & ef::SEEN_REPLY != 0,
            assured: e.flags & ef::ASSURED != 0,
        }
    }
}

/// Checks a table size: a positive multiple of [`BUCKET_ENTRIES`], at most [`MAX_ENTRIES`].
pub fn check_capacity(entries: u64) -> Result<(), FlowError> {
    let bad = |message: String| {
        Err(FlowError::Config {
            key: "entries".into(),
            message,
        })
    };
    if entries == 0 {
        return bad("a flow table needs at least one bucket (8 entries), got 0".into());
    }
    if entries % BUCKET_ENTRIES as u64 != 0 {
        return bad(format!(
            "{entries} is not a multiple of {BUCKET_ENTRIES} (entries per bucket)"
        ));
    }
    if entries > MAX_ENTRIES {
        return bad(format!(
            "{entries} entries ({} bytes) is more than the limit of {MAX_ENTRIES}",
            bytes_needed(entries)
        ));
    }
    Ok(())
}

/// Bytes of the entry array of a table of `entries` (what the GPU executor allocates too).
pub fn bytes_needed(entries: u64) -> u64 {
    entries.saturating_mul(ENTRY_SIZE as u64)
}

/// Heap bytes a CPU table of `entries` holds: its entry array ([`bytes_needed`]) and one
/// bucket tag per bucket. What [`FlowTable::allocated_bytes`] reports for the table's whole
/// life without flow export (with it, plus the ended-flow list, at most [`ENDED_CAP`] records).
pub fn table_bytes(entries: u64) -> u64 {
    let buckets = entries / BUCKET_ENTRIES as u64;
    bytes_needed(entries).saturating_add(buckets.saturating_mul(BUCKET_TAG_BYTES))
}

/// Bytes of a bucket's tag (cache-line half, [`BucketTag`]).
const BUCKET_TAG_BYTES: u64 = std::mem::size_of::<BucketTag>() as u64;

/// The timeout class of an entry (`pw_flow_tclass`).
pub fn timeout_class(e: &FlowEntry) -> usize {
    match entry_kind(&e.key) {
        EntryKind::Tcp => e.state as usize,
        EntryKind::Udp if e.flags & ef::SEEN_REPLY != 0 => tclass::UDP_REPLIED,
        EntryKind::Udp => tclass::UDP_UNREPLIED,
        EntryKind::Echo => tclass::ICMP,
        EntryKind::Other => tclass::OTHER,
    }
}

enum EntryKind {
    Tcp,
    Udp,
    Echo,
    Other,
}

fn entry_kind(k: &FlowKey) -> EntryKind {
    match (k.proto, k.ip_version) {
        (key::PROTO_TCP, _) => EntryKind::Tcp,
        (key::PROTO_UDP, _) => EntryKind::Udp,
        (key::PROTO_ICMP, 4) | (key::PROTO_ICMPV6, 6) => EntryKind::Echo,
        _ => EntryKind::Other,
    }
}

/// The ct state a frame sees after it was applied to its entry.
fn ct_state_of(e: &FlowEntry) -> u8 {
    if e.key.proto == key::PROTO_TCP {
        match e.state {
            st::FIN_WAIT | st::CLOSE_WAIT | st::LAST_ACK => return ct::CLOSING,
            st::TIME_WAIT | st::CLOSE => return ct::CLOSED,
            _ => {}
        }
    }
    if e.flags & ef::SEEN_REPLY != 0 {
        ct::ESTABLISHED
    } else {
        ct::NEW
    }
}

/// What a bucket visit reads first, one per bucket, beside the entry array (CPU only: the
/// entries' bytes, which the GPU copy shares, are unchanged). With it a visit touches one
/// 32-byte tag and the entry it finds instead of the first cache line of all eight entries.
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BucketTag {
    /// Per slot: 0 when the slot is free, else the key's [`sig_of`] (a slot whose signature
    /// differs cannot hold the key).
    sig: [u16; BUCKET_ENTRIES],
    /// No occupied entry of the bucket expires before this time (ns): a lower bound, kept on
    /// every write, exact after a reclaiming scan. A visit before it has nothing to reclaim.
    min_deadline: u64,
}

impl Default for BucketTag {
    fn default() -> Self {
        BucketTag {
            sig: [0; BUCKET_ENTRIES],
            min_deadline: u64::MAX,
        }
    }
}

/// The slot signature of a key hash: its upper 16 bits (the bucket is `hash % nbuckets`, so
/// mostly the low bits), never 0.
fn sig_of(hash: u32) -> u16 {
    ((hash >> 16) as u16).max(1)
}

/// Packets [`FlowTable::apply_packets`] hashes and prefetches ahead of applying them.
const AHEAD: usize = 16;

/// A hint to start fetching the cache line at `p`.
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing and does not fault on any address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p.cast::<i8>(), core::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A per-queue flow table (see the module doc).
#[derive(Clone)]
pub struct FlowTable {
    entries: Vec<FlowEntry>,
    /// One per bucket ([`BucketTag`]).
    tags: Vec<BucketTag>,
    nbuckets: u32,
    seed: u32,
    strict: bool,
    timeout_ns: [u64; tclass::COUNT],
    counters: FlowCounters,
    /// Where the next [`FlowTable::sweep`] starts (bucket).
    sweep_cursor: u32,
    /// Flows that ended inside [`FlowTable::apply`] (reclaimed on a bucket visit, evicted,
    /// reopened), kept for flow export while reporting is on ([`FlowTable::report_ended`]).
    ended: Option<Vec<(FlowRecord, Ended)>>,
    /// Ended flows not kept: the list held [`ENDED_CAP`] already.
    ended_lost: u64,
}

/// Why a flow left the table inside [`FlowTable::apply`] (flow export's end reasons).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Aged out, reclaimed when a frame visited its bucket.
    Expired,
    /// Evicted early to make room for a new flow.
    Evicted,
    /// A SYN reopened the closed TCP connection: the old flow ended.
    Reopened,
}

/// The most ended flows [`FlowTable::take_ended`] waits to be called for; more are counted
/// ([`FlowTable::ended_lost`]), never kept (bounded memory when nobody takes them).
pub const ENDED_CAP: usize = 16384;

impl std::fmt::Debug for FlowTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowTable")
            .field("capacity", &self.entries.len())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl FlowTable {
    /// An empty table of `capacity` entries (a positive multiple of [`BUCKET_ENTRIES`]), strict
    /// off, hash seed 0. Errors name the bad value, or the bytes the table needs when they
    /// cannot be allocated.
    pub fn new(capacity: u64, timeouts: Timeouts) -> Result<FlowTable, FlowError> {
        FlowTable::from_config(&FlowConfig {
            entries: capacity,
            strict: false,
            hash_seed: 0,
            timeouts,
        })
    }

    /// An empty table as the config says.
    pub fn from_config(c: &FlowConfig) -> Result<FlowTable, FlowError> {
        c.validate()?;
        let n = c.entries as usize;
        let mut entries = Vec::new();
        entries
            .try_reserve_exact(n)
            .map_err(|e| FlowError::Memory {
                entries: c.entries,
                bytes: bytes_needed(c.entries),
                reason: e.to_string(),
            })?;
        entries.resize(n, FlowEntry::default());
        let nb = n / BUCKET_ENTRIES;
        let mut tags = Vec::new();
        tags.try_reserve_exact(nb).map_err(|e| FlowError::Memory {
            entries: c.entries,
            bytes: bytes_needed(c.entries) + (nb * std::mem::size_of::<BucketTag>()) as u64,
            reason: e.to_string(),
        })?;
        tags.resize(nb, BucketTag::default());
        Ok(FlowTable {
            entries,
            tags,
            nbuckets: (n / BUCKET_ENTRIES) as u32,
            seed: c.hash_seed,
            strict: c.strict,
            timeout_ns: c.timeouts.to_ns_array(),
            counters: FlowCounters::default(),
            sweep_cursor: 0,
            ended: None,
            ended_lost: 0,
        })
    }

    /// Entries the table holds at most.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Bytes of the entry array (= [`bytes_needed`] of the capacity).
    pub fn memory_bytes(&self) -> u64 {
        (self.entries.len() * std::mem::size_of::<FlowEntry>()) as u64
    }

    /// Heap bytes the table holds now, as allocated: the entry array and bucket tags (their
    /// allocated capacity, not their length), and the ended-flow list while flow export keeps
    /// one. Nothing in the table grows with the flows it sees: without flow export this is
    /// [`table_bytes`] of the capacity from creation to drop.
    pub fn allocated_bytes(&self) -> u64 {
        let ended = self.ended.as_ref().map_or(0, |v| {
            v.capacity() * std::mem::size_of::<(FlowRecord, Ended)>()
        });
        (self.entries.capacity() * std::mem::size_of::<FlowEntry>()
            + self.tags.capacity() * std::mem::size_of::<BucketTag>()
            + ended) as u64
    }

    /// Occupied entries (a full scan).
    pub fn len(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.flags & ef::OCCUPIED != 0)
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn counters(&self) -> FlowCounters {
        self.counters
    }

    pub fn strict(&self) -> bool {
        self.strict
    }

    /// The entry array, bucket after bucket (what the GPU copy holds byte for byte).
    pub fn entries(&self) -> &[FlowEntry] {
        &self.entries
    }

    /// The entry array as bytes.
    pub fn as_bytes(&self) -> &[u8] {
        entry_bytes(&self.entries)
    }

    /// The parameter block flow.cuh reads, with `entries` the address of a copy of
    /// [`FlowTable::entries`] (device memory on the GPU).
    pub fn abi(&self, entries: u64) -> FlowTableAbi {
        FlowTableAbi {
            entries,
            nbuckets: self.nbuckets,
            seed: self.seed,
            strict: self.strict as u32,
            reserved: 0,
            timeout_ns: self.timeout_ns,
        }
    }

    /// Live flows (occupied entries, expired or not), in table order.
    pub fn records(&self) -> impl Iterator<Item = FlowRecord> + '_ {
        self.entries
            .iter()
            .filter(|e| e.flags & ef::OCCUPIED != 0)
            .map(FlowRecord::of)
    }

    /// The bucket of a key.
    pub fn bucket_of(&self, key: &FlowKey) -> u32 {
        key::hash(key, self.seed) % self.nbuckets
    }

    /// The live flow of a key at `now_ns` (an expired entry is absent), the table unchanged.
    pub fn lookup(&self, key: &FlowKey, now_ns: u64) -> Option<&FlowEntry> {
        let h = key::hash(key, self.seed);
        let b = (h % self.nbuckets) as usize;
        let i = self.find(b, sig_of(h), key)?;
        let e = &self.entries[i];
        (!self.expired(e, now_ns)).then_some(e)
    }

    /// The slot of bucket `b` holding `key` (expired or not).
    #[inline]
    fn find(&self, b: usize, sig: u16, key: &FlowKey) -> Option<usize> {
        let tag = &self.tags[b];
        let base = b * BUCKET_ENTRIES;
        (0..BUCKET_ENTRIES)
            .find(|&s| tag.sig[s] == sig && self.entries[base + s].key == *key)
            .map(|s| base + s)
    }

    fn deadline(&self, e: &FlowEntry) -> u64 {
        e.last_seen_ns
            .saturating_add(self.timeout_ns[timeout_class(e)])
    }

    fn expired(&self, e: &FlowEntry, now_ns: u64) -> bool {
        self.deadline(e) <= now_ns
    }

    /// Writes entry `i` and keeps its bucket's tag: the signature (0 for a freed slot) and the
    /// deadline bound.
    fn store(&mut self, i: usize, e: FlowEntry, sig: u16) {
        let b = i / BUCKET_ENTRIES;
        if e.flags & ef::OCCUPIED != 0 {
            let d = self.deadline(&e);
            let t = &mut self.tags[b];
            t.sig[i % BUCKET_ENTRIES] = sig;
            t.min_deadline = t.min_deadline.min(d);
        } else {
            self.tags[b].sig[i % BUCKET_ENTRIES] = 0;
        }
        self.entries[i] = e;
    }

    /// Reclaims the expired entries of bucket `b` (each counted) and makes its deadline bound
    /// exact. Skipped when the bound says none can have expired.
    #[inline]
    fn reclaim(&mut self, b: usize, now_ns: u64) {
        if now_ns < self.tags[b].min_deadline {
            return;
        }
        let base = b * BUCKET_ENTRIES;
        let mut min = u64::MAX;
        for i in base..base + BUCKET_ENTRIES {
            let e = &self.entries[i];
            if e.flags & ef::OCCUPIED == 0 {
                continue;
            }
            let d = self.deadline(e);
            if d <= now_ns {
                self.note_ended(i, Ended::Expired);
                self.store(i, FlowEntry::default(), 0);
                self.counters.expired += 1;
            } else {
                min = min.min(d);
            }
        }
        self.tags[b].min_deadline = min;
    }

    /// Applies one frame (parse metadata, its bytes, its receive time in ns).
    pub fn apply(&mut self, meta: &PacketMeta, frame: &[u8], now_ns: u64) -> FlowResult {
        match classify(meta, frame) {
            Ok(p) => self.apply_packet(&p, now_ns),
            Err(NoFlow::Untracked) => {
                self.counters.untracked += 1;
                FlowResult::of(ct::UNTRACKED, 0, outcome::UNTRACKED)
            }
            Err(NoFlow::Invalid) => self.invalid(),
        }
    }

    /// Applies a burst in order; `out[i]` is frame i's result. The slices must be of one length.
    pub fn apply_burst(
        &mut self,
        metas: &[PacketMeta],
        frames: &[&[u8]],
        now_ns: &[u64],
        out: &mut [FlowResult],
    ) -> Result<(), FlowError> {
        let n = metas.len();
        if frames.len() != n || now_ns.len() != n || out.len() != n {
            return Err(FlowError::BurstLengths {
                metas: n,
                frames: frames.len(),
                times: now_ns.len(),
                out: out.len(),
            });
        }
        let mut ahead = [None::<(Packet, u32)>; AHEAD];
        for (k, res) in out.chunks_mut(AHEAD).enumerate() {
            let at = k * AHEAD;
            // As apply_packets: classify and hash the chunk, load the tags, then apply in order.
            for (j, slot) in ahead.iter_mut().enumerate().take(res.len()) {
                *slot = None;
                match classify(&metas[at + j], frames[at + j]) {
                    Ok(p) => {
                        let h = key::hash(&p.key, self.seed);
                        self.prefetch_tag(h);
                        *slot = Some((p, h));
                    }
                    Err(NoFlow::Untracked) | Err(NoFlow::Invalid) => {}
                }
            }
            for (_, h) in ahead[..res.len()].iter().flatten() {
                self.prefetch_entry(*h);
            }
            for (j, r) in res.iter_mut().enumerate() {
                *r = match &ahead[j] {
                    Some((p, h)) => self.apply_hashed(p, *h, now_ns[at + j]),
                    None => self.apply(&metas[at + j], frames[at + j], now_ns[at + j]),
                };
            }
        }
        Ok(())
    }

    /// Applies packets (keys in hand) in order at one receive time; `out[i]` is packet i's
    /// result. The slices must be of one length.
    pub fn apply_packets(
        &mut self,
        packets: &[Packet],
        now_ns: u64,
        out: &mut [FlowResult],
    ) -> Result<(), FlowError> {
        if out.len() != packets.len() {
            return Err(FlowError::BurstLengths {
                metas: packets.len(),
                frames: packets.len(),
                times: packets.len(),
                out: out.len(),
            });
        }
        let mut hashes = [0u32; AHEAD];
        for (chunk, res) in packets.chunks(AHEAD).zip(out.chunks_mut(AHEAD)) {
            // Hash the chunk and load each bucket's tag first, so that their cache misses
            // overlap; then apply in order (an earlier packet may change a later one's bucket:
            // the apply reads the table afresh).
            for (p, h) in chunk.iter().zip(hashes.iter_mut()) {
                *h = key::hash(&p.key, self.seed);
                self.prefetch_tag(*h);
            }
            for &h in &hashes[..chunk.len()] {
                self.prefetch_entry(h);
            }
            for ((p, &h), r) in chunk.iter().zip(&hashes).zip(res.iter_mut()) {
                *r = self.apply_hashed(p, h, now_ns);
            }
        }
        Ok(())
    }

    fn prefetch_tag(&self, h: u32) {
        prefetch((&self.tags[(h % self.nbuckets) as usize] as *const BucketTag).cast());
    }

    /// Prefetches both cache lines of the entry a key of hash `h` will likely use: the slot
    /// whose signature matches, else the first free one (reads the tag: prefetch it first).
    fn prefetch_entry(&self, h: u32) {
        let b = (h % self.nbuckets) as usize;
        let sig = sig_of(h);
        let tag = &self.tags[b];
        let s = tag
            .sig
            .iter()
            .position(|&g| g == sig)
            .or_else(|| tag.sig.iter().position(|&g| g == 0));
        if let Some(s) = s {
            let e = (&self.entries[b * BUCKET_ENTRIES + s] as *const FlowEntry).cast::<u8>();
            prefetch(e);
            prefetch(e.wrapping_add(64));
        }
    }

    fn invalid(&mut self) -> FlowResult {
        self.counters.invalid += 1;
        FlowResult::of(ct::INVALID, 0, outcome::INVALID)
    }

    /// Visits the packet's bucket: reclaims its expired entries, then finds the flow or makes
    /// room for it (docs/flow-table.md, "Table" and "Full table").
    pub fn apply_packet(&mut self, p: &Packet, now_ns: u64) -> FlowResult {
        self.apply_hashed(p, key::hash(&p.key, self.seed), now_ns)
    }

    /// [`FlowTable::apply_packet`] with the key's hash in hand.
    fn apply_hashed(&mut self, p: &Packet, h: u32, now_ns: u64) -> FlowResult {
        let b = (h % self.nbuckets) as usize;
        let sig = sig_of(h);
        self.reclaim(b, now_ns);
        let found = self.find(b, sig, &p.key);
        if p.kind == Kind::Related {
            // An ICMP error about a flow: `related`, going the other way than the packet it
            // quotes; the flow is not changed. About no flow: invalid (as Linux).
            let Some(i) = found else {
                return self.invalid();
            };
            let orig_from_a = self.entries[i].flags & ef::ORIG_FROM_A != 0;
            let dir = (p.from_a == orig_from_a) as u8;
            return FlowResult::of(ct::RELATED, dir, outcome::TRACKED);
        }
        if let Some(i) = found {
            return self.update(i, p, sig, now_ns);
        }
        // A new flow: only a frame that may open one.
        let state = match p.kind {
            Kind::Tcp => {
                let s = tcp::next_state(false, p.tcp_flags, st::NONE);
                if s >= st::INVALID {
                    return self.invalid();
                }
                s
            }
            Kind::Echo { request: false } => return self.invalid(),
            _ => 0,
        };
        let Some(i) = self.free_slot(b) else {
            self.counters.table_full += 1;
            return FlowResult::of(ct::UNTRACKED, 0, outcome::TABLE_FULL);
        };
        self.create(i, p, sig, state, now_ns)
    }

    /// A free slot of the bucket, else the unassured entry to evict (unreplied before replied,
    /// then least recently seen, then lowest slot), else none.
    fn free_slot(&mut self, b: usize) -> Option<usize> {
        let base = b * BUCKET_ENTRIES;
        if let Some(s) = self.tags[b].sig.iter().position(|&g| g == 0) {
            return Some(base + s);
        }
        let mut victim: Option<(usize, (u8, u64))> = None;
        for i in base..base + BUCKET_ENTRIES {
            let e = &self.entries[i];
            if e.flags & ef::ASSURED != 0 {
                continue;
            }
            let rank = (e.flags & ef::SEEN_REPLY, e.last_seen_ns);
            if victim.is_none_or(|(_, r)| rank < r) {
                victim = Some((i, rank));
            }
        }
        let (i, _) = victim?;
        self.note_ended(i, Ended::Evicted);
        self.counters.early_evicted += 1;
        Some(i)
    }

    fn create(&mut self, i: usize, p: &Packet, sig: u16, state: u8, now_ns: u64) -> FlowResult {
        let mut e = FlowEntry {
            key: p.key,
            first_seen_ns: now_ns,
            last_seen_ns: now_ns,
            state,
            flags: ef::OCCUPIED | if p.from_a { ef::ORIG_FROM_A } else { 0 },
            ..FlowEntry::default()
        };
        if self.strict && p.kind == Kind::Tcp {
            window::init(&mut e, p);
        }
        account(&mut e, 0, p, now_ns);
        self.store(i, e, sig);
        self.counters.created += 1;
        FlowResult::of(ct_state_of(&e), 0, outcome::TRACKED)
    }

    fn update(&mut self, i: usize, p: &Packet, sig: u16, now_ns: u64) -> FlowResult {
        let mut e = self.entries[i];
        let orig_from_a = e.flags & ef::ORIG_FROM_A != 0;
        let dir = (p.from_a != orig_from_a) as usize;
        let replied_before = e.flags & ef::SEEN_REPLY != 0;
        match p.kind {
            Kind::Tcp => {
                let old = e.state;
                let mut new = tcp::next_state(dir == 1, p.tcp_flags, old);
                if new == st::INVALID {
                    return self.invalid();
                }
                if new == st::IGNORE {
                    new = old;
                }
                if new == st::SYN_SENT && (old == st::TIME_WAIT || old == st::CLOSE) {
                    // A SYN reopens a closed connection: a new flow in the SYN's direction.
                    self.note_ended(i, Ended::Reopened);
                    return self.create(i, p, sig, st::SYN_SENT, now_ns);
                }
                if self.strict && !window::check(&mut e, dir, p, old) {
                    return self.invalid();
                }
                e.state = new;
                if dir == 1 {
                    e.flags |= ef::SEEN_REPLY;
                }
                if new == st::ESTABLISHED
                    && (old == st::SYN_RECV || old == st::ESTABLISHED)
                    && e.flags & ef::SEEN_REPLY != 0
                {
                    e.flags |= ef::ASSURED;
                }
            }
            Kind::Udp => {
                if replied_before {
                    e.flags |= ef::ASSURED;
                }
                if dir == 1 {
                    e.flags |= ef::SEEN_REPLY;
                }
            }
            Kind::Echo { .. } | Kind::Other | Kind::Related => {
                if dir == 1 {
                    e.flags |= ef::SEEN_REPLY;
                }
            }
        }
        account(&mut e, dir, p, now_ns);
        self.store(i, e, sig);
        FlowResult::of(ct_state_of(&e), dir as u8, outcome::TRACKED)
    }

    /// Removes up to `max` expired entries, scanning at most the whole table once from where
    /// the last sweep stopped, and appends their records to `out` (for flow export). Returns how
    /// many it removed.
    pub fn sweep(&mut self, now_ns: u64, max: usize, out: &mut Vec<FlowRecord>) -> usize {
        let mut removed = 0;
        for _ in 0..self.nbuckets {
            if removed >= max {
                break;
            }
            let base = self.sweep_cursor as usize * BUCKET_ENTRIES;
            for i in base..base + BUCKET_ENTRIES {
                let e = self.entries[i];
                if removed < max && e.flags & ef::OCCUPIED != 0 && self.expired(&e, now_ns) {
                    out.push(FlowRecord::of(&e));
                    self.store(i, FlowEntry::default(), 0);
                    self.counters.expired += 1;
                    removed += 1;
                }
            }
            if removed < max {
                self.sweep_cursor = (self.sweep_cursor + 1) % self.nbuckets;
            }
        }
        removed
    }
}

impl FlowTable {
    /// Keeps the flows that end inside [`FlowTable::apply`] for [`FlowTable::take_ended`]
    /// (on), or not (off, the default: nothing is kept).
    pub fn report_ended(&mut self, on: bool) {
        self.ended = on.then(|| self.ended.take().unwrap_or_default());
    }

    /// Moves the ended flows kept so far into `out`.
    pub fn take_ended(&mut self, out: &mut Vec<(FlowRecord, Ended)>) {
        if let Some(v) = &mut self.ended {
            out.append(v);
        }
    }

    /// Ended flows not kept because [`ENDED_CAP`] were waiting.
    pub fn ended_lost(&self) -> u64 {
        self.ended_lost
    }

    fn note_ended(&mut self, i: usize, why: Ended) {
        if let Some(v) = &mut self.ended {
            if v.len() < ENDED_CAP {
                v.push((FlowRecord::of(&self.entries[i]), why));
            } else {
                self.ended_lost += 1;
            }
        }
    }

    /// Buckets in the table.
    pub fn nbuckets(&self) -> u32 {
        self.nbuckets
    }

    /// Visits `count` buckets from bucket `first` (wrapping; at most the whole table): removes
    /// their expired entries (counted `expired`) and appends their records to `out`, and calls
    /// `live` on every other occupied entry (flow export's active timeout). Returns the bucket
    /// after the last one visited, for the next call.
    pub fn sweep_buckets(
        &mut self,
        first: u32,
        count: u32,
        now_ns: u64,
        mut live: impl FnMut(&mut FlowEntry),
        out: &mut Vec<FlowRecord>,
    ) -> u32 {
        let mut b = first % self.nbuckets;
        for _ in 0..count.min(self.nbuckets) {
            let base = b as usize * BUCKET_ENTRIES;
            for i in base..base + BUCKET_ENTRIES {
                let e = self.entries[i];
                if e.flags & ef::OCCUPIED == 0 {
                    continue;
                }
                if self.expired(&e, now_ns) {
                    out.push(FlowRecord::of(&e));
                    self.store(i, FlowEntry::default(), 0);
                    self.counters.expired += 1;
                } else {
                    live(&mut self.entries[i]);
                }
            }
            b = (b + 1) % self.nbuckets;
        }
        b
    }
}

/// Counts a frame on its entry.
fn account(e: &mut FlowEntry, dir: usize, p: &Packet, now_ns: u64) {
    e.packets[dir] += 1;
    e.bytes[dir] += p.ip_len as u64;
    e.tcp_flags[dir] |= p.tcp_flags;
    e.last_seen_ns = e.last_seen_ns.max(now_ns);
}
