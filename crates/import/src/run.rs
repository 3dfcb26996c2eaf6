//! [`import`]: discover a source's files, skip the unchanged ones after one `stat`, read
//! the rest from where they stopped, price what was read, and hand it to the sink in large
//! batches (one transaction each).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::UNIX_EPOCH;

use crate::error::{ImportError, Result};
use crate::pricing::Pricer;
use crate::record::{Batch, FileMark, Resume};
use crate::sink::{FileState, Sink, Written};
use crate::sources::{FileReport, Importer, Malformed, Unit};

/// How to import.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only sessions active since then (ms): files modified before it are not read.
    pub since: Option<i64>,
    /// Messages per transaction (a batch also ends with its last file).
    pub batch_messages: usize,
    /// Prices for usage without a reported cost.
    pub pricer: Pricer,
    /// When set (`scribe import --from` on Ctrl-C), the import takes no further file:
    /// the files already taken are stored in one last transaction (and indexed, as at
    /// any run's end) and [`import`] returns with [`SourceSummary::stopped`]; the files
    /// not reached are read by the next import, as any file not yet imported.
    pub stop: Option<Arc<AtomicBool>>,
}

impl Options {
    /// Whether [`Options::stop`] is set.
    pub fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            since: None,
            batch_messages: 5_000,
            pricer: Pricer::default(),
            stop: None,
        }
    }
}

/// What [`import`] tells its caller as it goes (for a progress bar).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// This many files were found.
    Found(usize),
    /// One file is done (read, skipped or failed).
    Done(&'a Path),
    /// A part of a file read a batch at a time (a database source) was stored: `messages`
    /// of it so far. A database's one file may take minutes; this is its progress.
    Stored {
        /// The file.
        path: &'a Path,
        /// Its messages stored so far in this import.
        messages: u64,
    },
    /// Building the search indexes for what the run stored: `done` of `total` parts.
    Indexed {
        /// Parts indexed so far.
        done: u64,
        /// Parts to index.
        total: u64,
    },
}

/// What importing one source did.
#[derive(Debug, Clone, Default)]
pub struct SourceSummary {
    /// The agent.
    pub source: String,
    /// Where it looked.
    pub roots: Vec<PathBuf>,
    /// Files (or databases) found.
    pub files: u64,
    /// Files read (new or changed).
    pub files_read: u64,
    /// Files unchanged since the last import (one `stat` each).
    pub files_unchanged: u64,
    /// Files older than `--since`.
    pub files_too_old: u64,
    /// Records taken.
    pub records: u64,
    /// Records skipped, by type.
    pub skipped: BTreeMap<String, u64>,
    /// Lines or records that could not be read (the rest of their file was imported).
    pub malformed: Vec<Malformed>,
    /// Files that could not be read at all, with why.
    pub failed: Vec<Malformed>,
    /// Sessions that could not be stored (an id longer than
    /// [`scribe_db::ids::MAX_ID_BYTES`]), each with its file and why; the rest of their
    /// file was imported.
    pub failed_sessions: Vec<Malformed>,
    /// What was stored, and its usage ([`Written::usage`]: what was taken, without the
    /// replayed copies of messages another session holds).
    pub written: Written,
    /// [`Options::stop`] ended the import before every file to read was taken (the
    /// files taken were stored; `files - files_read - files_unchanged - files_too_old`
    /// were not reached).
    pub stopped: bool,
    /// Usage imported earlier without a price that the catalog prices now
    /// ([`Sink::reprice`], before the files are read); not in `written.usage`.
    pub repriced: crate::sink::Repriced,
}

