//! The `dpdk` port: any DPDK poll-mode driver (net_pcap, net_null, net_ring, memif, af_xdp,
//! af_packet, tap, mlx5, ...) as a pktwarp port. Behind the cargo feature `dpdk`.
//!
//! One [`DpdkPort`] owns one ethdev: it initialises the EAL on first use (once per process),
//! creates the device when given a `vdev` devargs string, configures RX/TX queues with RSS and
//! offloads chosen from what the device reports, and hands out [`DpdkRx`] / [`DpdkTx`] handles
//! that implement [`RxPort`] / [`TxPort`]. The device is stopped and closed when the port and
//! every handle are dropped. See docs/dpdk.md.

pub mod eal;
pub mod flow;
pub mod gpu;
pub mod mbuf;

use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The raw bindings (for an application that needs a DPDK call pktwarp does not wrap).
pub use dpdk_sys as sys;
use serde::Deserialize;

use crate::burst::{Burst, FrameDesc};
use crate::port::{PortError, RxPort, RxStatus, TxPort};

pub use flow::{FlowOutcome, SoftwareSteering, SwFate};
pub use gpu::{BufferPlacement, GpuBuffers};
pub use mbuf::{MbufBurst, MbufTx};

/// Most frames one `rte_eth_rx_burst` / `rte_eth_tx_burst` call moves.
pub const MAX_BURST: usize = 512;

/// Options of a `dpdk` port (the `dpdk:` block of a port in the YAML config).
///
/// ```yaml
/// dpdk:
///   eal_args: [--no-huge, --no-pci, -m, "512", --file-prefix=pw1, -l, "0"]
///   vdev: "net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap"
///   rx_queues: 1
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DpdkPortOptions {
    /// EAL arguments, without the program name (e.g. `-l 0-1 -a 0000:3b:00.0` or
    /// `--no-huge --no-pci -m 512 --file-prefix=x` for virtual devices). The EAL is set up once
    /// per process, by the first DPDK port opened: later ports give the same list or none.
    #[serde(default)]
    pub eal_args: Vec<String>,
    /// A device to create with `rte_dev_probe`, as devargs: `driver<id>[,key=value...]`, e.g.
    /// `net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap`, `net_null0`, `net_ring0`,
    /// `net_memif0,role=server,socket=/tmp/pw.sock`, `net_af_xdp0,iface=veth0`. The ethdev is
    /// then found by the name before the first comma. Exactly one of `vdev`, `name`, `port_id`.
    #[serde(default)]
    pub vdev: Option<String>,
    /// An ethdev that already exists (a PCI address from `-a`, or a `--vdev` of `eal_args`).
    #[serde(default)]
    pub name: Option<String>,
    /// An ethdev by DPDK port id.
    #[serde(default)]
    pub port_id: Option<u16>,
    /// RX queues (RSS spreads over them when more than one and the device can hash).
    #[serde(default = "one")]
    pub rx_queues: u16,
    /// TX queues (one per transmitting thread).
    #[serde(default = "one")]
    pub tx_queues: u16,
    /// RX descriptors per queue (adjusted to the device's limits).
    #[serde(default = "descriptors")]
    pub rx_descriptors: u16,
    /// TX descriptors per queue (adjusted to the device's limits).
    #[serde(default = "descriptors")]
    pub tx_descriptors: u16,
    /// mbufs in each of the port's two pools (RX, TX); 2^q - 1 is the most memory-efficient.
    #[serde(default = "mempool_size")]
    pub mempool_size: u32,
    /// Per-lcore mempool cache (0 disables it).
    #[serde(default = "mempool_cache")]
    pub mempool_cache: u32,
    /// Frames per `rte_eth_rx_burst` / `rte_eth_tx_burst` call (1..=512).
    #[serde(default = "burst_size")]
    pub burst_size: u16,
    /// Put the port in promiscuous mode (ignored where the driver cannot).
    #[serde(default = "yes")]
    pub promiscuous: bool,
    /// Report the end of input after this many milliseconds with no frame (for file-backed
    /// devices such as net_pcap, which never say they are done). Absent: never ends.
    #[serde(default)]
    pub idle_end_ms: Option<u64>,
    /// Times a TX burst is retried while the device accepts only part of it, before the rest
    /// is counted as `tx_full` drops.
    #[serde(default = "tx_retries")]
    pub tx_retries: u32,
    /// Where received frames land: `auto` (GPU memory when the NIC and the host can do
    /// GPUDirect RDMA, else host memory), `host`, or `gpu` (fail when GPUDirect is not possible).
    #[serde(default)]
    pub gpu_buffers: GpuBuffers,
}

fn one() -> u16 {
    1
}
fn descriptors() -> u16 {
    1024
}
fn mempool_size() -> u32 {
    8191
}
fn mempool_cache() -> u32 {
    256
}
fn burst_size() -> u16 {
    32
}
fn yes() -> bool {
    true
}
fn tx_retries() -> u32 {
    64
}

impl DpdkPortOptions {
    /// Options for a device created from `vdev` devargs, everything else at its default.
    pub fn vdev(eal_args: &[&str], devargs: &str) -> Self {
        DpdkPortOptions {
            eal_args: eal_args.iter().map(|s| s.to_string()).collect(),
            vdev: Some(devargs.to_string()),
            name: None,
            port_id: None,
            rx_queues: one(),
            tx_queues: one(),
            rx_descriptors: descriptors(),
            tx_descriptors: descriptors(),
            mempool_size: mempool_size(),
            mempool_cache: mempool_cache(),
            burst_size: burst_size(),
            promiscuous: yes(),
            idle_end_ms: None,
            tx_retries: tx_retries(),
            gpu_buffers: GpuBuffers::default(),
        }
    }

