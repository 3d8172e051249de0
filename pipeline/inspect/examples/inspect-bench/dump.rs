//! The GPU probe's inputs (`tools/gpu-probes/inspect_bench_gpu.cu`), one folder per payload
//! size, all little-endian:
//!
//! - `program.bin`: the rule program's image (`Program::image`, u64 words)
//! - `frames.bin`, `arena.bin`: the frames as `FrameRec`s (`pw_insp_frame`) and their buffers
//! - `always.bin`: u32 rules without a fast pattern (candidates of every frame)
//! - `bufsets.bin`: u32 count K, then K u32 buffer codes (the order of the sets)
//! - `match_K.bin`: set K's matcher image (u32 words); `rules_off_K.bin` (u32, patterns + 1)
//!   and `rules_K.bin` (u32): each pattern's rules, CSR
//! - `expect_ncands.bin`: u32 candidates per frame; `expect_verdicts.bin`: 8-byte verdicts
//!   (rule u32, action u8, 3 zero bytes), as the CPU engine computed them.

use std::path::Path;

use pktwarp_inspect::eval::image::{frame_record, FrameRec};

use super::engine::{self, Rules, Scratch, Walker};
use super::traffic::Owned;

fn u32s(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(dir.join(name), bytes).map_err(|e| format!("{}: {e}", dir.join(name).display()))
}

/// Writes the folder `dir` for `frames`.
pub fn dump(dir: &Path, r: &Rules, frames: &[Owned]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let img = r.program.image().map_err(|e| e.to_string())?;
    write(
        dir,
        "program.bin",
        &img.iter()
            .flat_map(|w| w.to_le_bytes())
            .collect::<Vec<u8>>(),
    )?;
    let mut arena = Vec::new();
    let mut recs = Vec::with_capacity(frames.len() * size_of::<FrameRec>());
    let mut ncands = Vec::with_capacity(frames.len());
    let mut verdicts = Vec::with_capacity(frames.len() * 8);
    let mut s = Scratch::new(r);
    let mut walker = Walker(r);
    for o in frames {
        let f = o.frame();
        let rec = frame_record(&f, &mut arena).map_err(|e| e.to_string())?;
        // SAFETY: FrameRec is #[repr(C)] plain integers without padding holes (pinned by the
        // layout tests of eval::image); viewing one as bytes reads initialized memory only.
        let b = unsafe {
            std::slice::from_raw_parts(
                (&rec as *const FrameRec).cast::<u8>(),
                size_of::<FrameRec>(),
            )
        };
        recs.extend_from_slice(b);
        let v = engine::inspect(r, &mut walker, &f, &mut s);
        ncands.push(s.cands.len() as u32);
        verdicts.extend_from_slice(&v.rule.to_le_bytes());
        verdicts.extend_from_slice(&[v.action, 0, 0, 0]);
    }
    write(dir, "frames.bin", &recs)?;
    write(dir, "arena.bin", &arena)?;
    write(dir, "always.bin", &u32s(&r.always))?;
    let mut sets = vec![r.bufs.len() as u32];
    sets.extend(r.bufs.iter().map(|b| b.buffer as u32));
    write(dir, "bufsets.bin", &u32s(&sets))?;
    for (k, b) in r.bufs.iter().enumerate() {
        write(dir, &format!("match_{k}.bin"), &u32s(b.image.words()))?;
        let mut off = vec![0u32];
        let mut rules = Vec::new();
        for list in &b.rules_of {
            rules.extend_from_slice(list);
            off.push(rules.len() as u32);
        }
        write(dir, &format!("rules_off_{k}.bin"), &u32s(&off))?;
        write(dir, &format!("rules_{k}.bin"), &u32s(&rules))?;
    }
    write(dir, "expect_ncands.bin", &u32s(&ncands))?;
    write(dir, "expect_verdicts.bin", &verdicts)
}
