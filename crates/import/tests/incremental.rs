//! Incremental import: a grown file imports only its new records, a line still being
//! written waits for the next import, malformed lines and unknown records are reported and
//! the rest imported, compressed Codex files are read, and a resumed Claude Code session is
//! stored once, as the continuation of the one it resumed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use common::*;
use scribe_import::Source;
use scribe_session::SessionKind;

const CLAUDE: &str = "claude/projects/-path-to-Demo/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl";
const CLAUDE_ID: &str = "1af7fc5e-8455-4414-9ccd-011d40f70b2a";
const CODEX: &str = "codex/sessions/2026/02/23/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl";
const CODEX_ID: &str = "019c8a70-dda7-7f33-98ea-f30553347322";

fn lines(rel: &str) -> Vec<String> {
    std::fs::read_to_string(fixtures().join(rel))
        .unwrap()
        .lines()
        .map(|l| format!("{l}\n"))
        .collect()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// The dump of importing `rel` whole, in one go, into a fresh database.
fn whole(rel: &str, source: Source, name: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in").join(name);
    write(&file, &lines(rel).concat());
    let db = scribe_db(dir.path());
    run(&db, source, &[dir.path().join("in")]);
    dump(&db)
}

fn file_in(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let root = dir.join("in");
    (root.join(name), root)
}

#[test]
fn a_grown_file_imports_only_its_new_records() {
    for (rel, source, name, split) in [
        // Splits inside one API response written over five lines (lines 6-10).
        (
            CLAUDE,
            Source::ClaudeCode,
            "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
            8,
        ),
        // Splits before the token_count that carries the response's usage.
        (
            CODEX,
            Source::Codex,
            "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl",
            18,
        ),
    ] {
        let all = lines(rel);
        let dir = tempfile::tempdir().unwrap();
        let (file, root) = file_in(dir.path(), name);
        write(&file, &all[..split].concat());
        let db = scribe_db(dir.path());
        let first = run(&db, source, std::slice::from_ref(&root));
        assert_eq!(first.files_read, 1);
        let read_first = first.records;
        append(&file, &all[split..].concat());
        let second = run(&db, source, std::slice::from_ref(&root));
        assert_eq!(second.files_read, 1, "{name}");
        // Only the new lines were read.
        let whole_records = {
            let d = tempfile::tempdir().unwrap();
            let (f, r) = file_in(d.path(), name);
            write(&f, &all.concat());
            run(&scribe_db(d.path()), source, &[r]).records
        };
        assert_eq!(read_first + second.records, whole_records, "{name}");
        assert_same(&dump(&db), &whole(rel, source, name), name);
        // And nothing is left to read.
        let third = run(&db, source, &[root]);
        assert_eq!((third.files_read, third.files_unchanged), (0, 1));
    }
}

#[test]
fn a_line_still_being_written_waits_for_the_next_import() {
    let all = lines(CLAUDE);
    let dir = tempfile::tempdir().unwrap();
    let name = "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl";
    let (file, root) = file_in(dir.path(), name);
    let cut = all[28].len() / 2;
    write(&file, &(all[..28].concat() + &all[28][..cut]));
    let db = scribe_db(dir.path());
    let first = run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    assert!(first.malformed.is_empty(), "{:?}", first.malformed);
    // The last response (line 29) is not there yet.
    assert_eq!(session(&db, CLAUDE_ID).tokens.output, 953 - 72);
    append(&file, &all[28][cut..]);
    let second = run(&db, Source::ClaudeCode, &[root]);
    assert!(second.malformed.is_empty());
    assert_eq!(second.written.messages_inserted, 1);
    assert_eq!(dump(&db), whole(CLAUDE, Source::ClaudeCode, name));
}

#[test]
fn malformed_lines_are_reported_with_file_and_line_and_the_rest_is_imported() {
    let mut all = lines(CLAUDE);
    all.insert(4, "{\"type\": \"user\", \"message\": \n".to_owned());
    all.insert(10, "not json at all\n".to_owned());
    all.push("{\"type\":\"brand-new-record\",\"sessionId\":\"x\"}\n".to_owned());
    let dir = tempfile::tempdir().unwrap();
    let (file, root) = file_in(dir.path(), "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl");
    write(&file, &all.concat());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::ClaudeCode, &[root]);
    let at: Vec<(Option<u64>, bool)> = s
        .malformed
        .iter()
        .map(|m| (m.line, m.path == file.display().to_string()))
        .collect();
    assert_eq!(at, [(Some(5), true), (Some(11), true)]);
    assert_eq!(s.skipped.get("brand-new-record"), Some(&1));
    // Everything else is there, usage exactly as without the bad lines.
    let t = session(&db, CLAUDE_ID).tokens;
    assert_eq!(
        (t.input, t.output, t.cache_write, t.cache_read),
        (93, 953, 12_698, 103_219)
    );
}

