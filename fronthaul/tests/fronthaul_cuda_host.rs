//! Differential test: the CUDA fronthaul decoder (gpu-kernels/cuda/fronthaul.cuh, compiled for
//! the host through gpu-kernels/host/fronthaul_host.cpp) equals the Rust decoder on
//! property-generated packets: generated U-plane traffic, the same with bytes changed or cut,
//! random C-plane messages and random bytes after an eCPRI header. Every reject code, every
//! header field and every PRB must match.

use pktwarp_fronthaul::bfp::{self, Method};
use pktwarp_fronthaul::config::{CompHdr, CompMethodName};
use pktwarp_fronthaul::decode::{decode_frame, Compression, DecodeParams, Message};
use pktwarp_fronthaul::oran_gen::{build_uplane_frames, OranGenOptions};
use proptest::prelude::*;

/// `pw_fh_params`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FhParams {
    carrier_prbs: u16,
    numerology: u8,
    dynamic: u8,
    method: u8,
    width: u8,
    reserved: [u8; 2],
}

/// `pw_fh_info`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct FhInfo {
    eaxc: u16,
    seq_raw: u16,
    msg_type: u8,
    data_direction: u8,
    payload_version: u8,
    filter_index: u8,
    frame_id: u8,
    subframe_id: u8,
    slot_id: u8,
    symbol_id: u8,
    vlan: u16,
    sections: u16,
    prbs: u32,
    section_type: u8,
    reserved: [u8; 3],
    body_start: u32,
    body_end: u32,
}

/// `pw_fh_prb`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FhPrb {
    section_id: u16,
    symbol: u8,
    exponent: u8,
    prb: u16,
    reserved: u16,
    iq: [i32; 24],
}

extern "C" {
    fn pw_host_fh_decode(
        frame: *const u8,
        len: u32,
        p: *const FhParams,
        info: *mut FhInfo,
        out: *mut FhPrb,
        max_out: u32,
    ) -> u32;
    fn pw_host_fh_decompress_prb(b: *const u8, method: u32, width: u32, out: *mut i32) -> u32;
    fn pw_host_fh_sizes(params: *mut u32, info: *mut u32, prb: *mut u32) -> u32;
}

fn cuda_params(p: &DecodeParams) -> FhParams {
    let (dynamic, method, width) = match p.compression {
        Compression::Static { method, width } => (0, method.ud_comp_meth(), width),
        Compression::Dynamic => (1, 0, 0),
    };
    FhParams {
        carrier_prbs: p.carrier_prbs,
        numerology: p.numerology,
        dynamic,
        method,
        width,
        reserved: [0; 2],
    }
}

/// (code, info, PRBs) from the CUDA decoder.
fn cuda(frame: &[u8], p: &DecodeParams) -> (u32, FhInfo, Vec<FhPrb>) {
    let max = 1024 * 16;
    let mut out = vec![
        FhPrb {
            section_id: 0,
            symbol: 0,
            exponent: 0,
            prb: 0,
            reserved: 0,
            iq: [0; 24]
        };
        max
    ];
    let mut info = FhInfo::default();
    let cp = cuda_params(p);
    // SAFETY: `frame` is valid for `len` bytes, `out` for `max` PRBs, the structs are the
    // #[repr(C)] mirrors of the header's (sizes checked by the layout test).
    let code = unsafe {
        pw_host_fh_decode(
            frame.as_ptr(),
            frame.len() as u32,
            &cp,
            &mut info,
            out.as_mut_ptr(),
            max as u32,
        )
    };
    let n = if code == 0 && info.msg_type == 0 {
        info.prbs as usize
    } else {
        0
    };
    out.truncate(n.min(max));
    (code, info, out)
}

/// Compares the two decoders on one frame; returns whether it was accepted.
fn same(frame: &[u8], p: &DecodeParams) -> Result<bool, TestCaseError> {
    let mut rust = vec![];
    let r = decode_frame(frame, p, |_, s, prb, e, iq| {
        rust.push(FhPrb {
            section_id: s.section_id,
            symbol: s.symbol,
            exponent: e,
            prb,
            reserved: 0,
            iq: *iq,
        })
    });
    let (code, info, prbs) = cuda(frame, p);
    match r {
        Err(reason) => {
            prop_assert_eq!(code, reason as u32, "reject code ({})", reason.name());
            Ok(false)
        }
        Ok(m) => {
            prop_assert_eq!(code, 0, "CUDA rejected what Rust accepted");
            match m {
                Message::Uplane(u) => {
                    prop_assert_eq!(info.msg_type, 0);
                    prop_assert_eq!((info.eaxc, info.seq_raw), (u.eaxc, u.seq.to_raw()));
                    prop_assert_eq!(
                        (
                            info.frame_id,
                            info.subframe_id,
                            info.slot_id,
                            info.symbol_id
                        ),
                        (
                            u.radio.frame_id,
                            u.radio.subframe_id,
                            u.radio.slot_id,
                            u.radio.symbol_id
                        )
                    );
                    prop_assert_eq!(info.data_direction, u.radio.data_direction);
                    prop_assert_eq!(info.filter_index, u.radio.filter_index);
                    prop_assert_eq!(info.vlan, u.vlan.unwrap_or(0xffff));
                    prop_assert_eq!(
                        (u32::from(info.sections), info.prbs),
                        (u32::from(u.sections), u.prbs)
                    );
                    prop_assert_eq!(prbs, rust);
                }
                Message::Cplane(c) => {
                    prop_assert_eq!(info.msg_type, 2);
                    prop_assert_eq!((info.eaxc, info.seq_raw), (c.eaxc, c.seq.to_raw()));
                    prop_assert_eq!(info.section_type, c.section_type);
                    prop_assert_eq!(info.sections, u16::from(c.sections));
                }
            }
            Ok(true)
        }
    }
}

