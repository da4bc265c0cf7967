//! The aggregator is no proxy into its own network (SECURITY.md, "The aggregator fetches for a
//! Source only from where the operator said"): a hostile Source lists a URL of an internal
//! service (a second loopback server standing for the cloud metadata service, holding a
//! secret); the aggregator never requests it, directly, through a redirect, or through a name
//! resolving to a private address; it never serves or republishes it; the Source's own
//! resources are copied and republished as usual. An `allow_hosts` entry naming the other
//! origin exactly makes it fetched.

use std::time::Duration;

use resourcesync_aggregate::status::SourceView;
use resourcesync_model::{Capability, Entry};
use resourcesync_testkit::{Fault, Reply, Server};

use crate::republish::{aggregator, document, named};
use crate::service::until;

const SECRET: &[u8] = b"AKIA-THE-INSTANCE-ROLE-SECRET\n";
const SECRET_PATH: &str = "/latest/meta-data/iam/security-credentials/role";
const OWN: &[u8] = b"an ordinary resource\n";

fn md5_hex(b: &[u8]) -> String {
    use md5::Digest as _;
    hex::encode(md5::Md5::digest(b))
}

/// The internal service: the secret at [`SECRET_PATH`].
async fn metadata_service() -> Server {
    let m = Server::empty().await;
    m.route(SECRET_PATH, Reply::ok(SECRET));
    m
}

/// A Source written by hand whose Resource List lists its own `own/a.txt` (digest, length) and
/// `foreign` (no digest, no length: the attack of the task).
fn hostile_source(s: &Server, foreign: &str) {
    let b = &s.base;
    crate::route_source(
        s,
        "2026-11-01T00:00:00Z",
        &format!(
            r#"  <url><loc>{b}own/a.txt</loc><rs:md hash="md5:{h}" length="{l}"/></url>
  <url><loc>{foreign}</loc></url>"#,
            h = md5_hex(OWN),
            l = OWN.len(),
        ),
    );
    s.route("/own/a.txt", Reply::ok(OWN));
}

/// Runs the aggregator (republishing) on the Source `s` with `extra` lines in its
/// `[[source]]`, until its first republish: its status, the entries of its republished
/// Resource List, and its base URL.
async fn run(s: &Server, extra: &str, store: &std::path::Path) -> (SourceView, Vec<Entry>, String) {
    let text = format!(
        "[[source]]\nname = \"src\"\nurl = \"{}caps.xml\"\nschedule = \"1h\"\n{extra}\n",
        s.base
    );
    let (agg, base) = aggregator(&text, store).await;
    let v = until(&agg, "src", Duration::from_secs(60), |v| v.republishes >= 1).await;
    assert!(v.republish_error.is_none(), "{v:#?}");
    let (_, caps) = document(&format!("{base}rs/src/resourcesync/capabilitylist.xml")).await;
    let (_, list) = document(&named(&caps, Capability::ResourceList)).await;
    (v, list, base)
}

/// The republished entries name nothing on `port`, in their `loc` or any link.
fn nothing_on(list: &[Entry], port: u16) {
    let needle = format!(":{port}");
    for e in list {
        assert!(!e.loc.contains(&needle), "{e:?}");
        for l in &e.links {
            assert!(!l.href.contains(&needle), "{e:?}");
        }
    }
}

/// The own resource is copied and republished with its `via`.
fn own_republished(list: &[Entry], s: &Server, base: &str) {
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0].loc, format!("{base}rs/src/own/a.txt"));
    let via: Vec<&str> = list[0]
        .links
        .iter()
        .filter(|l| l.rel == "via")
        .map(|l| l.href.as_str())
        .collect();
    assert_eq!(via, [format!("{}own/a.txt", s.base)]);
}

/// No file under `store` holds the secret.
fn secret_not_stored(store: &std::path::Path) {
    let mut todo = vec![store.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let b = std::fs::read(&p).expect("read");
                assert!(
                    !b.windows(SECRET.len()).any(|w| w == SECRET),
                    "{} holds the secret",
                    p.display()
                );
            }
        }
    }
}

