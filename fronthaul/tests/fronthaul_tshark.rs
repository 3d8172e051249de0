//! tshark's `oran_fh_cus` dissector as an independent oracle: generated U-plane traffic for
//! every width 8..=16 with static BFP compression and several sections per packet, decoded by
//! pktwarp and by tshark (raw iSample / qSample << exponent): equal on every PRB.
//! tshark is installed by scripts/install-deps.sh; without it this test fails, it never skips.

use std::process::Command;

use pipeline::internal::port::pcap::{CaptureWriter, WriteFormat};
use pktwarp_fronthaul::bfp::Method;
use pktwarp_fronthaul::decode::{decode_frame, Compression, DecodeParams};
use pktwarp_fronthaul::oran_gen::{build_uplane_frames, OranGenOptions};

/// (exponent, 24 raw samples as tshark shows them) of every PRB, per frame in order.
type Prbs = Vec<Vec<(i64, Vec<i64>)>>;

/// Runs tshark on `pcap` with the U-plane width `w` and collects the PRBs of each frame.
fn tshark_prbs(pcap: &std::path::Path, w: u8, carrier: u16) -> Prbs {
    let out = Command::new("tshark")
        .args(["-o", &format!("oran_fh_cus.oran.iq_bitwidth_up:{w}")])
        .args([
            "-o",
            "oran_fh_cus.oran.ud_comp_up:Block Floating Point Compression",
        ])
        .args(["-o", "oran_fh_cus.oran.ud_comp_hdr_up:FALSE"])
        .args([
            "-o",
            &format!("oran_fh_cus.oran.rbs_in_uplane_section:{carrier}"),
        ])
        .args(["-o", "oran_fh_cus.oran.show_iq_samples:TRUE"])
        .arg("-V")
        .arg("-r")
        .arg(pcap)
        .output()
        .expect("tshark (Debian package tshark, installed by scripts/install-deps.sh) runs");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("tshark prints UTF-8");
    let mut frames: Prbs = vec![];
    for line in text.lines() {
        if line.starts_with("Frame ") {
            frames.push(vec![]);
            continue;
        }
        let t = line.trim_start();
        let Some(cur) = frames.last_mut() else {
            continue;
        };
        if let Some(e) = t
            .strip_prefix(".... ")
            .and_then(|r| r.split_once("= Exponent: "))
        {
            cur.push((e.1.trim().parse().expect("exponent"), vec![]));
        } else if t.starts_with("iSample: ") || t.starts_with("qSample: ") {
            // `iSample: 0.000009775162  0x0029 (iSample-0 in the PRB)`: the raw bits in hex.
            let hex = t
                .split_whitespace()
                .find_map(|w| w.strip_prefix("0x"))
                .unwrap_or_else(|| panic!("no raw value in `{t}`"));
            let raw = i64::from_str_radix(hex, 16).expect("hex sample");
            let (_, s) = cur.last_mut().expect("a sample after an exponent");
            s.push(raw);
        }
    }
    frames
}

fn sign_extend(raw: i64, w: u8) -> i64 {
    let sh = 64 - u32::from(w);
    (raw << sh) >> sh
}

#[test]
fn tshark_agrees_on_every_prb_for_widths_8_to_16() {
    let dir = std::env::temp_dir().join(format!("pw-fh-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let carrier = 51u16;
    // One thread per width: tshark's start-up is most of the time.
    let total: usize = std::thread::scope(|sc| {
        let dir = &dir;
        let hs: Vec<_> = (8..=16u8)
            .map(|w| sc.spawn(move || check_width(dir, w, carrier)))
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("width thread"))
            .sum()
    });
    std::fs::remove_dir_all(&dir).ok();
    // 9 widths x 14 symbols x 2 eAxCs x 51 PRBs.
    assert_eq!(total, 9 * 14 * 2 * 51);
}

/// Generates one slot at width `w`, decodes it both ways, returns the PRBs compared.
fn check_width(dir: &std::path::Path, w: u8, carrier: u16) -> usize {
    let mut total = 0usize;
    {
        let o = OranGenOptions {
            carrier_prbs: carrier,
            eaxcs: vec![0, 0x0101],
            iq_width: w,
            prbs_per_packet: 26,
            sections_per_packet: 3,
            slots: 1,
            seed: u64::from(w),
            ..OranGenOptions::default()
        };
        o.validate().expect("options");
        let path = dir.join(format!("bfp{w}.pcap"));
        let mut wr = CaptureWriter::create(&path, WriteFormat::Pcap, 65535).expect("pcap");
        let frames: Vec<_> = build_uplane_frames(&o).collect();
        for f in &frames {
            wr.write_frame(&f.data, f.data.len() as u32, f.timestamp_ns)
                .expect("write");
        }
        wr.flush().expect("flush");
        drop(wr);
        let theirs = tshark_prbs(&path, w, carrier);
        assert_eq!(theirs.len(), frames.len(), "width {w}: frames");
        let p = DecodeParams {
            carrier_prbs: carrier,
            numerology: 1,
            compression: Compression::Static {
                method: Method::Bfp,
                width: w,
            },
        };
        for (i, (f, t)) in frames.iter().zip(&theirs).enumerate() {
            let mut ours = vec![];
            decode_frame(&f.data, &p, |_, _, _, e, iq| ours.push((e, *iq)))
                .unwrap_or_else(|r| panic!("width {w} frame {}: {}", i + 1, r.name()));
            assert_eq!(ours.len(), t.len(), "width {w} frame {}: PRBs", i + 1);
            for (k, ((e, iq), (te, ts))) in ours.iter().zip(t).enumerate() {
                assert_eq!(
                    i64::from(*e),
                    *te,
                    "width {w} frame {} PRB {k}: exponent",
                    i + 1
                );
                assert_eq!(ts.len(), 24, "width {w} frame {} PRB {k}: samples", i + 1);
                let theirs: Vec<i64> = ts.iter().map(|&r| sign_extend(r, w) << te).collect();
                let ours: Vec<i64> = iq.iter().map(|&x| i64::from(x)).collect();
                assert_eq!(ours, theirs, "width {w} frame {} PRB {k}", i + 1);
                total += 1;
            }
        }
    }
    total
}
