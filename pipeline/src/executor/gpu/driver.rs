//! A thin, checked layer over the CUDA driver API (cudarc's `sys` bindings, loaded at run time).
//!
//! Every call returns a [`CudaError`] naming the call; nothing here panics. The library must have
//! been found first ([`probe`]): cudarc panics when libcuda is absent, so `probe` checks with
//! `is_culib_present` before the first call and every other entry point goes through a
//! [`Context`], which only `probe`/`Context::new` can make.

use cudarc::driver::sys;
use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::Arc;

/// A failed driver call: the call's name and the driver's error name and text.
#[derive(Debug, thiserror::Error)]
#[error("{call}: {name} ({text})")]
pub struct CudaError {
    pub call: &'static str,
    pub name: String,
    pub text: String,
}

pub type CuResult<T> = Result<T, CudaError>;

pub(crate) fn check(call: &'static str, r: sys::CUresult) -> CuResult<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut name: *const std::ffi::c_char = ptr::null();
    let mut text: *const std::ffi::c_char = ptr::null();
    // SAFETY: the driver library is loaded (we only get here after a driver call returned) and
    // both out-pointers are valid; the strings it hands back are static.
    unsafe {
        sys::cuGetErrorName(r, &mut name);
        sys::cuGetErrorString(r, &mut text);
    }
    let s = |p: *const std::ffi::c_char| {
        if p.is_null() {
            format!("{r:?}")
        } else {
            // SAFETY: non-null strings from cuGetError* are NUL-terminated and static.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    Err(CudaError {
        call,
        name: s(name),
        text: s(text),
    })
}

macro_rules! cu {
    ($call:ident ( $($arg:expr),* $(,)? )) => {
        check(stringify!($call), sys::$call($($arg),*))
    };
}

/// What [`probe`] found about one device.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceInfo {
    pub index: u32,
    pub name: String,
    pub compute_capability: (u32, u32),
    pub multiprocessors: u32,
    pub total_mem_bytes: u64,
    pub driver_version: i32,
    pub can_map_host_memory: bool,
    pub stream_mem_ops: bool,
}

/// Why no GPU can be used (returned by [`probe`], never a panic).
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    #[error("the CUDA driver library (libcuda.so) could not be loaded: no NVIDIA driver on this machine")]
    NoDriverLibrary,
    #[error("CUDA driver error: {0}")]
    Driver(#[from] CudaError),
    #[error("no CUDA device found")]
    NoDevice,
    #[error("device index {index} requested but only {count} device(s) present")]
    BadIndex { index: u32, count: u32 },
    #[error("device {index} ({name}) has compute capability {major}.{minor}; pktwarp needs 7.0 or newer")]
    TooOld {
        index: u32,
        name: String,
        major: u32,
        minor: u32,
    },
}

/// True when libcuda can be loaded (cheap; never panics).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen candidate names; no CUDA call is made.
    unsafe { sys::is_culib_present() }
}

/// How many CUDA devices the driver sees (an error, never a panic, without a driver).
pub fn device_count() -> Result<u32, Unavailable> {
    if !driver_present() {
        return Err(Unavailable::NoDriverLibrary);
    }
    // SAFETY: the library is present (checked above); the out-pointer is a valid local.
    unsafe {
        cu!(cuInit(0))?;
        let mut count = 0i32;
        cu!(cuDeviceGetCount(&mut count))?;
        Ok(count.max(0) as u32)
    }
}

