//! Opening a port: the ethdev found or created, offloads and RSS chosen from the device's
//! capabilities, its mbuf pools, RX / TX queues, start.

use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{
    config_err, cstr_field, eal, flow, gpu, sys, BufferPlacement, DpdkPort, DpdkPortOptions,
    PortCounters, PortInner, PortPools,
};
use crate::port::PortError;

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
    /// pktwarp's Toeplitz key (the one its software RSS hashes with) was installed.
    pub rss_standard_key: bool,
    /// That key is the symmetric one ([`DpdkPortOptions::symmetric_rss`]): the port's RSS and
    /// its rte_flow RSS actions put both directions of a flow on one queue.
    pub rss_symmetric: bool,
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
    /// Tx timestamp offload (the device advertised `RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP` and it
    /// is enabled): the mbuf dynamic field's offset and the dynamic flag's mask
    /// (`rte_mbuf_dyn_tx_timestamp_register`). `None`: timed frames are paced in software.
    pub tx_timestamp: Option<(i32, u64)>,
}

/// The Toeplitz key every NIC ships by default (Microsoft's RSS verification suite); the same
/// key pktwarp's software RSS uses, so hardware and software hashes agree.
pub const STANDARD_RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The key to program into a device whose RSS keys are `size` bytes: pktwarp's 40-byte `key`,
/// padded to `size` (`None` when the device takes a shorter key, or none). Padding never
/// changes a hash: an input of at most 36 bytes meets key bits up to byte 40 only. The pad
/// repeats the key's first two bytes, so the symmetric key stays periodic.
pub(super) fn device_rss_key(key: &[u8; 40], size: usize) -> Option<Vec<u8>> {
    if size < key.len() || size > usize::from(u8::MAX) {
        return None;
    }
    Some(
        (0..size)
            .map(|i| key.get(i).copied().unwrap_or(key[i % 2]))
            .collect(),
    )
}

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
    /// the port (reported in every [`FrameDesc`](crate::burst::FrameDesc)).
    pub fn open(opts: &DpdkPortOptions, index: u16) -> Result<DpdkPort, PortError> {
        opts.validate().map_err(config_err)?;
        eal::init(&opts.eal_args)?;
        eal::register_thread();
        // Until the port runs (released after `inner` on every return: a failure below closes
        // the half-opened port under it too).
        let _control = eal::control();

        let (port_id, created_vdev) = resolve_port(opts)?;
        let info = device_info(port_id)?;
        let opts = &opts.fit_tx_queues(info.max_tx_queues);
        let name = port_name(port_id);
        let driver = cstr_field(info.driver_name);
        for (key, asked, most, what) in [
            ("rx_queues", opts.rx_queues, info.max_rx_queues, "RX"),
            ("tx_queues", opts.tx_queues, info.max_tx_queues, "TX"),
        ] {
            if asked > most {
                return Err(config_err(format!(
                    "dpdk.{key} is {asked}, but port {name} ({driver}) has at most {most} {what} queues"
                )));
            }
        }
        let mut setup = PortSetup {
            port_id,
            name,
            driver,
            rx_queues: opts.rx_queues,
            tx_queues: opts.tx_queues,
            ..PortSetup::default()
        };
        configure(opts, &info, &mut setup)?;

        // SAFETY: valid port.
        let socket = unsafe { sys::rte_eth_dev_socket_id(port_id) };
        let socket = if socket < 0 {
            sys::SOCKET_ID_ANY
        } else {
            socket
        };

        // RX buffers: GPU memory where GPUDirect works, pinned host memory when asked, else an
        // ordinary pool.
        let (placement, ext_mem, rx_pool) =
            gpu::rx_pool(opts, &info, &setup.driver, &setup.name, socket, |n| {
                create_pool(n, opts.mempool_cache, socket, "rx")
            })?;
        setup.placement = placement;
        let tx_pool = match create_pool(opts.mempool_size, opts.mempool_cache, socket, "tx") {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: the pool was just created and is used by no queue yet (its external
                // memory, if any, is freed after it, when `ext_mem` drops).
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
                ext: ext_mem,
            }),
            foreign_pools: std::sync::Mutex::new(Vec::new()),
            handle_counters: std::sync::Mutex::new(Vec::new()),
            rx_pool,
            tx_pool,
            tx_data_room,
            created_vdev,
            counters: PortCounters::default(),
            flows: flow::FlowTable::default(),
            opts: opts.clone(),
        };
        setup_queues(&inner, &info, socket)?;
        start(&inner)?;
        Ok(DpdkPort {
            inner: Arc::new(inner),
            index,
        })
    }
}

