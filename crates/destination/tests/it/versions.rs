//! `--versions` (issue 37 items 1 and 2; `docs/history.md`): every body a run puts in place is
//! kept, content-addressed by sha-256, beside the copies, and recorded as a version with the
//! Source's `<lastmod>` and this Destination's first sight of it; a deleted resource keeps its
//! versions and the time of the delete. On a directory with SQLite, and on an S3 bucket with
//! PostgreSQL (`RESOURCESYNC_TEST_S3`, `RESOURCESYNC_TEST_POSTGRES`: failing without them).

use std::io::Read;
use std::sync::Arc;

use crate::common::*;
use resourcesync_destination::{Destination, Ports, Quiet, SyncOptions, SyncReport, http::Http};
use resourcesync_model::{HashAlg, MultiHasher};
use resourcesync_store::{
    FsStore, PgState, Records, S3Config, S3Store, SqliteState, Store, VersionRecord, version_digest,
};

pub(crate) fn sha(body: &[u8]) -> String {
    let mut h = MultiHasher::new(&[HashAlg::Sha256]);
    h.update(body);
    version_digest(&h.finish()).expect("sha-256")
}

/// The body kept under `digest`, if any.
fn kept(store: &dyn Store, digest: &str) -> Option<Vec<u8>> {
    let f = store.features();
    let v = f.versions.expect("the store keeps versions");
    let mut r = v.open_version(digest).expect("open")?;
    let mut out = Vec::new();
    r.read_to_end(&mut out).expect("read");
    Some(out)
}

/// Runs a closure of the ports where blocking is allowed (S3 and PostgreSQL block).
pub(crate) async fn off<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("task")
}

/// A bucket store under a prefix of this test's own (`NAME-TAG/`) and a PostgreSQL state in a
/// schema of its own (`NAME_TAG`), from the servers of scripts/test.sh; the scratch folder is
/// held by the caller. Fails loudly without them.
pub(crate) async fn bucket_and_pg(
    name: &str,
) -> (Arc<S3Store>, Arc<dyn Records>, tempfile::TempDir) {
    let s3 = std::env::var("RESOURCESYNC_TEST_S3").unwrap_or_default();
    let pg = std::env::var("RESOURCESYNC_TEST_POSTGRES").unwrap_or_default();
    assert!(
        !s3.is_empty() && !pg.is_empty(),
        "RESOURCESYNC_TEST_S3 and RESOURCESYNC_TEST_POSTGRES must be set: run \
         `export RESOURCESYNC_TEST_S3=$(scripts/s3.sh) RESOURCESYNC_TEST_POSTGRES=$(scripts/postgres.sh)` \
         first, or every test with scripts/test.sh"
    );
    let tag = format!("{:08x}", fastrand::u32(..));
    let cfg = S3Config::parse(&s3)
        .expect("S3 URL")
        .with_prefix(&format!("{name}-{tag}/"))
        .expect("prefix");
    let scratch = tmp();
    let dir = scratch.path().to_owned();
    let s3 = Arc::new(
        off(move || S3Store::with_config(cfg))
            .await
            .expect("bucket")
            .with_scratch(dir),
    );
    let schema = format!("{name}_{tag}");
    let state: Arc<dyn Records> = Arc::new(
        off(move || PgState::connect_schema(&pg, &schema))
            .await
            .expect("state"),
    );
    (s3, state, scratch)
}

/// Removes every object under the store's prefix (kept bodies too); returns their names.
pub(crate) async fn empty_bucket(s3: Arc<S3Store>) -> Vec<String> {
    off(move || {
        let b = s3.bucket();
        let mut names = Vec::new();
        b.list("", None, &mut |o| {
            names.push(o.name);
            Ok(std::ops::ControlFlow::Continue(()))
        })
        .expect("list");
        for n in &names {
            b.delete(n).expect("clean up");
        }
        names
    })
    .await
}

pub(crate) struct Setup {
    pub(crate) src: tempfile::TempDir,
    pub(crate) server: Server,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) state: Arc<dyn Records>,
    pub(crate) d: Destination,
    pub(crate) o: SyncOptions,
    _work: tempfile::TempDir,
}

impl Setup {
    pub(crate) async fn new(store: Arc<dyn Store>, state: Arc<dyn Records>) -> Setup {
        let src = tmp();
        write_tree(
            src.path(),
            &[
                ("a.txt", b"one"),
                ("b.txt", b"the same body"),
                ("c.txt", b"the same body"),
            ],
        );
        let server = Server::start(src.path()).await;
        publish(src.path(), &server.base, None);
        let work = tmp();
        let mut o = options(&server.base, &work.path().join("unused"));
        o.versions = true;
        o.use_dumps = false;
        let ports = Ports::new(store.clone(), state.clone(), work.path(), "(test)");
        let d = Destination::new(
            &server.base,
            ports,
            Http::new(o.http.clone()).expect("client"),
        );
        Setup {
            src,
            server,
            store,
            state,
            d,
            o,
            _work: work,
        }
    }