    /// Checks the values that need no device (the config validator calls this).
    pub fn validate(&self) -> Result<(), String> {
        let chosen = [
            self.vdev.is_some(),
            self.name.is_some(),
            self.port_id.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if chosen != 1 {
            return Err("give exactly one of `vdev`, `name`, `port_id`".into());
        }
        if let Some(v) = &self.vdev {
            if v.is_empty() || v.starts_with(',') {
                return Err(format!("`vdev` {v:?} must start with a device name"));
            }
        }
        if self.rx_queues == 0 || self.tx_queues == 0 {
            return Err("`rx_queues` and `tx_queues` must be at least 1".into());
        }
        if self.burst_size == 0 || self.burst_size as usize > MAX_BURST {
            return Err(format!("`burst_size` must be 1..={MAX_BURST}"));
        }
        if self.mempool_size < 2 * self.burst_size as u32 {
            return Err("`mempool_size` must hold at least two bursts".into());
        }
        Ok(())
    }
}

/// Which offloads and RSS setup the port ended up with (from the device's capabilities).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortSetup {
    pub port_id: u16,
    pub name: String,
    pub driver: String,
    pub rx_queues: u16,
    pub tx_queues: u16,
    pub rx_descriptors: u16,
    pub tx_descriptors: u16,
    /// RSS hash functions enabled (RTE_ETH_RSS_* bits); 0 when RSS is off.
    pub rss_hf: u64,
    /// The standard Toeplitz key (as in pktwarp's software RSS) was installed.
    pub rss_standard_key: bool,
    pub rx_offloads: u64,
    pub tx_offloads: u64,
    /// TX may chain mbufs for frames larger than one buffer.
    pub tx_multi_seg: bool,
    /// RX may deliver mbuf chains: the device can scatter, or takes chains on TX (loopback
    /// drivers such as net_ring hand back what was sent), or is net_pcap (which chains frames
    /// larger than one buffer whatever the offloads). Zero-copy TX to a device without
    /// MULTI_SEGS checks bursts for chains only when they come from such a port.
    pub rx_may_chain: bool,
    /// Where RX buffers live.
    pub placement: BufferPlacement,
}

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

