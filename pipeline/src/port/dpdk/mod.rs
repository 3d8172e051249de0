//! The `dpdk` port: any DPDK poll-mode driver (net_pcap, net_null, net_ring, memif, af_xdp,
//! af_packet, tap, mlx5, ...) as a pktwarp port. Behind the cargo feature `dpdk`.
//!
//! One [`DpdkPort`] owns one ethdev: it initialises the EAL on first use (once per process),
//! creates the device when given a `vdev` devargs string, configures RX/TX queues with RSS and
//! offloads chosen from what the device reports, and hands out [`DpdkRx`] / [`DpdkTx`] handles
//! that implement [`RxPort`](crate::port::RxPort) / [`TxPort`](crate::port::TxPort). The device
//! is stopped and closed when the port and every handle are dropped. See docs/dpdk.md.
//!
//! - [`options`]: the `dpdk:` config block; [`eal`]: EAL set-up and the control-path lock;
//!   [`open`]: opening a port (device, offloads, RSS, pools, queues, start);
//! - [`rx`] / [`tx`]: the copying RX and TX handles; [`mbuf`]: zero-copy forwarding;
//!   [`send`]: sending received mbufs split by output port (both executors' zero-copy paths);
//!   [`split`]: one receive thread per RX queue;
//! - [`flow`]: steering rules (rte_flow, software fallback); [`gpu`]: GPUDirect RX buffers;
//! - here: what a port and its handles share, and the port's counters.

pub mod eal;
pub mod flow;
pub mod gpu;
pub mod mbuf;
pub mod open;
pub mod options;
pub mod rx;
pub mod send;
pub mod split;
pub mod timed;
pub mod tx;

use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The raw bindings (for an application that needs a DPDK call pktwarp does not wrap).
pub use dpdk_sys as sys;

use crate::port::PortError;

pub use flow::{FlowOutcome, SoftwareSteering, SwDecision, SwFate};
pub use gpu::{BufferPlacement, GpuBuffers};
pub use mbuf::{MbufBurst, MbufTx};
pub use open::{PortSetup, STANDARD_RSS_KEY};
pub use options::DpdkPortOptions;
pub use rx::{DpdkRx, GpuFrame, GpuFrames};
pub use send::{BurstSent, MbufDest, MbufOuts, NOWHERE};
pub use split::DpdkQueueRx;
pub use tx::DpdkTx;

use rx::now_ns;

/// Most frames one `rte_eth_rx_burst` / `rte_eth_tx_burst` call moves.
pub const MAX_BURST: usize = 512;

/// pktwarp-side counters of a port (the device's own are in [`DpdkPort::counters`]).
#[derive(Debug, Default)]
struct PortCounters {
    rx_frames: AtomicU64,
    rx_bytes: AtomicU64,
    tx_frames: AtomicU64,
    tx_bytes: AtomicU64,
    /// The device took only part of a burst after the retries.
    tx_full: AtomicU64,
    /// No mbuf left in the TX pool.
    tx_nombuf: AtomicU64,
    /// Frame longer than one mbuf and the device cannot chain segments.
    tx_oversize: AtomicU64,
    /// Timed frames held in software until their send time (no Tx timestamp offload).
    tx_paced: AtomicU64,
    /// Timed frames whose send time had passed when offered: sent at once.
    tx_late: AtomicU64,
    /// Timed frames refused: the send time lay more than `tx_max_hold_ms` ahead.
    tx_horizon: AtomicU64,
    /// Dropped on receive by a steering rule applied in software.
    rx_steering_drop: AtomicU64,
    /// GPU-memory frames the CPU path could not copy out (CUDA error).
    rx_gpu_copy_error: AtomicU64,
}

/// A port's two mbuf pools, freed when the last holder lets go: the port itself, an
/// [`MbufBurst`] holding mbufs received from it, or another port whose TX queues were handed
/// its mbufs by [`DpdkTx::tx_mbufs`] (zero-copy forwarding), so no pool is freed while a
/// device may still return mbufs to it.
pub(crate) struct PortPools {
    rx: *mut sys::rte_mempool,
    tx: *mut sys::rte_mempool,
    /// The memory behind an external-buffer RX pool (GPU or pinned host memory): dropped after
    /// Drop::drop freed the pools (field drops follow it), so pool before unregister before
    /// free, however long an [`MbufBurst`] or another port kept the pools.
    ext: Option<gpu::ExtMemory>,
}

