//! [`error_chain`]: how Scribe prints an error for a person, a log or a model.

/// `error` and its sources joined with `": "`, skipping a source whose text the chain
/// already shows (a wrapper that repeats its cause's message prints it once).
///
/// ```
/// use scribe_types::error_chain;
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("cannot save the session")]
/// struct Save(#[source] std::io::Error);
///
/// let err = Save(std::io::Error::other("disk full"));
/// assert_eq!(error_chain(&err), "cannot save the session: disk full");
/// ```
pub fn error_chain(error: &(dyn std::error::Error + '_)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Repeats(#[source] std::fmt::Error);

    #[test]
    fn a_cause_already_shown_is_not_repeated() {
        let err = Repeats(std::fmt::Error);
        assert_eq!(error_chain(&err), format!("outer: {}", std::fmt::Error));
    }
}
