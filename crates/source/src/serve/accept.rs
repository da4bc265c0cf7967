//! The accept loop of the Source's server: every connection speaks HTTP/1.1, or HTTP/2 over
//! cleartext with prior knowledge (h2c, RFC 9113 §3.3: what `sync --http2-prior-knowledge`
//! speaks), told apart by the connection preface; with a certificate ([`crate::serve::tls`]),
//! the same over TLS (HTTP/2 offered by ALPN, RFC 9113 §3.2).
//!
//! HTTP/2 lets one connection carry many requests at once, each with a response the server has
//! started and may not be able to send (the client controls the flow-control windows, RFC 9113
//! §5.2, and may advertise none). What one connection can make the server hold is bounded here:
//!
//! - at most [`H2_MAX_STREAMS`] streams at once (SETTINGS_MAX_CONCURRENT_STREAMS; a client that
//!   opens more gets them refused);
//! - at most [`H2_MAX_SEND_BUF`] of response data buffered per stream waiting for the client's
//!   window (the server's handlers read at most 64 KiB of a file in one go and stream the rest,
//!   so a response whose window stays shut holds at most that and an open file);
//! - request bodies (none is needed: the server answers `GET` and `HEAD`, the embedded hub takes
//!   forms of at most 64 KiB) at most [`H2_STREAM_WINDOW`] per stream and
//!   [`H2_CONNECTION_WINDOW`] per connection in flight (the windows the server advertises);
//! - the request head at most 16 KiB of header fields (hyper's default for HTTP/2).
//!
//! So a connection holds at most about [`H2_MAX_STREAMS`] × 64 KiB of response bodies, plus a
//! compressor per gzip response, whatever the client does. A connection that makes no read or
//! write progress for the idle timeout is closed ([`IdleListener`]), on either protocol.
//! HTTP/1.1 answers one request at a time per connection and keeps hyper's defaults (at most
//! 100 header fields, a 408 KiB buffer for the request head).

use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use resourcesync_websub::access::AccessLog;
use resourcesync_websub::listener::IdleListener;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

/// Concurrent HTTP/2 streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS, RFC 9113 §6.5.2);
/// hyper's default is 200. `sync` keeps at most 32 downloads in flight by default.
pub const H2_MAX_STREAMS: u32 = 32;

/// Response bytes buffered per HTTP/2 stream while the client's window is shut (hyper's default
/// is 400 KiB).
pub const H2_MAX_SEND_BUF: usize = 64 * 1024;

/// The receive window of an HTTP/2 stream (SETTINGS_INITIAL_WINDOW_SIZE): request body bytes a
/// client may send ahead on one stream (hyper's default is 1 MiB).
pub const H2_STREAM_WINDOW: u32 = 64 * 1024;

/// The receive window of an HTTP/2 connection, for all its streams together (hyper's default
/// is 1 MiB).
pub const H2_CONNECTION_WINDOW: u32 = 256 * 1024;

/// The connection settings of every connection the server accepts.
fn builder() -> Builder<TokioExecutor> {
    let mut b = Builder::new(TokioExecutor::new());
    b.http2()
        .max_concurrent_streams(H2_MAX_STREAMS)
        .max_send_buf_size(H2_MAX_SEND_BUF)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .adaptive_window(false);
    b
}

/// Accepts connections from `listener` and serves `router` on each until `stop` is cancelled;
/// then accepts no more, lets every open connection finish its requests in progress (HTTP/2:
/// GOAWAY, RFC 9113 §6.8) and returns when all have closed. With `tls`, every connection first
/// completes a TLS handshake (at most [`crate::serve::tls::HANDSHAKE_TIMEOUT`]); one that does
/// not (a plain-HTTP client, a stalled client) is closed.
pub async fn serve(
    mut listener: IdleListener,
    router: Router,
    stop: CancellationToken,
    tls: Option<crate::serve::tls::Tls>,
) {
    let builder = Arc::new(builder());
    let acceptor = tls.map(|t| t.acceptor());
    // Every connection task holds a receiver; `closed()` resolves when the last one is gone.
    let (open_tx, open_rx) = tokio::sync::watch::channel(());
    loop {
        let (io, addr) = tokio::select! {
            // Accept errors (a full file descriptor table) are retried by the listener.
            c = axum::serve::Listener::accept(&mut listener) => c,
            () = stop.cancelled() => break,
        };
        // Each request in the access log (resourcesync_websub::access), when it is on.
        let service = TowerToHyperService::new(AccessLog::new(router.clone(), addr));
        let (builder, stop, open) = (builder.clone(), stop.clone(), open_rx.clone());
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let result = match acceptor {
                None => connection(&builder, io, service, &stop).await,
                Some(acceptor) => {
                    let handshake = tokio::select! {
                        r = tokio::time::timeout(
                            crate::serve::tls::HANDSHAKE_TIMEOUT,
                            acceptor.accept(io),
                        ) => r,
                        () = stop.cancelled() => return,
                    };
                    match handshake {
                        Ok(Ok(io)) => connection(&builder, io, service, &stop).await,
                        Ok(Err(e)) => {
                            tracing::debug!(%addr, "TLS handshake failed: {e}");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%addr, "TLS handshake timed out");
                            return;
                        }
                    }
                }
            };
            if let Err(e) = result {
                tracing::debug!(%addr, "connection ended: {e}");
            }
            drop(open);
        });
    }
    drop(open_rx);
    drop(listener);
    open_tx.closed().await;
}

/// Serves one connection (cleartext or TLS) until it ends, or gracefully once `stop` is
/// cancelled.
async fn connection<I>(
    builder: &Builder<TokioExecutor>,
    io: I,
    service: TowerToHyperService<AccessLog>,
    stop: &CancellationToken,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn = builder.serve_connection(TokioIo::new(io), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => r,
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    }
}