/// Looks for a usable device `index`: the library loads, cuInit succeeds, the device exists and is
/// recent enough. Returns its description or the reason it cannot be used.
pub fn probe(index: u32) -> Result<DeviceInfo, Unavailable> {
    if !driver_present() {
        return Err(Unavailable::NoDriverLibrary);
    }
    // SAFETY: the library is present (checked above), so cudarc's loader does not panic; all
    // out-pointers are valid locals.
    unsafe {
        cu!(cuInit(0))?;
        let mut count = 0i32;
        cu!(cuDeviceGetCount(&mut count))?;
        if count <= 0 {
            return Err(Unavailable::NoDevice);
        }
        if index >= count as u32 {
            return Err(Unavailable::BadIndex {
                index,
                count: count as u32,
            });
        }
        let mut dev: sys::CUdevice = 0;
        cu!(cuDeviceGet(&mut dev, index as i32))?;
        let mut name = [0 as std::ffi::c_char; 256];
        cu!(cuDeviceGetName(name.as_mut_ptr(), 255, dev))?;
        let name = CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
        let attr = |a: sys::CUdevice_attribute| -> CuResult<i32> {
            let mut v = 0i32;
            cu!(cuDeviceGetAttribute(&mut v, a, dev))?;
            Ok(v)
        };
        use sys::CUdevice_attribute as A;
        let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32;
        let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32;
        let sms = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let map = attr(A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)? != 0;
        let memops = attr(A::CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1)? != 0;
        let mut total = 0usize;
        cu!(cuDeviceTotalMem_v2(&mut total, dev))?;
        let mut drv = 0i32;
        cu!(cuDriverGetVersion(&mut drv))?;
        if major < 7 {
            return Err(Unavailable::TooOld {
                index,
                name,
                major,
                minor,
            });
        }
        Ok(DeviceInfo {
            index,
            name,
            compute_capability: (major, minor),
            multiprocessors: sms,
            total_mem_bytes: total as u64,
            driver_version: drv,
            can_map_host_memory: map,
            stream_mem_ops: memops,
        })
    }
}

/// One retain of a device's primary context. The [`Context`] and everything allocated in it
/// (memory, streams, graphs, events, modules) hold it, so the context outlives what lives in it
/// whatever order they are dropped in; each of those frees itself with the context current.
struct Primary {
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
}

// SAFETY: a retained context handle, usable from any thread (the driver API is thread-safe).
unsafe impl Send for Primary {}
// SAFETY: as above.
unsafe impl Sync for Primary {}

impl Primary {
    /// Runs `free` with this context current on the calling thread, then gives the thread back
    /// the context it had (a drop may run on a thread bound to another GPU).
    fn with_current(&self, free: impl FnOnce()) {
        // SAFETY: ctx is retained while self lives; push and pop are paired on this thread.
        unsafe {
            let pushed = sys::cuCtxPushCurrent_v2(self.ctx) == sys::CUresult::CUDA_SUCCESS;
            free();
            if pushed {
                let mut popped: sys::CUcontext = ptr::null_mut();
                sys::cuCtxPopCurrent_v2(&mut popped);
            }
        }
    }
}

impl Drop for Primary {
    fn drop(&mut self) {
        // SAFETY: releases the retain taken in Context::new, once: the last holder drops it.
        unsafe {
            sys::cuDevicePrimaryCtxRelease_v2(self.dev);
        }
    }
}

/// The device's primary context, made current on the threads that use it.
pub struct Context {
    primary: Arc<Primary>,
    pub info: DeviceInfo,
}

// SAFETY: a CUDA context may be used from any thread once made current there; every method
// binds it first.
unsafe impl Send for Context {}
// SAFETY: as above; the driver API is thread-safe.
unsafe impl Sync for Context {}

impl Context {
    pub fn new(index: u32) -> Result<Context, Unavailable> {
        let info = probe(index)?;
        let mut dev: sys::CUdevice = 0;
        let mut ctx: sys::CUcontext = ptr::null_mut();
        // SAFETY: library present and initialised by probe; out-pointers valid.
        unsafe {
            cu!(cuDeviceGet(&mut dev, index as i32))?;
            cu!(cuDevicePrimaryCtxRetain(&mut ctx, dev))?;
            cu!(cuCtxSetCurrent(ctx))?;
        }
        Ok(Context {
            primary: Arc::new(Primary { dev, ctx }),
            info,
        })
    }

    /// Makes the context current on the calling thread.
    pub fn bind(&self) -> CuResult<()> {
        // SAFETY: ctx is a retained primary context.
        unsafe { cu!(cuCtxSetCurrent(self.primary.ctx)) }
    }

    pub fn synchronize(&self) -> CuResult<()> {
        self.bind()?;
        // SAFETY: a context is current.
        unsafe { cu!(cuCtxSynchronize()) }
    }
}

