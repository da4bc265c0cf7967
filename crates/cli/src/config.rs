//! Configuration of the long-running commands, from the clap definitions and nothing else.
//!
//! Every flag of `publish`, `serve`, `hub`, `sync` and `aggregate` (and the global ones) is also read from
//! an environment variable, `RESOURCESYNC_` and the long name in capitals with `_` for `-`
//! (`--base-url`: `RESOURCESYNC_BASE_URL`). A command with `--config FILE` and
//! `--print-config` (see [`ConfigArgs`]) also reads an optional TOML file whose keys are its
//! long flags (`listen = "…"`, `base-url = "…"`), its positional arguments by name (`dir`,
//! `url`, `dest`) and the global flags (`log-format`, …). The precedence is the command line,
//! then the environment, then the file, then the built-in default: the file's values become
//! the defaults of the clap command before it parses, so clap's own order (command line >
//! environment > default) does the rest. `--print-config` prints the effective values, each
//! with where it came from, credentials redacted (see [`secret_bearing`]).
//!
//! `aggregate`'s `--config` is its Sources file (crates/aggregate): the same file carries its
//! flags as top-level keys (`store = "…"`, `serve = "…"`), beside the `[limits]` and
//! `[[source]]` tables, which are the service's ([`TABLES`]) and are left to it here.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command, CommandFactory, FromArgMatches};

use crate::EXIT_ERROR;

/// The commands whose flags are also read from the environment.
const ENV_COMMANDS: &[&str] = &["publish", "serve", "hub", "sync", "aggregate"];

/// The tables of a command's file that are not flags: `aggregate`'s Sources and limits,
/// read by crates/aggregate.
const TABLES: &[(&str, &[&str])] = &[("aggregate", &["limits", "source"])];

/// Prefix of the environment variables.
const ENV_PREFIX: &str = "RESOURCESYNC_";

/// `--config FILE` and `--print-config`, flattened into a command that reads a configuration
/// file of its flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ConfigArgs {
    /// Read flags from this TOML file (keys named as the long flags, `listen = "…"`, and the
    /// arguments, `dir = "…"`): the command line, then the environment (RESOURCESYNC_*), then
    /// the file, then the defaults. See docs/operations.md.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Print the effective configuration as TOML, each value with where it came from, and
    /// exit.
    #[arg(long)]
    pub(crate) print_config: bool,
}

/// The environment variable of a long flag: `base-url` → `RESOURCESYNC_BASE_URL`.
pub(crate) fn env_name(long: &str) -> String {
    format!(
        "{ENV_PREFIX}{}",
        long.replace('-', "_").to_ascii_uppercase()
    )
}

/// Whether an argument is one of clap's own (help, version) or of the configuration itself.
fn is_meta(arg: &Arg) -> bool {
    matches!(
        arg.get_id().as_str(),
        "help" | "version" | "config" | "print_config"
    ) || matches!(
        arg.get_action(),
        ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
    )
}

/// Gives a flag its environment variable (not positional arguments, nor help and version;
/// `--config` has one: `RESOURCESYNC_CONFIG`).
fn with_env(arg: Arg) -> Arg {
    let skip = arg.is_positional()
        || matches!(arg.get_id().as_str(), "help" | "version" | "print_config")
        || matches!(
            arg.get_action(),
            ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
        );
    match arg.get_long().map(env_name) {
        Some(var) if !skip => {
            // `--help` shows `[env: VAR=VALUE]`: never the value of a secret.
            let hide = secret_bearing(&arg);
            let arg = if kind(&arg) == Kind::Bool {
                // 1/0, yes/no, true/false, on/off, any case (checked first by [`check_env`]).
                arg.value_parser(clap::builder::BoolishValueParser::new())
            } else {
                arg
            };
            arg.env(var).hide_env_values(hide)
        }
        _ => arg,
    }
}

