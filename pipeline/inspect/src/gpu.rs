//! The rule set as the GPU's `inspect` stage reads it (gpu-kernels/cuda/inspect_stage.cuh): one
//! parameter block holding the evaluator's image ([`crate::eval::program::Program::image`]),
//! the payload's prefilter image ([`crate::matcher::Image`]), each pattern's rules and the
//! rules without a pattern; the hit counters live in a device buffer whose address the
//! executor writes at [`HITS_AT`] (two banks, the block's `bank` picking one: see
//! [`HIT_BYTES`]), and the alert ring's at [`ALERTS_AT`].
//!
//! What the GPU stage runs: rules of the L4 payload and of the HTTP buffers (the stage parses
//! the head as [`crate::http::parse`] does: gpu-kernels/cuda/inspect_http.cuh), each buffer's
//! prefilter in the block ([`HTTP_AT`]), and the rules that keep state (flowbits, `noalert`,
//! threshold, detection_filter) over per-queue tables in device memory
//! (gpu-kernels/cuda/inspect_state.cuh: the block's state section, [`Stateful::gpu_section`];
//! the tables' bytes, [`state_queue_bytes`]). A set of more than [`MAX_RULES`] rules (the
//! stage's per-frame candidate bitmap) is refused, as is one with more flowbit names than a
//! GPU flow entry holds.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::alert::{Alert, AlertAction};
use crate::engine::RuleSet;
use crate::eval::state::{StateConfig, Stateful};
use crate::eval::Frame;
use crate::matcher::Image;
use crate::rules::Buffer;

/// Most rules the GPU stage takes (`PW_INSP_GPU_MAX_RULES`).
pub const MAX_RULES: usize = 16384;
/// Where the hit counters' device address goes in the block (`pw_insp_params.hits`).
pub const HITS_AT: usize = 0;
/// Bytes of the block's header (`pw_insp_params`).
pub const HEADER_BYTES: usize = 112;
/// The hit counters: two banks of [`MAX_RULES`] u64, the block's `bank` (at [`BANK_AT`]) saying
/// which one its rule set counts in, so a reload's set and the bursts of the set before it
/// still running count apart; then per bank the state counters ([`STATE_COUNTERS_AT`]).
pub const HIT_BYTES: usize = 2 * MAX_RULES * 8 + 2 * 32;
/// Where bank `b`'s state counters start in the hit buffer (`STATE_COUNTERS_AT + 32 * b`):
/// u64 flows_full, trackers_full, suppressed.
pub const STATE_COUNTERS_AT: usize = 2 * MAX_RULES * 8;
/// Where the per-queue state tables' device address (u64) and queue count (u32) go in the
/// block (`pw_insp_params.state`, `.queues`: the executor's per-queue stage state).
pub const STATE_AT: usize = 64;
/// A queue's state: a 64-byte header, then the flow entries (`pw_insp_fent`), then the
/// tracker entries (`pw_insp_tent`), each table twice the entries it may hold (rounded up to a
/// power of two).
pub const STATE_HEADER_BYTES: usize = 64;
pub const FLOW_ENTRY_BYTES: usize = 56 + 8 * crate::eval::state::GPU_FLOWBIT_WORDS;
pub const TRACKER_BYTES: usize = 64;
pub const BANK_AT: usize = 48;
/// Where the offset of the HTTP buffers' prefilter table goes (`pw_insp_params.http_off`): u32
/// `n`, then `n` times [buffer code, image offset, rule lists' offset]; 0 when no rule has a
/// pattern of an HTTP buffer.
pub const HTTP_AT: usize = 52;
/// Where the alert ring's entry count (a power of two) and device address go in the block
/// (`pw_insp_params.alert_cap`, `.alerts`).
pub const ALERT_CAP_AT: usize = 36;
pub const ALERTS_AT: usize = 40;
/// The alert ring: a header (the u64 count of entries taken), then the entries
/// (`pw_insp_alert`), entry `i` of the log at `i % cap`.
pub const RING_HEADER: usize = 64;
pub const ALERT_BYTES: usize = 64;
/// Entries of the ring the executor gives the stage when it has an alert log.
pub const ALERT_RING: usize = 1 << 16;

/// Where an alerted frame that is not dropped goes (`pw_insp_params.alert_to`).
pub const ALERT_NONE: u32 = 0;
pub const ALERT_HOST: u32 = 1;
pub const ALERT_MIRROR: u32 = 2;

