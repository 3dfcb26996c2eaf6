//! The one error type of scribe-db, shared by the services built on it.
//!
//! Messages are written for a person reading an error chain (`a: b: c`): each variant says
//! what went wrong in its own words and keeps the underlying error as its source. Where a
//! variant's text already contains its source's text ([`Error::Storage`], whose message
//! is SQLite's), chain printers that skip a source already shown (the CLI's `one_line`)
//! print it once.

use std::path::PathBuf;

use rusqlite::ErrorCode;

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong storing or loading Scribe data.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The row a caller named does not exist (`what` is the kind of row, e.g. `"session"`).
    #[error("{what} not found: {id}")]
    NotFound {
        /// The kind of row: `"session"`, `"message"`, `"part"`, `"file"`.
        what: &'static str,
        /// The id that was looked up.
        id: String,
    },
    /// The change would break a uniqueness rule (a title in use, an id taken). `message`
    /// is SQLite's (`UNIQUE constraint failed: sessions.id`) or the caller's; `source` is
    /// the driver's error when SQLite reported it.
    #[error("conflict: {message}")]
    Conflict {
        /// What clashed.
        message: String,
        /// The driver's error, with SQLite's extended result code.
        #[source]
        source: Option<SqliteError>,
    },
    /// The caller's input was rejected before reaching the database.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// `copy::copy` (the `postgres` feature) refused to copy (the target is not empty or is the source,
    /// the schema versions differ, neither end is SQLite, a value it cannot carry), or
    /// found the copy would break a reference; nothing was copied. The same on both
    /// backends.
    #[error("cannot copy: {0}")]
    CopyRefused(String),
    /// `copy::copy`'s progress callback asked it to stop (`scribe db copy` on Ctrl-C); its
    /// one transaction on the target was rolled back, so nothing was copied.
    #[error("the copy was stopped before it committed; nothing was copied")]
    CopyStopped,
    /// Another writer held the database lock through every retry.
    #[error("database stayed locked: another process kept writing through every retry")]
    Locked,
    /// A schema migration could not be applied; the database was left as it was.
    #[error("schema migration failed")]
    Migration(#[source] refinery::Error),
    /// The database was written by a newer Scribe whose schema this build does not know.
    #[error(
        "database schema version {found} is newer than this build knows (version {known}); upgrade scribe"
    )]
    SchemaTooNew {
        /// The highest migration version recorded in the database.
        found: i64,
        /// The highest migration version embedded in this build.
        known: i64,
    },
    /// A database opened read-only has an older schema than this build's; read-only mode
    /// never migrates, and reading an older schema with this build's queries is not
    /// supported.
    #[error(
        "database {} {}; open it read-write once to {} (`scribe db migrate`)",
        path.display(),
        schema_too_old(*found, *known),
        if *found == 0 { "create it" } else { "migrate it" }
    )]
    SchemaTooOld {
        /// The database file.
        path: PathBuf,
        /// The highest migration version recorded in the database (0: no Scribe schema).
        found: i64,
        /// The highest migration version embedded in this build.
        known: i64,
    },
    /// A write was attempted on a database opened read-only ([`crate::Options::read_only`]).
    #[error("database {} is open read-only; writes are refused", path.display())]
    ReadOnly {
        /// The database file.
        path: PathBuf,
    },
    /// The database file or its directory cannot be written by this process (file modes,
    /// a read-only file system), so it cannot be opened read-write, or a write failed.
    #[error(
        "database {} is not writable (check the permissions of the file and its directory); \
         it can still be opened read-only",
        path.display()
    )]
    NotWritable {
        /// The database file.
        path: PathBuf,
        /// What the operating system or SQLite said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The file is not a SQLite database (or its header is destroyed); found when opening.
    #[error("{} is not a scribe database (or is damaged beyond opening)", path.display())]
    NotADatabase {
        /// The file.
        path: PathBuf,
        /// SQLite's SQLITE_NOTADB error.
        #[source]
        source: SqliteError,
    },
    /// The database is another program's: an SQLite file (an agent's own history, say),
    /// or a PostgreSQL database whose schema holds tables, and no Scribe schema history.
    /// Scribe neither adds its schema to it nor reads it; nothing in it is changed.
    #[error(
        "{} is {} of another program ({tables} {}, no scribe schema); scribe leaves it \
         as it is ({})",
        path.display(),
        foreign_what(*backend),
        if *tables == 1 { "table" } else { "tables" },
        foreign_advice(*backend)
    )]
    ForeignDatabase {
        /// The file, or the PostgreSQL location with its password hidden.
        path: PathBuf,
        /// How many tables it holds (PostgreSQL: in the connection's current schema).
        tables: i64,
        /// Which backend it is on.
        backend: crate::Backend,
    },
    /// An open that must not create a database ([`crate::Database::open_existing`],
    /// [`crate::Database::open_read_only`]) found no file at the path; nothing was created.
    #[error("no database at {}: the file does not exist", path.display())]
    NoDatabase {
        /// The path looked at.
        path: PathBuf,
    },
    /// The database path names a directory, not a file: an existing one, or a path ending in
    /// a separator (`dir/`, existing or not); nothing was created.
    #[error("{} is a directory, not a database file", path.display())]
    IsADirectory {
        /// The path looked at.
        path: PathBuf,
    },
    /// The database file is damaged (SQLITE_CORRUPT) in a way found when opening.
    #[error(
        "database {} is damaged (malformed); restore it from a backup or an export",
        path.display()
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// SQLite's SQLITE_CORRUPT error.
        #[source]
        source: SqliteError,
    },
    /// SQLite could not grow the database (SQLITE_FULL): the disk, or a configured page
    /// limit, is full. The failed transaction was rolled back whole.
    #[error(
        "database or disk is full; the last change was rolled back: free some space and run \
         it again"
    )]
    DiskFull(#[source] SqliteError),
    /// The database's directory or file could not be created or inspected.
    #[error("cannot access database path {}", path.display())]
    Io {
        /// The directory or file involved.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// SQLite failed otherwise (I/O, corruption found while reading, a constraint other
    /// than uniqueness, a bad query). The message is SQLite's, also kept as the source.
    #[error("sqlite error: {0}")]
    Storage(#[source] SqliteError),
    /// A stored value is of a kind Scribe's readers cannot take (text where a time
    /// belongs, a REAL past the largest integer): SQLite keeps any value in any column,
    /// and Scribe never writes such a one, so another program or a hand did. The message
    /// is the driver's, which names the column; the row when the reader knew it (a
    /// listing's); `scribe db check` names every such row.
    #[error(
        "{}sqlite error: {source}; scribe never stores such a value (another program or a \
         hand did): `scribe db check` names the rows that hold one",
        row.as_deref().map(|row| format!("{row}: ")).unwrap_or_default()
    )]
    UnreadableValue {
        /// The row, as `session <id>`, when the reader knew it.
        row: Option<String>,
        /// The driver's error, naming the column.
        #[source]
        source: SqliteError,
    },
    /// PostgreSQL failed (a statement, or a value of an unexpected type read back), other
    /// than a uniqueness violation ([`Error::Conflict`]). The message is the server's or
    /// the client's; [`Error::kind`] classifies it.
    #[error("postgres error: {message}")]
    Postgres {
        /// The SQLSTATE the server reported (`40001`, `23503`, …); `None` when the client
        /// failed (a lost connection, a value of an unexpected type).
        code: Option<String>,
        /// What the server or the client said.
        message: String,
        /// The driver's error.
        #[source]
        source: Option<BoxError>,
    },
    /// A text value holds the NUL character (U+0000), which PostgreSQL's text types cannot
    /// store (SQLite stores it; part JSON holds it as the escape `\u0000` on both, schema
    /// V24). `what` names the value when the writer knew it (`the system prompt of session
    /// ses_…`, `files.content of row fil_…`), else it is `a text value`. The statement
    /// failed, so the transaction it ran in stored nothing.
    #[error("{what} holds a nul character, which postgresql cannot store in a text column")]
    NulInText {
        /// What could not be stored.
        what: String,
        /// The server's error (SQLSTATE 22021), when the server found it.
        #[source]
        source: Option<BoxError>,
    },
    /// The connection was lost while COMMIT was under way: the transaction may or may not
    /// have been applied. It is never retried (a retry could apply a change twice, such as
    /// adding usage); look at the data before doing it again.
    #[error(
        "the outcome of a commit is unknown: the connection to the database was lost while \
         committing (the change may or may not have been applied; it was not retried)"
    )]
    CommitUnknown(#[source] BoxError),
    /// A database location that is neither a file path nor a URL this build can open: a
    /// malformed `postgres://` URL or keyword string, or a scheme it has no backend for.
    #[error("invalid database location {location}: {reason}")]
    InvalidLocation {
        /// The location as given, with any password replaced by `***`.
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The database server could not be reached (refused, timed out, no such host or
    /// socket).
    #[error("cannot reach the database server at {target}")]
    Unreachable {
        /// Where it was looked for (host and port, or socket directory).
        target: String,
        /// What the client or the operating system said.
        #[source]
        source: BoxError,
    },
    /// Something answers at the location's host and port, but not as PostgreSQL (an HTTP
    /// server, another service): the location names the wrong port or host. `answered`
    /// says what came back to a PostgreSQL greeting (the driver's own words, such as
    /// "bytes remaining on stream", say nothing a person can act on, so they are not kept).
    #[error(
        "the server at {target} did not answer as PostgreSQL ({answered}); check the \
         location's host and port"
    )]
    NotPostgres {
        /// The host and port (or socket) that answered.
        target: String,
        /// What it answered: `it answered "HTTP/1.1 400 Bad Request"`, or that it closed
        /// the connection without a word.
        answered: String,
    },
    /// The server refused the credentials: a wrong password, an unknown role, or no
    /// `pg_hba.conf` entry letting this user in.
    #[error(
        "the database server at {target} refused user {user:?}: wrong password or no such role"
    )]
    AuthFailed {
        /// The user name that was tried.
        user: String,
        /// The server (host and port, or socket directory).
        target: String,
        /// The server's message.
        #[source]
        source: BoxError,
    },
    /// The server is there but has no database of that name.
    #[error("the database server at {target} has no database {name:?}")]
    NoSuchDatabase {
        /// The database name that was asked for.
        name: String,
        /// The server (host and port, or socket directory).
        target: String,
        /// The server's message.
        #[source]
        source: BoxError,
    },
    /// An id longer than [`crate::ids::MAX_ID_BYTES`] (`scribe db copy` into PostgreSQL
    /// of a store that holds one): refused before anything was written.
    #[error(transparent)]
    IdTooLong(#[from] crate::ids::IdTooLong),
    /// The PostgreSQL location's `search_path` (`options=-csearch_path=…`) names no schema
    /// the user may use: none that exists in the database (or the path is empty), or one
    /// that exists but on which the user has no USAGE privilege. The connection has no
    /// current schema to find Scribe's tables in or create them in. Scribe creates no
    /// schema, as it creates no database; nothing was written.
    #[error(
        "{location} has no schema for scribe's tables: {}",
        no_schema_text(search_path, unusable.as_deref(), user)
    )]
    NoSchema {
        /// The location as given, with any password replaced by `***`.
        location: String,
        /// The connection's `search_path`, as the server reports it.
        search_path: Box<str>,
        /// The first schema of the path that exists but that the user may not use.
        unusable: Option<Box<str>>,
        /// The user the connection logged in as.
        user: Box<str>,
    },
    /// The store needs its tables created or migrated, and the user may not create
    /// anything in the connection's current schema (PostgreSQL 15 and later give only
    /// the database's owner CREATE on `public`). Nothing was written.
    #[error(
        "user {} may not create scribe's tables in schema {} of {location}: give scribe a \
         database that user owns (createdb -O USER scribe), or grant the user CREATE on the \
         schema and the database (GRANT CREATE ON SCHEMA {} TO {}; GRANT CREATE ON DATABASE \
         {} TO {})",
        quoted(user),
        quoted(schema),
        quoted(schema),
        quoted(user),
        quoted(database),
        quoted(user)
    )]
    SchemaNotWritable {
        /// The location as given, with any password replaced by `***`.
        location: String,
        /// The connection's current schema.
        schema: Box<str>,
        /// The database.
        database: Box<str>,
        /// The user the connection logged in as.
        user: Box<str>,
    },
    /// TLS was required (`sslmode=require`, `verify-ca`, `verify-full`) and could not be
    /// set up: the server does not offer it, its certificate failed verification, or the
    /// root certificate named by `sslrootcert` cannot be read.
    #[error("cannot set up TLS with the database server at {target}")]
    Tls {
        /// The server (host and port).
        target: String,
        /// What the TLS library or the server said.
        #[source]
        source: BoxError,
    },
}

