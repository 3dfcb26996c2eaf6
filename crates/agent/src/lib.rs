//! Placeholder crate; filled in by its issue.