/// One handle's counts on the zero-copy path: single writer (the handle's thread), so an add
/// is a plain load + store, not a locked instruction per burst; [`DpdkPort::counters`] sums
/// every handle's into the port's `pktwarp_*` counters.
#[derive(Debug, Default)]
pub(crate) struct HandleCounters {
    pub(crate) rx_frames: crate::counters::Counter,
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
    /// Dropped after Drop::drop closed the device (fields drop in order: before `gpu`, whose
    /// memory backs a GPUDirect RX pool).
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
    gpu: Option<gpu::GpuMemory>,
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
        // is the last reference; GPU memory (if any) by its own Drop after that (field order).
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

/// The Toeplitz key every NIC ships by default (Microsoft's RSS verification suite); the same
/// key pktwarp's software RSS uses, so hardware and software hashes agree.
pub const STANDARD_RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

static POOL_SEQ: AtomicU64 = AtomicU64::new(0);

fn create_pool(
    n: u32,
    cache: u32,
    socket: i32,
    what: &str,
) -> Result<*mut sys::rte_mempool, PortError> {
    let name = format!("pw_{what}_{}", POOL_SEQ.fetch_add(1, Ordering::Relaxed));
    let cname = CString::new(name.clone()).map_err(config_err)?;
    // Cache must not exceed n / 1.5 (rte_mempool_create); keep it valid for small pools.
    let cache = cache.min(n * 2 / 3).min(512);
    // SAFETY: valid name; EAL is initialised.
    let pool = unsafe {
        sys::rte_pktmbuf_pool_create(
            cname.as_ptr(),
            n,
            cache,
            0,
            sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16,
            socket,
        )
    };
    if pool.is_null() {
        return Err(config_err(format!(
            "cannot create mbuf pool {name} ({n} mbufs): {}",
            eal::last_error()
        )));
    }
    Ok(pool)
}

impl DpdkPort {
    /// Opens the port: EAL (once), device, pools, queues, start. `index` is pktwarp's index of
    /// the port (reported in every [`FrameDesc`]).
    pub fn open(opts: &DpdkPortOptions, index: u16) -> Result<DpdkPort, PortError> {
        opts.validate().map_err(config_err)?;
        eal::init(&opts.eal_args)?;
        eal::register_thread();
        // Until the port runs (released after `inner` on every return: a failure below closes
        // the half-opened port under it too).
        let _control = eal::control();

        let (port_id, created_vdev) = resolve_port(opts)?;
        let mut info = sys::rte_eth_dev_info::default();
        // SAFETY: valid port id, info is a writable struct of the right type.
        let rc = unsafe { sys::rte_eth_dev_info_get(port_id, &mut info) };
        if rc != 0 {
            return Err(config_err(format!(
                "rte_eth_dev_info_get(port {port_id}): {}",
                eal::strerror(rc)
            )));
        }
        let name = port_name(port_id);
        let driver = cstr_field(info.driver_name);
        if opts.rx_queues > info.max_rx_queues || opts.tx_queues > info.max_tx_queues {
            return Err(config_err(format!(
                "port {name} ({driver}) has at most {} RX and {} TX queues; asked for {} and {}",
                info.max_rx_queues, info.max_tx_queues, opts.rx_queues, opts.tx_queues
            )));
        }

        // Offloads and RSS from the device's capabilities.
        let mut conf = sys::rte_eth_conf::default();
        let mut setup = PortSetup {
            port_id,
            name: name.clone(),
            driver: driver.clone(),
            rx_queues: opts.rx_queues,
            tx_queues: opts.tx_queues,
            ..PortSetup::default()
        };
        // SAFETY: the pw_* constant getters have no preconditions.
        let (rss_all, off_rss_hash, off_multi) = unsafe {
            (
                sys::pw_eth_rss_ip()
                    | sys::pw_eth_rss_tcp()
                    | sys::pw_eth_rss_udp()
                    | sys::pw_eth_rss_sctp(),
                sys::pw_eth_rx_offload_rss_hash(),
                sys::pw_eth_tx_offload_multi_segs(),
            )
        };
        let mut rss_key = STANDARD_RSS_KEY;
        if opts.rx_queues > 1 && info.flow_type_rss_offloads & rss_all != 0 {
            conf.rxmode.mq_mode = sys::RTE_ETH_MQ_RX_RSS;
            let hf = info.flow_type_rss_offloads & rss_all;
            conf.rx_adv_conf.rss_conf.rss_hf = hf;
            setup.rss_hf = hf;
            if info.hash_key_size as usize == STANDARD_RSS_KEY.len() {
                conf.rx_adv_conf.rss_conf.rss_key = rss_key.as_mut_ptr();
                conf.rx_adv_conf.rss_conf.rss_key_len = STANDARD_RSS_KEY.len() as u8;
                setup.rss_standard_key = true;
            }
            if info.rx_offload_capa & off_rss_hash != 0 {
                conf.rxmode.offloads |= off_rss_hash;
            }
        } else if opts.rx_queues > 1 {
            tracing::warn!(
                port = %name, driver = %driver,
                "dpdk: device cannot hash (no RSS); with {} RX queues only steering rules spread traffic",
                opts.rx_queues
            );
        }
        if info.tx_offload_capa & off_multi != 0 {
            conf.txmode.offloads |= off_multi;
            setup.tx_multi_seg = true;
        }
        // SAFETY: constant getter without preconditions.
        let off_scatter = unsafe { sys::pw_eth_rx_offload_scatter() };
        setup.rx_may_chain = info.rx_offload_capa & off_scatter != 0
            || info.tx_offload_capa & off_multi != 0
            || driver == "net_pcap";
        // MBUF_FAST_FREE is not enabled even where offered: it requires every mbuf of a TX
        // queue to come from one pool, and zero-copy forwarding (DpdkTx::tx_mbufs) sends mbufs
        // of the receiving port's pools next to this port's own TX mbufs.
        setup.rx_offloads = conf.rxmode.offloads;
        setup.tx_offloads = conf.txmode.offloads;

        // SAFETY: valid port, conf fully initialised (rss_key points at a live local array).
        let rc =
            unsafe { sys::rte_eth_dev_configure(port_id, opts.rx_queues, opts.tx_queues, &conf) };
        if rc != 0 {
            return Err(config_err(format!(
                "rte_eth_dev_configure(port {name}, {} rx, {} tx): {}",
                opts.rx_queues,
                opts.tx_queues,
                eal::strerror(rc)
            )));
        }
        let (mut nrxd, mut ntxd) = (opts.rx_descriptors, opts.tx_descriptors);
        // SAFETY: valid port and pointers to locals.
        let rc = unsafe { sys::rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &mut nrxd, &mut ntxd) };
        if rc != 0 {
            return Err(config_err(format!(
                "rte_eth_dev_adjust_nb_rx_tx_desc(port {name}): {}",
                eal::strerror(rc)
            )));
        }
        setup.rx_descriptors = nrxd;
        setup.tx_descriptors = ntxd;

        // SAFETY: valid port.
        let socket = unsafe { sys::rte_eth_dev_socket_id(port_id) };
        let socket = if socket < 0 {
            sys::SOCKET_ID_ANY
        } else {
            socket
        };

        // RX buffers: GPU memory where GPUDirect works, else an ordinary pool.
        let (placement, gpu_mem, rx_pool) =
            gpu::rx_pool(opts, &info, &driver, &name, socket, |n| {
                create_pool(n, opts.mempool_cache, socket, "rx")
            })?;
        setup.placement = placement;
        let tx_pool = match create_pool(opts.mempool_size, opts.mempool_cache, socket, "tx") {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: the pool was just created and is used by no queue yet.
                unsafe { sys::rte_mempool_free(rx_pool) };
                return Err(e);
            }
        };
        // SAFETY: valid pool.
        let tx_data_room = unsafe { sys::pw_rte_pktmbuf_data_room_size(tx_pool) }
            .saturating_sub(sys::RTE_PKTMBUF_HEADROOM as u16);

        // From here on PortInner's Drop cleans up (stop, close, free pools) on any error.
        let inner = PortInner {
            setup,
            pools: Arc::new(PortPools {
                rx: rx_pool,
                tx: tx_pool,
            }),
            foreign_pools: std::sync::Mutex::new(Vec::new()),
            handle_counters: std::sync::Mutex::new(Vec::new()),
            rx_pool,
            tx_pool,
            tx_data_room,
            created_vdev,
            counters: PortCounters::default(),
            flows: flow::FlowTable::default(),
            gpu: gpu_mem,
            opts: opts.clone(),
        };

