//! CPU time of parse+validate and of its quick-xml floor, for `perf stat` (issue 17).
//!
//! `parse_cpu ours|floor|setup N`: builds the 50,000-entry Resource List of
//! `benches/parse_write.rs`, then reads it N times with the reader and validator (`ours`), with
//! quick-xml alone (`floor`), or not at all (`setup`, to subtract). Per run:
//! `(task-clock(ours N) - task-clock(setup N)) / N`. Build with `cargo build --profile bench
//! -p resourcesync-model --example parse_cpu`.
#![allow(missing_docs)]

use std::hint::black_box;

use resourcesync_model::validate::validate;
use resourcesync_model::{
    Capability, DocumentReader, DocumentWriter, Entry, HashAlg, Header, Link, Metadata,
    MultiHasher, ReadOptions, Root, W3cDateTime,
};

fn document(n: usize) -> Vec<u8> {
    let mut md = Metadata::with_capability(Capability::ResourceList);
    md.at = W3cDateTime::parse("2013-01-03T09:00:00Z").ok();
    let mut header = Header::new(Root::UrlSet, md);
    header
        .links
        .push(Link::new("up", "http://example.com/capabilitylist.xml"));
    let mut w = DocumentWriter::new(Vec::new(), "bench", &header).expect("header");
    let lastmod = W3cDateTime::parse("2013-01-02T13:00:00Z").expect("datetime");
    for i in 0..n {
        let mut h = MultiHasher::new(&[HashAlg::Md5, HashAlg::Sha256]);
        h.update(format!("resource {i}").as_bytes());
        let mut e = Entry::new(format!("http://example.com/res/{i:07}"));
        e.lastmod = Some(lastmod);
        let md = e.md_mut();
        md.hash = Some(h.finish());
        md.length = Some(512 + (i as u64 % 1000));
        md.mime_type = Some("text/plain".into());
        w.write_entry(&e).expect("entry");
    }
    w.finish().expect("finish")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "ours".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let doc = document(50_000);
    for _ in 0..n {
        match what.as_str() {
            "ours" => {
                let r = DocumentReader::new(&doc[..], ReadOptions::named("bench")).expect("header");
                let report = validate(r).expect("valid");
                assert_eq!(report.entries, 50_000);
                black_box(report);
            }
            "floor" => {
                let mut r = quick_xml::Reader::from_reader(&doc[..]);
                let mut buf = Vec::with_capacity(1024);
                let mut events = 0usize;
                loop {
                    match r.read_event_into(&mut buf).expect("well-formed") {
                        quick_xml::events::Event::Eof => break,
                        _ => events += 1,
                    }
                    buf.clear();
                }
                black_box(events);
            }
            _ => {}
        }
    }
}
