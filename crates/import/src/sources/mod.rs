//! One module per agent, each behind [`Importer`] (as atuin's history importers are).
//!
//! An importer knows where its agent keeps history ([`Importer::default_roots`]), which
//! files or databases under a root hold it ([`Importer::discover`]), and how to turn one of
//! them into a [`Batch`] from where the last import stopped ([`Importer::read`]). It never
//! writes anything: the [`Sink`] does.

pub mod aider;
pub mod amp;
pub mod antigravity;
pub mod claude_code;
pub mod cline;
pub mod codex;
pub mod continue_dev;
pub mod copilot;
pub mod crush;
pub mod cursor;
pub mod droid;
pub mod gemini;
pub mod goose;
pub mod grok;
pub mod hermes;
pub mod kimi;
pub mod kiro;
pub mod opencode;
pub mod openhands;
pub mod pi;
pub mod qwen;
pub mod vibe;
pub mod vscode;
pub mod zed;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, Resume};
use crate::sink::Sink;

/// A reader of JSON Lines history (Claude Code, Codex): what [`read_json_lines`] feeds.
pub(crate) trait JsonLines {
    /// The report a line that is not JSON goes to.
    fn report(&mut self) -> &mut FileReport;
    /// One record, read from 1-based line `number`.
    fn read_line(&mut self, number: u64, value: &serde_json::Value);
}

/// The state a JSON Lines reader carried over from the last import of `unit`'s file, or a
/// fresh one (a carry this build cannot read starts afresh, as a first import would).
pub(crate) fn resumed_carry<C: serde::de::DeserializeOwned + Default>(unit: &Unit<'_>) -> C {
    unit.resume
        .carry
        .clone()
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default()
}

/// Feeds every complete line of `unit`'s file after where the last import stopped to
/// `reader`; a line that is not JSON is reported malformed and skipped, the rest of the
/// file still read.
pub(crate) fn read_json_lines(
    unit: &Unit<'_>,
    reader: &mut impl JsonLines,
) -> Result<crate::reader::Chunk> {
    let chunk = crate::reader::read_from(unit.path, unit.resume.offset, unit.resume.lines)?;
    for line in chunk.lines() {
        match serde_json::from_str(line.text) {
            Ok(value) => reader.read_line(line.number, &value),
            Err(err) => {
                reader
                    .report()
                    .malformed(unit.path, Some(line.number), err.to_string());
            }
        }
    }
    Ok(chunk)
}

/// How a database source reads its sessions a batch at a time ([`Resume::more`]): in
/// `(key, id)` order, the key compared as `f64::total_cmp` does (sorted here, in Rust,
/// so a value the database would order otherwise, text where a number belongs, cannot make
/// a resumed read skip a session or read one twice); going on after the session the read
/// before stopped at; stopping at the end of a session once the batch is full. Read as
/// `while let Some(s) = batches.next(&sessions, out.messages.len()) { … }`, then
/// `Ok(batches.resume())`.
pub(crate) struct Batches {
    /// The session the read before stopped after (from the resume's carry).
    after: Option<(f64, String)>,
    /// The last session this read went through.
    last: Option<(f64, String)>,
    max_messages: usize,
    order_of: fn(&serde_json::Value) -> (f64, &str),
    /// The index of the next session to look at.
    at: usize,
    /// Where the next read goes on, once this one stopped at a full batch.
    stopped: Option<Resume>,
}

/// What [`Batches::step`] says of the next session.
enum Step {
    /// An earlier read of this import read it: go on to the next.
    Skip,
    /// Read it.
    Read,
    /// The batch is full: stop before it, and go on from here.
    Stop(Resume),
}

impl Batches {
    /// Sorts `sessions` by `order_of` and goes on from where `unit`'s resume says.
    pub(crate) fn new(
        unit: &Unit<'_>,
        sessions: &mut [serde_json::Value],
        order_of: fn(&serde_json::Value) -> (f64, &str),
    ) -> Batches {
        sessions.sort_by(|a, b| order(order_of(a), order_of(b)));
        let after = (|| {
            let after = unit.resume.carry.as_ref()?.get("after")?;
            Some((after.get(0)?.as_f64()?, after.get(1)?.as_str()?.to_owned()))
        })();
        Batches {
            after,
            last: None,
            max_messages: unit.max_messages,
            order_of,
            at: 0,
            stopped: None,
        }
    }

