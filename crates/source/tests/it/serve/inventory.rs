//! `serve` over an inventory that is not a directory (a Source publishes from any inventory):
//! resources come from [`Inventory::serve`] — bytes read through the inventory,
//! small ones whole and large ones streamed, redirects where the backend keeps a URL — while
//! the documents live in the Source's working directory. A reader that gives less than it
//! promised is never sent as a whole resource.

use std::sync::Arc;

use resourcesync_source::inventory::{Inventory, Listing, MemInventory, Served as Body};

use super::*;

/// `MemInventory`, with resources under `moved/` kept elsewhere (a URL per resource) and
/// `short/` ones whose reader ends half-way through.
#[derive(Debug)]
struct Backend(MemInventory);

impl Inventory for Backend {
    fn list(&self) -> resourcesync_source::Result<Listing<'_>> {
        self.0.list()
    }
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        self.0.open(rel)
    }
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        self.0.stat(rel)
    }
    fn serve(&self, rel: &Path) -> std::io::Result<Option<Body>> {
        let name = rel.to_string_lossy();
        if let Some(rest) = name.strip_prefix("moved/") {
            return Ok(Some(Body::Redirect(format!(
                "http://elsewhere.example/{rest}"
            ))));
        }
        if name.starts_with("short/") {
            let Some((len, mtime_ns)) = self.0.stat(rel).ok() else {
                return Ok(None);
            };
            let half = self.0.open(rel)?.take(len / 2);
            return Ok(Some(Body::Body {
                len,
                mtime_ns,
                body: Box::new(half),
            }));
        }
        self.0.serve(rel)
    }
}

/// A Source over `inv` with its working directory in a temporary folder, served on
/// 127.0.0.1:0.
fn serve_inventory(inv: Arc<dyn Inventory>) -> Served {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let listener = rt
        .block_on(server::bind("127.0.0.1:0"))
        .expect("bind loopback");
    let addr = listener.local_addr().expect("addr");
    let base = format!("http://{addr}/");
    let mut cfg = SourceConfig::new(dir.path(), &base);
    server::prepare_config(&mut cfg);
    let source = Source::open_with(cfg, inv).expect("open source");
    let running = rt
        .block_on(server::start(source, listener, ServeOptions::default()))
        .expect("start");
    Served {
        rt,
        running: Some(running),
        addr,
        base,
        dir,
    }
}

/// Bytes that differ at every position a chunk boundary could fall on.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

#[test]
fn resources_come_from_the_inventory_and_documents_from_the_working_directory() {
    let mem = MemInventory::new();
    mem.put("a.txt", b"hello from memory\n");
    let big = pattern(300 * 1024);
    mem.put("data/big.bin", &big);
    let s = serve_inventory(Arc::new(Backend(mem.clone())));

    let r = get(s.addr, "/a.txt");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &b"hello from memory\n"[..])
    );
    // Recorded by the first scan: its digest is the ETag, as for a directory.
    let tag = format!("\"md5-{}\"", md5_hex(b"hello from memory\n"));
    assert_eq!(r.header("etag"), Some(tag.as_str()));
    // Conditional requests work on what the inventory says.
    assert_eq!(
        get_h(s.addr, "/a.txt", &[("if-none-match", &tag)]).status,
        304
    );

    // Larger than what is read whole: streamed, every byte, in order.
    let r = get(s.addr, "/data/big.bin");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("307200"));
    assert!(
        r.body == big,
        "streamed body differs ({} bytes)",
        r.body.len()
    );
    // An inventory's stream cannot seek: a Range is answered with the whole (RFC 9110 §14.2).
    let r = get_h(s.addr, "/data/big.bin", &[("range", "bytes=10-19")]);
    assert_eq!((r.status, r.header("accept-ranges")), (200, Some("none")));
    assert_eq!(r.body.len(), big.len());

    assert_eq!(get(s.addr, "/nothing.txt").status, 404);
    // Z39.99-2014 §6.3.2 and §10: the documents, from the working directory, list the
    // inventory's resources.
    let sd = get(s.addr, "/.well-known/resourcesync");
    assert_eq!(sd.status, 200);
    let (_, caps) = read_valid("source description", &sd.body);
    let cap = s.get_url(&caps[0].loc);
    let (_, lists) = read_valid(&caps[0].loc, &cap.body);
    let rl_url = lists
        .iter()
        .find(|e| {
            e.md.as_ref()
                .and_then(|m| m.capability.as_ref())
                .is_some_and(|c| c.as_str() == "resourcelist")
        })
        .map(|e| e.loc.clone())
        .expect("a Resource List in the Capability List");
    let rl = s.get_url(&rl_url);
    assert_eq!(rl.status, 200, "{}", rl.text());
    let (_, entries) = read_valid(&rl_url, &rl.body);
    let locs: Vec<&str> = entries.iter().map(|e| e.loc.as_str()).collect();
    assert_eq!(
        locs,
        [
            format!("{}a.txt", s.base),
            format!("{}data/big.bin", s.base)
        ]
    );
    // Nothing of the inventory was written into the working directory.
    assert!(!s.dir.path().join("a.txt").exists());
    s.stop();
}

#[test]
fn a_resource_kept_elsewhere_is_a_redirect() {
    let mem = MemInventory::new();
    mem.put("moved/x.pdf", b"%PDF");
    let s = serve_inventory(Arc::new(Backend(mem)));
    let r = get(s.addr, "/moved/x.pdf");
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("http://elsewhere.example/x.pdf"));
    s.stop();
}

/// Reads a response to a `Connection: close` request as far as the server sends it: the
/// declared length and the body bytes that came; `None` when the connection was reset before
/// a whole head came (the client's kernel drops what it held on a reset).
fn read_as_far_as_sent(addr: SocketAddr, target: &str) -> Option<(u16, Option<usize>, usize)> {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    write!(
        c,
        "GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut buf = Vec::new();
    // A connection the server aborts may end in a reset rather than an orderly close.
    let _ = c.read_to_end(&mut buf);
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let status = head[9..12].parse().expect("status");
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().expect("length"));
    Some((status, length, buf.len() - end - 4))
}

#[test]
fn a_reader_that_ends_early_is_never_a_whole_resource() {
    let mem = MemInventory::new();
    mem.put("short/small.txt", b"0123456789");
    mem.put("short/large.bin", &pattern(200 * 1024));
    mem.put("data/whole.bin", &pattern(200 * 1024));
    let s = serve_inventory(Arc::new(Backend(mem)));
    // Small: read whole before answering, found short: 503, nothing of it sent.
    let (status, _, _) = read_as_far_as_sent(s.addr, "/short/small.txt").expect("a response");
    assert_eq!(status, 503);
    // Large: the headers are gone when the reader ends; the connection is cut before the
    // promised length (or reset), which every HTTP client reports as an incomplete body.
    if let Some((status, length, got)) = read_as_far_as_sent(s.addr, "/short/large.bin") {
        assert_eq!((status, length), (200, Some(200 * 1024)));
        assert!(got < 200 * 1024, "{got} bytes: sent as if whole");
    }
    // The same resource whole, through a reader that keeps its promise, to show the check
    // above can tell: every byte arrives.
    let (status, length, got) = read_as_far_as_sent(s.addr, "/data/whole.bin").expect("a response");
    assert_eq!((status, length, got), (200, Some(200 * 1024), 200 * 1024));
    // The server goes on.
    assert_eq!(get(s.addr, "/short/").status, 404);
    s.stop();
}
