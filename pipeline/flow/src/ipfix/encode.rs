//! IPFIX message encoding (RFC 7011 section 3): the message header, one Template Set with the
//! IPv4 and IPv6 templates, and Data Sets of biflow records, packed into messages no longer
//! than a given size.

use super::FlowRecord;
use std::net::IpAddr;

/// IPFIX version number in the message header (RFC 7011 section 3.1).
const VERSION: u16 = 10;
/// Message header: version, length, export time, sequence number, observation domain.
pub const HEADER_LEN: usize = 16;
/// Set ID of a Template Set (RFC 7011 section 3.3.2).
pub const FLOW_SET_ID_TEMPLATE: u16 = 2;
/// Template (and Data Set) id of the IPv4 flows; ids from 256 up are data templates.
pub const TEMPLATE_ID_V4: u16 = 256;
/// Template (and Data Set) id of the IPv6 flows.
pub const TEMPLATE_ID_V6: u16 = 257;
/// Private enterprise number of the reverse information elements (RFC 5103 section 6.1).
pub const REVERSE_PEN: u32 = 29305;
const SET_HEADER_LEN: usize = 4;

/// One field of a template: IANA information element id, length in bytes, and whether it is
/// the reverse (responder -> initiator) element of RFC 5103.
struct Field {
    id: u16,
    len: u16,
    reverse: bool,
}

const fn f(id: u16, len: u16) -> Field {
    Field {
        id,
        len,
        reverse: false,
    }
}

const fn rev(id: u16, len: u16) -> Field {
    Field {
        id,
        len,
        reverse: true,
    }
}

/// The fields after the two addresses, the same in both templates, in record order.
/// Responder TCP flags (reverse tcpControlBits) are left out: nfcapd maps a reverse element it
/// does not know onto the forward one, so they would overwrite the initiator's flags there.
const COMMON: [Field; 12] = [
    f(7, 2),   // sourceTransportPort
    f(11, 2),  // destinationTransportPort
    f(4, 1),   // protocolIdentifier
    f(6, 2),   // tcpControlBits (unsigned16, RFC 7125)
    f(1, 8),   // octetDeltaCount
    f(2, 8),   // packetDeltaCount
    rev(1, 8), // reverseOctetDeltaCount
    rev(2, 8), // reversePacketDeltaCount
    f(152, 8), // flowStartMilliseconds
    f(153, 8), // flowEndMilliseconds
    f(58, 2),  // vlanId
    f(136, 1), // flowEndReason
];
/// sourceIPv4Address, destinationIPv4Address.
const ADDRS_V4: [Field; 2] = [f(8, 4), f(12, 4)];
/// sourceIPv6Address, destinationIPv6Address.
const ADDRS_V6: [Field; 2] = [f(27, 16), f(28, 16)];

const fn fields_len(fields: &[Field]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < fields.len() {
        n += fields[i].len as usize;
        i += 1;
    }
    n
}

/// Bytes of one IPv4 data record.
pub const RECORD_LEN_V4: usize = fields_len(&ADDRS_V4) + fields_len(&COMMON);
/// Bytes of one IPv6 data record.
pub const RECORD_LEN_V6: usize = fields_len(&ADDRS_V6) + fields_len(&COMMON);
/// Bytes of one template record: id and field count, 4 per field, 4 more per reverse field.
const TEMPLATE_RECORD_LEN: usize = 4 + 4 * (2 + COMMON.len()) + 4 * 2;
/// Bytes of the Template Set with both templates.
pub const TEMPLATE_SET_LEN: usize = SET_HEADER_LEN + 2 * TEMPLATE_RECORD_LEN;
/// The smallest message size the encoder works with: the templates fit in one message, and one
/// IPv6 record (with its set header and padding) in another.
pub const MIN_MESSAGE_LEN: usize = {
    let t = HEADER_LEN + TEMPLATE_SET_LEN;
    let d = HEADER_LEN + SET_HEADER_LEN + RECORD_LEN_V6 + pad4(SET_HEADER_LEN + RECORD_LEN_V6);
    if t > d {
        t
    } else {
        d
    }
};

/// Zero bytes that bring `n` to a multiple of 4: sets are padded so the next one starts
/// aligned (RFC 7011 section 3.3.1 allows it; the padding is shorter than any record).
const fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

/// One encoded IPFIX message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The message, header included.
    pub bytes: Vec<u8>,
    /// Data records in it.
    pub records: usize,
    /// Whether it carries the Template Set.
    pub templates: bool,
}

/// Encodes flow records into IPFIX messages of one observation domain, keeping the sequence
/// number (the count of data records encoded before each message, modulo 2^32).
#[derive(Clone, Debug)]
pub struct Encoder {
    domain: u32,
    max_len: usize,
    sequence: u32,
}

impl Encoder {
    /// An encoder for messages of at most `max_len` bytes, raised to [`MIN_MESSAGE_LEN`] and
    /// cut to 65535 (the header's length field) when outside them (the config checks them
    /// first, with a clear error).
    pub fn new(domain: u32, max_len: usize) -> Self {
        Encoder {
            domain,
            max_len: max_len.clamp(MIN_MESSAGE_LEN, usize::from(u16::MAX)),
            sequence: 0,
        }
    }

    /// The sequence number the next message will carry.
    pub fn sequence(&self) -> u32 {
        self.sequence
    }

