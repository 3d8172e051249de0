//! O-RAN U-plane traffic for the `gen` port: a carrier (numerology, PRBs, eAxCs, compression,
//! sections per packet) whose IQ is known (seeded random or a tone), so a receiver's slot grid
//! can be checked against exactly what was encoded. Timestamps follow real symbol timing.

use serde::Deserialize;

use crate::bfp::{self, Method, PRB_SAMPLES};
use crate::config::{CompHdr, CompMethodName};
use pipeline::burst::FrameDesc;
use pipeline::wire::ecpri::{self, SeqId};
use pipeline::wire::ethernet::ether_type;
use pipeline::wire::oran::{RadioRepr, UdCompHdr, UplaneSectionRepr};

/// The IQ the generator encodes.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum IqSource {
    /// Pseudo-random samples from the seed, each PRB at a random magnitude so every BFP
    /// exponent occurs.
    Random,
    /// A complex tone: `amplitude` (0 ..= 32767) at subcarrier `subcarrier` of the carrier.
    Tone { subcarrier: u32, amplitude: f64 },
}

fn default_numerology() -> u8 {
    1
}
fn default_prbs() -> u16 {
    273
}
fn default_eaxcs() -> Vec<u16> {
    vec![0]
}
fn default_width() -> u8 {
    9
}
fn default_sections() -> u16 {
    1
}
fn default_slots() -> u64 {
    1
}

/// Most bytes the frames of the `iq_slots` distinct slots may take (the generator keeps them).
pub const MAX_POOL_BYTES: usize = 256 << 20;

/// Most slots one generator run makes: 2^40 (2.2 years of radio time at numerology 4), so the
/// frame count (slots x 14 symbols x at most 64 eAxCs x at most 1024 packets a symbol) cannot
/// overflow.
pub const MAX_SLOTS: u64 = 1 << 40;
fn default_ta4_offset() -> u64 {
    100_000
}
fn default_iq() -> IqSource {
    IqSource::Random
}
fn default_seed() -> u64 {
    1
}

/// `gen: {oran: {...}}`: O-RAN U-plane traffic instead of IP frames.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OranGenOptions {
    /// Numerology mu, 0 ..= 4. Default 1.
    #[serde(default = "default_numerology")]
    pub numerology: u8,
    /// PRBs of the carrier, 1 ..= 1024. Default 273.
    #[serde(default = "default_prbs")]
    pub carrier_prbs: u16,
    /// eAxC ids, one U-plane stream each. Default `[0]`.
    #[serde(default = "default_eaxcs")]
    pub eaxcs: Vec<u16>,
    /// `ul` (default, RU to DU) or `dl`.
    #[serde(default)]
    pub direction: Direction,
    /// `bfp` (default) or `none`.
    #[serde(default)]
    pub comp_method: CompMethodName,
    /// Sample / mantissa width, 1 ..= 16. Default 9.
    #[serde(default = "default_width")]
    pub iq_width: u8,
    /// `static` (default: no udCompHdr) or `dynamic` (udCompHdr in every section).
    #[serde(default)]
    pub comp_hdr: CompHdr,
    /// PRBs of one packet (one symbol of one eAxC is sent in ceil(carrier_prbs / this)
    /// packets). 0 (default): the whole symbol in one packet (a jumbo frame for 273 PRBs).
    #[serde(default)]
    pub prbs_per_packet: u16,
    /// Sections per packet (the packet's PRBs split as evenly as they go), >= 1. Default 1.
    #[serde(default = "default_sections")]
    pub sections_per_packet: u16,
    /// Slots to generate, 1 ..= 2^40 ([`MAX_SLOTS`]). Default 1.
    #[serde(default = "default_slots")]
    pub slots: u64,
    /// `random` (default) or `{tone: {subcarrier, amplitude}}`.
    #[serde(default = "default_iq")]
    pub iq: IqSource,
    /// Seed of the random IQ. Default 1.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Slots of distinct IQ: slot n carries the samples of slot n mod this, so the frames of
    /// these slots are built once and every frame after is a copy with its sequence id and
    /// radio time (frame / subframe / slot ids) written in (radio rate on one core, where
    /// encoding every slot afresh is not). Default: none, every slot its own samples.
    #[serde(default)]
    pub iq_slots: Option<u64>,
    /// Timestamp of a packet: its symbol's start plus this (ns; inside the default Ta4
    /// window). Default 100000.
    #[serde(default = "default_ta4_offset")]
    pub ta4_offset_ns: u64,
    /// 802.1Q VLAN id of every frame. Default: untagged.
    #[serde(default)]
    pub vlan: Option<u16>,
}

