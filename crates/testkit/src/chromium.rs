//! Headless Chromium for the tests of pages (Debian's `chromium`, found or installed by
//! scripts/chromium.sh; its path in `RESOURCESYNC_TEST_CHROMIUM`, set by scripts/test.sh):
//! a test that needs it fails loudly when it is not there.

use std::process::Command;

/// The path of Chromium; panics, saying how to get it, when `RESOURCESYNC_TEST_CHROMIUM` is
/// not set.
pub fn chromium() -> String {
    std::env::var("RESOURCESYNC_TEST_CHROMIUM").unwrap_or_else(|_| {
        panic!(
            "RESOURCESYNC_TEST_CHROMIUM is not set: run the tests with scripts/test.sh, which \
             finds or installs Chromium (scripts/chromium.sh)"
        )
    })
}

/// Runs headless Chromium on `url` with `args` (`--dump-dom`, `--screenshot=PATH`, …), with a
/// profile of its own and no network of its own (no updates, no sync); its standard output.
pub fn headless(url: &str, args: &[&str]) -> String {
    let profile = tempfile::tempdir().expect("profile");
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
