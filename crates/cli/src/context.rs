//! What a command works with: the open database and its services, and how a `<session>`
//! or `--at <message>` argument names a row.
//!
//! A session argument is, in this order: an exact id; a title (lineage-aware: `t` names
//! the newest of `t`, `t #2`, …; a numbered `t #3` names that member only, never another);
//! an id prefix that one session's id begins and every other match's id extends (a
//! sub-agent's `parent:agent` id extends its parent's, so a prefix of the parent's names the
//! parent however many sub-agents it has); a sub-session's path `<parent>:<rest>`, the
//! parent named by an id prefix and `<rest>` the beginning of what follows its id in the
//! sub-session's (`7c1e2a90-3b5:agent`). Any other ambiguous prefix lists its candidates
//! rather than guessing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use scribe_db::Database;
use scribe_db::queries as q;
use scribe_message::MessageService;
use scribe_session::{Session, SessionError, SessionFilter, SessionService, Store};

use crate::error::CliError;
use crate::location::DbPath;

/// The shortest id prefix tables show.
const MIN_SHORT_ID: usize = 12;

/// How many candidates an ambiguous prefix lists.
const MAX_CANDIDATES: usize = 10;

/// How many of the values sessions have a filter value that matches none names.
const SHOWN_CHOICES: usize = 8;

/// How many folders under a `--dir` that matched nothing are named.
const SHOWN_DIRS: usize = 3;

/// What an id prefix matches ([`Context::by_id_prefix`]).
enum Matches {
    /// No session.
    None,
    /// The session it names.
    One(Box<q::SessionRow>),
    /// Several, none of them naming the others.
    Many(Vec<q::SessionRow>),
}

/// The open database and the services over it.
#[derive(Debug)]
pub struct Context {
    /// The database and its services (what the agent loop of `demo` runs on).
    pub store: Store,
    /// The database.
    pub db: Arc<Database>,
    /// Sessions (shared with the agent loop of `demo`).
    pub sessions: Arc<SessionService>,
    /// Messages.
    pub messages: Arc<MessageService>,
}

impl Context {
    /// Opens the database at `db` as [`open_database`] does.
    pub fn open(db: &DbPath, access: Access) -> Result<Self, CliError> {
        Ok(Self::over(Arc::new(open_database(db, access)?)))
    }

    /// An empty store of this build's schema, in memory, that stands in for a database
    /// not created yet: a command that only reads answers as for an empty store, and
    /// nothing is written to disk.
    pub fn empty() -> Result<Self, CliError> {
        Ok(Self::over(Arc::new(Database::open_in_memory()?)))
    }

    fn over(db: Arc<Database>) -> Self {
        let store = Store::new(db);
        Context {
            db: Arc::clone(store.database()),
            sessions: Arc::clone(store.sessions()),
            messages: Arc::clone(store.messages()),
            store,
        }
    }

    /// Opens the database at `db` for a dry run (`import --from … --dry-run`), which
    /// writes nothing to it, not even a schema: it is read as it is, read-only. What it
    /// counts against instead, saying so on stderr: a missing database, or one without
    /// Scribe's schema yet (an empty file, an empty PostgreSQL database), counts as an
    /// empty store. A store at an older schema version is refused, on both backends
    /// (`Error::SchemaTooOld`: `scribe db migrate`, or any command that writes, first):
    /// this build's queries cannot read it, and migrating a copy would mean copying the
    /// whole store, consistently, only to count.
    pub fn open_dry_run(db: &DbPath) -> Result<Self, CliError> {
        let empty = |why: String| {
            eprintln!("scribe: {why}; a dry run counts against an empty store");
            Self::empty()
        };
        match Database::open_read_only(&db.path) {
            Ok(found) => Ok(Self::over(Arc::new(found))),
            Err(scribe_db::Error::NoDatabase { .. }) if !db.explicit => {
                eprintln!(
                    "scribe: {}",
                    CliError::NothingYet {
                        path: db.path.clone()
                    }
                );
                Self::empty()
            }
            Err(source @ scribe_db::Error::NoDatabase { .. }) => empty(source.to_string()),
            Err(scribe_db::Error::SchemaTooOld { path, found: 0, .. }) => empty(format!(
                "{} holds no scribe schema yet (a dry run adds none)",
                path.display()
            )),
            Err(err) => Err(err.into()),
        }
    }

