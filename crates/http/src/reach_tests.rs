//! The address rules and the allow-list rules of [`super`].

use super::*;

fn public(s: &str) -> bool {
    is_public(s.parse().expect("an address"))
}

fn url(s: &str) -> Url {
    Url::parse(s).expect("a URL")
}

fn rule(s: &str) -> HostRule {
    HostRule::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn reach(rules: &[&str]) -> Reach {
    Reach::new(
        rules.iter().map(|r| rule(r)).collect(),
        "Source \"s\"",
        "allow_hosts",
    )
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

#[tokio::test]
async fn the_public_resolver_drops_private_addresses() {
    use reqwest::dns::Resolve;
    let name: reqwest::dns::Name = "localhost".parse().expect("a name");
    let err = match PublicResolver.resolve(name).await {
        Ok(addrs) => panic!("localhost resolved to {:?}", addrs.collect::<Vec<_>>()),
        Err(e) => e,
    };
    assert!(err.downcast_ref::<Unreachable>().is_some(), "{err}");
    assert!(
        err.to_string().contains("only to private addresses"),
        "{err}"
    );
}

#[tokio::test]
async fn the_reach_resolver_trusts_exact_names_only() {
    use reqwest::dns::Resolve;
    let name = || -> reqwest::dns::Name { "localhost".parse().expect("a name") };
    let exact = reach(&["localhost:8080"]).resolver();
    let addrs: Vec<SocketAddr> = exact.resolve(name()).await.expect("resolved").collect();
    assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    for wild in [reach(&["*"]), reach(&["*:*"]), reach(&["other.example"])] {
        assert!(wild.resolver().resolve(name()).await.is_err(), "{wild:?}");
    }
}

#[test]
fn the_source_origin_allows_its_scheme_host_and_port_only() {
    let own =
        HostRule::origin(&url("http://127.0.0.1:8080/.well-known/resourcesync")).expect("origin");
    let r = Reach::new(vec![own], "Source \"s\"", "allow_hosts");
    assert!(r.check(&url("http://127.0.0.1:8080/r/1.txt")).is_ok());
    for other in [
        "http://127.0.0.1:8081/latest/meta-data/",
        "https://127.0.0.1:8080/r",
        "http://127.0.0.2:8080/r",
        "http://localhost:8080/r",
        "http://127.0.0.1/r",
    ] {
        let e = r.check(&url(other)).expect_err(other);
        assert!(e.contains("not fetched for Source \"s\""), "{e}");
        assert!(e.contains("allow_hosts"), "{e}");
    }
    // The default port is the same origin written either way.
    let https = Reach::new(
        vec![HostRule::origin(&url("https://Museum.Example/x")).expect("origin")],
        "s",
        "allow_hosts",
    );
    assert!(https.check(&url("https://museum.example:443/y")).is_ok());
    assert!(https.check(&url("http://museum.example/y")).is_err());
}

#[test]
fn ports_and_schemes() {
    let bare = reach(&["cdn.example.org"]);
    assert!(bare.check(&url("http://cdn.example.org/a")).is_ok());
    assert!(bare.check(&url("https://cdn.example.org/a")).is_ok());
    assert!(bare.check(&url("http://cdn.example.org:443/a")).is_err());
    assert!(bare.check(&url("https://cdn.example.org:80/a")).is_err());
    assert!(bare.check(&url("http://cdn.example.org:8080/a")).is_err());
    let port = reach(&["cdn.example.org:8080"]);
    assert!(port.check(&url("http://cdn.example.org:8080/a")).is_ok());
    assert!(port.check(&url("https://cdn.example.org:8080/a")).is_ok());
    assert!(port.check(&url("http://cdn.example.org/a")).is_err());
    let origin = reach(&["https://files.example:8443"]);
    assert!(origin.check(&url("https://files.example:8443/a")).is_ok());
    assert!(origin.check(&url("http://files.example:8443/a")).is_err());
    assert!(origin.check(&url("https://files.example/a")).is_err());
    let any_port = reach(&["http://cdn.example.org:*"]);
    assert!(any_port.check(&url("http://cdn.example.org:1/a")).is_ok());
    assert!(any_port.check(&url("https://cdn.example.org/a")).is_err());
    assert!(
        reach(&["https://files.example/"])
            .check(&url("https://files.example/x"))
            .is_ok()
    );
}

#[test]
fn wildcards_match_at_label_boundaries_only() {
    let under = reach(&["*.example.org"]);
    for ok in [
        "http://a.example.org/",
        "https://a.b.example.org/x",
        "https://A.Example.ORG/x",
    ] {
        assert!(under.check(&url(ok)).is_ok(), "{ok}");
    }
    for no in [
        "http://example.org/",
        "http://evil-example.org/",
        "http://example.org.evil.com/",
        "http://aexample.org/",
        "http://a.example.org:8080/",
        "http://a.example.com/",
    ] {
        assert!(under.check(&url(no)).is_err(), "{no}");
    }
}

#[test]
fn any_public_host_but_never_a_private_literal() {
    let any = reach(&["*"]);
    assert!(any.check(&url("https://anything.example/")).is_ok());
    assert!(any.check(&url("http://8.8.8.8/")).is_ok());
    assert!(
        any.check(&url("http://8.8.8.8:8080/")).is_err(),
        "default ports only"
    );
    for private in [
        "http://127.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.5/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://0x7f.1/",
        "http://2130706433/",
    ] {
        let e = any.check(&url(private)).expect_err(private);
        assert!(e.contains("private address"), "{private}: {e}");
    }
    assert!(reach(&["*:*"]).check(&url("http://[::1]:9/")).is_err());
    // Named exactly, a private address is the operator's choice.
    assert!(
        reach(&["*", "10.0.0.5"])
            .check(&url("http://10.0.0.5/"))
            .is_ok()
    );
}

#[test]
fn ipv6_literals() {
    let r = reach(&["[2001:db8::1]:8443", "http://[::1]"]);
    assert!(r.check(&url("http://[2001:DB8:0::1]:8443/")).is_ok());
    assert!(r.check(&url("https://[2001:db8::1]:8443/")).is_ok());
    assert!(r.check(&url("http://[2001:db8::1]/")).is_err());
    assert!(r.check(&url("http://[::1]/")).is_ok());
    assert!(r.check(&url("https://[::1]/")).is_err());
    assert_eq!(rule("[::1]:*").to_string(), "[::1]:*");
}

#[test]
fn user_information_is_refused_in_rules_and_urls() {
    assert!(HostRule::parse("user@cdn.example.org").is_err());
    assert!(HostRule::parse("https://u:p@cdn.example.org").is_err());
    let r = reach(&["cdn.example.org", "*"]);
    let e = r
        .check(&url("http://cdn.example.org@8.8.8.8/"))
        .expect_err("user info");
    assert!(e.contains("user information"), "{e}");
    assert!(r.check(&url("http://u:p@cdn.example.org/")).is_err());
}

#[test]
fn rules_that_do_not_parse() {
    for bad in [
        "",
        "  ",
        "ftp://cdn.example.org",
        "cdn.example.org/path",
        "cdn.example.org?q",
        "cdn.example.org:0",
        "cdn.example.org:65536",
        "cdn.example.org:http",
        "*.org",
        "*example.org",
        "a.*.example.org",
        "*.127.0.0.1",
        "[::1",
        "[::1]x",
        "exa mple.org",
    ] {
        assert!(HostRule::parse(bad).is_err(), "{bad:?} accepted");
    }
    for (text, shown) in [
        ("CDN.Example.org", "cdn.example.org"),
        ("HTTPS://files.example:8443/", "https://files.example:8443"),
        ("*.Example.org:*", "*.example.org:*"),
        ("*", "*"),
    ] {
        assert_eq!(rule(text).to_string(), shown);
    }
}

#[test]
fn equal_rule_sets_make_equal_reaches() {
    assert_eq!(
        reach(&["a.example", "b.example"]),
        reach(&["b.example", "a.example", "a.example"])
    );
    assert_ne!(reach(&["a.example"]), reach(&["b.example"]));
}
