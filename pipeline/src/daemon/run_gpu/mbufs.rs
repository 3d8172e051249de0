//! DPDK in and out on the GPU executor, the received mbufs sent themselves (cargo feature
//! `dpdk`): each queue's receive thread polls its own RX queue of the input port
//! (`DpdkRx::rx_mbufs`), copies each frame into the slot burst the GPU runs (the GPU needs the
//! bytes in its slot) and keeps the mbuf with the slot ([`Kept`]) instead of freeing it. Once
//! the burst is reaped, its TX thread frees the mbufs of the frames the verdicts drop in bulk
//! and hands the rest to its own TX queue of the output port (`DpdkTx::tx_mbufs`): the mbuf
//! sent is the mbuf received. A `mirror` frame goes to the mirror port as a second reference
//! to the same mbuf. A rewriting pipeline's frames are copied back from the GPU slot into their
//! mbufs first (`MbufBurst::write_frame`: one copy per frame sent, not zero); frames no stage
//! changed are sent as received (no copy on the TX side). Frames forwarded to another output
//! port than `output.port` (a `route` / `set: { port }` naming one) go the copying way, from
//! the burst.

use super::{tx::SlotSender, Slot};
use crate::counters::QueueCounters;
use crate::daemon::OpenPorts;
use crate::executor::gpu::abi::{self, TxDesc};
use crate::port::dpdk::{DpdkPort, DpdkTx, MbufBurst};
use crate::port::out::OutTally;
use crate::port::TxPort;
use crate::verdict::DropReason;

/// The ports of a run whose received mbufs are sent themselves.
#[derive(Clone)]
pub(crate) struct MbufPlan {
    pub rx: DpdkPort,
    pub tx: DpdkPort,
    pub mirror: Option<DpdkPort>,
}

/// The plan for `p` over `ports` (input, output and mirror DPDK ports), or why not. Whether
/// the input port splits by RX queue (one receive thread per queue, each on its own RX queue)
/// is checked with the receive threads (`host::feeds`); without it the copying path runs.
pub(crate) fn plan(p: &crate::daemon::Prepared, ports: &OpenPorts) -> Result<MbufPlan, String> {
    let nq = p.cfg.queues.count as usize;
    let tx_queues = if p.rx_threads().tx_per_queue { nq } else { 1 };
    if ports.out.to_host.is_some() {
        return Err("output.to_host is set (the slow path takes copies)".into());
    }
    let default_tx = ports
        .out
        .default
        .and_then(|k| ports.dpdk_out.get(k))
        .and_then(Option::as_ref);
    let (rx, tx) = match (ports.dpdk_rx.as_slice(), default_tx) {
        ([Some(rx)], Some(tx)) => (rx, tx),
        ([Some(_)], None) => {
            return Err("the output port is not a DPDK port (or there is none)".into())
        }
        ([_], _) => return Err("the input port is not a DPDK port".into()),
        (many, _) => return Err(format!("{} input ports (one is taken)", many.len())),
    };
    let mirror = match (&ports.out.mirror, &ports.dpdk_mirror) {
        (Some(_), None) => return Err("the mirror port is not a DPDK port".into()),
        (_, m) => m.clone(),
    };
    if p.pipeline
        .stages
        .iter()
        .any(|s| matches!(s, crate::stage::Stage::TxTime(_)))
    {
        return Err("the pipeline sets send times (tx_time: the paced TX path sends them)".into());
    }
    if rx.buffer_placement() == crate::port::dpdk::BufferPlacement::GpuDirect {
        return Err(format!(
            "the input port {} receives into GPU memory",
            rx.setup().name
        ));
    }
    for (what, port) in [("output", Some(tx)), ("mirror", mirror.as_ref())] {
        if let Some(port) = port {
            if usize::from(port.setup().tx_queues) < tx_queues {
                return Err(format!(
                    "the {what} port {} has {} TX queues, {tx_queues} TX threads send",
                    port.setup().name,
                    port.setup().tx_queues
                ));
            }
        }
    }
    Ok(MbufPlan {
        rx: rx.clone(),
        tx: tx.clone(),
        mirror,
    })
}

