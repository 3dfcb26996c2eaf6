//! A live session list, as a TUI keeps one: open the store, show every session with its
//! message count and cost, and keep the list right while another process creates,
//! renames and deletes sessions, appends messages and charges their cost. One
//! subscription does it, [`Store::watch`]: this process's events and every other
//! process's commits. On each change the list is read again, and shown when it differs.
//!
//! The writer is this program again (`watch_list --writer DB`), a real second process.
//! To make the output the same on every run it waits for each list to be shown before
//! its next change (a line on its stdin); a real writer does not wait, and a list then
//! shows several changes at once. The list stops once the writer has exited and its last
//! change is shown, or after [`DEADLINE`].
//!
//! Run: `cargo run -p scribe-session --example watch_list [DB_PATH]` (a temporary database
//! when no path is given; on a path that has sessions already they are listed too, and
//! the writer's titles take their lineage's next number). `cargo test -p scribe-session --example watch_list` runs it
//! with the writer in another process and checks every list it printed.

use std::error::Error;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use scribe_message::{NewMessage, Part, Role, TokenUsage};
use scribe_session::{NewSession, Session, SessionFilter, SessionOrder, Store, UsageDelta};

/// How long the list follows the writer at most.
const DEADLINE: Duration = Duration::from_secs(60);

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, db] = args.as_slice()
        && flag == "--writer"
    {
        return write_steps(Path::new(db), &mut std::io::stdin().lock());
    }
    let work = tempfile::tempdir()?;
    let db_path = args
        .first()
        .map_or_else(|| work.path().join("scribe.db"), Into::into);
    let store = Store::open(&db_path)?;
    let mut writer = Command::new(std::env::current_exe()?);
    writer.arg("--writer").arg(&db_path);
    follow(&store, writer, &mut std::io::stdout().lock())?;
    Ok(())
}

/// Shows the sessions of `store` and follows them while `writer` (spawned here, its
/// stdin a pipe) changes them: each different list once, to `out`. Returns how many
/// lists were shown.
fn follow(
    store: &Store,
    mut writer: Command,
    out: &mut dyn Write,
) -> Result<usize, Box<dyn Error>> {
    // Watch before the first read: a change committed in between is then not lost.
    let mut watch = store.watch()?;
    let mut shown = render(&read_list(store)?);
    write!(out, "{shown}")?;
    let mut lists = 1;

    let mut child = writer.stdin(Stdio::piped()).spawn()?;
    let mut acks = child.stdin.take();
    let started = Instant::now();
    loop {
        // A change names the sessions it touched when this process made it; another
        // process's commit on an SQLite file names none (`SessionChanges::All`). A list
        // this short is read again whole either way.
        let changed = watch.wait(Duration::from_millis(200))?.is_some();
        let exited = child.try_wait()?;
        if changed || exited.is_some() {
            let now = render(&read_list(store)?);
            if now != shown {
                write!(out, "{now}")?;
                shown = now;
                lists += 1;
                ack(&mut acks);
            }
        }
        if let Some(status) = exited {
            if !status.success() {
                return Err(format!("the writer failed: {status}").into());
            }
            return Ok(lists);
        }
        if started.elapsed() > DEADLINE {
            stop(&mut child);
            return Err(format!("the writer did not finish in {DEADLINE:?}").into());
        }
    }
}

