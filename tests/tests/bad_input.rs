//! Bad input, property-tested: any string searched never errors, any JSON given to the part
//! decoder never panics (and what it accepts re-encodes to itself), random and truncated
//! SQL given to sqlgen yields diagnostics rather than a panic, and titles full of control
//! and invisible characters are normalized or refused with a typed error.
//!
//! Case counts are kept near 256 per property so the file runs in seconds in debug builds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use scribe_db::Database;
use scribe_db::search::{SearchFilter, TextQuery};
use scribe_message::{
    KNOWN_PART_TYPES, LIKE_ESCAPE, MessageService, NewMessage, Part, Role, SearchOptions,
    SearchQuery, ToolState,
};
use scribe_session::{NewSession, SessionError, SessionService};
use serde_json::{Value, json};
use sqlgen::{Dialect, SourceFile};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        // Shrinking a failure is worth it, but not unbounded in CI.
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------
// Search

/// One database with varied content (words, punctuation, CJK, Thai, tool calls), shared by
/// all search cases.
fn search_fixture() -> &'static (MessageService, String) {
    static FIXTURE: OnceLock<(MessageService, String)> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let db = Arc::new(Database::open_in_memory().unwrap());
        let session = scribe_tests::create_session(&db, Some("search fixture")).unwrap();
        let messages = MessageService::new(db);
        let texts = [
            "The build failed: cargo test -p scribe-db returned exit code 101",
            "Use C++ and C# or F#; 100% of tests pass (see P2.2 in my-app.config.ts)",
            "email a@b.com about the NEAR(x y) bug; col:value \"quoted\" text*",
            "数据库连接池已满，请稍后再试",
            "中文搜索测试：全文索引与三元组",
            "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
            "日本語のテキストも検索できます",
            "OR AND NOT are operators only in UPPER case; or and not are words",
            "underscores_and%percent signs\\backslashes",
            "émigré café naïve — diacritics folded",
        ];
        for (i, text) in texts.iter().enumerate() {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let mut parts = vec![Part::text(*text)];
            if i % 3 == 0 {
                let mut tool = Part::tool(
                    format!("call_{i}"),
                    "grep",
                    json!({ "pattern": text, "path": "src/" }),
                );
                if let Part::Tool(t) = &mut tool {
                    t.state = ToolState::Completed {
                        output: format!("src/lib.rs:{i}: {text}"),
                        title: "grep".into(),
                        metadata: Value::Null,
                        started_at: 1,
                        ended_at: 2,
                    };
                }
                parts.push(tool);
            }
            messages
                .create(NewMessage::new(session.as_str(), role, parts))
                .unwrap();
        }
        (messages, session)
    })
}

/// Search input: arbitrary strings, and strings built from the characters and words that
/// FTS5 gives meaning to.
fn search_input() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        Just("\"".to_owned()),
        Just("(".to_owned()),
        Just(")".to_owned()),
        Just("*".to_owned()),
        Just("^".to_owned()),
        Just("+".to_owned()),
        Just("-".to_owned()),
        Just(":".to_owned()),
        Just("%".to_owned()),
        Just("_".to_owned()),
        Just("\\".to_owned()),
        Just("'".to_owned()),
        Just(" ".to_owned()),
        Just("\u{0}".to_owned()),
        Just("\u{200B}".to_owned()),
        Just("OR".to_owned()),
        Just("AND".to_owned()),
        Just("NOT".to_owned()),
        Just("NEAR(".to_owned()),
        Just("col:".to_owned()),
        Just("search_text:".to_owned()),
        Just("{a b}".to_owned()),
        Just("数据".to_owned()),
        Just("数据库".to_owned()),
        Just("ไทย".to_owned()),
        Just("cargo".to_owned()),
        Just("build".to_owned()),
        Just("café".to_owned()),
        "[a-zA-Z0-9]{1,8}",
        "\\PC{1,3}",
    ];
    prop_oneof![
        any::<String>(),
        proptest::collection::vec(fragment, 0..24).prop_map(|v| v.concat()),
        proptest::collection::vec("[a-z]{1,6}", 0..80).prop_map(|v| v.join(" ")),
    ]
}

