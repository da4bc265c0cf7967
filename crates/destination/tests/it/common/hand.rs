//! Documents and packages written by hand, as other implementations write them, for the tests
//! of Sources that are not ours; and an observer that records warnings.
#![allow(unreachable_pub)]

use std::io::Write;
use std::sync::Mutex;

use resourcesync_destination::Observer;
use resourcesync_model::{HashAlg, MultiHasher};

pub const NS: &str = "xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
                  xmlns:rs=\"http://www.openarchives.org/rs/terms/\"";

/// The warnings a run told its observer, in order.
#[derive(Debug, Default)]
pub struct Recorder {
    pub warnings: Mutex<Vec<String>>,
}

impl Observer for Recorder {
    fn warning(&self, message: &str) {
        self.warnings
            .lock()
            .expect("warnings")
            .push(message.to_owned());
    }
}

impl Recorder {
    pub fn said(&self, what: &str) -> Vec<String> {
        self.warnings
            .lock()
            .expect("warnings")
            .iter()
            .filter(|w| w.contains(what))
            .cloned()
            .collect()
    }
}

pub fn md5_of(b: &[u8]) -> String {
    let (_, h) = MultiHasher::new(&[HashAlg::Md5])
        .hash_reader(b)
        .expect("hash");
    h.to_string()
}

/// A `<urlset>` with this `<rs:md>` (its attributes), an `up` link when given, and these `<url>`s.
pub fn urlset(up: Option<&str>, md: &str, urls: &[String]) -> String {
    let up = up.map_or(String::new(), |u| {
        format!("<rs:ln rel=\"up\" href=\"{u}\"/>\n")
    });
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset {NS}>\n{up}<rs:md {md}/>\n{}</urlset>\n",
        urls.concat()
    )
}

/// A `<url>` with this `<rs:md>` (its attributes).
pub fn url(loc: &str, md: &str) -> String {
    format!("<url><loc>{loc}</loc><rs:md {md}/></url>\n")
}

/// `length` and `hash` attributes of a body.
pub fn lh(body: &[u8]) -> String {
    format!("length=\"{}\" hash=\"{}\"", body.len(), md5_of(body))
}

/// A Capability List of these (capability, document) pairs.
pub fn capability_list(caps: &[(&str, String)]) -> String {
    let urls: Vec<String> = caps
        .iter()
        .map(|(c, loc)| url(loc, &format!("capability=\"{c}\"")))
        .collect();
    urlset(None, "capability=\"capabilitylist\"", &urls)
}

pub const T1: &str = "2024-01-01T00:00:00Z";
pub const T2: &str = "2024-01-02T00:00:00Z";

/// A ZIP package of these entries (deflated).
pub fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in entries {
        w.start_file(
            *name,
            zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated),
        )
        .expect("start");
        w.write_all(bytes).expect("write");
    }
    w.finish().expect("finish").into_inner()
}

/// XML-escapes an attribute value.
pub fn attr(v: &str) -> String {
    v.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('"', "&quot;")
}

/// A package: its manifest (`md`: the manifest's `<rs:md>` attributes) lists each entry as
/// (loc, path, body, extra `<rs:md>` attributes); the ZIP holds each body under its path
/// without the leading slash, and the manifest.
pub fn package(cap: &str, md: &str, entries: &[(String, &str, &[u8], &str)]) -> Vec<u8> {
    let urls: Vec<String> = entries
        .iter()
        .map(|(loc, path, body, extra)| {
            url(
                loc,
                &format!("{extra} {} path=\"{}\"", lh(body), attr(path)),
            )
        })
        .collect();
    let manifest = urlset(Some(cap), md, &urls);
    let mut files: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|(_, path, body, _)| (path.strip_prefix('/').unwrap_or(path), *body))
        .collect();
    files.push(("manifest.xml", manifest.as_bytes()));
    zip_of(&files)
}

/// A Resource Dump or Change Dump document listing these packages (loc, bytes, extra
/// `<rs:md>` attributes).
pub fn dump_doc(cap: &str, md: &str, packages: &[(String, &[u8], &str)]) -> String {
    let urls: Vec<String> = packages
        .iter()
        .map(|(loc, bytes, extra)| {
            url(
                loc,
                &format!("type=\"application/zip\" {} {extra}", lh(bytes)),
            )
        })
        .collect();
    urlset(Some(cap), md, &urls)
}