/// Direction of the generated U-plane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    #[default]
    Ul,
    Dl,
}

impl Default for OranGenOptions {
    fn default() -> Self {
        OranGenOptions {
            numerology: default_numerology(),
            carrier_prbs: default_prbs(),
            eaxcs: default_eaxcs(),
            direction: Direction::Ul,
            comp_method: CompMethodName::Bfp,
            iq_width: default_width(),
            comp_hdr: CompHdr::Static,
            prbs_per_packet: 0,
            sections_per_packet: default_sections(),
            slots: default_slots(),
            iq: default_iq(),
            seed: default_seed(),
            iq_slots: None,
            ta4_offset_ns: default_ta4_offset(),
            vlan: None,
        }
    }
}

impl OranGenOptions {
    /// Checks every value; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        let k = |key: &str, why: String| Err(format!("gen.oran.{key}: {why}"));
        if self.numerology > 4 {
            return k("numerology", format!("{} is not in 0..=4", self.numerology));
        }
        if !(1..=1024).contains(&self.carrier_prbs) {
            return k(
                "carrier_prbs",
                format!("{} is not in 1..=1024", self.carrier_prbs),
            );
        }
        if self.eaxcs.is_empty() || self.eaxcs.len() > 64 {
            return k(
                "eaxcs",
                format!("{} ids, 1 ..= 64 expected", self.eaxcs.len()),
            );
        }
        if !(1..=16).contains(&self.iq_width) {
            return k("iq_width", format!("{} is not in 1..=16", self.iq_width));
        }
        if self.sections_per_packet == 0 {
            return k("sections_per_packet", "must be >= 1".into());
        }
        if !(1..=MAX_SLOTS).contains(&self.slots) {
            return k("slots", format!("{} is not in 1..={MAX_SLOTS}", self.slots));
        }
        let per_packet = self.packet_prbs();
        if usize::from(self.sections_per_packet) > usize::from(per_packet) {
            return k(
                "sections_per_packet",
                format!(
                    "{} sections for {per_packet} PRBs a packet",
                    self.sections_per_packet
                ),
            );
        }
        // numPrbu is 8 bits; 0 stands for the whole carrier only.
        let biggest = per_packet.div_ceil(self.sections_per_packet);
        if biggest > 255 && !(self.sections_per_packet == 1 && per_packet == self.carrier_prbs) {
            return k(
                "sections_per_packet",
                format!("a section of {biggest} PRBs does not fit numPrbu (at most 255)"),
            );
        }
        if let Some(v) = self.vlan.filter(|v| *v > 4095) {
            return k("vlan", format!("{v} is not in 0..=4095"));
        }
        if let IqSource::Tone { amplitude, .. } = self.iq {
            if !(0.0..=32767.0).contains(&amplitude) {
                return k(
                    "iq.tone.amplitude",
                    format!("{amplitude} is not in 0..=32767"),
                );
            }
        }
        if let Some(p) = self.iq_slots {
            if p == 0 {
                return k("iq_slots", "must be >= 1".into());
            }
            let pooled = p.min(self.slots);
            let bytes = u128::from(pooled)
                * (14 * self.eaxcs.len() as u128)
                * u128::from(self.packets_per_symbol())
                * self.max_frame_len() as u128;
            if bytes > MAX_POOL_BYTES as u128 {
                return k(
                    "iq_slots",
                    format!(
                        "the frames of {pooled} slots take {} MiB, more than {} MiB",
                        bytes >> 20,
                        MAX_POOL_BYTES >> 20
                    ),
                );
            }
        }
        let len = self.max_frame_len();
        if len > pipeline::internal::port::gen::MAX_FRAME_SIZE as usize {
            return k(
                "prbs_per_packet",
                format!(
                    "frames of {len} bytes exceed {} (send fewer PRBs a packet)",
                    pipeline::internal::port::gen::MAX_FRAME_SIZE
                ),
            );
        }
        Ok(())
    }

    pub fn method(&self) -> Method {
        match self.comp_method {
            CompMethodName::Bfp => Method::Bfp,
            CompMethodName::None => Method::None,
        }
    }

    fn packet_prbs(&self) -> u16 {
        if self.prbs_per_packet == 0 {
            self.carrier_prbs
        } else {
            self.prbs_per_packet.min(self.carrier_prbs)
        }
    }

    fn max_frame_len(&self) -> usize {
        let sec_hdr = UplaneSectionRepr {
            ud_comp_hdr: (self.comp_hdr == CompHdr::Dynamic).then_some(UdCompHdr::default()),
            ..Default::default()
        }
        .header_len();
        14 + if self.vlan.is_some() { 4 } else { 0 }
            + ecpri::ID_MESSAGE_HEADER_LEN
            + 4
            + usize::from(self.sections_per_packet) * sec_hdr
            + usize::from(self.packet_prbs()) * bfp::prb_bytes(self.method(), self.iq_width)
    }

    /// Packets of one symbol of one eAxC.
    pub fn packets_per_symbol(&self) -> u16 {
        self.carrier_prbs.div_ceil(self.packet_prbs())
    }

    /// Frames in all: slots x 14 symbols x eAxCs x packets per symbol.
    pub fn frame_count(&self) -> u64 {
        // Saturating: options not yet validated may hold any slot count.
        self.slots
            .saturating_mul(14 * self.eaxcs.len() as u64)
            .saturating_mul(u64::from(self.packets_per_symbol()))
    }

    /// The slot whose samples slot `n` carries (`iq_slots`).
    pub fn iq_slot(&self, n: u64) -> u64 {
        match self.iq_slots {
            Some(p) if p > 0 => n % p,
            _ => n,
        }
    }

    /// The samples the generator encodes for (eAxC index, slot number, symbol, PRB).
    pub fn samples(&self, eaxc: usize, slot: u64, symbol: u8, prb: u16) -> [i16; PRB_SAMPLES] {
        let slot = self.iq_slot(slot);
        let mut s = [0i16; PRB_SAMPLES];
        match self.iq {
            IqSource::Random => {
                let mut x = mix(self.seed
                    ^ mix(eaxc as u64)
                    ^ mix(slot << 20 | u64::from(symbol) << 12 | u64::from(prb)));
                let shift = (x % 16) as u32;
                for v in s.iter_mut() {
                    x = mix(x);
                    *v = ((x >> 32) as i16) >> shift;
                }
            }
            IqSource::Tone {
                subcarrier,
                amplitude,
            } => {
                let n = 12.0 * f64::from(self.carrier_prbs);
                let t = slot as f64 * 14.0 + f64::from(symbol);
                for re in 0..12 {
                    let k = f64::from(prb) * 12.0 + re as f64;
                    let ph = std::f64::consts::TAU * (f64::from(subcarrier) * k / n + 0.1 * t);
                    s[2 * re] = (amplitude * ph.cos()).round() as i16;
                    s[2 * re + 1] = (amplitude * ph.sin()).round() as i16;
                }
            }
        }
        s
    }

    /// What a receiver's grid must hold for that PRB: the samples as compression quantises
    /// them.
    pub fn expected(&self, eaxc: usize, slot: u64, symbol: u8, prb: u16) -> [i32; PRB_SAMPLES] {
        bfp::quantise(
            &self.samples(eaxc, slot, symbol, prb),
            self.method(),
            self.iq_width,
        )
    }

    /// The radio header of slot `n` (counted from frame 0, subframe 0, slot 0), symbol `sym`.
    pub fn radio(&self, n: u64, sym: u8) -> RadioRepr {
        let per_sf = 1u64 << self.numerology;
        RadioRepr {
            data_direction: match self.direction {
                Direction::Ul => 0,
                Direction::Dl => 1,
            },
            payload_version: 1,
            filter_index: 0,
            frame_id: (n / (10 * per_sf) % 256) as u8,
            subframe_id: (n / per_sf % 10) as u8,
            slot_id: (n % per_sf) as u8,
            symbol_id: sym,
        }
    }
}

