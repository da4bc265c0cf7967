//! docs/configuration.md is true: its tables of the keys of each command's configuration file
//! are generated from the clap definitions (the same ones [`crate::config`] reads the file
//! with), and this test fails when they are not current. `RESOURCESYNC_BLESS=1 cargo test -p
//! resourcesync-cli --bin resourcesync config_reference` writes them again
//! (scripts/generate-manual.sh does).

use clap::{Arg, ArgAction, Command};

/// The commands that read a configuration file (`--config FILE`), in the order documented.
const COMMANDS: &[&str] = &["publish", "serve", "sync", "hub", "aggregate"];

const BEGIN: &str = "<!-- BEGIN GENERATED: the keys of each command, from the clap definitions \
                     (crates/cli/src/config_reference.rs) -->";
const END: &str = "<!-- END GENERATED -->";

/// Text for a table cell: one line, no `|`.
fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The first sentence of the help of `arg`.
fn meaning(arg: &Arg) -> String {
    let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
    let help = cell(&help);
    match help.find(". ") {
        Some(at) => help[..=at].to_owned(),
        None => help,
    }
}

/// What the key's value is: `true`/`false`, a value, or a list of values.
fn value(arg: &Arg) -> String {
    let name = arg
        .get_value_names()
        .and_then(|n| n.first())
        .map_or_else(|| arg.get_id().as_str().to_uppercase(), ToString::to_string);
    let choices: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|p| !p.is_hide_set())
        .map(|p| p.get_name().to_owned())
        .collect();
    let name = if choices.is_empty() {
        name
    } else {
        choices.join(" \\| ")
    };
    match arg.get_action() {
        ArgAction::SetTrue | ArgAction::SetFalse => "boolean".to_owned(),
        ArgAction::Append => format!("list of {name}"),
        _ => name,
    }
}

fn default(arg: &Arg) -> String {
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        return "false".to_owned();
    }
    let d: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if d.is_empty() {
        "—".to_owned()
    } else {
        format!("`{}`", d.join(", "))
    }
}

/// The rows of `args`: key, value, default, flag, variable, meaning.
fn table(args: &[&Arg]) -> String {
    let mut out = String::from(
        "| key | value | default | flag | variable | meaning |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    for a in args {
        let (key, flag) = match a.get_long() {
            Some(l) => (l.to_owned(), format!("`--{l}`")),
            None => (a.get_id().as_str().replace('_', "-"), "argument".to_owned()),
        };
        let var = a
            .get_env()
            .map_or_else(|| "—".to_owned(), |v| format!("`{}`", v.to_string_lossy()));
        out.push_str(&format!(
            "| `{key}` | {} | {} | {flag} | {var} | {} |\n",
            value(a),
            default(a),
            meaning(a)
        ));
    }
    out
}

/// Whether an argument is a key of the file (not help, version, `--config`, `--print-config`).
fn is_key(a: &Arg) -> bool {
    !a.is_hide_set()
        && !matches!(
            a.get_id().as_str(),
            "help" | "version" | "config" | "print_config"
        )
        && !matches!(
            a.get_action(),
            ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
        )
}

/// The generated part of docs/configuration.md.
fn generated(root: &Command) -> String {
    let mut out = format!("{BEGIN}\n\n");
    for name in COMMANDS {
        let Some(cmd) = root.find_subcommand(name) else {
            continue;
        };
        let args: Vec<&Arg> = cmd
            .get_arguments()
            .filter(|a| !a.is_global_set() && is_key(a))
            .collect();
        out.push_str(&format!(
            "### `resourcesync {name} --config FILE`\n\n{}\n",
            table(&args)
        ));
    }
    let globals: Vec<&Arg> = root
        .get_arguments()
        .filter(|a| a.is_global_set() && is_key(a))
        .collect();
    out.push_str(&format!(
        "### Keys of every command's file (the global flags)\n\n{}\n{END}",
        table(&globals)
    ));
    out
}

#[test]
fn docs_configuration_lists_every_key_of_every_command() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let now = generated(&crate::config::command());
    let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("{}: no generated part ({BEGIN} … {END})", path.display());
    };
    let current = &doc[b..e + END.len()];
    if current == now {
        return;
    }
    if std::env::var_os("RESOURCESYNC_BLESS").is_some() {
        let text = format!("{}{now}{}", &doc[..b], &doc[e + END.len()..]);
        std::fs::write(&path, text).expect("writing docs/configuration.md");
        return;
    }
    panic!(
        "docs/configuration.md is out of date with the flags: run \
         RESOURCESYNC_BLESS=1 cargo test -p resourcesync-cli --bin resourcesync config_reference"
    );
}

#[test]
fn every_command_with_a_file_is_documented() {
    let root = crate::config::command();
    for sub in root.get_subcommands() {
        let reads_file = sub.get_arguments().any(|a| a.get_id() == "print_config");
        assert_eq!(
            reads_file,
            COMMANDS.contains(&sub.get_name()),
            "{}",
            sub.get_name()
        );
    }
}
