//! RX buffers for the GPU executor, outside the port's ordinary host mempool. Both kinds are
//! an external-buffer pool (`rte_pktmbuf_pool_create_extbuf`) over one allocation registered
//! with DPDK as external memory (`rte_extmem_register`, IOVA as VA) and DMA-mapped for the
//! port's device where it has one (`rte_dev_dma_map`): the recipe DPDK's gpudev, NVIDIA's
//! l2fwd-nv and DOCA GPUNetIO follow ([`ExtMemory`]).
//! - GPU memory (GPUDirect RDMA, `gpu_buffers: auto | gpu`): the NIC writes the frames straight
//!   into a `cuMemAlloc` allocation; the GPU executor gathers them in place.
//! - Pinned host memory mapped for the GPU (`gpu_buffers: pinned`, l2fwd-nv's / GPUNetIO's CPU
//!   memory mode): a `cuMemHostAlloc` (DEVICEMAP | PORTABLE) allocation whose device address is
//!   its host address; the GPU executor hands the frames over by reference (the GPU reads them
//!   over PCIe where the NIC wrote them), and the CPU reads them as any mbuf.
//!
//! Elsewhere frames land in host mbufs and take the staged path (copied into a burst, then to
//! the GPU queue). The choice is automatic unless `gpu_buffers` forces it, and it is logged and
//! reported by [`super::DpdkPort::buffer_placement`].
//!
//! GPUDirect's requirements (docs/dpdk.md has the full list): an mlx5-class NIC (ConnectX-6 Dx
//! or later, BlueField) bound to mlx5_core with DPDK's mlx5 PMD, an NVIDIA data-centre GPU on
//! the same PCIe root complex (ideally the same switch), the `nvidia-peermem` kernel module
//! loaded, and the CUDA driver library. Pinned memory needs only the CUDA driver and a GPU. CI
//! has neither: the decision logic runs there, and the pinned pool over plain page-aligned
//! memory ([`page_memory`], [`super::DpdkPortOptions::pinned_alloc`]).

use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::driver::sys as cu;
use dpdk_sys as sys;
use serde::Deserialize;

use super::{config_err, eal, DpdkPortOptions};
use crate::port::PortError;

/// GPU page size: GPUDirect RDMA pins and maps GPU memory in 64 KiB pages.
pub const GPU_PAGE_SIZE: usize = 64 * 1024;
/// Host page size the pinned pool is registered with (`cuMemHostAlloc` returns page-aligned
/// memory; the pool's length is rounded up to whole pages).
pub const HOST_PAGE_SIZE: usize = 4096;
/// DPDK's "no IO address" (RTE_BAD_IOVA): the PMD maps the virtual address itself.
const RTE_BAD_IOVA: u64 = u64::MAX;

/// Where the port's received frames should land (option `gpu_buffers`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum GpuBuffers {
    /// GPU memory when [`gpudirect_check`] passes, host memory otherwise.
    #[default]
    Auto,
    /// Always host mbufs (staged ingest).
    Host,
    /// GPU memory or an error saying what is missing.
    Gpu,
    /// Pinned host memory mapped for the GPU (received by reference on the GPU executor), or
    /// an error saying what is missing.
    Pinned,
}

/// Where the port's RX buffers are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BufferPlacement {
    /// Host mbufs; frames are copied into bursts and staged to the GPU queue.
    #[default]
    Host,
    /// GPU memory written by the NIC (GPUDirect RDMA).
    GpuDirect,
    /// Pinned host memory mapped for the GPU at the same address: the CPU reads the frames as
    /// any mbuf's, the GPU reads them over PCIe (by reference).
    Pinned,
}