/// Device memory. The fields are private to the crate (read them with [`Self::ptr`] and
/// [`Self::len`]): safe code elsewhere cannot forge a length past the allocation or an address
/// the drop would free.
///
/// ```
/// fn read(b: &pipeline::internal::executor::gpu::driver::DeviceBuffer) -> (u64, usize) {
///     (b.ptr(), b.len())
/// }
/// ```
/// ```compile_fail
/// fn forge(b: &mut pipeline::internal::executor::gpu::driver::DeviceBuffer) {
///     b.len = usize::MAX; // private: upload() then could not bound its copy
/// }
/// ```
pub struct DeviceBuffer {
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) len: usize,
    /// Stream-ordered allocation: freed with cuMemFreeAsync on this stream, which (unlike
    /// cuMemFree) does not wait for the whole device, i.e. for a running persistent kernel.
    stream: Option<sys::CUstream>,
    /// Keeps the context alive until the memory is freed.
    owner: Arc<Primary>,
}

// SAFETY: a device address; the driver API is thread-safe.
unsafe impl Send for DeviceBuffer {}
// SAFETY: as above.
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    pub fn new(ctx: &Context, len: usize) -> CuResult<DeviceBuffer> {
        ctx.bind()?;
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: context current; len > 0 enforced below.
        unsafe { cu!(cuMemAlloc_v2(&mut p, len.max(1)))? };
        Ok(DeviceBuffer {
            ptr: p,
            len,
            stream: None,
            owner: Arc::clone(&ctx.primary),
        })
    }

    /// Allocates in stream order on `stream`, which does not wait for the device (a persistent
    /// kernel) as `cuMemAlloc` / `cuMemFree` do. Returns once the allocation is complete, so the
    /// memory is usable at once on any stream; the drop frees it with `cuMemFreeAsync` on
    /// `stream`, ordered after `stream`'s work only.
    ///
    /// # Safety
    /// - `stream` must outlive the buffer (the drop queues the free on it).
    /// - The buffer must not be dropped while work queued on another stream (a kernel, a copy)
    ///   may still use its memory: the free does not wait for that work, and the memory may be
    ///   handed to the next allocation at once. Work on `stream` itself is ordered before the
    ///   free.
    ///
    /// ```
    /// use pipeline::internal::executor::gpu::driver::{Context, DeviceBuffer, Stream};
    /// fn alloc(ctx: &Context, s: &Stream) -> Option<DeviceBuffer> {
    ///     // SAFETY: (example) the caller keeps `s` alive and drops the buffer only when no
    ///     // work on another stream uses it.
    ///     unsafe { DeviceBuffer::new_async(ctx, 64, s) }.ok()
    /// }
    /// ```
    /// ```compile_fail
    /// use pipeline::internal::executor::gpu::driver::{Context, DeviceBuffer, Stream};
    /// fn alloc(ctx: &Context, s: &Stream) -> Option<DeviceBuffer> {
    ///     DeviceBuffer::new_async(ctx, 64, s).ok() // unsafe fn: needs an unsafe block
    /// }
    /// ```
    pub unsafe fn new_async(ctx: &Context, len: usize, stream: &Stream) -> CuResult<DeviceBuffer> {
        ctx.bind()?;
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: context current; `stream` is a live stream (borrowed); the synchronize makes
        // the allocation complete before the address is handed out.
        unsafe {
            cu!(cuMemAllocAsync(&mut p, len.max(1), stream.raw))?;
            cu!(cuStreamSynchronize(stream.raw))?;
        }
        Ok(DeviceBuffer {
            ptr: p,
            len,
            stream: Some(stream.raw),
            owner: Arc::clone(&ctx.primary),
        })
    }

    /// The device address of the allocation.
    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// Bytes in the allocation (as asked for; the driver allocated at least 1).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `src` in on `stream` and waits for it (no device-wide synchronisation).
    pub fn upload_on(&self, stream: &Stream, src: &[u8]) -> CuResult<()> {
        assert_copy_fits(src.len(), self.len);
        // SAFETY: src is valid for its length until the synchronize below returns.
        unsafe {
            cu!(cuMemcpyHtoDAsync_v2(
                self.ptr,
                src.as_ptr() as *const c_void,
                src.len(),
                stream.raw
            ))?;
            cu!(cuStreamSynchronize(stream.raw))
        }
    }

    /// Copies out on `stream` and waits for it.
    pub fn download_on(&self, stream: &Stream, dst: &mut [u8]) -> CuResult<()> {
        assert_copy_fits(dst.len(), self.len);
        // SAFETY: dst is valid for its length until the synchronize below returns.
        unsafe {
            cu!(cuMemcpyDtoHAsync_v2(
                dst.as_mut_ptr() as *mut c_void,
                self.ptr,
                dst.len(),
                stream.raw
            ))?;
            cu!(cuStreamSynchronize(stream.raw))
        }
    }

    /// Copies `dst.len()` bytes from `offset` out on `stream` and waits for it.
    pub fn download_range_on(
        &self,
        stream: &Stream,
        offset: usize,
        dst: &mut [u8],
    ) -> CuResult<()> {
        assert_copy_fits(offset.saturating_add(dst.len()), self.len);
        // SAFETY: dst is valid for its length until the synchronize below returns; the source
        // range lies inside the allocation (checked above).
        unsafe {
            cu!(cuMemcpyDtoHAsync_v2(
                dst.as_mut_ptr() as *mut c_void,
                self.ptr + offset as sys::CUdeviceptr,
                dst.len(),
                stream.raw
            ))?;
            cu!(cuStreamSynchronize(stream.raw))
        }
    }

    /// Copies `out.len()` bytes from `offset` out on `stream` through `bounce` (pinned: the
    /// copy engine writes it directly, where a pageable destination is staged by the driver)
    /// and waits for it.
    pub fn download_range_via(
        &self,
        stream: &Stream,
        offset: usize,
        bounce: &mut PinnedBuffer,
        out: &mut [u8],
    ) -> CuResult<()> {
        assert!(
            out.len() <= bounce.len,
            "{} bytes through a {}-byte bounce buffer",
            out.len(),
            bounce.len
        );
        assert_copy_fits(offset.saturating_add(out.len()), self.len);
        // SAFETY: the source range lies inside the allocation and the bounce buffer holds
        // out.len() bytes (checked above); `bounce` is borrowed exclusively, no kernel is given
        // it, and the synchronize returns before its bytes are read.
        unsafe {
            cu!(cuMemcpyDtoHAsync_v2(
                bounce.host as *mut c_void,
                self.ptr + offset as sys::CUdeviceptr,
                out.len(),
                stream.raw
            ))?;
            cu!(cuStreamSynchronize(stream.raw))?;
            ptr::copy_nonoverlapping(bounce.host, out.as_mut_ptr(), out.len());
        }
        Ok(())
    }

    /// Copies `src` in at `offset` on `stream` and waits for it.
    pub fn upload_range_on(&self, stream: &Stream, offset: usize, src: &[u8]) -> CuResult<()> {
        assert_copy_fits(offset.saturating_add(src.len()), self.len);
        // SAFETY: src is valid for its length until the synchronize below returns; the
        // destination range lies inside the allocation (checked above).
        unsafe {
            cu!(cuMemcpyHtoDAsync_v2(
                self.ptr + offset as sys::CUdeviceptr,
                src.as_ptr() as *const c_void,
                src.len(),
                stream.raw
            ))?;
            cu!(cuStreamSynchronize(stream.raw))
        }
    }

    /// Sets the 32-bit word at `offset` (a multiple of 4) to `value` on `stream`, without
    /// waiting: a later copy on the same stream sees it (no host memory is involved, so nothing
    /// has to outlive the call).
    pub fn set_u32_on(&self, stream: &Stream, offset: usize, value: u32) -> CuResult<()> {
        assert!(offset % 4 == 0, "a 32-bit word at an offset of {offset}");
        assert_copy_fits(offset.saturating_add(4), self.len);
        // SAFETY: the word lies inside the allocation (checked above) and is 4-byte aligned
        // (device allocations are 256-byte aligned, offset checked).
        unsafe {
            cu!(cuMemsetD32Async(
                self.ptr + offset as sys::CUdeviceptr,
                value,
                1,
                stream.raw
            ))
        }
    }

    pub fn zero_on(&self, stream: &Stream) -> CuResult<()> {
        // SAFETY: the range is the allocation.
        unsafe {
            cu!(cuMemsetD8Async(self.ptr, 0, self.len, stream.raw))?;
            cu!(cuStreamSynchronize(stream.raw))
        }
    }

    pub fn upload(&self, src: &[u8]) -> CuResult<()> {
        assert_copy_fits(src.len(), self.len);
        // SAFETY: src is valid for its length and fits in the allocation.
        unsafe {
            cu!(cuMemcpyHtoD_v2(
                self.ptr,
                src.as_ptr() as *const c_void,
                src.len()
            ))
        }
    }

    pub fn download(&self, dst: &mut [u8]) -> CuResult<()> {
        assert_copy_fits(dst.len(), self.len);
        // SAFETY: dst is valid for its length and the allocation holds at least that much.
        unsafe {
            cu!(cuMemcpyDtoH_v2(
                dst.as_mut_ptr() as *mut c_void,
                self.ptr,
                dst.len()
            ))
        }
    }

    pub fn zero(&self) -> CuResult<()> {
        // SAFETY: the range is the allocation.
        unsafe { cu!(cuMemsetD8_v2(self.ptr, 0, self.len)) }
    }
}

