//! Schema migrations on PostgreSQL: the refinery migrations embedded from
//! `sql/migrations/postgres`, applied in one transaction under an advisory lock.
//!
//! refinery's own postgres driver takes no lock, so two processes (two hosts) opening a
//! fresh database at once would both try to create the schema. Here the whole
//! check-and-apply runs in one READ COMMITTED transaction that first takes a transaction
//! advisory lock: the second process waits for it, then reads the history the first one
//! committed (each statement sees the latest commits under READ COMMITTED) and finds
//! nothing left to do. PostgreSQL's DDL is transactional, so a failed migration leaves
//! the schema as it was.

use postgres::Client;
use refinery::{Migration, Runner};
use refinery_core::traits::sync::{Migrate, Query, Transaction};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::migrate::{AppliedMigration, HISTORY_TABLE, MigrationReport};
use crate::{Error, Result};

mod embedded {
    refinery::embed_migrations!("../../sql/migrations/postgres");
}

/// The advisory lock key migrations take: "scribe" in ASCII, then "mig".
const LOCK_KEY: i64 = 0x7363_7269_6265_6d69;

/// The highest migration version this build embeds for PostgreSQL.
pub(crate) fn known_version() -> i64 {
    embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| i64::from(m.version()))
        .max()
        .unwrap_or(0)
}

/// The recorded (version, checksum) pairs, in version order; empty for a fresh database.
fn recorded(client: &mut Client) -> Result<Vec<(i64, String)>> {
    // The catalog, not information_schema: that lists only the tables this user holds a
    // privilege on, so a user without one took the store for a fresh database and tried
    // to migrate it ("schema migration failed … permission denied for schema public").
    let exists: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relname = $1 AND c.relkind IN ('r', 'p'))",
            &[&HISTORY_TABLE],
        )?
        .try_get(0)?;
    if !exists {
        return Ok(Vec::new());
    }
    let rows = client.query(
        &format!("SELECT CAST(version AS BIGINT), checksum FROM {HISTORY_TABLE} ORDER BY version"),
        &[],
    )?;
    rows.iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect()
}

/// [`Error::ForeignDatabase`] when the current schema holds tables but no Scribe schema
/// history (another program's database), as SQLite's `refuse_foreign`: one read, so that
/// a concurrent migration is seen whole (its tables with its history) or not at all.
fn refuse_foreign(client: &mut Client, shown: &str) -> Result<()> {
    let tables: i64 = client
        .query_one(
            "WITH mine AS (
                 SELECT c.relname FROM pg_catalog.pg_class c
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p'))
             SELECT CASE WHEN EXISTS (SELECT 1 FROM mine WHERE relname = $1) THEN 0
                         ELSE (SELECT count(*) FROM mine) END",
            &[&HISTORY_TABLE],
        )?
        .try_get(0)?;
    if tables > 0 {
        return Err(Error::ForeignDatabase {
            path: shown.into(),
            tables,
            backend: crate::Backend::Postgres,
        });
    }
    Ok(())
}

/// The connection's current schema, and whether its user may create in it.
struct Schema {
    name: String,
    may_create: bool,
    user: String,
    database: String,
}

/// The connection's current schema, or [`Error::NoSchema`] when it has none: its
/// `search_path` names no schema that exists (a typo in `options=-csearch_path=…`, a
/// schema not yet created) or is empty, or names one the user may not use (no USAGE
/// privilege: PostgreSQL then skips it). Without this, refinery failed to create its
/// history table ("no schema has been selected to create in"), and a read-only open took
/// the store for one never migrated. One round trip.
fn require_schema(client: &mut Client, shown: &str) -> Result<Schema> {
    let row = client.query_one(
        "SELECT current_schema(), \
                coalesce(has_schema_privilege(current_schema(), 'CREATE'), false), \
                current_user, current_setting('search_path'), current_database(), \
                (SELECT n.nspname FROM unnest(string_to_array(current_setting('search_path'), ',')) \
                     WITH ORDINALITY AS p(name, i) \
                 JOIN pg_catalog.pg_namespace n ON n.nspname = \
                     CASE WHEN btrim(p.name) = '\"$user\"' OR btrim(p.name) = '$user' \
                          THEN current_user::text \
                          ELSE btrim(btrim(p.name), '\"') END \
                 WHERE NOT has_schema_privilege(n.oid, 'USAGE') ORDER BY p.i LIMIT 1)",
        &[],
    )?;
    let user: String = row.try_get(2)?;
    match row.try_get::<_, Option<String>>(0)? {
        Some(name) => Ok(Schema {
            name,
            may_create: row.try_get(1)?,
            user,
            database: row.try_get(4)?,
        }),
        None => Err(Error::NoSchema {
            location: shown.to_owned(),
            search_path: row.try_get::<_, String>(3)?.into(),
            unusable: row.try_get::<_, Option<String>>(5)?.map(Into::into),
            user: user.into(),
        }),
    }
}

/// The `search_path` a store's connections need when the extensions its schema uses
/// (`unaccent`, `pg_trgm`) are installed in a schema the connection's path leaves out:
/// the path as it is, then those schemas. `None` when they are on it, or not installed
/// (the first migration installs them, in the store's own schema). PostgreSQL installs an
/// extension once per database, so a second store in another schema found them in the
/// first one's: its migration failed with "text search dictionary "unaccent" does not
/// exist", and its writes could not find `unaccent()`. One round trip.
pub(crate) fn extension_path(client: &mut Client) -> Result<Option<String>> {
    let row = client.query_one(
        "SELECT current_setting('search_path'), \
                (SELECT string_agg(DISTINCT quote_ident(n.nspname), ', ') \
                 FROM pg_catalog.pg_extension e \
                 JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace \
                 WHERE e.extname IN ('unaccent', 'pg_trgm') \
                   AND NOT n.nspname = ANY (current_schemas(true)))",
        &[],
    )?;
    let Some(missing) = row.try_get::<_, Option<String>>(1)? else {
        return Ok(None);
    };
    let path: String = row.try_get(0)?;
    Ok(Some(if path.trim().is_empty() {
        missing
    } else {
        format!("{path}, {missing}")
    }))
}