        for q in 0..opts.rx_queues {
            // SAFETY: configured port, valid pool; default rxconf (NULL) from the driver.
            let rc = unsafe {
                sys::rte_eth_rx_queue_setup(
                    port_id,
                    q,
                    nrxd,
                    socket as u32,
                    std::ptr::null(),
                    rx_pool,
                )
            };
            if rc != 0 {
                return Err(config_err(format!(
                    "rte_eth_rx_queue_setup(port {name}, queue {q}, {nrxd} descriptors): {}",
                    eal::strerror(rc)
                )));
            }
        }
        for q in 0..opts.tx_queues {
            let mut txconf = info.default_txconf;
            txconf.offloads = inner.setup.tx_offloads;
            // SAFETY: configured port; txconf is a valid local.
            let rc =
                unsafe { sys::rte_eth_tx_queue_setup(port_id, q, ntxd, socket as u32, &txconf) };
            if rc != 0 {
                return Err(config_err(format!(
                    "rte_eth_tx_queue_setup(port {name}, queue {q}, {ntxd} descriptors): {}",
                    eal::strerror(rc)
                )));
            }
        }
        if opts.promiscuous {
            // SAFETY: valid port. Virtual devices may not support it: not an error.
            let rc = unsafe { sys::rte_eth_promiscuous_enable(port_id) };
            if rc != 0 {
                tracing::debug!(port = %name, "dpdk: promiscuous mode: {}", eal::strerror(rc));
            }
        }
        // SAFETY: configured port with every queue set up.
        let rc = unsafe { sys::rte_eth_dev_start(port_id) };
        if rc != 0 {
            return Err(config_err(format!(
                "rte_eth_dev_start(port {name}): {}",
                eal::strerror(rc)
            )));
        }
        tracing::info!(
            port = %name, driver = %driver, rx_queues = opts.rx_queues, tx_queues = opts.tx_queues,
            rss_hf = format_args!("{:#x}", inner.setup.rss_hf),
            rx_offloads = format_args!("{:#x}", inner.setup.rx_offloads),
            tx_offloads = format_args!("{:#x}", inner.setup.tx_offloads),
            placement = ?inner.setup.placement,
            "dpdk: port started"
        );
        Ok(DpdkPort {
            inner: Arc::new(inner),
            index,
        })
    }

    /// How the port was set up (queues, RSS, offloads, buffer placement).
    pub fn setup(&self) -> &PortSetup {
        &self.inner.setup
    }

    /// Where received frames land, and why: logged at open, reported here.
    pub fn buffer_placement(&self) -> BufferPlacement {
        self.inner.setup.placement
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
        })
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
        let (mut zrx, mut ztx) = (0u64, 0u64);
        if let Ok(v) = self.inner.handle_counters.lock() {
            for h in v.iter() {
                zrx += h.rx_frames.get();
                ztx += h.tx_frames.get();
            }
        }
        for (k, v) in [
            ("rx_frames", c.rx_frames.load(Ordering::Relaxed) + zrx),
            ("rx_bytes", c.rx_bytes.load(Ordering::Relaxed)),
            ("tx_frames", c.tx_frames.load(Ordering::Relaxed) + ztx),
            ("tx_bytes", c.tx_bytes.load(Ordering::Relaxed)),
        ] {
            out.push((format!("pktwarp_{k}"), v));
        }
        for (k, v) in [
            ("tx_full", &c.tx_full),
            ("tx_nombuf", &c.tx_nombuf),
            ("tx_oversize", &c.tx_oversize),
            ("rx_steering_drop", &c.rx_steering_drop),
            ("rx_gpu_copy_error", &c.rx_gpu_copy_error),
        ] {
            out.push((format!("pktwarp_{k}"), v.load(Ordering::Relaxed)));
        }
        let (hw, sw) = self.inner.flows.counts();
        out.push(("pktwarp_flow_rules_hw".into(), hw as u64));
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
            self.inner.setup.rx_queues,
            rules,
        )
    }

    /// The rules the NIC refused, which the ingest must apply in software. Published by one
    /// atomic swap on every [`DpdkPort::install_rules`]; cheap to call per burst.
    pub fn software_steering(&self) -> Arc<SoftwareSteering> {
        self.inner.flows.software().load().clone()
    }
}

fn port_name(port_id: u16) -> String {
    let mut buf = [0 as std::ffi::c_char; sys::RTE_ETH_NAME_MAX_LEN as usize];
    // SAFETY: buffer of RTE_ETH_NAME_MAX_LEN bytes as the API requires.
    if unsafe { sys::rte_eth_dev_get_name_by_port(port_id, buf.as_mut_ptr()) } == 0 {
        // SAFETY: NUL-terminated by DPDK within the buffer.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    } else {
        format!("port{port_id}")
    }
}

fn port_by_name(name: &str) -> Result<u16, PortError> {
    let c =
        CString::new(name).map_err(|_| config_err(format!("device name {name:?} contains NUL")))?;
    let mut id = 0u16;
    // SAFETY: valid C string and out pointer.
    let rc = unsafe { sys::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut id) };
    if rc != 0 {
        return Err(config_err(format!(
            "no ethdev named {name:?}: {}",
            eal::strerror(rc)
        )));
    }
    Ok(id)
}

