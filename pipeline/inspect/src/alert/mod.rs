//! Alerts a user can consume: the record the data path hands over ([`Alert`]), its line in
//! Suricata's EVE JSON format ([`eve`]), the log writer with its own thread and a bounded
//! queue ([`writer`]), and per-rule hit counters ([`counters`]). docs/inspect-alerts.md.

pub mod classify;
pub mod config;
pub mod counters;
pub mod eve;
pub mod writer;

#[cfg(test)]
mod tests;

pub use classify::{ClassError, Classifications};
pub use config::{EveConfig, EveConfigError};
pub use counters::{RuleHit, RuleHits};
pub use writer::{AlertLog, AlertLogCounters, AlertLogHandle, AlertSender};

use crate::eval::Frame;
use crate::rules::{Action, Rule};
use std::net::IpAddr;

/// Severity of a rule with neither `priority` nor a known `classtype` (Suricata's default).
pub const DEFAULT_SEVERITY: u32 = 3;

/// What was done with the alerted frame, as EVE names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertAction {
    /// The frame went on (`alert` rules, or any rule in IDS mode).
    Allowed,
    /// The frame was dropped (`drop` / `reject` rules in IPS mode).
    Blocked,
}

impl AlertAction {
    /// The action of a rule that blocks when the data path enforces it (`drop`, `reject`).
    pub fn of_rule(action: Action, enforcing: bool) -> AlertAction {
        match action {
            Action::Drop | Action::Reject if enforcing => AlertAction::Blocked,
            _ => AlertAction::Allowed,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AlertAction::Allowed => "allowed",
            AlertAction::Blocked => "blocked",
        }
    }
}

/// The transport part of a frame's tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    /// TCP, UDP, SCTP: ports.
    Ports { src: u16, dst: u16 },
    /// ICMP / ICMPv6: type and code (EVE writes `icmp_type`, `icmp_code`, no ports).
    Icmp { kind: u8, code: u8 },
    /// Another protocol: neither.
    None,
}

/// A frame's flow key: addresses (their version is the IP version), IP protocol, transport
/// part, and up to two VLAN ids, outer first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuple {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub l4: L4,
    pub vlan: [Option<u16>; 2],
}

impl Tuple {
    /// The tuple of an evaluated frame (no VLAN; set [`Tuple::vlan`] from the frame's tags).
    pub fn of_frame(f: &Frame) -> Tuple {
        let l4 = match f.ip_proto {
            1 | 58 => L4::Icmp {
                kind: f.icmp_type,
                code: f.icmp_code,
            },
            6 | 17 | 132 => L4::Ports {
                src: f.src_port,
                dst: f.dst_port,
            },
            _ => L4::None,
        };
        Tuple {
            src: f.src,
            dst: f.dst,
            proto: f.ip_proto,
            l4,
            vlan: [None, None],
        }
    }
}

/// What the data path hands to the alert log for one rule match on one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// Receive time, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    pub tuple: Tuple,
    /// The rule's index in the loaded rule set (the [`RuleCatalog`] order).
    pub rule: u32,
    pub action: AlertAction,
    /// The L4 payload, at most `eve.payload_max` bytes, when `eve.payload` is on.
    pub payload: Option<Vec<u8>>,
}

impl Alert {
    /// The alert for rule `rule` matching the evaluated frame `f`, received at `ts_ns`, with
    /// its VLAN ids. The payload is copied only when `payload_max` is Some (what
    /// [`AlertSender::wants_payload`] says), and at most that many bytes.
    pub fn of_frame(
        ts_ns: u64,
        f: &Frame,
        vlan: [Option<u16>; 2],
        rule: u32,
        action: AlertAction,
        payload_max: Option<usize>,
    ) -> Alert {
        let mut tuple = Tuple::of_frame(f);
        tuple.vlan = vlan;
        Alert {
            ts_ns,
            tuple,
            rule,
            action,
            payload: payload_max.map(|m| f.payload[..f.payload.len().min(m)].to_vec()),
        }
    }
}

/// What an alert line says of its rule, looked up by rule index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    pub sid: u32,
    pub gid: u32,
    pub rev: u32,
    /// The rule's `msg` (EVE `signature`).
    pub signature: String,
    /// The classtype's description (EVE `category`); None without a known classtype.
    pub category: Option<String>,
    /// The rule's `priority`, else its classtype's, else [`DEFAULT_SEVERITY`].
    pub severity: u32,
    /// The rule's `metadata` as key -> values, keys in first-seen order.
    pub metadata: Vec<(String, Vec<String>)>,
}

/// The loaded rules as the alert log names them, in rule-index order.
#[derive(Debug, Clone, Default)]
pub struct RuleCatalog {
    pub rules: Vec<RuleInfo>,
    /// (sid, classtype) of rules whose classtype is not in the table.
    pub unknown_classtypes: Vec<(u32, String)>,
}

impl RuleCatalog {
    /// The catalog of `rules`, in the order the evaluator numbers them.
    pub fn new<'a>(rules: impl IntoIterator<Item = &'a Rule>, classes: &Classifications) -> Self {
        let mut cat = RuleCatalog::default();
        for r in rules {
            let class = r.classtype.as_deref().and_then(|c| classes.get(c));
            if let (Some(c), None) = (&r.classtype, class) {
                cat.unknown_classtypes.push((r.sid, c.clone()));
            }
            cat.rules.push(RuleInfo {
                sid: r.sid,
                gid: r.gid,
                rev: r.rev,
                signature: r.msg.clone(),
                category: class.map(|c| c.description.clone()),
                severity: r
                    .priority
                    .or(class.map(|c| c.priority))
                    .unwrap_or(DEFAULT_SEVERITY),
                metadata: metadata_map(&r.metadata),
            });
        }
        cat
    }

    pub fn get(&self, index: u32) -> Option<&RuleInfo> {
        self.rules.get(index as usize)
    }

    /// The summary's line of top rules: `sid 2001999 "msg": 12, sid 7 "msg": 3` (`none`
    /// without hits).
    pub fn top_text(&self, hits: &RuleHits, n: usize) -> String {
        let top = hits.top(n);
        if top.is_empty() {
            return "none".into();
        }
        let parts: Vec<String> = top
            .iter()
            .map(|h| {
                let msg = self.get(h.index).map_or("", |r| r.signature.as_str());
                format!("sid {} {msg:?}: {}", h.sid, h.hits)
            })
            .collect();
        parts.join(", ")
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// `metadata:k v, k2 v2;` keywords as EVE's `alert.metadata` object: each key with all its
/// values, in order. An entry without a value is skipped.
pub fn metadata_map(keywords: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for entry in keywords.iter().flat_map(|k| k.split(',')) {
        let entry = entry.trim();
        let Some((k, v)) = entry.split_once(char::is_whitespace) else {
            continue;
        };
        let v = v.trim().to_string();
        match out.iter_mut().find(|(key, _)| key == k) {
            Some((_, vals)) => vals.push(v),
            None => out.push((k.to_string(), vec![v])),
        }
    }
    out
}
