//! Opening the ports a config names.

use anyhow::Context;

use crate::config::Config;
use crate::port::gen::GenRx;
use crate::port::pcap::{PcapRx, PcapTx};
use crate::port::{RxPort, TxPort};

/// The opened ports of a config.
pub struct OpenPorts {
    pub rx: Vec<Box<dyn RxPort>>,
    pub rx_names: Vec<String>,
    pub tx: Option<Box<dyn TxPort>>,
    /// The DPDK devices behind `rx` (same order; `None` for other backends) and behind `tx`,
    /// for the CPU executor's zero-copy path.
    #[cfg(feature = "dpdk")]
    pub dpdk_rx: Vec<Option<crate::port::dpdk::DpdkPort>>,
    #[cfg(feature = "dpdk")]
    pub dpdk_tx: Option<crate::port::dpdk::DpdkPort>,
}

/// Opens every port of the config: receiving sides in config order (their index is the `port`
/// of their frames), and the output port's transmit side.
pub fn open_ports(cfg: &Config) -> anyhow::Result<OpenPorts> {
    let mut rx: Vec<Box<dyn RxPort>> = Vec::new();
    let mut rx_names = Vec::new();
    let mut tx: Option<Box<dyn TxPort>> = None;
    #[cfg(feature = "dpdk")]
    let (mut dpdk_rx, mut dpdk_tx) = (Vec::new(), None);
    let out_name = cfg.output.as_ref().map(|o| o.port.value.clone());
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
                if out_name.as_deref() == Some(p.name.as_str()) {
                    let mut o = t.clone();
                    o.path = cfg.resolve(&o.path);
                    tx = Some(Box::new(
                        PcapTx::create(&o).with_context(|| format!("port `{}`", p.name))?,
                    ));
                }
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
            // One device for both directions: RX polls every queue, TX (when this is the
            // output port) uses queue 0. The device closes when both handles are dropped.
            let port = crate::port::dpdk::DpdkPort::open(d, id)
                .with_context(|| format!("port `{}`", p.name))?;
            if out_name.as_deref() == Some(p.name.as_str()) {
                tx = Some(Box::new(
                    port.tx(0).with_context(|| format!("port `{}`", p.name))?,
                ));
                dpdk_tx = Some(port.clone());
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
        #[cfg(feature = "dpdk")]
        dpdk_rx,
        #[cfg(feature = "dpdk")]
        dpdk_tx,
    })
}
