//! The hub against the websub.rocks hub checks 100–106, and its handling of bad input, failing
//! subscribers and restarts (WebSub §5, §6, §7).
#![allow(clippy::unwrap_used)] // test helpers: a failure is the test failing

use crate::common;

use std::time::Duration;

use common::*;
use resourcesync_websub::hub::HubEvent;
use resourcesync_websub::signature;

const PAYLOAD: &str =
    "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"/>";

/// websub.rocks hub 100: typical subscriber request; then a ResourceSync publish is delivered
/// with Content-Type, Link rel=self and rel=hub (WebSub §7), unsigned.
#[tokio::test]
async fn hub_100_typical_subscriber_request() {
    let mut h = start_hub(None, |_| {}).await;
    let mut cb = callback().await;
    let topic = "http://example.org/dataset1/change/";
    let callback = format!("{}/100", cb.base);
    let (status, _) = post_form(
        &h.url,
        &[
            ("hub.callback", &callback),
            ("hub.mode", "subscribe"),
            ("hub.topic", topic),
        ],
    )
    .await;
    assert_eq!(status, 202, "WebSub §5.1.2: 202 Accepted");
    let v = cb.verification().await;
    assert_eq!(v.req.mode, "subscribe");
    assert_eq!(v.req.topic, topic);
    assert!(v.req.challenge.as_ref().is_some_and(|c| c.len() >= 16));
    // WebSub §8.2: 10 days by default.
    assert_eq!(v.req.lease_seconds, Some(864_000));
    h.wait_for(|e| matches!(e, HubEvent::Subscribed { .. }))
        .await;

    let (status, _) = post_notification(&h.url, topic, PAYLOAD).await;
    assert_eq!(status, 200, "Change Notification §4.1: 200 OK");
    let d = cb.delivery().await;
    assert_eq!(d.body, PAYLOAD.as_bytes());
    assert_eq!(header(&d.headers, "content-type"), Some("application/xml"));
    assert_eq!(link_targets(&d.headers, "self"), vec![topic.to_owned()]);
    assert_eq!(link_targets(&d.headers, "hub"), vec![h.url.clone()]);
    assert!(header(&d.headers, "x-hub-signature").is_none());
    h.wait_for(|e| matches!(e, HubEvent::Delivered { .. }))
        .await;
    assert_eq!(h.hub.pending().unwrap(), 0);
}

/// websub.rocks hub 101: the subscriber includes a secret; every delivery is signed (WebSub
/// §7.1).
#[tokio::test]
async fn hub_101_secret() {
    let mut h = start_hub(None, |_| {}).await;
    let mut cb = callback().await;
    let topic = "http://example.org/t101";
    subscribe(&mut h, &mut cb, "/101", topic, &[("hub.secret", "s3cr3t")]).await;
    for i in 0..2 {
        let body = format!("{PAYLOAD}<!-- {i} -->");
        post_notification(&h.url, topic, &body).await;
        let d = cb.delivery().await;
        let sig = header(&d.headers, "x-hub-signature").expect("signed");
        assert!(sig.starts_with("sha256="));
        signature::verify(b"s3cr3t", Some(sig), &d.body).unwrap();
        assert!(signature::verify(b"other", Some(sig), &d.body).is_err());
    }
}

/// websub.rocks hub 102: additional parameters are ignored (WebSub §5.1), and the callback's own
/// query string is kept, the hub's parameters appended (§5.1.1).
#[tokio::test]
async fn hub_102_extra_parameters() {
    let mut h = start_hub(None, |_| {}).await;
    let mut cb = callback().await;
    let topic = "http://example.org/t102";
    let callback = format!("{}/102?foo=bar&red=fish", cb.base);
    let (status, _) = post_form(
        &h.url,
        &[
            ("hub.mode", "subscribe"),
            ("hub.topic", topic),
            ("hub.callback", &callback),
            ("hub.unknown", "x"),
            ("something", "else"),
        ],
    )
    .await;
    assert_eq!(status, 202);
    let v = cb.verification().await;
    assert!(v.query.starts_with("foo=bar&red=fish&"), "{}", v.query);
    h.wait_for(|e| matches!(e, HubEvent::Subscribed { .. }))
        .await;
    post_notification(&h.url, topic, PAYLOAD).await;
    let d = cb.delivery().await;
    assert_eq!(
        d.query, "foo=bar&red=fish",
        "WebSub §5.1.1: query kept on delivery"
    );
}

