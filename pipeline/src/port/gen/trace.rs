//! ClassBench header traces, read by the reader `pktwarp classify` uses
//! (`flow_rules::acl::classbench::parse_trace`), so every command takes the same files: one
//! header per line, `src dst sport dport proto [flags [filter]]`, whitespace separated; addresses
//! as 32-bit decimals or dotted quads (ClassBench's traces) or IPv6 text (`dpdk-test-acl
//! --ipv6`'s), the family decided per line. `.gz` files are decompressed on the fly.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use flow_rules::acl::classbench::{parse_trace, TraceEntry};

use crate::port::PortError;

/// One trace header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceHeader {
    /// Source and destination, of one family.
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    /// The rule the header was generated from (not necessarily its first match), where the
    /// line gives one.
    pub filter_idx: Option<u32>,
}

/// Reads a whole ClassBench trace. Errors name the file, line, column and field.
pub fn read_trace(path: impl AsRef<Path>) -> Result<Vec<TraceHeader>, PortError> {
    let p = path.as_ref();
    let name = p.display().to_string();
    // Read whole with a size bound: `/dev/zero` or a gzip bomb is an error, not an OOM kill.
    let text =
        flow_rules::input::read_text_bounded(p, flow_rules::input::MAX_TEXT_INPUT_BYTES, "trace")
            .map_err(|source| PortError::Io {
            path: name.clone(),
            error: source,
        })?;
    let entries = parse_trace(p, &text).map_err(|e| PortError::Format {
        path: name.clone(),
        reason: format!(
            "line {}, column {}: field `{}`: {}",
            e.loc.line, e.loc.column, e.field, e.message
        ),
    })?;
    if entries.is_empty() {
        return Err(PortError::Format {
            path: name,
            reason: "trace holds no headers".into(),
        });
    }
    Ok(entries.iter().map(header).collect())
}

fn header(e: &TraceEntry) -> TraceHeader {
    let k = &e.key;
    TraceHeader {
        src_ip: addr(k.ip_version, k.src_ip),
        dst_ip: addr(k.ip_version, k.dst_ip),
        src_port: k.src_port,
        dst_port: k.dst_port,
        proto: k.proto,
        filter_idx: e.filter,
    }
}

/// An ACL key's address words (IPv4 in word 0; IPv6 as four big-endian words).
fn addr(version: u8, w: [u32; 4]) -> IpAddr {
    if version == 6 {
        let v = w.iter().fold(0u128, |a, &x| (a << 32) | u128::from(x));
        IpAddr::V6(Ipv6Addr::from(v))
    } else {
        IpAddr::V4(Ipv4Addr::from(w[0]))
    }
}
