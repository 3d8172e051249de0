//! `respond: { mac: MAC, ipv4: [ADDR, ...], ipv6: [ADDR, ...] }`: answers, in place, the
//! requests addressed to the configured addresses, as a host's stack would (DOCA's
//! gpu_packet_processing sample answers ping the same way):
//!
//! - an ARP request (Ethernet / IPv4, oper 1) whose target address is ours becomes the reply
//!   (RFC 826): oper 2, sender = (`mac`, our address), target = the requester's sender
//!   addresses; Ethernet destination = the request's sender hardware address, source = `mac`.
//!   A request with sender IP 0.0.0.0 is an ARP Probe (RFC 5227 2.1.1) and is answered so (its
//!   reply's target IP is 0.0.0.0, as Linux sends it): the prober learns the address is taken;
//! - an ICMPv4 echo request (type 8, not a fragment) to our address becomes the echo reply:
//!   type 0 (ICMP checksum updated, RFC 1624), addresses swapped, TTL 64 (header checksum
//!   updated), MACs swapped (destination = the request's Ethernet source, source = `mac`);
//! - an ICMPv6 echo request (type 128, not a fragment) to our address becomes the echo reply:
//!   type 129 (checksum updated; the pseudo header's sum does not change when the addresses
//!   swap), addresses swapped, hop limit 64, MACs as for ICMPv4. Extension headers stay.
//!
//! A reply is the request's packet only: the frame ends with the ARP packet (28 bytes) or the IP
//! packet (IPv4 total length, IPv6 payload length), so Ethernet padding after it is not echoed
//! (the frame's length changes; the NIC pads a short frame again).
//!
//! Not answered, as a host's stack discards them:
//! - an IPv4 header checksum (RFC 1122 3.2.1.2) or ICMP / ICMPv6 checksum (RFC 792, RFC 4443
//!   2.3) that does not verify, over exactly the IP payload, never the padding;
//! - an IP length that is shorter than the headers and the 8-byte echo header, or runs past
//!   the frame (a capture's snap length, a cut frame);
//! - a group or unspecified source, which no host sends from and a reply could not go to: an
//!   Ethernet source or ARP sender hardware address with the group bit (multicast, broadcast;
//!   IEEE 802.3 3.2.3: a source is an individual address), an IPv4 source 0.0.0.0 or
//!   255.255.255.255 (RFC 1122 3.2.1.3) or in 224/4 (RFC 1112 4), an IPv6 source :: (RFC 4291
//!   2.5.2) or in ff00::/8 (RFC 4291 2.7), an ARP sender IP 255.255.255.255 or in 224/4;
//! - an ARP Announcement (sender IP = target IP, RFC 5227 2.3): it asks nothing;
//! - an IPv6 packet with a Routing header whose segments left is not 0 (RFC 8200 4.4): it goes
//!   on to the next address, we are not its final destination.
//!
//! Such frames, and anything else (IP under MPLS, headers cut short), are [`Outcome::Skipped`]:
//! passed on unchanged, as the stage passes every frame that is not a request for us; the
//! pipeline's other stages (`acl`) decide whether they go on. A reply is [`Outcome::Reply`]:
//! the pipeline sends it out of the port it came in on. VLAN tags stay. The meta is updated
//! to what `parse` gives for the reply (addresses, TTL, ICMP type, ARP oper, frame length).
//! `gpu-kernels/cuda/respond.cuh` is the CUDA implementation;
//! `pipeline/tests/respond_cuda_host.rs` holds the two equal byte for byte.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;

use super::config::{ConfigError, Mac};
use super::{dropped, Outcome};
use crate::meta::{mf, PacketMeta};
use crate::verdict::Verdict;
use crate::wire::{arp, checksum, ethernet, icmp, ipv4, ipv6};

/// Most addresses of each family (`PW_RESPOND_MAX` in respond.cuh).
pub const MAX_ADDRS: usize = 8;

/// The TTL / hop limit of a reply.
pub const REPLY_TTL: u8 = 64;

