//! The `/metrics` endpoint: a tiny_http server on its own thread. A scrape renders the
//! exposition on this thread; the data path is never involved.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::metrics::Exposition;

pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    pub addr: SocketAddr,
}

const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

impl MetricsServer {
    /// Binds `addr` (port 0: any free port; [`MetricsServer::addr`] says which) and serves
    /// `/metrics` and `/healthz`.
    pub fn start(addr: SocketAddr, exposition: Exposition) -> anyhow::Result<Self> {
        let server = tiny_http::Server::http(addr).map_err(|e| {
            anyhow::anyhow!(
                "metrics.listen {addr}: cannot listen: {e} (set another `metrics.listen`, \
                     port 0 for any free one, or `metrics: {{ enabled: false }}`)"
            )
        })?;
        let server = Arc::new(server);
        let bound = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| anyhow::anyhow!("metrics.listen {addr}: not an IP listener"))?;
        let s = Arc::clone(&server);
        let thread = std::thread::Builder::new()
            .name("pktwarp-metrics".into())
            .spawn(move || serve(&s, &exposition))?;
        Ok(MetricsServer {
            server,
            thread: Some(thread),
            addr: bound,
        })
    }
}

fn header(k: &str, v: &str) -> Option<tiny_http::Header> {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).ok()
}

fn serve(server: &tiny_http::Server, exposition: &Exposition) {
    for req in server.incoming_requests() {
        let path = req.url().split('?').next().unwrap_or("").to_string();
        let resp = match (req.method(), path.as_str()) {
            (tiny_http::Method::Get, "/metrics") => match exposition.render() {
                Ok(body) => {
                    let mut r = tiny_http::Response::from_data(body);
                    if let Some(h) = header("Content-Type", TEXT_FORMAT) {
                        r.add_header(h);
                    }
                    r
                }
                Err(e) => {
                    tracing::error!(error = %e, "rendering /metrics failed");
                    tiny_http::Response::from_data(format!("{e}\n").into_bytes())
                        .with_status_code(500)
                }
            },
            (tiny_http::Method::Get, "/healthz") => {
                tiny_http::Response::from_data(b"ok\n".to_vec())
            }
            _ => tiny_http::Response::from_data(b"not found: try /metrics\n".to_vec())
                .with_status_code(404),
        };
        // A client that went away is its own problem, not the daemon's.
        let _ = req.respond(resp);
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
