//! The rewrite stages' config keys (serde, unknown keys refused). In a pipeline:
//!
//! ```yaml
//! pipeline:
//!   - parse
//!   - l2fwd: { mac: swap }                  # or { src: MAC, dst: MAC }, or swap then set src
//!   - vlan: { push: { vid: 100, pcp: 3 } }  # or { pop: true } or { set: { vid: 7 } }
//!   - dscp: { set: 46 }
//!   - route: { routes: routes.yaml }        # FILE: flow_rules::route (prefix, via, port)
//!   - ttl: {}
//!   - tx_time: { delay_ns: 50000 }          # send time = receive time + 50 us
//! ```
//!
//! Each op's `new` validates the values and says which key is wrong ([`ConfigError`]); the
//! YAML parser (serde-saphyr in `config.rs`) adds the line and column of a wrong type or an
//! unknown key.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

/// A bad rewrite config value: the key and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{stage}: key `{key}`: {message}")]
pub struct ConfigError {
    pub stage: &'static str,
    pub key: &'static str,
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(stage: &'static str, key: &'static str, message: impl Into<String>) -> Self {
        ConfigError {
            stage,
            key,
            message: message.into(),
        }
    }
}

/// A MAC address written `aa:bb:cc:dd:ee:ff` (or with `-`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Mac(pub [u8; 6]);

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl FromStr for Mac {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("bad MAC address `{s}` (expected six hex bytes, aa:bb:cc:dd:ee:ff)");
        let mut out = [0u8; 6];
        let mut n = 0;
        for part in s.trim().split([':', '-']) {
            if n == 6 || part.is_empty() || part.len() > 2 {
                return Err(bad());
            }
            out[n] = u8::from_str_radix(part, 16).map_err(|_| bad())?;
            n += 1;
        }
        if n != 6 {
            return Err(bad());
        }
        Ok(Mac(out))
    }
}

impl<'de> Deserialize<'de> for Mac {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// `l2fwd: { mac: swap }`: exchange source and destination MAC. `src` / `dst`: write these
/// addresses (after the swap when both are given). At least one key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L2fwdConfig {
    /// `swap`: exchange the two MACs.
    #[serde(default)]
    pub mac: Option<MacMode>,
    /// New source MAC (the output port's own address, as DPDK's l2fwd writes it).
    #[serde(default)]
    pub src: Option<Mac>,
    /// New destination MAC.
    #[serde(default)]
    pub dst: Option<Mac>,
}

/// The value of `l2fwd.mac`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MacMode {
    Swap,
}

/// `vlan:` one of `push: { vid, pcp, tpid }` (a new outermost tag), `pop: true` (remove the
/// outermost tag), `set: { vid, pcp }` (change the outermost tag's fields).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub enum VlanConfig {
    Push(VlanPush),
    Pop(bool),
    Set(VlanSet),
}

/// `vlan.push`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VlanPush {
    /// VLAN id, 0..=4095.
    pub vid: u16,
    /// Priority code point, 0..=7 (default 0).
    #[serde(default)]
    pub pcp: u8,
    /// Tag protocol id: 0x8100 (802.1Q, the default) or 0x88a8 (802.1ad service tag).
    #[serde(default)]
    pub tpid: Option<u16>,
}

/// `vlan.set`: the fields to change (at least one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VlanSet {
    #[serde(default)]
    pub vid: Option<u16>,
    #[serde(default)]
    pub pcp: Option<u8>,
}

/// `ttl: {}`: decrement the IPv4 TTL / IPv6 hop limit; 0 or 1 on arrival drops the frame
/// (`ttl_expired`). No keys.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TtlConfig {}

/// `dscp: { set: N }`: the DSCP (0..=63) written into IPv4 TOS / IPv6 traffic class, ECN bits
/// kept.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DscpConfig {
    pub set: u8,
}

/// `tx_time: { delay_ns: N }`: the frame's send time is its receive time plus N ns
/// (0 ..= [`super::tx_time::MAX_DELAY_NS`]); see [`super::TxTime`].
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TxTimeConfig {
    #[serde(deserialize_with = "delay_ns")]
    pub delay_ns: u64,
}

