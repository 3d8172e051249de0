use super::tagged::{store_tagged, tagged_src_len};
use super::*;

#[test]
fn default_threads_are_512_only_for_small_persistent_bursts_that_fit() {
    let small = GpuOptions {
        burst_size: 32,
        ..Default::default()
    };
    assert_eq!(small.default_threads(1, 0, 132), 512);
    assert_eq!(small.default_threads(132, 0, 132), 512);
    // One CTA more than the SMs, or CTAs of another executor beside them: 256.
    assert_eq!(small.default_threads(133, 0, 132), 256);
    assert_eq!(small.default_threads(100, 40, 132), 256);
    // Device rings: 4 CTAs per 32-frame burst by default.
    let dev = GpuOptions {
        placement: Placement::Device,
        ..small.clone()
    };
    assert_eq!(dev.default_threads(33, 0, 132), 512);
    assert_eq!(dev.default_threads(34, 0, 132), 256);
    for o in [
        GpuOptions {
            burst_size: 64,
            ..small.clone()
        },
        GpuOptions {
            mode: Mode::Launch,
            ..small.clone()
        },
        GpuOptions {
            mode: Mode::Graph,
            ..small.clone()
        },
    ] {
        assert_eq!(o.default_threads(1, 0, 132), 256, "{o:?}");
    }
}

#[test]
fn options_parse_and_validate() {
    let o: GpuOptions = serde_saphyr::from_str(
        "mode: graph\nplacement: mapped\nburst_size: 32\nring_slots: 64\ngraph_bursts: 8\n",
    )
    .unwrap();
    assert_eq!(o.mode, Mode::Graph);
    assert_eq!(o.placement_of(3), Placement::Mapped);
    assert!(o.validate().is_ok());
    assert_eq!(o.threads(), 256);
    let bad: Result<GpuOptions, _> = serde_saphyr::from_str("burst_sise: 3\n");
    assert!(bad.is_err());
    let o = GpuOptions {
        burst_size: 2000,
        ..Default::default()
    };
    assert!(o.validate().unwrap_err().contains("burst_size"));
    let o = GpuOptions {
        mode: Mode::Graph,
        ring_slots: 10,
        graph_bursts: 4,
        ..Default::default()
    };
    assert!(o.validate().unwrap_err().contains("graph_bursts"));
}

/// Where tagged words apply by default, and the errors `tagged: true` gives where they
/// cannot.
#[test]
fn tagged_options() {
    let small = GpuOptions {
        burst_size: 32,
        slot_data_bytes: Some(4096),
        ..Default::default()
    };
    if !tagged_stores_atomic() {
        // No tagged queue on this CPU, and `tagged: true` says why.
        assert!(!small.tagged_queue(0));
        let on = GpuOptions {
            tagged: Some(true),
            ..small.clone()
        };
        let e = on.validate().unwrap_err();
        assert!(e.contains("AVX"), "{e}");
        return;
    }
    assert!(
        small.tagged_queue(0),
        "small mapped persistent slots are tagged"
    );
    // The default slots (burst 256 x 2048 B of data) do not fit the staging area.
    assert!(!GpuOptions::default().tagged_queue(0));
    let off = GpuOptions {
        tagged: Some(false),
        ..small.clone()
    };
    assert!(!off.tagged_queue(0));
    let mixed = GpuOptions {
        queue_placement: vec![Placement::Device],
        ..small.clone()
    };
    assert!(!mixed.tagged_queue(0) && mixed.tagged_queue(1));
    let launch = GpuOptions {
        mode: Mode::Launch,
        tagged: Some(true),
        ..small.clone()
    };
    assert!(!launch.tagged_queue(0));
    assert!(launch.validate().unwrap_err().contains("executor.tagged"));
    let big = GpuOptions {
        tagged: Some(true),
        ..Default::default()
    };
    let e = big.validate().unwrap_err();
    assert!(e.contains("executor.tagged") && e.contains("24576"), "{e}");
    let device = GpuOptions {
        placement: Placement::Device,
        tagged: Some(true),
        ..small.clone()
    };
    assert!(device
        .validate()
        .unwrap_err()
        .contains("no queue is mapped"));
    // A block of 32 threads checks at most 32 x 32 granules of 8 bytes.
    let narrow = GpuOptions {
        block_threads: Some(32),
        slot_data_bytes: Some(16384),
        ..small.clone()
    };
    assert!(!narrow.tagged_queue(0));
    let wide = GpuOptions {
        block_threads: Some(512),
        ..small.clone()
    };
    assert!(wide.validate().is_ok() && wide.tagged_queue(0));
    let wide_launch = GpuOptions {
        mode: Mode::Launch,
        ..wide
    };
    assert!(wide_launch
        .validate()
        .unwrap_err()
        .contains("block_threads"));
}

