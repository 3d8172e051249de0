//! The generated counterpart of classbench_parity.rs, needing no external corpus: seeded
//! ClassBench-like IPv4 sets (`acl::gen4`, in the acl1 and fw1 seeds' spirit) at 1K and 10K
//! rules, classified exactly as DPDK's rte_acl classifies them: `dpdk-test-acl --verbose=3` is
//! run on the same files in the test (common/dpdk_acl.rs says what is compared).
//!
//! Needs `dpdk-test-acl` (Debian `dpdk-dev`, installed by scripts/install-deps.sh); without it
//! the test fails and says so (`PKTWARP_DPDK_TEST_ACL` names another binary).

mod common;

use common::dpdk_acl::{check, Family};
use flow_rules::acl::gen4::generate;
use flow_rules::acl::gen6::Profile;

const V4: Family = Family {
    generate,
    v6: false,
};

#[test]
fn acl_1k_equals_rte_acl() {
    check(&V4, Profile::Acl, 1000, 1);
}

#[test]
fn fw_1k_equals_rte_acl() {
    check(&V4, Profile::Fw, 1000, 2);
}

#[test]
fn acl_10k_equals_rte_acl() {
    check(&V4, Profile::Acl, 10_000, 3);
}

#[test]
fn fw_10k_equals_rte_acl() {
    check(&V4, Profile::Fw, 10_000, 4);
}
