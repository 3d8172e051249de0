//! Shared by the IPFIX tests: sample flows, a local UDP socket standing in for the collector,
//! pcap files, and the external tools (tshark, nfcapd, nfdump), which CI must have.

#![allow(dead_code)]

use pktwarp_flow::ipfix::{EndReason, Exporter, FlowRecord, IpfixConfig};
use std::io::Write;
use std::net::{IpAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A flow with the given addresses and ports; counters and times derived from `n`.
pub fn flow(src: &str, dst: &str, sp: u16, dp: u16, proto: u8, n: u64) -> FlowRecord {
    FlowRecord {
        vlan: (n % 4095) as u16,
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        src_port: sp,
        dst_port: dp,
        protocol: proto,
        packets: n,
        octets: n * 100 + 7,
        rev_packets: n / 2,
        rev_octets: n * 50 + 3,
        start_ms: 1_700_000_000_000 + n * 1000,
        end_ms: 1_700_000_000_000 + n * 1000 + 250,
        tcp_flags: if proto == 6 { 0x1b } else { 0 },
        rev_tcp_flags: if proto == 6 { 0x12 } else { 0 },
        end_reason: if proto == 6 {
            EndReason::EndOfFlow
        } else {
            EndReason::IdleTimeout
        },
    }
}

/// IPv4 and IPv6 flows of TCP, UDP, ICMP and ICMPv6 (ICMP's type and code in the
/// destination port, as NetFlow exporters put them).
pub fn sample_flows() -> Vec<FlowRecord> {
    let mut v = vec![];
    for i in 0..40u64 {
        let a = format!("10.1.{}.{}", i / 200, 1 + i % 200);
        let a6 = format!("2001:db8:{i:x}::1");
        v.push(flow(&a, "192.0.2.80", 40_000 + i as u16, 443, 6, i + 1));
        v.push(flow(
            &a6,
            "2001:db8:ffff::53",
            50_000 + i as u16,
            53,
            17,
            i + 2,
        ));
        if i % 5 == 0 {
            v.push(flow(&a, "198.51.100.1", 0, 8 << 8, 1, i + 3));
            v.push(flow(&a6, "2001:db8:ffff::1", 0, 128 << 8, 58, i + 4));
        }
    }
    v
}

/// A local UDP socket that receives what the exporter sends.
pub struct Sink {
    pub socket: UdpSocket,
}

impl Sink {
    pub fn new() -> Sink {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        Sink { socket }
    }

    pub fn port(&self) -> u16 {
        self.socket.local_addr().unwrap().port()
    }

    /// Every datagram received until none comes for 200 ms.
    pub fn datagrams(&self) -> Vec<Vec<u8>> {
        let mut out = vec![];
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = self.socket.recv(&mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }
}

/// Exports `flows` to 127.0.0.1:`port` with `cfg` changed by `f`, in one poll; returns the
/// counters.
pub fn export_to(
    port: u16,
    flows: &[FlowRecord],
    f: impl FnOnce(&mut IpfixConfig),
) -> pktwarp_flow::ipfix::IpfixStats {
    let mut cfg = IpfixConfig::new(format!("127.0.0.1:{port}"));
    f(&mut cfg);
    cfg.queue = cfg.queue.max(flows.len());
    let (mut ex, q) = Exporter::new(&cfg).unwrap();
    for r in flows {
        q.try_push(r.clone()).unwrap();
    }
    ex.poll();
    ex.counters().snapshot()
}

/// A pcap file (microsecond timestamps, Ethernet) of `frames` (timestamp in µs, bytes).
pub fn write_pcap(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(&0xa1b2_c3d4u32.to_le_bytes()).unwrap();
    f.write_all(&2u16.to_le_bytes()).unwrap();
    f.write_all(&4u16.to_le_bytes()).unwrap();
    f.write_all(&[0; 8]).unwrap();
    f.write_all(&65535u32.to_le_bytes()).unwrap();
    f.write_all(&1u32.to_le_bytes()).unwrap();
    for (us, b) in frames {
        f.write_all(&((us / 1_000_000) as u32).to_le_bytes())
            .unwrap();
        f.write_all(&((us % 1_000_000) as u32).to_le_bytes())
            .unwrap();
        f.write_all(&(b.len() as u32).to_le_bytes()).unwrap();
        f.write_all(&(b.len() as u32).to_le_bytes()).unwrap();
        f.write_all(b).unwrap();
    }
    f.flush().unwrap();
}

/// The frames of a pcap file written by [`write_pcap`] or any little-endian microsecond pcap:
/// (timestamp in µs, bytes).
pub fn read_pcap(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let d = std::fs::read(path).unwrap();
    assert_eq!(
        &d[0..4],
        &0xa1b2_c3d4u32.to_le_bytes(),
        "{}",
        path.display()
    );
    let mut at = 24;
    let mut out = vec![];
    while at + 16 <= d.len() {
        let w = |o: usize| u32::from_le_bytes(d[at + o..at + o + 4].try_into().unwrap());
        let (sec, usec, incl) = (w(0), w(4), w(8) as usize);
        let us = u64::from(sec) * 1_000_000 + u64::from(usec);
        out.push((us, d[at + 16..at + 16 + incl].to_vec()));
        at += 16 + incl;
    }
    out
}

/// Ethernet / IPv4 / UDP frame from 127.0.0.1:`sport` to 127.0.0.1:`dport` carrying `payload`.
pub fn udp_frame(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([127, 0, 0, 1], [127, 0, 0, 1], 64)
        .udp(sport, dport);
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, payload).unwrap();
    v
}

/// Whether an external tool runs here. Missing: in CI the test fails; elsewhere it says on
/// stderr that it did not run, records its name in the not-run file (the test script's
/// summary) and the test returns.
pub fn have_tool(tool: &str, test: &str) -> bool {
    let ok = Command::new(tool)
        .arg(if tool == "tshark" { "-v" } else { "-V" })
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return true;
    }
    let why = format!("{tool} is not installed (Debian package; scripts/install-deps.sh)");
    if flow_rules::input::in_ci() {
        panic!("{test}: {why}; CI requires it");
    }
    eprintln!("not run: {test}: {why}");
    let file = flow_rules::input::not_run_record();
    if let Some(d) = file.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    // `binary::test`, as the corpus tests record themselves (cargo's hash cut off the name).
    let exe = std::env::current_exe().unwrap_or_default();
    let stem = exe
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let bin = stem.rsplit_once('-').map_or(stem.as_str(), |(b, _)| b);
    let line = format!("{bin}::{test}\n");
    let r = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = r {
        eprintln!("cannot record {test} in {}: {e}", file.display());
    }
    false
}

