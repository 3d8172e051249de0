//! The DPDK Environment Abstraction Layer: initialised once per process (DPDK allows no second
//! `rte_eal_init`), on first use by any DPDK port, and per-thread lcore registration so the
//! threads that poll ports get mempool caches.

use std::cell::Cell;
use std::ffi::{c_char, CStr, CString};
use std::sync::Mutex;

use dpdk_sys as sys;

use crate::port::PortError;

/// The EAL arguments the process was initialised with (`None` before the first init).
static EAL: Mutex<Option<Vec<String>>> = Mutex::new(None);

/// DPDK's control path (device probe and hotplug removal, ethdev configure / queue setup /
/// start / stop / close, mempool creation) is not thread-safe, and a [`super::DpdkPort`] may be
/// opened or dropped on any thread: the same-process DPDK tests, which open ports on parallel
/// test threads, saw `rte_dev_probe` fail with "No such device" (2 runs in 60) and once a
/// SIGSEGV. Opening a port and closing one hold this lock, and so does installing a port's
/// rte_flow rules: DPDK makes flow calls safe against each other (the PMD's own locking or the
/// ethdev flow lock), not against device configuration on other threads.
static CONTROL: Mutex<()> = Mutex::new(());

thread_local! {
    /// This thread holds [`CONTROL`] (a port dropped inside a failing open closes under it).
    static CONTROL_HELD: Cell<bool> = const { Cell::new(false) };
}

/// [`CONTROL`] held by this thread until dropped; a no-op when the thread holds it already.
pub struct ControlGuard(Option<std::sync::MutexGuard<'static, ()>>);

/// Takes [`CONTROL`] for the calling thread (see there).
pub fn control() -> ControlGuard {
    if CONTROL_HELD.with(Cell::get) {
        return ControlGuard(None);
    }
    // The lock guards no data, so a panic under it leaves nothing inconsistent.
    let g = CONTROL.lock().unwrap_or_else(|e| e.into_inner());
    CONTROL_HELD.with(|h| h.set(true));
    ControlGuard(Some(g))
}

impl Drop for ControlGuard {
    fn drop(&mut self) {
        if self.0.is_some() {
            CONTROL_HELD.with(|h| h.set(false));
        }
    }
}

/// The text of a DPDK error code (positive or negative errno / rte_errno).
pub fn strerror(code: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated string
    // for any integer.
    let p = unsafe { sys::rte_strerror(code.abs()) };
    if p.is_null() {
        return format!("error {code}");
    }
    // SAFETY: non-null, NUL-terminated (see above); copied before any other DPDK call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The current rte_errno, as text.
pub fn last_error() -> String {
    // SAFETY: reads the calling thread's rte_errno; no preconditions.
    strerror(unsafe { sys::pw_rte_errno() })
}

/// The EAL arguments of this crate's unit tests (one EAL per process, so one list for all of
/// them): virtual devices only, no hugepages, no PCI scan, a file prefix of this process.
#[cfg(test)]
pub(crate) fn test_args() -> Vec<String> {
    let pid = std::process::id();
    [
        "--no-huge",
        "--no-pci",
        "--no-shconf",
        "-m",
        "512",
        &format!("--file-prefix=pwgq{pid}"),
        "-l",
        "0",
        "--log-level=*:warning",
    ]
    .map(str::to_string)
    .to_vec()
}

/// Initialises the EAL with `args` (without the program name) unless it already is. A later
/// call must pass the same list or an empty one: the EAL cannot be re-initialised.
pub fn init(args: &[String]) -> Result<(), PortError> {
    let mut state = EAL
        .lock()
        .map_err(|_| PortError::Config("dpdk: EAL state lock poisoned".into()))?;
    if let Some(done) = state.as_ref() {
        if args.is_empty() || args == done.as_slice() {
            return Ok(());
        }
        return Err(PortError::Config(format!(
            "dpdk: eal_args {args:?} differ from {done:?}, which initialised the EAL already; \
             DPDK has one EAL per process: give eal_args on one port only (or the same list)"
        )));
    }

    let mut argv_owned: Vec<CString> = Vec::with_capacity(args.len() + 1);
    argv_owned.push(CString::from(c"pktwarp"));
    for a in args {
        argv_owned.push(CString::new(a.as_str()).map_err(|_| {
            PortError::Config(format!("dpdk: eal_args entry {a:?} contains a NUL byte"))
        })?);
    }
    // EAL keeps pointers into argv (it may permute it and keep option strings), so the strings
    // live for the rest of the process: this happens once.
    let argv: &'static mut [*mut c_char] = Box::leak(
        argv_owned
            .into_iter()
            .map(CString::into_raw)
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );

    // rte_eal_init pins the calling thread to the main lcore's CPU; threads the caller spawns
    // later would inherit that. Restore the caller's affinity afterwards.
    let saved = current_affinity();
    // SAFETY: argv holds argc valid NUL-terminated strings that outlive the process's EAL.
    let rc = unsafe { sys::rte_eal_init(argv.len() as i32, argv.as_mut_ptr()) };
    if let Some(set) = saved {
        restore_affinity(&set);
    }
    if rc < 0 {
        return Err(PortError::Config(format!(
            "dpdk: rte_eal_init({args:?}) failed: {}",
            last_error()
        )));
    }
    REGISTERED.with(|r| r.set(Registration::Main));
    tracing::info!(eal_args = ?args, "dpdk: EAL initialised");
    *state = Some(args.to_vec());
    Ok(())
}

/// The arguments the EAL was initialised with, if it is.
pub fn initialised_with() -> Option<Vec<String>> {
    EAL.lock().ok().and_then(|s| s.clone())
}

fn current_affinity() -> Option<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0)
            .then_some(set)
    }
}

