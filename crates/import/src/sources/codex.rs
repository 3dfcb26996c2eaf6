//! Codex (stub).

use std::path::{Path, PathBuf};

use super::{FileReport, Importer, Unit};
use crate::Source;
use crate::env::Env;
use crate::error::Result;
use crate::record::{Batch, Resume};

/// The Codex importer.
#[derive(Debug, Clone, Copy)]
pub struct Codex;

impl Importer for Codex {
    fn source(&self) -> Source {
        Source::Codex
    }

    fn default_roots(&self, _env: &Env) -> Vec<PathBuf> {
        Vec::new()
    }

    fn discover(&self, _root: &Path, _out: &mut Vec<PathBuf>) -> Result<()> {
        Ok(())
    }

    fn read(&self, unit: &Unit<'_>, _out: &mut Batch, _report: &mut FileReport) -> Result<Resume> {
        Ok(unit.resume.clone())
    }
}
