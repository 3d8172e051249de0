//! The shape of the daemon's GPU rings (`GpuSlots`).

use super::*;

#[test]
fn gpu_slots_gather_small_rx_bursts_and_keep_the_frames_in_flight() {
    let shape = |yaml: &str| {
        let ports = gen_port("g", 10, 1, "64");
        GpuSlots::of(&prepared(&format!("ports:\n{ports}pipeline: [parse, count]\n{yaml}")).cfg)
    };
    // Defaults: RX bursts of 32 gathered into 256-frame slots; 256 x 32 frames in flight.
    let d = shape("");
    assert_eq!((d.frames, d.ring_slots), (256, 32));
    // A larger RX burst keeps its own size; so does an explicit smaller GPU slot.
    let big = shape("queues: { burst: 1024, ring_slots: 64 }\n");
    assert_eq!((big.frames, big.ring_slots), (1024, 64));
    let small =
        shape("queues: { burst: 32, ring_slots: 4 }\nexecutor: { gpu: { burst_size: 32 } }\n");
    assert_eq!((small.frames, small.ring_slots), (32, 4));
    // Never fewer than two slots, rounded up to a power of two.
    let two = shape("queues: { burst: 32, ring_slots: 4 }\n");
    assert_eq!((two.frames, two.ring_slots), (256, 2));
    let odd = shape("queues: { burst: 96, ring_slots: 8 }\n");
    assert_eq!((odd.frames, odd.ring_slots), (256, 4));
}
