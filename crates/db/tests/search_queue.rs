//! Schema V7: search indexing after the write. A searchable part waits in `search_queue`
//! until the indexer takes it; a queued part has nothing in either index and an indexed
//! part is not queued, under every change; a part being streamed waits until it settles;
//! the background indexer, a closing database and a later open finish what is queued; and
//! `check` verifies the indexes plus the queue against the rows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use rusqlite::params;
use scribe_db::search::is_spaceless_script;
use scribe_db::{Database, IndexStatus, ManualClock, Options, STREAM_SETTLE_MS};
use serde_json::json;

fn queued(db: &Database) -> Vec<String> {
    db.read(|tx| -> scribe_db::Result<_> {
        let mut stmt = tx.conn().unwrap().prepare(
            "SELECT p.id FROM search_queue AS q JOIN parts AS p ON p.seq = q.seq ORDER BY p.id",
        )?;
        let ids = stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(ids)
    })
    .unwrap()
}

fn word_hits(db: &Database, query: &str) -> Vec<String> {
    db.read(|tx| -> scribe_db::Result<_> { Ok(hits(tx.conn().unwrap(), "parts_fts", query)) })
        .unwrap()
}

fn trigram_hits(db: &Database, query: &str) -> Vec<String> {
    db.read(|tx| -> scribe_db::Result<_> {
        Ok(hits(tx.conn().unwrap(), "parts_fts_trigram", query))
    })
    .unwrap()
}

fn set_data(db: &Database, part: &str, data: &str) {
    db.write(|tx| -> scribe_db::Result<_> {
        tx.conn().unwrap().execute(
            "UPDATE parts SET data = ?1 WHERE id = ?2",
            params![data, part],
        )?;
        Ok(())
    })
    .unwrap();
}

fn write_part(db: &Database, session: &str, data: &str) -> (String, String) {
    db.write(|tx| -> scribe_db::Result<_> {
        message_with_part(tx.conn().unwrap(), session, "user", "text", data)
    })
    .unwrap()
}

fn memory() -> Database {
    Database::open_in_memory().unwrap()
}

#[test]
fn a_part_waits_in_the_queue_until_indexed_then_leaves_it() {
    let db = memory();
    let s = session(&db, "cli");
    let (_, part) = write_part(&db, &s, &text("heron in the reeds"));
    // A part that is never searched is never queued.
    db.write(|tx| -> scribe_db::Result<_> {
        let (m, _) = message_with_part(tx.conn().unwrap(), &s, "user", "text", &text("x"))?;
        add_part(
            tx.conn().unwrap(),
            "prt_finish",
            &m,
            &s,
            1,
            "finish",
            r#"{"type":"finish","reason":"end_turn"}"#,
        )
    })
    .unwrap();
    assert!(queued(&db).contains(&part));
    assert!(!queued(&db).contains(&"prt_finish".to_owned()));
    assert!(
        word_hits(&db, "heron").is_empty(),
        "indexed before the indexer ran"
    );
    let run = db.index_pending().unwrap();
    assert_eq!(run.indexed, 2);
    assert_eq!(run.waiting, 0);
    assert!(queued(&db).is_empty());
    assert_eq!(word_hits(&db, "heron"), vec![part]);
    // Nothing left: the next call finds nothing and takes no write lock.
    assert_eq!(db.index_pending().unwrap().indexed, 0);
    assert_derived_exact(&db);
}

#[test]
fn changing_or_deleting_a_queued_part_leaves_no_stale_hit() {
    let db = memory();
    let s = session(&db, "cli");
    let (_, changed) = write_part(&db, &s, &text("first draft about otters"));
    let (_, deleted) = write_part(&db, &s, &text("doomed words about badgers 数据库"));
    set_data(&db, &changed, &text("second draft about beavers"));
    db.write(|tx| -> scribe_db::Result<_> {
        tx.conn()
            .unwrap()
            .execute("DELETE FROM parts WHERE id = ?1", [&deleted])?;
        Ok(())
    })
    .unwrap();
    assert_eq!(queued(&db), vec![changed.clone()]);
    db.index_pending().unwrap();
    assert!(word_hits(&db, "otters").is_empty());
    assert_eq!(word_hits(&db, "beavers"), vec![changed]);
    assert!(word_hits(&db, "badgers").is_empty());
    assert!(trigram_hits(&db, "数据库").is_empty());
    assert_derived_exact(&db);
}

