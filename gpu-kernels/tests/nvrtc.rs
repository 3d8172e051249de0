//! The kernel sources compile with NVRTC for sm_90, the way the binary compiles a pipeline's
//! kernel at start on a machine without a build-time nvcc (and every generated pipeline, user
//! stages included) (NVRTC has no libc headers and no
//! `offsetof`, unlike nvcc). Uses the pinned pip NVRTC (`nvidia-cuda-nvrtc==13.0.88`, installed
//! by scripts/install-deps.sh) from python3's `nvidia/cu13/lib`, or `PKTWARP_NVRTC_DIR`. Where no
//! NVRTC is installed the test says so and passes: nvcc compile checks are scripts/check-kernels.sh.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::PathBuf;

fn nvrtc_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("PKTWARP_NVRTC_DIR") {
        return Some(PathBuf::from(d));
    }
    let out = std::process::Command::new("python3")
        .args(["-c", "import nvidia; print(nvidia.__path__[0])"])
        .output()
        .ok()?;
    let base = String::from_utf8(out.stdout).ok()?;
    let d = PathBuf::from(base.trim()).join("cu13/lib");
    d.join("libnvrtc.so.13").is_file().then_some(d)
}

fn dlopen(path: &std::path::Path) -> *mut c_void {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).expect("path without NUL");
    // SAFETY: a NUL-terminated path; RTLD_GLOBAL so that libnvrtc's own dlopen of its builtins
    // library (by soname) finds the copy loaded here.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    assert!(!h.is_null(), "dlopen {} failed", path.display());
    h
}

/// Looks up `name` in `lib` as a function of type `F`.
///
/// # Safety
/// `F` must be the C signature of `name`.
unsafe fn sym<F: Copy>(lib: *mut c_void, name: &str) -> F {
    let c = CString::new(name).expect("symbol name");
    // SAFETY: `lib` is a live handle from dlopen; the name is NUL-terminated.
    let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
    assert!(!p.is_null(), "{name} not found in libnvrtc");
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: the caller guarantees `F` is the function's type; sizes checked above.
    unsafe { std::mem::transmute_copy(&p) }
}

