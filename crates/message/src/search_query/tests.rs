//! Table-driven tests of the sanitizer: input → exact route.

use super::*;

fn fts(s: &str) -> SearchQuery {
    SearchQuery::Fts(s.to_owned())
}
fn tri(s: &str) -> SearchQuery {
    SearchQuery::Trigram(s.to_owned())
}
fn like(s: &str) -> SearchQuery {
    SearchQuery::Like(s.to_owned())
}

/// Input → exact route; the same table runs on real SQLite in `sqlite_tests`.
#[test]
fn sanitizer_table() {
    for (input, expected) in cases() {
        assert_eq!(SearchQuery::parse(input), expected, "input: {input:?}");
    }
}

pub(super) fn cases() -> Vec<(&'static str, SearchQuery)> {
    vec![
        // plain words, AND, phrases, OR, NOT, prefix
        ("hello", fts(r#""hello""#)),
        ("hello world", fts(r#""hello" "world""#)),
        ("hello AND world", fts(r#""hello" "world""#)),
        (r#""exact phrase""#, fts(r#""exact phrase""#)),
        ("docker OR kubernetes", fts(r#""docker" OR "kubernetes""#)),
        ("python NOT java", fts(r#""python" NOT "java""#)),
        ("deploy*", fts(r#""deploy"*"#)),
        (r#""connection po"*"#, fts(r#""connection po"*"#)),
        ("a b NOT c OR d", fts(r#"("a" "b" NOT "c") OR "d""#)),
        // lowercase operators are words
        ("cats or dogs", fts(r#""cats" "or" "dogs""#)),
        // unbalanced quotes and brackets
        (r#""hello world"#, fts(r#""hello world""#)),
        (r#"say "hi"#, fts(r#""say" "hi""#)),
        (r#"""#, SearchQuery::Empty),
        ("(hello", fts(r#""hello""#)),
        ("hello)", fts(r#""hello""#)),
        ("((a OR b)", fts(r#""a" OR "b""#)),
        ("[x]", fts(r#""x""#)),
        ("{col}: x", fts(r#""col" "x""#)),
        // stray operators
        ("hello AND", fts(r#""hello""#)),
        ("hello OR", fts(r#""hello""#)),
        ("OR x", fts(r#""x""#)),
        ("AND x", fts(r#""x""#)),
        ("a AND OR b", fts(r#""a" OR "b""#)),
        ("a OR OR b", fts(r#""a" OR "b""#)),
        ("a NOT", fts(r#""a""#)),
        ("a NOT NOT b", fts(r#""a" NOT "b""#)),
        ("NOT x", SearchQuery::Empty),
        ("NOT x y", fts(r#""y" NOT "x""#)),
        ("a OR NOT b", fts(r#""a""#)),
        ("OR AND NOT", SearchQuery::Empty),
        // punctuation in and around words
        ("C++", fts(r#""C""#)),
        ("C#", fts(r#""C""#)),
        ("don't", fts(r#""don't""#)),
        ("foo:bar", fts(r#""foo:bar""#)),
        ("content:secret", fts(r#""content:secret""#)),
        // web-search exclusions: a leading `-` before a word or phrase is NOT
        ("-foo", SearchQuery::Empty),
        ("foo -bar", fts(r#""foo" NOT "bar""#)),
        ("-bar foo", fts(r#""foo" NOT "bar""#)),
        (
            "foo -bar -baz qux",
            fts(r#""foo" "qux" NOT "bar" NOT "baz""#),
        ),
        (r#"foo -"two words""#, fts(r#""foo" NOT "two words""#)),
        ("foo -5", fts(r#""foo" NOT "5""#)),
        ("foo -bar*", fts(r#""foo" NOT "bar"*"#)),
        ("a OR -b c", fts(r#""a" OR ("c" NOT "b")"#)),
        ("foo NOT -bar", fts(r#""foo" NOT "bar""#)),
        ("foo --bar", fts(r#""foo" "bar""#)),
        ("foo - bar", fts(r#""foo" "bar""#)),
        ("foo -(bar)", fts(r#""foo" "bar""#)),
        ("foo-bar -baz", fts(r#""foo-bar" NOT "baz""#)),
        ("数据库 -连接池", tri(r#""数据库" NOT "连接池""#)),
        ("100%", fts(r#""100""#)),
        ("user@example.com", fts(r#""user@example.com""#)),
        ("^start", fts(r#""start""#)),
        ("^", like("%^%")),
        ("NEAR(a b)", fts(r#""NEAR" "a" "b""#)),
        ("NEAR(", fts(r#""NEAR""#)),
        ("*", like("%*%")),
        ("* foo", fts(r#""foo""#)),
        ("a + b", fts(r#""a" "b""#)),
        ("", SearchQuery::Empty),
        ("   \t\n", SearchQuery::Empty),
        ("!!! ??? ---", tri(r#""!!!" "???" "---""#)),
        // identifiers become phrases of their unicode61 tokens
        ("chat-send", fts(r#""chat-send""#)),
        ("P2.2", fts(r#""P2.2""#)),
        ("my-app.config.ts", fts(r#""my-app.config.ts""#)),
        ("sp_new1", fts(r#""sp_new1""#)),
        ("sp_new*", fts(r#""sp_new"*"#)),
        ("fix chat-send bug", fts(r#""fix" "chat-send" "bug""#)),
        // quotes inside words start a phrase; nothing leaks
        (r#"a"b"#, fts(r#""a" "b""#)),
        (r#""a ""b""#, fts(r#""a" "b""#)),
        ("résumé café", fts(r#""résumé" "café""#)),
        ("a\u{0}b", fts(r#""a" "b""#)),
        // CJK: trigram for 3+ characters, LIKE below
        ("数据库连接池", tri(r#""数据库连接池""#)),
        ("连接池", tri(r#""连接池""#)),
        ("中文", like("%中文%")),
        ("中", like("%中%")),
        ("中文 数据库", tri(r#""数据库""#)),
        ("数据库 OR 缓存", tri(r#""数据库""#)),
        ("数据库 OR 缓存层", tri(r#""数据库" OR "缓存层""#)),
        ("数据库 NOT 连接池", tri(r#""数据库" NOT "连接池""#)),
        ("数据* rust", tri(r#""rust""#)),
        ("数据*", like("%数据%")),
        ("rust 数据库连接池", tri(r#""rust" "数据库连接池""#)),
        ("「中文」", like("%中文%")),
        ("NOT 中文", SearchQuery::Empty),
        ("データベース", tri(r#""データベース""#)),
        ("한국어", tri(r#""한국어""#)),
        // symbols, operators and emoji: a term with no letter or digit is a literal
        // substring (LIKE below three characters, trigram from three); next to a word
        // in its alternative the word index answers and the symbol is tested on its
        // candidates (literals_say_what_the_route_cannot_test)
        ("🚀", like("%🚀%")),
        ("ship🚀it", fts(r#""ship🚀it""#)),
        ("🚀deployed", fts(r#""deployed""#)),
        ("🚀 deployed", fts(r#""deployed""#)),
        ("deployed -🚀", fts(r#""deployed""#)),
        ("👍🏽", like("%👍🏽%")),
        ("👨\u{200d}👩\u{200d}👧", tri("\"👨\u{200d}👩\u{200d}👧\"")),
        ("❤️", like("%❤️%")),
        ("->", like("%->%")),
        ("::", like("%::%")),
        ("!=", like("%!=%")),
        ("&&", like("%&&%")),
        ("$", like("%$%")),
        ("#", like("%#%")),
        ("%", like(r"%\%%")),
        ("_", like(r"%\_%")),
        ("-", like("%-%")),
        ("...", tri(r#""...""#)),
        ("=>>", tri(r#""=>>""#)),
        (r#""->""#, like("%->%")),
        ("-> ::", like("%->%")),
        ("-> NOT ::", like("%->%")),
        ("-> foo", fts(r#""foo""#)),
        ("foo OR ->", fts(r#""foo""#)),
        ("@user", fts(r#""user""#)),
        ("中 🚀", like("%中%")),
        ("数据库 ...", tri(r#""数据库" "...""#)),
    ]
}

#[test]
fn substring_mode_always_uses_trigram_or_like() {
    assert_eq!(SearchQuery::parse_substring("config"), tri(r#""config""#));
    assert_eq!(SearchQuery::parse_substring("ab"), like("%ab%"));
    assert_eq!(SearchQuery::parse_substring("50%_off"), tri(r#""50%_off""#));
    assert_eq!(SearchQuery::parse_substring("a_%"), like(r"%a%"));
    assert_eq!(SearchQuery::parse_substring(r#""a%""#), like(r"%a\%%"));
    assert_eq!(SearchQuery::parse_substring(r#""\a""#), like(r"%\\a%"));
    assert_eq!(SearchQuery::parse_substring("+++"), tri(r#""+++""#));
    assert_eq!(SearchQuery::parse_substring("   "), SearchQuery::Empty);
}

#[test]
fn term_count_is_capped() {
    let input = (0..MAX_TERMS + 50)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" NOT ");
    let SearchQuery::Fts(expr) = SearchQuery::parse(&input) else {
        panic!("expected fts");
    };
    assert_eq!(expr.matches('"').count(), 2 * MAX_TERMS);
    assert_eq!(SearchQuery::term_count(&input), MAX_TERMS + 50);
    assert_eq!(SearchQuery::term_count(r#"a OR "b c" -d NOT 🚀 AND e*"#), 5);
    assert_eq!(SearchQuery::term_count("OR AND NOT ( )"), 0);
}

#[test]
fn accessors() {
    assert!(SearchQuery::parse("").is_empty());
    assert_eq!(SearchQuery::parse("x").as_str(), Some(r#""x""#));
    assert_eq!(SearchQuery::Empty.as_str(), None);
}

fn owned(terms: &[&str]) -> Vec<String> {
    terms.iter().map(|t| (*t).to_owned()).collect()
}

fn check(expr: &str, all: &[&str], none: &[&str]) -> LiteralCheck {
    LiteralCheck {
        expr: expr.to_owned(),
        all: owned(all),
        none: owned(none),
        without: Vec::new(),
    }
}

/// What the index of the route cannot test comes with it: symbols next to words (required
/// or excluded), alternatives of symbols alone, short terms next to CJK; nothing for a
/// query its route answers alone.
#[test]
fn literals_say_what_the_route_cannot_test() {
    let literals = |input: &str| SearchQuery::parse_with_literals(input).1;
    for alone in [
        "hello world",
        "a b OR d",
        "deploy*",
        "C++ ship🚀it",
        "数据库连接池",
        "🚀",
        "->",
        "...",
        "NOT 🚀",
        "",
    ] {
        assert!(
            literals(alone).is_empty(),
            "{alone:?}: {:?}",
            literals(alone)
        );
    }
    assert_eq!(
        SearchQuery::parse_with_literals("🚀 deployed"),
        (
            fts(r#""deployed""#),
            Literals {
                checks: vec![check(r#""deployed""#, &["🚀"], &[])],
                alone: vec![],
            }
        )
    );
    assert_eq!(
        literals("deployed -🚀").checks,
        vec![check(r#""deployed""#, &[], &["🚀"])]
    );
    assert_eq!(
        literals("deployed NOT -> OR fix* ::").checks,
        vec![
            check(r#""deployed""#, &[], &["->"]),
            check(r#""fix"*"#, &["::"], &[]),
        ]
    );
    let (route, l) = SearchQuery::parse_with_literals("🚀 OR deployed -x");
    assert_eq!(route, fts(r#""deployed" NOT "x""#));
    assert_eq!(
        l.checks,
        vec![LiteralCheck {
            without: owned(&[r#""x""#]),
            ..check(r#""deployed" NOT "x""#, &[], &[])
        }]
    );
    assert_eq!(l.alone, vec![(owned(&["🚀"]), vec![])]);
    // Excluded words come back too: the expression's NOT tests only the matching part,
    // the check every part of the candidate's message.
    let (route, l) = SearchQuery::parse_with_literals("a b NOT c* OR d -\"e f\" -🚀");
    assert_eq!(route, fts(r#"("a" "b" NOT "c"*) OR ("d" NOT "e f")"#));
    assert_eq!(
        l.checks,
        vec![
            LiteralCheck {
                without: owned(&[r#""c"*"#]),
                ..check(r#""a" "b" NOT "c"*"#, &[], &[])
            },
            LiteralCheck {
                without: owned(&[r#""e f""#]),
                ..check(r#""d" NOT "e f""#, &[], &["🚀"])
            },
        ]
    );
    // The trigram route leaves its short terms to the checks, short alternatives alone.
    let (route, l) = SearchQuery::parse_with_literals("数据库迁移 -🚀 OR 中文");
    assert_eq!(route, tri(r#""数据库迁移""#));
    assert_eq!(l.checks, vec![check(r#""数据库迁移""#, &[], &["🚀"])]);
    assert_eq!(l.alone, vec![(owned(&["中文"]), vec![])]);
    // Its excluded terms, long ones too, are tested on every part of the message.
    let (route, l) = SearchQuery::parse_with_literals("数据库迁移 -失败了 NOT ::");
    assert_eq!(route, tri(r#""数据库迁移" NOT "失败了""#));
    assert_eq!(
        l.checks,
        vec![check(
            r#""数据库迁移" NOT "失败了""#,
            &[],
            &["失败了", "::"]
        )]
    );
    // A LIKE pattern with more to the query: every alternative, literally.
    let (route, l) = SearchQuery::parse_with_literals("-> NOT :: OR 中 🚀");
    assert_eq!(route, like("%->%"));
    assert_eq!(
        l.alone,
        vec![
            (owned(&["->"]), owned(&["::"])),
            (owned(&["中", "🚀"]), vec![]),
        ]
    );
    // The plain alternatives of the trigram route hold their short terms too.
    assert_eq!(
        SearchQuery::plain_alternatives("docker 🚀 OR 中文 数据库"),
        vec![(owned(&["docker", "🚀"]), vec![])]
    );
}

/// `-` before a symbol excludes it, as before a word; an operator that begins with a dash
/// is searched as written.
#[test]
fn a_dash_excludes_a_symbol_but_not_an_operator() {
    for excluded in ["-🚀", "-✅ -x", "-::", "-$", "-..."] {
        assert_eq!(
            SearchQuery::parse(excluded),
            SearchQuery::Empty,
            "{excluded:?}"
        );
    }
    assert_eq!(
        SearchQuery::parse_with_literals("error -::").1.checks,
        vec![check(r#""error""#, &[], &["::"])]
    );
    for (input, kept) in [("->", "%->%"), ("-", "%-%"), ("-=", "%-=%"), ("-<", "%-<%")] {
        assert_eq!(SearchQuery::parse(input), like(kept), "{input:?}");
    }
    // Two dashes are no exclusion (as `--word`): the text as written.
    assert_eq!(SearchQuery::parse("--🚀"), tri(r#""--🚀""#));
}