    /// The next session of `sessions` (the list [`Batches::new`] sorted) to read, the batch
    /// holding `messages` messages: sessions an earlier read of this import read are passed
    /// over; none once the batch is full (then [`Batches::resume`] says where to go on) or
    /// the list is done.
    pub(crate) fn next<'a>(
        &mut self,
        sessions: &'a [serde_json::Value],
        messages: usize,
    ) -> Option<&'a serde_json::Value> {
        if self.stopped.is_some() {
            return None;
        }
        while let Some(s) = sessions.get(self.at) {
            match self.step((self.order_of)(s), messages) {
                Step::Skip => self.at += 1,
                Step::Read => {
                    self.at += 1;
                    return Some(s);
                }
                Step::Stop(resume) => {
                    self.stopped = Some(resume);
                    return None;
                }
            }
        }
        None
    }

    /// Where the next read goes on: after the last session read when the batch filled up,
    /// else nowhere (all was read).
    pub(crate) fn resume(self) -> Resume {
        self.stopped.unwrap_or_default()
    }

    /// What to do with the session at `at`, the batch holding `messages` messages.
    fn step(&mut self, at: (f64, &str), messages: usize) -> Step {
        if self
            .after
            .as_ref()
            .is_some_and(|(key, id)| !order(at, (*key, id)).is_gt())
        {
            return Step::Skip;
        }
        if let Some((key, id)) = &self.last
            && messages >= self.max_messages
        {
            return Step::Stop(Resume {
                carry: Some(serde_json::json!({ "after": [key, id] })),
                more: true,
                ..Resume::default()
            });
        }
        self.last = Some((at.0, at.1.to_owned()));
        Step::Read
    }
}

fn order(a: (f64, &str), b: (f64, &str)) -> std::cmp::Ordering {
    a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1))
}

/// What an earlier import recorded of a session whose source keeps no start time of its
/// own (a Zed thread, a Cursor conversation without one): the start it gave the session,
/// and what it saw of the source (to tell whether it changed). Kept together as the
/// session's fingerprint, `start|seen` ([`Recorded::fingerprint`]), so the start never
/// moves: the session's messages take it, and their ids with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Recorded {
    /// The start the first import gave the session (ms).
    pub(crate) start: Option<i64>,
    /// What it saw.
    pub(crate) seen: Option<String>,
}

impl Recorded {
    /// What earlier imports recorded of session `id` of `source` in `unit`'s store.
    pub(crate) fn of(unit: &Unit<'_>, source: Source, id: &str) -> Result<Recorded> {
        let stored = unit.state.fingerprint(source, id)?;
        Ok(stored
            .as_deref()
            .and_then(|f| f.split_once('|'))
            .map(|(start, seen)| Recorded {
                start: start.parse().ok(),
                seen: Some(seen.to_owned()),
            })
            .unwrap_or_default())
    }

    /// Whether the source is as it was seen: `seen` now.
    pub(crate) fn unchanged(&self, seen: &str) -> bool {
        self.seen.as_deref() == Some(seen)
    }

    /// The fingerprint recording `start` and `seen`.
    pub(crate) fn fingerprint(start: i64, seen: &str) -> String {
        format!("{start}|{seen}")
    }
}

/// Where a file read whole ends: after the complete lines of `chunk`, with nothing to
/// carry (a change reads it again from its start).
pub(crate) fn resume_whole(chunk: &crate::reader::Chunk) -> Resume {
    let (offset, lines) = chunk.end();
    Resume {
        offset,
        lines,
        carry: None,
        more: false,
    }
}

/// When the records of a file read whole happened: the first and the newest record's
/// time, with the file's modification time standing in for records that carry none before
/// any that does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Times {
    first: Option<i64>,
    last: Option<i64>,
    fallback: i64,
}

impl Times {
    /// No record seen yet; `fallback` (ms) for records without a time before any with one.
    pub(crate) fn new(fallback: i64) -> Times {
        Times {
            first: None,
            last: None,
            fallback,
        }
    }

    /// Notes a record whose own time is `at` (if it has one, and it is no later than
    /// [`crate::time::LATEST`]); returns the time it is given: its own, else the newest
    /// seen, else the fallback.
    pub(crate) fn note(&mut self, at: Option<i64>) -> i64 {
        let at = at
            .filter(|t| *t <= crate::time::LATEST)
            .unwrap_or_else(|| self.last());
        self.first.get_or_insert(at);
        self.last = Some(self.last.map_or(at, |last| last.max(at)));
        at
    }

    /// The first record's time (the fallback before any).
    pub(crate) fn first(&self) -> i64 {
        self.first.unwrap_or(self.fallback)
    }