#[test]
fn changing_or_deleting_an_indexed_part_takes_its_old_text_out_at_once() {
    let db = memory();
    let s = session(&db, "cli");
    let (_, part) = write_part(&db, &s, &text("kestrel over 田野里"));
    let (_, gone) = write_part(&db, &s, &text("plover over 海滩上"));
    db.index_pending().unwrap();
    assert_eq!(word_hits(&db, "kestrel"), vec![part.clone()]);
    assert_eq!(trigram_hits(&db, "海滩上"), vec![gone.clone()]);

    set_data(&db, &part, &text("falcon over fields"));
    db.write(|tx| -> scribe_db::Result<_> {
        tx.conn()
            .unwrap()
            .execute("DELETE FROM parts WHERE id = ?1", [&gone])?;
        Ok(())
    })
    .unwrap();
    // Before any indexing: the old text is gone, the new one waits.
    assert!(word_hits(&db, "kestrel").is_empty());
    assert!(trigram_hits(&db, "田野里").is_empty());
    assert!(word_hits(&db, "plover").is_empty());
    assert!(trigram_hits(&db, "海滩上").is_empty());
    assert_eq!(queued(&db), vec![part.clone()]);
    db.index_pending().unwrap();
    assert_eq!(word_hits(&db, "falcon"), vec![part.clone()]);
    // No CJK left in it: it left the trigram index.
    assert!(trigram_hits(&db, "\"alcon\"").is_empty());
    assert_derived_exact(&db);
}

/// A text part as `ReplyWriter` streams it: started, not ended.
fn streaming(text: &str, start: i64, end: Option<i64>) -> String {
    let mut time = json!({ "start": start });
    if let Some(end) = end {
        time["end"] = json!(end);
    }
    json!({ "type": "text", "text": text, "time": time }).to_string()
}

#[test]
fn a_streamed_part_waits_until_it_ends_its_message_finishes_or_it_goes_quiet() {
    let clock = ManualClock::new(1_000_000);
    let db = Database::open_in_memory_with(Options {
        clock: clock.clock(),
        ..Options::default()
    })
    .unwrap();
    let s = session(&db, "cli");
    let now = clock.now();
    let part_at = |updated_at: i64, text_data: &str| {
        db.write(|tx| -> scribe_db::Result<_> {
            let (m, p) = message_with_part(
                tx.conn().unwrap(),
                &s,
                "assistant",
                "text",
                &text("placeholder"),
            )?;
            tx.conn().unwrap().execute(
                "UPDATE parts SET data = ?1, updated_at = ?2 WHERE id = ?3",
                params![text_data, updated_at, p],
            )?;
            Ok((m, p))
        })
        .unwrap()
    };
    let (_, ends) = part_at(now, &streaming("swift one", now, None));
    let (finishes_message, finishes) = part_at(now, &streaming("swift two", now, None));
    let (_, quiet) = part_at(now, &streaming("swift three", now, None));
    let run = db.index_pending().unwrap();
    assert_eq!((run.indexed, run.waiting), (0, 3), "{run:?}");
    assert!(word_hits(&db, "swift").is_empty());
    // Flushes while streaming: still waiting, still not indexed.
    set_data(&db, &ends, &streaming("swift one more", now, None));
    assert_eq!(db.index_pending().unwrap().indexed, 0);

    set_data(
        &db,
        &ends,
        &streaming("swift one more done", now, Some(now + 5)),
    );
    db.write(|tx| -> scribe_db::Result<_> {
        tx.conn().unwrap().execute(
            "UPDATE messages SET finished_at = ?1 WHERE id = ?2",
            params![now, finishes_message],
        )?;
        Ok(())
    })
    .unwrap();
    let run = db.index_pending().unwrap();
    assert_eq!((run.indexed, run.waiting), (2, 1), "{run:?}");
    let mut found = vec![ends.clone(), finishes.clone()];
    found.sort();
    assert_eq!(word_hits(&db, "swift"), found);

    // A stream that stopped flushing (its process died) settles after STREAM_SETTLE_MS.
    clock.advance(Duration::from_millis(
        u64::try_from(STREAM_SETTLE_MS).unwrap() + 1,
    ));
    assert_eq!(db.index_pending().unwrap().indexed, 1);
    assert!(word_hits(&db, "three").contains(&quiet));
    assert_derived_exact(&db);
}