/// Why GPUDirect cannot be used here, or `Ok` when every precondition holds.
pub fn gpudirect_check(driver: &str) -> Result<(), String> {
    // Only the mlx5 PMD registers external (peer) memory with the NIC through ibverbs, which
    // nvidia-peermem makes work for GPU memory.
    if !driver.contains("mlx5") {
        return Err(format!(
            "driver {driver} cannot DMA into GPU memory (GPUDirect RDMA needs the mlx5 PMD)"
        ));
    }
    if !std::path::Path::new("/sys/module/nvidia_peermem").exists()
        && !std::path::Path::new("/sys/module/nv_peer_mem").exists()
    {
        return Err("kernel module nvidia-peermem is not loaded (modprobe nvidia-peermem)".into());
    }
    libcuda_check()
}

/// Why the CUDA driver library cannot be used (`Ok`: it loads).
fn libcuda_check() -> Result<(), String> {
    // SAFETY: only tries to open libcuda; cudarc panics on use when it is missing, so this
    // check must come first.
    if !unsafe { cu::is_culib_present() } {
        return Err("libcuda (the NVIDIA driver) is not installed".into());
    }
    Ok(())
}

/// The memory behind an external-buffer RX pool: one allocation, page-aligned, freed when
/// dropped (after [`ExtMemory`] unregistered it).
pub trait RxMemory: Send + Sync {
    /// Its first byte, as the CPU and DPDK address it (aligned to [`RxMemory::page`]).
    fn ptr(&self) -> *mut c_void;
    /// Its length in bytes (a multiple of [`RxMemory::page`]).
    fn bytes(&self) -> usize;
    /// The page size it is registered with.
    fn page(&self) -> usize;
    /// Makes its CUDA context current on the calling thread, where the CPU reads it with
    /// CUDA copies (GPU memory); true when that worked or is not needed.
    fn make_current(&self) -> bool {
        true
    }
}

/// Allocates the memory of a `gpu_buffers: pinned` pool (`len` bytes, rounded up to pages):
/// [`cuda_pinned`] unless [`super::DpdkPortOptions::pinned_alloc`] names another (a test's
/// plain host memory, [`page_memory`]).
pub type PinnedAlloc = fn(usize) -> Result<Box<dyn RxMemory>, String>;

/// A [`PinnedAlloc`] as an option's value (options compare equal by the function's address).
#[derive(Clone, Copy, Debug)]
pub struct PinnedAllocator(pub PinnedAlloc);

impl PartialEq for PinnedAllocator {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::fn_addr_eq(self.0, other.0)
    }
}

impl Eq for PinnedAllocator {}

/// GPU 0's primary context, retained (and current on the calling thread) until dropped.
struct Primary {
    ctx: cu::CUcontext,
    dev: cu::CUdevice,
}

fn cu_ok(r: cu::CUresult, what: &str) -> Result<(), String> {
    if r == cu::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed: {r:?}"))
    }
}

impl Primary {
    /// Retains GPU 0's primary context and makes it current; libcuda must load
    /// ([`libcuda_check`]).
    fn retain() -> Result<Primary, String> {
        // SAFETY: libcuda is present (checked by the callers); the calls take valid out
        // pointers.
        unsafe {
            cu_ok(cu::cuInit(0), "cuInit (no usable NVIDIA GPU or driver?)")?;
            let mut n = 0;
            cu_ok(cu::cuDeviceGetCount(&mut n), "cuDeviceGetCount")?;
            if n < 1 {
                return Err("no CUDA GPU is visible (cuDeviceGetCount: 0)".into());
            }
            let mut dev: cu::CUdevice = 0;
            cu_ok(cu::cuDeviceGet(&mut dev, 0), "cuDeviceGet(0)")?;
            let mut ctx: cu::CUcontext = std::ptr::null_mut();
            cu_ok(
                cu::cuDevicePrimaryCtxRetain(&mut ctx, dev),
                "cuDevicePrimaryCtxRetain",
            )?;
            let p = Primary { ctx, dev };
            cu_ok(cu::cuCtxSetCurrent(ctx), "cuCtxSetCurrent")?;
            Ok(p)
        }
    }

    fn make_current(&self) -> bool {
        // SAFETY: ctx is the retained primary context, alive while self is.
        unsafe { cu::cuCtxSetCurrent(self.ctx) == cu::CUresult::CUDA_SUCCESS }
    }
}