/// `respond:` keys.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RespondConfig {
    /// Our MAC: the source of every reply.
    pub mac: Mac,
    #[serde(default)]
    pub ipv4: Vec<Ipv4Addr>,
    #[serde(default)]
    pub ipv6: Vec<Ipv6Addr>,
}

/// What a `respond` stage answered (its counters in the summary).
pub const COUNTER_NAMES: [&str; 3] = ["arp_replies", "icmp_echo_replies", "icmpv6_echo_replies"];

/// A configured responder.
#[derive(Debug)]
pub struct Respond {
    pub mac: [u8; 6],
    pub ipv4: Vec<u32>,
    pub ipv6: Vec<[u32; 4]>,
    /// Replies made, by [`COUNTER_NAMES`] (shared by every worker; replies are rare).
    pub replies: [AtomicU64; 3],
}

/// `pw_respond_params` of respond.cuh: the same addresses, as the meta holds them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RespondParams {
    pub mac: [u8; 6],
    pub n_v4: u16,
    pub n_v6: u16,
    pub v4: [u32; MAX_ADDRS],
    pub v6: [[u32; 4]; MAX_ADDRS],
}

fn words6(a: [u8; 16]) -> [u32; 4] {
    let w = |i: usize| u32::from_be_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]]);
    [w(0), w(4), w(8), w(12)]
}

impl Respond {
    /// Errors: no address, more than [`MAX_ADDRS`] of a family.
    pub fn new(cfg: &RespondConfig) -> Result<Self, ConfigError> {
        if cfg.ipv4.is_empty() && cfg.ipv6.is_empty() {
            return Err(ConfigError::new(
                "respond",
                "ipv4",
                "no address to answer for: give `ipv4`, `ipv6` or both",
            ));
        }
        for (key, n) in [("ipv4", cfg.ipv4.len()), ("ipv6", cfg.ipv6.len())] {
            if n > MAX_ADDRS {
                return Err(ConfigError::new(
                    "respond",
                    key,
                    format!("{n} addresses, at most {MAX_ADDRS}"),
                ));
            }
        }
        Ok(Respond {
            mac: cfg.mac.0,
            ipv4: cfg.ipv4.iter().map(|a| u32::from(*a)).collect(),
            ipv6: cfg.ipv6.iter().map(|a| words6(a.octets())).collect(),
            replies: Default::default(),
        })
    }

    /// The GPU parameter block.
    pub fn params(&self) -> RespondParams {
        let mut p = RespondParams {
            mac: self.mac,
            n_v4: self.ipv4.len() as u16,
            n_v6: self.ipv6.len() as u16,
            ..RespondParams::default()
        };
        for (d, s) in p.v4.iter_mut().zip(&self.ipv4) {
            *d = *s;
        }
        for (d, s) in p.v6.iter_mut().zip(&self.ipv6) {
            *d = *s;
        }
        p
    }

    /// The replies made so far, by [`COUNTER_NAMES`].
    pub fn counters(&self) -> [u64; 3] {
        let r = |i: usize| self.replies[i].load(Ordering::Relaxed);
        [r(0), r(1), r(2)]
    }

    /// [`Respond::apply_in`] on a whole buffer, cut to the reply's length.
    pub fn apply(&self, frame: &mut Vec<u8>, meta: &mut PacketMeta, verdict: &Verdict) -> Outcome {
        let mut len = frame.len();
        let out = self.apply_in(frame, &mut len, meta, verdict);
        frame.truncate(len);
        out
    }

