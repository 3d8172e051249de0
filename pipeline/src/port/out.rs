//! Where every verdict's frames go (the TX side of a run): `pass` to the frame's output port
//! (`Verdict::out_port`: an index into the config's ports with a transmit side, or the default
//! output), `mirror` to its output port and a copy to the mirror port, `to_host` to the
//! slow-path port (a pcap file, a TAP device, a port of the config, or a library callback),
//! `drop` nowhere. Each destination counts what it took ([`OutTally`]).

use crate::port::{PortError, Settled, TxPort, TxSent, WireFrame};
use crate::verdict::{Action, Verdict};

/// The destinations of a run.
#[derive(Default)]
pub struct OutPorts {
    /// Output ports by `out_port` index (`Config::tx_port_names` order); `None` where not open.
    pub ports: Vec<Option<Box<dyn TxPort>>>,
    /// Their config names (same order), for the summary.
    pub names: Vec<String>,
    /// The index of `output.port`, where frames with `Verdict::OUT_DEFAULT` go; `None`: they
    /// are counted and released.
    pub default: Option<usize>,
    /// A copy of every `mirror` frame.
    pub mirror: Option<Box<dyn TxPort>>,
    /// Every `to_host` frame (the slow path).
    pub to_host: Option<Box<dyn TxPort>>,
    /// Every forwarded frame to the default output, whatever its `out_port` ([`Self::single`]:
    /// a caller that opened one port for all).
    pub all_to_default: bool,
}

impl OutPorts {
    /// One output port taking every forwarded frame (or none).
    pub fn single(tx: Option<Box<dyn TxPort>>) -> Self {
        let name = tx.as_ref().map(|t| t.name().to_string());
        OutPorts {
            default: tx.as_ref().map(|_| 0),
            names: name.into_iter().collect(),
            ports: vec![tx].into_iter().flatten().map(Some).collect(),
            mirror: None,
            to_host: None,
            all_to_default: true,
        }
    }

    /// Whether nothing is open (no TX thread needed).
    pub fn is_empty(&self) -> bool {
        self.ports.iter().all(Option::is_none) && self.mirror.is_none() && self.to_host.is_none()
    }

    /// The output port index a forwarded frame goes to, if that port is open.
    #[inline]
    pub fn target(&self, v: &Verdict) -> Option<usize> {
        if v.out_port == Verdict::OUT_DEFAULT || self.all_to_default {
            self.default
        } else {
            Some(usize::from(v.out_port))
        }
    }
}

impl OutPorts {
    /// The destinations for `n` TX threads (one per worker queue; `n` <= 1: these, as they
    /// are). Each thread gets, per destination, a sender of its own where the backend gives one
    /// per TX queue ([`TxPort::queue_senders`]: DPDK, TX queue q for queue q's thread), else a
    /// share of the one sender ([`SharedTx`]: a pcap file writer, a TAP device, a callback).
    /// `Err` names the port that has fewer TX queues than threads.
    pub fn per_queue(self, n: usize) -> Result<Vec<OutPorts>, String> {
        if n <= 1 {
            return Ok(vec![self]);
        }
        let mut lanes: Vec<OutPorts> = (0..n)
            .map(|_| OutPorts {
                ports: Vec::new(),
                names: self.names.clone(),
                default: self.default,
                mirror: None,
                to_host: None,
                all_to_default: self.all_to_default,
            })
            .collect();
        for (k, p) in self.ports.into_iter().enumerate() {
            let role = format!("output port `{}`", self.names.get(k).map_or("?", |s| s));
            for (lane, s) in lanes.iter_mut().zip(split_sender(p, n, &role)?) {
                lane.ports.push(s);
            }
        }
        for (lane, s) in lanes
            .iter_mut()
            .zip(split_sender(self.mirror, n, "mirror port")?)
        {
            lane.mirror = s;
        }
        for (lane, s) in lanes
            .iter_mut()
            .zip(split_sender(self.to_host, n, "to_host port")?)
        {
            lane.to_host = s;
        }
        Ok(lanes)
    }
}

