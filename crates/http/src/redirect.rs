//! Which redirects are followed: at most a given number, only to `http` and `https`, and never
//! from `https` to `http` (RFC 9110 §15.4: a client may refuse a redirect; a downgrade would
//! send the rest of the exchange, and what it reveals, in clear text); with a
//! [`Reach`], only to an origin it allows.

use reqwest::Url;

use crate::reach::{Reach, Unreachable};

/// What to do with one redirect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Follow it.
    Follow,
    /// Do not follow it: the 3xx response is returned to the caller (a target that is not
    /// `http` or `https`).
    Stop,
    /// Fail the request with this reason.
    Refuse(String),
    /// Fail the request: the target is out of the client's [`Reach`] (this reason).
    OutOfReach(String),
}

/// The verdict on a redirect to `next`, after `previous` (the first URL requested, then each
/// redirect followed), with at most `max` redirects, within `reach` when there is one.
pub fn verdict(previous: &[Url], next: &Url, max: usize, reach: Option<&Reach>) -> Verdict {
    if !matches!(next.scheme(), "http" | "https") {
        return Verdict::Stop;
    }
    // The first URL of `previous` was requested, not redirected to.
    if previous.len() > max {
        return Verdict::Refuse(format!("too many redirects (more than {max})"));
    }
    if next.scheme() == "http" && previous.iter().any(|u| u.scheme() == "https") {
        return Verdict::Refuse(format!(
            "redirect from https to {next} refused (never downgraded to http)"
        ));
    }
    if let Some(Err(why)) = reach.map(|r| r.check(next)) {
        return Verdict::OutOfReach(format!("redirected to {next}: {why}"));
    }
    Verdict::Follow
}

#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// The reqwest policy of [`verdict`].
pub fn policy(max: usize, reach: Option<Reach>) -> reqwest::redirect::Policy {
    if max == 0 {
        return reqwest::redirect::Policy::none();
    }
    reqwest::redirect::Policy::custom(move |attempt| {
        match verdict(attempt.previous(), attempt.url(), max, reach.as_ref()) {
            Verdict::Follow => attempt.follow(),
            Verdict::Stop => attempt.stop(),
            Verdict::Refuse(why) => attempt.error(Refused(why)),
            Verdict::OutOfReach(why) => attempt.error(Unreachable(why)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(v: &[&str]) -> Vec<Url> {
        v.iter().map(|u| Url::parse(u).expect("url")).collect()
    }

    #[test]
    fn never_from_https_to_http() {
        let next = Url::parse("http://e.org/b").expect("url");
        assert!(matches!(
            verdict(&urls(&["https://e.org/a"]), &next, 10, None),
            Verdict::Refuse(_)
        ));
        // Even after a hop back up and down.
        assert!(matches!(
            verdict(
                &urls(&["https://e.org/a", "https://f.org/a"]),
                &next,
                10,
                None
            ),
            Verdict::Refuse(_)
        ));
        assert_eq!(
            verdict(&urls(&["http://e.org/a"]), &next, 10, None),
            Verdict::Follow
        );
        let up = Url::parse("https://e.org/b").expect("url");
        assert_eq!(
            verdict(&urls(&["http://e.org/a"]), &up, 10, None),
            Verdict::Follow
        );
    }

    #[test]
    fn limited_and_only_http() {
        let next = Url::parse("http://e.org/z").expect("url");
        let two = urls(&["http://e.org/a", "http://e.org/b"]);
        assert_eq!(verdict(&two, &next, 2, None), Verdict::Follow);
        let three = urls(&["http://e.org/a", "http://e.org/b", "http://e.org/c"]);
        assert!(matches!(
            verdict(&three, &next, 2, None),
            Verdict::Refuse(_)
        ));
        let file = Url::parse("file:///etc/passwd").expect("url");
        assert_eq!(verdict(&two, &file, 10, None), Verdict::Stop);
    }

    #[test]
    fn only_within_the_reach() {
        let rule = |s: &str| crate::reach::HostRule::parse(s).expect("rule");
        let reach = Reach::new(vec![rule("http://e.org")], "Source \"s\"", "allow_hosts");
        let from = urls(&["http://e.org/a"]);
        let inside = Url::parse("http://e.org/b").expect("url");
        assert_eq!(verdict(&from, &inside, 10, Some(&reach)), Verdict::Follow);
        for out in [
            "http://e.org:8080/b",
            "http://169.254.169.254/latest",
            "https://e.org/b",
        ] {
            let next = Url::parse(out).expect("url");
            match verdict(&from, &next, 10, Some(&reach)) {
                Verdict::OutOfReach(why) => assert!(why.contains(out), "{why}"),
                v => panic!("{out}: {v:?}"),
            }
        }
    }
}
