//! A bandwidth limit shared by every request that holds it ([`Bandwidth`]): the bytes of
//! response bodies are paced so that, over any second, no more than the limit arrive.
//!
//! Written here rather than taken from a rate-limiting crate: those (governor, leaky-bucket)
//! count cells of a bounded burst, and a body chunk (up to hundreds of kilobytes) can exceed
//! any burst small enough to pace well. This is a token bucket that lets a chunk through and
//! makes the next reader wait for the debt, which keeps the average exact whatever the chunk.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Bytes per second over every request sharing it (clone the `Arc` that holds it).
#[derive(Debug)]
pub struct Bandwidth {
    bytes_per_second: f64,
    /// The bucket: bytes that may pass now (negative: owed), as of `at`.
    bucket: Mutex<(f64, Instant)>,
}

impl Bandwidth {
    /// A limit of `bytes_per_second` (at least 1), with a burst of a tenth of a second.
    pub fn new(bytes_per_second: u64) -> Bandwidth {
        let rate = bytes_per_second.max(1) as f64;
        Bandwidth {
            bytes_per_second: rate,
            bucket: Mutex::new((rate / 10.0, Instant::now())),
        }
    }

    /// A rate as people write it, in bytes per second: a number and a unit, `/s` optional:
    /// `B`, `kB`/`KB`, `MB`, `GB` (powers of 1,000), `KiB`, `MiB`, `GiB` (of 1,024), `kbit`,
    /// `Mbit`, `Gbit` (bits, powers of 1,000); a number alone is bytes. `None` for anything
    /// else, zero, or more than `u64`.
    pub fn parse_rate(s: &str) -> Option<u64> {
        let s = s.trim();
        let s = s.strip_suffix("/s").unwrap_or(s).trim_end();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let num: f64 = num.parse().ok()?;
        let factor: f64 = match unit.trim() {
            "" | "B" => 1.0,
            "kB" | "KB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            "kbit" | "Kbit" => 1e3 / 8.0,
            "Mbit" => 1e6 / 8.0,
            "Gbit" => 1e9 / 8.0,
            _ => return None,
        };
        let v = num * factor;
        (v.is_finite() && v >= 1.0 && v < u64::MAX as f64).then_some(v as u64)
    }

    /// The limit, in bytes per second.
    pub fn bytes_per_second(&self) -> u64 {
        self.bytes_per_second as u64
    }

    /// Accounts for `n` bytes just received, waiting while the bucket is in debt.
    pub async fn take(&self, n: usize) {
        let wait = {
            let Ok(mut b) = self.bucket.lock() else {
                return;
            };
            let now = Instant::now();
            let burst = self.bytes_per_second / 10.0;
            let refill = now.saturating_duration_since(b.1).as_secs_f64() * self.bytes_per_second;
            b.0 = (b.0 + refill).min(burst) - n as f64;
            b.1 = now;
            if b.0 >= 0.0 {
                return;
            }
            Duration::from_secs_f64(-b.0 / self.bytes_per_second)
        };
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_as_people_write_them() {
        assert_eq!(Bandwidth::parse_rate("1000"), Some(1000));
        assert_eq!(Bandwidth::parse_rate("10MB/s"), Some(10_000_000));
        assert_eq!(Bandwidth::parse_rate("1.5 MiB/s"), Some(1_572_864));
        assert_eq!(Bandwidth::parse_rate("100Mbit/s"), Some(12_500_000));
        assert_eq!(Bandwidth::parse_rate("64 kB"), Some(64_000));
        for bad in ["", "0", "fast", "10 MBps", "-1MB", "1e400"] {
            assert_eq!(Bandwidth::parse_rate(bad), None, "{bad}");
        }
    }

    /// On Tokio's paused clock: a second's worth of bytes past the burst takes a second.
    #[tokio::test(start_paused = true)]
    async fn paces_to_the_limit_whatever_the_chunk() {
        let bw = Bandwidth::new(100_000);
        let start = Instant::now();
        // 10 kB of burst, then 1 MB in chunks of 64 kB: (1,000,000 - 10,000) / 100,000 s.
        let mut left = 1_000_000usize;
        while left > 0 {
            let n = left.min(65_536);
            bw.take(n).await;
            left -= n;
        }
        let took = start.elapsed().as_secs_f64();
        assert!((9.8..=10.0).contains(&took), "took {took} s");
    }

    #[tokio::test(start_paused = true)]
    async fn shared_by_concurrent_readers() {
        let bw = std::sync::Arc::new(Bandwidth::new(50_000));
        let start = Instant::now();
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let bw = bw.clone();
                tokio::spawn(async move {
                    for _ in 0..25 {
                        bw.take(1_000).await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("task");
        }
        // 100 kB at 50 kB/s, less the 5 kB burst.
        let took = start.elapsed().as_secs_f64();
        assert!((1.85..=2.0).contains(&took), "took {took} s");
    }
}
