//! The signals that ask a long-running command (`serve`, `demo`, `sim`) to
//! stop: Ctrl-C (SIGINT), SIGTERM (`kill`, systemd, Kubernetes) and SIGHUP
//! (the terminal closed).
//!
//! Handlers are installed when [`StopSignals::watch`] is called, so a
//! command watches from its first step: a signal that arrives while it is
//! still starting is not lost, and the default action (dying on the spot)
//! never applies. That matters most for the demo, whose gateway is a child
//! process: a demo killed by the default action would leave the gateway
//! running, holding its port and store.

use std::io;

/// Handlers for the stop signals, installed while this value lives.
pub(crate) struct StopSignals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hangup: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Installs the handlers now.
    pub(crate) fn watch() -> io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                term: signal(SignalKind::terminate())?,
                hangup: signal(SignalKind::hangup())?,
                interrupt: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Waits for the next stop signal and names it.
    pub(crate) async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => "SIGINT",
                _ = self.term.recv() => "SIGTERM",
                _ = self.hangup.recv() => "SIGHUP",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}