/// `tx_time.delay_ns`: a whole number of nanoseconds in 0 ..= `MAX_DELAY_NS`; anything else
/// (negative, fractional, text, out of range) is an error giving the allowed range.
fn delay_ns<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use super::tx_time::MAX_DELAY_NS;
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(
                f,
                "a whole number of nanoseconds (allowed range 0 ..= {MAX_DELAY_NS})"
            )
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
            if v > MAX_DELAY_NS {
                return Err(E::custom(format!(
                    "{v} is out of range (allowed range 0 ..= {MAX_DELAY_NS} ns, 60 s)"
                )));
            }
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::custom(format!(
                    "{v} is out of range (allowed range 0 ..= {MAX_DELAY_NS} ns; a send time \
                     before the frame arrived is not a delay)"
                ))),
            }
        }
    }
    d.deserialize_any(V)
}

/// `route: { routes: FILE }`: the route file (see `flow_rules::route`), relative paths against
/// the config's folder (resolved by the config loader).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    pub routes: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_text() {
        let m: Mac = "02:00:0a:FF:00:01".parse().unwrap();
        assert_eq!(m.0, [2, 0, 0xa, 0xff, 0, 1]);
        assert_eq!(m.to_string(), "02:00:0a:ff:00:01");
        assert_eq!("02-00-0a-ff-00-01".parse::<Mac>(), Ok(m));
        for bad in [
            "",
            "02:00:0a:ff:00",
            "02:00:0a:ff:00:01:02",
            "02:00:0a:ff:00:1g",
            "020:0:0:0:0:0",
            "02::0a:ff:00:01",
        ] {
            assert!(bad.parse::<Mac>().is_err(), "{bad}");
        }
    }

    #[test]
    fn configs_from_yaml() {
        let c: L2fwdConfig = serde_saphyr::from_str("{ mac: swap }").unwrap();
        assert_eq!(c.mac, Some(MacMode::Swap));
        let c: L2fwdConfig =
            serde_saphyr::from_str("src: 02:00:00:00:00:09\ndst: 02:00:00:00:00:0a").unwrap();
        assert_eq!(c.src, Some(Mac([2, 0, 0, 0, 0, 9])));
        assert!(serde_saphyr::from_str::<L2fwdConfig>("{ mac: flip }").is_err());
        assert!(serde_saphyr::from_str::<L2fwdConfig>("{ macs: swap }").is_err());
        assert!(serde_saphyr::from_str::<L2fwdConfig>("{ src: 02:00 }").is_err());
        let v: VlanConfig = serde_saphyr::from_str("{ push: { vid: 100, pcp: 3 } }").unwrap();
        assert_eq!(
            v,
            VlanConfig::Push(VlanPush {
                vid: 100,
                pcp: 3,
                tpid: None
            })
        );
        let v: VlanConfig = serde_saphyr::from_str("{ pop: true }").unwrap();
        assert_eq!(v, VlanConfig::Pop(true));
        let v: VlanConfig = serde_saphyr::from_str("{ set: { pcp: 5 } }").unwrap();
        assert_eq!(
            v,
            VlanConfig::Set(VlanSet {
                vid: None,
                pcp: Some(5)
            })
        );
        assert!(serde_saphyr::from_str::<VlanConfig>("{ push: { vid: 1, prio: 2 } }").is_err());
        assert!(serde_saphyr::from_str::<VlanConfig>("{ swap: true }").is_err());
        let _: TtlConfig = serde_saphyr::from_str("{}").unwrap();
        assert!(serde_saphyr::from_str::<TtlConfig>("{ min: 2 }").is_err());
        let d: DscpConfig = serde_saphyr::from_str("{ set: 46 }").unwrap();
        assert_eq!(d.set, 46);
        let r: RouteConfig = serde_saphyr::from_str("{ routes: r.yaml }").unwrap();
        assert_eq!(r.routes, PathBuf::from("r.yaml"));
        assert!(serde_saphyr::from_str::<RouteConfig>("{ route: r.yaml }").is_err());
        let t: TxTimeConfig = serde_saphyr::from_str("{ delay_ns: 5000 }").unwrap();
        assert_eq!(t.delay_ns, 5000);
        for bad in [
            "{ delay_ns: -1 }",
            "{ delay_ns: 1.5 }",
            "{ delay_ns: soon }",
            "{ delay: 5 }",
            "{}",
        ] {
            assert!(
                serde_saphyr::from_str::<TxTimeConfig>(bad).is_err(),
                "{bad}"
            );
        }
    }
}
