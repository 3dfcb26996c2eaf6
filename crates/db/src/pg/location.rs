//! Where a PostgreSQL database is: a `postgres://` URL or a libpq keyword string, parsed
//! into the driver's configuration plus what the driver does not understand itself
//! (`sslmode=verify-ca|verify-full`, `sslrootcert`), and shown with its password hidden.

use std::path::PathBuf;
use std::time::Duration;

use postgres::config::{Host, SslMode};

use crate::{Error, Result};

/// How long a connection attempt may take when the location does not say
/// (`connect_timeout`): an unreachable server is reported instead of waited for.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// libpq's connection keywords that can start a keyword string; a location starting with
/// one of them followed by `=` is read as a keyword string rather than a file path.
const KEYWORDS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "sslmode",
    "sslrootcert",
    "application_name",
    "connect_timeout",
    "options",
    "keepalives",
    "keepalives_idle",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
];

/// Whether `text` names a PostgreSQL database (a URL or a keyword string) rather than a
/// SQLite file.
pub(crate) fn is_postgres(text: &str) -> bool {
    let t = text.trim_start();
    if t.starts_with("postgres://") || t.starts_with("postgresql://") {
        return true;
    }
    let Some((key, _)) = t.split_once('=') else {
        return false;
    };
    KEYWORDS.contains(&key.trim())
}

/// How the server's certificate is checked, libpq's `sslmode` beyond what the driver
/// parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verify {
    /// No TLS (`disable`).
    Off,
    /// TLS without checking the certificate (`allow`, `prefer`, `require` without a root
    /// certificate): protects against eavesdropping, not against impersonation.
    Unchecked,
    /// The certificate must chain to a trusted root (`verify-ca`, or `require` with
    /// `sslrootcert`), whatever name it carries.
    Chain,
    /// The chain, and the certificate must name the host (`verify-full`).
    Full,
}

/// A parsed PostgreSQL location.
#[derive(Clone)]
pub(crate) struct Location {
    /// The driver's configuration (without `sslmode=verify-*` / `sslrootcert`).
    pub config: postgres::Config,
    /// How to check the server's certificate.
    pub verify: Verify,
    /// Root certificate(s) to trust instead of the system's (`sslrootcert`).
    pub root_cert: Option<PathBuf>,
    /// The location as given, password hidden.
    pub shown: String,
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Location")
            .field("shown", &self.shown)
            .field("verify", &self.verify)
            .finish_non_exhaustive()
    }
}

impl Location {
    /// Parses a `postgres://` / `postgresql://` URL or a libpq keyword string.
    pub(crate) fn parse(text: &str) -> Result<Self> {
        let shown = redact(text);
        let invalid = |reason: String| Error::InvalidLocation {
            location: shown.clone(),
            reason,
        };
        let (rest, sslmode, root_cert) = if text.trim_start().contains("://") {
            split_url(text.trim())
        } else {
            split_keywords(text).map_err(invalid)?
        };
        // libpq reads an empty `sslrootcert=` as not given (its default file, never a file
        // named ""); so does `require` then, without checking the chain.
        let root_cert = root_cert.filter(|path| !path.is_empty());
        let mut config: postgres::Config = rest
            .parse()
            .map_err(|err: postgres::Error| invalid(error_text(&err)))?;
        let mode = sslmode.as_deref().unwrap_or("prefer");
        let verify = match mode {
            "disable" => Verify::Off,
            "allow" | "prefer" => Verify::Unchecked,
            "require" if root_cert.is_some() => Verify::Chain,
            "require" => Verify::Unchecked,
            "verify-ca" => Verify::Chain,
            "verify-full" => Verify::Full,
            other => {
                return Err(invalid(format!(
                    "sslmode {other:?} is not one of disable, allow, prefer, require, \
                     verify-ca, verify-full"
                )));
            }
        };
        config.ssl_mode(match (mode, verify) {
            (_, Verify::Off) => SslMode::Disable,
            ("allow" | "prefer", _) => SslMode::Prefer,
            _ => SslMode::Require,
        });
        if config.get_hosts().is_empty() {
            // libpq's default: the local socket directory.
            config.host_path("/var/run/postgresql");
        }
        if config.get_user().is_none() {
            return Err(invalid(
                "no user: add one (postgres://USER@HOST/DB or user=USER)".to_owned(),
            ));
        }
        // libpq would connect to the database named as the user (`postgres`, the server's
        // own, for the superuser), and a command migrates an empty database: a location
        // that forgot its name would put Scribe's tables there.
        if config.get_dbname().is_none_or(str::is_empty) {
            return Err(invalid(
                "no database name: add one (postgres://USER@HOST/DB or dbname=DB)".to_owned(),
            ));
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("scribe");
        }
        Ok(Location {
            config,
            verify,
            root_cert: root_cert.map(PathBuf::from),
            shown,
        })
    }

