//! Fuzz target `fronthaul`: the O-RAN U-plane / C-plane decoder on arbitrary frames. The first
//! input byte picks the decoder's parameters (compression static BFP / none or dynamic, width,
//! numerology, a small or the full carrier), the rest is the frame. The Rust decoder and the
//! CUDA one compiled for the host (`pw_host_fh_decode`, gpu-kernels/cuda/fronthaul.cuh) must give
//! the same reject code or the same PRBs; an accepted U-plane frame's PRBs lie in the carrier and
//! the 14 symbols, their samples within mantissa << exponent; the fronthaul stage takes the
//! frame (timed and untimed) without a panic, and drops exactly the frames the decoder rejects.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pktwarp_fronthaul::bfp::Method;
use pktwarp_fronthaul::config::{CompConfig, CompHdr, CompMethodName};
use pktwarp_fronthaul::decode::{decode_frame, Compression, DecodeParams, Message, Reject};
use pktwarp_fronthaul::{FronthaulConfig, FronthaulStage};
use pipeline::meta::PacketMeta;
use pipeline::verdict::{Action, Verdict};

/// `pw_fh_params`.
#[repr(C)]
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
#[derive(Default)]
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
#[derive(Clone, Copy)]
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
}

/// Largest PRB count a frame can carry here: the input is at most a jumbo frame (libFuzzer's
/// default -max_len is 4096), each PRB at least 3 bytes.
const MAX_PRBS: usize = 4096;

fn params(sel: u8) -> (DecodeParams, CompConfig) {
    let width = (sel & 0x0f) + 1;
    let carrier_prbs = if sel & 0x40 != 0 { 273 } else { 12 };
    let (compression, comp) = match sel >> 4 & 3 {
        0 => (
            Compression::Static {
                method: Method::Bfp,
                width,
            },
            CompConfig {
                method: CompMethodName::Bfp,
                iq_width: width,
                hdr: CompHdr::Static,
            },
        ),
        1 => (
            Compression::Static {
                method: Method::None,
                width,
            },
            CompConfig {
                method: CompMethodName::None,
                iq_width: width,
                hdr: CompHdr::Static,
            },
        ),
        _ => (
            Compression::Dynamic,
            CompConfig {
                hdr: CompHdr::Dynamic,
                ..CompConfig::default()
            },
        ),
    };
    let p = DecodeParams {
        carrier_prbs,
        numerology: sel >> 7,
        compression,
    };
    (p, comp)
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, frame)) = data.split_first() else {
        return;
    };
    let (p, comp) = params(sel);
    let mut rust: Vec<(u8, u16, u8, [i32; 24])> = Vec::new();
    let r = decode_frame(frame, &p, |_, s, prb, e, iq| {
        rust.push((s.symbol, prb, e, *iq));
    });
    let (dynamic, method, width) = match p.compression {
        Compression::Static { method, width } => (0, method.ud_comp_meth(), width),
        Compression::Dynamic => (1, 0, 0),
    };
    let cp = FhParams {
        carrier_prbs: p.carrier_prbs,
        numerology: p.numerology,
        dynamic,
        method,
        width,
        reserved: [0; 2],
    };
    let mut info = FhInfo::default();
    let mut out = vec![
        FhPrb {
            section_id: 0,
            symbol: 0,
            exponent: 0,
            prb: 0,
            reserved: 0,
            iq: [0; 24],
        };
        MAX_PRBS
    ];
    // SAFETY: `frame` is valid for its length, `out` for MAX_PRBS PRBs; the structs are the
    // #[repr(C)] mirrors of fronthaul.cuh's (pinned by fronthaul/tests/fronthaul_cuda_host.rs).
    let code = unsafe {
        pw_host_fh_decode(
            frame.as_ptr(),
            frame.len() as u32,
            &cp,
            &mut info,
            out.as_mut_ptr(),
            MAX_PRBS as u32,
        )
    };
    match &r {
        Err(reason) => assert_eq!(code, *reason as u32, "reject {}", reason.name()),
        Ok(m) => {
            assert_eq!(code, 0, "CUDA rejected what Rust accepted");
            if let Message::Uplane(u) = m {
                assert_eq!(u.prbs as usize, rust.len());
                assert_eq!(info.prbs, u.prbs);
                let n = rust.len().min(MAX_PRBS);
                for (c, (sym, prb, e, iq)) in out[..n].iter().zip(&rust) {
                    assert_eq!((c.symbol, c.prb, c.exponent), (*sym, *prb, *e));
                    assert_eq!(&c.iq, iq);
                    assert!(*sym < 14 && *prb < p.carrier_prbs);
                    let bound = 1i64 << (15 + u32::from(*e));
                    assert!(iq.iter().all(|&x| i64::from(x).abs() <= bound));
                }
            }
        }
    }
    // The stage on the same frame: dropped exactly when rejected (not eCPRI passes).
    let cfg = FronthaulConfig {
        carrier_prbs: p.carrier_prbs,
        numerology: p.numerology,
        comp,
        max_open_slots: 2,
        ..FronthaulConfig::default()
    };
    let Ok(stage) = FronthaulStage::from_config(&cfg) else {
        return;
    };
    let meta = PacketMeta::default();
    let rejected = matches!(r, Err(x) if x != Reject::NotEcpri);
    for timed in [true, false] {
        let mut v = Verdict::PASS;
        if timed {
            stage.process_at(frame, 1_000_000_007, &meta, &mut v);
        } else {
            stage.process_untimed(frame, &meta, &mut v);
        }
        assert_eq!(v.action == Action::Drop, rejected);
    }
    stage.flush();
    let c = stage.counters();
    assert_eq!(c.frames, 2);
    assert_eq!(c.errors_total(), if rejected { 2 } else { 0 });
});
