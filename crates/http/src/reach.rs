//! Where a client may send requests: which addresses are public ([`is_public`]), a resolver
//! that keeps only those ([`PublicResolver`]), and an allow list of origins ([`Reach`]) that
//! [`crate::Http`] enforces before every request and on every redirect.
//!
//! A service that fetches URLs strangers give it (a WebSub hub fetching callbacks, an
//! aggregator fetching what a Source lists and republishing it) must not become a way into its
//! own network (server-side request forgery): a URL naming `127.0.0.1`, `10.0.0.5` or the cloud
//! metadata service `169.254.169.254`, or a name resolving to one, would have the service fetch
//! an internal service for the stranger.
//!
//! "Private" here is every address that is not globally reachable unicast: loopback, the
//! RFC 1918 and RFC 6598 (shared) ranges, link-local, unique-local IPv6, unspecified, multicast,
//! broadcast, "this network", documentation and benchmarking ranges, and IPv4-mapped or NAT64
//! forms of those. The rules are written here because `IpAddr::is_global` is not stable.
//!
//! # Allow lists ([`Reach`], [`HostRule`])
//!
//! A [`Reach`] is a list of rules; a URL is fetched when one matches it. A rule is written
//!
//! ```text
//! [SCHEME "://"] HOST [":" PORT]
//! ```
//!
//! - `SCHEME`: `http` or `https`; left out, both.
//! - `HOST`: a host name (`cdn.example.org`, compared after IDNA and lower-casing), an IPv4
//!   address, an IPv6 address in brackets (`[2001:db8::1]`); `*.example.org`: every name
//!   *under* `example.org` (`a.example.org`, `a.b.example.org`; not `example.org` itself, not
//!   `evil-example.org`); `*`: any host.
//! - `PORT`: a number; `*`: any port; left out, the default port of the URL's scheme (80 for
//!   `http`, 443 for `https`): `cdn.example.org` allows `http://cdn.example.org/` and
//!   `https://cdn.example.org/`, not `http://cdn.example.org:8080/`.
//!
//! No user information, path, query or fragment. A host named exactly (no `*`) is trusted: it
//! is reached at whatever address it resolves to, private ones included (the operator named it).
//! A host allowed only through a wildcard is reached only at public addresses: an IP literal
//! that is not public is refused before anything is sent, and host names are resolved through
//! [`ReachResolver`], which drops every private address of a name not named exactly (so that a
//! name resolving, or later re-resolving, to one is not reached either). A URL with user
//! information (`http://trusted.example@other.example/`) is refused: it only serves to make a
//! URL look like another one.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use url::{Host, Url};

/// Whether `ip` is globally reachable unicast (see the module documentation).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        // RFC 6598 shared address space (carrier-grade NAT).
        || (a == 100 && (64..128).contains(&b))
        // RFC 5737 and RFC 2544: documentation and benchmarking, never routed.
        || ip.is_documentation()
        || (a == 198 && (b == 18 || b == 19))
        // 240.0.0.0/4, reserved.
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    // NAT64 (RFC 6052 well-known prefix 64:ff9b::/96): the IPv4 address it stands for.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        let o = ip.octets();
        return is_public_v4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // fc00::/7 unique local, fe80::/10 link-local.
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        // ::/96 IPv4-compatible (deprecated) and 2001:db8::/32 documentation.
        || s[..6] == [0, 0, 0, 0, 0, 0]
        || (s[0] == 0x2001 && s[1] == 0x0db8))
}

/// The error of a resolver that found only private addresses, and of a redirect out of a
/// [`Reach`]: [`crate::Http`] turns it into [`crate::Error::Refused`], never retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable(pub String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// Resolves `host`, keeping only public addresses (all of them when `trusted`); an error when
/// none is left, ending with `unless` (what would make them reached).
async fn resolve_filtered(
    host: String,
    trusted: bool,
    unless: &str,
) -> Result<reqwest::dns::Addrs, Unreachable> {
    let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
        .await
        .map_err(|e| Unreachable(format!("resolving {host}: {e}")))?
        .collect();
    if trusted {
        return Ok(Box::new(all.into_iter()));
    }
    let (public, private): (Vec<SocketAddr>, Vec<SocketAddr>) =
        all.into_iter().partition(|a| is_public(a.ip()));
    if public.is_empty() {
        let named: Vec<String> = private.iter().map(|a| a.ip().to_string()).collect();
        return Err(Unreachable(format!(
            "{host} resolves only to private addresses ({}), which are not reached{unless}",
            named.join(", ")
        )));
    }
    Ok(Box::new(public.into_iter()))
}

