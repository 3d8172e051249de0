//! Zero-copy forwarding, the way a DPDK application (DPDK's examples/l2fwd, testpmd's io mode)
//! does it: frames stay in the mbufs the PMD received them into, the pipeline reads them in
//! place, dropped frames are freed, and the rest are handed to `rte_eth_tx_burst` as they are.
//!
//! [`DpdkRx::rx_mbufs`] fills an [`MbufBurst`] with mbuf pointers only: no per-frame work, no
//! clock read. The first access to the frames ([`MbufBurst::frames`], [`MbufBurst::frame`],
//! [`MbufBurst::bytes`]) reads every header once (lengths, segments) and stamps the burst's
//! time; forwarding without reading the frames (no stages) never touches a header, as testpmd
//! io does not. [`MbufBurst::retain`] frees the frames a verdict dropped; [`DpdkTx::tx_mbufs`]
//! sends the rest. The copying path (`RxPort::rx_burst` / `TxPort::tx_burst`) stays for
//! everything else (GPU queues, other ports).
//!
//! Chained (multi-segment) mbufs, which a PMD delivers for frames larger than one buffer (e.g.
//! net_pcap on a jumbo frame, or scatter RX): the chain is kept as it is for TX, and at the
//! first access the frame's bytes are copied once into the burst's own buffer so
//! [`MbufBurst::frame`] hands out one contiguous slice. A chain sent to a device that cannot
//! transmit chains (no `MULTI_SEGS` offload) is freed and counted `tx_oversize`, as on the
//! copying path.
//!
//! Counters: the port's `pktwarp_rx_frames` / `pktwarp_tx_frames` / `tx_full` / `tx_oversize` /
//! `rx_steering_drop` count this path too; bytes are counted by the device (`ethdev_ibytes`,
//! `ethdev_obytes`) and by the executor's queue counters, not by `pktwarp_{rx,tx}_bytes`
//! (which would need a header read per frame here).
//!
//! Receive buffers in GPU memory (GPUDirect) are not readable by the CPU: `rx_mbufs` refuses
//! such a port (use `rx_gpu`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use dpdk_sys as sys;

use super::{config_err, eal, now_ns, DpdkRx, DpdkTx, PortPools, MAX_BURST};
use crate::burst::FrameDesc;
use crate::port::{PortError, RxStatus};

/// The NIC's steering mark of a received mbuf: the id of the rte_flow MARK action that matched
/// (`hash.fdir.hi`, valid when the PMD set `RTE_MBUF_F_RX_FDIR_ID`), 0 when none. A FLAG action
/// (`RTE_MBUF_F_RX_FDIR` alone) carries no id, and the same union holds the RSS hash otherwise.
#[inline]
pub fn nic_mark(mb: &sys::rte_mbuf) -> u32 {
    if mb.ol_flags & u64::from(sys::RTE_MBUF_F_RX_FDIR_ID) == 0 {
        return 0;
    }
    // SAFETY: the PMD flagged the fdir member of the hash union valid; it is plain integers.
    unsafe { mb.__bindgen_anon_2.hash.fdir.hi }
}

/// Up to [`MAX_BURST`] mbufs of one receive call, owned: the ones still held when the burst
/// is cleared or dropped are freed. Reuse one per polling thread (the arrays are allocated
/// once). Per frame it keeps nothing but the mbuf pointer: lengths, segments and RSS hash are
/// read from the mbuf header, and port and queue are the receive call's.
pub struct MbufBurst {
    mbufs: Vec<*mut sys::rte_mbuf>,
    len: usize,
    /// The headers were read (see [`MbufBurst::prepare`]): `bytes`, `chained`, `linear_at`
    /// and `timestamp_ns` are valid.
    prepared: bool,
    /// Per frame, for chained mbufs only: offset of the frame's contiguous copy in `linear`.
    linear_at: Vec<u32>,
    /// Contiguous copies of chained frames (see the module doc).
    linear: Vec<u8>,
    /// Chained frames held (valid when `prepared`).
    chained: usize,
    /// The receiving port may deliver chains (`PortSetup::rx_may_chain`).
    may_chain: bool,
    /// Bytes of the frames held (sum of pkt_len).
    bytes: u64,
    /// pktwarp index of the receiving port, and the RX queue.
    port: u16,
    queue: u16,
    /// When the frames were first read (ns; the same clock as the copying path's receive
    /// time, read once per burst).
    timestamp_ns: u64,
    /// Keeps the pools of the held mbufs alive (a port closed while its mbufs are here would
    /// otherwise free their pool): every receiving port's this burst was used with.
    pools: Vec<Arc<PortPools>>,
    /// The receiving port's pools of the frames held now (one of `pools`; compared by address,
    /// so the per-burst check is one comparison).
    src: *const PortPools,
    /// Scratch for `remove_where` (allocated once).
    freed: Vec<*mut sys::rte_mbuf>,
    /// Scratch for `rewrite`: the descriptors the stages may change (allocated once).
    descs: Vec<FrameDesc>,
    /// Scratch for `rewrite` of chains: each chained frame's bytes and room, in frame order.
    chain_rw: Vec<u8>,
    /// Per frame, after `rewrite`: the chain could not take its rewritten bytes (it grew past
    /// the last segment's buffer); the mbuf still holds the frame as received.
    unwritten: Vec<bool>,
    unwritten_n: usize,
}

