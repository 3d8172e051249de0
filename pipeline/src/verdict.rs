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
}

impl DropReason {
    pub const ALL: [DropReason; 7] = [
        DropReason::RingFull,
        DropReason::ParseError,
        DropReason::AclDrop,
        DropReason::SteeringDrop,
        DropReason::TxError,
        DropReason::TooLong,
        DropReason::StageDrop,
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
}

impl Verdict {
    pub const PASS: Verdict = Verdict {
        action: Action::Pass,
        reason: None,
        rule: u32::MAX,
        mark: 0,
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
    use crate::executor::gpu::abi;

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
        for r in DropReason::ALL {
            assert_eq!(DropReason::from_code(r as u8), Some(r));
            assert_eq!(abi::DROP_REASON_NAMES[r as usize], r.name());
        }
    }
}
