//! Hyperscan (libhs, block mode) over a [`PatternSet`]: the matcher's peer in the benchmark and
//! its oracle in the tests (feature `hyperscan`). The patterns go in as literals
//! (`hs_compile_lit_multi`), `HS_FLAG_CASELESS` for `nocase`; `HS_FLAG_SINGLEMATCH` for a
//! set-only database (what the prefilter needs: each pattern reported once).

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr};
use std::ptr;
use std::sync::Arc;

use super::{Match, MatchSet, MatcherError, PatternSet};

#[repr(C)]
struct HsDatabase {
    _opaque: [u8; 0],
}

#[repr(C)]
struct HsScratch {
    _opaque: [u8; 0],
}

#[repr(C)]
struct HsCompileError {
    message: *mut c_char,
    expression: c_int,
}

type MatchHandler =
    unsafe extern "C" fn(c_uint, c_ulonglong, c_ulonglong, c_uint, *mut c_void) -> c_int;

const HS_SUCCESS: c_int = 0;
const HS_FLAG_CASELESS: c_uint = 1;
const HS_FLAG_SINGLEMATCH: c_uint = 8;
const HS_MODE_BLOCK: c_uint = 1;

extern "C" {
    fn hs_compile_lit_multi(
        expressions: *const *const c_char,
        flags: *const c_uint,
        ids: *const c_uint,
        lens: *const usize,
        elements: c_uint,
        mode: c_uint,
        platform: *const c_void,
        db: *mut *mut HsDatabase,
        error: *mut *mut HsCompileError,
    ) -> c_int;
    fn hs_free_compile_error(error: *mut HsCompileError) -> c_int;
    fn hs_alloc_scratch(db: *const HsDatabase, scratch: *mut *mut HsScratch) -> c_int;
    fn hs_clone_scratch(src: *const HsScratch, dest: *mut *mut HsScratch) -> c_int;
    fn hs_scan(
        db: *const HsDatabase,
        data: *const c_char,
        length: c_uint,
        flags: c_uint,
        scratch: *mut HsScratch,
        on_event: Option<MatchHandler>,
        context: *mut c_void,
    ) -> c_int;
    fn hs_free_database(db: *mut HsDatabase) -> c_int;
    fn hs_free_scratch(scratch: *mut HsScratch) -> c_int;
}

/// What a scan collects into.
enum Sink<'a> {
    Set(&'a mut MatchSet),
    All(&'a mut Vec<Match>),
}

unsafe extern "C" fn on_match(
    id: c_uint,
    _from: c_ulonglong,
    to: c_ulonglong,
    _flags: c_uint,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: ctx is the `&mut Sink` that `scan` passed to hs_scan, alive for the whole scan.
    let sink = unsafe { &mut *(ctx as *mut Sink) };
    match sink {
        Sink::Set(s) => s.insert(id),
        Sink::All(v) => v.push(Match {
            pattern: id,
            end: to as usize,
        }),
    }
    0
}

/// A compiled database (null for an empty set), freed when the last scanner drops it.
struct Db(*mut HsDatabase);

// SAFETY: a compiled database is immutable; Hyperscan scans one from many threads at once,
// each with its own scratch (Hyperscan's developer reference, "Scratch Space").
unsafe impl Send for Db {}
// SAFETY: as for Send: nothing writes the database after compilation.
unsafe impl Sync for Db {}

impl Drop for Db {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the database this object compiled, freed once here.
            unsafe { hs_free_database(self.0) };
        }
    }
}

/// A compiled Hyperscan database with its scratch. [`Hyperscan::try_clone`] gives another
/// scanner of the same database with its own scratch (one per thread).
pub struct Hyperscan {
    db: Arc<Db>,
    scratch: *mut HsScratch,
    n_patterns: usize,
    single: bool,
}

// SAFETY: the scratch belongs to this object alone and is used by one scan at a time
// (`&mut self`); the database is shared read-only (`Db`).
unsafe impl Send for Hyperscan {}

