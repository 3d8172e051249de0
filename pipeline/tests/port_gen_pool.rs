//! The generator's frame pool: frames of a fixed flow set (or a trace) copied from the pool
//! with their identification written in place are the frames built one by one.

use pipeline::burst::Burst;
use pipeline::internal::port::gen::{build_frame, FlowOptions, FrameSize, GenOptions, GenRx};
use pipeline::port::{RxPort, RxStatus};

fn drain(rx: &mut GenRx) -> Vec<(Vec<u8>, u32)> {
    let mut out = Vec::new();
    let mut b = Burst::default();
    loop {
        b.clear();
        match rx.rx_burst(&mut b, 32).unwrap() {
            RxStatus::End => return out,
            RxStatus::Idle => continue,
            RxStatus::Frames(_) => {
                out.extend(b.frames().map(|(d, f)| (f.to_vec(), d.wire_len)));
            }
        }
    }
}

#[test]
fn pooled_frames_equal_frames_built_one_by_one() {
    let flows = FlowOptions {
        flow_count: Some(9),
        ipv6_share: 0.4,
        ..FlowOptions::default()
    };
    for (vlan, malformed) in [(None, 0.0), (Some(12), 0.1)] {
        let opts = GenOptions {
            flows: Some(flows.clone()),
            size: FrameSize::Imix,
            count: Some(70_000),
            vlan,
            malformed_ratio: malformed,
            seed: 5,
            ..GenOptions::default()
        };
        let got = drain(&mut GenRx::new(&opts, 0).unwrap());
        assert_eq!(got.len(), 70_000);
        // The reference: the same draws, each frame built from its description. The ids wrap
        // past 65535, so a wrong in-place id or checksum shows.
        let mut reference = GenRx::new(&opts, 0).unwrap();
        for (i, (f, wire)) in got.iter().enumerate() {
            let mut spec = reference.next_spec();
            spec.ip_id = i as u16;
            let want = build_frame(&spec);
            assert_eq!(f, &want, "frame {i} ({spec:?})");
            assert!(*wire as usize >= f.len());
        }
        let mut distinct: Vec<&Vec<u8>> = got.iter().map(|g| &g.0).collect();
        distinct.sort();
        distinct.dedup();
        assert!(distinct.len() > 1000, "the ids differ per frame");
    }
}
