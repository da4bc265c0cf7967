//! Generated documents round-trip: write → read gives back the same header and entries, and
//! writing what was read gives the same bytes. Split documents read back part by part give the
//! same entries, with consistent index, links and `from`/`until` periods.
#![allow(clippy::unwrap_used)]

use std::cmp::Ordering;

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::{select, subsequence};

use resourcesync_model::writer::{MemorySink, SplitSummary};
use resourcesync_model::{
    Capability, Change, ChangeFreq, Digest, DocumentReader, DocumentWriter, Entry, ExtAttr,
    ExtElement, HashAlg, Hashes, Header, Link, Metadata, Position, ReadOptions, Root, SplitLimits,
    SplitWriter, Target, W3cDateTime,
};

const EX: &str = "http://example.org/ext";
const EX2: &str = "http://example.org/other#";

// --- Strategies ------------------------------------------------------------------------------

/// A W3C Datetime at a random precision and time zone, around 2 January 2013.
fn datetime() -> impl Strategy<Value = W3cDateTime> {
    (
        0..6u8,
        1..=3u8,
        0..24u8,
        0..60u8,
        0..60u8,
        "[0-9]{1,9}",
        prop_oneof![
            Just("Z".to_owned()),
            (any::<bool>(), 0..24u8, 0..60u8)
                .prop_map(|(neg, h, m)| format!("{}{h:02}:{m:02}", if neg { '-' } else { '+' })),
        ],
    )
        .prop_map(|(precision, day, h, m, s, frac, tz)| {
            let text = match precision {
                0 => "2013".to_owned(),
                1 => "2013-01".to_owned(),
                2 => format!("2013-01-{day:02}"),
                3 => format!("2013-01-{day:02}T{h:02}:{m:02}{tz}"),
                4 => format!("2013-01-{day:02}T{h:02}:{m:02}:{s:02}{tz}"),
                _ => format!("2013-01-{day:02}T{h:02}:{m:02}:{s:02}.{frac}{tz}"),
            };
            W3cDateTime::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
        })
}

/// Text with characters that need escaping, white space inside, and non-ASCII.
fn tricky(max: usize) -> impl Strategy<Value = String> {
    vec(
        prop_oneof![
            3 => "[a-zA-Z0-9/._~%-]{1,6}",
            1 => select(vec![
                "&", "<", ">", "\"", "'", " ", "  ", "\t", "\n", "\r\n", "\r", "]]>", "&amp;",
                "é", "日本語", "😀", "\u{a0}", "\u{2028}", "\u{85}", "=", "?", "#", "\u{7f}",
            ])
            .prop_map(str::to_owned),
        ],
        0..max,
    )
    .prop_map(|parts| parts.concat())
}

/// A value the reader keeps as written (no trimming): any tricky text.
fn attr_value() -> impl Strategy<Value = String> {
    tricky(6)
}

/// A value the reader trims (`rel`, `href`, `<loc>`, `<priority>`): no white space at the ends.
fn trimmed(prefix: &'static str) -> impl Strategy<Value = String> {
    tricky(8).prop_map(move |s| format!("{prefix}{s}x"))
}

fn capability() -> impl Strategy<Value = Capability> {
    prop_oneof![
        4 => select(Capability::DEFINED.to_vec()),
        1 => "[a-z][a-z-]{0,12}[a-z]".prop_filter_map("defined", |s| match Capability::parse(&s) {
            Capability::Other(_) => Some(Capability::Other(s)),
            _ => None,
        }),
    ]
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        Just(Change::Created),
        Just(Change::Updated),
        Just(Change::Deleted),
        "[a-z]{1,8}".prop_filter_map("defined", |s| match Change::parse(&s) {
            Change::Other(_) => Some(Change::Other(s)),
            _ => None,
        }),
    ]
}

fn changefreq() -> impl Strategy<Value = ChangeFreq> {
    prop_oneof![
        select(vec![
            ChangeFreq::Always,
            ChangeFreq::Hourly,
            ChangeFreq::Daily,
            ChangeFreq::Weekly,
            ChangeFreq::Monthly,
            ChangeFreq::Yearly,
            ChangeFreq::Never,
        ]),
        tricky(4).prop_filter_map("defined", |s| match ChangeFreq::parse(&s) {
            ChangeFreq::Other(_) => Some(ChangeFreq::Other(s)),
            _ => None,
        }),
    ]
}

