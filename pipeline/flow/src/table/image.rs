//! A table's buckets as the bytes of a device copy (the GPU executor's flow tables): read into
//! the CPU table, so the CPU's own sweep and flush run on them, and read out again to be written
//! back (docs/flow-export-gpu.md).

use super::{entry_bytes, entry_bytes_mut, sig_of, BucketTag, FlowTable, BUCKET_ENTRIES};
use crate::{ef, key, FlowError, ENTRY_SIZE};

impl FlowTable {
    /// Bytes of `count` buckets from bucket `first` (not wrapping): the device layout, entry
    /// after entry.
    pub fn bucket_bytes(&self, first: u32, count: u32) -> Result<&[u8], FlowError> {
        let r = self.bucket_range(first, count)?;
        Ok(entry_bytes(&self.entries[r]))
    }

    /// Replaces the buckets from bucket `first` with `bytes` (whole buckets of a device copy,
    /// entry after entry) and rebuilds their tags, so the table reads them as it would have
    /// written them. An error when `bytes` is not whole buckets inside the table.
    pub fn load_buckets(&mut self, first: u32, bytes: &[u8]) -> Result<(), FlowError> {
        let bucket = BUCKET_ENTRIES * ENTRY_SIZE;
        if bytes.len() % bucket != 0 {
            return Err(FlowError::Config {
                key: "image".into(),
                message: format!("{} bytes are not whole buckets of {bucket}", bytes.len()),
            });
        }
        let count = (bytes.len() / bucket) as u32;
        let r = self.bucket_range(first, count)?;
        entry_bytes_mut(&mut self.entries[r]).copy_from_slice(bytes);
        for b in first..first + count {
            let mut tag = BucketTag::default();
            let base = b as usize * BUCKET_ENTRIES;
            for s in 0..BUCKET_ENTRIES {
                let e = &self.entries[base + s];
                if e.flags & ef::OCCUPIED != 0 {
                    tag.sig[s] = sig_of(key::hash(&e.key, self.seed));
                    tag.min_deadline = tag.min_deadline.min(self.deadline(e));
                }
            }
            self.tags[b as usize] = tag;
        }
        Ok(())
    }

    fn bucket_range(&self, first: u32, count: u32) -> Result<std::ops::Range<usize>, FlowError> {
        if u64::from(first) + u64::from(count) > u64::from(self.nbuckets) {
            return Err(FlowError::Config {
                key: "image".into(),
                message: format!(
                    "buckets {first}..{} past the table's {}",
                    u64::from(first) + u64::from(count),
                    self.nbuckets
                ),
            });
        }
        let start = first as usize * BUCKET_ENTRIES;
        Ok(start..start + count as usize * BUCKET_ENTRIES)
    }
}