/// websub.rocks hub 103: re-subscribing before expiry renews (WebSub §5.1: overrides the
/// previous state of the same topic and callback), one delivery per publish.
#[tokio::test]
async fn hub_103_resubscribe() {
    let mut h = start_hub(None, |_| {}).await;
    let mut cb = callback().await;
    let topic = "http://example.org/t103";
    subscribe(
        &mut h,
        &mut cb,
        "/103",
        topic,
        &[("hub.lease_seconds", "3600")],
    )
    .await;
    let first = h.hub.subscriptions().unwrap()[0].lease_end;
    subscribe(
        &mut h,
        &mut cb,
        "/103",
        topic,
        &[("hub.lease_seconds", "7200")],
    )
    .await;
    let subs = h.hub.subscriptions().unwrap();
    assert_eq!(subs.len(), 1);
    assert!(subs[0].lease_end >= first + 3600 - 2);
    post_notification(&h.url, topic, PAYLOAD).await;
    cb.delivery().await;
    h.wait_for(|e| matches!(e, HubEvent::Delivered { .. }))
        .await;
    assert!(cb.no_delivery_yet(), "one subscription, one delivery");
}

/// websub.rocks hub 104: unsubscribe, verified; nothing delivered afterwards.
#[tokio::test]
async fn hub_104_unsubscribe() {
    let mut h = start_hub(None, |_| {}).await;
    let mut cb = callback().await;
    let topic = "http://example.org/t104";
    let callback = subscribe(&mut h, &mut cb, "/104", topic, &[]).await;
    let (status, _) = post_form(
        &h.url,
        &[
            ("hub.mode", "unsubscribe"),
            ("hub.topic", topic),
            ("hub.callback", &callback),
        ],
    )
    .await;
    assert_eq!(status, 202);
    let v = cb.verification().await;
    assert_eq!(v.req.mode, "unsubscribe");
    h.wait_for(|e| matches!(e, HubEvent::Unsubscribed { .. }))
        .await;
    assert!(h.hub.subscriptions().unwrap().is_empty());
    post_notification(&h.url, topic, PAYLOAD).await;
    let e = h
        .wait_for(|e| matches!(e, HubEvent::Published { .. }))
        .await;
    assert_eq!(
        e,
        HubEvent::Published {
            topic: topic.into(),
            subscribers: 0
        }
    );
    assert!(cb.no_delivery_yet());
}

/// websub.rocks hub 105 and 106: `hub.mode=publish` makes the hub fetch the topic and deliver
/// it with the topic's Content-Type (WebSub §6 note, §7), plaintext and JSON.
#[tokio::test]
async fn hub_105_106_publish_by_fetching_plaintext_and_json() {
    for (ct, body) in [
        ("text/plain", "Hello, plain text world"),
        ("application/json", "{\"hello\":\"world\"}"),
    ] {
        let mut h = start_hub(None, |_| {}).await;
        let mut cb = callback().await;
        let topic = topic_server(ct, body).await;
        subscribe(&mut h, &mut cb, "/10x", &topic, &[]).await;
        let (status, _) = post_form(&h.url, &[("hub.mode", "publish"), ("hub.url", &topic)]).await;
        assert_eq!(status, 202);
        let d = cb.delivery().await;
        assert_eq!(header(&d.headers, "content-type"), Some(ct));
        assert_eq!(d.body, body.as_bytes());
        assert_eq!(link_targets(&d.headers, "self"), vec![topic.clone()]);
        // hub.topic works as well.
        let (status, _) =
            post_form(&h.url, &[("hub.mode", "publish"), ("hub.topic", &topic)]).await;
        assert_eq!(status, 202);
        assert_eq!(cb.delivery().await.body, body.as_bytes());
    }
}