fn hashes() -> impl Strategy<Value = Hashes> {
    let digest = prop_oneof![
        "[0-9a-f]{32}".prop_map(|v| Digest {
            alg: HashAlg::Md5,
            value: v
        }),
        "[0-9A-F]{40}".prop_map(|v| Digest {
            alg: HashAlg::Sha1,
            value: v
        }),
        "[0-9a-f]{64}".prop_map(|v| Digest {
            alg: HashAlg::Sha256,
            value: v
        }),
        ("x-[a-z0-9]{1,6}", "[!-9;-~]{0,12}").prop_map(|(a, v)| Digest {
            alg: HashAlg::Other(a),
            value: v,
        }),
    ];
    vec(digest, 1..4).prop_map(Hashes)
}

/// Extension attributes in the `ex` namespace, each name at most once.
fn ext_attrs() -> impl Strategy<Value = Vec<ExtAttr>> {
    (
        subsequence(vec!["ex:a", "ex:b", "ex2:c", "ex:ns-dash"], 0..=3),
        vec(attr_value(), 4),
    )
        .prop_map(|(names, values)| {
            names
                .into_iter()
                .zip(values)
                .map(|(name, value)| ExtAttr {
                    name: name.to_owned(),
                    namespace: if name.starts_with("ex2:") { EX2 } else { EX }.to_owned(),
                    value,
                })
                .collect()
        })
}

fn escape_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn escape_attr(s: &str) -> String {
    escape_text(s).replace('"', "&quot;")
}

/// Extension elements. With `content`, some are non-empty (text, escaped characters, children);
/// otherwise all are empty elements.
fn ext_elements(content: bool) -> impl Strategy<Value = Vec<ExtElement>> {
    let el = (
        select(vec!["ex:foo", "ex:bar", "ex2:baz"]),
        option::of("[a-z0-9 ]{0,8}"),
        option::of(tricky(5)),
        any::<bool>(),
    )
        .prop_map(move |(q, attr, text, child)| {
            let mut xml = format!("<{q}");
            if let Some(a) = attr {
                xml.push_str(&format!(" a=\"{}\"", escape_attr(&a)));
            }
            match text.filter(|_| content) {
                Some(t) => {
                    xml.push('>');
                    xml.push_str(&escape_text(&t.replace('\r', "")));
                    if child {
                        xml.push_str("<ex:child x=\"1\"/><ex:child>c</ex:child>");
                    }
                    xml.push_str(&format!("</{q}>"));
                }
                None => xml.push_str("/>"),
            }
            ExtElement {
                namespace: if q.starts_with("ex2:") { EX2 } else { EX }.to_owned(),
                xml,
            }
        });
    vec(el, 0..3)
}

fn link() -> impl Strategy<Value = Link> {
    (
        (
            prop_oneof![
                select(vec![
                    "describedby",
                    "up",
                    "index",
                    "alternate",
                    "duplicate",
                    "collection"
                ])
                .prop_map(str::to_owned),
                Just("alternate canonical".to_owned()),
                Just("http://www.openarchives.org/rs/terms/patch".to_owned()),
                trimmed("x"),
            ],
            trimmed("http://example.com/"),
            option::of(1..=999_999u32),
            option::of(datetime()),
            option::of(hashes()),
            option::of(any::<u64>()),
        ),
        (
            option::of(attr_value()),
            option::of(attr_value()),
            option::of(attr_value()),
            option::of(attr_value()),
            ext_attrs(),
        ),
    )
        .prop_map(
            |(
                (rel, href, pri, modified, hash, length),
                (mime_type, encoding, path, profile, extra),
            )| {
                Link {
                    rel,
                    href,
                    pri,
                    modified,
                    hash,
                    length,
                    mime_type,
                    encoding,
                    path,
                    profile,
                    extra,
                }
            },
        )
}

fn metadata() -> impl Strategy<Value = Metadata> {
    (
        (
            option::of(capability()),
            option::of(datetime()),
            option::of(datetime()),
            option::of(datetime()),
            option::of(datetime()),
            option::of(change()),
            option::of(datetime()),
        ),
        (
            option::of(hashes()),
            option::of(any::<u64>()),
            option::of(attr_value()),
            option::of(attr_value()),
            option::of(attr_value()),
            ext_attrs(),
        ),
    )
        .prop_map(
            |(
                (capability, at, completed, from, until, change, datetime),
                (hash, length, mime_type, encoding, path, extra),
            )| {
                Metadata {
                    capability,
                    at,
                    completed,
                    from,
                    until,
                    change,
                    datetime,
                    hash,
                    length,
                    mime_type,
                    encoding,
                    path,
                    extra,
                    invalid: Default::default(),
                }
            },
        )
}

