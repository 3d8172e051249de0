//! Round trip: the `gen` O-RAN builder -> the fronthaul stage -> the slot grid holds exactly
//! the quantised IQ the generator encoded, for every PRB; plus property tests of the decoder
//! on generated and malformed packets.

use std::sync::{Arc, Mutex};

use pipeline::meta::PacketMeta;
use pipeline::verdict::{Action, Verdict};
use pktwarp_fronthaul::bfp::{self, Method};
use pktwarp_fronthaul::config::{CompConfig, CompHdr, CompMethodName, GridConfig, GridFormat};
use pktwarp_fronthaul::decode::{check, decode_frame, Compression, DecodeParams};
use pktwarp_fronthaul::oran_gen::{build_uplane_frames, IqSource, OranGenOptions};
use pktwarp_fronthaul::{FnSink, FronthaulConfig, FronthaulStage, SlotGrid};
use proptest::prelude::*;

/// What a sink saw of one slot: key, complete, and every PRB's samples (int16 or f32).
struct Seen {
    slot: (u8, u8, u8),
    complete: bool,
    i16s: Vec<i16>,
    f32s: Vec<f32>,
}

/// The stage's options for the generator's carrier and compression.
fn stage_config(o: &OranGenOptions, format: GridFormat, beta: f32) -> FronthaulConfig {
    FronthaulConfig {
        carrier_prbs: o.carrier_prbs,
        numerology: o.numerology,
        comp: CompConfig {
            method: o.comp_method,
            iq_width: o.iq_width,
            hdr: o.comp_hdr,
        },
        eaxcs: o.eaxcs.clone(),
        grid: GridConfig { format, beta },
        ..FronthaulConfig::default()
    }
}

fn run(o: &OranGenOptions, format: GridFormat, beta: f32) -> (Vec<Seen>, FronthaulStage) {
    let cfg = stage_config(o, format, beta);
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let s2 = seen.clone();
    let sink = FnSink(move |g: &SlotGrid| {
        let [e, s, p] = g.shape();
        let mut i16s = vec![];
        let mut f32s = vec![];
        for ei in 0..e {
            for sym in 0..s as u8 {
                for prb in 0..p as u16 {
                    match format {
                        GridFormat::Int16 => {
                            i16s.extend_from_slice(g.prb_i16(ei, sym, prb).expect("int16 PRB"))
                        }
                        GridFormat::Fp16 => {
                            f32s.extend_from_slice(&g.prb_f32(ei, sym, prb).expect("fp16 PRB"))
                        }
                    }
                }
            }
        }
        s2.lock().expect("sink lock").push(Seen {
            slot: (g.key.frame_id, g.key.subframe_id, g.key.slot_id),
            complete: g.complete,
            i16s,
            f32s,
        });
    });
    let stage = FronthaulStage::with_sink(&cfg, Box::new(sink)).expect("stage");
    let meta = PacketMeta::default();
    for f in build_uplane_frames(o) {
        let mut v = Verdict::PASS;
        stage.process_at(&f.data, f.timestamp_ns, &meta, &mut v);
        assert_eq!(v.action, Action::Pass);
    }
    stage.flush();
    let seen = std::mem::take(&mut *seen.lock().expect("lock"));
    (seen, stage)
}

fn roundtrip(o: &OranGenOptions) {
    o.validate().expect("generator options");
    let (seen, stage) = run(o, GridFormat::Int16, 1.0);
    assert_eq!(seen.len() as u64, o.slots, "{o:?}");
    for (n, s) in seen.iter().enumerate() {
        assert!(s.complete, "slot {n} incomplete");
        let r = o.radio(n as u64, 0);
        assert_eq!(s.slot, (r.frame_id, r.subframe_id, r.slot_id));
        let mut at = 0;
        for e in 0..o.eaxcs.len() {
            for sym in 0..14u8 {
                for prb in 0..o.carrier_prbs {
                    let want = o.expected(e, n as u64, sym, prb);
                    let got = &s.i16s[at..at + 24];
                    let want16: Vec<i16> = want.iter().map(|&x| x as i16).collect();
                    assert!(want.iter().all(|&x| i16::try_from(x).is_ok()));
                    assert_eq!(got, &want16[..], "slot {n} eAxC {e} symbol {sym} PRB {prb}");
                    at += 24;
                }
            }
        }
    }
    let c = stage.counters();
    let frames = o.frame_count();
    assert_eq!((c.frames, c.uplane, c.errors_total()), (frames, frames, 0));
    assert_eq!(
        c.prbs,
        o.slots * 14 * o.eaxcs.len() as u64 * u64::from(o.carrier_prbs)
    );
    assert_eq!((c.slots_complete, c.slots_partial), (o.slots, 0));
    assert_eq!((c.duplicate_prbs, c.saturated_samples), (0, 0));
    for e in &c.per_eaxc {
        assert_eq!((e.on_time, e.early, e.late), (e.packets, 0, 0), "{e:?}");
        assert_eq!(e.seq_gaps + e.seq_duplicates + e.seq_out_of_order, 0);
        assert_eq!((e.slots_complete, e.slots_partial), (o.slots, 0));
    }
}

