//! The client: a pooled keep-alive connection pool (HTTP/2 when the server offers it over
//! TLS), retries with exponential backoff and jitter on connection errors, timeouts, 429 and 5xx
//! honouring `Retry-After`, a request rate per host, conditional GETs, a bearer token for the
//! Source's own origin, safe redirects and an explicit proxy.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use reqwest::header::{
    AUTHORIZATION, HeaderMap, HeaderValue, IF_MODIFIED_SINCE, IF_NONE_MATCH, LOCATION, RETRY_AFTER,
};
use reqwest::{Response, StatusCode, Url};
use tokio::time::Instant;

use crate::adaptive::HostLimit;
use crate::cache::ClientKey;
use crate::error::{Error, Result, Retry, chain, transport};
use crate::options::{Conditional, HttpOptions, Proxy};

/// The user agent sent with every request of [`Http`].
pub const USER_AGENT: &str = concat!("resourcesync/", env!("CARGO_PKG_VERSION"));

static TLS: Once = Once::new();

/// Installs the process-wide rustls provider (ring) once; a provider installed by the
/// application first is kept.
pub fn install_tls_provider() {
    TLS.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A reqwest client builder with the project's settings made explicit: the user agent, the
/// redirect policy of [`crate::redirect::policy`] (`max_redirects` 0: none followed), the
/// proxy (none unless asked), TLS with rustls. Callers add timeouts, pools and resolvers.
pub fn client_builder(
    user_agent: &str,
    max_redirects: usize,
    proxy: &Proxy,
) -> Result<reqwest::ClientBuilder> {
    install_tls_provider();
    let builder = reqwest::Client::builder()
        .user_agent(user_agent)
        .redirect(crate::redirect::policy(max_redirects, None));
    Ok(match proxy {
        Proxy::None => builder.no_proxy(),
        // reqwest reads the environment unless told otherwise.
        Proxy::FromEnvironment => builder,
        Proxy::Url(u) => builder.proxy(
            reqwest::Proxy::all(u.as_str())
                .map_err(|e| Error::Config(format!("proxy {u:?}: {e}")))?,
        ),
    })
}

/// Set once a client had to be built without the system's CA certificates ([`build`]).
static NO_SYSTEM_ROOTS: AtomicBool = AtomicBool::new(false);

/// Builds the client `make` sets up (called again for a second try).
///
/// With the system's CA certificates, as reqwest reads them (`SSL_CERT_FILE`, `SSL_CERT_DIR`,
/// the distribution's bundle). On a machine whose trust store holds none (a minimal container
/// image without its CA bundle) that client cannot be built; it is built again trusting no
/// root, so that `http://` Sources work there as on any machine, and `https://` URLs are then
/// refused before any request by [`Http`], with what to install ([`no_system_roots`]). Any
/// other failure is reported with its causes.
pub fn build(make: impl Fn() -> Result<reqwest::ClientBuilder>) -> Result<reqwest::Client> {
    let first = match make()?.build() {
        Ok(c) => return Ok(c),
        Err(e) => e,
    };
    // The same settings, no root but those `make` gave: if this builds, the system's roots
    // were what failed.
    match make()?.tls_certs_only(Vec::new()).build() {
        Ok(c) => {
            NO_SYSTEM_ROOTS.store(true, Ordering::Relaxed);
            Ok(c)
        }
        Err(_) => Err(Error::Config(format!(
            "building the HTTP client: {}",
            chain(&first)
        ))),
    }
}

/// Whether a client of this process was built without the system's CA certificates, which it
/// could not load ([`build`]): `https://` is then refused unless the client was given its own
/// (`--ca-cert`).
pub fn no_system_roots() -> bool {
    NO_SYSTEM_ROOTS.load(Ordering::Relaxed)
}

/// Longest CA certificate file read (a bundle of every public root is about 200 KiB).
pub const MAX_CA_FILE: u64 = 4 << 20;

/// Reads a PEM file of root certificates (at most [`MAX_CA_FILE`] bytes, at least one
/// certificate); errors name the file.
pub fn read_ca_certs(path: &std::path::Path) -> Result<Vec<reqwest::Certificate>> {
    parse_ca_certs(path, &read_ca_pem(path)?)
}

/// The bytes of a CA certificate file, at most [`MAX_CA_FILE`]; errors name the file.
fn read_ca_pem(path: &std::path::Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| bad_ca(path, e.to_string()))?;
    let mut pem = Vec::new();
    file.take(MAX_CA_FILE + 1)
        .read_to_end(&mut pem)
        .map_err(|e| bad_ca(path, e.to_string()))?;
    if pem.len() as u64 > MAX_CA_FILE {
        return Err(bad_ca(path, format!("larger than {MAX_CA_FILE} bytes")));
    }
    Ok(pem)
}

