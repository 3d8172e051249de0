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
    /// The connection state the `conntrack` stage gave the frame (`pktwarp_flow::ct`: 0 =
    /// untracked or no `conntrack` stage, 1 new, 2 established, 3 related, 4 invalid, 5
    /// closing, 6 closed), for the ACL's `ct:` match (`pw_packet_meta.ct_state`). `parse`
    /// leaves it 0.
    pub ct_state: u8,
    /// The frame's direction in its connection, set by the `conntrack` stage with `ct_state`
    /// (`pw_packet_meta.ct_dir`): 0 untracked (or no `conntrack` stage), 1 from the flow's
    /// originator (the side whose frame created the entry: Suricata's `to_server` for TCP), 2
    /// from the other side (a reply). `parse` leaves it 0.
    pub ct_dir: u8,
    pub reserved1: u8,
    /// The steering rule's mark ([`crate::burst::FrameDesc::mark`], 0 = none), set by `parse`
    /// for the stages after it (`pw_packet_meta.steer_mark`).
    pub steer_mark: u32,
}

/// Limits of the `parse` stage (`PW_MAX_*` in the ABI header).
pub const MAX_VLAN: usize = 2;
pub const MAX_VLAN_WALK: usize = 8;
pub const MAX_MPLS: usize = 8;
pub const MAX_IPV6_EXT: usize = 8;
pub const MAX_GTPU_EXT: usize = 4;
pub const UDP_PORT_VXLAN: u16 = 4789;
pub const UDP_PORT_GTPU: u16 = 2152;

/// `PacketMeta::flags` bits (`PW_MF_*`).
pub mod mf {
    pub const VLAN: u16 = 0x0001;
    pub const VLAN_EXTRA: u16 = 0x0002;
    pub const MPLS: u16 = 0x0004;
    pub const ARP: u16 = 0x0008;
    pub const IP_OPTIONS: u16 = 0x0010;
    pub const FRAGMENT: u16 = 0x0020;
    pub const MORE_FRAGMENTS: u16 = 0x0040;
    pub const LATER_FRAGMENT: u16 = 0x0080;
    pub const L4: u16 = 0x0100;
    pub const TUNNEL: u16 = 0x0200;
    pub const INNER_L4: u16 = 0x0400;
    pub const INNER_FRAGMENT: u16 = 0x0800;
    pub const ECPRI: u16 = 0x1000;
    pub const PADDED: u16 = 0x2000;
    pub const LLC: u16 = 0x4000;

    /// Names of the set bits, lowest first (for `pktwarp parse`).
    pub fn names(flags: u16) -> impl Iterator<Item = &'static str> {
        const NAMES: [&str; 15] = [
            "vlan",
            "vlan_extra",
            "mpls",
            "arp",
            "ip_options",
            "fragment",
            "more_fragments",
            "later_fragment",
            "l4",
            "tunnel",
            "inner_l4",
            "inner_fragment",
            "ecpri",
            "padded",
            "llc",
        ];
        NAMES
            .iter()
            .enumerate()
            .filter(move |(i, _)| flags & (1 << i) != 0)
            .map(|(_, n)| *n)
    }
}

/// `PacketMeta::status` (`enum pw_parse_status`). Errors in a tunnelled packet carry
/// [`ParseStatus::INNER`] on top of the code.
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParseStatus {
    Ok = 0,
    EthTruncated = 1,
    VlanTruncated = 2,
    VlanTooMany = 3,
    ArpTruncated = 4,
    MplsTruncated = 5,
    MplsTooDeep = 6,
    Ipv4Truncated = 7,
    Ipv4BadVersion = 8,
    Ipv4BadIhl = 9,
    Ipv4BadTotalLen = 10,
    Ipv4LenExceedsFrame = 11,
    Ipv6Truncated = 12,
    Ipv6BadVersion = 13,
    Ipv6LenExceedsFrame = 14,
    Ipv6ExtTruncated = 15,
    Ipv6ExtTooMany = 16,
    TcpTruncated = 17,
    TcpBadDataOffset = 18,
    UdpTruncated = 19,
    UdpBadLength = 20,
    IcmpTruncated = 21,
    Icmpv6Truncated = 22,
    SctpTruncated = 23,
    VxlanTruncated = 24,
    GtpuTruncated = 25,
    GtpuBadHeader = 26,
    GtpuBadLength = 27,
    GtpuBadExt = 28,
    EcpriTruncated = 29,
    EcpriLenExceedsFrame = 30,
}

impl ParseStatus {
    /// Bit OR-ed onto a code when the error is in the inner (tunnelled) packet.
    pub const INNER: u16 = 0x40;