impl Drop for Primary {
    fn drop(&mut self) {
        // SAFETY: retained in `retain`, released once.
        unsafe {
            let _ = cu::cuDevicePrimaryCtxRelease_v2(self.dev);
        }
    }
}

/// One GPU allocation (GPU 0), aligned to a GPU page inside it.
pub struct GpuMemory {
    base: cu::CUdeviceptr,
    /// 64 KiB-aligned start inside the allocation and its length.
    ptr: *mut c_void,
    len: usize,
    /// Dropped after the allocation is freed (field order).
    primary: Primary,
}

// SAFETY: the pointers are device addresses, used only through CUDA calls and on drop.
unsafe impl Send for GpuMemory {}
// SAFETY: no interior mutability.
unsafe impl Sync for GpuMemory {}

impl GpuMemory {
    /// Allocates `len` bytes (rounded up to GPU pages) of GPU 0's memory.
    fn new(len: usize) -> Result<GpuMemory, String> {
        libcuda_check()?;
        let len = len.div_ceil(GPU_PAGE_SIZE) * GPU_PAGE_SIZE;
        let primary = Primary::retain()?;
        let mut mem = GpuMemory {
            base: 0,
            ptr: std::ptr::null_mut(),
            len,
            primary,
        };
        // SAFETY: context current (retain); valid out pointers.
        unsafe {
            // One extra page so the start can be aligned to a GPU page.
            cu_ok(
                cu::cuMemAlloc_v2(&mut mem.base, len + GPU_PAGE_SIZE),
                "cuMemAlloc",
            )?;
            let aligned = (mem.base as usize).div_ceil(GPU_PAGE_SIZE) * GPU_PAGE_SIZE;
            mem.ptr = aligned as *mut c_void;
            // Every access to this memory is synchronous with respect to NIC DMA.
            let one: u32 = 1;
            cu_ok(
                cu::cuPointerSetAttribute(
                    (&one as *const u32).cast(),
                    cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                    aligned as cu::CUdeviceptr,
                ),
                "cuPointerSetAttribute(SYNC_MEMOPS)",
            )?;
        }
        Ok(mem)
    }
}

impl RxMemory for GpuMemory {
    fn ptr(&self) -> *mut c_void {
        self.ptr
    }
    fn bytes(&self) -> usize {
        self.len
    }
    fn page(&self) -> usize {
        GPU_PAGE_SIZE
    }
    fn make_current(&self) -> bool {
        self.primary.make_current()
    }
}

impl Drop for GpuMemory {
    fn drop(&mut self) {
        if self.base != 0 && self.primary.make_current() {
            // SAFETY: allocated by cuMemAlloc in this context; unregistered from DPDK first
            // (ExtMemory's Drop ran before this one).
            unsafe {
                let _ = cu::cuMemFree_v2(self.base);
            }
        }
    }
}

/// Pinned host memory mapped for GPU 0 (`cuMemHostAlloc`, DEVICEMAP | PORTABLE), whose device
/// address is its host address (unified addressing), so a frame's mbuf address is what the GPU
/// reads.
struct CudaPinned {
    ptr: *mut c_void,
    len: usize,
    primary: Primary,
}

// SAFETY: host memory, shared reads and writes are ordered by the mbuf handover.
unsafe impl Send for CudaPinned {}
// SAFETY: as above.
unsafe impl Sync for CudaPinned {}

