//! Which addresses the hub may send requests to.
//!
//! A hub sends requests to URLs that strangers give it: verification and denial GETs and content
//! deliveries to `hub.callback` (WebSub §5.2, §5.3, §7), topic fetches for `hub.mode=publish`.
//! Left open, anyone who can reach a hub on a public address can make it call a service inside
//! its network (server-side request forgery). A hub that does not allow private addresses
//! refuses such URLs when they name an address literally (400 at once, nothing sent), and its
//! HTTP client resolves host names through [`PublicResolver`], which drops every private address,
//! so that a name resolving (or later re-resolving) to one cannot be reached either.
//!
//! "Private" and the resolver are [`resourcesync_http::reach`]'s, shared with the aggregator's
//! allow lists.

use std::net::{IpAddr, SocketAddr};

pub use resourcesync_http::reach::{PublicResolver, is_public};
use url::{Host, Url};

/// The default for a hub listening at `listen`: private addresses are reached when the hub
/// itself listens on a loopback or private address (it serves that network), and not when it
/// listens on a public address or on every interface (`0.0.0.0`, `::`), where strangers may reach
/// it.
pub fn private_by_default(listen: SocketAddr) -> bool {
    let ip = listen.ip();
    !ip.is_unspecified() && !is_public(ip)
}

/// Refuses a URL whose host is a private address written literally; host names pass (they are
/// checked when resolved, by [`PublicResolver`]).
pub fn check_public_url(what: &str, url: &Url) -> Result<(), String> {
    let ip = match url.host() {
        Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
        _ => return Ok(()),
    };
    if is_public(ip) {
        Ok(())
    } else {
        Err(format!(
            "{what} names the private address {ip}, which this hub does not reach \
             (resourcesync hub --private-addresses allow)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_private_urls_are_refused_and_names_left_to_the_resolver() {
        let u = |s: &str| Url::parse(s).expect("a URL");
        assert!(check_public_url("hub.callback", &u("http://127.0.0.1:8080/cb")).is_err());
        assert!(check_public_url("hub.callback", &u("http://[::1]/cb")).is_err());
        assert!(check_public_url("hub.callback", &u("http://169.254.169.254/latest")).is_err());
        assert!(check_public_url("hub.callback", &u("http://8.8.8.8/cb")).is_ok());
        assert!(check_public_url("hub.callback", &u("http://example.org/cb")).is_ok());
    }

    #[test]
    fn private_addresses_are_reached_by_default_only_by_hubs_on_private_addresses() {
        let on = |s: &str| private_by_default(s.parse().expect("an address"));
        assert!(on("127.0.0.1:8090"));
        assert!(on("[::1]:8090"));
        assert!(on("10.0.0.2:8090"));
        assert!(!on("0.0.0.0:8090"));
        assert!(!on("[::]:8090"));
        assert!(!on("8.8.8.8:80"));
    }
}
