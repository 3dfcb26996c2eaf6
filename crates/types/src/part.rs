//! The typed pieces of a message: [`Part`] and one struct per part type.
//!
//! # JSON shape
//!
//! A part is a JSON object tagged by `"type"` (snake_case): `text`,
//! `reasoning`, `tool`, `file`, `image_url`, `step_start`, `step_finish`,
//! `compaction`, `patch`, `agent`, `subtask`, `finish`. Times are integer
//! milliseconds since the epoch.
//!
//! # Forward compatibility
//!
//! - A part whose `"type"` this build does not know decodes to
//!   [`Part::Unknown`] holding the whole original object (tag included) and
//!   encodes back to the same JSON value, so an older binary rewriting a
//!   message never destroys a newer binary's parts.
//! - Fields that a newer version adds inside a *known* type are kept in each
//!   struct's `extra` map (`#[serde(flatten)]`) and written back. This costs one
//!   empty map per part and means a rewrite (e.g. `update_part`) never drops
//!   data it does not understand.
//! - Round-trips are exact at the JSON *value* level. Key order is normalised
//!   (serde_json sorts object keys unless its `preserve_order` feature is on),
//!   so the text of an unknown part is byte-identical only if it was already
//!   in canonical (sorted, compact) form — which is how Scribe writes it.
//! - A *known* type whose fields are malformed is an error
//!   ([`PartDecodeError::InvalidPart`]), not silently downgraded to
//!   [`Part::Unknown`]: a corrupt row should be reported, not hidden.

use serde::de::{DeserializeOwned, Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::role::FinishReason;
use crate::tool_state::ToolState;
use crate::usage::TokenUsage;

/// Unknown fields of a known part type, kept verbatim.
pub type Extra = Map<String, Value>;

/// The tags of every part type this build knows, in declaration order.
pub const KNOWN_PART_TYPES: [&str; 12] = [
    "text",
    "reasoning",
    "tool",
    "file",
    "image_url",
    "step_start",
    "step_finish",
    "compaction",
    "patch",
    "agent",
    "subtask",
    "finish",
];

/// One typed piece of a message.
///
/// Decode stored JSON with [`Part::from_json`] (never panics); encode with
/// [`Part::to_json`]. `Serialize`/`Deserialize` are implemented with the same
/// rules, so a `Part` can sit inside other serde types.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Plain text from the user or the model.
    Text(TextPart),
    /// The model's visible or summarised reasoning.
    Reasoning(ReasoningPart),
    /// A tool call and its state.
    Tool(ToolPart),
    /// An attached file.
    File(FilePart),
    /// An image referenced by URL.
    ImageUrl(ImageUrlPart),
    /// The start of a model step.
    StepStart(StepStartPart),
    /// The end of a model step, with its usage and cost.
    StepFinish(StepFinishPart),
    /// Marks where the history was compacted.
    Compaction(CompactionPart),
    /// Files changed by the step, as a snapshot hash and paths.
    Patch(PatchPart),
    /// The agent the user addressed.
    Agent(AgentPart),
    /// A sub-task delegated to another agent.
    Subtask(SubtaskPart),
    /// Why and when the message ended.
    Finish(FinishPart),
    /// A part type this build does not know: the whole original JSON object,
    /// `"type"` included, written back unchanged. Should hold an object with a
    /// string `"type"`; anything else will not decode again.
    #[serde(untagged)]
    Unknown(Value),
}

/// Start and optional end of a timed part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartTime {
    /// When the part started.
    pub start: i64,
    /// When the part ended, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<i64>,
}

/// `type: "text"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TextPart {
    /// The text.
    pub text: String,
    /// Injected by the agent rather than typed by the user or the model.
    #[serde(default, skip_serializing_if = "is_false")]
    pub synthetic: bool,
    /// When the text was produced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<PartTime>,
    /// Fields of newer versions, kept verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "reasoning"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReasoningPart {
    /// The reasoning text.
    pub text: String,
    /// The provider's signature over the reasoning, sent back verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Other provider details (redacted blocks, encrypted content, ids), verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// When the reasoning was produced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<PartTime>,
    /// Fields of newer versions, kept verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "tool"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolPart {
    /// The provider's id of the call, pairs the call with its result.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments the model passed, verbatim.
    #[serde(default)]
    pub input: Value,
    /// Where the call is in its life.
    pub state: ToolState,
    /// When the output was cleared by compaction, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted_at: Option<i64>,
    /// Fields of newer versions, kept verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Where a file's bytes are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FileSource {
    /// At a URL (`https:`, `file:`, `data:` …): `{"kind":"url","url":…}`.
    Url {
        /// The URL.
        url: String,
    },
    /// Inline bytes: `{"kind":"inline","data":"<standard base64>"}`.
    Inline {
        /// The file's bytes.
        #[serde(with = "base64_bytes")]
        data: Vec<u8>,
    },
}

