//! Builds the GPU kernels in gpu-kernels/ and embeds them in the `pktwarp` binary.
//!
//! - Always: `kernels.cu` with every local `#include "..."` inlined (and PW_HAVE_* defines for the
//!   stage headers present) goes into the binary, so a machine with NVRTC can compile it at start.
//! - When a pinned CUDA 13.0 nvcc is found (PKTWARP_NVCC, then $CUDA_HOME/bin/nvcc, then the pip
//!   package `nvidia-cuda-nvcc` 13.0.x under python3's `nvidia/cu13/bin`), the same source is
//!   compiled to a fatbin with sm_90 SASS + compute_90 PTX, which the binary loads first. A newer
//!   nvcc is refused: its PTX is too new for the GPU machine's driver (CUDA 13.0).
//! - A failing compile is a cargo warning here (so one stage header's work in progress does not
//!   stop everyone's build) and a hard failure in scripts/check-kernels.sh, which CI runs.
//!
//! Output: $OUT_DIR/kernels.rs, included by src/cmd/verify.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

const NVCC_VERSION: &str = "13.0";

fn main() {
    let root = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env("OUT_DIR"));
    let kdir = root.join("gpu-kernels");
    println!("cargo:rerun-if-changed=gpu-kernels");
    println!("cargo:rerun-if-env-changed=PKTWARP_NVCC");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    println!("cargo:rerun-if-env-changed=PKTWARP_NO_NVCC");

    let mut defines = String::new();
    for (hdr, def) in [("parse.cuh", "PW_HAVE_PARSE"), ("acl.cuh", "PW_HAVE_ACL")] {
        if kdir.join(hdr).exists() {
            defines.push_str(&format!("#define {def} 1\n"));
        }
    }
    let main_src = match std::fs::read_to_string(kdir.join("kernels.cu")) {
        Ok(s) => s,
        Err(e) => {
            println!("cargo:warning=gpu-kernels/kernels.cu: {e}; no GPU kernels embedded");
            String::new()
        }
    };
    let source = match inline_includes(&kdir, &main_src) {
        Ok(s) => format!("{defines}{s}"),
        Err(e) => {
            println!("cargo:warning=gpu-kernels: {e}");
            format!("{defines}{main_src}")
        }
    };
    let src_path = out.join("kernels_inlined.cu");
    write(&src_path, source.as_bytes());

    let (binary, origin) = match find_nvcc() {
        Some((nvcc, version)) if std::env::var_os("PKTWARP_NO_NVCC").is_none() => {
            let fatbin = out.join("kernels.fatbin");
            let status = Command::new(&nvcc)
                .args([
                    "-fatbin",
                    "-std=c++17",
                    "-gencode=arch=compute_90,code=[sm_90,compute_90]",
                    "-o",
                ])
                .arg(&fatbin)
                .arg(&src_path)
                .output();
            match status {
                Ok(o) if o.status.success() => (
                    Some(fatbin),
                    format!("nvcc {version}, sm_90 + compute_90 PTX"),
                ),
                Ok(o) => {
                    for l in String::from_utf8_lossy(&o.stderr).lines().take(40) {
                        println!("cargo:warning=nvcc: {l}");
                    }
                    println!("cargo:warning=kernel compile failed; embedding the source for NVRTC at start");
                    (None, String::new())
                }
                Err(e) => {
                    println!("cargo:warning={}: {e}", nvcc.display());
                    (None, String::new())
                }
            }
        }
        _ => (None, String::new()),
    };

    let rs = format!(
        "/// Prebuilt kernel image (fatbin), when a pinned nvcc was found at build time.\n\
         pub static KERNEL_BINARY: Option<&[u8]> = {};\n\
         /// kernels.cu with its headers inlined, for NVRTC at start.\n\
         pub static KERNEL_SOURCE: &str = include_str!({:?});\n\
         /// How the binary image was made.\n\
         pub const KERNEL_ORIGIN: &str = {:?};\n",
        match &binary {
            Some(p) => format!("Some(include_bytes!({:?}))", p.display().to_string()),
            None => "None".to_string(),
        },
        src_path.display().to_string(),
        if binary.is_some() {
            origin
        } else {
            "none (NVRTC at start)".to_string()
        }
    );
    write(&out.join("kernels.rs"), rs.as_bytes());
}

fn env(k: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| panic!("build.rs: {k} is not set (cargo sets it)"))
}

fn write(p: &Path, b: &[u8]) {
    if let Err(e) = std::fs::write(p, b) {
        panic!("build.rs: cannot write {}: {e}", p.display());
    }
}

/// The first nvcc of the pinned major.minor, with its full version.
fn find_nvcc() -> Option<(PathBuf, String)> {
    let mut cands: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("PKTWARP_NVCC") {
        cands.push(PathBuf::from(p));
    }
    if let Some(h) = std::env::var_os("CUDA_HOME") {
        cands.push(PathBuf::from(h).join("bin/nvcc"));
    }
    if let Ok(o) = Command::new("python3")
        .args(["-c", "import nvidia;print(nvidia.__path__[0])"])
        .output()
    {
        if o.status.success() {
            let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
            cands.push(PathBuf::from(p).join("cu13/bin/nvcc"));
        }
    }
    cands.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    for c in cands {
        if !c.exists() {
            continue;
        }
        let Ok(o) = Command::new(&c).arg("--version").output() else {
            continue;
        };
        let text = String::from_utf8_lossy(&o.stdout);
        let version = text
            .split("release ")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .unwrap_or("")
            .to_string();
        let full = text
            .split(", V")
            .nth(1)
            .and_then(|r| r.lines().next())
            .unwrap_or(&version)
            .to_string();
        if version == NVCC_VERSION {
            return Some((c, full));
        }
        println!(
            "cargo:warning={} is CUDA {version}, not the pinned {NVCC_VERSION}: not used",
            c.display()
        );
    }
    None
}

/// Inlines `#include "x"` of files in `dir` (each once, recursively), so NVRTC needs no include
/// path and the embedded source is self-contained.
fn inline_includes(dir: &Path, main: &str) -> Result<String, String> {
    fn walk(
        dir: &Path,
        text: &str,
        seen: &mut Vec<String>,
        out: &mut String,
        depth: u32,
    ) -> Result<(), String> {
        if depth > 16 {
            return Err("includes nested more than 16 deep".into());
        }
        for line in text.lines() {
            let t = line.trim_start();
            if let Some(name) = t
                .strip_prefix("#include \"")
                .and_then(|r| r.split('"').next())
            {
                if seen.iter().any(|s| s == name) {
                    continue;
                }
                let Ok(body) = std::fs::read_to_string(dir.join(name)) else {
                    // Left as is: it may sit in an inactive #if (a stage header not written
                    // yet); if not, the compiler names it.
                    out.push_str(line);
                    out.push('\n');
                    continue;
                };
                seen.push(name.to_string());
                out.push_str(&format!("/* ---- {name} ---- */\n"));
                walk(dir, &body, seen, out, depth + 1)?;
                out.push_str(&format!("/* ---- end of {name} ---- */\n"));
                continue;
            }
            out.push_str(line);
            out.push('\n');
        }
        Ok(())
    }
    let mut out = String::new();
    walk(dir, main, &mut Vec::new(), &mut out, 0)?;
    Ok(out)
}
