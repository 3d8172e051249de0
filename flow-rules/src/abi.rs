//! Rust mirrors of the ACL section of `gpu-kernels/pktwarp_abi.h`.

/// Returned by the matchers when no rule matches (`PW_ACL_NO_MATCH`).
pub const ACL_NO_MATCH: u32 = u32::MAX;
/// `vlan_id` of an untagged frame (`PW_VLAN_NONE`).
pub const VLAN_NONE: u16 = 0xFFFF;

/// The classification key (`pw_acl_key`). IPv4 addresses in word 0, host order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AclKey {
    pub src_ip: [u32; 4],
    pub dst_ip: [u32; 4],
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    pub ip_version: u8,
    pub dscp: u8,
    pub tcp_flags: u8,
    pub vlan_id: u16,
    pub port_id: u16,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn key_layout_matches_abi_header() {
        assert_eq!(size_of::<AclKey>(), 44);
        assert_eq!(offset_of!(AclKey, dst_ip), 16);
        assert_eq!(offset_of!(AclKey, src_port), 32);
        assert_eq!(offset_of!(AclKey, proto), 36);
        assert_eq!(offset_of!(AclKey, vlan_id), 40);
        assert_eq!(offset_of!(AclKey, port_id), 42);
    }
}