/// Size and modification time (ns) of a file and its [companions](Importer::companions)
/// together (sizes added, the latest time), so a change to any of them is a change.
pub(crate) fn stat(importer: &dyn Importer, path: &Path) -> Result<(i64, i64)> {
    let one = |p: &Path| -> std::io::Result<(i64, i64)> {
        let meta = std::fs::metadata(p)?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        Ok((i64::try_from(meta.len()).unwrap_or(i64::MAX), mtime))
    };
    let (mut size, mut mtime) = one(path).map_err(ImportError::io(path))?;
    for companion in importer.companions(path) {
        if let Ok((s, m)) = one(&companion) {
            size = size.saturating_add(s);
            mtime = mtime.max(m);
        }
    }
    Ok((size, mtime))
}

/// The files of `importer` under `roots`, oldest first (so a conversation continued in a
/// newer file is imported after the one it continues), each once.
pub fn scan(importer: &dyn Importer, roots: &[PathBuf]) -> Result<Vec<(PathBuf, i64, i64)>> {
    let mut paths = Vec::new();
    for root in roots {
        importer.discover(root, &mut paths)?;
    }
    let mut files: Vec<(PathBuf, i64, i64)> = Vec::with_capacity(paths.len());
    let mut seen = std::collections::HashSet::new();
    for path in paths {
        let path = std::path::absolute(&path).unwrap_or(path);
        if !seen.insert(path.clone()) {
            continue;
        }
        if let Ok((size, mtime)) = stat(importer, &path) {
            files.push((path, size, mtime));
        }
    }
    files.sort_by(|a, b| a.2.cmp(&b.2).then_with(|| a.0.cmp(&b.0)));
    Ok(files)
}