/// The failure of the foreign resource is in the Source's last sync summary, saying why.
fn refused_in_summary(v: &SourceView, why: &str) {
    let sync = v
        .recent
        .iter()
        .rev()
        .find(|e| e.kind == "sync")
        .unwrap_or_else(|| panic!("no sync in {v:#?}"));
    assert!(sync.summary.contains("1 failed"), "{}", sync.summary);
    assert!(sync.summary.contains(why), "{}", sync.summary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_listing_an_internal_url_gets_nothing_from_it() {
    let meta = metadata_service().await;
    let s = Server::empty().await;
    let foreign = meta.url(SECRET_PATH);
    hostile_source(&s, &foreign);
    let store = tempfile::tempdir().expect("store");
    let (v, list, base) = run(&s, "", store.path()).await;

    assert_eq!(meta.hits(SECRET_PATH), 0, "the internal service was asked");
    refused_in_summary(&v, "allow_hosts");
    refused_in_summary(&v, &format!("http://127.0.0.1:{}", meta.addr.port()));
    own_republished(&list, &s, &base);
    nothing_on(&list, meta.addr.port());
    let r = reqwest::get(format!(
        "{base}rs/src/127.0.0.1_{}{SECRET_PATH}",
        meta.addr.port()
    ))
    .await
    .expect("GET");
    assert_ne!(r.status().as_u16(), 200);
    let body = r.bytes().await.expect("body");
    assert!(!body.windows(SECRET.len()).any(|w| w == SECRET));
    secret_not_stored(store.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_from_the_source_to_an_internal_url_is_refused() {
    let meta = metadata_service().await;
    let s = Server::empty().await;
    // The listed URL is the Source's own; it redirects to the internal service.
    hostile_source(&s, &s.url("hop/role"));
    s.fault("/hop/role", Fault::Redirect(meta.url(SECRET_PATH)));
    let store = tempfile::tempdir().expect("store");
    let (v, list, base) = run(&s, "", store.path()).await;

    assert_eq!(s.hits("/hop/role"), 1, "asked once, not retried");
    assert_eq!(meta.hits(SECRET_PATH), 0, "the redirect was followed");
    refused_in_summary(&v, "redirected to");
    own_republished(&list, &s, &base);
    nothing_on(&list, meta.addr.port());
    secret_not_stored(store.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_public_host_excludes_names_resolving_to_private_addresses() {
    let meta = metadata_service().await;
    let s = Server::empty().await;
    // `localhost` resolves to loopback addresses only.
    let foreign = format!("http://localhost:{}{SECRET_PATH}", meta.addr.port());
    hostile_source(&s, &foreign);
    let store = tempfile::tempdir().expect("store");
    let (v, list, base) = run(&s, "allow_hosts = [\"*:*\"]", store.path()).await;

    assert_eq!(meta.hits(SECRET_PATH), 0, "the internal service was asked");
    refused_in_summary(&v, "resolves only to private addresses");
    own_republished(&list, &s, &base);
    nothing_on(&list, meta.addr.port());
    secret_not_stored(store.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_allowed_exactly_is_fetched() {
    let other = Server::empty().await;
    let body = b"a resource on a partner host\n";
    other.route("/files/b.txt", Reply::ok(body.as_slice()));
    let s = Server::empty().await;
    hostile_source(&s, &other.url("files/b.txt"));
    let store = tempfile::tempdir().expect("store");
    let allow = format!("allow_hosts = [\"http://127.0.0.1:{}\"]", other.addr.port());
    let (v, list, _) = run(&s, &allow, store.path()).await;

    assert_eq!(other.hits("/files/b.txt"), 1);
    assert_eq!(v.resources, 2, "{v:#?}");
    let e = list
        .iter()
        .find(|e| e.links.iter().any(|l| l.href == other.url("files/b.txt")))
        .unwrap_or_else(|| panic!("no entry with a via to the partner: {list:?}"));
    let copy = reqwest::get(&e.loc).await.expect("GET copy");
    assert_eq!(copy.status().as_u16(), 200, "{}", e.loc);
    assert_eq!(&copy.bytes().await.expect("body")[..], body);
}

/// The fetches handed to the workers through the PostgreSQL queue (`share_above`) are held to
/// the same origins: the worker that claims the internal URL refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_shared_through_the_work_queue_keep_to_the_source() {
    let pg = crate::server_env("RESOURCESYNC_TEST_POSTGRES");
    let meta = metadata_service().await;
    let s = Server::empty().await;
    hostile_source(&s, &meta.url(SECRET_PATH));
    let name = format!("reach_{:08x}", fastrand::u32(..));
    let text = format!(
        "[limits]\nshare_above = 1\n\n[[source]]\nname = \"{name}\"\nurl = \"{}caps.xml\"\n\
         schedule = \"1h\"\n",
        s.base
    );
    let store = tempfile::tempdir().expect("store");
    // Another worker alive: the fetches are queued (a worker alone does them itself).
    crate::share_alone::other_worker_alive(&pg, &name);
    let agg = resourcesync_aggregate::Aggregator::start(
        &crate::service::config(&text),
        resourcesync_aggregate::Options {
            store: store.path().to_owned(),
            state: resourcesync_aggregate::StateChoice::Postgres(pg),
            worker: "reach".into(),
            object_store: None,
            republish: None,
        },
    )
    .expect("start");
    // Both fetches done by the worker's claimer, one way or the other.
    let v = until(&agg, &name, Duration::from_secs(60), |v| {
        v.syncs >= 1 && v.shared_copies + v.shared_failures >= 2
    })
    .await;
    assert_eq!(meta.hits(SECRET_PATH), 0, "the internal service was asked");
    assert_eq!((v.shared_copies, v.resources), (1, 1), "{v:#?}");
    assert!(v.shared_failures >= 1, "{v:#?}");
    secret_not_stored(store.path());
}