type CreateProgram = unsafe extern "C" fn(
    *mut *mut c_void,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type CompileProgram = unsafe extern "C" fn(*mut c_void, c_int, *const *const c_char) -> c_int;
type GetSize = unsafe extern "C" fn(*mut c_void, *mut usize) -> c_int;
type GetBytes = unsafe extern "C" fn(*mut c_void, *mut c_char) -> c_int;

/// Compiles `src` (with `headers`, by name, from the embedded cuda/ library) with NVRTC for sm_90 and `defines`;
/// returns the CUBIN size. None (and a note) when no NVRTC 13.0 is installed.
fn nvrtc_compile(what: &str, src: &CStr, headers: &[&str], defines: &[&CStr]) -> Option<usize> {
    let Some(dir) = nvrtc_dir() else {
        // CI installs it (scripts/install-deps.sh): a skip there would hide a broken kernel.
        assert!(
            std::env::var_os("CI").is_none(),
            "no NVRTC 13.0 found (pip nvidia-cuda-nvrtc or PKTWARP_NVRTC_DIR) and CI is set"
        );
        eprintln!("skipped: no NVRTC 13.0 found (pip nvidia-cuda-nvrtc or PKTWARP_NVRTC_DIR)");
        return None;
    };
    let read = |n: &str| {
        CString::new(pktwarp_kernels::library_file(n).unwrap_or_else(|| panic!("no {n}")))
            .expect("header without NUL")
    };
    let bodies: Vec<CString> = headers.iter().map(|h| read(h)).collect();
    let names: Vec<CString> = headers
        .iter()
        .map(|h| CString::new(*h).expect("name without NUL"))
        .collect();
    // The builtins library first (see dlopen), then NVRTC itself.
    if let Some(b) = std::fs::read_dir(&dir)
        .expect("read NVRTC dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libnvrtc-builtins.so.13"))
        })
    {
        dlopen(&b);
    }
    let lib = dlopen(&dir.join("libnvrtc.so.13"));
    // SAFETY: the signatures are NVRTC's (nvrtc.h, CUDA 13.0): nvrtcCreateProgram,
    // nvrtcCompileProgram, nvrtcGetProgramLogSize / nvrtcGetProgramLog, nvrtcGetCUBINSize.
    let (create, compile, log_size, get_log, cubin_size) = unsafe {
        (
            sym::<CreateProgram>(lib, "nvrtcCreateProgram"),
            sym::<CompileProgram>(lib, "nvrtcCompileProgram"),
            sym::<GetSize>(lib, "nvrtcGetProgramLogSize"),
            sym::<GetBytes>(lib, "nvrtcGetProgramLog"),
            sym::<GetSize>(lib, "nvrtcGetCUBINSize"),
        )
    };
    let hdr_ptrs: Vec<*const c_char> = bodies.iter().map(|h| h.as_ptr()).collect();
    let name_ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let mut opts: Vec<&CStr> = vec![c"--gpu-architecture=sm_90", c"--std=c++17"];
    opts.extend_from_slice(defines);
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: *mut c_void = std::ptr::null_mut();
    // SAFETY: every pointer is a live NUL-terminated string or an array of them of the given
    // length; `prog` receives the program handle (leaked: one per test run).
    let rc = unsafe {
        create(
            &mut prog,
            src.as_ptr(),
            c"check.cu".as_ptr(),
            hdr_ptrs.len() as c_int,
            hdr_ptrs.as_ptr(),
            name_ptrs.as_ptr(),
        )
    };
    assert_eq!(rc, 0, "nvrtcCreateProgram");
    // SAFETY: as above.
    let rc = unsafe { compile(prog, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
    let mut n = 0usize;
    // SAFETY: `prog` is valid; the log buffer has the size NVRTC reported.
    let log = unsafe {
        log_size(prog, &mut n);
        let mut buf = vec![0 as c_char; n.max(1)];
        get_log(prog, buf.as_mut_ptr());
        CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
    };
    assert_eq!(rc, 0, "NVRTC could not compile {what}:\n{log}");
    let mut cubin = 0usize;
    // SAFETY: `prog` compiled successfully.
    unsafe { cubin_size(prog, &mut cubin) };
    assert!(cubin > 0, "NVRTC produced no sm_90 CUBIN");
    assert!(!log.contains("warning"), "NVRTC warnings:\n{log}");
    eprintln!("{what}: NVRTC sm_90 CUBIN of {cubin} bytes");
    Some(cubin)
}

#[test]
fn parse_cuh_compiles_with_nvrtc_for_sm_90() {
    let src = c"#include \"parse.cuh\"
extern \"C\" __global__ void pw_parse_check(const uint8_t *d, const uint32_t *o,
        const uint32_t *l, pw_packet_meta *m, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) pw_parse(d + o[i], l[i], &m[i]);
}
";
    nvrtc_compile("parse.cuh", src, &["pktwarp_abi.h", "parse.cuh"], &[]);
}

/// The inspect prefilter's kernels (one thread and one warp per payload) as the run time would
/// compile them.
#[test]
fn inspect_match_cuh_compiles_with_nvrtc_for_sm_90() {
    let src = c"#include \"inspect_match.cuh\"\n";
    nvrtc_compile(
        "inspect_match.cuh",
        src,
        &["pktwarp_abi.h", "inspect_match.cuh"],
        &[],
    );
}

/// The inspect stage's full check and its batch kernels (cuda/inspect_eval.cuh).
#[test]
fn inspect_eval_compiles_with_nvrtc_for_sm_90() {
    let src = c"#include \"inspect_eval.cuh\"\n";
    nvrtc_compile(
        "inspect_eval.cuh",
        src,
        &["pktwarp_abi.h", "inspect_pcre.cuh", "inspect_eval.cuh"],
        &[],
    );
}

/// The built-in pipeline's module as a binary built without nvcc compiles it at start (the
/// embedded, self-contained source).
#[test]
fn the_builtin_module_compiles_with_nvrtc_for_sm_90() {
    let img = pktwarp_kernels::builtin_image();
    let src = CString::new(img.source.as_bytes()).expect("source without NUL");
    nvrtc_compile("built-in pipeline", &src, &[], &[]);
}