/// Whether a flag's value may carry a credential: a token, a URL (user information, a key in
/// the query: `--store s3://KEY:SECRET@…`, `--state postgres://u:PASSWORD@…`, `--hub`, the
/// URL of `sync`), an inventory's specification (a database or an OAI-PMH provider). Its
/// environment value and its default from a configuration file are left out of `--help`,
/// and `--print-config` redacts it ([`shown`]).
fn secret_bearing(arg: &Arg) -> bool {
    matches!(
        arg.get_id().as_str(),
        "token" | "store" | "state" | "inventory" | "hub" | "url" | "object_store"
    ) || arg.get_value_names().is_some_and(|names| {
        names.iter().any(|n| {
            let n = n.as_str();
            n.contains("URL") || n.contains("TOKEN") || n.contains("SPEC") || n.contains("SECRET")
        })
    })
}

/// Whether a flag's whole value is a secret (a bearer token): shown as
/// [`resourcesync_model::redact::REDACTED`].
fn whole_secret(arg: &Arg) -> bool {
    arg.get_id() == "token"
        || arg
            .get_value_names()
            .is_some_and(|names| names.iter().any(|n| n.as_str().contains("TOKEN")))
}

/// A value as `--print-config` shows it: a token replaced whole, any other value with the
/// credentials of its URLs replaced (`resourcesync_model::redact`).
fn shown(arg: &Arg, v: &str) -> String {
    if whole_secret(arg) && !v.is_empty() {
        resourcesync_model::redact::REDACTED.to_owned()
    } else {
        resourcesync_model::redact::text(v).into_owned()
    }
}

/// The program's clap command: the derived one, with environment variables for the flags of
/// the long-running commands and the global flags.
pub(crate) fn command() -> Command {
    let mut cmd =
        crate::Cli::command().mut_args(|a| if a.is_global_set() { with_env(a) } else { a });
    for name in ENV_COMMANDS {
        cmd = cmd.mut_subcommand(name, |s| s.mut_args(with_env));
    }
    cmd
}

/// A configuration file's key, found on the command `sub` or among the global flags of `root`.
fn key_of(arg: &Arg) -> Option<String> {
    if is_meta(arg) {
        return None;
    }
    match arg.get_long() {
        Some(l) => Some(l.to_owned()),
        None if arg.is_positional() => Some(arg.get_id().as_str().replace('_', "-")),
        None => None,
    }
}

/// A value read from the file: the strings handed to clap.
#[derive(Debug)]
struct FileValue {
    id: String,
    global: bool,
    values: Vec<String>,
    at: String,
}

/// An error in the configuration file: names the file, the line and the key.
fn file_error(file: &Path, line: usize, msg: impl std::fmt::Display) -> ! {
    crate::out::say!("resourcesync: error: {}:{line}: {msg}", file.display());
    std::process::exit(i32::from(EXIT_ERROR));
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The kind of value an argument takes in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    One,
    Many,
}

fn kind(arg: &Arg) -> Kind {
    match arg.get_action() {
        ArgAction::SetTrue | ArgAction::SetFalse => Kind::Bool,
        ArgAction::Append => Kind::Many,
        _ => Kind::One,
    }
}

/// Checks one value with the argument's own value parser (a number for `--lease`, one of the
/// choices for `--log-format`, …); the error says what is wrong, without clap's usage text.
fn check_value(arg: &Arg, value: &str) -> Result<(), String> {
    let probe = Arg::new("v")
        .long("v")
        .action(ArgAction::Set)
        .value_parser(arg.get_value_parser().clone());
    let cmd = Command::new("probe").no_binary_name(true).arg(probe);
    match cmd.try_get_matches_from(["--v", value]) {
        Ok(_) => Ok(()),
        Err(e) => {
            let valid: Vec<String> = arg
                .get_possible_values()
                .iter()
                .map(|p| p.get_name().to_owned())
                .collect();
            if !valid.is_empty() {
                return Err(format!("expected one of {}", valid.join(", ")));
            }
            match std::error::Error::source(&e) {
                Some(s) => Err(s.to_string()),
                None => Err(e.kind().to_string()),
            }
        }
    }
}

