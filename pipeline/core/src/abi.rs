//! Rust mirrors of the `@@gpu-queues@@` section of `gpu-kernels/pktwarp_abi.h`; the tests pin
//! every size and offset the kernels rely on.

use crate::burst::FrameDesc;

pub const MAX_BURST: u32 = 1024;
pub const SLOT_ALIGN: usize = 256;
pub const CTRL_SIZE: usize = 256;

pub const ACTION_PASS: u8 = 0;
pub const ACTION_DROP: u8 = 1;
pub const ACTION_MIRROR: u8 = 2;
pub const ACTION_TO_HOST: u8 = 3;
pub const ACTIONS: usize = 4;

/// Drop reasons: the codes of `crate::verdict::DropReason` (pinned by a test).
pub const DROP_RING_FULL: u8 = 0;
pub const DROP_PARSE_ERROR: u8 = 1;
pub const DROP_ACL: u8 = 2;
pub const DROP_STEERING: u8 = 3;
pub const DROP_TX_ERROR: u8 = 4;
pub const DROP_TOO_LONG: u8 = 5;
pub const DROP_STAGE: u8 = 6;
pub const DROP_TTL_EXPIRED: u8 = 7;
pub const DROP_NO_ROUTE: u8 = 8;
pub const DROP_KERNEL_STALL: u8 = 9;
pub const DROP_FRONTHAUL: u8 = 10;
pub const DROP_NONE: u8 = 0xFF;
/// Slots of `pw_queue_counters.drop_reason` (codes 0..=10; append-only).
pub const DROP_REASONS: usize = 11;
/// `PW_OUT_DEFAULT`: `pw_verdict.out_port` of a frame sent to the default
/// output port.
pub const OUT_DEFAULT: u16 = 0xFFFF;

/// Names of the drop reasons, indexed by `DROP_*` (metrics labels).
pub const DROP_REASON_NAMES: [&str; DROP_REASONS] = [
    "ring_full",
    "parse_error",
    "acl_drop",
    "steering_drop",
    "tx_error",
    "too_long",
    "stage_drop",
    "ttl_expired",
    "no_route",
    "kernel_stall",
    "fronthaul_reject",
];
/// Names of the actions, indexed by `ACTION_*`.
pub const ACTION_NAMES: [&str; ACTIONS] = ["pass", "drop", "mirror", "to_host"];

pub const QSTATE_IDLE: u32 = 0;
pub const QSTATE_RUNNING: u32 = 1;
pub const QSTATE_EXIT_FLAG: u32 = 2;
pub const QSTATE_EXIT_TIMEOUT: u32 = 3;
pub const QSTATE_BAD_SLOT: u32 = 4;

pub const PIPE_PARSE: u32 = 1;
pub const PIPE_ACL: u32 = 2;
pub const PIPE_COUNT: u32 = 4;
pub const PIPE_META_OUT: u32 = 8;
pub const PIPE_DROP_MALFORMED: u32 = 16;
/// `PW_PIPE_SLOT_SEQ`: the persistent kernel polls the slot header's first 16 bytes (mapped rings).
pub const PIPE_SLOT_SEQ: u32 = 32;
/// `PW_PIPE_TAGGED`: the slot's image and the verdicts travel as tagged words (see the header).
pub const PIPE_TAGGED: u32 = 64;
/// `PW_TAG_PAYLOAD`: image bytes per 16-byte tagged granule ({p0, p1, p2, tag}).
pub const TAG_PAYLOAD: usize = 12;
/// `PW_STAGE_BYTES`: the most bytes of a burst the kernel stages in shared memory.
pub const STAGE_BYTES: usize = 24576;
/// `PW_SPLIT_MAX`: the most frames whose keys a block keeps between its parse and lookup passes.
pub const SPLIT_MAX: u32 = 64;
/// `sizeof(pw_verdict_tagged)`: a verdict of a tagged queue (three words, each beside its tag).
pub const VERDICT_TAGGED_SIZE: usize = 24;