/// A fresh temporary folder for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-ipfix-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs a command and returns its stdout; fails the test with its stderr when it fails.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The address as nfdump and tshark print it.
pub fn addr(a: IpAddr) -> String {
    a.to_string()
}

/// UTC calendar time of `ms` since the UNIX epoch: (year, month, day, hour, minute, second).
pub fn utc(ms: u64) -> (i64, u32, u32, u32, u32, u32) {
    let secs = (ms / 1000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400) as u32);
    // Days to civil date (proleptic Gregorian, eras of 400 years).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem / 60 % 60, rem % 60)
}

/// A running nfcapd (nfdump's collector) on a loopback port, writing into its own folder.
pub struct Nfcapd {
    child: std::process::Child,
    pub dir: PathBuf,
    pub port: u16,
}

impl Nfcapd {
    /// Starts nfcapd and waits until it listens (its port can no longer be bound).
    pub fn start(name: &str) -> Nfcapd {
        let dir = temp_dir(name);
        for _ in 0..5 {
            let port = UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new("nfcapd")
                .args(["-b", "127.0.0.1", "-p", &port.to_string(), "-w"])
                .arg(&dir)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("nfcapd starts");
            for _ in 0..200 {
                if UdpSocket::bind(("127.0.0.1", port)).is_err() {
                    return Nfcapd { child, dir, port };
                }
                if child.try_wait().unwrap().is_some() {
                    break; // the port was taken meanwhile: try another
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("nfcapd did not start listening");
    }

    /// Stops nfcapd with SIGTERM (it writes out its file) once it has read what was sent, and
    /// returns the flows `nfdump` reads from its folder.
    pub fn stop_and_read(mut self) -> Vec<NfFlow> {
        // What was sent may still sit in nfcapd's socket buffer: wait until it has read it
        // all (SIGTERM ends its receive loop), then a moment for the last datagram's records.
        for _ in 0..200 {
            if self.rx_queue() == Some(0) {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        std::thread::sleep(Duration::from_millis(300));
        run(Command::new("kill").args(["-TERM", &self.child.id().to_string()]));
        let mut waited = 0;
        while self.child.try_wait().unwrap().is_none() {
            assert!(waited < 200, "nfcapd did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
            waited += 1;
        }
        let out = run(Command::new("nfdump")
            .env("TZ", "UTC")
            .arg("-R")
            .arg(&self.dir)
            .args(["-o", "csv"]));
        parse_nfdump_csv(&out)
    }
}

impl Nfcapd {
    /// Bytes waiting in the receive queue of nfcapd's socket (`/proc/net/udp`, Linux).
    fn rx_queue(&self) -> Option<u64> {
        let table = std::fs::read_to_string("/proc/net/udp").ok()?;
        let local = format!("0100007F:{:04X}", self.port);
        table.lines().skip(1).find_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            if t.get(1) != Some(&local.as_str()) {
                return None;
            }
            let (_, rx) = t.get(4)?.split_once(':')?;
            u64::from_str_radix(rx, 16).ok()
        })
    }
}

impl Drop for Nfcapd {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One flow as nfdump prints it in csv.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NfFlow {
    /// First seen, `YYYY-MM-DD hh:mm:ss` UTC.
    pub ts: String,
    /// Duration in ms.
    pub td_ms: u64,
    pub sa: IpAddr,
    pub da: IpAddr,
    pub sp: u16,
    pub dp: u16,
    pub pr: String,
    pub flg: String,
    pub ipkt: u64,
    pub ibyt: u64,
    pub opkt: u64,
    pub obyt: u64,
    pub svln: u16,
}

/// nfdump's csv: a header line naming the columns, a line per flow, then "Summary".
pub fn parse_nfdump_csv(out: &str) -> Vec<NfFlow> {
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().expect("csv header").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
    };
    let c = [
        "ts", "td", "sa", "da", "sp", "dp", "pr", "flg", "ipkt", "ibyt", "opkt", "obyt", "svln",
    ]
    .map(col);
    let mut flows = vec![];
    for l in lines {
        if l.is_empty() || l.starts_with("Summary") {
            break;
        }
        let v: Vec<&str> = l.split(',').map(str::trim).collect();
        let num = |i: usize| -> u64 { v[c[i]].parse().unwrap_or_else(|_| panic!("{l}")) };
        let td: f64 = v[c[1]].parse().unwrap();
        flows.push(NfFlow {
            ts: v[c[0]].to_string(),
            td_ms: (td * 1000.0).round() as u64,
            sa: v[c[2]].parse().unwrap(),
            da: v[c[3]].parse().unwrap(),
            sp: num(4) as u16,
            dp: num(5) as u16,
            pr: v[c[6]].to_string(),
            flg: v[c[7]].to_string(),
            ipkt: num(8),
            ibyt: num(9),
            opkt: num(10),
            obyt: num(11),
            svln: num(12) as u16,
        });
    }
    flows
}

/// nfdump's protocol name.
pub fn nf_proto(p: u8) -> String {
    match p {
        1 => "ICMP".into(),
        6 => "TCP".into(),
        17 => "UDP".into(),
        58 => "ICMP6".into(),
        p => p.to_string(),
    }
}

/// nfdump's TCP flags: `CEUAPRSF`, a dot for each flag not set.
pub fn nf_flags(f: u8) -> String {
    "CEUAPRSF"
        .chars()
        .enumerate()
        .map(|(i, ch)| if f & (0x80 >> i) != 0 { ch } else { '.' })
        .collect()
}