/// What [`Error::SchemaTooOld`] found: no Scribe schema yet (an empty PostgreSQL
/// database), or an older one.
fn schema_too_old(found: i64, known: i64) -> String {
    if found == 0 {
        format!("holds no scribe schema yet (this build's is version {known})")
    } else {
        format!("has schema version {found}, older than this build's version {known}")
    }
}

/// `name` as a PostgreSQL identifier in double quotes.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// What [`Error::NoSchema`] found and what to do: grant the user the schema it may not
/// use, or create the first schema the path names (not `$user` or a system schema), or
/// name an existing one.
fn no_schema_text(search_path: &str, unusable: Option<&str>, user: &str) -> String {
    if let Some(schema) = unusable {
        return format!(
            "its search_path ({search_path}) names schema {}, which user {} may not use; \
             grant it (GRANT USAGE, CREATE ON SCHEMA {} TO {}) or name another \
             (options=-csearch_path=NAME)",
            quoted(schema),
            quoted(user),
            quoted(schema),
            quoted(user)
        );
    }
    let named = search_path
        .split(',')
        .map(|name| name.trim().trim_matches('"'))
        .find(|name| {
            !name.is_empty() && *name != "$user" && *name != "pg_catalog" && *name != "pg_temp"
        });
    let advice = match named {
        Some(name) => format!(
            "create it (CREATE SCHEMA {}) or name an existing one (options=-csearch_path=NAME)",
            quoted(name)
        ),
        None => "name an existing schema in the location (options=-csearch_path=NAME)".to_owned(),
    };
    format!("its search_path ({search_path}) names none that exists in the database; {advice}")
}