/// WebSub §5.3.1: a 404 or a wrong challenge leaves the state unchanged.
#[tokio::test]
async fn verification_refused_or_wrong_challenge_subscribes_nothing() {
    let mut h = start_hub(None, |_| {}).await;
    let cb = callback().await;
    let callback = format!("{}/no", cb.base);
    cb.behaviour.lock().unwrap().agree = false;
    post_form(
        &h.url,
        &[
            ("hub.mode", "subscribe"),
            ("hub.topic", "http://e.org/t"),
            ("hub.callback", &callback),
        ],
    )
    .await;
    let e = h
        .wait_for(|e| matches!(e, HubEvent::VerificationFailed { .. }))
        .await;
    assert!(format!("{e:?}").contains("404"));
    {
        let mut b = cb.behaviour.lock().unwrap();
        b.agree = true;
        b.wrong_challenge = true;
    }
    post_form(
        &h.url,
        &[
            ("hub.mode", "subscribe"),
            ("hub.topic", "http://e.org/t"),
            ("hub.callback", &callback),
        ],
    )
    .await;
    let e = h
        .wait_for(|e| matches!(e, HubEvent::VerificationFailed { .. }))
        .await;
    assert!(format!("{e:?}").contains("challenge"));
    assert!(h.hub.subscriptions().unwrap().is_empty());
}

/// Bad requests get 4xx with a reason (WebSub §5.1.2); nothing is subscribed.
#[tokio::test]
async fn bad_requests_are_refused() {
    let h = start_hub(None, |o| o.max_payload_bytes = 1024).await;
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (
            vec![("hub.topic", "http://e/t"), ("hub.callback", "http://c/")],
            "hub.mode",
        ),
        (
            vec![("hub.mode", "subscribe"), ("hub.callback", "http://c/")],
            "hub.topic",
        ),
        (
            vec![("hub.mode", "subscribe"), ("hub.topic", "http://e/t")],
            "hub.callback",
        ),
        (
            vec![
                ("hub.mode", "subscribe"),
                ("hub.topic", "http://e/t"),
                ("hub.callback", "ftp://c/"),
            ],
            "http",
        ),
        (
            vec![
                ("hub.mode", "subscribe"),
                ("hub.topic", "http://e/t"),
                ("hub.callback", "http://c/"),
                ("hub.lease_seconds", "-5"),
            ],
            "lease",
        ),
        (vec![("hub.mode", "dance")], "dance"),
        (vec![("hub.mode", "publish")], "hub.url"),
    ];
    for (form, why) in cases {
        let (status, text) = post_form(&h.url, &form).await;
        assert_eq!(status, 400, "{form:?}");
        assert!(text.contains(why), "{text}");
    }
    let long = "x".repeat(200);
    let (status, text) = post_form(
        &h.url,
        &[
            ("hub.mode", "subscribe"),
            ("hub.topic", "http://e/t"),
            ("hub.callback", "http://c/"),
            ("hub.secret", &long),
        ],
    )
    .await;
    assert_eq!(status, 400);
    assert!(text.contains("200 bytes"));
    // A notification without Link rel=self, and one too large.
    let client = resourcesync_websub::hub::http_client(Duration::from_secs(5)).unwrap();
    let r = client
        .post(&h.url)
        .header("content-type", "application/xml")
        .body(PAYLOAD)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let (status, _) = post_notification(&h.url, "http://e/t", &"x".repeat(2000)).await;
    assert_eq!(status, 413);
    assert!(h.hub.subscriptions().unwrap().is_empty());
}