/// Tells the writer a list was shown (it may have exited already).
fn ack(acks: &mut Option<ChildStdin>) {
    if let Some(pipe) = acks
        && writeln!(pipe).and_then(|()| pipe.flush()).is_err()
    {
        *acks = None;
    }
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Every session, oldest first.
fn read_list(store: &Store) -> Result<Vec<Session>, Box<dyn Error>> {
    Ok(store.sessions().list(&SessionFilter {
        order: SessionOrder::CreatedAsc,
        ..SessionFilter::default()
    })?)
}

/// The list as shown: one line per session, its title, messages and cost.
fn render(sessions: &[Session]) -> String {
    let mut text = format!("-- {}\n", counted(sessions.len() as i64, "session"));
    for session in sessions {
        let title = session.title.as_deref().unwrap_or("(untitled)");
        text.push_str(&format!(
            "{title:<20} {:>11}  ${:.4}\n",
            counted(session.message_count, "message"),
            session.estimated_cost_usd
        ));
    }
    text
}

/// `1 message`, `2 messages`.
fn counted(n: i64, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The writer: its own store on the same file, one change per step (each one
/// transaction), waiting for a line on `acks` after each.
fn write_steps(db: &Path, acks: &mut dyn BufRead) -> Result<(), Box<dyn Error>> {
    let store = Store::open(db)?;
    let sessions = store.sessions();
    let messages = store.messages();
    let mut wait = || -> Result<(), Box<dyn Error>> {
        let mut line = String::new();
        match acks.read_line(&mut line)? {
            0 => Err("the list went away".into()),
            _ => Ok(()),
        }
    };
    let say = |session: &Session, role, text: &str| {
        messages.create(NewMessage::new(&session.id, role, vec![Part::text(text)]))
    };

    // Titles are unique: on a store that has these already (a second run on one path)
    // each takes its lineage's next one (`alpha #2`).
    let alpha = sessions.create_in_lineage(NewSession::titled("alpha"))?;
    wait()?;
    say(&alpha, Role::User, "make parse() borrow")?;
    wait()?;
    let beta = sessions.create_in_lineage(NewSession::titled("beta"))?;
    wait()?;
    say(&beta, Role::User, "why is the build red?")?;
    wait()?;
    say(&beta, Role::Assistant, "a missing semicolon")?;
    wait()?;
    sessions.add_usage(
        &beta.id,
        &UsageDelta {
            tokens: TokenUsage {
                input: 1_000,
                output: 50,
                ..TokenUsage::default()
            },
            api_calls: 1,
            cost_usd: 0.0125,
            ..UsageDelta::default()
        },
    )?;
    wait()?;
    let renamed = sessions.next_title_in_lineage("alpha, borrowed")?;
    sessions.set_title(&alpha.id, Some(&renamed))?;
    wait()?;
    sessions.delete(&beta.id)?;
    wait()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the writer role finds the database (set only for the spawned writer).
    const WRITER_DB: &str = "SCRIBE_WATCH_LIST_WRITER_DB";

    /// Every change the other process made is shown, in order, once: the list after
    /// each one exactly, counts and cost included.
    #[test]
    fn the_list_follows_another_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scribe.db");
        let store = Store::open(&path).unwrap();
        // This test binary again, running only the writer role below.
        let mut writer = Command::new(std::env::current_exe().unwrap());
        writer
            .args([
                "--exact",
                "tests::writer_role",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WRITER_DB, &path)
            .stdout(Stdio::null());
        let mut printed = Vec::new();
        let lists = follow(&store, writer, &mut printed).unwrap();
        let printed = String::from_utf8(printed).unwrap();
        assert_eq!(
            printed,
            "\
-- 0 sessions
-- 1 session
alpha                 0 messages  $0.0000
-- 1 session
alpha                  1 message  $0.0000
-- 2 sessions
alpha                  1 message  $0.0000
beta                  0 messages  $0.0000
-- 2 sessions
alpha                  1 message  $0.0000
beta                   1 message  $0.0000
-- 2 sessions
alpha                  1 message  $0.0000
beta                  2 messages  $0.0000
-- 2 sessions
alpha                  1 message  $0.0000
beta                  2 messages  $0.0125
-- 2 sessions
alpha, borrowed        1 message  $0.0000
beta                  2 messages  $0.0125
-- 1 session
alpha, borrowed        1 message  $0.0000
"
        );
        assert_eq!(lists, 9);
    }

    /// The writer process of [`the_list_follows_another_process`]; does nothing in a
    /// normal test run.
    #[test]
    fn writer_role() {
        let Some(db) = std::env::var_os(WRITER_DB) else {
            return;
        };
        write_steps(Path::new(&db), &mut std::io::stdin().lock()).unwrap();
    }
}