/// `pw_desc`: one frame in a slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    pub offset: u32,
    pub len: u32,
    pub wire_len: u32,
    pub port: u16,
    pub queue: u16,
    pub rss_hash: u32,
    pub reserved: u32,
    pub timestamp_ns: u64,
}

/// `pw_desc8`: the compact descriptor of a burst whose frames all have wire length == captured
/// length <= 65535 and port <= 255 (see [`Desc8::fits`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desc8 {
    pub offset: u32,
    pub len: u16,
    pub port: u8,
    pub reserved: u8,
}

/// `PW_DESC_FULL`: the slot's descriptors are `Desc`.
pub const DESC_FULL: u8 = 0;
/// `PW_DESC_COMPACT`: the slot's descriptors are `Desc8`.
pub const DESC_COMPACT: u8 = 1;
/// `PW_SLOT_REFS` (`SlotHdr::flags`): the burst's frames are where its data area's one `u64`
/// says (loaded frames in pinned host memory), each descriptor's offset from there.
pub const SLOT_REFS: u8 = 1;

impl Desc8 {
    /// Can `d` travel as a compact descriptor without losing what the GPU stages read?
    pub fn fits(d: &FrameDesc) -> bool {
        d.wire_len == d.len
            && d.len <= u32::from(u16::MAX)
            && d.port <= u16::from(u8::MAX)
            && d.mark == 0
    }

    /// Bytes of one descriptor in a slot of `format`.
    pub fn size_of_format(format: u8) -> usize {
        if format == DESC_COMPACT {
            std::mem::size_of::<Desc8>()
        } else {
            std::mem::size_of::<Desc>()
        }
    }

    /// The descriptor format the executor uses for a burst with these frames.
    pub fn format_for(descs: &[FrameDesc]) -> u8 {
        if descs.iter().all(Desc8::fits) {
            DESC_COMPACT
        } else {
            DESC_FULL
        }
    }
}

impl From<&FrameDesc> for Desc8 {
    /// Truncating: only for descriptors that [`Desc8::fits`].
    fn from(d: &FrameDesc) -> Desc8 {
        Desc8 {
            offset: d.offset,
            len: d.len as u16,
            port: d.port as u8,
            reserved: 0,
        }
    }
}

impl From<&FrameDesc> for Desc {
    fn from(d: &FrameDesc) -> Desc {
        Desc {
            offset: d.offset,
            len: d.len,
            wire_len: d.wire_len,
            port: d.port,
            queue: d.queue,
            rss_hash: d.rss_hash,
            reserved: d.mark,
            timestamp_ns: d.timestamp_ns,
        }
    }
}

/// `pw_slot_hdr`: a burst's frame count and the ACL table it is classified with (the host
/// writes the table at submit: table hot swap).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotHdr {
    pub n_frames: u16,
    /// `DESC_FULL` (`Desc`) or `DESC_COMPACT` (`Desc8`).
    pub desc_format: u8,
    /// `SLOT_REFS` or 0.
    pub flags: u8,
    pub data_bytes: u32,
    pub seq: u32,
    /// Rule-set generation of `acl_tables` (low 32 bits).
    pub generation: u32,
    /// Device address of the ACL image for this burst; 0 = the queue descriptor's.
    pub acl_tables: u64,
    /// Device address of that image's per-rule hit counters, or 0.
    pub rule_hits: u64,
    pub n_rules: u32,
    pub default_action: u8,
    pub reserved1: u8,
    pub reserved2: u16,
    /// Device address of the burst's stage parameter table (`u64[MAX_STAGES]`, composed
    /// pipelines), or 0: the queue descriptor's.
    pub stage_params: u64,
}