/// `type: "file"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilePart {
    /// The media type, e.g. `text/plain`.
    pub mime: String,
    /// The file's name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Where the bytes are.
    pub source: FileSource,
    /// Fields of newer versions, kept verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "image_url"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImageUrlPart {
    /// The image's URL.
    pub url: String,
    /// The provider's detail level (`low`, `high`, `auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Fields of newer versions, kept verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "step_start"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepStartPart {
    /// Fields of newer versions (e.g. a snapshot id), kept verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "step_finish"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepFinishPart {
    /// Why the step ended.
    pub reason: FinishReason,
    /// Tokens the step used.
    #[serde(default)]
    pub tokens: TokenUsage,
    /// What the step cost, in US dollars.
    #[serde(default)]
    pub cost: f64,
    /// Fields of newer versions, kept verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "compaction"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompactionPart {
    /// Triggered automatically (context nearly full) rather than by the user.
    #[serde(default)]
    pub auto: bool,
    /// On a summary that restarts the conversation: the first of the messages stored
    /// before the summary (in its session, or in the session a continuation continues)
    /// that are still sent verbatim, after it; `None`: the summary stands alone. With
    /// [`CompactionPart::keeps_words`]: where the conversation the summary was added to
    /// begins (`None`: at the session's first message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_from: Option<String>,
    /// The summary was added beside the conversation instead of replacing it: every
    /// message before it is still sent (its tool outputs cleared), and the summary is
    /// sent where it stands.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keeps_words: bool,
    /// Fields of newer versions, kept verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "patch"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PatchPart {
    /// The snapshot hash the patch applies to.
    pub hash: String,
    /// The paths it changed.
    #[serde(default)]
    pub files: Vec<String>,
    /// Fields of newer versions, kept verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "agent"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentPart {
    /// The agent's name.
    pub name: String,
    /// Fields of newer versions, kept verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "subtask"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubtaskPart {
    /// The prompt given to the sub-agent.
    pub prompt: String,
    /// A short description for UIs.
    #[serde(default)]
    pub description: String,
    /// The sub-agent's name.
    pub agent: String,
    /// Fields of newer versions, kept verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `type: "finish"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinishPart {
    /// Why the message ended.
    pub reason: FinishReason,
    /// When it ended.
    pub time: i64,
    /// Fields of newer versions, kept verbatim.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Stored part JSON that cannot be decoded.
