//! What the software steering looks at per frame ([`SteerKey`]) and what it answers
//! ([`SteerDecision`]), plus the RSS helpers a port needs to turn an RSS fate into a queue.

/// `SteerKey::tunnel` when the frame carries no parsed tunnel (`PW_TUNNEL_NONE`).
pub const TUNNEL_NONE: u8 = 0;
/// `SteerKey::tunnel` for VXLAN, `tunnel_id` = VNI (`PW_TUNNEL_VXLAN`).
pub const TUNNEL_VXLAN: u8 = 1;
/// `SteerKey::tunnel` for GTP-U, `tunnel_id` = TEID (`PW_TUNNEL_GTPU`).
pub const TUNNEL_GTPU: u8 = 2;

/// The header fields software steering matches, one per frame.
///
/// flow-rules does not depend on `pipeline`, so the port builds this from
/// `pipeline::meta::PacketMeta` (field names follow `pw_packet_meta`) and reads the MAC
/// addresses from the frame itself (bytes 0..6 and 6..12), which the metadata does not keep:
///
/// | field | from `PacketMeta` |
/// | --- | --- |
/// | `dst_mac`, `src_mac` | frame bytes 0..6, 6..12 |
/// | `ether_type` | `ether_type` (after VLAN tags) |
/// | `vlan_count`, `vlan_tci` | `vlan_count`, `vlan_tci[0]` (outer tag) |
/// | `ip_version`, `ip_proto` | `ip_version`, `ip_proto` |
/// | `dscp` | `ip_tos >> 2` |
/// | `src_ip`, `dst_ip` | `src_ip`, `dst_ip` (IPv4 in word 0, IPv6 most significant word first) |
/// | `l4` | `flags & PW_MF_L4` != 0 (false for later fragments: they have no ports) |
/// | `src_port`, `dst_port` | `src_port`, `dst_port` |
/// | `tunnel`, `tunnel_id` | `tunnel_type`, `tunnel_id` when `flags & PW_MF_TUNNEL`, else 0 |
/// | `ecpri` | `flags & PW_MF_ECPRI` != 0 |
/// | `ecpri_msg_type`, `ecpri_pc_id` | `ecpri_msg_type`, `ecpri_pc_id` |
///
/// All fields are matched against the outer headers; inner (tunnelled) headers are not matched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SteerKey {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    /// EtherType after any VLAN tags.
    pub ether_type: u16,
    /// Number of VLAN tags (0 = untagged).
    pub vlan_count: u8,
    /// Outer tag TCI: PCP (3 bits) | DEI (1) | VID (12). Ignored when `vlan_count == 0`.
    pub vlan_tci: u16,
    /// 0 (not IP), 4 or 6.
    pub ip_version: u8,
    pub ip_proto: u8,
    /// DSCP (IPv4 TOS / IPv6 traffic class >> 2).
    pub dscp: u8,
    pub src_ip: [u32; 4],
    pub dst_ip: [u32; 4],
    /// An outer L4 header was parsed, so the ports are meaningful.
    pub l4: bool,
    pub src_port: u16,
    pub dst_port: u16,
    /// [`TUNNEL_NONE`], [`TUNNEL_VXLAN`] or [`TUNNEL_GTPU`].
    pub tunnel: u8,
    pub tunnel_id: u32,
    /// An eCPRI common header was parsed (EtherType 0xAEFE).
    pub ecpri: bool,
    pub ecpri_msg_type: u8,
    /// PC_ID / RTC_ID / eAxC id: the 16-bit field after the eCPRI common header.
    pub ecpri_pc_id: u16,
}

/// Where a frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate<'a> {
    /// This receive queue.
    Queue(u16),
    /// Spread over the rule's queues by the Toeplitz hash of the selected fields: compute the
    /// hash over [`RssTarget::hash_input`] and pick with [`RssTarget::queue_for_hash`].
    Rss(&'a RssTarget),
    /// Dropped by steering (the port counts it under its own reason).
    Drop,
    /// No fate rule matched (or the matching rule only marks): the port's default RSS.
    Default,
}

/// The answer of the software steering for one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SteerDecision<'a> {
    pub fate: Fate<'a>,
    /// Mark id of the matching rule, if it has a mark action.
    pub mark: Option<u32>,
    /// 0-based index (file order) of the matching rule; `None` when none matched.
    pub rule: Option<u32>,
}

