//! The sections of each man page that clap has no place for: EXAMPLES, EXIT STATUS,
//! ENVIRONMENT (the `RESOURCESYNC_*` variables of the command, from its clap definition, and
//! the others it reads) and FILES. Written as roff and put before the VERSION section of the
//! page clap_mangen renders (see [`crate::manual`]).

use clap::Command;

/// One command's own sections.
struct Extra {
    /// (what it does, the command line).
    examples: &'static [(&'static str, &'static str)],
    /// (status, meaning).
    exit: &'static [(&'static str, &'static str)],
    /// Variables read besides the flags' own (name, meaning).
    environment: &'static [(&'static str, &'static str)],
    /// (path, what it is).
    files: &'static [(&'static str, &'static str)],
}

const OK_OR_ERROR: &[(&str, &str)] = &[("0", "done"), ("2", "error: bad arguments, I/O")];

const RUNS_UNTIL_STOPPED: &[(&str, &str)] = &[
    ("0", "stopped by SIGINT or SIGTERM after a clean shutdown"),
    (
        "2",
        "error: bad arguments or configuration, address in use, state unreadable",
    ),
];

const LOG: (&str, &str) = (
    "RUST_LOG",
    "log filter (tracing-subscriber syntax); overrides -q/-v; access=info turns the access log on",
);
const PROXY: (&str, &str) = (
    "HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY",
    "proxies for the requests of the command line (lower case too)",
);
const AWS: (&str, &str) = (
    "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION",
    "credentials and region of an s3:// URL that names none",
);