/// Every frame of an [`MbufBurst`] with its descriptor, writable in place
/// ([`MbufBurst::rewrite`]): what `Pipeline::run_frames_mut` takes.
pub struct FramesMut<'a> {
    descs: std::slice::IterMut<'a, FrameDesc>,
    mbufs: std::slice::Iter<'a, *mut sys::rte_mbuf>,
    room: usize,
    /// The chained frames' copies still to hand out, in frame order (each its bytes and
    /// `room`): a chain is rewritten in its copy, then written back (`MbufBurst::rewrite`).
    chains: &'a mut [u8],
}

impl<'a> Iterator for FramesMut<'a> {
    type Item = (&'a mut FrameDesc, &'a mut [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let d = self.descs.next()?;
        let &m = self.mbufs.next()?;
        // SAFETY: an owned mbuf; only its header is read.
        let (segs, pkt_len) = unsafe { ((*m).nb_segs, (*m).pkt_len as usize) };
        if segs > 1 {
            let n = (pkt_len + self.room).min(self.chains.len());
            let (b, rest) = std::mem::take(&mut self.chains).split_at_mut(n);
            self.chains = rest;
            return Some((d, b));
        }
        // SAFETY: m is a one-segment mbuf the burst owns, in host
        // memory (rx_mbufs refuses GPU-memory ports); each is handed out once, so the slices
        // do not alias, and the burst's &mut borrow (held by this iterator's lifetime) keeps it
        // from being sent or freed meanwhile. The slice is its data and at most `room` bytes
        // of tailroom, inside its buffer.
        let b = unsafe {
            let mb = &*m;
            let avail = usize::from(mb.buf_len).saturating_sub(usize::from(mb.data_off));
            let n = (usize::from(mb.data_len) + self.room).min(avail);
            std::slice::from_raw_parts_mut((mb.buf_addr as *mut u8).add(mb.data_off as usize), n)
        };
        Some((d, b))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.descs.size_hint()
    }
}

impl ExactSizeIterator for FramesMut<'_> {}

/// Writes `bytes` over the chain `m`: each segment but the last keeps its length, the last
/// takes the rest (growing into its tailroom); `false` (nothing written) when they do not fit.
///
/// # Safety
/// `m` is an owned, valid mbuf chain in host memory that nothing else reads or writes now.
unsafe fn write_back(m: *mut sys::rte_mbuf, bytes: &[u8]) -> bool {
    let mut cap = 0usize;
    let mut seg = m;
    while !seg.is_null() {
        let s = &*seg;
        cap += if s.next.is_null() {
            usize::from(s.buf_len).saturating_sub(usize::from(s.data_off))
        } else {
            usize::from(s.data_len)
        };
        seg = s.next;
    }
    if bytes.len() > cap {
        return false;
    }
    let (mut off, mut seg) = (0usize, m);
    while !seg.is_null() {
        let s = &mut *seg;
        let left = bytes.len() - off;
        let take = if s.next.is_null() {
            left
        } else {
            usize::from(s.data_len).min(left)
        };
        let data = (s.buf_addr as *mut u8).add(usize::from(s.data_off));
        std::ptr::copy_nonoverlapping(bytes.as_ptr().add(off), data, take);
        s.data_len = take as u16;
        off += take;
        seg = s.next;
    }
    (*m).pkt_len = bytes.len() as u32;
    true
}

// SAFETY: the mbufs are owned by this value alone (nobody else frees or reads them until they
// are sent or freed through it); mempools are thread-safe.
unsafe impl Send for MbufBurst {}

impl Default for MbufBurst {
    fn default() -> Self {
        MbufBurst::new()
    }
}

impl Drop for MbufBurst {
    fn drop(&mut self) {
        self.clear();
    }
}

impl MbufBurst {
    pub fn new() -> Self {
        MbufBurst {
            mbufs: vec![std::ptr::null_mut(); MAX_BURST],
            len: 0,
            prepared: true,
            linear_at: vec![0; MAX_BURST],
            linear: Vec::new(),
            chained: 0,
            may_chain: false,
            bytes: 0,
            port: 0,
            queue: 0,
            timestamp_ns: 0,
            pools: Vec::new(),
            src: std::ptr::null(),
            freed: Vec::with_capacity(MAX_BURST),
            descs: Vec::with_capacity(MAX_BURST),
            chain_rw: Vec::new(),
            unwritten: vec![false; MAX_BURST],
            unwritten_n: 0,
        }
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the frames held.
    pub fn bytes(&mut self) -> u64 {
        self.prepare();
        self.bytes
    }

    #[inline]
    fn header(&self, i: usize) -> &sys::rte_mbuf {
        let m = self.mbufs[..self.len][i];
        // SAFETY: m is an mbuf this burst owns (received, not yet sent or freed: both need
        // &mut self, which the returned borrow of self excludes). Its header is host memory.
        unsafe { &*m }
    }

    /// Whether frame `i` arrived as a chain of several mbufs (its bytes are copied once into
    /// this burst's buffer for reading; the chain itself is what TX sends).
    pub fn is_chained(&self, i: usize) -> bool {
        self.header(i).nb_segs > 1
    }

    /// Reads every header once: bytes, chains (copied into `linear`), and the burst's time.
    #[inline]
    fn prepare(&mut self) {
        if self.prepared {
            return;
        }
        self.prepared = true;
        self.timestamp_ns = now_ns();
        let mut bytes = 0u64;
        let mut chained = false;
        for &m in &self.mbufs[..self.len] {
            // SAFETY: an owned mbuf; only header fields of its first cache line are read.
            let mb = unsafe { &*m };
            bytes += u64::from(mb.pkt_len);
            chained |= mb.nb_segs > 1;
        }
        self.bytes = bytes;
        if chained {
            self.copy_chains();
        }
    }

    /// Copies every chained frame's bytes into `linear` (see the module doc).
    #[cold]
    fn copy_chains(&mut self) {
        for i in 0..self.len {
            let m = self.mbufs[i];
            // SAFETY: m is an owned mbuf: a valid chain of segments, each with data_len bytes
            // at buf_addr + data_off in host memory (rx_mbufs refuses GPU-memory ports).
            unsafe {
                if (*m).nb_segs <= 1 {
                    continue;
                }
                self.linear_at[i] = self.linear.len() as u32;
                self.chained += 1;
                let mut seg = m;
                while !seg.is_null() {
                    let s = &*seg;
                    let data = (s.buf_addr as *const u8).add(s.data_off as usize);
                    self.linear
                        .extend_from_slice(std::slice::from_raw_parts(data, s.data_len as usize));
                    seg = s.next;
                }
            }
        }
    }

    /// The bytes of prepared frame `i`.
    #[inline]
    fn bytes_of(&self, i: usize) -> &[u8] {
        self.bytes_at(i, self.header(i))
    }

    /// The bytes of prepared frame `i` whose header is `mb`.
    #[inline(always)]
    fn bytes_at<'a>(&'a self, i: usize, mb: &'a sys::rte_mbuf) -> &'a [u8] {
        if mb.nb_segs > 1 {
            let start = self.linear_at[i] as usize;
            return &self.linear[start..start + mb.pkt_len as usize];
        }
        // SAFETY: a one-segment mbuf holds data_len bytes at buf_addr + data_off, in host
        // memory (rx_mbufs refuses GPU-memory ports), alive while the burst owns the mbuf,
        // which outlives the returned borrow (see header()).
        unsafe {
            std::slice::from_raw_parts(
                (mb.buf_addr as *const u8).add(mb.data_off as usize),
                mb.data_len as usize,
            )
        }
    }

    /// The bytes of frame `i` (panics when `i >= len()`, like slice indexing).
    pub fn frame(&mut self, i: usize) -> &[u8] {
        self.prepare();
        self.bytes_of(i)
    }

    /// Frame `i`'s descriptor (`offset` is 0: the bytes are in the mbuf, see [`Self::frame`]).
    #[inline]
    fn desc_of(&self, i: usize) -> FrameDesc {
        self.desc_at(self.header(i))
    }

    /// The descriptor of a held frame whose header is `mb`.
    #[inline(always)]
    fn desc_at(&self, mb: &sys::rte_mbuf) -> FrameDesc {
        let has_rss = mb.ol_flags & u64::from(sys::RTE_MBUF_F_RX_RSS_HASH) != 0;
        FrameDesc {
            offset: 0,
            len: mb.pkt_len,
            wire_len: mb.pkt_len,
            port: self.port,
            queue: self.queue,
            rss_hash: if has_rss {
                // SAFETY: reading the rss member of the hash union (a plain u32) when the PMD
                // flagged it valid.
                unsafe { mb.__bindgen_anon_2.hash.rss }
            } else {
                0
            },
            mark: nic_mark(mb),
            timestamp_ns: self.timestamp_ns,
        }
    }

    /// Gives frame `i` the steering mark `mark` the way a NIC's rte_flow MARK does (the id in
    /// `hash.fdir.hi`, `RTE_MBUF_F_RX_FDIR | RTE_MBUF_F_RX_FDIR_ID`), so software steering's
    /// mark reaches [`Self::desc`] like the NIC's (panics when `i >= len()`).
    pub fn set_mark(&mut self, i: usize, mark: u32) {
        assert!(i < self.len, "frame {i} of a burst of {}", self.len);
        let m = self.mbufs[i];
        let flags = u64::from(sys::RTE_MBUF_F_RX_FDIR) | u64::from(sys::RTE_MBUF_F_RX_FDIR_ID);
        // SAFETY: an owned mbuf (i < len); only its header is written. fdir.hi shares no byte
        // with the RSS hash (fdir.lo), which stays valid.
        unsafe {
            (*m).ol_flags |= flags;
            (*m).__bindgen_anon_2.hash.fdir.hi = mark;
        }
    }

    /// Frame `i`'s descriptor (`offset` is 0: the bytes are in the mbuf, see [`Self::frame`]).
    pub fn desc(&mut self, i: usize) -> FrameDesc {
        self.prepare();
        self.desc_of(i)
    }

    /// Every frame's descriptor and bytes, in order: what `Pipeline::run_frames` takes.
    pub fn frames(&mut self) -> impl ExactSizeIterator<Item = (FrameDesc, &[u8])> + '_ {
        self.prepare();
        let me = &*self;
        me.mbufs[..me.len].iter().enumerate().map(move |(i, &m)| {
            // SAFETY: m is an mbuf this burst owns (see header()); the borrow of self the
            // iterator holds keeps it from being sent or freed.
            let mb = unsafe { &*m };
            (me.desc_at(mb), me.bytes_at(i, mb))
        })
    }

