//! A burst: frames packed back to back in one buffer plus one descriptor per frame. The same
//! shape as a GPU queue's slot (packed buffer + descriptors), so a burst moves to the GPU with
//! two copies and no per-frame work.

/// One frame's place in a burst.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameDesc {
    /// Byte offset of the frame in [`Burst::data`].
    pub offset: u32,
    /// Frame length in bytes (captured length).
    pub len: u32,
    /// Length on the wire (pcap `orig_len`); >= `len`.
    pub wire_len: u32,
    /// Ingress port index.
    pub port: u16,
    /// RX queue chosen by steering.
    pub queue: u16,
    /// Toeplitz RSS hash of the frame (0 when not computed).
    pub rss_hash: u32,
    /// Receive timestamp in nanoseconds (capture time for pcap, generation time for gen).
    pub timestamp_ns: u64,
}

/// Frames packed into one buffer.
#[derive(Clone, Debug, Default)]
pub struct Burst {
    pub data: Vec<u8>,
    pub descs: Vec<FrameDesc>,
}

impl Burst {
    pub fn with_capacity(frames: usize, bytes: usize) -> Self {
        Burst {
            data: Vec::with_capacity(bytes),
            descs: Vec::with_capacity(frames),
        }
    }

    pub fn clear(&mut self) {
        self.data.clear();
        self.descs.clear();
    }

    pub fn len(&self) -> usize {
        self.descs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.descs.is_empty()
    }

    /// Appends a frame and returns its index in the burst.
    pub fn push(&mut self, frame: &[u8], mut desc: FrameDesc) -> usize {
        desc.offset = self.data.len() as u32;
        desc.len = frame.len() as u32;
        if desc.wire_len < desc.len {
            desc.wire_len = desc.len;
        }
        self.data.extend_from_slice(frame);
        self.descs.push(desc);
        self.descs.len() - 1
    }

    /// The bytes of frame `i`.
    pub fn frame(&self, i: usize) -> &[u8] {
        let d = &self.descs[i];
        &self.data[d.offset as usize..(d.offset + d.len) as usize]
    }

    pub fn frames(&self) -> impl ExactSizeIterator<Item = (&FrameDesc, &[u8])> {
        self.descs.iter().map(|d| {
            (
                d,
                &self.data[d.offset as usize..(d.offset + d.len) as usize],
            )
        })
    }
}