#[test]
fn check_counts_parts_still_streaming_and_finds_a_drifted_index() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("c.db")).unwrap();
    let s = session(&db, "cli");
    write_part(&db, &s, &text("settled words 已完成"));
    let now = db.now();
    db.write(|tx| -> scribe_db::Result<_> {
        message_with_part(
            tx.conn().unwrap(),
            &s,
            "assistant",
            "text",
            &streaming("words still streaming 还在写", now, None),
        )
    })
    .unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems());
    // The check indexed the streaming part only inside its rolled-back transaction.
    assert_eq!(db.search_backlog().unwrap(), 1);

    // An index that lost a settled part's text is found.
    db.write(|tx| -> scribe_db::Result<_> {
        tx.conn().unwrap().execute(
            "INSERT INTO parts_fts (parts_fts, rowid, search_text) \
             SELECT 'delete', seq, search_text FROM parts_search \
             WHERE search_text LIKE 'settled%'",
            [],
        )?;
        Ok(())
    })
    .unwrap();
    let report = db.check().unwrap();
    assert!(
        matches!(report.indexes[0].status, IndexStatus::Mismatch(_)),
        "{report:?}"
    );
    assert_eq!(report.indexes[1].status, IndexStatus::Ok);
}

#[test]
fn the_trigram_index_holds_exactly_the_text_with_spaceless_script_characters() {
    // The view's GLOB and the Rust ranges must agree, or the indexer and the checks
    // would disagree about what the index holds. Every range boundary and a sample of
    // every other code point.
    let mut chars: Vec<char> = Vec::new();
    for c in (0x20_u32..0x3_2000).step_by(61) {
        chars.extend(char::from_u32(c));
    }
    for (lo, hi) in [
        (0x0E00, 0x0EFF),
        (0x1000, 0x109F),
        (0x1780, 0x17FF),
        (0x1100, 0x11FF),
        (0x2E80, 0x2FDF),
        (0x3005, 0x3007),
        (0x3021, 0x3029),
        (0x3040, 0x31FF),
        (0x3400, 0x4DBF),
        (0x4E00, 0x9FFF),
        (0xA960, 0xA97F),
        (0xAC00, 0xD7FF),
        (0xF900, 0xFAFF),
        (0xFF66, 0xFFDC),
        (0x2_0000, 0x3_134F),
    ] {
        for c in [lo - 1, lo, lo + 1, hi - 1, hi, hi + 1] {
            chars.extend(char::from_u32(c));
        }
    }
    chars.retain(|c| !c.is_control() && *c != '"' && *c != '\\');
    let db = memory();
    let s = session(&db, "cli");
    let parts: Vec<(char, String)> = db
        .write(|tx| -> scribe_db::Result<_> {
            let (m, _) = message_with_part(tx.conn().unwrap(), &s, "user", "text", &text("x"))?;
            let mut parts = Vec::new();
            for (i, c) in chars.iter().enumerate() {
                let id = format!("prt_c{i}");
                add_part(
                    tx.conn().unwrap(),
                    &id,
                    &m,
                    &s,
                    i64::try_from(i).unwrap() + 1,
                    "text",
                    &text(&format!("ab{c}cd")),
                )?;
                parts.push((*c, id));
            }
            Ok(parts)
        })
        .unwrap();
    let in_view: std::collections::HashSet<String> = db
        .read(|tx| -> scribe_db::Result<_> {
            let mut stmt = tx.conn().unwrap().prepare(
                "SELECT p.id FROM parts_search_trigram AS v JOIN parts AS p ON p.seq = v.seq",
            )?;
            let ids = stmt
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            Ok(ids)
        })
        .unwrap();
    let wrong: Vec<String> = parts
        .iter()
        .filter(|(c, id)| in_view.contains(id) != is_spaceless_script(*c))
        .map(|(c, _)| format!("U+{:04X}", u32::from(*c)))
        .collect();
    assert!(wrong.is_empty(), "view and ranges disagree on {wrong:?}");
    db.index_pending().unwrap();
    assert_derived_exact(&db);
}

