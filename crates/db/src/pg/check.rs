//! [`crate::Database::check`] on PostgreSQL: what plain SQL can verify.
//!
//! Checked, in one read-only snapshot: the schema version against this build's; that
//! no constraint or index of the schema is held as not valid (a constraint added
//! `NOT VALID`, an index whose concurrent build failed); that the search indexes on
//! `parts_fts` (words and trigrams, both GIN) exist and are valid, with the extensions
//! they need, the trigram index partial over the text with characters of scripts written
//! without spaces (V15: PostgreSQL keeps its rows to that predicate, and the queries
//! repeat it); that `parts_fts` holds exactly every searchable part's current text and
//! words (V13's invariant, recomputed from the parts); that every part names the
//! same session as its message; and that every session's `message_count` is the number
//! of its messages.
//!
//! Skipped, and said so in [`IntegrityReport::skipped`]: the page-level structure that
//! SQLite's `integrity_check` covers (the server's own business: data checksums,
//! `amcheck`), and comparing the GIN indexes with `parts_fts`'s rows (they are updated
//! inside each write; there is no queue to drift).

use postgres::Client;

use super::PgBackend;
use crate::maintenance::{
    IndexReport, IndexStatus, IntegrityReport, MESSAGE_COUNTS_SQL, NamedCheck, message_counts,
};
use crate::{Backend, Result};

/// The search indexes on `parts_fts` (V13): a name for the report, what its definition
/// contains (matched on the definition, so a renamed index still counts), and the
/// predicate a partial one must have: the trigram index holds only text with characters
/// of scripts written without spaces (V15), and the queries are written for that.
const SEARCH_INDEXES: [(&str, &str, Option<&str>); 2] = [
    ("search (words)", "(words)", None),
    ("search (trigrams)", "gin_trgm_ops", Some("WHERE spaceless")),
];

/// The extensions the search indexes need.
const EXTENSIONS: [&str; 2] = ["unaccent", "pg_trgm"];

/// At most this many names are listed in one finding.
const MAX_LISTED: usize = 10;

impl PgBackend {
    /// [`crate::Database::check`] on PostgreSQL (see the module docs).
    pub(crate) fn check(&self) -> Result<IntegrityReport> {
        let mut client = self.client()?;
        client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
        let outcome = run(&mut client);
        // A read has nothing to lose: ending it is enough either way.
        if client.batch_execute("ROLLBACK").is_err() {
            client.discard();
        }
        outcome
    }
}