proptest! {
    #![proptest_config(config(256))]

    /// Whatever a user types, search answers (possibly with no hits), through every route
    /// and filter.
    #[test]
    fn any_search_string_is_answered(query in search_input(), session_only in any::<bool>()) {
        let (messages, session) = search_fixture();
        let options = SearchOptions {
            session_id: session_only.then(|| session.clone()),
            roles: if session_only { vec![Role::User] } else { Vec::new() },
            ..SearchOptions::default()
        };
        let hits = messages.search(&query, &options);
        prop_assert!(hits.is_ok(), "search({query:?}) failed: {:?}", hits.err());

        // The substring route, which search uses only for spaceless scripts, run directly
        // against both indexes' tables.
        let route = match SearchQuery::parse_substring(&query) {
            SearchQuery::Trigram(expr) => Some(TextQuery::Trigrams(expr)),
            SearchQuery::Like(pattern) => Some(TextQuery::Substring(unescape_like(&pattern))),
            SearchQuery::Empty => None,
            SearchQuery::Fts(expr) => Some(TextQuery::Words(expr)),
        };
        if let Some(route) = route {
            let filter = SearchFilter::new(route.clone());
            let found = messages
                .database()
                .read(|conn| scribe_db::search::search(conn, &filter));
            prop_assert!(found.is_ok(), "{route:?} failed: {:?}", found.err());
        }
        if let SearchQuery::Fts(expr) = SearchQuery::parse(&query) {
            let filter = SearchFilter::new(TextQuery::Words(expr.clone()));
            let found = messages
                .database()
                .read(|conn| scribe_db::search::search(conn, &filter));
            prop_assert!(found.is_ok(), "{expr:?} failed: {:?}", found.err());
        }
    }
}

/// Undoes the `LIKE` escaping of [`SearchQuery::Like`]: `%term%` with `\` escapes.
fn unescape_like(pattern: &str) -> String {
    let inner = pattern
        .strip_prefix('%')
        .and_then(|p| p.strip_suffix('%'))
        .unwrap_or(pattern);
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == LIKE_ESCAPE {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn search_finds_what_the_fixture_holds() {
    // Guards the property above against a fixture where nothing matches anything.
    let (messages, _) = search_fixture();
    let options = SearchOptions::default();
    for (query, at_least) in [
        ("cargo", 1),
        ("数据库", 1),
        ("数据", 1),
        ("P2.2", 1),
        ("C++", 1),
        ("café", 1),
        ("NEAR(x", 1),
        ("\"", 0),
    ] {
        let hits = messages.search(query, &options).unwrap();
        assert!(hits.len() >= at_least, "{query:?}: {hits:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Part decoding

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
        prop::sample::select(&KNOWN_PART_TYPES[..]).prop_map(|t| json!(t)),
        prop::sample::select(&["pending", "running", "completed", "error", "url", "inline"][..])
            .prop_map(|t| json!(t)),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(field_name(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Field names of the part shapes, so random objects often come close to a real part.
fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(
            &[
                "type",
                "text",
                "synthetic",
                "time",
                "start",
                "end",
                "tool",
                "call_id",
                "input",
                "state",
                "status",
                "output",
                "title",
                "metadata",
                "started_at",
                "ended_at",
                "message",
                "mime",
                "filename",
                "source",
                "kind",
                "url",
                "data",
                "reason",
                "tokens",
                "cost",
                "auto",
                "hash",
                "files",
                "name",
                "prompt",
                "agent",
                "compacted_at",
                "signature",
                "detail",
            ][..]
        )
        .prop_map(str::to_owned),
        "[a-z_]{1,8}",
    ]
}

/// A random object tagged with a known part type.
fn tagged_part() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(&KNOWN_PART_TYPES[..]),
        prop::collection::btree_map(field_name(), json_value(), 0..8),
    )
        .prop_map(|(tag, fields)| {
            let mut map: serde_json::Map<String, Value> = fields.into_iter().collect();
            map.insert("type".into(), json!(tag));
            Value::Object(map)
        })
}

proptest! {
    #![proptest_config(config(256))]

    /// Arbitrary text never panics the decoder.
    #[test]
    fn part_decoder_survives_any_text(text in any::<String>()) {
        let _ = Part::from_json(&text);
    }

    /// Arbitrary JSON never panics the decoder; whatever it accepts encodes and decodes
    /// back to the same part.
    #[test]
    fn part_decoder_survives_any_json(value in prop_oneof![json_value(), tagged_part()]) {
        let text = value.to_string();
        if let Ok(part) = Part::from_json(&text) {
            let encoded = part.to_json();
            prop_assert!(encoded.is_ok(), "{part:?} does not encode");
            let again = Part::from_json(&encoded.unwrap());
            prop_assert!(again.is_ok(), "{part:?} does not decode again: {:?}", again.err());
            prop_assert_eq!(again.unwrap(), part);
        }
    }

    /// Real part JSON cut anywhere never panics the decoder.
    #[test]
    fn truncated_part_json_never_panics(cut in 0usize..400) {
        let part = Part::Tool(scribe_message::ToolPart {
            call_id: "call_1".into(),
            tool: "bash".into(),
            input: json!({ "command": "ls -la 数据库", "timeout": 30 }),
            state: ToolState::Error {
                message: "permission denied".into(),
                started_at: None,
                ended_at: 5,
            },
            compacted_at: Some(7),
            extra: Default::default(),
        });
        let text = part.to_json().unwrap();
        let cut = text.char_indices().map(|(i, _)| i).nth(cut).unwrap_or(text.len());
        let decoded = Part::from_json(&text[..cut]);
        if cut == text.len() {
            prop_assert_eq!(decoded.unwrap(), part);
        } else {
            prop_assert!(decoded.is_err());
        }
    }
}

/// Nesting past serde_json's limit never crashes the decoder: text that is no part stays
/// an error, and a part whose value nests too deep (an older build stored any depth)
/// decodes with what lies below `MAX_PART_DEPTH` as its JSON text, so it can be stored.
#[test]
fn deeply_nested_json_is_an_error_or_text_not_a_crash() {
    for depth in [200, 10_000, 100_000] {
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(Part::from_json(&nested).is_err());
        let inside = format!(
            r#"{{"type":"tool","tool":"x","call_id":"c","state":{{"status":"pending"}},"input":{nested}}}"#
        );
        let part = Part::from_json(&inside).unwrap();
        assert_eq!(part.depth(), scribe_message::MAX_PART_DEPTH);
        assert!(part.to_json().is_ok());
        let unbalanced = format!(r#"{{"type":"tool","input":{}}}"#, "[".repeat(depth));
        assert!(Part::from_json(&unbalanced).is_err());
    }
}

// ---------------------------------------------------------------------------------------
// sqlgen

fn sql_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sql")
        .join(kind)
}

/// The `.sql` files of `sql/<kind>` in name order (= version order for migrations).
fn sources(kind: &str) -> Vec<SourceFile> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(sql_dir(kind))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    // V10 after V9: order by the number after `V`.
    paths.sort_by_key(|p| {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let version: u64 = name
            .trim_start_matches('V')
            .split("__")
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX);
        (version, name)
    });
    paths
        .into_iter()
        .map(|p| SourceFile {
            display: format!("sql/{kind}/{}", p.file_name().unwrap().to_string_lossy()),
            text: std::fs::read_to_string(&p).unwrap(),
        })
        .collect()
}

fn migrations() -> &'static [SourceFile] {
    static MIGRATIONS: OnceLock<Vec<SourceFile>> = OnceLock::new();
    MIGRATIONS.get_or_init(|| sources("migrations/sqlite"))
}

