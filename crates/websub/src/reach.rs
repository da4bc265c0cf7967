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
//! "Private" here is every address that is not globally reachable unicast: loopback, the
//! RFC 1918 and RFC 6598 (shared) ranges, link-local, unique-local IPv6, unspecified, multicast,
//! broadcast, "this network", and IPv4-mapped or NAT64 forms of those. The rules are written here
//! because `IpAddr::is_global` is not stable.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

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

/// A resolver that keeps only public addresses (and fails when none is left).
#[derive(Debug, Clone, Copy, Default)]
pub struct PublicResolver;

impl reqwest::dns::Resolve for PublicResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = all.into_iter().filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                return Err(format!(
                    "{host} resolves only to private addresses, which this hub does not reach"
                )
                .into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(s: &str) -> bool {
        is_public(s.parse().expect("an address"))
    }

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for s in [
            "127.0.0.1",
            "127.255.0.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "0.1.2.3",
            "100.64.0.1",
            "100.127.255.255",
            "255.255.255.255",
            "224.0.0.1",
            "192.0.2.1",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "::127.0.0.1",
            "2001:db8::1",
        ] {
            assert!(!public(s), "{s} counted as public");
        }
    }

    #[test]
    fn global_addresses_are_public() {
        for s in [
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(public(s), "{s} counted as private");
        }
    }

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

    #[tokio::test]
    async fn the_resolver_drops_private_addresses() {
        use reqwest::dns::Resolve;
        let name: reqwest::dns::Name = "localhost".parse().expect("a name");
        let err = match PublicResolver.resolve(name).await {
            Ok(addrs) => panic!("localhost resolved to {:?}", addrs.collect::<Vec<_>>()),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("only to private addresses"), "{err}");
    }
}