/// Finds (or creates, for `vdev`) the ethdev. Returns its id and the vdev name to remove at close.
fn resolve_port(opts: &DpdkPortOptions) -> Result<(u16, Option<String>), PortError> {
    if let Some(devargs) = &opts.vdev {
        let name = devargs.split(',').next().unwrap_or(devargs).to_string();
        if port_by_name(&name).is_ok() {
            return Err(config_err(format!(
                "device {name} exists already (given twice, or in eal_args as --vdev); use `name: {name}` to open it"
            )));
        }
        let c = CString::new(devargs.as_str())
            .map_err(|_| config_err(format!("vdev {devargs:?} contains NUL")))?;
        // SAFETY: valid C string; EAL initialised.
        let rc = unsafe { sys::rte_dev_probe(c.as_ptr()) };
        if rc != 0 {
            return Err(config_err(format!(
                "cannot create device {devargs:?}: {} (is the driver's PMD installed? see docs/dpdk.md)",
                eal::strerror(rc)
            )));
        }
        return Ok((port_by_name(&name)?, Some(name)));
    }
    if let Some(name) = &opts.name {
        return Ok((port_by_name(name)?, None));
    }
    let id = opts.port_id.unwrap_or(0);
    // SAFETY: plain query.
    if unsafe { sys::rte_eth_dev_is_valid_port(id) } == 0 {
        // SAFETY: plain query.
        let avail = unsafe { sys::rte_eth_dev_count_avail() };
        return Err(config_err(format!(
            "no port id {id} ({avail} ports available)"
        )));
    }
    Ok((id, None))
}

/// Wall-clock nanoseconds for receive timestamps, from the TSC (one `rdtsc` per burst instead
/// of a clock_gettime, which costs ~100 ns under some hypervisors), anchored to the realtime
/// clock once per process.
fn now_ns() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        // (anchor ns, anchor TSC, ns per TSC tick): one multiply per call (a u128 division
        // costs more than the rest of a zero-copy burst's bookkeeping).
        static BASE: OnceLock<(u64, u64, f64)> = OnceLock::new();
        let &(base_ns, base_tsc, ns_per_tick) = BASE.get_or_init(|| {
            // SAFETY: rte_get_tsc_hz only reads a value EAL measured at init (ports exist only
            // after init).
            let hz = unsafe { sys::rte_get_tsc_hz() };
            let scale = if hz > 0 { 1e9 / hz as f64 } else { 0.0 };
            // SAFETY: _rdtsc has no preconditions on x86_64.
            let tsc = unsafe { core::arch::x86_64::_rdtsc() };
            (wall_ns(), tsc, scale)
        });
        if ns_per_tick > 0.0 {
            // SAFETY: as above.
            let dt = unsafe { core::arch::x86_64::_rdtsc() }.wrapping_sub(base_tsc);
            // f64 keeps ns exact to well under a microsecond for months of uptime.
            return base_ns + (dt as f64 * ns_per_tick) as u64;
        }
    }
    wall_ns()
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Starts loading the cache line at `p` (a hint; never faults).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint and does not fault on any address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p.cast::<i8>(), core::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
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

/// Receives from some of a port's RX queues; implements [`RxPort`].
pub struct DpdkRx {
    label: String,
    port: DpdkPort,
    queues: Vec<u16>,
    next: usize,
    burst: usize,
    mbufs: Vec<*mut sys::rte_mbuf>,
    /// Receive time of the last frame (ns, [`now_ns`]).
    last_frame_ns: u64,
    /// `rx_mbufs` got frames since its last empty poll (it reads no clock per burst: the idle
    /// time counts from the first empty poll after frames).
    zc_fresh: bool,
    idle_end: Option<Duration>,
    steering: flow::SoftwareHandle,
    /// Zero-copy path counts (see [`HandleCounters`]).
    hc: Arc<HandleCounters>,
    /// Copies of setup facts read on every zero-copy burst (no trip to the shared PortInner).
    zc: ZcFacts,
}

// SAFETY: the mbuf array only holds pointers between an rx call and its free inside that call.
unsafe impl Send for DpdkRx {}

impl DpdkRx {
    /// The port this handle receives from.
    pub fn port(&self) -> &DpdkPort {
        &self.port
    }

