//! Writes what `tools/gpu-probes/acl_burst_lat.cu` needs to check and time the CUDA matcher on a
//! GPU: the compiled image (`image.bin`, little-endian u32), the trace keys (`keys.bin`, packed
//! `pw_acl_key`) and the Rust matcher's answers (`expect.bin`, u32 per key).
//! Usage: cargo run --release -p flow-rules --example acl_gpu_dump -- RULES TRACE OUTDIR

use flow_rules::acl::{classbench, load_rules, read_text, AclClassifier, RuleFormat};
use std::path::Path;

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    anyhow::ensure!(a.len() == 4, "usage: acl_gpu_dump RULES TRACE OUTDIR");
    let fmt = if a[1].ends_with(".yaml") || a[1].ends_with(".yml") {
        RuleFormat::Yaml
    } else {
        RuleFormat::ClassBench
    };
    let set = load_rules(Path::new(&a[1]), fmt)?;
    let tp = Path::new(&a[2]);
    let trace = classbench::parse_trace(tp, &read_text(tp)?)?;
    let cls = AclClassifier::build(&set.rules);
    let out = Path::new(&a[3]);
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("image.bin"), cls.image_bytes())?;
    let mut keys = Vec::with_capacity(trace.len() * 44);
    let mut expect = Vec::with_capacity(trace.len() * 4);
    for t in &trace {
        let k = &t.key;
        for w in k.src_ip.iter().chain(&k.dst_ip) {
            keys.extend_from_slice(&w.to_le_bytes());
        }
        keys.extend_from_slice(&k.src_port.to_le_bytes());
        keys.extend_from_slice(&k.dst_port.to_le_bytes());
        keys.extend_from_slice(&[k.proto, k.ip_version, k.dscp, k.tcp_flags]);
        keys.extend_from_slice(&k.vlan_id.to_le_bytes());
        keys.extend_from_slice(&k.port_id.to_le_bytes());
        expect.extend_from_slice(&cls.classify(k).to_le_bytes());
    }
    std::fs::write(out.join("keys.bin"), keys)?;
    std::fs::write(out.join("expect.bin"), expect)?;
    println!("{}: {} keys; {}", a[1], trace.len(), cls.stats());
    Ok(())
}