/// Each command's own sections, by command name.
const EXTRAS: &[(&str, Extra)] = &[
    (
        "demo",
        Extra {
            examples: &[
                ("The whole job on this machine", "resourcesync demo"),
                (
                    "Keep the two directories to look at them",
                    "resourcesync demo --keep /tmp/rs-demo",
                ),
            ],
            exit: &[
                ("0", "the final audit found the copy in sync"),
                ("1", "the copy is not in sync"),
                ("2", "error"),
            ],
            environment: &[],
            files: &[("DIR/source, DIR/destination", "kept with --keep DIR")],
        },
    ),
    (
        "validate",
        Extra {
            examples: &[
                ("Check documents", "resourcesync validate changelist.xml"),
                (
                    "Check a published document",
                    "resourcesync validate https://data.example.org/.well-known/resourcesync",
                ),
                ("List every rule", "resourcesync validate --rules"),
            ],
            exit: &[
                ("0", "every document valid (warnings allowed)"),
                ("1", "some document invalid"),
                ("2", "error: a document could not be read"),
            ],
            environment: &[PROXY],
            files: &[],
        },
    ),
    (
        "inspect",
        Extra {
            examples: &[(
                "Summarize a Change List",
                "resourcesync inspect https://data.example.org/resourcesync/changelist.xml",
            )],
            exit: &[
                ("0", "the document is valid"),
                ("1", "the document is invalid"),
                ("2", "error: it could not be read"),
            ],
            environment: &[PROXY],
            files: &[],
        },
    ),
    (
        "explore",
        Extra {
            examples: &[(
                "The tree of a Source's documents",
                "resourcesync explore https://data.example.org/",
            )],
            exit: &[
                ("0", "every document valid"),
                ("1", "some document invalid or unreadable"),
                ("2", "nothing found, or error"),
            ],
            environment: &[PROXY],
            files: &[],
        },
    ),
    (
        "publish",
        Extra {
            examples: &[
                (
                    "Publish a folder a web server serves at the URL",
                    "resourcesync publish /srv/www/data --base-url https://data.example.org/",
                ),
                (
                    "With the flags from a file",
                    "resourcesync publish --config /etc/resourcesync/publish.toml",
                ),
                (
                    "The rows of a PostgreSQL table",
                    "resourcesync publish work/ --inventory 'postgres://app@db/repo?table=resources' --base-url https://rs.example/",
                ),
            ],
            exit: &[
                ("0", "published"),
                (
                    "2",
                    "error: bad arguments, another base URL without --move, I/O",
                ),
            ],
            environment: &[AWS],
            files: &[
                (
                    "DIR/.resourcesync/state.sqlite",
                    "the Source's state (--state)",
                ),
                (
                    "DIR/.well-known/resourcesync, DIR/resourcesync/",
                    "the documents (--out)",
                ),
            ],
        },
    ),
    (
        "serve",
        Extra {
            examples: &[
                (
                    "Serve a folder",
                    "resourcesync serve /srv/data --listen 127.0.0.1:8080 --base-url https://data.example.org/",
                ),
                (
                    "With a hub in the same process",
                    "resourcesync serve /srv/data --hub embedded",
                ),
                (
                    "With the flags from a file",
                    "resourcesync serve --config /etc/resourcesync/serve.toml",
                ),
            ],
            exit: RUNS_UNTIL_STOPPED,
            environment: &[LOG, AWS],
            files: &[
                (
                    "DIR/.resourcesync/state.sqlite",
                    "the Source's state (--state)",
                ),
                ("DIR/.resourcesync/www/", "the documents (--out)"),
                (
                    "/etc/resourcesync/serve.toml",
                    "a configuration file, as packaged (--config)",
                ),
            ],
        },
    ),
    (
        "sync",
        Extra {
            examples: &[
                (
                    "Mirror a Source",
                    "resourcesync sync https://data.example.org/ /srv/mirror --delete",
                ),
                (
                    "Keep following it",
                    "resourcesync sync https://data.example.org/ /srv/mirror --watch",
                ),
                (
                    "From cron: nothing printed on success",
                    "resourcesync sync -q https://data.example.org/ /srv/mirror",
                ),
            ],
            exit: &[
                ("0", "every resource synchronized"),
                ("1", "some resource failed (the next run retries it)"),
                ("2", "error: Source not found, bad arguments, I/O"),
            ],
            environment: &[PROXY],
            files: &[(
                "DEST/.resourcesync/state.sqlite",
                "the Destination's state (--state)",
            )],
        },
    ),
    (
        "audit",
        Extra {
            examples: &[
                (
                    "Is the copy in sync?",
                    "resourcesync audit https://data.example.org/ /srv/mirror",
                ),
                (
                    "Which copies differ from what this Destination held at a time (sync --versions)?",
                    "resourcesync audit https://data.example.org/ /srv/mirror --at 2026-12-01T10:00:00Z",
                ),
            ],
            exit: &[
                ("0", "in sync"),
                ("1", "missing, extra or different copies"),
                ("2", "error"),
            ],
            environment: &[PROXY],
            files: &[(
                "DEST/.resourcesync/state.sqlite",
                "the Destination's state (--state)",
            )],
        },
    ),
    (
        "restore",
        Extra {
            examples: &[(
                "The copies as this Destination held them at a time, into a new directory",
                "resourcesync restore https://data.example.org/ /srv/mirror /srv/mirror-dec-1 --at 2026-12-01T10:00:00Z",
            )],
            exit: &[
                ("0", "every resource of that time restored"),
                (
                    "1",
                    "some could not be (a kept body missing or not its digest)",
                ),
                ("2", "error (OUT not empty, OUT inside DEST, no state)"),
            ],
            environment: &[PROXY],
            files: &[
                (
                    "DEST/.resourcesync/state.sqlite",
                    "the Destination's state (--state): its versions",
                ),
                (
                    "DEST/.resourcesync/versions/sha256/",
                    "the kept bodies, read and verified against their sha-256",
                ),
            ],
        },
    ),
    (
        "simulate",
        Extra {
            examples: &[
                (
                    "One configuration",
                    "resourcesync simulate --strategy incremental --resources 1000",
                ),
                (
                    "The model paper's grid",
                    "resourcesync simulate --grid paper --out results/",
                ),
            ],
            exit: OK_OR_ERROR,
            environment: &[],
            files: &[("OUT/simulate.csv, OUT/grid.csv", "the results (--out)")],
        },
    ),
    (
        "aggregate",
        Extra {
            examples: &[(
                "Follow the Sources of a file, with a page",
                "resourcesync aggregate --config aggregate.toml --serve 127.0.0.1:8095",
            )],
            exit: RUNS_UNTIL_STOPPED,
            environment: &[LOG, PROXY, AWS],
            files: &[
                (
                    "aggregate.toml",
                    "the Sources and limits ([[source]], [limits]) and the flags",
                ),
                (
                    "copies/NAME/",
                    "the copies of each Source, beside the file (--store)",
                ),
                ("work/", "the state, beside the file (--state)"),
            ],
        },
    ),
    (
        "hub",
        Extra {
            examples: &[(
                "A hub for the Sources of this network",
                "resourcesync hub --listen 127.0.0.1:8090 --public-url https://hub.example.org/",
            )],
            exit: RUNS_UNTIL_STOPPED,
            environment: &[LOG],
            files: &[(
                "resourcesync-hub.sqlite",
                "subscriptions and pending deliveries (--state)",
            )],
        },
    ),
    (
        "completions",
        Extra {
            examples: &[(
                "Bash completions",
                "resourcesync completions bash > /etc/bash_completion.d/resourcesync",
            )],
            exit: OK_OR_ERROR,
            environment: &[],
            files: &[],
        },
    ),
    (
        "man",
        Extra {
            examples: &[(
                "Every page",
                "resourcesync man --out /usr/local/share/man/man1",
            )],
            exit: OK_OR_ERROR,
            environment: &[],
            files: &[],
        },
    ),
];