    /// Polls the next queue (round robin) once; appends its frames to `burst`.
    fn poll_queue(&mut self, q: u16, burst: &mut Burst, max: usize) -> usize {
        let want = max.min(self.burst);
        let inner = &self.port.inner;
        // SAFETY: started port, valid queue, mbufs has room for `want` <= MAX_BURST pointers.
        let n = unsafe {
            sys::eth_rx_burst(inner.setup.port_id, q, self.mbufs.as_mut_ptr(), want as u16)
        } as usize;
        if n == 0 {
            return 0;
        }
        let ts = now_ns();
        self.last_frame_ns = ts;
        let sw = self.steering.load();
        let mut bytes = 0u64;
        let on_gpu = inner.setup.placement == BufferPlacement::GpuDirect;
        if on_gpu && !inner.gpu.as_ref().is_some_and(|g| g.make_current()) {
            // The frames are in GPU memory and CUDA is unusable on this thread: count them.
            // SAFETY: the n mbufs are ours (returned by rx_burst).
            unsafe { sys::rte_pktmbuf_free_bulk(self.mbufs.as_mut_ptr(), n as u32) };
            inner
                .counters
                .rx_gpu_copy_error
                .fetch_add(n as u64, Ordering::Relaxed);
            return 0;
        }
        for i in 0..n {
            let m = self.mbufs[i];
            if let Some(&next) = self.mbufs[..n].get(i + 1) {
                // SAFETY: next is a valid mbuf returned by this rx call; only its first cache
                // line (written by the PMD) is read, to start fetching its data early.
                unsafe { prefetch((*next).buf_addr.cast::<u8>().add((*next).data_off as usize)) };
            }
            let offset = burst.data.len() as u32;
            // SAFETY: m is an mbuf the PMD just returned: a valid chain of nb_segs segments,
            // each with data_len bytes at buf_addr + data_off (host memory, or GPU memory when
            // the placement is GpuDirect), owned by us until freed below.
            let (pkt_len, rss, copied) = unsafe {
                let mut seg = m;
                let mut copied = true;
                while !seg.is_null() {
                    let s = &*seg;
                    let data = (s.buf_addr as *const u8).add(s.data_off as usize);
                    if on_gpu {
                        copied &= gpu::copy_to_host(data, s.data_len as usize, &mut burst.data);
                    } else {
                        append_bytes(&mut burst.data, data, s.data_len as usize);
                    }
                    seg = s.next;
                }
                let mb = &*m;
                let has = mb.ol_flags & u64::from(sys::RTE_MBUF_F_RX_RSS_HASH) != 0;
                (
                    mb.pkt_len,
                    has.then_some(mb.__bindgen_anon_2.hash.rss),
                    copied,
                )
            };
            if !copied {
                burst.data.truncate(offset as usize);
                inner
                    .counters
                    .rx_gpu_copy_error
                    .fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let len = burst.data.len() as u32 - offset;
            let frame = &burst.data[offset as usize..];
            let queue = match sw.steer(frame) {
                None => q,
                Some(flow::SwFate::Queue(sq)) => sq,
                Some(flow::SwFate::Drop) => {
                    // Dropped by a software steering rule: take the frame back out.
                    burst.data.truncate(offset as usize);
                    inner
                        .counters
                        .rx_steering_drop
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            };
            bytes += len as u64;
            burst.descs.push(FrameDesc {
                offset,
                len,
                wire_len: pkt_len.max(len),
                port: self.port.index,
                queue,
                rss_hash: rss.unwrap_or(0),
                timestamp_ns: ts,
            });
        }
        // SAFETY: the n mbufs are ours (returned by rx_burst) and no longer referenced.
        unsafe { sys::pw_rx_free_bulk(inner.rx_pool, self.mbufs.as_mut_ptr(), n as u32) };
        inner
            .counters
            .rx_frames
            .fetch_add(n as u64, Ordering::Relaxed);
        inner.counters.rx_bytes.fetch_add(bytes, Ordering::Relaxed);
        n
    }
}

/// One frame received into GPU memory (GPUDirect), read in place by a GPU executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuFrame {
    /// Device address of the first byte.
    pub addr: u64,
    pub len: u32,
    /// RX queue (hardware, or software steering's choice).
    pub queue: u16,
    /// The NIC's RSS hash (0 when it gave none).
    pub rss_hash: u32,
}

/// Frames received into GPU memory. Their mbufs stay owned by this value, so the NIC does not
/// reuse the buffers while the GPU reads them; dropping it returns them to the pool.
pub struct GpuFrames {
    port: DpdkPort,
    mbufs: Vec<*mut sys::rte_mbuf>,
    pub frames: Vec<GpuFrame>,
    pub timestamp_ns: u64,
}

// SAFETY: the mbufs are owned by this value alone until it is dropped; mempools are thread-safe.
unsafe impl Send for GpuFrames {}

impl Drop for GpuFrames {
    fn drop(&mut self) {
        if !self.mbufs.is_empty() {
            // SAFETY: mbufs received by rx_gpu and owned here; the pool lives while port does.
            unsafe { sys::rte_pktmbuf_free_bulk(self.mbufs.as_mut_ptr(), self.mbufs.len() as u32) };
        }
        let _ = &self.port;
    }
}

impl DpdkRx {
    /// Receives up to `max` frames without copying them (GPUDirect ports only): the frames stay
    /// in GPU memory where the NIC wrote them. Software steering (for rules the NIC refused)
    /// needs the headers on the CPU and is not applied here; a GPU pipeline steers on the GPU.
    pub fn rx_gpu(&mut self, max: usize) -> Result<GpuFrames, PortError> {
        eal::register_thread();
        let inner = &self.port.inner;
        if inner.setup.placement != BufferPlacement::GpuDirect {
            return Err(config_err(format!(
                "port {}: rx_gpu needs RX buffers in GPU memory (placement is {:?})",
                inner.setup.name, inner.setup.placement
            )));
        }
        let want = max.min(self.burst).min(MAX_BURST);
        let mut out = GpuFrames {
            port: self.port.clone(),
            mbufs: Vec::with_capacity(want),
            frames: Vec::with_capacity(want),
            timestamp_ns: now_ns(),
        };
        let nq = self.queues.len();
        for _ in 0..nq {
            let q = self.queues[self.next];
            self.next = (self.next + 1) % nq;
            // SAFETY: started port, valid queue, room for `want` pointers.
            let n = unsafe {
                sys::eth_rx_burst(inner.setup.port_id, q, self.mbufs.as_mut_ptr(), want as u16)
            } as usize;
            for &m in &self.mbufs[..n] {
                // SAFETY: an mbuf the PMD returned; only its header (host memory) is read.
                let mb = unsafe { &*m };
                let has = mb.ol_flags & u64::from(sys::RTE_MBUF_F_RX_RSS_HASH) != 0;
                let rss = if has {
                    // SAFETY: reading the rss member of the hash union (plain u32).
                    unsafe { mb.__bindgen_anon_2.hash.rss }
                } else {
                    0
                };
                out.frames.push(GpuFrame {
                    addr: mb.buf_addr as u64 + u64::from(mb.data_off),
                    len: u32::from(mb.data_len),
                    queue: q,
                    rss_hash: rss,
                });
                out.mbufs.push(m);
            }
            if n > 0 {
                inner
                    .counters
                    .rx_frames
                    .fetch_add(n as u64, Ordering::Relaxed);
                self.last_frame_ns = out.timestamp_ns;
                break;
            }
        }
        Ok(out)
    }
}

impl RxPort for DpdkRx {
    fn rx_burst(&mut self, burst: &mut Burst, max: usize) -> Result<RxStatus, PortError> {
        eal::register_thread();
        if max == 0 {
            return Ok(RxStatus::Idle);
        }
        // Poll each queue at most once, starting after the last one served.
        let nq = self.queues.len();
        for _ in 0..nq {
            let q = self.queues[self.next];
            self.next = (self.next + 1) % nq;
            let n = self.poll_queue(q, burst, max);
            if n > 0 {
                return Ok(RxStatus::Frames(n));
            }
        }
        match self.idle_end {
            Some(d) if now_ns().saturating_sub(self.last_frame_ns) >= d.as_nanos() as u64 => {
                Ok(RxStatus::End)
            }
            _ => Ok(RxStatus::Idle),
        }
    }

