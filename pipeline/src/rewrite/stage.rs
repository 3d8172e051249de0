//! The rewrite stages as pipeline stages: building them from the config's keys, the published
//! route tables of a `route` stage (one epoch swap per reload, as the ACL tables), and the
//! mapping of a rewrite's [`Outcome`] onto the frame's verdict.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use flow_rules::error::RuleError;
use flow_rules::route::RouteFile;

use super::{Outcome, Route};
use crate::verdict::{Action, Verdict};

/// The config's port names a pipeline maps verdicts onto.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortNames {
    /// Ports with a transmit side, config order: `Verdict::out_port` indexes this.
    pub tx: Vec<String>,
    /// Ports with a receive side, config order: `FrameDesc::port` indexes this.
    pub rx: Vec<String>,
}

impl PortNames {
    /// Each receiving port's own transmit side (`out_port`), `Verdict::OUT_DEFAULT` where it
    /// has none.
    pub fn ingress_out(&self) -> Vec<u16> {
        self.rx
            .iter()
            .map(|r| {
                self.tx
                    .iter()
                    .position(|t| t == r)
                    .map_or(Verdict::OUT_DEFAULT, |k| k as u16)
            })
            .collect()
    }
}

/// A `respond` stage and where its replies go.
#[derive(Debug)]
pub struct RespondSlot {
    pub op: super::Respond,
    /// By ingress port ([`PortNames::ingress_out`]); empty (built without the config's
    /// ports): every reply to the default output.
    pub ingress_out: Vec<u16>,
}

impl RespondSlot {
    /// The output port of a reply to a frame that came in on `port`.
    #[inline]
    pub fn out_port(&self, port: u16) -> u16 {
        self.ingress_out
            .get(usize::from(port))
            .copied()
            .unwrap_or(Verdict::OUT_DEFAULT)
    }
}

/// One published route table and where its next hops' ports go.
#[derive(Debug)]
pub struct RouteState {
    pub route: Route,
    /// Output port (`Verdict::out_port`) of each of the table's port names
    /// (`RouteTable::ports`, same order).
    pub out_ports: Vec<u16>,
    /// 0 for the table loaded at start, +1 per reload published.
    pub generation: u64,
}

/// A `route` stage's tables. Immutable once published: a reload builds the new table aside
/// and publishes it with one pointer swap; a worker loads the pointer once per burst, so a burst
/// is routed wholly by one table, and the old table is freed with its last reference.
pub struct RouteSlot {
    state: ArcSwap<RouteState>,
    /// The route file (resolved against the config's folder).
    pub file: PathBuf,
    /// The config's ports with a transmit side, in config order (an `out_port` is an index in
    /// it); `None`: not known (a pipeline built without the config's ports), each table port
    /// name's index in the table is its `out_port`.
    tx_ports: Option<Vec<String>>,
    generation: AtomicU64,
}

impl RouteSlot {
    /// Loads and builds the route file; with `tx_ports`, every route's port must be one of
    /// them (an error names the route file, the route's line and key `port`).
    pub fn load(file: &Path, tx_ports: Option<&[String]>) -> Result<Self, RuleError> {
        let state = build_state(file, tx_ports, 0)?;
        Ok(RouteSlot {
            state: ArcSwap::from_pointee(state),
            file: file.to_path_buf(),
            tx_ports: tx_ports.map(<[String]>::to_vec),
            generation: AtomicU64::new(0),
        })
    }

    /// The generation of the table last published: 0 at start, +1 per reload published.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The table in force now.
    pub fn current(&self) -> Arc<RouteState> {
        self.state.load_full()
    }

    /// Re-reads the route file and publishes the new table with one swap; a bad file leaves
    /// the running table in force and says why (file, line, key). Returns the routes
    /// published (IPv4, IPv6) and the new generation.
    pub fn reload(&self) -> Result<(usize, usize, u64), RuleError> {
        let state = self.prepare()?;
        Ok(self.publish(state))
    }