/// `n` senders of one destination (or `n` times none).
fn split_sender(
    p: Option<Box<dyn TxPort>>,
    n: usize,
    role: &str,
) -> Result<Vec<Option<Box<dyn TxPort>>>, String> {
    let Some(p) = p else {
        return Ok((0..n).map(|_| None).collect());
    };
    match p.queue_senders(n) {
        Some(Ok(v)) if v.len() == n => Ok(v.into_iter().map(Some).collect()),
        Some(Ok(v)) => Err(format!(
            "{role} ({}): {} senders for {n} TX threads",
            p.name(),
            v.len()
        )),
        Some(Err(e)) => Err(format!("{role} ({}): {e}", p.name())),
        None => {
            tracing::info!(
                event = "tx_threads",
                port = %p.name(),
                sender = "shared",
                "{role} ({}): one sender shared by {n} TX threads, each queue's frames in its order",
                p.name()
            );
            let shared = SharedTx::new(p);
            Ok((0..n)
                .map(|_| Some(Box::new(shared.clone()) as Box<dyn TxPort>))
                .collect())
        }
    }
}

/// One sender shared by the TX threads of several queues, behind a lock: for a backend that
/// cannot take concurrent senders (a pcap file writer, a TAP device, a callback). Each thread
/// sends its queue's bursts whole under the lock, in its queue's order; bursts of different
/// queues interleave in the order the threads took the lock (as frames of different queues
/// do on any port). Flushed by every thread at its end (a flush with nothing new is a no-op).
#[derive(Clone)]
pub struct SharedTx {
    name: String,
    port: std::sync::Arc<std::sync::Mutex<Box<dyn TxPort>>>,
}

impl SharedTx {
    pub fn new(port: Box<dyn TxPort>) -> Self {
        SharedTx {
            name: port.name().to_string(),
            port: std::sync::Arc::new(std::sync::Mutex::new(port)),
        }
    }

    /// The sender, also after a thread panicked holding it (its state is a port's, valid
    /// between calls).
    fn lock(&self) -> std::sync::MutexGuard<'_, Box<dyn TxPort>> {
        self.port.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl TxPort for SharedTx {
    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        self.lock().tx_burst(frames)
    }
    fn tx_burst_timed(
        &mut self,
        frames: &mut dyn Iterator<Item = crate::port::TimedFrame<'_>>,
    ) -> Result<TxSent, PortError> {
        self.lock().tx_burst_timed(frames)
    }
    fn tx_burst_queued(
        &mut self,
        frames: &mut dyn Iterator<Item = crate::port::TimedFrame<'_>>,
        queue: u16,
    ) -> Result<TxSent, PortError> {
        self.lock().tx_burst_queued(frames, queue)
    }
    fn tx_burst_wire(
        &mut self,
        frames: &mut dyn Iterator<Item = WireFrame<'_>>,
        queue: u16,
    ) -> Result<TxSent, PortError> {
        self.lock().tx_burst_wire(frames, queue)
    }
    fn tx_poll(&mut self) -> Result<(), PortError> {
        self.lock().tx_poll()
    }
    /// Whichever thread asks takes what settled; each entry names its queue, so the queue
    /// counters stay exact.
    fn take_settled(&mut self, out: &mut Vec<Settled>) {
        self.lock().take_settled(out)
    }
    fn flush(&mut self) -> Result<(), PortError> {
        self.lock().flush()
    }
    fn name(&self) -> &str {
        &self.name
    }
}

/// The tallies of several TX threads as one per destination (same role and name: summed), in
/// the order each destination first appears.
pub(crate) fn merge_tallies(per_thread: Vec<Vec<OutTally>>) -> Vec<OutTally> {
    let mut out: Vec<OutTally> = Vec::new();
    for t in per_thread.into_iter().flatten() {
        match out
            .iter_mut()
            .find(|o| o.role == t.role && o.name == t.name)
        {
            Some(o) => {
                o.frames += t.frames;
                o.bytes += t.bytes;
                o.failed += t.failed;
            }
            None => out.push(t),
        }
    }
    out
}

/// What one destination took over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct OutTally {
    /// `output` (an output port), `mirror` or `to_host`.
    pub role: &'static str,
    /// The config's port name, or the slow-path port's own name (`pcap:slow.pcap`).
    pub name: String,
    pub frames: u64,
    pub bytes: u64,
    /// Frames it was asked to take and did not (a write error, a full device).
    pub failed: u64,
}

/// What one `Dest::send` did: frames asked for, sent (with their bytes), held by the port
/// for their send time (`held`: counted once settled, `Destinations::poll`), and refused for a
/// send time beyond what the port holds (`too_far`: `tx_horizon` drops); the rest of `wanted`
/// the port did not take (`tx_error`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    pub wanted: u64,
    pub sent: u64,
    pub bytes: u64,
    pub held: u64,
    pub too_far: u64,
}

