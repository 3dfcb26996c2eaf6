//! Per-session tool permissions: rules `{permission, pattern, action}` where
//! `permission` is a glob over tool names and `pattern` a glob over what the
//! call touches (a path, a check name); the **last** matching rule wins, and
//! no match means allow. `ask` goes to an approver callback.
//!
//! Rules live in the session's `permission` JSON column as an array of rule
//! objects. OpenCode's shorter object forms are read too:
//! `{"write_file": "deny"}` (pattern `*`) and
//! `{"read_file": {"src/*": "allow", "*": "ask"}}`.
//!
//! Globs: `*` matches any run of characters (including `/`), `?` exactly one
//! character; everything else matches itself.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a matching rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Run without asking.
    Allow,
    /// Ask the approver.
    Ask,
    /// Refuse.
    Deny,
}

/// One permission rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// A glob over tool names (`*` for every tool).
    pub permission: String,
    /// A glob over the call's subject (path, check name); `*` for any.
    pub pattern: String,
    /// What to do when the rule matches.
    pub action: Action,
}

impl Rule {
    /// A rule for `permission` and `pattern`.
    pub fn new(permission: impl Into<String>, pattern: impl Into<String>, action: Action) -> Rule {
        Rule {
            permission: permission.into(),
            pattern: pattern.into(),
            action,
        }
    }
}

/// The session's `permission` JSON is not a rule list this build can read.
#[derive(Debug, thiserror::Error)]
#[error("invalid permission rules: {reason}")]
pub struct PermissionError {
    /// What is wrong with them.
    pub reason: String,
}

/// An ordered list of rules; the last match wins.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Ruleset {
    rules: Vec<Rule>,
}

/// The permission rules stored on `session`; unreadable rules are
/// [`AgentError::Permission`](crate::AgentError::Permission).
pub(crate) fn session_rules(
    session: &scribe_session::Session,
) -> Result<Ruleset, crate::AgentError> {
    Ruleset::from_json(session.permission.as_ref()).map_err(|source| {
        crate::AgentError::Permission {
            session_id: session.id.clone(),
            source,
        }
    })
}

impl Ruleset {
    /// A ruleset holding `rules` in order.
    pub fn new(rules: Vec<Rule>) -> Ruleset {
        Ruleset { rules }
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Reads a session's `permission` column (see the module doc for the forms);
    /// `None` or `null` is the empty ruleset.
    pub fn from_json(value: Option<&Value>) -> Result<Ruleset, PermissionError> {
        let bad = |reason: String| PermissionError { reason };
        match value {
            None | Some(Value::Null) => Ok(Ruleset::default()),
            Some(Value::Array(_)) => serde_json::from_value(value.cloned().unwrap_or_default())
                .map_err(|e| bad(e.to_string())),
            Some(Value::Object(map)) => {
                let mut rules = Vec::new();
                for (tool, spec) in map {
                    match spec {
                        Value::String(_) => rules.push(Rule {
                            permission: tool.clone(),
                            pattern: "*".to_owned(),
                            action: serde_json::from_value(spec.clone())
                                .map_err(|e| bad(format!("{tool}: {e}")))?,
                        }),
                        Value::Object(patterns) => {
                            for (pattern, action) in patterns {
                                rules.push(Rule {
                                    permission: tool.clone(),
                                    pattern: pattern.clone(),
                                    action: serde_json::from_value(action.clone())
                                        .map_err(|e| bad(format!("{tool} {pattern}: {e}")))?,
                                });
                            }
                        }
                        other => return Err(bad(format!("{tool}: unexpected {other}"))),
                    }
                }
                Ok(Ruleset { rules })
            }
            Some(other) => Err(bad(format!("expected an array or an object, got {other}"))),
        }
    }

    /// The rules as the JSON array stored in the session.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(&self.rules).unwrap_or(Value::Null)
    }

    /// The rules a per-prompt tool switch map means: `true` → allow, `false` →
    /// deny, pattern `*`.
    pub fn from_switches(switches: &BTreeMap<String, bool>) -> Ruleset {
        Ruleset {
            rules: switches
                .iter()
                .map(|(tool, on)| {
                    Rule::new(
                        tool.clone(),
                        "*",
                        if *on { Action::Allow } else { Action::Deny },
                    )
                })
                .collect(),
        }
    }