/// The CUDA allocator of `gpu_buffers: pinned` ([`PinnedAlloc`]).
pub fn cuda_pinned(len: usize) -> Result<Box<dyn RxMemory>, String> {
    libcuda_check()?;
    let len = len.div_ceil(HOST_PAGE_SIZE).max(1) * HOST_PAGE_SIZE;
    let primary = Primary::retain()?;
    let mut mem = CudaPinned {
        ptr: std::ptr::null_mut(),
        len,
        primary,
    };
    let mut dev: cu::CUdeviceptr = 0;
    // SAFETY: context current (retain); valid out pointers; zeroed before any use.
    unsafe {
        cu_ok(
            cu::cuMemHostAlloc(
                &mut mem.ptr,
                len,
                cu::CU_MEMHOSTALLOC_DEVICEMAP | cu::CU_MEMHOSTALLOC_PORTABLE,
            ),
            "cuMemHostAlloc",
        )?;
        std::ptr::write_bytes(mem.ptr.cast::<u8>(), 0, len);
        cu_ok(
            cu::cuMemHostGetDevicePointer_v2(&mut dev, mem.ptr, 0),
            "cuMemHostGetDevicePointer",
        )?;
    }
    if dev != mem.ptr as u64 {
        // The ingest hands the GPU the mbufs' own addresses: without unified addressing
        // (32-bit hosts, old drivers) they would need an offset per frame, which is not built.
        return Err(format!(
            "the GPU maps the pinned memory at {dev:#x}, not at its host address {:p} (no \
             unified addressing)",
            mem.ptr
        ));
    }
    if mem.ptr as usize % HOST_PAGE_SIZE != 0 {
        return Err(format!(
            "cuMemHostAlloc gave {:p}, not page-aligned",
            mem.ptr
        ));
    }
    Ok(Box::new(mem))
}

impl RxMemory for CudaPinned {
    fn ptr(&self) -> *mut c_void {
        self.ptr
    }
    fn bytes(&self) -> usize {
        self.len
    }
    fn page(&self) -> usize {
        HOST_PAGE_SIZE
    }
}

impl Drop for CudaPinned {
    fn drop(&mut self) {
        if !self.ptr.is_null() && self.primary.make_current() {
            // SAFETY: allocated by cuMemHostAlloc; unregistered from DPDK first (ExtMemory's
            // Drop), its pool freed before that.
            unsafe {
                let _ = cu::cuMemFreeHost(self.ptr);
            }
        }
    }
}

/// Plain page-aligned host memory, neither pinned nor mapped for a GPU: a [`PinnedAlloc`] for
/// tests without a GPU (the stand-in device reads host addresses), registered with DPDK as a
/// pinned pool's memory is.
pub fn page_memory(len: usize) -> Result<Box<dyn RxMemory>, String> {
    let len = len.div_ceil(HOST_PAGE_SIZE).max(1) * HOST_PAGE_SIZE;
    let layout = std::alloc::Layout::from_size_align(len, HOST_PAGE_SIZE)
        .map_err(|e| format!("{len} bytes of pages: {e}"))?;
    // SAFETY: a layout of non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(format!("out of memory for {len} bytes"));
    }
    Ok(Box::new(PageMemory { ptr, layout }))
}

struct PageMemory {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

// SAFETY: plain heap memory, owned here; accesses are ordered by the mbuf handover.
unsafe impl Send for PageMemory {}
// SAFETY: as above.
unsafe impl Sync for PageMemory {}

impl RxMemory for PageMemory {
    fn ptr(&self) -> *mut c_void {
        self.ptr.cast()
    }
    fn bytes(&self) -> usize {
        self.layout.size()
    }
    fn page(&self) -> usize {
        HOST_PAGE_SIZE
    }
}

impl Drop for PageMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in page_memory with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// Whether the port's device must map the memory for DMA.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dma {
    /// GPUDirect: a NIC that cannot map GPU memory cannot receive into it.
    Required,
    /// Pinned host memory: mapped where the device's bus maps memory (a PCI NIC under VFIO,
    /// mlx5); a virtual device (net_pcap, net_null, net_ring, af_packet, ...) has no DMA
    /// engine, its bus no `dma_map` (rte_dev_dma_map fails ENOTSUP), and its PMD writes the
    /// frames with the CPU: nothing to map.
    WhereSupported,
}

/// An [`RxMemory`] registered with DPDK as external memory and DMA-mapped for a device (where
/// it needs it). Dropping it unmaps and unregisters, then frees the memory; its pool must be
/// freed before (it lives in `PortPools`, which frees the pools first).
pub struct ExtMemory {
    device: *mut sys::rte_device,
    mapped: bool,
    registered: bool,
    /// Freed after the unregister (field drops follow Drop::drop).
    mem: Box<dyn RxMemory>,
}

