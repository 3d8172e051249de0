//! Tests of the kernel generator (codegen.rs).

use super::*;

fn list(names: &[&str]) -> Vec<StageSpec> {
    names
        .iter()
        .map(|n| {
            StageSpec::builtin(n).unwrap_or(StageSpec {
                name: n.to_string(),
                kind: StageKind::Custom {
                    function: format!("my_{n}"),
                    source: format!("PW_DEVICE void my_{n}(const pw_frame *f, pw_packet_meta *m, pw_verdict *v, const void *p, pw_stage_counters *c) {{}}"),
                    writes_frame: false,
                },
            })
        })
        .collect()
}

#[test]
fn ordered_subsets_of_the_builtins_take_the_fused_template() {
    for l in [
        &["parse", "acl", "count"][..],
        &["parse", "count"],
        &["count"],
        &["parse"],
        &["parse", "acl"],
    ] {
        assert_eq!(template_of(&list(l)), Ok(Template::Fused), "{l:?}");
    }
    for l in [
        &["count", "parse", "acl"][..],
        &["parse", "guard", "acl", "count"],
        &["parse", "count", "count"],
        &["parse", "acl", "acl"],
    ] {
        assert_eq!(template_of(&list(l)), Ok(Template::Composed), "{l:?}");
    }
}

#[test]
fn fronthaul_alone_reads_the_receive_time() {
    let has = |names: &[&str]| {
        let specs: Vec<StageSpec> = names.iter().filter_map(|n| StageSpec::builtin(n)).collect();
        assert_eq!(specs.len(), names.len(), "{names:?}");
        pipeline_reads_time(&specs)
    };
    assert!(has(&["parse", "fronthaul", "count"]));
    assert!(has(&["fronthaul"]));
    assert!(!has(&["parse", "acl", "count"]));
    assert!(!has(&["parse", "dscp", "route", "count"]));
}

#[test]
fn acl_before_parse_is_refused_naming_the_stage() {
    let e = template_of(&list(&["acl", "parse"])).unwrap_err();
    assert_eq!(e.stage, 0);
    assert!(e.message.contains("`acl`"), "{e}");
    let e = template_of(&list(&["count", "acl"])).unwrap_err();
    assert_eq!(e.stage, 1);
    assert!(template_of(&[]).is_err());
    let too_many = list(&["count"; MAX_STAGES + 1]);
    assert!(template_of(&too_many).is_err());
}

#[test]
fn a_bad_function_name_is_refused() {
    let mut l = list(&["parse", "guard"]);
    if let StageKind::Custom { function, .. } = &mut l[1].kind {
        *function = "bad name(".into();
    }
    assert!(template_of(&l)
        .unwrap_err()
        .message
        .contains("not a C identifier"));
}

#[test]
fn the_composed_source_calls_the_stages_in_order_and_stops_at_a_drop() {
    let src = generate(&list(&["count", "parse", "guard", "acl"]), Target::Gpu).unwrap();
    let body = &src[src.find("void pw_pipeline_frame(").unwrap()..];
    let calls: Vec<usize> = [
        "pw_stage_count(",
        "pw_stage_parse(",
        "my_guard(",
        "pw_stage_acl(",
    ]
    .iter()
    .map(|c| body.find(c).expect(c))
    .collect();
    assert!(calls.windows(2).all(|w| w[0] < w[1]), "{src}");
    assert_eq!(
        src.matches("if (v->action == PW_ACTION_DROP) return;")
            .count(),
        3
    );
    assert!(src.contains("PW_DROP_STAGE"));
    assert!(src.trim_end().ends_with("#include \"kernels.cu\""));
    let host = generate(&list(&["parse", "count"]), Target::Host).unwrap();
    assert!(host.contains("pw_host_pipeline_frame") && !host.contains("kernels.cu"));
}

