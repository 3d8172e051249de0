//! Fuzz target `config`: `pktwarp run`'s config parser and validation on arbitrary text. Any
//! input must give a config or a `ConfigError`, never a panic (a bad config is an error that
//! names the file, line and key).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The config keys the pktwarp binary registers (`fronthaul:`, the gen port's `oran:`).
    pktwarp_fronthaul::register();
    let path = std::path::Path::new("/nonexistent/fuzz.yaml");
    if let Err(e) = pipeline::config::parse_str(text, path) {
        // The error renders (Display walks every field) and names the file.
        assert!(e.to_string().starts_with("/nonexistent/fuzz.yaml"));
    }
});
