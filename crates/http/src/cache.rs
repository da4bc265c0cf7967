//! The `reqwest::Client`s of [`crate::Http`], built once per set of options and shared by the
//! whole process.
//!
//! Building a client is not free: its TLS verifier (`rustls-platform-verifier`) reads the
//! system's roots, a few milliseconds each time. The aggregator builds an `Http` per Source per
//! sync; with the cache, Sources with equal options share one client, so they also share its
//! connection pool: Sources on one host reuse each other's keep-alive connections (and HTTP/2
//! connections), fewer TCP and TLS handshakes for the host. That sharing is intended.
//!
//! A client is keyed by exactly what it is built from ([`ClientKey`]): the user agent, the
//! redirect limit, the proxy (and, for [`Proxy::FromEnvironment`], the proxy variables as
//! they are now), the three timeouts, the idle connections per host, HTTP/2 prior knowledge,
//! the *contents* of the CA certificate file (its SHA-256: an operator who replaces the file
//! gets a new client), the [`crate::Reach`] (its redirect policy and resolver are the
//! client's: Sources with different reaches never share a client), and the Tokio runtime it
//! is built in (a pooled connection's task runs
//! on the runtime that opened it, and dies with it: a client is never shared across runtimes;
//! Tokio numbers runtimes from a process-wide counter, so a new runtime does not find an ended
//! one's clients).
//! Nothing per Source is in a client: the bearer token, the request rate, the bandwidth limit
//! and the adaptive limits per host stay in each `Http`; the redirect policy depends on the
//! limit and the reach alone; the builder sets no header but the user agent; there is no cookie store
//! (reqwest's `cookies` feature is off).
//!
//! The cache holds at most [`CAPACITY`] clients; past it, the least recently used one is
//! dropped from the cache (an `Http` holding it keeps it until it is dropped).

use std::ffi::OsString;
use std::sync::Mutex;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::error::Result;
use crate::options::{HttpOptions, Proxy};

/// The most clients kept.
pub const CAPACITY: usize = 16;

/// The environment variables reqwest reads for [`Proxy::FromEnvironment`].
const PROXY_VARIABLES: [&str; 9] = [
    "ALL_PROXY",
    "all_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "REQUEST_METHOD",
];

/// What a client is built from: two equal keys build clients that behave alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientKey {
    runtime: tokio::runtime::Id,
    user_agent: String,
    max_redirects: usize,
    proxy: Proxy,
    /// The proxy variables, read only for [`Proxy::FromEnvironment`].
    proxy_env: Vec<Option<OsString>>,
    connect_timeout: Duration,
    read_timeout: Duration,
    request_timeout: Duration,
    pool_per_host: usize,
    http2_prior_knowledge: bool,
    /// The SHA-256 of the CA certificate file's contents.
    ca_cert: Option<[u8; 32]>,
    /// The origins allowed (the redirect policy and the resolver enforce it).
    reach: Option<crate::reach::Reach>,
}

impl ClientKey {
    /// The key of a client built on `runtime` with `user_agent`, `opts` and the contents of
    /// `opts.ca_cert` (`ca_pem`, read by the caller).
    pub fn new(
        runtime: tokio::runtime::Id,
        user_agent: &str,
        opts: &HttpOptions,
        ca_pem: Option<&[u8]>,
    ) -> Self {
        let proxy_env = match opts.proxy {
            Proxy::FromEnvironment => PROXY_VARIABLES.iter().map(std::env::var_os).collect(),
            Proxy::None | Proxy::Url(_) => Vec::new(),
        };
        ClientKey {
            runtime,
            user_agent: user_agent.to_owned(),
            max_redirects: opts.max_redirects,
            proxy: opts.proxy.clone(),
            proxy_env,
            connect_timeout: opts.connect_timeout,
            read_timeout: opts.read_timeout,
            request_timeout: opts.request_timeout,
            pool_per_host: opts.pool_per_host,
            http2_prior_knowledge: opts.http2_prior_knowledge,
            ca_cert: ca_pem.map(|pem| Sha256::digest(pem).into()),
            reach: opts.reach.clone(),
        }
    }
}

/// Clients by key, at most [`CAPACITY`], the least recently used dropped first.
#[derive(Debug, Default)]
pub struct ClientCache {
    /// Each client with its key and when it was last asked for.
    entries: Vec<(ClientKey, reqwest::Client, u64)>,
    clock: u64,
}

impl ClientCache {
    /// The client of `key`: the one kept, or a new one from `build`, kept (an error is not).
    pub fn get_or_build(
        &mut self,
        key: ClientKey,
        build: impl FnOnce() -> Result<reqwest::Client>,
    ) -> Result<reqwest::Client> {
        self.clock += 1;
        if let Some(e) = self.entries.iter_mut().find(|e| e.0 == key) {
            e.2 = self.clock;
            return Ok(e.1.clone());
        }
        let client = build()?;
        if self.entries.len() >= CAPACITY {
            if let Some(oldest) = (0..self.entries.len()).min_by_key(|&i| self.entries[i].2) {
                self.entries.swap_remove(oldest);
            }
        }
        self.entries.push((key, client.clone(), self.clock));
        Ok(client)
    }