// SAFETY: DPDK mempools are thread-safe (multi-producer / multi-consumer rings with per-lcore
// caches); the pointers are only freed in Drop, by the last owner.
unsafe impl Send for PortPools {}
// SAFETY: as above.
unsafe impl Sync for PortPools {}

impl Drop for PortPools {
    fn drop(&mut self) {
        // SAFETY: the last reference: the owning port is closed (its Drop ran first: PortInner
        // holds this Arc) and every port that transmitted these mbufs is closed too (they hold
        // this Arc in `foreign_pools` until their own close), so no queue holds their mbufs.
        unsafe {
            sys::rte_mempool_free(self.rx);
            sys::rte_mempool_free(self.tx);
        }
    }
}

/// One handle's counts (zero-copy frames, copied frames and bytes received): single writer
/// (the handle's thread), so an add is a plain load + store, not a locked instruction per
/// burst; [`DpdkPort::counters`] sums every handle's into the port's `pktwarp_*` counters.
/// Cache-line aligned: the per-queue receive threads of one port each write their own.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct HandleCounters {
    pub(crate) rx_frames: crate::counters::Counter,
    pub(crate) rx_bytes: crate::counters::Counter,
    pub(crate) tx_frames: crate::counters::Counter,
}

/// What a handle's zero-copy calls read on every burst, copied out of [`PortInner`] at the
/// handle's creation (all fixed once the port is open).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ZcFacts {
    pub(crate) port_id: u16,
    pub(crate) on_gpu: bool,
    pub(crate) tx_multi_seg: bool,
    pub(crate) rx_may_chain: bool,
    pub(crate) tx_retries: u32,
    /// The port's pools (address only; the handle's `port` keeps them alive).
    pub(crate) pools: *const PortPools,
}

/// What the handles share; dropping the last one stops and closes the device.
struct PortInner {
    setup: PortSetup,
    /// Dropped after Drop::drop closed the device; the memory of an external-buffer RX pool
    /// (GPU or pinned host memory) is freed with them, after them.
    pools: Arc<PortPools>,
    /// Pools of other ports whose mbufs this port's TX queues were given (zero-copy), kept
    /// alive until this device is closed.
    foreign_pools: std::sync::Mutex<Vec<Arc<PortPools>>>,
    /// Every handle's zero-copy counters (see [`HandleCounters`]).
    handle_counters: std::sync::Mutex<Vec<Arc<HandleCounters>>>,
    rx_pool: *mut sys::rte_mempool,
    tx_pool: *mut sys::rte_mempool,
    tx_data_room: u16,
    /// devargs name of a device this port created (removed again on close).
    created_vdev: Option<String>,
    counters: PortCounters,
    flows: flow::FlowTable,
    opts: DpdkPortOptions,
}

// SAFETY: the raw pointers are DPDK mempools, which are thread-safe (multi-producer /
// multi-consumer rings with per-lcore caches); each queue is used by one handle at a time.
unsafe impl Send for PortInner {}
// SAFETY: as above; shared state other than the pools is atomics or behind locks.
unsafe impl Sync for PortInner {}

impl Drop for PortInner {
    fn drop(&mut self) {
        let _control = eal::control();
        let port = self.setup.port_id;
        self.flows.destroy_all(port);
        // SAFETY: the port was started by DpdkPort::open and no handle polls it any more (this
        // is the last reference).
        unsafe {
            let rc = sys::rte_eth_dev_stop(port);
            if rc != 0 {
                tracing::warn!(port, "dpdk: rte_eth_dev_stop: {}", eal::strerror(rc));
            }
            let rc = sys::rte_eth_dev_close(port);
            if rc != 0 {
                tracing::warn!(port, "dpdk: rte_eth_dev_close: {}", eal::strerror(rc));
            }
        }
        if let Some(name) = &self.created_vdev {
            if let Ok(c) = CString::new(name.as_str()) {
                // SAFETY: valid C strings; the ethdev on this device is closed.
                let rc = unsafe { sys::rte_eal_hotplug_remove(c"vdev".as_ptr(), c.as_ptr()) };
                if rc != 0 && rc != -(libc::ENOENT) {
                    tracing::debug!(device = %name, "dpdk: hotplug remove: {}", eal::strerror(rc));
                }
            }
        }
        // The pools are freed by PortPools' Drop when `pools` (dropped right after this body)
        // is the last reference; their external memory (if any) right after them.
        tracing::info!(port, name = %self.setup.name, "dpdk: port closed");
    }
}

