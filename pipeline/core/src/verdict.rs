//! Verdicts and drop reasons: what happens to each frame, and why a frame was not passed on.
//! Every drop has a reason and a counter.

/// What happens to a frame after the pipeline.
#[repr(u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Action {
    /// To the output port.
    #[default]
    Pass = 0,
    /// Dropped; the reason is counted.
    Drop = 1,
    /// To the output port and a copy to the host.
    Mirror = 2,
    /// To the host (control / slow path) instead of the output port.
    ToHost = 3,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Pass => "pass",
            Action::Drop => "drop",
            Action::Mirror => "mirror",
            Action::ToHost => "to_host",
        }
    }

    /// Whether the frame goes to the output port.
    pub fn forwards(self) -> bool {
        matches!(self, Action::Pass | Action::Mirror)
    }
}

/// Why a frame was dropped. Names are the `reason` label of the drop counters.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The queue's ring had no room (ingest with `on_full: drop`).
    RingFull = 0,
    /// The `parse` stage rejected the frame (malformed or truncated; the status says which).
    ParseError = 1,
    /// An ACL rule (or the ACL default) said drop.
    AclDrop = 2,
    /// Steering said drop.
    SteeringDrop = 3,
    /// The output port refused the frame.
    TxError = 4,
    /// The frame is longer than a GPU queue slot takes.
    TooLong = 5,
    /// A custom (library user's) stage dropped it without naming a reason.
    StageDrop = 6,
    /// `ttl`: the frame arrived with an IPv4 TTL / IPv6 hop limit of 0 or 1.
    TtlExpired = 7,
    /// `route`: no prefix (and no default route) covers the destination, or there is no IP
    /// destination to route on.
    NoRoute = 8,
    /// The burst a stalled GPU queue kernel held when the watchdog restarted it
    /// (`on_stall: restart`): its frames never got verdicts.
    KernelStall = 9,
    /// `fronthaul`: a malformed or non-conformant eCPRI / O-RAN frame, rejected whole (the
    /// stage counts it by decode reason: `pktwarp_fronthaul_errors_total{reason}`), or a
    /// U-plane frame refused because its slot had closed (counted `slot_closed` per eAxC).
    FronthaulReject = 10,
    /// The frame's send time (`Verdict::send_ns`) lay further ahead than its output port holds
    /// frames for (a DPDK port's `tx_max_hold_ms`). Counted by the host only: the GPU ABI's
    /// counter slots stop at `PW_DROP_REASONS` (no stage gives it).
    TxHorizon = 11,
    /// `rate_limit`: the frame's token bucket was empty (or, with `on_full: drop`, no bucket
    /// could be had). The stage runs on the CPU executor only for now, so the GPU ABI's counter
    /// slots do not reach this code either.
    RateLimited = 12,
    /// `inspect`: a `drop` (or `reject`) IDS rule matched. Counted by the host only: the
    /// stage runs on the CPU executor, so the GPU ABI has no slot for it.
    InspectDrop = 13,
}

impl DropReason {
    /// Every reason, in code order. Append-only: a code never changes meaning (the GPU ABI's
    /// `PW_DROP_*` are the same numbers).
    pub const ALL: [DropReason; 14] = [
        DropReason::RingFull,
        DropReason::ParseError,
        DropReason::AclDrop,
        DropReason::SteeringDrop,
        DropReason::TxError,
        DropReason::TooLong,
        DropReason::StageDrop,
        DropReason::TtlExpired,
        DropReason::NoRoute,
        DropReason::KernelStall,
        DropReason::FronthaulReject,
        DropReason::TxHorizon,
        DropReason::RateLimited,
        DropReason::InspectDrop,
    ];
    pub const COUNT: usize = Self::ALL.len();

    pub fn name(self) -> &'static str {
        match self {
            DropReason::RingFull => "ring_full",
            DropReason::ParseError => "parse_error",
            DropReason::AclDrop => "acl_drop",
            DropReason::SteeringDrop => "steering_drop",
            DropReason::TxError => "tx_error",
            DropReason::TooLong => "too_long",
            DropReason::StageDrop => "stage_drop",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::NoRoute => "no_route",
            DropReason::KernelStall => "kernel_stall",
            DropReason::FronthaulReject => "fronthaul_reject",
            DropReason::TxHorizon => "tx_horizon",
            DropReason::RateLimited => "rate_limited",
            DropReason::InspectDrop => "inspect_drop",
        }
    }
}

