//! Opening the ports a config names.

use anyhow::Context;

use crate::config::Config;
use crate::port::gen::GenRx;
use crate::port::out::OutPorts;
use crate::port::pcap::{PcapRx, PcapTx};
use crate::port::{RxPort, TxPort};

/// The opened ports of a config.
pub struct OpenPorts {
    pub rx: Vec<Box<dyn RxPort>>,
    pub rx_names: Vec<String>,
    /// The default output port (`output.port`).
    pub tx: Option<Box<dyn TxPort>>,
    /// Every destination besides `tx`: the other ports with a transmit side (by
    /// `Verdict::out_port` index; the default's entry is `None` while it is in `tx`), the
    /// mirror port and the slow path. [`OpenPorts::take_out`] puts `tx` back in.
    pub out: OutPorts,
    /// The DPDK devices behind `rx` (same order; `None` for other backends) and behind the
    /// output ports (by `out_port` index, as `out.ports`; the default output's included), for
    /// the CPU executor's zero-copy path.
    #[cfg(feature = "dpdk")]
    pub dpdk_rx: Vec<Option<crate::port::dpdk::DpdkPort>>,
    #[cfg(feature = "dpdk")]
    pub dpdk_out: Vec<Option<crate::port::dpdk::DpdkPort>>,
    /// The DPDK device behind the mirror port (`output.mirror`), for the zero-copy path's
    /// mirror copies by reference.
    #[cfg(feature = "dpdk")]
    pub dpdk_mirror: Option<crate::port::dpdk::DpdkPort>,
    /// Who steers each receiving DPDK port's frames, and why (also in the summary).
    pub steering: Vec<PortSteering>,
}

/// Who steers one receiving port's frames: `nic` (the port's NIC took the config's whole
/// steering rule set) or `software` (the ingest steers), with the reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PortSteering {
    /// The port's name in the config.
    pub port: String,
    /// `nic` or `software`.
    pub by: String,
    pub reason: String,
}

/// The role `open_ports` gives a port's transmit side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxRole {
    /// An output port: the default (`output.port`) or another, with its `out_port` index
    /// (`None`: a default output that is not among `Config::tx_port_names`).
    Output(Option<usize>),
    Mirror,
    ToHost,
    /// No role: its frames go nowhere.
    Unused,
}

