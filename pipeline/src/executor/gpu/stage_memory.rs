//! The stages' device buffers and counter blocks on every GPU, as a stage's host side sees them
//! ([`crate::stage::gpu_host::StageGpuMemory`]).

use crate::stage::gpu_host::StageGpuMemory;

use super::multi::MultiGpu;

impl StageGpuMemory for MultiGpu {
    fn gpus(&self) -> usize {
        self.executors().len()
    }

    fn read_buffer(&self, gpu: usize, k: usize, i: usize) -> anyhow::Result<Vec<u8>> {
        self.gpu(gpu)?.read_stage_buffer(k, i)
    }

    fn read_buffer_range(
        &self,
        gpu: usize,
        k: usize,
        i: usize,
        offset: usize,
        len: usize,
    ) -> anyhow::Result<Vec<u8>> {
        self.gpu(gpu)?.read_stage_buffer_range(k, i, offset, len)
    }

    fn set_buffer_word(
        &self,
        gpu: usize,
        k: usize,
        i: usize,
        offset: usize,
        value: u32,
    ) -> anyhow::Result<()> {
        self.gpu(gpu)?.set_stage_word(k, i, offset, value)
    }

    fn counter_blocks(&self) -> anyhow::Result<Vec<[u64; 8]>> {
        let mut out: Vec<[u64; 8]> = Vec::new();
        for snap in self.counters_per_executor()? {
            for queue in &snap.stages {
                if out.len() < queue.len() {
                    out.resize(queue.len(), [0; 8]);
                }
                for (sum, block) in out.iter_mut().zip(queue) {
                    for (s, v) in sum.iter_mut().zip(block.v) {
                        *s += v;
                    }
                }
            }
        }
        Ok(out)
    }

    fn ring_slots(&self) -> u32 {
        self.executors()
            .first()
            .map_or(0, |ex| ex.options().ring_slots)
    }
}

impl MultiGpu {
    fn gpu(&self, gpu: usize) -> anyhow::Result<&super::GpuExecutor> {
        self.executors()
            .get(gpu)
            .ok_or_else(|| anyhow::anyhow!("no GPU {gpu}: the pipeline runs on {}", self.gpus()))
    }
}
