//! A WAN delay proxy on 127.0.0.1:0: a TCP proxy in front of an upstream that delays every
//! byte by a one-way delay per direction and caps the bandwidth per direction, keeping the
//! order of the bytes of each connection (one queue per direction of a connection).
//!
//! A chunk read at time `t` leaves the link when the link is free and `len / bandwidth` has
//! passed (serialization), and is written `delay` later (propagation): a ping-pong through the
//! proxy takes `up + down` plus the loopback's own time: `wan_proxy --self-check` (the
//! example a bench runs first) checks it within 10%; the kit's tests check that no delay is
//! skipped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// One direction of the link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// One-way delay.
    pub delay: Duration,
    /// Bytes per second (`None`: unlimited).
    pub bandwidth: Option<u64>,
}

impl Link {
    /// A link with this delay and no bandwidth cap.
    pub fn delay(delay: Duration) -> Link {
        Link {
            delay,
            bandwidth: None,
        }
    }
}

/// The shape of the network: towards the upstream (requests) and back (responses).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wan {
    /// Client to upstream.
    pub up: Link,
    /// Upstream to client.
    pub down: Link,
}

impl Wan {
    /// The same delay both ways, no bandwidth cap: `rtt / 2` each way.
    pub fn rtt(rtt: Duration) -> Wan {
        Wan {
            up: Link::delay(rtt / 2),
            down: Link::delay(rtt / 2),
        }
    }
}

/// A running proxy (it stops with the runtime).
#[derive(Debug)]
pub struct WanProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    /// `http://ADDR/`.
    pub base: String,
    connections: Arc<AtomicU64>,
}

/// Bytes read at once: the link's unit of serialization.
const CHUNK: usize = 16 * 1024;
/// Chunks in flight per direction: bounded memory (the reader waits for room).
const IN_FLIGHT: usize = 1024;

impl WanProxy {
    /// Starts a proxy in front of `upstream`, in the current Tokio runtime.
    pub async fn start(upstream: SocketAddr, wan: Wan) -> WanProxy {
        WanProxy::start_on("127.0.0.1:0".parse().expect("an address"), upstream, wan).await
    }

    /// As [`WanProxy::start`], listening on `listen` (a bench gives each network namespace's
    /// proxy the same address, so that one URL reaches the Source from each).
    pub async fn start_on(listen: SocketAddr, upstream: SocketAddr, wan: Wan) -> WanProxy {
        let listener = TcpListener::bind(listen).await.expect("bind wan proxy");
        let addr = listener.local_addr().expect("addr");
        let connections = Arc::new(AtomicU64::new(0));
        let count = connections.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::join!(pipe(cr, sw, wan.up), pipe(sr, cw, wan.down));
                });
            }
        });
        WanProxy {
            addr,
            base: format!("http://{addr}/"),
            connections,
        }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