/// What [`Error::ForeignDatabase`] found, by backend.
fn foreign_what(backend: crate::Backend) -> &'static str {
    match backend {
        crate::Backend::Sqlite => "an SQLite database",
        crate::Backend::Postgres => "a PostgreSQL database",
    }
}

/// What to do instead, by backend.
fn foreign_advice(backend: crate::Backend) -> &'static str {
    match backend {
        // The file is most likely an agent's own database named as scribe's store: say
        // where each goes, whether or not the command was an `import --from` already.
        crate::Backend::Sqlite => {
            "to import an agent's history, name its files after `scribe import --from AGENT` \
             and give --db a store of scribe's own, or none for the default"
        }
        crate::Backend::Postgres => "give scribe a database of its own, e.g. `createdb scribe`",
    }
}

/// A boxed error kept as the source of a backend-neutral [`Error`] variant, so that no
/// driver type appears in the variant.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What kind of failure an [`Error`] is, the same on both backends: what a service needs
/// to decide what to do, without looking at a driver's codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Another writer got in the way (SQLite busy or locked; a PostgreSQL serialization
    /// failure or deadlock): running the whole transaction again may succeed.
    /// [`crate::Database::write`] does that itself, so a service sees this only once the
    /// retries are used up ([`Error::Locked`]).
    Retryable,
    /// A uniqueness rule (primary key, unique index) was broken: [`Error::Conflict`].
    UniqueViolation,
    /// A row refers to a row that does not exist (or is still referred to).
    ForeignKeyViolation,
    /// A CHECK constraint (an allowed value, valid JSON) rejected the row.
    CheckViolation,
    /// The row asked for does not exist: [`Error::NotFound`].
    NotFound,
    /// A commit's outcome is unknown: [`Error::CommitUnknown`]. Never retried blindly.
    CommitUnknown,
    /// Anything else (I/O, a bad query, a damaged file, an unreachable server, …).
    Other,
}

