//! Ctrl-C (SIGINT) for the commands that store a lot at once, `scribe import FILE`,
//! `scribe import --from AGENT` (with or without `--watch`) and `scribe db copy`: the first
//! one asks the command to stop where nothing is half done (an import between two of its
//! transactions, a watch between two imports, a copy before its one transaction commits), and the command then says what it stored and that it was interrupted (exit
//! status [`EXIT`]); a second one ends the process at once, as Ctrl-C does everywhere
//! else. Other commands keep the default: Ctrl-C ends them, and SQLite or PostgreSQL
//! rolls back the transaction they were in.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use signal_hook::consts::SIGINT;

/// The exit status of an interrupted command: 128 + SIGINT, what a shell reports for a
/// process Ctrl-C ended.
pub const EXIT: u8 = 130;

/// Whether Ctrl-C was pressed since [`Interrupt::catch`].
#[derive(Debug, Clone)]
pub struct Interrupt {
    flag: Arc<AtomicBool>,
}

impl Interrupt {
    /// Catches SIGINT from now on, for the rest of the process. Should the handlers not be
    /// installed (never on Unix), Ctrl-C keeps its default and simply ends the process.
    pub fn catch() -> Self {
        let flag = Arc::new(AtomicBool::new(false));
        // The second Ctrl-C ends the process: registered first, it sees the flag the
        // first one set (signal-hook runs a signal's actions in registration order).
        let _ = signal_hook::flag::register_conditional_shutdown(
            SIGINT,
            i32::from(EXIT),
            Arc::clone(&flag),
        );
        let _ = signal_hook::flag::register(SIGINT, Arc::clone(&flag));
        Interrupt { flag }
    }

    /// Whether Ctrl-C was pressed.
    pub fn happened(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// The flag Ctrl-C sets, for a library that checks it between its transactions
    /// (`scribe_import::Options::stop`).
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.flag)
    }
}