/// A global read as a u32 must hold 4 bytes: a smaller one would be read past its end.
fn global_fits_u32(name: &CStr, size: usize) -> CuResult<()> {
    if size < 4 {
        return Err(CudaError {
            call: "cuModuleGetGlobal",
            name: "CUDA_ERROR_INVALID_VALUE".into(),
            text: format!(
                "global {} has {size} bytes, read as a u32 (4 bytes)",
                name.to_string_lossy()
            ),
        });
    }
    Ok(())
}

fn assert_copy_fits(n: usize, cap: usize) {
    // A programming error inside this module, not user input: callers size copies themselves.
    // Checked in release builds too: an oversized copy would write past the allocation.
    assert!(n <= cap, "copy of {n} bytes into {cap}");
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let (ptr, stream) = (self.ptr, self.stream);
        // SAFETY: allocated by cuMemAlloc / cuMemAllocAsync; freed once, the async one on its
        // stream (still alive and no other stream's work using the memory: new_async's contract),
        // with its context current and alive (owner).
        self.owner.with_current(|| unsafe {
            match stream {
                Some(s) => {
                    sys::cuMemFreeAsync(ptr, s);
                }
                None => {
                    sys::cuMemFree_v2(ptr);
                }
            }
        });
    }
}

/// Pinned host memory mapped into the device's address space (`host` for the CPU, `dev` for
/// kernels). Fields private to the crate, as [`DeviceBuffer`]'s: the drop frees `host`.
///
/// ```
/// fn read(b: &pipeline::internal::executor::gpu::driver::PinnedBuffer) -> (*mut u8, u64, usize) {
///     (b.host_ptr(), b.dev_ptr(), b.len())
/// }
/// ```
/// ```compile_fail
/// fn forge(b: &mut pipeline::internal::executor::gpu::driver::PinnedBuffer) {
///     b.host = std::ptr::null_mut(); // private: the drop would free it
/// }
/// ```
pub struct PinnedBuffer {
    pub(crate) host: *mut u8,
    pub(crate) dev: sys::CUdeviceptr,
    pub(crate) len: usize,
    owner: Arc<Primary>,
}

