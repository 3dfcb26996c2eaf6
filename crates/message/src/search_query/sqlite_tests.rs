//! Runs sanitized queries on real FTS5 tables (bundled SQLite): every route
//! must execute, and the supported syntax must find what it promises.

use proptest::prelude::*;
use rusqlite::Connection;

use super::SearchQuery;

const DOCS: &[(i64, &str)] = &[
    (1, "The quick brown fox jumps over the lazy dog"),
    (2, "fix the chat-send handler in my-app.config.ts"),
    (3, "milestone P2.2 is done; sp_new1 migrated"),
    (4, "I love C++ and C# but don't like Java"),
    (5, "python scripts beat java applets"),
    (6, "docker deployment with kubernetes"),
    (7, "数据库连接池配置错误"),
    (8, "这是中文文本"),
    (9, "email me at user@example.com about 100% coverage"),
    (10, "configuration of the connection pool"),
    (11, "café résumé"),
    (12, "クエリのデータベース"),
    (13, "nothing here"),
];

/// Doc 13 has this in a second indexed column that a `col:` filter would reach.
const SECRET: &str = "classified";

fn db() -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(
        "CREATE VIRTUAL TABLE words USING fts5(content, secret,
             tokenize='unicode61 remove_diacritics 2');
         CREATE VIRTUAL TABLE grams USING fts5(content, tokenize='trigram');",
    )
    .unwrap();
    for (id, doc) in DOCS {
        let secret = if *id == 13 { SECRET } else { "" };
        conn.execute(
            "INSERT INTO words(rowid, content, secret) VALUES (?1, ?2, ?3)",
            (id, doc, secret),
        )
        .unwrap();
        conn.execute(
            "INSERT INTO grams(rowid, content) VALUES (?1, ?2)",
            (id, doc),
        )
        .unwrap();
    }
    conn
}

