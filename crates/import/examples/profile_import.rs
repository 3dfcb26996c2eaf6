//! Times an import of a directory of agent history into a fresh database, optionally with
//! the search triggers removed (to see what indexing costs). Not part of the report.
use std::sync::Arc;
use std::time::Instant;

use scribe_import::sink::StoreSink;
use scribe_import::{Options, Source, import, sources};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (source, root) = (args[1].parse::<Source>()?, &args[2]);
    let mode = args.get(3).map_or("", String::as_str);
    let no_fts = mode == "nofts";
    let dir = tempfile::tempdir()?;
    let db = Arc::new(scribe_db::Database::open(dir.path().join("p.db"))?);
    if no_fts {
        db.write(|tx| -> Result<(), scribe_db::Error> {
            let Some(conn) = tx.conn() else {
                return Err(scribe_db::Error::InvalidInput(
                    "nofts needs an SQLite database".to_owned(),
                ));
            };
            conn.execute_batch("DROP TRIGGER parts_search_insert;")?;
            Ok(())
        })?;
    }
    let mut store = StoreSink::new(scribe_session::Store::new(Arc::clone(&db)));
    let mut dry = scribe_import::sink::DryRunSink::new(None);
    let sink: &mut dyn scribe_import::sink::Sink =
        if mode == "dry" { &mut dry } else { &mut store };
    let t = Instant::now();
    let s = import(
        sink,
        sources::importer(source),
        &[root.into()],
        &Options::default(),
        &mut |_| {},
    )?;
    let e = t.elapsed();
    println!(
        "{} msgs in {:?}: {:.0} msg/s",
        s.written.messages_inserted,
        e,
        s.written.messages_inserted as f64 / e.as_secs_f64()
    );
    Ok(())
}
