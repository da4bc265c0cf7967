//! `versions = true` for a Source (`docs/history.md`): its copies are kept as versions, and
//! the JSON API gives the versions of a resource with the Source's `<lastmod>` and when the
//! aggregator first saw each.

use std::time::Duration;

use resourcesync_aggregate::status::Phase;

use crate::service::{hand_written, start_local, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_gives_the_versions_of_a_resource() {
    let src = hand_written().await;
    let store = tempfile::tempdir().expect("store");
    let text = format!(
        "[[source]]\nname = \"kept\"\nurl = \"{b}.well-known/resourcesync\"\nschedule = \"1h\"\n\
         versions = true\n\n\
         [[source]]\nname = \"plain\"\nurl = \"{b}.well-known/resourcesync\"\nschedule = \"1h\"\n",
        b = src.base
    );
    let agg = start_local(&text, store.path());
    for name in ["kept", "plain"] {
        until(&agg, name, Duration::from_secs(60), |v| {
            v.phase == Phase::Following && v.resources == 2
        })
        .await;
    }
    let web = resourcesync_testkit::serve(resourcesync_aggregate::web::router(agg.clone())).await;
    let get = |name: &str, uri: String| {
        let url = format!(
            "http://{web}/api/sources/{name}/versions?uri={}",
            url::form_urlencoded::byte_serialize(uri.as_bytes()).collect::<String>()
        );
        async move {
            let r = reqwest::get(url).await.expect("GET");
            (r.status().as_u16(), r.text().await.expect("body"))
        }
    };
    let (status, body) = get("kept", format!("{}x/one.txt", src.base)).await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let versions = v["versions"].as_array().expect("versions");
    assert_eq!(versions.len(), 1, "{v:#}");
    let one = &versions[0];
    assert_eq!(one["seq"], 1);
    assert_eq!(one["length"], 15);
    // The Source published md5 only: the body is named by the sha-256 computed as it came.
    assert_eq!(
        one["digest"],
        format!("sha-256:{}", sha256_hex(b"first resource\n"))
    );
    assert_eq!(one["datetime"], "2026-10-01T00:00:00Z");
    assert!(
        one["first_seen"]
            .as_str()
            .is_some_and(|t| t.starts_with("20")),
        "{v:#}"
    );
    assert!(one["until"].is_null() && one["deleted"] == false, "{v:#}");
    assert_eq!(v["key"], format!("{}caps.xml", src.base));
    // A Source without versions keeps none; an unknown Source or resource is not found.
    let (status, body) = get("plain", format!("{}x/one.txt", src.base)).await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["versions"].as_array().map(Vec::len), Some(0), "{v:#}");
    assert_eq!(get("nobody", format!("{}x/one.txt", src.base)).await.0, 404);
    assert_eq!(get("kept", format!("{}x/none.txt", src.base)).await.0, 404);
    agg.drain(Duration::from_secs(5)).await;
}

fn sha256_hex(b: &[u8]) -> String {
    let mut h = resourcesync_model::MultiHasher::new(&[resourcesync_model::HashAlg::Sha256]);
    h.update(b);
    h.finish()
        .value_of(&resourcesync_model::HashAlg::Sha256)
        .expect("sha-256")
}