impl SteerDecision<'_> {
    /// The decision for a frame no rule matches.
    pub const NO_MATCH: SteerDecision<'static> = SteerDecision {
        fate: Fate::Default,
        mark: None,
        rule: None,
    };
}

/// Which header fields feed the RSS hash: the rte_flow RSS action's `types`.
///
/// `IPV4` / `IPV6` choose which IP versions are hashed at all (source and destination
/// address); `TCP` / `UDP` add the ports for those protocols. The `*_ONLY` bits keep one side.
/// Frames of a type that is not selected hash to 0, as on a NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RssHash(pub u16);

impl RssHash {
    pub const IPV4: RssHash = RssHash(1 << 0);
    pub const IPV6: RssHash = RssHash(1 << 1);
    pub const TCP: RssHash = RssHash(1 << 2);
    pub const UDP: RssHash = RssHash(1 << 3);
    pub const L3_SRC_ONLY: RssHash = RssHash(1 << 4);
    pub const L3_DST_ONLY: RssHash = RssHash(1 << 5);
    pub const L4_SRC_ONLY: RssHash = RssHash(1 << 6);
    pub const L4_DST_ONLY: RssHash = RssHash(1 << 7);
    /// The 5-tuple over IPv4 and IPv6, TCP and UDP: what `hash` defaults to.
    pub const DEFAULT: RssHash = RssHash(0b1111);

    /// YAML names, in bit order.
    pub const NAMES: [(&'static str, RssHash); 8] = [
        ("ipv4", RssHash::IPV4),
        ("ipv6", RssHash::IPV6),
        ("tcp", RssHash::TCP),
        ("udp", RssHash::UDP),
        ("l3-src-only", RssHash::L3_SRC_ONLY),
        ("l3-dst-only", RssHash::L3_DST_ONLY),
        ("l4-src-only", RssHash::L4_SRC_ONLY),
        ("l4-dst-only", RssHash::L4_DST_ONLY),
    ];

    pub fn contains(self, other: RssHash) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn union(self, other: RssHash) -> RssHash {
        RssHash(self.0 | other.0)
    }

    pub fn from_name(name: &str) -> Option<RssHash> {
        RssHash::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, h)| *h)
    }

    /// Names of the bits set, in bit order.
    pub fn names(self) -> Vec<&'static str> {
        RssHash::NAMES
            .iter()
            .filter(|(_, h)| self.contains(*h))
            .map(|(n, _)| *n)
            .collect()
    }

    /// Writes the Toeplitz hash input for `key` into `out` (source address, destination
    /// address, source port, destination port, network byte order: the Microsoft RSS layout)
    /// and returns its length; 0 means the frame's type is not selected and its hash is 0.
    pub fn hash_input(self, key: &SteerKey, out: &mut [u8; 36]) -> usize {
        let words = match key.ip_version {
            4 if self.contains(RssHash::IPV4) => 1,
            6 if self.contains(RssHash::IPV6) => 4,
            _ => return 0,
        };
        let mut n = 0;
        let mut put = |bytes: &[u8], n: &mut usize| {
            out[*n..*n + bytes.len()].copy_from_slice(bytes);
            *n += bytes.len();
        };
        if !self.contains(RssHash::L3_DST_ONLY) {
            for w in &key.src_ip[..words] {
                put(&w.to_be_bytes(), &mut n);
            }
        }
        if !self.contains(RssHash::L3_SRC_ONLY) {
            for w in &key.dst_ip[..words] {
                put(&w.to_be_bytes(), &mut n);
            }
        }
        let ports = key.l4
            && ((key.ip_proto == 6 && self.contains(RssHash::TCP))
                || (key.ip_proto == 17 && self.contains(RssHash::UDP)));
        if ports {
            if !self.contains(RssHash::L4_DST_ONLY) {
                put(&key.src_port.to_be_bytes(), &mut n);
            }
            if !self.contains(RssHash::L4_SRC_ONLY) {
                put(&key.dst_port.to_be_bytes(), &mut n);
            }
        }
        n
    }
}

/// Entries of the redirection table an RSS fate uses, as a NIC's RETA: the hash's low bits index
/// it, and the rule's queues fill it round robin (what a PMD does with an rte_flow RSS queue list).
pub const RETA_SIZE: usize = 128;

/// A compiled RSS fate: the rule's queues, its hash selection and its redirection table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RssTarget {
    queues: Vec<u16>,
    hash: RssHash,
    reta: [u16; RETA_SIZE],
}