/// A resolver that keeps only public addresses (and fails when none is left).
#[derive(Debug, Clone, Copy, Default)]
pub struct PublicResolver;

impl reqwest::dns::Resolve for PublicResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            resolve_filtered(host, false, "")
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
        })
    }
}

/// The resolver of a client with a [`Reach`]: the names the reach names exactly resolve to
/// every address; any other name to its public addresses only.
#[derive(Debug, Clone)]
pub struct ReachResolver {
    trusted: Arc<BTreeSet<String>>,
    /// The end of the message of a refusal: whom for, and the setting that widens the reach.
    unless: Arc<str>,
}

impl reqwest::dns::Resolve for ReachResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_ascii_lowercase();
        let trusted = self.trusted.contains(&host);
        let unless = self.unless.clone();
        Box::pin(async move {
            resolve_filtered(host, trusted, &unless)
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
        })
    }
}

/// The host part of a [`HostRule`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum HostPattern {
    /// This host (a name, lower-case and IDNA-encoded, or an address).
    Exact(Host<String>),
    /// Every name under this domain (`*.DOMAIN`).
    Under(String),
    /// Any host (`*`).
    Any,
}

/// The port part of a [`HostRule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum PortRule {
    /// The default port of the URL's scheme.
    Default,
    /// This port.
    Exactly(u16),
    /// Any port (`:*`).
    Any,
}

/// One rule of a [`Reach`] (the syntax is in the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostRule {
    /// `http` or `https`; `None`: both.
    scheme: Option<String>,
    host: HostPattern,
    port: PortRule,
}

impl HostRule {
    /// Reads a rule; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<HostRule, String> {
        let bad = |why: &str| Err(format!("{text:?} {why}"));
        let t = text.trim();
        if t.is_empty() {
            return bad("is empty: write a host such as cdn.example.org");
        }
        let (scheme, rest) = match t.split_once("://") {
            Some((s, r)) => {
                let s = s.to_ascii_lowercase();
                if !matches!(s.as_str(), "http" | "https") {
                    return bad("has a scheme other than http or https");
                }
                (Some(s), r)
            }
            None => (None, t),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('@') {
            return bad("has user information (user@): name the host alone");
        }
        if rest.contains(['/', '?', '#', '\\']) {
            return bad("has a path, query or fragment: name the origin alone");
        }
        // The port: after the bracketed IPv6 address, or after the last colon.
        let (host_text, port_text) = if let Some(after) = rest.strip_prefix('[') {
            let Some((inside, tail)) = after.split_once(']') else {
                return bad("has an IPv6 address without its closing bracket");
            };
            let host_len = inside.len() + 2;
            match tail {
                "" => (&rest[..host_len], None),
                _ => match tail.strip_prefix(':') {
                    Some(p) => (&rest[..host_len], Some(p)),
                    None => return bad("has text after the IPv6 address"),
                },
            }
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (rest, None),
            }
        };
        let port = match port_text {
            None => PortRule::Default,
            Some("*") => PortRule::Any,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => PortRule::Exactly(n),
                _ => return bad("has a port that is not 1 to 65535 or *"),
            },
        };
        let host = if host_text == "*" {
            HostPattern::Any
        } else if let Some(domain) = host_text.strip_prefix("*.") {
            match Host::parse(domain) {
                Ok(Host::Domain(d)) if !d.contains('*') && d.contains('.') => HostPattern::Under(d),
                Ok(Host::Domain(_)) => {
                    return bad("names every host of a top-level domain: name a domain with a dot");
                }
                Ok(_) => return bad("puts a wildcard before an IP address"),
                Err(e) => return Err(format!("{text:?}: the domain after *. is not valid: {e}")),
            }
        } else if host_text.contains('*') {
            return bad("has a * other than a leading *. or the whole host");
        } else {
            match Host::parse(host_text) {
                Ok(h) => HostPattern::Exact(h),
                Err(e) => return Err(format!("{text:?}: not a valid host: {e}")),
            }
        };
        Ok(HostRule { scheme, host, port })
    }

    /// The rule of exactly `url`'s origin (scheme, host, port), or `None` for a URL without a
    /// host.
    pub fn origin(url: &Url) -> Option<HostRule> {
        let host = url.host()?.to_owned();
        let port = url.port_or_known_default()?;
        Some(HostRule {
            scheme: Some(url.scheme().to_ascii_lowercase()),
            host: HostPattern::Exact(host),
            port: PortRule::Exactly(port),
        })
    }

    /// Whether the rule names its host exactly (no wildcard).
    pub fn is_exact(&self) -> bool {
        matches!(self.host, HostPattern::Exact(_))
    }

    /// Whether the rule allows `url`.
    pub fn matches(&self, url: &Url) -> bool {
        let scheme = url.scheme();
        let scheme_ok = match &self.scheme {
            Some(s) => s == scheme,
            None => matches!(scheme, "http" | "https"),
        };
        let port_ok = match (self.port, url.port_or_known_default()) {
            (_, None) => false,
            (PortRule::Any, Some(_)) => true,
            (PortRule::Exactly(p), Some(q)) => p == q,
            (PortRule::Default, Some(q)) => default_port(scheme) == Some(q),
        };
        let host_ok = match (&self.host, url.host()) {
            (_, None) => false,
            (HostPattern::Any, Some(_)) => true,
            (HostPattern::Exact(h), Some(u)) => *h == u.to_owned(),
            (HostPattern::Under(d), Some(Host::Domain(name))) => name
                .strip_suffix(d.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPattern::Under(_), Some(_)) => false,
        };
        scheme_ok && port_ok && host_ok
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

impl std::fmt::Display for HostRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(s) = &self.scheme {
            write!(f, "{s}://")?;
        }
        match &self.host {
            HostPattern::Exact(h) => write!(f, "{h}")?,
            HostPattern::Under(d) => write!(f, "*.{d}")?,
            HostPattern::Any => f.write_str("*")?,
        }
        match self.port {
            PortRule::Default => Ok(()),
            PortRule::Exactly(p) => write!(f, ":{p}"),
            PortRule::Any => f.write_str(":*"),
        }
    }
}

