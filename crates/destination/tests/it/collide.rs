//! Two URIs that map to one path never share a copy (SECURITY.md, "Two URIs, one path").
//!
//! A Source at `http://A/` lists `http://A/127.0.0.1_PV/doc.txt` (its own, mapped to
//! `DEST/127.0.0.1_PV/doc.txt`) and `http://127.0.0.1:PV/doc.txt` (another host, mapped to
//! `DEST/127.0.0.1_PV/doc.txt` too). Whichever has the path (recorded, or first in flight),
//! the other is refused before anything is written there: its copy neither overwrites the
//! first one's file nor is recorded against its bytes.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use resourcesync_destination::{Quiet, SyncOptions, SyncReport, sync};
use resourcesync_store::{Records, RelPath, SqliteState};

const NS: &str = "xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
                  xmlns:rs=\"http://www.openarchives.org/rs/terms/\"";

fn md(body: &[u8]) -> String {
    let (_, h) = resourcesync_model::MultiHasher::new(&[resourcesync_model::HashAlg::Md5])
        .hash_reader(body)
        .expect("hash");
    format!("length=\"{}\" hash=\"{h}\"", body.len())
}

/// A Resource List of `(loc, body published)` entries.
fn rl(entries: &[(&str, &[u8])]) -> String {
    let mut s = format!(
        "<?xml version=\"1.0\"?>\n<urlset {NS}>\n<rs:md capability=\"resourcelist\" at=\"2020-01-01T00:00:00Z\"/>\n"
    );
    for (loc, body) in entries {
        s.push_str(&format!(
            "<url><loc>{loc}</loc><rs:md {}/></url>\n",
            md(body)
        ));
    }
    s.push_str("</urlset>\n");
    s
}

/// The two Sources' servers: the attacker's (`a`, serving the list and its own URI of the
/// path) and the victim's (`v`, another host to the list), and the shared path.
struct Pair {
    a_root: tempfile::TempDir,
    a: Server,
    /// Served by `v` while the pair lives.
    _v_root: tempfile::TempDir,
    v: Server,
    /// The victim's URI and the attacker's, and the path both map to.
    victim: String,
    attacker: String,
    path: String,
}

const VICTIM: &[u8] = b"the victim's own bytes\n";
const ATTACKER: &[u8] = b"what the attacker wants attributed to the victim\n";

impl Pair {
    /// `attacker_body`: what the attacker's URI serves (the victim's bytes: the same digest).
    async fn start(attacker_body: &[u8]) -> Pair {
        let v_root = tmp();
        write_tree(v_root.path(), &[("doc.txt", VICTIM)]);
        let v = Server::start(v_root.path()).await;
        let port = v
            .base
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .expect("port")
            .to_owned();
        let path = format!("127.0.0.1_{port}/doc.txt");
        let a_root = tmp();
        write_tree(a_root.path(), &[(&path, attacker_body)]);
        let a = Server::start(a_root.path()).await;
        Pair {
            victim: format!("{}doc.txt", v.base),
            attacker: format!("{}{path}", a.base),
            a_root,
            a,
            _v_root: v_root,
            v,
            path,
        }
    }

    /// Publishes the attacker's list of `entries`.
    fn list(&self, entries: &[(&str, &[u8])]) {
        write_tree(self.a_root.path(), &[("list.xml", rl(entries).as_bytes())]);
    }

    fn options(&self, dest: &Path) -> SyncOptions {
        let mut o = options(&format!("{}list.xml", self.a.base), dest);
        o.http.retries = 0;
        o
    }
}

async fn run(o: &SyncOptions) -> SyncReport {
    sync(o, Arc::new(Quiet)).await.expect("sync")
}

/// The failure of `uri` in `r`.
fn failure<'a>(r: &'a SyncReport, uri: &str) -> &'a str {
    r.failures
        .iter()
        .find(|f| f.uri == uri)
        .map(|f| f.error.as_str())
        .unwrap_or_else(|| panic!("no failure for {uri}: {:?}", r.failures))
}

/// The copy at `path` is `owner`'s: its bytes, the only row of the path, and `refused` has no
/// row.
fn owned_by(o: &SyncOptions, dest: &Path, path: &str, owner: &str, bytes: &[u8], refused: &str) {
    assert_eq!(
        std::fs::read(dest.join(path)).expect("copy"),
        bytes,
        "the copy at {path} is {owner}'s"
    );
    let st = SqliteState::open(&o.state_path()).expect("state");
    assert_eq!(
        st.path_owner(&RelPath::parse(path).expect("path"))
            .expect("owner")
            .as_deref(),
        Some(owner)
    );
    assert!(
        st.resource(refused).expect("row").is_none(),
        "{refused} recorded against {owner}'s copy"
    );
    let row = st.resource(owner).expect("row").expect("owner's row");
    assert_eq!(row.length, Some(bytes.len() as u64));
}

