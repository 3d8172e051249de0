//! `vlan`: push, pop or set the outermost VLAN tag.
//!
//! - `push: { vid, pcp, tpid }`: a new outermost tag right after the two MACs (TPID 0x8100
//!   unless `tpid: 0x88a8`; DEI 0); the frame grows by 4 bytes.
//! - `pop: true`: removes the outermost tag (TPID 0x8100, 0x88A8 or 0x9100) when there is one;
//!   the frame shrinks by 4 bytes (no padding back to 60 bytes: the output port pads if its
//!   medium needs it).
//! - `set: { vid, pcp }`: changes the outermost tag's VID and / or PCP, keeping DEI.
//!
//! A frame without a tag (pop, set) or shorter than its headers is [`Outcome::Skipped`]. After a
//! push or pop the meta is parsed again from the new frame (every offset moves by 4), so it is
//! exactly what `parse` gives for the rewritten frame. No checksum covers the tag.

use super::config::{ConfigError, VlanConfig};
use super::{dropped, Outcome, RewriteDrop};
use crate::meta::PacketMeta;
use crate::stage::parse::parse;
use crate::verdict::Verdict;
use crate::wire::ethernet::{self, ether_type};

/// A configured VLAN rewrite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vlan {
    Push { tpid: u16, tci: u16 },
    Pop,
    Set { vid: Option<u16>, pcp: Option<u8> },
}

const TAG_AT: usize = 12;
const TAG_LEN: usize = 4;

impl Vlan {
    /// Errors: `vid` above 4095, `pcp` above 7, a `tpid` other than 0x8100 / 0x88a8,
    /// `pop: false`, `set` with neither key.
    pub fn new(cfg: &VlanConfig) -> Result<Self, ConfigError> {
        let vid = |v: u16| {
            if v > 0x0FFF {
                Err(ConfigError::new(
                    "vlan",
                    "vid",
                    format!("{v} is out of range 0..=4095"),
                ))
            } else {
                Ok(v)
            }
        };
        let pcp = |p: u8| {
            if p > 7 {
                Err(ConfigError::new(
                    "vlan",
                    "pcp",
                    format!("{p} is out of range 0..=7"),
                ))
            } else {
                Ok(p)
            }
        };
        match cfg {
            VlanConfig::Push(p) => {
                let tpid = p.tpid.unwrap_or(ether_type::VLAN);
                if tpid != ether_type::VLAN && tpid != ether_type::QINQ {
                    return Err(ConfigError::new(
                        "vlan",
                        "tpid",
                        format!("{tpid:#06x}: expected 0x8100 or 0x88a8"),
                    ));
                }
                let tci = (u16::from(pcp(p.pcp)?) << 13) | vid(p.vid)?;
                Ok(Vlan::Push { tpid, tci })
            }
            VlanConfig::Pop(true) => Ok(Vlan::Pop),
            VlanConfig::Pop(false) => Err(ConfigError::new(
                "vlan",
                "pop",
                "`pop: false` does nothing; leave the stage out",
            )),
            VlanConfig::Set(s) => {
                if s.vid.is_none() && s.pcp.is_none() {
                    return Err(ConfigError::new("vlan", "set", "give `vid`, `pcp` or both"));
                }
                Ok(Vlan::Set {
                    vid: s.vid.map(vid).transpose()?,
                    pcp: s.pcp.map(pcp).transpose()?,
                })
            }
        }
    }

    /// On a growable frame (a `Vec`: 4 bytes of spare capacity keep a push from allocating).
    pub fn apply(&self, frame: &mut Vec<u8>, meta: &mut PacketMeta, verdict: &Verdict) -> Outcome {
        let mut len = frame.len();
        if matches!(self, Vlan::Push { .. }) {
            frame.resize(len + TAG_LEN, 0);
        }
        let out = self.apply_in(frame, &mut len, meta, verdict);
        frame.truncate(len);
        out
    }

    /// In place: the frame is `buf[..*len]`, the rest of `buf` is room it may grow into (a
    /// burst's per-frame room, [`crate::burst::Burst::push_with_room`]). A push with less than
    /// 4 bytes of room is [`Outcome::Drop`] with [`RewriteDrop::NoRoom`] (frame unchanged).
    pub fn apply_in(
        &self,
        buf: &mut [u8],
        len: &mut usize,
        meta: &mut PacketMeta,
        verdict: &Verdict,
    ) -> Outcome {
        let n = (*len).min(buf.len());
        if dropped(verdict) || n < ethernet::HEADER_LEN {
            return Outcome::Skipped;
        }
        let outer = u16::from_be_bytes([buf[TAG_AT], buf[TAG_AT + 1]]);
        let tagged = ether_type::is_vlan(outer) && n >= ethernet::HEADER_LEN + TAG_LEN;
        match *self {
            Vlan::Push { tpid, tci } => {
                if buf.len() < n + TAG_LEN {
                    return Outcome::Drop(RewriteDrop::NoRoom);
                }
                buf.copy_within(TAG_AT..n, TAG_AT + TAG_LEN);
                buf[TAG_AT..TAG_AT + 2].copy_from_slice(&tpid.to_be_bytes());
                buf[TAG_AT + 2..TAG_AT + 4].copy_from_slice(&tci.to_be_bytes());
                *len = n + TAG_LEN;
            }
            Vlan::Pop => {
                if !tagged {
                    return Outcome::Skipped;
                }
                buf.copy_within(TAG_AT + TAG_LEN..n, TAG_AT);
                *len = n - TAG_LEN;
            }
            Vlan::Set { vid, pcp } => {
                if !tagged {
                    return Outcome::Skipped;
                }
                let Ok(mut tag) = ethernet::VlanTag::new_checked(&mut buf[ethernet::HEADER_LEN..n])
                else {
                    return Outcome::Skipped;
                };
                if let Some(v) = vid {
                    tag.set_vid(v);
                }
                if let Some(p) = pcp {
                    tag.set_pcp(p);
                }
                // The first two tags are recorded in the meta; the outermost is the first.
                if meta.vlan_count > 0 {
                    meta.vlan_tci[0] = tag.tci();
                }
                return Outcome::Done;
            }
        }
        parse(&buf[..*len], meta);
        Outcome::Done
    }
}

