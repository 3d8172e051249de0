//! Steering rules: rte_flow-like patterns over eth / vlan / ipv4 / ipv6 / tcp / udp / vxlan /
//! gtpu / ecpri fields, mapped to queue, RSS over queues, drop and mark. One rule file serves
//! both ways a port steers: translated to rte_flow when the NIC can ([`SteerRule::flow_patterns`],
//! docs/steering.md), and compiled to a software matcher ([`SteerMatcher`]) that the port ingest
//! runs per frame otherwise.
//!
//! ```
//! use flow_rules::steering::{Fate, SteerKey, SteerRuleSet};
//!
//! let set = SteerRuleSet::parse(
//!     "queues: 4\nrules:\n  - match: {udp: {dst_port: 2152}}\n    actions: [{queue: 3}]\n",
//!     "inline.steering.yaml",
//! )?;
//! let matcher = set.compile();
//! let key = SteerKey { ip_version: 4, ip_proto: 17, l4: true, dst_port: 2152, ..SteerKey::default() };
//! assert_eq!(matcher.decide(&key).fate, Fate::Queue(3));
//! # Ok::<(), flow_rules::error::RuleError>(())
//! ```

mod key;
mod matcher;
mod model;
mod yaml;

pub use key::{
    Fate, RssHash, RssTarget, SteerDecision, SteerKey, RETA_SIZE, TUNNEL_GTPU, TUNNEL_NONE,
    TUNNEL_VXLAN,
};
pub use matcher::{SteerMatcher, SteerMatcherStats};
pub use model::{
    Action, EcpriItem, EthItem, GtpuItem, Ipv4Item, Ipv4Prefix, Ipv6Item, Ipv6Prefix, Item, Masked,
    PortRange, PortsItem, RssAction, RuleIssue, SteerRule, VlanItem, VxlanItem, ETHER_TYPE_ECPRI,
    ETHER_TYPE_IPV4, ETHER_TYPE_IPV6, IP_PROTO_TCP, IP_PROTO_UDP,
};
pub use yaml::SteerRuleSet;
