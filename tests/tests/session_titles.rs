//! Titles: the normalization table, the length limit, uniqueness, and lineage numbering
//! (`t`, `t #2` …) where `_` and `%` are literal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "session_common/mod.rs"]
mod common;

use common::{drain, env_on};
use scribe_tests::Backend;

use scribe_session::{MAX_TITLE_CHARS, NewSession, SessionError, normalize_title};

#[test]
fn normalization_table() {
    let cases: &[(&str, &str)] = &[
        ("plain", "plain"),
        ("  padded  ", "padded"),
        ("many   inner \t\n spaces", "many inner spaces"),
        ("nbsp\u{00A0}and\u{3000}ideographic", "nbsp and ideographic"),
        ("zero\u{200B}width", "zerowidth"),
        ("joiners\u{200C}\u{200D}x", "joinersx"),
        ("marks\u{200E}\u{200F}x", "marksx"),
        ("word\u{2060}joiner\u{2064}", "wordjoiner"),
        ("\u{FEFF}bom", "bom"),
        ("bidi \u{202E}evil\u{202C} text", "bidi evil text"),
        ("isolate\u{2066}d\u{2069}", "isolated"),
        ("soft\u{00AD}hyphen", "softhyphen"),
        ("tag\u{E0041}\u{E0042}s", "tags"),
        ("alm\u{061C}x", "almx"),
        ("line\u{2028}sep", "line sep"),
        ("bell\u{0007}and\u{001B}esc", "bellandesc"),
        ("del\u{007F}", "del"),
        ("Исправить   сборку", "Исправить сборку"),
        ("修复 构建", "修复 构建"),
        ("emoji 🚀 ok", "emoji 🚀 ok"),
        ("50% off_now", "50% off_now"),
        ("  \u{200B} x \u{200B} ", "x"),
    ];
    for (raw, want) in cases {
        assert_eq!(normalize_title(raw).unwrap(), *want, "{raw:?}");
    }
}

#[test]
fn empty_and_too_long_titles_are_typed_errors() {
    for raw in ["", "   ", "\u{200B}\u{FEFF}", "\t\n", "\u{202E}"] {
        assert!(
            matches!(normalize_title(raw), Err(SessionError::InvalidTitle { .. })),
            "{raw:?}"
        );
    }
    let at_limit = "é".repeat(MAX_TITLE_CHARS);
    assert_eq!(normalize_title(&at_limit).unwrap(), at_limit);
    let over = "é".repeat(MAX_TITLE_CHARS + 1);
    assert!(matches!(
        normalize_title(&over),
        Err(SessionError::TitleTooLong { len, max }) if len == MAX_TITLE_CHARS + 1 && max == MAX_TITLE_CHARS
    ));
    // Invisible characters do not count towards the limit.
    let padded = format!("{}{}", "a".repeat(MAX_TITLE_CHARS), "\u{200B}".repeat(50));
    assert_eq!(
        normalize_title(&padded).unwrap().chars().count(),
        MAX_TITLE_CHARS
    );
}

fn service_refuses_bad_titles_without_changes_or_events(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::titled("keep")).unwrap();
    let sub = e.svc.subscribe();
    let r = e.svc.create(NewSession::titled(" \u{200B} "));
    assert!(matches!(r, Err(SessionError::InvalidTitle { .. })), "{r:?}");
    let r = e
        .svc
        .set_title(&s.id, Some(&"x".repeat(MAX_TITLE_CHARS + 1)));
    assert!(matches!(r, Err(SessionError::TitleTooLong { .. })), "{r:?}");
    let r = e.svc.update(&s.id, |s| s.title = Some("\u{FEFF}".into()));
    assert!(matches!(r, Err(SessionError::InvalidTitle { .. })), "{r:?}");
    assert_eq!(e.svc.get(&s.id).unwrap().title.as_deref(), Some("keep"));
    assert!(drain(&sub).is_empty());
}