// SAFETY: the device pointer is a DPDK device handle used only on drop; the memory is Send.
unsafe impl Send for ExtMemory {}
// SAFETY: no interior mutability.
unsafe impl Sync for ExtMemory {}

impl ExtMemory {
    /// Registers `mem` with DPDK (IOVA as VA: no IOVA table) and maps it for `device`.
    fn register(
        mem: Box<dyn RxMemory>,
        device: *mut sys::rte_device,
        dma: Dma,
        what: &str,
    ) -> Result<ExtMemory, String> {
        let mut ext = ExtMemory {
            device,
            mapped: false,
            registered: false,
            mem,
        };
        let (ptr, len, page) = (ext.mem.ptr(), ext.mem.bytes(), ext.mem.page());
        // SAFETY: ptr..ptr+len is a live allocation aligned to `page`, len a multiple of it.
        let rc = unsafe { sys::rte_extmem_register(ptr, len, std::ptr::null_mut(), 0, page) };
        if rc != 0 {
            return Err(format!(
                "{what}: rte_extmem_register: {}",
                eal::last_error()
            ));
        }
        ext.registered = true;
        // SAFETY: registered external memory and the port's device.
        let rc = unsafe { sys::rte_dev_dma_map(device, ptr, RTE_BAD_IOVA, len) };
        if rc == 0 {
            ext.mapped = true;
        } else {
            // SAFETY: reads the calling thread's rte_errno.
            let errno = unsafe { sys::pw_rte_errno() };
            if dma == Dma::Required || errno != libc::ENOTSUP {
                return Err(format!("{what}: rte_dev_dma_map: {}", eal::strerror(errno)));
            }
        }
        Ok(ext)
    }

    /// The address range the RX buffers live in.
    pub fn range(&self) -> (u64, usize) {
        (self.mem.ptr() as u64, self.mem.bytes())
    }

    /// Whether the port's device mapped it for DMA (a virtual device does not).
    pub fn dma_mapped(&self) -> bool {
        self.mapped
    }

    /// See [`RxMemory::make_current`].
    pub(super) fn make_current(&self) -> bool {
        self.mem.make_current()
    }
}

impl Drop for ExtMemory {
    fn drop(&mut self) {
        let (ptr, len) = (self.mem.ptr(), self.mem.bytes());
        // SAFETY: undoes exactly what register() did, in reverse order; the pool using the
        // memory has been freed by then (PortPools frees its pools before this field drops).
        unsafe {
            if self.mapped {
                sys::rte_dev_dma_unmap(self.device, ptr, RTE_BAD_IOVA, len);
            }
            if self.registered {
                sys::rte_extmem_unregister(ptr, len);
            }
        }
    }
}

static EXT_SEQ: AtomicU64 = AtomicU64::new(0);

/// Creates the RX pool: GPU-backed or pinned when chosen and possible, else host
/// (`host_pool`). The external memory returned backs the pool and must outlive it.
pub(super) fn rx_pool(
    opts: &DpdkPortOptions,
    info: &sys::rte_eth_dev_info,
    driver: &str,
    port: &str,
    socket: i32,
    host_pool: impl FnOnce(u32) -> Result<*mut sys::rte_mempool, PortError>,
) -> Result<(BufferPlacement, Option<ExtMemory>, *mut sys::rte_mempool), PortError> {
    let check = match opts.gpu_buffers {
        GpuBuffers::Host => Err("gpu_buffers: host".to_string()),
        GpuBuffers::Pinned => {
            let (mem, pool) = pinned_pool(opts, info.device, socket).map_err(|why| {
                config_err(format!("port {port}: gpu_buffers: pinned, but {why}"))
            })?;
            tracing::info!(
                port,
                driver,
                dma_mapped = mem.dma_mapped(),
                "dpdk: RX buffers in pinned host memory mapped for the GPU"
            );
            return Ok((BufferPlacement::Pinned, Some(mem), pool));
        }
        GpuBuffers::Auto | GpuBuffers::Gpu => gpudirect_check(driver),
    };
    match check {
        Ok(()) => {
            let (mem, pool) = gpu_pool(opts, info.device, socket)
                .map_err(|why| config_err(format!("GPUDirect: {why}")))?;
            tracing::info!(
                port,
                driver,
                "dpdk: RX buffers in GPU memory (GPUDirect RDMA)"
            );
            Ok((BufferPlacement::GpuDirect, Some(mem), pool))
        }
        Err(why) if opts.gpu_buffers == GpuBuffers::Gpu => Err(config_err(format!(
            "port {port}: gpu_buffers: gpu, but GPUDirect RDMA is not possible: {why}"
        ))),
        Err(why) => {
            tracing::info!(port, driver, reason = %why, "dpdk: RX buffers in host memory (staged ingest to the GPU)");
            Ok((BufferPlacement::Host, None, host_pool(opts.mempool_size)?))
        }
    }
}