    /// In place: the frame is `buf[..*len]`; a reply sets `*len` to its length (never more).
    pub fn apply_in(
        &self,
        buf: &mut [u8],
        len: &mut usize,
        meta: &mut PacketMeta,
        verdict: &Verdict,
    ) -> Outcome {
        let n = (*len).min(buf.len());
        let frame = &mut buf[..n];
        if dropped(verdict)
            || n < ethernet::HEADER_LEN
            || meta.flags & mf::MPLS != 0
            || group_mac(&frame[6..12])
        {
            return Outcome::Skipped;
        }
        let l3 = usize::from(meta.l3_offset);
        let reply = if meta.flags & mf::ARP != 0 {
            self.arp(frame, l3, meta)
        } else if meta.flags & mf::FRAGMENT != 0 {
            None
        } else if meta.ip_version == 4 && meta.ip_proto == 1 && meta.icmp_type == 8 {
            self.echo4(frame, l3, meta)
        } else if meta.ip_version == 6 && meta.ip_proto == 58 && meta.icmp_type == 128 {
            self.echo6(frame, l3, meta)
        } else {
            None
        };
        let Some(r) = reply else {
            return Outcome::Skipped;
        };
        frame[..6].copy_from_slice(&r.to);
        frame[6..12].copy_from_slice(&self.mac);
        *len = r.end;
        meta.frame_len = r.end as u32;
        // Nothing follows the packet now.
        meta.flags &= !mf::PADDED;
        self.replies[r.counter].fetch_add(1, Ordering::Relaxed);
        Outcome::Reply
    }

    fn arp(&self, frame: &mut [u8], l3: usize, meta: &mut PacketMeta) -> Option<Made> {
        let buf = frame.get_mut(l3..)?;
        let p = arp::Packet::new_checked(&*buf).ok()?;
        let req = arp::Repr::parse(&p)?;
        let ours = u32::from_be_bytes(req.target_ip);
        let sender = u32::from_be_bytes(req.sender_ip);
        // Sender 0.0.0.0 (a probe) is answered; sender = target is an announcement.
        if req.oper != 1
            || !self.ipv4.contains(&ours)
            || group_mac(&req.sender_hw)
            || sender == u32::MAX
            || multicast4(sender)
            || sender == ours
        {
            return None;
        }
        let reply = arp::Repr {
            oper: 2,
            sender_hw: self.mac,
            sender_ip: req.target_ip,
            target_hw: req.sender_hw,
            target_ip: req.sender_ip,
        };
        let end = l3 + reply.emit(buf).ok()?;
        meta.arp_oper = 2;
        std::mem::swap(&mut meta.src_ip[0], &mut meta.dst_ip[0]);
        Some(Made {
            counter: 0,
            end,
            to: req.sender_hw,
        })
    }

    fn echo4(&self, frame: &mut [u8], l3: usize, meta: &mut PacketMeta) -> Option<Made> {
        if !self.ipv4.contains(&meta.dst_ip[0]) {
            return None;
        }
        let l4 = usize::from(meta.l4_offset);
        let ip = ipv4::Packet::new_checked(frame.get(l3..)?).ok()?;
        let (hl, total) = (ip.header_len(), usize::from(ip.total_len()));
        let end = l3 + total;
        let src = u32::from_be_bytes(ip.src());
        if l4 != l3 + hl
            || total < hl + icmp::HEADER_LEN
            || end > frame.len()
            || !ip.verify_checksum()
            || src == 0
            || src == u32::MAX
            || multicast4(src)
            || !checksum::verify(0, &frame[l4..end])
        {
            return None;
        }
        let (ip, rest) = frame.split_at_mut(l4);
        let mut h = ipv4::Packet::new_checked(&mut ip[l3..]).ok()?;
        let mut echo = icmp::Header::new_checked(&mut rest[..]).ok()?;
        echo.set_type_update_checksum(0);
        // Swapping the addresses leaves the header's sum as it was.
        let (s, d) = (h.src(), h.dst());
        h.set_src(d);
        h.set_dst(s);
        h.set_ttl_update_checksum(REPLY_TTL);
        meta.icmp_type = 0;
        meta.ip_ttl = REPLY_TTL;
        std::mem::swap(&mut meta.src_ip, &mut meta.dst_ip);
        Some(Made {
            counter: 1,
            end,
            to: mac_at(frame, 6),
        })
    }