/// splitmix64's finaliser: a fast, well-mixed hash for reproducible samples.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d4_9bb1_3311_34eb);
    z ^ (z >> 31)
}

/// One generated frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OranFrame {
    pub data: Vec<u8>,
    /// Symbol start + `ta4_offset_ns`, ns since the Unix epoch.
    pub timestamp_ns: u64,
}

/// The frames, in time order: slot, symbol, eAxC, packet.
#[derive(Debug)]
pub struct UplaneFrames {
    o: OranGenOptions,
    i: u64,
    seq: Vec<u8>,
    /// With `iq_slots`: the distinct frames, built once.
    pool: Option<FramePool>,
}

/// Frames of the configured carrier (validate the options first; an invalid set yields none).
pub fn build_uplane_frames(o: &OranGenOptions) -> UplaneFrames {
    let valid = o.validate().is_ok();
    UplaneFrames {
        o: o.clone(),
        i: if valid { 0 } else { u64::MAX },
        seq: vec![0; o.eaxcs.len()],
        pool: if valid { FramePool::build(o) } else { None },
    }
}

/// Where a generated frame is: eAxC index, slot, symbol, packet of the symbol.
#[derive(Clone, Copy, Debug)]
struct Place {
    e: usize,
    slot: u64,
    sym: u8,
    pkt: u16,
}

