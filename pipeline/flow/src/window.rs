//! `strict`: TCP sequence-window checking, a reduced form of Linux's `tcp_in_window`
//! (nf_conntrack_proto_tcp.c) without SACK blocks, NAT offsets, retransmission counting or the
//! RST special cases (docs/flow-table.md, "Strict"). flow.cuh's `pw_flow_window_*` is the same.

use crate::key::{Packet, NO_WSCALE};
use crate::table::{FlowEntry, TcpWindow};
use crate::tcp::{flag, st};

/// [`TcpWindow::flags`]: the direction sent the window-scale option.
pub const WF_SCALE: u8 = 0x01;
/// [`TcpWindow::flags`]: no checks (a connection picked up mid-stream has no history).
pub const WF_LIBERAL: u8 = 0x02;

/// Linux's MAXACKWINCONST: the least window an acknowledgement may lag by.
const MAX_ACK_WIN: u32 = 66_000;

fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn after(a: u32, b: u32) -> bool {
    before(b, a)
}

/// Sequence number after the segment (SYN and FIN count one).
fn seg_end(p: &Packet) -> u32 {
    p.seq
        .wrapping_add(p.seg_len)
        .wrapping_add((p.tcp_flags & flag::SYN != 0) as u32)
        .wrapping_add((p.tcp_flags & flag::FIN != 0) as u32)
}

/// A direction's state from its SYN (or SYN-ACK).
fn from_syn(w: &mut TcpWindow, p: &Packet) {
    let end = seg_end(p);
    w.end = end;
    w.maxend = end;
    w.maxwin = (p.win as u32).max(1);
    if p.wscale == NO_WSCALE {
        w.scale = 0;
        w.flags &= !WF_SCALE;
    } else {
        w.scale = p.wscale;
        w.flags |= WF_SCALE;
    }
}

/// The windows of a flow created by `p` (original direction).
pub fn init(e: &mut FlowEntry, p: &Packet) {
    e.window = [TcpWindow::default(); 2];
    if e.state == st::SYN_SENT {
        from_syn(&mut e.window[0], p);
    } else {
        // Picked up mid-stream: the history is lost, check nothing.
        let w = &mut e.window[0];
        w.end = seg_end(p);
        w.maxwin = (p.win as u32).max(1);
        w.maxend = w.end.wrapping_add(w.maxwin);
        e.window[0].flags = WF_LIBERAL;
        e.window[1].flags = WF_LIBERAL;
    }
}

/// Whether `p`, in direction `dir` of a flow in TCP state `old`, is within the windows; updates
/// them when it is (and leaves them when it is not).
pub fn check(e: &mut FlowEntry, dir: usize, p: &Packet, old: u8) -> bool {
    if e.window[dir].flags & WF_LIBERAL != 0 {
        return true;
    }
    let mut w = e.window;
    let (s, r) = if dir == 0 { (0, 1) } else { (1, 0) };
    let end = seg_end(p);
    let syn = p.tcp_flags & flag::SYN != 0;
    let has_ack = p.tcp_flags & flag::ACK != 0;
    if w[s].maxwin == 0 {
        if syn {
            from_syn(&mut w[s], p);
            // Window scaling only when both sides offered it (RFC 7323).
            if w[s].flags & w[r].flags & WF_SCALE == 0 {
                w[s].scale = 0;
                w[r].scale = 0;
            }
            if !has_ack {
                // Simultaneous open: the reply side's SYN.
                e.window = w;
                return true;
            }
        } else {
            w[s].end = end;
            let swin = ((p.win as u32) << w[s].scale).max(1);
            w[s].maxwin = swin;
            w[s].maxend = end.wrapping_add(swin);
            if w[r].maxwin == 0 {
                w[r].end = p.ack;
                w[r].maxend = p.ack;
            }
        }
    } else if ((old == st::SYN_SENT && dir == 0) || (old == st::SYN_RECV && dir == 1))
        && after(end, w[s].end)
    {
        // A new SYN (or SYN-ACK) with a later sequence number restarts the direction.
        from_syn(&mut w[s], p);
    }
    let ack = if has_ack { p.ack } else { w[r].end };
    let max_ack_win = w[s].maxwin.max(MAX_ACK_WIN);
    let ok = before(p.seq, w[s].maxend.wrapping_add(1))
        && after(end, w[s].end.wrapping_sub(w[r].maxwin).wrapping_sub(1))
        && before(ack, w[r].end.wrapping_add(1))
        && after(ack, w[r].end.wrapping_sub(max_ack_win).wrapping_sub(1));
    if !ok {
        return false;
    }
    let win = if syn {
        p.win as u32
    } else {
        (p.win as u32) << w[s].scale
    };
    if w[s].maxwin < win {
        w[s].maxwin = win;
    }
    if after(end, w[s].end) {
        w[s].end = end;
    }
    if w[r].maxwin != 0 && after(end, w[s].maxend) {
        w[r].maxwin = w[r].maxwin.wrapping_add(end.wrapping_sub(w[s].maxend));
    }
    if after(ack.wrapping_add(win), w[r].maxend.wrapping_sub(1)) {
        w[r].maxend = ack.wrapping_add(win.max(1));
    }
    e.window = w;
    true
}
