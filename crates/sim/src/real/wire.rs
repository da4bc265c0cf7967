//! The counting proxy between Source and Destination: each request, and each response's body
//! bytes, framed by HTTP/1.1's rules (length, chunked, HEAD) without buffering bodies.

use super::*;

pub(super) async fn proxy(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of descriptors or the like: back off instead of spinning.
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let shared = shared.clone();
        conns.spawn(async move {
            if let Ok(server) = TcpStream::connect(upstream).await {
                relay(client, server, shared).await;
            }
        });
        while conns.try_join_next().is_some() {}
    }
}

async fn relay(client: TcpStream, server: TcpStream, shared: Arc<Shared>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let requests: Arc<Mutex<VecDeque<(String, String)>>> = Arc::default();
    let reqs = requests.clone();
    let up = async move {
        let mut parser = RequestParser::default();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for r in parser.feed(&buf[..n]) {
                lock(&reqs).push_back(r);
            }
            if sw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = sw.shutdown().await;
    };
    let down = async move {
        let mut parser = ResponseParser::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match sr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for (status, body) in parser.feed(&buf[..n], &requests) {
                shared.response(&status.1, status.0, body);
            }
            if cw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        if let Some((status, body)) = parser.eof() {
            shared.response(&status.1, status.0, body);
        }
        let _ = cw.shutdown().await;
    };
    tokio::join!(up, down);
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Splits the client's bytes into request heads (the Destination sends GET and HEAD only,
/// without bodies) and yields `(method, path)` of each.
#[derive(Debug, Default)]
pub(super) struct RequestParser {
    buf: Vec<u8>,
    /// Body bytes of the current request still to skip, and its length.
    skip: u64,
    length: u64,
    /// The request whose body is being skipped, with its body.
    pending: Option<(String, String, Vec<u8>)>,
    /// Keep bodies (up to [`MAX_KEPT_BODY`] bytes each), else only count them.
    keep: bool,
}

/// Most bytes of a request body the delivery proxy keeps (the follower's own limit).
const MAX_KEPT_BODY: u64 = 16 << 20;

impl RequestParser {
    /// A parser that keeps each request's body (up to [`MAX_KEPT_BODY`] bytes).
    pub(super) fn keeping_bodies() -> Self {
        RequestParser {
            keep: true,
            ..RequestParser::default()
        }
    }

    /// `(method, path)` of each request head.
    fn feed(&mut self, data: &[u8]) -> Vec<(String, String)> {
        self.feed_with_bodies(data)
            .into_iter()
            .map(|(m, p, _, _)| (m, p))
            .collect()
    }

    /// `(method, path, body length, body kept)` of each complete request (bodies framed by
    /// Content-Length, as the subscriber's forms and the hub's deliveries are).
    pub(super) fn feed_with_bodies(&mut self, data: &[u8]) -> Vec<(String, String, u64, Vec<u8>)> {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        loop {
            if self.skip > 0 {
                let k = self.skip.min(self.buf.len() as u64);
                let bytes = self.buf.drain(..k as usize);
                if let Some(p) = &mut self.pending {
                    if self.keep && (p.2.len() as u64) < MAX_KEPT_BODY {
                        p.2.extend(bytes);
                    }
                }
                self.skip -= k;
                if self.skip > 0 {
                    break;
                }
            }
            if let Some((m, p, body)) = self.pending.take() {
                out.push((m, p, self.length, body));
            }
            let Some(end) = find(&self.buf, b"\r\n\r\n") else {
                break;
            };
            let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
            self.buf.drain(..end + 4);
            let mut lines = head.lines();
            let mut words = lines.next().unwrap_or("").split(' ');
            let method = words.next().unwrap_or("").to_owned();
            let target = words.next().unwrap_or("");
            let path = target.split(['?', '#']).next().unwrap_or("").to_owned();
            let length = lines
                .filter_map(|l| l.split_once(':'))
                .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
            self.skip = length;
            self.length = length;
            self.pending = Some((method, path, Vec::new()));
        }
        out
    }
}

#[derive(Debug, Default)]
enum Framing {
    #[default]
    Head,
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkEnd,
    Trailer,
    UntilClose,
}

/// Frames the server's responses and yields `((status, path), body bytes)` of each.
#[derive(Debug, Default)]
struct ResponseParser {
    buf: Vec<u8>,
    state: Framing,
    current: Option<(u16, String)>,
    body: u64,
}

type Done = ((u16, String), u64);

impl ResponseParser {
    fn complete(&mut self, out: &mut Vec<Done>) {
        if let Some(c) = self.current.take() {
            out.push((c, self.body));
        }
        self.body = 0;
        self.state = Framing::Head;
    }

    /// Reads a response's head, when it is all there (else `false`: more bytes are needed):
    /// its status, the request it answers, and how its body is framed (RFC 9112 §6.3).
    fn head(&mut self, requests: &Mutex<VecDeque<(String, String)>>, out: &mut Vec<Done>) -> bool {
        let Some(end) = find(&self.buf, b"\r\n\r\n") else {
            return false;
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end + 4);
        let mut lines = head.lines();
        let status: u16 = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if (100..200).contains(&status) {
            return true;
        }
        let (mut length, mut chunked) = (None, false);
        for l in lines {
            let Some((name, value)) = l.split_once(':') else {
                continue;
            };
            let (name, value) = (name.trim(), value.trim());
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse::<u64>().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().contains("chunked");
            }
        }
        let (method, path) = lock(requests).pop_front().unwrap_or_default();
        self.current = Some((status, path));
        self.body = 0;
        if method == "HEAD" || status == 204 || status == 304 {
            self.complete(out);
        } else if chunked {
            self.state = Framing::ChunkSize;
        } else if let Some(n) = length {
            self.state = Framing::Length(n);
            if n == 0 {
                self.complete(out);
            }
        } else {
            self.state = Framing::UntilClose;
        }
        true
    }

    fn feed(&mut self, data: &[u8], requests: &Mutex<VecDeque<(String, String)>>) -> Vec<Done> {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        loop {
            match self.state {
                Framing::Head => {
                    if !self.head(requests, &mut out) {
                        break;
                    }
                }
                Framing::Length(left) | Framing::ChunkData(left) => {
                    let k = left.min(self.buf.len() as u64);
                    self.buf.drain(..k as usize);
                    self.body += k;
                    let rest = left - k;
                    let chunk = matches!(self.state, Framing::ChunkData(_));
                    match (rest, chunk) {
                        (0, false) => self.complete(&mut out),
                        (0, true) => self.state = Framing::ChunkEnd,
                        (r, false) => {
                            self.state = Framing::Length(r);
                            break;
                        }
                        (r, true) => {
                            self.state = Framing::ChunkData(r);
                            break;
                        }
                    }
                }
                Framing::ChunkSize => {
                    let Some(end) = find(&self.buf, b"\r\n") else {
                        break;
                    };
                    let line = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                    self.buf.drain(..end + 2);
                    let hex = line.split(';').next().unwrap_or("").trim();
                    let size = u64::from_str_radix(hex, 16).unwrap_or(0);
                    self.state = if size == 0 {
                        Framing::Trailer
                    } else {
                        Framing::ChunkData(size)
                    };
                }
                Framing::ChunkEnd => {
                    if self.buf.len() < 2 {
                        break;
                    }
                    self.buf.drain(..2);
                    self.state = Framing::ChunkSize;
                }
                Framing::Trailer => {
                    let Some(end) = find(&self.buf, b"\r\n") else {
                        break;
                    };
                    self.buf.drain(..end + 2);
                    if end == 0 {
                        self.complete(&mut out);
                    }
                }
                Framing::UntilClose => {
                    self.body += self.buf.len() as u64;
                    self.buf.clear();
                    break;
                }
            }
        }
        out
    }

    fn eof(&mut self) -> Option<Done> {
        match self.state {
            Framing::UntilClose => {
                let mut out = Vec::new();
                self.complete(&mut out);
                out.pop()
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_length_chunked_and_head_responses() {
        let reqs = Mutex::new(VecDeque::new());
        let mut rp = RequestParser::default();
        for r in rp.feed(
            b"GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\nHEAD /b HTTP/1.1\r\n\r\nGET /c HTTP/1.1\r\n",
        ) {
            lock(&reqs).push_back(r);
        }
        for r in rp.feed(b"\r\n") {
            lock(&reqs).push_back(r);
        }
        assert_eq!(lock(&reqs).len(), 3);
        let mut p = ResponseParser::default();
        let stream: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4;x=y\r\ndefg\r\n0\r\n\r\n";
        // Fed a byte at a time, as the worst split of reads.
        let mut got = Vec::new();
        for b in stream {
            got.extend(p.feed(std::slice::from_ref(b), &reqs));
        }
        // Request bodies (a subscription form, a delivery) are framed by Content-Length and
        // kept when asked for.
        let mut rp = RequestParser {
            keep: true,
            ..RequestParser::default()
        };
        let mut heads = Vec::new();
        for b in b"POST /cb HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /x HTTP/1.1\r\n\r\n" {
            heads.extend(rp.feed_with_bodies(std::slice::from_ref(b)));
        }
        assert_eq!(
            heads,
            [
                ("POST".into(), "/cb".into(), 5, b"hello".to_vec()),
                ("GET".into(), "/x".into(), 0, Vec::new())
            ]
        );
        assert_eq!(
            got,
            [
                ((200, "/a".to_owned()), 5),
                ((200, "/b".to_owned()), 0),
                ((200, "/c".to_owned()), 7)
            ]
        );
    }
}
