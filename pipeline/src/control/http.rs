//! The `/metrics` and `/healthz` endpoint: hyper (HTTP/1.1) on a current-thread tokio runtime
//! on one thread of its own. A scrape renders the exposition there; the data path is never
//! involved.
//!
//! Every connection is a task, so a client can stall only its own connection, never the
//! endpoint (the limits are [`HttpLimits`], set from the `metrics:` config section):
//! - a request's header must arrive within `header_timeout`, at most `max_header_bytes` long
//!   with at most `max_headers` fields (else 431 and closed): an endless header line costs
//!   `max_header_bytes`, not the daemon's memory;
//! - a connection that moves no byte either way for `idle_timeout` is closed: an idle socket,
//!   or a client that pipelines requests and never reads the answers, is let go;
//! - at most `max_connections` are open at once; one more closes the one idle the longest
//!   (a fresh scrape always gets through, however many sockets sit open);
//! - a request hyper cannot parse is answered 400 and the connection closed.
//!
//! Stopping the server (drop) drops every connection at once: no client can hold the
//! daemon's shutdown.

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};

use super::metrics::Exposition;

const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The endpoint's limits. The defaults are [`HttpLimits::default`]; the config's `metrics:`
/// section sets the first three.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections open at once (>= 1). Default 64.
    pub max_connections: usize,
    /// A connection with no byte read or written for this long is closed. Default 30 s.
    pub idle_timeout: Duration,
    /// A request's header must be complete this long after its first byte. Default 5 s.
    pub header_timeout: Duration,
    /// Longest request header (request line included). Default 16 KiB.
    pub max_header_bytes: usize,
    /// Most header fields in one request. Default 64.
    pub max_headers: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 64,
            idle_timeout: Duration::from_secs(30),
            header_timeout: Duration::from_secs(5),
            max_header_bytes: 16 * 1024,
            max_headers: 64,
        }
    }
}

/// The running endpoint; dropping it stops it and closes every connection.
pub struct MetricsServer {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    pub addr: SocketAddr,
}

impl MetricsServer {
    /// Binds `addr` (port 0: any free port; [`MetricsServer::addr`] says which) and serves
    /// `/metrics` and `/healthz` with the default [`HttpLimits`].
    pub fn start(addr: SocketAddr, exposition: Exposition) -> anyhow::Result<Self> {
        Self::start_with(addr, exposition, HttpLimits::default())
    }

    /// As [`MetricsServer::start`], with the given limits.
    pub fn start_with(
        addr: SocketAddr,
        exposition: Exposition,
        limits: HttpLimits,
    ) -> anyhow::Result<Self> {
        let listener = bind(addr)?;
        let bound = listener.local_addr()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let (stop_tx, stop_rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("pktwarp-metrics".into())
            .spawn(move || {
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, serve(listener, exposition, limits, stop_rx));
                // Dropping the set drops every connection task, stalled or not.
                drop(local);
            })?;
        Ok(MetricsServer {
            stop: Some(stop_tx),
            thread: Some(thread),
            addr: bound,
        })
    }
}

/// Binds the listener (the error says what to change); also what `pktwarp validate` uses to
/// check `metrics.listen`.
pub fn bind(addr: SocketAddr) -> anyhow::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr).map_err(|e| {
        anyhow::anyhow!(
            "metrics.listen {addr}: cannot listen: {e} (set another `metrics.listen`, port 0 \
             for any free one, or `metrics: {{ enabled: false }}`)"
        )
    })?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One open connection, as the accept loop sees it.
struct Open {
    id: u64,
    last: Rc<Cell<Instant>>,
    close: Rc<Notify>,
}

type OpenSet = Rc<RefCell<Vec<Open>>>;

/// Removes its connection from the open set when the connection's task ends (or is dropped).
struct OpenGuard {
    set: OpenSet,
    id: u64,
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.set.borrow_mut().retain(|o| o.id != self.id);
    }
}