    /// Adds `other`'s rules after these, so they take precedence; an earlier
    /// rule for the same permission and pattern is dropped rather than kept
    /// forever behind its replacement.
    pub fn merge(&mut self, other: &Ruleset) {
        for rule in &other.rules {
            self.rules
                .retain(|r| !(r.permission == rule.permission && r.pattern == rule.pattern));
            self.rules.push(rule.clone());
        }
    }

    /// This ruleset followed by `later` (which wins on conflicts).
    pub fn then(&self, later: &Ruleset) -> Ruleset {
        let mut rules = self.rules.clone();
        rules.extend(later.rules.iter().cloned());
        Ruleset { rules }
    }

    /// What the last rule matching `tool` and `subject` says, if any rule does.
    /// Without a subject only rules whose pattern matches anything apply.
    pub fn evaluate(&self, tool: &str, subject: Option<&str>) -> Option<Action> {
        self.rules
            .iter()
            .rev()
            .find(|r| {
                glob_match(&r.permission, tool)
                    && match subject {
                        Some(s) => glob_match(&r.pattern, s),
                        None => r.pattern == "*",
                    }
            })
            .map(|r| r.action)
    }

    /// Whether `tool` is denied whatever it touches (so it is not offered at all).
    pub fn is_disabled(&self, tool: &str) -> bool {
        self.evaluate(tool, None) == Some(Action::Deny)
            && !self.rules.iter().any(|r| {
                glob_match(&r.permission, tool) && r.pattern != "*" && r.action != Action::Deny
            })
    }
}

/// Whether `text` matches `pattern` (`*` any run, `?` one character).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                // Let the last star swallow one more character and retry.
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// What an approver is asked about.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRequest {
    /// The session of the call.
    pub session_id: String,
    /// The tool.
    pub tool: String,
    /// What the call touches, if the tool says.
    pub subject: Option<String>,
    /// The call's input.
    pub input: Value,
    /// The provider's id of the call.
    pub call_id: String,
}

/// An approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run the call.
    Allow,
    /// Refuse it, optionally saying why (recorded on the tool part).
    Deny(Option<String>),
}

/// The callback `ask` rules go to. Must not block forever: the loop waits for it.
pub type Approver = dyn Fn(&PermissionRequest) -> Decision + Send + Sync;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn globs() {
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "a/b"));
        assert!(glob_match("src/*.rs", "src/x/y.rs"));
        assert!(!glob_match("src/*.rs", "tests/y.rs"));
        assert!(glob_match("edit_?ile", "edit_file"));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
    }

    #[test]
    fn last_matching_rule_wins() {
        let rules = Ruleset::new(vec![
            Rule::new("*", "*", Action::Ask),
            Rule::new("read_file", "*", Action::Allow),
            Rule::new("read_file", "secrets/*", Action::Deny),
        ]);
        assert_eq!(rules.evaluate("write_file", Some("a")), Some(Action::Ask));
        assert_eq!(
            rules.evaluate("read_file", Some("src/a")),
            Some(Action::Allow)
        );
        assert_eq!(
            rules.evaluate("read_file", Some("secrets/k")),
            Some(Action::Deny)
        );
        assert_eq!(rules.evaluate("read_file", None), Some(Action::Allow));
        assert_eq!(Ruleset::default().evaluate("x", None), None);
    }

    #[test]
    fn json_forms_and_switches() {
        let rules = Ruleset::from_json(Some(
            &json!({"write_file": "deny", "read_file": {"src/*": "allow"}}),
        ))
        .unwrap();
        assert_eq!(rules.evaluate("write_file", Some("x")), Some(Action::Deny));
        assert!(rules.is_disabled("write_file"));
        assert!(!rules.is_disabled("read_file"));
        let round = Ruleset::from_json(Some(&rules.to_json())).unwrap();
        assert_eq!(round, rules);
        assert!(Ruleset::from_json(Some(&json!(3))).is_err());
        assert!(Ruleset::from_json(Some(&json!({"x": "maybe"}))).is_err());

        let mut session = Ruleset::from_switches(&BTreeMap::from([("list_dir".to_owned(), false)]));
        session.merge(&Ruleset::from_switches(&BTreeMap::from([(
            "list_dir".to_owned(),
            true,
        )])));
        assert_eq!(session.rules().len(), 1);
        assert_eq!(session.evaluate("list_dir", None), Some(Action::Allow));
    }
}
