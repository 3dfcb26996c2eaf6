//! Part JSON: every variant round-trips, unknown types and fields survive
//! exactly, corrupt input gives typed errors, and no input panics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use scribe_message::{
    AgentPart, CompactionPart, Extra, FilePart, FileSource, FinishReason, ImageUrlPart,
    KNOWN_PART_TYPES, Part, PartDecodeError, PartTime, PatchPart, ReasoningPart, StepFinishPart,
    StepStartPart, SubtaskPart, TextPart, TokenUsage, ToolPart, ToolState,
};
use serde_json::{Value, json};

fn one_of_each() -> Vec<Part> {
    let tool = |state| {
        Part::Tool(ToolPart {
            call_id: "call_1".into(),
            tool: "bash".into(),
            input: json!({"command": "ls -la", "timeout": 5}),
            state,
            compacted_at: None,
            extra: Extra::new(),
        })
    };
    vec![
        Part::text("hello"),
        Part::Text(TextPart {
            text: "injected".into(),
            synthetic: true,
            time: Some(PartTime {
                start: 1,
                end: Some(2),
            }),
            extra: Extra::new(),
        }),
        Part::Reasoning(ReasoningPart {
            text: "thinking…".into(),
            signature: Some("sig==".into()),
            metadata: Some(json!({"anthropic": {"redacted": [1, 2]}})),
            time: Some(PartTime {
                start: 3,
                end: None,
            }),
            extra: Extra::new(),
        }),
        tool(ToolState::Pending),
        tool(ToolState::Running { started_at: 10 }),
        tool(ToolState::Completed {
            output: "total 0".into(),
            title: "ls".into(),
            metadata: json!({"exit": 0}),
            started_at: 10,
            ended_at: 11,
        }),
        tool(ToolState::Error {
            message: "denied".into(),
            started_at: None,
            ended_at: 12,
        }),
        Part::Tool(ToolPart {
            call_id: "c".into(),
            tool: "read".into(),
            input: Value::Null,
            state: ToolState::Pending,
            compacted_at: Some(99),
            extra: Extra::new(),
        }),
        Part::File(FilePart {
            mime: "image/png".into(),
            filename: Some("a.png".into()),
            source: FileSource::Inline {
                data: vec![0, 1, 2, 254, 255],
            },
            extra: Extra::new(),
        }),
        Part::File(FilePart {
            mime: "text/plain".into(),
            filename: None,
            source: FileSource::Url {
                url: "file:///tmp/x.txt".into(),
            },
            extra: Extra::new(),
        }),
        Part::ImageUrl(ImageUrlPart {
            url: "https://example.invalid/i.png".into(),
            detail: Some("high".into()),
            extra: Extra::new(),
        }),
        Part::StepStart(StepStartPart::default()),
        Part::StepFinish(StepFinishPart {
            reason: FinishReason::ToolUse,
            tokens: TokenUsage {
                input: 1,
                output: 2,
                cache_read: 3,
                cache_write: 4,
                reasoning: 5,
            },
            cost: 0.0125,
            extra: Extra::new(),
        }),
        Part::Compaction(CompactionPart {
            auto: true,
            keep_from: Some("msg_kept".into()),
            keeps_words: false,
            extra: Extra::new(),
        }),
        Part::Patch(PatchPart {
            hash: "abc123".into(),
            files: vec!["src/a.rs".into(), "b.md".into()],
            extra: Extra::new(),
        }),
        Part::Agent(AgentPart {
            name: "build".into(),
            extra: Extra::new(),
        }),
        Part::Subtask(SubtaskPart {
            prompt: "find bugs".into(),
            description: "review".into(),
            agent: "general".into(),
            extra: Extra::new(),
        }),
        Part::finish(FinishReason::EndTurn, 42),
        Part::finish(FinishReason::Unknown("content_filter".into()), 43),
    ]
}

#[test]
fn every_variant_round_trips() {
    let parts = one_of_each();
    let mut seen: Vec<&str> = parts.iter().map(Part::type_name).collect();
    seen.dedup();
    assert_eq!(seen, KNOWN_PART_TYPES);
    for part in &parts {
        let json = part.to_json().unwrap();
        let back = Part::from_json(&json).unwrap();
        assert_eq!(&back, part, "{json}");
        assert!(back.is_known());
        // serde's own entry points agree with from_json/to_json.
        let via_serde: Part = serde_json::from_str(&json).unwrap();
        assert_eq!(&via_serde, part);
        assert_eq!(serde_json::to_string(part).unwrap(), json);
    }
}