    /// The session `wanted` names (see the module doc).
    pub fn resolve(&self, wanted: &str) -> Result<Session, CliError> {
        if wanted.trim().is_empty() {
            return Err(CliError::NoSuchSession(wanted.to_owned()));
        }
        match self.sessions.get(wanted) {
            Ok(session) => return Ok(session),
            Err(SessionError::NotFound { .. }) => {}
            Err(err) => return Err(err.into()),
        }
        match self.sessions.resolve_by_title(wanted) {
            Ok(session) if names_member(wanted, &session) => return Ok(session),
            // `t #3` when only `t` and `t #2` exist: the service answers with the newest
            // member, but a number the user typed names that member or nothing (a
            // `delete "t #3"` must never delete `t #2`). It may still be an id prefix.
            Ok(_) => {}
            // Not a usable title (empty, too long) is simply not a title match.
            Err(
                SessionError::NotFound { .. }
                | SessionError::InvalidTitle { .. }
                | SessionError::TitleTooLong { .. },
            ) => {}
            Err(err) => return Err(err.into()),
        }
        let rows = match self.by_id_prefix(wanted)? {
            Matches::One(row) => return Ok(Session::try_from(*row)?),
            Matches::None => match self.by_sub_session_path(wanted)? {
                Matches::One(row) => return Ok(Session::try_from(*row)?),
                Matches::None => return Err(CliError::NoSuchSession(wanted.to_owned())),
                Matches::Many(rows) => rows,
            },
            Matches::Many(rows) => rows,
        };
        let n = rows.len();
        let mut candidates: Vec<String> = rows
            .iter()
            .take(MAX_CANDIDATES)
            .map(|row| match &row.title {
                Some(title) => format!("{} ({title})", row.id),
                None => row.id.clone(),
            })
            .collect();
        let matches = if n > MAX_CANDIDATES {
            candidates.push("…".to_owned());
            format!("more than {MAX_CANDIDATES}")
        } else {
            n.to_string()
        };
        Err(CliError::AmbiguousSession {
            prefix: wanted.to_owned(),
            matches,
            candidates,
        })
    }

    /// The sessions whose ids begin with `prefix`: none, the one it names (the only match,
    /// or the one whose id every match begins with: a session and its sub-agents), or
    /// several (the first [`MAX_CANDIDATES`] + 1 in id order).
    fn by_id_prefix(&self, prefix: &str) -> Result<Matches, CliError> {
        let (lo, hi) = prefix_range(prefix);
        let limit = i64::try_from(MAX_CANDIDATES + 1).unwrap_or(i64::MAX);
        let rows = self
            .db
            .read(|tx| -> scribe_db::Result<_> {
                tx.q()
                    .list_sessions_by_id_range(&q::ListSessionsByIdRangeParams {
                        lo: &lo,
                        hi: &hi,
                        limit,
                    })
            })
            .map_err(|err| {
                err.in_row(|| Some(format!("a session whose id begins with {prefix}")))
            })?;
        if rows.len() > 1 && !self.first_is_root(&rows, &hi)? {
            return Ok(Matches::Many(rows));
        }
        Ok(rows
            .into_iter()
            .next()
            .map_or(Matches::None, |row| Matches::One(Box::new(row))))
    }

    /// The sub-session `path` names as `<parent>:<rest>`: `<parent>` an id prefix naming a
    /// session, `<rest>` the beginning of what follows the parent's id in the sub-session's
    /// (`7c1e2a90-3b5:agent` for `7c1e2a90-3b5d-…:agent:call_task`), as
    /// [`Context::short_ids`] shows sub-agents. The first `:` after a parent under which
    /// `<rest>` matches anything wins.
    fn by_sub_session_path(&self, path: &str) -> Result<Matches, CliError> {
        for (at, _) in path.match_indices(':').filter(|&(at, _)| at > 0) {
            let (head, rest) = path.split_at(at);
            let Matches::One(parent) = self.by_id_prefix(head)? else {
                continue;
            };
            match self.by_id_prefix(&format!("{}{rest}", parent.id))? {
                Matches::None => {}
                found => return Ok(found),
            }
        }
        Ok(Matches::None)
    }