#[derive(Debug, thiserror::Error)]
pub enum PartDecodeError {
    /// The text is not JSON at all.
    #[error("malformed part json")]
    Json(#[source] serde_json::Error),
    /// The JSON is valid but not an object.
    #[error("part json is {found}, expected an object")]
    NotAnObject {
        /// The JSON kind that was found (`an array`, `a string`, …).
        found: &'static str,
    },
    /// The object has no `"type"` field.
    #[error("part json has no \"type\" field")]
    MissingType,
    /// The `"type"` field is not a string.
    #[error("part \"type\" is {found}, expected a string")]
    TypeNotString {
        /// The JSON kind that was found.
        found: &'static str,
    },
    /// A known part type whose fields do not match its shape.
    #[error("invalid {part_type:?} part")]
    InvalidPart {
        /// The part's `"type"`.
        part_type: &'static str,
        /// What serde rejected.
        #[source]
        source: serde_json::Error,
    },
}

/// A part that cannot be stored.
#[derive(Debug, thiserror::Error)]
pub enum PartEncodeError {
    /// serde_json refused it (not expected with these types, but reported instead of
    /// panicking).
    #[error("cannot encode part as json")]
    Json(#[from] serde_json::Error),
    /// Its JSON nests deeper than [`MAX_PART_DEPTH`]: it would be stored but could not be
    /// read back (serde_json stops at 128 levels, and an export puts a part 7 levels down).
    #[error("part json nests {depth} levels deep, more than the {limit} a part may have")]
    TooDeep {
        /// How deep its JSON nests (the part's own object is level 1).
        depth: usize,
        /// [`MAX_PART_DEPTH`].
        limit: usize,
    },
}

/// The deepest a part's JSON may nest, its own object counting as level 1 (`{"type":"tool",
/// "input":[[1]]}` nests 3 levels): the one limit that writing ([`Part::to_json`] refuses a
/// deeper part) and reading share. serde_json reads at most 127 levels (its recursion
/// limit is 128) in one document, and the deepest document Scribe reads a part back from
/// is an export file (`scribe import`), whose part objects sit at level 8
/// (`{"sessions":[{"messages":[{"parts":[{"part":{…}}]}]}]}`): 127 - 7 = 120. A stored part
/// deeper than this (written by an older build) is read with [`cut_too_deep`]'s rule.
pub const MAX_PART_DEPTH: usize = 120;

/// How deep the JSON text `json` nests: the most containers (objects, arrays) open at
/// once, `0` for a scalar. Reads only brackets and string quotes (it does not validate).
pub fn json_depth(json: &str) -> usize {
    let bytes = json.as_bytes();
    // No more containers than opening brackets: most parts have few, so one counting
    // pass (vectorised) usually answers without following strings.
    let openers = bytes.iter().filter(|&&b| b == b'[' || b == b'{').count();
    if openers <= 1 {
        return openers;
    }
    let (mut depth, mut max) = (0usize, 0usize);
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => i = string_end(bytes, i),
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    max
}

/// The index of the quote that closes the JSON string opening at `start` (or the last
/// index, for an unterminated one).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\\' => i += 2,
            b'"' => return i,
            _ => i += 1,
        }
    }
    bytes.len().saturating_sub(1)
}

/// `json` with every object or array that opens deeper than `limit` replaced by its own
/// JSON text as a string, so that what is left nests at most `limit` levels and keeps
/// everything (`cut_too_deep("[[[1]]]", 2)` is `[["[1]"]]`). `None` when the text is not
/// balanced JSON (then there is nothing sensible to keep). The rule for a part too deep to
/// store (the history importers) or to read (a row an older build wrote).
pub fn cut_too_deep(json: &str, limit: usize) -> Option<String> {
    let bytes = json.as_bytes();
    let mut out = String::with_capacity(json.len() + 16);
    let (mut depth, mut copied, mut i) = (0usize, 0usize, 0usize);
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => i = string_end(bytes, i),
            b'[' | b'{' if depth == limit => {
                let end = container_end(bytes, i)?;
                out.push_str(json.get(copied..i)?);
                let inner = json.get(i..=end)?;
                out.push_str(&serde_json::to_string(inner).ok()?);
                copied = end + 1;
                i = end;
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.checked_sub(1)?,
            _ => {}
        }
        i += 1;
    }
    if depth != 0 {
        return None;
    }
    out.push_str(json.get(copied..)?);
    Some(out)
}

/// The index of the bracket that closes the container opening at `start`.
fn container_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => i = string_end(bytes, i),
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

impl Part {
    /// Decodes a part from its stored JSON text. Never panics.
    ///
    /// Up to [`MAX_PART_DEPTH`] levels, the same part as
    /// `Part::from_value(serde_json::from_str(json)?)`, and the same errors: a known type whose tag comes first is decoded straight from the text into
    /// its struct (no intermediate [`Value`]), and anything that path does not take
    /// (another key order, an unknown or escaped tag, a malformed field, text that is not
    /// an object) is decoded through the [`Value`] as before, which also makes every error.
    ///
    /// A part nesting deeper than [`MAX_PART_DEPTH`] (stored by an older build, which did
    /// not refuse one) decodes as [`Part::into_storable`] would have stored it: every
    /// object or array below [`MAX_PART_DEPTH`] as its JSON text, a string. So one such
    /// part does not make its whole conversation unreadable (past serde_json's 127 levels
    /// it could not be read at all), and what is read can always be written again (a
    /// fork, an export that `scribe import` reads back); the row itself is left as it is.
    pub fn from_json(json: &str) -> Result<Part, PartDecodeError> {
        let decoded = Part::decode_json(json);
        match decoded {
            // Read as it is only when it could be stored as it is (a fork, an export, an
            // importer's merge write back what they read).
            Ok(part) if part.depth() <= MAX_PART_DEPTH => Ok(part),
            Ok(_) | Err(PartDecodeError::Json(_)) => {
                if json_depth(json) > MAX_PART_DEPTH
                    && let Some(cut) = cut_too_deep(json, MAX_PART_DEPTH)
                    && let Ok(part) = Part::decode_json(&cut)
                {
                    return Ok(part);
                }
                decoded
            }
            Err(err) => Err(err),
        }
    }