/// Asks the PMD to deliver rte_flow MARK ids in received mbufs (`hash.fdir.hi`, read into
/// `FrameDesc::mark`): some NICs (mlx5 in some modes) deliver them only when asked before
/// `rte_eth_dev_configure`. Most PMDs have no such switch (`-ENOTSUP`: nothing to negotiate),
/// and a refusal is not an error: steering still works, only the NIC's mark is missing.
fn negotiate_mark(port_id: u16, name: &str) {
    // SAFETY: constant getter without preconditions.
    let want = unsafe { sys::pw_eth_rx_metadata_user_mark() };
    let mut features = want;
    // SAFETY: a valid, not yet configured port; `features` is a live u64 the call updates.
    let rc = unsafe { sys::rte_eth_rx_metadata_negotiate(port_id, &mut features) };
    if rc == 0 && features & want == 0 {
        tracing::debug!(port = %name, "dpdk: the PMD will not deliver rte_flow MARK ids");
    } else if rc != 0 && rc != -libc::ENOTSUP {
        tracing::debug!(port = %name, "dpdk: rx metadata negotiation: {}", eal::strerror(rc));
    }
}

/// The device's capabilities (rte_eth_dev_info_get).
fn device_info(port_id: u16) -> Result<sys::rte_eth_dev_info, PortError> {
    let mut info = sys::rte_eth_dev_info::default();
    // SAFETY: valid port id, info is a writable struct of the right type.
    let rc = unsafe { sys::rte_eth_dev_info_get(port_id, &mut info) };
    if rc != 0 {
        return Err(config_err(format!(
            "rte_eth_dev_info_get(port {port_id}): {}",
            eal::strerror(rc)
        )));
    }
    Ok(info)
}