fn entry(content: bool) -> impl Strategy<Value = Entry> {
    (
        trimmed("http://example.com/"),
        option::of(datetime()),
        option::of(changefreq()),
        option::of(prop_oneof![
            Just("0.5".to_owned()),
            Just("1.0".to_owned()),
            Just(String::new()),
            trimmed("0.")
        ]),
        option::of(metadata()),
        vec(link(), 0..3),
        ext_elements(content),
    )
        .prop_map(
            |(loc, lastmod, changefreq, priority, md, links, extensions)| Entry {
                loc,
                lastmod,
                changefreq,
                priority,
                md,
                links,
                extensions,
                position: Position::default(),
            },
        )
}

fn header(content: bool) -> impl Strategy<Value = Header> {
    (
        select(vec![Root::UrlSet, Root::SitemapIndex]),
        prop_oneof![1 => Just(None), 6 => metadata().prop_map(Some)],
        vec(link(), 0..3),
        any::<bool>(),
        (ext_attrs(), ext_elements(content)),
    )
        .prop_map(|(root, md, links, ex2_first, (extra, extensions))| {
            let mut namespaces = vec![
                ("ex".to_owned(), EX.to_owned()),
                ("ex2".to_owned(), EX2.to_owned()),
            ];
            if ex2_first {
                namespaces.reverse();
            }
            Header {
                root,
                md,
                links,
                namespaces,
                extra,
                extensions,
            }
        })
}

// --- Helpers -------------------------------------------------------------------------------

fn write(header: &Header, entries: &[Entry]) -> Vec<u8> {
    let mut w = DocumentWriter::new(Vec::new(), "gen.xml", header).expect("header");
    for e in entries {
        w.write_entry(e).expect("entry");
    }
    w.finish().expect("finish")
}

fn read(name: &str, bytes: &[u8]) -> Result<(Header, Vec<Entry>), String> {
    let text = || String::from_utf8_lossy(bytes).into_owned();
    let mut r = DocumentReader::new(bytes, ReadOptions::named(name))
        .map_err(|e| format!("{e}\n{}", text()))?;
    let header = r.header().clone();
    let mut entries = Vec::new();
    while let Some(mut e) = r.next_entry().map_err(|e| format!("{e}\n{}", text()))? {
        e.position = Position::default();
        entries.push(e);
    }
    Ok((header, entries))
}

fn round_trip(header: &Header, entries: &[Entry]) -> Result<(), TestCaseError> {
    let out = write(header, entries);
    let (h2, e2) = read("gen.xml", &out).map_err(TestCaseError::fail)?;
    let text = String::from_utf8_lossy(&out);
    prop_assert_eq!(header, &h2, "header differs; written:\n{}", text);
    prop_assert_eq!(entries, &e2[..], "entries differ; written:\n{}", text);
    let again = write(&h2, &e2);
    prop_assert_eq!(&out, &again, "second write differs");
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// --- Properties: one document --------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// Every field, with empty extension elements only.
    #[test]
    fn write_read_round_trips(h in header(false), es in vec(entry(false), 0..12)) {
        round_trip(&h, &es)?;
    }

    /// Every field, with extension elements that have content.
    #[test]
    fn write_read_round_trips_with_extension_content(h in header(true), es in vec(entry(true), 0..12)) {
        round_trip(&h, &es)?;
    }

    /// The datetime generator itself: every value is written back as parsed.
    #[test]
    fn datetimes_print_as_parsed(d in datetime()) {
        let s = d.to_string();
        prop_assert_eq!(W3cDateTime::parse(&s).expect("reparse"), d);
    }
}

// --- Properties: split documents -----------------------------------------------------------

/// An entry for the split writer: the fields that matter to splitting (size, change time),
/// cheaper to generate than [`entry`] so that many cases fit in the time budget.
fn split_entry() -> impl Strategy<Value = Entry> {
    (
        trimmed("http://example.com/"),
        option::of(change()),
        option::of(any::<u64>()),
        option::of(hashes()),
        vec(link(), 0..2),
        ext_elements(true),
    )
        .prop_map(|(loc, change, length, hash, links, extensions)| {
            let mut e = Entry::new(loc);
            if change.is_some() || length.is_some() || hash.is_some() {
                let md = e.md_mut();
                md.change = change;
                md.length = length;
                md.hash = hash;
            }
            e.links = links;
            e.extensions = extensions;
            e
        })
}

