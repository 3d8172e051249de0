//! The realistic frame mix shared by the parse benchmark (`benches/parse.rs`) and the GPU check
//! (`tests/parse_gpu_check.rs`): 1024 frames, IMIX-like sizes 64 / 594 / 1518 in a 7:4:1 ratio;
//! 40% IPv4 TCP, 20% IPv4 UDP, 12% IPv6 TCP, 5% IPv6 UDP, 10% 802.1Q IPv4 TCP, 3% QinQ IPv6 UDP,
//! 5% VXLAN (IPv4 UDP 4789 carrying Ethernet / IPv4 / TCP), 3% ICMP, 2% ARP. Deterministic.

use etherparse::PacketBuilder;

pub const FRAMES: usize = 1024;

/// A small deterministic generator (xorshift) so the mix is the same in every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn v4(r: &mut Rng) -> [u8; 4] {
    (r.next() as u32).to_be_bytes()
}

fn v6(r: &mut Rng) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..8].copy_from_slice(&r.next().to_be_bytes());
    a[8..].copy_from_slice(&r.next().to_be_bytes());
    a[0] = 0x20;
    a
}

/// Payload so the frame is about `size` bytes on the wire (without FCS).
fn payload(size: usize, headers: usize) -> Vec<u8> {
    vec![0x58; size.saturating_sub(headers)]
}

fn frame(r: &mut Rng) -> Vec<u8> {
    let size = match r.below(12) {
        0..=6 => 60,
        7..=10 => 590,
        _ => 1514,
    };
    let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let (sp, dp) = (
        r.below(65536) as u16,
        [80u16, 443, 53, 8080][r.below(4) as usize],
    );
    let mut out = Vec::with_capacity(size + 64);
    let kind = r.below(100);
    let res = match kind {
        0..=39 => {
            let b = eth
                .ipv4(v4(r), v4(r), 64)
                .tcp(sp, dp, r.next() as u32, 1024)
                .ack(1);
            b.write(&mut out, &payload(size, 54))
        }
        40..=59 => eth
            .ipv4(v4(r), v4(r), 64)
            .udp(sp, dp)
            .write(&mut out, &payload(size, 42)),
        60..=71 => {
            let b = eth
                .ipv6(v6(r), v6(r), 64)
                .tcp(sp, dp, r.next() as u32, 1024)
                .syn();
            b.write(&mut out, &payload(size, 74))
        }
        72..=76 => eth
            .ipv6(v6(r), v6(r), 64)
            .udp(sp, dp)
            .write(&mut out, &payload(size, 62)),
        77..=86 => {
            let vid = etherparse::VlanId::try_new(r.below(4095) as u16)
                .unwrap_or(etherparse::VlanId::ZERO);
            let b = eth
                .single_vlan(vid)
                .ipv4(v4(r), v4(r), 64)
                .tcp(sp, dp, 1, 1024)
                .psh()
                .ack(9);
            b.write(&mut out, &payload(size, 58))
        }
        87..=89 => {
            let a = etherparse::VlanId::try_new(100).unwrap_or(etherparse::VlanId::ZERO);
            let b = etherparse::VlanId::try_new(r.below(4095) as u16)
                .unwrap_or(etherparse::VlanId::ZERO);
            eth.double_vlan(a, b)
                .ipv6(v6(r), v6(r), 64)
                .udp(sp, dp)
                .write(&mut out, &payload(size, 70))
        }
        90..=94 => {
            let mut inner = Vec::new();
            PacketBuilder::ethernet2([2, 0xfc, 0, 0, 0, 1], [2, 0xfc, 0, 0, 0, 2])
                .ipv4(v4(r), v4(r), 64)
                .tcp(sp, dp, 7, 1024)
                .ack(3)
                .write(&mut inner, &payload(size, 104))
                .expect("inner frame");
            let mut vx = vec![0x08, 0, 0, 0];
            vx.extend_from_slice(&((r.below(1 << 24) as u32) << 8).to_be_bytes());
            vx.extend(inner);
            eth.ipv4(v4(r), v4(r), 64)
                .udp(49152, 4789)
                .write(&mut out, &vx)
        }
        95..=97 => eth
            .ipv4(v4(r), v4(r), 64)
            .icmpv4_echo_request(1, 2)
            .write(&mut out, &payload(size, 42)),
        _ => {
            out.extend_from_slice(&[0xff; 6]);
            out.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
            out.extend_from_slice(&[2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
            out.resize(60, 0);
            Ok(())
        }
    };
    res.expect("build frame");
    out
}

pub fn mix() -> Vec<Vec<u8>> {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    (0..FRAMES).map(|_| frame(&mut r)).collect()
}