/// `pw_verdict_out`: what happens to one frame, and the rule that decided it, as the kernel
/// writes it back for every frame (`pw_queue_desc.verdicts`): the stage ABI's `pw_verdict`
/// without its send time, which the TX ring carries (`PW_TX_TIMES`, after the descriptors).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Verdict {
    pub action: u8,
    pub drop_reason: u8,
    /// The output port: an index of the config's ports with a transmit side, `OUT_DEFAULT` = the
    /// default output (`crate::verdict::Verdict::out_port`).
    pub out_port: u16,
    /// Matched ACL rule, `flow_rules::abi::ACL_NO_MATCH` when none.
    pub rule: u32,
    /// Mark set by the matched rule, 0 when none.
    pub mark: u32,
}

/// `pw_queue_counters`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueCounters {
    pub bursts: u64,
    pub packets: u64,
    pub bytes: u64,
    pub parse_errors: u64,
    pub acl_matched: u64,
    pub acl_no_match: u64,
    pub action: [u64; ACTIONS],
    pub drop_reason: [u64; DROP_REASONS],
}

impl QueueCounters {
    /// The `count` stage for one frame (same rules as `pw_count_frame` in count.cuh).
    pub fn add_frame(&mut self, parse_ok: bool, acl_ran: bool, v: &Verdict, wire_len: u32) {
        self.packets += 1;
        self.bytes += wire_len as u64;
        if !parse_ok {
            self.parse_errors += 1;
        }
        if acl_ran {
            if v.rule != flow_rules::abi::ACL_NO_MATCH {
                self.acl_matched += 1;
            } else {
                self.acl_no_match += 1;
            }
        }
        if let Some(a) = self.action.get_mut(v.action as usize) {
            *a += 1;
        }
        if v.action == ACTION_DROP {
            if let Some(r) = self.drop_reason.get_mut(v.drop_reason as usize) {
                *r += 1;
            }
        }
    }

    pub fn merge(&mut self, o: &QueueCounters) {
        self.bursts += o.bursts;
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.parse_errors += o.parse_errors;
        self.acl_matched += o.acl_matched;
        self.acl_no_match += o.acl_no_match;
        for i in 0..ACTIONS {
            self.action[i] += o.action[i];
        }
        for i in 0..DROP_REASONS {
            self.drop_reason[i] += o.drop_reason[i];
        }
    }
}

/// The verdict rule (same as `pw_verdict_of` in count.cuh and `pipeline::stage::run`).
pub fn verdict_of(parse_ok: bool, pipeline: u32, rule: u32, action: u8, mark: u32) -> Verdict {
    if !parse_ok && pipeline & PIPE_DROP_MALFORMED != 0 {
        return Verdict {
            action: ACTION_DROP,
            drop_reason: DROP_PARSE_ERROR,
            out_port: OUT_DEFAULT,
            rule: flow_rules::abi::ACL_NO_MATCH,
            mark: 0,
        };
    }
    Verdict {
        action,
        drop_reason: if action == ACTION_DROP {
            DROP_ACL
        } else {
            DROP_NONE
        },
        out_port: OUT_DEFAULT,
        rule,
        mark,
    }
}

/// `pw_queue_ctrl`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct QueueCtrl {
    pub producer: u32,
    pub exit_flag: u32,
    /// The burst the persistent kernel starts at (0; after a restart, the one after the lost
    /// burst).
    pub first_seq: u32,
    /// Test only: seq + 1 of a burst the persistent kernel takes and never finishes (0: none).
    pub stall_at: u32,
    /// The queue's persistent CTAs that have returned.
    pub exited: u32,
    pub pad0: [u32; 27],
    pub consumer: u32,
    pub heartbeat: u32,
    pub status: u32,
    pub pad1: u32,
    pub polls: u64,
    pub pad2: [u32; 26],
}

