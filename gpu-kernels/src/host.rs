//! The CUDA stage code compiled for the host (feature `host`): the same source the GPU runs,
//! callable on machines without a GPU so tests hold it equal to the Rust stages.
//!
//! - [`ffi`]: the built-in stage functions of `host/*.cpp`, compiled by build.rs.
//! - [`HostPipeline`]: any stage list's generated `pw_pipeline_frame` (user stages included),
//!   compiled at run time with the system C++ compiler (`$CXX`, else `c++`) into a shared object
//!   and loaded with `dlopen`.

use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};

use crate::codegen::{StageSpec, Target};

/// The extern "C" functions of host/*.cpp. Pointer types are raw: the Rust mirrors of the ABI
/// structs live in the crates that use them (pipeline::meta, flow_rules::abi).
pub mod ffi {
    extern "C" {
        pub fn pw_host_parse(frame: *const u8, len: u32, meta: *mut u8);
        pub fn pw_host_meta_size() -> u32;
        pub fn pw_host_parse_fast_key(frame: *const u8, len: u32, port: u16, kw: *mut u32) -> u32;
        pub fn pw_host_acl_key_words_of_meta(meta: *const u8, port: u16, kw: *mut u32);
        pub fn pw_host_acl_classify(image: *const u32, key: *const u8) -> u32;
        pub fn pw_host_acl_classify_lanes(image: *const u32, key: *const u8, gsize: u32) -> u32;
        pub fn pw_host_acl_key_from_meta(meta: *const u8, port_id: u16, key: *mut u8);
        /// host/flow_host.cpp: a burst through the flow table (pktwarp_flow::FlowTableAbi,
        /// FlowCounters, PacketMeta, FlowResult) with `nthreads` GPU threads emulated.
        pub fn pw_host_flow_burst(
            table: *const u8,
            counters: *mut u64,
            n: u32,
            metas: *const u8,
            frames: *const *const u8,
            lens: *const u32,
            now_ns: *const u64,
            out: *mut u8,
            nthreads: u32,
        ) -> u32;
        /// As `pw_host_flow_burst`, the flows that end written into `ring` (a `pw_flow_ring`
        /// header, then its stamps and records: pktwarp_flow::ring).
        pub fn pw_host_flow_burst_ring(
            table: *const u8,
            counters: *mut u64,
            n: u32,
            metas: *const u8,
            frames: *const *const u8,
            lens: *const u32,
            now_ns: *const u64,
            out: *mut u8,
            nthreads: u32,
            ring: *mut u8,
        ) -> u32;
        /// pw_flow_meta_store on `n` pw_flow_result records into `n` PacketMeta records.
        pub fn pw_host_flow_meta_store(results: *const u8, n: u32, metas: *mut u8) -> u32;
        pub fn pw_host_flow_hash(key: *const u8, seed: u32) -> u32;
        pub fn pw_host_flow_tcp_table(out120: *mut u8) -> u32;
        /// sizeof pw_flow_entry, pw_flow_table, pw_flow_counters, pw_flow_result.
        pub fn pw_host_flow_sizes(out4: *mut u32) -> u32;
        /// host/flow_bench_host.cpp: the GPU flow-table benchmark's logic (fill, scan, lookups,
        /// updates) on the host; `out` holds 13 counts (the file says which). Returns 0, 1 for
        /// parameters out of range, 2 when the flows could not be made resident.
        pub fn pw_host_flow_bench(
            flows: u32,
            queues: u32,
            entries_per_queue: u32,
            threads: u32,
            rounds: u32,
            zipf: f64,
            lookup_seed_xor: u32,
            out: *mut u64,
        ) -> u32;
        /// The benchmark's packet of flow `f` (the client's ACK, or the server's with `reply`
        /// 1): the key's 40 bytes, then bucket, IP length, TCP flags, from_a. 1 when
        /// `nbuckets` is 0.
        pub fn pw_host_flow_bench_pkt(
            f: u32,
            reply: u32,
            seed: u32,
            nbuckets: u32,
            key40: *mut u8,
            out4: *mut u32,
        ) -> u32;
        /// The benchmark's request `j` of queue `q`: a position among `n` resident flows
        /// (uniform when `zipf` <= 0, else Zipf-like with that exponent); 0 when `n` is 0.
        pub fn pw_host_flow_bench_pick(seed: u64, q: u32, j: u64, n: u32, zipf: f64) -> u32;
        /// host/rate_limit_host.cpp: a burst through the rate-limit table
        /// (pktwarp_flow::rate::RateTableAbi, RateCounters, PacketMeta, RateResult) with
        /// `nthreads` GPU threads emulated.
        pub fn pw_host_rl_burst(
            table: *const u8,
            counters: *mut u64,
            n: u32,
            metas: *const u8,
            now_ns: *const u64,
            out: *mut u8,
            nthreads: u32,
        ) -> u32;
        pub fn pw_host_rl_hash(key: *const u8, seed: u32) -> u32;
        /// sizeof pw_rl_entry, pw_rl_table, pw_rl_counters, pw_rl_result, pw_rl_rule.
        pub fn pw_host_rl_sizes(out5: *mut u32) -> u32;
        // The inspect prefilter (cuda/inspect_match.cuh): `img` is a validated
        // pktwarp_inspect::matcher::Image, bitmaps are (n_patterns + 31) / 32 words a buffer.
        pub fn pw_host_inspect_match_set(
            img: *const u32,
            buf: *const u8,
            len: u32,
            bitmap: *mut u32,
        );
        pub fn pw_host_inspect_find_all(
            img: *const u32,
            buf: *const u8,
            len: u32,
            ids: *mut u32,
            ends: *mut u32,
            cap: u32,
        ) -> u32;
        pub fn pw_host_inspect_match_set_lanes(
            img: *const u32,
            buf: *const u8,
            len: u32,
            lanes: u32,
            bitmap: *mut u32,
        );
        pub fn pw_host_inspect_match_batch(
            img: *const u32,
            data: *const u8,
            offsets: *const u32,
            lengths: *const u32,
            n: u32,
            bitmaps: *mut u32,
        );
        /// cuda/inspect_eval.cuh over a batch (host/inspect_eval_host.cpp): `frames` are
        /// `n_frames` `pw_insp_frame`s, `cand_off` has `n_frames + 1` words, `matched` one byte
        /// per candidate, `verdicts` one 8-byte `pw_insp_verdict` per frame.
        pub fn pw_host_insp_batch(
            img: *const u64,
            frames: *const u8,
            n_frames: u32,
            arena: *const u8,
            cand_off: *const u32,
            cand_rules: *const u32,
            matched: *mut u8,
            verdicts: *mut u8,
        );
        /// cuda/inspect_http.cuh (host/inspect_http_host.cpp): parses the `n` bytes at `seg`,
        /// then reads the `n_order` buffers of `order` in turn, each appended to `out` (`cap`
        /// bytes) with its length in `lens`; returns the kind (0 not HTTP, 1 a head, 2 split).
        pub fn pw_host_insp_http(
            seg: *const u8,
            n: u32,
            order: *const u32,
            n_order: u32,
            out: *mut u8,
            cap: u64,
            lens: *mut u32,
        ) -> u32;
        /// Sizes and field offsets of the inspect records, `cap` words at most; returns the count.
        pub fn pw_host_insp_layout(out: *mut u32, cap: u32) -> u32;
        /// `pw_insp_image_check` (cuda/inspect_eval.cuh) on the `len` bytes at `img`: 1 when
        /// the kernels can read it, else 0 with the problem, NUL-terminated, in `why` (`cap`
        /// bytes).
        pub fn pw_host_insp_image_check(img: *const u8, len: u64, why: *mut u8, cap: u64) -> i32;
        /// host/chunk_halve_host.cpp: `pw_chunk_halved` and `PW_CHUNK_LEAST`
        /// (cuda/chunk_halve.cuh).
        pub fn pw_host_chunk_halved(k: u32) -> u32;
        pub fn pw_host_chunk_least() -> u32;
    }
}