/// An acl with rewrite actions leaves the fused template: composed, writing, its acl stage
/// `pw_stage_acl_rw` with the acl's block; without rewrites the list stays fused.
#[test]
fn tx_time_takes_the_composed_template_with_the_ring_send_times() {
    let l = vec![
        StageSpec::builtin("parse").unwrap(),
        StageSpec::builtin("tx_time").unwrap(),
    ];
    assert_eq!(template_of(&l), Ok(Template::Composed));
    assert!(l[1].sets_send_time() && l[1].reads_time() && !l[1].writes_frame());
    assert!(pipeline_sets_send_time(&l) && !pipeline_writes(&l));
    let src = generate(&l, Target::Gpu).unwrap();
    assert!(src.contains("#define PW_PIPELINE_TIMED 1"), "{src}");
    assert!(!src.contains("#define PW_PIPELINE_WRITES 1"), "{src}");
    assert!(src.contains("pw_stage_tx_time(f, m, v, pw_stage_params(ctx, 1u)"));
    let plain = [StageSpec::builtin("parse").unwrap()];
    assert!(!generate(&plain, Target::Gpu)
        .unwrap()
        .contains("PW_PIPELINE_TIMED"));
}

#[test]
fn an_acl_with_rewrites_takes_the_composed_writing_template() {
    let plain = vec![
        StageSpec::builtin("parse").unwrap(),
        StageSpec::acl(false),
        StageSpec::builtin("count").unwrap(),
    ];
    assert_eq!(plain[1], StageSpec::builtin("acl").unwrap());
    assert_eq!(template_of(&plain), Ok(Template::Fused));
    assert!(!pipeline_writes(&plain));
    let mut rw = plain.clone();
    rw[1] = StageSpec::acl(true);
    assert!(rw[1].is_acl() && rw[1].reads_meta() && rw[1].writes_frame());
    assert_eq!(template_of(&rw), Ok(Template::Composed));
    let src = generate(&rw, Target::Gpu).unwrap();
    assert!(src.contains("#define PW_PIPELINE_WRITES 1"), "{src}");
    assert!(src.contains("#define PW_PIPELINE_ACL_STAGE 1u"), "{src}");
    assert!(src.contains("#include \"rewrite_stages.cuh\""), "{src}");
    assert!(src.contains("pw_stage_acl_rw(f, m, v, ctx->acl, &ctx->counters[1]);"));
    let e = template_of(&[StageSpec::acl(true)]).unwrap_err();
    assert!(e.message.contains("`acl`"), "{e}");
}

/// Only a list with a stage that reads whole frames (fronthaul) has the transport stage
/// chunks of large frames a few at a time.
#[test]
fn a_stage_reading_whole_frames_sets_reads_payload() {
    let names = |n: &[&str]| -> Vec<StageSpec> {
        n.iter().map(|x| StageSpec::builtin(x).unwrap()).collect()
    };
    let fh = names(&["parse", "fronthaul", "count"]);
    assert!(fh[1].reads_payload() && !fh[0].reads_payload());
    let src = generate(&fh, Target::Gpu).unwrap();
    assert!(src.contains("#define PW_PIPELINE_READS_PAYLOAD 1"), "{src}");
    let l3 = names(&["parse", "route", "dscp", "l2fwd", "count"]);
    let src = generate(&l3, Target::Gpu).unwrap();
    assert!(!src.contains("#define PW_PIPELINE_READS_PAYLOAD"), "{src}");
    for f in READS_PAYLOAD {
        assert!(LIBRARY_STAGES.iter().any(|l| l.function == *f), "{f}");
    }
}

#[test]
fn a_library_stage_is_included_by_its_header() {
    let l = StageSpec {
        name: "shaper".into(),
        kind: StageKind::Library {
            function: "pw_stage_shaper",
            header: "shaper.cuh",
        },
    };
    let mut stages = list(&["parse"]);
    stages.push(l);
    assert_eq!(template_of(&stages), Ok(Template::Composed));
    let src = generate(&stages, Target::Gpu).unwrap();
    assert!(src.contains("#include \"shaper.cuh\""), "{src}");
    assert!(src.contains("pw_stage_shaper(f, m, v, pw_stage_params(ctx, 1u), &ctx->counters[1]);"));
    for l in LIBRARY_STAGES {
        assert!(StageSpec::builtin(l.name).is_some(), "{}", l.name);
    }
}