    /// The server(s), as an error message names them: `host:port` or the socket
    /// directory.
    pub(crate) fn target(&self) -> String {
        let ports = self.config.get_ports();
        let port = |i: usize| {
            ports
                .get(i)
                .or_else(|| ports.first())
                .copied()
                .unwrap_or(5432)
        };
        let hosts: Vec<String> = self
            .config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, host)| match host {
                Host::Tcp(name) => format!("{name}:{}", port(i)),
                Host::Unix(dir) => format!("{} (port {})", dir.display(), port(i)),
            })
            .collect();
        hosts.join(", ")
    }

    /// The user name connections log in as.
    pub(crate) fn user(&self) -> String {
        self.config.get_user().unwrap_or_default().to_owned()
    }

    /// The database name (a parsed location always has one).
    pub(crate) fn dbname(&self) -> String {
        self.config.get_dbname().unwrap_or_default().to_owned()
    }
}

/// The driver's error with its causes, on one line.
pub(crate) fn error_text(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A URL without its `sslmode` and `sslrootcert` query parameters, and their values.
fn split_url(url: &str) -> (String, Option<String>, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None, None);
    };
    let (mut sslmode, mut root) = (None, None);
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => sslmode = Some(percent_decode(value)),
            "sslrootcert" => root = Some(percent_decode(value)),
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (rest, sslmode, root)
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// One `key=value` pair of a keyword string, the value unquoted.
fn keyword_pairs(text: &str) -> std::result::Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(format!("expected `=` after {key:?}"));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    None => return Err(format!("unterminated quoted value of {key:?}")),
                    Some('\'') => break,
                    Some('\\') => match chars.next() {
                        Some(c) => value.push(c),
                        None => return Err(format!("unterminated quoted value of {key:?}")),
                    },
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    if let Some(escaped) = chars.next() {
                        value.push(escaped);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
}

type Split = (String, Option<String>, Option<String>);

/// A keyword string without `sslmode` and `sslrootcert`, and their values.
fn split_keywords(text: &str) -> std::result::Result<Split, String> {
    let (mut sslmode, mut root) = (None, None);
    let mut kept = Vec::new();
    for (key, value) in keyword_pairs(text)? {
        match key.as_str() {
            "sslmode" => sslmode = Some(value),
            "sslrootcert" => root = Some(value),
            _ => {
                let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
                kept.push(format!("{key}='{quoted}'"));
            }
        }
    }
    Ok((kept.join(" "), sslmode, root))
}

