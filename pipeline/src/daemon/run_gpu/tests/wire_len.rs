//! Frames a capture's snap length cut reach the output port with their wire length (more than
//! their bytes) through the TX thread, for the built-in pipeline (the TX list the verdicts
//! make) and a composed one that changes the frame's length (the TX ring): the wire length
//! changes by as much as the bytes, as on the CPU executor.

use super::*;
use crate::port::{TxSent, WireFrame};

/// Records each frame's (bytes, wire length).
struct WireRecorder {
    got: Arc<Mutex<Vec<(usize, u32)>>>,
}

impl TxPort for WireRecorder {
    fn tx_burst_wire(
        &mut self,
        frames: &mut dyn Iterator<Item = WireFrame<'_>>,
        _queue: u16,
    ) -> Result<TxSent, PortError> {
        let mut g = self.got.lock().unwrap();
        let before = g.len();
        g.extend(frames.map(|(f, _, wire)| (f.len(), wire)));
        Ok(TxSent {
            sent: g.len() - before,
            ..TxSent::default()
        })
    }

    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        let mut g = self.got.lock().unwrap();
        let before = g.len();
        g.extend(frames.map(|f| (f.len(), 0)));
        Ok(g.len() - before)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn name(&self) -> &str {
        "wire-recorder"
    }
}

/// A pcap of `n` frames of 64 captured bytes, 200 on the wire (snap length 64).
fn snapped_pcap(path: &Path, n: u32) {
    let mut b = Vec::new();
    for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 64, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for i in 0..n {
        for v in [1 + i, 0, 64, 200] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5];
        f.resize(64, i as u8);
        b.extend_from_slice(&f);
    }
    std::fs::write(path, b).unwrap();
}

/// What the output port got on the GPU host side for `stages` over the snapped capture.
fn sent(stages: &str) -> Vec<(usize, u32)> {
    let dir = std::env::temp_dir().join(format!(
        "pktwarp-gpu-wire-{}-{}",
        std::process::id(),
        stages.len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.pcap");
    snapped_pcap(&input, 40);
    let yaml = format!(
        "ports:\n  - name: a\n    pcap: {{ rx: {{ path: '{}' }} }}\n\
         queues: {{ count: 1, burst: 16, ring_slots: 4 }}\npipeline:\n{stages}\
         executor: {{ kind: cpu }}\n",
        input.display()
    );
    let p = prepared(&yaml);
    let dev = CpuStandIn::new(&p, 4, 1);
    let shared = cpu::CpuShared::new(&p.cpu_spec());
    let got = Arc::new(Mutex::new(Vec::new()));
    let port = WireRecorder {
        got: Arc::clone(&got),
    };
    let mut ports = open_ports(&p.cfg).expect("ports");
    let spec = host_spec(&p, GpuSlots::of(&p.cfg), p.pipeline.acl().is_some(), 0);
    let mut out = crate::port::out::OutPorts::single(Some(Box::new(port) as Box<dyn TxPort>));
    host::run(&dev, &spec, &shared, &mut ports.rx, &mut out)
        .result
        .expect("host run");
    std::fs::remove_dir_all(&dir).ok();
    got.lock().map(|mut g| std::mem::take(&mut *g)).unwrap()
}

#[test]
fn cut_frames_keep_their_wire_length_to_the_port() {
    assert_eq!(
        sent("  - count\n"),
        vec![(64, 200); 40],
        "built-in pipeline"
    );
    // A pushed tag: 4 bytes more, on the wire too.
    let push = "  - count\n  - vlan: { push: { vid: 5 } }\n";
    assert_eq!(sent(push), vec![(68, 204); 40], "composed pipeline");
}
