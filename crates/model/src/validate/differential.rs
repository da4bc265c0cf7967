//! The validator's report over the reader's entry fast path and over its general path alone
//! (see `reader::differential` for the reader's own output): the same on every fixture
//! document, generated documents of both root kinds, and a large one.

use std::io;

use crate::reader::differential::{fixtures, generated};
use crate::validate::validate;
use crate::{DocumentReader, ReadOptions};

fn report(doc: &[u8], fast: bool) -> String {
    match DocumentReader::open(io::Cursor::new(doc.to_vec()), ReadOptions::named("d")) {
        Ok(mut r) => {
            r.set_fast_path(fast);
            format!("{:?}", validate(r))
        }
        Err(e) => format!("{e:?}"),
    }
}

#[test]
fn reports_are_the_same_over_both_paths() {
    let mut docs = fixtures();
    assert!(docs.len() > 50, "fixtures found: {}", docs.len());
    docs.push(("generated list".into(), generated(300, false, 1)));
    docs.push(("generated index".into(), generated(300, true, 2)));
    docs.push(("large".into(), generated(6000, false, 4)));
    for (name, doc) in &docs {
        assert_eq!(
            report(doc, false),
            report(doc, true),
            "{name}: reports differ"
        );
    }
}
