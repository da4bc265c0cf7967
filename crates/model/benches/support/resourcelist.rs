//! The 50,000-entry Resource List that `benches/parse_write.rs` and `examples/parse_cpu.rs`
//! both measure, and the quick-xml floor they compare with: one definition, so
//! that the two measure the same document.

use resourcesync_model::{
    Capability, DocumentWriter, Entry, HashAlg, Header, Link, Metadata, MultiHasher, Root,
    W3cDateTime,
};

/// `n` entries with md5 and sha-256 digests, a length, a type and a lastmod.
pub(crate) fn entries(n: usize) -> Vec<Entry> {
    let algs = [HashAlg::Md5, HashAlg::Sha256];
    let lastmod = W3cDateTime::parse("2013-01-02T13:00:00Z").expect("datetime");
    (0..n)
        .map(|i| {
            let mut h = MultiHasher::new(&algs);
            h.update(format!("resource {i}").as_bytes());
            let mut e = Entry::new(format!("http://example.com/res/{i:07}"));
            e.lastmod = Some(lastmod);
            let md = e.md_mut();
            md.hash = Some(h.finish());
            md.length = Some(512 + (i as u64 % 1000));
            md.mime_type = Some("text/plain".into());
            e
        })
        .collect()
}

/// A Resource List of `n` such entries.
pub(crate) fn document(n: usize) -> Vec<u8> {
    let mut md = Metadata::with_capability(Capability::ResourceList);
    md.at = W3cDateTime::parse("2013-01-03T09:00:00Z").ok();
    let mut header = Header::new(Root::UrlSet, md);
    header
        .links
        .push(Link::new("up", "http://example.com/capabilitylist.xml"));
    let mut w = DocumentWriter::new(Vec::new(), "bench", &header).expect("header");
    for e in entries(n) {
        w.write_entry(&e).expect("entry");
    }
    w.finish().expect("finish")
}

/// Every event of `doc` read by quick-xml alone: the floor of any parser built on it.
pub(crate) fn tokenize(doc: &[u8]) -> usize {
    let mut r = quick_xml::Reader::from_reader(doc);
    let mut buf = Vec::with_capacity(1024);
    let mut events = 0;
    loop {
        match r.read_event_into(&mut buf).expect("well-formed") {
            quick_xml::events::Event::Eof => break,
            _ => events += 1,
        }
        buf.clear();
    }
    events
}
