//! Tree comparison: the files under a directory as a map (relative path → bytes), and a
//! readable difference between two of them.

use std::collections::BTreeMap;
use std::path::Path;

/// The files under `root` (relative paths with `/`), leaving out the entries named in `skip`
/// (a relative path: that file, or everything under that folder). A missing `root` is empty.
pub fn files(root: &Path, skip: &[&str]) -> BTreeMap<String, Vec<u8>> {
    files_where(root, |rel| !skipped(rel, skip))
}

/// The files under `root` (relative paths with `/`) whose path `keep` accepts; a folder `keep`
/// refuses is not entered. A missing `root` is empty; an entry that is neither a folder nor a
/// regular file (a symbolic link) fails the test.
pub fn files_where(root: &Path, keep: impl Fn(&str) -> bool) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    if root.exists() {
        walk(root, root, &keep, &mut out);
    }
    out
}

fn skipped(rel: &str, skip: &[&str]) -> bool {
    skip.iter()
        .any(|s| rel == *s || rel.starts_with(&format!("{s}/")))
}

fn walk(root: &Path, dir: &Path, keep: &dyn Fn(&str) -> bool, out: &mut BTreeMap<String, Vec<u8>>) {
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let e = e.expect("entry");
        let p = e.path();
        let rel = p
            .strip_prefix(root)
            .expect("under root")
            .to_string_lossy()
            .replace('\\', "/");
        if !keep(&rel) {
            continue;
        }
        let t = e.file_type().expect("type");
        if t.is_dir() {
            walk(root, &p, keep, out);
        } else {
            assert!(t.is_file(), "not a regular file: {}", p.display());
            out.insert(rel, std::fs::read(&p).expect("read"));
        }
    }
}

/// The directories under `root` (relative, sorted), leaving out those named in `skip` and what
/// is under them.
pub fn dirs(root: &Path, skip: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let e = e.expect("entry");
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .expect("under root")
                .to_string_lossy()
                .replace('\\', "/");
            if e.file_type().expect("type").is_dir() && !skipped(&rel, skip) {
                out.push(rel);
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// How `right` differs from `left`, one line per path (`- only left`, `+ only right`,
/// `~ differs: N bytes vs M bytes`), at most `limit` lines then a count; `None` when equal.
pub fn diff(
    left: &BTreeMap<String, Vec<u8>>,
    right: &BTreeMap<String, Vec<u8>>,
    limit: usize,
) -> Option<String> {
    let mut lines = Vec::new();
    for (path, l) in left {
        match right.get(path) {
            None => lines.push(format!("- {path} (only left, {} bytes)", l.len())),
            Some(r) if r != l => {
                let at = l
                    .iter()
                    .zip(r)
                    .position(|(a, b)| a != b)
                    .unwrap_or(l.len().min(r.len()));
                lines.push(format!(
                    "~ {path}: {} bytes vs {} bytes, first difference at byte {at}",
                    l.len(),
                    r.len()
                ));
            }
            Some(_) => {}
        }
    }
    for (path, r) in right {
        if !left.contains_key(path) {
            lines.push(format!("+ {path} (only right, {} bytes)", r.len()));
        }
    }
    if lines.is_empty() {
        return None;
    }
    let more = lines.len().saturating_sub(limit);
    lines.truncate(limit);
    if more > 0 {
        lines.push(format!("… and {more} more"));
    }
    Some(lines.join("\n"))
}

/// Panics with a readable difference unless the two maps are equal.
#[track_caller]
pub fn assert_same(left: &BTreeMap<String, Vec<u8>>, right: &BTreeMap<String, Vec<u8>>) {
    if let Some(d) = diff(left, right, 20) {
        panic!(
            "the trees differ ({} vs {} files):\n{d}",
            left.len(),
            right.len()
        );
    }
}

/// Panics with a readable difference unless the files under `left` and `right` are the same
/// (leaving out `skip` on both sides).
#[track_caller]
pub fn assert_same_dirs(left: &Path, right: &Path, skip: &[&str]) {
    assert_same(&files(left, skip), &files(right, skip));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, body: &[u8]) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, body).expect("write");
    }

    #[test]
    fn equal_trees_and_each_kind_of_difference() {
        let a = tempfile::tempdir().expect("tmp");
        let b = tempfile::tempdir().expect("tmp");
        for root in [a.path(), b.path()] {
            write(root, "x/same.txt", b"same");
            write(root, ".state/db", b"ignored");
        }
        write(b.path(), ".state/other", b"ignored too");
        assert_same_dirs(a.path(), b.path(), &[".state"]);
        assert_eq!(dirs(a.path(), &[".state"]), vec!["x".to_owned()]);

        write(a.path(), "x/changed.txt", b"abcd");
        write(b.path(), "x/changed.txt", b"abXd!");
        write(a.path(), "gone.txt", b"1");
        write(b.path(), "new/extra.txt", b"22");
        let d = diff(
            &files(a.path(), &[".state"]),
            &files(b.path(), &[".state"]),
            20,
        )
        .expect("differs");
        assert!(d.contains("- gone.txt (only left, 1 bytes)"), "{d}");
        assert!(d.contains("+ new/extra.txt (only right, 2 bytes)"), "{d}");
        assert!(
            d.contains("~ x/changed.txt: 4 bytes vs 5 bytes, first difference at byte 2"),
            "{d}"
        );
        let short = diff(&files(a.path(), &[]), &files(b.path(), &[]), 1).expect("differs");
        assert!(short.ends_with("… and 3 more"), "{short}");
    }

    #[test]
    #[should_panic(expected = "the trees differ")]
    fn assert_same_panics_on_a_difference() {
        let a = tempfile::tempdir().expect("tmp");
        let b = tempfile::tempdir().expect("tmp");
        write(a.path(), "a", b"1");
        assert_same_dirs(a.path(), b.path(), &[]);
    }
}
