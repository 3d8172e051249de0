//! Where completed (or partial) slots go: a library callback, or `.npy` files for inspection.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::grid::{GridData, SlotGrid};

/// Receives every closed slot (complete or partial, see [`SlotGrid::complete`]). This is where
/// a PHY plugs in. Called with the stage's state locked: copy what you keep, return quickly
/// (or deliver from a thread of your own, as [`BackgroundSink`] does for the file sinks).
pub trait SlotSink: Send {
    fn slot(&mut self, slot: &SlotGrid) -> Result<(), String>;

    /// Errors of slots delivered after `slot` returned (a sink that writes in the background),
    /// taken since the last call: how many, and the first one's message.
    fn late_errors(&mut self) -> (u64, Option<String>) {
        (0, None)
    }

    /// Waits until every slot handed over has been delivered (the end of a run).
    fn finish(&mut self) {}
}

pub use super::sink_writer::{BackgroundSink, STALL};

/// A closure as a sink.
pub struct FnSink<F>(pub F);

impl<F: FnMut(&SlotGrid) + Send> SlotSink for FnSink<F> {
    fn slot(&mut self, slot: &SlotGrid) -> Result<(), String> {
        (self.0)(slot);
        Ok(())
    }
}

/// One `.npy` file per slot: `slot_<n>_f<frame>_sf<subframe>_s<slot>_<complete|partial>.npy`,
/// shape (eAxCs, 14, PRBs, 12, 2), dtype `<i2` or `<f2`; the grid's eAxC ids in order are in
/// `eaxcs.json` beside them.
pub struct NpySink {
    dir: PathBuf,
    written: u64,
    /// The eAxC ids `eaxcs.json` holds (a learnt grid's grow).
    ids: Vec<u16>,
    max_files: Option<u64>,
}

/// Creates the sink folder `dir` (config key `key`) and proves it takes files: a folder that
/// exists but refuses writes (read-only, a mount that went away) is a config error at start,
/// not a run that loses every slot.
pub fn prepare_dir(dir: &Path, key: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{key}: {}: {e}", dir.display()))?;
    let probe = dir.join(format!(".pktwarp-probe-{}", std::process::id()));
    let written = std::fs::write(&probe, b"probe");
    let _ = std::fs::remove_file(&probe);
    written.map_err(|e| format!("{key}: {}: cannot write a file there: {e}", dir.display()))
}

/// Writes `bytes` to `path` whole or not at all: into `PATH.partial`, renamed to `path` once
/// every byte is written (a full disk leaves no truncated file under the final name; the
/// partial one is removed).
pub fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.flush()))
        .and_then(|()| std::fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", path.display())
    })
}

impl NpySink {
    pub fn create(dir: &Path, max_files: Option<u64>) -> Result<Self, String> {
        prepare_dir(dir, "fronthaul.sink.npy.dir")?;
        Ok(NpySink {
            dir: dir.to_path_buf(),
            written: 0,
            ids: Vec::new(),
            max_files,
        })
    }

    pub fn written(&self) -> u64 {
        self.written
    }
}

/// The bytes of an `.npy` (format 1.0) file of the grid.
pub fn npy_bytes(g: &SlotGrid) -> Vec<u8> {
    let [_, s, p] = g.shape();
    let e = g.rows();
    let descr = match g.data() {
        GridData::Int16(_) => "<i2",
        GridData::Fp16(_) => "<f2",
    };
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({e}, {s}, {p}, 12, 2), }}"
    );
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + e * s * p * 48);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&g.rows_bytes());
    out
}

impl SlotSink for NpySink {
    fn slot(&mut self, g: &SlotGrid) -> Result<(), String> {
        if self.max_files.is_some_and(|m| self.written >= m) {
            return Ok(());
        }
        if self.written == 0 || self.ids != g.eaxc_ids {
            self.ids.clone_from(&g.eaxc_ids);
            let ids = serde_json::to_string(&g.eaxc_ids).map_err(|e| e.to_string())?;
            write_whole(&self.dir.join("eaxcs.json"), ids.as_bytes())?;
        }
        let k = g.key;
        let name = format!(
            "slot_{:06}_f{}_sf{}_s{}_{}.npy",
            self.written,
            k.frame_id,
            k.subframe_id,
            k.slot_id,
            if g.complete { "complete" } else { "partial" }
        );
        write_whole(&self.dir.join(name), &npy_bytes(g))?;
        self.written += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GridFormat;

    #[test]
    fn npy_header_and_data() {
        let mut g = SlotGrid::new(1, 2, GridFormat::Int16, 1.0);
        let mut iq = [0; 24];
        iq[0] = -2;
        g.store(0, 0, 1, &iq);
        let b = npy_bytes(&g);
        assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
        let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hl) % 64, 0);
        let h = std::str::from_utf8(&b[10..10 + hl]).unwrap();
        assert!(h.contains("'shape': (1, 14, 2, 12, 2)"), "{h}");
        assert_eq!(b.len(), 10 + hl + 14 * 2 * 48);
        // PRB 1 of symbol 0 starts at sample 24.
        assert_eq!(&b[10 + hl + 48..10 + hl + 50], &(-2i16).to_le_bytes());
    }

    /// A write cut short (a full disk; here the file size limit of `ulimit -f`, in a child
    /// process of this test, which SIGXFSZ may end mid-write) never leaves a file under its
    /// final name: only the `.partial` one, or nothing.
    #[cfg(unix)]
    #[test]
    fn a_write_cut_short_leaves_no_file_under_its_name() {
        const CHILD: &str = "PW_FH_WRITE_WHOLE_CHILD";
        if let Some(dir) = std::env::var_os(CHILD) {
            let big = vec![7u8; 1 << 20];
            let r = write_whole(&Path::new(&dir).join("slot_complete.npy"), &big);
            assert!(r.is_err(), "a 1 MiB write under a 1 KiB limit succeeded");
            return;
        }
        let dir = std::env::temp_dir().join(format!("pw-npy-cut-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", "ulimit -f 2 && exec \"$0\" \"$@\""])
            .arg(&exe)
            .args([
                "--exact",
                "fronthaul::sink::tests::a_write_cut_short_leaves_no_file_under_its_name",
            ])
            .env(CHILD, &dir)
            .output()
            .expect("sh");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n == "slot_complete.npy"),
            "{names:?} {out:?}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn files_in_a_folder_and_a_bad_folder() {
        let dir = std::env::temp_dir().join(format!("pw-npy-{}", std::process::id()));
        let mut s = NpySink::create(&dir, Some(1)).unwrap();
        let g = SlotGrid::new(1, 1, GridFormat::Fp16, 1.0);
        s.slot(&g).unwrap();
        s.slot(&g).unwrap(); // over max_files: not written
        assert_eq!(s.written(), 1);
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names
            .iter()
            .any(|n| n == "slot_000000_f0_sf0_s0_partial.npy"));
        std::fs::remove_dir_all(&dir).ok();
        let e = NpySink::create(Path::new("/proc/version/x"), None)
            .err()
            .unwrap();
        assert!(e.contains("fronthaul.sink.npy.dir"), "{e}");
    }
}
