//! Builds pktwarp's GPU kernels and embeds them in this crate (so a binary that embeds pktwarp
//! needs no build script of its own).
//!
//! - Always: every file of cuda/ is embedded (`CUDA_LIBRARY`), so the run time can generate a
//!   pipeline's source and compile it with NVRTC; and the built-in (fused) pipeline's source with
//!   its includes inlined (`BUILTIN_SOURCE`).
//! - When a pinned CUDA 13.0 nvcc is found (PKTWARP_NVCC, then $CUDA_HOME/bin/nvcc, then the pip
//!   package `nvidia-cuda-nvcc` 13.0.x under python3's `nvidia/cu13/bin`), the built-in pipeline is
//!   compiled to a fatbin with sm_90 SASS + compute_90 PTX (`BUILTIN_BINARY`), which the executor
//!   loads first. It serves every shipped config (an in-order subset of parse, acl, count). A newer
//!   nvcc is refused: its PTX is too new for the GPU machine's driver (CUDA 13.0).
//! - A failing compile is a cargo warning here (so one stage header's work in progress does not
//!   stop everyone's build) and a hard failure in scripts/check-kernels.sh, which CI runs.
//! - Feature `host`: host/*.cpp (the stage code compiled for the host, for differential tests)
//!   into a static library.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "src/codegen.rs"]
#[allow(dead_code)]
mod codegen;

const NVCC_VERSION: &str = "13.0";

fn main() {
    let root = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env("OUT_DIR"));
    let kdir = root.join("cuda");
    println!("cargo:rerun-if-changed=cuda");
    println!("cargo:rerun-if-changed=host");
    println!("cargo:rerun-if-changed=src/codegen.rs");
    println!("cargo:rerun-if-changed=src/codegen_flow_stats.rs");
    println!("cargo:rerun-if-env-changed=PKTWARP_NVCC");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    println!("cargo:rerun-if-env-changed=PKTWARP_NO_NVCC");
    println!("cargo:rerun-if-env-changed=PKTWARP_HOST_SANITIZE");
    // Cargo keys this package's build directory (OUT_DIR) and fingerprints by its path relative
    // to the workspace, so two checkouts (git worktrees) sharing a target dir share them, and
    // `rerun-if-changed` compares mtimes only: a cuda/ file edited in one checkout before the
    // other's last build looked unchanged, and the output kept the other checkout's source,
    // including the absolute cuda/ paths `CUDA_LIBRARY` embeds. PKTWARP_CHECKOUT (the checkout's
    // absolute path, from .cargo/config.toml) reruns this script whenever the checkout changes.
    println!("cargo:rerun-if-env-changed=PKTWARP_CHECKOUT");
    check_checkout(&root);

    let mut library = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&kdir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_file() {
                library.push(p);
            }
        }
    }
    library.sort();
    let lookup = |name: &str| std::fs::read_to_string(kdir.join(name)).ok();
    let builtin: Vec<codegen::StageSpec> = ["parse", "acl", "count"]
        .iter()
        .filter_map(|n| codegen::StageSpec::builtin(n))
        .collect();
    let main_src = codegen::generate(&builtin, codegen::Target::Gpu)
        .unwrap_or_else(|e| panic!("build.rs: the built-in pipeline: {e}"));
    let source = match codegen::inline_includes(&main_src, &lookup) {
        Ok(s) => s,
        Err(e) => {
            println!("cargo:warning=gpu-kernels: {e}");
            main_src.clone()
        }
    };
    let src_path = out.join("builtin.cu");
    write(&src_path, source.as_bytes());

    let (binary, origin) = compile_builtin(&out, &src_path);
    if std::env::var_os("CARGO_FEATURE_HOST").is_some() {
        build_host(&root);
    }
    let lib_entries: String = library
        .iter()
        .map(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            format!(
                "    ({name:?}, include_str!({:?})),\n",
                p.display().to_string()
            )
        })
        .collect();
    let rs = format!(
        "/// Prebuilt image (fatbin) of the built-in pipeline, when a pinned nvcc was found at build time.\n\
         pub static BUILTIN_BINARY: Option<&[u8]> = {};\n\
         /// The built-in pipeline's source with its headers inlined, for NVRTC at start.\n\
         pub static BUILTIN_SOURCE: &str = include_str!({:?});\n\
         /// How BUILTIN_BINARY was made.\n\
         pub const BUILTIN_ORIGIN: &str = {:?};\n\
         /// Every file of gpu-kernels/cuda/ (name, text).\n\
         pub static CUDA_LIBRARY: &[(&str, &str)] = &[\n{lib_entries}];\n",
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

/// The built-in pipeline's fatbin, when the pinned nvcc is here.
fn compile_builtin(out: &Path, src_path: &Path) -> (Option<PathBuf>, String) {
    let Some((nvcc, version)) = find_nvcc() else {
        return (None, String::new());
    };
    if std::env::var_os("PKTWARP_NO_NVCC").is_some() {
        return (None, String::new());
    }
    let fatbin = out.join("builtin.fatbin");
    let status = Command::new(&nvcc)
        .args([
            "-fatbin",
            "-std=c++17",
            "-gencode=arch=compute_90,code=[sm_90,compute_90]",
            "-o",
        ])
        .arg(&fatbin)
        .arg(src_path)
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
            println!(
                "cargo:warning=kernel compile failed; embedding the source for NVRTC at start"
            );
            (None, String::new())
        }
        Err(e) => {
            println!("cargo:warning={}: {e}", nvcc.display());
            (None, String::new())
        }
    }
}

/// host/*.cpp: the CUDA stage code compiled for the host (feature `host`).
fn build_host(root: &Path) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("host"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|x| x == "cpp"));
    files.sort();
    if files.is_empty() {
        return;
    }
    let mut b = cc::Build::new();
    b.cpp(true)
        .files(&files)
        .include(root.join("cuda"))
        .flag_if_supported("-std=c++14")
        .flag_if_supported("-Wno-comment")
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true);
    // PKTWARP_HOST_SANITIZE=address (scripts/ci-asan.sh): the host build under AddressSanitizer,
    // with its runtime linked into whatever links this crate (run with
    // ASAN_OPTIONS=verify_asan_link_order=0: rustc does not put it first).
    if let Some(s) = sanitizer() {
        b.flag(format!("-fsanitize={s}"))
            .flag("-fno-omit-frame-pointer")
            .opt_level(1);
        println!("cargo:rustc-link-lib=dylib=asan");
    }
    b.compile("pw_host_kernels");
}

/// `PKTWARP_HOST_SANITIZE`: `address` or unset (anything else is refused, not ignored).
fn sanitizer() -> Option<&'static str> {
    match std::env::var("PKTWARP_HOST_SANITIZE").as_deref() {
        Err(_) | Ok("") => None,
        Ok("address") => Some("address"),
        Ok(other) => panic!("build.rs: PKTWARP_HOST_SANITIZE={other}: only `address` is supported"),
    }
}

/// Warns when cargo was started in another checkout than the one it builds (its
/// .cargo/config.toml then names the other one, and a shared target dir may hold stale output).
fn check_checkout(root: &Path) {
    let Some(c) = std::env::var_os("PKTWARP_CHECKOUT") else {
        return;
    };
    let checkout = std::fs::canonicalize(&c).unwrap_or_else(|_| PathBuf::from(&c));
    let here = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    if !here.starts_with(&checkout) {
        println!(
            "cargo:warning=gpu-kernels: building {} from a cargo started in the checkout {}: \
             with a target dir shared between them, start cargo in the checkout it builds",
            here.display(),
            checkout.display()
        );
    }
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