/// A user stage in CUDA (the stage ABI signature) and composed orders of the built-ins: the
/// generated module, transport included, compiles with the pinned NVRTC.
#[test]
fn composed_pipelines_and_a_user_stage_compile_with_nvrtc_for_sm_90() {
    use pktwarp_kernels::{StageKind, StageSpec};
    let guard = StageSpec {
        name: "syn_guard".into(),
        kind: StageKind::Custom {
            function: "test_syn_guard".into(),
            source: "PW_DEVICE void test_syn_guard(const pw_frame *f, pw_packet_meta *m, pw_verdict *v,\n\
                     const void *params, pw_stage_counters *c) {\n\
                 const uint32_t min_port = params ? *(const uint32_t *)params : 1024u;\n\
                 (void)f;\n\
                 if (m->ip_proto == 6u && (m->tcp_flags & 0x12u) == 0x02u && m->src_port < min_port) {\n\
                     v->action = (uint8_t)PW_ACTION_DROP;\n\
                     PW_ADD64(&c->v[1], 1);\n\
                 }\n\
             }\n"
                .into(),
            writes_frame: false,
        },
    };
    let b = |n: &str| StageSpec::builtin(n).expect("built-in");
    // One module: each takes ~20 s of NVRTC on a CI core; the host builds cover the orders.
    let stages = vec![b("parse"), guard, b("acl"), b("count")];
    let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
    let src =
        pktwarp_kernels::pipeline_source(&stages, pktwarp_kernels::Target::Gpu).expect("generate");
    let src = CString::new(src).expect("source without NUL");
    nvrtc_compile(&names.join(" -> "), &src, &[], &[]);
}

/// The rewrite stages (cuda/rewrite_stages.cuh: every one of them, so the module is the
/// writing pipeline's), as the executor compiles a rewriting pipeline at start.
#[test]
fn a_pipeline_of_every_rewrite_stage_compiles_with_nvrtc_for_sm_90() {
    use pktwarp_kernels::StageSpec;
    let names = [
        "vlan", "parse", "route", "ttl", "dscp", "respond", "l2fwd", "count",
    ];
    // `ttl` comes through the registry door: its CUDA is the library's function by its header.
    let stages: Vec<StageSpec> = names
        .iter()
        .map(|n| match *n {
            "ttl" => StageSpec {
                name: "ttl".into(),
                kind: pktwarp_kernels::StageKind::Custom {
                    function: "pw_stage_ttl".into(),
                    source: "#include \"rewrite_stages.cuh\"\n".into(),
                    writes_frame: true,
                },
            },
            n => StageSpec::builtin(n).expect("a library stage"),
        })
        .collect();
    let src =
        pktwarp_kernels::pipeline_source(&stages, pktwarp_kernels::Target::Gpu).expect("generate");
    assert!(src.contains("#define PW_PIPELINE_WRITES 1"));
    let src = CString::new(src).expect("source without NUL");
    nvrtc_compile(&names.join(" -> "), &src, &[], &[]);
}

/// The stateful firewall's module (an ordered stage with its key pass: the owned layout of
/// cuda/kernels_owned.cu compiled in), as the executor compiles it at start.
#[test]
fn the_stateful_firewall_with_its_key_pass_compiles_with_nvrtc_for_sm_90() {
    use pktwarp_kernels::StageSpec;
    let names = ["parse", "conntrack", "acl", "count"];
    let stages: Vec<StageSpec> = names
        .iter()
        .map(|n| StageSpec::builtin(n).expect("a library stage"))
        .collect();
    let src =
        pktwarp_kernels::pipeline_source(&stages, pktwarp_kernels::Target::Gpu).expect("generate");
    assert!(src.contains("#define PW_PIPELINE_ORDER_KEY 1") && src.contains("pw_run_owned("));
    let src = CString::new(src).expect("source without NUL");
    nvrtc_compile(&names.join(" -> "), &src, &[], &[]);
}

/// The inspect stage (cuda/inspect_stage.cuh over inspect_match.cuh and inspect_eval.cuh) after
/// conntrack, an ordered stage, with the payload staging it asks for (READS_PAYLOAD), as the
/// executor compiles an IDS pipeline at start.
#[test]
fn an_ids_pipeline_compiles_with_nvrtc_for_sm_90() {
    use pktwarp_kernels::StageSpec;
    let names = ["parse", "conntrack", "inspect", "count"];
    let stages: Vec<StageSpec> = names
        .iter()
        .map(|n| StageSpec::builtin(n).expect("a built-in"))
        .collect();
    let src =
        pktwarp_kernels::pipeline_source(&stages, pktwarp_kernels::Target::Gpu).expect("generate");
    assert!(src.contains("#define PW_PIPELINE_READS_PAYLOAD 1"));
    assert!(src.contains("#define PW_PIPELINE_ORDERED 1"));
    let src = CString::new(src).expect("source without NUL");
    nvrtc_compile(&names.join(" -> "), &src, &[], &[]);
}