/// The mbufs a slot's frames arrived in, in frame order: one burst per receive call that put
/// frames into the slot. Cleared (the mbufs freed) when the slot is released.
#[derive(Default)]
pub(crate) struct Kept {
    bursts: Vec<MbufBurst>,
    used: usize,
}

impl Kept {
    /// Moves the frames of `part` for which `pick(i)` holds here (they follow the frames held);
    /// the caller then lets go of `part`'s references (`part.retain(|_| false)`).
    pub fn take_from(&mut self, part: &mut MbufBurst, pick: impl FnMut(usize) -> bool) {
        if self.used == self.bursts.len() {
            self.bursts.push(MbufBurst::new());
        }
        let b = &mut self.bursts[self.used];
        part.share_into(b, pick);
        if !b.is_empty() {
            self.used += 1;
        }
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.bursts[..self.used].iter().map(MbufBurst::len).sum()
    }

    /// Frees every mbuf held.
    pub fn clear(&mut self) {
        for b in &mut self.bursts[..self.used] {
            b.clear();
        }
        self.used = 0;
    }
}

/// What a frame of a slot does on this path.
const FREE: u8 = 0;
const SEND: u8 = 1;
const SEND_AND_MIRROR: u8 = 2;

/// Whether TX entry `d` is sent as its mbuf (forwarded or mirrored to `output.port`); the
/// other entries go the copying way ([`Slot`]'s `TxBurst` leaves these out).
pub(crate) fn by_mbuf(d: &TxDesc) -> bool {
    d.out_port == abi::OUT_DEFAULT && matches!(d.action, abi::ACTION_PASS | abi::ACTION_MIRROR)
}

/// One TX thread's queues of the output and mirror ports, and what they took.
pub(crate) struct MbufSender {
    tx: DpdkTx,
    mirror: Option<DpdkTx>,
    out: OutTally,
    mirrored: OutTally,
    errors: Vec<String>,
    fates: Vec<u8>,
    copies: MbufBurst,
}

impl MbufSender {
    /// TX queue `queue` of the plan's output (and mirror) port; `names`: the output's and the
    /// mirror's names in the summary's tallies.
    pub fn new(plan: &MbufPlan, queue: u16, names: (String, String)) -> Result<MbufSender, String> {
        let tx = plan.tx.tx(queue).map_err(|e| e.to_string())?;
        let mirror = plan
            .mirror
            .as_ref()
            .map(|m| m.tx(queue))
            .transpose()
            .map_err(|e| e.to_string())?;
        let tally = |role, name| OutTally {
            role,
            name,
            ..OutTally::default()
        };
        Ok(MbufSender {
            tx,
            mirror,
            out: tally("output", names.0),
            mirrored: tally("mirror", names.1),
            errors: Vec::new(),
            fates: Vec::new(),
            copies: MbufBurst::new(),
        })
    }

    /// Sends `b` on `tx` (every frame); (sent, bytes handed, not sent), or the error (the
    /// burst freed).
    fn send_all(tx: &mut DpdkTx, b: &mut MbufBurst) -> Result<(u64, u64, u64), String> {
        let (wanted, bytes) = (b.len(), b.bytes());
        match tx.tx_mbufs(b) {
            Ok(out) => {
                let sent = out.sent.min(wanted);
                Ok((sent as u64, bytes, (wanted - sent) as u64))
            }
            Err(e) => {
                b.clear();
                Err(e.to_string())
            }
        }
    }

    fn note(&mut self, e: String) {
        if !self.errors.contains(&e) {
            self.errors.push(e);
        }
    }
}