impl RssTarget {
    /// `queues` must not be empty (validation refuses an empty RSS queue list); an empty list
    /// is treated as queue 0 so that this constructor cannot panic.
    pub fn new(queues: &[u16], hash: RssHash) -> RssTarget {
        let fill: &[u16] = if queues.is_empty() { &[0] } else { queues };
        let mut reta = [0u16; RETA_SIZE];
        for (i, slot) in reta.iter_mut().enumerate() {
            *slot = fill[i % fill.len()];
        }
        RssTarget {
            queues: fill.to_vec(),
            hash,
            reta,
        }
    }

    pub fn queues(&self) -> &[u16] {
        &self.queues
    }

    pub fn hash(&self) -> RssHash {
        self.hash
    }

    /// The queue for a Toeplitz hash value: `reta[hash % RETA_SIZE]`.
    #[inline]
    pub fn queue_for_hash(&self, hash: u32) -> u16 {
        self.reta[hash as usize & (RETA_SIZE - 1)]
    }

    /// See [`RssHash::hash_input`].
    #[inline]
    pub fn hash_input(&self, key: &SteerKey, out: &mut [u8; 36]) -> usize {
        self.hash.hash_input(key, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reta_round_robins_the_queue_list() {
        let t = RssTarget::new(&[4, 5, 6], RssHash::DEFAULT);
        assert_eq!(t.queue_for_hash(0), 4);
        assert_eq!(t.queue_for_hash(1), 5);
        assert_eq!(t.queue_for_hash(2), 6);
        assert_eq!(t.queue_for_hash(3), 4);
        // Only the low 7 bits index the table.
        assert_eq!(t.queue_for_hash(128 + 1), 5);
        assert_eq!(t.queue_for_hash(127), [4, 5, 6][127 % 3]);
    }

    #[test]
    fn hash_input_follows_the_selection() {
        let key = SteerKey {
            ip_version: 4,
            ip_proto: 6,
            l4: true,
            src_ip: [0x4201_0203, 0, 0, 0],
            dst_ip: [0x0a00_0001, 0, 0, 0],
            src_port: 0x1234,
            dst_port: 80,
            ..SteerKey::default()
        };
        let mut buf = [0u8; 36];
        let n = RssHash::DEFAULT.hash_input(&key, &mut buf);
        assert_eq!(
            &buf[..n],
            &[0x42, 1, 2, 3, 10, 0, 0, 1, 0x12, 0x34, 0, 80][..]
        );
        let n = RssHash::IPV4.hash_input(&key, &mut buf);
        assert_eq!(&buf[..n], &[0x42, 1, 2, 3, 10, 0, 0, 1][..]);
        let sel = RssHash::IPV4
            .union(RssHash::TCP)
            .union(RssHash::L3_DST_ONLY)
            .union(RssHash::L4_DST_ONLY);
        let n = sel.hash_input(&key, &mut buf);
        assert_eq!(&buf[..n], &[10, 0, 0, 1, 0, 80][..]);
        assert_eq!(RssHash::IPV6.hash_input(&key, &mut buf), 0);
        // UDP not selected: a UDP frame hashes on addresses only.
        let udp = SteerKey {
            ip_proto: 17,
            ..key
        };
        let n = RssHash::IPV4.union(RssHash::TCP).hash_input(&udp, &mut buf);
        assert_eq!(n, 8);
        // A later fragment (no L4 header) never hashes ports.
        let frag = SteerKey { l4: false, ..key };
        assert_eq!(RssHash::DEFAULT.hash_input(&frag, &mut buf), 8);
        let v6 = SteerKey {
            ip_version: 6,
            src_ip: [0x2001_0db8, 0, 0, 1],
            dst_ip: [0x2001_0db8, 0, 0, 2],
            ..key
        };
        assert_eq!(RssHash::DEFAULT.hash_input(&v6, &mut buf), 36);
        assert_eq!(&buf[..4], &[0x20, 0x01, 0x0d, 0xb8]);
        assert_eq!(buf[15], 1);
        assert_eq!(buf[31], 2);
    }

    #[test]
    fn names_round_trip() {
        for (name, h) in RssHash::NAMES {
            assert_eq!(RssHash::from_name(name), Some(h));
            assert_eq!(h.names(), vec![name]);
        }
        assert_eq!(RssHash::from_name("sctp"), None);
    }
}
