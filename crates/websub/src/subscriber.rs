//! The subscriber side of WebSub: discovery from `Link` headers (WebSub §4), subscription and
//! unsubscription requests (§5.1, following a 307/308 to another hub, §5.1.2), the answer to a
//! verification of intent (§5.3.1) and signature checking ([`crate::signature::verify`],
//! §7.1.2).

use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, header};
use url::Url;

use crate::hub::check_url;
use crate::{Error, Result, link};

/// Most redirects from one hub to another followed for one request (WebSub §5.1.2).
const MAX_HUB_REDIRECTS: usize = 5;

/// A subscription as the subscriber asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The hub that accepted the request (after redirects): where to renew and unsubscribe.
    pub hub: String,
    /// The topic (the publisher's rel=self URL, §5.1).
    pub topic: String,
    /// The callback URL.
    pub callback: String,
    /// The secret given, if any.
    pub secret: Option<String>,
    /// The lease asked for.
    pub lease_seconds: Option<u64>,
}

/// What discovery found at a topic URL (WebSub §4): the hubs (rel=hub) and the topic's own
/// URL (rel=self, the one to subscribe to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// rel=hub targets, in order.
    pub hubs: Vec<String>,
    /// The rel=self target.
    pub topic: Option<String>,
}

/// Discovery from the `Link` headers of a response (WebSub §4: the HTTP header is the
/// preferred mechanism). Relative targets are resolved against `base`.
pub fn discover_in_headers(base: &str, headers: &HeaderMap) -> Discovered {
    let values: Vec<&str> = headers
        .get_all(header::LINK)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let resolve = |t: String| {
        Url::parse(base)
            .and_then(|b| b.join(&t))
            .map(|u| u.to_string())
            .unwrap_or(t)
    };
    Discovered {
        hubs: link::targets(values.iter().copied(), "hub")
            .into_iter()
            .map(resolve)
            .collect(),
        topic: link::first(values.iter().copied(), "self").map(resolve),
    }
}

/// Fetches `url` (HEAD, then GET when HEAD says nothing) and reads its `Link` headers
/// (WebSub §4).
pub async fn discover(client: &reqwest::Client, url: &str) -> Result<Discovered> {
    let http = |m: String| Error::Http {
        url: url.to_owned(),
        message: m,
    };
    for method in [reqwest::Method::HEAD, reqwest::Method::GET] {
        let resp = client
            .request(method, url)
            .send()
            .await
            .map_err(|e| http(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(http(format!("answered {}", resp.status())));
        }
        let d = discover_in_headers(url, resp.headers());
        if !d.hubs.is_empty() {
            return Ok(d);
        }
    }
    Err(http("no Link rel=\"hub\" header".into()))
}

async fn request(client: &reqwest::Client, hub: &str, form: &[(&str, &str)]) -> Result<String> {
    let mut hub = hub.to_owned();
    let body = {
        let mut s = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in form {
            s.append_pair(k, v);
        }
        s.finish()
    };
    for _ in 0..=MAX_HUB_REDIRECTS {
        check_url("the hub URL", &hub).map_err(Error::Config)?;
        let resp = client
            .post(&hub)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body.clone())
            .send()
            .await
            .map_err(|e| Error::Http {
                url: hub.clone(),
                message: e.to_string(),
            })?;
        let status = resp.status();
        // §5.1.2: another hub, named by Location; the request is retried there.
        if status == StatusCode::TEMPORARY_REDIRECT || status == StatusCode::PERMANENT_REDIRECT {
            let loc = resp
                .headers()
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| Error::Http {
                    url: hub.clone(),
                    message: format!("{status} without Location"),
                })?;
            hub = Url::parse(&hub)
                .and_then(|b| b.join(loc))
                .map_err(|e| Error::Http {
                    url: hub.clone(),
                    message: format!("bad Location {loc:?}: {e}"),
                })?
                .to_string();
            continue;
        }
        if status == StatusCode::ACCEPTED || status.is_success() {
            return Ok(hub);
        }
        // At most 500 bytes are read (a hostile hub does not choose how much is kept).
        let head = resourcesync_http::read_prefix(resp, 500).await;
        let text = String::from_utf8_lossy(&head);
        return Err(Error::Refused {
            hub,
            status: status.as_u16(),
            body: text.trim().to_owned(),
        });
    }
    Err(Error::Http {
        url: hub,
        message: format!("more than {MAX_HUB_REDIRECTS} redirects"),
    })
}

