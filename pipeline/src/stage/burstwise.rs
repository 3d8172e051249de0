//! The stage list run stage by stage over a burst instead of frame by frame, for lists of
//! built-in read-only stages (`parse`, `count`, `conntrack`, `acl` without rewrite actions and
//! without `ct:` rules): one dispatch per
//! stage and burst instead of per frame, `parse` walking the burst with the next frames'
//! first bytes prefetched, `acl` classifying the chunk's keys with the classifier's batch walk,
//! `count` adding up lengths, `conntrack` taking its queue's table once for the chunk and
//! applying the frames in order, the verdict tally per burst. Results (metadata, verdicts,
//! counters) are those of the frame-by-frame loop: each frame still meets the stages in list
//! order, a drop still stops the list for that frame, and no stage of these kinds reads what
//! another frame's stage wrote (conntrack's frames meet the table in frame order, as they would
//! one at a time).

use std::sync::Arc;

use crate::counters::{QueueCounters, PARSE_STATUS_SLOTS};
use crate::meta::PacketMeta;
use flow_rules::abi::{AclKey, ACL_NO_MATCH};

use crate::stage::acl::{key_from_meta, AclStage};
use crate::stage::parse;
use crate::stage::run::{acl_verdict, Item, Pipeline, Stage, Tally, MAX_STAGES};
use crate::verdict::{Action, DropReason, Verdict};

/// Frames per pass: the set of frames still in the list is one `u64`.
pub(super) const CHUNK: usize = 64;
/// How many frames ahead `parse` prefetches a frame's first bytes: a received frame's data is
/// typically out of the core's cache (DMA), and the header walk of the frames before it covers
/// the fetch.
const PREFETCH_AHEAD: usize = 4;

/// A hint to start fetching the cache line at `p`.
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint and does not fault on any address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p.cast::<i8>(), core::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The indices of the set bits of `m`, lowest first.
#[inline(always)]
fn bits(mut m: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        Some(i)
    })
}

/// `parse` on one frame: false when it drops the frame (a parse error, counted).
#[inline(always)]
fn parse_one(
    f: &[u8],
    mark: u32,
    meta: &mut PacketMeta,
    v: &mut Verdict,
    t: &mut Tally,
    c: &QueueCounters,
) -> bool {
    parse::parse_inlined(f, meta);
    meta.steer_mark = mark;
    if meta.status == 0 {
        return true;
    }
    *v = Verdict::drop(DropReason::ParseError);
    t.drops[DropReason::ParseError as usize] += 1;
    let s = (meta.status as usize).min(PARSE_STATUS_SLOTS - 1);
    c.parse_status[s].add(1);
    false
}

/// One `acl` stage over the chunk's frames still in the list (`alive`; the ones it drops are
/// taken out): their keys classified with the batch walk
/// ([`flow_rules::acl::AclClassifier::classify_batch`]: eight keys of one family at a time over
/// the CPU copy of the trees and leaf blocks, the same answers as the per-frame walk, which it
/// falls back to for a group's last keys and for non-IP keys), then each frame's verdict in
/// frame order. A chunk of one family goes as it is; a mixed one is grouped by family first
/// (IPv4, IPv6, the rest), so that mixed traffic still fills batches. `acl` is the tables the
/// burst loaded, so a reload never splits a burst.
#[inline(always)]
fn acl_pass(
    acl: &AclStage,
    ch: &Chunk<'_>,
    metas: &[PacketMeta],
    verdicts: &mut [Verdict],
    alive: &mut u64,
    t: &mut Tally,
    c: &QueueCounters,
) {
    // The keys in frame order (the j-th frame still in the list), and their families.
    let mut keys = [AclKey::default(); CHUNK];
    let mut fams = [0u8; CHUNK];
    let mut n = 0usize;
    for i in bits(*alive) {
        keys[n] = key_from_meta(&metas[i], ch.ports[i]);
        // key_from_meta keeps versions 4 and 6 only (anything else is 0: non-IP).
        fams[n] = keys[n].ip_version;
        n += 1;
    }
    let mut rules = [ACL_NO_MATCH; CHUNK];
    let cls = &acl.classifier;
    if fams[..n].iter().all(|&f| f == fams[0]) {
        cls.classify_batch(&keys[..n], &mut rules[..n]);
    } else {
        // Grouped: key j goes to place[j].
        let group = |f: u8| match f {
            4 => 0usize,
            6 => 1,
            _ => 2,
        };
        let mut sizes = [0usize; 3];
        for &f in &fams[..n] {
            sizes[group(f)] += 1;
        }
        let mut next = [0, sizes[0], sizes[0] + sizes[1]];
        let mut grouped = [AclKey::default(); CHUNK];
        let mut place = [0u8; CHUNK];
        for j in 0..n {
            let g = group(fams[j]);
            grouped[next[g]] = keys[j];
            place[j] = next[g] as u8;
            next[g] += 1;
        }
        let mut out = [ACL_NO_MATCH; CHUNK];
        let mut at = 0;
        for size in sizes {
            cls.classify_batch(&grouped[at..at + size], &mut out[at..at + size]);
            at += size;
        }
        for j in 0..n {
            rules[j] = out[usize::from(place[j])];
        }
    }
    for (i, &rule) in bits(*alive).zip(&rules[..n]) {
        if acl_verdict(acl.result(rule), &mut verdicts[i], t, c) {
            t.drops[DropReason::AclDrop as usize] += 1;
            *alive &= !(1u64 << i);
        }
    }
}

