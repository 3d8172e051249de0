//! The burst-wise `acl` pass (keys grouped by family, the classifier's batch walk) against the
//! frame-by-frame stage list, on ClassBench-like rules generated from a seed (no corpus): 1000
//! IPv4 rules in acl1's shape (`gen4`) and 400 IPv6 ones (`gen6`), with every action, a mark,
//! DSCP / TCP-flag / VLAN / ingress-port conditions on some rules and one L2-only rule; frames
//! made from both traces, interleaved in runs of varied length with non-IP and truncated
//! frames. Every metadata record, verdict and counter must be equal, and each first-stage
//! verdict's rule the linear first match.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use flow_rules::abi::{AclKey, ACL_NO_MATCH};
use flow_rules::acl::gen6::{self, GenSpec, Profile};
use flow_rules::acl::{classbench, gen4, AclRuleSet, Masked, Verdict as Rv};

use super::burstwise::{run_both, CHUNK};
use crate::burst::FrameDesc;
use crate::port::gen::{build_frame, FrameSpec};
use crate::stage::acl::{key_from_meta, AclStage};
use crate::stage::{AclSlot, Pipeline, Stage};
use crate::verdict::{Action, DropReason};

/// A xorshift generator (fixed, no crate's generator).
fn rng(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut x = seed;
    move |n| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    }
}

/// 1000 generated IPv4 rules, then 400 generated IPv6 ones, then an L2-only rule (ingress port 1, to-host,
/// mark 99). Rule `i`'s action by `(i + shift) % 6`: drop, mirror, to-host, pass with mark
/// `i`, pass, pass; some rules get an extra condition. Also returns both traces' keys.
fn rules(shift: usize) -> (AclRuleSet, Vec<AclKey>) {
    let g4 = gen4::generate(&GenSpec {
        profile: Profile::Acl,
        rules: 1000,
        headers: 10_000,
        miss_frac: 0.1,
        seed: 5,
    });
    let p4 = Path::new("gen4");
    let mut set = AclRuleSet {
        rules: classbench::parse_rules(p4, &g4.rules).unwrap(),
        warnings: Vec::new(),
    };
    let mut keys: Vec<AclKey> = classbench::parse_trace(p4, &g4.trace)
        .unwrap()
        .into_iter()
        .map(|t| t.key)
        .collect();
    let g = gen6::generate(&GenSpec {
        profile: Profile::Acl,
        rules: 400,
        headers: 3000,
        miss_frac: 0.1,
        seed: 11,
    });
    let p6 = Path::new("gen6");
    set.rules
        .extend(classbench::parse_rules(p6, &g.rules).unwrap());
    keys.extend(
        classbench::parse_trace(p6, &g.trace)
            .unwrap()
            .into_iter()
            .map(|t| t.key),
    );
    let mut l2 = flow_rules::acl::AclRule::any();
    l2.port_id = Masked::<u16>::exact(1);
    set.rules.push(l2);
    let n = set.rules.len();
    for (i, r) in set.rules.iter_mut().enumerate() {
        r.action.verdict = [
            Rv::Drop,
            Rv::Mirror,
            Rv::ToHost,
            Rv::Pass,
            Rv::Pass,
            Rv::Pass,
        ][(i + shift) % 6];
        r.action.mark = ((i + shift) % 6 == 3).then_some(i as u32);
        match i % 23 {
            3 => r.vlan = Masked::<u16>::exact(1),
            7 => r.tcp_flags = Masked::<u8>::new(0x02, 0x02),
            11 => r.port_id = Masked::<u16>::exact((i % 3) as u16),
            // The frames' DSCP is 0: this one matches, the next never does.
            15 => r.dscp = Masked::<u8>::exact(0),
            19 => r.dscp = Masked::<u8>::exact(46),
            _ => {}
        }
        if i == n - 1 {
            r.action.verdict = Rv::ToHost;
            r.action.mark = Some(99);
        }
    }
    (set, keys)
}

/// A frame with the key's addresses, ports and protocol.
fn frame_of(k: &AclKey, i: usize) -> Vec<u8> {
    let (src, dst): (IpAddr, IpAddr) = if k.ip_version == 4 {
        (
            Ipv4Addr::from(k.src_ip[0]).into(),
            Ipv4Addr::from(k.dst_ip[0]).into(),
        )
    } else {
        let v6 = |w: [u32; 4]| {
            let x = w.iter().fold(0u128, |a, &w| a << 32 | u128::from(w));
            IpAddr::from(Ipv6Addr::from(x))
        };
        (v6(k.src_ip), v6(k.dst_ip))
    };
    let mut s = FrameSpec::tcp(src, dst, k.src_port, k.dst_port, 64);
    s.proto = k.proto;
    s.tcp_flags = (i as u8).wrapping_mul(37);
    if i % 7 == 3 {
        s.vlan = Some((i % 4) as u16);
    }
    build_frame(&s)
}

