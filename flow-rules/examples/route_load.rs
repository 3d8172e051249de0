//! Times a route file's load: `route_load FILE` reads, checks and builds it as a `route` stage
//! does and prints the routes and the seconds each step took (run under `/usr/bin/time -v` for
//! the peak memory); `route_load --gen N OUT` writes N IPv4 routes in a BGP table's shape
//! (`flow_rules::route::synth`) to OUT first, e.g. a full Internet table:
//!
//! ```text
//! cargo build --release -p flow-rules --example route_load
//! target/release/examples/route_load --gen 1200000 /tmp/full.routes.yaml
//! /usr/bin/time -v target/release/examples/route_load /tmp/full.routes.yaml
//! ```

use std::process::ExitCode;
use std::time::Instant;

use flow_rules::route::{synth, RouteFile};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [file] => load(file),
        [flag, n, out] if flag == "--gen" => {
            let Ok(n) = n.parse::<usize>() else {
                eprintln!("--gen N: `{n}` is not a count");
                return ExitCode::FAILURE;
            };
            let text = synth::to_yaml(&synth::bgp_v4_routes(n, 7));
            if let Err(e) = std::fs::write(out, &text) {
                eprintln!("{out}: {e}");
                return ExitCode::FAILURE;
            }
            println!("{n} routes, {} bytes: {out}", text.len());
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: route_load FILE | route_load --gen N OUT");
            ExitCode::from(2)
        }
    }
}

fn load(file: &str) -> ExitCode {
    let t0 = Instant::now();
    let f = match RouteFile::load(file) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let t1 = Instant::now();
    let t = match f.build() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let t2 = Instant::now();
    println!(
        "{}: {} IPv4 + {} IPv6 routes, {} next hops; read and checked in {:.2} s, built in {:.2} s \
         (IPv4 table {} MiB)",
        file,
        t.routes_v4,
        t.routes_v6,
        t.next_hops.len(),
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        t.v4.bytes() >> 20
    );
    ExitCode::SUCCESS
}
