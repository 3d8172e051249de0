//! ACL table hot swap on the GPU: a reload (control thread, `Pipeline::reload_acl`) bumps the
//! pipeline's generation; [`AclPublisher::check`] uploads the new tables to the GPU, after
//! which every burst submitted names them in its slot header.

use super::device::QueueDevice;
use crate::executor::gpu::AclTablesRef;
use crate::stage::Pipeline;

/// The generation of the ACL tables the GPU classifies with.
pub(crate) struct AclPublisher {
    acl_on: bool,
    have: u64,
}

impl AclPublisher {
    /// `acl_on`: the GPU runs an acl stage. The GPU starts with the tables in force when its
    /// pipeline was built, generation `start`.
    pub fn new(acl_on: bool, start: u64) -> AclPublisher {
        AclPublisher {
            acl_on,
            have: start,
        }
    }

    /// The generation the GPU has.
    #[cfg(test)]
    pub fn generation(&self) -> u64 {
        self.have
    }

    /// Publishes the pipeline's tables when they are newer than the GPU's. The generation
    /// compared is the one stamped into the tables read (`acl.generation`), so a reload racing
    /// this check is picked up by the next one.
    pub fn check(&mut self, pipeline: &Pipeline, dev: &dyn QueueDevice) -> anyhow::Result<()> {
        if !self.acl_on || pipeline.generation() == self.have {
            return Ok(());
        }
        let Some(a) = pipeline.acl() else {
            return Ok(());
        };
        if a.generation == self.have {
            return Ok(());
        }
        let bytes = a.classifier.image_bytes();
        dev.publish_acl(
            &AclTablesRef {
                bytes: &bytes,
                n_rules: a.rule_count() as u32,
            },
            a.generation,
            a.default as u8,
        )?;
        tracing::info!(
            event = "gpu_acl_swap",
            generation = a.generation,
            rules = a.rule_count(),
            "GPU executor now classifies with rule-set generation {}",
            a.generation
        );
        self.have = a.generation;
        Ok(())
    }
}