    /// The newest record's time (the fallback before any).
    pub(crate) fn last(&self) -> i64 {
        self.last.unwrap_or(self.fallback)
    }
}

/// Where the next import of a JSON Lines file goes on: after the complete lines of
/// `chunk`, with the reader's `carry`.
pub(crate) fn resume_after(chunk: &crate::reader::Chunk, carry: &impl serde::Serialize) -> Resume {
    let (offset, lines) = chunk.end();
    Resume {
        offset,
        lines,
        carry: serde_json::to_value(carry).ok(),
        more: false,
    }
}

/// A line or record that could not be read; the rest of its file was still imported.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Malformed {
    /// The file.
    pub path: String,
    /// 1-based line, for line-based files.
    pub line: Option<u64>,
    /// What is wrong.
    pub error: String,
}

/// What reading one file found besides its records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileReport {
    /// Records taken.
    pub records: u64,
    /// Records skipped, by type (unknown to this build, or known to carry nothing).
    pub skipped: BTreeMap<String, u64>,
    /// Lines or records that are not what they should be.
    pub malformed: Vec<Malformed>,
}

impl FileReport {
    /// Counts one skipped record of `kind`.
    pub fn skip(&mut self, kind: impl Into<String>) {
        *self.skipped.entry(kind.into()).or_default() += 1;
    }

    /// Records a malformed line.
    pub fn malformed(&mut self, path: &Path, line: Option<u64>, error: impl Into<String>) {
        self.malformed.push(Malformed {
            path: path.display().to_string(),
            line,
            error: error.into(),
        });
    }
}

/// One file (or database) to read, and where the last import stopped in it.
#[derive(Debug)]
pub struct Unit<'a> {
    /// The file.
    pub path: &'a Path,
    /// Where to go on from (the default: the start).
    pub resume: Resume,
    /// Only sessions active since then (ms), when given.
    pub since: Option<i64>,
    /// The file's modification time (ms): the time of records that carry none.
    pub mtime_ms: i64,
    /// What earlier imports recorded (database sources skip unchanged sessions).
    pub state: &'a dyn Sink,
    /// Messages after which a database source may stop at the next session boundary
    /// ([`Resume::more`](crate::record::Resume::more)), so that one batch at a time is
    /// held; `usize::MAX`: read it whole.
    pub max_messages: usize,
}

/// An agent's history.
pub trait Importer: Sync {
    /// Which agent.
    fn source(&self) -> Source;

    /// Where the agent keeps history by default, its own overrides applied.
    fn default_roots(&self, env: &Env) -> Vec<PathBuf>;

    /// The files (or databases) under `root` that hold history, added to `out`. A root
    /// that is a file is itself, when the importer reads that kind of file.
    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()>;

    /// The folder (or file) `--watch` watches for changes to what `root` holds: `root`
    /// itself, unless history [`Importer::discover`] reads from `root` lies beside it
    /// (Hermes' `state.db` beside its sessions folder, OpenCode's messages and parts
    /// beside its storage's session folder); then the folder above, so a change there is
    /// noticed too. Or narrower, when the root holds much else that changes all the time
    /// (Cursor's `User` folder: its database alone).
    fn watch_root(&self, root: &Path) -> PathBuf {
        root.to_owned()
    }

    /// Files beside `path` (one [`Importer::discover`] found) that [`Importer::read`]
    /// reads with it: a change to any is a change to `path`, since an import compares the
    /// size and modification time of all of them together. By default, a SQLite
    /// database's `-wal` (a commit still only in the WAL is a change); a Cline task's
    /// conversation has its UI log and metadata.
    fn companions(&self, path: &Path) -> Vec<PathBuf> {
        if path.extension().is_some_and(|e| e == "db") {
            vec![wal_of(path)]
        } else {
            Vec::new()
        }
    }

    /// Reads `unit` from where it stopped into `out`; returns where it stops now.
    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume>;

    /// Whether [`Importer::read`] asks [`Unit::state`] what earlier imports stored (a
    /// database source skipping unchanged sessions). One that does not (files read from a
    /// [`Resume`]) has its next files read on another thread while a batch is stored.
    fn reads_state(&self) -> bool {
        true
    }
}

