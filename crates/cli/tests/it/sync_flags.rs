//! `sync` and `audit` flags as an rsync user reads them: `-q` (nothing on success), `--delete`
//! (files no resource maps to go too), `--include`/`--exclude` over names as written, and
//! counts that add up to the Source's resources.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::*;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(args)
        .output()
        .expect("run resourcesync")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(o)))
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// `-q`: nothing at all on success (cron mails nothing); a failure or a difference is told on
/// standard error, with exit status 1.
#[test]
fn quiet_sync_and_audit_say_nothing_on_success_and_differences_on_stderr() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha"), ("b 1.txt", b"bravo")]);
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);

    for args in [
        vec!["-q", "sync", &server.base, p(&dest)],
        vec!["sync", "-q", &server.base, p(&dest)],
        vec!["-q", "audit", &server.base, p(&dest)],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        assert!(o.stdout.is_empty(), "{args:?}: {}", text(&o));
        assert!(o.stderr.is_empty(), "{args:?}: {}", text(&o));
    }

    std::fs::write(dest.join("a.txt"), b"ALPHA").expect("tamper");
    let o = run(&["-q", "audit", &server.base, p(&dest)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("different a.txt"),
        "{}",
        text(&o)
    );

    let out2 = tmp();
    let dest2 = dest_in(&out2);
    server.fault("/a.txt", Fault::Body(b"ALPHA".to_vec()));
    let o = run(&["-q", "sync", &server.base, p(&dest2), "--retries", "0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("failed"),
        "{}",
        text(&o)
    );
    server.clear_faults();

    // Without -q the summary is on standard output, as before.
    let o = run(&["sync", &server.base, p(&dest)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("created"),
        "{}",
        text(&o)
    );
}