// SAFETY: plain memory; synchronisation is the users' protocol (ring indices).
unsafe impl Send for PinnedBuffer {}
// SAFETY: as above.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    pub fn new(ctx: &Context, len: usize) -> CuResult<PinnedBuffer> {
        ctx.bind()?;
        let mut p: *mut c_void = ptr::null_mut();
        let mut d: sys::CUdeviceptr = 0;
        let len = len.max(1);
        // SAFETY: context current; out-pointers valid; the memory is zeroed before use.
        unsafe {
            cu!(cuMemHostAlloc(
                &mut p,
                len,
                sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE
            ))?;
            ptr::write_bytes(p as *mut u8, 0, len);
            cu!(cuMemHostGetDevicePointer_v2(&mut d, p, 0))?;
        }
        Ok(PinnedBuffer {
            host: p as *mut u8,
            dev: d,
            len,
            owner: Arc::clone(&ctx.primary),
        })
    }

    /// The host address of the buffer (for reads and writes the ring protocol orders).
    pub fn host_ptr(&self) -> *mut u8 {
        self.host
    }

    /// The buffer's address for kernels.
    pub fn dev_ptr(&self) -> sys::CUdeviceptr {
        self.dev
    }

    /// Bytes in the buffer (at least 1).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole buffer as bytes. Only for regions the GPU is not writing at the same time.
    ///
    /// # Safety
    /// No kernel may write the buffer while the slice lives.
    pub unsafe fn as_slice(&self) -> &[u8] {
        std::slice::from_raw_parts(self.host, self.len)
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let host = self.host as *mut c_void;
        // SAFETY: allocated by cuMemHostAlloc; freed once, its context alive (owner).
        self.owner.with_current(|| unsafe {
            sys::cuMemFreeHost(host);
        });
    }
}