/// The two traces' frames interleaved in runs of 1-40 frames of one family, with non-IP frames
/// (the multi-protocol capture's) among them and every 29th frame cut short (a parse error);
/// three ingress ports.
fn frames(keys: &[AclKey]) -> Vec<(FrameDesc, Vec<u8>)> {
    let mut r = rng(0x2545_F491_4F6C_DD1D);
    let (v4, v6): (Vec<&AclKey>, Vec<&AclKey>) = keys.iter().partition(|k| k.ip_version == 4);
    let other = crate::testdata::multi_proto_frames();
    let (mut a, mut b, mut o) = (v4.into_iter(), v6.into_iter(), other.iter().cycle());
    let mut out = Vec::new();
    // Until both traces are used up (the capture's frames are cycled).
    let (mut a_done, mut b_done) = (false, false);
    while !(a_done && b_done) {
        let run = 1 + r(40) as usize;
        let fam = r(8);
        for _ in 0..run {
            let i = out.len();
            let f = match fam {
                0..=3 => a.next().map(|k| frame_of(k, i)),
                4..=6 => b.next().map(|k| frame_of(k, i)),
                _ => o.next().cloned(),
            };
            let Some(mut f) = f else {
                a_done |= fam <= 3;
                b_done |= fam > 3;
                break;
            };
            if i % 29 == 5 {
                f.truncate(20);
            }
            let d = FrameDesc {
                port: (i % 3) as u16,
                len: f.len() as u32,
                wire_len: f.len() as u32,
                ..FrameDesc::default()
            };
            out.push((d, f));
        }
    }
    out
}

fn acl_stage(shift: usize, default: Action) -> (AclStage, AclRuleSet) {
    let (mut set, _) = rules(shift);
    let classifier = set.compile();
    let st = AclStage {
        rules: set.clone(),
        classifier,
        ct: None,
        default,
        path: "classbench-test".into(),
        generation: 0,
    };
    (st, set)
}

#[test]
fn classbench_acl_burstwise_equals_framewise() {
    let (_, keys) = rules(0);
    let all = frames(&keys);
    assert!(all.len() > 10_000, "{} frames", all.len());
    let (st, set) = acl_stage(0, Action::Pass);
    let rules_n = set.rules.len();
    let one = Pipeline::new(vec![
        Stage::Parse,
        Stage::Acl(AclSlot::new(st)),
        Stage::Count,
    ]);
    // Two acl stages: the second sees the frames the first did not drop (holes in each
    // chunk), with other actions and a drop default.
    let (s1, _) = acl_stage(0, Action::Drop);
    let (s2, _) = acl_stage(2, Action::Pass);
    let two = Pipeline::new(vec![
        Stage::Parse,
        Stage::Acl(AclSlot::new(s1)),
        Stage::Count,
        Stage::Acl(AclSlot::new(s2)),
    ]);
    assert!(one.burstwise() && !one.rewrites() && two.burstwise() && !two.rewrites());
    for p in [&one, &two] {
        // Rule counters for every rule, and too few (a reload grew the set: the rest are
        // counted in rule_hits_other).
        for hits in [rules_n, rules_n - 300] {
            for burst in [
                &all[..],
                &all[..1],
                &all[..7],
                &all[..8],
                &all[..9],
                &all[..CHUNK],
                &all[..CHUNK + 3],
                &all[1000..1700],
            ] {
                run_both(p, burst, hits, Default::default());
            }
        }
    }
    let (metas, verdicts, c) = run_both(&one, &all, rules_n, Default::default());
    // Every outcome was compared, and the rules are the linear first match.
    let mut seen = [0usize; 6];
    for (i, ((d, _), (m, v))) in all.iter().zip(metas.iter().zip(&verdicts)).enumerate() {
        if v.reason == Some(DropReason::ParseError) {
            seen[0] += 1;
            continue;
        }
        let key = key_from_meta(m, d.port);
        let want = set.classify_linear(&key).map_or(ACL_NO_MATCH, |r| r as u32);
        assert_eq!(v.rule, want, "frame {i}, key {key:?}");
        let fam = match key.ip_version {
            4 => 2,
            6 => 3,
            _ => 1,
        };
        seen[fam] += usize::from(want != ACL_NO_MATCH);
        seen[4] += usize::from(v.action == Action::Drop);
        seen[5] += usize::from(v.mark != 0);
    }
    // Parse errors; matches of non-IP (the L2 rule), IPv4 and IPv6 frames; ACL drops; marks.
    assert!(seen.iter().all(|&s| s > 0), "{seen:?}");
    assert!(c.mirrored.get() > 0 && c.to_host.get() > 0 && c.passed.get() > 0);
    assert!(c.drop_count(DropReason::AclDrop) > 0 && c.acl_default.get() > 0);
}