/// `pw_host_pipeline_frame` of a generated host build (codegen's HOST_ENTRY).
type FrameFn = unsafe extern "C" fn(
    data: *mut u8,
    len: *mut u32,
    cap: u32,
    wire_len: *mut u32,
    port: u16,
    timestamp_ns: u64,
    mark: u32,
    queue: u16,
    burst_seq: u32,
    burst_index: u32,
    meta: *mut u8,
    verdict: *mut u8,
    params: *const *const c_void,
    counters: *mut u64,
);
type AbiFn = unsafe extern "C" fn() -> u32;
/// `pw_host_pipeline_order_key` of a host build whose list takes the owned layout.
type OrderKeyFn = unsafe extern "C" fn(
    data: *const u8,
    len: u32,
    port: u16,
    timestamp_ns: u64,
    queue: u16,
    params: *const *const c_void,
    counters: *mut u64,
) -> u32;

/// The acl stage's parameter block (`pw_acl_sel` of cuda/stages.cuh), host addresses.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AclSel {
    pub tables: u64,
    pub rule_hits: u64,
    pub n_rules: u32,
    pub default_action: u8,
    pub stage_params: u64,
}

/// A stage list's `pw_pipeline_frame` compiled for the host and loaded.
pub struct HostPipeline {
    handle: *mut c_void,
    frame: FrameFn,
    order_key: Option<OrderKeyFn>,
    n_stages: usize,
    acl_stage: Option<usize>,
    dir: PathBuf,
}