/// The certificates of `pem` (read from `path`): at least one.
fn parse_ca_certs(path: &std::path::Path, pem: &[u8]) -> Result<Vec<reqwest::Certificate>> {
    let certs =
        reqwest::Certificate::from_pem_bundle(pem).map_err(|e| bad_ca(path, e.to_string()))?;
    if certs.is_empty() {
        return Err(bad_ca(
            path,
            "no PEM certificate (BEGIN CERTIFICATE) in it".into(),
        ));
    }
    Ok(certs)
}

fn bad_ca(path: &std::path::Path, m: String) -> Error {
    Error::Config(format!("CA certificate {}: {m}", path.display()))
}

/// Builds the reqwest client of `opts` (`ca_pem`: the contents of `opts.ca_cert`).
fn build_client(opts: &HttpOptions, ca_pem: Option<&[u8]>) -> Result<reqwest::Client> {
    build(|| client_settings(opts, ca_pem))
}

/// The reqwest client builder of `opts` (see [`build_client`]).
fn client_settings(opts: &HttpOptions, ca_pem: Option<&[u8]>) -> Result<reqwest::ClientBuilder> {
    let mut builder = client_builder(USER_AGENT, opts.max_redirects, &opts.proxy)?
        .connect_timeout(opts.connect_timeout)
        .read_timeout(opts.read_timeout)
        .timeout(opts.request_timeout)
        .pool_max_idle_per_host(opts.pool_per_host)
        .pool_idle_timeout(Duration::from_secs(90))
        // Bodies are hashed as served: no transparent decompression (Z39.99-2014 §7
        // `hash` is of the representation; `encoding` names a content coding).
        .no_gzip();
    if opts.http2_prior_knowledge {
        builder = builder.http2_prior_knowledge();
    }
    if let (Some(path), Some(pem)) = (&opts.ca_cert, ca_pem) {
        builder = builder.tls_certs_merge(parse_ca_certs(path, pem)?);
    }
    if let Some(reach) = &opts.reach {
        builder = builder
            .redirect(crate::redirect::policy(
                opts.max_redirects,
                Some(reach.clone()),
            ))
            .dns_resolver(std::sync::Arc::new(reach.resolver()));
    }
    Ok(builder)
}

/// The client.
#[derive(Debug)]
pub struct Http {
    client: reqwest::Client,
    opts: HttpOptions,
    token_host: Mutex<Option<String>>,
    next_slot: Mutex<HashMap<String, Instant>>,
    /// The adaptive limit of requests in flight per host ([`crate::adaptive`]).
    hosts: Mutex<HashMap<String, std::sync::Arc<HostLimit>>>,
}

/// The key of `url`'s host for per-host limits: `host:port`, the port the scheme's default
/// when none is given (`example.org:443`).
pub fn host_key(url: &Url) -> String {
    format!(
        "{}:{}",
        url.host_str().unwrap_or_default().to_ascii_lowercase(),
        url.port_or_known_default().unwrap_or(0)
    )
}

/// The origin (scheme, host, port) the bearer token is sent to: the scheme counts, so a token
/// given for `https://host` never goes in clear text to `http://host:443`.
fn origin_key(url: &Url) -> String {
    format!("{}://{}", url.scheme(), host_key(url))
}

/// Reads a `Retry-After` value: seconds or an HTTP date (RFC 9110 §10.2.3).
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

