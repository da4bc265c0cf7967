//! The configuration file: what it accepts, and each mistake named with its line.

use std::path::Path;
use std::time::Duration;

use resourcesync_aggregate::{Config, Error, Schedule};

fn parse(text: &str) -> Result<Config, Error> {
    Config::parse(text, Path::new("aggregate.toml"))
}

/// The line and message of a configuration error.
fn problem(text: &str) -> (Option<usize>, String) {
    match parse(text) {
        Err(Error::Config { line, message, .. }) => (line, message),
        other => panic!("not a configuration error: {other:?}"),
    }
}

#[test]
fn a_full_configuration() {
    let c = parse(
        r#"
[limits]
concurrency = 4
per_host = 1
timeout = "10m"
share_above = 500

[[source]]
name = "museum"
url = "https://museum.example/.well-known/resourcesync"
schedule = "30s"
delete = true
token = "secret"
rate = 5.0
concurrency = 2

[[source]]
name = "archive-2"
url = "http://archive.example/capabilitylist.xml"
schedule = "push"
"#,
    )
    .expect("valid");
    assert_eq!(c.limits.concurrency, 4);
    assert_eq!(c.limits.per_host, 1);
    assert_eq!(c.limits.timeout, Duration::from_secs(600));
    assert_eq!(c.limits.share_above, Some(500));
    // Unset, downloads are not shared per resource (an opt-in: see docs/aggregate.md).
    assert_eq!(
        parse("[[source]]\nname = \"a\"\nurl = \"http://a.example/\"\n")
            .expect("valid")
            .limits
            .share_above,
        None
    );
    assert_eq!(c.sources.len(), 2);
    let m = &c.sources[0];
    assert_eq!(
        (m.name.as_str(), m.schedule, m.delete, m.rate, m.concurrency),
        (
            "museum",
            Schedule::Every(Duration::from_secs(30)),
            true,
            Some(5.0),
            2
        )
    );
    assert_eq!(m.token.as_deref(), Some("secret"));
    assert_eq!(c.sources[1].schedule, Schedule::Push);
    // Defaults: every five minutes, no deletes.
    let c = parse("[[source]]\nname = \"a\"\nurl = \"http://a.example/\"\n").expect("valid");
    assert_eq!(
        c.sources[0].schedule,
        Schedule::Every(Duration::from_secs(300))
    );
    assert!(!c.sources[0].delete);
}

#[test]
fn each_mistake_names_its_line() {
    let two = "[[source]]\nname = \"a\"\nurl = \"http://a.example/\"\n\n[[source]]\nname = \"a\"\nurl = \"http://b.example/\"\n";
    let (line, msg) = problem(two);
    assert_eq!(line, Some(6), "{msg}");
    assert!(
        msg.contains("used twice") && msg.contains("line 1"),
        "{msg}"
    );

    let (line, msg) = problem("[[source]]\nname = \"a\"\nurl = \"ftp://a.example/\"\n");
    assert_eq!(line, Some(3), "{msg}");
    assert!(msg.contains("not an http(s) URL"), "{msg}");

    let (line, msg) =
        problem("[[source]]\nname = \"a\"\nurl = \"http://a.example/\"\nschedule = \"often\"\n");
    assert_eq!(line, Some(4), "{msg}");
    assert!(msg.contains("30s, 5m"), "{msg}");

    let (line, msg) = problem("[[source]]\nname = \"A/B\"\nurl = \"http://a.example/\"\n");
    assert_eq!(line, Some(2), "{msg}");

    let (line, msg) =
        problem("[[source]]\nname = \"a\"\nurl = \"http://a.example/\"\ncolour = \"red\"\n");
    assert_eq!(line, Some(4), "{msg}");
    assert!(msg.contains("colour"), "{msg}");

    let (line, msg) = problem("[limits]\nconcurrency = 0\n");
    assert_eq!(line, Some(2), "{msg}");

    let (line, _) = problem("[[source]]\nname = \"a\"\n");
    assert!(line.is_some());
    // Not TOML at all.
    let (line, _) = problem("[[source]\nname = 1\n");
    assert_eq!(line, Some(1));
    // The file and line lead the message a user reads.
    let e = parse("[[source]]\nname = \"a\"\nurl = \"x\"\n").expect_err("bad url");
    assert!(e.to_string().starts_with("aggregate.toml:3: "), "{e}");
}

