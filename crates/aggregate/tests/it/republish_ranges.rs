//! Byte ranges of republished copies (RFC 9110 §14): a copy kept in a bucket
//! (the real Garage of `scripts/s3.sh`, `RESOURCESYNC_TEST_S3`) is answered as a copy kept in
//! a folder is (`tower-http`'s `ServeFile`): 206 with `Content-Range` for one range at the
//! start, in the middle, as a suffix or open-ended; 416 with `bytes */LENGTH` for a range past
//! the end and for several ranges; 200 with `Accept-Ranges: bytes` without a `Range`.

use std::time::Duration;

use resourcesync_testkit::Server;

use crate::republish::aggregator_in;
use crate::service::{publish, until};

/// What an answer came to: status, `Content-Range`, `Accept-Ranges`, `Content-Length`, body.
type Answer = (u16, Option<String>, Option<String>, Option<String>, Vec<u8>);

async fn get(url: &str, range: Option<&str>) -> Answer {
    let mut req = reqwest::Client::new().get(url);
    if let Some(r) = range {
        req = req.header("range", r);
    }
    let res = req.send().await.expect("GET");
    let h = |name: &str| {
        res.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (cr, ar, cl) = (h("content-range"), h("accept-ranges"), h("content-length"));
    let status = res.status().as_u16();
    (
        status,
        cr,
        ar,
        cl,
        res.bytes().await.expect("body").to_vec(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_in_a_bucket_are_served_with_byte_ranges_as_copies_in_a_folder() {
    let s3 = crate::server_env("RESOURCESYNC_TEST_S3");
    let dir = tempfile::tempdir().expect("tempdir");
    let origin = Server::start(dir.path()).await;
    let body: Vec<u8> = (0..1000u32)
        .map(|i| b'a' + ((i * 7 + i / 26) % 26) as u8)
        .collect();
    std::fs::write(dir.path().join("big.txt"), &body).expect("write");
    publish(dir.path(), &origin.base).await;
    let text = format!(
        "[[source]]\nname = \"ours\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\n",
        origin.base
    );
    let (in_bucket, folder) = (
        tempfile::tempdir().expect("work"),
        tempfile::tempdir().expect("work"),
    );
    let bucket = s3.replacen('?', &format!("/ranges-{:08x}?", fastrand::u32(..)), 1);
    let (agg_b, base_b) = aggregator_in(&text, in_bucket.path(), Some(bucket)).await;
    let (agg_f, base_f) = aggregator_in(&text, folder.path(), None).await;
    let limit = Duration::from_secs(60);
    for agg in [&agg_b, &agg_f] {
        let v = until(agg, "ours", limit, |v| v.republishes >= 1).await;
        assert!(v.republish_error.is_none(), "{v:#?}");
    }
    assert!(
        !in_bucket.path().join("ours/big.txt").exists(),
        "not in the bucket"
    );
    let (from_bucket, from_folder) = (
        format!("{base_b}rs/ours/big.txt"),
        format!("{base_f}rs/ours/big.txt"),
    );

    let part = |a: usize, b: usize| -> Answer {
        (
            206,
            Some(format!("bytes {a}-{b}/1000")),
            Some("bytes".into()),
            Some((b - a + 1).to_string()),
            body[a..=b].to_vec(),
        )
    };
    let refused = || {
        (
            416,
            Some("bytes */1000".to_owned()),
            None::<String>,
            None::<String>,
            Vec::new(),
        )
    };
    let cases: Vec<(Option<&str>, Answer)> = vec![
        (
            None,
            (
                200,
                None,
                Some("bytes".into()),
                Some("1000".into()),
                body.clone(),
            ),
        ),
        (Some("bytes=0-9"), part(0, 9)),
        (Some("bytes=100-199"), part(100, 199)),
        (Some("bytes=-50"), part(950, 999)),
        (Some("bytes=900-"), part(900, 999)),
        (Some("bytes=990-5000"), part(990, 999)),
        (Some("bytes=1000-"), refused()),
        (Some("bytes=0-1,5-6"), refused()),
    ];
    for (range, want) in cases {
        let got = get(&from_bucket, range).await;
        if want.0 == 416 {
            // The body and length of a 416 are the server's prose: status and range only.
            assert_eq!((got.0, &got.1), (want.0, &want.1), "bucket, {range:?}");
            let f = get(&from_folder, range).await;
            assert_eq!((f.0, &f.1), (want.0, &want.1), "folder, {range:?}");
            continue;
        }
        assert_eq!(got, want, "bucket, {range:?}");
        let f = get(&from_folder, range).await;
        assert_eq!(f, want, "folder, {range:?}");
    }
}