    /// Whether every session matching a prefix begins with the first match's id (a session
    /// and its sub-agents), given `rows`, the first matches in id order of those in
    /// `[…, hi)`.
    fn first_is_root(&self, rows: &[q::SessionRow], hi: &str) -> Result<bool, CliError> {
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            return Ok(false);
        };
        if !last.id.starts_with(first.id.as_str()) {
            return Ok(false);
        }
        // `rows` may stop short of every match; past those that begin with the first id,
        // nothing else may match.
        let (_, past) = prefix_range(&first.id);
        let other = self.db.read(|tx| -> scribe_db::Result<_> {
            tx.q()
                .list_sessions_by_id_range(&q::ListSessionsByIdRangeParams {
                    lo: &past,
                    hi,
                    limit: 1,
                })
        })?;
        Ok(other.is_empty())
    }

    /// The shortest name of each of `ids` that names that session in the whole database,
    /// for tables: `scribe show` accepts it. An id prefix of at least [`MIN_SHORT_ID`]
    /// characters; sessions whose ids extend an id (its sub-agents') do not lengthen it,
    /// since every match of it begins with the id, which [`Context::resolve`] takes as
    /// naming it. A sub-session whose id extends its parent's at a `:` (`parent:agent`) is
    /// named by its parent's short id and the beginning of the rest (`7c1e2a90-3b5:m`),
    /// when that is shorter.
    pub fn short_ids<'a>(&self, ids: &[&'a str]) -> Result<HashMap<&'a str, String>, CliError> {
        let mut known = HashMap::new();
        let mut out = HashMap::with_capacity(ids.len());
        for &id in ids {
            out.insert(id, self.short_id(id, &mut known)?);
        }
        Ok(out)
    }

    /// [`Context::short_ids`] of one id; `known` keeps the parents' already worked out.
    fn short_id(&self, id: &str, known: &mut HashMap<String, String>) -> Result<String, CliError> {
        if let Some(short) = known.get(id) {
            return Ok(short.clone());
        }
        if !id.is_ascii() || id.len() <= MIN_SHORT_ID {
            return Ok(id.to_owned());
        }
        // In id order only the one before `id` and the first after those that begin with
        // it can share a longer prefix with `id`, so one character past the longer shared
        // prefix names `id` (and what extends it).
        let (_, past) = prefix_range(id);
        let near = self.db.read(|tx| {
            tx.q()
                .get_session_id_neighbors(&q::GetSessionIdNeighborsParams { id, past: &past })
        })?;
        let shared = [near.before, near.after]
            .iter()
            .flatten()
            .map(|other| common_prefix_len(id, other))
            .max()
            .unwrap_or(0);
        let len = (shared + 1).clamp(MIN_SHORT_ID, id.len());
        let mut short = id.get(..len).unwrap_or(id).to_owned();
        if let Some(parent) = self.parent_in_id(id)? {
            // What names the parent, then `:` and as much of the rest as tells `id` apart.
            let end = len.max(parent + 2).min(id.len());
            let path = format!(
                "{}{}",
                self.short_id(&id[..parent], known)?,
                &id[parent..end]
            );
            if path.len() < short.len() && self.resolve(&path).is_ok_and(|named| named.id == id) {
                short = path;
            }
        }
        known.insert(id.to_owned(), short.clone());
        Ok(short)
    }

    /// Where `id` has the id of another session before a `:` (a sub-agent's
    /// `parent:agent`), the nearest such parent's length.
    fn parent_in_id(&self, id: &str) -> Result<Option<usize>, CliError> {
        for (at, _) in id.rmatch_indices(':').filter(|&(at, _)| at > 0) {
            match self.sessions.get(&id[..at]) {
                Ok(_) => return Ok(Some(at)),
                Err(SessionError::NotFound { .. }) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(None)
    }

    /// Why filters may have matched nothing: a line for each `--source` and `--model`
    /// value no session has (a typo is the usual reason), naming the nearest value sessions
    /// do have, else a few of them; and for a `--dir` no session worked in, the folders
    /// under it sessions worked in (`--dir` is that directory alone), else the nearest
    /// directory. Empty when every value is one some session has.
    pub fn unmatched_filters(
        &self,
        sources: &[String],
        models: &[String],
        dir: Option<&str>,
    ) -> Result<Vec<String>, CliError> {
        if sources.is_empty() && models.is_empty() && dir.is_none() {
            return Ok(Vec::new());
        }
        let choices = scribe_server::choices(&self.db)?;
        let mut lines = Vec::new();
        for (flag, wanted, known) in [
            ("source", sources, &choices.sources),
            ("model", models, &choices.models),
        ] {
            for value in wanted {
                if known.iter().any(|c| &c.value == value) {
                    continue;
                }
                // The choices stop at their 500 most used: ask about the rest.
                let filter = SessionFilter {
                    sources: if flag == "source" {
                        vec![value.clone()]
                    } else {
                        Vec::new()
                    },
                    models: if flag == "model" {
                        vec![value.clone()]
                    } else {
                        Vec::new()
                    },
                    ..SessionFilter::default()
                };
                if self.sessions.count(&filter)? > 0 {
                    continue;
                }
                let names: Vec<&str> = known.iter().map(|c| c.value.as_str()).collect();
                let hint = match nearest(value, &names) {
                    Some(near) => format!("did you mean {near:?}?"),
                    None if names.is_empty() => "there are no sessions".to_owned(),
                    None => {
                        let mut few: Vec<&str> =
                            names.iter().take(SHOWN_CHOICES).copied().collect();
                        if names.len() > SHOWN_CHOICES {
                            few.push("…");
                        }
                        format!("{flag}s: {}", few.join(", "))
                    }
                };
                lines.push(format!(
                    "no session has {flag} {:?}; {hint}",
                    crate::ui::visible(value)
                ));
            }
        }
        if let Some(dir) = dir {
            let filter = SessionFilter {
                directory: Some(dir.to_owned()),
                ..SessionFilter::default()
            };
            if self.sessions.count(&filter)? == 0 {
                lines.push(unmatched_dir(dir, &choices.directories));
            }
        }
        Ok(lines)
    }

    /// The id of the message of `session` that `wanted` names: an exact id or a unique id
    /// prefix.
    pub fn resolve_message(&self, session: &Session, wanted: &str) -> Result<String, CliError> {
        // The empty prefix would name every message of the session.
        if wanted.trim().is_empty() {
            return Err(CliError::NoSuchMessage {
                session: session.id.clone(),
                message: wanted.to_owned(),
            });
        }
        let (lo, hi) = prefix_range(wanted);
        let limit = i64::try_from(MAX_CANDIDATES + 1).unwrap_or(i64::MAX);
        let ids = self.db.read(|tx| -> scribe_db::Result<_> {
            tx.q()
                .list_message_ids_by_range(&q::ListMessageIdsByRangeParams {
                    session_id: &session.id,
                    lo: &lo,
                    hi: &hi,
                    limit,
                })
        })?;
        if ids.iter().any(|id| id == wanted) {
            return Ok(wanted.to_owned());
        }
        match ids.as_slice() {
            [] => Err(CliError::NoSuchMessage {
                session: session.id.clone(),
                message: wanted.to_owned(),
            }),
            [one] => Ok(one.clone()),
            many => Err(CliError::AmbiguousMessage {
                prefix: wanted.to_owned(),
                candidates: many.iter().take(MAX_CANDIDATES).cloned().collect(),
            }),
        }
    }
}

/// What a command needs of the database, which decides whether a missing one is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// It only reads: never creates a database, and a database it may not write is still
    /// useful, opened read-only.
    Read,
    /// It changes what is stored (rename, archive, delete, prune, fork, vacuum,
    /// reindex): never creates a database either, as a new one holds nothing to change.
    Change,
    /// It adds to the store (import, demo, `db migrate`): a missing database is created.
    Create,
}

