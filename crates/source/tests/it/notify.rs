//! Change Notification over WebSub from a served Source with an embedded hub (Change
//! Notification 1.0.1 §3, §4.1, §5; Framework Notification 1.0.1 §3). Batches are run by hand
//! (no watcher), and deliveries are awaited on a channel with a deadline.
#![allow(clippy::unwrap_used)] // test helpers: a failure is the test failing

use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use resourcesync_model::{Capability, Change, DocumentReader, ReadOptions, validate};
use resourcesync_source::server::{self, HubChoice, ServeOptions};
use resourcesync_source::watch::WatchOptions;
use resourcesync_source::{Source, SourceConfig};
use resourcesync_websub::hub::HubEvent;
use resourcesync_websub::subscriber::VerificationRequest;
use resourcesync_websub::{signature, subscribe};
use tokio::sync::mpsc;

const DEADLINE: Duration = Duration::from_secs(20);

/// What the failing hub of the 500 test shares: whether it fails, and where accepted posts go.
type HubState = (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    mpsc::UnboundedSender<(HeaderMap, Bytes)>,
);

async fn callback_server() -> (String, mpsc::UnboundedReceiver<(HeaderMap, Bytes)>) {
    let (tx, rx) = mpsc::unbounded_channel::<(HeaderMap, Bytes)>();
    let app = Router::new()
        .fallback(
            |State(tx): State<mpsc::UnboundedSender<(HeaderMap, Bytes)>>, req: Request| async move {
                let q = req.uri().query().unwrap_or("").to_owned();
                let (parts, body) = req.into_parts();
                if parts.method == axum::http::Method::GET {
                    let v = VerificationRequest::parse(&q).expect("a hub request");
                    return v.answer(true).into_response();
                }
                let b = axum::body::to_bytes(body, 1 << 24).await.unwrap();
                let _ = tx.send((parts.headers, b));
                "ok".into_response()
            },
        )
        .with_state(tx);
    let addr = resourcesync_testkit::serve(app).await;
    (format!("http://{addr}/cb"), rx)
}

fn read(body: &[u8]) -> (resourcesync_model::Header, Vec<resourcesync_model::Entry>) {
    let mut r = DocumentReader::new(body, ReadOptions::named("payload")).unwrap();
    let h = r.header().clone();
    let mut es = Vec::new();
    while let Some(e) = r.next_entry().unwrap() {
        es.push(e);
    }
    (h, es)
}

/// `serve` over `dir` on 127.0.0.1 notifying through `hub`, batches run by the test only (no
/// watcher, no rescan); its base URL.
async fn serve_with_hub(dir: &std::path::Path, hub: HubChoice) -> (String, server::Running) {
    let listener = server::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let mut cfg = SourceConfig::new(dir, &base);
    server::prepare_config(&mut cfg);
    let source = Source::open(cfg).unwrap();
    let opts = ServeOptions {
        watch: WatchOptions {
            use_watcher: false,
            rescan_interval: Duration::from_secs(3600),
            ..WatchOptions::default()
        },
        ..ServeOptions::default()
    };
    let running = server::start_with(source, listener, opts, Some(hub))
        .await
        .unwrap();
    (base, running)
}