/// The `vlan` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: crate::stage::descriptor::StageDescriptor =
    crate::stage::descriptor::StageDescriptor {
        name: "vlan",
        usage: "`vlan: { push: { vid, pcp, tpid } }` / `{ pop: true }` / `{ set: { vid, pcp } }`",
        summary: "the outermost VLAN tag (a push grows the frame 4 bytes in its frame room; without the room: `too_long` drop)",
        needs: crate::stage::descriptor::StageNeeds {
        writes_frame: true,
        frame_room: 4,
        ..crate::stage::descriptor::StageNeeds::NONE
    },
        drop_reasons: &[crate::verdict::DropReason::TooLong],
        counters: &[],
        gpu: crate::stage::descriptor::GpuImpl::Library {
        function: "pw_stage_vlan",
    },
        reloads: false,
    };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::gen::{build_frame, FrameSpec};
    use crate::rewrite::config::{VlanPush, VlanSet};
    use crate::stage::parse::parse_frame;

    /// A 64-byte frame untagged, 68 bytes tagged (the same packet).
    fn frame(vlan: Option<u16>) -> Vec<u8> {
        let size = if vlan.is_some() { 68 } else { 64 };
        let mut s = FrameSpec::tcp(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            1,
            2,
            size,
        );
        s.vlan = vlan;
        build_frame(&s)
    }

    #[test]
    fn push_then_pop_is_identity() {
        let op = Vlan::new(&VlanConfig::Push(VlanPush {
            vid: 100,
            pcp: 5,
            tpid: None,
        }))
        .unwrap();
        let orig = frame(None);
        let mut f = orig.clone();
        let mut m = parse_frame(&f);
        assert_eq!(op.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Done);
        assert_eq!(f.len(), orig.len() + 4);
        assert_eq!(&f[12..16], &[0x81, 0x00, 0xa0, 100]);
        assert_eq!(&f[16..], &orig[12..]);
        assert_eq!(m.vlan_count, 1);
        assert_eq!(m.vlan_tci[0], 0xa064);
        assert_eq!(m.l3_offset, 18);
        // It equals a frame built with that tag.
        assert_eq!(f, frame(Some(0xa064)));
        let pop = Vlan::new(&VlanConfig::Pop(true)).unwrap();
        assert_eq!(pop.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Done);
        assert_eq!(f, orig);
        assert_eq!(m, parse_frame(&orig));
        assert_eq!(pop.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Skipped);
        assert_eq!(f, orig);
    }

    #[test]
    fn set_changes_only_the_tci_bits() {
        let op = Vlan::new(&VlanConfig::Set(VlanSet {
            vid: Some(7),
            pcp: None,
        }))
        .unwrap();
        let mut f = frame(Some(0xb064)); // PCP 5, DEI 1, VID 100
        let mut m = parse_frame(&f);
        assert_eq!(op.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Done);
        assert_eq!(f, frame(Some(0xb007)));
        assert_eq!(m, parse_frame(&f));
        let mut g = frame(None);
        let mut m = parse_frame(&g);
        assert_eq!(op.apply(&mut g, &mut m, &Verdict::PASS), Outcome::Skipped);
        // QinQ: 0x88a8 push over a C-tag.
        let q = Vlan::new(&VlanConfig::Push(VlanPush {
            vid: 4095,
            pcp: 0,
            tpid: Some(0x88a8),
        }))
        .unwrap();
        assert_eq!(q.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Done);
        assert_eq!(
            &f[12..20],
            &[0x88, 0xa8, 0x0f, 0xff, 0x81, 0x00, 0xb0, 0x07]
        );
        assert_eq!((m.vlan_count, m.vlan_tci), (2, [0x0fff, 0xb007]));
    }

    #[test]
    fn bad_configs_name_the_key() {
        let push = |vid, pcp, tpid| Vlan::new(&VlanConfig::Push(VlanPush { vid, pcp, tpid }));
        assert_eq!(push(4096, 0, None).unwrap_err().key, "vid");
        assert_eq!(push(1, 8, None).unwrap_err().key, "pcp");
        assert_eq!(push(1, 0, Some(0x0800)).unwrap_err().key, "tpid");
        assert_eq!(Vlan::new(&VlanConfig::Pop(false)).unwrap_err().key, "pop");
        assert_eq!(
            Vlan::new(&VlanConfig::Set(VlanSet::default()))
                .unwrap_err()
                .key,
            "set"
        );
        // Short frames are left alone.
        let mut f = vec![0x81u8; 15];
        let mut m = PacketMeta::default();
        assert_eq!(
            Vlan::Pop.apply(&mut f, &mut m, &Verdict::PASS),
            Outcome::Skipped
        );
        assert_eq!(f.len(), 15);
        let mut f = vec![0u8; 13];
        let p = push(1, 0, None).unwrap();
        assert_eq!(p.apply(&mut f, &mut m, &Verdict::PASS), Outcome::Skipped);
    }
}