/// Imports the history of `importer` found under `roots` into `sink`.
///
/// A file that cannot be read is reported in [`SourceSummary::failed`] and the others go
/// on; a malformed line or unknown record is reported and the rest of its file imported.
/// Errors: a root that exists but cannot be listed, or the sink failing.
pub fn import(
    sink: &mut dyn Sink,
    importer: &dyn Importer,
    roots: &[PathBuf],
    options: &Options,
    progress: &mut dyn FnMut(Event<'_>),
) -> Result<SourceSummary> {
    let source = importer.source();
    let mut summary = SourceSummary {
        source: source.name().to_owned(),
        roots: roots.to_vec(),
        ..SourceSummary::default()
    };
    // Usage stored before its model had a price, priced now (once per catalog version).
    summary.repriced = sink.reprice(source, &options.pricer)?;
    let files = scan(importer, roots)?;
    summary.files = files.len() as u64;
    progress(Event::Found(files.len()));
    let mut states = sink.files(source)?;
    // What to read, decided up front (one `stat` each, done by the scan).
    let mut todo: Vec<Todo> = Vec::new();
    for (path, size, mtime) in files {
        let key = path.display().to_string();
        let known = states.remove(&key);
        if let Some(state) = &known
            && state.size == size
            && state.mtime_ns == mtime
        {
            summary.files_unchanged += 1;
            progress(Event::Done(&path));
            continue;
        }
        if let Some(since) = options.since
            && mtime / 1_000_000 < since
        {
            summary.files_too_old += 1;
            progress(Event::Done(&path));
            continue;
        }
        // A file that shrank was rewritten: read it again from the start.
        let resume = match known {
            Some(state) if u64::try_from(size).unwrap_or(0) >= state.offset => state.resume(),
            _ => Resume::default(),
        };
        todo.push(Todo {
            path,
            key,
            size,
            mtime,
            resume,
        });
    }
    let mut batch = Batch::default();
    // What a read of a file gave, taken: the whole file (or its last part) with the file's
    // mark, stored once a batch's worth is taken; a part a database source gave before
    // its end (`Resume::more`), stored at once without the mark.
    let mut stored = 0_u64;
    let mut take = |todo: &Todo, read: Read, sink: &mut dyn Sink| -> Result<()> {
        let more = matches!(&read.2, Ok(resume) if resume.more);
        if more {
            let (part, report, _) = read;
            stored += part.messages.len() as u64;
            // A part before the end records no mark: what it held back needs none.
            let _ = take_part(&mut summary, &mut batch, options, todo, part, report);
        } else {
            take_file(&mut summary, &mut batch, options, todo, read);
        }
        if more || batch.messages.len() >= options.batch_messages {
            summary.written += sink.commit(source, &std::mem::take(&mut batch))?;
        }
        if more {
            progress(Event::Stored {
                path: &todo.path,
                messages: stored,
            });
        } else {
            stored = 0;
            progress(Event::Done(&todo.path));
        }
        Ok(())
    };
    let mut stopped = false;
    if importer.reads_state() {
        'files: for todo in &todo {
            if options.stopped() {
                stopped = true;
                break;
            }
            // A database is read a batch of sessions at a time: each part it gives before
            // its end is stored before the next is read, and the file is marked read with
            // its last part only (stopped or failed before that, the next import reads it
            // again and skips the sessions stored, which carry their fingerprints).
            let mut resume = todo.resume.clone();
            loop {
                let read = read_file(importer, todo, resume, options, &*sink);
                let next = match &read.2 {
                    Ok(next) if next.more => Some(next.clone()),
                    _ => None,
                };
                take(todo, read, sink)?;
                let Some(next) = next else {
                    break;
                };
                if options.stopped() {
                    stopped = true;
                    break 'files;
                }
                resume = next;
            }
        }
    } else {
        // The files of the next batch are read (parsed, mapped) on another thread while
        // the batch before them is stored: handed over in file order, a batch's worth of
        // messages at a time: about three batches in memory at most (the one being
        // stored, one handed over, one being read).
        std::thread::scope(|scope| -> Result<()> {
            let (send, receive) = std::sync::mpsc::sync_channel::<Vec<Read>>(1);
            let todo = &todo;
            scope.spawn(move || {
                let (mut group, mut messages) = (Vec::new(), 0);
                for t in todo {
                    let read = read_file(importer, t, t.resume.clone(), options, &Unread);
                    messages += read.0.messages.len();
                    group.push(read);
                    if messages >= options.batch_messages {
                        if send.send(std::mem::take(&mut group)).is_err() {
                            return;
                        }
                        messages = 0;
                    }
                }
                let _ = send.send(group);
            });
            // Each read is of the next file in `todo`, in order. Dropping `receive` on a
            // stop ends the reader at its next hand-over.
            let mut todo = todo.iter();
            'groups: while let Ok(group) = receive.recv() {
                for read in group {
                    if options.stopped() {
                        stopped = true;
                        break 'groups;
                    }
                    let Some(t) = todo.next() else {
                        break;
                    };
                    take(t, read, sink)?;
                }
            }
            drop(receive);
            Ok(())
        })?;
    }
    summary.written += sink.commit(source, &batch)?;
    summary.stopped = stopped;
    sink.finish(&mut |done, total| progress(Event::Indexed { done, total }))?;
    Ok(summary)
}

/// A file to read, and from where.
struct Todo {
    path: PathBuf,
    key: String,
    size: i64,
    mtime: i64,
    resume: Resume,
}

/// What reading one file gave: its records and report, and where it stopped.
type Read = (Batch, FileReport, Result<Resume>);

fn read_file(
    importer: &dyn Importer,
    todo: &Todo,
    resume: Resume,
    options: &Options,
    state: &dyn Sink,
) -> Read {
    let mut report = FileReport::default();
    let mut part = Batch::default();
    let unit = Unit {
        path: &todo.path,
        resume,
        since: options.since,
        mtime_ms: todo.mtime / 1_000_000,
        state,
        max_messages: options.batch_messages,
    };
    let resume = importer.read(&unit, &mut part, &mut report);
    (part, report, resume)
}