    /// The next message: the Template Set first when `templates`, then as many of `records`
    /// from the front as fit, in order (one Data Set per run of records of one IP version).
    /// Records whose addresses differ in IP version are skipped (counted in `records`, as
    /// consumed, but not encoded): [`super::FlowQueue::try_push`] refuses them already.
    /// Returns the message and how many records it consumed.
    pub fn message(
        &mut self,
        records: &[FlowRecord],
        export_time: u32,
        templates: bool,
    ) -> (Message, usize) {
        let mut b = Vec::with_capacity(self.max_len);
        b.resize(HEADER_LEN, 0);
        if templates {
            write_template_set(&mut b);
        }
        let mut set: Option<(u16, usize)> = None; // template id, start of the set
        let mut consumed = 0;
        let mut encoded = 0usize;
        for r in records {
            let Some(v) = r.ip_version() else {
                consumed += 1;
                continue;
            };
            let (tid, rlen) = if v == 4 {
                (TEMPLATE_ID_V4, RECORD_LEN_V4)
            } else {
                (TEMPLATE_ID_V6, RECORD_LEN_V6)
            };
            let fits = match set {
                Some((t, start)) if t == tid => {
                    let set_len = b.len() - start + rlen;
                    b.len() + rlen + pad4(set_len) <= self.max_len
                }
                Some((_, start)) => {
                    let closed = b.len() + pad4(b.len() - start);
                    closed + SET_HEADER_LEN + rlen + pad4(SET_HEADER_LEN + rlen) <= self.max_len
                }
                None => {
                    b.len() + SET_HEADER_LEN + rlen + pad4(SET_HEADER_LEN + rlen) <= self.max_len
                }
            };
            if !fits {
                break;
            }
            if set.is_none_or(|(t, _)| t != tid) {
                if let Some((_, start)) = set {
                    close_set(&mut b, start);
                }
                set = Some((tid, b.len()));
                b.extend_from_slice(&tid.to_be_bytes());
                b.extend_from_slice(&[0, 0]);
            }
            write_record(&mut b, r);
            consumed += 1;
            encoded += 1;
        }
        if let Some((_, start)) = set {
            close_set(&mut b, start);
        }
        let len = u16::try_from(b.len()).expect("max_len is at most 65535");
        b[0..2].copy_from_slice(&VERSION.to_be_bytes());
        b[2..4].copy_from_slice(&len.to_be_bytes());
        b[4..8].copy_from_slice(&export_time.to_be_bytes());
        b[8..12].copy_from_slice(&self.sequence.to_be_bytes());
        b[12..16].copy_from_slice(&self.domain.to_be_bytes());
        // Records are at most 65535 / 66 per message: the cast cannot truncate.
        self.sequence = self.sequence.wrapping_add(encoded as u32);
        let m = Message {
            bytes: b,
            records: encoded,
            templates,
        };
        (m, consumed)
    }
}

/// Pads the set that starts at `start` to a multiple of 4 bytes and writes its length.
fn close_set(b: &mut Vec<u8>, start: usize) {
    b.resize(b.len() + pad4(b.len() - start), 0);
    let len = u16::try_from(b.len() - start).expect("a set is shorter than its message");
    b[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
}

fn write_template_set(b: &mut Vec<u8>) {
    let start = b.len();
    b.extend_from_slice(&FLOW_SET_ID_TEMPLATE.to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    for (tid, addrs) in [(TEMPLATE_ID_V4, &ADDRS_V4), (TEMPLATE_ID_V6, &ADDRS_V6)] {
        b.extend_from_slice(&tid.to_be_bytes());
        b.extend_from_slice(&((addrs.len() + COMMON.len()) as u16).to_be_bytes());
        for fd in addrs.iter().chain(COMMON.iter()) {
            // The enterprise bit (0x8000) says a private enterprise number follows.
            let id = if fd.reverse { fd.id | 0x8000 } else { fd.id };
            b.extend_from_slice(&id.to_be_bytes());
            b.extend_from_slice(&fd.len.to_be_bytes());
            if fd.reverse {
                b.extend_from_slice(&REVERSE_PEN.to_be_bytes());
            }
        }
    }
    close_set(b, start);
}

/// One data record, in the order of its template's fields.
fn write_record(b: &mut Vec<u8>, r: &FlowRecord) {
    match (r.src, r.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            b.extend_from_slice(&s.octets());
            b.extend_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            b.extend_from_slice(&s.octets());
            b.extend_from_slice(&d.octets());
        }
        _ => unreachable!("message() skips records of mixed IP versions"),
    }
    b.extend_from_slice(&r.src_port.to_be_bytes());
    b.extend_from_slice(&r.dst_port.to_be_bytes());
    b.push(r.protocol);
    b.extend_from_slice(&u16::from(r.tcp_flags).to_be_bytes());
    b.extend_from_slice(&r.octets.to_be_bytes());
    b.extend_from_slice(&r.packets.to_be_bytes());
    b.extend_from_slice(&r.rev_octets.to_be_bytes());
    b.extend_from_slice(&r.rev_packets.to_be_bytes());
    b.extend_from_slice(&r.start_ms.to_be_bytes());
    b.extend_from_slice(&r.end_ms.to_be_bytes());
    b.extend_from_slice(&r.vlan.to_be_bytes());
    b.push(r.end_reason as u8);
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
