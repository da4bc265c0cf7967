//! Test helpers: a hub on loopback, a scriptable subscriber callback, a topic server. All
//! synchronisation is by channels with a deadline, never by sleeping.
#![allow(unreachable_pub, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use resourcesync_websub::hub::HubEvent;
use resourcesync_websub::subscriber::VerificationRequest;
use resourcesync_websub::{Hub, HubOptions};
use tokio::sync::{broadcast, mpsc};

pub const DEADLINE: Duration = Duration::from_secs(20);

pub use resourcesync_testkit::serve;

pub use resourcesync_testkit::serve_at;

/// A hub listening on loopback.
#[derive(Debug)]
pub struct TestHub {
    pub hub: Hub,
    pub url: String,
    pub events: broadcast::Receiver<HubEvent>,
    pub server: tokio::task::JoinHandle<()>,
}

pub fn fast_opts(url: &str) -> HubOptions {
    let mut o = HubOptions::new(url);
    // The tests' subscribers and topics listen on loopback.
    o.private_addresses = true;
    o.retry_initial = Duration::from_millis(20);
    o.retry_max = Duration::from_millis(200);
    o.request_timeout = Duration::from_secs(5);
    o
}

pub async fn start_hub(
    state: Option<&std::path::Path>,
    tune: impl FnOnce(&mut HubOptions),
) -> TestHub {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let url = format!("http://{addr}/hub");
    let mut opts = fast_opts(&url);
    tune(&mut opts);
    let hub = Hub::start(opts, state).unwrap();
    let events = hub.events();
    let router = hub.router();
    // The server `resourcesync hub` runs (HTTP/1.1 only).
    let listener = resourcesync_websub::listener::IdleListener::new(l, Duration::from_secs(60));
    let server = tokio::spawn(resourcesync_websub::server::serve_http1(
        listener,
        router,
        std::future::pending(),
    ));
    TestHub {
        hub,
        url,
        events,
        server,
    }
}

impl TestHub {
    /// The next event matching `f`, within the deadline.
    pub async fn wait_for(&mut self, mut f: impl FnMut(&HubEvent) -> bool) -> HubEvent {
        tokio::time::timeout(DEADLINE, async {
            loop {
                match self.events.recv().await {
                    Ok(e) if f(&e) => return e,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("hub events: {e}"),
                }
            }
        })
        .await
        .expect("hub event within the deadline")
    }

    pub async fn stop(self) {
        self.hub.shutdown();
        self.server.abort();
        let _ = self.server.await;
    }
}

/// How the callback behaves.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// Agree to verification requests.
    pub agree: bool,
    /// Echo this instead of the challenge.
    pub wrong_challenge: bool,
    /// Status of answers to deliveries (a queue consumed first, then `post_status`).
    pub post_statuses: Vec<u16>,
    pub post_status: u16,
    /// Never answer deliveries.
    pub hang: bool,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            agree: true,
            wrong_challenge: false,
            post_statuses: Vec::new(),
            post_status: 200,
            hang: false,
        }
    }
}

#[derive(Debug)]
pub struct Delivery {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub query: String,
}

#[derive(Debug)]
pub struct Verification {
    pub req: VerificationRequest,
    pub query: String,
}

#[derive(Debug, Clone)]
struct CbState {
    behaviour: Arc<Mutex<Behaviour>>,
    verif: mpsc::UnboundedSender<Verification>,
    posts: mpsc::UnboundedSender<Delivery>,
}

#[derive(Debug)]
pub struct Callback {
    pub base: String,
    pub behaviour: Arc<Mutex<Behaviour>>,
    pub verifs: mpsc::UnboundedReceiver<Verification>,
    pub posts: mpsc::UnboundedReceiver<Delivery>,
}