    /// Runs `f` over every frame's descriptor and bytes, writable where the frame is (the
    /// mbuf's data, and up to `room` bytes of its tailroom for a stage that grows the frame:
    /// [`crate::stage::Pipeline::frame_room`]), then gives each mbuf its descriptor's new
    /// `len` where a stage changed it: the rewritten frame is the received mbuf, sent as it is
    /// (no copy). A chain (a frame larger than one buffer) is rewritten in a copy and written
    /// back into its segments, the last growing into its tailroom; one that cannot take its
    /// new length keeps the received bytes and is reported by [`MbufBurst::unwritten`].
    pub fn rewrite<R>(
        &mut self,
        room: usize,
        f: impl FnOnce(FramesMut<'_>) -> R,
    ) -> Result<R, PortError> {
        self.prepare();
        let mut chains = std::mem::take(&mut self.chain_rw);
        chains.clear();
        self.unwritten_n = 0;
        if self.chained > 0 {
            self.copy_chains_for_rewrite(&mut chains, room);
        }
        let mut descs = std::mem::take(&mut self.descs);
        descs.clear();
        for &m in &self.mbufs[..self.len] {
            // SAFETY: an owned mbuf (see header()); only its header is read.
            descs.push(self.desc_at(unsafe { &*m }));
        }
        let r = f(FramesMut {
            descs: descs.iter_mut(),
            mbufs: self.mbufs[..self.len].iter(),
            room,
            chains: &mut chains[..],
        });
        let mut at = 0usize;
        for (i, d) in descs.iter().enumerate() {
            let m = self.mbufs[i];
            // SAFETY: an owned mbuf; only its header is read here.
            let (segs, old) = unsafe { ((*m).nb_segs, (*m).pkt_len) };
            if segs > 1 {
                let slot = (old as usize + room).min(chains.len() - at);
                let new = (d.len as usize).min(slot);
                // SAFETY: an owned chain, in host memory, written through this burst only.
                if unsafe { write_back(m, &chains[at..at + new]) } {
                    self.bytes = self.bytes - u64::from(old) + new as u64;
                } else {
                    self.unwritten[i] = true;
                    self.unwritten_n += 1;
                }
                at += slot;
                continue;
            }
            // SAFETY: an owned, one-segment mbuf; the new length lies within what FramesMut
            // handed out (data + tailroom), so within the buffer.
            unsafe {
                let mb = &mut *m;
                if d.len != mb.pkt_len {
                    self.bytes = self.bytes - u64::from(mb.pkt_len) + u64::from(d.len);
                    mb.pkt_len = d.len;
                    mb.data_len = d.len as u16;
                }
            }
        }
        if self.chained > 0 {
            // The read copies follow the chains' new bytes.
            self.linear.clear();
            self.chained = 0;
            self.copy_chains();
        }
        self.descs = descs;
        self.chain_rw = chains;
        Ok(r)
    }

    /// Whether frame `i`'s chain could not take what the last [`MbufBurst::rewrite`] made of
    /// it (it grew past the last segment's buffer): the mbuf holds the frame as received, so
    /// it must not be sent as rewritten. Valid until the burst next changes.
    pub fn unwritten(&self, i: usize) -> bool {
        self.unwritten_n > 0 && i < self.len && self.unwritten[i]
    }

    /// Copies each chained frame's bytes, and `room` zero bytes after them, into `chains`.
    #[cold]
    fn copy_chains_for_rewrite(&mut self, chains: &mut Vec<u8>, room: usize) {
        for i in 0..self.len {
            self.unwritten[i] = false;
            if self.is_chained(i) {
                chains.extend_from_slice(self.bytes_of(i));
                chains.resize(chains.len() + room, 0);
            }
        }
    }

    /// Writes `bytes` as frame `i` into its own mbuf (a copy of the frame rewritten
    /// elsewhere, e.g. on the GPU, back into the mbuf it arrived in, so that mbuf is what is
    /// sent): the mbuf's data becomes `bytes`, its length theirs; a chain's segments take them
    /// in turn, the last growing into its tailroom. `Err` for bytes that do not fit the
    /// mbuf's buffer after its headroom (a chain's: its segments and the last one's tailroom). Every reference to the mbuf sees
    /// the new bytes (a mirror copy shared before this call too).
    pub fn write_frame(&mut self, i: usize, bytes: &[u8]) -> Result<(), PortError> {
        assert!(i < self.len, "frame {i} of a burst of {}", self.len);
        self.prepare();
        let m = self.mbufs[i];
        let (room, segs, old, data) = {
            // SAFETY: an owned mbuf (i < len); its header is read (the borrow ends here).
            let mb = unsafe { &*m };
            let room = usize::from(mb.buf_len).saturating_sub(usize::from(mb.data_off));
            let data = (mb.buf_addr as *mut u8).wrapping_add(usize::from(mb.data_off));
            (room, mb.nb_segs, u64::from(mb.pkt_len), data)
        };
        if segs > 1 {
            // SAFETY: an owned chain in host memory, written through this burst only.
            if !unsafe { write_back(m, bytes) } {
                return Err(config_err(format!(
                    "frame {i}: {} bytes do not fit its chain of {segs} buffers",
                    bytes.len()
                )));
            }
            self.bytes = self.bytes - old + bytes.len() as u64;
            // The chain's read copy follows its new bytes: in place when the length is the
            // same, else appended (the old copy is left unused until the burst is emptied).
            let at = self.linear_at[i] as usize;
            if bytes.len() as u64 == old {
                self.linear[at..at + bytes.len()].copy_from_slice(bytes);
            } else {
                self.linear_at[i] = self.linear.len() as u32;
                self.linear.extend_from_slice(bytes);
            }
            return Ok(());
        }
        if bytes.len() > room || bytes.len() > usize::from(u16::MAX) {
            return Err(config_err(format!(
                "frame {i}: {} bytes do not fit its mbuf ({room} bytes after the headroom)",
                bytes.len()
            )));
        }
        // SAFETY: a one-segment mbuf in host memory (rx_mbufs refuses GPU-memory ports) owned
        // by this burst: bytes.len() <= room bytes from buf_addr + data_off (`data`) lie inside
        // its buffer (`copy`: `bytes` may be this very mbuf's, read through a mirror copy's
        // reference). The lengths then name the bytes written.
        unsafe {
            std::ptr::copy(bytes.as_ptr(), data, bytes.len());
            (*m).data_len = bytes.len() as u16;
            (*m).pkt_len = bytes.len() as u32;
        }
        self.bytes = self.bytes - old + bytes.len() as u64;
        Ok(())
    }

    /// A second reference to each frame for which `pick(i)` holds, appended to `into` (which
    /// must hold frames of the same receive call or none): one frame's mbuf is then sent to two
    /// ports (the output and the mirror port), each send or free taking one reference; the
    /// buffer goes back to its pool after the last. Returns how many were shared.
    pub fn share_into(&mut self, into: &mut MbufBurst, pick: impl FnMut(usize) -> bool) -> usize {
        self.append_into(into, pick, true)
    }

    /// Moves each frame for which `pick(i)` holds (`i` = its index before this call) to the end
    /// of `into` (frames of the same receive call or none), without touching its reference
    /// count: `into` owns it from here, this burst closes the gap. Splits one receive call's
    /// frames by output port. Returns how many moved.
    pub fn move_into(
        &mut self,
        into: &mut MbufBurst,
        mut pick: impl FnMut(usize) -> bool,
    ) -> usize {
        let room = MAX_BURST.saturating_sub(into.len);
        let mut chosen = [false; MAX_BURST];
        let mut n = 0;
        for (i, c) in chosen.iter_mut().enumerate().take(self.len) {
            if n < room && pick(i) {
                *c = true;
                n += 1;
            }
        }
        self.append_into(into, |i| chosen[i], false);
        self.compact(|i| chosen[i], false);
        n
    }

    /// Appends the frames `pick` selects to `into`: a second reference each (`share`), or the
    /// same one (the caller then forgets them here).
    fn append_into(
        &mut self,
        into: &mut MbufBurst,
        mut pick: impl FnMut(usize) -> bool,
        share: bool,
    ) -> usize {
        self.prepare();
        if into.is_empty() {
            into.port = self.port;
            into.queue = self.queue;
            into.timestamp_ns = self.timestamp_ns;
            into.may_chain = self.may_chain;
            into.prepared = true;
            into.bytes = 0;
            into.chained = 0;
            into.linear.clear();
        }
        for p in &self.pools {
            if !into.pools.iter().any(|q| Arc::ptr_eq(p, q)) {
                into.pools.push(Arc::clone(p));
            }
        }
        into.src = self.src;
        let mut n = 0;
        for i in 0..self.len {
            if !pick(i) || into.len >= MAX_BURST {
                continue;
            }
            let m = self.mbufs[i];
            if share {
                // SAFETY: an owned mbuf; one more reference on each of its segments, owned by
                // `into` from here (freed or sent through it).
                unsafe { sys::pw_rte_pktmbuf_refcnt_update(m, 1) };
            }
            // SAFETY: as above, header only.
            let mb = unsafe { &*m };
            into.bytes += u64::from(mb.pkt_len);
            if mb.nb_segs > 1 {
                // Its bytes for reading: the chain's copy in this burst.
                into.linear_at[into.len] = into.linear.len() as u32;
                let at = self.linear_at[i] as usize;
                let copy = self.linear[at..at + mb.pkt_len as usize].to_vec();
                into.linear.extend_from_slice(&copy);
                into.chained += 1;
            }
            into.mbufs[into.len] = m;
            into.len += 1;
            n += 1;
        }
        n
    }

    /// The reference count of frame `i`'s mbuf (tests: a shared frame has two).
    pub fn refcnt(&self, i: usize) -> u16 {
        // SAFETY: an owned mbuf; its header is read.
        unsafe { sys::pw_rte_mbuf_refcnt_read(self.mbufs[..self.len][i]) }
    }

    /// Frame `i`'s mbuf address (tests: the mbuf sent is the one received).
    pub fn mbuf_addr(&self, i: usize) -> usize {
        self.mbufs[..self.len][i] as usize
    }

    /// The address of frame `i`'s first byte where it lies in one mbuf (its pool's memory:
    /// with `gpu_buffers: pinned`, the address the GPU reads it at too); `None` for a chain,
    /// whose bytes lie in several buffers.
    pub fn data_addr(&self, i: usize) -> Option<u64> {
        let mb = self.header(i);
        (mb.nb_segs <= 1).then(|| mb.buf_addr as u64 + u64::from(mb.data_off))
    }

    /// Frees frame `i` (a verdict dropped it) and closes the gap: later frames move down one.
    pub fn drop_frame(&mut self, i: usize) {
        assert!(i < self.len, "frame {i} of a burst of {}", self.len);
        self.remove_where(|j| j == i);
    }

    /// Keeps the frames for which `keep(i)` is true (`i` = the frame's index before this call,
    /// so it lines up with the verdicts of a pipeline run over this burst) and frees the rest
    /// with one bulk free. Returns how many were freed.
    pub fn retain(&mut self, mut keep: impl FnMut(usize) -> bool) -> usize {
        self.remove_where(|i| !keep(i))
    }

    /// Frees every frame.
    pub fn clear(&mut self) {
        if self.len > 0 {
            // SAFETY: mbufs[..len] are owned by this burst; rte_pktmbuf_free_bulk takes chains
            // and mbufs of any pool (their pools are alive: `pools`).
            unsafe { sys::rte_pktmbuf_free_bulk(self.mbufs.as_mut_ptr(), self.len as u32) };
        }
        self.forget_all();
    }

    /// Forgets every frame (they were sent or freed).
    fn forget_all(&mut self) {
        self.len = 0;
        self.prepared = true;
        self.bytes = 0;
        self.chained = 0;
        self.linear.clear();
    }

    /// Whether any frame held is a chain (one header read per frame).
    #[inline]
    fn any_chained(&self) -> bool {
        self.mbufs[..self.len].iter().any(|&m| {
            // SAFETY: an owned mbuf; only its header is read.
            unsafe { (*m).nb_segs > 1 }
        })
    }

    /// Frees the chained frames (see [`DpdkTx::tx_mbufs`]); returns how many.
    #[cold]
    fn remove_chains(&mut self) -> usize {
        let chained: Vec<bool> = (0..self.len).map(|i| self.is_chained(i)).collect();
        self.remove_where(|i| chained[i])
    }

    /// Frees the frames for which `gone(i)` holds and compacts the arrays.
    #[inline]
    fn remove_where(&mut self, gone: impl FnMut(usize) -> bool) -> usize {
        // Usually every frame stays: one test per frame, nothing moved.
        self.compact(gone, true)
    }

    /// Takes the frames for which `gone(i)` holds out of the arrays, freeing them (`free`) or
    /// not (they were moved to another burst).
    #[inline]
    fn compact(&mut self, mut gone: impl FnMut(usize) -> bool, free: bool) -> usize {
        match (0..self.len).find(|&i| gone(i)) {
            None => 0,
            Some(first) => self.remove_from(first, gone, free),
        }
    }

    /// [`Self::compact`] from frame `first`, which goes (`gone` is asked about the later
    /// frames only).
    #[cold]
    fn remove_from(
        &mut self,
        first: usize,
        mut gone: impl FnMut(usize) -> bool,
        free: bool,
    ) -> usize {
        let mut freed = std::mem::take(&mut self.freed);
        freed.clear();
        let mut w = first;
        for r in first..self.len {
            let m = self.mbufs[r];
            if r == first || gone(r) {
                if self.prepared {
                    // SAFETY: an owned mbuf; only its header is read.
                    let mb = unsafe { &*m };
                    self.bytes -= u64::from(mb.pkt_len);
                    if mb.nb_segs > 1 {
                        self.chained -= 1;
                    }
                }
                freed.push(m);
            } else {
                self.mbufs[w] = m;
                self.linear_at[w] = self.linear_at[r];
                w += 1;
            }
        }
        self.len = w;
        let nf = freed.len();
        if nf > 0 && free {
            // SAFETY: the nf mbufs were owned by this burst and are no longer in its arrays.
            unsafe { sys::rte_pktmbuf_free_bulk(freed.as_mut_ptr(), nf as u32) };
        }
        self.freed = freed;
        nf
    }

    #[cold]
    fn hold_new_pools(&mut self, pools: &Arc<PortPools>) {
        if !self.pools.iter().any(|p| Arc::ptr_eq(p, pools)) {
            self.pools.push(Arc::clone(pools));
        }
        self.src = Arc::as_ptr(pools);
    }
}

/// What [`DpdkTx::tx_mbufs`] did with a burst (the burst is empty afterwards).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MbufTx {
    /// Frames the device took.
    pub sent: usize,
    /// Frames freed instead (device full after the retries: `tx_full`; a chain the device
    /// cannot send: `tx_oversize`), counted in the port's counters.
    pub dropped: usize,
}

impl DpdkRx {
    /// Receives up to `max` frames (at most the port's `burst_size`) into `burst`, which must
    /// be empty (an error otherwise: nothing is freed behind the caller's back), without
    /// copying them: polls this handle's queues round robin until one gives frames. Software steering (rules the NIC refused) applies as on
    /// the copying path: a drop fate frees the frame (counted `rx_steering_drop`); a queue fate
    /// is not applied (the frame stays on the queue it arrived on, see docs/dpdk.md). Refuses a
    /// port whose RX buffers are in GPU memory.
    #[inline]
    pub fn rx_mbufs(&mut self, burst: &mut MbufBurst, max: usize) -> Result<RxStatus, PortError> {
        eal::register_thread();
        if self.zc.on_gpu || !burst.is_empty() {
            return Err(self.rx_mbufs_refusal(burst));
        }
        let want = max.min(self.burst).min(MAX_BURST);
        if want == 0 {
            return Ok(RxStatus::Idle);
        }
        if burst.src != self.zc.pools {
            burst.hold_new_pools(&self.port.inner.pools);
        }
        let nq = self.queues.len();
        for _ in 0..nq {
            let q = self.queues[self.next];
            // No `%`: an integer division per poll costs more than the rest of the bookkeeping.
            self.next += 1;
            if self.next == nq {
                self.next = 0;
            }
            // SAFETY: started port, valid queue; mbufs has room for `want` <= MAX_BURST
            // pointers.
            let n = unsafe {
                sys::eth_rx_burst(self.zc.port_id, q, burst.mbufs.as_mut_ptr(), want as u16)
            } as usize;
            if n == 0 {
                continue;
            }
            self.zc_fresh = true;
            burst.len = n;
            burst.prepared = false;
            burst.may_chain = self.zc.rx_may_chain;
            burst.port = self.port.index;
            burst.queue = q;
            if let Some(sw) = self.steering.active() {
                burst.prepare();
                let mut drop = [false; MAX_BURST];
                for (i, d) in drop.iter_mut().enumerate().take(n) {
                    // A rule the NIC refused: its drop and its mark, as the NIC would have
                    // applied them (a queue fate cannot move a frame on this path).
                    let decision = sw.decide(burst.bytes_of(i));
                    *d = matches!(decision.fate, Some(super::SwFate::Drop));
                    if let Some(mark) = decision.mark {
                        burst.set_mark(i, mark);
                    }
                }
                let gone = burst.remove_where(|i| drop[i]);
                self.port
                    .inner
                    .counters
                    .rx_steering_drop
                    .fetch_add(gone as u64, Ordering::Relaxed);
            }
            // As on the copying path: every frame received counts.
            self.hc.rx_frames.add(n as u64);
            return Ok(RxStatus::Frames(burst.len));
        }
        // Nothing on any queue: the idle time runs from the first empty poll after frames.
        let now = now_ns();
        if std::mem::take(&mut self.zc_fresh) {
            self.last_frame_ns = now;
        }
        match self.idle_end {
            Some(d) if now.saturating_sub(self.last_frame_ns) >= d.as_nanos() as u64 => {
                Ok(RxStatus::End)
            }
            _ => Ok(RxStatus::Idle),
        }
    }

