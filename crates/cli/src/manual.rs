//! `resourcesync completions SHELL` and `resourcesync man`: shell completions and man pages,
//! generated from the clap definitions (the same command the program parses, environment
//! variables included). The copies under packaging/ are checked current by
//! crates/cli/tests/it/manual.rs; `scripts/generate-manual.sh` writes them again.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Command};

use crate::EXIT_OK;

/// `resourcesync completions SHELL`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    shell: clap_complete::Shell,
}

/// `resourcesync man`.
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Write a page per command into this directory (resourcesync.1, resourcesync-serve.1, …)
    /// instead of printing the page of `resourcesync` itself.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// The command as documented: the program's, named as installed.
fn documented() -> Command {
    let mut cmd = crate::config::command();
    cmd.build();
    cmd
}

pub(crate) fn run_completions(a: &CompletionsArgs) -> anyhow::Result<u8> {
    let mut cmd = documented();
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "resourcesync", &mut buf);
    let mut out = crate::out::stdout();
    out.write_all(&buf)?;
    out.flush()?;
    Ok(EXIT_OK)
}

/// The page of `cmd`, the command `name` of `root` (`""` for the program itself), with the
/// sections clap has no place for ([`crate::manual_sections`]).
fn page(root: &Command, name: &str, cmd: Command) -> anyhow::Result<Vec<u8>> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    let page = String::from_utf8(buf).context("a man page that is not UTF-8")?;
    Ok(
        crate::manual_sections::insert(&page, &crate::manual_sections::sections(root, name))
            .into_bytes(),
    )
}

/// Writes the page of the program and of each of its commands into `dir`.
fn write_pages(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let cmd = documented();
    let mut pages = vec![("resourcesync".to_owned(), String::new(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("resourcesync-{}", sub.get_name());
        pages.push((
            name.clone(),
            sub.get_name().to_owned(),
            sub.clone().name(name),
        ));
    }
    for (name, sub, c) in pages {
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, page(&cmd, &sub, c)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

pub(crate) fn run_man(a: &ManArgs) -> anyhow::Result<u8> {
    match &a.out {
        Some(dir) => write_pages(dir)?,
        None => {
            let mut out = crate::out::stdout();
            let cmd = documented();
            out.write_all(&page(&cmd, "", cmd.clone())?)?;
            out.flush()?;
        }
    }
    Ok(EXIT_OK)
}