/// Why the GPU stage cannot run a rule set: the first rule it cannot take, or the set's size.
pub fn refusal(set: &RuleSet) -> Option<String> {
    if set.len() > MAX_RULES {
        return Some(format!(
            "{} rules loaded; the GPU stage takes at most {MAX_RULES}",
            set.len()
        ));
    }
    if let Err(why) = set.new_state().gpu_section() {
        return Some(why);
    }
    (0..set.len() as u32).find_map(|i| {
        let why = rule_refusal(set, i)?;
        let sid = set.program().rules[i as usize].sid;
        let (file, line) = set.origin(i).unwrap_or(("?", 0));
        Some(format!(
            "rule sid {sid} ({file}:{line}): {why} (`gpu_rules_only: true` skips such rules \
             on both executors)"
        ))
    })
}

/// Why the GPU stage cannot take rule `i` of `set`; `None` when it can (every rule the
/// evaluator compiles, state included; a set too large is refused whole, [`refusal`]).
pub fn rule_refusal(set: &RuleSet, i: u32) -> Option<&'static str> {
    let _ = (set, i);
    None
}

/// The slots of a table that holds at most `max` entries: twice as many, a power of two.
fn table_slots(max: usize) -> usize {
    (2 * max.max(1)).next_power_of_two()
}

/// Bytes of one queue's state tables for `cfg`.
pub fn state_queue_bytes(cfg: &StateConfig) -> usize {
    STATE_HEADER_BYTES
        + table_slots(cfg.max_flows) * FLOW_ENTRY_BYTES
        + table_slots(cfg.max_trackers) * TRACKER_BYTES
}

/// The state header fields of the block (from [`STATE_AT`] on, but for the executor's two):
/// the tables' geometry for `st`'s config, the section's offset and the generation.
fn put_state_header(b: &mut [u8], st: &Stateful, state_off: u32, generation: u64) {
    let cfg = st.config();
    let put32 = |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    put32(b, 56, state_off);
    // Never 0: a queue's zeroed tables (gen 0) are a fresh start.
    put32(b, 60, (generation % u64::from(u32::MAX)) as u32 + 1);
    put32(b, 76, table_slots(cfg.max_flows) as u32);
    b[80..88].copy_from_slice(&(state_queue_bytes(&cfg) as u64).to_le_bytes());
    put32(b, 88, cfg.max_flows as u32);
    put32(b, 92, cfg.max_trackers as u32);
    put32(b, 96, table_slots(cfg.max_trackers) as u32);
    b[104..112].copy_from_slice(&cfg.flow_idle_ns.to_le_bytes());
}

/// The stage's parameter block for `set` (the hit counters' and alert ring's addresses left 0;
/// `alert_cap`: the ring's entries, a power of two, or 0 for none), or why the GPU cannot run
/// it ([`refusal`]).
pub fn block(
    set: &RuleSet,
    alert_to: u32,
    alert_cap: u32,
    generation: u64,
) -> Result<Vec<u8>, String> {
    let bank = (generation & 1) as u32;
    if alert_cap != 0 && !alert_cap.is_power_of_two() {
        return Err(format!(
            "an alert ring of {alert_cap} entries (a power of two)"
        ));
    }
    if let Some(why) = refusal(set) {
        return Err(why);
    }
    let prog: Vec<u8> = set
        .program()
        .image()
        .map_err(|e| e.0)?
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let mut b = vec![0u8; HEADER_BYTES];
    let prog_off = append(&mut b, &prog);
    let (mut image_off, mut rules_of_off) = (0, 0);
    let mut http_table: Vec<u32> = vec![0];
    let u32_of = |n: usize| u32::try_from(n).map_err(|_| "the GPU rule block passes 4 GiB");
    for (buffer, image, rules_of) in set.prefilters() {
        let (img, lists) = append_prefilter(&mut b, image, rules_of);
        if buffer == Buffer::Payload {
            (image_off, rules_of_off) = (img, lists);
        } else {
            http_table.extend([buffer as u32, u32_of(img)?, u32_of(lists)?]);
            http_table[0] += 1;
        }
    }
    let http_off = if http_table[0] == 0 {
        0
    } else {
        let bytes: Vec<u8> = http_table.iter().flat_map(|w| w.to_le_bytes()).collect();
        append(&mut b, &bytes)
    };
    let always: Vec<u8> = set
        .unfiltered()
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let always_off = append(&mut b, &always);
    let state = set.new_state();
    let section = state.gpu_section()?;
    let state_off = if section[1..].iter().any(|&w| w != 0) {
        let bytes: Vec<u8> = section.iter().flat_map(|w| w.to_le_bytes()).collect();
        u32_of(append(&mut b, &bytes))?
    } else {
        0
    };
    put_state_header(&mut b, &state, state_off, generation);
    let head: [u32; 8] = [
        u32_of(set.len())?,
        alert_to,
        u32_of(prog_off)?,
        u32_of(image_off)?,
        u32_of(rules_of_off)?,
        u32_of(always_off)?,
        u32_of(set.unfiltered().len())?,
        alert_cap,
    ];
    for (k, w) in head.iter().enumerate() {
        b[8 + 4 * k..12 + 4 * k].copy_from_slice(&w.to_le_bytes());
    }
    b[BANK_AT..BANK_AT + 4].copy_from_slice(&(bank & 1).to_le_bytes());
    b[HTTP_AT..HTTP_AT + 4].copy_from_slice(&u32_of(http_off)?.to_le_bytes());
    u32_of(b.len())?;
    Ok(b)
}