/// Prices what one file gave, counts it into `summary` and adds it to `batch` with the
/// file's mark (what was read of it, recorded in the same transaction).
fn take_file(
    summary: &mut SourceSummary,
    batch: &mut Batch,
    options: &Options,
    todo: &Todo,
    (part, report, resume): Read,
) {
    let resume = match resume {
        Ok(resume) => resume,
        Err(err) => {
            summary.failed.push(Malformed {
                path: todo.key.clone(),
                line: None,
                error: scribe_agent::error_chain(&err),
            });
            return;
        }
    };
    summary.files_read += 1;
    let (records, skipped, held_back) = take_part(summary, batch, options, todo, part, report);
    if held_back {
        // Read again by the next import: an import without `--since` takes them.
        return;
    }
    batch.files.push(FileMark {
        path: todo.key.clone(),
        size: todo.size,
        mtime_ns: todo.mtime,
        resume,
        records: i64::try_from(records).unwrap_or(i64::MAX),
        skipped: i64::try_from(skipped).unwrap_or(i64::MAX),
    });
}

/// Prices what one read of `todo`'s file gave, counts it into `summary` and adds it to
/// `batch`; returns the records it took, the ones it skipped, and whether `--since` held
/// back a session of it ([`hold_back_inactive`]).
fn take_part(
    summary: &mut SourceSummary,
    batch: &mut Batch,
    options: &Options,
    todo: &Todo,
    mut part: Batch,
    report: FileReport,
) -> (u64, u64, bool) {
    let held_back = options
        .since
        .is_some_and(|since| hold_back_inactive(&mut part, since));
    refuse_unstorable_ids(summary, &mut part, &todo.key);
    keep_file_order(&mut part);
    for m in &mut part.messages {
        options.pricer.apply(m);
    }
    for s in &mut part.sessions {
        if let Some(u) = &mut s.usage_total {
            price_session(&options.pricer, u);
        }
    }
    summary.records += report.records;
    let skipped: u64 = report.skipped.values().sum();
    for (kind, n) in report.skipped {
        *summary.skipped.entry(kind).or_default() += n;
    }
    summary.malformed.extend(report.malformed);
    batch.append(part);
    (report.records, skipped, held_back)
}

/// Takes out of `part` every session not active since `since` (`--since`): its record's
/// last activity and every message of it read here before then, with everything of it.
/// Most readers skip such a session themselves; a file whose sessions are older than
/// its modification time (copied, restored from a backup) read by a reader that learns a
/// session's activity only from its messages (Claude Code's, Codex's) is caught here.
/// Returns whether it took any out: the file's mark is then not recorded, so that an
/// import without `--since` reads them.
fn hold_back_inactive(part: &mut Batch, since: i64) -> bool {
    let mut last: std::collections::HashMap<&str, i64> = std::collections::HashMap::new();
    for s in &part.sessions {
        let at = last.entry(s.external_id.as_str()).or_insert(i64::MIN);
        *at = (*at).max(s.created_at).max(s.updated_at);
    }
    for m in &part.messages {
        let at = last.entry(m.session.as_str()).or_insert(i64::MIN);
        *at = (*at).max(m.message.created_at).max(m.message.updated_at);
    }
    let inactive: std::collections::HashSet<String> = last
        .into_iter()
        .filter(|(_, at)| *at < since)
        .map(|(session, _)| session.to_owned())
        .collect();
    if inactive.is_empty() {
        return false;
    }
    let kept = |session: &str| !inactive.contains(session);
    part.sessions.retain(|s| kept(&s.external_id));
    part.messages.retain(|m| kept(&m.session));
    part.part_updates.retain(|u| kept(&u.session));
    part.marks.retain(|m| kept(&m.session));
    part.task_links.retain(|l| kept(&l.child));
    part.keys.retain(|k| kept(&k.session));
    true
}

