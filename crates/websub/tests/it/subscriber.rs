//! Subscriber checks of websub.rocks that apply to a ResourceSync Destination: discovery by
//! `Link` header (100, with a rel=self different from the URL fetched, 200), a hub that
//! redirects with 307/308 (§5.1.2, 204/205), and signature checks (valid, invalid, missing;
//! 300–302) on what our hub actually sends.
#![allow(clippy::unwrap_used)] // test helpers: a failure is the test failing

use crate::common;

use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use common::*;
use resourcesync_websub::hub::HubEvent;
use resourcesync_websub::{signature, subscribe, subscriber, unsubscribe};

fn client() -> reqwest::Client {
    resourcesync_websub::hub::http_client(Duration::from_secs(10)).unwrap()
}

/// websub.rocks subscriber 100 and 200: the hub and the topic come from the Link header, and
/// the topic to subscribe to is the rel=self URL, not the one fetched (WebSub §4, §5.1).
#[tokio::test]
async fn discovery_by_link_header() {
    let router = Router::new().route(
        "/page",
        axum::routing::get(|| async {
            let mut h = HeaderMap::new();
            h.append(
                header::LINK,
                "<https://hub.example/>; rel=\"hub\"".parse().unwrap(),
            );
            h.append(header::LINK, "</canonical>; rel=\"self\"".parse().unwrap());
            (h, "content").into_response()
        }),
    );
    let addr = serve(router).await;
    let d = subscriber::discover(&client(), &format!("http://{addr}/page"))
        .await
        .unwrap();
    assert_eq!(d.hubs, vec!["https://hub.example/".to_owned()]);
    assert_eq!(d.topic, Some(format!("http://{addr}/canonical")));
    // No hub advertised: an error, not a guess.
    let bare = serve(Router::new().route("/x", axum::routing::get(|| async { "x" }))).await;
    assert!(
        subscriber::discover(&client(), &format!("http://{bare}/x"))
            .await
            .is_err()
    );
}

/// websub.rocks subscriber 204/205: a hub answering 307 or 308 with Location; the request is
/// repeated at the new hub, which is where renewals and unsubscription go.
#[tokio::test]
async fn redirected_hub() {
    let mut h = start_hub(None, |_| {}).await;
    let mut cb = callback().await;
    for status in [
        StatusCode::TEMPORARY_REDIRECT,
        StatusCode::PERMANENT_REDIRECT,
    ] {
        let target = h.url.clone();
        let router = Router::new().fallback(move || {
            let target = target.clone();
            async move { (status, [(header::LOCATION, target)]).into_response() }
        });
        let old = format!("http://{}/old-hub", serve(router).await);
        let callback = format!("{}/redir{}", cb.base, status.as_u16());
        let s = subscribe(&client(), &old, "http://e/t", &callback, None, None)
            .await
            .unwrap();
        assert_eq!(s.hub, h.url, "the hub that accepted");
        assert_eq!(cb.verification().await.req.mode, "subscribe");
        h.wait_for(|e| matches!(e, HubEvent::Subscribed { .. }))
            .await;
        unsubscribe(&client(), &s).await.unwrap();
        // The callback agrees to everything here.
        assert_eq!(cb.verification().await.req.mode, "unsubscribe");
        h.wait_for(|e| matches!(e, HubEvent::Unsubscribed { .. }))
            .await;
    }
    // A hub that refuses: the error carries its reason.
    let e = subscribe(&client(), &h.url, "not a url", "http://c/", None, None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("400"), "{e}");
}

/// websub.rocks subscriber 300–302: what our hub signs verifies; a tampered body, another
/// secret, or no header at all does not.
#[tokio::test]
async fn signatures_valid_invalid_missing() {
    let mut h = start_hub(None, |_| {}).await;
    let mut cb = callback().await;
    common::subscribe(
        &mut h,
        &mut cb,
        "/sig",
        "http://e/sig",
        &[("hub.secret", "0123456789abcdef")],
    )
    .await;
    post_notification(&h.url, "http://e/sig", "<urlset/>").await;
    let d = cb.delivery().await;
    let sig = header(&d.headers, "x-hub-signature");
    signature::verify(b"0123456789abcdef", sig, &d.body).unwrap();
    assert!(signature::verify(b"0123456789abcdef", sig, b"<urlset>tampered</urlset>").is_err());
    assert!(signature::verify(b"wrong", sig, &d.body).is_err());
    assert!(signature::verify(b"0123456789abcdef", None, &d.body).is_err());
}
