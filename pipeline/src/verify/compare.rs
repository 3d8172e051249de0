//! Frame-by-frame comparison of the GPU's results with the reference's.

use std::fmt;

use crate::burst::Burst;
use crate::meta::PacketMeta;
use pktwarp_core::abi::Verdict;

use super::Expected;

/// Field names of `pw_packet_meta` by byte offset (for mismatch reports).
const META_FIELDS: &[(usize, &str)] = &[
    (0, "frame_len"),
    (4, "status"),
    (6, "flags"),
    (8, "ether_type"),
    (10, "vlan_count"),
    (11, "mpls_count"),
    (12, "vlan_tci"),
    (16, "mpls_lse"),
    (20, "l3_offset"),
    (22, "l4_offset"),
    (24, "payload_offset"),
    (26, "error_offset"),
    (28, "ip_version"),
    (29, "ip_proto"),
    (30, "ip_tos"),
    (31, "ip_ttl"),
    (32, "src_ip"),
    (48, "dst_ip"),
    (64, "src_port"),
    (66, "dst_port"),
    (68, "tcp_flags"),
    (70, "icmp_type"),
    (71, "icmp_code"),
    (72, "frag_offset"),
    (74, "arp_oper"),
    (76, "frag_id"),
    (80, "tunnel_type"),
    (81, "inner_ip_version"),
    (82, "inner_ip_proto"),
    (83, "ecpri_msg_type"),
    (84, "tunnel_id"),
    (88, "inner_l3_offset"),
    (90, "inner_l4_offset"),
    (92, "inner_src_port"),
    (94, "inner_dst_port"),
    (96, "inner_src_ip"),
    (112, "inner_dst_ip"),
    (128, "ecpri_payload_size"),
    (130, "ecpri_pc_id"),
    (132, "ecpri_seq_id"),
    (134, "inner_tcp_flags"),
    (136, "ecpri_revision"),
    (137, "ct_state"),
    (138, "ct_dir"),
    (139, "reserved1"),
    (140, "steer_mark"),
];

/// Names of the metadata fields whose bytes differ, in field order.
pub fn meta_diff(a: &PacketMeta, b: &PacketMeta) -> Vec<&'static str> {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    let mut out: Vec<&'static str> = Vec::new();
    for (i, (p, q)) in x.iter().zip(y.iter()).enumerate() {
        if p != q {
            let name = META_FIELDS
                .iter()
                .rev()
                .find(|(o, _)| *o <= i)
                .map_or("?", |(_, n)| *n);
            if out.last() != Some(&name) {
                out.push(name);
            }
        }
    }
    out
}

/// Lower-case hex of `b`, no separators.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What the GPU returned for a chunk: a verdict per frame (`seen[i]`: frame i's burst came
/// back), the metadata when it was written back, and the bulk kernel's verdicts when it ran.
pub struct GpuChunk<'a> {
    pub verdicts: &'a [Verdict],
    pub seen: &'a [bool],
    pub metas: Option<&'a [PacketMeta]>,
    pub bulk: Option<&'a [Verdict]>,
}

/// Mismatches counted so far, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub meta: u64,
    /// A verdict that differs or never came back.
    pub verdict: u64,
    pub bulk: u64,
}

/// One frame the GPU got wrong; `Display` is the report line (its formatting work is only done
/// for the mismatches that are printed).
pub enum Mismatch<'a> {
    /// Frame `index` (counted over the whole input) came back from no burst.
    NoVerdict { index: u64 },
    Meta {
        index: u64,
        frame: &'a [u8],
        cpu: &'a PacketMeta,
        gpu: &'a PacketMeta,
    },
    Verdict {
        index: u64,
        cpu: &'a Verdict,
        gpu: &'a Verdict,
    },
    /// The bulk (stage throughput) kernel's verdict.
    Bulk {
        index: u64,
        cpu: &'a Verdict,
        gpu: &'a Verdict,
    },
}

impl fmt::Display for Mismatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::NoVerdict { index } => write!(f, "  frame {index}: no GPU verdict"),
            Mismatch::Meta {
                index,
                frame,
                cpu,
                gpu,
            } => write!(
                f,
                "  frame {index} ({} B): metadata differs in {:?}\n    cpu {cpu:?}\n    gpu {gpu:?}\n    bytes {}",
                frame.len(),
                meta_diff(cpu, gpu),
                hex(&frame[..frame.len().min(96)])
            ),
            Mismatch::Verdict { index, cpu, gpu } => {
                write!(f, "  frame {index}: verdict differs: cpu {cpu:?} gpu {gpu:?}")
            }
            Mismatch::Bulk { index, cpu, gpu } => write!(
                f,
                "  frame {index}: bulk-kernel verdict differs: cpu {cpu:?} gpu {gpu:?}"
            ),
        }
    }
}