/// The own sections of the command `name`, if it has any.
fn extra(name: &str) -> Option<&'static Extra> {
    EXTRAS.iter().find(|(n, _)| *n == name).map(|(_, e)| e)
}

/// Escapes text for roff: backslashes and dashes, and a leading `.` or `'`.
fn roff(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// A tagged paragraph: `tag` in bold, then `text`.
fn item(out: &mut String, tag: &str, text: &str) {
    out.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", roff(tag), roff(text)));
}

/// The `RESOURCESYNC_*` variables of `cmd`'s flags and the global ones of `root`.
fn flag_variables(root: &Command, cmd: &Command) -> Vec<(String, String)> {
    let globals = root.get_arguments().filter(|a| a.is_global_set());
    cmd.get_arguments()
        .filter(|a| !a.is_global_set())
        .chain(globals)
        .filter_map(|a| {
            let var = a.get_env()?.to_string_lossy().into_owned();
            Some((var, format!("sets --{}", a.get_long().unwrap_or_default())))
        })
        .collect()
}

/// The sections of the page of the command `name` (a command of `root`), as roff.
pub(crate) fn sections(root: &Command, name: &str) -> String {
    let mut out = String::new();
    let Some(cmd) = root.find_subcommand(name) else {
        out.push_str(".SH \"EXIT STATUS\"\n");
        item(&mut out, "0", "ok: valid, in sync, done");
        item(
            &mut out,
            "1",
            "differences, invalid documents, failed resources",
        );
        item(&mut out, "2", "error: could not read, bad arguments");
        out.push_str(".SH \"SEE ALSO\"\nEach command has its page: \\fBresourcesync\\-sync\\fR(1), \\fBresourcesync\\-serve\\fR(1), …\n");
        return out;
    };
    let Some(e) = extra(name) else {
        return out;
    };
    if !e.examples.is_empty() {
        out.push_str(".SH EXAMPLES\n");
        for (what, line) in e.examples {
            out.push_str(&format!(
                ".PP\n{}:\n.PP\n.RS 4\n.nf\n{}\n.fi\n.RE\n",
                roff(what),
                roff(line)
            ));
        }
    }
    out.push_str(".SH \"EXIT STATUS\"\n");
    for (status, meaning) in e.exit {
        item(&mut out, status, meaning);
    }
    let vars = flag_variables(root, cmd);
    if !vars.is_empty() || !e.environment.is_empty() {
        out.push_str(".SH ENVIRONMENT\n");
        if !vars.is_empty() {
            out.push_str(
                "Each flag is also read from a variable (the command line wins over it, \
                 it over a configuration file):\n",
            );
        }
        for (var, meaning) in &vars {
            item(&mut out, var, meaning);
        }
        for (var, meaning) in e.environment {
            item(&mut out, var, meaning);
        }
    }
    if !e.files.is_empty() {
        out.push_str(".SH FILES\n");
        for (path, what) in e.files {
            item(&mut out, path, what);
        }
    }
    out
}

/// Puts `extra` into the rendered page `page`, before its VERSION section (or at its end).
pub(crate) fn insert(page: &str, extra: &str) -> String {
    match page.find("\n.SH VERSION") {
        Some(at) => format!("{}\n{}{}", &page[..at], extra, &page[at + 1..]),
        None => format!("{page}{extra}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_its_sections() {
        let root = crate::config::command();
        for sub in root.get_subcommands().filter(|s| s.get_name() != "help") {
            let s = sections(&root, sub.get_name());
            for h in [".SH EXAMPLES", ".SH \"EXIT STATUS\""] {
                assert!(s.contains(h), "{}: no {h}", sub.get_name());
            }
        }
        let sync = sections(&root, "sync");
        assert!(sync.contains(".SH ENVIRONMENT"), "{sync}");
        assert!(sync.contains("RESOURCESYNC_DELETE"), "{sync}");
        assert!(sync.contains("RESOURCESYNC_LOG_FORMAT"), "{sync}");
        assert!(sync.contains(".SH FILES"), "{sync}");
        assert!(sync.contains("DEST/.resourcesync/state.sqlite"), "{sync}");
        // Not another command's variables.
        assert!(!sync.contains("RESOURCESYNC_LISTEN"), "{sync}");
    }

    #[test]
    fn text_is_escaped_for_roff() {
        assert_eq!(roff(".x -a \\b"), "\\&.x \\-a \\eb");
        assert_eq!(
            insert("a\n.SH VERSION\nv\n", "X\n"),
            "a\nX\n.SH VERSION\nv\n"
        );
        assert_eq!(insert("a\n", "X\n"), "a\nX\n");
    }
}
