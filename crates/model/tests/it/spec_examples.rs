//! Every XML example of the specification texts is read and round-tripped
//! (read → write → read gives equal values).

use crate::common;

use common::{fixtures, read_all, spec_dir};
use resourcesync_model::DocumentWriter;

#[test]
fn every_spec_example_round_trips() {
    let mut n = 0;
    for f in fixtures().iter().filter(|f| f.file.ends_with(".xml")) {
        let bytes = std::fs::read(spec_dir().join(&f.file)).expect("fixture");
        let (header, entries) = read_all(&f.file, &bytes);
        assert_eq!(
            header
                .capability()
                .map(|c| c.as_str().to_owned())
                .unwrap_or_default(),
            f.kind,
            "{}: capability",
            f.file
        );
        assert_eq!(header.root.element(), f.root, "{}: root", f.file);
        let mut w = DocumentWriter::new(Vec::new(), f.file.clone(), &header).expect("header");
        for e in &entries {
            w.write_entry(e).expect("entry");
        }
        let out = w.finish().expect("finish");
        let (header2, entries2) = read_all(&f.file, &out);
        assert_eq!(
            header, header2,
            "{}: header differs after round trip",
            f.file
        );
        assert_eq!(
            entries, entries2,
            "{}: entries differ after round trip",
            f.file
        );
        // Writing is deterministic: the written form is a fixed point.
        let mut w = DocumentWriter::new(Vec::new(), f.file.clone(), &header2).expect("header");
        for e in &entries2 {
            w.write_entry(e).expect("entry");
        }
        assert_eq!(
            out,
            w.finish().expect("finish"),
            "{}: output not stable",
            f.file
        );
        n += 1;
    }
    // 2014: 30 XML examples, 2017: 30, plus notifications and archives.
    assert!(n >= 60, "only {n} XML fixtures found");
}

/// Spec errata the validator reports as a finding of this rule.
const DETECTED_ERRATA: &[(&str, &str)] = &[
    ("z39.99-2014/ex01.xml", "RS-6.2-up-mandatory"),
    ("z39.99-2014/ex02.xml", "RS-6.2-up-mandatory"),
    ("z39.99-2014/ex03.xml", "RS-6.2-up-mandatory"),
    ("z39.99-2014/ex04.xml", "RS-6.2-up-mandatory"),
    ("z39.99-2014/ex05.xml", "RS-6.2-up-mandatory"),
    ("z39.99-2014/ex08.xml", "RS-6.2-up-mandatory"),
    ("z39.99-2014/ex27.xml", "RS-7-hash-syntax"),
    ("z39.99-2017/ex01.xml", "RS-6.2-up-mandatory"),
    ("z39.99-2017/ex02.xml", "RS-6.2-up-mandatory"),
    ("z39.99-2017/ex03.xml", "RS-6.2-up-mandatory"),
    ("z39.99-2017/ex04.xml", "RS-6.2-up-mandatory"),
    ("z39.99-2017/ex05.xml", "RS-6.2-up-mandatory"),
    ("z39.99-2017/ex08.xml", "RS-6.2-up-mandatory"),
    ("z39.99-2017/ex27.xml", "RS-7-hash-syntax"),
    // A warning: the overlapping periods of the Change Dump Archive example (2012/2013 typo).
    ("archives/ex07.xml", "AR-5-consecutive"),
];

/// Spec errata no document rule can see: the memento link's `modified` disagrees with the
/// entry's `<lastmod>` only in meaning (Z39.99-2014 §14.6), which needs the archive to check.
const SEMANTIC_ERRATA: &[&str] = &["z39.99-2014/ex29.xml", "z39.99-2017/ex29.xml"];

#[test]
fn spec_examples_validate_as_documented() {
    use resourcesync_model::{DocumentReader, ReadOptions, validate::validate};
    let mut checked = 0;
    for f in fixtures().iter().filter(|f| f.file.ends_with(".xml")) {
        let bytes = std::fs::read(spec_dir().join(&f.file)).expect("fixture");
        let report = DocumentReader::new(&bytes[..], ReadOptions::named(f.file.clone()))
            .and_then(validate)
            .unwrap_or_else(|e| panic!("{e}"));
        let ids: Vec<&str> = report
            .findings
            .as_slice()
            .iter()
            .map(|x| x.rule.id)
            .collect();
        let detected = DETECTED_ERRATA.iter().find(|(file, _)| *file == f.file);
        match f.expect.as_str() {
            "valid" => {
                assert!(detected.is_none(), "{}: listed as an erratum", f.file);
                assert!(
                    report.is_valid(),
                    "{}: valid example reported invalid: {ids:?}",
                    f.file
                );
            }
            "erratum" => {
                if let Some((_, rule)) = detected {
                    assert!(
                        ids.contains(rule),
                        "{}: expected {rule}, found {ids:?}",
                        f.file
                    );
                } else {
                    assert!(
                        SEMANTIC_ERRATA.contains(&f.file.as_str()),
                        "{}: erratum neither detected nor documented as semantic",
                        f.file
                    );
                }
            }
            other => panic!("{}: unknown expectation {other}", f.file),
        }
        checked += 1;
    }
    assert!(checked >= 60);
}