impl SlotSender for MbufSender {
    fn send(&mut self, slot: &mut Slot, c: &QueueCounters) {
        let mut kept = std::mem::take(&mut slot.kept);
        let n = slot.burst.len();
        if kept.len() != n {
            // Each frame of the burst has its mbuf, in order: anything else is a fault of
            // the ingest; nothing is sent that could be the wrong frame.
            let lost = slot.tx.iter().filter(|d| by_mbuf(d)).count() as u64;
            c.drops[DropReason::TxError as usize].add_shared(lost);
            self.out.failed += lost;
            self.note(format!(
                "{} mbufs kept for a burst of {n} frames",
                kept.len()
            ));
            kept.clear();
            slot.kept = kept;
            return;
        }
        let mut fates = std::mem::take(&mut self.fates);
        fates.clear();
        fates.resize(n, FREE);
        for d in slot.tx.iter().filter(|d| by_mbuf(d)) {
            if let Some(f) = fates.get_mut(usize::from(d.frame)) {
                *f = if d.action == abi::ACTION_MIRROR {
                    SEND_AND_MIRROR
                } else {
                    SEND
                };
            }
        }
        if !slot.as_received {
            // Rewritten on the GPU: the slot's bytes (or the reap's copy of them) into the
            // mbufs they arrived in.
            let mut base = 0;
            for b in &mut kept.bursts[..kept.used] {
                for d in slot.tx.iter().filter(|d| by_mbuf(d)) {
                    let i = usize::from(d.frame);
                    if (base..base + b.len()).contains(&i) {
                        if let Err(e) = b.write_frame(i - base, super::tx::frame_of(slot, d)) {
                            fates[i] = FREE;
                            c.drops[DropReason::TxError as usize].add_shared(1);
                            self.note(e.to_string());
                        }
                    }
                }
                base += b.len();
            }
        }
        let mut base = 0;
        for b in &mut kept.bursts[..kept.used] {
            let len = b.len();
            let at = |j: usize| fates.get(base + j).copied().unwrap_or(FREE);
            if self.mirror.is_some() {
                b.share_into(&mut self.copies, |j| at(j) == SEND_AND_MIRROR);
            }
            b.retain(|j| at(j) != FREE);
            if !b.is_empty() {
                let wanted = b.len() as u64;
                match Self::send_all(&mut self.tx, b) {
                    Ok((sent, bytes, failed)) => {
                        // As on the copying path (shared adds: another TX thread may count
                        // this queue's settled frames).
                        c.tx_frames.add_shared(sent);
                        c.tx_bytes.add_shared(bytes);
                        c.drops[DropReason::TxError as usize].add_shared(failed);
                        self.out.frames += sent;
                        self.out.bytes += bytes;
                        self.out.failed += failed;
                    }
                    Err(e) => {
                        c.drops[DropReason::TxError as usize].add_shared(wanted);
                        self.out.failed += wanted;
                        self.note(e);
                    }
                }
            }
            if let (Some(m), false) = (self.mirror.as_mut(), self.copies.is_empty()) {
                // Copies count in their destination's tally only, as on the copying path.
                match Self::send_all(m, &mut self.copies) {
                    Ok((sent, bytes, failed)) => {
                        self.mirrored.frames += sent;
                        self.mirrored.bytes += bytes;
                        self.mirrored.failed += failed;
                    }
                    Err(e) => self.note(e),
                }
            }
            base += len;
        }
        kept.clear();
        slot.kept = kept;
        self.fates = fates;
    }

    fn finish(mut self: Box<Self>) -> (Vec<OutTally>, Vec<String>) {
        if let Err(e) = self.tx.flush() {
            self.note(e.to_string());
        }
        if let Some(Err(e)) = self.mirror.as_mut().map(TxPort::flush) {
            self.note(e.to_string());
        }
        let mut tallies = vec![self.out.clone()];
        if self.mirror.is_some() {
            tallies.push(self.mirrored.clone());
        }
        (tallies, std::mem::take(&mut self.errors))
    }
}
