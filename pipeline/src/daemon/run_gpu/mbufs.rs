//! DPDK in and out on the GPU executor, the received mbufs sent themselves (cargo feature
//! `dpdk`): each queue's receive thread polls its own RX queue of its input port (every
//! receiving port is a DPDK port; each splits by RX queue, one receive thread per port and
//! queue, `DpdkRx::rx_mbufs`), copies each frame into the slot burst the GPU runs (the GPU
//! needs the bytes in its slot) and keeps the mbuf with the slot ([`Kept`]) instead of freeing
//! it. Once the burst is reaped, its TX thread frees the mbufs of the frames the verdicts drop
//! in bulk and hands each forwarded one to its own TX queue of the output port its `out_port`
//! names (`DpdkTx::tx_mbufs`, a burst split by port with `MbufBurst::move_into`, DPDK l3fwd
//! style): the mbuf sent is the mbuf received. A frame routed to a port with no transmit side
//! is a `tx_error` drop, as on the copying path. The sends are `port::dpdk::send`'s, as the CPU
//! executor's: a port whose send failed is not called again by this TX thread (its frames
//! from then on count `tx_error`), as the copying TX thread treats it. A `mirror` frame goes to the mirror port as a
//! second reference to the same mbuf (the mirror port may receive too). A rewriting pipeline's
//! frames are copied back from the GPU slot into their mbufs first (`MbufBurst::write_frame`:
//! one copy per frame sent, not zero); frames no stage changed are sent as received (no copy
//! on the TX side). An input whose RX pool is pinned host memory mapped for the GPU
//! (`gpu_buffers: pinned`) is not copied at all: its receive threads put each frame's pool
//! address in the slot (`ingest::run_pinned`) and keep its mbuf the same way. Every output port
//! must be a DPDK port (else [`plan`] refuses: a frame for
//! another port would need the copying TX beside this one, and its mbuf freed apart).

use super::{tx::SlotSender, Slot};
use crate::counters::QueueCounters;
use crate::daemon::OpenPorts;
use crate::executor::gpu::abi::{self, TxDesc};
use crate::port::dpdk::{BurstSent, DpdkPort, MbufBurst, MbufDest, MbufOuts, NOWHERE};
use crate::port::out::{OutRoute, OutTally};
use crate::verdict::DropReason;

/// The ports of a run whose received mbufs are sent themselves.
#[derive(Clone)]
pub(crate) struct MbufPlan {
    /// Every receiving port, by input index (config order).
    pub rx: Vec<DpdkPort>,
    /// The output ports by `out_port` index (`Config::tx_port_names` order); `None` where no
    /// transmit side is open (frames routed there are `tx_error` drops).
    pub tx: Vec<Option<DpdkPort>>,
    /// The index of `output.port` (where `OUT_DEFAULT` frames go); `None`: such frames are
    /// released uncounted, as on the copying path.
    pub default: Option<usize>,
    pub mirror: Option<DpdkPort>,
}

impl MbufPlan {
    /// The ports' names, `a,b` (for the log).
    pub fn names(ports: &[&DpdkPort]) -> String {
        let v: Vec<&str> = ports.iter().map(|p| p.setup().name.as_str()).collect();
        v.join(",")
    }

    /// The open output ports.
    pub fn outputs(&self) -> Vec<&DpdkPort> {
        self.tx.iter().flatten().collect()
    }
}

