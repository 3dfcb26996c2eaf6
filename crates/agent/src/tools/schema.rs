//! A small JSON-Schema validator for the subset tool input schemas use:
//! `type` (object, string, integer, number, boolean, array, null, or a list of
//! them), `properties`, `required`, `additionalProperties: false`, `enum` and
//! `items`. Anything else in a schema is ignored (treated as "no constraint"),
//! so a richer schema still validates what it can instead of failing.
//!
//! Hand-written on purpose: the `jsonschema` crate is heavy for the handful
//! of keywords tools need, and tool input errors only need to be clear enough
//! for a model to fix its call.

use serde_json::Value;

/// Checks `value` against `schema`; `Err` lists every problem found, one per
/// line, each prefixed by a JSON-pointer-like path (`input.path: …`).
pub fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    let mut problems = Vec::new();
    check(schema, value, "input", &mut problems);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

fn check(schema: &Value, value: &Value, path: &str, problems: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else {
        // `true` or a non-object schema: no constraint.
        if schema == &Value::Bool(false) {
            problems.push(format!("{path}: no value is allowed here"));
        }
        return;
    };
    if let Some(expected) = schema.get("type") {
        let allowed: Vec<&str> = match expected {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !allowed.is_empty() && !allowed.iter().any(|t| has_type(value, t)) {
            problems.push(format!(
                "{path}: expected {}, got {}",
                allowed.join(" or "),
                kind(value)
            ));
            // The other keywords would only repeat the same mistake.
            return;
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        let listed: Vec<String> = options.iter().map(Value::to_string).collect();
        problems.push(format!("{path}: must be one of {}", listed.join(", ")));
    }
    if let Value::Object(map) = value {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = schema.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(name) {
                    problems.push(format!("{path}: missing required property {name:?}"));
                }
            }
        }
        for (name, item) in map {
            match properties.and_then(|p| p.get(name)) {
                Some(sub) => check(sub, item, &format!("{path}.{name}"), problems),
                None => {
                    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                        problems.push(format!("{path}: unknown property {name:?}"));
                    } else if let Some(extra @ Value::Object(_)) =
                        schema.get("additionalProperties")
                    {
                        check(extra, item, &format!("{path}.{name}"), problems);
                    }
                }
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check(item_schema, item, &format!("{path}[{i}]"), problems);
        }
    }
}

fn has_type(value: &Value, t: &str) -> bool {
    match t {
        "object" => value.is_object(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        // An unknown type name constrains nothing.
        _ => true,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer"},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    #[test]
    fn accepts_valid_input() {
        validate(
            &schema(),
            &json!({"path": "x", "limit": 3, "mode": "a", "tags": ["t"]}),
        )
        .unwrap();
    }

    #[test]
    fn reports_every_problem_with_its_path() {
        let err = validate(
            &schema(),
            &json!({"limit": 1.5, "mode": "c", "tags": [1], "zzz": true}),
        )
        .unwrap_err();
        assert!(
            err.contains("input: missing required property \"path\""),
            "{err}"
        );
        assert!(
            err.contains("input.limit: expected integer, got number"),
            "{err}"
        );
        assert!(
            err.contains("input.mode: must be one of \"a\", \"b\""),
            "{err}"
        );
        assert!(
            err.contains("input.tags[0]: expected string, got integer"),
            "{err}"
        );
        assert!(err.contains("input: unknown property \"zzz\""), "{err}");
        assert_eq!(
            validate(&schema(), &json!("nope")).unwrap_err(),
            "input: expected object, got string"
        );
    }

    #[test]
    fn unknown_keywords_and_types_constrain_nothing() {
        validate(&json!({"type": "uuid", "format": "x"}), &json!(3)).unwrap();
        validate(&json!(true), &json!(null)).unwrap();
        assert!(validate(&json!(false), &json!(null)).is_err());
        validate(&json!({"type": ["string", "null"]}), &json!(null)).unwrap();
    }
}
