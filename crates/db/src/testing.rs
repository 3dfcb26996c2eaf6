//! Helpers for tests: the bare rows a test needs before what it tests (either backend),
//! SQL read as code alone ([`sql_code`]), and, for tests that need a PostgreSQL server, its databases: `.ci/with-postgres CMD`
//! starts a throwaway cluster and sets `SCRIBE_TEST_POSTGRES` to its connection string;
//! every PostgreSQL suite of the workspace makes its databases here (with the `postgres`
//! feature), so they are made one way.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Error, Result};

/// The variable `.ci/with-postgres` sets to the test server's connection string.
pub const TEST_SERVER_VAR: &str = "SCRIBE_TEST_POSTGRES";

/// What a PostgreSQL test says when there is no server to run against.
pub const NEEDS_SERVER: &str = "SCRIBE_TEST_POSTGRES is unset: run under .ci/with-postgres";

/// The test server's connection string ([`TEST_SERVER_VAR`]).
pub fn test_server() -> Result<String> {
    std::env::var(TEST_SERVER_VAR).map_err(|_| Error::InvalidInput(NEEDS_SERVER.to_owned()))
}

/// A name for a test database that no other test or process running at once uses:
/// `prefix`, this process and a counter.
pub fn unique_test_name(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A new, empty database `name` (lowercase letters, digits and `_`) on the test server,
/// dropped first if a run before left it; returns its connection string. The database is
/// left for the throwaway cluster to take away.
#[cfg(feature = "postgres")]
pub fn fresh_test_database(name: &str) -> Result<String> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(Error::InvalidInput(format!(
            "test database name {name:?}: lowercase letters, digits and _ only"
        )));
    }
    let server = test_server()?;
    let mut admin = postgres::Client::connect(&server, postgres::NoTls)?;
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
    admin.batch_execute(&format!("CREATE DATABASE {name}"))?;
    Ok(format!("{server} dbname={name}"))
}

/// Inserts a bare session `id` (kind `normal`, source `cli`, no title, model or settings,
/// created at the transaction's clock): the row a test needs before it can store
/// messages, when what the session holds does not matter. Either backend.
pub fn create_bare_session(tx: &mut crate::Tx<'_>, id: &str) -> Result<()> {
    let now = tx.now();
    tx.q().create_session(&bare_session(id, "cli", now))?;
    Ok(())
}

/// The row of a bare session `id` from `source` for a test: a normal session created at
/// `at`, with no parent, user, directory, title, model, prompt, permission or billing. A
/// test changes what it needs with struct update syntax
/// (`CreateSessionParams { title: Some(t), ..bare_session(…) }`).
pub fn bare_session<'a>(
    id: &'a str,
    source: &'a str,
    at: i64,
) -> crate::queries::CreateSessionParams<'a> {
    crate::queries::CreateSessionParams {
        id,
        parent_session_id: None,
        kind: "normal",
        source,
        user_id: None,
        directory: None,
        title: None,
        model: None,
        model_config: None,
        system_prompt: None,
        permission: None,
        billing_provider: None,
        billing_base_url: None,
        billing_mode: None,
        now: at,
    }
}

/// The row of a bare message `id` of `session_id` for a test: `role`, created and updated
/// at `at`, no usage, model or error, not finished. A test changes what it needs with
/// struct update syntax (`CreateMessageParams { finished_at: Some(at), ..bare_message(…) }`).
pub fn bare_message<'a>(
    id: &'a str,
    session_id: &'a str,
    role: &'a str,
    at: i64,
) -> crate::queries::CreateMessageParams<'a> {
    crate::queries::CreateMessageParams {
        id,
        session_id,
        parent_id: None,
        role,
        agent: None,
        provider: None,
        model: None,
        finish_reason: None,
        is_summary: false,
        input_tokens: 0,
        output_tokens: 0,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
        cost_usd: 0.0,
        error: None,
        created_at: at,
        updated_at: at,
        finished_at: None,
    }
}

/// `sql` as code alone: string literals left as `''`, quoted identifiers and comments
/// as a space, lowercased, whitespace runs made one space; the scan `scribe db check`
/// reads CHECK rules with. For tests that look for a function or syntax in the schema.
pub fn sql_code(sql: &str) -> String {
    crate::maintenance::sql_code(sql)
}

/// `len` bytes no compressor shrinks much, from a fixed `seed` (an xorshift over 64
/// letters, digits and `-_`): PostgreSQL compresses an index key before it compares it
/// with its limit, so a test of a key too long to index needs text like this.
pub fn incompressible(len: usize, seed: u64) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(ALPHABET[(x % 64) as usize])
        })
        .collect()
}