/// The host's tagged encoding is the layout the kernel decodes: granule g = {image[12g..12g +
/// 12], tag}, the last granule's bytes past the image copied as they are, nothing written
/// past its granules.
#[test]
fn tagged_encoding() {
    if !tagged_stores_atomic() {
        crate::testdata::skip(
            file!(),
            "tagged_encoding",
            "this CPU has no atomic 16-byte stores (no tagged queues here)",
        );
        return;
    }
    for len in [48usize, 64, 100, 4704] {
        let mut img: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        img.resize(tagged_src_len(len), 0xEE); // bytes past len: written as they are
        let granules = len.div_ceil(12);
        // 16-byte aligned, one granule of slack that must stay untouched.
        let mut slot = vec![u128::MAX; granules + 1];
        // SAFETY: slot holds 16 * (granules + 1) bytes, 16-byte aligned.
        unsafe { store_tagged(slot.as_mut_ptr() as *mut u8, &img, len, 0xA5A5_0001) };
        let bytes: Vec<u8> = slot.iter().flat_map(|w| w.to_le_bytes()).collect();
        for g in 0..granules {
            let gr = &bytes[16 * g..16 * g + 16];
            assert_eq!(
                &gr[..12],
                &img[12 * g..12 * g + 12],
                "len {len} granule {g}"
            );
            assert_eq!(
                u32::from_le_bytes(gr[12..].try_into().unwrap()),
                0xA5A5_0001
            );
        }
        assert_eq!(
            slot[granules],
            u128::MAX,
            "len {len}: wrote past the granules"
        );
    }
}

/// Without a GPU (CI) probing and construction return a reason, never panic.
#[test]
fn no_gpu_is_a_clean_error() {
    if driver::driver_present() {
        crate::testdata::skip(
            file!(),
            "no_gpu_is_a_clean_error",
            "a CUDA driver is present on this machine",
        );
        return;
    }
    let e = probe(0).unwrap_err();
    assert!(matches!(e, Unavailable::NoDriverLibrary), "{e}");
    let image = KernelImage {
        binary: None,
        ..pktwarp_kernels::builtin_image()
    };
    let pd = PipelineDesc {
        parse: true,
        acl: None,
        count: true,
        default_action: abi::ACTION_PASS,
    };
    let err = GpuExecutor::new(GpuOptions::default(), pd, 1, &image)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("no usable GPU"), "{err}");
}

