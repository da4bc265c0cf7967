//! The page for operators in a real browser: headless Chromium (Debian's `chromium`, found or
//! installed by scripts/chromium.sh, its path in RESOURCESYNC_TEST_CHROMIUM) loads `/` and a
//! Source's page while one Source follows and one fails; the DOM it renders says so, and it
//! takes a screenshot (kept at $RESOURCESYNC_SCREENSHOT when set: the picture in docs/usage.md), in
//! which the page's own style shows, its Content-Security-Policy notwithstanding.

use crate::service::start_local;
use std::path::Path;
use std::time::Duration;

use resourcesync_aggregate::status::Phase;
use resourcesync_testkit::Server;

use super::service::{hand_written, until};

use resourcesync_testkit::chromium::headless;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_renders_in_chromium() {
    let good = hand_written().await;
    let broken = Server::empty().await;
    let store = tempfile::tempdir().expect("store");
    let text = format!(
        "[[source]]\nname = \"museum\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1h\"\n\n\
         [[source]]\nname = \"archive\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1h\"\n",
        good.base, broken.base
    );
    let agg = start_local(&text, store.path());
    let limit = Duration::from_secs(60);
    until(&agg, "museum", limit, |v| v.phase == Phase::Following).await;
    until(&agg, "archive", limit, |v| v.phase == Phase::Failing).await;
    let web = resourcesync_testkit::serve(resourcesync_aggregate::web::router(agg.clone())).await;

    let url = format!("http://{web}/");
    let dom = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || headless(&url, &["--dump-dom"]))
            .await
            .expect("chromium task")
    };
    // The DOM as the browser built it: both Sources, each with its state.
    assert!(
        dom.contains("<title>ResourceSync aggregator</title>"),
        "{dom}"
    );
    assert!(dom.contains("href=\"sources/museum\""), "{dom}");
    assert!(dom.contains("class=\"following\">following</td>"), "{dom}");
    assert!(dom.contains("class=\"failing\">failing since"), "{dom}");
    assert!(dom.contains("2 Sources, 1 failing"), "{dom}");
    let one = {
        let url = format!("http://{web}/sources/archive");
        tokio::task::spawn_blocking(move || headless(&url, &["--dump-dom"]))
            .await
            .expect("chromium task")
    };
    assert!(
        one.contains("Recent syncs and failures") && one.contains("404"),
        "{one}"
    );

    let shot_dir = tempfile::tempdir().expect("shot");
    let shot = shot_dir.path().join("aggregate.png");
    {
        let (url, shot) = (url.clone(), shot.clone());
        tokio::task::spawn_blocking(move || {
            headless(
                &url,
                &[
                    "--window-size=1280,400",
                    &format!("--screenshot={}", shot.display()),
                ],
            )
        })
        .await
        .expect("chromium task");
    }
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 5_000,
        "{} bytes",
        png.len()
    );
    // The page's inline style applies under its Content-Security-Policy (a policy that
    // blocked it would leave the text black): the failing Source's state is red (#b00020).
    assert!(
        red_pixels(&png) > 20,
        "no red text: the page's style did not apply"
    );
    if let Ok(keep) = std::env::var("RESOURCESYNC_SCREENSHOT") {
        std::fs::copy(&shot, Path::new(&keep)).expect("keep the screenshot");
    }
    agg.drain(Duration::from_secs(5)).await;
}

/// Pixels of a PNG close to the page's red (#b00020).
fn red_pixels(png: &[u8]) -> usize {
    let mut reader = png::Decoder::new(std::io::Cursor::new(png))
        .read_info()
        .expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let step = match info.color_type {
        png::ColorType::Rgba => 4,
        png::ColorType::Rgb => 3,
        other => panic!("colour type {other:?}"),
    };
    buf[..info.buffer_size()]
        .chunks_exact(step)
        .filter(|p| p[0].abs_diff(0xb0) < 40 && p[1] < 50 && p[2].abs_diff(0x20) < 40)
        .count()
}

/// The versions a Source keeps (`versions = true`) and their bytes, on the page as Chromium
/// renders it: a figure per Source, `–` for a Source that keeps none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_and_their_bytes_show_in_chromium() {
    let src = hand_written().await;
    let store = tempfile::tempdir().expect("store");
    let text = format!(
        "[[source]]\nname = \"kept\"\nurl = \"{b}.well-known/resourcesync\"\nschedule = \"1h\"\n\
         versions = true\n\n\
         [[source]]\nname = \"plain\"\nurl = \"{b}.well-known/resourcesync\"\nschedule = \"1h\"\n",
        b = src.base
    );
    let agg = start_local(&text, store.path());
    let limit = Duration::from_secs(60);
    // The two resources of the hand-written Source: 15 and 7 bytes, one version each.
    until(&agg, "kept", limit, |v| v.versions == Some(2)).await;
    let v = until(&agg, "plain", limit, |v| v.phase == Phase::Following).await;
    assert_eq!((v.versions, v.version_bytes), (None, None), "{v:#?}");
    let web = resourcesync_testkit::serve(resourcesync_aggregate::web::router(agg.clone())).await;
    let dump = |path: &str| {
        let url = format!("http://{web}/{path}");
        tokio::task::spawn_blocking(move || headless(&url, &["--dump-dom"]))
    };
    let dom = dump("").await.expect("chromium task");
    assert!(
        dom.contains("<th>versions</th><th>bytes of versions</th>"),
        "{dom}"
    );
    let row = |name: &str| {
        let start = dom
            .find(&format!("href=\"sources/{name}\""))
            .unwrap_or_else(|| panic!("no row of {name}: {dom}"));
        let end = dom[start..].find("</tr>").expect("row end") + start;
        dom[start..end].to_owned()
    };
    // resources, bytes, versions, bytes of versions.
    let kept = row("kept");
    assert!(
        kept.contains("<td class=\"n\">2</td><td class=\"n\">22</td><td class=\"n\">2</td><td class=\"n\">22</td>"),
        "{kept}"
    );
    let plain = row("plain");
    assert!(
        plain.contains("<td class=\"n\">22</td><td class=\"n\">–</td><td class=\"n\">–</td>"),
        "{plain}"
    );
    let one = dump("sources/kept").await.expect("chromium task");
    assert!(
        one.contains("<th>versions kept</th><td>2</td>")
            && one.contains("<th>bytes of versions</th><td>22</td>"),
        "{one}"
    );
    agg.drain(Duration::from_secs(5)).await;
}