/// [`serve_with_hub`] with its embedded hub.
async fn serve_with_embedded_hub(dir: &std::path::Path) -> (String, server::Running) {
    serve_with_hub(dir, HubChoice::Embedded).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_are_pushed_as_change_notifications() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "first").unwrap();
    let (base, running) = serve_with_embedded_hub(dir.path()).await;
    let client = resourcesync_websub::hub::http_client(Duration::from_secs(10)).unwrap();

    // §5: the Capability List advertises both channels with their hub, and validates.
    let cl_url = format!("{base}resourcesync/capabilitylist.xml");
    let cl = client
        .get(&cl_url)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let report =
        validate(DocumentReader::new(&cl[..], ReadOptions::named(&cl_url)).unwrap()).unwrap();
    assert!(report.is_valid(), "{:?}", report.findings);
    let (_, entries) = read(&cl);
    let hub_url = format!("{base}resourcesync/hub");
    let topic = format!("{base}resourcesync/change-notification");
    let cn = entries
        .iter()
        .find(|e| {
            e.md.as_ref().and_then(|m| m.capability.clone()) == Some(Capability::ChangeNotification)
        })
        .expect("change-notification entry");
    assert_eq!(cn.loc, topic);
    assert_eq!(
        cn.link("hub").map(|l| l.href.as_str()),
        Some(hub_url.as_str())
    );
    assert!(
        entries
            .iter()
            .any(|e| e.md.as_ref().and_then(|m| m.capability.clone())
                == Some(Capability::FrameworkNotification))
    );

    // §4.1: the topic answers HEAD with 200, application/xml, Link self and hub.
    let head = client.head(&topic).send().await.unwrap();
    assert_eq!(head.status().as_u16(), 200);
    assert_eq!(head.headers()["content-type"], "application/xml");
    let d = resourcesync_websub::subscriber::discover_in_headers(&topic, head.headers());
    assert_eq!(d.hubs, vec![hub_url.clone()]);
    assert_eq!(d.topic.as_deref(), Some(topic.as_str()));

    // Subscribe through the advertised hub, with a secret.
    let mut events = running.hub().unwrap().events();
    let (cb, mut rx) = callback_server().await;
    subscribe(&client, &hub_url, &topic, &cb, Some("k3y"), None)
        .await
        .unwrap();
    tokio::time::timeout(DEADLINE, async {
        while !matches!(events.recv().await, Ok(HubEvent::Subscribed { .. })) {}
    })
    .await
    .unwrap();

    // A batch with one new file: one payload.
    std::fs::write(dir.path().join("b.txt"), "hello").unwrap();
    running.publisher().batch(false).await.unwrap();
    let (h1, body1) = tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap()
        .unwrap();
    signature::verify(
        b"k3y",
        h1.get("x-hub-signature").and_then(|v| v.to_str().ok()),
        &body1,
    )
    .unwrap();
    let rep = validate(DocumentReader::new(&body1[..], ReadOptions::named("p1")).unwrap()).unwrap();
    assert!(rep.is_valid(), "{:?}", rep.findings);
    let (hd1, es1) = read(&body1);
    let md1 = hd1.md.clone().unwrap();
    assert_eq!(md1.capability, Some(Capability::ChangeNotification));
    assert_eq!(es1.len(), 1);
    assert_eq!(es1[0].loc, format!("{base}b.txt"));
    let m = es1[0].md.clone().unwrap();
    assert_eq!(m.change, Some(Change::Created));
    assert!(m.datetime.is_some());
    assert_eq!(m.length, Some(5));
    assert_eq!(m.mime_type.as_deref(), Some("text/plain"));
    assert!(m.hash.is_some());
    let until1 = md1.until.unwrap();

    // Next batch: update and delete; `from` is the previous `until`, entries in order.
    std::fs::write(dir.path().join("b.txt"), "hello, again").unwrap();
    std::fs::remove_file(dir.path().join("a.txt")).unwrap();
    running.publisher().batch(false).await.unwrap();
    let (_, body2) = tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap()
        .unwrap();
    let (hd2, es2) = read(&body2);
    let md2 = hd2.md.unwrap();
    assert_eq!(md2.from, Some(until1), "consecutive intervals");
    assert!(md2.until.unwrap().cmp_instant(&until1).is_gt());
    let kinds: Vec<_> = es2
        .iter()
        .map(|e| e.md.clone().unwrap().change.unwrap())
        .collect();
    assert_eq!(es2.len(), 2);
    assert!(kinds.contains(&Change::Updated) && kinds.contains(&Change::Deleted));
    for w in es2.windows(2) {
        let (a, b) = (
            w[0].md.clone().unwrap().datetime.unwrap(),
            w[1].md.clone().unwrap().datetime.unwrap(),
        );
        assert!(!a.cmp_instant(&b).is_gt(), "forward chronological order");
    }
    // The topic now serves the newest payload.
    let t = client
        .get(&topic)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(t, body2);

    // A batch without changes sends nothing more.
    running.publisher().batch(false).await.unwrap();
    assert!(rx.try_recv().is_err());
    running.shutdown().await.unwrap();
}