/// Leases are bounded (WebSub §5.3.1: never perpetual) and enforced: an ended lease is removed
/// and gets no delivery.
#[tokio::test]
async fn leases_bounded_and_expire() {
    let mut h = start_hub(None, |o| {
        o.lease_min = Duration::from_secs(1);
        o.lease_max = Duration::from_secs(50);
    })
    .await;
    let mut cb = callback().await;
    subscribe(
        &mut h,
        &mut cb,
        "/big",
        "http://e/t",
        &[("hub.lease_seconds", "999999")],
    )
    .await;
    assert_eq!(h.hub.subscriptions().unwrap()[0].lease_end - now(), 50);
    let callback = subscribe(
        &mut h,
        &mut cb,
        "/small",
        "http://e/t2",
        &[("hub.lease_seconds", "1")],
    )
    .await;
    let e = h.wait_for(|e| matches!(e, HubEvent::Expired { .. })).await;
    assert_eq!(
        e,
        HubEvent::Expired {
            topic: "http://e/t2".into(),
            callback
        }
    );
    post_notification(&h.url, "http://e/t2", PAYLOAD).await;
    let e = h
        .wait_for(|e| matches!(e, HubEvent::Published { .. }))
        .await;
    assert!(matches!(e, HubEvent::Published { subscribers: 0, .. }));
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// WebSub §7: failures (5xx, 3xx, no answer in time) are retried with backoff; the payload
/// arrives once the subscriber recovers; 410 ends the subscription.
#[tokio::test]
async fn failing_subscribers_are_retried_and_410_ends() {
    let mut h = start_hub(None, |o| o.request_timeout = Duration::from_millis(300)).await;
    let mut cb = callback().await;
    let topic = "http://e/t";
    subscribe(&mut h, &mut cb, "/r", topic, &[]).await;
    cb.behaviour.lock().unwrap().post_statuses = vec![500, 302, 503];
    post_notification(&h.url, topic, PAYLOAD).await;
    for _ in 0..3 {
        cb.delivery().await;
        h.wait_for(|e| matches!(e, HubEvent::DeliveryFailed { .. }))
            .await;
    }
    let d = cb.delivery().await;
    assert_eq!(d.body, PAYLOAD.as_bytes());
    let e = h
        .wait_for(|e| matches!(e, HubEvent::Delivered { .. }))
        .await;
    assert!(matches!(e, HubEvent::Delivered { attempts: 4, .. }));

    // A callback that never answers: timed out, retried.
    cb.behaviour.lock().unwrap().hang = true;
    post_notification(&h.url, topic, PAYLOAD).await;
    let e = h
        .wait_for(|e| matches!(e, HubEvent::DeliveryFailed { .. }))
        .await;
    assert!(format!("{e:?}").contains("no answer in time"), "{e:?}");
    {
        let mut b = cb.behaviour.lock().unwrap();
        b.hang = false;
        b.post_status = 410;
    }
    h.wait_for(|e| matches!(e, HubEvent::Gone { .. })).await;
    assert!(h.hub.subscriptions().unwrap().is_empty());
    assert_eq!(h.hub.pending().unwrap(), 0);
}

/// Deliveries to one subscriber keep the order of publishing (Change Notification §3 needs it).
#[tokio::test]
async fn deliveries_keep_publish_order() {
    let mut h = start_hub(None, |_| {}).await;
    let mut cb = callback().await;
    let topic = "http://e/order";
    subscribe(&mut h, &mut cb, "/o", topic, &[]).await;
    // Some failures on the way must not reorder anything.
    cb.behaviour.lock().unwrap().post_statuses = vec![200, 500, 200, 500, 500];
    for i in 0..20 {
        let (s, _) = post_notification(&h.url, topic, &format!("n{i}")).await;
        assert_eq!(s, 200);
    }
    let mut got = Vec::new();
    while got.len() < 20 {
        let d = cb.delivery().await;
        let b = String::from_utf8(d.body.to_vec()).unwrap();
        if got.last() != Some(&b) {
            got.push(b);
        }
    }
    let want: Vec<String> = (0..20).map(|i| format!("n{i}")).collect();
    assert_eq!(got, want);
}

/// Subscriptions and pending deliveries survive a restart of the hub.
#[tokio::test]
async fn state_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hub.sqlite");
    let mut h = start_hub(Some(&db), |_| {}).await;
    let mut cb = callback().await;
    let topic = "http://e/persist";
    subscribe(&mut h, &mut cb, "/p", topic, &[("hub.secret", "k")]).await;
    cb.behaviour.lock().unwrap().post_status = 503;
    post_notification(&h.url, topic, "survivor").await;
    h.wait_for(|e| matches!(e, HubEvent::DeliveryFailed { .. }))
        .await;
    h.stop().await;
    cb.behaviour.lock().unwrap().post_status = 200;
    while cb.posts.try_recv().is_ok() {}
    let mut h2 = start_hub(Some(&db), |_| {}).await;
    assert_eq!(h2.hub.subscriptions().unwrap().len(), 1);
    let d = cb.delivery().await;
    assert_eq!(d.body, "survivor".as_bytes());
    signature::verify(b"k", header(&d.headers, "x-hub-signature"), &d.body).unwrap();
    h2.wait_for(|e| matches!(e, HubEvent::Delivered { .. }))
        .await;
}