#[test]
fn compressed_codex_rollouts_are_read_and_a_plain_copy_wins() {
    let text = lines(CODEX).concat();
    let zst = ruzstd::encoding::compress_to_vec(
        text.as_bytes(),
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    let name = "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl";
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("in");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join(format!("{name}.zst")), &zst).unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Codex, std::slice::from_ref(&root));
    assert_eq!((s.files, s.files_read), (1, 1));
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    assert_eq!(dump(&db), whole(CODEX, Source::Codex, name));
    assert_eq!(session(&db, CODEX_ID).tokens.input, 31_013);

    // With both, the plain file is the one read (the .zst is its compressed sibling).
    std::fs::write(root.join(name), &text).unwrap();
    let files =
        scribe_import::scan(scribe_import::sources::importer(Source::Codex), &[root]).unwrap();
    assert_eq!(files.len(), 1);
    assert!(files[0].0.ends_with(name));
}

#[test]
fn a_damaged_compressed_file_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("in");
    write(&root.join("rollout-bad.jsonl.zst"), "this is not zstd");
    write(
        &root.join("rollout-2026-09-30T08-39-00-01a0f21c-5c40-7f72-9aa9-ef0b43570680.jsonl"),
        &lines("codex/sessions/2026/09/30/rollout-2026-09-30T08-39-00-01a0f21c-5c40-7f72-9aa9-ef0b43570680.jsonl").concat(),
    );
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Codex, &[root]);
    assert_eq!(s.failed.len(), 1, "{:?}", s.failed);
    assert!(s.failed[0].error.contains("decompress"), "{:?}", s.failed);
    assert_eq!(s.files_read, 1);
    assert_eq!(sessions(&db).len(), 1);
}

#[test]
fn a_resumed_session_continues_the_one_it_replays() {
    // `claude --resume` writes a new file that first replays the earlier conversation
    // (same line uuids and times) and then goes on.
    let original = lines("claude/projects/-work-proj/609b44ad-7c18-4745-a70b-784281dce85e.jsonl");
    let old_id = "609b44ad-7c18-4745-a70b-784281dce85e";
    let new_id = "77777777-7c18-4745-a70b-784281dce85e";
    let mut resumed: Vec<String> = original[..18]
        .iter()
        .map(|l| l.replace(old_id, new_id))
        .collect();
    resumed.push(format!(
        "{{\"type\":\"user\",\"uuid\":\"new-user-1\",\"parentUuid\":\"2db8c26e-303e-4c63-a733-9d1a3b5c61bd\",\"sessionId\":\"{new_id}\",\"timestamp\":\"2026-09-30T14:00:00.000Z\",\"cwd\":\"/work/proj\",\"isSidechain\":false,\"message\":{{\"role\":\"user\",\"content\":\"and again\"}}}}\n"
    ));
    resumed.push(format!(
        "{{\"type\":\"assistant\",\"uuid\":\"new-asst-1\",\"parentUuid\":\"new-user-1\",\"sessionId\":\"{new_id}\",\"requestId\":\"req_new\",\"timestamp\":\"2026-09-30T14:00:01.000Z\",\"cwd\":\"/work/proj\",\"isSidechain\":false,\"message\":{{\"id\":\"msg_new\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[{{\"type\":\"text\",\"text\":\"done again\"}}],\"usage\":{{\"input_tokens\":7,\"output_tokens\":3,\"cache_read_input_tokens\":0,\"cache_creation_input_tokens\":0}}}}}}\n"
    ));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("in");
    write(&root.join(format!("{old_id}.jsonl")), &original.concat());
    let db = scribe_db(dir.path());
    run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    write(&root.join(format!("{new_id}.jsonl")), &resumed.concat());
    let s = run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    assert_eq!(s.written.messages_replayed, 3, "{:?}", s.written);
    assert_eq!(s.written.messages_inserted, 2);
    let new = session(&db, new_id);
    assert_eq!(new.kind, SessionKind::Continuation);
    assert_eq!(new.parent_session_id.as_deref(), Some(old_id));
    assert_eq!(new.message_count, 2);
    // The replayed calls are counted once, with the session that made them.
    assert_eq!((new.tokens.input, new.tokens.output), (7, 3));
    assert_eq!(session(&db, old_id).tokens.input, 170);
    // Read again once it grew, it stays a continuation (it became `normal`, its parent
    // kept: the reader names no link for a file whose first line answers nothing).
    append(
        &root.join(format!("{new_id}.jsonl")),
        &format!(
            "{{\"type\":\"user\",\"uuid\":\"new-user-2\",\"parentUuid\":\"new-asst-1\",\"sessionId\":\"{new_id}\",\"timestamp\":\"2026-09-30T14:00:05.000Z\",\"cwd\":\"/work/proj\",\"isSidechain\":false,\"message\":{{\"role\":\"user\",\"content\":\"thanks\"}}}}\n"
        ),
    );
    let s = run(&db, Source::ClaudeCode, &[root]);
    assert_eq!(s.written.messages_inserted, 1, "{:?}", s.written);
    let new = session(&db, new_id);
    assert_eq!(new.kind, SessionKind::Continuation);
    assert_eq!(new.parent_session_id.as_deref(), Some(old_id));
    assert_eq!(new.message_count, 3);
}

