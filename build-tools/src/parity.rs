//! Parity of the two dialects: every table has the same model (columns in the same order with
//! the same names, Rust types and nullability), and every query name has the same kind,
//! parameters and result columns, so one set of generated types and one trait serve both.
//! A difference is a diagnostic placed on the SQLite side that names both positions.

use crate::catalog::{Column, Origin, TableKind};
use crate::codegen::{col_type, param_type, row_type};
use crate::diag::Diagnostic;
use crate::{Analyzed, QueryInfo};

/// Every difference between the SQLite and the PostgreSQL analysis.
pub fn check(sqlite: &Analyzed, pg: &Analyzed) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    tables(sqlite, pg, &mut out);
    // A table that differs makes every query reading it differ too; its own report says
    // what to fix, so the queries are compared once the tables agree.
    if out.is_empty() {
        queries(sqlite, pg, &mut out);
    }
    out
}

fn at(origin: &Origin, query: Option<&str>, message: String) -> Diagnostic {
    Diagnostic {
        file: origin.file.clone(),
        line: origin.line,
        col: origin.col,
        query: query.map(str::to_string),
        message,
    }
}

/// Whether a PostgreSQL table named `name` stands in for an SQLite virtual table of the
/// same name (Scribe's `parts_fts`: PostgreSQL's stored search documents where SQLite has
/// FTS5). Such a table is each dialect's own index, never read by a shared query nor
/// copied between backends, so it is not compared and gets no model (models come from
/// SQLite's tables). The other PostgreSQL-only tables the check allows are its own
/// machinery, named `scribe_…` like its functions (V19's change outbox): no model either.
fn stands_in(sqlite: &Analyzed, name: &str) -> bool {
    name.get(..7)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("scribe_"))
        || sqlite
            .catalog
            .tables
            .iter()
            .any(|t| t.kind == TableKind::Virtual && t.name.eq_ignore_ascii_case(name))
}

fn tables(sqlite: &Analyzed, pg: &Analyzed, out: &mut Vec<Diagnostic>) {
    let models = |a: &Analyzed| {
        a.catalog
            .tables
            .iter()
            .filter(|t| t.kind == TableKind::Table)
            .cloned()
            .collect::<Vec<_>>()
    };
    let (lite, post) = (models(sqlite), models(pg));
    for t in &lite {
        let Some(p) = post.iter().find(|p| p.name.eq_ignore_ascii_case(&t.name)) else {
            out.push(at(
                &t.origin,
                None,
                format!("table \"{}\" exists in sqlite but not in postgres", t.name),
            ));
            continue;
        };
        let lc: Vec<&Column> = t.visible().collect();
        let pc: Vec<&Column> = p.visible().collect();
        for (i, (a, b)) in lc.iter().zip(&pc).enumerate() {
            let (ta, tb) = (shown_type(a), shown_type(b));
            if !a.name.eq_ignore_ascii_case(&b.name) {
                out.push(at(
                    &a.origin,
                    None,
                    format!(
                        "column {} of \"{}\" is \"{}\" in sqlite but \"{}\" in postgres ({}); \
                         the models must have the same columns in the same order",
                        i + 1,
                        t.name,
                        a.name,
                        b.name,
                        b.origin
                    ),
                ));
            } else if ta != tb {
                let hint = match b.ty {
                    crate::SqlType::Int4 | crate::SqlType::Int2 => "; use BIGINT",
                    crate::SqlType::Float4 => "; use DOUBLE PRECISION",
                    _ => "",
                };
                out.push(at(
                    &a.origin,
                    None,
                    format!(
                        "{}.{} is {ta} in sqlite but {tb} in postgres ({}: {}){hint}",
                        t.name,
                        a.name,
                        b.origin,
                        b.ty.sql_name()
                    ),
                ));
            }
        }
        if lc.len() != pc.len() {
            let (more, origin, extra) = if lc.len() > pc.len() {
                ("sqlite", &lc[pc.len()].origin, &lc[pc.len()].name)
            } else {
                ("postgres", &pc[lc.len()].origin, &pc[lc.len()].name)
            };
            out.push(at(
                origin,
                None,
                format!(
                    "\"{}\" has {} columns in sqlite ({}) and {} in postgres ({}); \"{extra}\" \
                     exists only in {more}",
                    t.name,
                    lc.len(),
                    t.origin,
                    pc.len(),
                    p.origin
                ),
            ));
        }
    }
    for p in &post {
        if stands_in(sqlite, &p.name) {
            continue;
        }
        if !lite.iter().any(|t| t.name.eq_ignore_ascii_case(&p.name)) {
            out.push(at(
                &p.origin,
                None,
                format!("table \"{}\" exists in postgres but not in sqlite", p.name),
            ));
        }
    }
}