/// An open DPDK port. Clone handles out of it with [`DpdkPort::rx`] / [`DpdkPort::tx`].
#[derive(Clone)]
pub struct DpdkPort {
    inner: Arc<PortInner>,
    /// pktwarp's index of this port (FrameDesc::port).
    index: u16,
}

fn cstr_field(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: DPDK gives NUL-terminated static strings (driver names).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn config_err(what: impl std::fmt::Display) -> PortError {
    PortError::Config(format!("dpdk: {what}"))
}

impl DpdkPort {
    /// How the port was set up (queues, RSS, offloads, buffer placement).
    pub fn setup(&self) -> &PortSetup {
        &self.inner.setup
    }

    /// Where received frames land, and why: logged at open, reported here.
    pub fn buffer_placement(&self) -> BufferPlacement {
        self.inner.setup.placement
    }

    /// The address range of the RX buffers' memory where it is not an ordinary pool's (GPU
    /// memory, or pinned host memory): `(start, bytes)`.
    pub fn rx_buffers(&self) -> Option<(u64, usize)> {
        self.inner.pools.ext.as_ref().map(gpu::ExtMemory::range)
    }

    /// Whether the link is up now (memif: the peer is connected; af_xdp: the interface is up).
    pub fn link_up(&self) -> bool {
        let mut link = sys::rte_eth_link::default();
        // SAFETY: valid port, writable struct.
        let rc = unsafe { sys::rte_eth_link_get_nowait(self.inner.setup.port_id, &mut link) };
        rc == 0 && link.link_status() != 0
    }

    /// Waits up to `timeout` for the link to come up; returns whether it did.
    pub fn wait_link_up(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.link_up() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// An RX handle polling `queues` round robin (all queues when empty).
    pub fn rx(&self, queues: &[u16]) -> Result<DpdkRx, PortError> {
        let all: Vec<u16> = (0..self.inner.setup.rx_queues).collect();
        let queues = if queues.is_empty() {
            all
        } else {
            queues.to_vec()
        };
        if let Some(q) = queues.iter().find(|q| **q >= self.inner.setup.rx_queues) {
            return Err(config_err(format!(
                "port {} has {} RX queues; no queue {q}",
                self.inner.setup.name, self.inner.setup.rx_queues
            )));
        }
        Ok(DpdkRx {
            label: format!("dpdk:{}", self.inner.setup.name),
            port: self.clone(),
            queues,
            next: 0,
            burst: (self.inner.opts.burst_size as usize).min(MAX_BURST),
            mbufs: vec![std::ptr::null_mut(); MAX_BURST],
            last_frame_ns: now_ns(),
            zc_fresh: false,
            idle_end: self.inner.opts.idle_end_ms.map(Duration::from_millis),
            steering: self.inner.flows.software(),
            hc: self.handle_counters(),
            zc: self.zc_facts(),
        })
    }

    fn zc_facts(&self) -> ZcFacts {
        let s = &self.inner.setup;
        ZcFacts {
            port_id: s.port_id,
            on_gpu: s.placement == BufferPlacement::GpuDirect,
            tx_multi_seg: s.tx_multi_seg,
            rx_may_chain: s.rx_may_chain,
            tx_retries: self.inner.opts.tx_retries,
            pools: Arc::as_ptr(&self.inner.pools),
        }
    }

    /// A fresh set of single-writer counters for a new handle, summed by `counters()`.
    fn handle_counters(&self) -> Arc<HandleCounters> {
        let hc = Arc::new(HandleCounters::default());
        if let Ok(mut v) = self.inner.handle_counters.lock() {
            v.push(Arc::clone(&hc));
        }
        hc
    }

    /// A TX handle on `queue`.
    pub fn tx(&self, queue: u16) -> Result<DpdkTx, PortError> {
        if queue >= self.inner.setup.tx_queues {
            return Err(config_err(format!(
                "port {} has {} TX queues; no queue {queue}",
                self.inner.setup.name, self.inner.setup.tx_queues
            )));
        }
        Ok(DpdkTx {
            label: format!("dpdk:{}", self.inner.setup.name),
            port: self.clone(),
            queue,
            burst: (self.inner.opts.burst_size as usize).min(MAX_BURST),
            mbufs: vec![std::ptr::null_mut(); MAX_BURST],
            stash: Vec::with_capacity(MAX_BURST),
            lent_pools: Vec::new(),
            last_lent: std::ptr::null(),
            hc: self.handle_counters(),
            zc: self.zc_facts(),
            held: timed::Held::default(),
        })
    }

    /// Mbufs of the port's two pools (receive, and transmit copies) in use now: held by its
    /// RX queues' descriptors, by bursts, or by a device that has not sent them yet (per-lcore
    /// caches count as free). Back at its value before a run once the run freed or sent every
    /// mbuf it received: a leak check.
    pub fn mbufs_in_use(&self) -> u64 {
        let p = &self.inner.pools;
        // SAFETY: the pools are alive while the port is (PortInner holds its PortPools); the
        // count only reads each pool's ring and caches.
        let (rx, tx) = unsafe {
            (
                sys::rte_mempool_in_use_count(p.rx),
                sys::rte_mempool_in_use_count(p.tx),
            )
        };
        u64::from(rx) + u64::from(tx)
    }

    /// The ethdev's basic stats, its extended stats, and pktwarp's own port counters, as
    /// (name, value) pairs: `ethdev_<field>`, `xstat_<DPDK name>`, `pktwarp_<counter>`.
    pub fn counters(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let port = self.inner.setup.port_id;
        let mut st = sys::rte_eth_stats::default();
        // SAFETY: valid port, writable struct.
        if unsafe { sys::rte_eth_stats_get(port, &mut st) } == 0 {
            for (k, v) in [
                ("ipackets", st.ipackets),
                ("opackets", st.opackets),
                ("ibytes", st.ibytes),
                ("obytes", st.obytes),
                ("imissed", st.imissed),
                ("ierrors", st.ierrors),
                ("oerrors", st.oerrors),
                ("rx_nombuf", st.rx_nombuf),
            ] {
                out.push((format!("ethdev_{k}"), v));
            }
        }
        out.extend(
            self.xstats()
                .into_iter()
                .map(|(k, v)| (format!("xstat_{k}"), v)),
        );
        let c = &self.inner.counters;
        // Zero-copy handles count frames only (see port::dpdk::mbuf).
        let (mut zrx, mut zrxb, mut ztx) = (0u64, 0u64, 0u64);
        if let Ok(v) = self.inner.handle_counters.lock() {
            for h in v.iter() {
                zrx += h.rx_frames.get();
                zrxb += h.rx_bytes.get();
                ztx += h.tx_frames.get();
            }
        }
        for (k, v) in [
            ("rx_frames", c.rx_frames.load(Ordering::Relaxed) + zrx),
            ("rx_bytes", c.rx_bytes.load(Ordering::Relaxed) + zrxb),
            ("tx_frames", c.tx_frames.load(Ordering::Relaxed) + ztx),
            ("tx_bytes", c.tx_bytes.load(Ordering::Relaxed)),
        ] {
            out.push((format!("pktwarp_{k}"), v));
        }
        for (k, v) in [
            ("tx_full", &c.tx_full),
            ("tx_nombuf", &c.tx_nombuf),
            ("tx_oversize", &c.tx_oversize),
            ("tx_paced", &c.tx_paced),
            ("tx_late", &c.tx_late),
            ("tx_horizon", &c.tx_horizon),
            ("rx_steering_drop", &c.rx_steering_drop),
            ("rx_gpu_copy_error", &c.rx_gpu_copy_error),
        ] {
            out.push((format!("pktwarp_{k}"), v.load(Ordering::Relaxed)));
        }
        let (hw, sw) = self.inner.flows.counts();
        out.push(("pktwarp_flow_rules_hw".into(), hw as u64));
        out.push((
            "pktwarp_steering_in_nic".into(),
            u64::from(self.inner.flows.nic_steers()),
        ));
        out.push(("pktwarp_flow_rules_sw".into(), sw as u64));
        out
    }

    /// The device's extended stats (rte_eth_xstats_get), by DPDK name.
    pub fn xstats(&self) -> Vec<(String, u64)> {
        let port = self.inner.setup.port_id;
        // SAFETY: a NULL array with size 0 asks for the count.
        let n = unsafe { sys::rte_eth_xstats_get_names(port, std::ptr::null_mut(), 0) };
        if n <= 0 {
            return Vec::new();
        }
        let n = n as usize;
        let mut names = vec![sys::rte_eth_xstat_name::default(); n];
        let mut vals = vec![sys::rte_eth_xstat::default(); n];
        // SAFETY: arrays of n elements.
        let got_names =
            unsafe { sys::rte_eth_xstats_get_names(port, names.as_mut_ptr(), n as u32) };
        // SAFETY: arrays of n elements.
        let got_vals = unsafe { sys::rte_eth_xstats_get(port, vals.as_mut_ptr(), n as u32) };
        if got_names < 0 || got_vals < 0 {
            return Vec::new();
        }
        let m = (got_vals as usize).min(n);
        vals[..m]
            .iter()
            .filter_map(|x| {
                let nm = names.get(x.id as usize)?;
                // SAFETY: DPDK NUL-terminates names within RTE_ETH_XSTATS_NAME_SIZE.
                let s = unsafe { CStr::from_ptr(nm.name.as_ptr()) }
                    .to_string_lossy()
                    .into_owned();
                Some((s, x.value))
            })
            .collect()
    }

    /// Installs steering rules in the NIC (rte_flow) where the device accepts them; the rest
    /// are applied in software by the ingest (see [`DpdkPort::software_steering`]). Replaces
    /// the previous set while traffic flows.
    pub fn install_rules(&self, rules: &[flow_rules::steering::SteerRule]) -> Vec<FlowOutcome> {
        self.inner.flows.replace(
            self.inner.setup.port_id,
            &self.inner.setup.name,
            self.default_rss(),
            rules,
        )
    }

    /// Installs the whole rule set in the NIC, or none of it (what `pktwarp run` does): every
    /// rte_flow rule is validated, then all are created; on any refusal the ones created are
    /// destroyed again and the error names the rule and the PMD's reason. On success the NIC
    /// steers every frame ([`DpdkPort::steered_in_nic`]): the RX path steers nothing in
    /// software and the frames carry the NIC's queue and mark. Either way the port's own
    /// software set is empty (on refusal the caller steers in software). Returns the number
    /// of rte_flow rules created.
    pub fn offload_rules(
        &self,
        rules: &[flow_rules::steering::SteerRule],
    ) -> Result<usize, String> {
        self.inner
            .flows
            .offload(self.inner.setup.port_id, self.default_rss(), rules)
    }

    /// The RSS a steering rule without a fate keeps: every RX queue, the port's hash types.
    fn default_rss(&self) -> flow::DefaultRss {
        flow::DefaultRss {
            queues: self.inner.setup.rx_queues,
            types: self.inner.setup.rss_hf,
            symmetric: self.inner.setup.rss_symmetric,
        }
    }

    /// Whether the NIC steers the whole rule set ([`DpdkPort::offload_rules`] took it).
    pub fn steered_in_nic(&self) -> bool {
        self.inner.flows.nic_steers()
    }

    /// The rules the NIC refused, which the ingest must apply in software. Published by one
    /// atomic swap on every [`DpdkPort::install_rules`]; cheap to call per burst.
    pub fn software_steering(&self) -> Arc<SoftwareSteering> {
        self.inner.flows.software().load().clone()
    }
}

/// Appends `len` bytes at `src` to `out`. Frames are mostly small: whole 32-byte moves (the
/// last one overlapping) beat a call into memcpy for them.
///
/// # Safety
/// `src..src + len` is readable memory not inside `out`.
#[inline(always)]
unsafe fn append_bytes(out: &mut Vec<u8>, src: *const u8, len: usize) {
    out.reserve(len);
    // SAFETY: reserve made room for len bytes after out.len(); src is readable for len bytes and
    // not inside `out` (caller), so the ranges do not overlap; the copy initialises those bytes.
    unsafe {
        copy_bytes(out.as_mut_ptr().add(out.len()), src, len);
        out.set_len(out.len() + len);
    }
}

/// Copies `len` bytes (see [`append_bytes`]) into mbuf memory.
///
/// # Safety
/// Both ranges are valid for `len` bytes and do not overlap.
#[inline(always)]
unsafe fn copy_bytes(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: caller guarantees both ranges; 32-byte moves stay within [0, len) for len >= 32.
    unsafe {
        if (32..=256).contains(&len) {
            let mut i = 0;
            while i + 32 <= len {
                let v = std::ptr::read_unaligned(src.add(i) as *const [u8; 32]);
                std::ptr::write_unaligned(dst.add(i) as *mut [u8; 32], v);
                i += 32;
            }
            if i < len {
                let v = std::ptr::read_unaligned(src.add(len - 32) as *const [u8; 32]);
                std::ptr::write_unaligned(dst.add(len - 32) as *mut [u8; 32], v);
            }
        } else {
            std::ptr::copy_nonoverlapping(src, dst, len);
        }
    }
}