    /// [`Part::from_json`] without the depth rule.
    fn decode_json(json: &str) -> Result<Part, PartDecodeError> {
        if let Some(part) = Part::from_json_direct(json) {
            return Ok(part);
        }
        let value: Value = serde_json::from_str(json).map_err(PartDecodeError::Json)?;
        Part::from_value(value)
    }

    /// [`Part::from_json`]'s path for a known type whose tag comes first, as Scribe writes
    /// parts (`{"type":"text",…}`): the text decoded into the tag's struct, whose `extra`
    /// catches `"type"` as an unknown field and gives it back (text and finish parts,
    /// the commonest, member by member: [`by_field`]); the last `"type"` must be the tag
    /// read first (a later duplicate wins through a [`Value`], as it does here).
    /// `None` when this path does not apply or fails (the caller decodes through a
    /// [`Value`] then).
    fn from_json_direct(json: &str) -> Option<Part> {
        /// The struct of a known tag, decoded from the whole object.
        fn direct<T: DeserializeOwned + HasExtra>(json: &str, tag: &str) -> Option<T> {
            let mut body: T = serde_json::from_str(json).ok()?;
            match body.extra_mut().remove("type") {
                Some(Value::String(last)) if last == tag => Some(body),
                _ => None,
            }
        }
        let rest = json.strip_prefix("{\"type\":\"")?;
        let tag = &rest[..rest.find('"')?];
        Some(match tag {
            "text" => Part::Text(by_field(json, TextFields(tag))?),
            "finish" => Part::Finish(by_field(json, FinishFields(tag))?),
            "reasoning" => Part::Reasoning(direct(json, tag)?),
            "tool" => Part::Tool(direct(json, tag)?),
            "file" => Part::File(direct(json, tag)?),
            "image_url" => Part::ImageUrl(direct(json, tag)?),
            "step_start" => Part::StepStart(direct(json, tag)?),
            "step_finish" => Part::StepFinish(direct(json, tag)?),
            "compaction" => Part::Compaction(direct(json, tag)?),
            "patch" => Part::Patch(direct(json, tag)?),
            "agent" => Part::Agent(direct(json, tag)?),
            "subtask" => Part::Subtask(direct(json, tag)?),
            _ => return None,
        })
    }

    /// Decodes a part from a JSON value (see the module doc for the rules).
    pub fn from_value(value: Value) -> Result<Part, PartDecodeError> {
        let mut map = match value {
            Value::Object(map) => map,
            other => {
                return Err(PartDecodeError::NotAnObject {
                    found: json_kind(&other),
                });
            }
        };
        let tag = match map.get("type") {
            Some(Value::String(tag)) => tag.as_str(),
            Some(other) => {
                return Err(PartDecodeError::TypeNotString {
                    found: json_kind(other),
                });
            }
            None => return Err(PartDecodeError::MissingType),
        };
        let Some(tag) = KNOWN_PART_TYPES.iter().copied().find(|known| *known == tag) else {
            return Ok(Part::Unknown(Value::Object(map)));
        };
        // The tag lives in the enum variant, not in the struct's `extra`.
        map.remove("type");
        let body = Value::Object(map);
        Ok(match tag {
            "text" => Part::Text(decode(tag, body)?),
            "reasoning" => Part::Reasoning(decode(tag, body)?),
            "tool" => Part::Tool(decode(tag, body)?),
            "file" => Part::File(decode(tag, body)?),
            "image_url" => Part::ImageUrl(decode(tag, body)?),
            "step_start" => Part::StepStart(decode(tag, body)?),
            "step_finish" => Part::StepFinish(decode(tag, body)?),
            "compaction" => Part::Compaction(decode(tag, body)?),
            "patch" => Part::Patch(decode(tag, body)?),
            "agent" => Part::Agent(decode(tag, body)?),
            "subtask" => Part::Subtask(decode(tag, body)?),
            _ => Part::Finish(decode(tag, body)?),
        })
    }