/// `claude --resume` once wrote a new file that replays the earlier conversation before
/// the first new prompt; quit there, the file holds nothing else. It is not stored: it was
/// an empty continuation that `scribe list`, showing each chain by its newest session,
/// showed in place of the conversation itself. The dry run counts as the import does.
/// Once the file goes on, its session is made, as the continuation of the one its first
/// new line answers, holding the new messages alone.
#[test]
fn a_resume_that_only_replays_is_not_stored_until_it_goes_on() {
    let original = lines("claude/projects/-work-proj/609b44ad-7c18-4745-a70b-784281dce85e.jsonl");
    let old_id = "609b44ad-7c18-4745-a70b-784281dce85e";
    let new_id = "77777777-7c18-4745-a70b-784281dce85e";
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("in");
    let db = scribe_db(dir.path());
    write(&root.join(format!("{old_id}.jsonl")), &original.concat());
    run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    let replay: String = original[..18]
        .iter()
        .map(|l| l.replace(old_id, new_id))
        .collect();
    let new = root.join(format!("{new_id}.jsonl"));
    write(&new, &replay);
    let mut dry = scribe_import::sink::DryRunSink::new(Some(scribe_session::Store::new(
        std::sync::Arc::clone(&db),
    )));
    let would = scribe_import::import(
        &mut dry,
        scribe_import::sources::importer(Source::ClaudeCode),
        std::slice::from_ref(&root),
        &scribe_import::Options::default(),
        &mut |_| {},
    )
    .unwrap();
    let s = run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    assert_eq!(would.written, s.written);
    assert_eq!(s.written.messages_replayed, 3, "{:?}", s.written);
    assert_eq!(
        (s.written.sessions_created, s.written.messages_inserted),
        (0, 0),
        "{:?}",
        s.written
    );
    let listed: Vec<String> = sessions(&db).into_iter().map(|s| s.id).collect();
    assert_eq!(listed, [old_id]);
    assert_eq!(session(&db, old_id).message_count, 3);

    append(
        &new,
        &format!(
            "{{\"type\":\"user\",\"uuid\":\"new-user-1\",\"parentUuid\":\"2db8c26e-303e-4c63-a733-9d1a3b5c61bd\",\"sessionId\":\"{new_id}\",\"timestamp\":\"2026-09-30T14:00:00.000Z\",\"cwd\":\"/work/proj\",\"isSidechain\":false,\"message\":{{\"role\":\"user\",\"content\":\"and again\"}}}}\n"
        ),
    );
    let s = run(&db, Source::ClaudeCode, &[root]);
    assert_eq!(
        (s.written.sessions_created, s.written.messages_inserted),
        (1, 1),
        "{:?}",
        s.written
    );
    let resumed = session(&db, new_id);
    assert_eq!(
        (resumed.kind, resumed.parent_session_id.as_deref()),
        (SessionKind::Continuation, Some(old_id))
    );
    assert_eq!(resumed.message_count, 1);
    assert_eq!(session(&db, old_id).message_count, 3);
}