/// A remote hub that answers 503 with `Retry-After: 1` twice: the ping is sent again under the
/// one retry policy (crates/http), after the delay the hub asked for, and the batch's changes
/// reach it without waiting for the next batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_hub_is_pinged_again_after_its_retry_after() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Instant;
    /// A ping: when, its topic (`Link` rel=self), whether it was refused.
    type Ping = (Instant, String, bool);
    let refusals = Arc::new(AtomicU32::new(2));
    let (tx, mut rx) = mpsc::unbounded_channel::<Ping>();
    let hub_app = Router::new()
        .fallback(
            |State((refusals, tx)): State<(Arc<AtomicU32>, mpsc::UnboundedSender<Ping>)>,
             req: Request| async move {
                let (parts, body) = req.into_parts();
                let _ = axum::body::to_bytes(body, 1 << 24).await;
                let links: Vec<&str> = parts
                    .headers
                    .get_all("link")
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .collect();
                let topic = resourcesync_websub::link::first(links.iter().copied(), "self")
                    .unwrap_or_default();
                let refused = refusals
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                let _ = tx.send((Instant::now(), topic, refused));
                if refused {
                    return (
                        axum::http::StatusCode::SERVICE_UNAVAILABLE,
                        [("retry-after", "1")],
                        "busy",
                    )
                        .into_response();
                }
                "ok".into_response()
            },
        )
        .with_state((refusals.clone(), tx));
    let hub_url = format!("http://{}/hub", resourcesync_testkit::serve(hub_app).await);
    let dir = tempfile::tempdir().unwrap();
    let (_, running) = serve_with_hub(dir.path(), HubChoice::Url(hub_url)).await;
    std::fs::write(dir.path().join("one.txt"), "1").unwrap();
    running.publisher().batch(false).await.unwrap();
    let mut pings: Vec<Ping> = Vec::new();
    while let Ok(p) = rx.try_recv() {
        pings.push(p);
    }
    assert_eq!(refusals.load(Ordering::SeqCst), 0, "{pings:?}");
    let refused = pings.iter().filter(|p| p.2).count();
    assert_eq!(refused, 2, "{pings:?}");
    // Per topic: each ping after a refusal waited the Retry-After; the last one was accepted.
    let mut topics: Vec<&String> = pings.iter().map(|p| &p.1).collect();
    topics.dedup();
    for topic in topics {
        let of: Vec<&Ping> = pings.iter().filter(|p| &p.1 == topic).collect();
        assert!(of.last().is_some_and(|p| !p.2), "{topic}: {of:?}");
        for w in of.windows(2).filter(|w| w[0].2) {
            assert!(
                w[1].0 - w[0].0 >= Duration::from_millis(950),
                "{topic}: pinged again after {:?}, before the Retry-After of 1 s",
                w[1].0 - w[0].0
            );
        }
    }
    running.shutdown().await.unwrap();
}