/// Bytes of `pw_packet_meta`, `pw_verdict`, `pw_stage_counters` (pinned by the ABI header).
pub const META_BYTES: usize = 144;
pub const VERDICT_BYTES: usize = 24;
pub const STAGE_COUNTER_WORDS: usize = 8;
/// `PW_STAGE_ABI_VERSION`.
pub const STAGE_ABI_VERSION: u32 = 5;

impl HostPipeline {
    /// Generates the host source of `stages`, compiles it and loads it. Errors carry the
    /// compiler's output.
    pub fn compile(stages: &[StageSpec]) -> Result<HostPipeline, String> {
        let src = crate::pipeline_source(stages, Target::Host).map_err(|e| e.to_string())?;
        // One folder per instance: two pipelines of the same stage list in one process must not
        // share it, or the first dropped deletes the other's files (and a compile running beside
        // it writes into the same pipeline.cpp / pipeline.so).
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let instance = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "pktwarp-host-{}-{instance}-{}",
            std::process::id(),
            &crate::source_key(&src, (0, 0))[..16]
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let cpp = dir.join("pipeline.cpp");
        let so = dir.join("pipeline.so");
        std::fs::write(&cpp, &src).map_err(|e| format!("{}: {e}", cpp.display()))?;
        compile_shared(&cpp, &so)?;
        let handle = dlopen(&so)?;
        // SAFETY: the symbols are the generated entry points with exactly these C signatures
        // (codegen's HOST_ENTRY); the handle stays open while `self` lives.
        let (frame, abi) = unsafe {
            (
                sym::<FrameFn>(handle, "pw_host_pipeline_frame")?,
                sym::<AbiFn>(handle, "pw_host_pipeline_abi")?,
            )
        };
        let order_key = match crate::codegen::pipeline_order_key(stages) {
            // SAFETY: generated with exactly this C signature (HOST_ENTRY) where the list has
            // an order key; the handle stays open while `self` lives.
            Some(_) => Some(unsafe { sym::<OrderKeyFn>(handle, "pw_host_pipeline_order_key")? }),
            None => None,
        };
        // SAFETY: a C function without arguments that returns a constant.
        let v = unsafe { abi() };
        if v != STAGE_ABI_VERSION {
            return Err(format!(
                "host pipeline: stage ABI version {v}, expected {STAGE_ABI_VERSION}"
            ));
        }
        Ok(HostPipeline {
            handle,
            frame,
            order_key,
            n_stages: stages.len(),
            acl_stage: stages.iter().position(crate::codegen::StageSpec::is_acl),
            dir,
        })
    }

    /// One frame through the pipeline, read only (the stages see a copy: a rewriting stage's
    /// changes are not kept; see [`HostPipeline::run_frame_mut`]). `params[k]`: stage k's
    /// parameter block (the acl stage's is `acl`); `meta` / `verdict` receive the ABI records;
    /// `counters` (PW_MAX_STAGES blocks of 8 words) are added to.
    #[allow(clippy::too_many_arguments)]
    pub fn run_frame(
        &self,
        frame: &[u8],
        wire_len: u32,
        port: u16,
        params: &[&[u8]],
        acl: Option<&AclSel>,
        meta: &mut [u8; META_BYTES],
        verdict: &mut [u8; VERDICT_BYTES],
        counters: &mut [[u64; STAGE_COUNTER_WORDS]; crate::MAX_STAGES],
    ) {
        let mut buf = frame.to_vec();
        let mut f = HostFrame {
            len: buf.len(),
            wire_len,
            port,
            ..HostFrame::default()
        };
        self.run_frame_mut(&mut buf, &mut f, params, acl, meta, verdict, counters);
    }

    /// One frame through the pipeline in place: the frame is `buf[..f.len]`, the rest of `buf`
    /// the room a rewriting stage may grow it into (`pw_frame.cap` = `buf.len()`); `f.len` and
    /// `f.wire_len` come back as the stages left them (clamped to `buf.len()`).
    #[allow(clippy::too_many_arguments)]
    pub fn run_frame_mut(
        &self,
        buf: &mut [u8],
        f: &mut HostFrame,
        params: &[&[u8]],
        acl: Option<&AclSel>,
        meta: &mut [u8; META_BYTES],
        verdict: &mut [u8; VERDICT_BYTES],
        counters: &mut [[u64; STAGE_COUNTER_WORDS]; crate::MAX_STAGES],
    ) {
        self.run_frame_marked(buf, f, 0, params, acl, meta, verdict, counters);
    }