/// Refuses `value` on PostgreSQL when it holds the NUL character, which no PostgreSQL
/// text column can store ([`Error::NulInText`] naming `what()`); on SQLite, which stores
/// it, never. For writers that can name what they store better than the server's error
/// can (it names no column).
pub fn storable_text(
    backend: crate::Backend,
    what: impl FnOnce() -> String,
    value: &str,
) -> Result<()> {
    if backend == crate::Backend::Postgres && value.contains('\0') {
        return Err(Error::NulInText {
            what: what(),
            source: None,
        });
    }
    Ok(())
}

impl Error {
    /// A [`Error::NotFound`] for `what` with `id`.
    pub fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        Error::NotFound {
            what,
            id: id.into(),
        }
    }

    /// Whether this is SQLite reporting that another connection holds a lock, the one
    /// failure that retrying can cure.
    pub fn is_busy(&self) -> bool {
        matches!(self, Error::Storage(err) if is_busy(&err.0))
    }

    /// Whether running the transaction again may cure this: SQLite busy or locked
    /// ([`Error::is_busy`]), or a PostgreSQL serialization failure (`40001`) or deadlock
    /// (`40P01`). What [`crate::Database::write`] retries.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Postgres {
                code: Some(code), ..
            } => matches!(code.as_str(), SERIALIZATION_FAILURE | DEADLOCK_DETECTED),
            other => other.is_busy(),
        }
    }

    /// The kind of failure, the same on both backends ([`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::Conflict { .. } => ErrorKind::UniqueViolation,
            Error::Locked => ErrorKind::Retryable,
            Error::CommitUnknown(_) => ErrorKind::CommitUnknown,
            Error::Storage(err) if is_busy(&err.0) => ErrorKind::Retryable,
            Error::Storage(err) => match err.extended_code() {
                Some(rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY) => ErrorKind::ForeignKeyViolation,
                Some(rusqlite::ffi::SQLITE_CONSTRAINT_CHECK) => ErrorKind::CheckViolation,
                _ => ErrorKind::Other,
            },
            Error::Postgres {
                code: Some(code), ..
            } => match code.as_str() {
                SERIALIZATION_FAILURE | DEADLOCK_DETECTED => ErrorKind::Retryable,
                "23505" => ErrorKind::UniqueViolation,
                "23503" => ErrorKind::ForeignKeyViolation,
                "23514" => ErrorKind::CheckViolation,
                _ => ErrorKind::Other,
            },
            _ => ErrorKind::Other,
        }
    }

    /// This error, naming `row` (`session <id>`) if it is an [`Error::UnreadableValue`]
    /// that names none yet.
    pub fn in_row(self, row: impl FnOnce() -> Option<String>) -> Self {
        match self {
            Error::UnreadableValue { row: None, source } => {
                Error::UnreadableValue { row: row(), source }
            }
            other => other,
        }
    }

    /// The SQLSTATE behind this error when PostgreSQL reported one.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            Error::Postgres { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// SQLite's primary result code behind this error (`SQLITE_FULL` = 13, `SQLITE_NOTADB` =
    /// 26 …), if SQLite reported it, directly or as the cause of a failed migration or open.
    pub fn sqlite_code(&self) -> Option<i32> {
        self.sqlite_failure()
            .map(|failure| failure.extended_code & 0xff)
    }

    /// [`Error::sqlite_code`] as the driver's code, for this crate.
    pub(crate) fn sqlite_error_code(&self) -> Option<ErrorCode> {
        self.sqlite_failure().map(|failure| failure.code)
    }

    /// The SQLite failure behind this error, wherever it is in the chain of sources.
    fn sqlite_failure(&self) -> Option<&rusqlite::ffi::Error> {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(current) = source {
            let driver = match current.downcast_ref::<SqliteError>() {
                Some(wrapped) => Some(&wrapped.0),
                None => current.downcast_ref::<rusqlite::Error>(),
            };
            if let Some(rusqlite::Error::SqliteFailure(failure, _)) = driver {
                return Some(failure);
            }
            source = current.source();
        }
        None
    }
}