/// `pw_queue_desc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct QueueDesc {
    pub ring: u64,
    pub producer: u64,
    pub ctrl: u64,
    pub verdicts: u64,
    pub metas: u64,
    pub counters: u64,
    pub rule_hits: u64,
    pub acl_tables: u64,
    pub idle_timeout_ns: u64,
    pub slots: u32,
    pub burst_max: u32,
    pub slot_bytes: u32,
    pub data_offset: u32,
    pub pipeline: u32,
    pub n_rules: u32,
    pub default_action: u8,
    pub port_id: u8,
    pub queue_id: u16,
    pub ctas: u32,
    pub done: u64,
    pub trace: u64,
    /// `StageCounters[MAX_STAGES]` of the queue (device), or 0 (fused template).
    pub stage_counters: u64,
    /// `u64[MAX_STAGES]` stage parameter-block addresses (device), or 0.
    pub stage_params: u64,
    /// `TxDesc[slots * burst_max]` (mapped): the TX ring, or 0.
    pub tx: u64,
    /// `u32[slots * parts]` (mapped): each burst part's [`tx_count`] word.
    pub tx_counts: u64,
    /// Bytes the host leaves after every frame of a slot (a rewriting pipeline's room).
    pub frame_room: u32,
    pub reserved3: u32,
}

/// `pw_tx_desc`: one frame to transmit, written by the kernel into the TX ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxDesc {
    /// The frame's first byte, from the slot's data area.
    pub offset: u32,
    /// Bytes to send (the frame's length after the stages).
    pub len: u32,
    /// The frame's index in its burst.
    pub frame: u16,
    /// `Verdict::out_port`.
    pub out_port: u16,
    /// `ACTION_PASS`, `ACTION_MIRROR` or `ACTION_TO_HOST`.
    pub action: u8,
    pub reserved0: u8,
    pub reserved1: u16,
}

/// A `tx_counts` word (`PW_TX_COUNT`): the part's first frame, where its descriptors start,
/// and how many it wrote.
pub fn tx_count(word: u32) -> (usize, usize) {
    ((word & 0xFFFF) as usize, (word >> 16) as usize)
}

/// Most stages of a pipeline (`PW_MAX_STAGES`).
pub const MAX_STAGES: usize = 16;
/// Words of a stage's counter block (`PW_STAGE_COUNTERS`).
pub const STAGE_COUNTERS: usize = 8;
/// Built-in stage counters (`PW_*_CTR_*`): index into `StageCounters::v`.
pub const PARSE_CTR_ERRORS: usize = 1;
pub const ACL_CTR_MATCHED: usize = 1;
pub const ACL_CTR_DEFAULT: usize = 2;
pub const COUNT_CTR_BYTES: usize = 1;

/// `pw_stage_counters`: one stage's counters (the stage ABI): v[0] frames that reached the
/// stage, v[1..] the stage's own.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StageCounters {
    pub v: [u64; STAGE_COUNTERS],
}

