//! The ACL's `ct:` match: a rule may require the frame's connection state, which the
//! `conntrack` stage writes into the packet metadata (`ct_state`; the state numbers are
//! `pktwarp_flow::ct`, docs/flow-table.md).
//!
//! The state is not a field of the classification key: a rule set with `ct:` rules compiles one
//! classifier per state, each holding the rules that can match a frame in that state (every rule
//! without `ct:`, and the `ct:` rules naming the state), and a frame is classified by its
//! state's. So the key, the compiled image and the CUDA matcher are those of a rule set without
//! `ct:`; first-match order is kept because each classifier's rules keep their file order and
//! its answers map back to file indices.

use super::{AclClassifier, AclRule, AclRuleSet};
use crate::abi::{AclKey, ACL_NO_MATCH};

/// The connection states, by number (the `ct_state` values of `pktwarp_flow::ct`, which names
/// them with this list).
pub const NAMES: [&str; 7] = [
    "untracked",
    "new",
    "established",
    "related",
    "invalid",
    "closing",
    "closed",
];

/// Number of connection states.
pub const STATES: usize = NAMES.len();

/// The state mask of a `ct:` value: state names separated by commas (`established,related`).
pub fn parse_states<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<u8, String> {
    let mut mask = 0u8;
    for n in names {
        for word in n.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let i = NAMES.iter().position(|s| *s == word).ok_or_else(|| {
                format!(
                    "unknown connection state `{word}` (one of: {})",
                    NAMES.join(", ")
                )
            })?;
            mask |= 1 << i;
        }
    }
    if mask == 0 {
        return Err(format!(
            "`ct` names no state (one or more of: {})",
            NAMES.join(", ")
        ));
    }
    Ok(mask)
}

/// The names of a state mask's states, comma-separated.
pub fn mask_names(mask: u8) -> String {
    NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join(",")
}

/// One classifier per connection state, for a rule set with `ct:` rules.
pub struct CtClassifiers {
    /// By state: the classifier of the rules that state can match, and each of its rules'
    /// index in the file.
    by_state: Vec<(AclClassifier, Vec<u32>)>,
}

impl CtClassifiers {
    /// The per-state classifiers of `set`; `None` when no rule has `ct:` (one classifier
    /// serves every state).
    pub fn build(set: &AclRuleSet) -> Option<CtClassifiers> {
        set.first_ct_rule()?;
        let by_state = (0..STATES as u8)
            .map(|state| {
                let (rules, index): (Vec<AclRule>, Vec<u32>) = set
                    .rules
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.matches_ct(state))
                    .map(|(i, r)| (r.clone(), i as u32))
                    .unzip();
                (AclClassifier::build(&rules), index)
            })
            .collect();
        Some(CtClassifiers { by_state })
    }

    /// The first rule (file index) matching `key` in connection state `state`, or
    /// `ACL_NO_MATCH`. A state past the known ones (a corrupt byte) is classified as
    /// `invalid`.
    #[inline]
    pub fn classify(&self, key: &AclKey, state: u8) -> u32 {
        let s = if (state as usize) < STATES { state } else { 4 };
        let (cls, index) = &self.by_state[s as usize];
        let r = cls.classify(key);
        if r == ACL_NO_MATCH {
            return r;
        }
        index.get(r as usize).copied().unwrap_or(ACL_NO_MATCH)
    }
}

/// Magic of the per-state image ([`CtClassifiers::gpu_image`], `PW_ACL_CT_MAGIC`, "PWCT").
pub const CT_IMAGE_MAGIC: u32 = 0x5443_5750;
/// Words of the per-state image's header (`pw_acl_ct_image`).
pub const CT_IMAGE_HEADER_WORDS: usize = 32;