/// The origins a client fetches from, for one party (a Source of an aggregator): requests to
/// any other origin are refused before they are sent ([`crate::Error::Refused`], never
/// retried), redirects to one are refused, and hosts allowed only through a wildcard are
/// reached only at public addresses (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reach {
    rules: Vec<HostRule>,
    /// Whom the requests are for, in messages (`Source "museum"`).
    whom: String,
    /// The setting that widens the reach, in messages (`allow_hosts`).
    setting: String,
}

impl Reach {
    /// A reach of `rules` (sorted and deduplicated: equal sets make equal reaches), for
    /// `whom`, widened by `setting` (both for messages).
    pub fn new(mut rules: Vec<HostRule>, whom: &str, setting: &str) -> Reach {
        rules.sort();
        rules.dedup();
        Reach {
            rules,
            whom: whom.to_owned(),
            setting: setting.to_owned(),
        }
    }

    /// The rules.
    pub fn rules(&self) -> &[HostRule] {
        &self.rules
    }

    /// Whether a request to `url` may be sent, or why not. A host named exactly by a rule
    /// passes at any address; one allowed only through a wildcard must be public when it is
    /// an address (names are checked when resolved, by [`Reach::resolver`]).
    pub fn check(&self, url: &Url) -> Result<(), String> {
        let origin = match url.host_str() {
            Some(h) => format!(
                "{}://{h}:{}",
                url.scheme(),
                url.port_or_known_default().unwrap_or(0)
            ),
            None => return Err("a URL without a host is not fetched".into()),
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "a URL with user information (user@host) is never fetched for {}",
                self.whom
            ));
        }
        let matching: Vec<&HostRule> = self.rules.iter().filter(|r| r.matches(url)).collect();
        if matching.is_empty() {
            return Err(format!(
                "the host {origin} is not fetched for {whom} (neither its own origin nor \
                 allowed by its {setting}): add \"{origin}\" to its {setting} to fetch it",
                whom = self.whom,
                setting = self.setting
            ));
        }
        if matching.iter().any(|r| r.is_exact()) {
            return Ok(());
        }
        let ip = match url.host() {
            Some(Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
            Some(Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
            _ => None,
        };
        match ip {
            Some(ip) if !is_public(ip) => Err(format!(
                "the private address {ip} is not fetched for {whom} unless named exactly: add \
                 \"{origin}\" to its {setting} to fetch it",
                whom = self.whom,
                setting = self.setting
            )),
            _ => Ok(()),
        }
    }

    /// The resolver enforcing this reach on host names: names the rules name exactly resolve
    /// to every address, others to public addresses only.
    pub fn resolver(&self) -> ReachResolver {
        let trusted = self
            .rules
            .iter()
            .filter_map(|r| match &r.host {
                HostPattern::Exact(Host::Domain(d)) => Some(d.to_ascii_lowercase()),
                _ => None,
            })
            .collect();
        ReachResolver {
            trusted: Arc::new(trusted),
            unless: format!(
                " for {} unless the host is named exactly in its {}",
                self.whom, self.setting
            )
            .into(),
        }
    }
}

#[cfg(test)]
#[path = "reach_tests.rs"]
mod tests;
