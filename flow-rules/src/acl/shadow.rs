//! Shadowed-rule warnings: a rule fully covered by an earlier rule can never match.
//!
//! Bounded cost: checking every pair is O(n^2) (5 * 10^9 cover tests at 100K rules). Instead each
//! rule is tested only against a small candidate set: the first rule the compiled classifier
//! matches at the rule's lowest corner and at its highest corner (any cover must match both
//! corners, so a cover earlier than those first matches cannot exist; a cover between is missed)
//! and the `NEIGHBOURS` rules just before it (where duplicates usually sit). That is two lookups
//! and at most 18 cover tests per rule. Rules made unreachable only by the union of several
//! earlier rules are not reported. A reported rule is always truly shadowed.

use super::{AclClassifier, AclRule, Family};
use crate::abi::{AclKey, ACL_NO_MATCH};
use crate::error::RuleWarning;

const NEIGHBOURS: usize = 16;

fn corner(r: &AclRule, high: bool) -> AclKey {
    let (sm, dm) = if r.family == Family::Any {
        ([0u32; 4], [0u32; 4])
    } else {
        (r.src.mask(r.family), r.dst.mask(r.family))
    };
    let words = if r.family == Family::V6 { 4 } else { 1 };
    let mut src = [0u32; 4];
    let mut dst = [0u32; 4];
    for i in 0..words {
        src[i] = if high {
            r.src.addr[i] | !sm[i]
        } else {
            r.src.addr[i]
        };
        dst[i] = if high {
            r.dst.addr[i] | !dm[i]
        } else {
            r.dst.addr[i]
        };
    }
    let pick8 = |m: super::Masked<u8>| if high { m.value | !m.mask } else { m.value };
    let pick16 = |m: super::Masked<u16>| if high { m.value | !m.mask } else { m.value };
    AclKey {
        src_ip: src,
        dst_ip: dst,
        src_port: if high { r.src_port.hi } else { r.src_port.lo },
        dst_port: if high { r.dst_port.hi } else { r.dst_port.lo },
        proto: pick8(r.proto),
        ip_version: if r.family == Family::V6 { 6 } else { 4 },
        dscp: pick8(r.dscp) & 0x3F,
        tcp_flags: pick8(r.tcp_flags),
        vlan_id: pick16(r.vlan),
        port_id: pick16(r.port_id),
    }
}

/// Warnings for rules covered by an earlier rule (see module docs for what is checked).
pub fn find_shadowed(rules: &[AclRule], cls: &AclClassifier) -> Vec<RuleWarning> {
    let mut out = Vec::new();
    for (j, r) in rules.iter().enumerate() {
        let mut cands: Vec<usize> = Vec::with_capacity(NEIGHBOURS + 2);
        for high in [false, true] {
            let m = cls.classify(&corner(r, high));
            if m != ACL_NO_MATCH && (m as usize) < j {
                cands.push(m as usize);
            }
        }
        cands.extend(j.saturating_sub(NEIGHBOURS)..j);
        if let Some(&i) = cands.iter().find(|&&i| rules[i].covers(r)) {
            out.push(RuleWarning {
                loc: r.loc.clone(),
                field: String::new(),
                message: format!(
                    "rule {j}{} is shadowed by rule {i}{} ({}) and can never match",
                    r.name
                        .as_deref()
                        .map(|n| format!(" `{n}`"))
                        .unwrap_or_default(),
                    rules[i]
                        .name
                        .as_deref()
                        .map(|n| format!(" `{n}`"))
                        .unwrap_or_default(),
                    rules[i].loc
                ),
            });
        }
    }
    out
}
