//! With a reach ([`HttpOptions::reach`], the aggregator's `allow_hosts`), a push follower does
//! not send its subscription where the Source's other requests may not go: a Capability List
//! naming a hub on another origin (a loopback server standing for an internal service) gets
//! no request there, a warning naming the hub and `allow_hosts`, and the Change Lists polled.

use std::sync::Arc;
use std::time::{Duration, Instant};

use resourcesync_destination::{PushOptions, StopHandle, SyncOptions, WatchOptions, watch_push};
use resourcesync_http::{HostRule, Reach};
use resourcesync_testkit::{Reply, Server};

use crate::hand::{NS, Recorder};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_out_of_reach_is_not_subscribed_to() {
    let internal = Server::empty().await;
    internal.route("/hub", Reply::status(202));
    let hub = internal.url("hub");
    let s = Server::empty().await;
    let b = s.base.clone();
    s.route(
        "/caps.xml",
        Reply::xml(format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset {NS}>
  <rs:md capability="capabilitylist"/>
  <url><loc>{b}list.xml</loc><rs:md capability="resourcelist"/></url>
  <url><loc>{b}notify</loc><rs:ln rel="hub" href="{hub}"/><rs:md capability="change-notification"/></url>
</urlset>"#
        )),
    );
    s.route(
        "/list.xml",
        Reply::xml(format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset {NS}>
  <rs:md capability="resourcelist" at="2026-11-01T00:00:00Z"/>
  <url><loc>{b}a.txt</loc></url>
</urlset>"#
        )),
    );
    s.route("/a.txt", Reply::ok(b"a\n".as_slice()));
    let dest = tempfile::tempdir().expect("dest");
    let mut opts = SyncOptions::new(s.url("caps.xml"), dest.path());
    let own = HostRule::origin(&reqwest::Url::parse(&s.base).expect("url")).expect("origin");
    opts.http.reach = Some(Reach::new(vec![own], "Source \"s\"", "allow_hosts"));

    let rec = Arc::new(Recorder::default());
    let stop = StopHandle::new();
    let session = {
        let (rec, stop) = (rec.clone(), stop.clone());
        tokio::spawn(async move {
            watch_push(
                &opts,
                &WatchOptions::default(),
                &PushOptions {
                    // Without the check, the hub's 202 is followed by this wait.
                    verify_timeout: Duration::from_secs(1),
                    ..PushOptions::default()
                },
                rec,
                &stop,
                None,
                |_| {},
            )
            .await
        })
    };
    // Either way the session tells of the hub: refused here, or failing to subscribe there.
    let end = Instant::now() + Duration::from_secs(30);
    let said = loop {
        let w = rec.warnings.lock().expect("warnings").clone();
        if let Some(w) = w.into_iter().find(|w| w.contains(&hub)) {
            break w;
        }
        assert!(Instant::now() < end, "nothing said of the hub");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    stop.stop();
    session.await.expect("session").expect("push session");
    assert_eq!(
        internal.hits("/hub"),
        0,
        "the subscription was sent: {said}"
    );
    assert!(said.contains("not subscribing"), "{said}");
    assert!(said.contains("allow_hosts"), "{said}");
    assert_eq!(
        std::fs::read(dest.path().join("a.txt")).expect("copy"),
        b"a\n"
    );
}
