//! The kit's WAN delay proxy as a program, for the benches (`bench/mirror-vs-peers.sh`):
//! `wan_proxy UPSTREAM [RTT_MS] [MBIT_PER_S]` listens on 127.0.0.1 (a free port), prints
//! `listening http://ADDR/` and forwards to UPSTREAM (`127.0.0.1:PORT`) with half the round
//! trip each way (default 50 ms) and the bandwidth cap each way (default none), until killed.

use std::io::Write;
use std::time::Duration;

use resourcesync_testkit::wan::{Wan, WanProxy};

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: wan_proxy UPSTREAM [RTT_MS] [MBIT_PER_S]";
    let Some(upstream) = args.next().and_then(|a| a.parse().ok()) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let rtt: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(50);
    let mbit: Option<u64> = args.next().and_then(|a| a.parse().ok());
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
    rt.block_on(async {
        let p = WanProxy::start(upstream, wan).await;
        println!("listening {}", p.base);
        let _ = std::io::stdout().flush();
        std::future::pending::<()>().await;
    });
}
