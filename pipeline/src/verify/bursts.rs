//! Cutting a chunk of frames into the bursts a GPU queue takes.

use crate::burst::Burst;

/// Cuts `chunk` into bursts of at most `max_frames` frames and `max_bytes` data bytes, each with
/// the index of its first frame. A frame larger than `max_bytes` travels alone (the executor
/// then refuses or takes it; nothing is dropped here). `max_frames` 0 is taken as 1.
pub fn split_bursts(chunk: &Burst, max_frames: usize, max_bytes: usize) -> Vec<(usize, Burst)> {
    let max_frames = max_frames.max(1);
    let mut out = Vec::new();
    let mut cur = Burst::default();
    let mut first = 0;
    for (i, (d, f)) in chunk.frames().enumerate() {
        if !cur.is_empty() && (cur.len() >= max_frames || cur.data.len() + f.len() > max_bytes) {
            out.push((first, std::mem::take(&mut cur)));
            first = i;
        }
        cur.push(f, *d);
    }
    if !cur.is_empty() {
        out.push((first, cur));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::burst::FrameDesc;

    #[test]
    fn split_bursts_respects_frames_and_bytes() {
        let mut chunk = Burst::default();
        for i in 0..10u8 {
            chunk.push(&[i; 100], FrameDesc::default());
        }
        let b = split_bursts(&chunk, 4, 250);
        assert_eq!(
            b.iter().map(|(f, b)| (*f, b.len())).collect::<Vec<_>>(),
            vec![(0, 2), (2, 2), (4, 2), (6, 2), (8, 2)]
        );
        let b = split_bursts(&chunk, 3, usize::MAX);
        assert_eq!(b.len(), 4);
        assert_eq!(b[3].1.frame(0), &[9u8; 100][..]);
        // A frame larger than the byte budget still travels, alone.
        let mut big = Burst::default();
        big.push(&[1u8; 500], FrameDesc::default());
        big.push(&[2u8; 10], FrameDesc::default());
        assert_eq!(split_bursts(&big, 8, 100).len(), 2);
    }

    /// Degenerate limits: nothing to cut, a zero frame budget, a zero byte budget.
    #[test]
    fn split_bursts_degenerate_limits() {
        assert!(split_bursts(&Burst::default(), 32, 4096).is_empty());
        let mut chunk = Burst::default();
        for i in 0..3u8 {
            chunk.push(&[i; 8], FrameDesc::default());
        }
        assert_eq!(split_bursts(&chunk, 0, usize::MAX).len(), 3);
        assert_eq!(split_bursts(&chunk, 32, 0).len(), 3);
    }
}