/// The importer of `source`.
pub fn importer(source: Source) -> &'static dyn Importer {
    match source {
        Source::ClaudeCode => &claude_code::ClaudeCode,
        Source::Codex => &codex::Codex,
        Source::OpenCode => &opencode::OPENCODE,
        Source::Hermes => &hermes::Hermes,
        Source::Gemini => &gemini::Gemini,
        Source::Cline => &cline::CLINE,
        Source::RooCode => &cline::ROO_CODE,
        Source::KiloCode => &cline::KILO_CODE,
        Source::Goose => &goose::Goose,
        Source::Copilot => &copilot::Copilot,
        Source::Pi => &pi::PI,
        Source::OpenClaw => &pi::OPENCLAW,
        Source::Amp => &amp::Amp,
        Source::Droid => &droid::Droid,
        Source::Kilo => &opencode::KILO,
        Source::Grok => &grok::Grok,
        Source::Qwen => &qwen::Qwen,
        Source::Antigravity => &antigravity::Antigravity,
        Source::Kimi => &kimi::Kimi,
        Source::Cursor => &cursor::Cursor,
        Source::Zed => &zed::Zed,
        Source::VsCode => &vscode::VsCode,
        Source::Crush => &crush::Crush,
        Source::Kiro => &kiro::Kiro,
        Source::Continue => &continue_dev::Continue,
        Source::Aider => &aider::Aider,
        Source::Vibe => &vibe::Vibe,
        Source::OpenHands => &openhands::OpenHands,
    }
}

/// The places among `candidates` (where an agent may keep its history, in order of
/// preference) that exist; when none does, the first, so that a report names where it
/// looked.
pub(crate) fn existing_or_first(candidates: Vec<PathBuf>) -> Vec<PathBuf> {
    let first = candidates.first().cloned();
    let found: Vec<PathBuf> = candidates.into_iter().filter(|p| p.is_dir()).collect();
    if found.is_empty() {
        first.into_iter().collect()
    } else {
        found
    }
}

/// Every file under `root` (or `root` itself) whose name `keep` accepts, sorted. A folder
/// below `root` that cannot be read (its permissions) is listed too, whatever its name:
/// reading it fails, and the run names it as it names a file it cannot read, rather than
/// leave out what it holds unsaid. Other entries that cannot be walked (a dangling link, a
/// link loop) are skipped.
pub(crate) fn walk(
    root: &Path,
    out: &mut Vec<PathBuf>,
    keep: impl Fn(&Path) -> bool,
) -> Result<()> {
    if root.is_file() {
        if keep(root) {
            out.push(root.to_owned());
        }
        return Ok(());
    }
    if !root.exists() {
        return Ok(());
    }
    for entry in walkdir::WalkDir::new(root)
        .follow_links(true)
        .sort_by_file_name()
    {
        let entry = match entry {
            Ok(e) => e,
            Err(err) => {
                let path = err.path().unwrap_or(root).to_owned();
                if err.depth() == 0 {
                    return Err(ImportError::Io {
                        path,
                        source: err
                            .into_io_error()
                            .unwrap_or_else(|| std::io::Error::other("cannot walk the directory")),
                    });
                }
                let denied = err
                    .io_error()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
                if denied && path.is_dir() {
                    out.push(path);
                } else {
                    tracing::debug!(path = %path.display(), "skipping an unreadable entry");
                }
                continue;
            }
        };
        if entry.file_type().is_file() && keep(entry.path()) {
            out.push(entry.into_path());
        }
    }
    Ok(())
}

/// The array field `key` of a JSON object, as a slice (empty when it is absent or not an
/// array).
pub(crate) fn array_of<'a>(v: &'a serde_json::Value, key: &str) -> &'a [serde_json::Value] {
    v.get(key)
        .and_then(serde_json::Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The database an importer reads at `root`: `root` itself when it is a file, else the
/// first of `under` (paths below `root`: the folder the agent keeps it in, the one above)
/// that exists. Whether one was found.
pub(crate) fn find_db(root: &Path, under: &[&str], out: &mut Vec<PathBuf>) -> bool {
    if root.is_file() {
        out.push(root.to_owned());
        return true;
    }
    match under
        .iter()
        .map(|rel| root.join(rel))
        .find(|db| db.is_file())
    {
        Some(db) => {
            out.push(db);
            true
        }
        None => false,
    }
}

/// A string field of a JSON object.
pub(crate) fn str_of<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(serde_json::Value::as_str)
}

/// litellm's `provider/model` (`openrouter/anthropic/claude-3.5-sonnet`: the provider is
/// the first segment) as the provider and the model; a name without one is the model. How
/// the agents built on litellm (Aider, OpenHands) name their models.
pub(crate) fn provider_and_model(name: &str) -> (Option<&str>, &str) {
    match name.split_once('/') {
        Some((provider, model)) if !provider.is_empty() && !model.is_empty() => {
            (Some(provider), model)
        }
        _ => (None, name),
    }
}

