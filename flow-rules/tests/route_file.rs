//! Route files: the accepted forms, and every kind of bad file refused with an error naming the
//! file, line, column and key (no panic, bounded reads).

use std::io::Write;

use flow_rules::error::RuleError;
use std::collections::HashMap;
use std::path::PathBuf;

use flow_rules::route::{synth, Prefix, RouteFile, MAX_ROUTES, MAX_ROUTE_FILE_BYTES};

fn parse(text: &str) -> Result<RouteFile, RuleError> {
    RouteFile::parse(text, "t.routes.yaml")
}

/// The error, checked to name the file, with (line, column, key).
fn err(text: &str) -> (usize, usize, String, String) {
    let e = parse(text).expect_err(text);
    assert_eq!(e.loc.file.to_str(), Some("t.routes.yaml"));
    assert!(e.to_string().starts_with("t.routes.yaml:"), "{e}");
    (e.loc.line, e.loc.column, e.field.clone(), e.message.clone())
}

#[test]
fn block_and_flow_styles_ipv4_and_ipv6() {
    let f = parse(
        "# uplinks
routes:
  - prefix: 10.0.0.0/8
    via: 02:00:00:00:00:01
    port: out
  - { prefix: 2001:db8::/32, via: '02:00:00:00:00:02', port: out }
  - { prefix: \"::/0\", via: 02-00-00-00-00-03, port: up }
  - { prefix: 0.0.0.0/0, via: '02:00:00:00:00:04', port: up }
",
    )
    .unwrap();
    assert_eq!(f.routes.len(), 4);
    assert_eq!(f.routes[0].via, [2, 0, 0, 0, 0, 1]);
    assert!(matches!(f.routes[1].prefix, Prefix::V6 { len: 32, .. }));
    assert_eq!(f.location(1).line, 6);
    let t = f.build().unwrap();
    assert_eq!((t.routes_v4, t.routes_v6, t.ports.len()), (2, 2, 2));
    assert_eq!(t.lookup_v4(0x0B00_0001).unwrap().mac[5], 4, "default route");
    assert!(f.check_ports(&["out", "up"]).is_ok());
    let e = f.check_ports(&["out"]).unwrap_err();
    assert_eq!((e.loc.line, e.field.as_str()), (7, "port"));
    assert!(e.message.contains("unknown port `up`"), "{e}");
    // An empty list is a file with no routes (everything is no_route).
    assert_eq!(parse("routes: []").unwrap().routes.len(), 0);
}

#[test]
fn bad_values_name_line_column_and_key() {
    let head = "routes:\n  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:01', port: a }\n";
    for (route, key, what) in [
        (
            "{ prefix: 10.0.0.1/8, via: '02:00:00:00:00:01', port: a }",
            "prefix",
            "host bits",
        ),
        (
            "{ prefix: 10.0.0.0/33, via: '02:00:00:00:00:01', port: a }",
            "prefix",
            "0..=32",
        ),
        (
            "{ prefix: '2001:db8::/129', via: '02:00:00:00:00:01', port: a }",
            "prefix",
            "0..=128",
        ),
        (
            "{ prefix: 10.0.0.0, via: '02:00:00:00:00:01', port: a }",
            "prefix",
            "ADDRESS/LENGTH",
        ),
        (
            "{ prefix: 10.0.0/8, via: '02:00:00:00:00:01', port: a }",
            "prefix",
            "bad IPv4 / IPv6",
        ),
        (
            "{ prefix: 10.0.0.0/8, via: '02:00:00:00:00:01', port: a }",
            "prefix",
            "duplicate prefix 10.0.0.0/8 (first at line 2)",
        ),
        (
            "{ prefix: 11.0.0.0/8, via: '02:00:00:00:01', port: a }",
            "via",
            "bad MAC",
        ),
        ("{ prefix: 11.0.0.0/8, via: zz, port: a }", "via", "bad MAC"),
        (
            "{ prefix: 11.0.0.0/8, via: '', port: a }",
            "via",
            "needs a value",
        ),
        (
            "{ prefix: 11.0.0.0/8, via: '02:00:00:00:00:01', port: }",
            "port",
            "needs a value",
        ),
        (
            "{ prefix: 11.0.0.0/8, via: '02:00:00:00:00:01' }",
            "port",
            "missing",
        ),
        ("{ via: '02:00:00:00:00:01', port: a }", "prefix", "missing"),
    ] {
        let text = format!("{head}  - {route}\n");
        let (line, col, field, msg) = err(&text);
        assert_eq!((line, field.as_str()), (3, key), "{route}: {msg}");
        assert!(col > 0, "{route}");
        assert!(msg.contains(what), "{route}: {msg}");
    }
}

#[test]
fn bad_structure_names_the_key() {
    let (line, _, field, _) =
        err("routes:\n  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:01', port: a, metric: 5 }\n");
    assert_eq!((line, field.as_str()), (2, "metric"));
    let (line, _, field, _) = err("route:\n  - { prefix: 10.0.0.0/8 }\n");
    assert_eq!((line, field.as_str()), (1, "route"));
    let (_, _, field, _) = err("routes: 5\n");
    assert_eq!(field, "routes");
    let (_, _, field, msg) = err("");
    assert_eq!(field, "routes");
    assert!(msg.contains("missing"));
    let (line, _, _, _) = err("routes:\n  - { prefix: 10.0.0.0/8\n");
    assert!(line >= 2);
    let (line, _, field, _) = err("routes:\n  - prefix: 10.0.0.0/8\n    prefix: 11.0.0.0/8\n    via: '02:00:00:00:00:01'\n    port: a\n");
    assert_eq!((line, field.as_str()), (3, "prefix"));
    let (line, _, field, _) = err("routes:\n  - [10.0.0.0/8]\n");
    assert_eq!(line, 2, "{field}");
}

#[test]
fn files_missing_huge_or_not_text_are_refused() {
    let dir = std::env::temp_dir().join(format!("pw-route-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = RouteFile::load(dir.join("none.yaml")).unwrap_err();
    assert!(e.to_string().contains("none.yaml"), "{e}");
    // Larger than the bound: refused after reading at most the bound (a sparse file).
    let big = dir.join("big.yaml");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(MAX_ROUTE_FILE_BYTES + 1).unwrap();
    let e = RouteFile::load(&big).unwrap_err();
    assert!(e.message.contains("larger than"), "{e}");
    std::fs::remove_file(&big).unwrap();
    // A device that never ends.
    let e = RouteFile::load("/dev/zero").unwrap_err();
    assert!(e.message.contains("larger than"), "{e}");
    let bin = dir.join("bin.yaml");
    std::fs::File::create(&bin)
        .unwrap()
        .write_all(b"routes:\n  - \xff\xfe\n")
        .unwrap();
    let e = RouteFile::load(&bin).unwrap_err();
    assert_eq!((e.loc.line, e.message.as_str()), (2, "not UTF-8 text"));
    let ok = dir.join("ok.yaml");
    std::fs::write(
        &ok,
        "routes:\n  - { prefix: 10.0.0.0/8, via: '02:00:00:00:00:01', port: a }\n",
    )
    .unwrap();
    assert_eq!(RouteFile::load(&ok).unwrap().routes.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `n` routes of a BGP table's shape written to a route file in a fresh folder: (folder, file).
fn table_file(tag: &str, routes: &[flow_rules::route::Route]) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("pw-route-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("table.routes.yaml");
    std::fs::write(&path, synth::to_yaml(routes)).unwrap();
    (dir, path)
}

/// Loads `n` routes of a BGP table's shape and checks the table against the routes: the count,
/// where the last route is, and 20,000 lookups against a longest-prefix match by hash set.
fn load_and_check(tag: &str, n: usize) {
    let routes = synth::bgp_v4_routes(n, 7);
    let (dir, path) = table_file(tag, &routes);
    let t0 = std::time::Instant::now();
    let f = RouteFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let t = f.build().unwrap();
    eprintln!("{n} routes loaded and built in {:.1?}", t0.elapsed());
    assert_eq!((t.routes_v4, t.routes_v6, t.ports.len()), (n, 0, 2));
    assert_eq!(f.location(n - 1).line, n + 1);
    let net = |r: &flow_rules::route::Route| match r.prefix {
        Prefix::V4 { addr, len } => (u32::from(addr), len),
        Prefix::V6 { .. } => unreachable!("IPv4 only"),
    };
    let by: HashMap<(u32, u8), u8> = routes.iter().map(|r| (net(r), r.via[5])).collect();
    let mut s = 99u64;
    let mut rnd = || {
        s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (s >> 32) as u32
    };
    for i in 0..20_000 {
        // Half inside a route's network, half anywhere.
        let a = if i % 2 == 0 {
            net(&routes[rnd() as usize % n]).0 | (rnd() & 0xF)
        } else {
            rnd()
        };
        let want = (0..=32u8)
            .rev()
            .find_map(|l| by.get(&(a & u32::MAX.checked_shl(32 - u32::from(l)).unwrap_or(0), l)));
        let got = t.lookup_v4(a).map(|h| h.mac[5]);
        assert_eq!(got, want.copied(), "{}", std::net::Ipv4Addr::from(a));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The YAML parser's default node budget once refused any route file past 35,713 routes,
/// blaming the key `port`; 100,000 routes (a debug build's few seconds) load now.
#[test]
fn a_table_past_the_parsers_default_budget_loads() {
    load_and_check("100k", 100_000);
}

/// A full IPv4 Internet table, 1.2M routes (~80 MB): too slow for a debug test run; run it with
/// `cargo test --release -p flow-rules --test route_file -- --ignored`.
#[test]
#[ignore]
fn a_full_internet_table_loads() {
    load_and_check("full", 1_200_000);
}

/// One route past [`MAX_ROUTES`]: the error names the limit, at the route past it, with the key
/// `routes` (not the key `port` where the parser's budget ran out). ~150 MB of YAML: run with
/// `--release -- --ignored`; the limit's logic is tested at a small limit in the library.
#[test]
#[ignore]
fn a_file_over_the_route_limit_names_the_limit() {
    let routes = synth::bgp_v4_routes(MAX_ROUTES + 1, 3);
    let (dir, path) = table_file("over", &routes);
    drop(routes);
    let e = RouteFile::load(&path).unwrap_err();
    assert_eq!(
        (e.loc.line, e.field.as_str()),
        (MAX_ROUTES + 2, "routes"),
        "{e}"
    );
    assert!(
        e.message.contains(&format!(
            "more than {MAX_ROUTES} routes, the most a route file may hold"
        )),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