/// The plan for `p` over `ports` (input, output and mirror DPDK ports), or why not. Whether
/// each input port splits by RX queue (one receive thread per queue, each on its own RX queue)
/// is checked with the receive threads (`host::feeds`); a port that does not runs the copying
/// path (its slots keep no mbufs).
pub(crate) fn plan(p: &crate::daemon::Prepared, ports: &OpenPorts) -> Result<MbufPlan, String> {
    let nq = p.cfg.queues.count as usize;
    let tx_queues = if p.rx_threads().tx_per_queue { nq } else { 1 };
    if ports.out.to_host.is_some() {
        return Err("output.to_host is set (the slow path takes copies)".into());
    }
    let mut rx = Vec::with_capacity(ports.dpdk_rx.len());
    for (i, port) in ports.dpdk_rx.iter().enumerate() {
        match port {
            Some(port) => rx.push(port.clone()),
            None => {
                let name = ports.rx_names.get(i).map_or("?", String::as_str);
                return Err(format!("the input port {name} is not a DPDK port"));
            }
        }
    }
    if rx.is_empty() {
        return Err("no input port".into());
    }
    // Open: placed as an output (the default may still be in `ports.tx`).
    let open = |k: usize| {
        ports.out.ports.get(k).is_some_and(Option::is_some)
            || (ports.out.default == Some(k) && ports.tx.is_some())
    };
    let mut tx = Vec::with_capacity(ports.out.names.len());
    for (k, name) in ports.out.names.iter().enumerate() {
        let dpdk = ports.dpdk_out.get(k).and_then(Option::as_ref);
        match (open(k), dpdk) {
            (true, None) => return Err(format!("the output port {name} is not a DPDK port")),
            (true, Some(d)) => tx.push(Some(d.clone())),
            (false, _) => tx.push(None),
        }
    }
    let mirror = match (&ports.out.mirror, &ports.dpdk_mirror) {
        (Some(_), None) => return Err("the mirror port is not a DPDK port".into()),
        (_, m) => m.clone(),
    };
    if tx.iter().all(Option::is_none) && mirror.is_none() {
        return Err("no output port".into());
    }
    if p.pipeline
        .stages
        .iter()
        .any(|s| matches!(s, crate::stage::Stage::TxTime(_)))
    {
        return Err("the pipeline sets send times (tx_time: the paced TX path sends them)".into());
    }
    if let Some(port) = rx
        .iter()
        .find(|r| r.buffer_placement() == crate::port::dpdk::BufferPlacement::GpuDirect)
    {
        return Err(format!(
            "the input port {} receives into GPU memory",
            port.setup().name
        ));
    }
    let outs = tx.iter().flatten().map(|t| ("output", t));
    for (what, port) in outs.chain(mirror.iter().map(|m| ("mirror", m))) {
        if usize::from(port.setup().tx_queues) < tx_queues {
            return Err(format!(
                "the {what} port {} has {} TX queues, {tx_queues} TX threads send",
                port.setup().name,
                port.setup().tx_queues
            ));
        }
    }
    Ok(MbufPlan {
        rx,
        tx,
        default: ports.out.default,
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

/// Whether TX entry `d` of a slot whose mbufs were kept is sent as its mbuf (forwarded or
/// mirrored, to any output port: [`plan`] takes only DPDK output ports); the other entries go
/// the copying way ([`Slot`]'s `TxBurst` leaves these out).
pub(crate) fn by_mbuf(d: &TxDesc) -> bool {
    matches!(d.action, abi::ACTION_PASS | abi::ACTION_MIRROR)
}

/// One TX thread's queues of the output and mirror ports, and what they took.
pub(crate) struct MbufSender {
    /// A queue of each output port (by `out_port` index) and what each took.
    outs: MbufOuts,
    tally: Vec<OutTally>,
    route: OutRoute,
    mirror: Option<MbufDest>,
    mirrored: OutTally,
    errors: Vec<String>,
    /// Per frame of the slot: its output port index or [`NOWHERE`], and whether it is
    /// mirrored.
    dest: Vec<u16>,
    mirrors: Vec<bool>,
    /// One kept burst's destinations.
    order: Vec<u16>,
    copies: MbufBurst,
}

impl MbufSender {
    /// TX queue `queue` of the plan's output (and mirror) ports; `names`: the output ports'
    /// names by `out_port` index and the mirror's, as the summary's tallies name them.
    pub fn new(
        plan: &MbufPlan,
        queue: u16,
        names: (&[String], String),
    ) -> Result<MbufSender, String> {
        let tx = plan
            .tx
            .iter()
            .map(|p| p.as_ref().map(|p| p.tx(queue)).transpose())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let mirror = plan
            .mirror
            .as_ref()
            .map(|m| m.tx(queue))
            .transpose()
            .map_err(|e| e.to_string())?;
        let tally = |role, name: &str| OutTally {
            role,
            name: name.to_string(),
            ..OutTally::default()
        };
        let tally = (0..tx.len())
            .map(|k| tally("output", names.0.get(k).map_or("", String::as_str)))
            .collect();
        Ok(MbufSender {
            outs: MbufOuts::new(tx),
            tally,
            route: OutRoute::new(plan.default, false),
            mirror: mirror.map(MbufDest::new),
            mirrored: OutTally {
                role: "mirror",
                name: names.1,
                ..OutTally::default()
            },
            errors: Vec::new(),
            dest: Vec::new(),
            mirrors: Vec::new(),
            order: Vec::new(),
            copies: MbufBurst::new(),
        })
    }

    fn note(&mut self, e: String) {
        if !self.errors.contains(&e) {
            self.errors.push(e);
        }
    }

    /// Each frame's destination from the slot's TX entries (`dest`, `mirrors`); the forwarded
    /// frames routed to a port with no transmit side counted `tx_error`, as on the copying
    /// path.
    fn route(&mut self, slot: &Slot, c: &QueueCounters) {
        let n = slot.burst.len();
        self.dest.clear();
        self.dest.resize(n, NOWHERE);
        self.mirrors.clear();
        self.mirrors.resize(n, false);
        let mut lost = 0u64;
        for d in slot.tx.iter().filter(|d| by_mbuf(d)) {
            let i = usize::from(d.frame);
            if i >= n {
                continue;
            }
            self.mirrors[i] = d.action == abi::ACTION_MIRROR;
            self.dest[i] = self.outs.dest(self.route, d.out_port, &mut lost);
        }
        c.drops[DropReason::TxError as usize].add_shared(lost);
        if self.mirror.is_none() {
            self.mirrors.fill(false);
        }
    }

    /// Rewritten on the GPU: the slot's bytes (or the reap's copy of them) into the mbufs
    /// they arrived in, for each frame that leaves; one that does not fit is not sent.
    fn write_back(&mut self, slot: &Slot, kept: &mut Kept, c: &QueueCounters) {
        let mut base = 0;
        for b in &mut kept.bursts[..kept.used] {
            for d in slot.tx.iter().filter(|d| by_mbuf(d)) {
                let i = usize::from(d.frame);
                let leaves = self.dest.get(i).is_some_and(|k| *k != NOWHERE)
                    || self.mirrors.get(i).copied().unwrap_or(false);
                if !leaves || !(base..base + b.len()).contains(&i) {
                    continue;
                }
                if let Err(e) = b.write_frame(i - base, super::tx::frame_of(slot, d)) {
                    if self.dest[i] != NOWHERE {
                        c.drops[DropReason::TxError as usize].add_shared(1);
                    }
                    (self.dest[i], self.mirrors[i]) = (NOWHERE, false);
                    self.note(e.to_string());
                }
            }
            base += b.len();
        }
    }
}

impl SlotSender for MbufSender {
    fn send(&mut self, slot: &mut Slot, c: &QueueCounters) {
        if !slot.by_mbuf {
            // Its port did not split by RX queue: the copying TX sent it.
            return;
        }
        let mut kept = std::mem::take(&mut slot.kept);
        let n = slot.burst.len();
        if kept.len() != n {
            // Each frame of the burst has its mbuf, in order: anything else is a fault of
            // the ingest; nothing is sent that could be the wrong frame.
            let lost = slot.tx.iter().filter(|d| by_mbuf(d)).count() as u64;
            c.drops[DropReason::TxError as usize].add_shared(lost);
            self.note(format!(
                "{} mbufs kept for a burst of {n} frames",
                kept.len()
            ));
            kept.clear();
            slot.kept = kept;
            return;
        }
        self.route(slot, c);
        if !slot.as_received {
            self.write_back(slot, &mut kept, c);
        }
        let mut base = 0;
        for b in &mut kept.bursts[..kept.used] {
            let len = b.len();
            let mirrors = &self.mirrors;
            if self.mirror.is_some() {
                b.share_into(&mut self.copies, |j| mirrors.get(base + j) == Some(&true));
            }
            // This burst's frames' destinations (a frame past `dest` goes nowhere).
            self.order.clear();
            self.order.extend(self.dest.iter().skip(base).take(len));
            // Counted as the copying path counts (shared adds: another TX thread may count
            // this queue's settled frames).
            let tally = &mut self.tally;
            let sent = self.outs.send(b, &mut self.order, |k, s| {
                c.tx_frames.add_shared(s.sent);
                c.tx_bytes.add_shared(s.bytes);
                c.drops[DropReason::TxError as usize].add_shared(s.failed);
                if let Some(t) = tally.get_mut(k) {
                    add_to(t, s);
                }
            });
            if let Err(e) = sent {
                self.note(e.to_string());
            }
            if let (Some(m), false) = (self.mirror.as_mut(), self.copies.is_empty()) {
                // Copies count in their destination's tally only, as on the copying path.
                let (s, error) = m.send(&mut self.copies);
                add_to(&mut self.mirrored, s);
                if let Some(e) = error {
                    self.note(e.to_string());
                }
            }
            base += len;
        }
        kept.clear();
        slot.kept = kept;
    }

    fn finish(mut self: Box<Self>) -> (Vec<OutTally>, Vec<String>) {
        let mut flushed = Vec::new();
        for t in self.outs.dests_mut().chain(self.mirror.as_mut()) {
            if let Err(e) = t.flush() {
                flushed.push(e.to_string());
            }
        }
        for e in flushed {
            self.note(e);
        }
        let outs = &self.outs;
        let mut tallies: Vec<OutTally> = (self.tally.iter().enumerate())
            .filter(|(k, _)| outs.is_open(*k))
            .map(|(_, t)| t.clone())
            .collect();
        if self.mirror.is_some() {
            tallies.push(self.mirrored.clone());
        }
        (tallies, std::mem::take(&mut self.errors))
    }
}

/// Adds what a send took to a destination's tally.
fn add_to(t: &mut OutTally, s: BurstSent) {
    t.frames += s.sent;
    t.bytes += s.bytes;
    t.failed += s.failed;
}
