//! Prints validator findings for every XML file under a folder (development aid).
use resourcesync_model::{DocumentReader, ReadOptions, validate};

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let mut paths: Vec<_> = walk(std::path::Path::new(&dir));
    paths.sort();
    for p in paths {
        let name = p.display().to_string();
        let f = std::fs::File::open(&p).expect("open");
        match DocumentReader::open(f, ReadOptions::named(name.clone())).and_then(validate) {
            Ok(r) => {
                println!(
                    "{name}: {} entries={} errors={} warnings={}",
                    r.kind,
                    r.entries,
                    r.findings.error_count(),
                    r.findings.warning_count()
                );
                for f in r.findings.as_slice() {
                    println!("    {f}");
                }
            }
            Err(e) => println!("{name}: FATAL {e}"),
        }
    }
}

fn walk(d: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).expect("dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "xml") {
            out.push(p);
        }
    }
    out
}
