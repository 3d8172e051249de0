//! ACL rules: the model, the files they come from (YAML, ClassBench / `dpdk-test-acl`), shadowing
//! warnings, the classifier compiler and its CPU matcher.
//!
//! Semantics (one definition, shared by the linear reference, the compiled matcher and the CUDA
//! matcher in `gpu-kernels/acl.cuh`): rules are tried in file order and the first rule whose every
//! field matches the key wins. A rule is of one address family: IPv4 (it has an IPv4 prefix),
//! IPv6 (an IPv6 prefix), or any (both prefixes wildcard). A rule of family `any` matches IPv4 and
//! IPv6 keys; it also matches a non-IP key (`ip_version` 0) when it has no L3/L4 condition at all
//! (addresses, ports, protocol, DSCP and TCP flags all wildcard): only VLAN and ingress port may
//! then be constrained. Non-IP frames therefore match nothing but such L2-only rules.

pub mod classbench;
pub mod compile;
pub mod ct;
pub mod cuda_host;
pub mod gen4;
pub mod gen6;
pub mod lanes;
pub mod rewrite;
pub mod shadow;
pub mod yaml;

use crate::abi::{AclKey, VLAN_NONE};
use crate::error::{Location, RuleError, RuleWarning};

pub use compile::{AclClassifier, BuildStats};
pub use rewrite::{AclRewrite, RewriteRecord};

/// Address family of a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    Any,
    V4,
    V6,
}

/// An address prefix. `addr` uses the key encoding (IPv4 in word 0, IPv6 most significant word
/// first); bits past `len` are zero. `len` counts from the most significant bit of the family's
/// address (0..=32 for IPv4, 0..=128 for IPv6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Prefix {
    pub addr: [u32; 4],
    pub len: u8,
}

impl Prefix {
    pub const ANY: Prefix = Prefix {
        addr: [0; 4],
        len: 0,
    };

    /// Per-word masks for an address of `family` (IPv4 uses word 0 only).
    pub fn mask(&self, family: Family) -> [u32; 4] {
        let mut m = [0u32; 4];
        let words = if family == Family::V6 { 4 } else { 1 };
        let mut left = u32::from(self.len);
        for w in m.iter_mut().take(words) {
            let n = left.min(32);
            *w = if n == 0 { 0 } else { u32::MAX << (32 - n) };
            left -= n;
        }
        m
    }

    fn contains(&self, family: Family, a: &[u32; 4]) -> bool {
        let m = self.mask(family);
        (0..4).all(|i| a[i] & m[i] == self.addr[i])
    }

    /// True when every address of `other` is in `self` (same family).
    fn covers(&self, family: Family, other: &Prefix) -> bool {
        self.len <= other.len && self.contains(family, &other.addr)
    }
}

/// An inclusive 16-bit range (ports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub const ANY: PortRange = PortRange { lo: 0, hi: 65535 };
    fn contains(&self, v: u16) -> bool {
        self.lo <= v && v <= self.hi
    }
    fn covers(&self, o: &PortRange) -> bool {
        self.lo <= o.lo && o.hi <= self.hi
    }
    pub fn is_any(&self) -> bool {
        *self == Self::ANY
    }
}

/// A value under a mask: matches `v` when `v & mask == value` (`value` has no bits outside `mask`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Masked<T> {
    pub value: T,
    pub mask: T,
}

macro_rules! masked_impl {
    ($t:ty) => {
        impl Masked<$t> {
            pub const ANY: Masked<$t> = Masked { value: 0, mask: 0 };
            pub fn exact(v: $t) -> Self {
                Masked {
                    value: v,
                    mask: <$t>::MAX,
                }
            }
            pub fn new(value: $t, mask: $t) -> Self {
                Masked {
                    value: value & mask,
                    mask,
                }
            }
            fn matches(&self, v: $t) -> bool {
                v & self.mask == self.value
            }
            fn covers(&self, o: &Self) -> bool {
                // Every v with v&o.mask==o.value has v&self.mask==self.value.
                self.mask & !o.mask == 0 && o.value & self.mask == self.value
            }
            pub fn is_any(&self) -> bool {
                self.mask == 0
            }
        }
    };
}
masked_impl!(u8);
masked_impl!(u16);

/// What happens to a packet that a rule matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    Pass = 0,
    Drop = 1,
    Mirror = 2,
    ToHost = 3,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Drop => "drop",
            Verdict::Mirror => "mirror",
            Verdict::ToHost => "to-host",
        }
    }
    pub fn from_code(c: u32) -> Verdict {
        match c {
            1 => Verdict::Drop,
            2 => Verdict::Mirror,
            3 => Verdict::ToHost,
            _ => Verdict::Pass,
        }
    }
}