#[test]
fn roundtrip_every_width_both_methods_static_and_dynamic() {
    for w in 1..=16u8 {
        for method in [CompMethodName::Bfp, CompMethodName::None] {
            for hdr in [CompHdr::Static, CompHdr::Dynamic] {
                roundtrip(&OranGenOptions {
                    carrier_prbs: 24,
                    eaxcs: vec![0x0000, 0x0011, 0x1203],
                    comp_method: method,
                    iq_width: w,
                    comp_hdr: hdr,
                    prbs_per_packet: 10,
                    sections_per_packet: 2,
                    slots: 3,
                    seed: u64::from(w) * 7 + 1,
                    ..OranGenOptions::default()
                });
            }
        }
    }
}

#[test]
fn roundtrip_full_carrier_tone_numerology_0_and_vlan() {
    roundtrip(&OranGenOptions {
        numerology: 0,
        carrier_prbs: 273,
        iq: IqSource::Tone {
            subcarrier: 100,
            amplitude: 20000.0,
        },
        vlan: Some(3),
        slots: 2,
        ..OranGenOptions::default()
    });
}

#[test]
fn fp16_grid_holds_the_scaled_samples() {
    let o = OranGenOptions {
        carrier_prbs: 4,
        iq_width: 14,
        slots: 1,
        ..OranGenOptions::default()
    };
    let beta = 1.0 / 1024.0;
    let (seen, _) = run(&o, GridFormat::Fp16, beta);
    let s = &seen[0];
    let mut at = 0;
    for sym in 0..14u8 {
        for prb in 0..4u16 {
            for (k, &x) in o.expected(0, 0, sym, prb).iter().enumerate() {
                let want = half::f16::from_f32(x as f32 * beta).to_f32();
                assert_eq!(s.f32s[at + k], want, "symbol {sym} PRB {prb} sample {k}");
            }
            at += 24;
        }
    }
}

#[test]
fn lost_reordered_and_duplicated_packets_are_counted() {
    let o = OranGenOptions {
        carrier_prbs: 8,
        prbs_per_packet: 4,
        slots: 2,
        ..OranGenOptions::default()
    };
    let cfg = FronthaulConfig {
        carrier_prbs: 8,
        eaxcs: vec![0],
        ..FronthaulConfig::default()
    };
    let stage = FronthaulStage::from_config(&cfg).expect("stage");
    let mut frames: Vec<_> = build_uplane_frames(&o).collect();
    // Drop frame 3, swap 6 and 7, send 10 twice, and make frame 12 very late.
    frames.remove(3);
    frames.swap(5, 6);
    let dup = frames[9].clone();
    frames.insert(10, dup);
    frames[12].timestamp_ns += 5_000_000;
    let meta = PacketMeta::default();
    for f in &frames {
        stage.process_at(&f.data, f.timestamp_ns, &meta, &mut Verdict::PASS.clone());
    }
    stage.flush();
    let c = stage.counters();
    let e = &c.per_eaxc[0];
    assert_eq!(e.seq_gaps, 2, "{e:?}"); // the dropped frame, and the swapped pair's first
    assert_eq!(e.seq_out_of_order, 1, "{e:?}");
    assert_eq!(e.seq_duplicates, 1, "{e:?}");
    assert_eq!(c.duplicate_prbs, 4);
    assert!(e.late >= 1, "{e:?}");
    // The late frame is stored, and its receive time then times slot 0 out (partial: the
    // timeout is judged after a packet is stored, as the GPU's completion poll sees it); the
    // 15 frames of slot 0 after it are refused (their slot closed), not a second copy of
    // slot 0; slot 1 completes.
    assert_eq!((c.slots_complete, c.slots_partial), (1, 1), "{c:?}");
    assert_eq!((e.slot_closed, e.slot_closed_prbs), (15, 60), "{e:?}");
    assert_eq!(e.prbs + e.slot_closed_prbs, e.packets * 4);
}

fn params_for(o: &OranGenOptions) -> DecodeParams {
    DecodeParams {
        carrier_prbs: o.carrier_prbs,
        numerology: o.numerology,
        compression: match o.comp_hdr {
            CompHdr::Static => Compression::Static {
                method: o.method(),
                width: o.iq_width,
            },
            CompHdr::Dynamic => Compression::Dynamic,
        },
    }
}

