//! Every XML document under `tests/fixtures` is validated and its verdict and rule ids compared
//! with the table `tests/fixtures/VERDICTS.tsv`, so that a change to a rule shows which
//! documents it moves. After an intended change, rewrite the table with
//! `RESOURCESYNC_BLESS=1 cargo test -p resourcesync-model --test it corpus::` and review its diff.
//!
//! The documents of `tests/fixtures/validator` each show one fault the validator once got
//! wrong, or a control that must keep its verdict; the table's note says which.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use resourcesync_model::validate::validate;
use resourcesync_model::{DocumentReader, Error, ReadOptions, Report};

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn table_path() -> PathBuf {
    fixtures_dir().join("VERDICTS.tsv")
}

/// Every `.xml` file under `dir`, as paths relative to the fixtures folder, sorted.
fn documents(dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("fixtures folder")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            documents(&p, out);
        } else if p.extension().is_some_and(|e| e == "xml") {
            let rel = p.strip_prefix(fixtures_dir()).expect("under fixtures");
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

fn check(file: &str) -> Result<Report, Error> {
    let bytes = std::fs::read(fixtures_dir().join(file)).expect("fixture");
    DocumentReader::new(&bytes[..], ReadOptions::named(file)).and_then(validate)
}

/// The verdict (`valid`, `invalid`, or `rejected` when the reader refuses the document) and
/// the rule ids found, sorted, each with `*N` when found N > 1 times.
fn outcome(file: &str) -> (String, String) {
    match check(file) {
        Ok(r) => {
            let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
            for f in r.findings.as_slice() {
                *ids.entry(f.rule.id).or_default() += 1;
            }
            let rules: Vec<String> = ids
                .into_iter()
                .map(|(id, n)| {
                    if n > 1 {
                        format!("{id}*{n}")
                    } else {
                        id.to_owned()
                    }
                })
                .collect();
            let verdict = if r.is_valid() { "valid" } else { "invalid" };
            let rules = if rules.is_empty() {
                "-".to_owned()
            } else {
                rules.join(" ")
            };
            (verdict.to_owned(), rules)
        }
        Err(e) => ("rejected".to_owned(), e.rule().to_owned()),
    }
}

struct Row {
    verdict: String,
    rules: String,
    note: String,
}

fn read_table() -> BTreeMap<String, Row> {
    let text = std::fs::read_to_string(table_path()).unwrap_or_default();
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            let g = |i: usize| c.get(i).copied().unwrap_or("").to_owned();
            (
                g(0),
                Row {
                    verdict: g(1),
                    rules: g(2),
                    note: g(3),
                },
            )
        })
        .collect()
}

#[test]
fn every_fixture_keeps_its_verdict_and_rules() {
    let mut files = Vec::new();
    documents(&fixtures_dir(), &mut files);
    assert!(files.len() >= 100, "only {} documents found", files.len());
    let table = read_table();
    let bless = std::env::var_os("RESOURCESYNC_BLESS").is_some();
    let mut out = String::from("file\tverdict\trules\tnote\n");
    let mut moved = Vec::new();
    for f in &files {
        let (verdict, rules) = outcome(f);
        let note = table.get(f).map(|r| r.note.as_str()).unwrap_or("");
        match table.get(f) {
            Some(row) if row.verdict == verdict && row.rules == rules => {}
            Some(row) => moved.push(format!(
                "{f}: expected {} [{}], found {verdict} [{rules}]",
                row.verdict, row.rules
            )),
            None => moved.push(format!("{f}: not in the table; found {verdict} [{rules}]")),
        }
        out.push_str(&format!("{f}\t{verdict}\t{rules}\t{note}\n"));
    }
    for f in table.keys() {
        if !files.contains(f) {
            moved.push(format!("{f}: in the table but not found"));
        }
    }
    if bless {
        std::fs::write(table_path(), out).expect("write table");
        return;
    }
    assert!(
        moved.is_empty(),
        "{} documents moved (rewrite the table with RESOURCESYNC_BLESS=1 if intended):\n{}",
        moved.len(),
        moved.join("\n")
    );
}