/// The highest migration version recorded (0 for a fresh database).
pub(crate) fn current_version(client: &mut Client) -> Result<i64> {
    Ok(recorded(client)?.last().map_or(0, |(v, _)| *v))
}

/// Whether the database holds exactly this build's migrations (same versions and
/// checksums), read without any lock.
fn is_current(recorded: &[(i64, String)]) -> bool {
    let mut embedded = embedded::migrations::runner().get_migrations().to_vec();
    embedded.sort_by_key(Migration::version);
    recorded.len() == embedded.len()
        && recorded
            .iter()
            .zip(&embedded)
            .all(|((version, checksum), migration)| {
                *version == i64::from(migration.version())
                    && checksum.parse::<u64>().ok() == Some(migration.checksum())
            })
}

/// Brings the schema up to `target` (every embedded migration when `None`). With
/// `read_only`, never changes anything: an older schema is [`Error::SchemaTooOld`].
/// A newer schema is always [`Error::SchemaTooNew`]. `shown` names the database in
/// errors.
pub(crate) fn migrate(
    client: &mut Client,
    target: Option<i64>,
    read_only: bool,
    shown: &str,
) -> Result<MigrationReport> {
    let known = known_version();
    let schema = require_schema(client, shown)?;
    let before = recorded(client)?;
    // Another program's database is refused before anything is written to it, read-only
    // or not; and again under the lock, before the first migration.
    if before.is_empty() {
        refuse_foreign(client, shown)?;
    }
    let found = before.last().map_or(0, |(v, _)| *v);
    if found > known {
        return Err(Error::SchemaTooNew { found, known });
    }
    if target.is_none() && is_current(&before) {
        return Ok(MigrationReport {
            from: known,
            to: known,
            applied: Vec::new(),
        });
    }
    if read_only {
        return Err(Error::SchemaTooOld {
            path: shown.into(),
            found,
            known,
        });
    }
    // Tables to create and a user who may not: refinery's own "permission denied for
    // schema public" said neither who nor what to do.
    if !schema.may_create {
        return Err(Error::SchemaNotWritable {
            location: shown.into(),
            schema: schema.name.into(),
            database: schema.database.into(),
            user: schema.user.into(),
        });
    }
    client.batch_execute("BEGIN ISOLATION LEVEL READ COMMITTED")?;
    let outcome = (|| -> Result<MigrationReport> {
        client.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])?;
        let from = current_version(client)?;
        if from > known {
            return Err(Error::SchemaTooNew { found: from, known });
        }
        if from == 0 {
            refuse_foreign(client, shown)?;
        }
        let mut runner: Runner = embedded::migrations::runner()
            .set_grouped(true)
            .set_abort_divergent(true)
            .set_abort_missing(true);
        if let Some(target) = target {
            let target = i32::try_from(target).map_err(|_| {
                Error::InvalidInput(format!("migration target {target} out of range"))
            })?;
            runner = runner.set_target(refinery::Target::Version(target));
        }
        let report = runner.run(&mut InTransaction { client })?;
        let applied = report
            .applied_migrations()
            .iter()
            .map(|m| AppliedMigration {
                version: i64::from(m.version()),
                name: m.name().to_owned(),
            })
            .collect();
        let to = current_version(client)?;
        Ok(MigrationReport { from, to, applied })
    })();
    match outcome {
        Ok(report) => {
            client.batch_execute("COMMIT")?;
            Ok(report)
        }
        Err(err) => {
            // The connection is dropped by the caller either way; a failed rollback
            // only means the server ends the transaction when it notices.
            let _ = client.batch_execute("ROLLBACK");
            Err(err)
        }
    }
}

/// A connection already inside a transaction: refinery's statements run as they are.
struct InTransaction<'c> {
    client: &'c mut Client,
}

impl Transaction for InTransaction<'_> {
    type Error = Error;

    fn execute<'a, T: Iterator<Item = &'a str>>(&mut self, queries: T) -> Result<usize> {
        let mut count = 0;
        for query in queries {
            self.client.batch_execute(query)?;
            count += 1;
        }
        Ok(count)
    }
}

impl Query<Vec<Migration>> for InTransaction<'_> {
    fn query(&mut self, query: &str) -> Result<Vec<Migration>> {
        let rows = self.client.query(query, &[])?;
        let mut applied = Vec::with_capacity(rows.len());
        for row in rows {
            let version: i32 = row.try_get(0)?;
            let name: String = row.try_get(1)?;
            let applied_on: String = row.try_get(2)?;
            // As on SQLite: the version and checksum are what refinery verifies.
            let applied_on =
                OffsetDateTime::parse(&applied_on, &Rfc3339).unwrap_or(OffsetDateTime::UNIX_EPOCH);
            let checksum: String = row.try_get(3)?;
            let checksum = checksum.parse::<u64>().map_err(|err| Error::Postgres {
                code: None,
                message: format!("migration {version} has a malformed checksum {checksum:?}"),
                source: Some(Box::new(err)),
            })?;
            applied.push(Migration::applied(version, name, applied_on, checksum));
        }
        Ok(applied)
    }
}

impl Migrate for InTransaction<'_> {}
