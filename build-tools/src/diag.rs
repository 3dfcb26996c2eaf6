//! Diagnostics: positioned, human-readable errors, collected so one run reports every problem.

use std::fmt;

/// One problem found in a migration or query file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Diagnostic {
    /// File as shown to the user (relative to the repository root when possible).
    pub file: String,
    /// 1-based line.
    pub line: u64,
    /// 1-based column (in characters).
    pub col: u64,
    /// Name of the query (or fragment) the problem belongs to, if any.
    pub query: Option<String>,
    /// Lowercase cause, e.g. `no column "titel" in "sessions"; did you mean "title"?`.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.col)?;
        if let Some(q) = &self.query {
            write!(f, "{q}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Every problem found in one run; `Display` prints one line per diagnostic.
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
pub struct Diagnostics {
    /// All diagnostics, sorted by file and position.
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// Wraps a single diagnostic.
    pub fn single(d: Diagnostic) -> Self {
        Diagnostics { items: vec![d] }
    }

    /// Wraps several diagnostics, sorted by file and position.
    pub fn from_items(mut items: Vec<Diagnostic>) -> Self {
        items.sort();
        items.dedup();
        Diagnostics { items }
    }

    /// True when nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of diagnostics.
    pub fn len(&self) -> usize {
        self.items.len()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.items.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// Edit distance (optimal string alignment: a swap of neighbours counts once), case-insensitive.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j - 1] + cost)
                .min(d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

/// The candidate closest to `name`, if it is close enough to be a plausible typo.
pub fn nearest<'a, I>(name: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let limit = match name.chars().count() {
        0..=2 => 0,
        3..=5 => 1,
        _ => 2,
    };
    candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `; did you mean "x"?` or nothing.
pub fn suggestion<'a, I>(name: &str, candidates: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    match nearest(name, candidates) {
        Some(c) => format!("; did you mean \"{c}\"?"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_swaps_once() {
        assert_eq!(edit_distance("titel", "title"), 1);
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("Sessions", "sesions"), 1);
    }

    #[test]
    fn suggestions_need_a_plausible_typo() {
        assert_eq!(
            nearest("titel", ["id", "title", "created_at"]),
            Some("title")
        );
        assert_eq!(nearest("x", ["s"]), None);
        assert_eq!(nearest("nope", ["id", "title"]), None);
        assert_eq!(
            suggestion("craeted_at", ["created_at"]),
            "; did you mean \"created_at\"?"
        );
    }
}
