//! Robustness: random and truncated SQL (queries and migrations) must yield diagnostics,
//! never a panic. Uses a tiny deterministic generator so failures reproduce.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use sqlgen::SourceFile;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "INSERT",
    "INTO",
    "VALUES",
    "UPDATE",
    "SET",
    "DELETE",
    "RETURNING",
    "*",
    "sessions",
    "messages",
    "messages_fts",
    "s",
    "m",
    "id",
    "title",
    "cost",
    "created_at",
    "s.id",
    "m.*",
    "(",
    ")",
    ",",
    "=",
    "<",
    "+",
    "-",
    "||",
    "->>",
    "?",
    "?1",
    "?2",
    "@id",
    ":name",
    "$x",
    "sqlc.arg(a)",
    "sqlc.narg(b)",
    "sqlc.slice(ids)",
    "IN",
    "NOT",
    "AND",
    "OR",
    "LIKE",
    "MATCH",
    "BETWEEN",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "COUNT(*)",
    "SUM(",
    "COALESCE(",
    "bm25(messages_fts)",
    "snippet(",
    "CAST(",
    "AS",
    "INTEGER",
    "TEXT",
    "\"n!\"",
    "\"x: T\"",
    "JOIN",
    "LEFT",
    "ON",
    "GROUP",
    "BY",
    "ORDER",
    "LIMIT",
    "OFFSET",
    "WITH",
    "RECURSIVE",
    "UNION",
    "ALL",
    "NULL",
    "1",
    "2.5",
    "'str'",
    "'unterminated",
    "x'00'",
    ";",
    "/*",
    "*/",
    "--",
    "\n",
    "é",
    "😀",
    "\"",
    "`",
    "[",
    "]",
    "ON CONFLICT",
    "DO UPDATE",
    "excluded.title",
    "sqlgen.inc(",
    "sqlgen.pair(",
    "sqlgen.nope(",
    "sqlgen.",
    "sqlgen.inc",
    "-- fragment: inc(x)\n",
];

/// Fragments the random queries may call (and random text may break).
const FRAGMENTS: &str = "-- fragment: inc(x)\nx + 1\n-- fragment: pair(a, b)\nsqlgen.inc(a) * b\n";

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

fn migrations() -> Vec<SourceFile> {
    [
        "migrations/V1__init.sql",
        "migrations/V2__search_and_renames.sql",
    ]
    .iter()
    .map(|n| SourceFile {
        display: (*n).to_string(),
        text: fixture(n),
    })
    .collect()
}

fn run(migrations: &[SourceFile], query_text: &str) {
    let q = [SourceFile {
        display: "q.sql".into(),
        text: query_text.to_string(),
    }];
    // Either outcome is fine; only a panic fails the test.
    match sqlgen::analyze_sources(migrations, &q) {
        Ok(a) => {
            let _ = a.render();
            let _ = a.explain();
        }
        Err(d) => {
            assert!(!d.is_empty());
            for item in &d.items {
                assert!(item.line >= 1 && item.col >= 1, "{item}");
            }
        }
    }
}

#[test]
fn random_queries_never_panic() {
    let m = migrations();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..1500 {
        let len = 1 + rng.next() % 30;
        let mut sql = String::from("-- name: Q :many\n");
        for _ in 0..len {
            sql.push_str(rng.pick(WORDS));
            sql.push(' ');
        }
        run(&m, &sql);
    }
}

/// Random fragment bodies, and random queries calling fragments.
#[test]
fn random_fragments_never_panic() {
    let m = migrations();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    for _ in 0..1000 {
        let len = 1 + rng.next() % 20;
        let mut sql = String::from(FRAGMENTS);
        sql.push_str("-- fragment: r(x)\n");
        for _ in 0..len {
            sql.push_str(rng.pick(WORDS));
            sql.push(' ');
        }
        sql.push_str("\n-- name: Q :many\nSELECT sqlgen.r(id), sqlgen.pair(");
        for _ in 0..len {
            sql.push_str(rng.pick(WORDS));
            sql.push(' ');
        }
        sql.push_str(", 2) FROM sessions;\n");
        run(&m, &sql);
        let cut = sql
            .char_indices()
            .map(|(i, _)| i)
            .nth((rng.next() % 200) as usize);
        run(&m, &sql[..cut.unwrap_or(sql.len())]);
    }
}

#[test]
fn truncated_fixture_queries_never_panic() {
    let m = migrations();
    for file in [
        "queries/sessions.sql",
        "queries/messages.sql",
        "queries/misc.sql",
    ] {
        let text = fixture(file);
        let cuts: Vec<usize> = text.char_indices().map(|(i, _)| i).step_by(3).collect();
        for cut in cuts {
            run(&m, &text[..cut]);
        }
    }
}