    pub(crate) async fn run(&self) -> SyncReport {
        self.d.sync(&self.o, Arc::new(Quiet)).await.expect("sync")
    }

    pub(crate) fn change(&self, files: &[(&str, &[u8])]) {
        write_tree(self.src.path(), files);
        publish(self.src.path(), &self.server.base, None);
    }

    pub(crate) async fn versions(&self, key: &str, name: &str) -> Vec<VersionRecord> {
        let (state, key, uri) = (
            self.state.clone(),
            key.to_owned(),
            format!("{}{name}", self.server.base),
        );
        off(move || state.versions_of(&key, &uri, None, 100).expect("versions")).await
    }

    pub(crate) async fn kept(&self, digest: &str) -> Option<Vec<u8>> {
        let (store, digest) = (self.store.clone(), digest.to_owned());
        off(move || kept(store.as_ref(), &digest)).await
    }
}

/// A resource changed twice keeps its three bodies, in order, each with the Source's
/// `<lastmod>`, when it was first seen and until when it was current; a body listed again
/// (by the same resource in later runs, or by another resource) is stored once; a resource
/// the Source deletes keeps its versions, the last one ending at the delete.
async fn changed_twice_then_deleted(store: Arc<dyn Store>, state: Arc<dyn Records>) {
    let s = Setup::new(store, state).await;
    let r = s.run().await;
    assert_eq!((r.created, r.failed), (3, 0), "{r:?}");
    let key = r.source.key();
    let v = r.versions.expect("the report says what was kept");
    assert_eq!((v.versions, v.bodies), (3, 2), "{v:?}");
    assert_eq!(v.bytes, 3 + 13);

    s.change(&[("a.txt", b"two, longer")]);
    let r = s.run().await;
    assert_eq!((r.updated, r.failed), (1, 0), "{r:?}");
    s.change(&[("a.txt", b"three")]);
    let r = s.run().await;
    assert_eq!((r.updated, r.failed), (1, 0), "{r:?}");
    let v = r.versions.expect("kept");
    assert_eq!((v.versions, v.bodies, v.bytes), (1, 1, 5), "{v:?}");

    let a = s.versions(&key, "a.txt").await;
    let digests: Vec<&str> = a.iter().map(|v| v.digest.as_str()).collect();
    assert_eq!(digests, [sha(b"one"), sha(b"two, longer"), sha(b"three")]);
    assert_eq!(
        a.iter().map(|v| (v.seq, v.length)).collect::<Vec<_>>(),
        [(1, 3), (2, 11), (3, 5)]
    );
    assert!(a.iter().all(|v| v.datetime.is_some()), "{a:#?}");
    assert_eq!(a[0].until, Some(a[1].first_seen), "{a:#?}");
    assert_eq!(a[1].until, Some(a[2].first_seen), "{a:#?}");
    assert!(a[0].first_seen <= a[1].first_seen && a[1].first_seen <= a[2].first_seen);
    assert_eq!(a[2].until, None);
    for (v, body) in a.iter().zip([&b"one"[..], b"two, longer", b"three"]) {
        assert_eq!(s.kept(&v.digest).await.as_deref(), Some(body));
    }
    // Unchanged through three runs, and the same body as another resource: one version each,
    // one body.
    for name in ["b.txt", "c.txt"] {
        let b = s.versions(&key, name).await;
        assert_eq!(b.len(), 1, "{name}: {b:#?}");
        assert_eq!(b[0].digest, sha(b"the same body"));
    }

    // Deleted at the Source (the copy kept: no --delete).
    std::fs::remove_file(s.src.path().join("a.txt")).expect("rm");
    publish(s.src.path(), &s.server.base, None);
    let r = s.run().await;
    assert_eq!((r.kept, r.failed), (1, 0), "{r:?}");
    let after = s.versions(&key, "a.txt").await;
    assert_eq!(after.len(), 3, "{after:#?}");
    assert_eq!(after[..2], a[..2]);
    assert!(after[2].deleted && after[2].until.is_some(), "{after:#?}");
    assert_eq!(s.kept(&sha(b"three")).await.as_deref(), Some(&b"three"[..]));

    // Deleted at the Source and removed here (--delete): the row goes, the versions stay, the
    // last one ended with the Source's time of the delete; the body another resource still
    // has is kept.
    std::fs::remove_file(s.src.path().join("c.txt")).expect("rm");
    publish(s.src.path(), &s.server.base, None);
    let mut o = s.o.clone();
    o.delete = true;
    let r = s.d.sync(&o, Arc::new(Quiet)).await.expect("sync --delete");
    assert_eq!(
        (r.deleted, r.failed),
        (2, 0),
        "a.txt (kept before) and c.txt: {r:?}"
    );
    let c = s.versions(&key, "c.txt").await;
    assert_eq!(c.len(), 1, "{c:#?}");
    assert!(c[0].deleted && c[0].until.is_some(), "{c:#?}");
    assert!(
        c[0].deleted_datetime.is_some(),
        "the Change List's datetime: {c:#?}"
    );
    assert_eq!(
        s.kept(&sha(b"the same body")).await.as_deref(),
        Some(&b"the same body"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_keeps_every_version() {
    let dest = tmp();
    let store: Arc<dyn Store> = Arc::new(FsStore::open(dest.path()).expect("store"));
    let state: Arc<dyn Records> = Arc::new(
        SqliteState::open(&dest.path().join(".resourcesync/state.sqlite")).expect("state"),
    );
    changed_twice_then_deleted(store, state).await;
    // The bodies are files beside the copies, outside every copy's path.
    let n = walk_files(&dest.path().join(".resourcesync/versions"));
    assert_eq!(n, 4, "one, two, three, the same body");
}

fn walk_files(dir: &std::path::Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let t = e.file_type().expect("type");
        if t.is_dir() {
            n += walk_files(&e.path());
        } else if t.is_file() {
            n += 1;
        }
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_keeps_every_version() {
    let (s3, state, _scratch) = bucket_and_pg("versions").await;
    let store: Arc<dyn Store> = s3.clone();
    changed_twice_then_deleted(store.clone(), state).await;
    // The kept bodies are not copies: a listing of the bucket names only the copies.
    let keys = off(move || {
        let mut keys = Vec::new();
        store
            .list(None, &mut |item| {
                keys.push(item.expect("key").0.to_string());
                Ok(std::ops::ControlFlow::Continue(()))
            })
            .expect("list");
        keys
    })
    .await;
    assert_eq!(keys, ["b.txt"]);
    // Everything under the test's prefix goes, the kept bodies too.
    let names = empty_bucket(s3).await;
    assert!(
        names
            .iter()
            .any(|n| n.starts_with(".resourcesync/versions/sha256/")),
        "{names:?}"
    );
}

/// A body refused (its published digest is not its own) is never put in place, so never kept:
/// only the good resource has a version, and only its body is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_body_never_becomes_a_version() {
    let root = tmp();
    write_tree(root.path(), &[("a.txt", b"alpha"), ("b.txt", b"bravo")]);
    let server = Server::start(root.path()).await;
    let b = &server.base;
    let md5 = |body: &[u8]| {
        let mut h = MultiHasher::new(&[HashAlg::Md5]);
        h.update(body);
        h.finish().to_string()
    };
    let doc = format!(
        "<?xml version=\"1.0\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
         xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n\
         <rs:md capability=\"resourcelist\" at=\"2020-01-01T00:00:00Z\"/>\n\
         <url><loc>{b}a.txt</loc><lastmod>2020-01-01T00:00:00Z</lastmod>\
         <rs:md length=\"5\" hash=\"{}\"/></url>\n\
         <url><loc>{b}b.txt</loc><rs:md length=\"5\" hash=\"{}\"/></url>\n</urlset>\n",
        md5(b"alpha"),
        md5(b"BRAVO"),
    );
    write_tree(root.path(), &[("hostile/rl.xml", doc.as_bytes())]);
    let dest = tmp();
    let mut o = options(&format!("{b}hostile/rl.xml"), dest.path());
    o.versions = true;
    o.http.retries = 0;
    let r = resourcesync_destination::sync(&o, Arc::new(Quiet))
        .await
        .expect("sync");
    assert_eq!((r.created, r.failed), (1, 1), "{r:?}");
    let v = r.versions.expect("kept");
    assert_eq!((v.versions, v.bodies, v.bytes), (1, 1, 5), "{v:?}");
    let state = SqliteState::open(&dest.path().join(".resourcesync/state.sqlite")).expect("state");
    let key = r.source.key();
    let a = state
        .versions_of(&key, &format!("{b}a.txt"), None, 10)
        .expect("versions");
    assert_eq!(a.len(), 1, "{a:#?}");
    assert_eq!(
        a[0].datetime.map(|d| d.to_string()).as_deref(),
        Some("2020-01-01T00:00:00Z")
    );
    assert!(
        state
            .versions_of(&key, &format!("{b}b.txt"), None, 10)
            .expect("versions")
            .is_empty()
    );
    assert_eq!(walk_files(&dest.path().join(".resourcesync/versions")), 1);
    let store = FsStore::open(dest.path()).expect("store");
    assert!(kept(&store, &sha(b"BRAVO")).is_none());
    assert!(kept(&store, &sha(b"bravo")).is_none());
}