/// Opens every port of the config: receiving sides in config order (their index is the `port`
/// of their frames), and the output port's transmit side.
pub fn open_ports(cfg: &Config) -> anyhow::Result<OpenPorts> {
    let mut rx: Vec<Box<dyn RxPort>> = Vec::new();
    let mut rx_names = Vec::new();
    let mut tx: Option<Box<dyn TxPort>> = None;
    #[cfg(feature = "dpdk")]
    let (mut dpdk_rx, mut dpdk_mirror) = (Vec::new(), None);
    #[cfg(feature = "dpdk")]
    let mut dpdk_out: Vec<Option<crate::port::dpdk::DpdkPort>> =
        cfg.tx_port_names().iter().map(|_| None).collect();
    #[cfg(feature = "dpdk")]
    let steer_rules = steering_rules(cfg)?;
    #[allow(unused_mut)] // only DPDK ports push to it
    let mut steering = Vec::new();
    let out_name = cfg.output.as_ref().map(|o| o.port.value.clone());
    let tx_names = cfg.tx_port_names();
    let mirror_name = cfg
        .output
        .as_ref()
        .and_then(|o| o.mirror.as_ref())
        .map(|m| m.value.clone());
    let slow_name = cfg
        .output
        .as_ref()
        .and_then(|o| o.to_host.as_ref())
        .and_then(|t| t.value.port.clone());
    let mut out = OutPorts {
        ports: tx_names.iter().map(|_| None).collect(),
        default: out_name
            .as_ref()
            .and_then(|n| tx_names.iter().position(|t| t == n)),
        names: tx_names.clone(),
        mirror: None,
        all_to_default: false,
        to_host: open_to_host(cfg)?,
    };
    // Where a port's transmit side goes: the default output, the mirror, the slow path, or
    // its `out_port` slot (a port is opened once, for one role). Returns the role given.
    let mut place = |name: &str, port: Box<dyn TxPort>, tx: &mut Option<Box<dyn TxPort>>| {
        let k = tx_names.iter().position(|t| t == name);
        if out_name.as_deref() == Some(name) {
            *tx = Some(port);
            TxRole::Output(k)
        } else if mirror_name.as_deref() == Some(name) {
            out.mirror = Some(port);
            TxRole::Mirror
        } else if slow_name.as_deref() == Some(name) {
            out.to_host = Some(port);
            TxRole::ToHost
        } else if let Some(k) = k {
            out.ports[k] = Some(port);
            TxRole::Output(Some(k))
        } else {
            TxRole::Unused
        }
    };
    for p in &cfg.ports {
        let p = &p.value;
        let id = rx.len() as u16;
        if let Some(pc) = &p.pcap {
            if let Some(r) = &pc.rx {
                let mut o = r.clone();
                o.path = cfg.resolve(&o.path);
                rx.push(Box::new(
                    PcapRx::open(&o, id).with_context(|| format!("port `{}`", p.name))?,
                ));
                rx_names.push(p.name.clone());
                #[cfg(feature = "dpdk")]
                dpdk_rx.push(None);
            }
            if let Some(t) = &pc.tx {
                let mut o = t.clone();
                o.path = cfg.resolve(&o.path);
                let port = PcapTx::create(&o).with_context(|| format!("port `{}`", p.name))?;
                place(&p.name, Box::new(port), &mut tx);
            }
        }
        if let Some(g) = &p.gen {
            let mut o = g.clone();
            if let Some(t) = &mut o.trace {
                *t = cfg.resolve(t);
            }
            rx.push(Box::new(
                GenRx::new(&o, id).with_context(|| format!("port `{}`", p.name))?,
            ));
            rx_names.push(p.name.clone());
            #[cfg(feature = "dpdk")]
            dpdk_rx.push(None);
        }
        #[cfg(feature = "dpdk")]
        if let Some(d) = &p.dpdk {
            // One device for both directions: RX polls every queue, TX queue q is queue q's TX
            // thread's (the handle of queue 0 stands for them until the TX threads split it).
            // The device closes when every handle is dropped. The NIC hashes as the software
            // steering does (both directions of a flow on one queue when the pipeline keeps
            // per-flow state).
            let mut d = tx_queues_for(cfg, d);
            d.symmetric_rss = cfg.symmetric_rss();
            let port = crate::port::dpdk::DpdkPort::open(&d, id)
                .with_context(|| format!("port `{}`", p.name))?;
            steering.push(steer_port(cfg, &p.name, &port, steer_rules.as_deref()));
            let t = port.tx(0).with_context(|| format!("port `{}`", p.name))?;
            // The device behind its transmit side, in the role `place` gave it.
            match place(&p.name, Box::new(t), &mut tx) {
                TxRole::Output(Some(k)) => dpdk_out[k] = Some(port.clone()),
                TxRole::Mirror => dpdk_mirror = Some(port.clone()),
                TxRole::Output(None) | TxRole::ToHost | TxRole::Unused => {}
            }
            rx.push(Box::new(
                port.rx(&[]).with_context(|| format!("port `{}`", p.name))?,
            ));
            rx_names.push(p.name.clone());
            dpdk_rx.push(Some(port));
        }
    }
    Ok(OpenPorts {
        rx,
        rx_names,
        tx,
        out,
        #[cfg(feature = "dpdk")]
        dpdk_rx,
        #[cfg(feature = "dpdk")]
        dpdk_out,
        #[cfg(feature = "dpdk")]
        dpdk_mirror,
        steering,
    })
}

/// A DPDK port's options with its TX threads: `queues.count` (one TX thread per queue) or 1
/// (`queues.tx_threads: one`); where `tx_queues` is left out the port gets one TX queue per
/// thread, as far as the device has them (the config check refused a given value below
/// `queues.count` where each queue has its TX thread).
#[cfg(feature = "dpdk")]
fn tx_queues_for(
    cfg: &Config,
    d: &crate::port::dpdk::DpdkPortOptions,
) -> crate::port::dpdk::DpdkPortOptions {
    let mut o = d.clone();
    o.tx_threads = match cfg.queues.tx_threads {
        crate::config::TxThreadsMode::PerQueue => cfg.queues.count,
        crate::config::TxThreadsMode::One => 1,
    };
    o
}

