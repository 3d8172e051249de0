//! Software steering, applied by a port's ingest when the port cannot steer in hardware: the
//! steering rules first (queue, RSS over a set of queues, drop, mark), then Toeplitz RSS on the
//! 5-tuple over all queues, exactly as a NIC would spread the traffic.

use flow_rules::steering::{Fate, SteerKey, SteerMatcher, SteerRuleSet};

use crate::burst::FrameDesc;
use crate::meta::{mf as flags, PacketMeta};
use crate::rss::Rss;
use crate::stage::parse;
use crate::verdict::DropReason;

/// The ingest's steering: rules (optional) and RSS.
pub struct Steering {
    rules: Option<SteerMatcher>,
    rss: Rss,
    queues: u16,
    /// Spread by the flow key (`conntrack`): see [`Steering::with_flow_steering`].
    flow_hash: bool,
    /// Toeplitz under [`crate::rss::RSS_KEY_SYMMETRIC`] (else [`crate::rss::RSS_KEY_MS`]).
    symmetric: bool,
}

impl Steering {
    /// RSS only, over `queues` queues.
    pub fn rss_only(queues: u16) -> anyhow::Result<Self> {
        Ok(Steering {
            rules: None,
            rss: Rss::new(queues).map_err(anyhow::Error::msg)?,
            queues,
            flow_hash: false,
            symmetric: false,
        })
    }

    /// A rule set over `queues` queues (RSS for the frames no rule decides).
    pub fn from_rules(set: &SteerRuleSet, queues: u16) -> anyhow::Result<Self> {
        set.check_queues(queues)?;
        let mut s = Steering::rss_only(queues)?;
        s.rules = Some(set.compile());
        Ok(s)
    }

    /// The same steering for connection tracking: a flow's two directions, and the ICMP errors
    /// about it, reach one queue (whose `conntrack` table holds the flow). The frames no rule
    /// decides are spread by the hash of their flow key (`pktwarp_flow::key`: both directions
    /// alike, an ICMP error by the packet it quotes); frames without a flow, and a rule's `rss:`
    /// fate, by Toeplitz with the symmetric key ([`crate::rss::RSS_KEY_SYMMETRIC`]).
    pub fn with_flow_steering(mut self) -> Self {
        self.flow_hash = true;
        self.with_symmetric_rss()
    }

    /// Toeplitz RSS (and a rule's `rss:` fate) with the symmetric key, so both directions of
    /// a flow reach one queue: what a per-flow state other than the flow table (a `rate_limit`
    /// keyed by `flow`) needs. A DPDK port of such a pipeline programs the same key into the
    /// NIC, so the NIC and software pick the same queue.
    pub fn with_symmetric_rss(mut self) -> Self {
        self.rss.toeplitz = crate::rss::Toeplitz::new(&crate::rss::RSS_KEY_SYMMETRIC);
        self.symmetric = true;
        self
    }

    /// The Toeplitz key this steering hashes with (the key a NIC must hold to agree).
    pub fn rss_key(&self) -> &'static [u8; 40] {
        if self.symmetric {
            &crate::rss::RSS_KEY_SYMMETRIC
        } else {
            &crate::rss::RSS_KEY_MS
        }
    }

    /// The queue of a frame by its flow key ([`Steering::with_flow_steering`]); `meta` is
    /// filled by `parse` here. Frames without a flow: symmetric Toeplitz.
    #[inline]
    fn flow_queue(&self, frame: &[u8], meta: &mut PacketMeta, parsed: bool) -> u16 {
        if !parsed {
            parse::parse(frame, meta);
        }
        match pktwarp_flow::key::classify(meta, frame) {
            Ok(p) => self.rss.reta.queue(pktwarp_flow::key::hash(&p.key, 0)),
            Err(_) => self.rss.steer_meta(meta).1,
        }
    }

    pub fn queues(&self) -> u16 {
        self.queues
    }

    /// Whether frames are spread by their flow key ([`Steering::with_flow_steering`]) rather
    /// than by Toeplitz RSS as a NIC spreads them.
    pub fn by_flow(&self) -> bool {
        self.flow_hash
    }

    /// Whether a `steering:` rule file is in force (else steering is RSS alone).
    pub fn has_rules(&self) -> bool {
        self.rules.is_some()
    }

    /// Picks the queue of one frame; `Some(reason)` when steering drops it. `meta` is scratch
    /// (the frame is parsed only when there are rules; RSS alone hashes the headers in place).
    #[inline]
    pub fn steer(
        &self,
        frame: &[u8],
        meta: &mut PacketMeta,
        nq: usize,
    ) -> (usize, Option<DropReason>) {
        let (q, drop, _) = self.steer_marked(frame, meta, nq);
        (q, drop)
    }

    /// [`Steering::steer`] and the matched rule's mark (0 when none): the ingest puts it in the
    /// frame's [`crate::burst::FrameDesc::mark`], where the stages find it (`parse` copies it
    /// into [`PacketMeta::steer_mark`]).
    #[inline]
    pub fn steer_marked(
        &self,
        frame: &[u8],
        meta: &mut PacketMeta,
        nq: usize,
    ) -> (usize, Option<DropReason>, u32) {
        let Some(m) = &self.rules else {
            if nq <= 1 {
                return (0, None, 0);
            }
            if self.flow_hash {
                let q = self.flow_queue(frame, meta, false);
                return ((q as usize).min(nq - 1), None, 0);
            }
            // RSS alone: hash the headers in place (what a NIC does), no full parse.
            let (_, q) = self.rss.steer_frame(frame);
            return ((q as usize).min(nq - 1), None, 0);
        };
        parse::parse(frame, meta);
        let key = steer_key(frame, meta);
        let d = m.decide(&key);
        let mark = d.mark.unwrap_or(0);
        match d.fate {
            Fate::Queue(q) => return ((q as usize).min(nq - 1), None, mark),
            Fate::Drop => return (0, Some(DropReason::SteeringDrop), 0),
            Fate::Rss(t) => {
                let mut buf = [0u8; 36];
                let n = t.hash_input(&key, &mut buf);
                let h = self.rss.toeplitz.hash(&buf[..n]);
                return ((t.queue_for_hash(h) as usize).min(nq - 1), None, mark);
            }
            Fate::Default => {}
        }
        let q = if self.flow_hash {
            self.flow_queue(frame, meta, true)
        } else {
            self.rss.steer_meta(meta).1
        };
        ((q as usize).min(nq.saturating_sub(1)), None, mark)
    }
}

