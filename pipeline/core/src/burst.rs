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
    /// The steering rule's mark (`mark: ID` in the steering rules; 0 = none). The `parse`
    /// stage copies it into [`crate::meta::PacketMeta::steer_mark`]; on the GPU it travels in
    /// `pw_desc.mark` (full descriptors only).
    pub mark: u32,
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

    /// [`Burst::push`] with `room` zero bytes reserved after the frame, so a stage may grow it
    /// in place (a `vlan` push adds 4): the frame's room is the gap up to the next frame's
    /// `offset` (or the buffer's end), see [`Burst::frames_mut`].
    pub fn push_with_room(&mut self, frame: &[u8], desc: FrameDesc, room: usize) -> usize {
        let i = self.push(frame, desc);
        self.data.resize(self.data.len() + room, 0);
        i
    }

    /// Every frame's descriptor and its writable buffer: the frame's `len` bytes plus the room
    /// after them (up to the next frame). A stage that changes a frame's length writes the new
    /// length into `len` (and keeps it within the buffer).
    pub fn frames_mut(&mut self) -> FramesMut<'_> {
        FramesMut {
            descs: &mut self.descs,
            rest: &mut self.data,
            at: 0,
        }
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

/// [`Burst::frames_mut`]: walks the descriptors and the data buffer together (no allocation).
pub struct FramesMut<'a> {
    descs: &'a mut [FrameDesc],
    rest: &'a mut [u8],
    /// Offset in the burst's data of `rest`'s first byte.
    at: usize,
}

impl<'a> Iterator for FramesMut<'a> {
    type Item = (&'a mut FrameDesc, &'a mut [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let descs = std::mem::take(&mut self.descs);
        let (d, more) = descs.split_first_mut()?;
        let limit = self.at + self.rest.len();
        // Offsets only grow (push appends); clamped so a hand-made descriptor cannot panic.
        let start = (d.offset as usize).clamp(self.at, limit);
        let end = more
            .first()
            .map_or(limit, |n| n.offset as usize)
            .clamp(start, limit);
        let rest = std::mem::take(&mut self.rest);
        let (_, tail) = rest.split_at_mut(start - self.at);
        let (buf, tail) = tail.split_at_mut(end - start);
        self.rest = tail;
        self.at = end;
        self.descs = more;
        Some((d, buf))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.descs.len(), Some(self.descs.len()))
    }
}

impl ExactSizeIterator for FramesMut<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_after_each_frame_is_writable() {
        let mut b = Burst::default();
        b.push_with_room(&[1, 2, 3], FrameDesc::default(), 4);
        b.push_with_room(&[4, 5], FrameDesc::default(), 4);
        assert_eq!(b.descs[1].offset, 7);
        for (d, buf) in b.frames_mut() {
            assert_eq!(buf.len(), d.len as usize + 4);
            buf[d.len as usize] = 9;
            d.len += 1;
        }
        assert_eq!(b.frame(0), &[1, 2, 3, 9]);
        assert_eq!(b.frame(1), &[4, 5, 9]);
        // Back to back (no room): each buffer is exactly the frame.
        let mut b = Burst::default();
        b.push(&[1], FrameDesc::default());
        b.push(&[2, 3], FrameDesc::default());
        let lens: Vec<usize> = b.frames_mut().map(|(_, f)| f.len()).collect();
        assert_eq!(lens, vec![1, 2]);
        // A descriptor pointing past the data yields an empty buffer, not a panic.
        b.descs[1].offset = 1000;
        let lens: Vec<usize> = b.frames_mut().map(|(_, f)| f.len()).collect();
        assert_eq!(lens, vec![3, 0]);
    }
}