    /// Builds the next table aside from the route file (nothing is published).
    pub fn prepare(&self) -> Result<RouteState, RuleError> {
        let g = self.generation.load(Ordering::Acquire) + 1;
        build_state(&self.file, self.tx_ports.as_deref(), g)
    }

    /// Publishes a table [`RouteSlot::prepare`] built: one pointer swap.
    pub fn publish(&self, state: RouteState) -> (usize, usize, u64) {
        let out = (
            state.route.table.routes_v4,
            state.route.table.routes_v6,
            state.generation,
        );
        // Reloads come from the one control thread: generations are stored in order.
        self.generation.store(state.generation, Ordering::Release);
        self.state.store(Arc::new(state));
        out
    }
}

/// New route tables built aside for every `route` stage of a pipeline, to publish together
/// with the rest of a reload ([`crate::stage::Pipeline::prepare_routes`]).
pub struct PreparedRoutes(Vec<RouteState>);

impl PreparedRoutes {
    /// How many `route` stages get a new table.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl crate::stage::Pipeline {
    fn route_slots(&self) -> impl Iterator<Item = &RouteSlot> {
        self.stages.iter().filter_map(|s| match s {
            crate::stage::Stage::Route(r) => Some(&**r),
            _ => None,
        })
    }

    /// Step one of a route reload (SIGHUP): every `route` stage's file read and its table
    /// built aside; nothing changes yet. The first bad file is the error (file, line, key).
    pub fn prepare_routes(&self) -> Result<PreparedRoutes, RuleError> {
        self.route_slots()
            .map(RouteSlot::prepare)
            .collect::<Result<Vec<_>, _>>()
            .map(PreparedRoutes)
    }

    /// Each `route` stage's file, routes in force (both families) and routes in the table
    /// `next` holds for it: what a reload's shrink guard compares.
    pub fn route_sizes(&self, next: &PreparedRoutes) -> Vec<(PathBuf, usize, usize)> {
        let size = |s: &RouteState| s.route.table.routes_v4 + s.route.table.routes_v6;
        self.route_slots()
            .zip(&next.0)
            .map(|(slot, st)| (slot.file.clone(), size(&slot.current()), size(st)))
            .collect()
    }

    /// Step two: publishes the tables [`Self::prepare_routes`] built, one swap per stage
    /// (workers take them at their next burst). Returns each stage's (IPv4 routes, IPv6
    /// routes, generation).
    pub fn publish_routes(&self, routes: PreparedRoutes) -> Vec<(usize, usize, u64)> {
        self.route_slots()
            .zip(routes.0)
            .map(|(slot, st)| slot.publish(st))
            .collect()
    }
}

fn build_state(
    file: &Path,
    tx_ports: Option<&[String]>,
    generation: u64,
) -> Result<RouteState, RuleError> {
    let rf = RouteFile::load(file)?;
    if let Some(names) = tx_ports {
        let known: Vec<&str> = names.iter().map(String::as_str).collect();
        rf.check_ports(&known)?;
    }
    let table = rf.build()?;
    let out_ports = table
        .ports
        .iter()
        .enumerate()
        .map(|(i, name)| match tx_ports {
            Some(names) => names
                .iter()
                .position(|n| n == name)
                .map_or(Verdict::OUT_DEFAULT, |p| p as u16),
            None => i as u16,
        })
        .collect();
    Ok(RouteState {
        route: Route::new(Arc::new(table)),
        out_ports,
        generation,
    })
}