fn queries() -> &'static [SourceFile] {
    static QUERIES: OnceLock<Vec<SourceFile>> = OnceLock::new();
    QUERIES.get_or_init(|| sources("queries"))
}

/// SQLite's own spellings (`sql/queries/sqlite/`): queries and fragments that replace the
/// shared ones, or that only SQLite has (the shared queries use fragments defined there).
fn sqlite_queries() -> &'static [SourceFile] {
    static QUERIES: OnceLock<Vec<SourceFile>> = OnceLock::new();
    QUERIES.get_or_init(|| sources("queries/sqlite"))
}

fn query_file(text: String) -> Vec<SourceFile> {
    vec![SourceFile {
        display: "sql/queries/fuzz.sql".into(),
        text,
    }]
}

/// Tokens that make SQL-looking noise.
fn sql_noise() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        prop::sample::select(
            &[
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
                "JOIN",
                "LEFT",
                "ON",
                "GROUP",
                "BY",
                "ORDER",
                "LIMIT",
                "WITH",
                "RECURSIVE",
                "AS",
                "CASE",
                "WHEN",
                "THEN",
                "END",
                "NULL",
                "*",
                "(",
                ")",
                ",",
                ";",
                "=",
                "->>",
                "||",
                "?",
                "?1",
                "?999999999999",
                "@id",
                ":x",
                "$y",
                "sqlc.arg(id)",
                "sqlc.narg(",
                "sqlc.slice(ids)",
                "sessions",
                "messages",
                "parts",
                "parts_fts",
                "id",
                "title",
                "\"n!\"",
                "\"x: serde_json::Value\"",
                "'str'",
                "'unterminated",
                "--",
                "/*",
                "*/",
                "-- name: Q :one",
                "-- name: :many",
                "-- name: Bad :nope",
                "\n",
                "  ",
                "\u{0}",
                "数据",
            ][..]
        )
        .prop_map(str::to_owned),
        "[a-z_]{1,6}",
        "[0-9]{1,4}",
        "\\PC{1,2}",
    ];
    prop::collection::vec(token, 0..40).prop_map(|v| v.join(" "))
}

