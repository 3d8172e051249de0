//! The start-up checks that touch the file system or the network (`pktwarp validate` runs them so
//! that validate fails where run would). The config layer only parses and checks the document;
//! opening inputs and binding sockets belongs here, with the layers that do it at run time.

use std::path::Path;

use crate::config::{Config, ConfigError};

/// The start-up checks that need the file system or the network, for `pktwarp validate` (so
/// that validate fails where run would): every input is opened (a pcap RX file: its size
/// against `max_bytes`, its header and first record; a gen trace: read as run reads it), the
/// receive threads' `queues.cores` are CPUs the process may run on, every pcap TX path's folder
/// exists and is writable (nothing is created), a slow-path TAP device can be made or attached
/// (then let go; it is not brought up), and `metrics.listen` can be bound (then let go).
/// Errors name the file, the port's line and column, and the key.
pub fn preflight(cfg: &Config) -> Result<(), ConfigError> {
    for (i, p) in cfg.ports.iter().enumerate() {
        let fail = |key: String, msg: String| ConfigError::at(&cfg.path, p, key, msg);
        if let Some(pc) = &p.value.pcap {
            if let Some(r) = &pc.rx {
                let mut o = r.clone();
                o.path = cfg.resolve(&o.path);
                // The header and first record only: loading a large capture is run's work.
                crate::port::pcap::PcapRx::probe(&o)
                    .map_err(|e| fail(format!("ports[{i}].pcap.rx.path"), e.to_string()))?;
            }
            if let Some(t) = &pc.tx {
                check_output_path(&cfg.resolve(&t.path))
                    .map_err(|m| fail(format!("ports[{i}].pcap.tx.path"), m))?;
            }
        }
        if let Some(g) = &p.value.gen {
            let mut o = g.clone();
            let key = if o.trace.is_some() { "trace" } else { "flows" };
            if let Some(t) = &mut o.trace {
                *t = cfg.resolve(t);
            }
            crate::port::gen::GenRx::new(&o, i as u16)
                .map_err(|e| fail(format!("ports[{i}].gen.{key}"), e.to_string()))?;
        }
    }
    check_cores(cfg)?;
    if let Some(t) = cfg.output.as_ref().and_then(|o| o.to_host.as_ref()) {
        if let Some(f) = &t.value.pcap {
            check_output_path(&cfg.resolve(f))
                .map_err(|m| ConfigError::at(&cfg.path, t, "output.to_host.pcap", m))?;
        }
        if let Some(tap) = &t.value.tap {
            crate::port::tap::TapTx::probe(&tap.name)
                .map_err(|m| ConfigError::at(&cfg.path, t, "output.to_host.tap.name", m))?;
        }
    }
    if cfg.metrics.enabled {
        let addr = cfg
            .metrics
            .listen_addr()
            .map_err(|m| ConfigError::whole(&cfg.path, "metrics.listen", m))?;
        crate::control::http::bind(addr)
            .map_err(|e| ConfigError::whole(&cfg.path, "metrics.listen", format!("{e:#}")))?;
    }
    Ok(())
}

/// Every `queues.cores` entry is a CPU this process may run on.
fn check_cores(cfg: &Config) -> Result<(), ConfigError> {
    let Some(cores) = &cfg.queues.cores else {
        return Ok(());
    };
    let allowed = crate::affinity::allowed_cpus()
        .map_err(|e| ConfigError::whole(&cfg.path, "queues.cores", e.to_string()))?;
    for (i, c) in cores.iter().enumerate() {
        if !allowed.contains(c) {
            let list: Vec<String> = allowed.iter().map(usize::to_string).collect();
            return Err(ConfigError::whole(
                &cfg.path,
                format!("queues.cores[{i}]"),
                format!(
                    "CPU {c}: this process may not run on it (allowed: {})",
                    list.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// A capture file can be created at `path`: its folder exists and is writable, and the path
/// itself is not a folder.
fn check_output_path(path: &Path) -> Result<(), String> {
    if path.is_dir() {
        return Err(format!("{} is a folder, not a file", path.display()));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(format!(
            "{}: the folder {} does not exist (create it, or write elsewhere)",
            path.display(),
            dir.display()
        ));
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: the path holds a NUL byte", path.display()))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call; access(2) only reads it.
    let writable = unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0;
    if !writable {
        return Err(format!(
            "{}: the folder {} is not writable",
            path.display(),
            dir.display()
        ));
    }
    Ok(())
}
