//! A TCP listener for axum whose connections close when they make no progress for a while: it
//! bounds what idle keep-alive connections and stalled request heads (slowloris) can hold. Used by
//! every server of the project: `serve`, `resourcesync hub`, and the push follower's callback
//! server.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// A listener whose connections close after `idle` without progress.
#[derive(Debug)]
pub struct IdleListener {
    inner: TcpListener,
    idle: Duration,
}

impl IdleListener {
    /// Connections accepted from `inner` fail with `TimedOut` once neither reads nor writes
    /// have progressed for `idle` (an idle keep-alive connection, a stalled request head).
    pub fn new(inner: TcpListener, idle: Duration) -> Self {
        IdleListener { inner, idle }
    }
}

impl axum::serve::Listener for IdleListener {
    type Io = IdleIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        let _ = io.set_nodelay(true);
        (
            IdleIo {
                io,
                idle: self.idle,
                last: tokio::time::Instant::now(),
                deadline: Box::pin(tokio::time::sleep(self.idle)),
            },
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection that fails with `TimedOut` when neither reads nor writes progress for a while.
///
/// Progress only records the time; the timer is moved when it fires early (not re-armed on
/// every read and write, which would cost a timer-wheel update per call).
#[derive(Debug)]
pub struct IdleIo {
    io: TcpStream,
    idle: Duration,
    /// The last progress.
    last: tokio::time::Instant,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl IdleIo {
    fn progressed(&mut self) {
        self.last = tokio::time::Instant::now();
    }

    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return false;
            }
            let due = self.last + self.idle;
            if due <= tokio::time::Instant::now() {
                return true;
            }
            // Progress since the timer was set: wait for the rest of the idle time.
            self.deadline.as_mut().reset(due);
        }
    }
}

fn idle_error() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "connection idle for too long")
}

impl AsyncRead for IdleIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        match Pin::new(&mut me.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                me.progressed();
                Poll::Ready(r)
            }
            Poll::Pending if me.expired(cx) => Poll::Ready(Err(idle_error())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for IdleIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        match Pin::new(&mut me.io).poll_write(cx, buf) {
            Poll::Ready(r) => {
                me.progressed();
                Poll::Ready(r)
            }
            Poll::Pending if me.expired(cx) => Poll::Ready(Err(idle_error())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        match Pin::new(&mut me.io).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => {
                me.progressed();
                Poll::Ready(r)
            }
            Poll::Pending if me.expired(cx) => Poll::Ready(Err(idle_error())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn serve(idle: Duration) -> SocketAddr {
        let inner = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = inner.local_addr().expect("addr");
        let router = axum::Router::new().fallback(|| async { "ok" });
        tokio::spawn(async move {
            let _ = axum::serve(IdleListener::new(inner, idle), router).await;
        });
        addr
    }

    /// Reads until the server closes; `None` if it had not after `limit`.
    async fn read_to_close(s: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
        let mut got = Vec::new();
        let read = tokio::time::timeout(limit, async {
            let mut buf = [0u8; 1024];
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await;
        read.ok().map(|()| got)
    }

    #[tokio::test]
    async fn a_silent_connection_is_closed_and_an_active_one_answered() {
        let addr = serve(Duration::from_millis(200)).await;
        // Nothing sent: closed by the server (the 30 s limit only bounds a failing test).
        let mut silent = TcpStream::connect(addr).await.expect("connect");
        let got = read_to_close(&mut silent, Duration::from_secs(30)).await;
        assert_eq!(got, Some(Vec::new()), "the idle connection was not closed");
        // A stalled request head: closed too, without an answer.
        let mut stalled = TcpStream::connect(addr).await.expect("connect");
        stalled
            .write_all(b"GET / HTTP/1.1\r\nHo")
            .await
            .expect("write");
        let got = read_to_close(&mut stalled, Duration::from_secs(30)).await;
        assert_eq!(got, Some(Vec::new()), "the stalled request was not closed");
        // A whole request is answered, then the idle keep-alive connection is closed.
        let mut active = TcpStream::connect(addr).await.expect("connect");
        active
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let got = read_to_close(&mut active, Duration::from_secs(30))
            .await
            .expect("the keep-alive connection was not closed");
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.ends_with("ok"), "{text}");
    }
}