    fn echo6(&self, frame: &mut [u8], l3: usize, meta: &mut PacketMeta) -> Option<Made> {
        let dst = [
            meta.dst_ip[0],
            meta.dst_ip[1],
            meta.dst_ip[2],
            meta.dst_ip[3],
        ];
        if !self.ipv6.contains(&dst) {
            return None;
        }
        let l4 = usize::from(meta.l4_offset);
        let ip = ipv6::Packet::new_checked(frame.get(l3..)?).ok()?;
        let end = l3 + ipv6::HEADER_LEN + usize::from(ip.payload_len());
        let src = ip.src();
        if l4 < l3 + ipv6::HEADER_LEN
            || l4 + icmp::HEADER_LEN > end
            || end > frame.len()
            || src == [0; 16]
            || src[0] == 0xff
            || !final_destination(frame, l3, l4)
        {
            return None;
        }
        let pseudo = checksum::pseudo_v6(src, ip.dst(), 58, (end - l4) as u32);
        if !checksum::verify(pseudo, &frame[l4..end]) {
            return None;
        }
        let (ip, rest) = frame.split_at_mut(l4);
        let mut h = ipv6::Packet::new_checked(&mut ip[l3..]).ok()?;
        let mut echo = icmp::Header::new_checked(&mut rest[..]).ok()?;
        echo.set_type_update_checksum(129);
        let (s, d) = (h.src(), h.dst());
        h.set_src(d);
        h.set_dst(s);
        h.set_hop_limit(REPLY_TTL);
        meta.icmp_type = 129;
        meta.ip_ttl = REPLY_TTL;
        std::mem::swap(&mut meta.src_ip, &mut meta.dst_ip);
        Some(Made {
            counter: 2,
            end,
            to: mac_at(frame, 6),
        })
    }
}

/// A reply made in place: its counter ([`COUNTER_NAMES`]), where it ends, and its Ethernet
/// destination.
struct Made {
    counter: usize,
    end: usize,
    to: [u8; 6],
}

fn mac_at(f: &[u8], at: usize) -> [u8; 6] {
    [f[at], f[at + 1], f[at + 2], f[at + 3], f[at + 4], f[at + 5]]
}

/// The I/G bit: a multicast or broadcast Ethernet address.
fn group_mac(a: &[u8]) -> bool {
    a[0] & 1 != 0
}

/// 224.0.0.0/4.
fn multicast4(a: u32) -> bool {
    a >> 28 == 0xE
}

/// Whether the IPv6 packet at `l3` ends its journey here: the extension headers before the
/// ICMPv6 header at `l4` walk exactly to it, and no Routing header among them has segments
/// left (RFC 8200 4.4: otherwise the packet goes on to the next address).
fn final_destination(frame: &[u8], l3: usize, l4: usize) -> bool {
    let mut next = frame[l3 + 6];
    let mut at = l3 + ipv6::HEADER_LEN;
    while at < l4 {
        if !ipv6::ext::is_walked(next) {
            return false;
        }
        let Ok(h) = ipv6::ExtHeader::new_checked(&frame[at..l4], next) else {
            return false;
        };
        if next == ipv6::ext::ROUTING && frame[at + 3] != 0 {
            return false;
        }
        next = h.next_header();
        at += h.header_len();
    }
    at == l4 && next == 58
}

/// The `respond` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: crate::stage::descriptor::StageDescriptor =
    crate::stage::descriptor::StageDescriptor {
        name: "respond",
        usage: "`respond: { mac, ipv4: [...], ipv6: [...] }`",
        summary: SUMMARY,
        needs: crate::stage::descriptor::StageNeeds {
            reads_meta: true,
            writes_frame: true,
            ..crate::stage::descriptor::StageNeeds::NONE
        },
        drop_reasons: &[],
        counters: &COUNTER_NAMES,
        gpu: crate::stage::descriptor::GpuImpl::Library {
            function: "pw_stage_respond",
        },
        reloads: false,
    };

