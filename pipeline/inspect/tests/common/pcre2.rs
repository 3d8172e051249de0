//! PCRE2 (its C API through `pcre2-sys`) as the independent oracle of the `pcre` DFAs: the
//! pattern compiled with the PCRE options of Suricata's flag letters, matched on a subject
//! from a start offset, as Suricata calls it.

use pcre2_sys::*;
use std::ptr;

pub struct Pcre2 {
    code: *mut pcre2_code_8,
    md: *mut pcre2_match_data_8,
}

/// The PCRE2 compile options of Suricata's PCRE flag letters.
pub fn options(letters: &str) -> u32 {
    let mut o = 0;
    for c in letters.chars() {
        o |= match c {
            'i' => PCRE2_CASELESS,
            'm' => PCRE2_MULTILINE,
            's' => PCRE2_DOTALL,
            'x' => PCRE2_EXTENDED,
            'A' => PCRE2_ANCHORED,
            'E' => PCRE2_DOLLAR_ENDONLY,
            'G' => PCRE2_UNGREEDY,
            _ => 0,
        };
    }
    o
}

impl Pcre2 {
    /// Compiles `pat`; Err with PCRE2's error code when it refuses it.
    pub fn new(pat: &[u8], letters: &str) -> Result<Pcre2, i32> {
        let mut code_err = 0;
        let mut off = 0usize;
        // SAFETY: the pattern pointer and length describe a live slice; a null compile
        // context is allowed; the out-parameters point at locals.
        let code = unsafe {
            pcre2_compile_8(
                pat.as_ptr(),
                pat.len(),
                options(letters),
                &mut code_err,
                &mut off,
                ptr::null_mut(),
            )
        };
        if code.is_null() {
            return Err(code_err);
        }
        // SAFETY: `code` is a compiled pattern this value owns; a null general context is
        // allowed.
        let md = unsafe { pcre2_match_data_create_from_pattern_8(code, ptr::null_mut()) };
        if md.is_null() {
            // SAFETY: `code` came from pcre2_compile_8 and is freed once.
            unsafe { pcre2_code_free_8(code) };
            return Err(-1);
        }
        Ok(Pcre2 { code, md })
    }

    /// The first match in `subj` from `start`: (start, end), None when there is none, Err
    /// with PCRE2's error code (a match limit) otherwise.
    pub fn find(&self, subj: &[u8], start: usize) -> Result<Option<(usize, usize)>, i32> {
        // SAFETY: `code` and `md` are live and owned by self; the subject pointer and length
        // describe a live slice; `start <= subj.len()` is PCRE2's to check (it errors).
        let rc = unsafe {
            pcre2_match_8(
                self.code,
                subj.as_ptr(),
                subj.len(),
                start,
                0,
                self.md,
                ptr::null_mut(),
            )
        };
        if rc == PCRE2_ERROR_NOMATCH {
            return Ok(None);
        }
        if rc < 0 {
            return Err(rc);
        }
        // SAFETY: after a successful match the ovector holds at least one pair.
        let ov = unsafe { std::slice::from_raw_parts(pcre2_get_ovector_pointer_8(self.md), 2) };
        Ok(Some((ov[0], ov[1])))
    }
}

impl Drop for Pcre2 {
    fn drop(&mut self) {
        // SAFETY: both were created in `new`, are owned by self and freed once here.
        unsafe {
            pcre2_match_data_free_8(self.md);
            pcre2_code_free_8(self.code);
        }
    }
}