/// The frames of the `iq_slots` distinct slots (or of every slot, when fewer), each built once
/// by [`frame`] in generation order, back to back. Frame i of a run is pool frame i mod the
/// pool's frames, with its sequence id and radio header (the fields a later slot changes)
/// written in place.
#[derive(Debug)]
struct FramePool {
    data: Vec<u8>,
    /// Each frame's start in `data`, and the end of the last.
    starts: Vec<usize>,
    /// Offsets in a frame of the sequence id's first byte and of the radio header.
    seq_at: usize,
    radio_at: usize,
}

impl FramePool {
    /// The pool of valid options `o` with `iq_slots` (`None` without).
    fn build(o: &OranGenOptions) -> Option<FramePool> {
        let p = o.iq_slots?.min(o.slots);
        let per_slot = 14 * o.eaxcs.len() as u64 * u64::from(o.packets_per_symbol());
        let n = (p * per_slot) as usize;
        let mut data = Vec::with_capacity(n * o.max_frame_len());
        let mut starts = Vec::with_capacity(n + 1);
        for i in 0..n as u64 {
            let at = place(o, i);
            starts.push(data.len());
            data.extend_from_slice(&frame(o, at.e, at.slot, at.sym, at.pkt, 0));
        }
        starts.push(data.len());
        // Ethernet, the VLAN tag, the EtherType, the eCPRI common header, PC_ID: then the
        // sequence id (seqId, then the E bit and subsequence id) and the radio header.
        let ecpri_at = 14 + if o.vlan.is_some() { 4 } else { 0 };
        Some(FramePool {
            data,
            starts,
            seq_at: ecpri_at + 6,
            radio_at: ecpri_at + 8,
        })
    }

    /// The pool frame of run frame `i`.
    fn frame(&self, i: u64) -> &[u8] {
        let k = (i % (self.starts.len() as u64 - 1)) as usize;
        &self.data[self.starts[k]..self.starts[k + 1]]
    }

    /// Writes the fields of frame `at` with sequence id `seq` into its copy `f`.
    fn stamp(&self, o: &OranGenOptions, f: &mut [u8], at: Place, seq: u8) {
        f[self.seq_at] = seq;
        f[self.radio_at..self.radio_at + 4].copy_from_slice(&o.radio(at.slot, at.sym).emit());
    }
}

/// Where frame `i` of the run is (slot, symbol, eAxC, packet order).
fn place(o: &OranGenOptions, i: u64) -> Place {
    let pps = u64::from(o.packets_per_symbol());
    let ne = o.eaxcs.len() as u64;
    Place {
        pkt: (i % pps) as u16,
        e: ((i / pps) % ne) as usize,
        sym: ((i / pps / ne) % 14) as u8,
        slot: i / pps / ne / 14,
    }
}

impl UplaneFrames {
    /// Receive time of a frame of `slot`, symbol `sym`.
    fn timestamp(&self, slot: u64, sym: u8) -> u64 {
        let slot_ns = 1_000_000u64 >> self.o.numerology;
        slot * slot_ns + u64::from(sym) * slot_ns / 14 + self.o.ta4_offset_ns
    }

    /// The next frame's place and sequence id; moves on.
    fn advance(&mut self) -> Option<(Place, u8)> {
        if self.i >= self.o.frame_count() {
            return None;
        }
        let at = place(&self.o, self.i);
        self.i += 1;
        let seq = self.seq[at.e];
        self.seq[at.e] = seq.wrapping_add(1);
        Some((at, seq))
    }