/// An integer field (integers, or floats written by JavaScript) of a JSON object; 0 when absent.
pub(crate) fn int_of(v: &serde_json::Value, key: &str) -> i64 {
    match v.get(key) {
        Some(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
            .unwrap_or(0)
            .max(0),
        None => 0,
    }
}

/// A message of `source` known by `key`, with no parts yet.
pub(crate) fn message(
    source: Source,
    key: &str,
    role: scribe_message::Role,
    at: i64,
) -> scribe_message::Message {
    scribe_message::Message {
        id: crate::ids::message_id(source, key, at),
        session_id: String::new(),
        parent_id: None,
        role,
        agent: None,
        provider: None,
        model: None,
        finish_reason: None,
        is_summary: false,
        usage: scribe_message::TokenUsage::default(),
        cost_usd: 0.0,
        error: None,
        created_at: at,
        updated_at: at,
        finished_at: None,
        parts: Vec::new(),
    }
}

/// Part `part_key` of the message known by `message_key`, at `position`.
pub(crate) fn stored_part(
    source: Source,
    message_key: &str,
    part_key: &str,
    position: i64,
    part: scribe_message::Part,
    at: i64,
) -> scribe_message::StoredPart {
    scribe_message::StoredPart {
        id: crate::ids::part_id(source, message_key, part_key, at),
        position,
        part,
        created_at: at,
        updated_at: at,
    }
}

/// `parts` of the message known by `message_key`, in order, each keyed and placed by its
/// position (`0`, `1`, …).
pub(crate) fn numbered(
    source: Source,
    message_key: &str,
    parts: Vec<scribe_message::Part>,
    at: i64,
) -> Vec<scribe_message::StoredPart> {
    parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| stored_part(source, message_key, &i.to_string(), i as i64, part, at))
        .collect()
}

/// Marks messages `ids` of session `session` as undone by the agent (a Codex rollback, a
/// Claude Code rewind) with `error`: those read in this import (`emitted`: id → index in
/// `out.messages`) are stored with it, those stored earlier get a
/// [`MessageMark`](crate::record::MessageMark).
pub(crate) fn mark_undone(
    out: &mut crate::record::Batch,
    emitted: &std::collections::BTreeMap<String, usize>,
    session: &str,
    ids: impl IntoIterator<Item = String>,
    error: &serde_json::Value,
) {
    for id in ids {
        match emitted.get(&id).copied() {
            Some(i) => out.messages[i].message.error = Some(error.clone()),
            None => out.marks.push(crate::record::MessageMark {
                session: session.to_owned(),
                message_id: id,
                error: error.clone(),
            }),
        }
    }
}

/// A text part.
pub(crate) fn text(text: impl Into<String>, synthetic: bool) -> scribe_message::Part {
    scribe_message::Part::Text(scribe_message::TextPart {
        text: text.into(),
        synthetic,
        ..Default::default()
    })
}

/// `s` read as nothing but a run of tags named in `known`, each closed (`<a>x</a>
/// <b>y</b>`, spaces between and around them aside): each tag's text by its name (the
/// last of a name twice); `None` for any other text, an unknown or unclosed tag, or none
/// at all. How agents write what the user did not type as prose (Claude Code's
/// `<command-name>`, Codex's `<user_shell_command>`).
pub(crate) fn only_tags<'a>(
    s: &'a str,
    known: &[&str],
) -> Option<std::collections::BTreeMap<&'a str, &'a str>> {
    let mut tags = std::collections::BTreeMap::new();
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let (name, after) = rest.strip_prefix('<')?.split_once('>')?;
        if !known.contains(&name) {
            return None;
        }
        let (inner, after) = after.split_once(&format!("</{name}>"))?;
        tags.insert(name, inner);
        rest = after.trim_start();
    }
    Some(tags)
}

/// A reasoning part.
pub(crate) fn reasoning(
    text: impl Into<String>,
    signature: Option<String>,
    metadata: Option<serde_json::Value>,
) -> scribe_message::Part {
    scribe_message::Part::Reasoning(scribe_message::ReasoningPart {
        text: text.into(),
        signature,
        metadata,
        ..Default::default()
    })
}

/// A tool part.
pub(crate) fn tool(
    call_id: &str,
    name: &str,
    input: serde_json::Value,
    state: scribe_message::ToolState,
) -> scribe_message::Part {
    scribe_message::Part::Tool(scribe_message::ToolPart {
        call_id: call_id.to_owned(),
        tool: name.to_owned(),
        input,
        state,
        compacted_at: None,
        extra: serde_json::Map::new(),
    })
}

