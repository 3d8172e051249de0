//! The slow path into a Linux TAP device (`output.to_host: { tap: { name: IFNAME } }`): inside
//! a network namespace this test makes, the binary reruns itself, runs a config whose ACL sends
//! the UDP frames to the host, captures what arrives on the TAP interface with an AF_PACKET
//! socket, and checks those frames equal, in order and in number, what the same config writes
//! to a pcap slow path (and what the summary counts). The config errors (bad names, two
//! destinations, unknown keys, an interface that is not a TAP) name the file, line and key.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pipeline::config;
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;
use pipeline::internal::testdata::{capture_frames, ip, run_child_in_netns, Netns};

const CHILD_ENV: &str = "PKTWARP_SLOW_TAP_CHILD";
const IFACE: &str = "pw-slow0";

const RULES: &str = "rules:
  - { name: udp-to-host, proto: udp, action: to-host }
";

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-tap-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A config: generated traffic, the ACL sending UDP to the host, `to_host` as given.
fn config(dir: &Path, to_host: &str) -> PathBuf {
    std::fs::write(dir.join("rules.yaml"), RULES).unwrap();
    let yaml = format!(
        "ports:\n  - name: g\n    gen: {{ count: 1200, seed: 7, size: 160 }}\n\
         \x20 - name: out\n    pcap: {{ tx: {{ path: out.pcap }} }}\n\
         queues: {{ count: 1, burst: 16 }}\n\
         pipeline:\n  - parse\n  - acl: {{ rules: rules.yaml }}\n  - count\n\
         executor: {{ kind: cpu }}\n\
         output:\n  port: out\n  to_host: {to_host}\n"
    );
    let p = dir.join("c.yaml");
    std::fs::write(&p, yaml).unwrap();
    p
}

fn load_err(dir: &Path, to_host: &str) -> String {
    match config::load(&config(dir, to_host)) {
        Ok(_) => panic!("config with to_host {to_host} accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn tap_config_errors_name_the_file_line_and_key() {
    let dir = tmpdir("cfg");
    let file = dir.join("c.yaml").display().to_string();
    // The `to_host:` line of the config is line 14.
    let at = format!("{file}:14:");
    let e = load_err(&dir, "{ tap: { name: pw-slow-path-too-long } }");
    assert!(e.starts_with(&at), "{e}");
    assert!(
        e.contains("output.to_host.tap.name") && e.contains("at most 15"),
        "{e}"
    );
    let e = load_err(&dir, "{ tap: { name: 'a/b' } }");
    assert!(
        e.contains("output.to_host.tap.name") && e.contains("'/'"),
        "{e}"
    );
    let e = load_err(&dir, "{ tap: { name: '' } }");
    assert!(e.contains("empty"), "{e}");
    let e = load_err(&dir, "{ pcap: slow.pcap, tap: { name: pw0 } }");
    assert!(e.starts_with(&at) && e.contains("exactly one of"), "{e}");
    let e = load_err(&dir, "{ tap: { nam: pw0 } }");
    assert!(e.contains(&file) && e.contains("nam"), "{e}");
    let e = load_err(&dir, "{ tap: {} }");
    assert!(e.contains(&file) && e.contains("name"), "{e}");
    let e = load_err(&dir, "{ tap: pw0 }");
    assert!(e.contains(&file), "{e}");
    // A good one parses (opening it is the run's business).
    config::load(&config(&dir, "{ tap: { name: pw-slow0 } }")).unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

/// An AF_PACKET socket on `iface` receiving every frame (non-blocking).
fn capture_socket(iface: &str) -> Result<OwnedFd, String> {
    let name = std::ffi::CString::new(iface).map_err(|e| e.to_string())?;
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain libc calls with valid arguments; the descriptor is owned by `fd` at once.
    unsafe {
        let ifindex = libc::if_nametoindex(name.as_ptr());
        if ifindex == 0 {
            return Err(format!("no interface {iface}"));
        }
        let raw = libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            i32::from(proto),
        );
        if raw < 0 {
            return Err(format!("AF_PACKET: {}", std::io::Error::last_os_error()));
        }
        let fd = OwnedFd::from_raw_fd(raw);
        // Room for every frame of the run: they are read only after it.
        let size: libc::c_int = 64 << 20;
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        );
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        let rc = libc::bind(
            raw,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        );
        if rc < 0 {
            return Err(format!("bind: {}", std::io::Error::last_os_error()));
        }
        Ok(fd)
    }
}

/// The frames the socket holds that came in on the interface (the kernel's own outgoing
/// frames, such as IPv6 router solicitations, are left out), until it is quiet for 200 ms.
fn drain(fd: &OwnedFd) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_millis(200) {
        // SAFETY: recvfrom into a buffer of its stated length and a sockaddr_ll of its size.
        let (n, sll) = unsafe {
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            let n = libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut sll as *mut libc::sockaddr_ll).cast(),
                &mut len,
            );
            (n, sll)
        };
        if n < 0 {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        quiet_since = Instant::now();
        if sll.sll_pkttype != libc::PACKET_OUTGOING {
            out.push(buf[..n as usize].to_vec());
        }
    }
    out
}