/// The ring's bytes for `cap` entries.
pub fn ring_bytes(cap: usize) -> usize {
    RING_HEADER + cap * ALERT_BYTES
}

/// The alert of entry `entry` (its [`ALERT_BYTES`]) read as log index `index`: `None` when it
/// does not hold that index yet (being written, or an older lap's). The receive time 0 (a
/// port without times) is `now_ns`, as the CPU stage takes the host clock then.
pub fn alert_of(set: &RuleSet, entry: &[u8], index: u64, now_ns: u64) -> Option<Alert> {
    let e = entry.get(..ALERT_BYTES)?;
    let u64_at = |o: usize| u64::from_le_bytes(e[o..o + 8].try_into().unwrap_or_default());
    let u16_at = |o: usize| u16::from_le_bytes([e[o], e[o + 1]]);
    if u64_at(0) != index.wrapping_add(1) {
        return None;
    }
    let v6 = e[59] & 1 != 0;
    let addr = |o: usize| -> IpAddr {
        let k = (u128::from(u64_at(o)) << 64) | u128::from(u64_at(o + 8));
        if v6 {
            IpAddr::V6(Ipv6Addr::from(k))
        } else {
            IpAddr::V4(Ipv4Addr::from(k as u32))
        }
    };
    let rule = u32::from_le_bytes(e[48..52].try_into().unwrap_or_default());
    let f = Frame {
        ip_proto: e[56],
        src: addr(16),
        dst: addr(32),
        src_port: u16_at(52),
        dst_port: u16_at(54),
        tcp_flags: 0,
        icmp_type: e[57],
        icmp_code: e[58],
        ct_state: 0,
        ct_dir: 0,
        payload: &[],
        http: None,
    };
    let vlan = [60, 62].map(|o| u16_at(o).checked_sub(1));
    let action = set
        .action(rule)
        .map_or(AlertAction::Allowed, |a| AlertAction::of_rule(a, true));
    let ts = match u64_at(8) {
        0 => now_ns,
        t => t,
    };
    Some(Alert::of_frame(ts, &f, vlan, rule, action, None))
}

/// The hit bank of a ring entry: which rule set (by generation parity) its rule index is of.
pub fn alert_bank(entry: &[u8]) -> usize {
    entry.get(59).map_or(0, |b| usize::from((b >> 1) & 1))
}

/// Appends one buffer's prefilter: its image words, then the starts of each pattern's rule
/// list and the lists; returns where each went.
fn append_prefilter(b: &mut Vec<u8>, image: &Image, rules_of: &[Vec<u32>]) -> (usize, usize) {
    let words: Vec<u8> = image.words().iter().flat_map(|w| w.to_le_bytes()).collect();
    let image_off = append(b, &words);
    let mut starts = Vec::with_capacity(rules_of.len() + 1);
    let mut rules = Vec::new();
    for r in rules_of {
        starts.push(rules.len() as u32);
        rules.extend_from_slice(r);
    }
    starts.push(rules.len() as u32);
    let bytes: Vec<u8> = starts
        .iter()
        .chain(&rules)
        .flat_map(|w| w.to_le_bytes())
        .collect();
    (image_off, append(b, &bytes))
}