/// The strings of a TOML value for an argument of this kind, or what is wrong with it.
fn strings_of(v: &toml::de::DeValue<'_>, k: Kind) -> Result<Vec<String>, String> {
    use toml::de::DeValue;
    let scalar = |v: &DeValue<'_>| -> Result<String, String> {
        match v {
            DeValue::String(s) => Ok(s.to_string()),
            DeValue::Integer(i) => i64::from_str_radix(&i.as_str().replace('_', ""), i.radix())
                .map(|n| n.to_string())
                .map_err(|e| e.to_string()),
            DeValue::Float(f) => Ok(f.as_str().replace('_', "")),
            other => Err(format!(
                "expected a string or a number, found {}",
                other.type_str()
            )),
        }
    };
    match (k, v) {
        (Kind::Bool, DeValue::Boolean(b)) => Ok(vec![b.to_string()]),
        (Kind::Bool, other) => Err(format!(
            "expected true or false, found {}",
            other.type_str()
        )),
        (Kind::Many, DeValue::Array(a)) => a.iter().map(|e| scalar(e.get_ref())).collect(),
        (Kind::Many, other) => scalar(other).map(|s| vec![s]),
        (Kind::One, other) => scalar(other).map(|s| vec![s]),
    }
}

/// Reads the file of `sub` (a command of `root`), checking every key and value.
fn read_file(root: &Command, sub: &Command, file: &Path) -> Vec<FileValue> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            crate::out::say!(
                "resourcesync: error: reading the configuration {}: {e}",
                file.display()
            );
            std::process::exit(i32::from(EXIT_ERROR));
        }
    };
    let table = match toml::de::DeTable::parse(&text) {
        Ok(t) => t,
        Err(e) => {
            let line = e.span().map_or(1, |s| line_of(&text, s.start));
            file_error(file, line, e.message());
        }
    };
    let args: BTreeMap<String, (&Arg, bool)> = sub
        .get_arguments()
        .filter_map(|a| key_of(a).map(|k| (k, (a, false))))
        .chain(
            root.get_arguments()
                .filter(|a| a.is_global_set())
                .filter_map(|a| key_of(a).map(|k| (k, (a, true)))),
        )
        .collect();
    let mut out = Vec::new();
    // In the order of the file, so that the first error reported is the first one in it.
    let mut entries: Vec<_> = table.get_ref().iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    let tables = TABLES
        .iter()
        .find(|(c, _)| *c == sub.get_name())
        .map_or(&[][..], |(_, t)| *t);
    for (key, value) in entries {
        let line = line_of(&text, key.span().start);
        let name = key.get_ref().as_ref();
        if tables.contains(&name) {
            continue;
        }
        let Some(&(arg, global)) = args.get(name) else {
            let valid: Vec<&str> = args.keys().map(String::as_str).collect();
            file_error(
                file,
                line,
                format_args!(
                    "unknown key `{name}` for `resourcesync {}`; valid keys: {}",
                    sub.get_name(),
                    valid.join(", ")
                ),
            );
        };
        let k = kind(arg);
        let values = strings_of(value.get_ref(), k)
            .and_then(|vs| {
                if k == Kind::Bool {
                    return Ok(vs);
                }
                vs.iter().try_for_each(|v| check_value(arg, v)).map(|()| vs)
            })
            .unwrap_or_else(|e| file_error(file, line, format_args!("`{name}`: {e}")));
        out.push(FileValue {
            id: arg.get_id().as_str().to_owned(),
            global,
            values,
            at: format!("{}:{line}", file.display()),
        });
    }
    out
}

/// Parses the command line (exiting on an error or `--help`, as clap does), with the
/// environment and the configuration file applied; prints the configuration and exits on
/// `--print-config`.
pub(crate) fn parse() -> crate::Cli {
    parse_from(std::env::args_os().collect())
}