/// Messages a file wrote in the same millisecond keep the file's order: Claude Code writes
/// a slash command's line and its expanded prompt in one (the real fixture's `/init`),
/// and twenty prompts in one millisecond come back as written. (They came in the order of
/// their ids' hashes.) Their ids stay those of the source's time, so a second read
/// changes nothing, and a message the file wrote late, with an earlier time, keeps it.
#[test]
fn messages_written_in_one_millisecond_keep_the_files_order() {
    let dir = tempfile::tempdir().unwrap();
    let (file, root) = file_in(dir.path(), "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl");
    write(&file, &lines(CLAUDE).concat());
    let db = scribe_db(dir.path());
    run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    let first_text = |m: &scribe_message::Message| {
        m.parts
            .iter()
            .find_map(|p| match &p.part {
                scribe_message::Part::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .unwrap_or_default()
    };
    let shown: Vec<String> = messages(&db, CLAUDE_ID)
        .iter()
        .take(2)
        .map(first_text)
        .collect();
    assert_eq!(shown[0], "/init", "{shown:?}");
    assert!(
        shown[1].starts_with("Please analyze this codebase"),
        "{shown:?}"
    );

    let id = "99999999-7c18-4745-a70b-784281dce85e";
    let mut burst = String::new();
    for i in 0..20 {
        burst.push_str(&format!(
            "{{\"type\":\"user\",\"uuid\":\"burst-{i}\",\"sessionId\":\"{id}\",\"timestamp\":\"2026-10-02T10:00:00.000Z\",\"cwd\":\"/w\",\"isSidechain\":false,\"message\":{{\"role\":\"user\",\"content\":\"prompt {i}\"}}}}\n"
        ));
    }
    // Written last, logged a second earlier: its own time places it first.
    burst.push_str(&format!(
        "{{\"type\":\"user\",\"uuid\":\"late\",\"sessionId\":\"{id}\",\"timestamp\":\"2026-10-02T09:59:59.000Z\",\"cwd\":\"/w\",\"isSidechain\":false,\"message\":{{\"role\":\"user\",\"content\":\"logged late\"}}}}\n"
    ));
    write(&root.join(format!("{id}.jsonl")), &burst);
    run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    let mut want = vec!["logged late".to_owned()];
    want.extend((0..20).map(|i| format!("prompt {i}")));
    let stored = messages(&db, id);
    assert_eq!(stored.iter().map(first_text).collect::<Vec<_>>(), want);
    // Moved by at most the messages before it in the millisecond.
    let at = stored.iter().map(|m| m.created_at).max().unwrap();
    assert!(at - stored[1].created_at <= 19, "{at}");
    // The same lines read again (a copy of the file) land on the same messages.
    let before = dump(&db);
    write(&root.join("copy").join(format!("{id}.jsonl")), &burst);
    let s = run(&db, Source::ClaudeCode, &[root]);
    assert_eq!(
        (s.files_read, s.written.messages_inserted),
        (1, 0),
        "{:?}",
        s.written
    );
    assert_same(&dump(&db), &before, "read again");
}

/// The Gemini fixture whose records the rewind and set tests add to.
const GEMINI_FIXTURE: &str = "gemini/tmp/0b7dfb1274ee51b336813b17f2ddab1f56b6591f723e7314126bbd502c69e9c9/chats/session-2026-04-29T21-39-gemini_s.jsonl";

/// A message record of the Gemini fixture's session, with its newline: `input` prompt
/// tokens, 2 output, at 21:`at` on the fixture's day.
fn gemini_record(id: &str, kind: &str, at: &str, text: &str, input: i64) -> String {
    format!(
        "{{\"id\":\"{id}\",\"timestamp\":\"2026-04-29T21:{at}Z\",\"type\":\"{kind}\",\"content\":\"{text}\",\"tokens\":{{\"input\":{input},\"output\":2,\"cached\":0,\"thoughts\":0,\"tool\":0,\"total\":{}}},\"model\":\"gemini-3-flash-preview\"}}\n",
        input + 2
    )
}

/// The Gemini fixture with `after` appended, imported two ways: into `db` before `after`
/// was written and again after it, and into `db_once` once, with it (`once_file` under
/// `once_root`, to go on writing).
struct BeforeAndAfter {
    db: std::sync::Arc<scribe_db::Database>,
    db_once: std::sync::Arc<scribe_db::Database>,
    once_file: PathBuf,
    once_root: PathBuf,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

fn gemini_before_and_after(after: &str) -> BeforeAndAfter {
    let before = lines(GEMINI_FIXTURE).concat();
    let name = "h/chats/session-2026-04-29T21-39-gemini_s.jsonl";
    let (incremental, once) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (file, root) = file_in(incremental.path(), name);
    write(&file, &before);
    let db = scribe_db(incremental.path());
    run(&db, Source::Gemini, std::slice::from_ref(&root));
    append(&file, after);
    run(&db, Source::Gemini, &[root]);
    let (once_file, once_root) = file_in(once.path(), name);
    write(&once_file, &format!("{before}{after}"));
    let db_once = scribe_db(once.path());
    run(&db_once, Source::Gemini, std::slice::from_ref(&once_root));
    BeforeAndAfter {
        db,
        db_once,
        once_file,
        once_root,
        _dirs: (incremental, once),
    }
}

/// A Gemini CLI rewind (`{"$rewindTo": id}`) drops that message and the ones after it from
/// the conversation; they stay in Scribe marked `rewound`, with their usage (it was
/// spent), as Codex's rolled-back turns do, and the store is the same whether the file was
/// read before the rewind and again after, or once after it. A rewound message appended
/// again is live again. (The rewound messages were left out of a file read after the
/// rewind, their usage uncounted, and kept unmarked in a store that read it before.)
#[test]
fn a_gemini_rewind_marks_what_it_dropped_and_keeps_its_usage() {
    let after = format!(
        "{{\"$rewindTo\":\"g-assistant-2\"}}\n{}{}",
        gemini_record("g-user-2", "user", "40:00.000", "Actually, just say hi.", 0),
        gemini_record("g-assistant-3", "gemini", "40:02.000", "Hi.", 100)
    );
    let BeforeAndAfter {
        db,
        db_once,
        once_file,
        once_root,
        _dirs,
    } = gemini_before_and_after(&after);
    // The same store, but for the time the rewound message last changed: marked by the
    // second read, it changed then (a millisecond after it was written, as every change).
    let marked_later =
        |dump: String| dump.replace("updated_at: 1777498785997", "updated_at: 1777498785996");
    assert_same(
        &marked_later(dump(&db)),
        &dump(&db_once),
        "read before and after the rewind",
    );

    let id = sessions(&db)[0].id.clone();
    let marked: Vec<(String, Option<String>)> = messages(&db, &id)
        .iter()
        .map(|m| {
            let text = m.parts.iter().find_map(|p| match &p.part {
                scribe_message::Part::Text(t) => Some(t.text.clone()),
                _ => None,
            });
            let kind = m
                .error
                .as_ref()
                .and_then(|e| e["type"].as_str().map(str::to_owned));
            (text.unwrap_or_default(), kind)
        })
        .collect();
    let rewound = Some("rewound".to_owned());
    assert_eq!(
        marked,
        vec![
            ("Say hello and list files.".to_owned(), None),
            (String::new(), None),
            ("Hello! I listed the files.".to_owned(), rewound),
            ("Actually, just say hi.".to_owned(), None),
            ("Hi.".to_owned(), None),
        ]
    );
    // Every call counted, the rewound one's included: 11,855 + 12,069 + 100 prompt tokens.
    let s = session(&db, &id);
    assert_eq!(
        (s.tokens.input + s.tokens.cache_read, s.api_call_count),
        (24_024, 3)
    );

    // The rewound message appended again (an update of it, same id and time) is live again.
    append(
        &once_file,
        &gemini_record(
            "g-assistant-2",
            "gemini",
            "39:45.996",
            "Hello! I listed the files.",
            12_069,
        ),
    );
    run(&db_once, Source::Gemini, &[once_root]);
    assert!(messages(&db_once, &id).iter().all(|m| m.error.is_none()));
}

/// Gemini CLI sets the messages it keeps sending the model (`{"$set": {"messages": [...]}}`)
/// after a compression (with a summary turn) or a masking of old tool outputs: a new one
/// (the summary) is added, one recorded before keeps its record (not the set's masked
/// copy), and the ones it leaves out stay in Scribe, as they stay in the file, with their
/// usage, whether the file was read before the set or only after it. A later rewind cuts
/// the CLI's list as the set left it. (The set replaced everything read before it: a file
/// read after a compression lost the conversation before it, and its usage.)
#[test]
fn a_gemini_set_of_messages_keeps_the_ones_it_leaves_out() {
    let assistant_2 = lines(GEMINI_FIXTURE)
        .concat()
        .lines()
        .rfind(|l| l.contains("\"id\":\"g-assistant-2\""))
        .expect("the fixture's last answer")
        .to_owned();
    let summary = gemini_record(
        "g-summary",
        "user",
        "40:00.000",
        "Summary: files were listed.",
        0,
    );
    // The answer as the set lists it, its text masked: the record of it stays.
    let masked = assistant_2.replace("Hello! I listed the files.", "[masked]");
    assert_ne!(masked, assistant_2);
    let after = format!(
        "{{\"$set\":{{\"messages\":[{},{masked}]}}}}\n{}{}",
        summary.trim_end(),
        gemini_record("g-user-2", "user", "40:01.000", "Now say hi.", 0),
        gemini_record("g-assistant-3", "gemini", "40:02.000", "Hi.", 100)
    );
    let BeforeAndAfter {
        db,
        db_once,
        once_file,
        once_root,
        _dirs,
    } = gemini_before_and_after(&after);
    assert_same(&dump(&db), &dump(&db_once), "read before and after the set");

    let id = sessions(&db_once)[0].id.clone();
    let shown = |db: &std::sync::Arc<scribe_db::Database>| -> Vec<(String, bool)> {
        messages(db, &id)
            .iter()
            .map(|m| {
                let text = m.parts.iter().find_map(|p| match &p.part {
                    scribe_message::Part::Text(t) => Some(t.text.clone()),
                    _ => None,
                });
                (text.unwrap_or_default(), m.error.is_some())
            })
            .collect()
    };
    let kept = |marked: [bool; 6]| {
        [
            "Say hello and list files.",
            "",
            "Hello! I listed the files.",
            "Summary: files were listed.",
            "Now say hi.",
            "Hi.",
        ]
        .into_iter()
        .zip(marked)
        .map(|(t, m)| (t.to_owned(), m))
        .collect::<Vec<_>>()
    };
    assert_eq!(shown(&db_once), kept([false; 6]));
    // Every call counted: 11,855 + 12,069 + 100 prompt tokens.
    let s = session(&db_once, &id);
    assert_eq!(
        (s.tokens.input + s.tokens.cache_read, s.api_call_count),
        (24_024, 3)
    );

    // Rewound to the answer the set kept: it and what came after it in the CLI's list
    // are dropped, not the summary the set put before it.
    append(&once_file, "{\"$rewindTo\":\"g-assistant-2\"}\n");
    run(&db_once, Source::Gemini, &[once_root]);
    assert_eq!(
        shown(&db_once),
        kept([false, false, true, false, true, true])
    );
}

/// `claude --resume` that does not replay: the new file's first line answers the earlier
/// session's last line (`parentUuid`), which that file recorded among its leaves. The new
/// session is the earlier one's continuation, whether both files are read in one run or
/// the earlier one first, and stays one when its file grows. (The link was looked up as a
/// message id made with the answering line's time, which the answered message's id never
/// has: such a session was imported as a conversation of its own.)
#[test]
fn a_resumed_session_that_does_not_replay_continues_the_one_it_answers() {
    let old_id = "609b44ad-7c18-4745-a70b-784281dce85e";
    let new_id = "88888888-7c18-4745-a70b-784281dce85e";
    let original = lines("claude/projects/-work-proj/609b44ad-7c18-4745-a70b-784281dce85e.jsonl");
    let line = |uuid: &str, parent: &str, at: &str, text: &str| {
        format!(
            "{{\"type\":\"user\",\"uuid\":\"{uuid}\",\"parentUuid\":\"{parent}\",\"sessionId\":\"{new_id}\",\"timestamp\":\"2026-10-01T{at}.000Z\",\"cwd\":\"/work/proj\",\"isSidechain\":false,\"message\":{{\"role\":\"user\",\"content\":\"{text}\"}}}}\n"
        )
    };
    for one_run in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("in");
        let old = root.join(format!("{old_id}.jsonl"));
        write(&old, &original.concat());
        // Files are read oldest first: the earlier session's file was written earlier.
        let earlier = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(earlier)
            .unwrap();
        let db = scribe_db(dir.path());
        if !one_run {
            run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
        }
        let new = root.join(format!("{new_id}.jsonl"));
        write(
            &new,
            &line(
                "resumed-1",
                "2db8c26e-303e-4c63-a733-9d1a3b5c61bd",
                "09:00:00",
                "go on",
            ),
        );
        let continues_the_earlier = || {
            let resumed = session(&db, new_id);
            let link = (resumed.kind, resumed.parent_session_id.as_deref());
            assert_eq!(
                link,
                (SessionKind::Continuation, Some(old_id)),
                "one run: {one_run}"
            );
            resumed.message_count
        };
        run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
        assert_eq!(continues_the_earlier(), 1);
        append(&new, &line("resumed-2", "resumed-1", "09:00:05", "and on"));
        let s = run(&db, Source::ClaudeCode, &[root]);
        assert_eq!(s.written.messages_inserted, 1, "{:?}", s.written);
        assert_eq!(continues_the_earlier(), 2);
        let earlier = session(&db, old_id);
        assert_eq!(
            (earlier.kind, earlier.parent_session_id),
            (SessionKind::Normal, None)
        );
    }
}

#[test]
fn a_codex_sub_agent_skips_the_history_copied_from_its_parent() {
    let parent_rel = "codex/sessions/2026/09/30/rollout-2026-09-30T08-39-00-01a0f21c-5c40-7f72-9aa9-ef0b43570680.jsonl";
    let parent_id = "01a0f21c-5c40-7f72-9aa9-ef0b43570680";
    let child_id = "01a0f21c-9999-7f72-9aa9-ef0b43570680";
    let second = "2026-09-30T11:45:00";
    // The child's file: its meta, then the parent's items copied in the same second
    // (token counts included), then its own turn.
    let mut child = vec![format!(
        "{{\"timestamp\":\"{second}.000Z\",\"type\":\"session_meta\",\"payload\":{{\"id\":\"{child_id}\",\"timestamp\":\"{second}.000Z\",\"cwd\":\"/work/proj\",\"source\":{{\"subagent\":{{\"thread_spawn\":{{\"parent_thread_id\":\"{parent_id}\",\"depth\":1}}}}}}}}}}\n"
    )];
    for line in lines(parent_rel).iter().skip(1) {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["timestamp"] = serde_json::Value::String(format!("{second}.500Z"));
        child.push(format!("{v}\n"));
    }
    child.push(
        "{\"timestamp\":\"2026-09-30T11:45:03.000Z\",\"type\":\"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"sub-agent answer\"}]}}\n"
            .to_owned(),
    );
    child.push(
        "{\"timestamp\":\"2026-09-30T11:45:03.100Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"token_count\",\"info\":{\"total_token_usage\":{\"input_tokens\":300,\"cached_input_tokens\":100,\"output_tokens\":20,\"reasoning_output_tokens\":0,\"total_tokens\":320},\"last_token_usage\":{\"input_tokens\":30,\"cached_input_tokens\":0,\"output_tokens\":6,\"reasoning_output_tokens\":0,\"total_tokens\":36}}}}\n"
            .to_owned(),
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("in");
    write(&root.join("parent.jsonl"), &lines(parent_rel).concat());
    write(
        &root.join(format!("rollout-2026-09-30T11-45-00-{child_id}.jsonl")),
        &child.concat(),
    );
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Codex, &[root]);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    let sub = session(&db, child_id);
    assert_eq!(sub.kind, SessionKind::Task);
    assert_eq!(sub.parent_session_id.as_deref(), Some(parent_id));
    // Only its own call: the totals went from the copied 270/100/14 to 300/100/20.
    assert_eq!(
        (sub.tokens.input, sub.tokens.cache_read, sub.tokens.output),
        (30, 0, 6)
    );
    let texts: Vec<String> = messages(&db, child_id).iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["sub-agent answer"]);
    assert_eq!(session(&db, parent_id).tokens.input, 170);
}

/// `--since`: a file last written before it is not read (nor recorded, so a later import
/// without it still reads the file); a newer file is read. (Since 2026-09-01: the fresh
/// file's session is of 2026-09-30, the old file was last written 2026-08-01.)
#[test]
fn since_leaves_out_files_last_written_before_it_until_an_import_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("projects");
    let old = root.join("-old").join(format!("{CLAUDE_ID}.jsonl"));
    write(&old, &lines(CLAUDE).concat());
    let fresh_id = "609b44ad-7c18-4745-a70b-784281dce85e";
    let fresh = root.join("-new").join(format!("{fresh_id}.jsonl"));
    write(
        &fresh,
        &lines(&format!("claude/projects/-work-proj/{fresh_id}.jsonl")).concat(),
    );
    let august = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_785_542_400);
    std::fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(august)
        .unwrap();
    let db = scribe_db(dir.path());
    let mut sink =
        scribe_import::sink::StoreSink::new(scribe_session::Store::new(std::sync::Arc::clone(&db)));
    let options = scribe_import::Options {
        since: Some(1_788_220_800_000),
        ..scribe_import::Options::default()
    };
    let s = scribe_import::import(
        &mut sink,
        scribe_import::sources::importer(Source::ClaudeCode),
        std::slice::from_ref(&root),
        &options,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!((s.files, s.files_read, s.files_too_old), (2, 1, 1), "{s:?}");
    let ids: Vec<String> = sessions(&db).into_iter().map(|s| s.id).collect();
    assert_eq!(ids, [fresh_id.to_owned()]);
    // Without --since the old file is read now, and only it.
    let s = run(&db, Source::ClaudeCode, &[root]);
    assert_eq!((s.files_read, s.files_unchanged), (1, 1), "{s:?}");
    assert_eq!(sessions(&db).len(), 2);
}

