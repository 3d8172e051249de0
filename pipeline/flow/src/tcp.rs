//! TCP connection tracking states and their transition table, as data: Linux's
//! `tcp_conntracks[2][6][TCP_CONNTRACK_MAX]` (net/netfilter/nf_conntrack_proto_tcp.c, current
//! mainline). `gpu-kernels/cuda/flow.cuh` holds the same table (`pw_flow_tcp_table`); docs/flow-table.md, "TCP", says how the table's entries are used.

/// TCP conntrack states (`enum tcp_conntrack`'s values; stored in [`crate::FlowEntry::state`]).
pub mod st {
    pub const NONE: u8 = 0;
    pub const SYN_SENT: u8 = 1;
    pub const SYN_RECV: u8 = 2;
    pub const ESTABLISHED: u8 = 3;
    pub const FIN_WAIT: u8 = 4;
    pub const CLOSE_WAIT: u8 = 5;
    pub const LAST_ACK: u8 = 6;
    pub const TIME_WAIT: u8 = 7;
    pub const CLOSE: u8 = 8;
    pub const SYN_SENT2: u8 = 9;
    /// Number of states (`TCP_CONNTRACK_MAX`).
    pub const COUNT: usize = 10;
    /// Table value: the frame is invalid (`sIV`).
    pub const INVALID: u8 = 10;
    /// Table value: the frame is accepted and the state stays (`sIG`).
    pub const IGNORE: u8 = 11;

    /// Names as Linux prints them (`tcp_conntrack_names`).
    pub const NAMES: [&str; COUNT] = [
        "NONE",
        "SYN_SENT",
        "SYN_RECV",
        "ESTABLISHED",
        "FIN_WAIT",
        "CLOSE_WAIT",
        "LAST_ACK",
        "TIME_WAIT",
        "CLOSE",
        "SYN_SENT2",
    ];
}

/// Packet classes (`enum tcp_bit_set`), the middle index of [`TRANSITIONS`].
pub mod class {
    pub const SYN: usize = 0;
    pub const SYNACK: usize = 1;
    pub const FIN: usize = 2;
    pub const ACK: usize = 3;
    pub const RST: usize = 4;
    pub const NONE: usize = 5;
}

/// TCP flag bits as `PacketMeta::tcp_flags` holds them.
pub mod flag {
    pub const FIN: u16 = 0x01;
    pub const SYN: u16 = 0x02;
    pub const RST: u16 = 0x04;
    pub const PSH: u16 = 0x08;
    pub const ACK: u16 = 0x10;
}

/// A frame's packet class (`get_conntrack_index`): RST first, then SYN (with or without ACK),
/// FIN, ACK, none.
pub fn packet_class(flags: u16) -> usize {
    if flags & flag::RST != 0 {
        class::RST
    } else if flags & flag::SYN != 0 {
        if flags & flag::ACK != 0 {
            class::SYNACK
        } else {
            class::SYN
        }
    } else if flags & flag::FIN != 0 {
        class::FIN
    } else if flags & flag::ACK != 0 {
        class::ACK
    } else {
        class::NONE
    }
}

const S_SS: u8 = st::SYN_SENT;
const S_SR: u8 = st::SYN_RECV;
const S_ES: u8 = st::ESTABLISHED;
const S_FW: u8 = st::FIN_WAIT;
const S_CW: u8 = st::CLOSE_WAIT;
const S_LA: u8 = st::LAST_ACK;
const S_TW: u8 = st::TIME_WAIT;
const S_CL: u8 = st::CLOSE;
const S_S2: u8 = st::SYN_SENT2;
const S_IV: u8 = st::INVALID;
const S_IG: u8 = st::IGNORE;

/// `TRANSITIONS[dir][class][state]`: the next state of a flow in `state` on a frame of packet
/// class `class` in direction `dir` (0 original, 1 reply), or [`st::INVALID`] / [`st::IGNORE`].
/// Columns: NONE, SYN_SENT, SYN_RECV, ESTABLISHED, FIN_WAIT, CLOSE_WAIT, LAST_ACK, TIME_WAIT,
/// CLOSE, SYN_SENT2.
#[rustfmt::skip]
pub const TRANSITIONS: [[[u8; st::COUNT]; 6]; 2] = [
    [
        /* syn    */ [S_SS, S_SS, S_IG, S_IG, S_IG, S_IG, S_IG, S_SS, S_SS, S_S2],
        /* synack */ [S_IV, S_IV, S_SR, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_SR],
        /* fin    */ [S_IV, S_IV, S_FW, S_FW, S_LA, S_LA, S_LA, S_TW, S_CL, S_IV],
        /* ack    */ [S_ES, S_IV, S_ES, S_ES, S_CW, S_CW, S_TW, S_TW, S_CL, S_IV],
        /* rst    */ [S_IV, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL],
        /* none   */ [S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV],
    ],
    [
        /* syn    */ [S_IV, S_S2, S_IV, S_IV, S_IV, S_IV, S_IV, S_SS, S_IV, S_S2],
        /* synack */ [S_IV, S_SR, S_IG, S_IG, S_IG, S_IG, S_IG, S_IG, S_IG, S_SR],
        /* fin    */ [S_IV, S_IV, S_FW, S_FW, S_LA, S_LA, S_LA, S_TW, S_CL, S_IV],
        /* ack    */ [S_IV, S_IG, S_SR, S_ES, S_CW, S_CW, S_TW, S_TW, S_CL, S_IG],
        /* rst    */ [S_IV, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL],
        /* none   */ [S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV],
    ],
];

/// The next state (or [`st::INVALID`] / [`st::IGNORE`]).
pub fn next_state(reply: bool, flags: u16, state: u8) -> u8 {
    TRANSITIONS[reply as usize][packet_class(flags)][(state as usize).min(st::COUNT - 1)]
}

/// The flat form of [`TRANSITIONS`] (index `(dir * 6 + class) * 10 + state`), as flow.cuh's
/// `pw_flow_tcp_table` holds it.
pub fn flat_table() -> [u8; 120] {
    let mut t = [0u8; 120];
    for (d, rows) in TRANSITIONS.iter().enumerate() {
        for (c, row) in rows.iter().enumerate() {
            t[(d * 6 + c) * 10..(d * 6 + c + 1) * 10].copy_from_slice(row);
        }
    }
    t
}