/// Whether `err` is SQLITE_BUSY or SQLITE_LOCKED (any extended code).
pub(crate) fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        if let rusqlite::Error::SqliteFailure(failure, message) = &err {
            let unique = failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY;
            if unique {
                let message = message
                    .clone()
                    .unwrap_or_else(|| "unique constraint failed".to_owned());
                return Error::Conflict {
                    message,
                    source: Some(SqliteError(err)),
                };
            }
            if failure.code == ErrorCode::DiskFull {
                return Error::DiskFull(SqliteError(err));
            }
        }
        let err = match err {
            rusqlite::Error::FromSqlConversionFailure(column, kind, inner) => {
                match inner.downcast::<InRow>() {
                    Ok(named) => {
                        return Error::UnreadableValue {
                            row: Some(named.row),
                            source: SqliteError(named.source),
                        };
                    }
                    Err(inner) => rusqlite::Error::FromSqlConversionFailure(column, kind, inner),
                }
            }
            err => err,
        };
        if let rusqlite::Error::InvalidColumnType(..) = &err {
            return Error::UnreadableValue {
                row: None,
                source: SqliteError(err),
            };
        }
        Error::Storage(SqliteError(err))
    }
}

/// A value no reader takes, with the row it is in: what [`in_row`] carries through a row
/// reader that can only return the driver's error (inside `query_map`), until the
/// conversion into [`Error::UnreadableValue`] names the row.
#[derive(Debug)]
struct InRow {
    row: String,
    source: rusqlite::Error,
}

