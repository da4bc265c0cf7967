//! The conformance suite of the [`Inventory`] port, for implementers: one set of checks every
//! implementation must pass (as rclone runs one test suite over every backend).
//!
//! Implement [`Harness`] for your backend (make an inventory holding some resources; create,
//! replace and remove one) and call [`run`] from a test:
//!
//! ```ignore
//! #[test]
//! fn my_backend_conforms() {
//!     resourcesync_source::inventory::conformance::run(&mut MyHarness::new())
//!         .unwrap_or_else(|e| panic!("{e}"));
//! }
//! ```
//!
//! It checks the contract stated in [`crate::inventory`]: the listing's order (strictly
//! increasing path bytes, with names chosen so that a per-directory sort by plain names gets it
//! wrong) and completeness; each record's length, time (as [`Inventory::stat`] gives) and
//! digests (when given, those of the bytes); [`Inventory::open`] and
//! [`Inventory::read_stable`]; a broken entry reported as an `Err` item without ending the
//! listing; that a listing is a stream (taken in part, dropped, interleaved with another); and,
//! when the backend offers one, the [`crate::inventory::ChangeFeed`].
//!
//! A backend whose paths or bytes are its own (an OAI-PMH provider: a record's path is its
//! identifier's, its bytes the metadata the provider serves) says so through
//! [`Harness::path_of`], [`Harness::keeps_bytes`] and [`Harness::can_break`]: the suite then
//! asks for the same resources and checks them where and as the backend holds them.
//!
//! Each check returns `Err` with what went wrong, naming the resource concerned, rather than
//! panicking; [`run`] runs them all and names every failure.

use std::io::Read;
use std::path::{Path, PathBuf};

use resourcesync_model::MultiHasher;

use crate::inventory::{Changed, Inventory, Listed, Skipped};
use crate::uri::path_bytes;

/// The outcome of one check: what went wrong, if anything.
pub type Outcome = std::result::Result<(), String>;

/// A named check of the resources of one inventory built from the [`fixture`].
pub type Check = (&'static str, fn(&dyn Inventory, &Built) -> Outcome);

/// `Err(message)` unless `cond`.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// What the suite needs of an implementation under test.
pub trait Harness {
    /// An inventory holding the resources `files` (a name of the suite's, bytes) and, when
    /// given, one more resource named `broken` that is there but cannot be read (the backend's
    /// own kind of failure: a dangling link, an object that cannot be fetched). The same
    /// harness may be asked several times; each inventory replaces the previous one.
    fn build(&mut self, files: &[(&str, &[u8])], broken: Option<&str>) -> Box<dyn Inventory>;
    /// Creates or replaces the resource named `name` of the inventory built last.
    fn put(&mut self, name: &str, bytes: &[u8]);
    /// Removes the resource named `name` of the inventory built last.
    fn remove(&mut self, name: &str);
    /// The path at which the inventory holds the resource the suite names `name`: `name`
    /// itself (the default) for a backend that stores resources at the paths it is given.
    fn path_of(&self, name: &str) -> String {
        name.to_owned()
    }
    /// Whether the inventory gives a resource the bytes it was put with (the default). When
    /// not (the backend serves bytes of its own), the checks take the bytes
    /// [`Inventory::open`] gives after a first listing as the resource's, and check the
    /// records, `read_stable` and the change feed against them.
    fn keeps_bytes(&self) -> bool {
        true
    }
    /// Whether the backend can hold a resource that is there but cannot be read (the
    /// default). When not, `build` is given no broken resource and the suite checks that the
    /// listing reports none.
    fn can_break(&self) -> bool {
        true
    }
}

/// An inventory built for the suite, as the checks see it.
#[derive(Debug)]
pub struct Built {
    /// Every resource (path in the inventory, bytes), in the order the fixture gives them.
    pub files: Vec<(String, Vec<u8>)>,
    /// The path of the broken resource, when the backend holds one.
    pub broken: Option<String>,
    /// Paths of resources it does not hold.
    pub missing: Vec<String>,
}

/// The resources of the fixture: names whose order as whole paths differs from a sort of
/// each directory's plain names (`a-b` < `a.txt` < `a/`), spaces and non-ASCII, an empty
/// resource, one larger than a read buffer, and a directory of many.
pub fn fixture() -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = [
        "a-b.txt",
        "a.txt",
        "a/x.txt",
        "a/y/z.txt",
        "a0",
        "b c.txt",
        "z/deep/er/est.txt",
        "é.txt",
        "日本語/ファイル.txt",
    ]
    .iter()
    .map(|n| (n.to_string(), format!("the bytes of {n}").into_bytes()))
    .collect();
    files.push(("empty".into(), Vec::new()));
    files.push((
        "big.bin".into(),
        (0..600_000u32).map(|i| (i % 251) as u8).collect(),
    ));
    for i in 0..600 {
        let n = format!("many/f{i:04}.txt");
        let b = n.clone().into_bytes();
        files.push((n, b));
    }
    files
}