/// File sources are read on a second thread, a batch's worth at a time: with one message
/// per batch (every file handed over and stored alone) the store ends up exactly as with
/// one batch for everything, and so does the summary.
#[test]
fn batches_of_any_size_store_the_same() {
    for (source, tree) in [
        (Source::ClaudeCode, "claude/projects"),
        (Source::Codex, "codex"),
    ] {
        let mut dumps = Vec::new();
        for batch_messages in [1, 5_000] {
            let dir = tempfile::tempdir().unwrap();
            let db = scribe_db(dir.path());
            let mut sink = scribe_import::sink::StoreSink::new(scribe_session::Store::new(
                std::sync::Arc::clone(&db),
            ));
            let s = scribe_import::import(
                &mut sink,
                scribe_import::sources::importer(source),
                &[fixtures().join(tree)],
                &scribe_import::Options {
                    batch_messages,
                    ..scribe_import::Options::default()
                },
                &mut |_| {},
            )
            .unwrap();
            assert!(s.failed.is_empty(), "{:?}", s.failed);
            let counts = (
                s.files,
                s.files_read,
                s.records,
                s.written.sessions_created,
                s.written.messages_inserted,
            );
            dumps.push((counts, dump(&db)));
        }
        assert_eq!(dumps[0].0, dumps[1].0, "{source:?}");
        assert_same(&dumps[0].1, &dumps[1].1, source.name());
    }
}