const SUMMARY: &str = "answers ARP requests (ARP probes from 0.0.0.0 too, RFC 5227) and ICMP / \
    ICMPv6 echo requests for these addresses in place, out of the ingress port (`arp_replies`, \
    `icmp_echo_replies`, `icmpv6_echo_replies` in the summary); the reply ends with the packet \
    (Ethernet padding is not echoed). Not answered, passed on unchanged: a bad IPv4 header or \
    ICMP / ICMPv6 checksum, an IP length past the frame, a multicast / broadcast / unspecified \
    source (Ethernet, ARP sender, IPv4 0.0.0.0, 255.255.255.255, 224/4, IPv6 ::, ff00::/8), an \
    ARP announcement, an IPv6 packet with a Routing header whose segments left is not 0 (rules \
    and RFCs: `pipeline/src/rewrite/respond.rs`)";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::gen::{build_frame, FrameSpec};
    use crate::stage::parse::parse_frame;
    use crate::wire::checksum;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x99];

    fn responder() -> Respond {
        Respond::new(&RespondConfig {
            mac: Mac(MAC),
            ipv4: vec!["192.0.2.1".parse().unwrap()],
            ipv6: vec!["2001:db8::1".parse().unwrap()],
        })
        .unwrap()
    }

    fn arp_request(target: [u8; 4], oper: u16) -> Vec<u8> {
        let mut f = vec![0xffu8; 6];
        f.extend([2, 0, 0, 0, 0, 7, 8, 6]);
        let mut a = [0u8; 28];
        arp::Repr {
            oper,
            sender_hw: [2, 0, 0, 0, 0, 7],
            sender_ip: [192, 0, 2, 50],
            target_hw: [0; 6],
            target_ip: target,
        }
        .emit(&mut a)
        .unwrap();
        f.extend(a);
        f.resize(60, 0);
        f
    }

    fn echo(dst: &str, ty: u8) -> Vec<u8> {
        let d: std::net::IpAddr = dst.parse().unwrap();
        let s = if d.is_ipv4() {
            "192.0.2.50"
        } else {
            "2001:db8::50"
        };
        let mut spec = FrameSpec::tcp(s.parse().unwrap(), d, 0x1234, 7, 100);
        spec.proto = if d.is_ipv4() { 1 } else { 58 };
        let mut f = build_frame(&spec);
        let m = parse_frame(&f);
        let l4 = usize::from(m.l4_offset);
        // The generator writes echo requests; the test sets the type it wants.
        let mut h = icmp::Header::new_checked(&mut f[l4..]).unwrap();
        h.set_type_update_checksum(ty);
        f
    }

    fn icmp_ok(f: &[u8]) -> bool {
        let m = parse_frame(f);
        let (l3, l4) = (usize::from(m.l3_offset), usize::from(m.l4_offset));
        let h = icmp::Header::new_checked(&f[l4..]).unwrap();
        if m.ip_version == 4 {
            let ip = ipv4::Packet::new_checked(&f[l3..]).unwrap();
            ip.verify_checksum() && h.verify_checksum(0)
        } else {
            let ip = ipv6::Packet::new_checked(&f[l3..]).unwrap();
            let len = (f.len() - l4) as u32;
            h.verify_checksum(checksum::pseudo_v6(ip.src(), ip.dst(), 58, len))
        }
    }

    #[test]
    fn answers_arp_for_our_address_only() {
        let r = responder();
        let mut f = arp_request([192, 0, 2, 1], 1);
        let mut m = parse_frame(&f);
        assert_eq!(r.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Reply);
        assert_eq!(&f[..12], &[2, 0, 0, 0, 0, 7, 2, 0, 0, 0, 0, 0x99]);
        let rep = arp::Repr::parse(&arp::Packet::new_checked(&f[14..]).unwrap()).unwrap();
        assert_eq!(
            rep,
            arp::Repr {
                oper: 2,
                sender_hw: MAC,
                sender_ip: [192, 0, 2, 1],
                target_hw: [2, 0, 0, 0, 0, 7],
                target_ip: [192, 0, 2, 50],
            }
        );
        assert_eq!(m, parse_frame(&f));
        assert_eq!(r.counters(), [1, 0, 0]);
        for bad in [
            arp_request([192, 0, 2, 2], 1),
            arp_request([192, 0, 2, 1], 2),
        ] {
            let mut g = bad.clone();
            let mut m = parse_frame(&g);
            assert_eq!(r.apply(&mut g, &mut m, &Verdict::PASS), Outcome::Skipped);
            assert_eq!(g, bad);
        }
    }

    #[test]
    fn answers_echo_requests_with_valid_checksums() {
        let r = responder();
        for (dst, req, rep) in [("192.0.2.1", 8u8, 0u8), ("2001:db8::1", 128, 129)] {
            let mut f = echo(dst, req);
            assert!(icmp_ok(&f));
            let before = f.clone();
            let mut m = parse_frame(&f);
            assert_eq!(r.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Reply);
            assert!(icmp_ok(&f), "{dst}: checksums valid after the reply");
            let fresh = parse_frame(&f);
            assert_eq!(m, fresh, "{dst}: meta equals a fresh parse");
            assert_eq!(fresh.icmp_type, rep);
            assert_eq!(fresh.ip_ttl, REPLY_TTL);
            let b = parse_frame(&before);
            assert_eq!((fresh.src_ip, fresh.dst_ip), (b.dst_ip, b.src_ip));
            assert_eq!(&f[..6], &before[6..12]);
            assert_eq!(&f[6..12], &MAC);
            // The payload (identifier, sequence, data) is echoed unchanged.
            let l4 = usize::from(fresh.l4_offset);
            assert_eq!(&f[l4 + 4..], &before[l4 + 4..]);
        }
        assert_eq!(r.counters(), [0, 1, 1]);
        // Not ours, not a request, dropped already, cut short: unchanged.
        for (mut f, v) in [
            (echo("192.0.2.9", 8), Verdict::PASS),
            (echo("2001:db8::9", 128), Verdict::PASS),
            (echo("192.0.2.1", 0), Verdict::PASS),
            (echo("2001:db8::1", 129), Verdict::PASS),
            (
                echo("192.0.2.1", 8),
                Verdict::drop(crate::verdict::DropReason::AclDrop),
            ),
        ] {
            let before = f.clone();
            let mut m = parse_frame(&f);
            assert_eq!(r.apply(&mut f, &mut m, &v), Outcome::Skipped);
            assert_eq!(f, before);
        }
        let f = echo("192.0.2.1", 8);
        let mut m = parse_frame(&f);
        let l4 = usize::from(m.l4_offset);
        let mut cut = f[..l4 + 4].to_vec();
        assert_eq!(r.apply(&mut cut, &mut m, &Verdict::PASS), Outcome::Skipped);
        assert_eq!(cut, f[..l4 + 4]);
    }

    #[test]
    fn bad_configs_name_the_key() {
        let c = |ipv4: usize| RespondConfig {
            mac: Mac(MAC),
            ipv4: (0..ipv4)
                .map(|i| Ipv4Addr::new(10, 0, 0, i as u8))
                .collect(),
            ipv6: vec![],
        };
        assert_eq!(Respond::new(&c(0)).unwrap_err().key, "ipv4");
        assert_eq!(Respond::new(&c(9)).unwrap_err().key, "ipv4");
        assert!(Respond::new(&c(8)).is_ok());
        let y: RespondConfig =
            serde_saphyr::from_str("{ mac: '02:00:00:00:00:01', ipv4: [10.0.0.1], ipv6: ['::1'] }")
                .unwrap();
        assert_eq!(y.ipv6.len(), 1);
        assert!(
            serde_saphyr::from_str::<RespondConfig>("{ mac: '02:00:00:00:00:01', ip: [] }")
                .is_err()
        );
        assert!(serde_saphyr::from_str::<RespondConfig>("{ mac: x, ipv4: [10.0.0.1] }").is_err());
        assert!(serde_saphyr::from_str::<RespondConfig>(
            "{ mac: '02:00:00:00:00:01', ipv4: [10.0.0.300] }"
        )
        .is_err());
    }

    #[test]
    fn params_layout() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<RespondParams>(), 172);
        assert_eq!(offset_of!(RespondParams, n_v4), 6);
        assert_eq!(offset_of!(RespondParams, n_v6), 8);
        assert_eq!(offset_of!(RespondParams, v4), 12);
        assert_eq!(offset_of!(RespondParams, v6), 44);
        let p = responder().params();
        assert_eq!((p.n_v4, p.n_v6, p.v4[0]), (1, 1, 0xc000_0201));
        assert_eq!(p.v6[0], [0x2001_0db8, 0, 0, 1]);
    }
}
