//! `<loc>`s that are IRIs (spaces, non-ASCII letters, as Python resync writes file names):
//! fetched percent-encoded, as browsers do, and recorded and mapped as their encoded form, so
//! that a list with the raw form and one with the encoded form name one resource at one path
//! (no "taken by" refusal between them). Said once per list. Control characters stay refused.

use crate::common;

use std::sync::Arc;

use common::*;
use resourcesync_destination::{Quiet, SyncReport, sync};
use resourcesync_store::{Records, RelPath, SqliteState};

const NS: &str = "xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
                  xmlns:rs=\"http://www.openarchives.org/rs/terms/\"";

/// A Resource List of `(loc, body published)` entries.
fn rl(entries: &[(String, &[u8])]) -> String {
    let mut s = format!(
        "<?xml version=\"1.0\"?>\n<urlset {NS}>\n<rs:md capability=\"resourcelist\" at=\"2020-01-01T00:00:00Z\"/>\n"
    );
    for (loc, body) in entries {
        let (_, h) = resourcesync_model::MultiHasher::new(&[resourcesync_model::HashAlg::Md5])
            .hash_reader(*body)
            .expect("hash");
        s.push_str(&format!(
            "<url><loc>{loc}</loc><rs:md length=\"{}\" hash=\"{h}\"/></url>\n",
            body.len()
        ));
    }
    s.push_str("</urlset>\n");
    s
}