fn titles_are_unique_when_present(backend: Backend) {
    let e = env_on(backend);
    let a = e.svc.create(NewSession::titled("Fix build")).unwrap();
    let b = e.svc.create(NewSession::default()).unwrap();
    let sub = e.svc.subscribe();
    // Equal after normalization is equal.
    let r = e.svc.create(NewSession::titled("  Fix\u{200B}   build "));
    match r {
        Err(SessionError::TitleInUse { title, session_id }) => {
            assert_eq!(title, "Fix build");
            assert_eq!(session_id, a.id);
        }
        other => panic!("{other:?}"),
    }
    let r = e.svc.set_title(&b.id, Some("Fix build"));
    assert!(matches!(r, Err(SessionError::TitleInUse { .. })), "{r:?}");
    assert!(drain(&sub).is_empty());
    // NULL titles never conflict; re-setting one's own title is fine.
    e.svc.create(NewSession::default()).unwrap();
    e.svc.set_title(&a.id, Some("Fix build")).unwrap();
    assert_eq!(e.svc.set_title(&b.id, None).unwrap().title, None);
    assert!(e.svc.resolve_by_title("Fix build").is_ok());
}

fn lineage_resolves_to_the_highest_number(backend: Backend) {
    let e = env_on(backend);
    let t1 = e.svc.create(NewSession::titled("Deploy")).unwrap();
    assert_eq!(e.svc.next_title_in_lineage("Deploy").unwrap(), "Deploy #2");
    let t3 = e.svc.create(NewSession::titled("Deploy #3")).unwrap();
    let t2 = e.svc.create(NewSession::titled("Deploy #2")).unwrap();
    // Not members of the lineage.
    e.svc.create(NewSession::titled("Deploy #3 fix")).unwrap();
    e.svc.create(NewSession::titled("Deploy #03")).unwrap();
    e.svc.create(NewSession::titled("Deploy it")).unwrap();
    e.svc.create(NewSession::titled("Deploy#9")).unwrap();

    assert_eq!(e.svc.resolve_by_title("Deploy").unwrap().id, t3.id);
    assert_eq!(e.svc.resolve_by_title("  Deploy ").unwrap().id, t3.id);
    assert_eq!(e.svc.next_title_in_lineage("Deploy").unwrap(), "Deploy #4");
    // A numbered title names its lineage.
    assert_eq!(
        e.svc.next_title_in_lineage("Deploy #2").unwrap(),
        "Deploy #4"
    );
    assert_ne!(t1.id, t2.id);

    let ten = e.svc.create(NewSession::titled("Deploy #10")).unwrap();
    // 10 beats 3 numerically, not as text.
    assert_eq!(e.svc.resolve_by_title("Deploy").unwrap().id, ten.id);
    assert_eq!(e.svc.next_title_in_lineage("Deploy").unwrap(), "Deploy #11");

    // Nothing of the lineage yet: the title itself is next.
    assert_eq!(
        e.svc.next_title_in_lineage("Brand new").unwrap(),
        "Brand new"
    );
    let r = e.svc.resolve_by_title("Brand new");
    assert!(
        matches!(r, Err(SessionError::NotFound { what: "title", .. })),
        "{r:?}"
    );
}