impl Sent {
    /// Frames neither taken nor held nor refused for their time: `tx_error` drops.
    pub fn failed(&self) -> u64 {
        self.wanted - self.sent - self.held - self.too_far
    }
}

/// Counts held frames where they settled: sent (`tx_frames`, `tx_bytes`) or not (`tx_error`)
/// for the queue each came from. Called by the TX thread, the one writer of the TX counters.
pub(crate) fn count_settled(
    counters: &[std::sync::Arc<crate::counters::QueueCounters>],
    settled: &[Settled],
) {
    for s in settled {
        if let Some(c) = counters.get(usize::from(s.queue)) {
            c.tx_frames.add_shared(s.sent);
            c.tx_bytes.add_shared(s.bytes);
            c.drops[crate::verdict::DropReason::TxError as usize].add_shared(s.failed);
        }
    }
}

/// One destination's writer state in the TX thread: counts, and the first error (after which
/// the port is not called again; its frames count as failed).
pub(crate) struct Dest<'a> {
    pub port: &'a mut dyn TxPort,
    pub tally: OutTally,
    pub error: Option<String>,
}

impl<'a> Dest<'a> {
    pub fn new(role: &'static str, name: String, port: &'a mut dyn TxPort) -> Self {
        Dest {
            port,
            tally: OutTally {
                role,
                name,
                ..OutTally::default()
            },
            error: None,
        }
    }

    /// Sends the frames of `burst` (of queue `queue`) that `pick` selects, each at its
    /// verdict's send time, with its wire length (the TX thread reads bursts through
    /// `executor::tx::TxBurst`).
    #[cfg(test)]
    pub fn send(
        &mut self,
        queue: u16,
        burst: &crate::burst::Burst,
        verdicts: &[Verdict],
        pick: impl Fn(&Verdict) -> bool,
    ) -> Sent {
        self.send_frames(queue, || {
            burst
                .frames()
                .zip(verdicts.iter())
                .filter(|(_, v)| pick(v))
                .map(|((d, f), v)| (f, v.send_ns, d.wire_len))
        })
    }

    /// Sends the frames of queue `queue` that `chosen()` yields with their send times and wire
    /// lengths (called more than once: it must yield the same frames each time).
    pub fn send_frames<'f, I>(&mut self, queue: u16, chosen: impl Fn() -> I) -> Sent
    where
        I: Iterator<Item = WireFrame<'f>>,
    {
        let wanted = chosen().count() as u64;
        if wanted == 0 {
            return Sent::default();
        }
        if self.error.is_some() {
            self.tally.failed += wanted;
            return Sent {
                wanted,
                ..Sent::default()
            };
        }
        let mut frames = chosen();
        let got = match self.port.tx_burst_wire(&mut frames, queue) {
            Ok(t) => t,
            Err(e) => {
                self.error = Some(format!("{}: {e}", self.port.name()));
                TxSent::default()
            }
        };
        let sent = (got.sent as u64).min(wanted);
        let held = (got.held as u64).min(wanted - sent);
        let too_far = (got.too_far as u64).min(wanted - sent - held);
        // The bytes of the frames taken, not of those asked for.
        let bytes = got.bytes.unwrap_or_else(|| {
            chosen()
                .take(sent as usize)
                .map(|(f, _, _)| f.len() as u64)
                .sum()
        });
        self.tally.frames += sent;
        self.tally.bytes += bytes;
        self.tally.failed += wanted - sent - held;
        Sent {
            wanted,
            sent,
            bytes,
            held,
            too_far,
        }
    }

    /// Takes what became of the frames the port held (into this tally, and onto `out`).
    fn settle(&mut self, out: &mut Vec<Settled>) {
        let first = out.len();
        self.port.take_settled(out);
        for s in &out[first..] {
            self.tally.frames += s.sent;
            self.tally.bytes += s.bytes;
            self.tally.failed += s.failed;
        }
    }

    /// Lets the port send what it holds and is now due ([`TxPort::tx_poll`]); what became of
    /// held frames goes onto `settled`.
    pub fn poll(&mut self, settled: &mut Vec<Settled>) {
        if self.error.is_none() {
            if let Err(e) = self.port.tx_poll() {
                self.error = Some(format!("{}: {e}", self.port.name()));
            }
        }
        self.settle(settled);
    }