/// Opens the database at `db` and migrates an older schema. Only [`Access::Create`]
/// creates a missing database; otherwise a missing file is [`CliError::NoDatabase`] when
/// the user named it, [`CliError::NothingYet`] at the default path, and nothing is created.
/// For [`Access::Read`], an existing file this process may not write (someone else's, a
/// read-only mount) is opened read-only rather than refused.
pub fn open_database(db: &DbPath, access: Access) -> Result<Database, CliError> {
    let path = db.path.as_path();
    let opened = match access {
        Access::Create => Database::open(path),
        Access::Read | Access::Change => Database::open_existing(path),
    };
    match opened {
        Err(err @ scribe_db::Error::NotWritable { .. })
            if access == Access::Read && path.is_file() =>
        {
            match Database::open_read_only(path) {
                Ok(db) => Ok(db),
                // Say why the read-only attempt failed when it is about the file (an
                // older or newer schema); otherwise the permission problem is the news.
                Err(
                    ro @ (scribe_db::Error::SchemaTooOld { .. }
                    | scribe_db::Error::SchemaTooNew { .. }
                    | scribe_db::Error::ForeignDatabase { .. }),
                ) => Err(ro.into()),
                Err(_) => Err(err.into()),
            }
        }
        Err(source @ scribe_db::Error::NoDatabase { .. }) if db.explicit => {
            Err(CliError::NoDatabase { source })
        }
        Err(scribe_db::Error::NoDatabase { .. }) => Err(CliError::NothingYet {
            path: db.path.clone(),
        }),
        other => Ok(other?),
    }
}

