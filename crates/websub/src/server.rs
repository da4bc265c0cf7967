//! An HTTP/1.1-only server for the hub (`resourcesync hub`).
//!
//! `axum::serve` answers HTTP/2 too (cleartext, with prior knowledge) whenever hyper's `http2`
//! feature is on anywhere in the build, which the HTTP client's HTTP/2 support turns on. A hub
//! has no use for HTTP/2, and HTTP/2 lets one connection hold up to 200 streams whose responses
//! a client can leave unread (a zero flow-control window): memory the client pins for as long
//! as it keeps the connection. This server speaks HTTP/1.1 only: one request at a time per
//! connection, each response written to the socket before the next request is read. An HTTP/2
//! preface is not a valid HTTP/1.1 request: the connection is closed.
//!
//! Connections go through an [`IdleListener`] (closed after a while without progress), and a
//! request head must arrive within [`HEADER_READ_TIMEOUT`] (slowloris).

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;

use crate::access::AccessLog;
use crate::listener::IdleListener;

/// Longest wait for a whole request head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long connections still open at shutdown may finish their request.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serves `router` over HTTP/1.1 on `listener` until `shutdown` completes, then lets the
/// connections still open finish for up to [`SHUTDOWN_GRACE`].
pub async fn serve_http1(
    mut listener: IdleListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (io, remote) = tokio::select! {
            c = axum::serve::Listener::accept(&mut listener) => c,
            () = &mut shutdown => break,
        };
        let conn = builder.serve_connection(
            TokioIo::new(io),
            TowerToHyperService::new(AccessLog::new(router.clone(), remote)),
        );
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            // An error here is the client's (a malformed request, an HTTP/2 preface, a reset,
            // an idle timeout): the connection is closed, nothing else to do.
            let _ = conn.await;
        });
    }
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    #[tokio::test]
    async fn answers_http1_and_closes_an_http2_preface() {
        let inner = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = inner.local_addr().expect("addr");
        let router = Router::new().fallback(|| async { "ok" });
        tokio::spawn(serve_http1(
            IdleListener::new(inner, Duration::from_secs(60)),
            router,
            std::future::pending(),
        ));
        let mut h1 = TcpStream::connect(addr).await.expect("connect");
        h1.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), h1.read_to_end(&mut got))
            .await
            .expect("in time")
            .expect("read");
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        // HTTP/2 with prior knowledge: the preface, then SETTINGS. An HTTP/2 server answers
        // with its own SETTINGS frame (type 4); this one closes, at most after a 400.
        let mut h2 = TcpStream::connect(addr).await.expect("connect");
        h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .await
            .expect("write");
        let mut got = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(20), h2.read_to_end(&mut got))
            .await
            .expect("closed in time");
        assert!(
            r.is_ok() || got.is_empty(),
            "read {r:?} after {} bytes",
            got.len()
        );
        assert!(
            got.is_empty() || got.starts_with(b"HTTP/1.1 "),
            "an HTTP/2 answer: {got:?}"
        );
    }
}