impl CtClassifiers {
    /// The GPU image of the per-state classifiers (`pw_acl_ct_image` of cuda/pktwarp_abi.h): a
    /// header (magic, version, the file's rule count, total words, then per state the word
    /// offset of its classifier's image and of its index map), each state's image (as
    /// [`AclClassifier::image`], 16-byte aligned), and each state's map from its rule indices
    /// to file indices. The acl stage on the GPU picks the frame's state's image, as
    /// [`CtClassifiers::classify`] does.
    pub fn gpu_image(&self, file_rules: usize) -> Vec<u32> {
        let mut img = vec![0u32; CT_IMAGE_HEADER_WORDS];
        img[0] = CT_IMAGE_MAGIC;
        img[1] = crate::abi::ACL_VERSION;
        img[2] = file_rules as u32;
        for (s, (cls, index)) in self.by_state.iter().enumerate() {
            while img.len() % 4 != 0 {
                img.push(0);
            }
            img[4 + s] = img.len() as u32;
            img.extend_from_slice(cls.image());
            img[4 + STATES + s] = img.len() as u32;
            img.extend_from_slice(index);
        }
        img[3] = img.len() as u32;
        img
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{AclAction, Verdict};

    fn rule(ct: u8, port: u16, verdict: Verdict) -> AclRule {
        let mut r = AclRule::any();
        r.ct = ct;
        r.dst_port = crate::acl::PortRange { lo: port, hi: port };
        r.action = AclAction {
            verdict,
            mark: None,
        };
        r
    }

    /// The GPU image: the header names each state's classifier image (16-byte aligned, as
    /// the state's own image) and its index map (the state's rules' file indices).
    #[test]
    fn the_gpu_image_holds_each_states_classifier_and_map() {
        let set = AclRuleSet {
            rules: vec![
                rule(1 << 4, 80, Verdict::Drop),
                rule(0b1100, 80, Verdict::Pass),
                rule(0, 443, Verdict::Pass),
            ],
            ..AclRuleSet::default()
        };
        let c = CtClassifiers::build(&set).expect("ct rules");
        let img = c.gpu_image(3);
        assert_eq!(img[0], CT_IMAGE_MAGIC);
        assert_eq!(img[2], 3);
        assert_eq!(img[3] as usize, img.len());
        for (s, (cls, index)) in c.by_state.iter().enumerate() {
            let at = img[4 + s] as usize;
            assert_eq!(at % 4, 0, "state {s}: aligned");
            assert_eq!(&img[at..at + cls.image().len()], cls.image());
            let m = img[4 + STATES + s] as usize;
            assert_eq!(&img[m..m + index.len()], index.as_slice());
        }
        // invalid (4): rules 0 and 2; established (2): rules 1 and 2; new (1): rule 2.
        let map = |s: usize| {
            let m = img[4 + STATES + s] as usize;
            img[m..m + c.by_state[s].1.len()].to_vec()
        };
        assert_eq!(map(4), [0, 2]);
        assert_eq!(map(2), [1, 2]);
        assert_eq!(map(1), [2]);
    }

    #[test]
    fn states_parse_from_names_and_lists() {
        assert_eq!(parse_states(["new"]), Ok(1 << 1));
        assert_eq!(parse_states(["established, related"]), Ok(0b1100));
        assert_eq!(parse_states(["invalid", "untracked"]), Ok(0b1_0001));
        let e = parse_states(["estab"]).unwrap_err();
        assert!(e.contains("`estab`") && e.contains("established"), "{e}");
        assert!(parse_states([""]).is_err());
        assert_eq!(mask_names(0b1100), "established,related");
    }

    /// Each state's classifier gives the linear first match of the rules for that state, in
    /// file indices.
    #[test]
    fn per_state_classifiers_equal_the_linear_reference() {
        let set = AclRuleSet {
            rules: vec![
                rule(1 << 4, 80, Verdict::Drop),
                rule(0b1100, 80, Verdict::Pass),
                rule(0, 443, Verdict::Mirror),
                rule(1 << 1, 80, Verdict::ToHost),
                rule(0, 80, Verdict::Drop),
            ],
            warnings: Vec::new(),
        };
        let c = CtClassifiers::build(&set).expect("the set has ct rules");
        for state in 0..=9u8 {
            for port in [80, 443, 22] {
                let key = AclKey {
                    ip_version: 4,
                    proto: 6,
                    dst_port: port,
                    ..AclKey::default()
                };
                // A state past the known ones is classified as `invalid`.
                let eff = if state < 7 { state } else { 4 };
                let want = set
                    .classify_linear_ct(&key, eff)
                    .map_or(ACL_NO_MATCH, |i| i as u32);
                assert_eq!(c.classify(&key, state), want, "state {state} port {port}");
            }
        }
        let k80 = AclKey {
            ip_version: 4,
            dst_port: 80,
            ..AclKey::default()
        };
        assert_eq!(c.classify(&k80, 4), 0);
        assert_eq!(c.classify(&k80, 2), 1);
        assert_eq!(c.classify(&k80, 1), 3);
        assert_eq!(c.classify(&k80, 0), 4);
        let plain = AclRuleSet {
            rules: vec![rule(0, 80, Verdict::Drop)],
            warnings: Vec::new(),
        };
        assert!(CtClassifiers::build(&plain).is_none());
    }
}