#[test]
fn wire_shapes_are_stable() {
    assert_eq!(
        Part::text("hi").to_value().unwrap(),
        json!({"type": "text", "text": "hi"})
    );
    let file = &one_of_each()[8];
    assert_eq!(
        file.to_value().unwrap(),
        json!({"type": "file", "mime": "image/png", "filename": "a.png",
               "source": {"kind": "inline", "data": "AAEC/v8="}})
    );
    let step = Part::StepStart(StepStartPart::default());
    assert_eq!(step.to_json().unwrap(), r#"{"type":"step_start"}"#);
    let tool = Part::tool("c1", "grep", json!({"q": "x"}));
    assert_eq!(
        tool.to_value().unwrap(),
        json!({"type": "tool", "call_id": "c1", "tool": "grep", "input": {"q": "x"},
               "state": {"status": "pending"}})
    );
}

#[test]
fn unknown_type_round_trips_exactly() {
    // Canonical (sorted, compact) text comes back byte for byte.
    let canonical =
        r#"{"a":[1,2.5,{"z":null}],"nested":{"deep":[true,false]},"type":"hologram","x":"é\n"}"#;
    let part = Part::from_json(canonical).unwrap();
    assert!(!part.is_known());
    assert_eq!(part.type_name(), "hologram");
    assert_eq!(part.searchable_text(), "");
    assert_eq!(part.to_json().unwrap(), canonical);
    // Any key order: the JSON value is preserved.
    let messy = r#"{ "type" : "future_thing", "b": 1, "a": {"y": [], "x": -0.5e3} }"#;
    let original: Value = serde_json::from_str(messy).unwrap();
    let part = Part::from_json(messy).unwrap();
    assert_eq!(part, Part::Unknown(original.clone()));
    assert_eq!(part.to_value().unwrap(), original);
    let twice = Part::from_json(&part.to_json().unwrap()).unwrap();
    assert_eq!(twice, part);
}

#[test]
fn floats_survive_repeated_round_trips() {
    let text = r#"{"cost":0.0037020000000000004,"type":"step_finish","reason":"end_turn","x":-5.8465700738334516e-235}"#;
    let first = Part::from_json(text).unwrap();
    let second = Part::from_json(&first.to_json().unwrap()).unwrap();
    assert_eq!(first, second);
}

#[test]
fn unknown_fields_of_known_types_are_kept() {
    let json = json!({
        "type": "tool", "call_id": "c", "tool": "bash", "input": {},
        "state": {"status": "running", "started_at": 5},
        "provider_meta": {"id": 7}, "v2_flag": true
    });
    let part = Part::from_value(json.clone()).unwrap();
    let Part::Tool(tool) = &part else {
        panic!("not a tool: {part:?}");
    };
    assert_eq!(tool.extra.get("v2_flag"), Some(&json!(true)));
    assert_eq!(part.to_value().unwrap(), json);

    let text = json!({"type": "text", "text": "t", "lang": "en"});
    assert_eq!(
        Part::from_value(text.clone()).unwrap().to_value().unwrap(),
        text
    );
}

#[test]
fn corrupt_json_gives_typed_errors() {
    assert!(matches!(
        Part::from_json("{not json"),
        Err(PartDecodeError::Json(_))
    ));
    assert!(matches!(Part::from_json(""), Err(PartDecodeError::Json(_))));
    assert!(matches!(
        Part::from_json("[1,2]"),
        Err(PartDecodeError::NotAnObject { found: "an array" })
    ));
    assert!(matches!(
        Part::from_json("null"),
        Err(PartDecodeError::NotAnObject { found: "null" })
    ));
    assert!(matches!(
        Part::from_json(r#"{"text":"no tag"}"#),
        Err(PartDecodeError::MissingType)
    ));
    assert!(matches!(
        Part::from_json(r#"{"type":3}"#),
        Err(PartDecodeError::TypeNotString { found: "a number" })
    ));
    let err = Part::from_json(r#"{"type":"text","text":5}"#).unwrap_err();
    assert!(matches!(
        err,
        PartDecodeError::InvalidPart {
            part_type: "text",
            ..
        }
    ));
    assert_eq!(err.to_string(), "invalid \"text\" part");
    assert!(std::error::Error::source(&err).is_some());
    for bad in [
        r#"{"type":"tool","call_id":"c","tool":"t","state":{"status":"flying"}}"#,
        r#"{"type":"file","mime":"x","source":{"kind":"inline","data":"!!notbase64"}}"#,
        r#"{"type":"step_finish","reason":"end_turn","tokens":{"input":1.5}}"#,
        r#"{"type":"finish","reason":7,"time":1}"#,
        r#"{"type":"patch"}"#,
    ] {
        assert!(
            matches!(
                Part::from_json(bad),
                Err(PartDecodeError::InvalidPart { .. })
            ),
            "{bad}"
        );
    }
    let deep = "[".repeat(100_000);
    assert!(matches!(
        Part::from_json(&deep),
        Err(PartDecodeError::Json(_))
    ));
    let via_serde = serde_json::from_str::<Part>(r#"{"type":"text","text":5}"#).unwrap_err();
    assert!(via_serde.to_string().starts_with("invalid \"text\" part: "));
}

#[test]
fn searchable_text_covers_text_reasoning_and_tools() {
    let parts = one_of_each();
    assert_eq!(parts[0].searchable_text(), "hello");
    assert_eq!(parts[2].searchable_text(), "thinking…");
    assert_eq!(
        parts[3].searchable_text(),
        r#"bash
{"command":"ls -la","timeout":5}"#
    );
    assert_eq!(
        parts[5].searchable_text(),
        "bash\n{\"command\":\"ls -la\",\"timeout\":5}\ntotal 0"
    );
    assert!(parts[6].searchable_text().ends_with("\ndenied"));
    assert_eq!(parts[7].searchable_text(), "read");
    let string_input = Part::tool("c", "grep", json!("needle"));
    assert_eq!(string_input.searchable_text(), "grep\nneedle");
    for part in &parts[8..] {
        assert_eq!(part.searchable_text(), "", "{}", part.type_name());
    }
}

#[test]
fn tool_part_state_moves_in_place() {
    let mut part = Part::tool("c", "bash", json!({}));
    let Part::Tool(tool) = &mut part else {
        unreachable!()
    };
    tool.state.start(1).unwrap();
    tool.state.complete("out", "t", Value::Null, 2).unwrap();
    assert!(tool.state.start(3).is_err());
    let back = Part::from_json(&part.to_json().unwrap()).unwrap();
    assert_eq!(back, part);
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        prop::sample::select(KNOWN_PART_TYPES.to_vec()).prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        let key = prop_oneof![
            prop::sample::select(vec![
                "type",
                "text",
                "tool",
                "call_id",
                "input",
                "state",
                "status",
                "started_at",
                "ended_at",
                "output",
                "title",
                "metadata",
                "message",
                "mime",
                "source",
                "kind",
                "url",
                "data",
                "reason",
                "tokens",
                "cost",
                "time",
                "hash",
                "files",
                "name",
                "prompt",
                "agent",
                "description",
                "auto",
                "start",
                "end",
                "synthetic",
            ])
            .prop_map(str::to_owned),
            "[a-z_]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn arb_part_like() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(
            KNOWN_PART_TYPES
                .iter()
                .copied()
                .chain(["nope", ""])
                .collect::<Vec<_>>(),
        ),
        arb_json(),
    )
        .prop_map(|(tag, body)| match body {
            Value::Object(mut map) => {
                map.insert("type".into(), tag.into());
                Value::Object(map)
            }
            other => other,
        })
}

/// `from_json` as it was: the text into a `Value`, then `from_value`. Errors as text
/// (`PartDecodeError` is not `PartialEq`; its `Debug` names the variant and the source).
fn through_value(text: &str) -> Result<Part, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("{:?}", PartDecodeError::Json(e)))?;
    Part::from_value(value).map_err(|e| format!("{e:?}"))
}

#[test]
fn from_json_decodes_as_through_a_value() {
    let mut texts: Vec<String> = one_of_each().iter().map(|p| p.to_json().unwrap()).collect();
    texts.extend(
        [
            // Duplicate keys: the last one wins through a value.
            r#"{"type":"text","text":"a","text":"b"}"#,
            r#"{"type":"text","type":"text","text":"a"}"#,
            r#"{"type":"text","type":"tool","text":"a"}"#,
            r#"{"type":"text","text":"a","type":"reasoning"}"#,
            r#"{"type":"text","text":"a","type":"text"}"#,
            r#"{"type":"text","text":"a","type":5}"#,
            r#"{"type":"finish","reason":"x","time":1,"type":"nope"}"#,
            r#"{"type":"text","text":"a","later":1,"later":2}"#,
            // An escaped tag, the tag last, white space, unknown fields, nulls.
            r#"{"type":"te\u0078t","text":"a"}"#,
            r#"{"text":"a","zz":[1,{"y":2.5}],"type":"text"}"#,
            " \n{ \"type\" : \"text\" , \"text\" : \"a\" } ",
            r#"{"type":"text","text":"a","time":null,"synthetic":false}"#,
            r#"{"type":"text","text":"a","time":{"start":1,"end":null}}"#,
            r#"{"type":"step_finish","reason":"end_turn","cost":1}"#,
            r#"{"type":"step_finish","reason":"end_turn","cost":1e400}"#,
            r#"{"type":"finish","reason":"x","time":1.5}"#,
            r#"{"type":"finish","reason":"x","time":18446744073709551615}"#,
            // Not parts, or not JSON.
            r#"["text"]"#,
            r#"{"type":"text"}"#,
            r#"{"type":"text","text":5}"#,
            r#"{"type":"nope","text":"a"}"#,
            r#"{"type":"text","text":"a"} trailing"#,
            r#"{"type":"text","text":"a""#,
            "",
        ]
        .map(str::to_owned),
    );
    for text in &texts {
        let direct = Part::from_json(text).map_err(|e| format!("{e:?}"));
        assert_eq!(direct, through_value(text), "{text}");
    }
}

/// A known part's JSON as Scribe writes it (the tag first), with members appended: new
/// fields, or known ones again (a duplicate key; `"type"` too), any value.
fn arb_known_part() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        prop::sample::select(vec![
            "type", "text", "time", "input", "state", "reason", "cost"
        ])
        .prop_map(str::to_owned),
        "[a-z_]{1,6}",
    ];
    let value = prop_oneof![
        arb_json(),
        prop::sample::select(KNOWN_PART_TYPES.to_vec()).prop_map(Value::from),
    ];
    (
        prop::sample::select(one_of_each()),
        prop::collection::vec((key, value), 0..3),
    )
        .prop_map(|(part, members)| {
            let json = part.to_json().unwrap();
            let mut text = json.strip_suffix('}').unwrap().to_owned();
            for (k, v) in members {
                text.push_str(&format!(",{}:{v}", Value::from(k)));
            }
            text.push('}');
            text
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// `from_json` (straight into a known type's struct) gives what the text through a
    /// `Value` gives: the same part, or the same error.
    #[test]
    fn from_json_agrees_with_from_value(
        text in prop_oneof![
            arb_known_part(),
            arb_part_like().prop_map(|v| v.to_string()),
            arb_json().prop_map(|v| v.to_string()),
        ],
    ) {
        let direct = Part::from_json(&text).map_err(|e| format!("{e:?}"));
        prop_assert_eq!(direct, through_value(&text));
    }

    /// Decoding never panics, and whatever decodes re-encodes to the same part.
    #[test]
    fn random_json_never_panics(value in prop_oneof![arb_json(), arb_part_like()]) {
        let text = value.to_string();
        if let Ok(part) = Part::from_json(&text) {
            let again = Part::from_json(&part.to_json().unwrap()).unwrap();
            prop_assert_eq!(&again, &part);
            if !part.is_known() {
                prop_assert_eq!(part.to_value().unwrap(), value);
            }
            let _ = part.searchable_text();
            let _ = part.type_name();
        }
    }

    #[test]
    fn random_text_never_panics(text in any::<String>()) {
        let _ = Part::from_json(&text);
    }
}

/// `Part::depth` (counted on the part's values, no text written) is the nesting of the
/// JSON `to_json` writes, for every part type and free-form values of any shape.
#[test]
fn depth_is_the_nesting_of_the_stored_json() {
    let mut parts = one_of_each();
    let deep = (0..130).fold(json!({"k": [1, "x"]}), |inner, i| {
        if i % 2 == 0 {
            json!([inner, {}])
        } else {
            json!({ "a": inner, "b": [] })
        }
    });
    parts.push(Part::tool("c", "t", deep.clone()));
    parts.push(Part::Unknown(json!({"type": "future", "v": deep})));
    let mut text = scribe_message::TextPart {
        text: "[[[{{{".into(),
        ..Default::default()
    };
    text.extra.insert("x".into(), json!([[[]]]));
    parts.push(Part::Text(text));
    for part in parts {
        let json = serde_json::to_string(&part).unwrap();
        assert_eq!(
            part.depth(),
            scribe_message::part::json_depth(&json),
            "{json}"
        );
    }
}