/// Messages of a session keep the order the file wrote them in when their times do not
/// say otherwise. The store orders a session's messages by time, then id, and an id's
/// tail is a hash, so two written in the same millisecond showed in either order (Claude
/// Code writes a slash command's line and its expanded prompt in one). A message whose
/// source time is not before that of the message the file wrote before it in its
/// session, but which would sort before it, is moved to the millisecond after it; its id,
/// made from the source's time, stays, so reading the file again finds it. A message the
/// file wrote after a later one (a tool result logged late) keeps its time.
fn keep_file_order(part: &mut Batch) {
    // Per session: the last message's time in the source, its time and its id.
    let mut last: HashMap<&str, (i64, i64, &str)> = HashMap::new();
    for rec in &mut part.messages {
        let m = &mut rec.message;
        let source_at = m.created_at;
        if let Some(&(prev_source, prev_at, prev_id)) = last.get(rec.session.as_str())
            && source_at >= prev_source
            && (m.created_at, m.id.as_str()) <= (prev_at, prev_id)
        {
            let at = prev_at.saturating_add(1);
            m.created_at = at;
            m.updated_at = m.updated_at.max(at);
            m.finished_at = m.finished_at.map(|f| f.max(at));
        }
        last.insert(
            rec.session.as_str(),
            (source_at, m.created_at, m.id.as_str()),
        );
    }
}

/// Takes out of `part` every session whose source id is empty or longer than
/// [`scribe_db::ids::MAX_ID_BYTES`] (its Scribe id would be that id, which neither backend
/// stores), with everything of it, and reports each in `summary.failed_sessions` with the
/// typed error's words; the file's other sessions go on. A parent or record key that long names
/// nothing that can be stored, and is dropped. Before, PostgreSQL refused such an id with
/// a raw message and the whole import stopped; SQLite stored it. An empty id (a hand-edited
/// file, another program's) stopped the whole import on both.
fn refuse_unstorable_ids(summary: &mut SourceSummary, part: &mut Batch, path: &str) {
    use scribe_db::ids::check_id;
    let fits = |id: &str| check_id("session", id).is_ok();
    let refusal = |id: &str| match id {
        "" => Some("session id is empty".to_owned()),
        id => check_id("session", id).err().map(|err| err.to_string()),
    };
    let mut refused = std::collections::HashSet::new();
    part.sessions.retain_mut(|rec| {
        if let Some(error) = refusal(&rec.external_id) {
            summary.failed_sessions.push(Malformed {
                path: path.to_owned(),
                line: None,
                error,
            });
            refused.insert(rec.external_id.clone());
            return false;
        }
        if rec.parent.as_deref().is_some_and(|p| refusal(p).is_some()) {
            rec.parent = None;
        }
        true
    });
    let kept = |session: &str| refusal(session).is_none() && !refused.contains(session);
    part.messages.retain(|m| kept(&m.session));
    part.part_updates.retain(|u| kept(&u.session));
    part.marks.retain(|m| kept(&m.session));
    part.task_links.retain(|l| kept(&l.child));
    part.keys.retain(|k| kept(&k.session) && fits(&k.key));
}

/// The state a reader that does not read it is given ([`Importer::reads_state`] is
/// false): nothing stored.
#[derive(Debug)]
struct Unread;

impl Sink for Unread {
    fn files(&self, _: crate::Source) -> Result<std::collections::HashMap<String, FileState>> {
        Ok(std::collections::HashMap::new())
    }

    fn fingerprint(&self, _: crate::Source, _: &str) -> Result<Option<String>> {
        Ok(None)
    }

    fn commit(&mut self, _: crate::Source, _: &Batch) -> Result<Written> {
        Ok(Written::default())
    }
}

fn price_session(pricer: &Pricer, u: &mut crate::record::SessionUsage) {
    use crate::pricing::{ESTIMATED, REPORTED, UNKNOWN};
    if let Some(cost) = u.reported_cost.filter(|c| c.is_finite() && *c >= 0.0) {
        u.cost_usd = cost;
        u.cost_flags = REPORTED;
    } else if u.tokens.is_zero() {
        u.cost_flags = 0;
    } else if let Some(cost) = pricer.estimate_calls(u.model.as_deref(), &u.tokens, u.api_calls) {
        u.cost_usd = cost;
        u.cost_flags = ESTIMATED;
    } else {
        u.cost_flags = UNKNOWN;
    }
}