    #[cold]
    fn rx_mbufs_refusal(&self, burst: &MbufBurst) -> PortError {
        let name = &self.port.inner.setup.name;
        if self.zc.on_gpu {
            config_err(format!(
                "port {name}: rx_mbufs reads frames on the CPU, but RX buffers are in GPU memory (use rx_gpu)"
            ))
        } else {
            config_err(format!(
                "port {name}: rx_mbufs needs an empty burst ({} frames still held: send or clear them first)",
                burst.len()
            ))
        }
    }

    /// The idle time after which this handle reports the end of input (`idle_end_ms`).
    pub fn idle_end(&self) -> Option<Duration> {
        self.idle_end
    }
}

impl DpdkTx {
    #[cold]
    fn lend_pools(&mut self, burst: &MbufBurst) -> Result<(), PortError> {
        let inner = &self.port.inner;
        for p in &burst.pools {
            let addr = Arc::as_ptr(p);
            if !self.lent_pools.contains(&addr) {
                if !Arc::ptr_eq(p, &inner.pools) {
                    match inner.foreign_pools.lock() {
                        Ok(mut v) => v.push(Arc::clone(p)),
                        Err(_) => {
                            return Err(config_err(format!(
                                "port {}: pool registry poisoned",
                                inner.setup.name
                            )))
                        }
                    }
                }
                self.lent_pools.push(addr);
            }
        }
        self.last_lent = burst.src;
        Ok(())
    }

