//! The shipped ACL rule files load, validate, compile without shadowed rules, and decide as
//! their comments say.

use flow_rules::abi::{AclKey, VLAN_NONE};
use flow_rules::acl::{load_rules, RuleFormat, Verdict};
use std::path::Path;

fn v4(s: [u8; 4], d: [u8; 4], proto: u8, dport: u16, flags: u8) -> AclKey {
    AclKey {
        src_ip: [u32::from_be_bytes(s), 0, 0, 0],
        dst_ip: [u32::from_be_bytes(d), 0, 0, 0],
        src_port: 40000,
        dst_port: dport,
        proto,
        ip_version: 4,
        dscp: 0,
        tcp_flags: flags,
        vlan_id: VLAN_NONE,
        port_id: 0,
    }
}

#[test]
fn inline_filter_rules() {
    let p = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../configs/rules/inline-filter.rules.yaml"
    ));
    let mut set = load_rules(p, RuleFormat::Yaml).unwrap();
    let cls = set.compile();
    assert!(set.warnings.is_empty(), "{:?}", set.warnings);
    let name = |k: &AclKey| {
        let i = cls.classify(k);
        set.rules
            .get(i as usize)
            .map(|r| (r.name.clone().unwrap_or_default(), cls.action(i).verdict))
    };
    let ack = 0x10;
    assert_eq!(
        name(&v4([127, 0, 0, 1], [192, 168, 0, 1], 6, 80, ack))
            .unwrap()
            .1,
        Verdict::Drop
    );
    assert_eq!(
        name(&v4([10, 1, 2, 3], [192, 168, 0, 1], 6, 23, ack))
            .unwrap()
            .0,
        "telnet"
    );
    assert_eq!(
        name(&v4([10, 0, 0, 5], [192, 168, 0, 1], 6, 22, ack))
            .unwrap()
            .0,
        "ssh-from-mgmt"
    );
    assert_eq!(
        name(&v4([10, 9, 0, 5], [192, 168, 0, 1], 6, 22, ack))
            .unwrap()
            .1,
        Verdict::ToHost
    );
    assert_eq!(
        name(&v4([10, 9, 0, 5], [192, 168, 0, 1], 17, 53, 0))
            .unwrap()
            .1,
        Verdict::Mirror
    );
    assert_eq!(
        name(&v4([10, 9, 0, 5], [192, 168, 0, 1], 6, 0x50, 0))
            .unwrap()
            .0,
        "tcp-null-scan"
    );
    assert_eq!(
        name(&v4([10, 9, 0, 5], [192, 168, 0, 1], 6, 443, 0x03))
            .unwrap()
            .0,
        "tcp-syn-fin"
    );
    assert_eq!(
        name(&v4([10, 9, 0, 5], [192, 168, 0, 1], 6, 443, ack)),
        None
    );
}
