//! Large generated documents read in bounded memory.

use super::*;

// --- Streaming -----------------------------------------------------------------------------

fn change_entry(i: u64, buf: &mut Vec<u8>) {
    let _ = writeln!(
        buf,
        "<url><loc>http://example.com/res/{i}</loc><lastmod>2013-01-02T13:{:02}:{:02}Z</lastmod>\
         <rs:md change=\"updated\" length=\"{}\" type=\"text/plain\" \
         hash=\"md5:1584abdf8ebdc9802ac0c6a7402c03b6\"/>\
         <rs:ln rel=\"duplicate\" href=\"http://mirror.example.com/res/{i}\"/></url>",
        (i / 60) % 60,
        i % 60,
        i * 7
    );
}

/// Streams a generated Change List of about `bytes` bytes; returns (entries, seconds, peak RSS
/// growth).
fn stream(bytes: u64) -> (u64, f64, Option<u64>) {
    let mut sample = Vec::new();
    change_entry(5_000_000, &mut sample);
    let n = bytes / sample.len() as u64;
    let head = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}\n<rs:md capability=\"changelist\" from=\"2013-01-02T00:00:00Z\"/>\n\
         <rs:ln rel=\"up\" href=\"http://example.com/capabilitylist.xml\"/>\n",
        urlset_open()
    );
    let input = Generated::new(head, n, "</urlset>\n", change_entry);
    let opts = ReadOptions {
        max_document_bytes: bytes + 1024 * 1024,
        ..ReadOptions::named("stream.xml")
    };
    let before = peak_rss();
    let t = Instant::now();
    let mut r = DocumentReader::open(input, opts).expect("header");
    assert_eq!(r.header().links.len(), 1);
    let mut count = 0u64;
    while let Some(e) = r.next_entry().expect("entry") {
        if count % 100_003 == 0 {
            assert_eq!(e.loc, format!("http://example.com/res/{count}"));
            assert_eq!(e.length(), Some(count * 7));
            assert_eq!(e.links.len(), 1);
        }
        count += 1;
    }
    assert!(
        r.findings().is_empty(),
        "{:?}",
        r.findings().as_slice().first()
    );
    assert!(r.bytes_read() > bytes / 2, "{} bytes read", r.bytes_read());
    let secs = t.elapsed().as_secs_f64();
    let growth = match (before, peak_rss()) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b)),
        _ => None,
    };
    eprintln!(
        "streamed {} bytes, {count} entries in {secs:.1} s ({:.1} MB/s), peak RSS growth {growth:?}",
        r.bytes_read(),
        r.bytes_read() as f64 / secs / 1e6
    );
    assert_eq!(count, n);
    (count, secs, growth)
}

/// Gzipped documents of several members read as one (the members here split a tag).
#[test]
fn multi_member_gzip_reads_as_one_document() {
    let doc = format!(
        "{}<url><loc>http://example.com/a</loc></url></urlset>",
        urlset_open()
    );
    let (a, b) = doc.as_bytes().split_at(doc.len() / 2);
    let gz = gzip_repeated(a, b"", 3, b);
    let r = DocumentReader::open(io::Cursor::new(gz), ReadOptions::named("multi.xml.gz"))
        .expect("header");
    let locs: Vec<String> = r.map(|e| e.expect("entry").loc).collect();
    assert_eq!(locs, ["http://example.com/a"]);
}

#[test]
fn streams_a_generated_20_mb_document() {
    let _g = heavy();
    let (n, _secs, growth) = stream(20 * 1000 * 1000);
    assert!(n > 50_000);
    if let Some(g) = growth {
        assert!(g < 50 * 1024 * 1024, "peak RSS grew by {g} bytes");
    }
}

#[test]
#[ignore = "slow: 100 MB (about 40 s in a debug build: the default run streams 20 MB)"]
fn streams_a_generated_100_mb_document() {
    let _g = heavy();
    let (_n, _secs, growth) = stream(100 * 1000 * 1000);
    if let Some(g) = growth {
        assert!(g < 50 * 1024 * 1024, "peak RSS grew by {g} bytes");
    }
}

#[test]
#[ignore = "slow: 1 GB"]
fn streams_a_generated_1_gb_document_in_bounded_memory() {
    let _g = heavy();
    let (n, _secs, growth) = stream(1000 * 1000 * 1000);
    assert!(n > 3_500_000, "{n} entries");
    let g = growth.expect("VmHWM from /proc/self/status");
    assert!(g < 50 * 1024 * 1024, "peak RSS grew by {g} bytes");
}