/// A remote hub that answers 500: the batch's changes are not marked sent, and go out with the
/// next batch once the hub is back, in one payload whose `from` continues the last one sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_that_500s_gets_everything_later() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let failing = Arc::new(AtomicBool::new(true));
    let (tx, mut rx) = mpsc::unbounded_channel::<(HeaderMap, Bytes)>();
    let hub_app = Router::new()
        .fallback(
            |State((failing, tx)): State<HubState>, req: Request| async move {
                let (parts, body) = req.into_parts();
                let b = axum::body::to_bytes(body, 1 << 24).await.unwrap();
                if failing.load(Ordering::SeqCst) {
                    return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "down").into_response();
                }
                let _ = tx.send((parts.headers, b));
                "ok".into_response()
            },
        )
        .with_state((failing.clone(), tx));
    let hub_url = format!("http://{}/hub", resourcesync_testkit::serve(hub_app).await);

    let dir = tempfile::tempdir().unwrap();
    let (base, running) = serve_with_hub(dir.path(), HubChoice::Url(hub_url)).await;
    let from0 = running
        .publisher()
        .lock()
        .unwrap()
        .state()
        .meta("notify:until")
        .unwrap()
        .unwrap();
    std::fs::write(dir.path().join("one.txt"), "1").unwrap();
    running.publisher().batch(false).await.unwrap();
    assert!(
        rx.try_recv().is_err(),
        "nothing accepted while the hub fails"
    );
    failing.store(false, Ordering::SeqCst);
    std::fs::write(dir.path().join("two.txt"), "2").unwrap();
    running.publisher().batch(false).await.unwrap();
    let (h, body) = tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap()
        .unwrap();
    // Change Notification §4.1: application/xml, Link rel=self (topic) and rel=hub.
    assert_eq!(h["content-type"], "application/xml");
    let links: Vec<&str> = h
        .get_all("link")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert!(
        resourcesync_websub::link::first(links.iter().copied(), "self")
            .is_some_and(|t| t.ends_with("/resourcesync/change-notification"))
    );
    assert!(resourcesync_websub::link::first(links.iter().copied(), "hub").is_some());
    let (hd, es) = read(&body);
    assert_eq!(hd.md.unwrap().from.unwrap().to_string(), from0);
    let locs: Vec<_> = es.iter().map(|e| e.loc.clone()).collect();
    assert_eq!(
        locs,
        vec![format!("{base}one.txt"), format!("{base}two.txt")]
    );
    running.shutdown().await.unwrap();
}

/// Framework Notification §2: when a batch changes the Change List that the Capability List
/// names (`resourcesync/changelist.xml`, the open Change List while it fits in one document),
/// the framework topic announces that document, with its `index` link, so that a Destination
/// following the Capability List's Change List is told it changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_capability_lists_change_list_is_announced_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "first").unwrap();
    let (base, running) = serve_with_embedded_hub(dir.path()).await;
    let client = resourcesync_websub::hub::http_client(Duration::from_secs(10)).unwrap();
    let hub_url = format!("{base}resourcesync/hub");
    let topic = format!("{base}resourcesync/framework-notification");
    let mut events = running.hub().unwrap().events();
    let (cb, mut rx) = callback_server().await;
    subscribe(&client, &hub_url, &topic, &cb, None, None)
        .await
        .unwrap();
    tokio::time::timeout(DEADLINE, async {
        while !matches!(events.recv().await, Ok(HubEvent::Subscribed { .. })) {}
    })
    .await
    .unwrap();
    // A first batch learns what exists; the next one, with a change, announces what changed.
    running.publisher().batch(true).await.unwrap();
    std::fs::write(dir.path().join("b.txt"), "hello").unwrap();
    running.publisher().batch(true).await.unwrap();
    let change_list = format!("{base}resourcesync/changelist.xml");
    let announced = tokio::time::timeout(DEADLINE, async {
        loop {
            let (_, body) = rx.recv().await.unwrap();
            let (hd, es) = read(&body);
            assert_eq!(
                hd.md.unwrap().capability,
                Some(Capability::FrameworkNotification)
            );
            if let Some(e) = es.into_iter().find(|e| e.loc == change_list) {
                break e;
            }
        }
    })
    .await
    .expect("a framework notification naming the Capability List's Change List");
    assert_eq!(
        announced.md.as_ref().and_then(|m| m.capability.clone()),
        Some(Capability::ChangeList)
    );
    assert_eq!(
        announced.link("index").map(|l| l.href.as_str()),
        Some(format!("{base}resourcesync/changelist-index.xml").as_str())
    );
    running.shutdown().await.unwrap();
}
