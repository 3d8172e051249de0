//! IPFIX export of finished flows (RFC 7011) to a collector over UDP, run by the control thread.
//!
//! The data path only ever calls [`FlowQueue::try_push`] (a bounded, non-blocking queue: a
//! full queue drops the record and counts it); the control thread calls [`Exporter::poll`]
//! (or runs [`Exporter::spawn`]) to encode the queued records into IPFIX messages no longer
//! than the configured MTU allows and send them, with the templates at start, every
//! `template_refresh_s` seconds, every `template_refresh_messages` messages and after a send
//! error (RFC 7011 section 8.4: UDP has no other way to recover a lost template).
//!
//! A flow is exported as one biflow record (RFC 5103): the initiator -> responder counters in
//! the IANA elements and the responder -> initiator counters in their reverse elements
//! (enterprise number 29305), which nfdump's nfcapd stores as its "out" packets and bytes.
//! docs/ipfix.md lists the information elements, the configuration and the counters.

mod config;
mod encode;
mod exporter;

pub use config::{IpfixConfig, IpfixError};
pub use encode::{
    Encoder, Message, FLOW_SET_ID_TEMPLATE, HEADER_LEN, MIN_MESSAGE_LEN, RECORD_LEN_V4,
    RECORD_LEN_V6, REVERSE_PEN, TEMPLATE_ID_V4, TEMPLATE_ID_V6, TEMPLATE_SET_LEN,
};
pub use exporter::{Exporter, ExporterThread, FlowQueue, IpfixCounters, IpfixStats, PushError};

use std::net::IpAddr;

/// Why a flow ended: the values of IANA's flowEndReason (information element 136).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EndReason {
    /// No packet for the idle timeout.
    IdleTimeout = 1,
    /// Exported while still active (the active timeout), counters since the last export.
    ActiveTimeout = 2,
    /// The end of the flow was seen (TCP FIN or RST).
    EndOfFlow = 3,
    /// Ended by the exporter (shutdown, table flush).
    ForcedEnd = 4,
    /// Evicted for lack of room in the flow table.
    LackOfResources = 5,
}

/// One flow to export, as the exporter's input: initiator (the side that sent the first
/// packet) and responder, with counters per direction. Source and destination must be of the
/// same IP version (the version picks the template).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowRecord {
    /// The flow's zone: its VLAN id (0 = untagged), exported as vlanId (58).
    pub vlan: u16,
    /// Initiator address.
    pub src: IpAddr,
    /// Responder address.
    pub dst: IpAddr,
    /// Initiator port (0 for protocols without ports).
    pub src_port: u16,
    /// Responder port (0 for protocols without ports).
    pub dst_port: u16,
    /// IP protocol number (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6, ...).
    pub protocol: u8,
    /// Packets initiator -> responder.
    pub packets: u64,
    /// IP octets (IP header and payload) initiator -> responder.
    pub octets: u64,
    /// Packets responder -> initiator.
    pub rev_packets: u64,
    /// IP octets responder -> initiator.
    pub rev_octets: u64,
    /// First packet, ms since the UNIX epoch.
    pub start_ms: u64,
    /// Last packet, ms since the UNIX epoch.
    pub end_ms: u64,
    /// OR of the TCP flags of the initiator's packets (0 when not TCP).
    pub tcp_flags: u8,
    /// OR of the TCP flags of the responder's packets (kept for the flow table's use; not
    /// exported: docs/ipfix.md says why).
    pub rev_tcp_flags: u8,
    /// Why the flow ended.
    pub end_reason: EndReason,
}

impl FlowRecord {
    /// The IP version of both addresses, or None when they differ.
    pub fn ip_version(&self) -> Option<u8> {
        match (self.src, self.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => Some(4),
            (IpAddr::V6(_), IpAddr::V6(_)) => Some(6),
            _ => None,
        }
    }
}