/// One chunk's frames as the stages see them.
struct Chunk<'f> {
    bytes: [&'f [u8]; CHUNK],
    marks: [u32; CHUNK],
    ports: [u16; CHUNK],
    queues: [u16; CHUNK],
    times: [u64; CHUNK],
    len: usize,
}

impl Pipeline {
    /// Whether the list can run burst-wise (the caller checked that nothing rewrites): only
    /// `parse`, `count` and `acl` stages, every one counted (at most [`MAX_STAGES`]).
    pub(super) fn burstwise(&self) -> bool {
        self.stages.len() <= MAX_STAGES
            && self.stages.iter().all(|s| {
                matches!(
                    s,
                    Stage::Parse | Stage::Count | Stage::Acl(_) | Stage::Conntrack(_)
                )
            })
    }

    /// Runs the list over `frames` in chunks of [`CHUNK`], stage by stage.
    pub(super) fn run_burstwise<'f>(
        &self,
        mut frames: impl ExactSizeIterator<Item = Item<'f>>,
        metas: &mut Vec<PacketMeta>,
        verdicts: &mut Vec<Verdict>,
        tables: &[Option<Arc<AclStage>>; MAX_STAGES],
        t: &mut Tally,
        c: &QueueCounters,
    ) {
        let n = frames.len();
        if matches!(self.stages.first(), Some(Stage::Parse)) {
            // parse runs first on every frame and overwrites each record whole: the records
            // left from the last burst need no clearing.
            metas.resize(n, PacketMeta::default());
        } else {
            metas.clear();
            metas.resize(n, PacketMeta::default());
        }
        // Every verdict is reset to Pass per chunk below.
        verdicts.resize(n, Verdict::PASS);
        let mut chunk = Chunk {
            bytes: [&[]; CHUNK],
            marks: [0; CHUNK],
            ports: [0; CHUNK],
            queues: [0; CHUNK],
            times: [0; CHUNK],
            len: 0,
        };
        let mut base = 0usize;
        while base < n {
            let want = (n - base).min(CHUNK);
            let mut k = 0usize;
            while k < want {
                let Some(item) = frames.next() else { break };
                let (d, f) = match item {
                    Item::Ro(d, f) => (d, f),
                    Item::Rw(d, buf) => {
                        let buf: &'f [u8] = buf;
                        let len = (d.len as usize).min(buf.len());
                        (*d, &buf[..len])
                    }
                };
                chunk.bytes[k] = f;
                chunk.marks[k] = d.mark;
                chunk.ports[k] = d.port;
                chunk.queues[k] = d.queue;
                chunk.times[k] = d.timestamp_ns;
                k += 1;
            }
            if k == 0 {
                break;
            }
            chunk.len = k;
            let end = base + k;
            let vs = &mut verdicts[base..end];
            vs.fill(Verdict::PASS);
            self.run_chunk(&chunk, &mut metas[base..end], vs, tables, t, c);
            base = end;
        }
    }

    /// Every stage over one chunk (`metas` and `verdicts` are the chunk's).
    fn run_chunk(
        &self,
        ch: &Chunk<'_>,
        metas: &mut [PacketMeta],
        verdicts: &mut [Verdict],
        tables: &[Option<Arc<AclStage>>; MAX_STAGES],
        t: &mut Tally,
        c: &QueueCounters,
    ) {
        let k = ch.len.min(metas.len()).min(verdicts.len());
        // The frames still in the list (not dropped by a stage before).
        let all: u64 = if k == CHUNK {
            u64::MAX
        } else {
            (1u64 << k) - 1
        };
        let mut alive = all;
        // An acl stage ran: actions other than Pass and Drop are possible.
        let mut acted = false;
        for (si, stage) in self.stages.iter().enumerate().take(MAX_STAGES) {
            if alive == 0 {
                break;
            }
            t.stage_frames[si] += u64::from(alive.count_ones());
            match stage {
                Stage::Parse if alive == all => {
                    // Every frame (parse first, as usual): walked in order, no index checks.
                    let frames = ch.bytes[..k].iter().zip(&ch.marks[..k]);
                    let out = metas[..k].iter_mut().zip(verdicts[..k].iter_mut());
                    for (i, ((&f, &mark), (meta, v))) in frames.zip(out).enumerate() {
                        // Masked, not checked: near the end it hints at frames already parsed
                        // (or a stale pointer: a hint never faults).
                        prefetch(ch.bytes[(i + PREFETCH_AHEAD) % CHUNK].as_ptr());
                        if !parse_one(f, mark, meta, v, t, c) {
                            alive &= !(1u64 << i);
                        }
                    }
                }
                Stage::Parse => {
                    for i in bits(alive) {
                        prefetch(ch.bytes[(i + PREFETCH_AHEAD) % CHUNK].as_ptr());
                        if !parse_one(
                            ch.bytes[i],
                            ch.marks[i],
                            &mut metas[i],
                            &mut verdicts[i],
                            t,
                            c,
                        ) {
                            alive &= !(1u64 << i);
                        }
                    }
                }
                Stage::Count => {
                    let bytes: usize = if alive == all {
                        ch.bytes[..k].iter().map(|b| b.len()).sum()
                    } else {
                        bits(alive).map(|i| ch.bytes[i].len()).sum()
                    };
                    t.stage_bytes[si] += bytes as u64;
                }
                Stage::Conntrack(ct) => {
                    ct.apply_chunk(
                        &ch.queues[..k],
                        &ch.bytes[..k],
                        &ch.times[..k],
                        &mut metas[..k],
                        alive,
                    );
                }
                Stage::Acl(_) => {
                    let Some(acl) = tables.get(si).and_then(Option::as_ref) else {
                        continue;
                    };
                    acted = true;
                    acl_pass(acl, ch, metas, verdicts, &mut alive, t, c);
                }
                // burstwise() admits no other stage.
                _ => {}
            }
        }
        // The frames not dropped: their last action (parse and count leave it Pass).
        if !acted {
            t.passed += u64::from(alive.count_ones());
            return;
        }
        for i in bits(alive) {
            match verdicts[i].action {
                Action::Pass => t.passed += 1,
                Action::Mirror => t.mirrored += 1,
                Action::ToHost => t.to_host += 1,
                Action::Drop => {}
            }
        }
    }
}

