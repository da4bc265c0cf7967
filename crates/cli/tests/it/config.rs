//! Configuration of the long-running commands (crates/cli/src/config.rs): a TOML file of flags
//! (`--config`), environment variables (`RESOURCESYNC_*`), and the precedence command line >
//! environment > file > default, seen through `--print-config` and a real `serve`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    // The test's own environment must not configure the command under test.
    for (k, _) in std::env::vars() {
        if k.starts_with("RESOURCESYNC_") && !k.starts_with("RESOURCESYNC_TEST") {
            c.env_remove(k);
        }
    }
    c
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The line of key `key` in a `--print-config` output.
fn line<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("no `{key}` in:\n{out}"))
}

#[test]
fn flag_beats_env_beats_file_beats_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("serve.toml");
    std::fs::write(
        &file,
        "# a service's configuration\n\
         listen = \"127.0.0.1:7001\"\n\
         base-url = \"http://file.example/\"\n\
         rescan-interval = 5\n\
         no-watch = true\n\
         exclude = [\"*.tmp\", \"*.bak\"]\n\
         log-format = \"json\"\n",
    )
    .expect("write");
    let o = bin()
        .args([
            "serve",
            "/srv/data",
            "--print-config",
            "--rescan-interval",
            "9",
        ])
        .arg("--config")
        .arg(&file)
        .env("RESOURCESYNC_BASE_URL", "http://env.example/")
        .env("RESOURCESYNC_RESCAN_INTERVAL", "7")
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let at = |n: usize| format!("{}:{n}", file.display());
    // The command line beats the environment and the file.
    assert_eq!(
        line(&out, "rescan-interval"),
        "rescan-interval = 9   # command line"
    );
    // The environment beats the file.
    assert_eq!(
        line(&out, "base-url"),
        "base-url = \"http://env.example/\"   # RESOURCESYNC_BASE_URL"
    );
    // The file beats the default, with its line.
    assert_eq!(
        line(&out, "listen"),
        format!("listen = \"127.0.0.1:7001\"   # {}", at(2))
    );
    assert_eq!(
        line(&out, "no-watch"),
        format!("no-watch = true   # {}", at(5))
    );
    assert_eq!(
        line(&out, "exclude"),
        format!("exclude = [\"*.tmp\", \"*.bak\"]   # {}", at(6))
    );
    // A global flag from the file.
    assert_eq!(
        line(&out, "log-format"),
        format!("log-format = \"json\"   # {}", at(7))
    );
    // Untouched: the default.
    assert_eq!(
        line(&out, "resourcelist-interval"),
        "resourcelist-interval = 60   # default"
    );
    assert_eq!(line(&out, "dir"), "dir = \"/srv/data\"   # command line");

    // Without the flag and the environment, the file's values; the output is itself a valid
    // configuration that gives the same values.
    let o = bin()
        .args(["serve", "/srv/data", "--print-config", "--config"])
        .arg(&file)
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(
        line(&out, "rescan-interval"),
        format!("rescan-interval = 5   # {}", at(4))
    );
    assert_eq!(
        line(&out, "base-url"),
        format!("base-url = \"http://file.example/\"   # {}", at(3))
    );
    let again = dir.path().join("again.toml");
    std::fs::write(&again, &out).expect("write");
    let o = bin()
        .args(["serve", "--print-config", "--config"])
        .arg(&again)
        .output()
        .expect("run");
    let (out2, err) = text(&o);
    let n = out
        .lines()
        .position(|l| l.starts_with("base-url = "))
        .expect("base-url")
        + 1;
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(
        line(&out2, "base-url"),
        format!(
            "base-url = \"http://file.example/\"   # {}:{n}",
            again.display()
        )
    );
}

#[test]
fn an_unknown_key_names_the_file_the_line_and_the_valid_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("hub.toml");
    std::fs::write(&file, "listen = \"127.0.0.1:0\"\n\nlisten-adress = \"x\"\n").expect("write");
    let o = bin()
        .args(["hub", "--config"])
        .arg(&file)
        .output()
        .expect("run");
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:3: unknown key `listen-adress` for `resourcesync hub`",
            file.display()
        )),
        "{err}"
    );
    let valid = err.split("valid keys: ").nth(1).expect("the valid keys");
    for k in [
        "listen",
        "public-url",
        "lease",
        "allow-topic",
        "log-format",
        "access-log",
    ] {
        assert!(valid.split(", ").any(|v| v.trim() == k), "{k} in {valid}");
    }
    assert!(!valid.contains("print-config"), "{valid}");
}

