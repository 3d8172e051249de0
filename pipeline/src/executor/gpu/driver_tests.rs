//! The driver wrapper's checks that need no GPU.

use super::*;

/// Bounds hold in release builds too: an oversized copy is refused before the driver call.
#[test]
#[should_panic(expected = "copy of 9 bytes into 8")]
fn an_oversized_copy_panics_before_the_copy() {
    assert_copy_fits(9, 8);
}

#[test]
fn a_global_smaller_than_a_u32_is_an_error() {
    assert!(global_fits_u32(c"x", 4).is_ok());
    let e = global_fits_u32(c"pw_small", 2).unwrap_err();
    assert!(
        e.text.contains("pw_small") && e.text.contains("2 bytes"),
        "{e:?}"
    );
}

/// Memory safety is not left to debug builds: no debug_assert in this module.
#[test]
fn no_debug_assert_for_memory_safety() {
    let src = include_str!("driver.rs");
    let code = src.split("#[cfg(test)]").next().unwrap_or(src);
    let n = code.matches(concat!("debug_", "assert")).count();
    assert_eq!(n, 0, "driver.rs uses debug assertions");
}