    /// Encodes the part as compact JSON for storage: [`PartEncodeError::TooDeep`] when it
    /// nests deeper than [`MAX_PART_DEPTH`] (it could not be read back).
    ///
    /// The depth is counted before encoding, on the part's values (`depth::depth_of`: a
    /// string costs nothing however long), so a refused part is never encoded.
    pub fn to_json(&self) -> Result<String, PartEncodeError> {
        let depth = self.depth();
        if depth > MAX_PART_DEPTH {
            return Err(PartEncodeError::TooDeep {
                depth,
                limit: MAX_PART_DEPTH,
            });
        }
        Ok(serde_json::to_string(self)?)
    }

    /// How deep the part's JSON nests ([`json_depth`] of [`Part::to_json`]'s text), counted
    /// without writing it. `0` when it cannot be encoded (encoding then says why).
    pub fn depth(&self) -> usize {
        crate::depth::depth_of(self).unwrap_or(0)
    }

    /// This part as it can be stored: itself when it nests at most [`MAX_PART_DEPTH`]
    /// levels; otherwise every object or array deeper than that replaced by its JSON text,
    /// a string ([`cut_too_deep`]). `None` when even that does not decode as a part (not
    /// expected: only free-form values, such as a tool's input, nest that deep). What the
    /// history importers store for a record too deep to store as it is.
    pub fn into_storable(self) -> Option<Part> {
        if self.depth() <= MAX_PART_DEPTH {
            return Some(self);
        }
        let json = serde_json::to_string(&self).ok()?;
        Part::from_json(&cut_too_deep(&json, MAX_PART_DEPTH)?).ok()
    }

    /// Encodes the part as a JSON value.
    pub fn to_value(&self) -> Result<Value, PartEncodeError> {
        Ok(serde_json::to_value(self)?)
    }

    /// The `"type"` tag; for [`Part::Unknown`] the stored tag (or `"unknown"`
    /// if the value has none).
    pub fn type_name(&self) -> &str {
        match self {
            Part::Text(_) => "text",
            Part::Reasoning(_) => "reasoning",
            Part::Tool(_) => "tool",
            Part::File(_) => "file",
            Part::ImageUrl(_) => "image_url",
            Part::StepStart(_) => "step_start",
            Part::StepFinish(_) => "step_finish",
            Part::Compaction(_) => "compaction",
            Part::Patch(_) => "patch",
            Part::Agent(_) => "agent",
            Part::Subtask(_) => "subtask",
            Part::Finish(_) => "finish",
            Part::Unknown(value) => value
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("unknown"),
        }
    }

    /// The text the full-text indexes hold for this part, as the store's search view
    /// (`parts_search`) reads it from the stored JSON (empty: nothing to find).
    ///
    /// - text, reasoning: the text;
    /// - tool: the tool name, then each of the input and the result (the completed
    ///   output or the error message) that the part has, each after a `'\n'` (an
    ///   empty piece keeps its line). The input is rendered as SQLite's
    ///   `json_extract(data, '$.input')` renders it: a JSON string as its contents,
    ///   `null` as absent, anything else as compact JSON;
    /// - every other type (and unknown types): nothing.
    pub fn searchable_text(&self) -> String {
        match self {
            Part::Text(p) => p.text.clone(),
            Part::Reasoning(p) => p.text.clone(),
            Part::Tool(p) => {
                let input = match &p.input {
                    Value::Null => None,
                    Value::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                };
                let result = p.state.output().or_else(|| p.state.error_message());
                let mut text = p.tool.clone();
                for piece in [input.as_deref(), result].into_iter().flatten() {
                    text.push('\n');
                    text.push_str(piece);
                }
                text
            }
            _ => String::new(),
        }
    }

    /// Whether this build knows the part's type.
    pub fn is_known(&self) -> bool {
        !matches!(self, Part::Unknown(_))
    }

    /// A plain text part.
    pub fn text(text: impl Into<String>) -> Part {
        Part::Text(TextPart {
            text: text.into(),
            ..TextPart::default()
        })
    }