#[test]
fn a_rewrite_stage_makes_the_pipeline_write() {
    let l3fwd = list(&["parse", "route", "dscp", "l2fwd", "count"]);
    assert!(l3fwd[1..4].iter().all(StageSpec::writes_frame));
    assert!(l3fwd[1].reads_meta() && !l3fwd[3].reads_meta());
    let src = generate(&l3fwd, Target::Host).unwrap();
    assert!(src.contains("#define PW_PIPELINE_WRITES 1"), "{src}");
    assert_eq!(src.matches("#include \"rewrite_stages.cuh\"").count(), 3);
    assert!(src.contains("pw_stage_route(f, m, v, pw_stage_params(ctx, 1u), &ctx->counters[1]);"));
    // A stage that reads the metadata still needs parse before it.
    assert!(template_of(&list(&["dscp", "parse"])).is_err());
    assert!(template_of(&list(&["vlan", "parse"])).is_ok());
    let ro = generate(&list(&["parse", "fronthaul"]), Target::Host).unwrap();
    assert!(!ro.contains("PW_PIPELINE_WRITES"));
}

/// A user stage that writes the frame makes the list write, as a rewrite stage does; one
/// that does not leaves it read-only.
#[test]
fn a_writing_user_stage_makes_the_pipeline_write() {
    let mut l = list(&["parse", "stamp"]);
    assert!(!pipeline_writes(&l));
    let ro = generate(&l, Target::Host).unwrap();
    assert!(!ro.contains("PW_PIPELINE_WRITES"), "{ro}");
    if let StageKind::Custom { writes_frame, .. } = &mut l[1].kind {
        *writes_frame = true;
    }
    assert!(l[1].writes_frame() && pipeline_writes(&l));
    assert_eq!(template_of(&l), Ok(Template::Composed));
    let rw = generate(&l, Target::Gpu).unwrap();
    assert!(rw.contains("#define PW_PIPELINE_WRITES 1"), "{rw}");
}

/// conntrack keeps per-queue state in flow order: the list defines PW_PIPELINE_ORDERED,
/// frames dropped before it are marked skipped (the later frames of their round would wait
/// for them), drops after it return plainly; the same ordered stage twice, or one beside
/// fronthaul's round hooks, is refused naming the stage.
#[test]
fn an_ordered_stage_marks_the_frames_dropped_before_it() {
    let l = list(&["parse", "guard", "conntrack", "acl", "count"]);
    assert!(l[2].orders_flows() && !l[3].orders_flows());
    assert!(l[2].reads_meta() && l[2].reads_time() && !l[2].writes_frame());
    assert_eq!(template_of(&l), Ok(Template::Composed));
    assert!(pipeline_orders_flows(&l) && pipeline_reads_time(&l));
    let src = generate(&l, Target::Gpu).unwrap();
    assert!(src.contains("#define PW_PIPELINE_ORDERED 1"), "{src}");
    assert!(src.contains("#include \"conntrack_stage.cuh\""), "{src}");
    let body = &src[src.find("void pw_pipeline_frame(").unwrap()..];
    let ct = body.find("pw_stage_conntrack(").unwrap();
    // parse and guard may drop before conntrack: both skip; acl's drop returns plainly.
    assert_eq!(body[..ct].matches("pw_order_skip();").count(), 2, "{body}");
    assert_eq!(body[ct..].matches("pw_order_skip();").count(), 0, "{body}");
    assert_eq!(
        body[ct..]
            .matches("if (v->action == PW_ACTION_DROP) return;")
            .count(),
        2
    );
    let plain = generate(&list(&["parse", "guard", "acl"]), Target::Gpu).unwrap();
    assert!(!plain.contains("PW_PIPELINE_ORDERED") && !plain.contains("pw_order_skip"));
    // Two of the same ordered stage would share its channel: refused.
    let e = template_of(&list(&["parse", "conntrack", "conntrack"])).unwrap_err();
    assert_eq!(e.stage, 2);
    assert!(e.message.contains("one `conntrack` stage"), "{e}");
    let e = template_of(&list(&["parse", "conntrack", "fronthaul"])).unwrap_err();
    assert_eq!(e.stage, 2);
    assert!(e.message.contains("`fronthaul`"), "{e}");
    // inspect reads whole frames but has no round hooks: it may follow conntrack.
    let l = list(&["parse", "conntrack", "inspect", "count"]);
    assert_eq!(template_of(&l), Ok(Template::Composed));
    assert!(l[2].reads_payload() && !l[2].orders_flows() && l[2].reads_time());
    for f in ORDERED.iter().chain(ORDERED_SECOND) {
        assert!(library_stage(f).is_some(), "{f}");
    }
    // inspect orders its own state on the second channel: a frame dropped before it (by
    // parse, conntrack or acl) is skipped there, and before conntrack on the first too.
    let l = list(&["parse", "conntrack", "acl", "inspect", "count"]);
    let src = generate(&l, Target::Host).unwrap();
    assert!(src.contains("#define PW_PIPELINE_ORDERED2 1"), "{src}");
    let plain = generate(&list(&["parse", "conntrack", "count"]), Target::Gpu).unwrap();
    assert!(!plain.contains("PW_PIPELINE_ORDERED2"), "{plain}");
    let body = &src[src.find("void pw_pipeline_frame(").unwrap()..];
    let at = body.find("pw_stage_inspect(").unwrap();
    assert_eq!(body[..at].matches("pw_order2_skip();").count(), 3, "{body}");
    assert_eq!(body[..at].matches("pw_order_skip();").count(), 1, "{body}");
    assert_eq!(body[at..].matches("pw_order2_skip();").count(), 0, "{body}");
}

