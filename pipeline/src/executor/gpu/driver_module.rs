//! Modules and kernels: a loaded image, the functions taken from it, their launch and
//! occupancy queries (part of `driver`).

use super::{check, global_fits_u32, Context, CuResult, Primary, Stream};
use cudarc::driver::sys;
use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::Arc;

/// A loaded module and the functions taken from it.
pub struct Module {
    raw: sys::CUmodule,
    owner: Arc<Primary>,
}

// SAFETY: module handles are usable from any thread with the context current.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}

/// A kernel.
#[derive(Clone, Copy)]
pub struct Function {
    raw: sys::CUfunction,
}

// SAFETY: function handles are immutable.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

impl Module {
    /// Loads a PTX (NUL-terminated), CUBIN or fatbin image.
    pub fn load(ctx: &Context, image: &[u8]) -> CuResult<Module> {
        ctx.bind()?;
        let mut m: sys::CUmodule = ptr::null_mut();
        // PTX must be NUL-terminated; binary images carry their own size in their header.
        let mut owned;
        let data = if image.starts_with(b"//") || image.starts_with(b".version") {
            owned = image.to_vec();
            owned.push(0);
            owned.as_slice()
        } else {
            image
        };
        // SAFETY: data is a complete image that outlives the call.
        unsafe { cu!(cuModuleLoadData(&mut m, data.as_ptr() as *const c_void))? };
        Ok(Module {
            raw: m,
            owner: Arc::clone(&ctx.primary),
        })
    }

    pub fn function(&self, name: &CStr) -> CuResult<Function> {
        let mut f: sys::CUfunction = ptr::null_mut();
        // SAFETY: valid module and NUL-terminated name.
        unsafe { cu!(cuModuleGetFunction(&mut f, self.raw, name.as_ptr()))? };
        Ok(Function { raw: f })
    }

    /// Reads a `__device__ uint32_t` global.
    pub fn global_u32(&self, name: &CStr) -> CuResult<u32> {
        let mut d: sys::CUdeviceptr = 0;
        let mut n = 0usize;
        let mut v = 0u32;
        // SAFETY: valid module and NUL-terminated name; out-pointers valid.
        unsafe {
            cu!(cuModuleGetGlobal_v2(
                &mut d,
                &mut n,
                self.raw,
                name.as_ptr()
            ))?
        };
        global_fits_u32(name, n)?;
        // SAFETY: the global holds at least 4 bytes (checked above, in release builds too).
        unsafe { cu!(cuMemcpyDtoH_v2(&mut v as *mut u32 as *mut c_void, d, 4))? };
        Ok(v)
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let raw = self.raw;
        // SAFETY: loaded by cuModuleLoadData; unloaded once, its context alive (owner).
        self.owner.with_current(|| unsafe {
            sys::cuModuleUnload(raw);
        });
    }
}

impl Function {
    /// Launches with the given kernel parameters (each a pointer to the argument's value).
    ///
    /// # Safety
    /// `params` must match the kernel's signature exactly and every address they carry must be
    /// valid for what the kernel does with it.
    pub unsafe fn launch(
        &self,
        stream: &Stream,
        grid: u32,
        block: u32,
        params: &mut [*mut c_void],
    ) -> CuResult<()> {
        cu!(cuLaunchKernel(
            self.raw,
            grid,
            1,
            1,
            block,
            1,
            1,
            0,
            stream.raw,
            params.as_mut_ptr(),
            ptr::null_mut()
        ))
    }

    /// Preferred shared-memory carveout, percent of the maximum (a hint; -1 = no preference).
    pub fn set_carveout(&self, percent: i32) -> CuResult<()> {
        // SAFETY: valid function handle; a plain attribute write.
        unsafe {
            cu!(cuFuncSetAttribute(
                self.raw,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                percent
            ))
        }
    }

    /// Blocks of `block` threads that fit on one multiprocessor at once.
    pub fn occupancy(&self, block: u32) -> CuResult<u32> {
        let mut n = 0i32;
        // SAFETY: valid function; out-pointer valid.
        unsafe {
            cu!(cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut n,
                self.raw,
                block as i32,
                0
            ))?
        };
        Ok(n.max(0) as u32)
    }
}
