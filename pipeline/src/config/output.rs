//! The checks of the `output:` section.

use super::{Config, ConfigError};

/// The config checks of `output.mirror` and `output.to_host`: a named port exists and has a
/// transmit side; `to_host` names exactly one of `pcap`, `port` and `tap` (a TAP name Linux
/// takes). Errors name the file, the line and the key.
pub(super) fn check_output(cfg: &Config) -> Result<(), ConfigError> {
    let Some(out) = &cfg.output else {
        return Ok(());
    };
    let err = |line: u64, column: u64, key: &str, message: String| ConfigError {
        file: cfg.path.clone(),
        line: line as u32,
        column: column as u32,
        key: key.to_string(),
        message,
    };
    let tx = cfg.tx_port_names();
    let check_port = |name: &str, line, column, key: &str| {
        if tx.iter().any(|n| n == name) {
            return Ok(());
        }
        let why = if cfg.ports.iter().any(|p| p.value.name == name) {
            format!("port `{name}` has no transmit side (a pcap port with `tx`, or dpdk)")
        } else {
            format!(
                "no port named `{name}` (ports with a transmit side: {})",
                tx.join(", ")
            )
        };
        Err(err(line, column, key, why))
    };
    if let Some(m) = &out.mirror {
        let (l, c) = (m.referenced.line(), m.referenced.column());
        check_port(&m.value, l, c, "output.mirror")?;
    }
    if let Some(t) = &out.to_host {
        let (l, c) = (t.referenced.line(), t.referenced.column());
        match (&t.value.pcap, &t.value.port, &t.value.tap) {
            (Some(f), None, None) if f.as_os_str().is_empty() => {
                return Err(err(
                    l,
                    c,
                    "output.to_host.pcap",
                    "names no file (an empty path)".into(),
                ))
            }
            (Some(_), None, None) => {}
            (None, Some(p), None) => check_port(p, l, c, "output.to_host.port")?,
            (None, None, Some(tap)) => crate::port::tap::check_name(&tap.name)
                .map_err(|m| err(l, c, "output.to_host.tap.name", m))?,
            _ => {
                return Err(err(
                    l,
                    c,
                    "output.to_host",
                    "give exactly one of `pcap: FILE`, `port: NAME` and `tap: { name: IFNAME }`"
                        .into(),
                ))
            }
        }
    }
    Ok(())
}