/// rate_limit orders frames by token bucket as conntrack by flow: an ordered stage that may
/// drop (its drop returns plainly after it), never beside conntrack in one pipeline.
#[test]
fn rate_limit_is_an_ordered_stage() {
    let l = list(&["parse", "rate_limit", "count"]);
    assert!(l[1].orders_flows() && l[1].reads_meta() && l[1].reads_time());
    assert_eq!(template_of(&l), Ok(Template::Composed));
    let src = generate(&l, Target::Gpu).unwrap();
    assert!(src.contains("#define PW_PIPELINE_ORDERED 1"), "{src}");
    assert!(src.contains("#include \"rate_limit_stage.cuh\""), "{src}");
    let body = &src[src.find("void pw_pipeline_frame(").unwrap()..];
    let rl = body.find("pw_stage_rate_limit(").unwrap();
    assert_eq!(body[..rl].matches("pw_order_skip();").count(), 1, "{body}");
}

/// Two ordered stages: each on its own channel of flow_order.cuh, the first on channel 0, the
/// second on channel 1 (its header's PW_ORDER_CH_ macro); a frame dropped before the first is
/// skipped on both, one dropped between them (by acl, or by the first itself) on the second
/// only; no owned layout (two keys). Three, or two beside inspect (which takes channel 1 too),
/// are refused naming the stage.
#[test]
fn two_ordered_stages_take_a_channel_each() {
    let l = list(&["parse", "conntrack", "acl", "rate_limit", "count"]);
    assert_eq!(template_of(&l), Ok(Template::Composed));
    assert_eq!(order_channels(&l), Ok(vec![(1, 0), (3, 1)]));
    assert_eq!(pipeline_order_key(&l), None);
    let src = generate(&l, Target::Gpu).unwrap();
    assert!(src.contains("#define PW_PIPELINE_ORDERED 1"), "{src}");
    assert!(src.contains("#define PW_PIPELINE_ORDERED2 1"), "{src}");
    assert!(src.contains("#define PW_ORDER_CH_RATE_LIMIT 1u"), "{src}");
    assert!(!src.contains("#define PW_ORDER_CH_CONNTRACK"), "{src}");
    let body = &src[src.find("void pw_pipeline_frame(").unwrap()..];
    let ct = body.find("pw_stage_conntrack(").unwrap();
    let rl = body.find("pw_stage_rate_limit(").unwrap();
    assert_eq!(body[..ct].matches("pw_order_skip();").count(), 1, "{body}");
    assert_eq!(body[ct..].matches("pw_order_skip();").count(), 0, "{body}");
    // parse, conntrack and acl may drop before rate_limit.
    assert_eq!(body[..rl].matches("pw_order2_skip();").count(), 3, "{body}");
    assert_eq!(body[rl..].matches("pw_order2_skip();").count(), 0, "{body}");
    // The other way round: rate_limit first (its drops skip conntrack's channel).
    let l = list(&["parse", "rate_limit", "conntrack", "count"]);
    let src = generate(&l, Target::Host).unwrap();
    assert!(src.contains("#define PW_ORDER_CH_CONNTRACK 1u"), "{src}");
    let body = &src[src.find("void pw_pipeline_frame(").unwrap()..];
    let ct = body.find("pw_stage_conntrack(").unwrap();
    assert_eq!(body[..ct].matches("pw_order2_skip();").count(), 2, "{body}");
    let mut own = list(&["parse"]);
    own.push(StageSpec::flow_stats(true));
    own.extend(list(&["rate_limit", "count"]));
    let src = generate(&own, Target::Gpu).unwrap();
    assert!(src.contains("#define PW_ORDER_CH_RATE_LIMIT 1u"), "{src}");
    let e = template_of(&list(&["parse", "conntrack", "rate_limit", "inspect"])).unwrap_err();
    assert_eq!(e.stage, 3);
    assert!(e.message.contains("orders at most two"), "{e}");
    let mut three = list(&["parse", "conntrack", "rate_limit"]);
    three.push(StageSpec::flow_stats(true));
    let e = template_of(&three).unwrap_err();
    assert_eq!(e.stage, 3);
    assert!(e.message.contains("at most 2 stages"), "{e}");
    assert_eq!(
        order_channel_macro("pw_stage_flow_stats_own"),
        "PW_ORDER_CH_FLOW_STATS_OWN"
    );
}

