//! Generated IPv6 rule sets (`acl::gen6`, ClassBench-like, seeded) classified exactly as DPDK's
//! rte_acl classifies them: `dpdk-test-acl --ipv6 --verbose=3` is run on the same files in the
//! test (common/dpdk_acl.rs says what is compared).
//!
//! Needs `dpdk-test-acl` (Debian `dpdk-dev`, installed by scripts/install-deps.sh); without it
//! the test fails and says so (`PKTWARP_DPDK_TEST_ACL` names another binary).

mod common;

use common::dpdk_acl::{check, Family};
use flow_rules::acl::gen6::{generate, Profile};

const V6: Family = Family { generate, v6: true };

#[test]
fn ipv6_acl_1k_equals_rte_acl() {
    check(&V6, Profile::Acl, 1000, 1);
}

#[test]
fn ipv6_fw_1k_equals_rte_acl() {
    check(&V6, Profile::Fw, 1000, 2);
}

#[test]
fn ipv6_acl_10k_equals_rte_acl() {
    check(&V6, Profile::Acl, 10_000, 3);
}

#[test]
fn ipv6_fw_5k_equals_rte_acl() {
    check(&V6, Profile::Fw, 5000, 4);
}