fn gen_options() -> impl Strategy<Value = OranGenOptions> {
    (
        1u16..40,
        1u8..=16,
        any::<bool>(),
        any::<bool>(),
        1u16..4,
        0u16..20,
        any::<u64>(),
    )
        .prop_map(
            |(prbs, w, bfp, dynamic, sections, per_packet, seed)| OranGenOptions {
                carrier_prbs: prbs,
                iq_width: w,
                comp_method: if bfp {
                    CompMethodName::Bfp
                } else {
                    CompMethodName::None
                },
                comp_hdr: if dynamic {
                    CompHdr::Dynamic
                } else {
                    CompHdr::Static
                },
                sections_per_packet: sections.min(per_packet.max(1).min(prbs)),
                prbs_per_packet: per_packet,
                eaxcs: vec![1, 2],
                slots: 1,
                seed,
                ..OranGenOptions::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Generated frames decode to what was encoded; any mutation of one byte or a cut never
    /// panics, and a mutated frame is either rejected whole or decoded consistently with the
    /// bit-by-bit reference.
    #[test]
    fn generated_and_malformed_frames(o in gen_options(), at in any::<prop::sample::Index>(),
                                      byte in any::<u8>(), cut in any::<prop::sample::Index>()) {
        prop_assume!(o.validate().is_ok());
        let p = params_for(&o);
        for f in build_uplane_frames(&o).take(6) {
            let mut n = 0;
            decode_frame(&f.data, &p, |u, s, prb, _, iq| {
                let e = o.eaxcs.iter().position(|&x| x == u.eaxc).expect("eAxC");
                assert_eq!(*iq, o.expected(e, 0, s.symbol, prb));
                n += 1;
            }).expect("generated frame decodes");
            prop_assert!(n > 0);
            let mut bad = f.data.clone();
            let i = at.index(bad.len());
            bad[i] = byte;
            let short = &f.data[..cut.index(f.data.len())];
            for frame in [&bad[..], short] {
                let mut prbs = 0u32;
                let r = decode_frame(frame, &p, |_, s, prb, e, iq| {
                    // The PRB's bytes, decoded bit by bit, give the same samples.
                    let k = usize::from((prb - s.start_prb) / s.stride);
                    let at = s.data + k * s.prb_bytes;
                    let mut slow = [0; 24];
                    let es = bfp::decompress_prb_scalar(&frame[at..at + s.prb_bytes], s.method, s.width, &mut slow);
                    assert_eq!((e, *iq), (es, slow));
                    prbs += 1;
                });
                match r {
                    Ok(pktwarp_fronthaul::Message::Uplane(u)) => prop_assert_eq!(u.prbs, prbs),
                    Ok(_) => {}
                    Err(_) => prop_assert_eq!(prbs, 0),
                }
                prop_assert_eq!(check(frame, &p).is_ok(), r.is_ok());
            }
        }
    }

    /// The width-specialised decompressor equals the bit-by-bit one on arbitrary bytes.
    #[test]
    fn fast_equals_scalar_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 49),
                                       w in 1u8..=16, bfp in any::<bool>()) {
        let m = if bfp { Method::Bfp } else { Method::None };
        let mut a = [0; 24];
        let mut b = [0; 24];
        let ea = bfp::decompress_prb(&bytes, m, w, &mut a);
        let eb = bfp::decompress_prb_scalar(&bytes, m, w, &mut b);
        prop_assert_eq!((ea, a), (eb, b));
    }
}

/// The file sinks write from their own thread: after `flush` every slot's file is there; a
/// write that fails (its folder removed under it) is counted in `sink_errors`, every slot still
/// counted and every frame passed.
#[test]
fn file_sink_writes_in_the_background_and_counts_its_errors() {
    use pktwarp_fronthaul::config::SinkConfig;
    let o = OranGenOptions {
        slots: 3,
        ..OranGenOptions::default()
    };
    let dir = std::env::temp_dir().join(format!("pw-fh-bgsink-{}", std::process::id()));
    for broken in [false, true] {
        let _ = std::fs::remove_dir_all(&dir);
        let cfg = FronthaulConfig {
            sink: SinkConfig::Npy {
                dir: dir.clone(),
                max_files: None,
            },
            ..stage_config(&o, GridFormat::Int16, 1.0)
        };
        let stage = FronthaulStage::from_config(&cfg).expect("stage");
        if broken {
            std::fs::remove_dir_all(&dir).expect("remove the sink's folder");
        }
        let meta = PacketMeta::default();
        for f in build_uplane_frames(&o) {
            let mut v = Verdict::PASS;
            stage.process_at(&f.data, f.timestamp_ns, &meta, &mut v);
            assert_eq!(v.action, Action::Pass);
        }
        stage.flush();
        let c = stage.counters();
        assert_eq!(
            (c.slots_complete, c.slots_partial),
            (3, 0),
            "broken {broken}"
        );
        if broken {
            assert_eq!(c.sink_errors, 3);
        } else {
            assert_eq!(c.sink_errors, 0);
            let npys = std::fs::read_dir(&dir)
                .expect("sink folder")
                .filter(|e| {
                    e.as_ref()
                        .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "npy"))
                })
                .count();
            assert_eq!(npys, 3, "every slot's file is written once flush returns");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