    /// [`HostPipeline::run_frame_mut`] of a frame with a steering mark (`pw_frame.mark`, which
    /// `parse` copies into the metadata's `steer_mark`).
    #[allow(clippy::too_many_arguments)]
    pub fn run_frame_marked(
        &self,
        buf: &mut [u8],
        f: &mut HostFrame,
        mark: u32,
        params: &[&[u8]],
        acl: Option<&AclSel>,
        meta: &mut [u8; META_BYTES],
        verdict: &mut [u8; VERDICT_BYTES],
        counters: &mut [[u64; STAGE_COUNTER_WORDS]; crate::MAX_STAGES],
    ) {
        let mut ptrs: [*const c_void; crate::MAX_STAGES] = [std::ptr::null(); crate::MAX_STAGES];
        for (k, p) in params.iter().enumerate().take(self.n_stages) {
            if !p.is_empty() {
                ptrs[k] = p.as_ptr().cast();
            }
        }
        let acl_ptr: *const c_void = acl.map_or(std::ptr::null(), |a| (a as *const AclSel).cast());
        // The generated entry reads the acl stage's block through ctx->acl, which HOST_ENTRY
        // takes from the acl stage's params slot.
        if let Some(k) = self.acl_stage {
            ptrs[k] = acl_ptr;
        }
        let cap = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        let mut len = u32::try_from(f.len.min(buf.len())).unwrap_or(cap);
        let mut wire_len = f.wire_len;
        // SAFETY: `buf` is valid and writable for `cap` bytes and the frame is its first `len`;
        // meta / verdict / counters are buffers of the ABI sizes; every non-null params pointer
        // points to a block the stage reads within its own documented size (the caller's),
        // alive for the call.
        unsafe {
            (self.frame)(
                buf.as_mut_ptr(),
                &mut len,
                cap,
                &mut wire_len,
                f.port,
                f.timestamp_ns,
                mark,
                f.queue,
                f.burst_seq,
                f.burst_index,
                meta.as_mut_ptr(),
                verdict.as_mut_ptr(),
                ptrs.as_ptr(),
                counters.as_mut_ptr().cast(),
            )
        }
        f.len = (len as usize).min(buf.len());
        f.wire_len = wire_len;
    }
}

impl HostPipeline {
    /// The owned layout's order key of a frame (`pw_pipeline_order_key`: the stages before the
    /// ordered one, then its key; `u32::MAX` for none), or None where the list has no key
    /// function (codegen::pipeline_order_key). `params` and `counters` as in
    /// [`HostPipeline::run_frame`].
    pub fn order_key(
        &self,
        frame: &[u8],
        f: &HostFrame,
        params: &[&[u8]],
        counters: &mut [[u64; STAGE_COUNTER_WORDS]; crate::MAX_STAGES],
    ) -> Option<u32> {
        let key = self.order_key?;
        let mut ptrs: [*const c_void; crate::MAX_STAGES] = [std::ptr::null(); crate::MAX_STAGES];
        for (k, p) in params.iter().enumerate().take(self.n_stages) {
            if !p.is_empty() {
                ptrs[k] = p.as_ptr().cast();
            }
        }
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        // SAFETY: `frame` is readable for `len` bytes and the key pass does not write it (the
        // list has no writing stage: codegen::pipeline_order_key); counters are MAX_STAGES
        // blocks of the ABI size; every non-null params pointer is a block of the caller's,
        // alive for the call.
        Some(unsafe {
            key(
                frame.as_ptr(),
                len,
                f.port,
                f.timestamp_ns,
                f.queue,
                ptrs.as_ptr(),
                counters.as_mut_ptr().cast(),
            )
        })
    }
}

/// The frame fields of [`HostPipeline::run_frame_mut`] beside its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostFrame {
    /// Captured bytes (in: of the buffer's start; out: as the stages left them).
    pub len: usize,
    pub wire_len: u32,
    /// Ingress port.
    pub port: u16,
    /// Receive time (`pw_frame.timestamp_ns`).
    pub timestamp_ns: u64,
    /// Receive queue (`pw_frame.queue`).
    pub queue: u16,
    /// Arrival position: the burst's sequence number in its queue and the frame's index in it
    /// (`pw_frame.burst_seq`, `burst_index`).
    pub burst_seq: u32,
    pub burst_index: u32,
}