    /// A pending tool call.
    pub fn tool(call_id: impl Into<String>, tool: impl Into<String>, input: Value) -> Part {
        Part::Tool(ToolPart {
            call_id: call_id.into(),
            tool: tool.into(),
            input,
            state: ToolState::Pending,
            compacted_at: None,
            extra: Extra::new(),
        })
    }

    /// A finish marker.
    pub fn finish(reason: FinishReason, time: i64) -> Part {
        Part::Finish(FinishPart {
            reason,
            time,
            extra: Extra::new(),
        })
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Part::from_value(value).map_err(|e| match e {
            PartDecodeError::InvalidPart { part_type, source } => {
                D::Error::custom(format_args!("invalid {part_type:?} part: {source}"))
            }
            other => D::Error::custom(other),
        })
    }
}

/// Decodes `json` (one object, nothing after it) with `fields`, the commonest part types'
/// own visitors (`text`, `finish`): each member straight into its field or, unknown, into
/// `extra`, instead of serde's buffering of every member for a `flatten` field. `None`
/// when anything fails (the caller decodes through a [`Value`] then).
fn by_field<'de, V: Visitor<'de, Value = Option<T>>, T>(json: &'de str, fields: V) -> Option<T> {
    let mut de = serde_json::Deserializer::from_str(json);
    let part = de.deserialize_map(fields).ok()??;
    de.end().ok()?;
    Some(part)
}

/// The members of a known part's object, in order: `"type"` checked against `tag` (the
/// last one counts, as through a [`Value`]), the struct's own fields given to `known`
/// (which reads the value and says `true`), the rest into `extra` (a repeated key: the
/// last one). `Ok(false)` when the last `"type"` is not `tag`. A key or tag with escapes
/// fails (borrowed `&str`), so such a part takes the [`Value`] path.
fn visit_members<'de, A: MapAccess<'de>>(
    mut map: A,
    tag: &str,
    extra: &mut Extra,
    mut known: impl FnMut(&str, &mut A) -> Result<bool, A::Error>,
) -> Result<bool, A::Error> {
    let mut tagged = false;
    while let Some(key) = map.next_key::<&'de str>()? {
        if key == "type" {
            tagged = map.next_value::<&'de str>()? == tag;
        } else if !known(key, &mut map)? {
            let value: Value = map.next_value()?;
            extra.insert(key.to_owned(), value);
        }
    }
    Ok(tagged)
}

/// [`TextPart`] member by member (see [`by_field`]).
struct TextFields<'t>(&'t str);

impl<'de> Visitor<'de> for TextFields<'_> {
    type Value = Option<TextPart>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a text part")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<TextPart>, A::Error> {
        let (mut text, mut synthetic, mut time, mut extra) = (None, false, None, Extra::new());
        let tagged = visit_members(map, self.0, &mut extra, |key, map| {
            match key {
                "text" => text = Some(map.next_value()?),
                "synthetic" => synthetic = map.next_value()?,
                "time" => time = map.next_value()?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(text.filter(|_| tagged).map(|text| TextPart {
            text,
            synthetic,
            time,
            extra,
        }))
    }
}

/// [`FinishPart`] member by member (see [`by_field`]).
struct FinishFields<'t>(&'t str);

