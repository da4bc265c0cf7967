//! The kit's WAN delay proxy as a program, for the benches (`bench/mirror-vs-peers.sh`,
//! `bench/sync-wan.sh`):
//!
//! - `wan_proxy [--listen ADDR] UPSTREAM [RTT_MS] [MBIT_PER_S]` listens on ADDR (default
//!   127.0.0.1, a free port; `bench/scale-out.sh` gives one per network namespace), prints
//!   `listening http://ADDR/` and forwards to UPSTREAM (`127.0.0.1:PORT`) with half the round
//!   trip each way (default 50 ms) and the bandwidth cap each way (default none), until killed.
//! - `wan_proxy --self-check [RTT_MS] [MBIT_PER_S]` checks the emulator against itself before a
//!   bench trusts it: through a proxy in front of an echo server on loopback, the median of 9
//!   one-byte ping-pongs must be the round trip within 10%, and a 1 MB echo must take
//!   `1 MB / bandwidth + round trip` within 10% (when capped). Prints both and exits 0, or 1
//!   when either is off.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use resourcesync_testkit::wan::{Wan, WanProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: wan_proxy [--listen ADDR] UPSTREAM [RTT_MS] [MBIT_PER_S] | wan_proxy --self-check [RTT_MS] [MBIT_PER_S]";
    let mut listen: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    if args.first().is_some_and(|a| a == "--listen") {
        match args.get(1).and_then(|a| a.parse().ok()) {
            Some(l) => {
                listen = l;
                args.drain(..2);
            }
            None => {
                eprintln!("{usage}");
                std::process::exit(2);
            }
        }
    }
    let check = args.first().is_some_and(|a| a == "--self-check");
    let upstream: Option<SocketAddr> = if check {
        args.remove(0);
        None
    } else {
        match args.first().and_then(|a| a.parse().ok()) {
            Some(u) => {
                args.remove(0);
                Some(u)
            }
            None => {
                eprintln!("{usage}");
                std::process::exit(2);
            }
        }
    };
    let rtt: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(50);
    let mbit: Option<u64> = args.get(1).and_then(|a| a.parse().ok());
    let mut wan = Wan::rtt(Duration::from_millis(rtt));
    if let Some(m) = mbit {
        let bytes = m * 1_000_000 / 8;
        wan.up.bandwidth = Some(bytes);
        wan.down.bandwidth = Some(bytes);
    }
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("wan_proxy: {e}");
            std::process::exit(1);
        }
    };
    match upstream {
        Some(upstream) => rt.block_on(async {
            let p = WanProxy::start_on(listen, upstream, wan).await;
            println!("listening {}", p.base);
            let _ = std::io::stdout().flush();
            std::future::pending::<()>().await;
        }),
        None => {
            let ok = rt.block_on(self_check(wan, rtt, mbit));
            std::process::exit(if ok { 0 } else { 1 });
        }
    }
}

/// An echo server on 127.0.0.1:0.
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

fn verdict(measured: Duration, expected: Duration) -> (bool, &'static str) {
    let (m, e) = (measured.as_secs_f64(), expected.as_secs_f64());
    let ok = (m - e).abs() <= e * 0.10 || (m - e).abs() < 0.000_5;
    (ok, if ok { "ok" } else { "OFF" })
}

async fn self_check(wan: Wan, rtt_ms: u64, mbit: Option<u64>) -> bool {
    let p = WanProxy::start(echo().await, wan).await;
    let mut s = TcpStream::connect(p.addr).await.expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let mut times = Vec::new();
    let mut b = [0u8; 1];
    for i in 0..9u8 {
        let t = Instant::now();
        s.write_all(&[i]).await.expect("ping");
        s.read_exact(&mut b).await.expect("pong");
        times.push(t.elapsed());
    }
    times.sort();
    let rtt = Duration::from_millis(rtt_ms);
    let (ok_rtt, say) = verdict(times[4], rtt);
    println!(
        "wan self-check: round trip configured {rtt_ms} ms, measured {:.1} ms (median of 9 ping-pongs): {say}",
        times[4].as_secs_f64() * 1e3
    );
    let Some(mbit) = mbit else {
        return ok_rtt;
    };
    // 1 MB up and back, pipelined: serialized once each way (the two directions overlap but
    // for the last chunk), plus the round trip.
    const BYTES: usize = 1_000_000;
    let (mut r, mut w) = s.into_split();
    let t = Instant::now();
    let writer = tokio::spawn(async move {
        let body = vec![7u8; BYTES];
        w.write_all(&body).await.expect("write");
    });
    let mut got = vec![0u8; BYTES];
    r.read_exact(&mut got).await.expect("read");
    let took = t.elapsed();
    let _ = writer.await;
    let per_s = (mbit * 1_000_000 / 8) as f64;
    let expected = Duration::from_secs_f64(BYTES as f64 / per_s) + rtt;
    let (ok_bw, say) = verdict(took, expected);
    println!(
        "wan self-check: 1 MB echoed at {mbit} Mbit/s each way, expected {:.1} ms, measured {:.1} ms: {say}",
        expected.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e3
    );
    ok_rtt && ok_bw
}
