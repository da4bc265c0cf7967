//! Reads (and validates) a document, printing entries and bytes: `cargo run --release
//! --example parse_file -- FILE [--no-validate]` (profiling and memory checks).
use resourcesync_model::{DocumentReader, ReadOptions, validate::validate};

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: parse_file FILE [--no-validate]");
    let no_validate = std::env::args().any(|a| a == "--no-validate");
    let f = std::fs::File::open(&path).expect("open");
    let opts = ReadOptions {
        max_document_bytes: u64::MAX,
        ..ReadOptions::named(path.clone())
    };
    let mut r = DocumentReader::open(f, opts).expect("header");
    if no_validate {
        let mut n = 0u64;
        while let Some(_e) = r.next_entry().expect("entry") {
            n += 1;
        }
        println!("{path}: {n} entries, {} bytes", r.bytes_read());
    } else {
        let rep = validate(r).expect("read");
        println!(
            "{path}: {} entries, {} bytes, {} errors",
            rep.entries,
            rep.bytes,
            rep.findings.error_count()
        );
    }
}