/// A file part at a URL (`data:` URLs keep inline bytes as the source wrote them).
pub(crate) fn file(mime: &str, filename: Option<String>, url: String) -> scribe_message::Part {
    scribe_message::Part::File(scribe_message::FilePart {
        mime: mime.to_owned(),
        filename,
        source: scribe_message::FileSource::Url { url },
        extra: serde_json::Map::new(),
    })
}

/// An Anthropic `image` or `document` block (Claude Code, Cline, Amp, which writes
/// `mediaType`) as a file part: its
/// inline data as a `data:` URL, or its URL; a block with neither is kept as it is.
pub(crate) fn media(block: &serde_json::Value) -> scribe_message::Part {
    let src = block
        .get("source")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    let mime = str_of(&src, "media_type")
        .or_else(|| str_of(&src, "mediaType"))
        .unwrap_or("application/octet-stream");
    let url = match (
        str_of(&src, "type"),
        str_of(&src, "data"),
        str_of(&src, "url"),
    ) {
        (Some("base64"), Some(data), _) => format!("data:{mime};base64,{data}"),
        (_, _, Some(url)) => url.to_owned(),
        _ => return scribe_message::Part::Unknown(block.clone()),
    };
    file(mime, str_of(block, "title").map(str::to_owned), url)
}

/// An image at a URL (Codex's and Grok's `data:` URLs): a file part typed by the URL's
/// media type, `image/*` when it names none.
pub(crate) fn image_url(url: String) -> scribe_message::Part {
    let mime = url
        .strip_prefix("data:")
        .and_then(|r| r.split([';', ',']).next())
        .filter(|m| !m.is_empty())
        .unwrap_or("image/*")
        .to_owned();
    file(&mime, None, url)
}

/// An image given inline as `data` (base64) and `mimeType` (an MCP image content, as Goose
/// keeps it; a pi image block) as a file part at a `data:` URL.
pub(crate) fn inline_image(block: &serde_json::Value) -> scribe_message::Part {
    let mime = str_of(block, "mimeType").unwrap_or("application/octet-stream");
    let data = str_of(block, "data").unwrap_or("");
    file(mime, None, format!("data:{mime};base64,{data}"))
}

/// The settled state of a tool call: completed with `output`, or failed with it.
pub(crate) fn settled(
    output: String,
    is_error: bool,
    metadata: serde_json::Value,
    started_at: Option<i64>,
    ended_at: i64,
) -> scribe_message::ToolState {
    if is_error {
        scribe_message::ToolState::Error {
            message: output,
            started_at,
            ended_at,
        }
    } else {
        scribe_message::ToolState::Completed {
            output,
            title: String::new(),
            metadata,
            started_at: started_at.unwrap_or(ended_at),
            ended_at,
        }
    }
}

/// Settles the tool part at `place` (a message's index in `messages`, the part's index)
/// with `output` at `at`, from the time the call started: the one way the file readers
/// that pair a call with a later result (Amp, Droid, Grok, pi) record the result.
pub(crate) fn settle_call(
    messages: &mut [crate::record::MessageRec],
    place: (usize, usize),
    output: String,
    failed: bool,
    at: i64,
) {
    let (message, part) = place;
    if let Some(stored) = messages
        .get_mut(message)
        .and_then(|m| m.message.parts.get_mut(part))
        && let scribe_message::Part::Tool(t) = &mut stored.part
    {
        let started = t.state.started_at();
        let ended = at.max(started.unwrap_or(at));
        t.state = settled(output, failed, serde_json::Value::Null, started, ended);
        stored.updated_at = stored.updated_at.max(ended);
    }
}

