//! Rule actions that rewrite: beside its verdict a rule may set the DSCP, the destination MAC
//! and the output port (YAML `set: { dscp: N, dst_mac: MAC, port: NAME }`).
//!
//! Semantics (one definition for the CPU `acl` stage and the CUDA `pw_stage_acl_rw`): applied
//! when the rule matches and its verdict is not drop, in the order DSCP (the `dscp` stage's
//! rewrite: ECN kept, IPv4 checksum updated incrementally; skipped without an outer IP header),
//! destination MAC (the `l2fwd` stage's `dst`; skipped for a frame shorter than an Ethernet
//! header), output port (`Verdict::out_port`, as `route` sets it).
//!
//! Encoding: a rule set with at least one rewrite has a rewrite array at `rewrites_off` in the
//! image header (`pw_acl_tables.rewrites_off`, the header's first reserved word), one record of
//! [`ACL_REWRITE_WORDS`] words per rule: `[flags | dscp << 8 | out_port << 16, mac[0..4],
//! mac[4..6]]` (MAC bytes little-endian in their words; flags [`RW_DSCP`], [`RW_DST_MAC`],
//! [`RW_PORT`]; a rule without a rewrite has flags 0). A rule set without rewrites has
//! `rewrites_off` 0 and no array: its image is byte for byte what it was, and the lookup path
//! (trees, records, actions) is the same in both.

use crate::error::{Location, RuleError};

/// Words per rule in the rewrite array (`PW_ACL_REWRITE_WORDS`).
pub const ACL_REWRITE_WORDS: usize = 3;
/// Rewrite flags (`PW_ACL_RW_*`), low byte of a record's word 0.
pub const RW_DSCP: u32 = 1;
pub const RW_DST_MAC: u32 = 2;
pub const RW_PORT: u32 = 4;
/// `out_port` meaning the default output (`PW_OUT_DEFAULT`).
pub const OUT_DEFAULT: u16 = 0xFFFF;

/// What a rule rewrites when it matches (at least one of the three is set).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AclRewrite {
    /// 0..=63.
    pub dscp: Option<u8>,
    pub dst_mac: Option<[u8; 6]>,
    /// The output port by name, and where the name is (for errors).
    pub port: Option<(String, Location)>,
    /// The port's `out_port` index, set by [`resolve_ports`] (the image stores it).
    pub out_port: Option<u16>,
}

/// A rewrite as the image stores it (the names resolved away).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RewriteRecord {
    pub dscp: Option<u8>,
    pub dst_mac: Option<[u8; 6]>,
    pub out_port: Option<u16>,
}

impl RewriteRecord {
    /// The record's words (see the module documentation).
    pub fn encode(&self) -> [u32; ACL_REWRITE_WORDS] {
        let mut flags = 0;
        if self.dscp.is_some() {
            flags |= RW_DSCP;
        }
        if self.dst_mac.is_some() {
            flags |= RW_DST_MAC;
        }
        if self.out_port.is_some() {
            flags |= RW_PORT;
        }
        let m = self.dst_mac.unwrap_or([0; 6]);
        [
            flags
                | u32::from(self.dscp.unwrap_or(0) & 0x3F) << 8
                | u32::from(self.out_port.unwrap_or(0)) << 16,
            u32::from_le_bytes([m[0], m[1], m[2], m[3]]),
            u32::from_le_bytes([m[4], m[5], 0, 0]),
        ]
    }

    /// The record of `w`; `None` when it rewrites nothing (flags 0).
    pub fn decode(w: &[u32]) -> Option<RewriteRecord> {
        let (&w0, &w1, &w2) = (w.first()?, w.get(1)?, w.get(2)?);
        if w0 & 0xFF == 0 {
            return None;
        }
        let (a, b) = (w1.to_le_bytes(), w2.to_le_bytes());
        Some(RewriteRecord {
            dscp: (w0 & RW_DSCP != 0).then_some((w0 >> 8) as u8 & 0x3F),
            dst_mac: (w0 & RW_DST_MAC != 0).then_some([a[0], a[1], a[2], a[3], b[0], b[1]]),
            out_port: (w0 & RW_PORT != 0).then_some((w0 >> 16) as u16),
        })
    }
}

impl AclRewrite {
    /// The stored form. A port not resolved ([`resolve_ports`]) is stored as the default output.
    pub fn record(&self) -> RewriteRecord {
        RewriteRecord {
            dscp: self.dscp,
            dst_mac: self.dst_mac,
            out_port: self
                .port
                .as_ref()
                .map(|_| self.out_port.unwrap_or(OUT_DEFAULT)),
        }
    }
}

/// Maps every rule's `set: { port }` name to its `out_port`: with `tx_ports` (the config's ports
/// with a transmit side, config order), the name's index there, and a name not among them is an
/// error naming the rule file, line and key `set.port`; without (a rule set used outside a
/// config), each distinct name's index in first-use order.
pub fn resolve_ports(
    rules: &mut [super::AclRule],
    tx_ports: Option<&[String]>,
) -> Result<(), RuleError> {
    let mut seen: Vec<String> = Vec::new();
    for r in rules.iter_mut() {
        let Some(rw) = r.set.as_mut() else { continue };
        let Some((name, loc)) = &rw.port else {
            continue;
        };
        let idx = match tx_ports {
            Some(names) => names.iter().position(|n| n == name).ok_or_else(|| {
                RuleError::new(
                    loc.clone(),
                    "set.port",
                    format!(
                        "unknown port `{name}` (ports with a transmit side: {})",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                )
            })?,
            None => match seen.iter().position(|n| n == name) {
                Some(i) => i,
                None => {
                    seen.push(name.clone());
                    seen.len() - 1
                }
            },
        };
        rw.out_port = Some(u16::try_from(idx).unwrap_or(OUT_DEFAULT));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        for rec in [
            RewriteRecord {
                dscp: Some(46),
                dst_mac: Some([2, 0, 0, 0, 0, 0xab]),
                out_port: Some(3),
            },
            RewriteRecord {
                dscp: Some(0),
                ..Default::default()
            },
            RewriteRecord {
                out_port: Some(0),
                ..Default::default()
            },
        ] {
            assert_eq!(RewriteRecord::decode(&rec.encode()), Some(rec));
        }
        assert_eq!(RewriteRecord::decode(&[0, 0, 0]), None);
        assert_eq!(RewriteRecord::decode(&[1, 0]), None);
    }
}