fn resolve_and_next_title_agree_on_numbered_titles(backend: Backend) {
    let e = env_on(backend);
    let t1 = e.svc.create(NewSession::titled("Plan")).unwrap();
    let t3 = e.svc.create(NewSession::titled("Plan #3")).unwrap();
    let t5 = e.svc.create(NewSession::titled("Plan #5")).unwrap();

    // For each input: (what resolve gives, what next gives).
    let table: [(&str, &str, &str); 7] = [
        // A plain title: the newest of its lineage.
        ("Plan", &t5.id, "Plan #6"),
        // A numbered title that exists: exactly that session.
        ("Plan #3", &t3.id, "Plan #6"),
        ("  Plan   #5 ", &t5.id, "Plan #6"),
        // `#1` is the lineage's first member, `Plan` itself (it named the newest, `#5`).
        ("Plan #1", &t1.id, "Plan #6"),
        // A numbered title that does not exist: the lineage it belongs to.
        ("Plan #2", &t5.id, "Plan #6"),
        ("Plan #40", &t5.id, "Plan #6"),
        // A leading zero is not a lineage number: a lineage of its own.
        ("Plan #03", "", "Plan #03"),
    ];
    for (input, resolved, next) in table {
        let r = e.svc.resolve_by_title(input);
        if resolved.is_empty() {
            assert!(
                matches!(&r, Err(SessionError::NotFound { what: "title", .. })),
                "{input}: {r:?}"
            );
        } else {
            assert_eq!(r.unwrap().id, resolved, "{input}");
        }
        assert_eq!(e.svc.next_title_in_lineage(input).unwrap(), next, "{input}");
    }
    // Both place every member in the same lineage: the newest resolved member carries the
    // number just before the next one.
    let newest = e.svc.resolve_by_title("Plan").unwrap();
    assert_eq!(newest.title.as_deref(), Some("Plan #5"));
    assert_eq!(t1.title.as_deref(), Some("Plan"));

    // Exact-first applies only to numbered input: `Plan` itself is not preferred over
    // `Plan #5`, and after `Plan #5` goes, `Plan #5` resolves to the lineage's newest.
    e.svc.delete(&t5.id).unwrap();
    assert_eq!(e.svc.resolve_by_title("Plan").unwrap().id, t3.id);
    assert_eq!(e.svc.resolve_by_title("Plan #5").unwrap().id, t3.id);
    assert_eq!(e.svc.next_title_in_lineage("Plan #5").unwrap(), "Plan #4");
    e.svc.delete(&t3.id).unwrap();
    e.svc.delete(&t1.id).unwrap();
    let r = e.svc.resolve_by_title("Plan #3");
    assert!(
        matches!(&r, Err(SessionError::NotFound { what: "title", id }) if id == "Plan #3"),
        "{r:?}"
    );
    assert_eq!(e.svc.next_title_in_lineage("Plan #3").unwrap(), "Plan");
}

fn a_numbered_title_that_is_a_base_of_its_own_resolves_exactly(backend: Backend) {
    // A hand-written `Bug #3 #2` makes `Bug #3` look like a lineage base too; the exact
    // title still wins for `Bug #3`, and both functions place it in the lineage `Bug`.
    let e = env_on(backend);
    let bug3 = e.svc.create(NewSession::titled("Bug #3")).unwrap();
    e.svc.create(NewSession::titled("Bug #3 #2")).unwrap();
    assert_eq!(e.svc.resolve_by_title("Bug #3").unwrap().id, bug3.id);
    assert_eq!(e.svc.resolve_by_title("Bug").unwrap().id, bug3.id);
    assert_eq!(e.svc.next_title_in_lineage("Bug #3").unwrap(), "Bug #4");
}

fn lineage_treats_underscore_and_percent_literally(backend: Backend) {
    let e = env_on(backend);
    let under = e.svc.create(NewSession::titled("a_b")).unwrap();
    let other = e.svc.create(NewSession::titled("axb #5")).unwrap();
    let pct = e.svc.create(NewSession::titled("100%")).unwrap();
    e.svc.create(NewSession::titled("100x #7")).unwrap();
    e.svc.create(NewSession::titled("1000 #9")).unwrap();

    assert_eq!(e.svc.resolve_by_title("a_b").unwrap().id, under.id);
    assert_eq!(e.svc.next_title_in_lineage("a_b").unwrap(), "a_b #2");
    assert_eq!(e.svc.resolve_by_title("axb").unwrap().id, other.id);
    assert_eq!(e.svc.resolve_by_title("100%").unwrap().id, pct.id);
    assert_eq!(e.svc.next_title_in_lineage("100%").unwrap(), "100% #2");
    let pct2 = e.svc.create(NewSession::titled("100% #2")).unwrap();
    assert_eq!(e.svc.resolve_by_title("100%").unwrap().id, pct2.id);
    assert!(e.svc.resolve_by_title("a%").is_err());
    assert!(e.svc.resolve_by_title("a_").is_err());
}

fn next_title_respects_the_length_limit(backend: Backend) {
    let e = env_on(backend);
    let long = "x".repeat(MAX_TITLE_CHARS);
    e.svc.create(NewSession::titled(long.clone())).unwrap();
    let r = e.svc.next_title_in_lineage(&long);
    assert!(matches!(r, Err(SessionError::TitleTooLong { .. })), "{r:?}");
}