/// The text of a content value: a string, or the `text` of each block of an array.
pub(crate) fn content_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => items
            .iter()
            .filter_map(|b| match b {
                serde_json::Value::String(s) => Some(s.as_str()),
                _ => str_of(b, "text"),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// How long a read of an agent's rollback-journal database waits for its writer's lock.
pub(crate) const SOURCE_BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Opens an agent's SQLite database without any chance of changing it or holding up the
/// agent, inside one read transaction (every table read from the same snapshot; it ends
/// when the connection is dropped): the one way the importers open a source database.
///
/// Read-only (`mode=ro`), so SQLite takes no write lock; in WAL mode a reader never
/// blocks the writer, and it sees the last committed state, `-wal` included. The file is
/// read as `immutable` (no locks, no `-wal`/`-shm` files) when the `-shm` file cannot be
/// created (a read-only directory, and no agent running, since a running one keeps it),
/// and when the database is in WAL mode with no `-wal` file beside it: no connection has
/// it open (SQLite deletes `-wal` when the last one closes), everything committed is in
/// the main file, and a `mode=ro` reader would create `-wal` and `-shm` in the agent's
/// directory and, unable to delete them, leave them there. The trade-off: an agent that
/// starts and checkpoints while such a read runs (its first ~1,000 pages go to its own
/// `-wal`) can make that read fail or see an older state; the next import reads it again.
/// A database in rollback-journal mode is read under SQLite's shared lock, which a
/// writer's commit waits for (its busy timeout) until the read ends.
pub(crate) fn open_source_db(path: &Path) -> Result<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let err = |source| ImportError::source_db(path, source);
    let open = |immutable: bool| -> rusqlite::Result<rusqlite::Connection> {
        let mut uri = format!("file:{}?mode=ro", uri_path(path));
        if immutable {
            uri.push_str("&immutable=1");
        }
        let conn = rusqlite::Connection::open_with_flags(uri, flags)?;
        conn.busy_timeout(SOURCE_BUSY_TIMEOUT)?;
        conn.execute_batch("BEGIN")?;
        // Touches the schema, so a database that cannot be read fails here; and starts
        // the read transaction's snapshot.
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })?;
        Ok(conn)
    };
    if wal_mode_and_closed(path) {
        return open(true).map_err(err);
    }
    match open(false) {
        Ok(conn) => Ok(conn),
        Err(e)
            if matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly)
            ) && path.exists() =>
        {
            open(true).map_err(err)
        }
        Err(e) => Err(err(e)),
    }
}

/// Whether the database at `path` is in WAL mode (its header's read and write versions
/// are 2) and has no `-wal` file: no connection has it open. Any doubt (a file that cannot
/// be read, a short header) is `false`, and the ordinary read-only open decides.
fn wal_mode_and_closed(path: &Path) -> bool {
    use std::io::Read;
    let mut header = [0u8; 20];
    let wal_mode = std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok_and(|()| header.starts_with(b"SQLite format 3\0") && header[18..20] == [2, 2]);
    wal_mode && !wal_of(path).exists()
}

/// The write-ahead log SQLite keeps beside the database at `path` (`<path>-wal`).
pub(crate) fn wal_of(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// `path` percent-encoded for a `file:` URI.
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for &byte in path.as_os_str().as_encoded_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A folder the editor names by URI (`file:///home/me/my%20app`) as a path
/// (`/home/me/my app`); a URI of another scheme (a remote folder) as it is, and an empty
/// one as none.
pub(crate) fn uri_directory(uri: &str) -> Option<String> {
    match uri.strip_prefix("file://") {
        Some(rest) => {
            let path = rest.strip_prefix("localhost").unwrap_or(rest);
            Some(
                percent_encoding::percent_decode_str(path)
                    .decode_utf8_lossy()
                    .into_owned(),
            )
        }
        None => (!uri.is_empty()).then(|| uri.to_owned()),
    }
}

/// The JSON a VS Code-like editor keeps under `key` in a state database (`state.vscdb`:
/// its `ItemTable` of keys and values), read as [`open_source_db`] reads any source's;
/// `None` when the database, the key or its JSON cannot be read.
pub(crate) fn editor_state(db: &Path, key: &str) -> Option<serde_json::Value> {
    let text: String = open_source_db(db)
        .ok()?
        .query_row(
            "SELECT CAST(value AS TEXT) FROM ItemTable WHERE key = ?1",
            [key],
            |r| r.get(0),
        )
        .ok()?;
    serde_json::from_str(&text).ok()
}

/// The most a record an agent stores compressed may take once decompressed (a larger one
/// is reported, not read: a few megabytes is a long conversation).
pub(crate) const MAX_DECOMPRESSED_BYTES: u64 = 256 << 20;

/// `data` decompressed from zstd (as Zed stores a thread, Crush a message's parts), at
/// most [`MAX_DECOMPRESSED_BYTES`]; why not, in words.
pub(crate) fn unzstd(data: &[u8]) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    let decoder =
        ruzstd::decoding::StreamingDecoder::new(data).map_err(|e| format!("not zstd: {e}"))?;
    let mut out = Vec::new();
    decoder
        .take(MAX_DECOMPRESSED_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("not zstd: {e}"))?;
    if out.len() as u64 > MAX_DECOMPRESSED_BYTES {
        return Err(format!("larger than {} MiB", MAX_DECOMPRESSED_BYTES >> 20));
    }
    Ok(out)
}