    /// Flushes (the port sends what it still holds); the error (if any) is kept, and what
    /// became of held frames goes onto `settled`.
    pub fn finish(mut self, settled: &mut Vec<Settled>) -> (OutTally, Option<String>) {
        if let Err(e) = self.port.flush() {
            self.error
                .get_or_insert_with(|| format!("{}: {e}", self.port.name()));
        }
        self.settle(settled);
        (self.tally, self.error)
    }
}

/// Every destination of a run in its TX thread: the open output ports (by `out_port` index),
/// the mirror port and the slow path, each a [`Dest`], and where a forwarded frame goes.
pub(crate) struct Destinations<'a> {
    pub ports: Vec<(usize, Dest<'a>)>,
    pub mirror: Option<Dest<'a>>,
    pub slow: Option<Dest<'a>>,
    /// Which `out_port` indices have an open port.
    open: Vec<bool>,
    /// Where a forwarded frame goes (a copy, to use while the ports are borrowed).
    pub route: OutRoute,
}

/// Where a forwarded frame goes, by its `out_port`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OutRoute {
    default: Option<usize>,
    all_to_default: bool,
}

impl OutRoute {
    /// Frames with `Verdict::OUT_DEFAULT` (or every frame: `all_to_default`) go to `default`.
    pub fn new(default: Option<usize>, all_to_default: bool) -> Self {
        OutRoute {
            default,
            all_to_default,
        }
    }

    /// The output port index a forwarded frame with this `out_port` goes to.
    #[inline]
    pub fn target(self, out_port: u16) -> Option<usize> {
        if out_port == Verdict::OUT_DEFAULT || self.all_to_default {
            self.default
        } else {
            Some(usize::from(out_port))
        }
    }
}

impl<'a> Destinations<'a> {
    pub fn new(out: &'a mut OutPorts) -> Self {
        let open = out.ports.iter().map(Option::is_some).collect();
        let mut ports = Vec::new();
        for (k, (p, name)) in out.ports.iter_mut().zip(&out.names).enumerate() {
            if let Some(p) = p {
                ports.push((k, Dest::new("output", name.clone(), p.as_mut())));
            }
        }
        let mirror = out
            .mirror
            .as_mut()
            .map(|p| Dest::new("mirror", p.name().to_string(), p.as_mut()));
        let slow = out
            .to_host
            .as_mut()
            .map(|p| Dest::new("to_host", p.name().to_string(), p.as_mut()));
        Destinations {
            ports,
            mirror,
            slow,
            open,
            route: OutRoute::new(out.default, out.all_to_default),
        }
    }

    /// Whether output port `k` is open (a forwarded frame to a closed one is not sent).
    #[inline]
    pub fn is_open(&self, k: usize) -> bool {
        self.open.get(k).copied().unwrap_or(false)
    }

    /// Lets every destination send what it holds and is now due (software pacing); the
    /// output ports' held frames that settled go onto `settled` (for the queue counters; the
    /// mirror's and the slow path's count in their tallies only).
    pub fn poll(&mut self, settled: &mut Vec<Settled>) {
        for (_, d) in self.ports.iter_mut() {
            d.poll(settled);
        }
        let mut copies = Vec::new();
        for d in self.mirror.iter_mut().chain(self.slow.iter_mut()) {
            d.poll(&mut copies);
        }
    }

    /// Flushes every destination: what each took and the ports' errors; the output ports'
    /// held frames settled meanwhile go onto `settled`.
    pub fn finish(self, settled: &mut Vec<Settled>) -> (Vec<OutTally>, Vec<String>) {
        let (mut tallies, mut errors) = (Vec::new(), Vec::new());
        let mut copies = Vec::new();
        for (_, d) in self.ports {
            let (t, e) = d.finish(settled);
            tallies.push(t);
            errors.extend(e);
        }
        for d in self.mirror.into_iter().chain(self.slow) {
            let (t, e) = d.finish(&mut copies);
            tallies.push(t);
            errors.extend(e);
        }
        (tallies, errors)
    }
}

/// Whether a verdict sends the frame to an output port.
#[inline]
pub fn forwards(v: &Verdict) -> bool {
    v.action.forwards()
}

/// Whether a verdict copies the frame to the mirror port.
#[inline]
pub fn mirrors(v: &Verdict) -> bool {
    v.action == Action::Mirror
}

/// Whether a verdict sends the frame to the slow path.
#[inline]
pub fn to_host(v: &Verdict) -> bool {
    v.action == Action::ToHost
}

/// A slow-path (or any) port that hands each frame to a function of the library user's
/// (`to_host` frames to the application: an ARP or routing daemon, a logger). The function runs
/// on the TX thread, so it must be quick.
pub struct CallbackTx {
    name: String,
    f: FrameFn,
}

