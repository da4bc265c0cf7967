//! The access log of every server of the project (`serve`, `resourcesync hub`): one event per
//! request, target [`TARGET`], level INFO, with the fields of a common access log: `remote`
//! (the client's address), `method`, `path`, `status`, `bytes` (of the response body, as
//! sent) and `duration_ms` (from the request head to the last byte of the body, or to the
//! moment the client went away). The event is emitted when the response body is done or
//! dropped, so `bytes` counts what was actually sent.
//!
//! Nothing is measured when no subscriber wants the events (`tracing::enabled!`): the log
//! costs a check per request when it is off.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response};
use hyper::body::{Body as HttpBody, Frame, SizeHint};

/// The `tracing` target of the access log lines (`RUST_LOG=access=info`).
pub const TARGET: &str = "access";

/// `router` as a service for one connection from `remote`, logging every request.
#[derive(Debug, Clone)]
pub struct AccessLog {
    router: Router,
    remote: SocketAddr,
}

impl AccessLog {
    /// The service of one connection: `router`, each request logged with `remote`.
    pub fn new(router: Router, remote: SocketAddr) -> Self {
        AccessLog { router, remote }
    }
}

/// Whether the access log is wanted now.
fn enabled() -> bool {
    tracing::enabled!(target: "access", tracing::Level::INFO)
}

impl<B> tower_service::Service<Request<B>> for AccessLog
where
    B: HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if !enabled() {
            return Box::pin(tower_service::Service::call(
                &mut self.router,
                req.map(Body::new),
            ));
        }
        let start = Instant::now();
        let method = req.method().to_string();
        let path = req.uri().path().to_owned();
        let remote = self.remote;
        let fut = tower_service::Service::call(&mut self.router, req.map(Body::new));
        Box::pin(async move {
            let res = fut.await?;
            let (parts, body) = res.into_parts();
            let counted = Counted {
                inner: body,
                line: Line {
                    start,
                    remote,
                    method,
                    path,
                    status: parts.status.as_u16(),
                    bytes: 0,
                },
            };
            Ok(Response::from_parts(parts, Body::new(counted)))
        })
    }
}

/// What the access log line says.
#[derive(Debug)]
struct Line {
    start: Instant,
    remote: SocketAddr,
    method: String,
    path: String,
    status: u16,
    bytes: u64,
}

/// A response body that counts its bytes and logs the request when it is done or dropped.
#[derive(Debug)]
struct Counted {
    inner: Body,
    line: Line,
}

impl HttpBody for Counted {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &r {
            if let Some(d) = f.data_ref() {
                self.line.bytes += d.len() as u64;
            }
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let l = &self.line;
        tracing::info!(
            target: "access",
            remote = %l.remote,
            method = %l.method,
            path = %l.path,
            status = l.status,
            bytes = l.bytes,
            duration_ms = l.start.elapsed().as_micros() as f64 / 1000.0,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_the_bytes_of_the_body() {
        let router = Router::new().fallback(|| async { "hello" });
        let mut svc = AccessLog::new(router, "127.0.0.1:1".parse().expect("addr"));
        let res = tower_service::Service::call(&mut svc, Request::new(Body::empty()))
            .await
            .expect("infallible");
        let body = http_body_util::BodyExt::collect(res.into_body())
            .await
            .expect("body")
            .to_bytes();
        assert_eq!(&body[..], b"hello");
    }
}
