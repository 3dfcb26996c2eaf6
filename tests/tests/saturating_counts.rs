//! Every query in `sql/queries` that adds to a stored token or call count does it with the
//! saturating rule (ARCHITECTURE.md, "Saturating counts"): `x = CASE WHEN d <= 0 THEN x + d
//! WHEN x > 9223372036854775807 - d THEN 9223372036854775807 ELSE x + d END`. sqlgen cannot
//! name an expression once, so the rule is spelled at each counter; this keeps a new query
//! (or a dialect override) from adding with a plain `x = x + d`, which overflows on both
//! backends (SQLite stores a REAL no reader takes, PostgreSQL refuses the write).
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

const MAX: &str = "9223372036854775807";

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

/// The problems of one assignment `counter = rhs` (`rhs` up to the end of its statement
/// part: the lines until the next assignment), or `None` when it does not add to itself.
fn check(counter: &str, rhs: &str) -> Option<String> {
    let own = [format!("{counter} +"), format!("sessions.{counter} +")];
    if !own.iter().any(|o| rhs.contains(o.as_str())) {
        return None;
    }
    let saturating = rhs.trim_start().starts_with("CASE WHEN")
        && rhs.contains("<= 0 THEN")
        && rhs.contains(&format!("> {MAX} - "))
        && rhs.contains(&format!("THEN {MAX}"));
    (!saturating).then(|| format!("{counter} = {}", rhs.trim()))
}

/// The assignments `counter = …` of a file: line, counter and the assigned expression.
fn assignments(text: &str) -> Vec<(usize, &'static str, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let trimmed = trimmed.strip_prefix("SET ").unwrap_or(trimmed);
        for counter in COUNTERS {
            let Some(rhs) = trimmed.strip_prefix(&format!("{counter} = ")) else {
                continue;
            };
            // An assignment ends with its comma (or the SET list with a new clause).
            let mut whole = rhs.to_owned();
            for next in &lines[i + 1..] {
                let ended = whole.trim_end().ends_with([',', ';']);
                let next = next.trim_start();
                let clause = ["--", "WHERE", "FROM", "RETURNING"]
                    .iter()
                    .any(|c| next.starts_with(c));
                if ended || clause {
                    break;
                }
                whole.push(' ');
                whole.push_str(next);
            }
            out.push((i + 1, counter, whole));
        }
    }
    out
}

#[test]
fn every_count_added_in_sql_saturates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sql/queries");
    let mut files = Vec::new();
    sql_files(&root, &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (line, counter, rhs) in assignments(&text) {
            if rhs.contains(&format!("{counter} +")) {
                checked += 1;
            }
            if let Some(problem) = check(counter, &rhs) {
                problems.push(format!("{}:{line}: {problem}", file.display()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "counts added without the saturating rule:\n{}",
        problems.join("\n")
    );
    // AddSessionUsage, RollUpSessionUsage, AddSessionUsageDelta, AddMessageUsage.
    assert!(
        checked >= 24,
        "only {checked} additions found: the scan misreads the files"
    );
}

#[test]
fn the_check_catches_a_plain_addition() {
    let plain = "UPDATE sessions\nSET input_tokens = input_tokens + @input_tokens,\n    \
                 output_tokens = CASE WHEN CAST(@o AS BIGINT) <= 0 THEN output_tokens + 1\n    \
                 WHEN output_tokens > 9223372036854775807 - 1 THEN 9223372036854775807\n    \
                 ELSE output_tokens + 1 END,\n    updated_at = @now\nWHERE id = @id;";
    let found: Vec<_> = assignments(plain)
        .into_iter()
        .filter_map(|(_, counter, rhs)| check(counter, &rhs))
        .collect();
    assert_eq!(found, vec!["input_tokens = input_tokens + @input_tokens,"]);
}