/// Data room of an external buffer (headroom + 2048 B), a multiple of the cache line.
const EXT_ELT: usize = sys::RTE_MBUF_DEFAULT_BUF_SIZE as usize;

fn gpu_pool(
    opts: &DpdkPortOptions,
    device: *mut sys::rte_device,
    socket: i32,
) -> Result<(ExtMemory, *mut sys::rte_mempool), String> {
    let mem = GpuMemory::new(opts.mempool_size as usize * EXT_ELT)?;
    let ext = ExtMemory::register(Box::new(mem), device, Dma::Required, "GPU memory")?;
    let pool = ext_pool(opts, &ext, socket, "pw_gpu_rx")?;
    Ok((ext, pool))
}

fn pinned_pool(
    opts: &DpdkPortOptions,
    device: *mut sys::rte_device,
    socket: i32,
) -> Result<(ExtMemory, *mut sys::rte_mempool), String> {
    let alloc = opts
        .pinned_alloc
        .map_or(cuda_pinned as PinnedAlloc, |a| a.0);
    // A granule past the last buffer: a kernel reading a frame by reference reads its whole
    // 16-byte granules (`pw_stage_refs`).
    let len = opts.mempool_size as usize * EXT_ELT + 16;
    let mem = alloc(len).map_err(|e| format!("no pinned memory of {len} bytes: {e}"))?;
    if mem.bytes() < len || mem.ptr() as usize % mem.page() != 0 {
        return Err(format!(
            "the allocator gave {} bytes at {:p} for {len} bytes on {}-byte pages",
            mem.bytes(),
            mem.ptr(),
            mem.page()
        ));
    }
    let ext = ExtMemory::register(mem, device, Dma::WhereSupported, "pinned memory")?;
    let pool = ext_pool(opts, &ext, socket, "pw_pin_rx")?;
    Ok((ext, pool))
}

/// The external-buffer pool over `ext` (`mempool_size` mbufs of [`EXT_ELT`] bytes of data).
fn ext_pool(
    opts: &DpdkPortOptions,
    ext: &ExtMemory,
    socket: i32,
    prefix: &str,
) -> Result<*mut sys::rte_mempool, String> {
    let (ptr, len) = ext.range();
    let desc = sys::rte_pktmbuf_extmem {
        buf_ptr: ptr as *mut c_void,
        buf_iova: RTE_BAD_IOVA,
        buf_len: len,
        elt_size: EXT_ELT as u16,
    };
    let name = CString::new(format!(
        "{prefix}_{}",
        EXT_SEQ.fetch_add(1, Ordering::Relaxed)
    ))
    .map_err(|e| e.to_string())?;
    // SAFETY: `desc` describes registered (and, where needed, mapped) memory that outlives
    // the pool (PortPools frees the pool before its ExtMemory).
    let pool = unsafe {
        sys::rte_pktmbuf_pool_create_extbuf(
            name.as_ptr(),
            opts.mempool_size,
            opts.mempool_cache.min(opts.mempool_size * 2 / 3).min(512),
            0,
            EXT_ELT as u16,
            socket,
            &desc,
            1,
        )
    };
    if pool.is_null() {
        return Err(format!(
            "rte_pktmbuf_pool_create_extbuf: {}",
            eal::last_error()
        ));
    }
    Ok(pool)
}

