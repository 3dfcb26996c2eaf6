//! scribe-db
