//! The `/metrics` endpoint under hostile clients, in-process: a client that pipelines hundreds
//! of requests without reading, an endless header line, 1500 idle sockets, garbage, an idle
//! keep-alive socket. Each must leave every other scrape served, memory and threads bounded.
//! (With the tiny_http server these stalled every scrape, grew the process by ~1 GB, and left a
//! thread per socket behind.)

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pipeline::control::{Control, ControlSetup};
use pipeline::daemon;
use pipeline::internal::executor::cpu::CpuShared;

/// The tests measure this process's threads and memory: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pktwarp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A control plane serving /metrics on a free loopback port (no executor runs: the endpoint
/// renders the counters as they are).
struct Endpoint {
    control: Control,
    addr: SocketAddr,
    _shared: std::sync::Arc<CpuShared>,
}

fn endpoint(dir: &Path, metrics: &str) -> Endpoint {
    let p = dir.join("cfg.yaml");
    std::fs::write(
        &p,
        format!(
            "ports:
  - name: wire
    gen: {{ rate: {{ pps: 1000 }}, size: 64 }}
queues: {{ count: 2 }}
pipeline: [parse, count]
executor: {{ kind: cpu }}
metrics: {{ listen: '127.0.0.1:0', {metrics} }}
"
        ),
    )
    .unwrap();
    let cfg = pipeline::config::load(&p).unwrap();
    let prepared = daemon::prepare(cfg).unwrap();
    let shared = CpuShared::new(&prepared.cpu_spec());
    let control = Control::start(
        &prepared,
        &shared,
        &["wire".to_string()],
        ControlSetup {
            install_signals: false,
            probe: None,
            on_fatal: None,
        },
    )
    .unwrap();
    let addr = control.metrics_addr().unwrap();
    Endpoint {
        control,
        addr,
        _shared: shared,
    }
}

/// One request on a fresh connection; the whole answer (5 s at most).
fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("answer within 5 s");
    String::from_utf8_lossy(&out).into_owned()
}

/// Shrinks the socket's receive buffer, so a client that does not read backs up the server's
/// writes after a few answers (loopback buffers otherwise take megabytes).
fn small_receive_buffer(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 4096;
    // SAFETY: a valid socket descriptor owned by `s`, and a pointer to a c_int with its size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt SO_RCVBUF");
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn a_pipelining_client_that_never_reads_stalls_nobody() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("http-pipeline");
    let ep = endpoint(&dir, "idle_timeout_ms: 60000");
    let mut hog = TcpStream::connect(ep.addr).unwrap();
    small_receive_buffer(&hog);
    let one = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    hog.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    // 2000 requests sent (as many as the server reads), no answer read: the answers fill the
    // socket buffers, and the server cannot write the rest.
    let mut sent = 0;
    for _ in 0..2000 {
        if hog.write_all(one.as_bytes()).is_err() {
            break;
        }
        sent += 1;
    }
    assert!(sent > 0);
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    for _ in 0..5 {
        let m = get(ep.addr, "/metrics");
        assert!(m.starts_with("HTTP/1.1 200"), "{m}");
        assert!(m.contains("pktwarp_"), "{m}");
        let h = get(ep.addr, "/healthz");
        assert!(h.starts_with("HTTP/1.1 200") && h.ends_with("ok\n"), "{h}");
    }
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "10 requests took {:?} beside the hog",
        t.elapsed()
    );
    // Stopping the endpoint does not wait for the hog.
    let t = Instant::now();
    ep.control.finish();
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "stop took {:?}",
        t.elapsed()
    );
    drop(hog);
}

#[test]
fn an_endless_header_line_is_cut_off_with_431() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("http-header");
    let ep = endpoint(&dir, "");
    let before = rss_kib();
    let mut s = TcpStream::connect(ep.addr).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nX-Long: ").unwrap();
    let chunk = vec![b'a'; 64 * 1024];
    let mut written = 0usize;
    // Up to 256 MiB: the server must give up long before.
    while written < 256 << 20 {
        match s.write(&chunk) {
            Ok(n) => written += n,
            Err(_) => break,
        }
    }
    assert!(
        written < 16 << 20,
        "the server took {written} bytes of one header"
    );
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 431"), "answer: {answer:?}");
    let grown = rss_kib().saturating_sub(before);
    assert!(grown < 32 * 1024, "memory grew by {grown} KiB");
    // And the endpoint still serves.
    assert!(get(ep.addr, "/metrics").starts_with("HTTP/1.1 200"));
}

#[test]
fn many_idle_sockets_leave_no_threads_and_scrapes_get_through() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("http-idle");
    let ep = endpoint(&dir, "max_connections: 64");
    let base = threads();
    let mut idle = Vec::new();
    for _ in 0..1500 {
        match TcpStream::connect_timeout(&ep.addr, Duration::from_secs(2)) {
            Ok(s) => idle.push(s),
            Err(e) => panic!("connect {} failed: {e}", idle.len()),
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let m = get(ep.addr, "/metrics");
    assert!(m.starts_with("HTTP/1.1 200"), "{m}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let now = threads();
    assert!(
        now <= base + 2,
        "threads went from {base} to {now} with 1500 idle sockets"
    );
    // The cap closed all but the newest 64: most of the idle sockets read EOF.
    let mut closed = 0;
    for s in idle.iter_mut().take(200) {
        s.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
        let mut b = [0u8; 1];
        if matches!(s.read(&mut b), Ok(0)) {
            closed += 1;
        }
    }
    assert!(
        closed >= 150,
        "only {closed} of the 200 oldest idle sockets were closed"
    );
}

#[test]
fn garbage_is_answered_400_and_closed() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("http-garbage");
    let ep = endpoint(&dir, "");
    for junk in [
        &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n"[..],
        b"HELLO WORLD\r\n\r\n",
        b"GET /metrics HTTP/9.9\r\n\r\n",
    ] {
        let mut s = TcpStream::connect(ep.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s.write_all(junk).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out)
            .expect("the server closes the connection");
        let out = String::from_utf8_lossy(&out);
        assert!(out.starts_with("HTTP/1.1 400"), "{junk:?} -> {out:?}");
    }
    let m = get(ep.addr, "/nope");
    assert!(m.starts_with("HTTP/1.1 404"), "{m}");
    let mut s = TcpStream::connect(ep.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 405"), "{out}");
}

#[test]
fn an_idle_connection_and_a_slow_header_are_closed_in_time() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("http-timeouts");
    let ep = endpoint(&dir, "idle_timeout_ms: 300, header_timeout_ms: 400");
    // Keep-alive: one answer, then silence: closed after the idle timeout.
    let mut s = TcpStream::connect(ep.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let t = Instant::now();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("closed by the server");
    assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 200"));
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "closed after {:?}",
        t.elapsed()
    );
    // A header dribbled a byte at a time, each within the idle timeout, is cut off by the
    // header timeout.
    let mut s = TcpStream::connect(ep.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let t = Instant::now();
    let mut cut = false;
    for b in b"GET /metrics HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        .iter()
        .cycle()
        .take(200)
    {
        if s.write_all(&[*b]).is_err() {
            cut = true;
            break;
        }
        let mut r = [0u8; 64];
        match s.read(&mut r) {
            Ok(_) => {
                cut = true;
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => {
                cut = true;
                break;
            }
        }
    }
    assert!(cut, "a header dribbled for {:?} was never cut", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}
