//! Helpers shared by flow-rules' integration tests.
#![allow(dead_code)]

pub mod dpdk_acl;
