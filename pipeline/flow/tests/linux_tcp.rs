//! Crafted TCP sequences against the states of Linux's conntrack transition table,
//! `tcp_conntracks[2][6][TCP_CONNTRACK_MAX]` in net/netfilter/nf_conntrack_proto_tcp.c
//! (mainline): each expected state below is read off that table by hand (row: packet class and
//! direction, column: the state before), not computed from `pktwarp_flow::tcp`. Each sequence
//! runs through the Rust table and the host-compiled CUDA, which must agree.

mod common;

use common::*;
use pktwarp_flow::tcp::st;
use pktwarp_flow::{ct, outcome, FlowResult, FlowTable, Timeouts};

const SS: u8 = st::SYN_SENT;
const SR: u8 = st::SYN_RECV;
const ES: u8 = st::ESTABLISHED;
const FW: u8 = st::FIN_WAIT;
const CW: u8 = st::CLOSE_WAIT;
const LA: u8 = st::LAST_ACK;
const TW: u8 = st::TIME_WAIT;
const CL: u8 = st::CLOSE;
const S2: u8 = st::SYN_SENT2;
/// Expected "invalid: the state stays" marker.
const IV: u8 = 0xee;

/// Client (c) or server (s) sends a segment with these flags.
type Step = (char, &'static str, u8);

/// Runs the steps (each with the state expected after it, or IV for an invalid frame) and
/// returns the results; checks Rust and CUDA agree and the table's TCP state after each step.
fn run(name: &str, steps: &[Step], expect_ct: Option<&[u8]>) -> Vec<FlowResult> {
    let mut t = FlowTable::new(64, Timeouts::default()).unwrap();
    let mut cuda = common::CudaTable::of(&t);
    let (c, s) = (ep(C, 40000), ep(S, 80));
    let mut results = Vec::new();
    let mut last_state = 0u8;
    for (i, &(who, flags, want)) in steps.iter().enumerate() {
        let f = if who == 'c' {
            seg(c, s, flags, 1, 1, 0)
        } else {
            seg(s, c, flags, 1, 1, 0)
        };
        let m = parse(&f);
        let now = 1_000_000_000 + i as u64;
        let r = t.apply(&m, &f, now);
        let rc = cuda.burst(&[m], &[&f], &[now], 1)[0];
        assert_eq!(r, rc, "{name} step {i}: Rust vs CUDA");
        let state = t.records().next().map(|r| r.tcp_state).unwrap_or(0);
        if want == IV {
            assert_eq!(
                r.outcome,
                outcome::INVALID,
                "{name} step {i} ({who} {flags}): want invalid, got {r:?}"
            );
            assert_eq!(r.ct_state, ct::INVALID);
            assert_eq!(
                state, last_state,
                "{name} step {i}: an invalid frame changed the state"
            );
        } else {
            assert_eq!(
                r.outcome,
                outcome::TRACKED,
                "{name} step {i} ({who} {flags}): {r:?}"
            );
            assert_eq!(
                state,
                want,
                "{name} step {i} ({who} {flags}): state {} want {}",
                st::NAMES[state as usize],
                st::NAMES[want as usize]
            );
        }
        last_state = state;
        results.push(r);
    }
    assert_eq!(t.entries(), &cuda.entries[..], "{name}: table bytes");
    assert_eq!(t.counters(), cuda.counters, "{name}: counters");
    if let Some(cts) = expect_ct {
        let got: Vec<u8> = results.iter().map(|r| r.ct_state).collect();
        assert_eq!(got, cts, "{name}: ct states");
    }
    results
}

#[test]
fn three_way_handshake_data_and_fin_both_ways() {
    use ct::{CLOSED as D, CLOSING as G, ESTABLISHED as E, NEW as N};
    let r = run(
        "handshake+fin",
        &[
            ('c', "S", SS),  // orig syn: sNO -> sSS
            ('s', "SA", SR), // reply synack: sSS -> sSR
            ('c', "A", ES),  // orig ack: sSR -> sES
            ('c', "PA", ES), // orig ack: sES -> sES
            ('s', "A", ES),  // reply ack: sES -> sES
            ('c', "FA", FW), // orig fin: sES -> sFW
            ('s', "A", CW),  // reply ack: sFW -> sCW
            ('s', "FA", LA), // reply fin: sCW -> sLA
            ('c', "A", TW),  // orig ack: sLA -> sTW
            ('c', "A", TW),  // orig ack: sTW -> sTW (retransmitted last ACK)
        ],
        Some(&[N, E, E, E, E, G, G, G, D, D]),
    );
    assert_eq!(r[0].dir, 0);
    assert_eq!(r[1].dir, 1);
    assert_eq!(r[2].dir, 0);
}

#[test]
fn simultaneous_open() {
    run(
        "simultaneous open",
        &[
            ('c', "S", SS),  // orig syn: sNO -> sSS
            ('s', "S", S2),  // reply syn: sSS -> sS2
            ('c', "S", S2),  // orig syn: sS2 -> sS2 (late retransmitted SYN)
            ('c', "SA", SR), // orig synack: sS2 -> sSR
            ('s', "SA", SR), // reply synack: sSR -> sIG (state stays)
            ('s', "A", SR),  // reply ack: sSR -> sSR
            ('c', "A", ES),  // orig ack: sSR -> sES
        ],
        None,
    );
}

#[test]
fn fin_from_both_sides_at_once() {
    run(
        "crossing fins",
        &[
            ('c', "S", SS),
            ('s', "SA", SR),
            ('c', "A", ES),
            ('c', "FA", FW), // orig fin: sES -> sFW
            ('s', "FA", LA), // reply fin: sFW -> sLA
            ('c', "A", TW),  // orig ack: sLA -> sTW
            ('s', "A", TW),  // reply ack: sTW -> sTW
        ],
        None,
    );
}

#[test]
fn rst_closes_from_any_state_and_a_syn_reopens() {
    use ct::{CLOSED as D, ESTABLISHED as E, NEW as N};
    let r = run(
        "rst",
        &[
            ('c', "S", SS),
            ('s', "RA", CL), // reply rst: sSS -> sCL (port closed)
            ('c', "A", CL),  // orig ack: sCL -> sCL
            ('c', "S", SS),  // orig syn: sCL -> sSS (reopened: a new flow)
            ('s', "SA", SR),
            ('c', "A", ES),
            ('s', "R", CL), // reply rst: sES -> sCL
        ],
        Some(&[N, D, D, N, E, E, D]),
    );
    assert_eq!(r[3].dir, 0);
}

#[test]
fn syn_ack_without_syn_and_data_before_the_handshake() {
    // A SYN-ACK opens nothing (orig synack: sNO -> sIV); nor does a bare FIN, RST or a segment
    // without flags. An ACK picks the connection up (orig ack: sNO -> sES, "Assumed").
    let mut t = FlowTable::new(64, Timeouts::default()).unwrap();
    let (c, s) = (ep(C, 40000), ep(S, 80));
    for flags in ["SA", "F", "R", "none"] {
        let f = seg(s, c, flags, 1, 1, 0);
        let r = t.apply(&parse(&f), &f, 1);
        assert_eq!(r.outcome, outcome::INVALID, "{flags}");
        assert!(t.is_empty(), "{flags} made a flow");
    }
    assert_eq!(t.counters().invalid, 4);
    run(
        "pickup",
        &[
            ('c', "PA", ES), // orig ack: sNO -> sES
            ('s', "A", ES),  // reply ack: sES -> sES
            ('s', "S", IV),  // reply syn: sES -> sIV
            ('c', "SA", IV), // orig synack: sES -> sIV
            ('c', "S", ES),  // orig syn: sES -> sIG (state stays)
            ('s', "SA", ES), // reply synack: sES -> sIG
        ],
        None,
    );
}

#[test]
fn out_of_order_handshake() {
    run(
        "out of order",
        &[
            ('c', "S", SS),
            ('c', "A", IV),  // orig ack: sSS -> sIV (no SYN-ACK seen yet)
            ('c', "FA", IV), // orig fin: sSS -> sIV
            ('s', "A", SS),  // reply ack: sSS -> sIG (half-open?)
            ('s', "F", IV),  // reply fin: sSS -> sIV
            ('c', "SA", IV), // orig synack: sSS -> sIV
            ('s', "SA", SR),
            ('s', "S", IV), // reply syn: sSR -> sIV
            ('c', "A", ES),
        ],
        None,
    );
}

#[test]
fn time_wait_reopen_from_the_reply_side_swaps_the_roles() {
    let r = run(
        "reply reopen",
        &[
            ('c', "S", SS),
            ('s', "SA", SR),
            ('c', "A", ES),
            ('c', "FA", FW),
            ('s', "FA", LA),
            ('c', "A", TW),
            ('s', "S", SS), // reply syn: sTW -> sSS (server may have switched role)
            ('c', "SA", SR),
        ],
        None,
    );
    // The server's reopening SYN is the new flow's original direction...
    assert_eq!(r[6].dir, 0);
    // ...and the client's SYN-ACK answering it is the reply.
    assert_eq!(r[7].dir, 1);
}
