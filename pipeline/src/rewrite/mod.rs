//! Rewrite operations: what the `l2fwd`, `vlan`, `ttl`, `dscp` and `route` stages do to one
//! frame, as plain objects the lead's stage enum calls (the stage, config and executor wiring is
//! not here).
//!
//! Every operation takes the frame, its [`PacketMeta`] (as the `parse` stage filled it) and its
//! [`Verdict`], and returns an [`Outcome`]. The frame is rewritten in place through the writable
//! wire views, checksums updated incrementally (RFC 1624, [`crate::wire::checksum`]); the meta
//! is kept equal to what parsing the rewritten frame would give (`ip_ttl`, `ip_tos`; after a
//! VLAN push / pop the frame is parsed again). A frame whose verdict already drops it is left
//! alone ([`Outcome::Skipped`]).
//!
//! Buffers: `l2fwd`, `ttl`, `dscp` and `route` only change bytes, so they take `&mut [u8]`.
//! `vlan` push / pop change the frame's length by 4 bytes and take `&mut Vec<u8>` (the tag is
//! inserted or removed after the two MACs with one `copy_within`; a `Vec` with 4 bytes of spare
//! capacity does not allocate). [`RewriteOp::apply`] takes `&mut Vec<u8>` for all of them.
//! `respond` may shorten the frame (a reply ends with its packet, padding dropped):
//! [`Respond::apply_in`] takes the buffer and its length as `vlan` does.
//!
//! Drops: a rewrite never sets the verdict itself; it returns [`Outcome::Drop`] with a
//! [`RewriteDrop`] (`ttl_expired`, `no_route`) that the pipeline maps to a counted drop reason
//! ([`RewriteDrop::reason`]).
//!
//! In the pipeline ([`crate::stage::Stage`]), the frames are a burst's buffers with room after
//! each frame for the `vlan` pushes of the stage list ([`crate::stage::Pipeline::frame_room`]);
//! `vlan` runs [`Vlan::apply_in`] there.
//!
//! The CUDA implementations (`gpu-kernels/cuda/{l2fwd,ttl,vlan,route,respond}.cuh`) follow the
//! same rules; this is the reference they are tested against. On the GPU executor they run as
//! library stages of the composed pipeline (`cuda/rewrite_stages.cuh`, parameter blocks from
//! [`gpu`]).

pub mod config;
pub mod dscp;
pub mod gpu;
pub mod l2fwd;
#[cfg(test)]
mod pipeline_tests;
pub mod respond;
#[cfg(test)]
mod respond_tests;
pub mod route;
pub mod stage;
pub mod ttl;
pub mod tx_time;
pub mod vlan;

pub use config::{
    ConfigError, DscpConfig, L2fwdConfig, Mac, RouteConfig, TtlConfig, TxTimeConfig, VlanConfig,
};
pub use dscp::Dscp;
pub use l2fwd::L2fwd;
pub use respond::{Respond, RespondConfig};
pub use route::Route;
pub use ttl::Ttl;
pub use tx_time::TxTime;
pub use vlan::Vlan;

use crate::meta::PacketMeta;
use crate::verdict::{Action, Verdict};

/// Why a rewrite says a frame must be dropped. Proposed drop-reason names (the `reason` label):
/// [`RewriteDrop::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RewriteDrop {
    /// `ttl`: the frame arrived with an IPv4 TTL / IPv6 hop limit of 0 or 1.
    TtlExpired,
    /// `route`: no prefix (and no default route) covers the destination, or the frame has no
    /// IP destination to route on.
    NoRoute,
    /// `vlan` push: the frame's buffer has no 4 bytes of room after it (counted as `too_long`).
    NoRoom,
}

