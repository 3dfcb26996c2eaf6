//! Every query in `sql/queries` that adds to a stored token or call count does it with the
//! one saturating rule (ARCHITECTURE.md, "Saturating counts"): the sqlgen fragment
//! `saturating_add(x, d)` in `sql/queries/fragments.sql`, `CASE WHEN d <= 0 THEN x + d WHEN
//! x > 9223372036854775807 - d THEN 9223372036854775807 ELSE x + d END`. An assignment to a
//! counter that reads the counter must be `counter = sqlgen.saturating_add(counter, d)`: a
//! plain `x = x + d` overflows on both backends (SQLite stores a REAL no reader takes,
//! PostgreSQL refuses the write), and the rule copied out by hand is a second definition
//! that can drift from the first. The rule's text (`MAX - d`) appears only in its fragment.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// The counters a usage query adds to.
const COUNTERS: [&str; 7] = [
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "api_call_count",
    "tool_call_count",
];

/// Tables whose counters an assignment may read as `table.counter`.
const TABLES: [&str; 2] = ["sessions", "messages"];

const FRAGMENT: &str = "sqlgen.saturating_add(";

/// What only the rule itself computes: the headroom below the largest BIGINT.
const HEADROOM: &str = "9223372036854775807 -";

fn sql_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sql_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "sql") {
            out.push(path);
        }
    }
}

/// `text` with each `--` comment blanked (newlines kept, so offsets and lines stay).
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_comment = false;
    let mut in_string = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            in_comment = false;
            out.push(c);
        } else if in_comment {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        } else if c == '\'' {
            in_string = !in_string;
            out.push(c);
        } else if !in_string && c == '-' && chars.peek() == Some(&'-') {
            in_comment = true;
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The expression after an `=` at `from`: up to a `,` or `;` outside parentheses, a clause
/// that ends a SET list, or the end.
fn expression(text: &str, from: usize) -> &str {
    let rest = &text[from..];
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        let at_word = i == 0 || !rest[..i].ends_with(is_word_char);
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return &rest[..i],
            ')' => depth -= 1,
            ',' | ';' if depth == 0 => return &rest[..i],
            _ if depth == 0
                && at_word
                && ["WHERE", "FROM", "RETURNING"].iter().any(|k| {
                    rest[i..].starts_with(k) && !rest[i + k.len()..].starts_with(is_word_char)
                }) =>
            {
                return &rest[..i];
            }
            _ => {}
        }
    }
    rest
}

/// Whether `rhs` reads `counter` of the row being set: bare, or as `sessions.counter` /
/// `messages.counter` (not a parameter `@counter`, nor another row's `child.counter`).
fn reads(rhs: &str, counter: &str) -> bool {
    rhs.match_indices(counter).any(|(i, _)| {
        let before = &rhs[..i];
        let after = &rhs[i + counter.len()..];
        if before.ends_with(is_word_char) || after.starts_with(is_word_char) {
            return false;
        }
        match before.strip_suffix('.') {
            Some(q) => TABLES
                .iter()
                .any(|t| q.ends_with(t) && !q[..q.len() - t.len()].ends_with(is_word_char)),
            None => !before.ends_with(['@', ':', '$']),
        }
    })
}

/// Whether `rhs` is exactly `sqlgen.saturating_add(counter, …)` (the counter bare or
/// qualified by its table), nothing around it.
fn is_saturating(rhs: &str, counter: &str) -> bool {
    let rhs = rhs.trim();
    let Some(args) = rhs.strip_prefix(FRAGMENT).and_then(|a| a.strip_suffix(')')) else {
        return false;
    };
    // The call's own parenthesis closes at the end.
    let mut depth = 0i32;
    for c in args.chars() {
        depth += match c {
            '(' => 1,
            ')' => -1,
            _ => 0,
        };
        if depth < 0 {
            return false;
        }
    }
    let Some((first, _)) = args.split_once(',') else {
        return false;
    };
    let first = first.trim();
    first == counter
        || TABLES
            .iter()
            .any(|t| first.strip_prefix(t).and_then(|f| f.strip_prefix('.')) == Some(counter))
}

/// The byte range of the body of `-- fragment: saturating_add(…)` in `text`, if defined there.
fn fragment_body(text: &str) -> Option<(usize, usize)> {
    let mut offset = 0;
    let mut start = None;
    for line in text.split_inclusive('\n') {
        let header = line.trim_start().strip_prefix("--").map(str::trim_start);
        let is_header =
            header.is_some_and(|h| h.starts_with("fragment:") || h.starts_with("name:"));
        if let Some(s) = start
            && is_header
        {
            return Some((s, offset));
        }
        if header
            .and_then(|h| h.strip_prefix("fragment:"))
            .is_some_and(|h| h.trim_start().starts_with("saturating_add("))
        {
            start = Some(offset + line.len());
        }
        offset += line.len();
    }
    start.map(|s| (s, text.len()))
}