/// The position and message of the finding (or the error) of `rule` in a fixture, or what was
/// found instead.
fn message(file: &str, rule: &str) -> String {
    match check(file) {
        Ok(r) => r
            .findings
            .as_slice()
            .iter()
            .find(|f| f.rule.id == rule)
            .map(|f| format!("{}: {}", f.position, f.message))
            .unwrap_or_else(|| format!("no {rule} finding in {:?}", r.findings.as_slice())),
        Err(e) if e.rule() == rule => e.to_string(),
        Err(e) => format!("not {rule} but {e}"),
    }
}

/// Fixtures whose finding's message is checked: the file, the rule, and the parts the message
/// must contain.
const MESSAGE_CASES: &[(&str, &str, &[&str])] = &[
    // The root error names the element and its namespace.
    (
        "validator/root-other-namespace.xml",
        "SM-root",
        &[
            ":2:1:",
            "<urlset> in the namespace http://example.org/other_namespace",
            "http://www.sitemaps.org/schemas/sitemap/0.9",
        ],
    ),
    (
        "validator/not-sitemap.xml",
        "SM-root",
        &[
            ":2:1:",
            "<feed> in the namespace http://www.w3.org/2005/Atom",
        ],
    ),
    // Broken XML under a root that is not a Sitemap's: the XML first, the root as well.
    (
        "validator/not-sitemap-broken.xml",
        "XML-wellformed",
        &[":5:1:", "<feed>", "SM-root"],
    ),
    // The ResourceSync namespace without its trailing slash.
    (
        "validator/rs-namespace-no-slash.xml",
        "RS-7-md-mandatory",
        &[
            "2:1:",
            "http://www.openarchives.org/rs/terms,",
            "trailing slash",
            "http://www.openarchives.org/rs/terms/",
        ],
    ),
    // The root <rs:md> after the first entry.
    (
        "validator/md-after-first-url.xml",
        "RS-7-md-position",
        &["8:3:", "the root's <rs:md> comes after the first entry"],
    ),
    // +00:00 is UTC: the warning says what is recommended, not that it is not UTC.
    (
        "validator/datetime-plus-zero.xml",
        "RS-7-datetime-form",
        &["is UTC, written with +00:00 rather than Z"],
    ),
    // The 1.1 ordering compares datetimes with datetimes.
    (
        "validator/cl-datetime-out-of-order.xml",
        "RS-12.1-chronological",
        &[
            "11:3:",
            "datetime 2013-01-03T13:00:00Z is earlier than datetime 2013-01-03T14:00:00Z of the entry at line 6",
        ],
    ),
    (
        "validator/cl-lastmod-out-of-order.xml",
        "RS-12.1-chronological",
        &["11:3:", "no entry has a datetime"],
    ),
    // XML declarations: the line and column of the fault.
    (
        "validator/decl-after-space.xml",
        "XML-wellformed",
        &[":1:2:", "only allowed at the very start"],
    ),
    (
        "validator/decl-after-comment.xml",
        "XML-wellformed",
        &[":1:25:", "only allowed at the very start"],
    ),
    (
        "validator/decl-twice.xml",
        "XML-wellformed",
        &[":2:1:", "a second XML declaration"],
    ),
    (
        "validator/pi-xml-mixed-case.xml",
        "XML-wellformed",
        &[":2:1:", "XmL", "§2.6"],
    ),
    (
        "validator/decl-no-version.xml",
        "XML-wellformed",
        &[":1:7:", "has no version"],
    ),
    (
        "validator/decl-encoding-first.xml",
        "XML-wellformed",
        &[":1:7:", "must begin with version"],
    ),
    (
        "validator/decl-version-2.xml",
        "XML-wellformed",
        &[":1:16:", "\"2.0\"", "[26]"],
    ),
    (
        "validator/decl-standalone-maybe.xml",
        "XML-wellformed",
        &[":1:50:", "\"maybe\"", "[32]"],
    ),
    (
        "validator/decl-uppercase.xml",
        "XML-wellformed",
        &[":1:1:", "<?XML is not an XML declaration"],
    ),
    (
        "validator/decl-no-space.xml",
        "XML-wellformed",
        &[":1:20:", "separated by white space"],
    ),
];

/// Findings whose rule id does not change with a fix, but whose message does: each must name
/// the fault and what to do, with the position.
#[test]
fn messages_name_the_fault() {
    let mut wrong = Vec::new();
    for (file, rule, parts) in MESSAGE_CASES {
        let m = message(file, rule);
        for p in *parts {
            if !m.contains(p) {
                wrong.push(format!("{file}: {p:?} not in {m:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