/// WebSub §5.2: a request the hub's policy refuses is denied with a GET to the callback.
#[tokio::test]
async fn policy_denial_is_sent_to_the_callback() {
    let mut h = start_hub(None, |o| {
        o.allowed_topics = vec!["http://allowed.example/".into()];
        o.max_subscriptions_per_topic = 1;
    })
    .await;
    let mut cb = callback().await;
    let callback = format!("{}/d", cb.base);
    let (status, _) = post_form(
        &h.url,
        &[
            ("hub.mode", "subscribe"),
            ("hub.topic", "http://elsewhere.example/t"),
            ("hub.callback", &callback),
        ],
    )
    .await;
    assert_eq!(
        status, 202,
        "§5.1.2: the response does not depend on validation"
    );
    let v = cb.verification().await;
    assert_eq!(v.req.mode, "denied");
    assert!(v.req.reason.is_some());
    h.wait_for(|e| matches!(e, HubEvent::Denied { .. })).await;
    // One subscription per topic here: a second callback is denied.
    subscribe(&mut h, &mut cb, "/a", "http://allowed.example/t", &[]).await;
    post_form(
        &h.url,
        &[
            ("hub.mode", "subscribe"),
            ("hub.topic", "http://allowed.example/t"),
            ("hub.callback", &format!("{}/b", cb.base)),
        ],
    )
    .await;
    assert_eq!(cb.verification().await.req.mode, "denied");
    assert_eq!(h.hub.subscriptions().unwrap().len(), 1);
    // Publishing a topic it does not relay: 403.
    let (status, _) = post_notification(&h.url, "http://elsewhere.example/t", PAYLOAD).await;
    assert_eq!(status, 403);
}

/// A hub that does not reach private addresses (the default) refuses a callback or a topic to
/// fetch that names one (400, nothing sent), and a host name that resolves to one fails
/// verification without a request reaching it (server-side request forgery).
#[tokio::test]
async fn private_addresses_are_not_reached_by_default() {
    let mut h = start_hub(None, |o| o.private_addresses = false).await;
    let mut cb = callback().await;
    for (form, what) in [
        (
            vec![
                ("hub.mode", "subscribe"),
                ("hub.topic", "http://e.org/t"),
                ("hub.callback", &*format!("{}/literal", cb.base)),
            ],
            "hub.callback",
        ),
        (
            vec![
                ("hub.mode", "publish"),
                ("hub.url", &*format!("{}/topic", cb.base)),
            ],
            "hub.url",
        ),
    ] {
        let (status, body) = post_form(&h.url, &form).await;
        assert_eq!(status, 400, "{what}: {body}");
        assert!(body.contains("private address"), "{what}: {body}");
    }
    // The same callback by name: accepted for verification, which cannot reach it.
    let by_name = cb.base.replace("127.0.0.1", "localhost");
    assert_ne!(by_name, cb.base, "the callback is on 127.0.0.1");
    let (status, body) = post_form(
        &h.url,
        &[
            ("hub.mode", "subscribe"),
            ("hub.topic", "http://e.org/t"),
            ("hub.callback", &format!("{by_name}/named")),
        ],
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let e = h
        .wait_for(|e| matches!(e, HubEvent::VerificationFailed { .. }))
        .await;
    assert!(format!("{e:?}").contains("private addresses"), "{e:?}");
    assert!(h.hub.subscriptions().unwrap().is_empty());
    assert!(
        cb.verifs.try_recv().is_err(),
        "a verification reached the callback"
    );
    assert!(
        cb.posts.try_recv().is_err(),
        "a request reached the callback"
    );
}

/// A callback on a private address subscribed while they were allowed (an earlier run) gets no
/// delivery from a hub restarted without them: an address literal does not go through the
/// resolver, so the delivery itself checks it.
#[tokio::test]
async fn a_private_callback_from_an_earlier_run_is_not_delivered_to() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hub.sqlite");
    let mut h = start_hub(Some(&db), |_| {}).await;
    let mut cb = callback().await;
    let topic = "http://e/earlier";
    subscribe(&mut h, &mut cb, "/p", topic, &[]).await;
    h.stop().await;
    let mut h2 = start_hub(Some(&db), |o| o.private_addresses = false).await;
    assert_eq!(h2.hub.subscriptions().unwrap().len(), 1);
    post_notification(&h2.url, topic, "not for you").await;
    let e = h2
        .wait_for(|e| matches!(e, HubEvent::DeliveryFailed { .. }))
        .await;
    assert!(format!("{e:?}").contains("private address"), "{e:?}");
    assert!(
        cb.no_delivery_yet(),
        "a delivery reached the private callback"
    );
}
