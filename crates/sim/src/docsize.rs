//! Sizes of the documents our Source publishes, measured once with the model crate's writer
//! (the one the Source writes with), so that model mode charges the bytes real mode transfers.
//!
//! Each kind is written empty and with one entry shaped like the Source's own
//! (`resourcesync_source::publish::{resource_entry, change_entry}`: `<loc>`, `<lastmod>`, and
//! `<rs:md>` with `hash`, `length`, `type`, for changes also `change` and `datetime`); a document
//! of n entries is then `header + n × entry`. Resource paths have a fixed width
//! ([`crate::workload::resource_path`]), so every entry of a kind has the same size.

use resourcesync_model::{
    Capability, Change, Digest, DocumentWriter, Entry, HashAlg, Hashes, Header, Link, Metadata,
    Root, W3cDateTime,
};

use crate::error::Result;
use crate::workload::resource_path;

/// The base URL sized into model documents: a loopback address with a five-digit port, as real
/// mode has.
pub const MODEL_BASE: &str = "http://127.0.0.1:40000/";

/// Bytes of each document kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocSizes {
    /// The Source Description (one Capability List).
    pub source_description: u64,
    /// The Capability List (Resource List, Change List, the two archives).
    pub capability_list: u64,
    /// A Resource List without entries.
    pub resource_list_header: u64,
    /// One Resource List entry.
    pub resource_list_entry: u64,
    /// A Change List without entries.
    pub change_list_header: u64,
    /// One Change List entry (create or update; a delete has no hash, length or type).
    pub change_list_entry: u64,
    /// One Change List entry of a delete.
    pub change_list_delete_entry: u64,
    /// The Change List Index without entries.
    pub change_list_index_header: u64,
    /// One Change List Index entry.
    pub change_list_index_entry: u64,
    /// A Change Notification without entries (Change Notification 1.0.1 §4).
    pub notification_header: u64,
}

fn size(header: &Header, entries: &[Entry]) -> Result<u64> {
    let mut w = DocumentWriter::new(Vec::new(), "sizing", header)?;
    for e in entries {
        w.write_entry(e)?;
    }
    Ok(w.finish()?.len() as u64)
}

fn doc(name: &str) -> String {
    format!("{MODEL_BASE}resourcesync/{name}")
}

fn header(root: Root, md: Metadata, links: &[(&str, String)]) -> Header {
    let mut h = Header::new(root, md);
    for (rel, href) in links {
        h.links.push(Link::new(*rel, href.clone()));
    }
    h
}

impl DocSizes {
    /// Measures every kind with the writer.
    pub fn measure() -> Result<Self> {
        // A fixed instant with a fraction, as file times have (now() would make sizes vary).
        let now = W3cDateTime::parse("2026-01-02T03:04:05.123456Z")
            .map_err(|e| crate::Error::Config(format!("sizing timestamp: {e}")))?;
        let md5 = Hashes(vec![Digest {
            alg: HashAlg::Md5,
            value: "0123456789abcdef0123456789abcdef".into(),
        }]);
        let uri = format!("{MODEL_BASE}{}", resource_path(1234));
        let mut res = Entry::new(uri.clone());
        res.lastmod = Some(now);
        {
            let md = res.md_mut();
            md.hash = Some(md5.clone());
            md.length = Some(512);
            md.mime_type = Some("application/octet-stream".into());
        }
        let mut chg = res.clone();
        {
            let md = chg.md_mut();
            md.change = Some(Change::Updated);
            md.datetime = Some(now);
        }
        let mut del = Entry::new(uri);
        del.lastmod = Some(now);
        {
            let md = del.md_mut();
            md.change = Some(Change::Deleted);
            md.datetime = Some(now);
        }
        let up = ("up", doc("capabilitylist.xml"));
        let with = |c: Capability| Metadata::with_capability(c);
        let mut rl_md = with(Capability::ResourceList);
        rl_md.at = Some(now);
        rl_md.completed = Some(now);
        let rl = header(Root::UrlSet, rl_md, std::slice::from_ref(&up));
        let mut cl_md = with(Capability::ChangeList);
        cl_md.from = Some(now);
        let cl = header(
            Root::UrlSet,
            cl_md.clone(),
            &[up.clone(), ("index", doc("changelist.xml"))],
        );
        let cli = header(
            Root::SitemapIndex,
            cl_md,
            &[up.clone(), ("archives", doc("changelist-archive.xml"))],
        );
        let mut cli_entry = Entry::new(doc("changelists/00001.xml"));
        cli_entry.md_mut().from = Some(now);
        let mut n_md = with(Capability::ChangeNotification);
        n_md.from = Some(now);
        n_md.until = Some(now);
        let notification = header(Root::UrlSet, n_md, std::slice::from_ref(&up));
        let sd = header(
            Root::UrlSet,
            with(Capability::Description),
            &[("describedby", doc("index.html"))],
        );
        let mut sd_entry = Entry::new(doc("capabilitylist.xml"));
        sd_entry.md = Some(with(Capability::CapabilityList));
        let cap = header(
            Root::UrlSet,
            with(Capability::CapabilityList),
            &[
                ("up", format!("{MODEL_BASE}.well-known/resourcesync")),
                ("describedby", doc("index.html")),
            ],
        );
        let cap_entries: Vec<Entry> = [
            (
                Capability::ResourceList,
                "resourcelists/000001/resourcelist.xml",
            ),
            (Capability::ChangeList, "changelist.xml"),
            (Capability::ResourceListArchive, "resourcelist-archive.xml"),
            (Capability::ChangeListArchive, "changelist-archive.xml"),
        ]
        .into_iter()
        .map(|(c, n)| {
            let mut e = Entry::new(doc(n));
            e.md = Some(with(c));
            e
        })
        .collect();
        let rl0 = size(&rl, &[])?;
        let cl0 = size(&cl, &[])?;
        let cli0 = size(&cli, &[])?;
        Ok(DocSizes {
            source_description: size(&sd, &[sd_entry])?,
            capability_list: size(&cap, &cap_entries)?,
            resource_list_header: rl0,
            resource_list_entry: size(&rl, &[res])? - rl0,
            change_list_header: cl0,
            change_list_entry: size(&cl, std::slice::from_ref(&chg))? - cl0,
            change_list_delete_entry: size(&cl, &[del])? - cl0,
            change_list_index_header: cli0,
            change_list_index_entry: size(&cli, &[cli_entry])? - cli0,
            notification_header: size(&notification, &[])?,
        })
    }

    /// Discovery before every synchronization: Source Description and Capability List.
    pub fn discovery(&self) -> u64 {
        self.source_description + self.capability_list
    }

    /// A Resource List of `n` resources.
    pub fn resource_list(&self, n: u64) -> u64 {
        self.resource_list_header + n * self.resource_list_entry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_plausible() {
        let s = DocSizes::measure().expect("sizes");
        // An entry holds a 37-byte URI, a timestamp, a 32-digit md5, a length and a type.
        assert!((150..400).contains(&s.resource_list_entry), "{s:?}");
        assert!(s.change_list_entry > s.resource_list_entry, "{s:?}");
        assert!(s.change_list_delete_entry < s.change_list_entry, "{s:?}");
        assert_eq!(
            s.resource_list(10),
            s.resource_list_header + 10 * s.resource_list_entry
        );
    }
}
