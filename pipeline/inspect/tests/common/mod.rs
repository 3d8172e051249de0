//! Helpers shared by the corpus tests.

use std::path::Path;

/// The frames of a classic pcap file with Ethernet link type; None for anything else
/// (pcapng, other link types). Records that claim more than the file holds end the list.
pub fn ethernet_frames(path: &Path) -> Option<Vec<Vec<u8>>> {
    let b = std::fs::read(path).ok()?;
    let magic = b.get(..4)?;
    let le = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => return None,
    };
    let u32_at = |at: usize| -> Option<u32> {
        let w: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        })
    };
    if u32_at(20)? != 1 {
        return None;
    }
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let incl = u32_at(at + 8)? as usize;
        let Some(data) = b.get(at + 16..at + 16 + incl) else {
            break;
        };
        out.push(data.to_vec());
        at += 16 + incl;
    }
    Some(out)
}