    /// The clients kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

static CACHE: Mutex<ClientCache> = Mutex::new(ClientCache {
    entries: Vec::new(),
    clock: 0,
});

/// The process-wide client of `key`, built by `build` when there is none (under the cache's
/// lock: Sources starting at once build it once).
pub fn shared(
    key: ClientKey,
    build: impl FnOnce() -> Result<reqwest::Client>,
) -> Result<reqwest::Client> {
    CACHE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_build(key, build)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    }

    fn reach(rule: &str) -> crate::Reach {
        let r = crate::HostRule::parse(rule).expect("rule");
        crate::Reach::new(vec![r], "Source \"s\"", "allow_hosts")
    }

    fn client() -> Result<reqwest::Client> {
        crate::install_tls_provider();
        Ok(reqwest::Client::new())
    }

    #[test]
    fn the_key_follows_the_ca_file_contents() {
        let rt = runtime().handle().id();
        let opts = HttpOptions::default();
        let a = ClientKey::new(rt, "ua", &opts, Some(b"one PEM"));
        assert_eq!(a, ClientKey::new(rt, "ua", &opts, Some(b"one PEM")));
        assert_ne!(a, ClientKey::new(rt, "ua", &opts, Some(b"another PEM")));
        assert_ne!(a, ClientKey::new(rt, "ua", &opts, None));
    }

    #[test]
    fn the_key_has_every_setting_of_the_client_and_no_other() {
        let rt = runtime().handle().id();
        let base = HttpOptions::default();
        let key = |o: &HttpOptions| ClientKey::new(rt, "ua", o, None);
        let k = key(&base);
        assert_ne!(k, ClientKey::new(rt, "other", &base, None));
        let other_runtime = runtime();
        assert_ne!(
            k,
            ClientKey::new(other_runtime.handle().id(), "ua", &base, None)
        );
        let changed = [
            HttpOptions {
                max_redirects: 0,
                ..base.clone()
            },
            HttpOptions {
                proxy: Proxy::Url("http://127.0.0.1:1".into()),
                ..base.clone()
            },
            HttpOptions {
                connect_timeout: Duration::from_secs(1),
                ..base.clone()
            },
            HttpOptions {
                read_timeout: Duration::from_secs(1),
                ..base.clone()
            },
            HttpOptions {
                request_timeout: Duration::from_secs(1),
                ..base.clone()
            },
            HttpOptions {
                pool_per_host: 1,
                ..base.clone()
            },
            HttpOptions {
                http2_prior_knowledge: true,
                ..base.clone()
            },
            HttpOptions {
                reach: Some(reach("a.example")),
                ..base.clone()
            },
        ];
        assert_ne!(
            key(&HttpOptions {
                reach: Some(reach("a.example")),
                ..base.clone()
            }),
            key(&HttpOptions {
                reach: Some(reach("b.example")),
                ..base.clone()
            })
        );
        for o in &changed {
            assert_ne!(k, key(o), "{o:?}");
        }
        // What stays in each `Http`.
        let per_source = HttpOptions {
            token: Some("secret".into()),
            rate: Some(1.0),
            retries: 0,
            max_in_flight: 1,
            bandwidth: Some(std::sync::Arc::new(crate::Bandwidth::new(1000))),
            ..base.clone()
        };
        assert_eq!(k, key(&per_source));
    }

    #[test]
    fn built_once_per_key_and_the_least_recently_used_dropped() {
        let rt = runtime().handle().id();
        let key = |n: usize| {
            let o = HttpOptions {
                pool_per_host: n,
                ..HttpOptions::default()
            };
            ClientKey::new(rt, "ua", &o, None)
        };
        let mut cache = ClientCache::default();
        let builds = std::cell::Cell::new(0);
        let get = |cache: &mut ClientCache, n| {
            cache
                .get_or_build(key(n), || {
                    builds.set(builds.get() + 1);
                    client()
                })
                .expect("client");
        };
        for n in 0..CAPACITY {
            get(&mut cache, n);
        }
        get(&mut cache, 0); // 0 is now the most recently used, 1 the least
        get(&mut cache, CAPACITY);
        assert_eq!(cache.len(), CAPACITY);
        get(&mut cache, 0);
        get(&mut cache, 2);
        assert_eq!(builds.get(), CAPACITY + 1, "0 and 2 kept, built once");
        let mut rebuilt = false;
        cache
            .get_or_build(key(1), || {
                rebuilt = true;
                client()
            })
            .expect("client");
        assert!(rebuilt, "1 was dropped");
    }

    #[test]
    fn a_failed_build_is_not_kept() {
        let rt = runtime().handle().id();
        let k = ClientKey::new(rt, "ua", &HttpOptions::default(), None);
        let mut cache = ClientCache::default();
        let e = cache
            .get_or_build(k.clone(), || Err(crate::Error::Config("no".into())))
            .expect_err("failed");
        assert_eq!(e.category(), crate::Category::Stop);
        assert!(cache.is_empty());
        cache.get_or_build(k, client).expect("built now");
        assert_eq!(cache.len(), 1);
    }
}
