//! `l2fwd`: MAC rewrite. `mac: swap` exchanges source and destination (a reflector, as DPDK's
//! l2fwd-nv example does); `src` / `dst` write fixed addresses (after the swap when both are
//! configured). Nothing but those 12 bytes changes; no checksum covers them.

use super::config::{ConfigError, L2fwdConfig, MacMode};
use super::{dropped, Outcome};
use crate::meta::PacketMeta;
use crate::verdict::Verdict;
use crate::wire::ethernet;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct L2fwd {
    pub swap: bool,
    pub src: Option<[u8; 6]>,
    pub dst: Option<[u8; 6]>,
}

impl L2fwd {
    /// Errors: no key given (`mac`).
    pub fn new(cfg: &L2fwdConfig) -> Result<Self, ConfigError> {
        let op = L2fwd {
            swap: cfg.mac == Some(MacMode::Swap),
            src: cfg.src.map(|m| m.0),
            dst: cfg.dst.map(|m| m.0),
        };
        if !op.swap && op.src.is_none() && op.dst.is_none() {
            return Err(ConfigError::new(
                "l2fwd",
                "mac",
                "nothing to do: give `mac: swap`, `src` or `dst`",
            ));
        }
        Ok(op)
    }

    /// `mac: swap`.
    pub fn swap() -> Self {
        L2fwd {
            swap: true,
            src: None,
            dst: None,
        }
    }

    /// Rewrites the MACs. A frame shorter than an Ethernet header is [`Outcome::Skipped`].
    pub fn apply(&self, frame: &mut [u8], _meta: &mut PacketMeta, verdict: &Verdict) -> Outcome {
        if dropped(verdict) {
            return Outcome::Skipped;
        }
        let Ok(mut f) = ethernet::Frame::new_checked(frame) else {
            return Outcome::Skipped;
        };
        if self.swap {
            f.swap_macs();
        }
        if let Some(m) = self.src {
            f.set_src(m);
        }
        if let Some(m) = self.dst {
            f.set_dst(m);
        }
        Outcome::Done
    }
}

/// The `l2fwd` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: crate::stage::descriptor::StageDescriptor =
    crate::stage::descriptor::StageDescriptor {
        name: "l2fwd",
        usage: "`l2fwd: { mac: swap }` / `{ src: MAC, dst: MAC }`",
        summary: "rewrites the MAC addresses",
        needs: crate::stage::descriptor::StageNeeds {
            writes_frame: true,
            ..crate::stage::descriptor::StageNeeds::NONE
        },
        drop_reasons: &[],
        counters: &[],
        gpu: crate::stage::descriptor::GpuImpl::Library {
            function: "pw_stage_l2fwd",
        },
        reloads: false,
    };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::Mac;
    use crate::verdict::DropReason;

    #[test]
    fn swap_then_set() {
        let mut f: Vec<u8> = (0u8..20).collect();
        let mut m = PacketMeta::default();
        assert_eq!(
            L2fwd::swap().apply(&mut f, &mut m, &Verdict::PASS),
            Outcome::Done
        );
        assert_eq!(&f[..12], &[6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5]);
        assert_eq!(&f[12..], &(12u8..20).collect::<Vec<_>>()[..]);
        let op = L2fwd::new(&L2fwdConfig {
            mac: Some(MacMode::Swap),
            src: Some(Mac([0xaa; 6])),
            dst: None,
        })
        .unwrap();
        op.apply(&mut f, &mut m, &Verdict::PASS);
        assert_eq!(
            &f[..12],
            &[0, 1, 2, 3, 4, 5, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa]
        );
    }

    #[test]
    fn short_dropped_and_empty_config() {
        let mut f = vec![1u8; 13];
        let mut m = PacketMeta::default();
        assert_eq!(
            L2fwd::swap().apply(&mut f, &mut m, &Verdict::PASS),
            Outcome::Skipped
        );
        assert_eq!(f, vec![1u8; 13]);
        let mut f: Vec<u8> = (0u8..14).collect();
        let v = Verdict::drop(DropReason::AclDrop);
        assert_eq!(L2fwd::swap().apply(&mut f, &mut m, &v), Outcome::Skipped);
        assert_eq!(f, (0u8..14).collect::<Vec<_>>());
        let e = L2fwd::new(&L2fwdConfig::default()).unwrap_err();
        assert_eq!(e.key, "mac");
    }
}