/// A rule's action: one verdict plus an optional mark (`mark(id)` tags the packet's metadata).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AclAction {
    pub verdict: Verdict,
    pub mark: Option<u32>,
}

impl Default for AclAction {
    fn default() -> Self {
        AclAction {
            verdict: Verdict::Pass,
            mark: None,
        }
    }
}

/// One ACL rule. A field left at its wildcard value matches everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclRule {
    pub family: Family,
    pub src: Prefix,
    pub dst: Prefix,
    pub src_port: PortRange,
    pub dst_port: PortRange,
    pub proto: Masked<u8>,
    /// 6-bit DSCP (`value`, `mask` within 0x3F).
    pub dscp: Masked<u8>,
    /// Low 8 TCP flag bits (CWR ECE URG ACK PSH RST SYN FIN).
    pub tcp_flags: Masked<u8>,
    /// Outer VLAN id (12 bits) or `VLAN_NONE` for "untagged only"; mask 0 = any.
    pub vlan: Masked<u16>,
    /// Ingress port; mask 0 = any.
    pub port_id: Masked<u16>,
    /// Connection states the rule matches (YAML `ct:`), bit `1 << state` per [`ct::NAMES`]
    /// state; 0 = any. Not part of [`AclKey`]: the state picks one of [`ct::CtClassifiers`]'
    /// tables, so the key and the compiled image stay as they are.
    pub ct: u8,
    pub action: AclAction,
    /// What the rule rewrites when it matches and its verdict is not drop (YAML `set:`).
    pub set: Option<AclRewrite>,
    /// Optional name (YAML `name`), for messages and counters.
    pub name: Option<String>,
    /// Where the rule was defined.
    pub loc: Location,
}

impl AclRule {
    /// A rule matching everything, with action pass.
    pub fn any() -> Self {
        AclRule {
            family: Family::Any,
            src: Prefix::ANY,
            dst: Prefix::ANY,
            src_port: PortRange::ANY,
            dst_port: PortRange::ANY,
            proto: Masked::<u8>::ANY,
            dscp: Masked::<u8>::ANY,
            tcp_flags: Masked::<u8>::ANY,
            vlan: Masked::<u16>::ANY,
            port_id: Masked::<u16>::ANY,
            ct: 0,
            action: AclAction::default(),
            set: None,
            name: None,
            loc: Location::default(),
        }
    }

    /// True when the rule puts no condition on L3/L4 (may then match non-IP keys).
    pub fn is_l2_only(&self) -> bool {
        self.family == Family::Any
            && self.src_port.is_any()
            && self.dst_port.is_any()
            && self.proto.is_any()
            && self.dscp.is_any()
            && self.tcp_flags.is_any()
    }

    /// True when the rule uses a field beyond the 5-tuple (DSCP, TCP flags, VLAN, ingress port).
    pub fn has_extras(&self) -> bool {
        !(self.dscp.is_any()
            && self.tcp_flags.is_any()
            && self.vlan.is_any()
            && self.port_id.is_any())
    }

    /// Whether the rule matches a frame in connection state `state` (`ct::NAMES` index).
    pub fn matches_ct(&self, state: u8) -> bool {
        self.ct == 0 || (state < 8 && self.ct & (1 << state) != 0)
    }

    /// The reference semantics: does this rule match `key`? (The `ct:` condition is not a key
    /// field: see [`AclRule::matches_ct`].)
    pub fn matches(&self, key: &AclKey) -> bool {
        let family_ok = match (self.family, key.ip_version) {
            (Family::V4, 4) | (Family::V6, 6) => true,
            (Family::Any, 4) | (Family::Any, 6) => true,
            (Family::Any, _) => self.is_l2_only(),
            _ => false,
        };
        family_ok
            && self.src.contains(self.family, &key.src_ip)
            && self.dst.contains(self.family, &key.dst_ip)
            && self.src_port.contains(key.src_port)
            && self.dst_port.contains(key.dst_port)
            && self.proto.matches(key.proto)
            && self.dscp.matches(key.dscp)
            && self.tcp_flags.matches(key.tcp_flags)
            && self.vlan.matches(key.vlan_id)
            && self.port_id.matches(key.port_id)
    }

    /// True when every key `other` matches is also matched by `self`.
    pub fn covers(&self, other: &AclRule) -> bool {
        let fam = match (self.family, other.family) {
            (a, b) if a == b => true,
            // An `any` rule covers a v4/v6 rule only on the L3/L4 side; `other` being
            // family-specific never matches non-IP keys, so that is enough.
            (Family::Any, _) => true,
            _ => false,
        };
        fam && (self.family == Family::Any
            || (self.src.covers(self.family, &other.src)
                && self.dst.covers(self.family, &other.dst)))
            && self.src_port.covers(&other.src_port)
            && self.dst_port.covers(&other.dst_port)
            && self.proto.covers(&other.proto)
            && self.dscp.covers(&other.dscp)
            && self.tcp_flags.covers(&other.tcp_flags)
            && self.vlan.covers(&other.vlan)
            && self.port_id.covers(&other.port_id)
            && (self.ct == 0 || (other.ct != 0 && other.ct & !self.ct == 0))
    }
}

