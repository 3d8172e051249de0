//! The owned layout's key pass (cuda/kernels_owned.cu) is generated only where it is safe: the
//! stages before the ordered one are `parse` alone and no stage writes frames.

use pktwarp_kernels::codegen::{generate, pipeline_order_key, ORDERED, ORDER_KEYS};
use pktwarp_kernels::{StageKind, StageSpec, Target};

fn list(names: &[&str]) -> Vec<StageSpec> {
    let guard = |n: &str| StageSpec {
        name: n.to_string(),
        kind: StageKind::Custom {
            function: format!("my_{n}"),
            source: format!(
                "PW_DEVICE void my_{n}(const pw_frame *f, pw_packet_meta *m, pw_verdict *v, \
                 const void *p, pw_stage_counters *c) {{}}"
            ),
            writes_frame: false,
        },
    };
    names
        .iter()
        .map(|n| StageSpec::builtin(n).unwrap_or_else(|| guard(n)))
        .collect()
}

/// Where parse alone precedes the ordered stage: parse into the caller's counters, NONE for a
/// frame it drops, then the stage's key function with its parameter block (no acl, no counts).
#[test]
fn the_order_key_pass_is_generated_where_parse_alone_precedes() {
    let l = list(&["parse", "conntrack", "acl", "count"]);
    assert_eq!(pipeline_order_key(&l), Some("pw_conntrack_order_key"));
    let src = generate(&l, Target::Gpu).unwrap();
    assert!(src.contains("#define PW_PIPELINE_ORDER_KEY 1"), "{src}");
    let body = &src[src.find("uint32_t pw_pipeline_order_key(").unwrap()..];
    let body = &body[..body.find("\n}").unwrap()];
    assert!(body.contains("pw_stage_parse(f, m, v, pw_stage_params(ctx, 0u), &ctx->counters[0]);"));
    assert!(body.contains("if (v->action == PW_ACTION_DROP) return PW_ORDER_NONE;"));
    assert!(body.contains("return pw_conntrack_order_key(f, m, pw_stage_params(ctx, 1u));"));
    assert!(
        !body.contains("pw_stage_acl") && !body.contains("PW_ADD64"),
        "{body}"
    );
    let rl = list(&["parse", "rate_limit", "count"]);
    assert_eq!(pipeline_order_key(&rl), Some("pw_rate_limit_order_key"));
    assert!(ORDER_KEYS.iter().all(|(f, _)| ORDERED.contains(f)));
}

/// A stage with effects of its own before the ordered one (acl counts rule hits, a user stage
/// may do anything), a rewriting stage anywhere, or no ordered stage: no key pass.
#[test]
fn no_key_pass_where_a_stage_before_has_effects_or_frames_are_written() {
    for names in [
        &["parse", "acl", "conntrack"][..],
        &["parse", "guard", "conntrack"],
        &["parse", "conntrack", "dscp"],
        &["parse", "acl"],
    ] {
        let l = list(names);
        assert_eq!(pipeline_order_key(&l), None, "{names:?}");
        let src = generate(&l, Target::Gpu).unwrap();
        assert!(!src.contains("PW_PIPELINE_ORDER_KEY"), "{names:?}");
    }
}