/// Applies a rewrite's outcome to the frame's verdict; `true` when the frame is dropped (its
/// pipeline ends). `out_ports`: a `route` table's port mapping ([`RouteState::out_ports`]).
#[inline]
pub fn apply_outcome(out: Outcome, v: &mut Verdict, out_ports: &[u16]) -> bool {
    match out {
        // A reply's port is the ingress port's (RespondSlot::out_port), set by the caller.
        Outcome::Done | Outcome::Skipped | Outcome::Reply => false,
        Outcome::Forward { port } => {
            v.out_port = out_ports
                .get(usize::from(port))
                .copied()
                .unwrap_or(Verdict::OUT_DEFAULT);
            false
        }
        Outcome::Drop(why) => {
            v.action = Action::Drop;
            v.reason = Some(why.reason());
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::RewriteDrop;
    use crate::verdict::DropReason;

    const ROUTES: &str = "routes:
  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:0a', port: b }
  - { prefix: 10.1.0.0/16, via: '02:00:00:00:00:0b', port: a }
";

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pw-rslot-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn ports_map_to_the_config_tx_ports_and_reload_swaps() {
        let d = dir("map");
        let f = d.join("r.yaml");
        std::fs::write(&f, ROUTES).unwrap();
        let names = vec!["a".to_string(), "x".to_string(), "b".to_string()];
        let s = RouteSlot::load(&f, Some(&names)).unwrap();
        let st = s.current();
        // Table order is b, a (first use); config order is a, x, b.
        assert_eq!(st.route.table.ports, vec!["b", "a"]);
        assert_eq!(st.out_ports, vec![2, 0]);
        assert_eq!(st.generation, 0);
        // Without the config's ports: the table's own indices.
        let s2 = RouteSlot::load(&f, None).unwrap();
        assert_eq!(s2.current().out_ports, vec![0, 1]);
        // A reload with a port the config lacks is refused; the old table stays.
        std::fs::write(
            &f,
            format!("{ROUTES}  - {{ prefix: 0.0.0.0/0, via: '02:00:00:00:00:0c', port: nope }}\n"),
        )
        .unwrap();
        let e = s.reload().unwrap_err().to_string();
        assert!(
            e.contains("r.yaml") && e.contains("nope") && e.contains(":4"),
            "{e}"
        );
        assert_eq!(s.current().route.table.routes_v4, 2);
        std::fs::write(
            &f,
            format!("{ROUTES}  - {{ prefix: 0.0.0.0/0, via: '02:00:00:00:00:0c', port: x }}\n"),
        )
        .unwrap();
        assert_eq!(s.reload().unwrap(), (3, 0, 1));
        assert_eq!(s.current().route.table.routes_v4, 3);
        assert_eq!(s.current().generation, 1);
        // Held by a "worker": the old table stays alive and unchanged after a swap.
        let held = s.current();
        std::fs::write(&f, ROUTES).unwrap();
        s.reload().unwrap();
        assert_eq!(held.route.table.routes_v4, 3);
        assert_eq!(s.current().route.table.routes_v4, 2);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn bad_route_files_are_errors_naming_the_file() {
        let d = dir("bad");
        let f = d.join("bad.yaml");
        for text in [
            "routes: [ { prefix: 10.0.0.0/33, via: '02:00:00:00:00:01', port: a } ]",
            "routes: [ { prefix: 10.0.0.0/8, via: 'zz', port: a } ]",
            "nothing",
            "\u{0}\u{1}",
        ] {
            std::fs::write(&f, text).unwrap();
            let e = RouteSlot::load(&f, None).err().expect(text).to_string();
            assert!(e.contains("bad.yaml"), "{e}");
        }
        assert!(RouteSlot::load(&d.join("missing.yaml"), None).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn outcomes_to_verdicts() {
        let mut v = Verdict::PASS;
        assert!(!apply_outcome(
            Outcome::Forward { port: 1 },
            &mut v,
            &[5, 7]
        ));
        assert_eq!(v.out_port, 7);
        assert!(!apply_outcome(
            Outcome::Forward { port: 9 },
            &mut v,
            &[5, 7]
        ));
        assert_eq!(v.out_port, Verdict::OUT_DEFAULT);
        assert!(apply_outcome(
            Outcome::Drop(RewriteDrop::TtlExpired),
            &mut v,
            &[]
        ));
        assert_eq!(v, Verdict::drop(DropReason::TtlExpired));
    }
}
