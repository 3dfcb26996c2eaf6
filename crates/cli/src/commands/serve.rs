//! `scribe serve`: the web viewer (crates/server) over the database, read-only: an SQLite
//! file or a PostgreSQL database.

use std::io::Write;
use std::path::Path;

use clap::Args;
use scribe_server::{Config, Server};

use crate::error::CliError;

/// Serve a web viewer of every conversation, search and cost (read-only).
///
/// Opens the database read-only and serves, from this binary with no network access
/// needed, the session list, each conversation (updating live while another process
/// writes it), search as you type and usage charts, over a JSON API under /api/. Listens
/// on loopback only unless --token is given; with a token, every request must carry it.
/// A PostgreSQL database (--db postgres://…) must exist with this build's schema (run
/// `scribe db migrate` once); its pages follow commits from any host.
#[derive(Debug, Args)]
pub struct Cmd {
    /// Where to listen (host:port). An address beyond loopback needs --token.
    #[arg(long, default_value = "127.0.0.1:7777", value_name = "HOST:PORT", value_parser = parse_addr)]
    pub addr: String,
    /// Open the viewer in the default browser.
    #[arg(long)]
    pub open: bool,
    /// Require this token on every request (Authorization: Bearer, or the URL printed at
    /// start, which sets a cookie).
    #[arg(
        long,
        env = "SCRIBE_SERVE_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

impl Cmd {
    /// Runs the server until interrupted.
    pub fn run(self, db: &Path) -> Result<(), CliError> {
        let server = Server::bind(Config {
            db: db.to_owned(),
            addr: self.addr,
            token: self.token,
        })?;
        let url = server.url_with_token();
        {
            let mut out = anstream::stdout().lock();
            writeln!(
                out,
                "scribe serve: {} (read-only) at {url}\nPress Ctrl-C to stop.",
                server.location()
            )?;
            out.flush()?;
        }
        if self.open {
            open_browser(&url);
        }
        server.run()?;
        Ok(())
    }
}

/// `--addr`: `host:port` in form, a usage error otherwise (before the database is
/// opened); whether the host resolves is found when binding.
fn parse_addr(text: &str) -> Result<String, String> {
    let expected = |what: String| {
        format!(
            "{what}; expected host:port, e.g. 127.0.0.1:7777 (an IPv6 host in brackets: [::1]:7777)"
        )
    };
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(expected(format!("{text:?} has no port")));
    };
    if port.parse::<u16>().is_err() {
        return Err(expected(format!("{port:?} is not a port (0 to 65535)")));
    }
    let in_brackets = host.len() > 2 && host.starts_with('[') && host.ends_with(']');
    if host.is_empty() {
        return Err(expected("no host".to_owned()));
    }
    if !in_brackets && (host.contains([':', '[', ']'])) {
        return Err(expected(format!("{host:?} is not a host")));
    }
    Ok(text.to_owned())
}

/// Starts the platform's URL opener; failing to is only worth a note.
fn open_browser(url: &str) {
    let mut command = if cfg!(target_os = "macos") {
        std::process::Command::new("open")
    } else if cfg!(windows) {
        let mut c = std::process::Command::new("cmd");
        c.args(["/C", "start", ""]);
        c
    } else {
        std::process::Command::new("xdg-open")
    };
    let started = command
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(err) = started {
        eprintln!("scribe: cannot open a browser ({err}); open {url} yourself");
    }
}
