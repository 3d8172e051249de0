//! Sending received mbufs themselves, a burst split by output port: the one way both zero-copy
//! paths send (the CPU executor's workers, `executor::cpu::zero_copy`; the GPU executor's TX
//! threads, `daemon::run_gpu::mbufs`), so that they count and free alike.
//!
//! An error follows the copying path's rule (`port::out::Dest`): after a port's first error it
//! is not called again; every frame offered to it from then on is freed and counts as failed
//! (the caller counts failed frames `tx_error`). The other ports of the burst are still sent.

use super::{DpdkTx, MbufBurst};
use crate::port::out::OutRoute;
use crate::port::{PortError, TxPort};

/// Where a frame of a burst goes: nowhere (it is freed), else its output port index.
pub const NOWHERE: u16 = u16::MAX;

/// What a send of mbufs took: the frames the device took, the bytes handed to the port (as the
/// copying path counts `tx_bytes`), and the frames not sent (freed: the device full after the
/// retries, a chain the device cannot send, or the port's error).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BurstSent {
    pub sent: u64,
    pub bytes: u64,
    pub failed: u64,
}

impl BurstSent {
    /// Adds `other`, field by field.
    pub fn add(&mut self, other: BurstSent) {
        self.sent += other.sent;
        self.bytes += other.bytes;
        self.failed += other.failed;
    }
}

impl DpdkTx {
    /// Sends every frame of `burst` ([`DpdkTx::tx_mbufs`]; the burst is empty afterwards) and
    /// says what it took. On an error the burst is freed: nothing of it was sent.
    pub fn send_burst(&mut self, burst: &mut MbufBurst) -> Result<BurstSent, PortError> {
        let (wanted, bytes) = (burst.len(), burst.bytes());
        match self.tx_mbufs(burst) {
            Ok(out) => {
                let sent = out.sent.min(wanted);
                Ok(BurstSent {
                    sent: sent as u64,
                    bytes,
                    failed: (wanted - sent) as u64,
                })
            }
            Err(e) => {
                burst.clear();
                Err(e)
            }
        }
    }
}

/// One port's TX queue for mbufs, and whether it has failed (see the module doc).
pub struct MbufDest {
    tx: DpdkTx,
    failed: bool,
}

impl MbufDest {
    pub fn new(tx: DpdkTx) -> Self {
        MbufDest { tx, failed: false }
    }

    /// Sends every frame of `burst` (empty afterwards): what it took, and the error when this
    /// call met the port's first one (the frames offered then count as failed).
    pub fn send(&mut self, burst: &mut MbufBurst) -> (BurstSent, Option<PortError>) {
        let wanted = burst.len() as u64;
        let all_failed = BurstSent {
            failed: wanted,
            ..BurstSent::default()
        };
        if wanted == 0 {
            return (BurstSent::default(), None);
        }
        if self.failed {
            burst.clear();
            return (all_failed, None);
        }
        match self.tx.send_burst(burst) {
            Ok(took) => (took, None),
            Err(e) => {
                self.failed = true;
                (all_failed, Some(e))
            }
        }
    }

    /// Lets the driver free what it has sent ([`TxPort::flush`]).
    pub fn flush(&mut self) -> Result<(), PortError> {
        self.tx.flush()
    }
}

/// A TX queue of each output port, by output (`out_port`) index (`None`: the port has no
/// transmit side), and the scratch to split a burst among them.
pub struct MbufOuts {
    ports: Vec<Option<MbufDest>>,
    part: MbufBurst,
}

impl MbufOuts {
    pub fn new(ports: Vec<Option<DpdkTx>>) -> Self {
        MbufOuts {
            ports: ports.into_iter().map(|t| t.map(MbufDest::new)).collect(),
            part: MbufBurst::new(),
        }
    }

    /// How many output indices there are (open or not).
    pub fn len(&self) -> usize {
        self.ports.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// Whether output `k` has a transmit side.
    pub fn is_open(&self, k: usize) -> bool {
        self.ports.get(k).is_some_and(Option::is_some)
    }

    /// The open outputs' queues (to flush them).
    pub fn dests_mut(&mut self) -> impl Iterator<Item = &mut MbufDest> {
        self.ports.iter_mut().flatten()
    }

    /// Where a forwarded frame with `out_port` goes by `route`: its output index, or
    /// [`NOWHERE`]: no default output (released uncounted, as on the copying path), or a port
    /// with no transmit side (`*lost += 1`: a `tx_error` drop for the caller to count, as on the
    /// copying path).
    pub(crate) fn dest(&self, route: OutRoute, out_port: u16, lost: &mut u64) -> u16 {
        match route.target(out_port) {
            Some(k) if self.is_open(k) => k as u16,
            Some(_) => {
                *lost += 1;
                NOWHERE
            }
            None => NOWHERE,
        }
    }

    /// Sends each frame of `burst` on the output `dest` names (one entry per frame, in burst
    /// order; [`NOWHERE`]: freed, the caller has counted it): the whole burst at once when one
    /// port takes all of it, else one part per port, moved out in turn
    /// ([`MbufBurst::move_into`]: pointers move, nothing is copied). `on_sent(k, took)` for each
    /// part offered to output `k`. Every part is offered (an error stops only its own port);
    /// returns the first error met. `burst` and `dest` are empty afterwards.
    pub fn send(
        &mut self,
        burst: &mut MbufBurst,
        dest: &mut Vec<u16>,
        mut on_sent: impl FnMut(usize, BurstSent),
    ) -> Result<(), PortError> {
        dest.truncate(burst.len());
        burst.retain(|i| dest.get(i).is_some_and(|d| *d != NOWHERE));
        dest.retain(|d| *d != NOWHERE);
        let mut first = None;
        while let Some(&k) = dest.first() {
            let to_send = if dest.iter().all(|d| *d == k) {
                dest.clear();
                &mut *burst
            } else {
                let d = &*dest;
                burst.move_into(&mut self.part, |i| d[i] == k);
                dest.retain(|d| *d != k);
                &mut self.part
            };
            let k = usize::from(k);
            let Some(Some(out)) = self.ports.get_mut(k) else {
                // Not open: `dest` gives none such (see `MbufOuts::dest`).
                to_send.clear();
                continue;
            };
            let (took, error) = out.send(to_send);
            on_sent(k, took);
            if first.is_none() {
                first = error;
            }
        }
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
impl MbufOuts {
    /// Output `k` as after its first error (tests: the error itself cannot be provoked).
    pub(crate) fn fail(&mut self, k: usize) {
        if let Some(Some(d)) = self.ports.get_mut(k) {
            d.failed = true;
        }
    }
}

#[cfg(test)]
#[path = "send_tests.rs"]
mod tests;
