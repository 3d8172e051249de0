//! The options of a `dpdk` port (the `dpdk:` block of a port in the YAML config) and the checks
//! that need no device.

use serde::Deserialize;

use super::{GpuBuffers, MAX_BURST, STANDARD_RSS_KEY};

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
    /// TX queues (one per transmitting thread: the daemon's TX thread of queue q sends on TX
    /// queue q). 0 or absent: one per TX thread ([`Self::tx_threads`]: `queues.count` in the
    /// daemon, 1 with `queues.tx_threads: one`), at most as many as the device has; the TX
    /// threads then share the port's senders where it has fewer (net_pcap with one `tx_pcap`).
    #[serde(default)]
    pub tx_queues: u16,
    /// The TX threads that will send on the port (not in the YAML: the daemon sets it from
    /// `queues`); 0: one. Only read where `tx_queues` is 0.
    #[serde(skip)]
    pub tx_threads: u16,
    /// `tx_queues` was 0 and [`Self::fit_tx_queues`] chose it (not in the YAML): TX threads
    /// beyond the device's TX queues share a sender instead of failing.
    #[serde(skip)]
    pub tx_queues_fitted: bool,
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
    /// Timed send (a frame with a send time, `tx_time`): the furthest ahead, in milliseconds,
    /// a send time may lie for the port to take the frame (1 ..= 60000; default 1000). A frame
    /// whose time lies further ahead is not sent and is counted as a `tx_horizon` drop; one
    /// within it is handed to the device with its time (Tx timestamp offload) or held in an
    /// mbuf until then (software pacing), which bounds the mbufs held to the frames of this
    /// much time.
    #[serde(default = "tx_max_hold_ms", deserialize_with = "hold_ms")]
    pub tx_max_hold_ms: u64,
    /// Where received frames land: `auto` (GPU memory when the NIC and the host can do
    /// GPUDirect RDMA, else host memory), `host`, `gpu` (fail when GPUDirect is not possible),
    /// or `pinned` (pinned host memory mapped for the GPU; fail without libcuda or a GPU).
    #[serde(default)]
    pub gpu_buffers: GpuBuffers,
    /// The allocator of a `gpu_buffers: pinned` pool's memory (`None`: CUDA's,
    /// [`super::gpu::cuda_pinned`]). Not a YAML key: a test without a GPU gives plain
    /// page-aligned memory ([`super::gpu::page_memory`]).
    #[serde(skip)]
    #[doc(hidden)]
    pub pinned_alloc: Option<super::gpu::PinnedAllocator>,
    /// RSS with the symmetric Toeplitz key ([`crate::rss::RSS_KEY_SYMMETRIC`]), in the port's
    /// RSS and its rte_flow RSS actions: both directions of a flow reach one RX queue. Not a
    /// YAML key: the daemon sets it when the pipeline keeps per-flow state
    /// (`Config::symmetric_rss`), so the NIC hashes as the software steering does.
    #[serde(skip)]
    pub symmetric_rss: bool,
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
fn tx_max_hold_ms() -> u64 {
    1000
}

/// Largest `tx_max_hold_ms`: a minute.
pub const MAX_TX_HOLD_MS: u64 = 60_000;

/// `tx_max_hold_ms`: a whole number of milliseconds in 1 ..= [`MAX_TX_HOLD_MS`]; the error
/// of anything else gives that range.
fn hold_ms<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(
                f,
                "a whole number of milliseconds (allowed range 1 ..= {MAX_TX_HOLD_MS})"
            )
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
            if v == 0 || v > MAX_TX_HOLD_MS {
                return Err(E::custom(format!(
                    "{v} is out of range (allowed range 1 ..= {MAX_TX_HOLD_MS} ms)"
                )));
            }
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::custom(format!(
                    "{v} is out of range (allowed range 1 ..= {MAX_TX_HOLD_MS} ms)"
                ))),
            }
        }
    }
    d.deserialize_any(V)
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
            tx_threads: 0,
            tx_queues_fitted: false,
            rx_descriptors: descriptors(),
            tx_descriptors: descriptors(),
            mempool_size: mempool_size(),
            mempool_cache: mempool_cache(),
            burst_size: burst_size(),
            promiscuous: yes(),
            idle_end_ms: None,
            tx_retries: tx_retries(),
            tx_max_hold_ms: tx_max_hold_ms(),
            gpu_buffers: GpuBuffers::default(),
            pinned_alloc: None,
            symmetric_rss: false,
        }
    }

    /// The Toeplitz key this port programs (RSS and rte_flow RSS actions).
    pub fn rss_key(&self) -> &'static [u8; 40] {
        if self.symmetric_rss {
            &crate::rss::RSS_KEY_SYMMETRIC
        } else {
            &STANDARD_RSS_KEY
        }
    }

    /// These options with `tx_queues` left at 0 set to one per TX thread ([`Self::tx_threads`],
    /// at least 1), at most `device_most` (the device's TX queues).
    pub fn fit_tx_queues(&self, device_most: u16) -> Self {
        let mut o = self.clone();
        if o.tx_queues == 0 {
            o.tx_queues = o.tx_threads.max(1).min(device_most.max(1));
            o.tx_queues_fitted = true;
        }
        o
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
        if self.rx_queues == 0 {
            return Err("`rx_queues` must be at least 1".into());
        }
        if self.burst_size == 0 || self.burst_size as usize > MAX_BURST {
            return Err(format!("`burst_size` must be 1..={MAX_BURST}"));
        }
        if self.tx_max_hold_ms == 0 || self.tx_max_hold_ms > MAX_TX_HOLD_MS {
            return Err(format!(
                "`tx_max_hold_ms` {} is out of range (allowed range 1 ..= {MAX_TX_HOLD_MS})",
                self.tx_max_hold_ms
            ));
        }
        if self.mempool_size < 2 * self.burst_size as u32 {
            return Err("`mempool_size` must hold at least two bursts".into());
        }
        Ok(())
    }
}