/// Copies `from` to `to` through `link`, in order; shuts `to` down at the end of `from`.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, link: Link) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(IN_FLIGHT);
    let reader = async move {
        // When the link is free again (serialization of what was sent before).
        let mut free = Instant::now();
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let now = Instant::now();
            let leaves = match link.bandwidth.filter(|b| *b > 0) {
                Some(bw) => {
                    free = free.max(now) + Duration::from_secs_f64(n as f64 / bw as f64);
                    free
                }
                None => now,
            };
            if tx
                .send((leaves + link.delay, buf[..n].to_vec()))
                .await
                .is_err()
            {
                break;
            }
        }
    };
    let writer = async move {
        while let Some((at, bytes)) = rx.recv().await {
            // A deadline already passed (no delay: the benches' "loopback") is not slept on:
            // Tokio's timer would still wait for its next tick, a millisecond, per chunk.
            if at > Instant::now() {
                tokio::time::sleep_until(at).await;
            }
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server: every byte read is written back.
    async fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let _ = s.set_nodelay(true);
                    let (mut r, mut w) = s.into_split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    /// The median round trip of `n` one-byte ping-pongs through `proxy`.
    async fn ping_pong(proxy: SocketAddr, n: usize) -> Duration {
        let mut s = TcpStream::connect(proxy).await.expect("connect");
        s.set_nodelay(true).expect("nodelay");
        let mut times = Vec::new();
        let mut b = [0u8; 1];
        for i in 0..n {
            let t = Instant::now();
            s.write_all(&[i as u8]).await.expect("ping");
            s.read_exact(&mut b).await.expect("pong");
            assert_eq!(b[0], i as u8, "in order");
            times.push(t.elapsed());
        }
        times.sort();
        times[n / 2]
    }

    /// Never early (a delay the proxy skipped shows as less), and not far late. The 10%
    /// precision the benches need is checked by `wan_proxy --self-check` before a bench counts
    /// (bench/sync-wan.sh): a test here runs beside other builds and tests on 2 cores, where a
    /// timer's wake-up can be tens of milliseconds late, so its upper bound is loose.
    fn within(measured: Duration, expected: Duration) -> bool {
        let (m, e) = (measured.as_secs_f64(), expected.as_secs_f64());
        m >= e - 0.001 && m <= e * 1.5 + 0.025
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_ping_pong_measures_the_configured_round_trip() {
        let up = echo().await;
        for (a, b) in [(20, 20), (5, 45), (60, 0)] {
            let wan = Wan {
                up: Link::delay(Duration::from_millis(a)),
                down: Link::delay(Duration::from_millis(b)),
            };
            let p = WanProxy::start(up, wan).await;
            let rtt = ping_pong(p.addr, 9).await;
            let expected = Duration::from_millis(a + b);
            assert!(within(rtt, expected), "{a}+{b} ms: measured {rtt:?}");
        }
    }

    /// The benches' default link (`bench/sync-wan.sh`): 25 ms each way, 100 Mbit/s each way.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_bench_link_measures_its_round_trip_under_the_bandwidth_cap() {
        let up = echo().await;
        let link = Link {
            delay: Duration::from_millis(25),
            bandwidth: Some(100_000_000 / 8),
        };
        let p = WanProxy::start(
            up,
            Wan {
                up: link,
                down: link,
            },
        )
        .await;
        let rtt = ping_pong(p.addr, 9).await;
        assert!(
            within(rtt, Duration::from_millis(50)),
            "25+25 ms at 100 Mbit/s: measured {rtt:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_bandwidth_is_capped_and_the_bytes_kept_in_order() {
        let up = echo().await;
        let wan = Wan {
            up: Link {
                delay: Duration::from_millis(5),
                bandwidth: Some(4 << 20),
            },
            down: Link::delay(Duration::from_millis(5)),
        };
        let p = WanProxy::start(up, wan).await;
        let s = TcpStream::connect(p.addr).await.expect("connect");
        let (mut r, mut w) = s.into_split();
        let sent: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect();
        let t = Instant::now();
        let body = sent.clone();
        let writer = tokio::spawn(async move {
            w.write_all(&body).await.expect("write");
            w.shutdown().await.expect("shutdown");
        });
        let mut got = Vec::new();
        r.read_to_end(&mut got).await.expect("read");
        writer.await.expect("writer");
        let took = t.elapsed();
        assert!(got == sent, "bytes changed or reordered");
        // 1 MiB at 4 MiB/s: 250 ms, plus 10 ms of delay.
        assert!(
            within(took, Duration::from_millis(260)),
            "1 MiB at 4 MiB/s took {took:?}"
        );
        assert_eq!(p.connections(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_delay_it_is_a_plain_proxy() {
        let up = echo().await;
        let p = WanProxy::start(up, Wan::rtt(Duration::ZERO)).await;
        let rtt = ping_pong(p.addr, 5).await;
        assert!(rtt < Duration::from_millis(20), "{rtt:?}");
    }
}