fn parse_from(args: Vec<OsString>) -> crate::Cli {
    let mut cmd = command();
    // A first, tolerant pass finds the command and its --config / --print-config (from the
    // command line or the environment) before the file's values can be its defaults.
    let pre = cmd
        .clone()
        .ignore_errors(true)
        .try_get_matches_from(&args)
        .ok();
    let pre_sub = pre.as_ref().and_then(|m| m.subcommand());
    let mut origins: BTreeMap<String, String> = BTreeMap::new();
    let mut print = false;
    if let Some((name, sm)) = pre_sub {
        let reads_file = cmd
            .find_subcommand(name)
            .is_some_and(|s| s.get_arguments().any(|a| a.get_id() == "print_config"));
        if reads_file {
            print = matches!(sm.try_get_one::<bool>("print_config"), Ok(Some(true)));
            let file = sm.try_get_one::<PathBuf>("config").ok().flatten().cloned();
            let name = name.to_owned();
            if let Some(file) = file {
                let values = match cmd.find_subcommand(&name) {
                    Some(sub) => read_file(&cmd, sub, &file),
                    None => Vec::new(),
                };
                for fv in values {
                    origins.insert(fv.id.clone(), fv.at.clone());
                    // A secret from the file is not shown by `--help` as a default.
                    let set = |a: Arg| {
                        let hide = secret_bearing(&a);
                        a.required(false)
                            .default_values(fv.values.clone())
                            .hide_default_value(hide)
                    };
                    if fv.global {
                        cmd = cmd.mut_arg(&fv.id, set);
                    } else {
                        cmd = cmd.mut_subcommand(&name, |s| s.mut_arg(&fv.id, set));
                    }
                }
            }
            if print {
                // Printing needs no argument the run would need.
                cmd = cmd.mut_subcommand(&name, |s| s.mut_args(|a| a.required(false)));
            }
        }
    }
    if let Some((name, sm)) = pre_sub {
        if let Err(msg) = check_env(&cmd, name, pre.as_ref(), sm) {
            crate::out::say!("resourcesync: error: {msg}");
            std::process::exit(i32::from(EXIT_ERROR));
        }
    }
    let matches = cmd.clone().get_matches_from(&args);
    if print {
        if let Some((name, sm)) = matches.subcommand() {
            let text = render(&cmd, name, &matches, sm, &origins);
            crate::out::say_out!("{text}");
            std::process::exit(0);
        }
    }
    match crate::Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    }
}

/// The words a boolean variable may take, any case: `(true, false)`.
const BOOL_WORDS: &[(&str, &str)] = &[("1", "0"), ("yes", "no"), ("true", "false"), ("on", "off")];

/// A boolean environment value: 1/0, yes/no, true/false, on/off, any case.
pub(crate) fn env_bool(value: &str) -> Option<bool> {
    let v = value.trim().to_ascii_lowercase();
    BOOL_WORDS.iter().find_map(|(t, f)| {
        if v == *t {
            Some(true)
        } else if v == *f {
            Some(false)
        } else {
            None
        }
    })
}

/// What is wrong with the value `value` of the environment variable `var` of `arg`, naming
/// the variable (clap would name the flag, which the user did not type).
fn env_error(arg: &Arg, var: &str, value: &str) -> Option<String> {
    let shown_value = shown(arg, value);
    if kind(arg) == Kind::Bool {
        return env_bool(value).is_none().then(|| {
            format!(
                "environment variable {var}={shown_value:?}: not a boolean; set it to 1/0, \
                 yes/no, true/false or on/off, or unset it"
            )
        });
    }
    check_value(arg, value).err().map(|e| {
        format!(
            "environment variable {var}={shown_value:?}: {e}; fix it or unset it (it sets --{})",
            arg.get_long().unwrap_or_default()
        )
    })
}

/// Checks the environment variables of the command `name` and of the global flags whose flag
/// is not on the command line.
fn check_env(
    cmd: &Command,
    name: &str,
    root: Option<&ArgMatches>,
    sm: &ArgMatches,
) -> Result<(), String> {
    let on_line = |m: Option<&ArgMatches>, id: &str| {
        m.and_then(|m| m.try_contains_id(id).ok().filter(|c| *c).map(|_| m))
            .and_then(|m| m.value_source(id))
            == Some(ValueSource::CommandLine)
    };
    let globals = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| (a, root));
    let own = cmd
        .find_subcommand(name)
        .into_iter()
        .flat_map(Command::get_arguments)
        .map(|a| (a, Some(sm)));
    for (arg, m) in own.chain(globals) {
        let Some(var) = arg.get_env() else { continue };
        let Some(value) = std::env::var_os(var) else {
            continue;
        };
        if value.is_empty()
            || on_line(m, arg.get_id().as_str())
            || on_line(Some(sm), arg.get_id().as_str())
        {
            continue;
        }
        let var = var.to_string_lossy();
        let value = value.to_string_lossy();
        if let Some(e) = env_error(arg, &var, &value) {
            return Err(e);
        }
    }
    Ok(())
}