impl Drop for HostPipeline {
    fn drop(&mut self) {
        // SAFETY: the handle came from dlopen and no function pointer from it outlives self.
        unsafe { libc::dlclose(self.handle) };
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn compile_shared(cpp: &Path, so: &Path) -> Result<(), String> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    let mut cmd = std::process::Command::new(&cxx);
    cmd.args(["-std=c++14", "-O1", "-shared", "-fPIC", "-Wno-comment"]);
    // The same switch as the build's (scripts/ci-asan.sh): the generated pipeline under
    // AddressSanitizer, its runtime already in the process (linked by build.rs).
    if std::env::var("PKTWARP_HOST_SANITIZE").as_deref() == Ok("address") {
        cmd.args(["-fsanitize=address", "-fno-omit-frame-pointer"]);
    }
    let out = cmd
        .arg("-o")
        .arg(so)
        .arg(cpp)
        .output()
        .map_err(|e| format!("{cxx}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cxx} could not compile {}:\n{}",
            cpp.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

fn dlopen(path: &Path) -> Result<*mut c_void, String> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: NUL in path", path.display()))?;
    // SAFETY: a NUL-terminated path to the shared object just built.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return Err(format!("dlopen {} failed", path.display()));
    }
    Ok(h)
}

/// # Safety
/// `F` must be the C function type of `name`.
unsafe fn sym<F: Copy>(lib: *mut c_void, name: &str) -> Result<F, String> {
    let c = CString::new(name).map_err(|_| "NUL in symbol name".to_string())?;
    // SAFETY: `lib` is a live dlopen handle; the name is NUL-terminated.
    let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
    if p.is_null() || std::mem::size_of::<F>() != std::mem::size_of::<*mut c_void>() {
        return Err(format!("{name} not found"));
    }
    // SAFETY: the caller guarantees `F` is the function's type; sizes checked above.
    Ok(unsafe { std::mem::transmute_copy(&p) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet / IPv4 / UDP, 60 bytes.
    fn udp_frame() -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&46u16.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1234u16.to_be_bytes());
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f[38..40].copy_from_slice(&26u16.to_be_bytes());
        f
    }

    fn stages() -> Vec<StageSpec> {
        ["parse", "count"]
            .iter()
            .map(|n| StageSpec::builtin(n).expect("built-in stage"))
            .collect()
    }

    /// Runs one frame; returns the verdict and the frames that reached each stage.
    fn run(p: &HostPipeline) -> ([u8; VERDICT_BYTES], [u64; 2]) {
        let frame = udp_frame();
        let mut meta = [0u8; META_BYTES];
        let mut verdict = [0u8; VERDICT_BYTES];
        let mut counters = [[0u64; STAGE_COUNTER_WORDS]; crate::MAX_STAGES];
        p.run_frame(
            &frame,
            frame.len() as u32,
            0,
            &[],
            None,
            &mut meta,
            &mut verdict,
            &mut counters,
        );
        (verdict, [counters[0][0], counters[1][0]])
    }

    /// Two pipelines of one stage list: each has its own folder, and either may be dropped
    /// first while the other keeps its files and keeps running.
    #[test]
    fn two_pipelines_of_one_list_compile_run_and_drop_in_either_order() {
        for drop_first_compiled in [true, false] {
            let a = HostPipeline::compile(&stages()).expect("compile a");
            let b = HostPipeline::compile(&stages()).expect("compile b");
            assert_ne!(a.dir, b.dir, "two instances share {}", a.dir.display());
            let expect = run(&a);
            assert_eq!(expect.1, [1, 1], "frames reaching parse, count");
            assert_eq!(run(&b), expect);
            let (gone, kept) = if drop_first_compiled { (a, b) } else { (b, a) };
            let gone_dir = gone.dir.clone();
            drop(gone);
            assert!(!gone_dir.exists(), "{} left behind", gone_dir.display());
            assert!(
                kept.dir.join("pipeline.so").exists(),
                "dropping one pipeline deleted the other's {}",
                kept.dir.display()
            );
            assert_eq!(run(&kept), expect);
            // A third of the same list compiles while `kept` is alive.
            let c = HostPipeline::compile(&stages()).expect("compile c");
            assert_eq!(run(&c), expect);
            let kept_dir = kept.dir.clone();
            drop(kept);
            assert!(!kept_dir.exists());
            assert_eq!(run(&c), expect);
        }
    }
}
