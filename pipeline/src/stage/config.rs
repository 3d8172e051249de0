//! The pipeline's stage entries as the config file writes them (`pipeline:` list), and the
//! options of the built-in stages that have their own keys.

use std::path::PathBuf;

use serde::Deserialize;

/// One stage of the pipeline: `parse`, `count`, `acl: {...}` or `custom: { name: ..., ... }`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum StageConfig {
    /// Fill the packet metadata; malformed frames are dropped with reason `parse_error`.
    Parse,
    /// Count frames and bytes that reach this point.
    Count,
    /// Classify against an ACL rule file; the first matching rule's action is the verdict.
    Acl(AclStageConfig),
    /// A stage registered by the binary (`pipeline::stage::StageRegistry`) under `name`.
    Custom(CustomStageConfig),
    /// Rewrite the MACs: `{ mac: swap }` and / or `{ src: MAC, dst: MAC }`
    /// ([`crate::rewrite::L2fwdConfig`]).
    L2fwd(crate::rewrite::L2fwdConfig),
    /// Push, pop or set the outermost VLAN tag ([`crate::rewrite::VlanConfig`]).
    Vlan(crate::rewrite::VlanConfig),
    /// `- ttl`: decrement the IPv4 TTL / IPv6 hop limit (checksum updated); 0 or 1 on arrival
    /// drops the frame (`ttl_expired`). Needs `parse` before it.
    Ttl,
    /// `{ set: N }`: write the DSCP, keep ECN ([`crate::rewrite::DscpConfig`]). Needs `parse`.
    Dscp(crate::rewrite::DscpConfig),
    /// `{ routes: FILE }`: longest-prefix match on the destination address; the next hop's MAC
    /// becomes the destination MAC and its port (a port of this config with a transmit side)
    /// the frame's output port; no route: `no_route` drop. Needs `parse`. Reloaded by SIGHUP.
    Route(crate::rewrite::RouteConfig),
    /// `{ mac: MAC, ipv4: [...], ipv6: [...] }`: answer ARP requests and ICMP / ICMPv6 echo
    /// requests for these addresses; the reply goes out of the ingress port
    /// ([`crate::rewrite::RespondConfig`]). Needs `parse`.
    Respond(crate::rewrite::RespondConfig),
    /// `{ delay_ns: N }`: the frame's send time is its receive time plus N ns (a delay line;
    /// [`crate::rewrite::TxTimeConfig`]); output ports send it then (pcap: the record time).
    #[serde(rename = "tx_time")]
    TxTime(crate::rewrite::TxTimeConfig),
    /// `{ entries: N, strict, hash_seed, timeouts: {...} }`: connection tracking, a flow table
    /// of `entries` per queue (`pktwarp_flow::FlowConfig`, docs/flow-table.md); the frame's
    /// state goes into the metadata for the ACL's `ct:` match. Needs `parse`. CPU executor.
    Conntrack(pktwarp_flow::FlowConfig),
    /// `{ active_timeout_s, entries, ... }`: per-flow statistics exported as IPFIX to the
    /// config's `ipfix:` collector (docs/ipfix.md); the flow table is conntrack's when the
    /// pipeline has one. Needs `parse`. CPU executor.
    #[serde(rename = "flow_stats")]
    FlowStats(crate::stage::flow_stats::FlowStatsConfig),
    /// `{ entries: N, rules: [...], on_full, hash_seed }`: per-key token buckets, a table of
    /// `entries` per queue (`pktwarp_flow::rate::RateConfig`, docs/rate-limit.md); over the
    /// rate: `rate_limited` drop. Needs `parse`. Both executors. SIGHUP reloads the rules.
    #[serde(rename = "rate_limit")]
    RateLimit(pktwarp_flow::rate::RateConfig),
    /// `{ rules: [...], vars, strict, eve: {...}, alert_to }`: IDS rules over the payload
    /// ([`crate::stage::inspect::InspectStageConfig`], docs/inspect.md). Needs `parse`. CPU
    /// executor. Reloaded by SIGHUP.
    Inspect(crate::stage::inspect::InspectStageConfig),
    /// A stage under a config key of its own that a crate above the library registered
    /// (`stage::keyed`); the config's stage list reads it (`config::Config::pipeline`).
    #[serde(skip)]
    Keyed(crate::stage::keyed::KeyedStageConfig),
}