fn iri_warnings(r: &SyncReport) -> Vec<&String> {
    r.warnings
        .iter()
        .filter(|w| w.contains("spaces or non-ASCII"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_iri_and_its_encoded_form_are_one_resource_at_one_path() {
    let root = tmp();
    let (u, p) = ("sub dir/\u{fc} 1.txt", "50% off.txt");
    write_tree(root.path(), &[(u, b"one\n"), (p, b"two\n")]);
    let server = Server::start(root.path()).await;
    let base = server.base.clone();
    let (u_raw, u_enc) = (
        format!("{base}{u}"),
        format!("{base}sub%20dir/%C3%BC%201.txt"),
    );
    let (p_raw, p_enc) = (format!("{base}{p}"), format!("{base}50%25%20off.txt"));
    let tab = format!("{base}a\tb.txt");
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&format!("{base}list.xml"), &dest);
    o.http.retries = 0;

    // The raw forms: fetched encoded, one warning for the list, the tab refused.
    let list = [
        (u_raw.clone(), &b"one\n"[..]),
        (p_raw.clone(), b"two\n"),
        (tab.clone(), b"x"),
    ];
    write_tree(root.path(), &[("list.xml", rl(&list).as_bytes())]);
    let r = sync(&o, Arc::new(Quiet)).await.expect("sync");
    assert_eq!((r.created, r.failed), (2, 1), "{:?}", r.failures);
    let w = iri_warnings(&r);
    assert_eq!(w.len(), 1, "{:?}", r.warnings);
    assert!(
        w[0].starts_with("2 resources of ") && w[0].contains("list.xml"),
        "{}",
        w[0]
    );
    let f = &r.failures[0];
    assert!(f.error.contains("control character"), "{f:?}");
    assert_eq!(std::fs::read(dest.join(u)).expect("copy"), b"one\n");
    assert_eq!(std::fs::read(dest.join(p)).expect("copy"), b"two\n");
    assert_eq!(server.hits("/sub%20dir/%C3%BC%201.txt"), 1);
    {
        let st = SqliteState::open(&o.state_path()).expect("state");
        assert!(st.resource(&u_enc).expect("row").is_some());
        assert!(st.resource(&u_raw).expect("row").is_none());
        assert_eq!(
            st.path_owner(&RelPath::parse(p).expect("path"))
                .expect("owner"),
            Some(p_enc.clone())
        );
    }

    // The Source now writes the encoded forms (and changed one file): the same resources.
    write_tree(root.path(), &[(u, b"one, changed\n")]);
    let list = [
        (u_enc.clone(), &b"one, changed\n"[..]),
        (p_enc.clone(), b"two\n"),
    ];
    write_tree(root.path(), &[("list.xml", rl(&list).as_bytes())]);
    let r = sync(&o, Arc::new(Quiet)).await.expect("sync");
    assert_eq!(
        (r.created, r.updated, r.unchanged, r.failed),
        (0, 1, 1, 0),
        "{:?}",
        r.failures
    );
    assert!(iri_warnings(&r).is_empty(), "{:?}", r.warnings);
    assert_eq!(
        std::fs::read(dest.join(u)).expect("copy"),
        b"one, changed\n"
    );

    // And back to the raw forms: nothing to do.
    let list = [(u_raw, &b"one, changed\n"[..]), (p_raw, b"two\n")];
    write_tree(root.path(), &[("list.xml", rl(&list).as_bytes())]);
    let r = sync(&o, Arc::new(Quiet)).await.expect("sync");
    assert_eq!(
        (r.created, r.updated, r.unchanged, r.failed),
        (0, 0, 2, 0),
        "{:?}",
        r.failures
    );
}

/// The diff of a Change List against the state matches whichever form either document uses: a
/// copy made from the raw form in a Resource List is updated and deleted by Change List entries
/// in the encoded form, and an entry created in the raw form is fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_list_in_the_other_form_updates_and_deletes_the_same_copies() {
    use crate::hand::{capability_list, lh, url, urlset};
    let root = tmp();
    let (u, p, j) = (
        "sub dir/\u{fc} 1.txt",
        "50% off.txt",
        "\u{65e5}\u{672c}/a b.txt",
    );
    write_tree(root.path(), &[(u, b"one\n"), (p, b"two\n")]);
    let server = Server::start(root.path()).await;
    let b = server.base.clone();
    let cap = format!("{b}rs/cap.xml");
    let changes = |entries: &[(String, &str, &[u8])]| {
        let urls: Vec<String> = entries
            .iter()
            .map(|(loc, change, body)| {
                let lh = if *change == "deleted" {
                    String::new()
                } else {
                    lh(body)
                };
                url(
                    loc,
                    &format!("change=\"{change}\" datetime=\"2024-02-01T00:00:00Z\" {lh}"),
                )
            })
            .collect();
        urlset(
            Some(&cap),
            "capability=\"changelist\" from=\"2024-01-01T00:00:00Z\"",
            &urls,
        )
    };
    let rl = urlset(
        Some(&cap),
        "capability=\"resourcelist\" at=\"2024-01-01T00:00:00Z\"",
        &[
            url(&format!("{b}{u}"), &lh(b"one\n")),
            url(&format!("{b}{p}"), &lh(b"two\n")),
        ],
    );
    let caps = capability_list(&[
        ("resourcelist", format!("{b}rs/rl.xml")),
        ("changelist", format!("{b}rs/cl.xml")),
    ]);
    write_tree(
        root.path(),
        &[
            ("rs/cap.xml", caps.as_bytes()),
            ("rs/rl.xml", rl.as_bytes()),
            ("rs/cl.xml", changes(&[]).as_bytes()),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&cap, &dest);
    o.http.retries = 0;
    o.delete = true;
    let r = sync(&o, Arc::new(Quiet)).await.expect("sync");
    assert_eq!((r.created, r.failed), (2, 0), "{:?}", r.failures);

    std::fs::remove_file(root.path().join(p)).expect("rm");
    write_tree(root.path(), &[(u, b"one, changed\n"), (j, b"three\n")]);
    let cl = changes(&[
        (
            format!("{b}sub%20dir/%C3%BC%201.txt"),
            "updated",
            b"one, changed\n",
        ),
        (format!("{b}50%25%20off.txt"), "deleted", b""),
        (format!("{b}{j}"), "created", b"three\n"),
    ]);
    write_tree(root.path(), &[("rs/cl.xml", cl.as_bytes())]);
    let r = sync(&o, Arc::new(Quiet)).await.expect("sync");
    assert_eq!(
        (r.created, r.updated, r.deleted, r.failed),
        (1, 1, 1, 0),
        "{:?}",
        r.failures
    );
    assert_eq!(
        dest_files(&dest),
        [
            (u.to_owned(), b"one, changed\n".to_vec()),
            (j.to_owned(), b"three\n".to_vec())
        ]
        .into()
    );
    let w = iri_warnings(&r);
    assert_eq!(w.len(), 1, "{:?}", r.warnings);
    assert!(
        w[0].starts_with("1 resource of ") && w[0].contains("cl.xml"),
        "{}",
        w[0]
    );
}
