//! `dscp: { set: N }`: writes the DSCP (the high 6 bits of the IPv4 TOS / IPv6 traffic class),
//! keeping the 2 ECN bits; the IPv4 header checksum is updated incrementally. Same header
//! selection as `ttl` (outer IP, not under MPLS; others [`Outcome::Skipped`]).

use super::config::{ConfigError, DscpConfig};
use super::{dropped, ip_offset, Outcome};
use crate::meta::PacketMeta;
use crate::verdict::Verdict;
use crate::wire::{ipv4, ipv6};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dscp {
    pub dscp: u8,
}

impl Dscp {
    /// Errors: `set` above 63.
    pub fn new(cfg: &DscpConfig) -> Result<Self, ConfigError> {
        if cfg.set > 63 {
            return Err(ConfigError::new(
                "dscp",
                "set",
                format!("{} is out of range 0..=63", cfg.set),
            ));
        }
        Ok(Dscp { dscp: cfg.set })
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
            p.set_dscp_update_checksum(self.dscp);
            meta.ip_tos = p.tos();
        } else {
            let Ok(mut p) = ipv6::Packet::new_checked(ip) else {
                return Outcome::Skipped;
            };
            p.set_dscp(self.dscp);
            meta.ip_tos = p.traffic_class();
        }
        Outcome::Done
    }
}

/// The `dscp` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: crate::stage::descriptor::StageDescriptor =
    crate::stage::descriptor::StageDescriptor {
        name: "dscp",
        usage: "`dscp: { set: N }`",
        summary: "writes the DSCP, keeps ECN (IPv4 checksum updated)",
        needs: crate::stage::descriptor::StageNeeds {
            reads_meta: true,
            writes_frame: true,
            ..crate::stage::descriptor::StageNeeds::NONE
        },
        drop_reasons: &[],
        counters: &[],
        gpu: crate::stage::descriptor::GpuImpl::Library {
            function: "pw_stage_dscp",
        },
        reloads: false,
    };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::gen::{build_frame, FrameSpec};
    use crate::stage::parse::parse_frame;

    #[test]
    fn sets_dscp_keeps_ecn() {
        for (s, d) in [("10.0.0.1", "10.0.0.2"), ("2001:db8::1", "2001:db8::2")] {
            let mut f = build_frame(&FrameSpec::tcp(
                s.parse().unwrap(),
                d.parse().unwrap(),
                1,
                2,
                100,
            ));
            // ECN CE on the way in.
            if f[14] >> 4 == 4 {
                let mut p = ipv4::Packet::new_checked(&mut f[14..]).unwrap();
                p.set_tos(3);
                p.fill_checksum();
            } else {
                f[15] |= 0x30;
            }
            let mut m = parse_frame(&f);
            let op = Dscp::new(&DscpConfig { set: 46 }).unwrap();
            assert_eq!(op.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Done);
            assert_eq!(m.ip_tos, (46 << 2) | 3);
            assert_eq!(parse_frame(&f), m);
            if f[14] >> 4 == 4 {
                assert!(ipv4::Packet::new_checked(&f[14..])
                    .unwrap()
                    .verify_checksum());
            }
        }
        assert_eq!(Dscp::new(&DscpConfig { set: 64 }).unwrap_err().key, "set");
    }
}