/// Executes a route the way the search service will: as a bound parameter.
fn run(conn: &Connection, query: &SearchQuery) -> rusqlite::Result<Vec<i64>> {
    let (sql, arg) = match query {
        SearchQuery::Fts(e) => (
            "SELECT rowid FROM words WHERE words MATCH ?1 ORDER BY rowid",
            e,
        ),
        SearchQuery::Trigram(e) => (
            "SELECT rowid FROM grams WHERE grams MATCH ?1 ORDER BY rowid",
            e,
        ),
        SearchQuery::Like(p) => (
            r"SELECT rowid FROM grams WHERE content LIKE ?1 ESCAPE '\' ORDER BY rowid",
            p,
        ),
        SearchQuery::Empty => return Ok(Vec::new()),
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map([arg], |r| r.get(0))?;
    rows.collect()
}

fn search(conn: &Connection, input: &str) -> Vec<i64> {
    let query = SearchQuery::parse(input);
    run(conn, &query).unwrap_or_else(|e| panic!("{input:?} → {query:?} failed: {e}"))
}

#[test]
fn every_table_case_executes() {
    let conn = db();
    for (input, expected) in super::tests::cases() {
        if let Err(e) = run(&conn, &expected) {
            panic!("{input:?} → {expected:?} failed: {e}");
        }
        run(&conn, &SearchQuery::parse_substring(input)).unwrap();
    }
}

#[test]
fn raw_user_input_would_fail_so_the_test_is_meaningful() {
    let conn = db();
    for raw in [
        "hello AND",
        "C++",
        "\"unbalanced",
        "NOT x",
        "foo:bar",
        "*",
        "NEAR(",
    ] {
        let result = run(&conn, &SearchQuery::Fts(raw.to_owned()));
        assert!(result.is_err(), "{raw:?} unexpectedly valid FTS5");
    }
}

#[test]
fn identifiers_match_as_phrases() {
    let conn = db();
    assert_eq!(search(&conn, "chat-send"), [2]);
    assert_eq!(search(&conn, "my-app.config.ts"), [2]);
    assert_eq!(search(&conn, "P2.2"), [3]);
    assert_eq!(search(&conn, "sp_new1"), [3]);
    assert_eq!(search(&conn, "don't"), [4]);
    assert_eq!(search(&conn, "C++"), [4]);
    assert_eq!(search(&conn, "C#"), [4]);
    assert_eq!(search(&conn, "user@example.com"), [9]);
    assert_eq!(search(&conn, "100%"), [9]);
    assert!(search(&conn, "-docker").is_empty());
}

#[test]
fn phrases_or_not_prefix_and_diacritics() {
    let conn = db();
    assert_eq!(search(&conn, "\"quick brown\""), [1]);
    assert!(search(&conn, "\"brown quick\"").is_empty());
    assert_eq!(search(&conn, "quick dog"), [1]);
    assert_eq!(search(&conn, "docker OR python"), [5, 6]);
    assert!(search(&conn, "python NOT java").is_empty());
    assert_eq!(search(&conn, "java NOT python"), [4]);
    assert_eq!(search(&conn, "java -python"), [4]);
    assert_eq!(search(&conn, "-python java"), [4]);
    assert!(search(&conn, "python -java").is_empty());
    assert_eq!(search(&conn, "NOT python java"), [4]);
    assert_eq!(search(&conn, "config*"), [2, 10]);
    assert_eq!(search(&conn, "conn*"), [10]);
    assert_eq!(search(&conn, "\"connection po\"*"), [10]);
    assert_eq!(search(&conn, "cafe resume"), [11]);
    assert_eq!(search(&conn, "hello AND"), Vec::<i64>::new());
    assert_eq!(search(&conn, "a AND OR docker"), [6]);
}

#[test]
fn column_filters_are_not_honoured() {
    let conn = db();
    // Unsanitized, FTS5 would read the other column.
    let raw = run(&conn, &SearchQuery::Fts(format!("secret:{SECRET}"))).unwrap();
    assert_eq!(raw, [13]);
    for input in [
        format!("secret:{SECRET}"),
        format!("{{secret}}:{SECRET}"),
        format!("-content:{SECRET}"),
    ] {
        assert!(
            search(&conn, &input).is_empty(),
            "{input:?} read another column"
        );
    }
}

#[test]
fn cjk_goes_through_trigram_or_like() {
    let conn = db();
    assert!(matches!(
        SearchQuery::parse("数据库"),
        SearchQuery::Trigram(_)
    ));
    assert_eq!(search(&conn, "数据库"), [7]);
    assert_eq!(search(&conn, "连接池"), [7]);
    assert_eq!(search(&conn, "数据库连接池"), [7]);
    assert!(search(&conn, "数据库 NOT 连接池").is_empty());
    assert_eq!(search(&conn, "データベース"), [12]);
    assert!(matches!(SearchQuery::parse("中文"), SearchQuery::Like(_)));
    assert_eq!(search(&conn, "中文"), [8]);
    assert_eq!(search(&conn, "错"), [7]);
    assert!(search(&conn, "英文").is_empty());
}

#[test]
fn substring_mode_finds_inside_words() {
    let conn = db();
    let run_sub = |s: &str| run(&conn, &SearchQuery::parse_substring(s)).unwrap();
    assert_eq!(run_sub("bernet"), [6]);
    assert_eq!(run_sub("send handler"), [2]);
    assert_eq!(run_sub("100%"), [9]);
    // LIKE metacharacters are literal: `_` must not match any character.
    assert!(run_sub("\"s_\"").is_empty());
    assert_eq!(run_sub("\"p_\""), [3]);
    assert_eq!(run_sub("\"0%\""), [9]);
}

fn tricky_input() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "OR",
        "AND",
        "NOT",
        "NEAR",
        "NEAR(",
        "\"",
        "(",
        ")",
        "*",
        "^",
        ":",
        "-",
        "+",
        "{",
        "}",
        "C++",
        "C#",
        "don't",
        "foo:bar",
        "100%",
        "a@b.c",
        "chat-send",
        "P2.2",
        "_",
        "%",
        "\\",
        "数据库",
        "中文",
        "中",
        "データ",
        "한국어",
        "ไทย",
        "é",
        "\u{301}",
        "\u{345}",
        "\u{0}",
        "\u{7}",
        "\u{200b}",
        "\u{feff}",
        "\u{fffd}",
        "🙂",
        "x",
        "quick",
        " ",
        "\t",
        "\n",
        "''",
    ]);
    prop_oneof![
        any::<String>(),
        "[ -~]{0,40}",
        "[\\PC\\s\"*()^:+-]{0,30}",
        prop::collection::vec(atoms, 0..24).prop_map(|v| v.concat()),
        prop::collection::vec("[A-Za-z]{1,3}|NOT|OR", 0..80).prop_map(|v| v.join(" ")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_input_executes_on_real_fts5(input in tricky_input()) {
        let conn = db();
        for query in [SearchQuery::parse(&input), SearchQuery::parse_substring(&input)] {
            if let Err(e) = run(&conn, &query) {
                prop_assert!(false, "{:?} → {:?} failed: {}", input, query, e);
            }
        }
    }
}

#[test]
fn huge_inputs_execute() {
    let conn = db();
    let many_nots = (0..500)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" NOT ");
    let many_ors = (0..500)
        .map(|i| format!("w{i} x"))
        .collect::<Vec<_>>()
        .join(" OR ");
    let long_word = "a".repeat(100_000);
    let long_cjk = "数据库".repeat(10_000);
    let nested = "(".repeat(10_000) + "x" + &")".repeat(10_000);
    for input in [many_nots, many_ors, long_word, long_cjk, nested] {
        for query in [
            SearchQuery::parse(&input),
            SearchQuery::parse_substring(&input),
        ] {
            run(&conn, &query).unwrap();
        }
    }
}