/// Chooses offloads and RSS from the device's capabilities, configures the device with them and
/// adjusts the descriptor counts to its limits; records all of it in `setup`.
fn configure(
    opts: &DpdkPortOptions,
    info: &sys::rte_eth_dev_info,
    setup: &mut PortSetup,
) -> Result<(), PortError> {
    let (port_id, name, driver) = (setup.port_id, setup.name.clone(), setup.driver.clone());
    let mut conf = sys::rte_eth_conf::default();
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
    let mut rss_key = device_rss_key(opts.rss_key(), usize::from(info.hash_key_size));
    setup.rss_symmetric = opts.symmetric_rss;
    if opts.rx_queues > 1 && info.flow_type_rss_offloads & rss_all != 0 {
        conf.rxmode.mq_mode = sys::RTE_ETH_MQ_RX_RSS;
        let hf = info.flow_type_rss_offloads & rss_all;
        conf.rx_adv_conf.rss_conf.rss_hf = hf;
        setup.rss_hf = hf;
        if let Some(key) = rss_key.as_mut() {
            conf.rx_adv_conf.rss_conf.rss_key = key.as_mut_ptr();
            conf.rx_adv_conf.rss_conf.rss_key_len = key.len() as u8;
            setup.rss_standard_key = true;
        } else if opts.symmetric_rss {
            tracing::warn!(
                port = %name, driver = %driver, key_size = info.hash_key_size,
                "dpdk: the device takes no RSS key of 40 bytes or more: the symmetric key is \
                 not installed, so the two directions of a flow may reach different RX queues"
            );
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
    // SAFETY: constant getter without preconditions.
    let off_ts = unsafe { sys::pw_eth_tx_offload_send_on_timestamp() };
    if info.tx_offload_capa & off_ts != 0 {
        let (mut field, mut flag) = (-1i32, 0u64);
        // SAFETY: two writable locals; registers the dynamic field and flag (or finds them
        // registered by an earlier port), primary process only.
        let rc = unsafe { sys::rte_mbuf_dyn_tx_timestamp_register(&mut field, &mut flag) };
        if rc == 0 && field >= 0 && flag != 0 {
            conf.txmode.offloads |= off_ts;
            setup.tx_timestamp = Some((field, flag));
        } else {
            tracing::warn!(
                port = %name, driver = %driver,
                "dpdk: the device sends on timestamp but the Tx timestamp field could not be \
                 registered: timed frames are paced in software"
            );
        }
    }
    // MBUF_FAST_FREE is not enabled even where offered: it requires every mbuf of a TX
    // queue to come from one pool, and zero-copy forwarding (DpdkTx::tx_mbufs) sends mbufs
    // of the receiving port's pools next to this port's own TX mbufs.
    setup.rx_offloads = conf.rxmode.offloads;
    setup.tx_offloads = conf.txmode.offloads;

    negotiate_mark(port_id, &name);
    // SAFETY: valid port, conf fully initialised (rss_key points at a live local array).
    let rc = unsafe { sys::rte_eth_dev_configure(port_id, opts.rx_queues, opts.tx_queues, &conf) };
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
    Ok(())
}

/// Sets up every RX queue (on the port's RX pool) and TX queue of the configured device.
fn setup_queues(
    inner: &PortInner,
    info: &sys::rte_eth_dev_info,
    socket: i32,
) -> Result<(), PortError> {
    let s = &inner.setup;
    let (port_id, name) = (s.port_id, &s.name);
    let (nrxd, ntxd) = (s.rx_descriptors, s.tx_descriptors);
    for q in 0..s.rx_queues {
        // SAFETY: configured port, valid pool; default rxconf (NULL) from the driver.
        let rc = unsafe {
            sys::rte_eth_rx_queue_setup(
                port_id,
                q,
                nrxd,
                socket as u32,
                std::ptr::null(),
                inner.rx_pool,
            )
        };
        if rc != 0 {
            return Err(config_err(format!(
                "rte_eth_rx_queue_setup(port {name}, queue {q}, {nrxd} descriptors): {}",
                eal::strerror(rc)
            )));
        }
    }
    for q in 0..s.tx_queues {
        let mut txconf = info.default_txconf;
        txconf.offloads = s.tx_offloads;
        // SAFETY: configured port; txconf is a valid local.
        let rc = unsafe { sys::rte_eth_tx_queue_setup(port_id, q, ntxd, socket as u32, &txconf) };
        if rc != 0 {
            return Err(config_err(format!(
                "rte_eth_tx_queue_setup(port {name}, queue {q}, {ntxd} descriptors): {}",
                eal::strerror(rc)
            )));
        }
    }
    Ok(())
}

/// Promiscuous mode (when asked and the driver can), then starts the device.
fn start(inner: &PortInner) -> Result<(), PortError> {
    let s = &inner.setup;
    let (port_id, name) = (s.port_id, &s.name);
    if inner.opts.promiscuous {
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
        port = %name, driver = %s.driver, rx_queues = s.rx_queues, tx_queues = s.tx_queues,
        rss_hf = format_args!("{:#x}", s.rss_hf),
        rss_symmetric = s.rss_symmetric,
        rx_offloads = format_args!("{:#x}", s.rx_offloads),
        tx_offloads = format_args!("{:#x}", s.tx_offloads),
        placement = ?s.placement,
        timed_send = if s.tx_timestamp.is_some() { "tx timestamp offload" } else { "software pacing" },
        "dpdk: port started"
    );
    Ok(())
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