/// Compares every frame of `chunk` (whose first frame is frame `frame_base` of the input): the
/// GPU's metadata (when both sides have it), verdict and bulk verdict against the reference's
/// `want`. Counts into `tally` and hands each mismatch to `on` in frame order. A frame missing
/// from either side (slices shorter than the chunk) counts as a verdict that never came back.
pub fn compare_chunk(
    chunk: &Burst,
    frame_base: u64,
    want: &Expected,
    got: &GpuChunk<'_>,
    tally: &mut Tally,
    mut on: impl FnMut(&Mismatch<'_>),
) {
    let metas = match got.metas {
        Some(m) if !want.metas.is_empty() => Some(m),
        _ => None,
    };
    for i in 0..chunk.len() {
        let index = frame_base + i as u64;
        let (Some(cpu_v), Some(gpu_v), Some(true)) =
            (want.verdicts.get(i), got.verdicts.get(i), got.seen.get(i))
        else {
            tally.verdict += 1;
            on(&Mismatch::NoVerdict { index });
            continue;
        };
        if let Some(m) = metas {
            let (cpu, gpu) = (want.metas.get(i), m.get(i));
            if cpu != gpu {
                tally.meta += 1;
                if let (Some(cpu), Some(gpu)) = (cpu, gpu) {
                    on(&Mismatch::Meta {
                        index,
                        frame: chunk.frame(i),
                        cpu,
                        gpu,
                    });
                }
            }
        }
        if gpu_v != cpu_v {
            tally.verdict += 1;
            on(&Mismatch::Verdict {
                index,
                cpu: cpu_v,
                gpu: gpu_v,
            });
        }
        if let Some(bv) = got.bulk {
            let b = bv.get(i);
            if b != Some(cpu_v) {
                tally.bulk += 1;
                if let Some(gpu) = b {
                    on(&Mismatch::Bulk {
                        index,
                        cpu: cpu_v,
                        gpu,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::burst::FrameDesc;
    use crate::verify::Reference;

    #[test]
    fn meta_diff_names_fields() {
        let a = PacketMeta::default();
        let mut b = a;
        b.src_ip[2] = 7;
        b.inner_tcp_flags = 1;
        assert_eq!(meta_diff(&a, &b), vec!["src_ip", "inner_tcp_flags"]);
        assert!(meta_diff(&a, &a).is_empty());
    }

    fn chunk() -> Burst {
        let mut b = Burst::default();
        // A TCP/IPv4 frame (parses), then two truncated ones (parse errors).
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&46u16.to_be_bytes());
        f[22] = 64;
        f[23] = 6;
        f[46] = 0x50;
        b.push(&f, FrameDesc::default());
        b.push(&f[..10], FrameDesc::default());
        b.push(&f[..20], FrameDesc::default());
        b
    }

    /// Equal results give no mismatch; each kind of difference is counted and reported once,
    /// with the frame's index over the whole input.
    #[test]
    fn compare_chunk_counts_each_kind() {
        let r = Reference::new(None);
        let b = chunk();
        let mut want = Expected::default();
        r.run(b.frames().map(|(d, f)| (*d, f)), true, &mut want, None);
        let seen = vec![true; b.len()];
        let same = GpuChunk {
            verdicts: &want.verdicts,
            seen: &seen,
            metas: Some(&want.metas),
            bulk: Some(&want.verdicts),
        };
        let mut t = Tally::default();
        compare_chunk(&b, 100, &want, &same, &mut t, |m| panic!("unexpected {m}"));
        assert_eq!(t, Tally::default());

        let mut v = want.verdicts.clone();
        v[1].mark = 9;
        let mut m = want.metas.clone();
        m[0].ip_ttl = 1;
        let mut bulk = want.verdicts.clone();
        bulk[2].rule = 4;
        let mut seen2 = seen.clone();
        seen2[2] = false;
        let got = GpuChunk {
            verdicts: &v,
            seen: &seen2,
            metas: Some(&m),
            bulk: Some(&bulk),
        };
        let mut lines = Vec::new();
        compare_chunk(&b, 100, &want, &got, &mut t, |x| lines.push(x.to_string()));
        assert_eq!(
            t,
            Tally {
                meta: 1,
                verdict: 2,
                bulk: 0
            }
        );
        assert!(lines[0].starts_with("  frame 100 (60 B): metadata differs in [\"ip_ttl\"]"));
        assert!(lines[1].starts_with("  frame 101: verdict differs"));
        assert_eq!(lines[2], "  frame 102: no GPU verdict");
        // The bulk verdict of a frame whose burst came back.
        seen2[2] = true;
        let got = GpuChunk {
            verdicts: &v,
            seen: &seen2,
            metas: None,
            bulk: Some(&bulk),
        };
        let mut t = Tally::default();
        compare_chunk(&b, 0, &want, &got, &mut t, |_| {});
        assert_eq!((t.meta, t.verdict, t.bulk), (0, 1, 1));
    }

    /// GPU slices shorter than the chunk (a bad caller, or a lost burst): the missing frames
    /// count as verdicts that never came back; nothing panics.
    #[test]
    fn compare_chunk_short_slices() {
        let r = Reference::new(None);
        let b = chunk();
        let mut want = Expected::default();
        r.run(b.frames().map(|(d, f)| (*d, f)), true, &mut want, None);
        let got = GpuChunk {
            verdicts: &want.verdicts[..1],
            seen: &[true, true],
            metas: Some(&want.metas[..1]),
            bulk: Some(&[]),
        };
        let mut t = Tally::default();
        let mut n = 0;
        compare_chunk(&b, 0, &want, &got, &mut t, |_| n += 1);
        assert_eq!((t.verdict, t.bulk), (2, 1));
        assert_eq!(n, 2);
    }
}