/// Sends a subscription request (WebSub §5.1) and returns what was asked, with the hub that
/// accepted it (after 307/308 redirects, §5.1.2). The subscription is active only once the hub
/// has verified intent (answer it with [`VerificationRequest::answer`]).
pub async fn subscribe(
    client: &reqwest::Client,
    hub: &str,
    topic: &str,
    callback: &str,
    secret: Option<&str>,
    lease_seconds: Option<u64>,
) -> Result<Subscription> {
    let lease = lease_seconds.map(|l| l.to_string());
    let mut form = vec![
        ("hub.mode", "subscribe"),
        ("hub.topic", topic),
        ("hub.callback", callback),
    ];
    if let Some(s) = secret {
        if s.len() > crate::signature::MAX_SECRET_BYTES {
            return Err(Error::Config(
                "hub.secret must be less than 200 bytes".into(),
            ));
        }
        form.push(("hub.secret", s));
    }
    if let Some(l) = &lease {
        form.push(("hub.lease_seconds", l));
    }
    let hub = request(client, hub, &form).await?;
    Ok(Subscription {
        hub,
        topic: topic.to_owned(),
        callback: callback.to_owned(),
        secret: secret.map(str::to_owned),
        lease_seconds,
    })
}

/// Sends an unsubscription request (WebSub §5.1 with `hub.mode=unsubscribe`).
pub async fn unsubscribe(client: &reqwest::Client, s: &Subscription) -> Result<()> {
    request(
        client,
        &s.hub,
        &[
            ("hub.mode", "unsubscribe"),
            ("hub.topic", &s.topic),
            ("hub.callback", &s.callback),
        ],
    )
    .await
    .map(|_| ())
}

/// A GET from a hub to a callback (WebSub §5.2 denial, §5.3 verification).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerificationRequest {
    /// `subscribe`, `unsubscribe` or `denied`.
    pub mode: String,
    /// The topic.
    pub topic: String,
    /// The challenge to echo (absent for `denied`).
    pub challenge: Option<String>,
    /// The lease granted (subscriptions).
    pub lease_seconds: Option<u64>,
    /// Why it was denied.
    pub reason: Option<String>,
}

impl VerificationRequest {
    /// Reads the query string of a GET to the callback; `None` when it is not a hub's request.
    pub fn parse(query: &str) -> Option<Self> {
        let mut mode = None;
        let mut topic = None;
        let mut challenge = None;
        let mut lease = None;
        let mut reason = None;
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            match k.as_ref() {
                "hub.mode" => mode = Some(v.into_owned()),
                "hub.topic" => topic = Some(v.into_owned()),
                "hub.challenge" => challenge = Some(v.into_owned()),
                "hub.lease_seconds" => lease = v.parse().ok(),
                "hub.reason" => reason = Some(v.into_owned()),
                _ => {}
            }
        }
        let mode = mode?;
        let topic = topic?;
        if mode != "denied" && challenge.is_none() {
            return None;
        }
        Some(VerificationRequest {
            mode,
            topic,
            challenge,
            lease_seconds: lease,
            reason,
        })
    }

    /// The answer (WebSub §5.3.1): 200 with the challenge when the subscriber agrees (the topic
    /// matches an action it wants), else 404. A denial (§5.2) is acknowledged with 200.
    pub fn answer(&self, agree: bool) -> (StatusCode, String) {
        match (&self.challenge, agree) {
            (Some(c), true) if self.mode != "denied" => (StatusCode::OK, c.clone()),
            _ if self.mode == "denied" => (StatusCode::OK, String::new()),
            _ => (StatusCode::NOT_FOUND, "no such pending request".to_owned()),
        }
    }
}

/// Default time limit of subscriber requests.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification_parse_and_answer() {
        let v = VerificationRequest::parse(
            "x=1&hub.mode=subscribe&hub.topic=http%3A%2F%2Fs%2Ft&hub.challenge=abc&hub.lease_seconds=300",
        )
        .unwrap();
        assert_eq!(v.topic, "http://s/t");
        assert_eq!(v.lease_seconds, Some(300));
        assert_eq!(v.answer(true), (StatusCode::OK, "abc".into()));
        assert_eq!(v.answer(false).0, StatusCode::NOT_FOUND);
        assert!(VerificationRequest::parse("hub.mode=subscribe&hub.topic=t").is_none());
        let d = VerificationRequest::parse("hub.mode=denied&hub.topic=t&hub.reason=no").unwrap();
        assert_eq!(d.answer(false).0, StatusCode::OK);
    }
}
