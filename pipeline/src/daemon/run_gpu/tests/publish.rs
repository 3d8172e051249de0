//! What the GPU host side publishes: a reload once, with its generation; the pipeline's
//! description of its stages and tables.

use super::*;

#[test]
fn a_reload_is_published_once_with_its_generation() {
    let yaml = format!(
        "ports:\n{}queues: {{ count: 1 }}\n{INLINE}",
        gen_port("a", 10, 1, "64")
    );
    let p = prepared(&yaml);
    let dev = CpuStandIn::new(&p, 4, 0);
    let mut publisher = reload::AclPublisher::new(true, 0);
    publisher.check(&p.pipeline, &dev).unwrap();
    assert!(
        dev.published.lock().unwrap().is_empty(),
        "nothing new at start"
    );
    let acl = p.pipeline.acl().unwrap();
    let fresh = crate::stage::acl::AclStage::load(
        &acl.path,
        flow_rules::acl::RuleFormat::Yaml,
        crate::verdict::Action::Drop,
    )
    .unwrap();
    let g = p.pipeline.reload_acl(fresh).unwrap();
    publisher.check(&p.pipeline, &dev).unwrap();
    publisher.check(&p.pipeline, &dev).unwrap();
    let published = dev.published.lock().unwrap().clone();
    assert_eq!(
        published,
        [(
            g,
            acl.rule_count() as u32,
            crate::verdict::Action::Drop as u8
        )]
    );
    assert_eq!(publisher.generation(), g);
    // Without an acl stage on the GPU nothing is published.
    let mut off = reload::AclPublisher::new(false, 0);
    off.check(&p.pipeline, &dev).unwrap();
    assert_eq!(dev.published.lock().unwrap().len(), 1);
}

#[test]
fn the_gpu_pipeline_desc_names_the_stages_and_the_acl_tables() {
    // Which orders the GPU refuses is the stage list's business (Pipeline::gpu_refusal and
    // the kernel generator); here: what the description carries.
    let p = Pipeline::new(vec![Stage::Parse, Stage::Count]);
    let d = gpu_pipeline_desc(&p, None, None).unwrap();
    assert!(d.parse && d.count && d.acl.is_none());
    assert_eq!(d.default_action, crate::verdict::Action::Pass as u8);
    let inline = prepared(&format!("ports:\n{}{INLINE}", gen_port("a", 1, 1, "64")));
    let acl = inline.pipeline.acl().unwrap();
    let bytes = acl.classifier.image_bytes();
    let d = gpu_pipeline_desc(&inline.pipeline, Some(&acl), Some(&bytes)).unwrap();
    let t = d.acl.expect("acl tables");
    assert_eq!(t.n_rules as usize, acl.rule_count());
    assert_eq!(t.bytes.len(), bytes.len());
}