/// A non-blocking stream (never synchronises with the legacy default stream, so a persistent
/// kernel on one stream does not stall copies on another).
pub struct Stream {
    pub(crate) raw: sys::CUstream,
    owner: Arc<Primary>,
}

// SAFETY: streams are usable from any thread with the context current.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    pub fn new(ctx: &Context) -> CuResult<Stream> {
        ctx.bind()?;
        let mut s: sys::CUstream = ptr::null_mut();
        // SAFETY: context current.
        unsafe {
            cu!(cuStreamCreate(
                &mut s,
                sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32
            ))?
        };
        Ok(Stream {
            raw: s,
            owner: Arc::clone(&ctx.primary),
        })
    }

    pub fn synchronize(&self) -> CuResult<()> {
        // SAFETY: valid stream.
        unsafe { cu!(cuStreamSynchronize(self.raw)) }
    }

    /// True when all work queued so far has finished.
    pub fn is_idle(&self) -> CuResult<bool> {
        // SAFETY: valid stream.
        let r = unsafe { sys::cuStreamQuery(self.raw) };
        if r == sys::CUresult::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        check("cuStreamQuery", r).map(|_| true)
    }

    /// Async copy host -> device.
    ///
    /// # Safety
    /// `src` must stay valid and unchanged until the copy completes (pinned memory for a truly
    /// asynchronous copy) and `dst..dst+len` must be device memory.
    pub unsafe fn copy_htod(
        &self,
        dst: sys::CUdeviceptr,
        src: *const u8,
        len: usize,
    ) -> CuResult<()> {
        cu!(cuMemcpyHtoDAsync_v2(
            dst,
            src as *const c_void,
            len,
            self.raw
        ))
    }

    /// Async copy device -> host.
    ///
    /// # Safety
    /// `dst` must stay valid until the copy completes.
    pub unsafe fn copy_dtoh(
        &self,
        dst: *mut u8,
        src: sys::CUdeviceptr,
        len: usize,
    ) -> CuResult<()> {
        cu!(cuMemcpyDtoHAsync_v2(dst as *mut c_void, src, len, self.raw))
    }

    /// Async copy device -> device.
    ///
    /// # Safety
    /// `src..src+len` and `dst..dst+len` must be device memory of this context, the source
    /// unchanged until the copy completes.
    pub unsafe fn copy_dtod(
        &self,
        dst: sys::CUdeviceptr,
        src: sys::CUdeviceptr,
        len: usize,
    ) -> CuResult<()> {
        cu!(cuMemcpyDtoDAsync_v2(dst, src, len, self.raw))
    }

    /// Async copies device -> device, `dsts[i] <- srcs[i]` of `sizes[i]` bytes, issued as one
    /// batch (`cuMemcpyBatchAsync`) in stream order.
    ///
    /// # Safety
    /// The three slices are equally long; every range is device memory of this context (no
    /// two destinations overlap), the sources unchanged until the copies complete.
    pub unsafe fn copy_dtod_batch(
        &self,
        dsts: &mut [sys::CUdeviceptr],
        srcs: &mut [sys::CUdeviceptr],
        sizes: &mut [usize],
    ) -> CuResult<()> {
        let n = dsts.len().min(srcs.len()).min(sizes.len());
        // SAFETY: a plain C struct; all-zero is "no location hints, no flags".
        let mut attr: sys::CUmemcpyAttributes = unsafe { std::mem::zeroed() };
        // The sources are read in stream order (after the work queued before the batch).
        attr.srcAccessOrder = sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        // Copy engines, not SMs: persistent kernels hold SMs and wait for this copy's burst, so
        // a copy that needs an SM could wait behind them for good.
        attr.flags = sys::CUmemcpyFlags::CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE as u32;
        let mut idx: usize = 0;
        cu!(cuMemcpyBatchAsync_v2(
            dsts.as_mut_ptr(),
            srcs.as_mut_ptr(),
            sizes.as_mut_ptr(),
            n,
            &mut attr,
            &mut idx,
            1,
            self.raw
        ))
    }

    /// Writes `value` to the 32-bit word at `addr` in stream order (after all earlier work on
    /// this stream: the producer-index publish of the ingest path).
    ///
    /// # Safety
    /// `addr` must be the device address of a 4-byte-aligned u32 the caller owns (the GPU
    /// writes it; nothing checks it is not some other memory, mapped host memory included).
    pub unsafe fn write_u32(&self, addr: sys::CUdeviceptr, value: u32) -> CuResult<()> {
        cu!(cuStreamWriteValue32_v2(self.raw, addr, value, 0))
    }

    pub fn record(&self, ev: &Event) -> CuResult<()> {
        // SAFETY: both handles valid.
        unsafe { cu!(cuEventRecord(ev.raw, self.raw)) }
    }

    pub fn begin_capture(&self) -> CuResult<()> {
        // SAFETY: valid stream; relaxed mode so other threads' CUDA calls are not refused.
        unsafe {
            cu!(cuStreamBeginCapture_v2(
                self.raw,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED
            ))
        }
    }

    pub fn end_capture(&self) -> CuResult<Graph> {
        let mut g: sys::CUgraph = ptr::null_mut();
        let mut e: sys::CUgraphExec = ptr::null_mut();
        // SAFETY: capture begun on this stream; out-pointers valid.
        unsafe {
            cu!(cuStreamEndCapture(self.raw, &mut g))?;
            let r = check(
                "cuGraphInstantiateWithFlags",
                sys::cuGraphInstantiateWithFlags(&mut e, g, 0),
            );
            if let Err(err) = r {
                sys::cuGraphDestroy(g);
                return Err(err);
            }
        }
        Ok(Graph {
            graph: g,
            exec: e,
            owner: Arc::clone(&self.owner),
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let raw = self.raw;
        // SAFETY: created by cuStreamCreate; destroyed once, its context alive (owner).
        self.owner.with_current(|| unsafe {
            sys::cuStreamDestroy_v2(raw);
        });
    }
}

/// An instantiated CUDA graph.
pub struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    owner: Arc<Primary>,
}