#[test]
fn layouts_match() {
    let (mut a, mut b, mut c) = (0, 0, 0);
    // SAFETY: three valid out-pointers.
    unsafe { pw_host_fh_sizes(&mut a, &mut b, &mut c) };
    assert_eq!(a as usize, std::mem::size_of::<FhParams>());
    assert_eq!(b as usize, std::mem::size_of::<FhInfo>());
    assert_eq!(c as usize, std::mem::size_of::<FhPrb>());
}

#[test]
fn shared_vectors_agree() {
    let Some(dir) = flow_rules::input::require_corpus("oran") else {
        return;
    };
    for (name, w) in [
        ("up_bfp8.pcap", 8),
        ("up_bfp9.pcap", 9),
        ("up_bfp12.pcap", 12),
        ("up_bfp14.pcap", 14),
        ("malformed_sample_oran.pcap", 9),
        ("malformed_test_simple.pcap", 9),
    ] {
        let mut r = pipeline::internal::port::pcap::CaptureReader::open_ethernet(dir.join(name))
            .expect("capture");
        let p = DecodeParams {
            compression: Compression::Static {
                method: Method::Bfp,
                width: w,
            },
            ..DecodeParams::default()
        };
        let mut accepted = 0;
        while let Some(f) = r.next_frame().expect("frame") {
            let data = f.data.to_vec();
            accepted += u32::from(same(&data, &p).expect("equal"));
            for cut in 0..data.len().min(200) {
                same(&data[..cut], &p).expect("equal on a cut");
            }
        }
        assert_eq!(
            accepted,
            if name.starts_with("up") { 8 } else { 0 },
            "{name}"
        );
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
        prop::option::of(0u16..4096),
    )
        .prop_map(
            |(prbs, w, bfp, dynamic, sections, per_packet, seed, vlan)| OranGenOptions {
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
                eaxcs: vec![0x0123],
                slots: 1,
                seed,
                vlan,
                ..OranGenOptions::default()
            },
        )
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

/// An Ethernet + eCPRI header (revision 1, `msg_type`, payload size = what follows) + `body`.
fn ecpri_frame(msg_type: u8, body: &[u8]) -> Vec<u8> {
    let mut f = vec![
        2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0xae, 0xfe, 0x10, msg_type,
    ];
    f.extend_from_slice(&(body.len() as u16).to_be_bytes());
    f.extend_from_slice(body);
    f
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn generated_and_mutated_uplane(o in gen_options(),
                                    edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
                                    cut in any::<prop::sample::Index>(),
                                    other in gen_options()) {
        prop_assume!(o.validate().is_ok());
        let p = params_for(&o);
        // The other options' parameters too: frames decoded with the wrong width / method.
        let q = params_for(&other);
        for f in build_uplane_frames(&o).step_by(5).take(4) {
            prop_assert!(same(&f.data, &p)?);
            same(&f.data, &q)?;
            let mut bad = f.data.clone();
            for (i, b) in &edits {
                let at = i.index(bad.len());
                bad[at] = *b;
            }
            same(&bad, &p)?;
            same(&bad, &q)?;
            same(&f.data[..cut.index(f.data.len() + 1)], &p)?;
        }
    }

    #[test]
    fn random_messages(msg_type in prop::sample::select(vec![0u8, 2, 1, 7]),
                       head in prop::collection::vec(any::<u8>(), 0..12),
                       body in prop::collection::vec(any::<u8>(), 0..200),
                       section_type in prop::sample::select(vec![0u8, 1, 3, 5, 6]),
                       dynamic in any::<bool>(), w in 1u8..=16, prbs in 1u16..300) {
        // ids, a valid radio header, then C-plane common fields or random sections.
        let mut m = vec![0x01, 0x02, 0x03, 0x80, 0x10, 0x05, 0x00, 0x43];
        m.extend_from_slice(&head);
        if msg_type == 2 && m.len() > 13 {
            m[13] = section_type;
        }
        m.extend_from_slice(&body);
        let f = ecpri_frame(msg_type, &m);
        let p = DecodeParams {
            carrier_prbs: prbs,
            numerology: 1,
            compression: if dynamic {
                Compression::Dynamic
            } else {
                Compression::Static { method: Method::Bfp, width: w }
            },
        };
        same(&f, &p)?;
        for cut in [f.len() / 2, f.len().saturating_sub(1)] {
            same(&f[..cut], &p)?;
        }
    }

    #[test]
    fn prb_decompression(bytes in prop::collection::vec(any::<u8>(), 49), w in 1u8..=16, bfp in any::<bool>()) {
        let m = if bfp { Method::Bfp } else { Method::None };
        let mut r = [0; 24];
        let er = bfp::decompress_prb(&bytes, m, w, &mut r);
        let mut c = [0i32; 24];
        // SAFETY: 49 bytes cover any PRB of width <= 16; `c` holds 24 samples.
        let ec = unsafe { pw_host_fh_decompress_prb(bytes.as_ptr(), u32::from(m.ud_comp_meth()), u32::from(w), c.as_mut_ptr()) };
        prop_assert_eq!((u32::from(er), r), (ec, c));
    }
}