/// A document for the split writer: a `<urlset>` header (change kind or not) and entries whose
/// change times are in chronological order.
fn split_case() -> impl Strategy<Value = (Header, Vec<Entry>, SplitLimits)> {
    (
        capability(),
        option::of(datetime()),
        any::<bool>(),
        vec(link(), 0..3),
        vec((split_entry(), datetime(), any::<bool>()), 0..40),
        1..20usize,
        prop_oneof![2 => Just(u64::MAX), 1 => 400..4000u64, 1 => 4000..40000u64],
    )
        .prop_map(
            |(cap, at, open_ended, mut links, raw, max_entries, max_bytes)| {
                links.retain(|l| !l.has_rel("index"));
                let mut md = Metadata::with_capability(cap.clone());
                if cap.is_change_kind() {
                    md.from = Some(W3cDateTime::parse("2012-12-31").expect("from"));
                    if !open_ended {
                        md.until = Some(W3cDateTime::parse("2013-01-05T00:00:00Z").expect("until"));
                    }
                } else {
                    md.at = at;
                }
                let mut header = Header::new(Root::UrlSet, md);
                header.links = links;
                header.namespaces = vec![
                    ("ex".to_owned(), EX.to_owned()),
                    ("ex2".to_owned(), EX2.to_owned()),
                ];
                let mut times: Vec<W3cDateTime> = raw.iter().map(|(_, t, _)| *t).collect();
                times.sort_by(W3cDateTime::cmp_instant);
                let entries = raw
                    .into_iter()
                    .zip(times)
                    .map(|((mut e, _, in_md), t)| {
                        // The change time is the entry's `datetime` when given, else its lastmod.
                        if in_md {
                            e.md_mut().datetime = Some(t);
                        } else {
                            if let Some(m) = e.md.as_mut() {
                                m.datetime = None;
                            }
                            e.lastmod = Some(t);
                        }
                        e
                    })
                    .collect();
                (
                    header,
                    entries,
                    SplitLimits {
                        max_entries,
                        max_bytes,
                    },
                )
            },
        )
}

fn within(t: &W3cDateTime, from: Option<&W3cDateTime>, until: Option<&W3cDateTime>) -> bool {
    from.is_none_or(|f| f.cmp_instant(t) != Ordering::Greater)
        && until.is_none_or(|u| t.cmp_instant(u) != Ordering::Greater)
}

/// The period (`from`, `until`) a part's `<rs:md>` gives.
type Period = (Option<W3cDateTime>, Option<W3cDateTime>);

const INDEX_URL: &str = "http://example.com/cl.xml";

fn split_property(
    header: &Header,
    entries: &[Entry],
    limits: SplitLimits,
) -> Result<(), TestCaseError> {
    let sink = MemorySink {
        base: "http://example.com/cl".to_owned(),
        outputs: Vec::new(),
    };
    let mut w = SplitWriter::new(sink, "cl.xml", header.clone(), limits).expect("writer");
    for e in entries {
        w.write_entry(e).expect("entry");
    }
    let (sink, summary): (MemorySink, SplitSummary) = w.finish().expect("finish");
    prop_assert_eq!(summary.entries, entries.len() as u64);

    let parts: Vec<&(Target, Vec<u8>)> = sink
        .outputs
        .iter()
        .filter(|(t, _)| *t != Target::Index)
        .collect();
    let indexes: Vec<&(Target, Vec<u8>)> = sink
        .outputs
        .iter()
        .filter(|(t, _)| *t == Target::Index)
        .collect();
    prop_assert_eq!(parts.len(), summary.parts);
    prop_assert_eq!(indexes.len() == 1, parts.len() > 1, "index iff parts > 1");
    prop_assert!(indexes.len() <= 1);
    prop_assert_eq!(summary.indexed, parts.len() > 1);
    if parts.len() == 1 {
        prop_assert_eq!(parts[0].0, Target::Single);
    }

    let change_kind = header.capability().is_some_and(Capability::is_change_kind);
    let mut all = Vec::new();
    let mut periods: Vec<Period> = Vec::new();
    for (k, (target, bytes)) in parts.iter().enumerate() {
        if parts.len() > 1 {
            prop_assert_eq!(*target, Target::Part(k + 1));
        }
        let (period, es) = check_part(header, entries, limits, k, parts.len(), bytes)?;
        periods.push(period);
        all.extend(es);
    }
    prop_assert_eq!(&all[..], entries, "entries differ after split");

    if change_kind {
        check_periods(header, &periods)?;
    }
    if let Some((_, bytes)) = indexes.first() {
        check_index(header, bytes, &summary, &periods)?;
    }
    Ok(())
}

