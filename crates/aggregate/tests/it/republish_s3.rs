//! Republishing copies kept in a bucket (`--store s3://…`; Z39.99-2014 §14.8):
//! the republished Resource List lists each copy with its provenance, the copies are served
//! from the object store (the real Garage of `scripts/s3.sh`, `RESOURCESYNC_TEST_S3`), and an
//! update at the original shows in the aggregator's Change List, with the new digest.

use std::time::Duration;

use resourcesync_model::{Capability, Change};
use resourcesync_testkit::Server;

use crate::republish::{aggregator_in, document, md5_hex, md5_of, named};
use crate::service::{publish, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_in_a_bucket_are_republished_and_served_from_it() {
    let s3 = crate::server_env("RESOURCESYNC_TEST_S3");
    let dir = tempfile::tempdir().expect("tempdir");
    let origin = Server::start(dir.path()).await;
    for i in 0..4 {
        std::fs::write(
            dir.path().join(format!("r{i}.txt")),
            format!("resource {i}\n"),
        )
        .expect("write");
    }
    publish(dir.path(), &origin.base).await;
    let store = tempfile::tempdir().expect("work");
    let bucket = s3.replacen('?', &format!("/republish-{:08x}?", fastrand::u32(..)), 1);
    let text = format!(
        "[[source]]\nname = \"ours\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\n",
        origin.base
    );
    let (agg, base) = aggregator_in(&text, store.path(), Some(bucket)).await;
    let limit = Duration::from_secs(60);
    let v = until(&agg, "ours", limit, |v| v.republishes >= 1).await;
    assert!(v.republish_error.is_none(), "{v:#?}");
    // No copy in the folder: they are in the bucket.
    assert!(!store.path().join("ours/r0.txt").exists());

    let capl = format!("{base}rs/ours/resourcesync/capabilitylist.xml");
    let (_, c) = document(&capl).await;
    let (_, list) = document(&named(&c, Capability::ResourceList)).await;
    assert_eq!(list.len(), 4, "{list:?}");
    for e in &list {
        let via = e.links.iter().find(|l| l.rel == "via").expect("via");
        let original = reqwest::get(&via.href)
            .await
            .expect("GET")
            .bytes()
            .await
            .expect("body");
        let copy = reqwest::get(&e.loc).await.expect("GET copy");
        assert_eq!(copy.status().as_u16(), 200, "{}", e.loc);
        assert_eq!(
            copy.headers()
                .get("content-length")
                .and_then(|v| v.to_str().ok()),
            Some(original.len().to_string().as_str())
        );
        assert_eq!(copy.bytes().await.expect("copy"), original, "{}", e.loc);
        assert_eq!(md5_of(e), Some(md5_hex(&original)), "{}", e.loc);
    }
    let missing = reqwest::get(format!("{base}rs/ours/nothing.txt"))
        .await
        .expect("GET");
    assert_eq!(missing.status().as_u16(), 404);

    // An update of the same length at the original: the copy's digest changes, so the
    // republished Source sees it change (no file time to go by in a bucket).
    let before = agg.status().get("ours").expect("ours").republishes;
    std::fs::write(dir.path().join("r1.txt"), "RESOURCE 1\n").expect("write");
    publish(dir.path(), &origin.base).await;
    let deadline = std::time::Instant::now() + limit;
    loop {
        until(&agg, "ours", limit, |v| v.republishes > before).await;
        let (_, c) = document(&capl).await;
        // What the Capability List names: the open Change List itself (Z39.99-2014 §12.1).
        let (_, changes) = document(&named(&c, Capability::ChangeList)).await;
        let updated = changes.iter().find(|e| {
            e.loc == format!("{base}rs/ours/r1.txt")
                && e.md.as_ref().and_then(|m| m.change.clone()) == Some(Change::Updated)
        });
        if let Some(u) = updated {
            assert_eq!(md5_of(u), Some(md5_hex(b"RESOURCE 1\n")));
            let body = reqwest::get(&u.loc)
                .await
                .expect("GET")
                .bytes()
                .await
                .expect("body");
            assert_eq!(&body[..], b"RESOURCE 1\n");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no update republished: {changes:?}"
        );
    }
}
