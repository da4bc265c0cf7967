//! Puts N bodies of SIZE bytes (default 10,000 × 512 B) into an S3 bucket (`S3Store`) and
//! into a directory (`FsStore`) the way a baseline does (begin, write, finish, then publish in
//! batches of BATCH), alternating ROUNDS times, and prints each time and the median ratio
//! (the aim: the bucket within 2× of the directory). Run by `bench/s3-store.sh`.
//!
//! Usage: s3_bench S3_URL DIR [N] [SIZE] [BATCH] [ROUNDS] [spread]
//!
//! Keys come in path order (100 a directory) unless `spread` is given (each batch then touches
//! every directory: the bucket tells replaced objects by a `HEAD` per key rather than one
//! listing of the batch's range).

use std::time::Instant;

use resourcesync_store::conformance::store::expect_of;
use resourcesync_store::{FsStore, RelPath, S3Config, S3Store, Store};

fn run(s: &dyn Store, n: usize, size: usize, batch: usize, spread: bool) -> Result<f64, String> {
    let t = Instant::now();
    let mut pending = Vec::with_capacity(batch);
    for i in 0..n {
        // In path order (100 files a directory), as a Resource List of a published tree lists
        // them; `spread`: each batch over every directory.
        let dir = if spread { i % 100 } else { i / 100 };
        let k = RelPath::parse(&format!("d{dir:03}/f{i:06}.txt")).map_err(|e| e.to_string())?;
        let body: Vec<u8> = (0..size).map(|j| ((i + j) % 251) as u8).collect();
        let mut up = s
            .begin_new(&k, expect_of(&body))
            .map_err(|e| e.to_string())?;
        up.write(&body).map_err(|e| e.to_string())?;
        pending.push(up.finish().map_err(|e| e.to_string())?);
        if pending.len() == batch || i + 1 == n {
            for r in s
                .publish(std::mem::take(&mut pending))
                .map_err(|e| e.to_string())?
            {
                r.map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(t.elapsed().as_secs_f64())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(url), Some(dir)) = (args.get(1), args.get(2)) else {
        return Err("usage: s3_bench S3_URL DIR [N] [SIZE] [BATCH] [ROUNDS] [spread]".into());
    };
    let num = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, size, batch, rounds) = (num(3, 10_000), num(4, 512), num(5, 256), num(6, 3));
    let spread = args.get(7).is_some_and(|a| a == "spread");
    let tag = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let (mut s3, mut fs) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let cfg = S3Config::parse(url)
            .and_then(|c| c.with_prefix(&format!("bench-{tag}-{r}")))
            .map_err(|e| e.to_string())?;
        let s = S3Store::with_config(cfg).map_err(|e| e.to_string())?;
        let t = run(&s, n, size, batch, spread)?;
        println!("s3 round {r}: {t:.3} s ({:.0} puts/s)", n as f64 / t);
        s3.push(t);
        let d = std::path::Path::new(dir).join(format!("fs-{r}"));
        let f = FsStore::open(&d).map_err(|e| e.to_string())?;
        let t = run(&f, n, size, batch, spread)?;
        println!("fs round {r}: {t:.3} s ({:.0} puts/s)", n as f64 / t);
        fs.push(t);
        std::fs::remove_dir_all(&d).map_err(|e| e.to_string())?;
    }
    let (a, b) = (median(&mut s3), median(&mut fs));
    println!(
        "median: s3 {a:.3} s, fs {b:.3} s: s3/fs = {:.2} ({n} × {size} B, batches of {batch}{})",
        a / b,
        if spread { ", spread" } else { "" }
    );
    Ok(())
}
