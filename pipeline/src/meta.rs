//! The per-packet metadata record filled by the `parse` stage. Mirrors `pw_packet_meta` in
//! `gpu-kernels/pktwarp_abi.h` byte for byte; the tests at the bottom pin the layout.

/// Size of [`PacketMeta`] in bytes (`PW_META_SIZE`).
pub const META_SIZE: usize = 144;

/// Flat, pointer-free packet metadata (see the ABI header for each field's meaning).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketMeta {
    pub frame_len: u32,
    pub status: u16,
    pub flags: u16,
    pub ether_type: u16,
    pub vlan_count: u8,
    pub mpls_count: u8,
    pub vlan_tci: [u16; 2],
    pub mpls_lse: u32,
    pub l3_offset: u16,
    pub l4_offset: u16,
    pub payload_offset: u16,
    pub error_offset: u16,
    pub ip_version: u8,
    pub ip_proto: u8,
    pub ip_tos: u8,
    pub ip_ttl: u8,
    pub src_ip: [u32; 4],
    pub dst_ip: [u32; 4],
    pub src_port: u16,
    pub dst_port: u16,
    pub tcp_flags: u16,
    pub icmp_type: u8,
    pub icmp_code: u8,
    pub frag_offset: u16,
    pub arp_oper: u16,
    pub frag_id: u32,
    pub tunnel_type: u8,
    pub inner_ip_version: u8,
    pub inner_ip_proto: u8,
    pub ecpri_msg_type: u8,
    pub tunnel_id: u32,
    pub inner_l3_offset: u16,
    pub inner_l4_offset: u16,
    pub inner_src_port: u16,
    pub inner_dst_port: u16,
    pub inner_src_ip: [u32; 4],
    pub inner_dst_ip: [u32; 4],
    pub ecpri_payload_size: u16,
    pub ecpri_pc_id: u16,
    pub ecpri_seq_id: u16,
    pub inner_tcp_flags: u16,
    pub ecpri_revision: u8,
    pub reserved0: u8,
    pub reserved1: u16,
    pub reserved2: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layout_matches_abi_header() {
        assert_eq!(size_of::<PacketMeta>(), META_SIZE);
        assert_eq!(offset_of!(PacketMeta, status), 4);
        assert_eq!(offset_of!(PacketMeta, vlan_tci), 12);
        assert_eq!(offset_of!(PacketMeta, mpls_lse), 16);
        assert_eq!(offset_of!(PacketMeta, l3_offset), 20);
        assert_eq!(offset_of!(PacketMeta, ip_version), 28);
        assert_eq!(offset_of!(PacketMeta, src_ip), 32);
        assert_eq!(offset_of!(PacketMeta, dst_ip), 48);
        assert_eq!(offset_of!(PacketMeta, src_port), 64);
        assert_eq!(offset_of!(PacketMeta, tcp_flags), 68);
        assert_eq!(offset_of!(PacketMeta, frag_offset), 72);
        assert_eq!(offset_of!(PacketMeta, frag_id), 76);
        assert_eq!(offset_of!(PacketMeta, tunnel_type), 80);
        assert_eq!(offset_of!(PacketMeta, tunnel_id), 84);
        assert_eq!(offset_of!(PacketMeta, inner_l3_offset), 88);
        assert_eq!(offset_of!(PacketMeta, inner_src_ip), 96);
        assert_eq!(offset_of!(PacketMeta, inner_dst_ip), 112);
        assert_eq!(offset_of!(PacketMeta, ecpri_payload_size), 128);
        assert_eq!(offset_of!(PacketMeta, inner_tcp_flags), 134);
        assert_eq!(offset_of!(PacketMeta, ecpri_revision), 136);
        assert_eq!(offset_of!(PacketMeta, reserved2), 140);
    }
}
