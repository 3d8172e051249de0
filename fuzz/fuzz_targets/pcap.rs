//! Fuzz target `pcap`: the capture reader (pcap in either byte order and resolution, pcapng) on
//! arbitrary bytes. Every frame it yields lies within its record and the limits; a bad file is
//! a `PortError`, never a panic or an allocation the input does not pay for.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pipeline::internal::port::pcap::{CaptureReader, MAX_RECORD_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = CaptureReader::from_reader("fuzz.pcap", std::io::Cursor::new(data.to_vec()))
    else {
        return;
    };
    let mut frames = 0usize;
    while let Ok(Some(f)) = r.next_frame() {
        assert!(f.data.len() <= MAX_RECORD_LEN as usize);
        assert!(f.data.len() <= data.len());
        frames += 1;
        assert!(frames <= data.len(), "more frames than input bytes");
    }
});