/// A pipeline whose stage keeps per-queue state in flow order (conntrack) runs one CTA group per
/// queue: more CTAs per queue are an error naming the key; several CTAs a burst take the owned
/// layout where the list has an order key and bursts fit one round, else an error naming why;
/// the default group size becomes 1; a pipeline without such a stage keeps its options.
#[test]
fn per_queue_ordered_state_takes_one_cta_per_queue() {
    use pktwarp_kernels::StageSpec;
    let image_of = |names: &[&str]| {
        let stages: Vec<StageSpec> = names.iter().filter_map(|n| StageSpec::builtin(n)).collect();
        assert_eq!(stages.len(), names.len());
        pktwarp_kernels::image_for(&stages, vec![Vec::new(); names.len()]).expect("image")
    };
    let image = image_of(&["parse", "conntrack", "acl", "count"]);
    let opts = |ctas: u32, burst_ctas: Option<u32>| GpuOptions {
        ctas_per_queue: ctas,
        burst_ctas,
        burst_size: 16,
        placement: Placement::Device,
        ..GpuOptions::default()
    };
    let e = setup::one_cta_for_ordered_state(opts(2, None), &image).unwrap_err();
    assert!(e.to_string().contains("ctas_per_queue: 2") && e.to_string().contains("`conntrack`"));
    // The owned layout: four CTAs a burst, each its part of the buckets.
    let o = setup::one_cta_for_ordered_state(opts(1, Some(4)), &image).expect("owned layout");
    assert_eq!(o.parts(), 4);
    // acl before conntrack: no key before the stage, no split.
    let acl_first = image_of(&["parse", "acl", "conntrack", "count"]);
    let e = setup::one_cta_for_ordered_state(opts(1, Some(4)), &acl_first).unwrap_err();
    assert!(
        e.to_string().contains("burst_ctas: 4") && e.to_string().contains("`parse` alone"),
        "{e}"
    );
    // A burst of more than one round of the block.
    let big = GpuOptions {
        burst_size: 512,
        ..opts(1, Some(2))
    };
    let e = setup::one_cta_for_ordered_state(big, &image).unwrap_err();
    assert!(e.to_string().contains("burst_size is 512"), "{e}");
    // Device rings and 16-frame bursts default to a group of 2 CTAs a burst: made 1.
    assert_eq!(opts(1, None).parts(), 2);
    let o = setup::one_cta_for_ordered_state(opts(1, None), &image).expect("options");
    assert_eq!(o.parts(), 1);
    let plain = pktwarp_kernels::builtin_image();
    let o = setup::one_cta_for_ordered_state(opts(2, Some(4)), &plain).expect("options");
    assert_eq!((o.ctas_per_queue, o.burst_ctas), (2, Some(4)));
    // inspect with flowbits / threshold tables after conntrack: its state spans flows, so a
    // burst is not split between CTAs; without the tables the split stays allowed.
    let mut ids = image_of(&["parse", "conntrack", "inspect", "count"]);
    assert!(setup::one_cta_for_ordered_state(opts(1, Some(4)), &ids).is_ok());
    ids.queue_state = vec![Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    ids.queue_state[2].push(pktwarp_kernels::StageBuffer {
        name: "flowbits / threshold tables".into(),
        bytes: 64,
        addr_at: 64,
    });
    let e = setup::one_cta_for_ordered_state(opts(1, Some(4)), &ids).unwrap_err();
    assert!(
        e.to_string().contains("burst_ctas: 4") && e.to_string().contains("`inspect`"),
        "{e}"
    );
    let o = setup::one_cta_for_ordered_state(opts(1, None), &ids).expect("options");
    assert_eq!(o.parts(), 1);
    // inspect without state tables: one CTA a burst unless burst_ctas is set.
    let ids = image_of(&["parse", "inspect", "count"]);
    assert_eq!(opts(1, None).parts(), 2);
    assert_eq!(setup::one_cta_for_inspect(opts(1, None), &ids).parts(), 1);
    assert_eq!(
        setup::one_cta_for_inspect(opts(1, Some(4)), &ids).parts(),
        4
    );
    assert_eq!(setup::one_cta_for_inspect(opts(1, None), &plain).parts(), 2);
    // Two ordered stages (a flow's key, a source's): one CTA a burst, never a split.
    let pair = image_of(&["parse", "conntrack", "rate_limit", "count"]);
    let e = setup::one_cta_for_ordered_state(opts(1, Some(4)), &pair).unwrap_err();
    assert!(
        e.to_string().contains("`conntrack` and `rate_limit`"),
        "{e}"
    );
    let o = setup::one_cta_for_ordered_state(opts(1, None), &pair).expect("options");
    assert_eq!(o.parts(), 1);
    let e = setup::one_cta_for_ordered_state(opts(2, None), &pair).unwrap_err();
    assert!(e.to_string().contains("ctas_per_queue: 2"), "{e}");
}

/// The per-queue state's size: bytes times queues; 0 bytes or an overflow is an error naming
/// the buffer.
#[test]
fn per_queue_state_sizes_are_checked() {
    let b = |bytes: usize| pktwarp_kernels::StageBuffer {
        name: "flow table".into(),
        bytes,
        addr_at: 0,
    };
    assert_eq!(stages::queue_state_bytes(&b(8 << 20), 4).unwrap(), 32 << 20);
    let e = stages::queue_state_bytes(&b(0), 4).unwrap_err();
    assert!(e.to_string().contains("`flow table` has size 0"), "{e}");
    let e = stages::queue_state_bytes(&b(usize::MAX / 2), 3).unwrap_err();
    assert!(e.to_string().contains("overflows"), "{e}");
}