/// The SQLite file a command is about to create, and the directories above it that it
/// creates with it, noted before the open: a command that ends up storing nothing in it
/// (an import of which every session failed, a `db copy` that failed) removes them again,
/// so a typo'd path leaves no stray empty database.
///
/// Only after this process closed the database, and (for an import) only while it holds
/// no session. A process that opened the brand-new file meanwhile and has stored nothing
/// yet would write into the removed file: the window is the command's length, on a path
/// that did not exist when it began.
#[derive(Debug)]
pub struct NewDatabase {
    /// The database file, absolute.
    file: PathBuf,
    /// The directories that did not exist, deepest first.
    dirs: Vec<PathBuf>,
}

impl NewDatabase {
    /// The new SQLite database that opening `location` to create it will create: `None`
    /// for a PostgreSQL database or a path where something exists.
    pub fn before_open(location: &Path) -> Option<NewDatabase> {
        if !matches!(
            Database::backend_of(location),
            Ok(scribe_db::Backend::Sqlite)
        ) {
            return None;
        }
        let file = std::path::absolute(location).ok()?;
        if !is_missing(&file) {
            return None;
        }
        // `a/new/../x.db` creates `a/new` but names `a` as `a/new/..`: with a `..` in the
        // path, no directory is taken for one this command created.
        let lexical = !file
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir));
        let dirs = file
            .ancestors()
            .skip(1)
            .take_while(|dir| lexical && is_missing(dir))
            .map(Path::to_path_buf)
            .collect();
        Some(NewDatabase { file, dirs })
    }

    /// The database file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Removes the file, SQLite's `-wal`/`-shm`/`-journal` and the writers' gate beside
    /// it, and the directories created for it while they are empty. Call it once every
    /// handle on the database in this process is closed.
    pub fn remove(self) -> Result<(), CliError> {
        self.remove_only_files()?;
        // Whatever else appeared in them meanwhile stays, and so do they.
        for dir in &self.dirs {
            if std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
        Ok(())
    }

    /// Removes the file and SQLite's and the gate's files beside it as [`Self::remove`]
    /// does, but not the directories (a file that another name links to lives on there).
    pub fn remove_files(self) -> Result<(), CliError> {
        self.remove_only_files()
    }

    fn remove_only_files(&self) -> Result<(), CliError> {
        for suffix in ["", "-wal", "-shm", "-journal", "-writers"] {
            let mut name = self.file.clone().into_os_string();
            name.push(suffix);
            match std::fs::remove_file(&name) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(CliError::RemoveNew {
                        path: PathBuf::from(name),
                        source,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Whether nothing is at `path` (not even a dangling symlink).
fn is_missing(path: &Path) -> bool {
    matches!(
        std::fs::symlink_metadata(path),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound
    )
}

/// Whether `session`, which the title resolver gave for `wanted`, is the one `wanted`
/// names: any member of the lineage for a plain title (its newest), exactly the member
/// numbered so for a numbered one (`t #1` is `t` itself).
fn names_member(wanted: &str, session: &Session) -> bool {
    let Ok(wanted) = scribe_session::normalize_title(wanted) else {
        return false;
    };
    let (base, number) = scribe_session::split_lineage(&wanted);
    if base == wanted {
        return true;
    }
    let title = session.title.as_deref().unwrap_or_default();
    title == wanted || (number == 1 && title == base)
}

/// `[prefix, prefix + U+10FFFF)`: every string that starts with `prefix`, as a key range.
fn prefix_range(prefix: &str) -> (String, String) {
    (prefix.to_owned(), format!("{prefix}{}", char::MAX))
}

/// How many leading bytes `a` and `b` share.
fn common_prefix_len(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// What to say of `--dir` `dir`, which no session worked in, from the directories sessions
/// worked in (`known`, most used first): the folders under it (`--dir` takes the directory
/// alone, not what is below it), else the nearest one (a typo), else that none did.
fn unmatched_dir(dir: &str, known: &[scribe_server::json::Choice]) -> String {
    let shown = crate::ui::visible(dir);
    let below = format!("{}/", dir.trim_end_matches('/'));
    let under: Vec<&scribe_server::json::Choice> = known
        .iter()
        .filter(|c| c.value.starts_with(&below))
        .collect();
    if !under.is_empty() {
        let sessions: i64 = under.iter().map(|c| c.sessions).sum();
        let mut few: Vec<String> = under
            .iter()
            .take(SHOWN_DIRS)
            .map(|c| format!("{} ({})", crate::ui::visible(&c.value), c.sessions))
            .collect();
        if under.len() > SHOWN_DIRS {
            few.push("…".to_owned());
        }
        let noun = if sessions == 1 { "session" } else { "sessions" };
        return format!(
            "no session worked in {shown} itself; {sessions} {noun} worked in folders under it \
             (give one to --dir): {}",
            few.join(", ")
        );
    }
    let names: Vec<&str> = known.iter().map(|c| c.value.as_str()).collect();
    match nearest(dir, &names) {
        Some(near) => format!("no session worked in {shown}; did you mean {near:?}?"),
        None if names.is_empty() => format!("no session worked in {shown}; none records one"),
        None => format!("no session worked in {shown}"),
    }
}

/// Of `names`, the one nearest `value` (letters of any case), when it is near enough to be
/// a typo of it: the nearest by edit distance, at most a third of `value`'s letters apart;
/// else the only one `value` begins (`claude` for `claude-code`).
fn nearest<'a>(value: &str, names: &[&'a str]) -> Option<&'a str> {
    let value = value.to_lowercase();
    let limit = value.chars().count().div_ceil(3);
    let typo = names
        .iter()
        .map(|&name| (edit_distance(&value, &name.to_lowercase()), name))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, name)| name);
    typo.or_else(|| {
        let mut begun = names
            .iter()
            .filter(|name| name.to_lowercase().starts_with(&value));
        match (begun.next(), begun.next()) {
            (Some(&one), None) => Some(one),
            _ => None,
        }
    })
}

/// Levenshtein distance between `a` and `b`, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_suggests_the_value_it_was_meant_to_be() {
        let names = ["claude-code", "codex", "antigravity", "gemini"];
        assert_eq!(nearest("antigravty", &names), Some("antigravity"));
        assert_eq!(nearest("Codx", &names), Some("codex"));
        // Not a typo of any, but the start of one only.
        assert_eq!(nearest("claude", &names), Some("claude-code"));
        // The start of two, and near none.
        assert_eq!(nearest("c", &["claude-code", "codex"]), None);
        assert_eq!(nearest("telegram", &names), None);
        assert_eq!(nearest("x", &[]), None);
    }

    #[test]
    fn edit_distance_counts_characters() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("日本語", "日本"), 1);
    }
}