/// The columns of `table` in an agent's database (older versions lack some).
pub(crate) fn columns(conn: &rusqlite::Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names = stmt.query_map([table], |r| r.get::<_, String>(0))?;
    names.collect()
}

/// A row as a map of column name to JSON value (so missing columns read as absent).
pub(crate) fn row_map(
    row: &rusqlite::Row<'_>,
    names: &[String],
) -> rusqlite::Result<serde_json::Map<String, serde_json::Value>> {
    use rusqlite::types::ValueRef;
    let mut map = serde_json::Map::new();
    for (i, name) in names.iter().enumerate() {
        let v = match row.get_ref(i)? {
            ValueRef::Null => serde_json::Value::Null,
            ValueRef::Integer(n) => serde_json::Value::from(n),
            ValueRef::Real(f) => serde_json::Value::from(f),
            ValueRef::Text(t) => serde_json::Value::String(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(_) => serde_json::Value::Null,
        };
        map.insert(name.clone(), v);
    }
    Ok(map)
}

/// Rows of `sql` (a `SELECT` whose columns are `names`), as maps.
pub(crate) fn rows(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<serde_json::Value>> {
    let mut stmt = conn.prepare(sql)?;
    let names: Vec<String> = stmt.column_names().into_iter().map(str::to_owned).collect();
    let mapped = stmt.query_map(params, |r| {
        row_map(r, &names).map(serde_json::Value::Object)
    })?;
    mapped.collect()
}

/// A row's time column `key`, in ms: text as a database writes it (`2025-11-20 09:00:00`,
/// or with a fraction and offset: Goose's), or epoch seconds (Crush's) or milliseconds.
pub(crate) fn time_of(row: &serde_json::Value, key: &str) -> Option<i64> {
    crate::time::of_json(row.get(key)?)
}

/// The order [`Batches`] walks a database's session rows in when they carry an `id` and a
/// `created_at` time (Goose's and Crush's): oldest first, ties by id.
pub(crate) fn by_created_at(s: &serde_json::Value) -> (f64, &str) {
    let created = time_of(s, "created_at").unwrap_or(0);
    (created as f64, str_of(s, "id").unwrap_or(""))
}

/// A float field (numbers or numeric strings).
pub(crate) fn f64_of(v: &serde_json::Value, key: &str) -> Option<f64> {
    match v.get(key)? {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A JSON column stored as text, parsed (anything else as it is).
pub(crate) fn json_col(v: &serde_json::Value, key: &str) -> serde_json::Value {
    match v.get(key) {
        Some(serde_json::Value::String(s)) => {
            serde_json::from_str(s).unwrap_or_else(|_| serde_json::Value::String(s.clone()))
        }
        Some(other) => other.clone(),
        None => serde_json::Value::Null,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::open_source_db;

    fn agent(path: &std::path::Path, journal: &str) -> rusqlite::Connection {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.query_row(&format!("PRAGMA journal_mode = {journal}"), [], |_| Ok(()))
            .unwrap();
        conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        conn
    }

    fn count(conn: &rusqlite::Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_wal_source_is_read_from_one_snapshot_while_the_agent_commits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.db");
        let agent = agent(&path, "WAL");
        let reader = open_source_db(&path).unwrap();
        assert_eq!(count(&reader), 1);
        // The agent is not held up: it commits while the snapshot is open (no busy wait:
        // its busy timeout is zero).
        agent.execute("INSERT INTO t VALUES (2)", []).unwrap();
        assert_eq!(count(&reader), 1, "the snapshot does not move");
        drop(reader);
        assert_eq!(count(&open_source_db(&path).unwrap()), 2);
        // The reader cannot write.
        let reader = open_source_db(&path).unwrap();
        let err = reader.execute("INSERT INTO t VALUES (3)", []).unwrap_err();
        assert_eq!(
            err.sqlite_error_code(),
            Some(rusqlite::ErrorCode::ReadOnly),
            "{err}"
        );
    }

    #[test]
    fn a_source_that_is_not_a_database_is_an_error_and_stays_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.db");
        std::fs::write(&path, "not a database").unwrap();
        assert!(open_source_db(&path).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"not a database");
        assert!(open_source_db(&dir.path().join("missing.db")).is_err());
        assert!(!dir.path().join("missing.db").exists(), "never created");
    }
}