async fn cb(State(s): State<CbState>, req: Request) -> Response {
    let query = req.uri().query().unwrap_or("").to_owned();
    let (parts, body) = req.into_parts();
    let b = s.behaviour.lock().unwrap().clone();
    if parts.method == axum::http::Method::GET {
        let Some(v) = VerificationRequest::parse(&query) else {
            return StatusCode::BAD_REQUEST.into_response();
        };
        let (status, mut text) = v.answer(b.agree);
        if b.wrong_challenge {
            text = "not-the-challenge".into();
        }
        let _ = s.verif.send(Verification { req: v, query });
        return (status, text).into_response();
    }
    let body = axum::body::to_bytes(body, 64 << 20)
        .await
        .unwrap_or_default();
    let status = {
        let mut g = s.behaviour.lock().unwrap();
        if g.post_statuses.is_empty() {
            g.post_status
        } else {
            g.post_statuses.remove(0)
        }
    };
    let _ = s.posts.send(Delivery {
        headers: parts.headers,
        body,
        query,
    });
    if b.hang {
        std::future::pending::<()>().await;
    }
    StatusCode::from_u16(status).unwrap().into_response()
}

pub async fn callback() -> Callback {
    callback_at("127.0.0.1").await
}

/// A callback served on `ip` (a loopback address: another host for the hub than 127.0.0.1).
pub async fn callback_at(ip: &str) -> Callback {
    let (vt, vr) = mpsc::unbounded_channel();
    let (pt, pr) = mpsc::unbounded_channel();
    let behaviour = Arc::new(Mutex::new(Behaviour::default()));
    let st = CbState {
        behaviour: behaviour.clone(),
        verif: vt,
        posts: pt,
    };
    let addr = serve_at(ip, Router::new().fallback(cb).with_state(st)).await;
    Callback {
        base: format!("http://{addr}/cb"),
        behaviour,
        verifs: vr,
        posts: pr,
    }
}

impl Callback {
    pub async fn verification(&mut self) -> Verification {
        tokio::time::timeout(DEADLINE, self.verifs.recv())
            .await
            .expect("verification within the deadline")
            .expect("open")
    }
    pub async fn delivery(&mut self) -> Delivery {
        tokio::time::timeout(DEADLINE, self.posts.recv())
            .await
            .expect("delivery within the deadline")
            .expect("open")
    }
    pub fn no_delivery_yet(&mut self) -> bool {
        self.posts.try_recv().is_err()
    }
}

pub async fn post_form(url: &str, form: &[(&str, &str)]) -> (u16, String) {
    let body = {
        let mut s = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in form {
            s.append_pair(k, v);
        }
        s.finish()
    };
    let r = resourcesync_websub::hub::http_client(Duration::from_secs(10))
        .unwrap()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

pub async fn post_notification(hub: &str, topic: &str, body: &str) -> (u16, String) {
    let r = resourcesync_websub::hub::http_client(Duration::from_secs(10))
        .unwrap()
        .post(hub)
        .header("content-type", "application/xml")
        .header(
            "link",
            format!("<{topic}>; rel=\"self\", <{hub}>; rel=\"hub\""),
        )
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Subscribes `cb` (path suffix `path`) to `topic`, answers verification, waits until active.
pub async fn subscribe(
    h: &mut TestHub,
    cb: &mut Callback,
    path: &str,
    topic: &str,
    extra: &[(&str, &str)],
) -> String {
    let callback = format!("{}{path}", cb.base);
    let mut form = vec![
        ("hub.mode", "subscribe"),
        ("hub.topic", topic),
        ("hub.callback", callback.as_str()),
    ];
    form.extend_from_slice(extra);
    let (status, _) = post_form(&h.url, &form).await;
    assert_eq!(status, 202);
    let v = cb.verification().await;
    assert_eq!(v.req.mode, "subscribe");
    h.wait_for(|e| matches!(e, HubEvent::Subscribed { callback: c, .. } if *c == callback))
        .await;
    callback
}

/// A topic server returning `content_type` and `body` at `/topic`.
pub async fn topic_server(content_type: &'static str, body: &'static str) -> String {
    let router = Router::new().route(
        "/topic",
        axum::routing::get(move || async move { ([("content-type", content_type)], body) }),
    );
    let addr = serve(router).await;
    format!("http://{addr}/topic")
}

pub fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

pub fn link_targets(h: &HeaderMap, rel: &str) -> Vec<String> {
    resourcesync_websub::link::targets(
        h.get_all("link").iter().filter_map(|v| v.to_str().ok()),
        rel,
    )
}