/// `text` with the password (of a URL's user info, a `password=` keyword or a
/// `password` query parameter) replaced by `***`.
pub(crate) fn redact(text: &str) -> String {
    let trimmed = text.trim();
    if let Some((scheme, rest)) = trimmed.split_once("://") {
        let (authority_end, _) = rest
            .char_indices()
            .find(|(_, c)| matches!(c, '/' | '?'))
            .unwrap_or((rest.len(), ' '));
        let (authority, tail) = rest.split_at(authority_end);
        let authority = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{user}:***@{hosts}"),
                None => authority.to_owned(),
            },
            None => authority.to_owned(),
        };
        let tail = match tail.split_once('?') {
            Some((path, query)) => {
                let query: Vec<String> = query
                    .split('&')
                    .map(|pair| match pair.split_once('=') {
                        Some(("password", _)) => "password=***".to_owned(),
                        _ => pair.to_owned(),
                    })
                    .collect();
                format!("{path}?{}", query.join("&"))
            }
            None => tail.to_owned(),
        };
        return format!("{scheme}://{authority}{tail}");
    }
    match keyword_pairs(trimmed) {
        Ok(pairs) => pairs
            .into_iter()
            .map(|(key, value)| {
                if key == "password" {
                    "password=***".to_owned()
                } else if value.is_empty() || value.contains(char::is_whitespace) {
                    format!("{key}='{value}'")
                } else {
                    format!("{key}={value}")
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        // Unparseable: show nothing that could be a secret.
        Err(_) => "(unparseable connection string)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_keyword_strings_are_recognised_and_paths_are_not() {
        assert!(is_postgres("postgres://u@h/db"));
        assert!(is_postgres("postgresql://u@h/db"));
        assert!(is_postgres("host=/tmp user=postgres"));
        assert!(is_postgres("  dbname = x user=y"));
        assert!(!is_postgres("/home/me/.local/share/scribe/scribe.db"));
        assert!(!is_postgres("scribe.db"));
        assert!(!is_postgres("weird=name.db"));
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("postgres://me:s3cret@db.example:5433/scribe?sslmode=require"),
            "postgres://me:***@db.example:5433/scribe?sslmode=require"
        );
        assert_eq!(
            redact("postgres://me@h/db?password=s3cret&x=1"),
            "postgres://me@h/db?password=***&x=1"
        );
        assert_eq!(
            redact("host=h user=me password='s3 cret' dbname=d"),
            "host=h user=me password=*** dbname=d"
        );
        assert!(!redact("host=h password='unterminated").contains("unterminated"));
    }

    #[test]
    fn sslmodes_map_to_verification() {
        let v = |s: &str| {
            Location::parse(s)
                .map(|l| l.verify)
                .map_err(|e| e.to_string())
        };
        assert_eq!(v("postgres://u@h/d"), Ok(Verify::Unchecked));
        assert_eq!(v("postgres://u@h/d?sslmode=disable"), Ok(Verify::Off));
        assert_eq!(v("postgres://u@h/d?sslmode=require"), Ok(Verify::Unchecked));
        assert_eq!(
            v("postgres://u@h/d?sslmode=require&sslrootcert=/ca.pem"),
            Ok(Verify::Chain)
        );
        assert_eq!(
            v("host=h user=u dbname=d sslmode=verify-ca"),
            Ok(Verify::Chain)
        );
        assert_eq!(
            v("postgres://u@h/d?sslmode=verify-full&application_name=x"),
            Ok(Verify::Full)
        );
        let err = v("postgres://u@h/d?sslmode=sometimes").unwrap_err();
        assert!(err.contains("sslmode \"sometimes\""), "{err}");
    }

    /// An empty `sslrootcert=` names no file (libpq reads it as not given): no root
    /// certificate, so `require` does not check the chain. Before, it was a file named "".
    #[test]
    fn an_empty_sslrootcert_is_not_given() {
        for text in [
            "host=h user=u dbname=d sslmode=require sslrootcert=",
            "host=h user=u dbname=d sslmode=require sslrootcert=''",
            "postgres://u@h/d?sslmode=require&sslrootcert=",
            "postgres://u@h/d?sslrootcert=&sslmode=require",
        ] {
            let loc = Location::parse(text).unwrap();
            assert_eq!(loc.root_cert, None, "{text}");
            assert_eq!(loc.verify, Verify::Unchecked, "{text}");
        }
        // A named one is still read (and `verify-ca` still needs it to check the chain).
        let loc = Location::parse("host=h user=u dbname=d sslrootcert=/ca.pem").unwrap();
        assert_eq!(loc.root_cert, Some(PathBuf::from("/ca.pem")));
        // A URL's parameters are percent-decoded.
        let loc = Location::parse("postgres://u@h/d?sslrootcert=%2Fca%20dir%2Fca.pem").unwrap();
        assert_eq!(loc.root_cert, Some(PathBuf::from("/ca dir/ca.pem")));
    }

    #[test]
    fn bad_locations_say_what_is_wrong_without_the_password() {
        let err = Location::parse("postgres://u:pw@h:notaport/d").unwrap_err();
        assert!(matches!(err, Error::InvalidLocation { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("u:***@h:notaport"), "{text}");
        assert!(!text.contains("pw@"), "{text}");
        let err = Location::parse("host=h user='x").unwrap_err();
        assert!(err.to_string().contains("unterminated"), "{err}");
        let err = Location::parse("postgres://h/d").unwrap_err();
        assert!(err.to_string().contains("no user"), "{err}");
        // No database name: libpq's default (the user's name; `postgres`, the server's
        // own database, for the superuser) is refused, not migrated into.
        for text in [
            "postgres://u@h",
            "postgres://u@h/",
            "postgres://u:pw@h:5432/?sslmode=disable",
            "host=h user=u",
            "host=h user=u dbname=''",
        ] {
            let err = Location::parse(text).unwrap_err();
            assert!(
                matches!(err, Error::InvalidLocation { .. }),
                "{text}: {err:?}"
            );
            let message = err.to_string();
            assert!(message.contains("no database name: add one"), "{message}");
            assert!(!message.contains("pw"), "{message}");
        }
    }

    /// The README's two ways of naming a schema reach the server as one option.
    #[test]
    fn a_search_path_in_a_url_or_keyword_string_is_passed_on() {
        for text in [
            "postgres://u@h/d?options=-csearch_path%3Dscribe",
            "host=h user=u dbname=d options='-csearch_path=scribe'",
        ] {
            let loc = Location::parse(text).unwrap();
            assert_eq!(
                loc.config.get_options(),
                Some("-csearch_path=scribe"),
                "{text}"
            );
        }
    }

    #[test]
    fn keyword_values_keep_spaces_and_quotes() {
        let loc = Location::parse("host=/tmp/x user='a b' dbname=it\\'s").unwrap();
        assert_eq!(loc.user(), "a b");
        assert_eq!(loc.dbname(), "it's");
        assert_eq!(loc.target(), "/tmp/x (port 5432)");
    }
}