/// Per-frame result of the pipeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub action: Action,
    /// Set when `action` is `Drop`.
    pub reason: Option<DropReason>,
    /// Matched ACL rule (0-based, file order), `u32::MAX` when none.
    pub rule: u32,
    /// Mark set by a rule, 0 when none.
    pub mark: u32,
    /// The output port a forwarded frame goes to: an index into the config's ports with a
    /// transmit side (config order, [`crate::config::Config::tx_port_names`]), set by `route`;
    /// [`Verdict::OUT_DEFAULT`] = the default output (`output.port`). The GPU carries it in
    /// `pw_verdict.out_port`.
    pub out_port: u16,
    /// When to send the frame: nanoseconds in the clock of the receive timestamps
    /// (`FrameDesc::timestamp_ns`: the Unix epoch for live ports and the generator, the
    /// capture's own time for a pcap replay); 0 = now. Set by `tx_time`; the GPU carries it in
    /// `pw_verdict.send_ns` and the TX ring's send times (`PW_TX_TIMES`). A pcap output writes it as
    /// the record time, a DPDK output sends at that time (Tx timestamp offload, else paced in
    /// software).
    pub send_ns: u64,
}

impl Verdict {
    /// `out_port` of a frame no stage sent to a port of its own: the default output.
    pub const OUT_DEFAULT: u16 = 0xFFFF;

    pub const PASS: Verdict = Verdict {
        action: Action::Pass,
        reason: None,
        rule: u32::MAX,
        mark: 0,
        out_port: Verdict::OUT_DEFAULT,
        send_ns: 0,
    };

    pub fn drop(reason: DropReason) -> Verdict {
        Verdict {
            action: Action::Drop,
            reason: Some(reason),
            ..Verdict::PASS
        }
    }
}

impl DropReason {
    /// From a `DROP_*` code of the GPU ABI (same numbering).
    pub fn from_code(c: u8) -> Option<DropReason> {
        Self::ALL.get(c as usize).copied()
    }
}

impl Action {
    /// From an `ACTION_*` code of the GPU ABI (same numbering).
    pub fn from_code(c: u8) -> Action {
        match c {
            1 => Action::Drop,
            2 => Action::Mirror,
            3 => Action::ToHost,
            _ => Action::Pass,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi;

    #[test]
    fn codes_match_the_gpu_abi() {
        assert_eq!(Action::Pass as u8, abi::ACTION_PASS);
        assert_eq!(Action::Drop as u8, abi::ACTION_DROP);
        assert_eq!(Action::Mirror as u8, abi::ACTION_MIRROR);
        assert_eq!(Action::ToHost as u8, abi::ACTION_TO_HOST);
        assert_eq!(DropReason::RingFull as u8, abi::DROP_RING_FULL);
        assert_eq!(DropReason::ParseError as u8, abi::DROP_PARSE_ERROR);
        assert_eq!(DropReason::AclDrop as u8, abi::DROP_ACL);
        assert_eq!(DropReason::SteeringDrop as u8, abi::DROP_STEERING);
        assert_eq!(DropReason::TxError as u8, abi::DROP_TX_ERROR);
        assert_eq!(DropReason::TooLong as u8, abi::DROP_TOO_LONG);
        assert_eq!(DropReason::StageDrop as u8, abi::DROP_STAGE);
        assert_eq!(DropReason::TtlExpired as u8, abi::DROP_TTL_EXPIRED);
        assert_eq!(DropReason::NoRoute as u8, abi::DROP_NO_ROUTE);
        assert_eq!(DropReason::FronthaulReject as u8, abi::DROP_FRONTHAUL);
        assert_eq!(Verdict::OUT_DEFAULT, abi::OUT_DEFAULT);
        // Reasons past the GPU's counter slots are the host's own (TX side, and the CPU-only
        // `rate_limit` and `inspect` stages).
        const { assert!(DropReason::COUNT == abi::DROP_REASONS + 3) };
        assert_eq!(DropReason::TxHorizon as usize, abi::DROP_REASONS);
        assert_eq!(DropReason::RateLimited as usize, abi::DROP_REASONS + 1);
        assert_eq!(DropReason::InspectDrop as usize, abi::DROP_REASONS + 2);
        for r in DropReason::ALL {
            assert_eq!(DropReason::from_code(r as u8), Some(r));
            if (r as usize) < abi::DROP_REASONS {
                assert_eq!(abi::DROP_REASON_NAMES[r as usize], r.name());
            }
        }
    }
}
