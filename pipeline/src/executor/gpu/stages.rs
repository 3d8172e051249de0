//! Composed pipelines on the GPU executor (the composed template of pktwarp-kernels): each
//! stage's parameter block in device memory, named by one table of addresses the kernel reads
//! per burst, and each queue's stage counter blocks, read back into the CPU executor's counters.

use super::abi::{
    QueueCounters, StageCounters, ACL_CTR_DEFAULT, ACL_CTR_MATCHED, MAX_STAGES, PARSE_CTR_ERRORS,
};
use super::driver::{Context, DeviceBuffer, Stream};
use super::KernelImage;
use pktwarp_kernels::{StageKind, StageSpec, Template};

/// The parameter blocks of one published set (epoch): freed only with the executor, which
/// keeps the set the kernel's queue descriptors name.
pub(crate) struct StageParams {
    _blocks: Vec<DeviceBuffer>,
    table: DeviceBuffer,
    _stream: Stream,
}

impl StageParams {
    /// Uploads `image.params` (composed template); `None` for the fused template.
    pub(crate) fn upload(
        ctx: &Context,
        image: &KernelImage,
    ) -> anyhow::Result<Option<StageParams>> {
        if image.template != Template::Composed {
            return Ok(None);
        }
        if image.params.len() > MAX_STAGES {
            anyhow::bail!(
                "{} stage parameter blocks, at most {MAX_STAGES}",
                image.params.len()
            );
        }
        let stream = Stream::new(ctx)?;
        let mut addrs = [0u64; MAX_STAGES];
        let mut blocks = Vec::new();
        for (k, p) in image.params.iter().enumerate() {
            if p.is_empty() {
                continue;
            }
            let b = DeviceBuffer::new_async(ctx, p.len(), &stream)?;
            b.upload_on(&stream, p)?;
            addrs[k] = b.ptr;
            blocks.push(b);
        }
        let table = DeviceBuffer::new_async(ctx, 8 * MAX_STAGES, &stream)?;
        let bytes: Vec<u8> = addrs.iter().flat_map(|a| a.to_le_bytes()).collect();
        table.upload_on(&stream, &bytes)?;
        Ok(Some(StageParams {
            _blocks: blocks,
            table,
            _stream: stream,
        }))
    }

    /// Device address of the `u64[MAX_STAGES]` table.
    pub(crate) fn table_addr(&self) -> u64 {
        self.table.ptr
    }
}

/// A queue's `pw_stage_counters[MAX_STAGES]`, zeroed.
pub(crate) fn new_counters(ctx: &Context) -> anyhow::Result<DeviceBuffer> {
    let b = DeviceBuffer::new(ctx, MAX_STAGES * std::mem::size_of::<StageCounters>())?;
    b.zero()?;
    Ok(b)
}

/// Reads a queue's stage counters.
pub(crate) fn read_counters(
    buf: &DeviceBuffer,
    stream: &Stream,
) -> anyhow::Result<Vec<StageCounters>> {
    let mut c = vec![StageCounters::default(); MAX_STAGES];
    // SAFETY: StageCounters is repr(C) plain u64s; the slice covers exactly the vector.
    let raw = unsafe {
        std::slice::from_raw_parts_mut(
            c.as_mut_ptr() as *mut u8,
            std::mem::size_of_val(c.as_slice()),
        )
    };
    buf.download_on(stream, raw)?;
    Ok(c)
}

/// The composed template counts parse errors and ACL matches in the built-in stages' own
/// blocks, not in the queue counters (as the fused template does): fold them in, so the queue
/// counters read the same under both templates.
pub(crate) fn fold_builtin(stages: &[StageSpec], sc: &[StageCounters], c: &mut QueueCounters) {
    for (s, k) in stages.iter().zip(sc) {
        match s.kind {
            StageKind::Parse => c.parse_errors += k.v[PARSE_CTR_ERRORS],
            StageKind::Acl => {
                c.acl_matched += k.v[ACL_CTR_MATCHED];
                c.acl_no_match += k.v[ACL_CTR_DEFAULT];
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_stage_counters_fold_into_the_queue_counters() {
        let stages: Vec<StageSpec> = ["count", "parse", "acl"]
            .iter()
            .filter_map(|n| StageSpec::builtin(n))
            .collect();
        let mut sc = vec![StageCounters::default(); 3];
        sc[1].v[PARSE_CTR_ERRORS] = 5;
        sc[2].v[ACL_CTR_MATCHED] = 7;
        sc[2].v[ACL_CTR_DEFAULT] = 11;
        sc[0].v[1] = 999; // count's bytes: not a queue counter
        let mut c = QueueCounters::default();
        fold_builtin(&stages, &sc, &mut c);
        assert_eq!((c.parse_errors, c.acl_matched, c.acl_no_match), (5, 7, 11));
    }
}