fn create_in_lineage_takes_the_next_free_title(backend: Backend) {
    let e = env_on(backend);
    let events = e.svc.subscribe();
    // An empty lineage: the title itself, normalized.
    let first = e
        .svc
        .create_in_lineage(NewSession {
            model: Some("claude".to_owned()),
            source: "telegram".to_owned(),
            ..NewSession::titled("  Fix   build ")
        })
        .unwrap();
    assert_eq!(first.title.as_deref(), Some("Fix build"));
    assert_eq!(
        (first.model.as_deref(), first.source.as_str()),
        (Some("claude"), "telegram")
    );
    let second = e
        .svc
        .create_in_lineage(NewSession::titled("Fix build"))
        .unwrap();
    assert_eq!(second.title.as_deref(), Some("Fix build #2"));
    // A numbered title names its lineage; the highest number in use wins.
    e.svc.create(NewSession::titled("Fix build #5")).unwrap();
    let numbered = e
        .svc
        .create_in_lineage(NewSession::titled("Fix build #2"))
        .unwrap();
    assert_eq!(numbered.title.as_deref(), Some("Fix build #6"));
    assert_eq!(e.svc.resolve_by_title("Fix build").unwrap().id, numbered.id);
    let created: Vec<String> = drain(&events).into_iter().map(|ev| ev.payload.id).collect();
    assert_eq!(created.len(), 4);
    assert_eq!(created[3], numbered.id);
    // A number past the largest integer counts as the largest on both backends (SQLite's
    // CAST saturates; PostgreSQL's NUMERIC is held to it), so the next one is above it.
    e.svc
        .create(NewSession::titled("Huge #99999999999999999999"))
        .unwrap();
    let next = e.svc.create_in_lineage(NewSession::titled("Huge")).unwrap();
    assert_eq!(next.title.as_deref(), Some("Huge #9223372036854775808"));
    drain(&events);

    // No title: no lineage, refused before anything is written or announced.
    let before = e.svc.count(&Default::default()).unwrap();
    let r = e.svc.create_in_lineage(NewSession::default());
    assert!(matches!(r, Err(SessionError::InvalidInput(_))), "{r:?}");
    // A lineage whose next number would not fit the limit, and an unusable title.
    let long = "x".repeat(MAX_TITLE_CHARS);
    e.svc.create(NewSession::titled(long.clone())).unwrap();
    drain(&events);
    let r = e.svc.create_in_lineage(NewSession::titled(long));
    assert!(matches!(r, Err(SessionError::TitleTooLong { .. })), "{r:?}");
    let r = e.svc.create_in_lineage(NewSession::titled(" \u{200B} "));
    assert!(matches!(r, Err(SessionError::InvalidTitle { .. })), "{r:?}");
    assert_eq!(e.svc.count(&Default::default()).unwrap(), before + 1);
    assert!(drain(&events).is_empty());
}

/// Threads on handles of their own (as processes have) creating in one lineage at once:
/// no `TitleInUse`, every title once. (The multi-process version: `lineage_processes`.)
fn create_in_lineage_never_collides_across_handles(backend: Backend) {
    const THREADS: usize = 4;
    const EACH: usize = 15;
    let e = env_on(backend);
    let barrier = std::sync::Barrier::new(THREADS);
    let titles: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let svc = scribe_session::SessionService::new(e.t.reopen());
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    (0..EACH)
                        .map(|_| {
                            svc.create_in_lineage(NewSession::titled("race"))
                                .unwrap()
                                .title
                                .unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let got: std::collections::BTreeSet<String> = titles.iter().cloned().collect();
    assert_eq!(got.len(), THREADS * EACH, "a title given twice: {titles:?}");
    let want: std::collections::BTreeSet<String> = std::iter::once("race".to_owned())
        .chain((2..=THREADS * EACH).map(|n| format!("race #{n}")))
        .collect();
    assert_eq!(got, want);
}

scribe_tests::backends!(
    create_in_lineage_takes_the_next_free_title,
    create_in_lineage_never_collides_across_handles,
    service_refuses_bad_titles_without_changes_or_events,
    titles_are_unique_when_present,
    lineage_resolves_to_the_highest_number,
    resolve_and_next_title_agree_on_numbered_titles,
    a_numbered_title_that_is_a_base_of_its_own_resolves_exactly,
    lineage_treats_underscore_and_percent_literally,
    next_title_respects_the_length_limit,
);
