//! The built-in catalog's prices for models beyond Anthropic's, OpenAI's and Google's:
//! history of xAI's, Moonshot's, Z.ai's and Mistral's coding models is estimated as
//! ccusage estimates it, and a model whose price models.dev and ccusage disagree on stays
//! unpriced (its tokens kept, its cost said to be unknown) rather than guessed.
//!
//! Each model's Codex rollout below holds one call (120,000 prompt tokens of which 80,000
//! were read from the cache, 4,000 written, 1,000 of them reasoning). The expected costs
//! are what `ccusage codex session --json --offline` (ccusage 20.0.24) prints for the same
//! files, as `CODEX_HOME/sessions/<model>.jsonl`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use scribe_import::Source;

/// A Codex rollout of one call of `model`.
fn rollout(model: &str) -> String {
    let usage = r#"{"input_tokens":120000,"cached_input_tokens":80000,"output_tokens":4000,"reasoning_output_tokens":1000,"total_tokens":124000}"#;
    format!(
        "{}\n{}\n",
        format_args!(
            r#"{{"timestamp":"2026-03-02T10:00:00.000Z","type":"turn_context","payload":{{"model":"{model}"}}}}"#
        ),
        format_args!(
            r#"{{"timestamp":"2026-03-02T10:00:05.000Z","type":"event_msg","payload":{{"type":"token_count","info":{{"model":"{model}","last_token_usage":{usage},"total_token_usage":{usage}}}}}}}"#
        ),
    )
}

#[test]
fn open_weight_and_xai_models_cost_what_ccusage_says() {
    // (model, ccusage's cost in USD)
    let priced: &[(&str, f64)] = &[
        ("grok-code-fast-1", 0.0156),
        ("grok-4-fast", 0.014),
        ("grok-4", 0.24),
        ("grok-3-mini", 0.02),
        ("grok-3", 0.24),
        ("kimi-k2.6", 0.0668),
        ("kimi-k2.5", 0.044),
        ("kimi-k2-thinking-turbo", 0.09),
        ("glm-4.7", 0.0416),
        ("glm-4.6", 0.0416),
        ("glm-4.5", 0.0416),
        ("glm-4.5-air", 0.0148),
        ("devstral-2512", 0.056),
        ("devstral-medium-2507", 0.056),
        ("devstral-small-2507", 0.0132),
    ];
    // Prices models.dev and ccusage disagree on: DeepSeek's (which change with the hour),
    // Qwen's coder models' (four prompt-length tiers), Kimi K2 Thinking's cache read.
    let unpriced = ["deepseek-chat", "qwen3-coder-plus", "kimi-k2-thinking"];

    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("codex/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let models = priced.iter().map(|(m, _)| *m).chain(unpriced);
    for model in models {
        std::fs::write(sessions.join(format!("{model}.jsonl")), rollout(model)).unwrap();
    }
    let db = scribe_db(dir.path());
    let summary = run(&db, Source::Codex, &[sessions]);
    assert_eq!(summary.failed.len(), 0, "{summary:?}");

    let stored = common::sessions(&db);
    assert_eq!(stored.len(), priced.len() + unpriced.len());
    let of = |model: &str| {
        let found = stored.iter().find(|s| s.model.as_deref() == Some(model));
        found.unwrap_or_else(|| panic!("a session of {model}"))
    };
    for (model, ccusage) in priced {
        let s = of(model);
        assert_eq!(s.cost_status.as_deref(), Some("estimated"), "{model}");
        assert!(
            (s.estimated_cost_usd - ccusage).abs() < 1e-9,
            "{model}: {} against ccusage's {ccusage}",
            s.estimated_cost_usd
        );
        // The tokens as ccusage counts them: 40,000 in, 4,000 out, 80,000 read.
        assert_eq!(
            ccusage_view(&s.tokens),
            (40_000, 4_000, 0, 80_000),
            "{model}"
        );
    }
    for model in unpriced {
        let s = of(model);
        assert_eq!(s.cost_status.as_deref(), Some("unknown"), "{model}");
        assert_eq!(s.estimated_cost_usd, 0.0, "{model}");
        assert_eq!(
            ccusage_view(&s.tokens),
            (40_000, 4_000, 0, 80_000),
            "{model}"
        );
    }
}