fn run(cfg: &Path) -> (daemon::Summary, Option<OwnedFd>) {
    let cfg = config::load(cfg).unwrap_or_else(|e| panic!("{e}"));
    let p = daemon::prepare(cfg).unwrap();
    let ports = daemon::open_ports(&p.cfg).unwrap_or_else(|e| panic!("{e:#}"));
    // The TAP exists once the ports are open: listen on it before anything is sent.
    let sock = capture_socket(IFACE).ok();
    let shared = CpuShared::new(&p.cpu_spec());
    (daemon::run_cpu(&p, &shared, ports), sock)
}

#[test]
#[ignore = "run by to_host_frames_reach_a_tap_device inside its network namespace"]
fn slow_tap_child() {
    if std::env::var(CHILD_ENV).is_err() {
        return;
    }
    let dir = tmpdir("child");
    // Can this kernel make a TAP here at all? (gVisor and some containers refuse.)
    if let Err(e) = pipeline::internal::port::tap::TapTx::open("pw-probe0") {
        println!("SLOW-TAP-SKIP: {e}");
        return;
    }
    // The reference: the same run with a pcap slow path.
    let (want_s, _) = run(&config(&dir, "{ pcap: slow.pcap }"));
    let want = capture_frames(&dir.join("slow.pcap")).unwrap();
    assert!(want.len() > 100, "{} to-host frames", want.len());
    assert_eq!(want.len() as u64, want_s.queues[0].to_host);

    let (s, sock) = run(&config(&dir, &format!("{{ tap: {{ name: {IFACE} }} }}")));
    let sock = sock.expect("capture socket on the TAP");
    let got = drain(&sock);
    let q = &s.queues[0];
    let tally = s
        .outputs
        .iter()
        .find(|t| t.role == "to_host")
        .expect("to_host tally");
    assert_eq!((tally.name.as_str(), tally.failed), ("tap:pw-slow0", 0));
    assert_eq!(tally.frames, q.to_host);
    assert_eq!(q.to_host, want.len() as u64, "same frames to the host");
    assert_eq!(
        got.len(),
        want.len(),
        "every to-host frame arrived on the TAP"
    );
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "frame {i}");
    }
    println!(
        "SLOW-TAP-OK: {} frames on {IFACE}, equal to the pcap slow path",
        got.len()
    );

    // An interface of another type under that name: the error names the file, line and key.
    let cfg = config::load(&config(&dir, "{ tap: { name: lo } }")).unwrap();
    let p = daemon::prepare(cfg).unwrap();
    let e = format!(
        "{:#}",
        daemon::open_ports(&p.cfg).err().expect("lo refused")
    );
    assert!(
        e.contains("c.yaml:14:") && e.contains("output.to_host.tap.name"),
        "{e}"
    );
    assert!(e.contains("not a TAP device"), "{e}");
    // `pktwarp validate`'s preflight finds it too.
    let e = pipeline::daemon::preflight(&p.cfg).unwrap_err().to_string();
    assert!(
        e.contains("output.to_host.tap.name") && e.contains("lo"),
        "{e}"
    );
    println!("SLOW-TAP-OK: `lo` refused: {e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn to_host_frames_reach_a_tap_device() {
    let ns = format!("pwslow{}", std::process::id());
    if let Err(e) = ip(&["netns", "add", &ns]) {
        pipeline::internal::testdata::skip(
            file!(),
            "to_host_frames_reach_a_tap_device",
            &format!("cannot create a network namespace here: {e}"),
        );
        return;
    }
    let _guard = Netns(ns.clone());
    let (ok, stdout, stderr) = run_child_in_netns(&ns, "slow_tap_child", CHILD_ENV);
    assert!(ok, "child failed:\n{stdout}\n{stderr}");
    if let Some(line) = stdout.lines().find(|l| l.contains("SLOW-TAP-SKIP")) {
        pipeline::internal::testdata::skip(
            file!(),
            "to_host_frames_reach_a_tap_device",
            &format!("{line}\n{stderr}"),
        );
        return;
    }
    for l in stdout.lines().filter(|l| l.contains("SLOW-TAP-")) {
        println!("{l}");
    }
    assert_eq!(
        stdout.matches("SLOW-TAP-OK").count(),
        2,
        "child did not run its checks:\n{stdout}\n{stderr}"
    );
}