    /// All codes, in numeric order.
    pub const ALL: [ParseStatus; 31] = [
        Self::Ok,
        Self::EthTruncated,
        Self::VlanTruncated,
        Self::VlanTooMany,
        Self::ArpTruncated,
        Self::MplsTruncated,
        Self::MplsTooDeep,
        Self::Ipv4Truncated,
        Self::Ipv4BadVersion,
        Self::Ipv4BadIhl,
        Self::Ipv4BadTotalLen,
        Self::Ipv4LenExceedsFrame,
        Self::Ipv6Truncated,
        Self::Ipv6BadVersion,
        Self::Ipv6LenExceedsFrame,
        Self::Ipv6ExtTruncated,
        Self::Ipv6ExtTooMany,
        Self::TcpTruncated,
        Self::TcpBadDataOffset,
        Self::UdpTruncated,
        Self::UdpBadLength,
        Self::IcmpTruncated,
        Self::Icmpv6Truncated,
        Self::SctpTruncated,
        Self::VxlanTruncated,
        Self::GtpuTruncated,
        Self::GtpuBadHeader,
        Self::GtpuBadLength,
        Self::GtpuBadExt,
        Self::EcpriTruncated,
        Self::EcpriLenExceedsFrame,
    ];

    pub fn from_code(code: u16) -> Option<ParseStatus> {
        Self::ALL.get(code as usize).copied()
    }

    /// Stable snake_case name (`pktwarp parse`, metrics labels).
    pub fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::EthTruncated => "eth_truncated",
            Self::VlanTruncated => "vlan_truncated",
            Self::VlanTooMany => "vlan_too_many",
            Self::ArpTruncated => "arp_truncated",
            Self::MplsTruncated => "mpls_truncated",
            Self::MplsTooDeep => "mpls_too_deep",
            Self::Ipv4Truncated => "ipv4_truncated",
            Self::Ipv4BadVersion => "ipv4_bad_version",
            Self::Ipv4BadIhl => "ipv4_bad_ihl",
            Self::Ipv4BadTotalLen => "ipv4_bad_total_len",
            Self::Ipv4LenExceedsFrame => "ipv4_len_exceeds_frame",
            Self::Ipv6Truncated => "ipv6_truncated",
            Self::Ipv6BadVersion => "ipv6_bad_version",
            Self::Ipv6LenExceedsFrame => "ipv6_len_exceeds_frame",
            Self::Ipv6ExtTruncated => "ipv6_ext_truncated",
            Self::Ipv6ExtTooMany => "ipv6_ext_too_many",
            Self::TcpTruncated => "tcp_truncated",
            Self::TcpBadDataOffset => "tcp_bad_data_offset",
            Self::UdpTruncated => "udp_truncated",
            Self::UdpBadLength => "udp_bad_length",
            Self::IcmpTruncated => "icmp_truncated",
            Self::Icmpv6Truncated => "icmpv6_truncated",
            Self::SctpTruncated => "sctp_truncated",
            Self::VxlanTruncated => "vxlan_truncated",
            Self::GtpuTruncated => "gtpu_truncated",
            Self::GtpuBadHeader => "gtpu_bad_header",
            Self::GtpuBadLength => "gtpu_bad_length",
            Self::GtpuBadExt => "gtpu_bad_ext",
            Self::EcpriTruncated => "ecpri_truncated",
            Self::EcpriLenExceedsFrame => "ecpri_len_exceeds_frame",
        }
    }

    /// Name of a raw `status` value: `inner_` prefixed when [`Self::INNER`] is set, `unknown_<n>`
    /// for a value no parser produces.
    pub fn describe(status: u16) -> String {
        let inner = status & Self::INNER != 0;
        match Self::from_code(status & !Self::INNER) {
            Some(s) if inner => format!("inner_{}", s.name()),
            Some(s) => s.name().to_string(),
            None => format!("unknown_{status}"),
        }
    }

    /// The value stored in [`PacketMeta::status`] (`inner` adds [`Self::INNER`]).
    pub const fn code(self, inner: bool) -> u16 {
        self as u16 | if inner { Self::INNER } else { 0 }
    }
}

/// `PacketMeta::tunnel_type` (`enum pw_tunnel_type`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunnelType {
    None = 0,
    Vxlan = 1,
    Gtpu = 2,
}

impl TunnelType {
    pub fn from_code(code: u8) -> Option<TunnelType> {
        match code {
            0 => Some(Self::None),
            1 => Some(Self::Vxlan),
            2 => Some(Self::Gtpu),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Vxlan => "vxlan",
            Self::Gtpu => "gtpu",
        }
    }
}

impl PacketMeta {
    /// The parse status as an enum (`None` for a value no parser writes).
    pub fn parse_status(&self) -> Option<ParseStatus> {
        ParseStatus::from_code(self.status & !ParseStatus::INNER)
    }