/// A TOML string (JSON's escapes are TOML's).
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

/// Whether the argument's values are numbers.
fn numeric(arg: &Arg) -> bool {
    use std::any::TypeId;
    let t = arg.get_value_parser().type_id();
    [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i64>(),
        TypeId::of::<f64>(),
    ]
    .iter()
    .any(|id| t == *id)
}

/// One value as TOML: a number for a numeric argument, else a string.
fn toml_value(arg: &Arg, v: &str) -> String {
    if numeric(arg) && v.parse::<f64>().is_ok_and(f64::is_finite) {
        v.to_owned()
    } else {
        toml_str(v)
    }
}

/// The effective configuration of command `name`, as TOML with a comment per value saying
/// where it came from (see the module documentation for the order).
fn render(
    cmd: &Command,
    name: &str,
    root_m: &ArgMatches,
    sm: &ArgMatches,
    origins: &BTreeMap<String, String>,
) -> String {
    let mut out = format!(
        "# resourcesync {name}: the effective configuration (command line > environment > \
         configuration file > default)\n"
    );
    let Some(sub) = cmd.find_subcommand(name) else {
        return out;
    };
    let globals = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| (a, root_m));
    let own = sub.get_arguments().map(|a| (a, sm));
    // The arguments first, then the flags by name.
    let mut all: Vec<(String, &Arg, &ArgMatches)> = own
        .chain(globals)
        .filter_map(|(a, m)| key_of(a).map(|k| (k, a, m)))
        .collect();
    all.sort_by_key(|(k, a, _)| (!a.is_positional(), a.get_index(), k.clone()));
    for (key, arg, m) in all {
        let id = arg.get_id().as_str();
        let raw: Vec<String> = m
            .try_get_raw(id)
            .ok()
            .flatten()
            .map(|vs| vs.map(|v| shown(arg, &v.to_string_lossy())).collect())
            .unwrap_or_default();
        let from = match (m.value_source(id), origins.get(id)) {
            (Some(ValueSource::CommandLine), _) => "command line".to_owned(),
            (Some(ValueSource::EnvVariable), _) => arg
                .get_long()
                .map_or_else(|| "environment".to_owned(), env_name),
            (Some(ValueSource::DefaultValue), Some(at)) => at.clone(),
            (Some(ValueSource::DefaultValue), None) => "default".to_owned(),
            _ => "unset".to_owned(),
        };
        if raw.is_empty() {
            out.push_str(&format!("# {key}: unset\n"));
            continue;
        }
        let value = match kind(arg) {
            Kind::Bool => {
                let on = matches!(m.try_get_one::<bool>(id), Ok(Some(true)));
                on.to_string()
            }
            Kind::Many => format!(
                "[{}]",
                raw.iter()
                    .map(|v| toml_value(arg, v))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Kind::One => toml_value(arg, &raw[0]),
        };
        out.push_str(&format!("{key} = {value}   # {from}\n"));
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_is_well_formed() {
        command().debug_assert();
    }

    #[test]
    fn env_names_follow_the_long_flags() {
        assert_eq!(env_name("base-url"), "RESOURCESYNC_BASE_URL");
        assert_eq!(env_name("listen"), "RESOURCESYNC_LISTEN");
        let serve = command();
        let serve = serve.find_subcommand("serve").expect("serve");
        let listen = serve
            .get_arguments()
            .find(|a| a.get_id() == "listen")
            .expect("--listen");
        assert_eq!(
            listen.get_env().map(|e| e.to_string_lossy().into_owned()),
            Some("RESOURCESYNC_LISTEN".to_owned())
        );
    }

    #[test]
    fn values_are_checked_by_the_flags_own_parser() {
        let hub = command();
        let hub = hub.find_subcommand("hub").expect("hub");
        let lease = hub
            .get_arguments()
            .find(|a| a.get_id() == "lease")
            .expect("--lease");
        assert!(check_value(lease, "10").is_ok());
        assert!(check_value(lease, "ten").is_err());
    }
}
