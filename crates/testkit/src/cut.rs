//! A TCP proxy on 127.0.0.1:0 whose link can be cut and restored ([`CutProxy`]): a server
//! (PostgreSQL, an S3 endpoint) "going away" mid-run, and coming back, without stopping the
//! real server other tests share.
//!
//! Cut: every open connection is closed at once (both directions) and new ones are accepted
//! and closed right away, as a server that went down answers. Restore: connections are
//! forwarded again.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running cuttable proxy (it runs on a thread of its own until dropped with the process).
#[derive(Debug)]
pub struct CutProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    /// `true` while the link is up.
    up: watch::Sender<bool>,
    connections: Arc<AtomicU64>,
    /// Connections open now, and a signal when one closes.
    open: Arc<(Mutex<u64>, Condvar)>,
}

impl CutProxy {
    /// Starts a proxy in front of `upstream`, on a thread and runtime of its own (usable from
    /// synchronous and asynchronous tests alike).
    pub fn start(upstream: SocketAddr) -> CutProxy {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind cut proxy");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("addr");
        let (up, rx) = watch::channel(true);
        let connections = Arc::new(AtomicU64::new(0));
        let count = connections.clone();
        let open = Arc::new((Mutex::new(0u64), Condvar::new()));
        let opened = open.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("cut proxy runtime");
            rt.block_on(async move {
                let listener = TcpListener::from_std(std_listener).expect("listener");
                while let Ok((client, _)) = listener.accept().await {
                    if !*rx.borrow() {
                        drop(client);
                        continue;
                    }
                    count.fetch_add(1, Ordering::Relaxed);
                    *opened.0.lock().expect("open") += 1;
                    let closed = Closed(opened.clone());
                    let mut rx = rx.clone();
                    tokio::spawn(async move {
                        let _closed = closed;
                        let Ok(mut server) = TcpStream::connect(upstream).await else {
                            return;
                        };
                        let mut client = client;
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            _ = rx.wait_for(|up| !*up) => {}
                        }
                        // Dropped here: both sockets closed, whatever was in flight.
                    });
                }
            });
        });
        CutProxy {
            addr,
            up,
            connections,
            open,
        }
    }

    /// Cuts the link: returns once every open connection is closed; new ones are refused.
    pub fn cut(&self) {
        self.up.send_replace(false);
        let (m, cv) = &*self.open;
        let mut n = m.lock().expect("open");
        while *n > 0 {
            n = cv.wait(n).expect("open");
        }
    }

    /// Forwards connections again.
    pub fn restore(&self) {
        self.up.send_replace(true);
    }

    /// Connections forwarded so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

/// Counts a connection closed when its task ends, however it ends.
struct Closed(Arc<(Mutex<u64>, Condvar)>);

impl Drop for Closed {
    fn drop(&mut self) {
        let (m, cv) = &*self.0;
        if let Ok(mut n) = m.lock() {
            *n = n.saturating_sub(1);
        }
        cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// An echo server behind the proxy: bytes pass while up, the connection ends at the cut,
    /// new connections are closed while cut and pass again once restored.
    #[test]
    fn cut_closes_and_restore_forwards() {
        let echo = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let echo_addr = echo.local_addr().expect("addr");
        std::thread::spawn(move || {
            for c in echo.incoming() {
                let Ok(mut c) = c else { return };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = c.read(&mut buf) {
                        if n == 0 || c.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let proxy = CutProxy::start(echo_addr);
        let ping = |c: &mut std::net::TcpStream| -> bool {
            let mut b = [0u8; 4];
            c.write_all(b"ping").is_ok() && c.read_exact(&mut b).is_ok() && &b == b"ping"
        };
        let mut c = std::net::TcpStream::connect(proxy.addr).expect("connect");
        assert!(ping(&mut c));
        proxy.cut();
        let mut b = [0u8; 4];
        // The open connection is closed: a read ends (0 bytes or an error), never an echo.
        let _ = c.write_all(b"ping");
        assert!(!matches!(c.read(&mut b), Ok(n) if n > 0));
        let mut d = std::net::TcpStream::connect(proxy.addr).expect("accepted, then closed");
        assert!(!ping(&mut d));
        proxy.restore();
        let mut e = std::net::TcpStream::connect(proxy.addr).expect("connect");
        assert!(ping(&mut e));
        assert_eq!(proxy.connections(), 2);
    }
}
