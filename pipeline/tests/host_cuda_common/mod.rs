//! The frame-by-frame comparison shared by the test binaries that run a pipeline's CUDA
//! compiled for the host (`HostPipeline`) beside the CPU executor.

#![allow(dead_code)]

use pipeline::burst::FrameDesc;
use pipeline::counters::QueueCounters;
use pipeline::meta::PacketMeta;
use pipeline::stage::Pipeline;
use pipeline::verdict::Verdict;
use pktwarp_kernels::host::{AclSel, HostFrame, HostPipeline, META_BYTES, VERDICT_BYTES};

/// The CPU verdict as the GPU writes it (action, reason, rule, mark).
pub fn cpu_verdict_bytes(v: &Verdict) -> [u8; VERDICT_BYTES] {
    let mut b = [0u8; VERDICT_BYTES];
    b[0] = v.action as u8;
    b[1] = v.reason.map_or(0xFF, |r| r as u8);
    b[4..8].copy_from_slice(&v.rule.to_le_bytes());
    b[8..12].copy_from_slice(&v.mark.to_le_bytes());
    b
}

/// Frame `i` of burst `n` (`d`, `f`) through the host build over `blocks` (its stage counters
/// into `gc`), on a copy of its bytes: the GPU's metadata and verdict, each filled with a
/// pattern first (0xAA, 0x55) so that a byte the kernel leaves unwritten shows.
pub fn host_frame(
    host: &HostPipeline,
    (n, i): (usize, usize),
    (d, f): (&FrameDesc, &[u8]),
    blocks: &[&[u8]],
    sel: Option<&AclSel>,
    gc: &mut [[u64; 8]; pktwarp_kernels::MAX_STAGES],
) -> ([u8; META_BYTES], [u8; VERDICT_BYTES]) {
    let mut buf = f.to_vec();
    let mut hf = HostFrame {
        len: f.len(),
        wire_len: d.wire_len,
        port: d.port,
        timestamp_ns: d.timestamp_ns,
        queue: d.queue,
        burst_seq: n as u32,
        burst_index: i as u32,
    };
    let mut gm = [0xAAu8; META_BYTES];
    let mut gv = [0x55u8; VERDICT_BYTES];
    host.run_frame_mut(&mut buf, &mut hf, blocks, sel, &mut gm, &mut gv, gc);
    (gm, gv)
}

/// One frame both sides ran: burst `n`, index `i` in it, the CPU's metadata and verdict and
/// the GPU's metadata.
pub struct Compared<'a> {
    pub n: usize,
    pub i: usize,
    pub d: &'a FrameDesc,
    pub f: &'a [u8],
    pub meta: &'a PacketMeta,
    pub verdict: &'a Verdict,
    pub gpu_meta: &'a [u8; META_BYTES],
}

/// The CPU pipeline (its counters in `c`) and the host-built GPU one, run burst by burst.
pub struct Sides<'a> {
    pub p: &'a Pipeline,
    pub host: &'a HostPipeline,
    pub c: &'a QueueCounters,
    pub sel: Option<&'a AclSel>,
    metas: Vec<PacketMeta>,
    verdicts: Vec<Verdict>,
}

impl<'a> Sides<'a> {
    pub fn new(
        p: &'a Pipeline,
        host: &'a HostPipeline,
        c: &'a QueueCounters,
        sel: Option<&'a AclSel>,
    ) -> Self {
        Sides {
            p,
            host,
            c,
            sel,
            metas: Vec::new(),
            verdicts: Vec::new(),
        }
    }

    /// Runs burst `n` through the CPU, then its frames one by one in arrival order through
    /// the host build over `blocks` (its stage counters into `gc`), and asserts that each
    /// frame's metadata and verdict are the same (`more` adds to the message); `each` sees
    /// every frame once it is compared.
    pub fn burst(
        &mut self,
        n: usize,
        chunk: &[(FrameDesc, Vec<u8>)],
        blocks: &[&[u8]],
        gc: &mut [[u64; 8]; pktwarp_kernels::MAX_STAGES],
        more: impl Fn(&Compared) -> String,
        mut each: impl FnMut(&Compared),
    ) {
        self.p.run_frames(
            chunk.iter().map(|(d, f)| (*d, f.as_slice())),
            &mut self.metas,
            &mut self.verdicts,
            self.c,
        );
        for (i, (d, f)) in chunk.iter().enumerate() {
            let (gm, gv) = host_frame(self.host, (n, i), (d, f), blocks, self.sel, gc);
            let seen = Compared {
                n,
                i,
                d,
                f,
                meta: &self.metas[i],
                verdict: &self.verdicts[i],
                gpu_meta: &gm,
            };
            let cv = cpu_verdict_bytes(seen.verdict);
            assert!(
                &gm == seen.meta.as_bytes() && gv[..2] == cv[..2] && gv[4..12] == cv[4..12],
                "frame {} (queue {}): cpu verdict {:?}; gpu verdict {gv:?}{}",
                n * 32 + i,
                d.queue,
                seen.verdict,
                more(&seen),
            );
            each(&seen);
        }
    }
}