/// The exact attack, in both orders (the victim's copy recorded first, or the attacker's),
/// with the same digest (the second would be recorded against the first one's bytes without
/// being fetched) and with another (the second would overwrite the first one's copy). The
/// refused URI is a failure of its own that names the other URI and what to do, run after run;
/// the first one's copy stays as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uri_whose_path_another_uri_has_is_refused_in_either_order() {
    for same_digest in [true, false] {
        for victim_first in [true, false] {
            let case = format!("same digest {same_digest}, victim first {victim_first}");
            let body = if same_digest { VICTIM } else { ATTACKER };
            let p = Pair::start(body).await;
            let (first, first_bytes, second) = if victim_first {
                (&p.victim, VICTIM, &p.attacker)
            } else {
                (&p.attacker, body, &p.victim)
            };
            let out = tmp();
            let dest = dest_in(&out);
            let o = p.options(&dest);
            p.list(&[(first, first_bytes)]);
            let r = run(&o).await;
            assert_eq!((r.created, r.failed), (1, 0), "{case}: {:?}", r.failures);
            p.list(&[(&p.victim, VICTIM), (&p.attacker, body)]);
            p.a.reset_hits();
            p.v.reset_hits();
            for round in 0..2 {
                let r = run(&o).await;
                assert_eq!(
                    (r.created, r.updated, r.failed),
                    (0, 0, 1),
                    "{case}, round {round}: {:?}",
                    r.failures
                );
                let e = failure(&r, second);
                assert!(
                    e.contains(&format!("taken by {first}")) && e.contains(&p.path),
                    "{case}: {e}"
                );
                assert!(e.contains("--exclude"), "{case}: what to do: {e}");
                owned_by(&o, &dest, &p.path, first, first_bytes, second);
            }
            // Refused before anything was fetched for it.
            let hits = if victim_first {
                p.a.hits(&format!("/{}", p.path))
            } else {
                p.v.hits("/doc.txt")
            };
            assert_eq!(hits, 0, "{case}: the refused URI was fetched");
        }
    }
}

/// Both new in one run: the URI submitted first (a baseline goes in URI order) is copied,
/// even when its download ends last; the other is refused, whatever the timing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_new_uris_of_one_path_the_first_is_copied_whichever_ends_first() {
    let p = Pair::start(ATTACKER).await;
    let out = tmp();
    let dest = dest_in(&out);
    let o = p.options(&dest);
    p.list(&[(&p.victim, VICTIM), (&p.attacker, ATTACKER)]);
    let victim_first = p.victim < p.attacker;
    let (first, first_bytes, second) = if victim_first {
        (&p.victim, VICTIM, &p.attacker)
    } else {
        (&p.attacker, ATTACKER, &p.victim)
    };
    // The first one's body comes late: the second's download ends first.
    if victim_first {
        p.v.fault("/doc.txt", Fault::Delay(Duration::from_millis(400)));
    } else {
        p.a.fault(
            &format!("/{}", p.path),
            Fault::Delay(Duration::from_millis(400)),
        );
    }
    let r = run(&o).await;
    assert_eq!((r.created, r.failed), (1, 1), "{:?}", r.failures);
    let e = failure(&r, second);
    assert!(e.contains(&format!("taken by {first}")), "{e}");
    owned_by(&o, &dest, &p.path, first, first_bytes, second);
}

/// Through a Resource Dump (a Source with dumps and no list): of two manifest entries whose
/// URIs map to one path, the first in manifest order is extracted there and the second
/// refused, in either order; the refusal is a failure of the run, kept as pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_dump_entries_of_one_path_the_first_is_extracted() {
    use crate::hand::{T1, capability_list, dump_doc, package};
    for victim_first in [true, false] {
        let src = tmp();
        let server = Server::start(src.path()).await;
        let b = server.base.clone();
        let cap = format!("{b}resourcesync/cap.xml");
        let own = format!("{b}victim.example/doc.txt");
        let victim = "http://victim.example/doc.txt".to_owned();
        let mut entries = vec![
            (victim.clone(), "/resources/v", VICTIM, ""),
            (own.clone(), "/resources/o", ATTACKER, ""),
        ];
        if !victim_first {
            entries.reverse();
        }
        let (first, first_bytes, second) =
            (entries[0].0.clone(), entries[0].2, entries[1].0.clone());
        let p1 = package(
            &cap,
            &format!("capability=\"resourcedump-manifest\" at=\"{T1}\""),
            &entries,
        );
        let rd = dump_doc(
            &cap,
            &format!("capability=\"resourcedump\" at=\"{T1}\""),
            &[(format!("{b}resourcesync/p1.zip"), &p1, "")],
        );
        write_tree(
            src.path(),
            &[
                (
                    "resourcesync/cap.xml",
                    capability_list(&[("resourcedump", format!("{b}resourcesync/rd.xml"))])
                        .as_bytes(),
                ),
                ("resourcesync/rd.xml", rd.as_bytes()),
                ("resourcesync/p1.zip", &p1),
            ],
        );
        let out = tmp();
        let dest = dest_in(&out);
        let mut o = options(&cap, &dest);
        o.http.retries = 0;
        let r = run(&o).await;
        assert_eq!(
            (r.created, r.failed),
            (1, 1),
            "victim first {victim_first}: {:?}",
            r.failures
        );
        let e = failure(&r, &second);
        assert!(e.contains(&format!("taken by {first}")), "{e}");
        owned_by(
            &o,
            &dest,
            "victim.example/doc.txt",
            &first,
            first_bytes,
            &second,
        );
    }
}