/// The config's steering rules (checked by `prepare` already), for the NIC.
#[cfg(feature = "dpdk")]
fn steering_rules(cfg: &Config) -> anyhow::Result<Option<Vec<flow_rules::steering::SteerRule>>> {
    let Some(path) = cfg.steering.as_ref().and_then(|s| s.rules.as_ref()) else {
        return Ok(None);
    };
    let set = flow_rules::steering::SteerRuleSet::load(cfg.resolve(path))?;
    Ok(Some(set.rules))
}

/// Puts the config's steering rules in `port`'s NIC when it takes every one of them (and
/// `steering.offload` is not `off`); otherwise the ingest steers this port in software. Logged
/// (`event=steering_path`) and returned for the summary.
#[cfg(feature = "dpdk")]
fn steer_port(
    cfg: &Config,
    name: &str,
    port: &crate::port::dpdk::DpdkPort,
    rules: Option<&[flow_rules::steering::SteerRule]>,
) -> PortSteering {
    use crate::config::SteeringOffload;
    let offload = cfg.steering.as_ref().map(|s| s.offload).unwrap_or_default();
    let rxq = port.setup().rx_queues;
    let nq = cfg.queues.count;
    let decided: Result<String, String> = match rules {
        None => Err("no steering rule file (RSS over the queues, in software)".into()),
        Some(_) if offload == SteeringOffload::Off => Err("steering.offload: off".into()),
        // The NIC's queue numbers are the executor's only when they are the same queues.
        Some(_) if rxq != nq => Err(format!(
            "the port has {rxq} RX queues and queues.count is {nq} (the NIC steers only when they are equal)"
        )),
        Some(r) => port
            .offload_rules(r)
            .map(|flows| format!("all {} rules in the NIC as {flows} rte_flow rules", r.len()))
            .map_err(|why| format!("the NIC refused {why}")),
    };
    let (by, reason) = match decided {
        Ok(why) => ("nic", why),
        Err(why) => ("software", why),
    };
    tracing::info!(
        event = "steering_path",
        port = %name,
        by,
        reason = %reason,
        "port {name} steered by {by}: {reason}"
    );
    PortSteering {
        port: name.to_string(),
        by: by.to_string(),
        reason,
    }
}

impl OpenPorts {
    /// Every destination, the default output included (for the CPU executor's TX thread).
    pub fn take_out(&mut self) -> OutPorts {
        let mut out = std::mem::take(&mut self.out);
        if let (Some(k), Some(t)) = (out.default, self.tx.take()) {
            if let Some(slot) = out.ports.get_mut(k) {
                *slot = Some(t);
            }
        }
        out
    }
}

/// Opens the slow-path destination of `output.to_host` when it is a pcap file or a TAP device
/// (a `port:` is opened with the other ports). A TAP that cannot be made is an error naming
/// the config file, the line and `output.to_host.tap.name`.
fn open_to_host(
    cfg: &crate::config::Config,
) -> anyhow::Result<Option<Box<dyn crate::port::TxPort>>> {
    use anyhow::Context;
    let Some(t) = cfg.output.as_ref().and_then(|o| o.to_host.as_ref()) else {
        return Ok(None);
    };
    if let Some(f) = &t.value.pcap {
        let opts = crate::port::pcap::PcapTxOptions::new(cfg.resolve(f));
        let tx = crate::port::pcap::PcapTx::create(&opts).context("output.to_host.pcap")?;
        return Ok(Some(Box::new(tx)));
    }
    if let Some(tap) = &t.value.tap {
        let tx = crate::port::tap::TapTx::open(&tap.name).map_err(|message| {
            crate::config::ConfigError {
                file: cfg.path.clone(),
                line: t.referenced.line() as u32,
                column: t.referenced.column() as u32,
                key: "output.to_host.tap.name".into(),
                message,
            }
        })?;
        return Ok(Some(Box::new(tx)));
    }
    Ok(None)
}