/// The queue and mark of a frame whose port's NIC steered it (the port took the config's whole
/// rule set, [`crate::port::RxPort::steered_in_nic`]): the queue the NIC chose and the mark it
/// set, never steered again in software (the NIC's drops never arrive). Same shape as
/// [`Steering::steer_marked`].
#[inline]
pub fn nic_steered(desc: &FrameDesc, nq: usize) -> (usize, Option<DropReason>, u32) {
    (
        (desc.queue as usize).min(nq.saturating_sub(1)),
        None,
        desc.mark,
    )
}

/// The steering key of a parsed frame (outer headers; MACs read from the frame).
pub fn steer_key(frame: &[u8], m: &PacketMeta) -> SteerKey {
    let mut k = SteerKey::default();
    if let (Some(d), Some(s)) = (frame.get(0..6), frame.get(6..12)) {
        k.dst_mac.copy_from_slice(d);
        k.src_mac.copy_from_slice(s);
    }
    k.ether_type = m.ether_type;
    k.vlan_count = m.vlan_count;
    k.vlan_tci = m.vlan_tci[0];
    k.ip_version = m.ip_version;
    k.ip_proto = m.ip_proto;
    k.dscp = m.ip_tos >> 2;
    k.src_ip = m.src_ip;
    k.dst_ip = m.dst_ip;
    k.l4 = m.flags & flags::L4 != 0;
    k.src_port = m.src_port;
    k.dst_port = m.dst_port;
    if m.flags & flags::TUNNEL != 0 {
        k.tunnel = m.tunnel_type;
        k.tunnel_id = m.tunnel_id;
    }
    k.ecpri = m.flags & flags::ECPRI != 0;
    k.ecpri_msg_type = m.ecpri_msg_type;
    k.ecpri_pc_id = m.ecpri_pc_id;
    k
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::path::Path;

    use pktwarp_flow::testgen::{tcp_frame, udp_frame, Tcp};

    /// The steering of a config whose pipeline is `parse, STAGE, count` over 4 queues.
    fn steering(stage: &str) -> super::Steering {
        let yaml = format!(
            "ports: [{{name: wire, gen: {{count: 10}}}}]\nqueues: {{count: 4}}\n\
             pipeline: [parse, {stage}, count]\n"
        );
        crate::config::parse_str(&yaml, Path::new("s.yaml"))
            .unwrap_or_else(|e| panic!("{stage}: {e}"))
            .build_steering()
            .expect("steering")
    }

    /// Flows (TCP and UDP) whose two directions land on different queues.
    fn split_flows(s: &super::Steering) -> usize {
        let mut meta = crate::meta::PacketMeta::default();
        let mut q = |f: &[u8]| s.steer(f, &mut meta, 4).0;
        let mut split = 0;
        for i in 0..512u32 {
            let a = (
                IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (i * 7919))),
                1024 + i as u16,
            );
            let b = (
                IpAddr::V4(Ipv4Addr::from(0xc0a8_0000 | i)),
                443 + (i % 3) as u16,
            );
            let t = Tcp {
                flags: 0x10,
                seq: 1,
                ack: 1,
                win: 1000,
                len: 0,
                wscale: None,
            };
            let pairs = [
                (tcp_frame(None, a, b, t), tcp_frame(None, b, a, t)),
                (udp_frame(None, a, b, 8), udp_frame(None, b, a, 8)),
            ];
            for (fwd, rev) in pairs {
                split += usize::from(q(&fwd) != q(&rev));
            }
        }
        split
    }

    /// Per-flow state (a flow table, a rate limit keyed by flow) keeps both directions of every
    /// flow on one queue, with the symmetric key the NIC gets too; a stateless pipeline keeps
    /// the standard key, under which directions split.
    #[test]
    fn per_flow_state_steers_both_directions_to_one_queue() {
        let rate = |k: &str| {
            format!("{{rate_limit: {{entries: 64, rules: [{{name: r, key: {k}, rate_pps: 10}}]}}}}")
        };
        for stage in ["{conntrack: {entries: 1024}}".to_string(), rate("flow")] {
            let s = steering(&stage);
            assert_eq!(s.rss_key(), &crate::rss::RSS_KEY_SYMMETRIC, "{stage}");
            assert_eq!(split_flows(&s), 0, "{stage}");
        }
        for stage in [rate("src"), "ttl".to_string()] {
            let s = steering(&stage);
            assert_eq!(s.rss_key(), &crate::rss::RSS_KEY_MS, "{stage}");
            assert!(
                split_flows(&s) > 100,
                "{stage}: the standard key splits directions"
            );
        }
    }
}