/// The function a [`CallbackTx`] calls with each frame.
pub type FrameFn = Box<dyn FnMut(&[u8]) + Send>;

impl CallbackTx {
    pub fn new(name: impl Into<String>, f: impl FnMut(&[u8]) + Send + 'static) -> Self {
        CallbackTx {
            name: name.into(),
            f: Box::new(f),
        }
    }
}

impl TxPort for CallbackTx {
    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        let mut n = 0;
        for f in frames {
            (self.f)(f);
            n += 1;
        }
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::burst::{Burst, FrameDesc};
    use crate::verdict::DropReason;
    use std::sync::{Arc, Mutex};

    /// Takes at most `cap` frames per call; errors once `fail_after` frames were taken.
    struct Limited {
        got: Arc<Mutex<Vec<Vec<u8>>>>,
        cap: usize,
        fail_after: usize,
    }

    impl TxPort for Limited {
        fn tx_burst(
            &mut self,
            frames: &mut dyn Iterator<Item = &[u8]>,
        ) -> Result<usize, PortError> {
            let mut g = self.got.lock().unwrap();
            if g.len() >= self.fail_after {
                return Err(PortError::Config("device gone".into()));
            }
            let mut n = 0;
            for f in frames.take(self.cap) {
                g.push(f.to_vec());
                n += 1;
            }
            Ok(n)
        }
        fn flush(&mut self) -> Result<(), PortError> {
            Ok(())
        }
        fn name(&self) -> &str {
            "limited"
        }
    }

    #[test]
    fn dest_counts_what_the_port_took() {
        let mut b = Burst::default();
        let mut v = Vec::new();
        for i in 0..6u8 {
            b.push(&vec![i; 10 + usize::from(i)], FrameDesc::default());
            v.push(match i % 3 {
                0 => Verdict::PASS,
                1 => Verdict {
                    action: Action::ToHost,
                    ..Verdict::PASS
                },
                _ => Verdict::drop(DropReason::AclDrop),
            });
        }
        let got = Arc::new(Mutex::new(Vec::new()));
        let mut port = Limited {
            got: Arc::clone(&got),
            cap: 1,
            fail_after: 3,
        };
        let mut d = Dest::new("to_host", "slow".into(), &mut port);
        // Frames 1 and 4 go to the host; the port takes one a call.
        let tup = |s: Sent| (s.wanted, s.sent, s.bytes);
        assert_eq!(tup(d.send(0, &b, &v, to_host)), (2, 1, 11));
        assert_eq!(tup(d.send(0, &b, &v, to_host)), (2, 1, 11));
        assert_eq!(got.lock().unwrap().len(), 2);
        // Third call: the port fails; after it, the port is not called again.
        assert_eq!(tup(d.send(0, &b, &v, to_host)), (2, 1, 11));
        assert_eq!(tup(d.send(0, &b, &v, to_host)), (2, 0, 0));
        assert_eq!(tup(d.send(0, &b, &v, to_host)), (2, 0, 0));
        let (t, e) = d.finish(&mut Vec::new());
        assert_eq!((t.frames, t.bytes, t.failed), (3, 33, 7));
        assert!(e.unwrap().contains("device gone"));
        // A callback gets exactly the selected frames.
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = Arc::clone(&seen);
        let mut cb = CallbackTx::new("cb", move |f: &[u8]| s2.lock().unwrap().push(f[0]));
        let mut d = Dest::new("output", "cb".into(), &mut cb);
        assert_eq!(tup(d.send(0, &b, &v, forwards)), (2, 2, 23));
        assert_eq!(*seen.lock().unwrap(), vec![0, 3]);
    }

    #[test]
    fn targets() {
        let o = OutPorts {
            default: Some(1),
            ..OutPorts::default()
        };
        assert_eq!(o.target(&Verdict::PASS), Some(1));
        let v = Verdict {
            out_port: 3,
            ..Verdict::PASS
        };
        assert_eq!(o.target(&v), Some(3));
        assert!(OutPorts::single(None).is_empty());
        let mut one = OutPorts::single(Some(Box::new(CallbackTx::new("x", |_: &[u8]| {}))));
        assert_eq!(
            one.target(&v),
            Some(0),
            "one port for all takes every frame"
        );
        one.all_to_default = false;
        assert_eq!(one.target(&v), Some(3));
        assert_eq!(OutPorts::default().target(&Verdict::PASS), None);
    }
}
