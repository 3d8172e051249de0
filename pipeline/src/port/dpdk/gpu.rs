//! GPU receive buffers (GPUDirect RDMA): where the NIC can write straight into GPU memory, the
//! port's RX mempool is an external-buffer pool whose data buffers are a GPU allocation,
//! registered with DPDK as external memory (`rte_extmem_register`) and DMA-mapped for the
//! device (`rte_dev_dma_map`): the same recipe DPDK's gpudev and NVIDIA's l2fwd-nv follow.
//! Elsewhere frames land in host mbufs and take the staged path (copied into a burst, then to
//! the GPU queue). The choice is automatic unless `gpu_buffers` forces it, and it is logged and
//! reported by [`super::DpdkPort::buffer_placement`].
//!
//! Requirements (docs/dpdk.md has the full list): an mlx5-class NIC (ConnectX-6 Dx or later,
//! BlueField) bound to mlx5_core with DPDK's mlx5 PMD, an NVIDIA data-centre GPU on the same
//! PCIe root complex (ideally the same switch), the `nvidia-peermem` kernel module loaded, and
//! the CUDA driver library. CI has none of this: only the decision logic runs there.

use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::driver::sys as cu;
use dpdk_sys as sys;
use serde::Deserialize;

use super::{config_err, eal, DpdkPortOptions};
use crate::port::PortError;

/// GPU page size: GPUDirect RDMA pins and maps GPU memory in 64 KiB pages.
pub const GPU_PAGE_SIZE: usize = 64 * 1024;
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
}

/// Where the port's RX buffers are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BufferPlacement {
    /// Host mbufs; frames are copied into bursts and staged to the GPU queue.
    #[default]
    Host,
    /// GPU memory written by the NIC (GPUDirect RDMA).
    GpuDirect,
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
    // SAFETY: only tries to open libcuda; cudarc panics on use when it is missing, so this
    // check must come first.
    if !unsafe { cu::is_culib_present() } {
        return Err("libcuda (the NVIDIA driver) is not installed".into());
    }
    Ok(())
}

/// One GPU allocation registered with DPDK and mapped for a device.
pub struct GpuMemory {
    /// The primary context of GPU 0 (retained; released on drop) and its device.
    ctx: cu::CUcontext,
    dev: cu::CUdevice,
    base: cu::CUdeviceptr,
    /// 64 KiB-aligned start inside the allocation and its length.
    ptr: *mut std::ffi::c_void,
    len: usize,
    device: *mut sys::rte_device,
    mapped: bool,
    registered: bool,
}

// SAFETY: the pointers are a device address and a DPDK device handle, used only on drop.
unsafe impl Send for GpuMemory {}
// SAFETY: no interior mutability.
unsafe impl Sync for GpuMemory {}

fn cu_check(r: cu::CUresult, what: &str) -> Result<(), PortError> {
    if r == cu::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(config_err(format!("GPUDirect: {what} failed: {r:?}")))
    }
}

impl GpuMemory {
    /// Allocates `len` bytes of GPU memory (GPU 0), registers them as DPDK external memory and
    /// maps them for `device`.
    fn new(len: usize, device: *mut sys::rte_device) -> Result<GpuMemory, PortError> {
        let len = len.div_ceil(GPU_PAGE_SIZE) * GPU_PAGE_SIZE;
        let mut mem = GpuMemory {
            ctx: std::ptr::null_mut(),
            dev: 0,
            base: 0,
            ptr: std::ptr::null_mut(),
            len,
            device,
            mapped: false,
            registered: false,
        };
        // SAFETY: libcuda is present (gpudirect_check); the calls take valid out pointers.
        unsafe {
            cu_check(cu::cuInit(0), "cuInit")?;
            let mut dev: cu::CUdevice = 0;
            cu_check(cu::cuDeviceGet(&mut dev, 0), "cuDeviceGet(0)")?;
            mem.dev = dev;
            let mut ctx: cu::CUcontext = std::ptr::null_mut();
            cu_check(
                cu::cuDevicePrimaryCtxRetain(&mut ctx, dev),
                "cuDevicePrimaryCtxRetain",
            )?;
            mem.ctx = ctx;
            cu_check(cu::cuCtxSetCurrent(ctx), "cuCtxSetCurrent")?;
            // One extra page so the start can be aligned to a GPU page.
            cu_check(
                cu::cuMemAlloc_v2(&mut mem.base, len + GPU_PAGE_SIZE),
                "cuMemAlloc",
            )?;
            let aligned = (mem.base as usize).div_ceil(GPU_PAGE_SIZE) * GPU_PAGE_SIZE;
            mem.ptr = aligned as *mut std::ffi::c_void;
            // Every access to this memory is synchronous with respect to NIC DMA.
            let one: u32 = 1;
            cu_check(
                cu::cuPointerSetAttribute(
                    (&one as *const u32).cast(),
                    cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                    aligned as cu::CUdeviceptr,
                ),
                "cuPointerSetAttribute(SYNC_MEMOPS)",
            )?;
        }
        // SAFETY: ptr..ptr+len is a live GPU allocation aligned to GPU_PAGE_SIZE; no IOVA table
        // (IOVA-as-VA: the PMD maps the virtual address through nvidia-peermem).
        let rc = unsafe {
            sys::rte_extmem_register(mem.ptr, len, std::ptr::null_mut(), 0, GPU_PAGE_SIZE)
        };
        if rc != 0 {
            return Err(config_err(format!(
                "GPUDirect: rte_extmem_register: {}",
                eal::last_error()
            )));
        }
        mem.registered = true;
        // SAFETY: registered external memory and the port's device.
        let rc = unsafe { sys::rte_dev_dma_map(device, mem.ptr, RTE_BAD_IOVA, len) };
        if rc != 0 {
            return Err(config_err(format!(
                "GPUDirect: rte_dev_dma_map: {}",
                eal::last_error()
            )));
        }
        mem.mapped = true;
        Ok(mem)
    }
}