#[test]
fn patterns_and_a_bandwidth_limit() {
    let c = parse(
        r#"
[limits]
bandwidth = "100Mbit/s"

[[source]]
name = "museum"
url = "https://museum.example/"
include = ["https://museum.example/objects/*"]
exclude = ["*.tif", "*/private/*"]

[[source]]
name = "open"
url = "https://open.example/"
"#,
    )
    .expect("valid");
    assert_eq!(c.limits.bandwidth, Some(12_500_000));
    let m = c.sources[0].filter();
    assert!(m.wants("https://museum.example/objects/1.jpg"));
    assert!(!m.wants("https://museum.example/objects/1.tif"));
    assert!(!m.wants("https://museum.example/objects/private/2.jpg"));
    assert!(!m.wants("https://museum.example/about.html"));
    assert!(c.sources[1].filter().is_all());
}

#[test]
fn a_bad_pattern_or_rate_is_named_with_its_line() {
    let (line, message) = problem(
        r#"
[[source]]
name = "museum"
url = "https://museum.example/"
include = ["*.jpg"]
exclude = ["https://museum.example/[private"]
"#,
    );
    assert_eq!(line, Some(6));
    assert!(
        message.contains("museum") && message.contains("exclude pattern"),
        "{message}"
    );
    let (line, message) = problem("[limits]\nconcurrency = 2\nbandwidth = \"fast\"\n");
    assert_eq!(line, Some(3));
    assert!(message.contains("limits.bandwidth \"fast\""), "{message}");
}

/// The command's flags may sit at the top of the file (`store = "…"`): the service leaves them
/// to the command line, and the lines of its own mistakes stay where they are.
#[test]
fn top_level_flags_are_the_commands_and_lines_stay_right() {
    let c = parse("store = \"copies\"\nserve = \"127.0.0.1:0\"\n\n[[source]]\nname = \"a\"\nurl = \"http://a.example/\"\n")
        .expect("valid");
    assert_eq!(c.sources.len(), 1);
    let (line, message) = problem(
        "store = \"copies\"\ngrace = [\n  1,\n  2,\n]\n[[source]]\nname = \"a\"\nurl = \"ftp://a.example/\"\n",
    );
    assert_eq!(line, Some(8), "{message}");
    // A table that is not the service's is still refused.
    let (line, message) = problem("[limit]\nconcurrency = 2\n");
    assert_eq!(line, Some(1), "{message}");
}

#[test]
fn allow_hosts_entries_are_read_and_bad_ones_named_with_their_line() {
    let c = parse(
        "[[source]]\nname = \"a\"\nurl = \"https://a.example/\"\n\
         allow_hosts = [\"cdn.a.example\", \"*.a.example:*\", \"https://[::1]:8443\", \"*\"]\n",
    )
    .expect("valid");
    let shown: Vec<String> = c.sources[0]
        .allow_hosts
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        shown,
        ["cdn.a.example", "*.a.example:*", "https://[::1]:8443", "*"]
    );
    assert!(
        parse("[[source]]\nname = \"a\"\nurl = \"https://a.example/\"\n")
            .expect("valid")
            .sources[0]
            .allow_hosts
            .is_empty()
    );
    for (entry, why) in [
        ("user@cdn.example", "user information"),
        ("ftp://cdn.example", "scheme"),
        ("cdn.example/files", "path"),
        ("*.org", "top-level"),
        ("cdn.example:99999", "port"),
    ] {
        let (line, message) = problem(&format!(
            "[[source]]\nname = \"a\"\nurl = \"https://a.example/\"\nallow_hosts = [\"{entry}\"]\n"
        ));
        assert_eq!(line, Some(4), "{message}");
        assert!(message.contains("allow_hosts"), "{message}");
        assert!(message.contains(why), "{entry}: {message}");
    }
}

/// The keys a table accepts, as its error for an unknown key lists them.
fn keys_of(table: &str) -> Vec<String> {
    let (_, message) = problem(&format!("{table}\nno_such_key = 1\n"));
    let expected = message
        .split("expected one of")
        .nth(1)
        .unwrap_or_else(|| panic!("no list of keys in {message:?}"));
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn docs_configuration_names_every_key_of_limits_and_source() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md"),
    )
    .expect("docs/configuration.md");
    let section = &doc[doc
        .find("## `aggregate`: the Sources")
        .expect("the section")..];
    for (table, heading) in [
        ("[limits]", "`[limits]`"),
        (
            "[[source]]\nname = \"a\"\nurl = \"http://h/\"",
            "`[[source]]`",
        ),
    ] {
        let keys = keys_of(table);
        assert!(keys.len() >= 8, "{table}: {keys:?}");
        let rows = &section[section.find(heading).expect(heading)..];
        let rows = &rows[..rows.find("\n\n").unwrap_or(rows.len())];
        let rows = &section[section.find(heading).expect(heading)..][rows.len()..];
        let rows = &rows[..rows.trim_start().find("\n\n").map_or(rows.len(), |e| e + 2)];
        for k in keys {
            assert!(
                rows.contains(&format!("| `{k}` |")),
                "docs/configuration.md: no row for {heading} key `{k}`"
            );
        }
    }
}