#[test]
fn truncated_and_random_migrations_never_panic() {
    let full = migrations();
    let text = full[1].text.clone();
    let cuts: Vec<usize> = text.char_indices().map(|(i, _)| i).step_by(2).collect();
    let q = "-- name: A :one\nSELECT COUNT(*) AS n FROM sessions;\n";
    for cut in cuts {
        let m = [
            full[0].clone(),
            SourceFile {
                display: "V2.sql".into(),
                text: text[..cut].to_string(),
            },
        ];
        run(&m, q);
    }
    let mut rng = Rng(42);
    for _ in 0..500 {
        let mut sql = String::from("CREATE ");
        for _ in 0..(1 + rng.next() % 20) {
            sql.push_str(rng.pick(&[
                "TABLE", "VIRTUAL", "TRIGGER", "VIEW", "INDEX", "t", "(", ")", ",", "a", "TEXT",
                "NOT NULL", "USING", "fts5(", "x=1", "BEGIN", "END", ";", "ALTER", "ADD", "COLUMN",
                "RENAME", "TO", "DROP", "AS", "SELECT", "*", "FROM", "IF", "NOT", "EXISTS",
            ]));
            sql.push(' ');
        }
        run(
            &[SourceFile {
                display: "V1.sql".into(),
                text: sql,
            }],
            q,
        );
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let m = migrations();
    for n in [100, 150, 151, 5000] {
        let chain = vec!["1"; n].join(" + ");
        run(&m, &format!("-- name: Deep :one\nSELECT {chain} AS n;\n"));
        let chain = vec!["id = ?"; n].join(" OR ");
        run(
            &m,
            &format!("-- name: Deep :many\nSELECT id FROM sessions WHERE {chain};\n"),
        );
    }
    let view = format!(
        "CREATE VIEW v AS SELECT {} AS n;",
        vec!["1"; 5000].join(" + ")
    );
    let mut deep = m.clone();
    deep.push(SourceFile {
        display: "V3.sql".into(),
        text: view,
    });
    run(
        &deep,
        "-- name: A :one\nSELECT COUNT(*) AS n FROM sessions;\n",
    );
    let parens = format!("{}1{}", "(".repeat(300), ")".repeat(300));
    run(
        &m,
        &format!("-- name: Parens :one\nSELECT {parens} AS n;\n"),
    );
}

fn run_in(dialect: sqlgen::Dialect, migrations: &[SourceFile], query_text: &str) {
    let q = [SourceFile {
        display: "q.sql".into(),
        text: query_text.to_string(),
    }];
    match sqlgen::analyze_layers(dialect, migrations, &q, &[]) {
        Ok(a) => {
            let _ = a.render();
            let _ = a.explain();
        }
        Err(d) => {
            assert!(!d.is_empty());
            for item in &d.items {
                assert!(item.line >= 1 && item.col >= 1, "{item}");
            }
        }
    }
}

/// The PostgreSQL path (its tokenizer, the `@name` rewrite, its type model, the skip-list of
/// migration statements) never panics either, and the PostgreSQL renderer runs on what
/// analyses.
#[test]
fn random_postgres_queries_and_migrations_never_panic() {
    let pg = sqlgen::Dialect::Postgres;
    let migration = fixture("dual/migrations/postgres/V1__init.sql");
    let m = [SourceFile {
        display: "V1.sql".into(),
        text: migration.clone(),
    }];
    let mut rng = Rng(0x51_7CC1_B727_220A);
    let mut words: Vec<&str> = WORDS.to_vec();
    words.extend([
        "notes",
        "tags",
        "body",
        "meta",
        "::jsonb",
        "->",
        "#>>",
        "@>",
        "~",
        "?",
        "$1",
        "$2",
        "ANY(",
        "greatest(",
        "to_char(",
        "AT TIME ZONE",
        "'UTC'",
        "ILIKE",
        "IS DISTINCT FROM",
    ]);
    for _ in 0..1500 {
        let len = 1 + rng.next() % 30;
        let mut sql = String::from("-- name: Q :many\n");
        for _ in 0..len {
            sql.push_str(rng.pick(&words));
            sql.push(' ');
        }
        run_in(pg, &m, &sql);
    }
    let cuts: Vec<usize> = migration
        .char_indices()
        .map(|(i, _)| i)
        .step_by(3)
        .collect();
    for cut in cuts {
        let m = [SourceFile {
            display: "V1.sql".into(),
            text: migration[..cut].to_string(),
        }];
        run_in(
            pg,
            &m,
            "-- name: A :one\nSELECT count(*) AS n FROM notes;\n",
        );
    }
    let queries = fixture("dual/queries/notes.sql");
    for cut in queries.char_indices().map(|(i, _)| i).step_by(2) {
        run_in(pg, &m, &queries[..cut]);
    }
    // Whole projects render both modules.
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dual");
    let project = sqlgen::analyze_project(&d.join("migrations"), &d.join("queries")).unwrap();
    assert_eq!(project.render().len(), 2);
}