impl Drop for GpuMemory {
    fn drop(&mut self) {
        // SAFETY: undoes exactly what new() did, in reverse order; the pool using the memory
        // has been freed by then (PortInner drops the pool first).
        unsafe {
            if self.mapped {
                sys::rte_dev_dma_unmap(self.device, self.ptr, RTE_BAD_IOVA, self.len);
            }
            if self.registered {
                sys::rte_extmem_unregister(self.ptr, self.len);
            }
            if self.base != 0 {
                let _ = cu::cuMemFree_v2(self.base);
            }
            if !self.ctx.is_null() {
                let _ = cu::cuDevicePrimaryCtxRelease_v2(self.dev);
            }
        }
    }
}

static EXT_SEQ: AtomicU64 = AtomicU64::new(0);

/// Creates the RX pool: GPU-backed when chosen and possible, else host (`host_pool`).
pub(super) fn rx_pool(
    opts: &DpdkPortOptions,
    info: &sys::rte_eth_dev_info,
    driver: &str,
    port: &str,
    socket: i32,
    host_pool: impl FnOnce(u32) -> Result<*mut sys::rte_mempool, PortError>,
) -> Result<(BufferPlacement, Option<GpuMemory>, *mut sys::rte_mempool), PortError> {
    let check = match opts.gpu_buffers {
        GpuBuffers::Host => Err("gpu_buffers: host".to_string()),
        GpuBuffers::Auto | GpuBuffers::Gpu => gpudirect_check(driver),
    };
    match check {
        Ok(()) => {
            let (mem, pool) = gpu_pool(opts, info.device, socket)?;
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

fn gpu_pool(
    opts: &DpdkPortOptions,
    device: *mut sys::rte_device,
    socket: i32,
) -> Result<(GpuMemory, *mut sys::rte_mempool), PortError> {
    // Element = data room (headroom + 2048 B); a multiple of the cache line so buffers never
    // straddle GPU pages unevenly.
    let elt = sys::RTE_MBUF_DEFAULT_BUF_SIZE as usize;
    let n = opts.mempool_size as usize;
    let mem = GpuMemory::new(n * elt, device)?;
    let ext = sys::rte_pktmbuf_extmem {
        buf_ptr: mem.ptr,
        buf_iova: RTE_BAD_IOVA,
        buf_len: mem.len,
        elt_size: elt as u16,
    };
    let name = CString::new(format!(
        "pw_gpu_rx_{}",
        EXT_SEQ.fetch_add(1, Ordering::Relaxed)
    ))
    .map_err(config_err)?;
    // SAFETY: `ext` describes registered, mapped memory that outlives the pool (both are
    // owned by PortInner, which frees the pool first).
    let pool = unsafe {
        sys::rte_pktmbuf_pool_create_extbuf(
            name.as_ptr(),
            opts.mempool_size,
            opts.mempool_cache.min(opts.mempool_size * 2 / 3).min(512),
            0,
            elt as u16,
            socket,
            &ext,
            1,
        )
    };
    if pool.is_null() {
        return Err(config_err(format!(
            "GPUDirect: rte_pktmbuf_pool_create_extbuf: {}",
            eal::last_error()
        )));
    }
    Ok((mem, pool))
}

impl GpuMemory {
    /// Makes the allocation's context current on the calling thread (each polling thread needs
    /// it once before CUDA calls; cheap when already current).
    pub(super) fn make_current(&self) -> bool {
        // SAFETY: ctx is the retained primary context, alive while self is.
        unsafe { cu::cuCtxSetCurrent(self.ctx) == cu::CUresult::CUDA_SUCCESS }
    }

    /// The GPU address range RX buffers live in (for a GPU executor to check mbuf addresses).
    pub fn range(&self) -> (u64, usize) {
        (self.ptr as u64, self.len)
    }
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