    /// Sends every frame of `burst` as it is (the mbufs go to the device; nothing is copied):
    /// retries `tx_retries` times while the device takes nothing, then frees what it did not
    /// take and counts it `tx_full`; chains the device cannot send are freed and counted
    /// `tx_oversize` first. Nothing is dropped silently: `MbufTx::dropped` and the port's
    /// counters say how many. The burst is empty afterwards.
    #[inline]
    pub fn tx_mbufs(&mut self, burst: &mut MbufBurst) -> Result<MbufTx, PortError> {
        eal::register_thread();
        // The device returns the mbufs to their pools whenever it is done with them, up to its
        // close: keep those pools alive as long as this port (checked once per new source).
        if self.last_lent != burst.src && !burst.src.is_null() {
            self.lend_pools(burst)?;
        }
        let mut dropped = 0usize;
        // A device without MULTI_SEGS gets no chain. Known for a prepared burst; else one
        // header read per frame, only for bursts from a port that may deliver chains (a header
        // read right after the PMD wrote it costs ~12% of forwarding on net_null).
        let check = if burst.prepared {
            burst.chained > 0
        } else {
            burst.may_chain
        };
        if !self.zc.tx_multi_seg && check && burst.any_chained() {
            let oversize = burst.remove_chains();
            self.port
                .inner
                .counters
                .tx_oversize
                .fetch_add(oversize as u64, Ordering::Relaxed);
            dropped += oversize;
        }
        let k = burst.len;
        let port = self.zc.port_id;
        let mut sent = 0usize;
        let mut tries = 0u32;
        while sent < k {
            // SAFETY: mbufs[sent..k] are owned mbufs; the PMD takes ownership of the ones it
            // accepts (they leave the burst below).
            let got = unsafe {
                sys::eth_tx_burst(
                    port,
                    self.queue,
                    burst.mbufs.as_mut_ptr().add(sent),
                    (k - sent).min(u16::MAX as usize) as u16,
                )
            } as usize;
            sent += got;
            if got == 0 {
                tries += 1;
                if tries > self.zc.tx_retries {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        if sent < k {
            // SAFETY: the device did not take mbufs[sent..k]: still owned by the burst; freed
            // here and forgotten by the burst below.
            unsafe {
                sys::rte_pktmbuf_free_bulk(burst.mbufs.as_mut_ptr().add(sent), (k - sent) as u32)
            };
            self.port
                .inner
                .counters
                .tx_full
                .fetch_add((k - sent) as u64, Ordering::Relaxed);
            dropped += k - sent;
        }
        // Sent mbufs belong to the device now, unsent ones are freed: the burst holds nothing.
        burst.forget_all();
        self.hc.tx_frames.add(sent as u64);
        Ok(MbufTx { sent, dropped })
    }
}