impl Http {
    /// Builds the client. Its `reqwest::Client` (connection pool, TLS settings) is shared with
    /// every `Http` of equal options built on the same Tokio runtime ([`crate::cache`]): Sources
    /// on one host share keep-alive connections, which is intended. The bearer token, the
    /// request rate, the bandwidth limit and the adaptive limits per host are this `Http`'s
    /// own. Outside a Tokio runtime, the client is built anew and not shared. An `Http` is
    /// used on the runtime it was built on (its pooled connections run there).
    ///
    /// With a [`HttpOptions::reach`], every request and redirect is checked against it, and
    /// host names are resolved through its resolver; a proxy is then refused (it would resolve
    /// and reach the names itself, past the resolver).
    pub fn new(opts: HttpOptions) -> Result<Self> {
        if opts.reach.is_some() && opts.proxy != Proxy::None {
            return Err(Error::Config(
                "a proxy and a reach (allowed hosts) cannot be used together: the proxy would \
                 resolve the hosts past the reach's checks"
                    .into(),
            ));
        }
        let ca_pem = opts.ca_cert.as_deref().map(read_ca_pem).transpose()?;
        let build = || build_client(&opts, ca_pem.as_deref());
        let client = match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let key = ClientKey::new(rt.id(), USER_AGENT, &opts, ca_pem.as_deref());
                crate::cache::shared(key, build)?
            }
            Err(_) => build()?,
        };
        Ok(Http {
            client,
            opts,
            token_host: Mutex::new(None),
            next_slot: Mutex::new(HashMap::new()),
            hosts: Mutex::new(HashMap::new()),
        })
    }

    /// The adaptive limit of requests in flight to a host ([`crate::adaptive`]), within
    /// [`HttpOptions::max_in_flight`].
    pub fn host_limit(&self, url: &Url) -> std::sync::Arc<HostLimit> {
        let mut g = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        g.entry(host_key(url))
            .or_insert_with(|| HostLimit::new(self.opts.max_in_flight))
            .clone()
    }

    /// The options.
    pub fn options(&self) -> &HttpOptions {
        &self.opts
    }

    /// Sends the bearer token (if any) to this URL's origin (scheme, host, port) from now on.
    pub fn trust_host_of(&self, url: &str) {
        if let Ok(u) = Url::parse(url) {
            if let Ok(mut g) = self.token_host.lock() {
                *g = Some(origin_key(&u));
            }
        }
    }

    /// The next chunk of `resp`'s body (from `url`, for errors), under the bandwidth limit of
    /// [`HttpOptions::bandwidth`] when there is one.
    pub async fn chunk(
        &self,
        resp: &mut reqwest::Response,
        url: &str,
    ) -> Result<Option<bytes::Bytes>> {
        let chunk = resp
            .chunk()
            .await
            .map_err(|e| crate::body::body_error(url, &e))?;
        if let (Some(bw), Some(c)) = (&self.opts.bandwidth, &chunk) {
            bw.take(c.len()).await;
        }
        Ok(chunk)
    }

    async fn pace(&self, url: &Url) {
        let Some(rate) = self.opts.rate.filter(|r| *r > 0.0) else {
            return;
        };
        let interval = Duration::from_secs_f64(1.0 / rate);
        let at = {
            let Ok(mut m) = self.next_slot.lock() else {
                return;
            };
            let now = Instant::now();
            let slot = m.entry(host_key(url)).or_insert(now);
            let at = (*slot).max(now);
            *slot = at + interval;
            at
        };
        tokio::time::sleep_until(at).await;
    }

    /// Sends one request of any method, header fields and body as given (no retry, no
    /// conditional, no token) under the client's reach, request rate and host limit, as
    /// [`Http::get_once`] does: the response whatever its status (a 429 or 503 slows the
    /// host down all the same). A transport error's message names no URL (a presigned URL
    /// carries credentials).
    pub async fn send_once(
        &self,
        method: reqwest::Method,
        url: &str,
        headers: HeaderMap,
        body: Option<reqwest::Body>,
    ) -> Result<Response> {
        let parsed = self.checked(url)?;
        self.pace(&parsed).await;
        let mut slot = self.host_limit(&parsed).acquire().await;
        let mut rb = self.client.request(method, parsed).headers(headers);
        if let Some(b) = body {
            rb = rb.body(b);
        }
        let mut resp = rb
            .send()
            .await
            .map_err(|e| transport(url, &e.without_url()))?;
        if matches!(resp.status().as_u16(), 429 | 503) {
            let retry_after = resp
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
            slot.congestion(retry_after.map(|r| r.min(self.opts.backoff_max)));
        } else {
            slot.answered();
        }
        resp.extensions_mut().insert(std::sync::Arc::new(slot));
        Ok(resp)
    }

    /// `url` parsed, if it is http(s) and within the reach.
    fn checked(&self, url: &str) -> Result<Url> {
        let parsed = Url::parse(url).map_err(|e| Error::Transport {
            url: url.to_owned(),
            message: format!("not a URL: {e}"),
            transient: false,
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Error::Transport {
                url: url.to_owned(),
                message: "only http and https are fetched".into(),
                transient: false,
            });
        }
        if parsed.scheme() == "https" && self.opts.ca_cert.is_none() && no_system_roots() {
            return Err(Error::Transport {
                url: url.to_owned(),
                message: "not fetched: this machine's trust store has no CA certificate \
                          (SSL_CERT_FILE, SSL_CERT_DIR, the system's CA bundle), so no https \
                          server can be verified; install the system's CA certificates (the \
                          ca-certificates package) or give the CA of this server with \
                          --ca-cert FILE"
                    .into(),
                transient: false,
            });
        }
        if let Some(reach) = &self.opts.reach {
            reach.check(&parsed).map_err(|reason| Error::Refused {
                url: url.to_owned(),
                reason,
            })?;
        }
        Ok(parsed)
    }

    /// Sends one GET (no retry). Returns responses with a 2xx or 304 status; other statuses
    /// are errors ([`Error::Status`], with `Retry-After` when sent).
    pub async fn get_once(&self, url: &str, cond: Option<&Conditional>) -> Result<Response> {
        let parsed = self.checked(url)?;
        self.pace(&parsed).await;
        let mut headers = HeaderMap::new();
        if let Some(c) = cond {
            if let Some(v) = c
                .etag
                .as_deref()
                .and_then(|v| HeaderValue::from_str(v).ok())
            {
                headers.insert(IF_NONE_MATCH, v);
            }
            if let Some(v) = c
                .last_modified
                .as_deref()
                .and_then(|v| HeaderValue::from_str(v).ok())
            {
                headers.insert(IF_MODIFIED_SINCE, v);
            }
        }
        if let Some(token) = &self.opts.token {
            let trusted = self
                .token_host
                .lock()
                .ok()
                .and_then(|g| g.clone())
                .is_some_and(|h| h == origin_key(&parsed));
            if trusted {
                if let Ok(v) = HeaderValue::from_str(&format!("Bearer {token}")) {
                    headers.insert(AUTHORIZATION, v);
                }
            }
        }
        // Each request, HTTP/1.1 or an HTTP/2 stream, takes a slot of its host's budget until
        // its response is dropped (its body read or given up).
        let mut slot = self.host_limit(&parsed).acquire().await;
        let mut resp = self
            .client
            .get(parsed)
            .headers(headers)
            .send()
            .await
            .map_err(|e| transport(url, &e))?;
        let status = resp.status();
        if status.is_success() || status == StatusCode::NOT_MODIFIED {
            slot.answered();
            resp.extensions_mut().insert(std::sync::Arc::new(slot));
            return Ok(resp);
        }
        // A redirect still here was not followed: its target is not http(s).
        if status.is_redirection() {
            let to = resp
                .headers()
                .get(LOCATION)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .unwrap_or_default();
            return Err(Error::Transport {
                url: url.to_owned(),
                message: format!(
                    "HTTP {} redirect to {to:?} not followed (only http and https are fetched)",
                    status.as_u16()
                ),
                transient: false,
            });
        }
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        // RFC 6585 §4, RFC 9110 §15.6.4: the host asks for fewer requests.
        // Its pause is cut, as the retries' waits are, to the longest `Retry-After` honoured.
        if matches!(status.as_u16(), 429 | 503) {
            slot.congestion(retry_after.map(|r| r.min(self.opts.backoff_max)));
        }
        Err(Error::Status {
            url: url.to_owned(),
            status: status.as_u16(),
            retry_after,
        })
    }

    /// The delay before attempt `attempt + 1`: exponential from the base, capped, with full
    /// jitter in its upper half; a `Retry-After` (capped) wins when longer.
    pub fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        backoff(&self.opts, attempt, retry_after)
    }

    /// Runs `attempt` until it succeeds, fails for good, or the retries are spent.
    pub async fn with_retries<T, E, F, Fut>(&self, attempt: F) -> Result<T, E>
    where
        E: Retry + std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.with_retries_until(None, attempt).await
    }

    /// [`Http::with_retries`], each wait cut to end by `deadline` when there is one (the
    /// attempt after it says whether time is up).
    pub async fn with_retries_until<T, E, F, Fut>(
        &self,
        deadline: Option<Instant>,
        attempt: F,
    ) -> Result<T, E>
    where
        E: Retry + std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        with_retries_until(&self.opts, deadline, attempt).await
    }
}