/// A Codex session's usage-limit snapshot is the newest its file has reported, however
/// the file was read: an import of lines without a snapshot keeps the one before.
#[test]
fn a_codex_usage_limit_snapshot_survives_imports_that_report_none() {
    let name = "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl";
    let all = lines(CODEX);
    let dir = tempfile::tempdir().unwrap();
    let (file, root) = file_in(dir.path(), name);
    let db = scribe_db(dir.path());
    let snapshot_at = |db: &std::sync::Arc<scribe_db::Database>| {
        session(db, CODEX_ID)
            .model_config
            .and_then(|c| c[scribe_import::sources::codex::RATE_LIMITS]["at"].as_i64())
    };
    // Line 13 reports the limits at 12:19:43.421, line 19 again at 12:19:52.689.
    write(&file, &all[..13].concat());
    run(&db, Source::Codex, std::slice::from_ref(&root));
    assert_eq!(snapshot_at(&db), Some(1_771_849_183_421));
    append(&file, &all[13..18].concat());
    let second = run(&db, Source::Codex, std::slice::from_ref(&root));
    assert_eq!(second.files_read, 1);
    assert_eq!(snapshot_at(&db), Some(1_771_849_183_421));
    append(&file, &all[18..].concat());
    run(&db, Source::Codex, &[root]);
    assert_eq!(snapshot_at(&db), Some(1_771_849_192_689));
}