    pub fn is_ok(&self) -> bool {
        self.status == ParseStatus::Ok as u16
    }

    /// The bytes of the record, as they cross to the GPU (for byte-for-byte comparisons).
    pub fn as_bytes(&self) -> &[u8; META_SIZE] {
        // SAFETY: PacketMeta is repr(C), META_SIZE bytes (pinned by the layout test), made only of
        // integers with no padding (every offset is pinned to be contiguous), so every byte is
        // initialised and any alignment is fine for u8.
        unsafe { &*(self as *const PacketMeta as *const [u8; META_SIZE]) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The parse constants in the ABI header equal the Rust ones (parsed from the header text,
    /// so a change on one side only fails here).
    #[test]
    fn parse_constants_match_abi_header() {
        let header =
            pktwarp_kernels::library_file("pktwarp_abi.h").expect("the ABI header is embedded");
        let value = |name: &str| -> u32 {
            let line = header
                .lines()
                .find(|l| {
                    let t = l.trim_start();
                    t.strip_prefix("#define ")
                        .or(Some(t))
                        .and_then(|r| r.strip_prefix(name))
                        .is_some_and(|r| r.starts_with(' ') || r.starts_with('='))
                })
                .unwrap_or_else(|| panic!("{name} not in pktwarp_abi.h"));
            let v = line
                .split(['=', ' ', ','])
                .map(|t| t.trim_end_matches('u'))
                .filter(|t| !t.is_empty())
                .nth(if line.trim_start().starts_with("#define") {
                    2
                } else {
                    1
                })
                .unwrap_or_else(|| panic!("no value on: {line}"));
            match v.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16).unwrap(),
                None => v.parse().unwrap(),
            }
        };
        let mut names = String::new();
        for s in ParseStatus::ALL {
            let cname = format!("PW_PARSE_{}", s.name().to_uppercase());
            assert_eq!(value(&cname), s as u32, "{cname}");
            names.push_str(&cname);
        }
        assert_eq!(value("PW_PARSE_INNER"), ParseStatus::INNER as u32);
        for (name, v) in [
            ("PW_MF_VLAN", mf::VLAN),
            ("PW_MF_VLAN_EXTRA", mf::VLAN_EXTRA),
            ("PW_MF_MPLS", mf::MPLS),
            ("PW_MF_ARP", mf::ARP),
            ("PW_MF_IP_OPTIONS", mf::IP_OPTIONS),
            ("PW_MF_FRAGMENT", mf::FRAGMENT),
            ("PW_MF_MORE_FRAGMENTS", mf::MORE_FRAGMENTS),
            ("PW_MF_LATER_FRAGMENT", mf::LATER_FRAGMENT),
            ("PW_MF_L4", mf::L4),
            ("PW_MF_TUNNEL", mf::TUNNEL),
            ("PW_MF_INNER_L4", mf::INNER_L4),
            ("PW_MF_INNER_FRAGMENT", mf::INNER_FRAGMENT),
            ("PW_MF_ECPRI", mf::ECPRI),
            ("PW_MF_PADDED", mf::PADDED),
            ("PW_MF_LLC", mf::LLC),
        ] {
            assert_eq!(value(name), v as u32, "{name}");
        }
        for (name, v) in [
            ("PW_MAX_VLAN", MAX_VLAN as u32),
            ("PW_MAX_VLAN_WALK", MAX_VLAN_WALK as u32),
            ("PW_MAX_MPLS", MAX_MPLS as u32),
            ("PW_MAX_IPV6_EXT", MAX_IPV6_EXT as u32),
            ("PW_MAX_GTPU_EXT", MAX_GTPU_EXT as u32),
            ("PW_UDP_PORT_VXLAN", UDP_PORT_VXLAN as u32),
            ("PW_UDP_PORT_GTPU", UDP_PORT_GTPU as u32),
            ("PW_TUNNEL_NONE", TunnelType::None as u32),
            ("PW_TUNNEL_VXLAN", TunnelType::Vxlan as u32),
            ("PW_TUNNEL_GTPU", TunnelType::Gtpu as u32),
        ] {
            assert_eq!(value(name), v, "{name}");
        }
        assert_eq!(
            ParseStatus::describe(ParseStatus::Ipv4Truncated.code(true)),
            "inner_ipv4_truncated"
        );
        assert_eq!(ParseStatus::describe(63), "unknown_63");
    }

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
        assert_eq!(offset_of!(PacketMeta, ct_state), 137);
        assert_eq!(offset_of!(PacketMeta, ct_dir), 138);
        assert_eq!(offset_of!(PacketMeta, reserved1), 139);
        assert_eq!(offset_of!(PacketMeta, steer_mark), 140);
    }
}