// SAFETY: graph handles are usable from any thread with the context current.
unsafe impl Send for Graph {}
// SAFETY: as above.
unsafe impl Sync for Graph {}

impl Graph {
    pub fn launch(&self, stream: &Stream) -> CuResult<()> {
        // SAFETY: valid handles.
        unsafe { cu!(cuGraphLaunch(self.exec, stream.raw)) }
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        let (exec, graph) = (self.exec, self.graph);
        // SAFETY: created by end_capture; destroyed once, its context alive (owner).
        self.owner.with_current(|| unsafe {
            sys::cuGraphExecDestroy(exec);
            sys::cuGraphDestroy(graph);
        });
    }
}

/// A timing event.
pub struct Event {
    raw: sys::CUevent,
    owner: Arc<Primary>,
}

impl Event {
    pub fn new(ctx: &Context) -> CuResult<Event> {
        ctx.bind()?;
        let mut e: sys::CUevent = ptr::null_mut();
        // SAFETY: context current.
        unsafe { cu!(cuEventCreate(&mut e, 0))? };
        Ok(Event {
            raw: e,
            owner: Arc::clone(&ctx.primary),
        })
    }

    pub fn synchronize(&self) -> CuResult<()> {
        // SAFETY: valid event.
        unsafe { cu!(cuEventSynchronize(self.raw)) }
    }

    /// Milliseconds from `self` to `end` (both recorded and complete).
    pub fn elapsed_ms(&self, end: &Event) -> CuResult<f32> {
        let mut ms = 0f32;
        // SAFETY: valid events.
        unsafe { cu!(cuEventElapsedTime_v2(&mut ms, self.raw, end.raw))? };
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let raw = self.raw;
        // SAFETY: created by cuEventCreate; destroyed once, its context alive (owner).
        self.owner.with_current(|| unsafe {
            sys::cuEventDestroy_v2(raw);
        });
    }
}

#[path = "driver_module.rs"]
mod module;
pub use module::{Function, Module};

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