proptest! {
    #![proptest_config(config(192))]

    /// Any query file text: diagnostics or code, never a panic.
    #[test]
    fn sqlgen_survives_random_queries(noise in sql_noise()) {
        let _ = sqlgen::generate_sources(migrations(), &query_file(noise));
    }

    /// A named query whose body cannot parse (an unclosed bracket) is always reported.
    #[test]
    fn sqlgen_reports_broken_queries(noise in "[^()]{0,60}", kind in prop::sample::select(&[":one", ":many", ":exec", ":execrows", ":execlastid"][..])) {
        let text = format!("-- name: Broken {kind}\nSELECT ( {noise}\n");
        let result = sqlgen::analyze_sources(migrations(), &query_file(text));
        prop_assert!(result.is_err());
        let shown = result.err().unwrap().to_string();
        prop_assert!(shown.contains("Broken"), "diagnostic does not name the query: {}", shown);
    }

    /// Real query files cut at any character: diagnostics or code, never a panic.
    #[test]
    fn sqlgen_survives_truncated_queries(file in 0usize..64, cut in 0usize..20_000) {
        let all = queries();
        let source = &all[file % all.len()];
        let cut = source.text.char_indices().map(|(i, _)| i).nth(cut).unwrap_or(source.text.len());
        let _ = sqlgen::generate_sources(migrations(), &query_file(source.text[..cut].to_owned()));
    }

}

proptest! {
    // Each case re-checks every real query against the broken schema: fewer cases.
    #![proptest_config(config(64))]

    /// Migrations cut at any character or followed by noise: diagnostics or code, never a
    /// panic.
    #[test]
    fn sqlgen_survives_broken_migrations(file in 0usize..16, cut in 0usize..20_000, noise in sql_noise()) {
        let mut broken = migrations().to_vec();
        let index = file % broken.len();
        let text = &broken[index].text;
        let cut = text.char_indices().map(|(i, _)| i).nth(cut).unwrap_or(text.len());
        broken[index].text = format!("{}{noise}", &text[..cut]);
        let _ = sqlgen::analyze_layers(Dialect::Sqlite, &broken, queries(), sqlite_queries());
    }
}

#[test]
fn sqlgen_accepts_the_real_sources() {
    // Guards the properties above: the untouched inputs generate code.
    sqlgen::analyze_layers(Dialect::Sqlite, migrations(), queries(), sqlite_queries()).unwrap();
}

// ---------------------------------------------------------------------------------------
// Titles

fn title_input() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-zA-Z0-9 ]{1,6}",
        Just("\u{200B}".to_owned()),
        Just("\u{200D}".to_owned()),
        Just("\u{FEFF}".to_owned()),
        Just("\u{202E}".to_owned()),
        Just("\u{2066}".to_owned()),
        Just("\u{00AD}".to_owned()),
        Just("\u{E0041}".to_owned()),
        Just("\u{0}".to_owned()),
        Just("\u{7}".to_owned()),
        Just("\u{1B}[31m".to_owned()),
        Just("\r\n".to_owned()),
        Just("\t".to_owned()),
        Just("\u{3000}".to_owned()),
        Just("标题".to_owned()),
        Just("#2".to_owned()),
        Just("%_".to_owned()),
        any::<char>().prop_map(String::from),
    ];
    prop_oneof![
        prop::collection::vec(piece, 0..12).prop_map(|v| v.concat()),
        any::<String>(),
        "[a-z]{190,210}",
    ]
}

fn invisible_or_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

fn sessions() -> &'static SessionService {
    static SESSIONS: OnceLock<SessionService> = OnceLock::new();
    SESSIONS.get_or_init(|| SessionService::new(Arc::new(Database::open_in_memory().unwrap())))
}

proptest! {
    #![proptest_config(config(256))]

    /// A title is stored normalized (no control or invisible characters, no outer or
    /// doubled whitespace) or refused with a typed error; never stored raw, never a panic.
    #[test]
    fn titles_are_normalized_or_refused(raw in title_input()) {
        let service = sessions();
        match service.create(NewSession::titled(raw.clone())) {
            Ok(session) => {
                let title = session.title.clone().unwrap();
                prop_assert!(!title.chars().any(invisible_or_control), "{title:?} from {raw:?}");
                prop_assert_eq!(title.trim(), title.as_str());
                prop_assert!(!title.contains("  "), "{title:?}");
                prop_assert!(!title.is_empty());
                prop_assert!(title.chars().count() <= scribe_session::MAX_TITLE_CHARS);
                prop_assert_eq!(service.get(&session.id).unwrap().title, Some(title));
            }
            Err(
                SessionError::InvalidTitle { .. }
                | SessionError::TitleTooLong { .. }
                | SessionError::TitleInUse { .. },
            ) => {}
            Err(other) => prop_assert!(false, "{raw:?}: untyped refusal {other:?}"),
        }
    }
}