    /// With a pool: the next frame's (length, receive time), nothing built.
    fn peek_pooled(&self) -> Option<(usize, u64)> {
        let pool = self.pool.as_ref()?;
        if self.i >= self.o.frame_count() {
            return None;
        }
        let at = place(&self.o, self.i);
        Some((pool.frame(self.i).len(), self.timestamp(at.slot, at.sym)))
    }

    /// With a pool: the next frame copied into `burst` and its fields written there, its
    /// descriptor `desc` with its length and receive time. False at the end (or without one).
    fn push_pooled(&mut self, burst: &mut pipeline::burst::Burst, desc: FrameDesc) -> bool {
        let i = self.i;
        let Some((at, seq)) = self.advance() else {
            return false;
        };
        let ts = self.timestamp(at.slot, at.sym);
        let Some(pool) = &self.pool else {
            return false;
        };
        let f = pool.frame(i);
        let start = burst.data.len();
        burst.push(
            f,
            FrameDesc {
                len: f.len() as u32,
                wire_len: f.len() as u32,
                timestamp_ns: ts,
                ..desc
            },
        );
        pool.stamp(&self.o, &mut burst.data[start..], at, seq);
        true
    }
}

impl Iterator for UplaneFrames {
    type Item = OranFrame;

    fn next(&mut self) -> Option<OranFrame> {
        let i = self.i;
        let (at, seq) = self.advance()?;
        let data = match &self.pool {
            Some(pool) => {
                let mut f = pool.frame(i).to_vec();
                pool.stamp(&self.o, &mut f, at, seq);
                f
            }
            None => frame(&self.o, at.e, at.slot, at.sym, at.pkt, seq),
        };
        Some(OranFrame {
            data,
            timestamp_ns: self.timestamp(at.slot, at.sym),
        })
    }
}

/// Builds packet `pkt` of symbol `sym` of slot `slot` for eAxC index `e`.
pub fn frame(o: &OranGenOptions, e: usize, slot: u64, sym: u8, pkt: u16, seq: u8) -> Vec<u8> {
    let per = o.packet_prbs();
    let first = pkt * per;
    let count = per.min(o.carrier_prbs - first);
    let mut f = Vec::with_capacity(o.max_frame_len());
    f.extend_from_slice(&pipeline::internal::port::gen::GEN_DST_MAC);
    f.extend_from_slice(&pipeline::internal::port::gen::GEN_SRC_MAC);
    if let Some(v) = o.vlan {
        f.extend_from_slice(&ether_type::VLAN.to_be_bytes());
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&ether_type::ECPRI.to_be_bytes());
    let ecpri_at = f.len();
    f.extend_from_slice(&[0; 4]);
    let seq = SeqId {
        seq,
        e_bit: true,
        subseq: 0,
    };
    f.extend_from_slice(&ecpri::emit_ids(o.eaxcs[e], seq));
    f.extend_from_slice(&o.radio(slot, sym).emit());
    let method = o.method();
    let nsec = o.sections_per_packet.min(count);
    let mut start = first;
    for s in 0..nsec {
        // Split `count` PRBs over `nsec` sections, the first ones one larger.
        let n = count / nsec + u16::from(s < count % nsec);
        let whole = n == o.carrier_prbs;
        let h = UplaneSectionRepr {
            section_id: (u16::from(sym) * 64 + s) & 0x0fff,
            rb: false,
            sym_inc: false,
            start_prb: start,
            num_prb: if whole { 0 } else { n as u8 },
            ud_comp_hdr: (o.comp_hdr == CompHdr::Dynamic).then_some(UdCompHdr {
                iq_width: o.iq_width & 0x0f,
                meth: method.ud_comp_meth(),
            }),
        };
        let at = f.len();
        f.resize(at + h.header_len(), 0);
        // The buffer was sized for the header just above.
        let _ = h.emit(&mut f[at..]);
        let pb = bfp::prb_bytes(method, o.iq_width);
        for prb in start..start + n {
            let at = f.len();
            f.resize(at + pb, 0);
            bfp::compress_prb(
                &o.samples(e, slot, sym, prb),
                method,
                o.iq_width,
                &mut f[at..],
            );
        }
        start += n;
    }
    let size = (f.len() - ecpri_at - 4) as u16;
    let hdr = ecpri::Repr {
        revision: 1,
        concatenated: false,
        msg_type: ecpri::MSG_IQ_DATA,
        payload_size: size,
    };
    f[ecpri_at..ecpri_at + 4].copy_from_slice(&hdr.emit());
    f
}