/// `pw_burst_trace`: where one burst's time went on the GPU (%globaltimer, ns).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BurstTrace {
    /// Burst sequence number + 1 (0: never written).
    pub seq: u64,
    pub seen: u64,
    pub staged: u64,
    pub ran: u64,
    pub merged: u64,
    pub fenced: u64,
    /// The small-burst path's parse pass done (0: the burst took another path).
    pub parsed: u64,
    pub reserved: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn compact_descriptors_only_when_nothing_is_lost() {
        let d = |len: u32, wire_len: u32, port: u16| FrameDesc {
            offset: 128,
            len,
            wire_len,
            port,
            ..Default::default()
        };
        assert!(Desc8::fits(&d(60, 60, 3)));
        assert!(
            !Desc8::fits(&d(60, 64, 3)),
            "truncated frame: wire_len differs"
        );
        assert!(!Desc8::fits(&d(70000, 70000, 0)), "length over 16 bits");
        assert!(!Desc8::fits(&d(60, 60, 256)), "port over 8 bits");
        let marked = FrameDesc {
            mark: 7,
            ..d(60, 60, 3)
        };
        assert!(
            !Desc8::fits(&marked),
            "a steering mark needs a full descriptor"
        );
        assert_eq!(Desc::from(&marked).reserved, 7, "pw_desc.mark");
        assert_eq!(
            Desc8::format_for(&[d(60, 60, 0), d(1518, 1518, 1)]),
            DESC_COMPACT
        );
        assert_eq!(
            Desc8::format_for(&[d(60, 60, 0), d(96, 1518, 1)]),
            DESC_FULL
        );
        let c = Desc8::from(&d(1518, 1518, 7));
        assert_eq!((c.offset, c.len, c.port), (128, 1518, 7));
        assert_eq!(Desc8::size_of_format(DESC_COMPACT), 8);
        assert_eq!(Desc8::size_of_format(DESC_FULL), 32);
    }

    #[test]
    fn layout_matches_abi_header() {
        assert_eq!(size_of::<Desc>(), 32);
        assert_eq!(offset_of!(Desc, port), 12);
        assert_eq!(offset_of!(Desc, rss_hash), 16);
        assert_eq!(offset_of!(Desc, timestamp_ns), 24);
        assert_eq!(size_of::<SlotHdr>(), 48);
        assert_eq!(offset_of!(SlotHdr, seq), 8);
        assert_eq!(offset_of!(SlotHdr, desc_format), 2);
        assert_eq!(offset_of!(SlotHdr, data_bytes), 4);
        assert_eq!(offset_of!(SlotHdr, flags), 3);
        assert_eq!(size_of::<Desc8>(), 8);
        assert_eq!(offset_of!(Desc8, len), 4);
        assert_eq!(offset_of!(Desc8, port), 6);
        assert_eq!(offset_of!(SlotHdr, generation), 12);
        // pw_queue_ctrl: the restart words the persistent kernel reads at start.
        assert_eq!(offset_of!(QueueCtrl, first_seq), 8);
        assert_eq!(offset_of!(QueueCtrl, stall_at), 12);
        assert_eq!(offset_of!(QueueCtrl, exited), 16);
        assert_eq!(offset_of!(QueueCtrl, consumer), 128);
        assert_eq!(offset_of!(SlotHdr, acl_tables), 16);
        assert_eq!(offset_of!(SlotHdr, rule_hits), 24);
        assert_eq!(offset_of!(SlotHdr, n_rules), 32);
        assert_eq!(offset_of!(SlotHdr, default_action), 36);
        assert_eq!(size_of::<Verdict>(), 12);
        assert_eq!(offset_of!(Verdict, rule), 4);
        assert_eq!(offset_of!(Verdict, mark), 8);
        assert_eq!(size_of::<QueueCounters>(), 168);
        assert_eq!(offset_of!(QueueCounters, action), 48);
        assert_eq!(offset_of!(QueueCounters, drop_reason), 80);
        assert_eq!(size_of::<QueueCtrl>(), CTRL_SIZE);
        assert_eq!(offset_of!(QueueCtrl, exit_flag), 4);
        assert_eq!(offset_of!(QueueCtrl, consumer), 128);
        assert_eq!(offset_of!(QueueCtrl, heartbeat), 132);
        assert_eq!(offset_of!(QueueCtrl, status), 136);
        assert_eq!(offset_of!(QueueCtrl, polls), 144);
        assert_eq!(size_of::<QueueDesc>(), 160);
        assert_eq!(offset_of!(QueueDesc, tx), 136);
        assert_eq!(offset_of!(QueueDesc, frame_room), 152);
        assert_eq!(size_of::<TxDesc>(), 16);
        assert_eq!(offset_of!(TxDesc, out_port), 10);
        assert_eq!(offset_of!(TxDesc, action), 12);
        assert_eq!(offset_of!(QueueDesc, trace), 112);
        assert_eq!(offset_of!(QueueDesc, stage_counters), 120);
        assert_eq!(offset_of!(QueueDesc, stage_params), 128);
        assert_eq!(offset_of!(SlotHdr, stage_params), 40);
        assert_eq!(size_of::<StageCounters>(), 64);
        assert_eq!(size_of::<BurstTrace>(), 64);
        assert_eq!(offset_of!(BurstTrace, seen), 8);
        assert_eq!(offset_of!(BurstTrace, fenced), 40);
        assert_eq!(offset_of!(BurstTrace, parsed), 48);
        assert_eq!(offset_of!(QueueDesc, ctas), 100);
        assert_eq!(offset_of!(QueueDesc, done), 104);
        assert_eq!(offset_of!(QueueDesc, idle_timeout_ns), 64);
        assert_eq!(offset_of!(QueueDesc, slots), 72);
        assert_eq!(offset_of!(QueueDesc, pipeline), 88);
        assert_eq!(offset_of!(QueueDesc, default_action), 96);
        assert_eq!(offset_of!(QueueDesc, queue_id), 98);
    }

    /// The header's numbers are the ones mirrored here (parsed from the header text, so a change
    /// on one side only fails).
    #[test]
    fn constants_match_abi_header() {
        let h = pktwarp_kernels::library_file("pktwarp_abi.h").expect("the ABI header is embedded");
        let val = |name: &str| -> u64 {
            let line = h
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} not in header"));
            let v = line
                .split_whitespace()
                .nth(2)
                .unwrap()
                .trim_end_matches('u');
            match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
                None => v.parse().unwrap(),
            }
        };
        assert_eq!(val("PW_GPU_MAX_BURST"), MAX_BURST as u64);
        assert_eq!(val("PW_SLOT_ALIGN"), SLOT_ALIGN as u64);
        assert_eq!(val("PW_ACTION_DROP"), ACTION_DROP as u64);
        assert_eq!(val("PW_ACTION_TO_HOST"), ACTION_TO_HOST as u64);
        assert_eq!(val("PW_DROP_PARSE_ERROR"), DROP_PARSE_ERROR as u64);
        assert_eq!(val("PW_DROP_ACL"), DROP_ACL as u64);
        assert_eq!(val("PW_DROP_NONE"), DROP_NONE as u64);
        assert_eq!(val("PW_DROP_TOO_LONG"), DROP_TOO_LONG as u64);
        assert_eq!(val("PW_DROP_REASONS"), DROP_REASONS as u64);
        assert_eq!(val("PW_QSTATE_BAD_SLOT"), QSTATE_BAD_SLOT as u64);
        assert_eq!(val("PW_PIPE_META_OUT"), PIPE_META_OUT as u64);
        assert_eq!(val("PW_PIPE_DROP_MALFORMED"), PIPE_DROP_MALFORMED as u64);
        assert_eq!(val("PW_PIPE_SLOT_SEQ"), PIPE_SLOT_SEQ as u64);
        assert_eq!(val("PW_PIPE_TAGGED"), PIPE_TAGGED as u64);
        assert_eq!(val("PW_STAGE_BYTES"), STAGE_BYTES as u64);
        assert_eq!(val("PW_TAG_PAYLOAD"), TAG_PAYLOAD as u64);
        assert_eq!(val("PW_SPLIT_MAX"), SPLIT_MAX as u64);
        assert_eq!(val("PW_MAX_STAGES"), MAX_STAGES as u64);
        assert_eq!(val("PW_STAGE_COUNTERS"), STAGE_COUNTERS as u64);
        assert_eq!(val("PW_PARSE_CTR_ERRORS"), PARSE_CTR_ERRORS as u64);
        assert_eq!(val("PW_ACL_CTR_MATCHED"), ACL_CTR_MATCHED as u64);
        assert_eq!(val("PW_ACL_CTR_DEFAULT"), ACL_CTR_DEFAULT as u64);
        assert_eq!(val("PW_COUNT_CTR_BYTES"), COUNT_CTR_BYTES as u64);
        assert_eq!(val("PW_DROP_STAGE"), DROP_STAGE as u64);
        assert_eq!(val("PW_DROP_TTL_EXPIRED"), DROP_TTL_EXPIRED as u64);
        assert_eq!(val("PW_DROP_NO_ROUTE"), DROP_NO_ROUTE as u64);
        assert_eq!(val("PW_DROP_FRONTHAUL"), DROP_FRONTHAUL as u64);
        assert_eq!(val("PW_DROP_REASONS"), DROP_REASONS as u64);
        assert_eq!(val("PW_OUT_DEFAULT"), OUT_DEFAULT as u64);
        assert!(h.contains("sizeof(pw_queue_counters) == 168"));
        // The host-bound verdict and the TX ring entry; the stage ABI's pw_verdict (24 bytes,
        // send_ns at 16) is also pinned for the host build (pktwarp_kernels::host::VERDICT_BYTES).
        assert!(h.contains(&format!(
            "sizeof(pw_verdict_out) == {}",
            size_of::<Verdict>()
        )));
        assert!(h.contains(&format!("sizeof(pw_tx_desc) == {}", size_of::<TxDesc>())));
        // The send times follow the descriptors in the TX ring's buffer (tx_times_at).
        assert!(h.contains(
            "#define PW_TX_TIMES(q) ((uint64_t *)((q).tx + (uint64_t)(q).slots * (q).burst_max * sizeof(pw_tx_desc)))"
        ));
        assert!(h.contains("sizeof(pw_verdict) == 24"));
        assert!(h.contains("PW_OFFSETOF(pw_verdict, send_ns) == 16"));
        assert_eq!(val("PW_STAGE_ABI_VERSION"), 5);
        assert!(h.contains(&format!(
            "sizeof(pw_verdict_tagged) == {VERDICT_TAGGED_SIZE}"
        )));
        assert_eq!(val("PW_DESC_FULL"), DESC_FULL as u64);
        assert_eq!(val("PW_DESC_COMPACT"), DESC_COMPACT as u64);
        assert_eq!(val("PW_SLOT_REFS"), SLOT_REFS as u64);
        assert!(h.contains("PW_OFFSETOF(pw_slot_hdr, flags) == 3"));
    }

    #[test]
    fn drop_reasons_match_cpu_executor() {
        use crate::verdict::DropReason;
        assert_eq!(DropReason::RingFull as u8, DROP_RING_FULL);
        assert_eq!(DropReason::ParseError as u8, DROP_PARSE_ERROR);
        assert_eq!(DropReason::AclDrop as u8, DROP_ACL);
        assert_eq!(DropReason::SteeringDrop as u8, DROP_STEERING);
        assert_eq!(DropReason::TxError as u8, DROP_TX_ERROR);
        assert_eq!(DropReason::TtlExpired as u8, DROP_TTL_EXPIRED);
        assert_eq!(DropReason::NoRoute as u8, DROP_NO_ROUTE);
        assert_eq!(DropReason::KernelStall as u8, DROP_KERNEL_STALL);
        assert_eq!(DropReason::FronthaulReject as u8, DROP_FRONTHAUL);
        for r in DropReason::ALL.into_iter().take(DROP_REASONS) {
            assert_eq!(DROP_REASON_NAMES[r as usize], r.name());
        }
    }

    #[test]
    fn verdict_rule() {
        let nm = flow_rules::abi::ACL_NO_MATCH;
        let v = verdict_of(false, PIPE_DROP_MALFORMED, 3, ACTION_PASS, 7);
        assert_eq!(
            (v.action, v.drop_reason, v.rule, v.mark),
            (ACTION_DROP, DROP_PARSE_ERROR, nm, 0)
        );
        let v = verdict_of(false, 0, 3, ACTION_DROP, 7);
        assert_eq!(
            (v.action, v.drop_reason, v.rule, v.mark),
            (ACTION_DROP, DROP_ACL, 3, 7)
        );
        let v = verdict_of(true, 0, nm, ACTION_PASS, 0);
        assert_eq!((v.action, v.drop_reason), (ACTION_PASS, DROP_NONE));
        let mut c = QueueCounters::default();
        c.add_frame(
            false,
            true,
            &verdict_of(false, PIPE_DROP_MALFORMED, nm, 0, 0),
            60,
        );
        assert_eq!(
            (
                c.packets,
                c.bytes,
                c.parse_errors,
                c.action[1],
                c.drop_reason[1]
            ),
            (1, 60, 1, 1, 1)
        );
    }
}
