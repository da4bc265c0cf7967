//! Every XML example of the specification texts is read and round-tripped
//! (read → write → read gives equal values).

mod common;

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