    fn name(&self) -> &str {
        &self.label
    }

    fn port_counters(&self) -> Vec<(String, u64)> {
        self.port.counters()
    }

    fn counter_source(&self) -> Option<crate::port::CounterSource> {
        // Weak: the metrics never keep a device open after the run let go of it.
        let inner = Arc::downgrade(&self.port.inner);
        let index = self.port.index;
        Some(Arc::new(move || {
            let inner = inner.upgrade()?;
            Some(DpdkPort { inner, index }.counters())
        }))
    }
}

/// Transmits on one of a port's TX queues; implements [`TxPort`].
pub struct DpdkTx {
    label: String,
    port: DpdkPort,
    queue: u16,
    burst: usize,
    mbufs: Vec<*mut sys::rte_mbuf>,
    /// Fresh mbufs allocated in bulk and not used yet (returned to the pool on drop).
    stash: Vec<*mut sys::rte_mbuf>,
    /// Pools whose mbufs `tx_mbufs` already handed to this port (registered in its
    /// `foreign_pools`); compared by address, never dereferenced.
    lent_pools: Vec<*const PortPools>,
    /// The last burst source checked against `lent_pools`.
    last_lent: *const PortPools,
    /// Zero-copy path counts (see [`HandleCounters`]).
    hc: Arc<HandleCounters>,
    /// Copies of setup facts read on every zero-copy burst (no trip to the shared PortInner).
    zc: ZcFacts,
}

impl Drop for DpdkTx {
    fn drop(&mut self) {
        if !self.stash.is_empty() {
            // SAFETY: fresh mbufs owned by this handle; the pool lives while self.port does.
            unsafe { sys::rte_pktmbuf_free_bulk(self.stash.as_mut_ptr(), self.stash.len() as u32) };
        }
    }
}

// SAFETY: the mbuf pointers are owned by this handle (stash) or only held during one tx call.
unsafe impl Send for DpdkTx {}

impl DpdkTx {
    /// A fresh TX mbuf from this handle's stash, refilled from the pool in bulk.
    #[inline]
    fn take_mbuf(&mut self) -> Option<*mut sys::rte_mbuf> {
        if self.stash.is_empty() {
            let n = self.burst;
            self.stash.resize(n, std::ptr::null_mut());
            // Raw objects: fill() sets the first cache line; the pool keeps next = NULL,
            // nb_segs = 1 and refcnt = 1 for free mbufs, so the second line is not touched
            // (what rte_pktmbuf_reset would write there costs a cache miss per frame).
            // SAFETY: stash has n pointer slots; pool valid.
            let rc = unsafe {
                sys::pw_rte_mempool_get_bulk(
                    self.port.inner.tx_pool,
                    self.stash.as_mut_ptr().cast(),
                    n as u32,
                )
            };
            if rc != 0 {
                self.stash.clear();
                return None;
            }
        }
        self.stash.pop()
    }