/// Polls `done` until it holds (at most 30 s, on a loaded machine).
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within 30 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_background_indexer_indexes_without_a_search() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("b.db")).unwrap();
    let s = session(&db, "cli");
    let (_, part) = write_part(&db, &s, &text("egret at dawn"));
    eventually("background indexing", || db.search_backlog().unwrap() == 0);
    assert_eq!(word_hits(&db, "egret"), vec![part]);
}

#[test]
fn the_background_indexer_takes_every_burst_of_writes() {
    // The indexer is woken by the first write after it started indexing, not by every
    // write: bursts after the first are indexed too.
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("bursts.db")).unwrap();
    let s = session(&db, "cli");
    let mut parts = Vec::new();
    for burst in 0..3 {
        for i in 0..4 {
            parts.push(write_part(&db, &s, &text(&format!("plover{burst}x{i}"))).1);
        }
        eventually("background indexing", || db.search_backlog().unwrap() == 0);
    }
    for (n, part) in parts.iter().enumerate() {
        let query = format!("plover{}x{}", n / 4, n % 4);
        assert_eq!(&word_hits(&db, &query), std::slice::from_ref(part));
    }
}

#[test]
fn a_full_batch_of_writes_wakes_the_indexer_before_its_delay() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open_with(
        dir.path().join("full.db"),
        Options {
            // Only a full batch can start indexing within the test.
            index_delay: Duration::from_secs(3600),
            index_batch: scribe_db::IndexBatch {
                max_parts: 3,
                max_time: Duration::from_secs(1),
            },
            ..Options::default()
        },
    )
    .unwrap();
    // The open's look at the queue, the session and this part fill the first batch.
    let s = session(&db, "cli");
    write_part(&db, &s, &text("sanderling"));
    eventually("indexing the first batch", || {
        db.search_backlog().unwrap() == 0
    });
    // The first write after that starts an hour's wait; the third ends it.
    for i in 0..3 {
        write_part(&db, &s, &text(&format!("dunlin{i}")));
    }
    eventually("indexing a full batch", || {
        db.search_backlog().unwrap() == 0
    });
    for i in 0..3 {
        assert_eq!(word_hits(&db, &format!("dunlin{i}")).len(), 1);
    }
}