impl std::fmt::Display for InRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.row, self.source)
    }
}

impl std::error::Error for InRow {}

/// The driver's error of a row reader, naming `row` (`message <id>`) when it is a value
/// of the wrong kind ([`Error::UnreadableValue`] once converted) and `row` can say which;
/// any other error as it is. For readers inside the driver's own closures, where the
/// error cannot yet be an [`Error`] (whose [`Error::in_row`] does the same).
pub(crate) fn in_row(
    err: rusqlite::Error,
    row: impl FnOnce() -> Option<String>,
) -> rusqlite::Error {
    match err {
        rusqlite::Error::InvalidColumnType(column, _, kind) => match row() {
            Some(row) => rusqlite::Error::FromSqlConversionFailure(
                column,
                kind,
                Box::new(InRow { row, source: err }),
            ),
            None => err,
        },
        err => err,
    }
}

/// An error SQLite reported: its message and result codes, without the driver's type in
/// Scribe's API (the same errors come from PostgreSQL as [`Error::Postgres`]).
#[derive(Debug)]
pub struct SqliteError(rusqlite::Error);

impl SqliteError {
    /// SQLite's primary result code (`SQLITE_BUSY` = 5, `SQLITE_CONSTRAINT` = 19 …), when
    /// the failure came from SQLite itself rather than from reading a value back.
    pub fn code(&self) -> Option<i32> {
        self.extended_code().map(|code| code & 0xff)
    }

    /// SQLite's extended result code (`SQLITE_CONSTRAINT_FOREIGNKEY` = 787 …).
    pub fn extended_code(&self) -> Option<i32> {
        match &self.0 {
            rusqlite::Error::SqliteFailure(failure, _) => Some(failure.extended_code),
            _ => None,
        }
    }
}

impl std::fmt::Display for SqliteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SqliteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            // The message shown is SQLite's own; the driver's source would only repeat
            // it as "Error code 11: database disk image is malformed".
            rusqlite::Error::SqliteFailure(..) => None,
            other => std::error::Error::source(other),
        }
    }
}

impl From<rusqlite::Error> for SqliteError {
    fn from(err: rusqlite::Error) -> Self {
        SqliteError(err)
    }
}

/// The driver's error for a reply in which the server refused something, kept as the
/// source of an [`Error`]: shown as the server's own words (its message, and its detail),
/// without the driver's `db error: ERROR: ` before them, so that a chain printed on one
/// line (`postgres error: permission denied for table sessions`) does not say it twice.
/// The driver's error itself is [`ServerError::driver`]; it ends the chain, whose text it
/// would only repeat.
#[cfg(feature = "postgres")]
#[derive(Debug)]
pub struct ServerError(postgres::Error);

#[cfg(feature = "postgres")]
impl ServerError {
    /// Wraps `err` when it is the server's reply; `None` for a client-side failure.
    pub(crate) fn of(err: postgres::Error) -> std::result::Result<Self, postgres::Error> {
        if err.as_db_error().is_some() {
            Ok(ServerError(err))
        } else {
            Err(err)
        }
    }

    /// The driver's error (its SQLSTATE, severity, position …).
    pub fn driver(&self) -> &postgres::Error {
        &self.0
    }

    /// The server's message, with its detail when it gave one.
    fn text(&self) -> String {
        match self.0.as_db_error() {
            Some(db) => match db.detail() {
                Some(detail) => format!("{}: {detail}", db.message()),
                None => db.message().to_owned(),
            },
            None => self.0.to_string(),
        }
    }
}

#[cfg(feature = "postgres")]
impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

#[cfg(feature = "postgres")]
impl std::error::Error for ServerError {}

/// `err` boxed as a source: a server's reply as [`ServerError`], anything else as it is.
#[cfg(feature = "postgres")]
pub(crate) fn driver_source(err: postgres::Error) -> BoxError {
    match ServerError::of(err) {
        Ok(server) => Box::new(server),
        Err(err) => Box::new(err),
    }
}

/// PostgreSQL's SQLSTATE for a serialization failure.
const SERIALIZATION_FAILURE: &str = "40001";
/// PostgreSQL's SQLSTATE for a deadlock.
const DEADLOCK_DETECTED: &str = "40P01";