/// Builds the key the `acl` stage classifies (same as `pw_acl_key_from_meta` in acl.cuh):
/// outer addresses/protocol/ports, DSCP = TOS >> 2, low 8 TCP flag bits, VID of the outer tag or
/// `VLAN_NONE`, ingress port from the frame descriptor.
#[allow(clippy::too_many_arguments)]
pub fn key_from_fields(
    ip_version: u8,
    src_ip: [u32; 4],
    dst_ip: [u32; 4],
    proto: u8,
    src_port: u16,
    dst_port: u16,
    tos: u8,
    tcp_flags: u16,
    vlan_count: u8,
    outer_tci: u16,
    port_id: u16,
) -> AclKey {
    let ip = ip_version == 4 || ip_version == 6;
    AclKey {
        src_ip: if ip { src_ip } else { [0; 4] },
        dst_ip: if ip { dst_ip } else { [0; 4] },
        src_port: if ip { src_port } else { 0 },
        dst_port: if ip { dst_port } else { 0 },
        proto: if ip { proto } else { 0 },
        ip_version: if ip { ip_version } else { 0 },
        dscp: if ip { tos >> 2 } else { 0 },
        tcp_flags: if ip { (tcp_flags & 0xFF) as u8 } else { 0 },
        vlan_id: if vlan_count > 0 {
            outer_tci & 0x0FFF
        } else {
            VLAN_NONE
        },
        port_id,
    }
}

/// A parsed rule file: rules in priority order and non-fatal findings.
#[derive(Clone, Debug, Default)]
pub struct AclRuleSet {
    pub rules: Vec<AclRule>,
    pub warnings: Vec<RuleWarning>,
}

impl AclRuleSet {
    /// The linear first-match reference: index of the first matching rule.
    pub fn classify_linear(&self, key: &AclKey) -> Option<usize> {
        self.rules.iter().position(|r| r.matches(key))
    }

    /// [`AclRuleSet::classify_linear`] for a frame in connection state `state`.
    pub fn classify_linear_ct(&self, key: &AclKey, state: u8) -> Option<usize> {
        self.rules
            .iter()
            .position(|r| r.matches_ct(state) && r.matches(key))
    }

    /// The first rule with a `ct:` condition, if any.
    pub fn first_ct_rule(&self) -> Option<&AclRule> {
        self.rules.iter().find(|r| r.ct != 0)
    }

    /// Whether a rule rewrites (`set:`): the `acl` stage then writes frames.
    pub fn has_rewrites(&self) -> bool {
        self.rules.iter().any(|r| r.set.is_some())
    }

    /// Maps the rules' `set: { port }` names to output ports ([`rewrite::resolve_ports`]).
    pub fn resolve_ports(&mut self, tx_ports: Option<&[String]>) -> Result<(), RuleError> {
        rewrite::resolve_ports(&mut self.rules, tx_ports)
    }

    /// Compiles the classifier and records shadowed rules in `warnings`.
    pub fn compile(&mut self) -> AclClassifier {
        let cls = AclClassifier::build(&self.rules);
        self.warnings = shadow::find_shadowed(&self.rules, &cls);
        cls
    }
}

/// Rule file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleFormat {
    Yaml,
    ClassBench,
}

/// Loads and validates a rule file (gzipped when it ends in `.gz`). Shadowing is checked by
/// [`AclRuleSet::compile`].
pub fn load_rules(path: &std::path::Path, format: RuleFormat) -> Result<AclRuleSet, RuleError> {
    let text = read_text(path)?;
    let rules = match format {
        RuleFormat::Yaml => yaml::parse(path, &text)?,
        RuleFormat::ClassBench => classbench::parse_rules(path, &text)?,
    };
    Ok(AclRuleSet {
        rules,
        warnings: Vec::new(),
    })
}

/// Reads a text file, gunzipping it when its name ends in `.gz`; more than
/// [`crate::input::MAX_TEXT_INPUT_BYTES`] (decompressed) is an error naming the file and limit.
pub fn read_text(path: &std::path::Path) -> Result<String, RuleError> {
    crate::input::read_text_bounded(path, crate::input::MAX_TEXT_INPUT_BYTES, "rule file")
        .map_err(|e| RuleError::io(path, &e))
}