/// The delay before attempt `attempt + 1` under `opts`: exponential from the base, capped, with
/// full jitter in its upper half; a `Retry-After` (capped) wins when longer.
pub fn backoff(opts: &HttpOptions, attempt: u32, retry_after: Option<Duration>) -> Duration {
    let base = opts.backoff_base.as_secs_f64();
    let max = opts.backoff_max.as_secs_f64();
    let exp = (base * 2f64.powi(i32::try_from(attempt.min(30)).unwrap_or(30))).min(max);
    let jittered = exp * (0.5 + fastrand::f64() * 0.5);
    let d = Duration::from_secs_f64(jittered);
    match retry_after {
        Some(r) => r.min(opts.backoff_max).max(d),
        None => d,
    }
}

/// The one retry policy, for a request sent by a client of its own (the Source's pings of a
/// WebSub hub): runs `attempt` until it succeeds, fails for good, or `opts.retries` are spent,
/// each wait [`backoff`] (cut to end by `deadline` when there is one).
pub async fn with_retries_until<T, E, F, Fut>(
    opts: &HttpOptions,
    deadline: Option<Instant>,
    mut attempt: F,
) -> Result<T, E>
where
    E: Retry + std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut n = 0u32;
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) if e.is_transient() && n < opts.retries => {
                let mut d = backoff(opts, n, e.retry_after());
                if let Some(end) = deadline {
                    d = d.min(end.saturating_duration_since(Instant::now()));
                }
                tracing::debug!("retrying in {d:?} after: {e}");
                tokio::time::sleep(d).await;
                n += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_origin_includes_the_scheme() {
        let key = |u: &str| origin_key(&Url::parse(u).expect("url"));
        assert_eq!(
            key("https://Example.org/a"),
            key("https://example.org:443/b")
        );
        assert_ne!(key("https://example.org/"), key("http://example.org:443/"));
        assert_ne!(
            key("https://example.org/"),
            key("https://example.org:8443/")
        );
    }

    #[test]
    fn retry_after_in_seconds_and_dates() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let h = Http::new(HttpOptions {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(1),
            ..HttpOptions::default()
        })
        .expect("client");
        let d0 = h.backoff(0, None);
        assert!(d0 >= Duration::from_millis(50) && d0 <= Duration::from_millis(100));
        assert!(h.backoff(20, None) <= Duration::from_secs(1));
        assert_eq!(
            h.backoff(0, Some(Duration::from_secs(3600))),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn a_bad_proxy_url_is_a_configuration_error() {
        let e = Http::new(HttpOptions {
            proxy: Proxy::Url("::not a url".into()),
            ..HttpOptions::default()
        })
        .expect_err("refused");
        assert_eq!(e.category(), crate::Category::Stop);
    }
}