/// `--since` keeps the sessions active since then by what they say, not by their files'
/// modification times: Claude Code's files copied (or restored from a backup) are all
/// new files, yet only the session active since the date is imported, and an import
/// without `--since` then takes the others (their files' marks were not recorded).
#[test]
fn since_keeps_sessions_by_their_activity_not_their_files_times() {
    use scribe_import::{Options, import, sink::StoreSink, sources};
    use scribe_session::Store;
    let dir = tempfile::tempdir().unwrap();
    let copied = dir.path().join("projects");
    copy_tree(&fixtures().join("claude/projects"), &copied);
    let db = scribe_db(dir.path());
    let mut sink = StoreSink::new(Store::new(std::sync::Arc::clone(&db)));
    let since = Options {
        // 2026-01-01T00:00:00Z: only 609b44ad (2026-09-30) is later; every file is new.
        since: Some(1_767_225_600_000),
        ..Options::default()
    };
    let recent = import(
        &mut sink,
        sources::importer(Source::ClaudeCode),
        std::slice::from_ref(&copied),
        &since,
        &mut |_| {},
    )
    .unwrap();
    assert!(recent.failed.is_empty(), "{:?}", recent.failed);
    assert_eq!(recent.files_too_old, 0);
    let ids: Vec<String> = sessions(&db).into_iter().map(|s| s.id).collect();
    assert_eq!(ids, ["609b44ad-7c18-4745-a70b-784281dce85e"]);
    let all = run(&db, Source::ClaudeCode, &[copied]);
    assert!(all.failed.is_empty(), "{:?}", all.failed);
    assert_eq!(all.written.messages_inserted, 33);
    assert_eq!(sessions(&db).len(), 7);
}