impl RewriteDrop {
    pub fn name(self) -> &'static str {
        match self {
            RewriteDrop::TtlExpired => "ttl_expired",
            RewriteDrop::NoRoute => "no_route",
            RewriteDrop::NoRoom => "too_long",
        }
    }

    /// The counted drop reason.
    pub fn reason(self) -> crate::verdict::DropReason {
        use crate::verdict::DropReason;
        match self {
            RewriteDrop::TtlExpired => DropReason::TtlExpired,
            RewriteDrop::NoRoute => DropReason::NoRoute,
            RewriteDrop::NoRoom => DropReason::TooLong,
        }
    }
}

/// What one rewrite did to one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Rewritten; the frame goes on.
    Done,
    /// Nothing to rewrite (no IP header for `ttl` / `dscp`, no VLAN tag for `pop` / `set`, a
    /// header cut short, MPLS-labelled IP for `ttl`), or the verdict already drops the frame:
    /// the frame and meta are unchanged and it goes on as before.
    Skipped,
    /// `route`: rewritten (next-hop MAC as destination); send it to this output port, an index
    /// into the route table's port names ([`flow_rules::route::RouteTable::ports`]).
    Forward { port: u16 },
    /// Drop the frame, for this reason. The frame may be unchanged or partly rewritten.
    Drop(RewriteDrop),
    /// `respond`: the frame is now the reply; send it out of the port it came in on.
    Reply,
}

/// A configured rewrite, for a stage list that holds any of them.
#[derive(Clone, Debug)]
pub enum RewriteOp {
    L2fwd(L2fwd),
    Vlan(Vlan),
    Ttl(Ttl),
    Dscp(Dscp),
    Route(Route),
}

impl RewriteOp {
    /// Applies the operation (see the module documentation for the buffer rules).
    pub fn apply(&self, frame: &mut Vec<u8>, meta: &mut PacketMeta, verdict: &Verdict) -> Outcome {
        match self {
            RewriteOp::L2fwd(op) => op.apply(frame, meta, verdict),
            RewriteOp::Vlan(op) => op.apply(frame, meta, verdict),
            RewriteOp::Ttl(op) => op.apply(frame, meta, verdict),
            RewriteOp::Dscp(op) => op.apply(frame, meta, verdict),
            RewriteOp::Route(op) => op.apply(frame, meta, verdict),
        }
    }

    /// The stage name in configs.
    pub fn name(&self) -> &'static str {
        match self {
            RewriteOp::L2fwd(_) => "l2fwd",
            RewriteOp::Vlan(_) => "vlan",
            RewriteOp::Ttl(_) => "ttl",
            RewriteOp::Dscp(_) => "dscp",
            RewriteOp::Route(_) => "route",
        }
    }
}

/// The value checks of a rewrite stage's config keys (the ones each op's `new` makes), for
/// the config loader; other stages: `Ok`.
pub fn check_stage(s: &crate::stage::config::StageConfig) -> Result<(), ConfigError> {
    use crate::stage::config::StageConfig;
    match s {
        StageConfig::L2fwd(c) => L2fwd::new(c).map(drop),
        StageConfig::Vlan(c) => Vlan::new(c).map(drop),
        StageConfig::Dscp(c) => Dscp::new(c).map(drop),
        StageConfig::Respond(c) => Respond::new(c).map(drop),
        StageConfig::TxTime(c) => TxTime::new(c).map(drop),
        _ => Ok(()),
    }
}

/// Whether an earlier stage already dropped the frame (rewrites leave such frames alone).
#[inline]
pub(crate) fn dropped(v: &Verdict) -> bool {
    v.action == Action::Drop
}

/// The outer IP header's offset when `meta` says there is one this rewrite may change (IPv4
/// or IPv6, not under MPLS).
#[inline]
pub(crate) fn ip_offset(meta: &PacketMeta) -> Option<(u8, usize)> {
    if meta.flags & crate::meta::mf::MPLS != 0 {
        return None;
    }
    match meta.ip_version {
        4 | 6 => Some((meta.ip_version, usize::from(meta.l3_offset))),
        _ => None,
    }
}
