//! One TX thread per queue on the GPU host side (the CPU executor's TX loop): with 1, 2 and 4
//! queues every frame leaves once, from its queue's thread `pw-tx<q>`, on that queue's sender
//! of a port that gives one per TX queue, each queue's frames in capture order.

use super::*;
use crate::port::{TxSent, WireFrame};

const FRAMES: u32 = 600;

/// One frame as a sender took it: (sender's TX queue, queue the TX loop named, thread, seq).
type Took = (Option<u16>, u16, String, u32);

/// Records what it is given; gives one sender per TX queue.
struct Recorder {
    log: Arc<Mutex<Vec<Took>>>,
    handle: Option<u16>,
}

impl TxPort for Recorder {
    fn tx_burst_wire(
        &mut self,
        frames: &mut dyn Iterator<Item = WireFrame<'_>>,
        queue: u16,
    ) -> Result<TxSent, PortError> {
        let thread = std::thread::current().name().unwrap_or("").to_string();
        let mut log = self.log.lock().unwrap();
        let before = log.len();
        for (f, _, _) in frames {
            let seq = u32::from_be_bytes([f[42], f[43], f[44], f[45]]);
            log.push((self.handle, queue, thread.clone(), seq));
        }
        Ok(TxSent {
            sent: log.len() - before,
            ..TxSent::default()
        })
    }

    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        Ok(self
            .tx_burst_wire(&mut frames.map(|f| (f, 0, 0)), u16::MAX)?
            .sent)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn name(&self) -> &str {
        "recorder"
    }

    fn queue_senders(&self, n: usize) -> Option<Result<Vec<Box<dyn TxPort>>, PortError>> {
        Some(Ok((0..n)
            .map(|q| {
                Box::new(Recorder {
                    log: Arc::clone(&self.log),
                    handle: Some(q as u16),
                }) as Box<dyn TxPort>
            })
            .collect()))
    }
}

/// A pcap of FRAMES UDP frames of 61 flows, each with its number after the UDP header.
fn numbered_pcap(path: &Path) {
    let mut b = Vec::new();
    for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for i in 0..FRAMES {
        let mut f = vec![0u8; 64];
        f[0..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&50u16.to_be_bytes());
        (f[22], f[23]) = (64, 17);
        f[26..34].copy_from_slice(&[10, 0, 0, 1, 10, 0, 1, 2]);
        f[34..36].copy_from_slice(&(1000 + (i % 61) as u16).to_be_bytes());
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f[38..40].copy_from_slice(&30u16.to_be_bytes());
        f[42..46].copy_from_slice(&i.to_be_bytes());
        for v in [1 + i, 0, 64, 64] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&f);
    }
    std::fs::write(path, b).unwrap();
}

#[test]
fn each_queue_transmits_from_its_own_thread_in_its_order() {
    let dir = std::env::temp_dir().join(format!("pktwarp-gpu-txlanes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.pcap");
    numbered_pcap(&input);
    for nq in [1u16, 2, 4] {
        let yaml = format!(
            "ports:\n  - name: a\n    pcap: {{ rx: {{ path: '{}' }} }}\n\
             queues: {{ count: {nq}, burst: 16, ring_slots: 4 }}\npipeline:\n  - parse\n  - count\n\
             executor: {{ kind: cpu }}\n",
            input.display()
        );
        let p = prepared(&yaml);
        let dev = CpuStandIn::new(&p, 4, 1);
        let shared = cpu::CpuShared::new(&p.cpu_spec());
        let log = Arc::new(Mutex::new(Vec::new()));
        let port = Recorder {
            log: Arc::clone(&log),
            handle: None,
        };
        let mut ports = open_ports(&p.cfg).expect("ports");
        let spec = host_spec(&p, GpuSlots::of(&p.cfg), p.pipeline.acl().is_some(), 0);
        let mut out = crate::port::out::OutPorts::single(Some(Box::new(port) as Box<dyn TxPort>));
        let r = host::run(&dev, &spec, &shared, &mut ports.rx, &mut out);
        r.result.expect("host run");
        assert_eq!(r.outputs.len(), 1, "{:?}", r.outputs);
        assert_eq!(r.outputs[0].frames, u64::from(FRAMES), "{:?}", r.outputs);
        let tx: u64 = shared.counters.iter().map(|c| c.tx_frames.get()).sum();
        assert_eq!(tx, u64::from(FRAMES), "{nq} queues: counted sent");
        let took = log.lock().unwrap().clone();
        let mut seen = vec![false; FRAMES as usize];
        let mut last = vec![None::<u32>; usize::from(nq)];
        for (handle, q, thread, seq) in &took {
            assert!(
                !std::mem::replace(&mut seen[*seq as usize], true),
                "{seq} twice"
            );
            assert_eq!(*thread, format!("pw-tx{q}"), "{nq} queues: frame {seq}");
            assert_eq!(*handle, (nq > 1).then_some(*q), "{nq} queues: frame {seq}");
            let l = &mut last[usize::from(*q)];
            assert!(
                l.is_none_or(|l| *seq > l),
                "{nq} queues: queue {q} out of order"
            );
            *l = Some(*seq);
        }
        assert!(seen.iter().all(|s| *s), "{nq} queues: every frame sent");
        if nq > 1 {
            assert!(
                last.iter().filter(|l| l.is_some()).count() > 1,
                "RSS spread"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
