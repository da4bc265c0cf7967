//! Requests to the hub (WebSub §5.1, §6; Change Notification 1.0.1 §4.1): what can be refused
//! from the request head is refused before the body is read; bodies are read within a byte
//! budget shared by all connections and a time limit.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use http_body_util::BodyExt;
use tokio::sync::OwnedSemaphorePermit;
use url::Url;

use super::{Inner, SubRequest, check_url, fetch_and_publish, verify_and_apply};
use crate::{link, signature};

pub(super) fn text(status: StatusCode, msg: impl Into<String>) -> Response {
    let mut r = Response::new(Body::from(format!("{}\n", msg.into())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// 503 with `Retry-After`.
fn busy(msg: impl Into<String>) -> Response {
    let mut r = text(StatusCode::SERVICE_UNAVAILABLE, msg);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    r
}

/// A body read, with its share of the byte budget (given back when dropped).
struct Held {
    bytes: Bytes,
    _permits: Vec<OwnedSemaphorePermit>,
}

/// The `Content-Length` announced, if any (hyper has checked that it is a number).
fn content_length(h: &HeaderMap) -> Option<u64> {
    h.get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

fn too_large(limit: usize) -> Response {
    text(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the body is larger than {limit} bytes"),
    )
}

fn over_budget(hub: &Inner) -> Response {
    busy(format!(
        "the hub is reading {} bytes of request bodies already, the most it holds; try again shortly",
        hub.opts.max_body_bytes_in_flight
    ))
}

/// Reads a body of at most `limit` bytes (413 past it) within the hub's byte budget (503 past
/// it: an announced length is taken in full before anything is read, a chunked body as it
/// arrives) and its time limit (408).
async fn read_body(
    hub: &Inner,
    body: Body,
    announced: Option<u64>,
    limit: usize,
) -> std::result::Result<Held, Response> {
    let mut permits = Vec::new();
    if let Some(n) = announced {
        if n > limit as u64 {
            return Err(too_large(limit));
        }
        let n = u32::try_from(n).map_err(|_| too_large(limit))?;
        if n > 0 {
            match hub.body_budget.clone().try_acquire_many_owned(n) {
                Ok(p) => permits.push(p),
                Err(_) => return Err(over_budget(hub)),
            }
        }
    }
    let read = async {
        let mut body = body;
        // An announced length is within the budget already: allocated once, not doubled.
        let mut buf: Vec<u8> = Vec::with_capacity(announced.map_or(0, |n| n as usize));
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                text(
                    StatusCode::BAD_REQUEST,
                    format!("reading the request body: {e}"),
                )
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if buf.len() + data.len() > limit {
                return Err(too_large(limit));
            }
            if announced.is_none() && !data.is_empty() {
                // A chunked body takes its share as it arrives. `data` is at most `limit`.
                let n = u32::try_from(data.len()).map_err(|_| too_large(limit))?;
                match hub.body_budget.clone().try_acquire_many_owned(n) {
                    Ok(p) => permits.push(p),
                    Err(_) => return Err(over_budget(hub)),
                }
            }
            buf.extend_from_slice(&data);
        }
        Ok(buf)
    };
    match tokio::time::timeout(hub.opts.body_timeout, read).await {
        Ok(Ok(buf)) => Ok(Held {
            bytes: Bytes::from(buf),
            _permits: permits,
        }),
        Ok(Err(r)) => Err(r),
        Err(_) => Err(text(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s",
                hub.opts.body_timeout.as_secs_f64()
            ),
        )),
    }
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

pub(super) async fn handle(State(hub): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    if parts.method == Method::GET || parts.method == Method::HEAD {
        return text(
            StatusCode::OK,
            "This is a WebSub hub (https://www.w3.org/TR/websub/): POST subscription requests and notifications here.",
        );
    }
    if parts.method != Method::POST {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "POST only");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD, POST"));
        return r;
    }
    let announced = content_length(&parts.headers);
    let ct = header_str(&parts.headers, header::CONTENT_TYPE).to_ascii_lowercase();
    if ct.starts_with("application/x-www-form-urlencoded") {
        let body = match read_body(&hub, body, announced, hub.opts.max_form_bytes).await {
            Ok(b) => b,
            Err(r) => return r,
        };
        return form_request(hub, &body.bytes).await;
    }
    // Everything a notification is refused for is in its head: refused before the body is
    // read (hyper closes the connection rather than read a body nobody asked for).
    let topic = match notification_head(&hub, &parts.headers, &ct) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let body = match read_body(&hub, body, announced, hub.opts.max_payload_bytes).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    match hub.publish(&topic, &ct, &body.bytes) {
        // Change Notification 1.0.1 §4.1: 200 when the submission was successful.
        Ok(n) => text(StatusCode::OK, format!("queued for {n} subscriber(s)")),
        Err(crate::Error::Full(why)) => {
            tracing::warn!("hub: refused a notification for {topic}: {why}");
            busy(why)
        }
        Err(e) => {
            tracing::error!("hub: queueing a notification for {topic}: {e}");
            busy("cannot queue the notification now")
        }
    }
}

fn publishing_refused() -> Response {
    text(
        StatusCode::FORBIDDEN,
        "this hub takes no publications over HTTP (it is embedded in its publisher)",
    )
}

/// Change Notification 1.0.1 §4.1: the payload with `Link` rel=self (topic) and rel=hub. The
/// topic, when the head is acceptable.
fn notification_head(
    hub: &Inner,
    headers: &HeaderMap,
    ct: &str,
) -> std::result::Result<String, Box<Response>> {
    if !hub.opts.publish_over_http {
        return Err(Box::new(publishing_refused()));
    }
    let links: Vec<&str> = headers
        .get_all(header::LINK)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let Some(topic) = link::first(links.iter().copied(), "self") else {
        return Err(Box::new(text(
            StatusCode::BAD_REQUEST,
            "a notification needs a Link header with rel=\"self\" naming the topic (Change Notification 1.0.1 §4.1), or use a form with hub.mode",
        )));
    };
    if link::first(links.iter().copied(), "hub").is_none() {
        return Err(Box::new(text(
            StatusCode::BAD_REQUEST,
            "a notification needs a Link header with rel=\"hub\" (Change Notification 1.0.1 §4.1)",
        )));
    }
    let parsed = check_url("the topic (rel=self)", &topic)
        .map_err(|e| Box::new(text(StatusCode::BAD_REQUEST, e)))?;
    if !hub.topic_allowed(&parsed) {
        return Err(Box::new(text(
            StatusCode::FORBIDDEN,
            format!("this hub does not relay {topic}"),
        )));
    }
    if ct.is_empty() {
        return Err(Box::new(text(
            StatusCode::BAD_REQUEST,
            "a notification needs a Content-Type (application/xml for ResourceSync)",
        )));
    }
    Ok(topic)
}

async fn form_request(hub: Arc<Inner>, body: &[u8]) -> Response {
    let form = Form::parse(body);
    match form.mode.as_deref() {
        Some(m @ ("subscribe" | "unsubscribe")) => subscription(hub, m == "subscribe", form),
        Some("publish") => publication(hub, form.urls),
        Some(other) => text(
            StatusCode::BAD_REQUEST,
            format!("hub.mode {other:?} is not subscribe, unsubscribe or publish"),
        ),
        None => text(StatusCode::BAD_REQUEST, "hub.mode is required"),
    }
}

/// The parameters of a form request.
struct Form {
    mode: Option<String>,
    topic: Option<String>,
    callback: Option<String>,
    lease: Option<String>,
    secret: Option<String>,
    /// The topics of a publication: every `hub.url` (or `hub.url[]`) and `hub.topic`.
    urls: Vec<String>,
}

impl Form {
    /// WebSub §5.1: parameters not understood are ignored; §5.1.1: percent-decoded.
    fn parse(body: &[u8]) -> Form {
        let mut f = Form {
            mode: None,
            topic: None,
            callback: None,
            lease: None,
            secret: None,
            urls: Vec::new(),
        };
        for (k, v) in url::form_urlencoded::parse(body) {
            match k.as_ref() {
                "hub.mode" => f.mode = Some(v.into_owned()),
                "hub.topic" => {
                    f.urls.push(v.to_string());
                    f.topic = Some(v.into_owned());
                }
                "hub.url" | "hub.url[]" => f.urls.push(v.into_owned()),
                "hub.callback" => f.callback = Some(v.into_owned()),
                "hub.lease_seconds" => f.lease = Some(v.into_owned()),
                "hub.secret" => f.secret = Some(v.into_owned()),
                _ => {}
            }
        }
        f
    }
}

/// A subscription or unsubscription request (WebSub §5.1): checked, then accepted with its
/// verification of intent to follow.
fn subscription(hub: Arc<Inner>, subscribe: bool, form: Form) -> Response {
    let req = match sub_request(&hub, subscribe, form) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    let Ok(permit) = hub.background.clone().try_acquire_owned() else {
        return busy("too many verifications in progress; try again shortly");
    };
    // §5.1.2: the response does not depend on validation or verification, which follow it.
    tokio::spawn(async move {
        verify_and_apply(&hub, req).await;
        drop(permit);
    });
    text(
        StatusCode::ACCEPTED,
        "accepted: verification of intent follows",
    )
}

/// The subscription a form asks for, or the response refusing it.
fn sub_request(
    hub: &Inner,
    subscribe: bool,
    form: Form,
) -> std::result::Result<SubRequest, Box<Response>> {
    let refuse = |m: String| Box::new(text(StatusCode::BAD_REQUEST, m));
    let topic = form.topic.unwrap_or_default();
    let callback = form.callback.unwrap_or_default();
    check_url("hub.topic", &topic).map_err(refuse)?;
    let u = check_url("hub.callback", &callback).map_err(refuse)?;
    // Refused at once, not denied: a denial is a request to the callback.
    if !hub.opts.private_addresses {
        crate::reach::check_public_url("hub.callback", &u).map_err(refuse)?;
    }
    // §5.1: ignored for unsubscription requests.
    let lease = match (subscribe, form.lease) {
        (true, Some(l)) => match l.trim().parse::<u64>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                return Err(refuse(
                    "hub.lease_seconds must be a positive integer".into(),
                ));
            }
        },
        _ => None,
    };
    let secret = match form.secret {
        Some(s) if s.len() > signature::MAX_SECRET_BYTES => {
            return Err(refuse(
                "hub.secret must be less than 200 bytes (WebSub §5.1)".into(),
            ));
        }
        Some(s) if subscribe && !s.is_empty() => Some(s.into_bytes()),
        _ => None,
    };
    Ok(SubRequest {
        subscribe,
        topic,
        callback,
        lease,
        secret,
    })
}