#[test]
fn a_pause_starts_no_batch_even_when_the_indexer_was_waiting_for_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open_with(
        dir.path().join("p.db"),
        Options {
            index_delay: Duration::from_millis(20),
            ..Options::default()
        },
    )
    .unwrap();
    let s = session(&db, "cli");
    eventually("indexing the session", || db.search_backlog().unwrap() == 0);
    // This commit wakes the indexer; the next write holds the writer well past the
    // indexer's delay, so the indexer is waiting for the connection when the pause comes.
    write_part(&db, &s, &text("whimbrel"));
    let paused = db
        .write(|tx| -> scribe_db::Result<_> {
            message_with_part(tx.conn().unwrap(), &s, "user", "text", &text("knot"))?;
            std::thread::sleep(Duration::from_millis(300));
            Ok(db.pause_background_indexing())
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(db.search_backlog().unwrap(), 2, "a batch ran while paused");
    drop(paused);
    eventually("indexing after the pause", || {
        db.search_backlog().unwrap() == 0
    });
    assert_eq!(word_hits(&db, "whimbrel").len(), 1);
    assert_eq!(word_hits(&db, "knot").len(), 1);
}

#[test]
fn what_a_process_left_queued_is_indexed_by_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("n.db");
    let part = {
        // A writer without an indexer (another program, or a crash before it ran).
        let db = Database::open_with(
            &path,
            Options {
                background_indexing: false,
                ..Options::default()
            },
        )
        .unwrap();
        let s = session(&db, "cli");
        let (_, part) = write_part(&db, &s, &text("curlew on the shore"));
        part
    };
    {
        let reader = Database::open_read_only(&path).unwrap();
        assert_eq!(reader.search_backlog().unwrap(), 1);
        // A reader cannot index: it finds what was indexed.
        assert_eq!(reader.index_pending().unwrap().indexed, 0);
    }
    let db = Database::open(&path).unwrap();
    eventually("indexing after open", || db.search_backlog().unwrap() == 0);
    assert_eq!(word_hits(&db, "curlew"), vec![part]);
}

#[test]
fn a_closing_database_indexes_what_it_wrote_for_readers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let part = {
        let db = Database::open_with(
            &path,
            Options {
                // Long enough that only closing can index it.
                index_delay: Duration::from_secs(3600),
                ..Options::default()
            },
        )
        .unwrap();
        let s = session(&db, "cli");
        write_part(&db, &s, &text("godwit in winter")).1
    };
    let reader = Database::open_read_only(&path).unwrap();
    assert_eq!(reader.search_backlog().unwrap(), 0);
    assert_eq!(word_hits(&reader, "godwit"), vec![part]);
}

/// FTS5's `hashsize` as this connection sees it (its config row; absent is the default).
fn hash_size(db: &Database, index: &str) -> Option<i64> {
    db.read(|tx| -> scribe_db::Result<_> {
        let v = tx
            .conn()
            .unwrap()
            .query_row(
                &format!("SELECT v FROM {index}_config WHERE k = 'hashsize'"),
                [],
                |r| r.get(0),
            )
            .ok();
        Ok(v)
    })
    .unwrap()
}

#[test]
fn bulk_indexing_finds_everything_and_leaves_the_index_settings_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("b.db")).unwrap();
    let _paused = db.pause_background_indexing();
    let s = session(&db, "cli");
    let mut words = Vec::new();
    let mut cjk = Vec::new();
    for i in 0..300 {
        words.push(write_part(&db, &s, &text(&format!("bulkword{} shared", i % 7))).1);
        if i % 10 == 0 {
            cjk.push(write_part(&db, &s, &text(&format!("批量索引 {i}"))).1);
        }
    }
    assert_eq!(db.search_backlog().unwrap(), 330);
    let run = db.index_pending_with(scribe_db::IndexBatch::BULK).unwrap();
    assert_eq!((run.indexed, run.waiting), (330, 0), "{run:?}");
    assert_eq!(word_hits(&db, "shared").len(), 300);
    assert_eq!(word_hits(&db, "bulkword3").len(), 43);
    cjk.sort();
    assert_eq!(trigram_hits(&db, "批量索"), cjk);
    // The batch raised FTS5's buffer for itself only: the default is back (as a row, or
    // no row at all), for this connection and any other.
    for index in ["parts_fts", "parts_fts_trigram"] {
        assert!(
            matches!(hash_size(&db, index), None | Some(1_048_576)),
            "{index}: {:?}",
            hash_size(&db, index)
        );
    }
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems());
    // A part changed after a bulk index is taken out and queued again as usual.
    set_data(&db, &words[0], &text("replaced entirely"));
    assert_eq!(db.index_pending().unwrap().indexed, 1);
    assert_eq!(word_hits(&db, "shared").len(), 299);
    assert_eq!(word_hits(&db, "replaced"), vec![words[0].clone()]);
}