/// Appends `bytes` at the next 8-byte boundary; returns where.
fn append(b: &mut Vec<u8>, bytes: &[u8]) -> usize {
    while b.len() % 8 != 0 {
        b.push(0);
    }
    let at = b.len();
    b.extend_from_slice(bytes);
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::Classifications;
    use crate::rules::{load_str, LoadOptions};

    fn set(text: &str, flow_table: bool) -> RuleSet {
        let opts = LoadOptions {
            strict: true,
            flow_table,
            ..LoadOptions::default()
        };
        let rep = load_str(text, "t.rules", &opts).unwrap();
        RuleSet::compile(rep, true, &Classifications::standard()).unwrap()
    }

    #[test]
    fn payload_rules_make_a_block_with_their_sections() {
        let s = set(
            "alert tcp any any -> any any (msg:\"a\"; content:\"abc\"; sid:1;)\n\
             drop udp any any -> any 53 (msg:\"b\"; dsize:>10; sid:2;)\n",
            false,
        );
        let b = block(&s, ALERT_HOST, 8, 1).unwrap();
        let w = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        assert_eq!((w(8), w(12)), (2, ALERT_HOST));
        let (prog, image, rules_of, always) = (w(16), w(20), w(24), w(28));
        assert!(prog as usize >= HEADER_BYTES && prog % 8 == 0);
        assert_eq!(w(prog as usize), 0x4549_5750, "the eval image's magic");
        assert_eq!(
            w(image as usize),
            0x4D49_5750,
            "the prefilter image's magic"
        );
        // One pattern: its list [0, 1) holds rule 0; rule 1 has no pattern.
        let r = rules_of as usize;
        assert_eq!((w(r), w(r + 4), w(r + 8)), (0, 1, 0));
        assert_eq!((w(32), w(always as usize), w(36), w(48)), (1, 1, 8, 1));
        assert!(block(&s, ALERT_HOST, 6, 0).is_err(), "a ring of 6");
    }

    #[test]
    fn http_rules_get_their_buffers_prefilters_and_state_rules_are_refused() {
        let s = set(
            "alert tcp any any -> any any (msg:\"a\"; content:\"abc\"; sid:1;)\n\
             alert http any any -> any any (msg:\"b\"; content:\"x\"; http_uri; sid:7;)\n\
             alert http any any -> any any (msg:\"c\"; content:\"Agent\"; http_user_agent; \
             content:\"y\"; http_uri; sid:8;)\n\
             alert http any any -> any any (msg:\"d\"; urilen:>3; sid:9;)\n",
            false,
        );
        let b = block(&s, ALERT_NONE, 0, 0).unwrap();
        let w = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let t = w(HTTP_AT) as usize;
        assert!(t >= HEADER_BYTES && t % 8 == 0, "{t}");
        // Two HTTP buffers with patterns, in buffer order: http_uri (1), then the user agent (6).
        assert_eq!(w(t), 2);
        assert_eq!((w(t + 4), w(t + 16)), (1, 6));
        for k in 0..2 {
            assert_eq!(w(w(t + 8 + 12 * k) as usize), 0x4D49_5750, "image {k}");
        }
        // The uri prefilter has one pattern ("x") standing for rule 1.
        let r = w(t + 12) as usize;
        assert_eq!((w(r), w(r + 4), w(r + 8)), (0, 1, 1));
        // A payload-only set has no table.
        let p = set(
            "alert tcp any any -> any any (msg:\"a\"; content:\"abc\"; sid:1;)\n",
            false,
        );
        assert_eq!(w2(&block(&p, ALERT_NONE, 0, 0).unwrap(), HTTP_AT), 0);
        assert_eq!(w2(&block(&p, ALERT_NONE, 0, 0).unwrap(), 56), 0, "no state");
    }

    /// Rules with state: the block has their section and the tables' geometry; a set with more
    /// flowbit names than a GPU flow entry holds is refused.
    #[test]
    fn state_rules_get_their_section_and_too_many_names_are_refused() {
        let s = set(
            "alert tcp any any -> any any (msg:\"a\"; content:\"abc\"; sid:1;)\n\
             alert tcp any any -> any any (msg:\"a\"; content:\"abc\"; flowbits:set,x; sid:3;)\n",
            true,
        );
        assert_eq!(refusal(&s), None);
        let b = block(&s, ALERT_NONE, 0, 6).unwrap();
        let w = |at: usize| w2(&b, at);
        let sec = w(56) as usize;
        assert!(sec >= HEADER_BYTES && sec % 8 == 0, "{sec}");
        // Two rules, the second's record after the offsets: class 0, one flowbits keyword.
        assert_eq!((w(sec), w(sec + 4), w(sec + 8)), (2, 0, 3));
        assert_eq!((w(sec + 12), w(sec + 16)), (1 << 16, 0));
        assert_eq!(
            (w(60), w(76), w(88), w(92), w(96)),
            (7, 1 << 17, 65536, 65536, 1 << 17)
        );
        assert_eq!(w(BANK_AT), 0, "generation 6's bank");
        let qb = u64::from_le_bytes(b[80..88].try_into().unwrap()) as usize;
        assert_eq!(qb, state_queue_bytes(&StateConfig::default()));
        assert_eq!(qb, 64 + (1 << 17) * (FLOW_ENTRY_BYTES + TRACKER_BYTES));
        let mut many = String::new();
        for i in 0..513 {
            many.push_str(&format!(
                "alert tcp any any -> any any (msg:\"m\"; flowbits:set,n{i}; sid:{};)\n",
                i + 1
            ));
        }
        let why = refusal(&set(&many, true)).unwrap();
        assert!(why.contains("more than 512 flowbit names"), "{why}");
    }

    fn w2(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }
}