#[test]
fn a_value_of_the_wrong_type_names_the_file_and_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("hub.toml");
    for (body, line, what) in [
        (
            "json = true\nlease = \"ten days\"\n",
            2,
            "`lease`: invalid digit",
        ),
        (
            "json = 1\n",
            1,
            "`json`: expected true or false, found integer",
        ),
        (
            "private-addresses = \"sometimes\"\n",
            1,
            "`private-addresses`: expected one of auto, allow, deny",
        ),
        ("lease = [1\n", 1, ""),
    ] {
        std::fs::write(&file, body).expect("write");
        let o = bin()
            .args(["hub", "--config"])
            .arg(&file)
            .output()
            .expect("run");
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{body}: {err}");
        assert!(
            err.contains(&format!("{}:{line}: {what}", file.display())),
            "{body}: {err}"
        );
    }
}

#[test]
fn serve_listens_where_the_environment_says() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.txt"), "hello\n").expect("write");
    // No --listen: the default would be 127.0.0.1:8080.
    let mut child = bin()
        .arg("serve")
        .arg(dir.path())
        .env("RESOURCESYNC_LISTEN", "127.0.0.1:0")
        .env("RESOURCESYNC_NO_WATCH", "true")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(60));
    let _ = child.kill();
    let _ = child.wait();
    let first = first.expect("a 'serving' line");
    let url = first.rsplit(' ').next().expect("url");
    let addr = url
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .expect("an http URL");
    assert!(addr.starts_with("127.0.0.1:"), "{first}");
    assert_ne!(addr, "127.0.0.1:8080", "{first}");
    assert_ne!(addr, "127.0.0.1:0", "{first}");
}

/// `aggregate`: its flags as top-level keys of its Sources file, beside `[limits]` and
/// `[[source]]` (which the service reads); the same precedence; an unknown top-level key is
/// named with its line; and the service starts with what the file says (`serve`, `json`).
#[test]
fn aggregate_reads_its_flags_from_its_sources_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("aggregate.toml");
    std::fs::write(
        &file,
        "serve = \"127.0.0.1:0\"\n\
         grace = 7\n\
         json = true\n\
         \n\
         [limits]\n\
         concurrency = 2\n\
         \n\
         [[source]]\n\
         name = \"nowhere\"\n\
         url = \"http://127.0.0.1:9/\"\n\
         schedule = \"1h\"\n",
    )
    .expect("write");
    let o = bin()
        .args(["aggregate", "--print-config", "--config"])
        .arg(&file)
        .env("RESOURCESYNC_GRACE", "9")
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let at = |n: usize| format!("{}:{n}", file.display());
    assert_eq!(
        line(&out, "serve"),
        format!("serve = \"127.0.0.1:0\"   # {}", at(1))
    );
    assert_eq!(line(&out, "grace"), "grace = 9   # RESOURCESYNC_GRACE");
    assert!(
        !out.contains("concurrency"),
        "the tables are the service's: {out}"
    );

    // The service takes them: it serves (from the file) and prints its start line as JSON.
    let mut child = bin()
        .args(["aggregate", "--config"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("start line");
    let _ = child.kill();
    let _ = child.wait();
    let v: serde_json::Value = serde_json::from_str(&first).expect("a JSON start line");
    assert!(
        v["serve"]
            .as_str()
            .is_some_and(|s| s.starts_with("http://127.0.0.1:")),
        "{v}"
    );

    // An unknown top-level key: named with its line, the service not started.
    std::fs::write(&file, "serve = \"127.0.0.1:0\"\nstor = \"copies\"\n[[source]]\nname = \"a\"\nurl = \"http://127.0.0.1:9/\"\n")
        .expect("write");
    let o = bin()
        .args(["aggregate", "--config"])
        .arg(&file)
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains(&format!("{}: unknown key `stor`", at(2))),
        "{err}"
    );
}