/// The `gen` port in O-RAN mode: the frames of [`build_uplane_frames`] as an RX port. `rate`
/// paces them like the other `gen` frames; `capture` plays them at real symbol timing (each
/// frame due at its timestamp). Descriptor timestamps are the frames' radio-time timestamps, so
/// a fronthaul stage classifies them on time.
#[derive(Debug)]
pub struct OranRx {
    frames: UplaneFrames,
    pending: Option<OranFrame>,
    pacer: pipeline::internal::port::pace::Pacer,
    port: u16,
    name: String,
    total: u64,
}

impl OranRx {
    pub fn new(
        o: &OranGenOptions,
        rate: pipeline::internal::port::pace::Rate,
        port: u16,
    ) -> Result<Self, pipeline::port::PortError> {
        o.validate().map_err(pipeline::port::PortError::Config)?;
        rate.validate("gen.rate")
            .map_err(pipeline::port::PortError::Config)?;
        Ok(OranRx {
            frames: build_uplane_frames(o),
            pending: None,
            pacer: pipeline::internal::port::pace::Pacer::new(rate),
            port,
            name: format!(
                "gen:oran({} PRBs, {} eAxCs, {} {}, {} slots)",
                o.carrier_prbs,
                o.eaxcs.len(),
                o.method().name(),
                o.iq_width,
                o.slots
            ),
            total: o.frame_count(),
        })
    }
}