/// A publication over HTTP: its topics checked, then fetched and distributed after the
/// response.
fn publication(hub: Arc<Inner>, mut urls: Vec<String>) -> Response {
    if !hub.opts.publish_over_http {
        return publishing_refused();
    }
    urls.sort();
    urls.dedup();
    if urls.is_empty() {
        return text(
            StatusCode::BAD_REQUEST,
            "hub.url (or hub.topic) is required",
        );
    }
    if urls.len() > 100 {
        return text(StatusCode::BAD_REQUEST, "at most 100 topics per request");
    }
    let mut checked: Vec<(String, Url)> = Vec::with_capacity(urls.len());
    for u in urls {
        match publishable(&hub, &u) {
            Ok(parsed) => checked.push((u, parsed)),
            Err(resp) => return *resp,
        }
    }
    let Ok(permit) = hub.background.clone().try_acquire_owned() else {
        return busy("busy; try again shortly");
    };
    tokio::spawn(async move {
        for (u, parsed) in checked {
            if let Err(e) = fetch_and_publish(&hub, &u, parsed).await {
                tracing::warn!("hub: publish of {u}: {e}");
            }
        }
        drop(permit);
    });
    text(
        StatusCode::ACCEPTED,
        "accepted: the topic will be fetched and distributed",
    )
}

/// A topic to publish, parsed, or the response refusing it: a URL, public unless private
/// addresses are allowed, one this hub relays (matched as parsed: what is fetched is the
/// parsed URL, not the string).
fn publishable(hub: &Inner, u: &str) -> std::result::Result<Url, Box<Response>> {
    let parsed = check_url("hub.url", u).map_err(|e| Box::new(text(StatusCode::BAD_REQUEST, e)))?;
    if !hub.opts.private_addresses {
        crate::reach::check_public_url("hub.url", &parsed)
            .map_err(|e| Box::new(text(StatusCode::BAD_REQUEST, e)))?;
    }
    if !hub.topic_allowed(&parsed) {
        return Err(Box::new(text(
            StatusCode::FORBIDDEN,
            format!("this hub does not relay {u}"),
        )));
    }
    Ok(parsed)
}
