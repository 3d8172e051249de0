//! A DPDK port split by RX queue, as dpdk-l3fwd runs an lcore per queue: each RX queue is
//! polled by its own receive thread (`rte_eth_rx_burst` on its queue id), whose frames go to
//! the pipeline queue of the same number. The NIC's RSS (or its rte_flow rules, when it took
//! the config's steering rule set) spreads the frames over the RX queues; a device that does
//! not hash (net_null, net_ring, memif) gives each RX queue what arrives on it. No thread
//! serves every queue of the port.
//!
//! Mbuf lifetime: a queue's handle copies each frame into its pipeline queue's burst and frees
//! the mbufs within the same call (as the one-thread path does); each handle holds the port,
//! so the device and its pools outlive every receive thread.

use std::sync::Arc;

use super::{eal, DpdkRx};
use crate::burst::Burst;
use crate::port::{PortError, QueueRx, QueueTally, RxStatus};
use crate::steer::Steering;

/// The receive side of one RX queue of a split DPDK port.
pub struct DpdkQueueRx {
    name: String,
    queue: u16,
    rx: DpdkRx,
}

impl DpdkRx {
    /// Why this handle cannot be received by one thread per RX queue, feeding `nq` pipeline
    /// queues steered by `steering` (`None`: it can).
    fn split_refusal(&mut self, steering: &Steering, nq: usize) -> Option<String> {
        let setup = &self.port.inner.setup;
        let rxq = usize::from(setup.rx_queues);
        let all: Vec<u16> = (0..setup.rx_queues).collect();
        if self.queues != all {
            return Some(format!(
                "the handle polls RX queues {:?} of {rxq} only",
                self.queues
            ));
        }
        if rxq != nq {
            return Some(format!(
                "the port has {rxq} RX queues (dpdk.rx_queues) and queues.count is {nq}: each RX \
                 queue's thread feeds the pipeline queue of its number, so they must be equal"
            ));
        }
        if steering.has_rules() && !self.port.steered_in_nic() {
            return Some(
                "the config's steering rules are applied in software (the NIC did not take \
                 them): one thread steers every frame to its queue"
                    .into(),
            );
        }
        if nq > 1 && steering.by_flow() {
            return Some(
                "conntrack steers by flow key (both directions to one queue), which the \
                 NIC's RSS does not"
                    .into(),
            );
        }
        if !self.steering.load().is_empty() {
            return Some(
                "steering rules the NIC refused are applied in software on this port".into(),
            );
        }
        None
    }

    /// One handle per RX queue (queue q feeds pipeline queue q); `Err(why)` leaves this
    /// handle as it was, received by one thread.
    pub(super) fn split(
        &mut self,
        steering: &Arc<Steering>,
        nq: usize,
    ) -> Result<Vec<DpdkQueueRx>, String> {
        if let Some(why) = self.split_refusal(steering, nq) {
            return Err(why);
        }
        let mut out = Vec::with_capacity(nq);
        for q in 0..nq as u16 {
            let rx = self.port.rx(&[q]).map_err(|e| e.to_string())?;
            out.push(DpdkQueueRx {
                name: format!("{}#q{q}", self.label),
                queue: q,
                rx,
            });
        }
        Ok(out)
    }
}

impl QueueRx for DpdkQueueRx {
    fn rx_queue(
        &mut self,
        burst: &mut Burst,
        max: usize,
        room: usize,
        tally: &mut QueueTally,
    ) -> Result<RxStatus, PortError> {
        eal::register_thread();
        let before = burst.len();
        let got = if max == 0 {
            0
        } else {
            self.rx.poll_queue(self.queue, burst, max, room)
        };
        if got == 0 {
            return Ok(self.rx.idle_status());
        }
        let fresh = &mut burst.descs[before..];
        let mut bytes = 0u64;
        for d in fresh.iter_mut() {
            // The frame is on this queue's thread: a queue fate of a rule installed in
            // software after the split cannot move it (its drop and mark still apply).
            d.queue = self.queue;
            bytes += u64::from(d.len);
        }
        tally.rx_frames += fresh.len() as u64;
        tally.rx_bytes += bytes;
        Ok(RxStatus::Frames(fresh.len()))
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn queue(&self) -> u16 {
        self.queue
    }
}
