//! Termination signals, shared by the long-running commands (`serve`, `hub`, `sync --watch`).

/// SIGINT (Ctrl-C) and SIGTERM, caught from the moment [`Signals::new`] returns: a command
/// creates them before it says it is ready (a supervisor may signal right after that line).
#[derive(Debug)]
pub(crate) struct Signals {
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Installs the handlers (inside a Tokio runtime). A handler that cannot be installed leaves
    /// that signal's default action (ending the process).
    pub(crate) fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// Waits for the next SIGINT or SIGTERM; each call waits for a new one.
    pub(crate) async fn next(&mut self) {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                let got = match s {
                    Some(s) => s.recv().await.is_some(),
                    None => false,
                };
                if !got {
                    std::future::pending::<()>().await;
                }
            }
            tokio::select! {
                () = recv(&mut self.int) => {}
                () = recv(&mut self.term) => {}
            }
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
