//! `ttl`: decrements the IPv4 TTL (header checksum updated incrementally, RFC 1624) or the IPv6
//! hop limit (no checksum covers it; it is not in the L4 pseudo header). A frame that arrives
//! with 0 or 1 is dropped (`ttl_expired`), as a router does (RFC 1812 5.3.1), unchanged.
//!
//! Applies to the outer IP header the `parse` stage found (`meta.ip_version`, `l3_offset`); not
//! to IP under MPLS (a label switch router decrements the label's TTL, not done here), not to
//! frames without IP (ARP, eCPRI), which are [`Outcome::Skipped`].

use super::config::TtlConfig;
use super::{dropped, ip_offset, Outcome, RewriteDrop};
use crate::meta::PacketMeta;
use crate::verdict::Verdict;
use crate::wire::{ipv4, ipv6};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ttl;

impl Ttl {
    pub fn new(_cfg: &TtlConfig) -> Self {
        Ttl
    }

    pub fn apply(&self, frame: &mut [u8], meta: &mut PacketMeta, verdict: &Verdict) -> Outcome {
        if dropped(verdict) {
            return Outcome::Skipped;
        }
        let Some((version, l3)) = ip_offset(meta) else {
            return Outcome::Skipped;
        };
        let Some(ip) = frame.get_mut(l3..) else {
            return Outcome::Skipped;
        };
        if version == 4 {
            let Ok(mut p) = ipv4::Packet::new_checked(ip) else {
                return Outcome::Skipped;
            };
            if p.ttl() <= 1 {
                return Outcome::Drop(RewriteDrop::TtlExpired);
            }
            let t = p.ttl() - 1;
            p.set_ttl_update_checksum(t);
            meta.ip_ttl = t;
        } else {
            let Ok(mut p) = ipv6::Packet::new_checked(ip) else {
                return Outcome::Skipped;
            };
            if p.hop_limit() <= 1 {
                return Outcome::Drop(RewriteDrop::TtlExpired);
            }
            let t = p.hop_limit() - 1;
            p.set_hop_limit(t);
            meta.ip_ttl = t;
        }
        Outcome::Done
    }
}

/// The `ttl` stage, described ([`crate::stage::descriptor`]).
pub const DESCRIPTOR: crate::stage::descriptor::StageDescriptor =
    crate::stage::descriptor::StageDescriptor {
        name: "ttl",
        usage: "`ttl`",
        summary: "decrements the IPv4 TTL (checksum updated) / IPv6 hop limit; 0 or 1 on arrival: `ttl_expired` drop",
        needs: crate::stage::descriptor::StageNeeds {
        reads_meta: true,
        writes_frame: true,
        ..crate::stage::descriptor::StageNeeds::NONE
    },
        drop_reasons: &[crate::verdict::DropReason::TtlExpired],
        counters: &[],
        gpu: crate::stage::descriptor::GpuImpl::Library {
        function: "pw_stage_ttl",
    },
        reloads: false,
    };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::gen::{build_frame, FrameSpec};
    use crate::stage::parse::parse_frame;

    fn frame(v6: bool, ttl: u8) -> Vec<u8> {
        let (s, d) = if v6 {
            (
                "2001:db8::1".parse().unwrap(),
                "2001:db8::2".parse().unwrap(),
            )
        } else {
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
        };
        let mut f = build_frame(&FrameSpec::tcp(s, d, 1, 2, 64));
        let l3 = 14;
        if v6 {
            f[l3 + 7] = ttl;
        } else {
            let mut p = ipv4::Packet::new_checked(&mut f[l3..]).unwrap();
            p.set_ttl(ttl);
            p.fill_checksum();
        }
        f
    }

    #[test]
    fn decrements_and_drops_expired() {
        for v6 in [false, true] {
            let mut f = frame(v6, 64);
            let mut m = parse_frame(&f);
            assert_eq!(Ttl.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Done);
            assert_eq!(m.ip_ttl, 63);
            assert_eq!(parse_frame(&f), m, "meta equals a fresh parse");
            if !v6 {
                assert!(ipv4::Packet::new_checked(&f[14..])
                    .unwrap()
                    .verify_checksum());
            }
            for t in [0u8, 1] {
                let mut f = frame(v6, t);
                let before = f.clone();
                let mut m = parse_frame(&f);
                let out = Ttl.apply(&mut f, &mut m, &Verdict::PASS);
                assert_eq!(out, Outcome::Drop(RewriteDrop::TtlExpired));
                assert_eq!(f, before);
            }
            let mut f = frame(v6, 2);
            let mut m = parse_frame(&f);
            assert_eq!(Ttl.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Done);
            assert_eq!(m.ip_ttl, 1);
        }
    }

    #[test]
    fn not_ip_or_cut_is_skipped() {
        // ARP.
        let mut f = vec![0u8; 42];
        f[12] = 0x08;
        f[13] = 0x06;
        let mut m = parse_frame(&f);
        assert_eq!(Ttl.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Skipped);
        // A meta that claims IPv4 over a frame cut before the header's end.
        let mut f = frame(false, 64);
        let mut m = parse_frame(&f);
        f.truncate(20);
        assert_eq!(Ttl.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Skipped);
        m.l3_offset = 60000;
        assert_eq!(Ttl.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Skipped);
    }
}
