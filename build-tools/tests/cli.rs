//! The `sqlgen` binary: generate, check (fresh / stale / missing), explain and exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn sqlgen(args: &[&str], out: Option<&Path>) -> Output {
    let f = fixtures();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sqlgen"));
    cmd.args(args)
        .arg("--migrations")
        .arg(f.join("migrations"))
        .arg("--queries")
        .arg(f.join("queries"));
    if let Some(out) = out {
        cmd.arg("--out").arg(out);
    }
    cmd.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn generate_then_check_then_stale() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nested/queries.rs");

    let missing = sqlgen(&["check"], Some(&out));
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).starts_with("stale: "),
        "{}",
        stderr(&missing)
    );
    assert!(stderr(&missing).contains("is missing; run `cargo sqlgen generate`"));

    let generated = sqlgen(&["generate"], Some(&out));
    assert_eq!(generated.status.code(), Some(0), "{}", stderr(&generated));
    let written = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        written,
        std::fs::read_to_string(fixtures().join("expected/queries.rs")).unwrap()
    );

    let ok = sqlgen(&["check"], Some(&out));
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));

    std::fs::write(&out, written.replace("pub fn", "fn")).unwrap();
    let stale = sqlgen(&["check"], Some(&out));
    assert_eq!(stale.status.code(), Some(1));
    assert!(
        stderr(&stale).contains("differs from what sql/ produces; run `cargo sqlgen generate`"),
        "{}",
        stderr(&stale)
    );
}

#[test]
fn explain_prints_one_line_per_query() {
    let o = sqlgen(&["explain"], None);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(
        text,
        std::fs::read_to_string(fixtures().join("expected/explain.txt")).unwrap()
    );
}

#[test]
fn errors_exit_1_usage_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.sql"),
        "-- name: Bad :one\nSELECT nope FROM sessions;\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_sqlgen"))
        .args(["check", "--migrations"])
        .arg(fixtures().join("migrations"))
        .arg("--queries")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("bad.sql:2:8: Bad: no column \"nope\" in \"sessions\""),
        "{}",
        stderr(&o)
    );

    let usage = Command::new(env!("CARGO_BIN_EXE_sqlgen"))
        .arg("frobnicate")
        .output()
        .unwrap();
    assert_eq!(usage.status.code(), Some(2));
    let help = Command::new(env!("CARGO_BIN_EXE_sqlgen"))
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("generate"));
}