/// flow_stats has two forms under one name: over conntrack's tables it does nothing per frame
/// and orders nothing (conntrack does); with a table of its own it is an ordered stage with
/// conntrack's key, the frames it skips marked as before conntrack.
#[test]
fn flow_stats_with_its_own_table_is_an_ordered_stage() {
    let over = list(&["parse", "conntrack", "flow_stats", "count"]);
    assert_eq!(over[2], StageSpec::flow_stats(false));
    assert!(!over[2].orders_flows() && over[2].reads_meta() && over[2].reads_time());
    let mut own = list(&["parse", "acl", "flow_stats", "count"]);
    own[2] = StageSpec::flow_stats(true);
    assert_eq!(own[2].name, "flow_stats");
    assert!(own[2].orders_flows() && own[2].reads_meta() && own[2].reads_time());
    assert!(!own[2].writes_frame() && !own[2].sets_send_time());
    let src = generate(&own, Target::Gpu).unwrap();
    assert!(src.contains("#define PW_PIPELINE_ORDERED 1"), "{src}");
    assert!(src.contains("#include \"flow_stats_stage.cuh\""), "{src}");
    let body = &src[src.find("void pw_pipeline_frame(").unwrap()..];
    let at = body.find("pw_stage_flow_stats_own(").unwrap();
    // parse and acl may drop before it: both skip.
    assert_eq!(body[..at].matches("pw_order_skip();").count(), 2, "{body}");
    // After parse alone it takes the owned layout, keyed as conntrack.
    let keyed = [own[0].clone(), own[2].clone()];
    assert_eq!(pipeline_order_key(&keyed), Some("pw_flow_stats_order_key"));
    // A second ordered stage beside it: it keeps channel 0, the other takes channel 1.
    let mut l = list(&["parse"]);
    l.push(StageSpec::flow_stats(true));
    l.extend(list(&["rate_limit"]));
    assert_eq!(order_channels(&l), Ok(vec![(1, 0), (2, 1)]));
    for v in LIBRARY_VARIANTS {
        assert!(StageSpec::builtin(v.name).is_some(), "{}", v.name);
        assert_eq!(library_stage(v.function).map(|l| l.name), Some(v.name));
    }
}

#[test]
fn includes_are_inlined_once() {
    let lookup = |n: &str| match n {
        "a.h" => Some("A\n#include \"b.h\"\n".to_string()),
        "b.h" => Some("B\n#include \"a.h\"\n".to_string()),
        _ => None,
    };
    let s = inline_includes(
        "#include \"a.h\"\n#include \"b.h\"\n#include \"c.h\"\nX\n",
        &lookup,
    )
    .unwrap();
    assert_eq!(
        s.matches("\nA\n").count() + s.starts_with("A\n") as usize,
        1,
        "{s}"
    );
    assert_eq!(s.matches("B\n").count(), 1);
    assert!(s.contains("#include \"c.h\""));
}