/// Test support: runs `burst` both ways (the stage list's rule counters sized `hits`), each
/// loop writing into its own copy of `start` (records left from an earlier burst must not show
/// through); returns the burst-wise loop's metadata, verdicts and counters after checking them
/// equal to the frame-by-frame loop's.
#[cfg(test)]
pub(super) fn run_both(
    p: &Pipeline,
    burst: &[(crate::burst::FrameDesc, Vec<u8>)],
    hits: usize,
    start: (Vec<PacketMeta>, Vec<Verdict>),
) -> (Vec<PacketMeta>, Vec<Verdict>, QueueCounters) {
    let n = p.stages.len();
    let (c1, c2) = (QueueCounters::new(n, hits), QueueCounters::new(n, hits));
    let tables: [Option<Arc<AclStage>>; MAX_STAGES] =
        std::array::from_fn(|i| match p.stages.get(i) {
            Some(Stage::Acl(a)) => Some(a.current()),
            _ => None,
        });
    let routes = Default::default();
    let items = || burst.iter().map(|(d, f)| Item::Ro(*d, f.as_slice()));
    let (mut m1, mut v1) = start.clone();
    let (mut m2, mut v2) = start;
    let mut t = Tally::default();
    p.run_burstwise(items(), &mut m1, &mut v1, &tables, &mut t, &c1);
    p.flush_tally(&t, &c1);
    let mut t = Tally::default();
    p.run_framewise(
        items(),
        &mut m2,
        &mut v2,
        (&tables, &routes),
        false,
        &mut t,
        &c2,
    );
    p.flush_tally(&t, &c2);
    assert_eq!(m1, m2);
    for (i, (a, b)) in v1.iter().zip(&v2).enumerate() {
        assert_eq!(a, b, "frame {i}");
    }
    assert_eq!(v1.len(), v2.len());
    assert_eq!(c1.stage_snapshot(), c2.stage_snapshot());
    (m1, v1, c1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::burst::FrameDesc;
    use crate::stage::config::{AclStageConfig, DefaultAction, StageConfig};

    /// The multi-protocol capture, 400 generated IMIX frames and truncated copies (parse
    /// errors), over three ports, with NIC marks on some.
    fn frames() -> Vec<(FrameDesc, Vec<u8>)> {
        crate::testdata::mixed_frames(400)
            .into_iter()
            .enumerate()
            .map(|(i, (f, _))| {
                let d = FrameDesc {
                    port: (i % 3) as u16,
                    len: f.len() as u32,
                    wire_len: f.len() as u32,
                    mark: if i % 5 == 1 { i as u32 } else { 0 },
                    ..FrameDesc::default()
                };
                (d, f)
            })
            .collect()
    }

    /// Burst-wise and frame-by-frame give the same metadata, verdicts and counters, for stage
    /// lists of every shape the burst-wise loop takes (parse not first, no parse, acl drops,
    /// mirror and to-host, two acl stages), over bursts of several chunks, one frame and none.
    #[test]
    fn burstwise_equals_framewise() {
        let dir = std::env::temp_dir().join(format!("pktwarp-burstwise-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rules = dir.join("rules.yaml");
        std::fs::write(
            &rules,
            "rules:\n\
             \x20 - { name: tcp, proto: tcp, action: mirror }\n\
             \x20 - { name: udp53, proto: udp, dst_port: 53, action: to-host }\n\
             \x20 - { name: icmp, proto: icmp, action: drop }\n\
             \x20 - { name: v6, src: \"::/0\", action: {mark: 7} }\n",
        )
        .unwrap();
        let acl = |default| {
            StageConfig::Acl(AclStageConfig {
                rules: rules.clone(),
                format: None,
                default,
            })
        };
        let lists = vec![
            vec![StageConfig::Parse, StageConfig::Count],
            vec![
                StageConfig::Parse,
                acl(DefaultAction::Pass),
                StageConfig::Count,
            ],
            vec![
                StageConfig::Count,
                StageConfig::Parse,
                acl(DefaultAction::Drop),
            ],
            vec![StageConfig::Count, StageConfig::Parse, StageConfig::Count],
            vec![
                StageConfig::Parse,
                acl(DefaultAction::Pass),
                StageConfig::Count,
                acl(DefaultAction::Drop),
                StageConfig::Count,
            ],
        ];
        let all = frames();
        assert!(all.len() > 3 * CHUNK);
        for stages in &lists {
            let p = crate::stage::build(stages, |p| p.to_path_buf()).unwrap();
            assert!(p.burstwise() && !p.rewrites());
            for burst in [
                &all[..],
                &all[..1],
                &all[..0],
                &all[..CHUNK],
                &all[..CHUNK + 1],
            ] {
                // Stale records from an earlier, longer burst must not show through.
                let stale = (
                    vec![crate::stage::parse::parse_frame(&all[5].1); 300],
                    vec![Verdict::drop(DropReason::AclDrop); 300],
                );
                let (_, _, c1) = run_both(&p, burst, p.rule_count(), stale);
                if burst.len() == all.len() {
                    // The comparison covered every outcome.
                    assert!(c1.passed.get() > 0);
                    if matches!(stages[0], StageConfig::Parse) {
                        assert!(c1.drop_count(DropReason::ParseError) > 0);
                    }
                    if stages.len() == 3 && matches!(stages[1], StageConfig::Acl(_)) {
                        assert!(c1.mirrored.get() > 0 && c1.to_host.get() > 0);
                        assert!(c1.drop_count(DropReason::AclDrop) > 0);
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// conntrack burst-wise (its table taken once a chunk) gives each frame the state and
    /// verdict it gets frame by frame, and leaves the same counters, on connection traffic
    /// with aging and evictions (a 64-entry table), some frames dropped by parse before it.
    #[test]
    fn conntrack_burstwise_equals_framewise() {
        use pktwarp_flow::testgen::{generate, GenConfig};
        let frames: Vec<(FrameDesc, Vec<u8>)> = generate(&GenConfig {
            frames: 3000,
            ..GenConfig::default()
        })
        .into_iter()
        .enumerate()
        .map(|(i, g)| {
            // Every 37th frame cut inside its IP header: parse drops it.
            let b = if i % 37 == 5 {
                g.bytes[..20].to_vec()
            } else {
                g.bytes
            };
            let d = FrameDesc {
                len: b.len() as u32,
                wire_len: b.len() as u32,
                timestamp_ns: g.time_ns,
                ..FrameDesc::default()
            };
            (d, b)
        })
        .collect();
        let ct: pktwarp_flow::FlowConfig = serde_saphyr::from_str("entries: 64\n").expect("config");
        let stages = [
            StageConfig::Parse,
            StageConfig::Conntrack(ct),
            StageConfig::Count,
        ];
        let p1 = crate::stage::build(&stages, |p| p.to_path_buf()).unwrap();
        let p2 = crate::stage::build(&stages, |p| p.to_path_buf()).unwrap();
        assert!(p1.burstwise());
        let (c1, c2) = (QueueCounters::new(3, 0), QueueCounters::new(3, 0));
        let tables: [Option<Arc<AclStage>>; MAX_STAGES] = Default::default();
        let routes = Default::default();
        let (mut m1, mut v1, mut m2, mut v2) = (vec![], vec![], vec![], vec![]);
        let mut states = [0u64; 8];
        for burst in frames.chunks(100) {
            let items = || burst.iter().map(|(d, f)| Item::Ro(*d, f.as_slice()));
            let mut t = Tally::default();
            p1.run_burstwise(items(), &mut m1, &mut v1, &tables, &mut t, &c1);
            p1.flush_tally(&t, &c1);
            let mut t = Tally::default();
            p2.run_framewise(
                items(),
                &mut m2,
                &mut v2,
                (&tables, &routes),
                false,
                &mut t,
                &c2,
            );
            p2.flush_tally(&t, &c2);
            assert_eq!(m1, m2);
            assert_eq!(v1, v2);
            for m in &m1 {
                states[m.ct_state as usize & 7] += 1;
            }
        }
        assert_eq!(c1.stage_snapshot(), c2.stage_snapshot());
        let counters = |p: &Pipeline| match &p.stages[1] {
            Stage::Conntrack(c) => c.flow_counters(),
            _ => unreachable!("stage 1 is conntrack"),
        };
        let (k1, k2) = (counters(&p1), counters(&p2));
        assert_eq!(k1, k2);
        assert!(
            k1.expired > 0 && k1.early_evicted > 0 && k1.created > 100,
            "{k1:?}"
        );
        assert!(c1.drop_count(DropReason::ParseError) > 0);
        // New, established and closing frames all met the comparison.
        assert!(
            states[1] > 0 && states[2] > 0 && states[5] > 0,
            "{states:?}"
        );
    }
}