impl<'de> Visitor<'de> for FinishFields<'_> {
    type Value = Option<FinishPart>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a finish part")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<FinishPart>, A::Error> {
        let (mut reason, mut time, mut extra) = (None, None, Extra::new());
        let tagged = visit_members(map, self.0, &mut extra, |key, map| {
            match key {
                "reason" => reason = Some(map.next_value()?),
                "time" => time = Some(map.next_value()?),
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(match (tagged, reason, time) {
            (true, Some(reason), Some(time)) => Some(FinishPart {
                reason,
                time,
                extra,
            }),
            _ => None,
        })
    }
}

/// A known part type's `extra` map (where a decoded object's `"type"` lands when the
/// struct is decoded from the whole object).
trait HasExtra {
    fn extra_mut(&mut self) -> &mut Extra;
}

macro_rules! impl_has_extra {
    ($($ty:ident),* $(,)?) => {
        $(impl HasExtra for $ty {
            fn extra_mut(&mut self) -> &mut Extra {
                &mut self.extra
            }
        })*
    };
}

impl_has_extra!(
    TextPart,
    ReasoningPart,
    ToolPart,
    FilePart,
    ImageUrlPart,
    StepStartPart,
    StepFinishPart,
    CompactionPart,
    PatchPart,
    AgentPart,
    SubtaskPart,
);

macro_rules! impl_from_part {
    ($($ty:ident => $variant:ident),* $(,)?) => {
        $(impl From<$ty> for Part {
            fn from(p: $ty) -> Part {
                Part::$variant(p)
            }
        })*
    };
}

impl_from_part!(
    TextPart => Text,
    ReasoningPart => Reasoning,
    ToolPart => Tool,
    FilePart => File,
    ImageUrlPart => ImageUrl,
    StepStartPart => StepStart,
    StepFinishPart => StepFinish,
    CompactionPart => Compaction,
    PatchPart => Patch,
    AgentPart => Agent,
    SubtaskPart => Subtask,
    FinishPart => Finish,
);

fn decode<T: DeserializeOwned>(part_type: &'static str, body: Value) -> Result<T, PartDecodeError> {
    serde_json::from_value(body)
        .map_err(|source| PartDecodeError::InvalidPart { part_type, source })
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Serde adapter: `Vec<u8>` as standard, padded base64.
mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD
            .decode(text.as_bytes())
            .map_err(|e| D::Error::custom(format_args!("invalid base64: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `levels` arrays nested in each other around `1`.
    fn nested(levels: usize) -> String {
        "[".repeat(levels) + "1" + &"]".repeat(levels)
    }

    #[test]
    fn depth_counts_containers_not_brackets_in_strings() {
        assert_eq!(json_depth("1"), 0);
        assert_eq!(json_depth(r#"{"a":[1,{"b":[]}]}"#), 4);
        assert_eq!(json_depth(r#"{"a":"[[[[{{{{\"[[[["}"#), 1);
        assert_eq!(json_depth(&nested(300)), 300);
    }

    #[test]
    fn cut_keeps_every_value_below_the_limit_as_its_text() {
        assert_eq!(cut_too_deep("[[[1]]]", 2).unwrap(), r#"[["[1]"]]"#);
        assert_eq!(
            cut_too_deep(r#"{"a":{"b":{"c":"]\"["}},"d":[]}"#, 2).unwrap(),
            r#"{"a":{"b":"{\"c\":\"]\\\"[\"}"},"d":[]}"#
        );
        assert_eq!(cut_too_deep("[[1]]", 2).unwrap(), "[[1]]");
        assert!(cut_too_deep("[[1]", 5).is_none());
        let cut = cut_too_deep(&nested(300), MAX_PART_DEPTH).unwrap();
        assert_eq!(json_depth(&cut), MAX_PART_DEPTH);
    }

    /// The limit is what the readers can read: serde_json reads 127 levels, not 128, and
    /// an export document (`scribe import`) puts a part's object at level 8.
    #[test]
    fn the_limit_is_what_an_export_document_can_hold() {
        let wrap = |part: &str| {
            format!(r#"{{"sessions":[{{"messages":[{{"parts":[{{"part":{part}}}]}}]}}]}}"#)
        };
        let part = |depth: usize| format!(r#"{{"type":"tool","input":{}}}"#, nested(depth - 1));
        assert!(serde_json::from_str::<Value>(&nested(127)).is_ok());
        assert!(serde_json::from_str::<Value>(&nested(128)).is_err());
        assert_eq!(json_depth(&wrap(&part(MAX_PART_DEPTH))), 127);
        assert!(serde_json::from_str::<Value>(&wrap(&part(MAX_PART_DEPTH))).is_ok());
        assert!(serde_json::from_str::<Value>(&wrap(&part(MAX_PART_DEPTH + 1))).is_err());
    }

    #[test]
    fn a_too_deep_part_is_refused_and_its_storable_form_reads_back() {
        let deep = Part::tool("c", "t", serde_json::from_str(&nested(126)).unwrap());
        match deep.to_json() {
            Err(PartEncodeError::TooDeep { depth, limit }) => {
                assert_eq!((depth, limit), (127, MAX_PART_DEPTH));
            }
            other => panic!("{other:?}"),
        }
        let stored = deep.into_storable().unwrap();
        let json = stored.to_json().unwrap();
        assert_eq!(json_depth(&json), MAX_PART_DEPTH);
        assert_eq!(Part::from_json(&json).unwrap(), stored);
        let text = Part::text("[[[[ not json");
        assert_eq!(text.clone().into_storable(), Some(text));
    }
}
