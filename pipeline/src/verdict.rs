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
}

impl DropReason {
    pub const ALL: [DropReason; 5] = [
        DropReason::RingFull,
        DropReason::ParseError,
        DropReason::AclDrop,
        DropReason::SteeringDrop,
        DropReason::TxError,
    ];
    pub const COUNT: usize = Self::ALL.len();

    pub fn name(self) -> &'static str {
        match self {
            DropReason::RingFull => "ring_full",
            DropReason::ParseError => "parse_error",
            DropReason::AclDrop => "acl_drop",
            DropReason::SteeringDrop => "steering_drop",
            DropReason::TxError => "tx_error",
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
