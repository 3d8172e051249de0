//! pktwarp in a binary of your own: one stage of yours, every pktwarp subcommand. `cargo run -p
//! pktwarp-apps --example embed -- run my.yaml`, with `- custom: { name: ttl_floor }` after parse.
use pipeline::meta::PacketMeta;
use pipeline::stage::{BuiltStage, CustomStage, StageFactory, StageRegistry};
use pipeline::verdict::{Action, Verdict};
use std::sync::Arc;

/// Drops IP frames whose TTL (hop limit) is below the floor.
struct TtlFloor(u8);
impl CustomStage for TtlFloor {
    fn process(&self, _frame: &[u8], m: &PacketMeta, v: &mut Verdict) {
        if m.ip_version != 0 && m.ip_ttl < self.0 {
            v.action = Action::Drop;
        }
    }
}
struct TtlFloorFactory;
impl StageFactory for TtlFloorFactory {
    fn build(&self, options: &serde_json::Value) -> anyhow::Result<BuiltStage> {
        let min = options.get("min_ttl").and_then(|v| v.as_u64()).unwrap_or(2);
        let cpu = Arc::new(TtlFloor(u8::try_from(min)?));
        Ok(BuiltStage { cpu, gpu: None }) // no CUDA part: `executor: auto` runs the CPU
    }
}
fn main() -> anyhow::Result<()> {
    let mut stages = StageRegistry::default();
    stages.register("ttl_floor", Arc::new(TtlFloorFactory))?;
    pktwarp::cli::main_with(stages)
}
