//! The TX thread, as in the CPU executor: it writes each queue's forwarded frames to the output
//! port in the order its queue thread reaped them, counts what the port took, and returns the
//! slots to their ingest threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;

use crossbeam_utils::Backoff;

use super::reap::forwarded;
use super::{wait_on, Slot};
use crate::executor::cpu::CpuShared;
use crate::port::TxPort;
use crate::ring::Consumer;
use crate::verdict::{Action, DropReason};

/// Runs until every queue thread is done (`queues_done` reaches the number of queues) and its
/// ring is empty; flushes the port. Returns the port's errors: after the first one, forwarded
/// frames are counted as `tx_error` without calling the port again.
pub(crate) fn run(
    shared: &CpuShared,
    port: &mut dyn TxPort,
    mut inputs: Vec<Consumer<Slot>>,
    frees: Vec<Sender<Slot>>,
    queues_done: &AtomicUsize,
) -> Vec<String> {
    let backoff = Backoff::new();
    let mut errors = Vec::new();
    loop {
        let mut got = false;
        for (q, input) in inputs.iter_mut().enumerate() {
            while let Some(slot) = input.pop() {
                got = true;
                let c = &shared.counters[q];
                let (wanted, bytes) = forwarded(&slot.burst, &slot.verdicts);
                if !errors.is_empty() {
                    c.drops[DropReason::TxError as usize].add_shared(wanted);
                } else if wanted > 0 {
                    let mut frames = slot
                        .burst
                        .frames()
                        .zip(slot.verdicts.iter())
                        .filter(|(_, v)| Action::from_code(v.action).forwards())
                        .map(|((_, f), _)| f);
                    match port.tx_burst(&mut frames) {
                        Ok(sent) => {
                            c.tx_frames.add(sent as u64);
                            // The bytes of the frames written, not of those asked for.
                            let sent_bytes = if sent as u64 >= wanted {
                                bytes
                            } else {
                                slot.burst
                                    .descs
                                    .iter()
                                    .zip(slot.verdicts.iter())
                                    .filter(|(_, v)| Action::from_code(v.action).forwards())
                                    .take(sent)
                                    .map(|(d, _)| d.len as u64)
                                    .sum()
                            };
                            c.tx_bytes.add(sent_bytes);
                            c.drops[DropReason::TxError as usize]
                                .add_shared(wanted.saturating_sub(sent as u64));
                        }
                        Err(e) => {
                            c.drops[DropReason::TxError as usize].add_shared(wanted);
                            errors.push(format!("{}: {e}", port.name()));
                        }
                    }
                }
                let port_idx = slot.port;
                if let Some(f) = frees.get(port_idx) {
                    let _ = f.send(slot);
                }
            }
        }
        if got {
            backoff.reset();
            continue;
        }
        if queues_done.load(Ordering::Acquire) == inputs.len()
            && inputs.iter().all(|i| i.is_empty())
        {
            break;
        }
        wait_on(&backoff);
    }
    if let Err(e) = port.flush() {
        errors.push(format!("{}: {e}", port.name()));
    }
    errors
}