/// The problems of one file (each `line: what`, in line order), and how many counter
/// additions use the fragment.
fn check(text: &str) -> (Vec<String>, usize) {
    let code = without_comments(text);
    let line_of = |off: usize| code[..off].matches('\n').count() + 1;
    let mut problems: Vec<(usize, String)> = Vec::new();
    let mut uses = 0;
    for counter in COUNTERS {
        for (i, _) in code.match_indices(counter) {
            let before = &code[..i];
            let after = &code[i + counter.len()..];
            if before.ends_with(is_word_char) || after.starts_with(is_word_char) {
                continue;
            }
            // An assignment (or comparison) `counter = …`, not `<=`, `>=` or `==`.
            let Some(rhs) = after.trim_start().strip_prefix('=') else {
                continue;
            };
            if rhs.starts_with('=') {
                continue;
            }
            let rhs = expression(&code, code.len() - rhs.len());
            if !reads(rhs, counter) {
                continue;
            }
            if is_saturating(rhs, counter) {
                uses += 1;
            } else {
                let shown = rhs.split_whitespace().collect::<Vec<_>>().join(" ");
                problems.push((line_of(i), format!("{counter} = {shown}")));
            }
        }
    }
    let body = fragment_body(text);
    for (i, _) in code.match_indices(HEADROOM) {
        if !body.is_some_and(|(a, b)| (a..b).contains(&i)) {
            problems.push((
                line_of(i),
                "the saturating rule spelled out instead of sqlgen.saturating_add".to_string(),
            ));
        }
    }
    problems.sort();
    let problems = problems
        .into_iter()
        .map(|(l, p)| format!("{l}: {p}"))
        .collect();
    (problems, uses)
}

#[test]
fn every_count_added_in_sql_saturates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sql/queries");
    let mut files = Vec::new();
    sql_files(&root, &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut uses = 0;
    let mut definitions = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let (found, n) = check(&text);
        uses += n;
        problems.extend(found.iter().map(|p| format!("{}:{p}", file.display())));
        if let Some((a, b)) = fragment_body(&text) {
            definitions.push((file.clone(), text[a..b].to_string()));
        }
    }
    assert!(
        problems.is_empty(),
        "counts added without sqlgen.saturating_add:\n{}",
        problems.join("\n")
    );
    // RollUpSessionUsage (6), AddSessionUsageDelta (7), AddMessageUsage (5).
    assert!(
        uses >= 18,
        "only {uses} saturating additions found: the scan misreads the files"
    );
    // One definition, shared by both dialects, and it is the rule.
    let [(file, body)] = definitions.as_slice() else {
        panic!(
            "saturating_add must be defined once, in sql/queries/fragments.sql: {definitions:#?}"
        );
    };
    assert!(
        file.ends_with("sql/queries/fragments.sql"),
        "{}",
        file.display()
    );
    let body = without_comments(body)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(
        body,
        "CASE WHEN d <= 0 THEN x + d WHEN x > 9223372036854775807 - d THEN 9223372036854775807 \
         ELSE x + d END"
    );
}

#[test]
fn the_check_catches_a_plain_addition_and_a_hand_written_copy() {
    let text = "\
-- fragment: saturating_add(x, d)
CASE WHEN d <= 0 THEN x + d
        WHEN x > 9223372036854775807 - d THEN 9223372036854775807
        ELSE x + d END

-- name: Q :exec
-- Comments may say input_tokens = input_tokens + 1.
UPDATE sessions
SET input_tokens = input_tokens + @input_tokens,
    output_tokens = CASE WHEN CAST(@o AS BIGINT) <= 0 THEN output_tokens + 1
        WHEN output_tokens > 9223372036854775807 - 1 THEN 9223372036854775807
        ELSE output_tokens + 1 END,
    cache_read_tokens = sqlgen.saturating_add(cache_read_tokens, coalesce(@c, 0)),
    cache_write_tokens = sqlgen.saturating_add(cache_write_tokens, 1) + 1,
    reasoning_tokens = @reasoning_tokens, api_call_count = sessions.api_call_count - 1,
    tool_call_count = sqlgen.saturating_add(sessions.tool_call_count, child.tool_call_count)
FROM (SELECT * FROM sessions) AS child
WHERE input_tokens = child.input_tokens;
";
    let (problems, uses) = check(text);
    assert_eq!(
        problems,
        [
            "9: input_tokens = input_tokens + @input_tokens",
            "10: output_tokens = CASE WHEN CAST(@o AS BIGINT) <= 0 THEN output_tokens + 1 WHEN \
             output_tokens > 9223372036854775807 - 1 THEN 9223372036854775807 ELSE output_tokens \
             + 1 END",
            "11: the saturating rule spelled out instead of sqlgen.saturating_add",
            "14: cache_write_tokens = sqlgen.saturating_add(cache_write_tokens, 1) + 1",
            "15: api_call_count = sessions.api_call_count - 1",
        ]
    );
    assert_eq!(uses, 2);
}