/// Part `k` (of `n`) read back: its header, its links, its size, and for a change kind its
/// entries within its period. Returns its period and entries.
fn check_part(
    header: &Header,
    entries: &[Entry],
    limits: SplitLimits,
    k: usize,
    n: usize,
    bytes: &[u8],
) -> Result<(Period, Vec<Entry>), TestCaseError> {
    let (h, es) = read(&format!("part {}", k + 1), bytes).map_err(TestCaseError::fail)?;
    prop_assert!(!es.is_empty() || entries.is_empty(), "empty part {}", k + 1);
    prop_assert!(es.len() <= limits.max_entries);
    prop_assert_eq!(h.root, Root::UrlSet);
    prop_assert_eq!(h.capability(), header.capability());
    // The document's links are copied into every part, plus the index link when split.
    for l in &header.links {
        prop_assert!(h.links.contains(l), "part {} lacks link {:?}", k + 1, l);
    }
    let index_links: Vec<&Link> = h.links.iter().filter(|l| l.has_rel("index")).collect();
    if n > 1 {
        prop_assert_eq!(index_links.len(), 1, "part {} index links", k + 1);
        prop_assert_eq!(&index_links[0].href, INDEX_URL);
    } else {
        prop_assert!(index_links.is_empty());
    }
    let md = h.md.clone().unwrap_or_default();
    if header.capability().is_some_and(Capability::is_change_kind) {
        for e in &es {
            let t = e.change_time().expect("change time");
            prop_assert!(
                within(t, md.from.as_ref(), md.until.as_ref()),
                "part {}: entry time {} outside [{:?}, {:?}]",
                k + 1,
                t,
                md.from.map(|d| d.to_string()),
                md.until.map(|d| d.to_string())
            );
        }
    }
    Ok(((md.from, md.until), es))
}

/// The parts' periods of a change kind: consecutive, from the document's `from` to its `until`.
fn check_periods(header: &Header, periods: &[Period]) -> Result<(), TestCaseError> {
    let hmd = header.md.as_ref().expect("md");
    prop_assert_eq!(
        periods[0].0,
        hmd.from,
        "first part starts at the document's from"
    );
    for w in periods.windows(2) {
        prop_assert!(w[0].1.is_some(), "a part before the last has no until");
        prop_assert_eq!(w[0].1, w[1].0, "periods not consecutive");
    }
    prop_assert_eq!(
        periods.last().expect("a part").1,
        hmd.until,
        "last part ends at until"
    );
    Ok(())
}

/// The index read back: its header, one entry per part in order, and for a change kind each
/// part's period.
fn check_index(
    header: &Header,
    bytes: &[u8],
    summary: &SplitSummary,
    periods: &[Period],
) -> Result<(), TestCaseError> {
    let (ih, ies) = read("index", bytes).map_err(TestCaseError::fail)?;
    prop_assert_eq!(ih.root, Root::SitemapIndex);
    prop_assert_eq!(ih.capability(), header.capability());
    let locs: Vec<&str> = ies.iter().map(|e| e.loc.as_str()).collect();
    let urls: Vec<String> = (1..=summary.parts)
        .map(|n| format!("http://example.com/cl-{n}.xml"))
        .collect();
    prop_assert_eq!(&locs, &urls.iter().map(String::as_str).collect::<Vec<_>>());
    prop_assert_eq!(&summary.part_urls, &urls);
    if header.capability().is_some_and(Capability::is_change_kind) {
        for (e, (from, until)) in ies.iter().zip(periods) {
            let md = e.md.clone().unwrap_or_default();
            prop_assert_eq!(md.from, *from);
            prop_assert_eq!(md.until, *until);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn split_parts_read_back_in_order((h, es, limits) in split_case()) {
        split_property(&h, &es, limits)?;
    }
}

#[test]
fn split_change_list_example() {
    // A fixed case: 7 entries, 3 per part → 3 parts and an index.
    let mut md = Metadata::with_capability(Capability::ChangeList);
    md.from = Some(W3cDateTime::parse("2013-01-01T00:00:00Z").expect("from"));
    let mut h = Header::new(Root::UrlSet, md);
    h.links
        .push(Link::new("up", "http://example.com/capabilitylist.xml"));
    let entries: Vec<Entry> = (0..7)
        .map(|i| {
            let mut e = Entry::new(format!("http://example.com/res{i}"));
            e.md_mut().change = Some(Change::Updated);
            e.md_mut().datetime =
                Some(W3cDateTime::parse(&format!("2013-01-02T1{i}:00:00Z")).expect("time"));
            e
        })
        .collect();
    split_property(
        &h,
        &entries,
        SplitLimits {
            max_entries: 3,
            max_bytes: u64::MAX,
        },
    )
    .expect("split property");
}