async fn serve(
    listener: std::net::TcpListener,
    exposition: Exposition,
    limits: HttpLimits,
    mut stop: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "metrics endpoint: cannot use the listener");
            return;
        }
    };
    let exposition = Rc::new(exposition);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_headers(limits.max_headers)
        .max_header_size(limits.max_header_bytes)
        // The read buffer: a header plus what a pipelining client sends ahead (hyper's floor
        // is 8 KiB).
        .max_buf_size((limits.max_header_bytes * 2).max(8192))
        .keep_alive(true);
    let open: OpenSet = Rc::new(RefCell::new(Vec::new()));
    let mut next_id = 0u64;
    let mut accept_errors = 0u64;
    loop {
        let stream = tokio::select! {
            _ = &mut stop => return,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of descriptors, say: keep serving the connections we have.
                    accept_errors += 1;
                    if accept_errors.is_power_of_two() {
                        tracing::warn!(error = %e, accept_errors, "metrics endpoint: accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        make_room(&open, limits.max_connections);
        let _ = stream.set_nodelay(true);
        next_id += 1;
        let last = Rc::new(Cell::new(Instant::now()));
        let close = Rc::new(Notify::new());
        open.borrow_mut().push(Open {
            id: next_id,
            last: Rc::clone(&last),
            close: Rc::clone(&close),
        });
        let guard = OpenGuard {
            set: Rc::clone(&open),
            id: next_id,
        };
        let exp = Rc::clone(&exposition);
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let resp = respond(&exp, &req);
            async move { Ok::<_, Infallible>(resp) }
        });
        let io = hyper_util::rt::TokioIo::new(Tracked {
            inner: stream,
            last: Rc::clone(&last),
        });
        let conn = http.serve_connection(io, service);
        let idle = limits.idle_timeout;
        tokio::task::spawn_local(async move {
            let _guard = guard;
            tokio::select! {
                // A client that went away or sent garbage is its own problem, not the daemon's.
                _ = conn => {}
                _ = idle_for(&last, idle) => {}
                _ = close.notified() => {}
            }
        });
    }
}

/// At the connection cap, closes the connection idle the longest.
fn make_room(open: &OpenSet, cap: usize) {
    let mut set = open.borrow_mut();
    while set.len() >= cap.max(1) {
        let Some(i) = (0..set.len()).min_by_key(|&i| set[i].last.get()) else {
            return;
        };
        // Out of the set at once, so a burst of accepts cannot pick the same one again.
        set.swap_remove(i).close.notify_one();
    }
}

/// Resolves once `last` is `timeout` in the past.
async fn idle_for(last: &Cell<Instant>, timeout: Duration) {
    loop {
        let due = last.get() + timeout;
        if Instant::now() >= due {
            return;
        }
        tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
    }
}

fn respond(exposition: &Exposition, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
        *r.status_mut() = status;
        r
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET /metrics and GET /healthz\n",
        );
    }
    match req.uri().path() {
        "/metrics" => match exposition.render() {
            Ok(body) => {
                let mut r = Response::new(Full::new(Bytes::from(body)));
                r.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static(TEXT_FORMAT),
                );
                r
            }
            Err(e) => {
                tracing::error!(error = %e, "rendering /metrics failed");
                let mut r = Response::new(Full::new(Bytes::from(format!("{e}\n"))));
                *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                r
            }
        },
        "/healthz" => text(StatusCode::OK, "ok\n"),
        _ => text(StatusCode::NOT_FOUND, "not found: try /metrics\n"),
    }
}

/// A TCP stream that records when a byte last moved either way (for the idle timeout).
struct Tracked {
    inner: TcpStream,
    last: Rc<Cell<Instant>>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.last.set(Instant::now());
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.last.set(Instant::now());
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.last.set(Instant::now());
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
impl HttpLimits {
    /// The limits `metrics:` sets (header size and count are fixed).
    pub fn of(m: &crate::config::settings::MetricsConfig) -> HttpLimits {
        HttpLimits {
            max_connections: m.max_connections,
            idle_timeout: std::time::Duration::from_millis(m.idle_timeout_ms),
            header_timeout: std::time::Duration::from_millis(m.header_timeout_ms),
            ..HttpLimits::default()
        }
    }
}