impl Hyperscan {
    /// `set_only`: each pattern reported at most once a scan (`HS_FLAG_SINGLEMATCH`), the mode
    /// for [`Hyperscan::match_set_into`]; otherwise every occurrence ([`Hyperscan::find_all`]).
    pub fn new(set: &PatternSet, set_only: bool) -> Result<Hyperscan, MatcherError> {
        let mut hs = Hyperscan {
            db: Arc::new(Db(ptr::null_mut())),
            scratch: ptr::null_mut(),
            n_patterns: set.len(),
            single: set_only,
        };
        if set.is_empty() {
            // Hyperscan refuses an empty database; an empty set matches nothing.
            return Ok(hs);
        }
        let mut db: *mut HsDatabase = ptr::null_mut();
        let pats = set.patterns();
        let exprs: Vec<*const c_char> = pats
            .iter()
            .map(|p| p.bytes.as_ptr() as *const c_char)
            .collect();
        let lens: Vec<usize> = pats.iter().map(|p| p.bytes.len()).collect();
        let ids: Vec<c_uint> = (0..pats.len() as c_uint).collect();
        let single = if set_only { HS_FLAG_SINGLEMATCH } else { 0 };
        let flags: Vec<c_uint> = pats
            .iter()
            .map(|p| single | if p.nocase { HS_FLAG_CASELESS } else { 0 })
            .collect();
        let mut err: *mut HsCompileError = ptr::null_mut();
        // SAFETY: every array has set.len() entries and each expression pointer addresses lens[i]
        // bytes, all alive across the call; db and err are out-pointers.
        let rc = unsafe {
            hs_compile_lit_multi(
                exprs.as_ptr(),
                flags.as_ptr(),
                ids.as_ptr(),
                lens.as_ptr(),
                pats.len() as c_uint,
                HS_MODE_BLOCK,
                ptr::null(),
                &mut db,
                &mut err,
            )
        };
        if rc != HS_SUCCESS {
            let msg = if err.is_null() {
                format!("hs_compile_lit_multi: error {rc}")
            } else {
                // SAFETY: err is Hyperscan's error, message a NUL-terminated string it
                // owns; freed once here.
                unsafe {
                    let m = format!(
                        "pattern {}: {}",
                        (*err).expression,
                        CStr::from_ptr((*err).message).to_string_lossy()
                    );
                    hs_free_compile_error(err);
                    m
                }
            };
            return Err(MatcherError::Hyperscan(msg));
        }
        hs.db = Arc::new(Db(db));
        // SAFETY: db is the database just compiled; scratch an out-pointer.
        let rc = unsafe { hs_alloc_scratch(db, &mut hs.scratch) };
        if rc != HS_SUCCESS {
            return Err(MatcherError::Hyperscan(format!(
                "hs_alloc_scratch: error {rc}"
            )));
        }
        Ok(hs)
    }

    /// Another scanner of the same database with a scratch of its own, for another thread.
    pub fn try_clone(&self) -> Result<Hyperscan, MatcherError> {
        let mut h = Hyperscan {
            db: Arc::clone(&self.db),
            scratch: ptr::null_mut(),
            n_patterns: self.n_patterns,
            single: self.single,
        };
        if !self.scratch.is_null() {
            // SAFETY: self.scratch is this object's allocated scratch, not in use (&self, and
            // scans take &mut self); dest is an out-pointer.
            let rc = unsafe { hs_clone_scratch(self.scratch, &mut h.scratch) };
            if rc != HS_SUCCESS {
                return Err(MatcherError::Hyperscan(format!(
                    "hs_clone_scratch: error {rc}"
                )));
            }
        }
        Ok(h)
    }

    fn scan(&mut self, buf: &[u8], mut sink: Sink) -> Result<(), MatcherError> {
        if self.db.0.is_null() {
            return Ok(());
        }
        let len = c_uint::try_from(buf.len()).map_err(|_| {
            MatcherError::Hyperscan(format!("buffer of {} bytes: over 4 GiB", buf.len()))
        })?;
        // SAFETY: db and scratch are this object's (scratch used by one scan at a time: &mut
        // self); buf is len bytes; the context is `sink`, alive until hs_scan returns.
        let rc = unsafe {
            hs_scan(
                self.db.0,
                buf.as_ptr() as *const c_char,
                len,
                0,
                self.scratch,
                Some(on_match),
                &mut sink as *mut Sink as *mut c_void,
            )
        };
        if rc != HS_SUCCESS {
            return Err(MatcherError::Hyperscan(format!("hs_scan: error {rc}")));
        }
        Ok(())
    }

    /// Sets the bit of every pattern that occurs in `buf`.
    pub fn match_set_into(&mut self, buf: &[u8], set: &mut MatchSet) -> Result<(), MatcherError> {
        self.scan(buf, Sink::Set(set))
    }

    pub fn match_set(&mut self, buf: &[u8]) -> Result<MatchSet, MatcherError> {
        let mut set = MatchSet::new(self.n_patterns);
        self.match_set_into(buf, &mut set)?;
        Ok(set)
    }

    /// Every occurrence; refused for a set-only database (it reports each pattern once).
    pub fn find_all(&mut self, buf: &[u8], out: &mut Vec<Match>) -> Result<(), MatcherError> {
        if self.single {
            return Err(MatcherError::Hyperscan(
                "find_all on a set-only (HS_FLAG_SINGLEMATCH) database".into(),
            ));
        }
        self.scan(buf, Sink::All(out))
    }
}

impl Drop for Hyperscan {
    fn drop(&mut self) {
        if !self.scratch.is_null() {
            // SAFETY: this object's own scratch, freed once here (the database is `Db`'s).
            unsafe { hs_free_scratch(self.scratch) };
        }
    }
}