    /// Sends self.mbufs[..k] (retrying `tx_retries` times while the device takes nothing);
    /// frees and counts what it did not take. Returns (frames sent, whether all were).
    fn send(&mut self, port: u16, k: usize, bytes: u64) -> (usize, bool) {
        let inner = &self.port.inner;
        let mut sent = 0usize;
        let mut tries = 0u32;
        while sent < k {
            // SAFETY: mbufs[sent..k] are filled mbufs we own; the PMD takes ownership of the
            // ones it accepts.
            let got = unsafe {
                sys::eth_tx_burst(
                    port,
                    self.queue,
                    self.mbufs.as_mut_ptr().add(sent),
                    (k - sent) as u16,
                )
            } as usize;
            sent += got;
            if got == 0 {
                tries += 1;
                if tries > inner.opts.tx_retries {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        inner
            .counters
            .tx_frames
            .fetch_add(sent as u64, Ordering::Relaxed);
        if sent == k {
            inner.counters.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
            return (sent, true);
        }
        let mut unsent = 0u64;
        for &m in &self.mbufs[sent..k] {
            // SAFETY: the device did not take m; still ours.
            unsent += u64::from(unsafe { (*m).pkt_len });
        }
        // SAFETY: the device did not take these; they are still ours.
        unsafe { sys::rte_pktmbuf_free_bulk(self.mbufs.as_mut_ptr().add(sent), (k - sent) as u32) };
        inner
            .counters
            .tx_bytes
            .fetch_add(bytes - unsent, Ordering::Relaxed);
        inner
            .counters
            .tx_full
            .fetch_add((k - sent) as u64, Ordering::Relaxed);
        (sent, false)
    }

    /// Copies `frame` into the fresh mbuf `m` (chaining more mbufs for a long frame when the
    /// device can send chains). Returns false when the frame cannot be sent (counted).
    ///
    /// # Safety
    /// `m` is a freshly allocated mbuf from the TX pool, owned by the caller.
    unsafe fn fill(&self, m: *mut sys::rte_mbuf, frame: &[u8]) -> bool {
        let inner = &self.port.inner;
        let room = inner.tx_data_room as usize;
        if frame.len() > room && !inner.setup.tx_multi_seg {
            inner.counters.tx_oversize.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let mut rest = frame;
        let mut seg = m;
        loop {
            let take = rest.len().min(room);
            // SAFETY: seg is an owned fresh mbuf with `room` bytes of room after the headroom.
            unsafe {
                let s = &mut *seg;
                if seg == m {
                    // First segment, raw from the pool: what rte_pktmbuf_reset sets in the
                    // first cache line (the chained ones come from rte_pktmbuf_alloc).
                    s.data_off = (sys::RTE_PKTMBUF_HEADROOM as u16).min(s.buf_len);
                    s.ol_flags &= sys::RTE_MBUF_F_EXTERNAL;
                    s.__bindgen_anon_1.packet_type = 0;
                    s.vlan_tci = 0;
                    s.vlan_tci_outer = 0;
                    s.port = u16::MAX;
                }
                let dst = (s.buf_addr as *mut u8).add(s.data_off as usize);
                copy_bytes(dst, rest.as_ptr(), take);
                s.data_len = take as u16;
                s.pkt_len = take as u32;
            }
            rest = &rest[take..];
            if rest.is_empty() {
                return true;
            }
            // SAFETY: valid pool.
            let next = unsafe { sys::pw_rte_pktmbuf_alloc(inner.tx_pool) };
            if next.is_null() {
                inner.counters.tx_nombuf.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            // SAFETY: both are owned mbufs; chain updates m's pkt_len and nb_segs.
            if unsafe { sys::pw_rte_pktmbuf_chain(m, next) } != 0 {
                // SAFETY: `next` is ours and not linked.
                unsafe { sys::pw_rte_pktmbuf_free(next) };
                inner.counters.tx_oversize.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            seg = next;
        }
    }
}

impl TxPort for DpdkTx {
    /// Sends the frames; stops at the first burst the device takes only in part (after
    /// `tx_retries`), so the count returned is a prefix of the frames given (less frames
    /// skipped as oversize), and the frames not taken are counted (`tx_full`, `tx_nombuf`,
    /// `tx_oversize`).
    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        eal::register_thread();
        let port = self.port.inner.setup.port_id;
        let mut accepted = 0usize;
        // Filled mbufs waiting to be sent: self.mbufs[..k].
        let mut k = 0usize;
        let mut bytes = 0u64;
        loop {
            let next = frames.next();
            if let Some(f) = next {
                let Some(m) = self.take_mbuf() else {
                    let left = 1 + frames.count() as u64;
                    self.port
                        .inner
                        .counters
                        .tx_nombuf
                        .fetch_add(left, Ordering::Relaxed);
                    // Send what is filled already, then stop.
                    let (sent, _) = self.send(port, k, bytes);
                    return Ok(accepted + sent);
                };
                // SAFETY: m is a fresh mbuf of the TX pool owned by this handle.
                if unsafe { self.fill(m, f) } {
                    self.mbufs[k] = m;
                    k += 1;
                    bytes += f.len() as u64;
                } else {
                    // SAFETY: ours, possibly with a partial chain; freed whole.
                    unsafe { sys::pw_rte_pktmbuf_free(m) };
                }
                if k < self.burst {
                    continue;
                }
            }
            if k > 0 {
                let (sent, complete) = self.send(port, k, bytes);
                accepted += sent;
                if !complete {
                    // The device is full: what the caller still offers is dropped (counted).
                    let left = if next.is_some() {
                        frames.count() as u64
                    } else {
                        0
                    };
                    self.port
                        .inner
                        .counters
                        .tx_full
                        .fetch_add(left, Ordering::Relaxed);
                    return Ok(accepted);
                }
                k = 0;
                bytes = 0;
            }
            if next.is_none() {
                return Ok(accepted);
            }
        }
    }

    fn flush(&mut self) -> Result<(), PortError> {
        // SAFETY: started port and valid queue; frees mbufs the driver has finished sending.
        unsafe { sys::rte_eth_tx_done_cleanup(self.port.inner.setup.port_id, self.queue, 0) };
        Ok(())
    }

    fn name(&self) -> &str {
        &self.label
    }
}