/// Copies `len` bytes of GPU memory at `src` to the end of `out` (the RX path of a GPU-buffer
/// port used through [`crate::port::RxPort`]; a GPU executor reads the frames in place with
/// [`super::DpdkRx::rx_gpu`] instead). The caller made the context current.
pub(super) fn copy_to_host(src: *const u8, len: usize, out: &mut Vec<u8>) -> bool {
    let at = out.len();
    out.resize(at + len, 0);
    // SAFETY: src..src+len lies in a GPU allocation of this port (mbuf data); the destination
    // was just sized.
    let r =
        unsafe { cu::cuMemcpyDtoH_v2(out[at..].as_mut_ptr().cast(), src as cu::CUdeviceptr, len) };
    if r != cu::CUresult::CUDA_SUCCESS {
        out.truncate(at);
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config with one DPDK port whose `dpdk:` block ends with `extra`.
    fn parse(extra: &str) -> Result<crate::config::Config, crate::config::ConfigError> {
        let yaml = format!(
            "ports:\n  - name: nic\n    dpdk:\n      vdev: net_null0\n{extra}\
             pipeline: [parse, count]\n"
        );
        crate::config::parse_str(&yaml, std::path::Path::new("pinned.yaml"))
    }

    fn dpdk(c: &crate::config::Config) -> &DpdkPortOptions {
        c.ports[0].value.dpdk.as_ref().expect("a dpdk port")
    }

    #[test]
    fn gpu_buffers_parses_each_value_and_names_a_bad_one() {
        for (text, want) in [
            ("auto", GpuBuffers::Auto),
            ("host", GpuBuffers::Host),
            ("gpu", GpuBuffers::Gpu),
            ("pinned", GpuBuffers::Pinned),
        ] {
            let c = parse(&format!("      gpu_buffers: {text}\n")).expect(text);
            assert_eq!(dpdk(&c).gpu_buffers, want);
            assert!(
                dpdk(&c).pinned_alloc.is_none(),
                "no YAML key sets the allocator"
            );
        }
        let c = parse("").expect("default");
        assert_eq!(
            dpdk(&c).gpu_buffers,
            GpuBuffers::Auto,
            "the default is unchanged"
        );
        let e = parse("      gpu_buffers: pinnd\n").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("pinned.yaml"), "{text}");
        assert!(
            e.key.contains("gpu_buffers") || text.contains("gpu_buffers"),
            "the field is named: {text} (key {:?})",
            e.key
        );
        assert!(text.contains("pinnd") && text.contains("pinned"), "{text}");
        let e = parse("      pinned_alloc: 1\n").unwrap_err().to_string();
        assert!(e.contains("pinned_alloc"), "not a YAML key: {e}");
    }

    #[test]
    fn page_memory_is_page_aligned_whole_pages() {
        let m = page_memory(EXT_ELT * 3).expect("pages");
        assert_eq!(m.ptr() as usize % HOST_PAGE_SIZE, 0);
        assert_eq!(m.bytes() % HOST_PAGE_SIZE, 0);
        assert!(m.bytes() >= EXT_ELT * 3);
        assert!(m.make_current());
        assert_eq!(page_memory(0).expect("one page").bytes(), HOST_PAGE_SIZE);
    }

    #[test]
    fn cuda_pinned_without_libcuda_names_it() {
        // SAFETY: only tries to open libcuda.
        if unsafe { cu::is_culib_present() } {
            crate::testdata::skip(
                file!(),
                "cuda_pinned_without_libcuda_names_it",
                "a CUDA driver is present on this machine",
            );
            return;
        }
        let e = cuda_pinned(4096)
            .err()
            .expect("no libcuda, no pinned memory");
        assert!(e.contains("libcuda"), "{e}");
    }
}