#[cfg(feature = "postgres")]
impl From<postgres::Error> for Error {
    fn from(err: postgres::Error) -> Self {
        if let Some(db) = err.as_db_error() {
            if *db.code() == postgres::error::SqlState::UNIQUE_VIOLATION {
                let message = match db.constraint() {
                    Some(constraint) => format!("{} ({constraint})", db.message()),
                    None => db.message().to_owned(),
                };
                return Error::Conflict {
                    message,
                    source: None,
                };
            }
            // "invalid byte sequence for encoding "UTF8": 0x00": a raw NUL in a text
            // parameter (never in part JSON, which escapes it).
            if *db.code() == postgres::error::SqlState::CHARACTER_NOT_IN_REPERTOIRE
                && db.message().ends_with(": 0x00")
            {
                return Error::NulInText {
                    what: "a text value".to_owned(),
                    source: Some(driver_source(err)),
                };
            }
            let code = Some(db.code().code().to_owned());
            let source = driver_source(err);
            return Error::Postgres {
                code,
                message: source.to_string(),
                source: Some(source),
            };
        }
        Error::Postgres {
            code: None,
            message: err.to_string(),
            source: Some(Box::new(err)),
        }
    }
}

impl From<refinery::Error> for Error {
    fn from(err: refinery::Error) -> Self {
        Error::Migration(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: i32, message: Option<&str>) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), message.map(Into::into))
    }

    #[test]
    fn storage_shows_sqlite_message_once_in_a_deduplicating_chain() {
        let err = Error::from(failure(rusqlite::ffi::SQLITE_ERROR, Some("malformed JSON")));
        assert_eq!(err.to_string(), "sqlite error: malformed JSON");
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("malformed JSON"));
    }

    #[test]
    fn full_is_typed_and_keeps_the_code() {
        let err = Error::from(failure(rusqlite::ffi::SQLITE_FULL, None));
        assert!(matches!(err, Error::DiskFull(_)), "{err:?}");
        assert!(
            err.to_string()
                .starts_with("database or disk is full; the last change was rolled back"),
            "{err}"
        );
        assert_eq!(err.sqlite_code(), Some(rusqlite::ffi::SQLITE_FULL));
    }

    #[test]
    fn unique_violation_is_a_conflict_with_sqlites_text() {
        let err = Error::from(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE),
            Some("UNIQUE constraint failed: sessions.id".into()),
        ));
        assert!(
            matches!(&err, Error::Conflict { message, source: Some(_) } if message == "UNIQUE constraint failed: sessions.id"),
            "{err:?}"
        );
        assert!(!err.is_busy());
    }

    #[test]
    fn sqlite_constraints_are_classified() {
        let fk = Error::from(failure(rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY, None));
        assert_eq!(fk.kind(), ErrorKind::ForeignKeyViolation);
        let check = Error::from(failure(rusqlite::ffi::SQLITE_CONSTRAINT_CHECK, None));
        assert_eq!(check.kind(), ErrorKind::CheckViolation);
        let unique = Error::from(failure(rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE, None));
        assert_eq!(unique.kind(), ErrorKind::UniqueViolation);
        assert_eq!(Error::not_found("session", "x").kind(), ErrorKind::NotFound);
        assert_eq!(Error::Locked.kind(), ErrorKind::Retryable);
    }

    #[test]
    fn postgres_codes_are_classified_without_a_driver_type() {
        let pg = |code: &str| Error::Postgres {
            code: Some(code.to_owned()),
            message: "x".to_owned(),
            source: None,
        };
        assert!(pg("40001").is_retryable());
        assert!(pg("40P01").is_retryable());
        assert!(!pg("23503").is_retryable());
        assert_eq!(pg("40001").kind(), ErrorKind::Retryable);
        assert_eq!(pg("23503").kind(), ErrorKind::ForeignKeyViolation);
        assert_eq!(pg("23514").kind(), ErrorKind::CheckViolation);
        assert_eq!(pg("42P01").kind(), ErrorKind::Other);
        assert_eq!(pg("23503").sqlstate(), Some("23503"));
        let unknown = Error::CommitUnknown("connection closed".into());
        assert_eq!(unknown.kind(), ErrorKind::CommitUnknown);
        assert!(!unknown.is_retryable());
    }

    #[test]
    fn busy_stays_storage() {
        let err = Error::from(failure(rusqlite::ffi::SQLITE_BUSY, None));
        assert!(err.is_busy());
        assert_eq!(err.sqlite_code(), Some(rusqlite::ffi::SQLITE_BUSY));
    }
}
