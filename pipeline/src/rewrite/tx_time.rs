//! `tx_time: { delay_ns: N }`: gives the frame a send time, its receive time plus N
//! nanoseconds (a delay line), in [`Verdict::send_ns`]. The frame's bytes are not changed.
//!
//! The send time is in the clock of the receive timestamps (`FrameDesc::timestamp_ns`: the
//! Unix epoch for DPDK ports and the generator, the capture's own record times for a pcap
//! replay). A frame without a receive time (0) keeps send time 0: send now. The sum saturates
//! at `u64::MAX` (no wrap into the past). A later `tx_time` in the list replaces an earlier
//! one's time.
//!
//! Pacing a queue (frames spaced N ns apart) is not a stage: it needs an order over a queue's
//! frames that the GPU stage (one thread per frame, bursts of a queue on several CTAs) does not
//! have. The CUDA implementation is `pw_stage_tx_time` (`gpu-kernels/cuda/rewrite_stages.cuh`),
//! held equal to this one by `pipeline/tests/rewrite_stage_host.rs`.

use super::config::{ConfigError, TxTimeConfig};
use crate::verdict::Verdict;

/// Largest `delay_ns`: 60 s. A delay line longer than that is a configuration mistake (an
/// output port would hold every frame for a minute or more).
pub const MAX_DELAY_NS: u64 = 60_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxTime {
    pub delay_ns: u64,
}

impl TxTime {
    /// Errors: `delay_ns` above [`MAX_DELAY_NS`] (the message gives the allowed range).
    pub fn new(cfg: &TxTimeConfig) -> Result<Self, ConfigError> {
        if cfg.delay_ns > MAX_DELAY_NS {
            return Err(ConfigError::new(
                "tx_time",
                "delay_ns",
                format!(
                    "{} is out of range (allowed range 0 ..= {MAX_DELAY_NS}, i.e. up to 60 s)",
                    cfg.delay_ns
                ),
            ));
        }
        Ok(TxTime {
            delay_ns: cfg.delay_ns,
        })
    }

    /// The send time of a frame received at `timestamp_ns` (0: unknown, send now).
    #[inline]
    pub fn send_time(&self, timestamp_ns: u64) -> u64 {
        if timestamp_ns == 0 {
            return 0;
        }
        timestamp_ns.saturating_add(self.delay_ns)
    }

    /// Sets the verdict's send time.
    #[inline]
    pub fn apply(&self, timestamp_ns: u64, verdict: &mut Verdict) {
        verdict.send_ns = self.send_time(timestamp_ns);
    }
}

/// The `tx_time` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: crate::stage::descriptor::StageDescriptor =
    crate::stage::descriptor::StageDescriptor {
        name: "tx_time",
        usage: "`tx_time: { delay_ns: N }`",
        summary: "the frame's send time = its receive time + N ns (0 ..= 60 s; a delay line); output ports honour it: pcap writes it as the record time, DPDK sends then (Tx timestamp offload, else paced in software); a frame without a receive time is sent at once",
        needs: crate::stage::descriptor::StageNeeds {
        reads_time: true,
        sets_send_time: true,
        ..crate::stage::descriptor::StageNeeds::NONE
    },
        drop_reasons: &[],
        counters: &[],
        gpu: crate::stage::descriptor::GpuImpl::Library {
        function: "pw_stage_tx_time",
    },
        reloads: false,
    };

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_time_is_arrival_plus_delay() {
        let op = TxTime::new(&TxTimeConfig { delay_ns: 1500 }).unwrap();
        assert_eq!(op.send_time(1_000_000), 1_001_500);
        assert_eq!(op.send_time(0), 0, "no receive time: send now");
        assert_eq!(op.send_time(u64::MAX - 10), u64::MAX, "saturates");
        let mut v = Verdict::PASS;
        op.apply(7, &mut v);
        assert_eq!(v.send_ns, 1507);
        let zero = TxTime::new(&TxTimeConfig { delay_ns: 0 }).unwrap();
        assert_eq!(zero.send_time(42), 42);
        assert!(TxTime::new(&TxTimeConfig {
            delay_ns: MAX_DELAY_NS
        })
        .is_ok());
        let e = TxTime::new(&TxTimeConfig {
            delay_ns: MAX_DELAY_NS + 1,
        })
        .unwrap_err();
        assert_eq!((e.stage, e.key), ("tx_time", "delay_ns"));
        assert!(e.message.contains("allowed range 0 ..= 60000000000"), "{e}");
    }
}
