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

/// Magic of a flat ACL table image (`PW_ACL_MAGIC`, "PWAC").
pub const ACL_MAGIC: u32 = 0x4341_5750;
/// Layout version of the image (`PW_ACL_VERSION`).
pub const ACL_VERSION: u32 = 1;
/// Family table index: IPv4 keys, IPv6 keys, everything else (`PW_ACL_FAM_*`).
pub const ACL_FAM_V4: usize = 0;
pub const ACL_FAM_V6: usize = 1;
pub const ACL_FAM_L2: usize = 2;
/// Child reference: empty subtree (`PW_ACL_REF_EMPTY`).
pub const ACL_REF_EMPTY: u32 = u32::MAX;
/// Child reference bit: a leaf, low 31 bits = first record index (`PW_ACL_REF_LEAF`).
pub const ACL_REF_LEAF: u32 = 0x8000_0000;
/// Record control flags (`ctl` word bits 16..): last record of its leaf; rule has extra fields.
pub const ACL_REC_LAST: u32 = 1 << 16;
pub const ACL_REC_EXTRA: u32 = 1 << 17;
/// Words per rule in the extras and actions arrays.
pub const ACL_EXTRA_WORDS: usize = 3;
pub const ACL_ACTION_WORDS: usize = 2;

/// One address family's decision-tree forest (`pw_acl_family`). Offsets are in 32-bit words
/// from the start of the image.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AclFamilyHeader {
    /// Address words per record (1 for the IPv4 and L2 tables, 4 for IPv6).
    pub addr_words: u32,
    /// Words per rule record: `4 * addr_words + 4`.
    pub rec_words: u32,
    pub num_trees: u32,
    /// `num_trees` pairs `[root_ref, min_rule]`, sorted by `min_rule`.
    pub trees_off: u32,
    pub records_off: u32,
    pub num_records: u32,
    pub num_nodes: u32,
    pub reserved: u32,
}

/// Header at word 0 of the image (`pw_acl_tables`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AclTablesHeader {
    pub magic: u32,
    pub version: u32,
    pub num_rules: u32,
    /// Image size in words, header included.
    pub total_words: u32,
    /// `ACL_EXTRA_WORDS` per rule, or 0 when no rule uses DSCP / TCP flags / VLAN / port.
    pub extras_off: u32,
    /// `ACL_ACTION_WORDS` per rule: `[verdict | has_mark << 8, mark]`.
    pub actions_off: u32,
    /// `ACL_REWRITE_WORDS` per rule (`acl::rewrite`), or 0 when no rule rewrites.
    pub rewrites_off: u32,
    pub reserved: u32,
    pub fam: [AclFamilyHeader; 3],
}

/// Size of [`AclTablesHeader`] in words.
pub const ACL_HEADER_WORDS: usize = std::mem::size_of::<AclTablesHeader>() / 4;

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

    #[test]
    fn table_header_layout_matches_abi_header() {
        assert_eq!(size_of::<AclFamilyHeader>(), 32);
        assert_eq!(offset_of!(AclFamilyHeader, trees_off), 12);
        assert_eq!(offset_of!(AclFamilyHeader, records_off), 16);
        assert_eq!(offset_of!(AclFamilyHeader, num_nodes), 24);
        assert_eq!(size_of::<AclTablesHeader>(), 128);
        assert_eq!(offset_of!(AclTablesHeader, total_words), 12);
        assert_eq!(offset_of!(AclTablesHeader, extras_off), 16);
        assert_eq!(offset_of!(AclTablesHeader, actions_off), 20);
        assert_eq!(offset_of!(AclTablesHeader, rewrites_off), 24);
        assert_eq!(offset_of!(AclTablesHeader, fam), 32);
        assert_eq!(ACL_HEADER_WORDS, 32);
    }
}
