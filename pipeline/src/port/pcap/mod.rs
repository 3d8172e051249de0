//! The `pcap` port: replays a pcap / pcapng file as its RX side and records its TX side to a
//! capture file.

mod reader;

pub use reader::{
    describe_link_type, link_type_name, CaptureFormat, CaptureReader, Frame, LINKTYPE_ETHERNET,
    MAX_RECORD_LEN,
};