impl StageConfig {
    /// The stage's descriptor (a built-in's or a keyed stage's); `None` for a `custom:` stage.
    pub fn descriptor(&self) -> Option<&'static crate::stage::StageDescriptor> {
        use crate::rewrite as rw;
        Some(match self {
            StageConfig::Parse => &crate::stage::parse::DESCRIPTOR,
            StageConfig::Count => &crate::stage::count::DESCRIPTOR,
            StageConfig::Acl(_) => &crate::stage::acl::DESCRIPTOR,
            StageConfig::Custom(_) => return None,
            StageConfig::Keyed(k) => k.stage.descriptor(),
            StageConfig::L2fwd(_) => &rw::l2fwd::DESCRIPTOR,
            StageConfig::Vlan(_) => &rw::vlan::DESCRIPTOR,
            StageConfig::Ttl => &rw::ttl::DESCRIPTOR,
            StageConfig::Dscp(_) => &rw::dscp::DESCRIPTOR,
            StageConfig::Route(_) => &rw::route::DESCRIPTOR,
            StageConfig::Respond(_) => &rw::respond::DESCRIPTOR,
            StageConfig::TxTime(_) => &rw::tx_time::DESCRIPTOR,
            StageConfig::Conntrack(_) => &crate::stage::conntrack::DESCRIPTOR,
            StageConfig::FlowStats(_) => &crate::stage::flow_stats::DESCRIPTOR,
            StageConfig::RateLimit(_) => &crate::stage::rate_limit::DESCRIPTOR,
            StageConfig::Inspect(_) => &crate::stage::inspect::DESCRIPTOR,
        })
    }

    /// The stage's name: a built-in's key, or a custom stage's `name`.
    pub fn name(&self) -> &str {
        match self {
            StageConfig::Custom(c) => &c.name,
            s => s.descriptor().map_or("", |d| d.name),
        }
    }
}

/// `custom: { name: syn_guard, min_src_port: 1024 }`: the registered stage `name`, and its
/// options (every other key, handed to the stage's factory, which checks them).
#[derive(Clone, Debug, PartialEq)]
pub struct CustomStageConfig {
    pub name: String,
    /// A JSON object of the options (empty when there are none).
    pub options: serde_json::Value,
}

impl<'de> Deserialize<'de> for CustomStageConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let name = match map.remove("name") {
            Some(serde_json::Value::String(n)) => n,
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "`custom.name` must be a string (a registered stage's name), got {other}"
                )))
            }
            None => {
                return Err(D::Error::custom(
                    "a `custom` stage needs `name` (a registered stage's name)",
                ))
            }
        };
        Ok(CustomStageConfig {
            name,
            options: serde_json::Value::Object(map),
        })
    }
}

/// Rule file format for the `acl` stage.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RuleFormat {
    /// pktwarp's YAML rule file.
    Yaml,
    /// ClassBench / `dpdk-test-acl` rule lines (`@src dst sport dport proto`); `.gz` is read too.
    Classbench,
}

/// Verdict for a frame no rule matches.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DefaultAction {
    #[default]
    Pass,
    Drop,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclStageConfig {
    /// Rule file. Relative to the config file.
    pub rules: PathBuf,
    /// Rule file format; default from the name: `.yaml`/`.yml` = yaml, else classbench.
    #[serde(default)]
    pub format: Option<RuleFormat>,
    /// Verdict when no rule matches. Default `pass`.
    #[serde(default)]
    pub default: DefaultAction,
}