/// A boolean variable takes 1/0, yes/no, true/false, on/off in any case (seen through
/// `--print-config`); anything else is refused naming the VARIABLE, not the flag.
#[test]
fn boolean_variables_take_the_usual_words_and_a_bad_one_names_the_variable() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (value, want) in [
        ("1", "true"),
        ("0", "false"),
        ("YES", "true"),
        ("no", "false"),
        ("True", "true"),
        ("off", "false"),
        ("On", "true"),
    ] {
        let o = bin()
            .arg("serve")
            .arg(dir.path())
            .arg("--print-config")
            .env("RESOURCESYNC_NO_WATCH", value)
            .output()
            .expect("run");
        let (out, err) = text(&o);
        assert!(o.status.success(), "{value}: {err}");
        assert!(
            line(&out, "no-watch").starts_with(&format!("no-watch = {want}")),
            "{value}: {out}"
        );
    }
    let o = bin()
        .arg("serve")
        .arg(dir.path())
        .arg("--print-config")
        .env("RESOURCESYNC_NO_WATCH", "maybe")
        .output()
        .expect("run");
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("RESOURCESYNC_NO_WATCH=\"maybe\": not a boolean; set it to 1/0, yes/no"),
        "{err}"
    );
    assert!(!err.contains("--no-watch"), "{err}");
}

#[test]
fn publish_reads_its_flags_from_a_file_like_the_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(data.join("a.txt"), "alpha").expect("write");
    std::fs::write(data.join("b.tmp"), "scratch").expect("write");
    let file = dir.path().join("publish.toml");
    std::fs::write(
        &file,
        format!(
            "dir = {:?}\nbase-url = \"http://file.example/\"\nexclude = [\"*.tmp\"]\n",
            data.to_str().expect("utf-8")
        ),
    )
    .expect("write");
    let o = bin()
        .args(["publish", "--config"])
        .arg(&file)
        .arg("--print-config")
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(line(&out, "base-url").ends_with("publish.toml:2"), "{out}");
    // The file's DIR, base URL and patterns, as if they were flags.
    let o = bin()
        .args(["publish", "--config"])
        .arg(&file)
        .output()
        .expect("run");
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let list: String = walk(&data.join("resourcesync"))
        .iter()
        .filter(|p| p.to_string_lossy().contains("resourcelist"))
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect();
    assert!(list.contains("http://file.example/a.txt"), "{list}");
    assert!(!list.contains("b.tmp"), "{list}");
    // The environment beats the file, as for the other commands.
    let o = bin()
        .args(["publish", "--config"])
        .arg(&file)
        .arg("--print-config")
        .env("RESOURCESYNC_BASE_URL", "http://env.example/")
        .output()
        .expect("run");
    let (out, _) = text(&o);
    assert_eq!(
        line(&out, "base-url"),
        "base-url = \"http://env.example/\"   # RESOURCESYNC_BASE_URL"
    );
    // A key that is no flag of publish is named with its line.
    std::fs::write(&file, "dir = \"x\"\nlisten = \"127.0.0.1:1\"\n").expect("write");
    let o = bin()
        .args(["publish", "--config"])
        .arg(&file)
        .output()
        .expect("run");
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("publish.toml:2: unknown key `listen` for `resourcesync publish`"),
        "{err}"
    );
}

/// The files under `dir`, at any depth.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn each_commands_help_lists_its_own_options_before_the_global_ones() {
    for cmd in ["sync", "serve", "publish", "hub", "aggregate", "audit"] {
        let o = bin().args([cmd, "--help"]).output().expect("run");
        let (out, _) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{cmd}: {out}");
        let options = out
            .find("\nOptions:\n")
            .unwrap_or_else(|| panic!("{cmd}: no Options section:\n{out}"));
        let globals = out
            .find("\nGlobal options:\n")
            .unwrap_or_else(|| panic!("{cmd}: no Global options section:\n{out}"));
        assert!(options < globals, "{cmd}: globals first:\n{out}");
        // The first option listed is the command's own, not -v/-q or a log flag.
        let first = out[options + "\nOptions:\n".len()..]
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start();
        for global in ["-v", "-q", "--log-format", "--log-file", "--access-log"] {
            assert!(!first.starts_with(global), "{cmd}: first option {first:?}");
        }
        // Every global flag is under its heading.
        let global_part = &out[globals..];
        for global in [
            "--verbose",
            "--quiet",
            "--log-format",
            "--log-file",
            "--access-log",
        ] {
            assert!(
                global_part.contains(global),
                "{cmd}: no {global} in {global_part}"
            );
            assert!(
                !out[..globals].contains(&format!(" {global}")),
                "{cmd}: {global} among the command's own options"
            );
        }
    }
}