impl pipeline::port::RxPort for OranRx {
    fn rx_burst(
        &mut self,
        burst: &mut pipeline::burst::Burst,
        max: usize,
    ) -> Result<pipeline::port::RxStatus, pipeline::port::PortError> {
        let now = self.pacer.now_ns();
        let mut n = 0;
        if self.frames.pool.is_some() {
            while n < max {
                let Some((len, ts)) = self.frames.peek_pooled() else {
                    break;
                };
                if !self.pacer.admit(now, len as u32, ts) {
                    break;
                }
                let desc = FrameDesc {
                    port: self.port,
                    ..FrameDesc::default()
                };
                self.frames.push_pooled(burst, desc);
                n += 1;
            }
            return Ok(if n > 0 {
                pipeline::port::RxStatus::Frames(n)
            } else if self.frames.peek_pooled().is_none() {
                pipeline::port::RxStatus::End
            } else {
                pipeline::port::RxStatus::Idle
            });
        }
        while n < max {
            let Some(f) = self.pending.take().or_else(|| self.frames.next()) else {
                break;
            };
            if !self.pacer.admit(now, f.data.len() as u32, f.timestamp_ns) {
                self.pending = Some(f);
                break;
            }
            burst.push(
                &f.data,
                pipeline::burst::FrameDesc {
                    len: f.data.len() as u32,
                    wire_len: f.data.len() as u32,
                    port: self.port,
                    timestamp_ns: f.timestamp_ns,
                    ..pipeline::burst::FrameDesc::default()
                },
            );
            n += 1;
        }
        Ok(if n > 0 {
            pipeline::port::RxStatus::Frames(n)
        } else if self.pending.is_none() {
            pipeline::port::RxStatus::End
        } else {
            pipeline::port::RxStatus::Idle
        })
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn expected_frames(&self) -> Option<u64> {
        Some(self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{decode_frame, Compression, DecodeParams};

    #[test]
    fn frames_decode_to_the_quantised_samples() {
        let o = OranGenOptions {
            carrier_prbs: 20,
            eaxcs: vec![3, 7],
            prbs_per_packet: 8,
            sections_per_packet: 3,
            comp_hdr: CompHdr::Dynamic,
            iq_width: 16,
            vlan: Some(5),
            ..OranGenOptions::default()
        };
        o.validate().unwrap();
        assert_eq!(o.packets_per_symbol(), 3);
        let frames: Vec<OranFrame> = build_uplane_frames(&o).collect();
        assert_eq!(frames.len() as u64, o.frame_count());
        assert_eq!(frames.len(), 14 * 2 * 3);
        let p = DecodeParams {
            carrier_prbs: 20,
            numerology: 1,
            compression: Compression::Dynamic,
        };
        let mut n = 0;
        for f in &frames {
            decode_frame(&f.data, &p, |u, s, prb, _, iq| {
                let e = o.eaxcs.iter().position(|&x| x == u.eaxc).unwrap();
                assert_eq!(*iq, o.expected(e, 0, s.symbol, prb));
                n += 1;
            })
            .unwrap();
        }
        assert_eq!(n, 14 * 2 * 20);
    }

    #[test]
    fn rx_port_delivers_every_frame_with_its_timestamp() {
        use pipeline::port::{RxPort, RxStatus};
        let o = OranGenOptions {
            carrier_prbs: 10,
            slots: 2,
            ..OranGenOptions::default()
        };
        let want: Vec<OranFrame> = build_uplane_frames(&o).collect();
        let mut rx = OranRx::new(&o, pipeline::internal::port::pace::Rate::Unlimited, 3).unwrap();
        assert_eq!(rx.expected_frames(), Some(28));
        let mut b = pipeline::burst::Burst::default();
        while rx.rx_burst(&mut b, 5).unwrap() != RxStatus::End {}
        assert_eq!(b.len(), want.len());
        for (i, w) in want.iter().enumerate() {
            assert_eq!(b.frame(i), &w.data[..]);
            assert_eq!(b.descs[i].timestamp_ns, w.timestamp_ns);
            assert_eq!(b.descs[i].port, 3);
        }
        let bad = OranGenOptions {
            iq_width: 0,
            ..OranGenOptions::default()
        };
        assert!(OranRx::new(&bad, pipeline::internal::port::pace::Rate::Unlimited, 0).is_err());
    }

    /// Every frame of `o` through the port (bursts of 7), with its receive time.
    fn through_port(o: &OranGenOptions) -> Vec<(Vec<u8>, u64)> {
        use pipeline::port::{RxPort, RxStatus};
        let mut rx = OranRx::new(o, pipeline::internal::port::pace::Rate::Unlimited, 0).unwrap();
        let mut b = pipeline::burst::Burst::default();
        while rx.rx_burst(&mut b, 7).unwrap() != RxStatus::End {}
        b.frames()
            .map(|(d, f)| (f.to_vec(), d.timestamp_ns))
            .collect()
    }

    /// Each frame built on its own by [`frame`] (sequence ids per eAxC from 0), in the
    /// generator's order, with its receive time.
    fn one_by_one(o: &OranGenOptions) -> Vec<(Vec<u8>, u64)> {
        let mut seq = vec![0u8; o.eaxcs.len()];
        (0..o.frame_count())
            .map(|i| {
                let at = place(o, i);
                let s = seq[at.e];
                seq[at.e] = s.wrapping_add(1);
                let slot_ns = 1_000_000u64 >> o.numerology;
                let ts = at.slot * slot_ns + u64::from(at.sym) * slot_ns / 14 + o.ta4_offset_ns;
                (frame(o, at.e, at.slot, at.sym, at.pkt, s), ts)
            })
            .collect()
    }

    fn fnv(frames: &[(Vec<u8>, u64)]) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for (f, ts) in frames {
            for b in f.iter().chain(&ts.to_le_bytes()) {
                h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
            }
        }
        h
    }

    #[test]
    fn pooled_frames_are_the_frames_built_one_by_one() {
        let shapes = [
            OranGenOptions {
                carrier_prbs: 30,
                eaxcs: vec![0, 1],
                prbs_per_packet: 12,
                sections_per_packet: 2,
                vlan: Some(100),
                slots: 45,
                ..OranGenOptions::default()
            },
            OranGenOptions {
                carrier_prbs: 20,
                eaxcs: vec![3, 7, 9],
                comp_hdr: CompHdr::Dynamic,
                iq_width: 14,
                numerology: 0,
                slots: 300,
                iq: IqSource::Tone {
                    subcarrier: 3,
                    amplitude: 9000.0,
                },
                seed: 5,
                ..OranGenOptions::default()
            },
        ];
        for base in shapes {
            let today = through_port(&base);
            assert_eq!(today, one_by_one(&base), "no pool: each frame built");
            assert_eq!(
                build_uplane_frames(&base)
                    .map(|f| (f.data, f.timestamp_ns))
                    .collect::<Vec<_>>(),
                today
            );
            // A pool as long as the run: the generator's frames byte for byte.
            let whole = OranGenOptions {
                iq_slots: Some(base.slots),
                ..base.clone()
            };
            assert_eq!(through_port(&whole), today, "pool of every slot");
            // A pool shorter than the run (frameId wraps at 256 frames = 5120 slots at mu 1,
            // 2560 at mu 0; sequence ids wrap at 256): slot n carries slot n mod 7's samples,
            // the rest of the frame its own.
            let short = OranGenOptions {
                iq_slots: Some(7),
                ..base.clone()
            };
            let pooled = through_port(&short);
            assert_eq!(pooled, one_by_one(&short), "pool of 7 slots");
            assert_eq!(
                build_uplane_frames(&short)
                    .map(|f| (f.data, f.timestamp_ns))
                    .collect::<Vec<_>>(),
                pooled
            );
            assert_ne!(pooled, today);
            assert_eq!(short.samples(0, 9, 1, 2), base.samples(0, 2, 1, 2));
        }
    }

    /// The generator's frames for a seed are pinned: a change to what it sends for the same
    /// options shows here.
    #[test]
    fn the_frames_of_a_seed_do_not_change() {
        let o = OranGenOptions {
            carrier_prbs: 40,
            eaxcs: vec![0, 1],
            prbs_per_packet: 16,
            sections_per_packet: 2,
            vlan: Some(100),
            slots: 6,
            seed: 11,
            ..OranGenOptions::default()
        };
        let frames = through_port(&o);
        assert_eq!(frames.len(), 6 * 14 * 2 * 3);
        assert_eq!(fnv(&frames), PINNED, "{:#x}", fnv(&frames));
    }

    const PINNED: u64 = 0xa795_8d37_dc36_e97f;

    #[test]
    fn a_pool_too_large_or_empty_is_refused_by_its_key() {
        let big = OranGenOptions {
            slots: 4000,
            iq_slots: Some(4000),
            eaxcs: (0..16).collect(),
            ..OranGenOptions::default()
        };
        let e = big.validate().unwrap_err();
        assert!(
            e.starts_with("gen.oran.iq_slots:") && e.contains("MiB"),
            "{e}"
        );
        assert!(OranRx::new(&big, pipeline::internal::port::pace::Rate::Unlimited, 0).is_err());
        assert_eq!(build_uplane_frames(&big).count(), 0);
        let zero = OranGenOptions {
            iq_slots: Some(0),
            ..OranGenOptions::default()
        };
        assert!(zero.validate().unwrap_err().contains("gen.oran.iq_slots"));
        // Fewer slots than the pool's: the pool holds the run's slots only.
        let short = OranGenOptions {
            slots: 2,
            iq_slots: Some(1 << 30),
            ..OranGenOptions::default()
        };
        short.validate().unwrap();
        assert_eq!(build_uplane_frames(&short).count(), 2 * 14);
    }

    #[test]
    fn bad_options_name_their_key() {
        for (o, key) in [
            (
                OranGenOptions {
                    iq_width: 0,
                    ..Default::default()
                },
                "iq_width",
            ),
            (
                OranGenOptions {
                    eaxcs: vec![],
                    ..Default::default()
                },
                "eaxcs",
            ),
            (
                OranGenOptions {
                    sections_per_packet: 0,
                    ..Default::default()
                },
                "sections_per_packet",
            ),
            (
                OranGenOptions {
                    numerology: 7,
                    ..Default::default()
                },
                "numerology",
            ),
            // Would overflow the frame count (slots x 14 x eAxCs x packets).
            (
                OranGenOptions {
                    slots: u64::MAX,
                    ..Default::default()
                },
                "gen.oran.slots",
            ),
            (
                OranGenOptions {
                    slots: 0,
                    ..Default::default()
                },
                "gen.oran.slots",
            ),
            (
                OranGenOptions {
                    iq_width: 16,
                    comp_method: CompMethodName::None,
                    ..Default::default()
                },
                "prbs_per_packet",
            ),
        ] {
            let e = o.validate().unwrap_err();
            assert!(e.contains(key), "{e}");
            assert_eq!(build_uplane_frames(&o).count(), 0);
        }
        // A tone is reproducible and within its amplitude.
        let o = OranGenOptions {
            iq: IqSource::Tone {
                subcarrier: 5,
                amplitude: 1000.0,
            },
            ..Default::default()
        };
        assert_eq!(o.samples(0, 1, 2, 3), o.samples(0, 1, 2, 3));
        assert!(o.samples(0, 1, 2, 3).iter().all(|v| v.abs() <= 1000));
    }
}