fn run(client: &mut Client) -> Result<IntegrityReport> {
    let mut checks = Vec::new();

    let found = super::migrate::current_version(client)?;
    let known = super::migrate::known_version();
    checks.push(NamedCheck {
        name: "schema_version",
        problem: (found != known)
            .then(|| format!("the database is at version {found}, this build knows {known}")),
    });

    let names = |client: &mut Client, sql: &str| -> Result<Vec<String>> {
        client
            .query(sql, &[])?
            .iter()
            .map(|row| Ok(row.try_get::<_, String>(0)?))
            .collect()
    };
    let listed = |what: &str, names: Vec<String>| -> Option<String> {
        if names.is_empty() {
            return None;
        }
        let more = names.len().saturating_sub(MAX_LISTED);
        let mut shown: Vec<String> = names.into_iter().take(MAX_LISTED).collect();
        if more > 0 {
            shown.push(format!("… {more} more"));
        }
        Some(format!("{what}: {}", shown.join(", ")))
    };

    let constraints = names(
        client,
        "SELECT c.conrelid::regclass::text || '.' || c.conname \
         FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace \
         WHERE n.nspname = current_schema() AND NOT c.convalidated ORDER BY 1",
    )?;
    checks.push(NamedCheck {
        name: "constraints",
        problem: listed("not validated", constraints),
    });

    let indexes = names(
        client,
        "SELECT c.relname::text FROM pg_index i \
         JOIN pg_class c ON c.oid = i.indexrelid \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND NOT (i.indisvalid AND i.indisready) \
         ORDER BY 1",
    )?;
    checks.push(NamedCheck {
        name: "indexes",
        problem: listed("not valid (rebuild with REINDEX)", indexes),
    });

    let strays: i64 = client
        .query_one(
            "SELECT count(*) FROM parts p JOIN messages m ON m.id = p.message_id \
             WHERE p.session_id <> m.session_id",
            &[],
        )?
        .try_get(0)?;
    checks.push(NamedCheck {
        name: "part_sessions",
        problem: (strays > 0)
            .then(|| format!("{strays} parts name another session than their message")),
    });

    let counts = client
        .query(MESSAGE_COUNTS_SQL, &[])?
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
        .collect::<Result<Vec<(String, String, String)>>>()?;
    checks.push(NamedCheck {
        name: "message_counts",
        problem: message_counts(counts),
    });

    let installed = names(client, "SELECT extname::text FROM pg_extension ORDER BY 1")?;
    let missing: Vec<String> = EXTENSIONS
        .iter()
        .filter(|ext| !installed.iter().any(|i| i == *ext))
        .map(|ext| (*ext).to_owned())
        .collect();
    checks.push(NamedCheck {
        name: "extensions",
        problem: listed("missing", missing),
    });

    let search = client.query(
        "SELECT x.indexdef, i.indisvalid AND i.indisready \
         FROM pg_indexes x \
         JOIN pg_class c ON c.relname = x.indexname \
         JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = x.schemaname \
         JOIN pg_index i ON i.indexrelid = c.oid \
         WHERE x.schemaname = current_schema() AND x.tablename = 'parts_fts' \
           AND x.indexdef LIKE '%USING gin%'",
        &[],
    )?;
    let mut reports = Vec::with_capacity(SEARCH_INDEXES.len());
    for (index, marker, predicate) in SEARCH_INDEXES {
        let mut status = IndexStatus::Missing("no such index on parts_fts".to_owned());
        for row in &search {
            let def: String = row.try_get(0)?;
            let valid: bool = row.try_get(1)?;
            if def.contains(marker) {
                let wrong_rows = predicate.filter(|p| !def.contains(p));
                status = match (valid, wrong_rows) {
                    (false, _) => IndexStatus::Missing(
                        "the index is not valid (rebuild with REINDEX)".to_owned(),
                    ),
                    // Searches still work with it, but every write pays for text the
                    // schema's index leaves out: that index is missing.
                    (true, Some(predicate)) => IndexStatus::Missing(format!(
                        "the index is not limited to the text that needs it \
                         (expected {predicate})"
                    )),
                    (true, None) => IndexStatus::Ok,
                };
                if matches!(status, IndexStatus::Ok) {
                    break;
                }
            }
        }
        reports.push(IndexReport { index, status });
    }

    // The stored search documents against the parts (V13's invariant): a row for every
    // part with search text, holding that text, its words and whether the trigram index
    // holds it (V15), and no other row.
    let stale: i64 = client
        .query_one(
            "SELECT count(*) \
             FROM (SELECT seq, scribe_search_text(type, data) AS doc FROM parts) AS p \
             FULL JOIN parts_fts AS f ON f.seq = p.seq \
             WHERE p.doc IS DISTINCT FROM f.search_text \
                OR (f.seq IS NOT NULL AND f.words IS DISTINCT FROM scribe_search_words(f.search_text)) \
                OR (f.seq IS NOT NULL AND f.spaceless IS DISTINCT FROM scribe_spaceless(f.search_text))",
            &[],
        )?
        .try_get(0)?;
    checks.push(NamedCheck {
        name: "search_documents",
        problem: (stale != 0).then(|| {
            format!(
                "{stale} part(s) whose stored search text, words or trigram flag (parts_fts) \
                 differ from the part; rebuild them with `scribe db reindex`"
            )
        }),
    });

    Ok(IntegrityReport {
        backend: Backend::Postgres,
        integrity_check: Vec::new(),
        indexes: reports,
        checks,
        skipped: vec![
            "page and b-tree structure (SQLite's integrity_check): the server's own, with \
             data checksums or the amcheck extension"
                .to_owned(),
            "GIN index contents against parts_fts: GIN indexes change inside each write, \
             with nothing queued to drift"
                .to_owned(),
        ],
    })
}