/// The name of the fixture's broken resource.
pub const BROKEN: &str = "broken.txt";

/// Every check of an inventory holding the [`fixture`], by name.
pub const CHECKS: &[Check] = &[
    ("order_and_completeness", order_and_completeness),
    ("record_fields", record_fields),
    ("open_and_read", open_and_read),
    ("listing_is_a_stream", listing_is_a_stream),
];

/// Runs every check: those of [`CHECKS`] on one inventory holding the [`fixture`], then
/// [`change_feed`] on one of its own. Every failure, named, in one error.
pub fn run(h: &mut dyn Harness) -> Outcome {
    let mut failed = Vec::new();
    match build(h, &fixture()) {
        Ok((inv, built)) => failed.extend(CHECKS.iter().filter_map(|(name, check)| {
            check(&*inv, &built).err().map(|e| format!("{name}: {e}"))
        })),
        Err(e) => failed.push(format!("building the fixture: {e}")),
    }
    if let Err(e) = change_feed(h) {
        failed.push(format!("change_feed: {e}"));
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}

/// The whole of the resource at `rel`, through [`Inventory::open`].
fn read_all(inv: &dyn Inventory, rel: &str) -> std::result::Result<Vec<u8>, String> {
    let mut got = Vec::new();
    inv.open(Path::new(rel))
        .map_err(|e| format!("{rel}: open: {e}"))?
        .read_to_end(&mut got)
        .map_err(|e| format!("{rel}: read: {e}"))?;
    Ok(got)
}

/// An inventory holding `files` (and a broken resource, when the backend can hold one), and
/// its resources where and as it holds them.
fn build(
    h: &mut dyn Harness,
    files: &[(String, Vec<u8>)],
) -> std::result::Result<(Box<dyn Inventory>, Built), String> {
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let broken = h.can_break().then_some(BROKEN);
    let inv = h.build(&refs, broken);
    if !h.keeps_bytes() {
        // The bytes are read as a listing leaves the inventory (one that harvests its
        // backend does so when listed).
        let listing = inv.list().map_err(|e| format!("list: {e}"))?;
        listing.for_each(drop);
    }
    let mut held = Vec::with_capacity(files.len());
    for (n, b) in files {
        let path = h.path_of(n);
        let bytes = if h.keeps_bytes() {
            b.clone()
        } else {
            read_all(&*inv, &path)?
        };
        held.push((path, bytes));
    }
    let built = Built {
        files: held,
        broken: broken.map(|b| h.path_of(b)),
        missing: vec![h.path_of("missing.txt"), h.path_of("a/missing")],
    };
    Ok((inv, built))
}

/// Every listed path, in the order given, and the problems reported.
fn collect(
    listing: impl Iterator<Item = std::result::Result<Listed, Skipped>>,
) -> (Vec<Listed>, Vec<Skipped>) {
    let (mut listed, mut skipped) = (Vec::new(), Vec::new());
    for e in listing {
        match e {
            Ok(l) => listed.push(l),
            Err(s) => skipped.push(s),
        }
    }
    (listed, skipped)
}

fn names(listed: &[Listed]) -> Vec<String> {
    listed
        .iter()
        .map(|l| l.rel.to_string_lossy().into_owned())
        .collect()
}

fn listing_of(
    inv: &dyn Inventory,
    what: &str,
) -> std::result::Result<(Vec<Listed>, Vec<Skipped>), String> {
    let listing = match what {
        "list_names" => inv.list_names(),
        _ => inv.list(),
    };
    Ok(collect(listing.map_err(|e| format!("{what}: {e}"))?))
}

/// The listing (both kinds) gives every resource once, in strictly increasing path bytes,
/// and reports the broken one as a problem without ending (and, when there is none, no
/// problem).
pub fn order_and_completeness(inv: &dyn Inventory, built: &Built) -> Outcome {
    let mut want: Vec<&str> = built.files.iter().map(|(n, _)| n.as_str()).collect();
    want.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for what in ["list", "list_names"] {
        let (listed, skipped) = listing_of(inv, what)?;
        for w in listed.windows(2) {
            ensure!(
                path_bytes(&w[0].rel) < path_bytes(&w[1].rel),
                "{what}: {:?} then {:?}: not in strictly increasing path order",
                w[0].rel,
                w[1].rel
            );
        }
        let got = names(&listed);
        ensure!(
            got == want,
            "{what}: not every resource, once: {} listed, {} held; first difference: {:?}",
            got.len(),
            want.len(),
            got.iter().zip(&want).find(|(g, w)| g != w)
        );
        match &built.broken {
            Some(b) => {
                ensure!(
                    skipped.iter().any(|s| s.path == Path::new(b)),
                    "{what}: the broken resource {b} is not reported: {skipped:?}"
                );
                ensure!(
                    !listed.iter().any(|l| l.rel == Path::new(b)),
                    "{what}: the broken resource {b} is listed as if readable"
                );
            }
            None => ensure!(
                skipped.is_empty(),
                "{what}: problems reported with no broken resource: {skipped:?}"
            ),
        }
    }
    Ok(())
}

/// Each record of [`Inventory::list`] has the resource's length, the time [`Inventory::stat`]
/// gives, and digests (when given) of its bytes; [`Inventory::list_names`] has either those or
/// zeros.
pub fn record_fields(inv: &dyn Inventory, built: &Built) -> Outcome {
    let (listed, _) = listing_of(inv, "list")?;
    for l in &listed {
        let b = built
            .files
            .iter()
            .find(|(n, _)| Path::new(n) == l.rel)
            .map(|(_, b)| b.as_slice())
            .ok_or_else(|| format!("{:?} listed but not in the fixture", l.rel))?;
        ensure!(l.len == b.len() as u64, "{:?}: length {}", l.rel, l.len);
        let (len, mtime) = inv
            .stat(&l.rel)
            .map_err(|e| format!("{:?}: stat: {e}", l.rel))?;
        ensure!(
            (l.len, l.mtime_ns) == (len, mtime),
            "{:?}: record {:?} vs stat {:?}",
            l.rel,
            (l.len, l.mtime_ns),
            (len, mtime)
        );
        ensure!(l.mtime_ns > 0, "{:?}: no modification time", l.rel);
        if !l.hashes.is_empty() {
            let mut h = MultiHasher::new(&l.hashes.known_algs());
            h.update(b);
            ensure!(
                l.hashes.agrees_with(&h.finish()) == Some(true),
                "{:?}: digests not of the bytes",
                l.rel
            );
        }
    }
    let (names, _) = listing_of(inv, "list_names")?;
    for (n, l) in names.iter().zip(&listed) {
        ensure!(
            (n.len, n.mtime_ns) == (0, 0) || (n.len, n.mtime_ns) == (l.len, l.mtime_ns),
            "{:?}: list_names gives neither zeros nor the record",
            n.rel
        );
    }
    Ok(())
}

/// [`Inventory::open`] and [`Inventory::read_stable`] give each resource's bytes; a missing
/// or broken resource is an error.
pub fn open_and_read(inv: &dyn Inventory, built: &Built) -> Outcome {
    let mut buf = Vec::new();
    for (n, b) in &built.files {
        ensure!(read_all(inv, n)? == *b, "{n}: open gives other bytes");
        let mut fed = Vec::new();
        let stable = inv
            .read_stable(Path::new(n), &mut buf, &mut |d| fed.extend_from_slice(d))
            .map_err(|e| format!("{n}: read_stable: {e}"))?;
        let (len, _) = stable.ok_or_else(|| format!("{n}: read_stable saw a change"))?;
        ensure!(len == b.len() as u64, "{n}: read_stable length {len}");
        ensure!(fed == *b, "{n}: read_stable gives other bytes");
    }
    for rel in built.missing.iter().chain(&built.broken) {
        ensure!(inv.open(Path::new(rel)).is_err(), "{rel}: opened");
        ensure!(
            inv.read_stable(Path::new(rel), &mut buf, &mut |_| {})
                .is_err(),
            "{rel}: read"
        );
    }
    Ok(())
}

/// A listing is a stream: taken in part and dropped, it leaves nothing behind (the next
/// listing is whole); two at once, interleaved, each give the same whole listing.
pub fn listing_is_a_stream(inv: &dyn Inventory, _: &Built) -> Outcome {
    let (whole, _) = listing_of(inv, "list")?;
    let first: Vec<Listed> = inv
        .list()
        .map_err(|e| format!("list: {e}"))?
        .filter_map(|e| e.ok())
        .take(3)
        .collect();
    ensure!(
        first == whole[..3.min(whole.len())],
        "the first entries differ"
    );
    let (again, _) = listing_of(inv, "list")?;
    ensure!(
        names(&again) == names(&whole),
        "a listing dropped midway left a trace"
    );
    let list = || inv.list().map_err(|e| format!("list: {e}"));
    let (mut a, mut b) = (list()?, list()?);
    let (mut from_a, mut from_b) = (Vec::new(), Vec::new());
    loop {
        let (x, y) = (a.next(), b.next());
        if x.is_none() && y.is_none() {
            break;
        }
        from_a.extend(x.and_then(|e| e.ok()));
        from_b.extend(y.and_then(|e| e.ok()));
    }
    ensure!(
        names(&from_a) == names(&whole) && names(&from_b) == names(&whole),
        "interleaved listings differ"
    );
    Ok(())
}

/// When the backend offers a change feed: after a cursor, exactly the resources created,
/// replaced or removed since, each once, in path order, with their state now (one created
/// and removed since may be reported gone, or not at all); nothing after the feed's own
/// cursor; an unknown cursor is an error.
pub fn change_feed(h: &mut dyn Harness) -> Outcome {
    let files: Vec<(String, Vec<u8>)> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| (n.to_string(), n.as_bytes().to_vec()))
        .collect();
    let (inv, _) = build(h, &files)?;
    let Some(feed) = inv.change_feed() else {
        return Ok(());
    };
    let start = feed.cursor().map_err(|e| format!("cursor: {e}"))?;
    let changes_since = |c: &str| feed.changes_since(c).map_err(|e| format!("changes: {e}"));
    ensure!(
        changes_since(&start)?.changes.count() == 0,
        "changes after the current cursor"
    );
    h.put("c", b"c, replaced");
    h.put("e", b"e, created");
    h.remove("b");
    h.put("0", b"0, created then removed");
    h.remove("0");
    let got = changes_since(&start)?;
    let next = got.cursor.clone();
    let changes = got
        .changes
        .collect::<std::result::Result<Vec<Changed>, _>>()
        .map_err(|e| format!("change: {e:?}"))?;
    let rels: Vec<PathBuf> = changes.iter().map(|c| c.rel().to_owned()).collect();
    let sorted = |names: &[&str]| {
        let mut v: Vec<PathBuf> = names.iter().map(|n| PathBuf::from(h.path_of(n))).collect();
        v.sort_by(|a, b| path_bytes(a).cmp(&path_bytes(b)));
        v
    };
    // `0`, created and removed since the cursor, was not there at the cursor either: reported
    // gone, or not at all.
    let (want, or) = (sorted(&["0", "b", "c", "e"]), sorted(&["b", "c", "e"]));
    ensure!(
        rels == want || rels == or,
        "the changes: {rels:?}, not {want:?}"
    );
    for ch in &changes {
        check_change(&*inv, &*h, ch)?;
    }
    ensure!(
        changes_since(&next)?.changes.count() == 0,
        "changes after the feed's cursor"
    );
    ensure!(
        feed.changes_since("not a cursor").is_err(),
        "an unknown cursor taken"
    );
    Ok(())
}

/// One change of [`change_feed`]: `0` and `b` gone, `c` and `e` present with their bytes now.
fn check_change(inv: &dyn Inventory, h: &dyn Harness, ch: &Changed) -> Outcome {
    let gone = [h.path_of("0"), h.path_of("b")];
    match ch {
        Changed::Gone(p) => ensure!(
            gone.iter().any(|g| Path::new(g) == p),
            "{p:?}: gone, but it is there"
        ),
        Changed::Present(l) => {
            let rel = l.rel.to_string_lossy();
            ensure!(
                !gone.iter().any(|g| *g == rel),
                "{rel}: present, but it was removed"
            );
            let want = if h.keeps_bytes() {
                let bytes: &[u8] = if rel == h.path_of("c") {
                    b"c, replaced"
                } else {
                    b"e, created"
                };
                bytes.len()
            } else {
                read_all(inv, &rel)?.len()
            };
            ensure!(
                l.len == want as u64,
                "{rel}: length {} after the change, not {want}",
                l.len
            );
        }
    }
    Ok(())
}