fn shown_type(c: &Column) -> String {
    let base = c.ty.rust_owned();
    if c.nullable {
        format!("Option<{base}>")
    } else {
        base.to_string()
    }
}

fn origin(q: &QueryInfo, pos: (u64, u64)) -> Origin {
    let (line, col) = if pos.0 == 0 { (q.line, 1) } else { pos };
    Origin {
        file: q.file.clone(),
        line,
        col,
    }
}

fn queries(sqlite: &Analyzed, pg: &Analyzed, out: &mut Vec<Diagnostic>) {
    for q in &sqlite.queries {
        let here = origin(q, (q.line, 1));
        let Some(p) = pg.queries.iter().find(|p| p.name == q.name) else {
            out.push(at(
                &here,
                Some(&q.name),
                format!(
                    "query \"{}\" exists in sqlite but not in postgres; share it or add a \
                     postgres override",
                    q.name
                ),
            ));
            continue;
        };
        let there = origin(p, (p.line, 1));
        let mut differ = |o: &Origin, what: String| {
            out.push(at(o, Some(&q.name), what));
        };
        if q.kind != p.kind {
            differ(
                &here,
                format!(
                    "is {} in sqlite but {} in postgres ({there})",
                    q.kind, p.kind
                ),
            );
            continue;
        }
        if q.read_only != p.read_only {
            let kind = |r: bool| if r { "a SELECT" } else { "a data change" };
            differ(
                &here,
                format!(
                    "is {} in sqlite but {} in postgres ({there})",
                    kind(q.read_only),
                    kind(p.read_only)
                ),
            );
        }
        if q.kind == crate::Kind::One && q.one_row != p.one_row {
            let rows = |one: bool| {
                if one {
                    "always exactly one row"
                } else {
                    "at most one row"
                }
            };
            differ(
                &here,
                format!(
                    "returns {} in sqlite but {} in postgres ({there})",
                    rows(q.one_row),
                    rows(p.one_row)
                ),
            );
        }
        for (i, (a, b)) in q.params.iter().zip(&p.params).enumerate() {
            let (ta, tb) = (param_type(a, ""), param_type(b, ""));
            let (oa, ob) = (origin(q, a.pos), origin(p, b.pos));
            if a.name != b.name {
                differ(
                    &oa,
                    format!(
                        "parameter {} is \"{}\" in sqlite but \"{}\" in postgres ({ob})",
                        i + 1,
                        a.name,
                        b.name
                    ),
                );
            } else if ta != tb {
                differ(
                    &oa,
                    format!(
                        "parameter \"{}\" is {ta} in sqlite but {tb} in postgres ({ob})",
                        a.name
                    ),
                );
            }
        }
        if q.params.len() != p.params.len() {
            differ(
                &here,
                format!(
                    "has {} parameters in sqlite but {} in postgres ({there})",
                    q.params.len(),
                    p.params.len()
                ),
            );
        }
        for (i, (a, b)) in q.columns.iter().zip(&p.columns).enumerate() {
            let (ta, tb) = (col_type(a), col_type(b));
            let (oa, ob) = (origin(q, a.pos), origin(p, b.pos));
            if a.field != b.field {
                differ(
                    &oa,
                    format!(
                        "result column {} is \"{}\" in sqlite but \"{}\" in postgres ({ob})",
                        i + 1,
                        a.field,
                        b.field
                    ),
                );
            } else if ta != tb {
                let hint = match b.ty {
                    crate::SqlType::Int4 | crate::SqlType::Int2 => "; CAST it AS BIGINT",
                    crate::SqlType::Float4 => "; CAST it AS DOUBLE PRECISION",
                    _ => "",
                };
                differ(
                    &oa,
                    format!(
                        "result column \"{}\" is {ta} in sqlite but {tb} in postgres ({ob}){hint}",
                        a.field
                    ),
                );
            }
        }
        if q.columns.len() != p.columns.len() {
            differ(
                &here,
                format!(
                    "returns {} columns in sqlite but {} in postgres ({there})",
                    q.columns.len(),
                    p.columns.len()
                ),
            );
        } else if row_type(&sqlite.catalog, q) != row_type(&pg.catalog, p) {
            differ(
                &here,
                format!(
                    "rows are {} in sqlite but {} in postgres ({there})",
                    row_type(&sqlite.catalog, q).rust(),
                    row_type(&pg.catalog, p).rust()
                ),
            );
        }
    }
    for p in &pg.queries {
        if !sqlite.queries.iter().any(|q| q.name == p.name) {
            out.push(at(
                &origin(p, (p.line, 1)),
                Some(&p.name),
                format!(
                    "query \"{}\" exists in postgres but not in sqlite; share it or add a \
                     sqlite override",
                    p.name
                ),
            ));
        }
    }
}
