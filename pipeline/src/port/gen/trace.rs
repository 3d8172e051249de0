//! ClassBench header traces: one header per line, `src_ip dst_ip sport dport proto flags
//! filter_idx` (addresses as 32-bit decimals, whitespace separated). `.gz` files are
//! decompressed on the fly.

use std::net::Ipv4Addr;
use std::path::Path;

use crate::port::PortError;

/// One trace header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceHeader {
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    /// The generator's flags column (not TCP flags).
    pub flags: u32,
    /// The rule the header was generated from (not necessarily its first match).
    pub filter_idx: u32,
}

/// Reads a whole ClassBench trace. Errors name the file, line and column.
pub fn read_trace(path: impl AsRef<Path>) -> Result<Vec<TraceHeader>, PortError> {
    let p = path.as_ref();
    let name = p.display().to_string();
    let io = |source| PortError::Io {
        path: name.clone(),
        source,
    };
    // Read whole with a size bound: `/dev/zero` or a gzip bomb is an error, not an OOM kill.
    let text =
        flow_rules::input::read_text_bounded(p, flow_rules::input::MAX_TEXT_INPUT_BYTES, "trace")
            .map_err(io)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        out.push(parse_line(line).map_err(|(col, reason)| PortError::Format {
            path: name.clone(),
            reason: format!("line {lineno}, column {col}: {reason}"),
        })?);
    }
    if out.is_empty() {
        return Err(PortError::Format {
            path: name,
            reason: "trace holds no headers".into(),
        });
    }
    Ok(out)
}

const FIELDS: [&str; 7] = [
    "src_ip",
    "dst_ip",
    "sport",
    "dport",
    "proto",
    "flags",
    "filter_idx",
];

/// Parses one line; the error carries the 1-based column of the bad field.
pub fn parse_line(line: &str) -> Result<TraceHeader, (usize, String)> {
    let mut vals = [0u64; 7];
    let mut n = 0;
    let mut col = 1;
    let mut rest = line;
    while n < 7 {
        let trimmed = rest.trim_start();
        col += rest.len() - trimmed.len();
        if trimmed.is_empty() {
            return Err((
                col,
                format!("missing field `{}` (expected 7 fields)", FIELDS[n]),
            ));
        }
        let end = trimmed.find(char::is_whitespace).unwrap_or(trimmed.len());
        let tok = &trimmed[..end];
        let max: u64 = match n {
            0 | 1 | 5 | 6 => u64::from(u32::MAX),
            2 | 3 => u64::from(u16::MAX),
            _ => u64::from(u8::MAX),
        };
        vals[n] = match tok.parse::<u64>() {
            Ok(v) if v <= max => v,
            _ => {
                return Err((
                    col,
                    format!(
                        "field `{}`: `{tok}` is not a number in 0..={max}",
                        FIELDS[n]
                    ),
                ))
            }
        };
        col += end;
        rest = &trimmed[end..];
        n += 1;
    }
    Ok(TraceHeader {
        src_ip: Ipv4Addr::from(vals[0] as u32),
        dst_ip: Ipv4Addr::from(vals[1] as u32),
        src_port: vals[2] as u16,
        dst_port: vals[3] as u16,
        proto: vals[4] as u8,
        flags: vals[5] as u32,
        filter_idx: vals[6] as u32,
    })
}