fn restore_affinity(set: &libc::cpu_set_t) {
    // SAFETY: `set` is a valid cpu_set_t read by sched_getaffinity.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
    if rc != 0 {
        tracing::debug!("dpdk: could not restore the thread's CPU affinity after EAL init");
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Registration {
    Unknown,
    Main,
    Registered,
    Failed,
}

/// Unregisters the thread's lcore when the thread ends, so lcore ids are not leaked.
struct LcoreGuard;

impl Drop for LcoreGuard {
    fn drop(&mut self) {
        // SAFETY: only created after a successful rte_thread_register on this thread.
        unsafe { sys::rte_thread_unregister() };
    }
}

thread_local! {
    static REGISTERED: Cell<Registration> = const { Cell::new(Registration::Unknown) };
    static GUARD: Cell<Option<LcoreGuard>> = const { Cell::new(None) };
}

/// Gives the calling thread an lcore id (rte_thread_register) the first time it touches a
/// port, so mempool get/put use a per-lcore cache instead of the shared ring. A thread that
/// cannot get one (all RTE_MAX_LCORE ids taken) still works, only slower; that is logged once.
#[inline(always)]
pub fn register_thread() {
    if REGISTERED.with(|r| r.get()) != Registration::Unknown {
        return;
    }
    register_slow();
}

#[cold]
#[inline(never)]
fn register_slow() {
    // SAFETY: plain query of this thread's lcore id.
    if unsafe { sys::pw_rte_lcore_id() } != sys::LCORE_ID_ANY {
        REGISTERED.with(|r| r.set(Registration::Main));
        return;
    }
    // SAFETY: the EAL is initialised (ports exist only after init); registers this thread.
    let rc = unsafe { sys::rte_thread_register() };
    if rc == 0 {
        REGISTERED.with(|r| r.set(Registration::Registered));
        GUARD.with(|g| g.set(Some(LcoreGuard)));
    } else {
        tracing::warn!(
            "dpdk: rte_thread_register failed ({}); this thread polls without a mempool cache",
            last_error()
        );
        REGISTERED.with(|r| r.set(Registration::Failed));
    }
}
