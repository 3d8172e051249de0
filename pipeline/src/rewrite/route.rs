//! `route: { routes: FILE }`: longest-prefix match of the parsed outer destination address
//! (`meta.dst_ip`, IPv4 or IPv6) in a [`RouteTable`]; the next hop's MAC becomes the frame's
//! destination MAC and the frame goes to the next hop's output port ([`Outcome::Forward`]).
//! No covering prefix (and no default route), or no IP destination at all (ARP, eCPRI, a frame
//! whose IP header did not parse): [`Outcome::Drop`] with `no_route`, frame unchanged.
//!
//! The source MAC is left as it is (an `l2fwd: { src: MAC }` after `route` sets the output
//! port's own address); the TTL is `ttl`'s business.

use std::path::Path;
use std::sync::Arc;

use flow_rules::error::RuleError;
use flow_rules::route::{RouteFile, RouteTable};

use super::config::RouteConfig;
use super::{dropped, Outcome, RewriteDrop};
use crate::meta::PacketMeta;
use crate::verdict::Verdict;
use crate::wire::ethernet;

/// A configured route stage over one published table (a reload makes a new `Route`, or swaps
/// the `Arc`).
#[derive(Clone, Debug)]
pub struct Route {
    pub table: Arc<RouteTable>,
}

impl Route {
    /// Loads and builds `cfg.routes` (relative to `base`, the config file's folder). Errors
    /// name the route file, line, column and key.
    pub fn load(cfg: &RouteConfig, base: &Path) -> Result<Self, RuleError> {
        let path = base.join(&cfg.routes);
        let file = RouteFile::load(&path)?;
        Ok(Route {
            table: Arc::new(file.build()?),
        })
    }

    pub fn new(table: Arc<RouteTable>) -> Self {
        Route { table }
    }

    /// `meta` is only read (the destination MAC is not in it).
    pub fn apply(&self, frame: &mut [u8], meta: &mut PacketMeta, verdict: &Verdict) -> Outcome {
        if dropped(verdict) {
            return Outcome::Skipped;
        }
        let hop = match meta.ip_version {
            4 => self.table.lookup_v4(meta.dst_ip[0]),
            6 => {
                let w = meta.dst_ip;
                let a = (u128::from(w[0]) << 96)
                    | (u128::from(w[1]) << 64)
                    | (u128::from(w[2]) << 32)
                    | u128::from(w[3]);
                self.table.lookup_v6(a)
            }
            _ => None,
        };
        let Some(hop) = hop else {
            return Outcome::Drop(RewriteDrop::NoRoute);
        };
        let Ok(mut f) = ethernet::Frame::new_checked(frame) else {
            return Outcome::Drop(RewriteDrop::NoRoute);
        };
        f.set_dst(hop.mac);
        Outcome::Forward { port: hop.port }
    }
}

/// The `route` stage, described (the stage descriptor, `stage::descriptor`).
pub const DESCRIPTOR: crate::stage::descriptor::StageDescriptor =
    crate::stage::descriptor::StageDescriptor {
        name: "route",
        usage: "`route: { routes: FILE }`",
        summary: "longest-prefix match (IPv4 DIR-24-8, IPv6) of the destination: next hop's MAC as destination, its `port` as the frame's output port; none: `no_route` drop. `kill -HUP`: see below",
        needs: crate::stage::descriptor::StageNeeds {
        reads_meta: true,
        writes_frame: true,
        ..crate::stage::descriptor::StageNeeds::NONE
    },
        drop_reasons: &[crate::verdict::DropReason::NoRoute],
        counters: &[],
        gpu: crate::stage::descriptor::GpuImpl::Library {
        function: "pw_stage_route",
    },
        reloads: true,
    };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::gen::{build_frame, FrameSpec};
    use crate::stage::parse::parse_frame;

    const ROUTES: &str = "routes:
  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:0a', port: a }
  - { prefix: 10.1.0.0/16, via: '02:00:00:00:00:0b', port: b }
  - { prefix: '2001:db8::/32', via: '02:00:00:00:00:0c', port: a }
";

    fn route(text: &str) -> Route {
        Route::new(Arc::new(
            RouteFile::parse(text, "r.yaml").unwrap().build().unwrap(),
        ))
    }

    fn frame(dst: &str) -> Vec<u8> {
        let d: std::net::IpAddr = dst.parse().unwrap();
        let s = if d.is_ipv4() {
            "192.0.2.1"
        } else {
            "2001:db8:ffff::1"
        };
        build_frame(&FrameSpec::tcp(s.parse().unwrap(), d, 1, 2, 64))
    }

    #[test]
    fn longest_prefix_sets_dst_mac_and_port() {
        let r = route(ROUTES);
        for (dst, mac, port) in [
            ("10.9.9.9", 0x0a, 0),
            ("10.1.2.3", 0x0b, 1),
            ("2001:db8::5", 0x0c, 0),
        ] {
            let mut f = frame(dst);
            let orig = f.clone();
            let mut m = parse_frame(&f);
            assert_eq!(
                r.apply(&mut f, &mut m, &Verdict::PASS),
                Outcome::Forward { port }
            );
            assert_eq!(&f[..6], &[2, 0, 0, 0, 0, mac]);
            assert_eq!(&f[6..], &orig[6..], "only the destination MAC changes");
        }
    }

    #[test]
    fn no_route_unless_default() {
        let r = route(ROUTES);
        for dst in ["11.0.0.1", "2001:db9::1"] {
            let mut f = frame(dst);
            let orig = f.clone();
            let mut m = parse_frame(&f);
            assert_eq!(
                r.apply(&mut f, &mut m, &Verdict::PASS),
                Outcome::Drop(RewriteDrop::NoRoute)
            );
            assert_eq!(f, orig);
        }
        let mut arp = vec![0u8; 42];
        arp[12] = 8;
        arp[13] = 6;
        let mut m = parse_frame(&arp);
        assert_eq!(
            r.apply(&mut arp, &mut m, &Verdict::PASS),
            Outcome::Drop(RewriteDrop::NoRoute)
        );
        let d = route(&format!(
            "{ROUTES}  - {{ prefix: 0.0.0.0/0, via: '02:00:00:00:00:0d', port: up }}\n"
        ));
        let mut f = frame("11.0.0.1");
        let mut m = parse_frame(&f);
        assert_eq!(
            d.apply(&mut f, &mut m, &Verdict::PASS),
            Outcome::Forward { port: 2 }
        );
        assert_eq!(d.table.ports[2], "up");
        let mut f = frame("2001:db9::1");
        let mut m = parse_frame(&f);
        assert_eq!(
            d.apply(&mut f, &mut m, &Verdict::PASS),
            Outcome::Drop(RewriteDrop::NoRoute),
            "no IPv6 default"
        );
    }

    #[test]
    fn load_resolves_against_the_config_folder() {
        let dir = std::env::temp_dir().join(format!("pw-route-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("r.yaml"), ROUTES).unwrap();
        let cfg = RouteConfig {
            routes: "r.yaml".into(),
        };
        let r = Route::load(&cfg, &dir).unwrap();
        assert_eq!(r.table.routes_v4, 2);
        let e = Route::load(
            &RouteConfig {
                routes: "missing.yaml".into(),
            },
            &dir,
        )
        .unwrap_err();
        assert!(e.to_string().contains("missing.yaml"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
