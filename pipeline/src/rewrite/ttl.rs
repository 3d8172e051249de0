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

/// The `ttl` stage, described (the stage descriptor, `stage::descriptor`).
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
        gpu: crate::stage::descriptor::GpuImpl::Own,
        reloads: false,
    };

/// `ttl` comes through the registry door, as a registered stage does: this factory builds it
/// (no options), its Rust side is [`Ttl`] as a `CustomStage` that writes the frame, and its CUDA
/// side is `pw_stage_ttl` of the kernel library's rewrite header.
pub fn factory() -> std::sync::Arc<dyn crate::stage::StageFactory> {
    std::sync::Arc::new(TtlFactory)
}

/// The CUDA side: the library's device function, by its header (inlined once however many
/// stages include it).
const GPU_SOURCE: &str = "/* `ttl`: pw_stage_ttl */\n#include \"rewrite_stages.cuh\"\n";

struct TtlFactory;

impl crate::stage::StageFactory for TtlFactory {
    fn build(&self, options: &serde_json::Value) -> anyhow::Result<crate::stage::BuiltStage> {
        if !(options.is_null() || options.as_object().is_some_and(|m| m.is_empty())) {
            anyhow::bail!("`ttl` takes no options, got {options}");
        }
        Ok(crate::stage::BuiltStage {
            cpu: std::sync::Arc::new(Ttl),
            gpu: Some(crate::stage::GpuStage {
                source: GPU_SOURCE.into(),
                function: "pw_stage_ttl".into(),
                params: Vec::new(),
                counter_names: Vec::new(),
                buffers: Vec::new(),
            }),
        })
    }
}

impl crate::stage::CustomStage for Ttl {
    /// Never called: the stage writes the frame, so the executors call `process_mut`.
    fn process(&self, _: &[u8], _: &PacketMeta, _: &mut Verdict) {}

    fn process_mut(
        &self,
        frame: &mut crate::stage::FrameMut<'_>,
        meta: &mut PacketMeta,
        verdict: &mut Verdict,
    ) {
        let out = self.apply(frame.bytes_mut(), meta, verdict);
        crate::rewrite::stage::apply_outcome(out, verdict, &[]);
    }
}

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

    /// `- ttl` comes through the registry door: a registered-style stage with its descriptor,
    /// writing the frame, dropping `ttl_expired`, kept by a reload, refusing options.
    #[test]
    fn the_config_key_builds_the_stage_through_the_registry_door() {
        use crate::burst::{Burst, FrameDesc};
        use crate::stage::config::StageConfig;
        use crate::stage::Stage;
        let cfgs = [StageConfig::Parse, StageConfig::Ttl];
        let p = crate::stage::build(&cfgs, |p| p.to_path_buf()).unwrap();
        let Stage::Custom(slot) = &p.stages[1] else {
            panic!("ttl is built by its factory")
        };
        assert_eq!(slot.descriptor(), Some(&DESCRIPTOR));
        assert_eq!(
            p.stages[1].drop_reasons(),
            [crate::verdict::DropReason::TtlExpired]
        );
        assert_eq!(p.stage_names(), ["parse", "ttl"]);
        assert!(p.rewrites() && p.gpu_refusal().is_none());
        let mut b = Burst::default();
        for (ttl, f) in [(9u8, frame(false, 9)), (1, frame(true, 1))] {
            let d = FrameDesc {
                len: f.len() as u32,
                wire_len: f.len() as u32,
                ..FrameDesc::default()
            };
            b.push(&f, d);
            assert_eq!(f[14 + if ttl == 9 { 8 } else { 7 }], ttl);
        }
        let c = crate::counters::QueueCounters::new(2, 0);
        let (mut m, mut v) = (Vec::new(), Vec::new());
        p.run_burst_mut(&mut b, &mut m, &mut v, &c);
        assert_eq!(b.frame(0)[14 + 8], 8, "decremented in place");
        assert_eq!(v[1].reason, Some(crate::verdict::DropReason::TtlExpired));
        let r = p.reload_stage_options(&cfgs).unwrap();
        assert!(r.rebuilt.is_empty());
        let e = factory()
            .build(&serde_json::json!({ "by": 2 }))
            .err()
            .unwrap();
        assert!(e.to_string().contains("takes no options"), "{e}");
    }
}
