//! Models, their context limits and prices ([`Model`], [`Pricing`]), what a
//! call costs ([`Pricing::cost`]), and the [`ModelCatalog`] a user can extend.
//!
//! # The catalog file
//!
//! [`ModelCatalog::load`] starts from the built-in defaults and applies a
//! user-editable file, TOML or JSON chosen by its extension. Each entry adds a
//! model or overrides fields of an existing one (same `id`):
//!
//! ```toml
//! # Override one price of a built-in model.
//! [[models]]
//! id = "gpt-4o"
//! pricing = { input_per_mtok = 2.0 }
//!
//! # Add a model. provider, context_window, max_output_tokens and the input
//! # and output prices are required; name defaults to the id; a cache price
//! # left out is 0 (providers without prompt caching never report cache tokens).
//! [[models]]
//! id = "qwen3-coder"
//! provider = "ollama"
//! context_window = 262144
//! max_output_tokens = 65536
//! pricing = { input_per_mtok = 0.0, output_per_mtok = 0.0 }
//!
//! # A call whose prompt holds more than 200,000 tokens costs these instead
//! # (given whole; it replaces the model's long-prompt prices).
//! [[models]]
//! id = "claude-sonnet-4-5"
//! [models.pricing.long_prompt]
//! above_tokens = 200000
//! input_per_mtok = 6.0
//! output_per_mtok = 22.5
//! cache_write_per_mtok = 7.5
//! cache_read_per_mtok = 0.60
//! ```
//!
//! The JSON form is the same document: `{"models": [{"id": …}, …]}`. Unknown
//! fields, negative or non-finite prices, a zero window or output limit, and
//! an output limit larger than the window are refused with the file's path,
//! the entry and the cause. A file that fails leaves the catalog unchanged.
//!
//! # Reasoning tokens
//!
//! Scribe's [`TokenUsage`] counters are disjoint: `output` is what the model
//! wrote visibly and `reasoning` is hidden thinking reported *separately* by
//! the provider (as Gemini's `thoughtsTokenCount` is). Both are billed at the
//! output price. A provider that folds reasoning into its output count
//! (OpenAI's `completion_tokens`, Anthropic's `output_tokens`) must not report
//! the same tokens twice: its adapter either leaves `reasoning` at 0 or splits
//! the count with [`disjoint_usage`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use scribe_message::TokenUsage;
use serde::{Deserialize, Serialize};

/// Prices of one model in US dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    /// Prompt tokens not served from the cache.
    pub input_per_mtok: f64,
    /// Generated tokens, hidden reasoning included.
    pub output_per_mtok: f64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write_per_mtok: f64,
    /// Prompt tokens read back from the provider's cache.
    pub cache_read_per_mtok: f64,
    /// What a call with a long prompt costs instead, where the provider charges long
    /// prompts more (Claude Sonnet 4 and 4.5, Gemini Pro models, GPT-5.5); `None`: the
    /// same prices at any length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_prompt: Option<LongPromptPricing>,
}

/// A token count as billed: a negative one (corrupt data) bills nothing.
fn billable(n: i64) -> f64 {
    n.max(0) as f64
}

/// `usage` at `[input, output, cache write, cache read]` dollars per million tokens
/// (reasoning at the output price).
fn charge(usage: &TokenUsage, [input, output, cache_write, cache_read]: [f64; 4]) -> f64 {
    let dollars_times_million = billable(usage.input) * input
        + (billable(usage.output) + billable(usage.reasoning)) * output
        + billable(usage.cache_read) * cache_read
        + billable(usage.cache_write) * cache_write;
    dollars_times_million / 1e6
}

/// What `hour_writes` of `usage`'s cache writes cost beyond the cache-write price [`charge`]
/// charged them at `prices`: twice the input price each (Anthropic's 1-hour cache).
fn hour_surcharge(usage: &TokenUsage, hour_writes: i64, prices: [f64; 4]) -> f64 {
    let [input, _, cache_write, _] = prices;
    let hours = billable(hour_writes).min(billable(usage.cache_write));
    hours * (2.0 * input - cache_write) / 1e6
}

/// The prices of a call whose prompt (input, cache reads and cache writes together)
/// holds more than [`above_tokens`](LongPromptPricing::above_tokens): every token of that
/// call, its output included, is charged at these, as the providers bill it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongPromptPricing {
    /// A prompt of more tokens than this is a long one (200,000 for Claude and Gemini).
    pub above_tokens: u64,
    /// Prompt tokens not served from the cache.
    pub input_per_mtok: f64,
    /// Generated tokens, hidden reasoning included.
    pub output_per_mtok: f64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write_per_mtok: f64,
    /// Prompt tokens read back from the provider's cache.
    pub cache_read_per_mtok: f64,
}

impl Pricing {
    /// A model that costs nothing (local models).
    pub const FREE: Pricing = Pricing {
        input_per_mtok: 0.0,
        output_per_mtok: 0.0,
        cache_write_per_mtok: 0.0,
        cache_read_per_mtok: 0.0,
        long_prompt: None,
    };

    /// What `usage` (one model call's) costs in US dollars: Σ tokens × price / 1e6 over
    /// input, output (plus separately reported reasoning), cache read and cache write, at
    /// the [`long_prompt`](Pricing::long_prompt) prices when its prompt is a long one.
    ///
    /// Negative counters (corrupt data) count as zero, so a cost is never negative.
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        charge(usage, self.prices_of(usage))
    }

    /// The prices [`Pricing::cost`] charges `usage` (one call's) at, `[input, output,
    /// cache write, cache read]`: the long prompt's when its prompt is a long one.
    fn prices_of(&self, usage: &TokenUsage) -> [f64; 4] {
        let prompt =
            billable(usage.input) + billable(usage.cache_read) + billable(usage.cache_write);
        match self.long_prompt {
            Some(long) if prompt > long.above_tokens as f64 => [
                long.input_per_mtok,
                long.output_per_mtok,
                long.cache_write_per_mtok,
                long.cache_read_per_mtok,
            ],
            _ => self.base_prices(),
        }
    }

    /// `[input, output, cache write, cache read]` at the base prices.
    fn base_prices(&self) -> [f64; 4] {
        [
            self.input_per_mtok,
            self.output_per_mtok,
            self.cache_write_per_mtok,
            self.cache_read_per_mtok,
        ]
    }

    /// [`Pricing::cost`] of `usage` when `hour_writes` of its cache writes were written
    /// for an hour (Anthropic's 1-hour cache, `ephemeral_1h_input_tokens`): those at twice
    /// the input price, as Anthropic bills them, the others at the cache-write price; the
    /// long prompt's prices for a long prompt. At most all its cache writes count.
    pub fn cost_with_hour_writes(&self, usage: &TokenUsage, hour_writes: i64) -> f64 {
        let prices = self.prices_of(usage);
        charge(usage, prices) + hour_surcharge(usage, hour_writes, prices)
    }

    /// [`Pricing::base_cost`] with [`Pricing::cost_with_hour_writes`]'s rule for
    /// `hour_writes`.
    pub fn base_cost_with_hour_writes(&self, usage: &TokenUsage, hour_writes: i64) -> f64 {
        let prices = self.base_prices();
        charge(usage, prices) + hour_surcharge(usage, hour_writes, prices)
    }

    /// What `usage` costs at the base prices, however long its prompt: for usage summed
    /// over several calls (a session's total, a turn of many calls), whose prompts one by
    /// one are not known. The sum's prompt may be long when no call's was, so the
    /// long-prompt prices would overcharge it; a long call among them is undercharged.
    pub fn base_cost(&self, usage: &TokenUsage) -> f64 {
        charge(usage, self.base_prices())
    }

    /// Every price finite and non-negative; a long prompt's threshold above 0.
    pub fn validate(&self) -> Result<(), ModelProblem> {
        let mut prices = vec![
            ("input_per_mtok", self.input_per_mtok),
            ("output_per_mtok", self.output_per_mtok),
            ("cache_write_per_mtok", self.cache_write_per_mtok),
            ("cache_read_per_mtok", self.cache_read_per_mtok),
        ];
        if let Some(long) = self.long_prompt {
            if long.above_tokens == 0 {
                return Err(ModelProblem::ZeroLongPrompt);
            }
            prices.extend([
                ("long_prompt.input_per_mtok", long.input_per_mtok),
                ("long_prompt.output_per_mtok", long.output_per_mtok),
                (
                    "long_prompt.cache_write_per_mtok",
                    long.cache_write_per_mtok,
                ),
                ("long_prompt.cache_read_per_mtok", long.cache_read_per_mtok),
            ]);
        }
        for (field, value) in prices {
            if !value.is_finite() || value < 0.0 {
                return Err(ModelProblem::InvalidPrice { field, value });
            }
        }
        Ok(())
    }
}

/// Converts usage whose `output` *includes* `reasoning` (OpenAI's
/// `completion_tokens` with `reasoning_tokens` as a subset) into Scribe's
/// disjoint convention, so that reasoning is neither lost nor billed twice.
pub fn disjoint_usage(usage_with_inclusive_output: TokenUsage) -> TokenUsage {
    let reasoning = usage_with_inclusive_output
        .reasoning
        .clamp(0, usage_with_inclusive_output.output.max(0));
    TokenUsage {
        output: usage_with_inclusive_output.output - reasoning,
        reasoning,
        ..usage_with_inclusive_output
    }
}

/// A model a provider serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// The id sent to the provider, e.g. `claude-sonnet-4-5`.
    pub id: String,
    /// Who serves it: `anthropic`, `openai`, `google`, …
    pub provider: String,
    /// A human-readable name.
    pub name: String,
    /// How many tokens one request (prompt plus output) may hold.
    pub context_window: u64,
    /// How many tokens the model may generate in one response.
    pub max_output_tokens: u64,
    /// What its tokens cost.
    pub pricing: Pricing,
}

impl Model {
    /// What `usage` costs on this model, in US dollars ([`Pricing::cost`]).
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        self.pricing.cost(usage)
    }

    /// Checks the invariants every catalog entry holds.
    pub fn validate(&self) -> Result<(), ModelProblem> {
        if self.id.trim().is_empty() {
            return Err(ModelProblem::EmptyId);
        }
        if self.provider.trim().is_empty() {
            return Err(ModelProblem::EmptyProvider);
        }
        if self.context_window == 0 {
            return Err(ModelProblem::ZeroContextWindow);
        }
        if self.max_output_tokens == 0 {
            return Err(ModelProblem::ZeroMaxOutput);
        }
        if self.max_output_tokens > self.context_window {
            return Err(ModelProblem::MaxOutputExceedsWindow {
                max_output_tokens: self.max_output_tokens,
                context_window: self.context_window,
            });
        }
        self.pricing.validate()
    }
}

/// Why a model definition is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelProblem {
    /// The id is empty or blank.
    #[error("model id is empty")]
    EmptyId,
    /// The provider is empty or blank.
    #[error("provider is empty")]
    EmptyProvider,
    /// A field that a new model (one not already in the catalog) must have.
    #[error("missing field `{field}` (required for a model that is not already in the catalog)")]
    MissingField {
        /// The field's name, as written in the file.
        field: &'static str,
    },
    /// `context_window` is 0.
    #[error("context_window must be greater than 0")]
    ZeroContextWindow,
    /// `max_output_tokens` is 0.
    #[error("max_output_tokens must be greater than 0")]
    ZeroMaxOutput,
    /// The model could not answer a request that fills its output limit.
    #[error("max_output_tokens ({max_output_tokens}) exceeds context_window ({context_window})")]
    MaxOutputExceedsWindow {
        /// The configured output limit.
        max_output_tokens: u64,
        /// The configured window.
        context_window: u64,
    },
    /// A price is negative, NaN or infinite.
    #[error(
        "price `{field}` must be a finite, non-negative number of dollars per million tokens, got {value}"
    )]
    InvalidPrice {
        /// The price's field name.
        field: &'static str,
        /// The rejected value.
        value: f64,
    },
    /// The same id appears twice in one file.
    #[error("model is defined more than once in this file")]
    DuplicateId,
    /// `long_prompt.above_tokens` is 0.
    #[error("long_prompt.above_tokens must be greater than 0")]
    ZeroLongPrompt,
}

/// The format of a catalog file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogFormat {
    /// `.toml`
    Toml,
    /// `.json`
    Json,
}

impl CatalogFormat {
    /// The format implied by the path's extension (case-insensitive).
    pub fn from_path(path: &Path) -> Option<CatalogFormat> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "toml" => Some(CatalogFormat::Toml),
            "json" => Some(CatalogFormat::Json),
            _ => None,
        }
    }
}

impl fmt::Display for CatalogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CatalogFormat::Toml => "toml",
            CatalogFormat::Json => "json",
        })
    }
}

/// A catalog file that cannot be applied. The catalog is left unchanged.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The file cannot be read.
    #[error("cannot read model catalog {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS reported.
        #[source]
        source: std::io::Error,
    },
    /// The extension is neither `.toml` nor `.json`.
    #[error("model catalog {} must end in .toml or .json", .path.display())]
    UnsupportedFormat {
        /// The file.
        path: PathBuf,
    },
    /// The file is not valid TOML or does not have the catalog's shape
    /// (unknown field, wrong type, negative count …).
    #[error("cannot parse model catalog {} as toml", .path.display())]
    Toml {
        /// The file.
        path: PathBuf,
        /// What the parser reported, with line and column.
        #[source]
        source: toml::de::Error,
    },
    /// The file is not valid JSON or does not have the catalog's shape.
    #[error("cannot parse model catalog {} as json", .path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// What the parser reported, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// An entry parses but describes an invalid model.
    #[error("invalid model {id:?} (entry {entry} of `models`) in {}", .path.display())]
    InvalidModel {
        /// The file.
        path: PathBuf,
        /// The entry's 1-based position in the file's `models` list.
        entry: usize,
        /// The entry's id.
        id: String,
        /// What is wrong with it.
        #[source]
        source: ModelProblem,
    },
}

/// The models Scribe knows, by id.
///
/// [`ModelCatalog::default`] is [`ModelCatalog::builtin`].
///
/// A catalog names no default model, on purpose: it holds prices and limits, while the
/// model a program talks to is its provider's (an API key, a local server), and a
/// charge must be priced as the model that was called. A program names its model where
/// it calls one: [`AgentConfig::with_model`](crate::AgentConfig::with_model), a
/// prompt's or session's model, or the id it gives
/// [`ReplyWriter::finish_charged`](crate::ReplyWriter::finish_charged); without any,
/// the runner's answer is [`AgentError::NoModel`](crate::AgentError::NoModel), never a
/// guess.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCatalog {
    models: BTreeMap<String, Model>,
}

impl Default for ModelCatalog {
    fn default() -> Self {
        ModelCatalog::builtin()
    }
}

impl ModelCatalog {
    /// A catalog with no models.
    pub fn empty() -> ModelCatalog {
        ModelCatalog {
            models: BTreeMap::new(),
        }
    }

    /// The built-in defaults (see [`builtin_models`]).
    pub fn builtin() -> ModelCatalog {
        ModelCatalog {
            models: builtin_models()
                .into_iter()
                .map(|m| (m.id.clone(), m))
                .collect(),
        }
    }

    /// The built-in defaults with the file at `path` applied.
    pub fn load(path: impl AsRef<Path>) -> Result<ModelCatalog, CatalogError> {
        let mut catalog = ModelCatalog::builtin();
        catalog.apply_file(path)?;
        Ok(catalog)
    }

    /// Applies the catalog file at `path` (format from its extension); returns
    /// how many entries it held. On error the catalog is unchanged.
    pub fn apply_file(&mut self, path: impl AsRef<Path>) -> Result<usize, CatalogError> {
        let path = path.as_ref();
        let format =
            CatalogFormat::from_path(path).ok_or_else(|| CatalogError::UnsupportedFormat {
                path: path.to_owned(),
            })?;
        let text = std::fs::read_to_string(path).map_err(|source| CatalogError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.apply_str(&text, format, path)
    }

    /// Applies catalog `text` in `format`; `origin` names it in errors.
    /// Returns how many entries it held. On error the catalog is unchanged.
    pub fn apply_str(
        &mut self,
        text: &str,
        format: CatalogFormat,
        origin: &Path,
    ) -> Result<usize, CatalogError> {
        let file: CatalogFile = match format {
            CatalogFormat::Toml => toml::from_str(text).map_err(|source| CatalogError::Toml {
                path: origin.to_owned(),
                source,
            })?,
            CatalogFormat::Json => {
                serde_json::from_str(text).map_err(|source| CatalogError::Json {
                    path: origin.to_owned(),
                    source,
                })?
            }
        };
        let count = file.models.len();
        // Resolve every entry against the current catalog before changing it,
        // so a bad entry late in the file leaves no half-applied state.
        let mut resolved: BTreeMap<String, Model> = BTreeMap::new();
        for (i, entry) in file.models.into_iter().enumerate() {
            let id = entry.id.clone();
            let invalid = |source| CatalogError::InvalidModel {
                path: origin.to_owned(),
                entry: i + 1,
                id: id.clone(),
                source,
            };
            if resolved.contains_key(&id) {
                return Err(invalid(ModelProblem::DuplicateId));
            }
            let model = entry.resolve(self.models.get(&id)).map_err(invalid)?;
            model.validate().map_err(invalid)?;
            resolved.insert(id, model);
        }
        self.models.extend(resolved);
        Ok(count)
    }

    /// Adds or replaces a model after validating it; returns the one replaced.
    pub fn insert(&mut self, model: Model) -> Result<Option<Model>, ModelProblem> {
        model.validate()?;
        Ok(self.models.insert(model.id.clone(), model))
    }

    /// The model with this id.
    pub fn get(&self, id: &str) -> Option<&Model> {
        self.models.get(id)
    }

    /// Whether a model with this id exists.
    pub fn contains(&self, id: &str) -> bool {
        self.models.contains_key(id)
    }

    /// Every model, ordered by id.
    pub fn iter(&self) -> impl Iterator<Item = &Model> + '_ {
        self.models.values()
    }

    /// How many models there are.
    pub fn len(&self) -> usize {
        self.models.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// The whole catalog as a TOML catalog file (a starting point for users).
    pub fn to_toml_string(&self) -> Result<String, toml::ser::Error> {
        #[derive(Serialize)]
        struct Out<'a> {
            models: Vec<&'a Model>,
        }
        toml::to_string(&Out {
            models: self.models.values().collect(),
        })
    }
}

impl<'a> IntoIterator for &'a ModelCatalog {
    type Item = &'a Model;
    type IntoIter = std::collections::btree_map::Values<'a, String, Model>;

    fn into_iter(self) -> Self::IntoIter {
        self.models.values()
    }
}

/// The on-disk shape of a catalog file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    #[serde(default)]
    models: Vec<ModelEntry>,
}

/// One entry: every field but the id is optional, so an entry can override
/// part of an existing model.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelEntry {
    id: String,
    provider: Option<String>,
    name: Option<String>,
    context_window: Option<u64>,
    max_output_tokens: Option<u64>,
    pricing: Option<PricingEntry>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PricingEntry {
    input_per_mtok: Option<f64>,
    output_per_mtok: Option<f64>,
    cache_write_per_mtok: Option<f64>,
    cache_read_per_mtok: Option<f64>,
    /// Replaces the model's long-prompt prices (all of them: no field is optional).
    long_prompt: Option<LongPromptPricing>,
}

impl ModelEntry {
    fn resolve(self, existing: Option<&Model>) -> Result<Model, ModelProblem> {
        let pricing = self.pricing.unwrap_or_default();
        if let Some(base) = existing {
            return Ok(Model {
                id: self.id,
                provider: self.provider.unwrap_or_else(|| base.provider.clone()),
                name: self.name.unwrap_or_else(|| base.name.clone()),
                context_window: self.context_window.unwrap_or(base.context_window),
                max_output_tokens: self.max_output_tokens.unwrap_or(base.max_output_tokens),
                pricing: Pricing {
                    input_per_mtok: pricing
                        .input_per_mtok
                        .unwrap_or(base.pricing.input_per_mtok),
                    output_per_mtok: pricing
                        .output_per_mtok
                        .unwrap_or(base.pricing.output_per_mtok),
                    cache_write_per_mtok: pricing
                        .cache_write_per_mtok
                        .unwrap_or(base.pricing.cache_write_per_mtok),
                    cache_read_per_mtok: pricing
                        .cache_read_per_mtok
                        .unwrap_or(base.pricing.cache_read_per_mtok),
                    long_prompt: pricing.long_prompt.or(base.pricing.long_prompt),
                },
            });
        }
        let missing = |field| ModelProblem::MissingField { field };
        Ok(Model {
            provider: self.provider.ok_or(missing("provider"))?,
            name: self.name.unwrap_or_else(|| self.id.clone()),
            context_window: self.context_window.ok_or(missing("context_window"))?,
            max_output_tokens: self.max_output_tokens.ok_or(missing("max_output_tokens"))?,
            pricing: Pricing {
                input_per_mtok: pricing
                    .input_per_mtok
                    .ok_or(missing("pricing.input_per_mtok"))?,
                output_per_mtok: pricing
                    .output_per_mtok
                    .ok_or(missing("pricing.output_per_mtok"))?,
                cache_write_per_mtok: pricing.cache_write_per_mtok.unwrap_or(0.0),
                cache_read_per_mtok: pricing.cache_read_per_mtok.unwrap_or(0.0),
                long_prompt: pricing.long_prompt,
            },
            id: self.id,
        })
    }
}

/// The built-in model set: defaults, not a promise.
///
/// Prices and limits are the providers' published list prices as of 2026
/// (USD per million tokens; Anthropic cache writes at the 5-minute rate;
/// OpenAI, Google, xAI and Moonshot charge no cache-write premium, so their
/// cache-write price is the input price, and Z.ai none at all; Mistral
/// publishes no cache price for Devstral, so a cached token costs an input
/// token; a long prompt's prices where the provider has them). Every price
/// agrees with the [models.dev](https://models.dev) catalog (the provider's own
/// entry) and with ccusage 20.0.24's (`ccusage codex session --offline`);
/// models whose prices those two disagree on are left out rather than guessed
/// (DeepSeek, whose prices change with the hour; Qwen's coder models, priced in
/// four prompt-length tiers; Kimi K2's preview and K2 Thinking; Grok 4.1 Fast and
/// 4.3; GLM-5). Providers change prices; override any of them in a catalog file.
pub fn builtin_models() -> Vec<Model> {
    // (id, provider, name, window, max output, [input, output, cache write, cache read])
    type Row = (&'static str, &'static str, &'static str, u64, u64, [f64; 4]);
    #[rustfmt::skip]
    const TABLE: &[Row] = &[
        // Anthropic Claude 4.x
        ("claude-opus-4-8", "anthropic", "Claude Opus 4.8", 1_000_000, 128_000, [5.0, 25.0, 6.25, 0.50]),
        ("claude-opus-4-7", "anthropic", "Claude Opus 4.7", 1_000_000, 128_000, [5.0, 25.0, 6.25, 0.50]),
        ("claude-opus-4-6", "anthropic", "Claude Opus 4.6", 1_000_000, 128_000, [5.0, 25.0, 6.25, 0.50]),
        ("claude-opus-4-5", "anthropic", "Claude Opus 4.5", 200_000, 64_000, [5.0, 25.0, 6.25, 0.50]),
        ("claude-opus-4-1", "anthropic", "Claude Opus 4.1", 200_000, 32_000, [15.0, 75.0, 18.75, 1.50]),
        ("claude-opus-4", "anthropic", "Claude Opus 4", 200_000, 32_000, [15.0, 75.0, 18.75, 1.50]),
        ("claude-sonnet-4-6", "anthropic", "Claude Sonnet 4.6", 1_000_000, 64_000, [3.0, 15.0, 3.75, 0.30]),
        ("claude-sonnet-4-5", "anthropic", "Claude Sonnet 4.5", 200_000, 64_000, [3.0, 15.0, 3.75, 0.30]),
        ("claude-sonnet-4", "anthropic", "Claude Sonnet 4", 200_000, 64_000, [3.0, 15.0, 3.75, 0.30]),
        ("claude-haiku-4-5", "anthropic", "Claude Haiku 4.5", 200_000, 64_000, [1.0, 5.0, 1.25, 0.10]),
        // Anthropic Claude 3.x, still in 2025's histories
        ("claude-3-7-sonnet", "anthropic", "Claude Sonnet 3.7", 200_000, 64_000, [3.0, 15.0, 3.75, 0.30]),
        ("claude-3-5-sonnet", "anthropic", "Claude Sonnet 3.5", 200_000, 8_192, [3.0, 15.0, 3.75, 0.30]),
        ("claude-3-5-haiku", "anthropic", "Claude Haiku 3.5", 200_000, 8_192, [0.80, 4.0, 1.0, 0.08]),
        // OpenAI GPT-5 and its Codex models (a 400k window: 272k of input, 128k of output)
        ("gpt-5.5", "openai", "GPT-5.5", 1_050_000, 128_000, [5.0, 30.0, 5.0, 0.50]),
        ("gpt-5.4", "openai", "GPT-5.4", 1_050_000, 128_000, [2.50, 15.0, 2.50, 0.25]),
        ("gpt-5.3-codex", "openai", "GPT-5.3 Codex", 400_000, 128_000, [1.75, 14.0, 1.75, 0.175]),
        ("gpt-5.2-codex", "openai", "GPT-5.2 Codex", 400_000, 128_000, [1.75, 14.0, 1.75, 0.175]),
        ("gpt-5.2", "openai", "GPT-5.2", 400_000, 128_000, [1.75, 14.0, 1.75, 0.175]),
        ("gpt-5.1-codex-max", "openai", "GPT-5.1 Codex Max", 400_000, 128_000, [1.25, 10.0, 1.25, 0.125]),
        ("gpt-5.1-codex-mini", "openai", "GPT-5.1 Codex mini", 400_000, 128_000, [0.25, 2.0, 0.25, 0.025]),
        ("gpt-5.1-codex", "openai", "GPT-5.1 Codex", 400_000, 128_000, [1.25, 10.0, 1.25, 0.125]),
        ("gpt-5.1", "openai", "GPT-5.1", 400_000, 128_000, [1.25, 10.0, 1.25, 0.125]),
        ("gpt-5-codex", "openai", "GPT-5 Codex", 400_000, 128_000, [1.25, 10.0, 1.25, 0.125]),
        ("gpt-5-mini", "openai", "GPT-5 mini", 400_000, 128_000, [0.25, 2.0, 0.25, 0.025]),
        ("gpt-5-nano", "openai", "GPT-5 nano", 400_000, 128_000, [0.05, 0.40, 0.05, 0.005]),
        ("gpt-5", "openai", "GPT-5", 400_000, 128_000, [1.25, 10.0, 1.25, 0.125]),
        // OpenAI GPT-4.1, GPT-4o and o-series
        ("gpt-4.1", "openai", "GPT-4.1", 1_047_576, 32_768, [2.0, 8.0, 2.0, 0.50]),
        ("gpt-4.1-mini", "openai", "GPT-4.1 mini", 1_047_576, 32_768, [0.40, 1.60, 0.40, 0.10]),
        ("gpt-4.1-nano", "openai", "GPT-4.1 nano", 1_047_576, 32_768, [0.10, 0.40, 0.10, 0.025]),
        ("gpt-4o", "openai", "GPT-4o", 128_000, 16_384, [2.50, 10.0, 2.50, 1.25]),
        ("gpt-4o-mini", "openai", "GPT-4o mini", 128_000, 16_384, [0.15, 0.60, 0.15, 0.075]),
        ("o1", "openai", "o1", 200_000, 100_000, [15.0, 60.0, 15.0, 7.50]),
        ("o3", "openai", "o3", 200_000, 100_000, [2.0, 8.0, 2.0, 0.50]),
        ("o3-mini", "openai", "o3-mini", 200_000, 100_000, [1.10, 4.40, 1.10, 0.55]),
        ("o4-mini", "openai", "o4-mini", 200_000, 100_000, [1.10, 4.40, 1.10, 0.275]),
        // Google Gemini 3 and 2.5
        ("gemini-3.1-pro-preview", "google", "Gemini 3.1 Pro Preview", 1_048_576, 65_536, [2.0, 12.0, 2.0, 0.20]),
        ("gemini-3-pro-preview", "google", "Gemini 3 Pro Preview", 1_000_000, 64_000, [2.0, 12.0, 2.0, 0.20]),
        ("gemini-3-flash-preview", "google", "Gemini 3 Flash Preview", 1_048_576, 65_536, [0.50, 3.0, 0.50, 0.05]),
        ("gemini-2.5-pro", "google", "Gemini 2.5 Pro", 1_048_576, 65_536, [1.25, 10.0, 1.25, 0.125]),
        ("gemini-2.5-flash", "google", "Gemini 2.5 Flash", 1_048_576, 65_536, [0.30, 2.50, 0.30, 0.03]),
        ("gemini-2.5-flash-lite", "google", "Gemini 2.5 Flash-Lite", 1_048_576, 65_536, [0.10, 0.40, 0.10, 0.01]),
        // xAI Grok: no cache-write premium
        ("grok-code-fast-1", "xai", "Grok Code Fast 1", 256_000, 10_000, [0.20, 1.50, 0.20, 0.02]),
        ("grok-4-fast", "xai", "Grok 4 Fast", 2_000_000, 30_000, [0.20, 0.50, 0.20, 0.05]),
        ("grok-4", "xai", "Grok 4", 256_000, 8_192, [3.0, 15.0, 3.0, 0.75]),
        ("grok-3-mini", "xai", "Grok 3 Mini", 131_072, 8_192, [0.30, 0.50, 0.30, 0.075]),
        ("grok-3", "xai", "Grok 3", 131_072, 8_192, [3.0, 15.0, 3.0, 0.75]),
        // Moonshot Kimi: no cache-write premium
        ("kimi-k2.6", "moonshotai", "Kimi K2.6", 262_144, 262_144, [0.95, 4.0, 0.95, 0.16]),
        ("kimi-k2.5", "moonshotai", "Kimi K2.5", 262_144, 262_144, [0.60, 3.0, 0.60, 0.10]),
        ("kimi-k2-thinking-turbo", "moonshotai", "Kimi K2 Thinking Turbo", 262_144, 262_144, [1.15, 8.0, 1.15, 0.15]),
        // Z.ai GLM: cache writes are free
        ("glm-4.7", "zai", "GLM-4.7", 204_800, 131_072, [0.60, 2.20, 0.0, 0.11]),
        ("glm-4.6", "zai", "GLM-4.6", 204_800, 131_072, [0.60, 2.20, 0.0, 0.11]),
        ("glm-4.5", "zai", "GLM-4.5", 131_072, 98_304, [0.60, 2.20, 0.0, 0.11]),
        ("glm-4.5-air", "zai", "GLM-4.5-Air", 131_072, 98_304, [0.20, 1.10, 0.0, 0.03]),
        // Mistral Devstral: no cache price published, so a cached token is an input token
        ("devstral-2512", "mistral", "Devstral 2", 262_144, 262_144, [0.40, 2.0, 0.40, 0.40]),
        ("devstral-medium-2507", "mistral", "Devstral Medium", 128_000, 128_000, [0.40, 2.0, 0.40, 0.40]),
        ("devstral-small-2507", "mistral", "Devstral Small", 128_000, 128_000, [0.10, 0.30, 0.10, 0.10]),
    ];
    // Long prompts: (id, above this many prompt tokens, [input, output, cache write,
    // cache read]). Claude Sonnet 4 and 4.5 and Gemini 2.5 Pro and 3.1 Pro as models.dev
    // and ccusage 20.0.24 price them; Gemini 3 Pro as Google's price list and models.dev
    // do (ccusage has no tier for it); GPT-5.5's as models.dev and ccusage. GPT-5.4's
    // (which ccusage has above 272k) is left out: models.dev does not confirm it.
    #[rustfmt::skip]
    const LONG: &[(&str, u64, [f64; 4])] = &[
        ("claude-sonnet-4-5", 200_000, [6.0, 22.5, 7.5, 0.60]),
        ("claude-sonnet-4", 200_000, [6.0, 22.5, 7.5, 0.60]),
        ("gpt-5.5", 272_000, [10.0, 45.0, 10.0, 1.0]),
        ("gemini-3.1-pro-preview", 200_000, [4.0, 18.0, 4.0, 0.40]),
        ("gemini-3-pro-preview", 200_000, [4.0, 18.0, 4.0, 0.40]),
        ("gemini-2.5-pro", 200_000, [2.50, 15.0, 2.50, 0.25]),
    ];
    TABLE
        .iter()
        .map(
            |&(id, provider, name, window, max_out, [i, o, cw, cr])| Model {
                id: id.to_owned(),
                provider: provider.to_owned(),
                name: name.to_owned(),
                context_window: window,
                max_output_tokens: max_out,
                pricing: Pricing {
                    input_per_mtok: i,
                    output_per_mtok: o,
                    cache_write_per_mtok: cw,
                    cache_read_per_mtok: cr,
                    long_prompt: LONG.iter().find(|l| l.0 == id).map(
                        |&(_, above_tokens, [i, o, cw, cr])| LongPromptPricing {
                            above_tokens,
                            input_per_mtok: i,
                            output_per_mtok: o,
                            cache_write_per_mtok: cw,
                            cache_read_per_mtok: cr,
                        },
                    ),
                },
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    fn usage(
        input: i64,
        output: i64,
        cache_read: i64,
        cache_write: i64,
        reasoning: i64,
    ) -> TokenUsage {
        TokenUsage {
            input,
            output,
            cache_read,
            cache_write,
            reasoning,
        }
    }

    fn assert_close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn cost_sums_all_four_kinds_with_correct_prices() {
        let sonnet = ModelCatalog::builtin()
            .get("claude-sonnet-4-5")
            .cloned()
            .unwrap();
        // 12_345 in × 3 + 6_789 out × 15 + 100_000 read × 0.30 + 20_000 write × 3.75
        let u = usage(12_345, 6_789, 100_000, 20_000, 0);
        let expected = (12_345.0 * 3.0 + 6_789.0 * 15.0 + 100_000.0 * 0.30 + 20_000.0 * 3.75) / 1e6;
        assert_close(sonnet.cost(&u), expected);
        assert_close(sonnet.cost(&u), 0.037035 + 0.101835 + 0.03 + 0.075);
        // Cache reads are billed at the cache-read price, not the output price (prompts
        // of 100k tokens: below the long-prompt threshold).
        assert_close(sonnet.cost(&usage(0, 0, 100_000, 0, 0)), 0.030);
        assert_close(sonnet.cost(&usage(0, 0, 0, 100_000, 0)), 0.375);
        assert_close(sonnet.cost(&usage(0, 1_000_000, 0, 0, 0)), 15.0);
        assert_close(sonnet.cost(&TokenUsage::default()), 0.0);
    }

    /// A call whose prompt (input, cache reads and writes together) is over the threshold
    /// costs the long-prompt prices for all of its tokens, output included; at the
    /// threshold it does not, as Anthropic bills a request over 200k input tokens (cache
    /// reads and writes counted) and as ccusage 20.0.24 prices a Codex call of Claude
    /// Sonnet 4.5: 199,999 and 200,000 at $3, 200,001 at $6 per million. (ccusage's
    /// Claude Code report charges only each kind's tokens beyond 200k the higher price.)
    #[test]
    fn a_long_prompt_costs_the_long_prompt_prices() {
        let sonnet = ModelCatalog::builtin()
            .get("claude-sonnet-4-5")
            .cloned()
            .unwrap();
        assert_close(sonnet.cost(&usage(200_000, 0, 0, 0, 0)), 0.6);
        assert_close(
            sonnet.cost(&usage(200_001, 0, 0, 0, 0)),
            200_001.0 * 6.0 / 1e6,
        );
        // The prompt counts cached tokens: 150k read back + 50,001 new is long.
        let long = usage(50_001, 1_000, 150_000, 0, 500);
        assert_close(
            sonnet.cost(&long),
            (50_001.0 * 6.0 + 1_500.0 * 22.5 + 150_000.0 * 0.60) / 1e6,
        );
        let written = usage(1, 0, 0, 200_000, 0);
        assert_close(sonnet.cost(&written), (6.0 + 200_000.0 * 7.5) / 1e6);
        // A sum over calls is charged at the base prices.
        assert_close(
            sonnet.pricing.base_cost(&usage(200_001, 0, 0, 0, 0)),
            200_001.0 * 3.0 / 1e6,
        );
        // A model without long-prompt prices costs the same at any length.
        let haiku = ModelCatalog::builtin()
            .get("claude-haiku-4-5")
            .cloned()
            .unwrap();
        assert!(haiku.pricing.long_prompt.is_none());
        assert_close(haiku.cost(&usage(1_000_000, 0, 0, 0, 0)), 1.0);

        // In a catalog file: given whole, replacing a model's; a zero threshold and a
        // bad price refused by name.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        std::fs::write(
            &path,
            "[[models]]\nid = \"claude-haiku-4-5\"\n[models.pricing.long_prompt]\n\
             above_tokens = 100\ninput_per_mtok = 2.0\noutput_per_mtok = 10.0\n\
             cache_write_per_mtok = 2.5\ncache_read_per_mtok = 0.2\n",
        )
        .unwrap();
        let catalog = ModelCatalog::load(&path).unwrap();
        let haiku = catalog.get("claude-haiku-4-5").unwrap();
        assert_eq!(haiku.pricing.input_per_mtok, 1.0);
        assert_close(haiku.cost(&usage(100, 0, 0, 0, 0)), 100.0 / 1e6);
        assert_close(
            haiku.cost(&usage(101, 10, 0, 0, 0)),
            (101.0 * 2.0 + 100.0) / 1e6,
        );
        // Written out and read back, the long-prompt prices are kept.
        let mut round_trip = ModelCatalog::empty();
        let text = catalog.to_toml_string().unwrap();
        round_trip
            .apply_str(&text, CatalogFormat::Toml, &path)
            .unwrap();
        assert_eq!(round_trip, catalog);
        for (text, problem) in [
            (
                "above_tokens = 0\ninput_per_mtok = 1.0",
                "above_tokens must be greater than 0",
            ),
            (
                "above_tokens = 5\ninput_per_mtok = -1.0",
                "long_prompt.input_per_mtok",
            ),
        ] {
            std::fs::write(
                &path,
                format!(
                    "[[models]]\nid = \"gpt-5\"\n[models.pricing.long_prompt]\n{text}\n\
                     output_per_mtok = 1.0\ncache_write_per_mtok = 1.0\ncache_read_per_mtok = 0.1\n"
                ),
            )
            .unwrap();
            let err = ModelCatalog::load(&path).unwrap_err();
            assert!(
                crate::error_chain(&err).contains(problem),
                "{}",
                crate::error_chain(&err)
            );
        }
    }

    #[test]
    fn separately_reported_reasoning_is_billed_as_output() {
        let p = Pricing {
            input_per_mtok: 1.25,
            output_per_mtok: 10.0,
            cache_write_per_mtok: 1.25,
            cache_read_per_mtok: 0.31,
            long_prompt: None,
        };
        // Gemini-style: 500 visible + 1_500 thinking tokens, both billed at output.
        assert_close(
            p.cost(&usage(1_000, 500, 0, 0, 1_500)),
            (1_000.0 * 1.25 + 2_000.0 * 10.0) / 1e6,
        );
    }

    #[test]
    fn inclusive_reasoning_is_normalised_not_double_billed() {
        let p = Pricing {
            input_per_mtok: 2.0,
            output_per_mtok: 8.0,
            cache_write_per_mtok: 2.0,
            cache_read_per_mtok: 0.5,
            long_prompt: None,
        };
        // OpenAI-style: completion_tokens = 2_000 of which 1_500 reasoning.
        let reported = usage(1_000, 2_000, 300, 0, 1_500);
        let u = disjoint_usage(reported);
        assert_eq!((u.output, u.reasoning), (500, 1_500));
        assert_eq!(u.input, 1_000);
        assert_eq!(u.cache_read, 300);
        assert_close(
            p.cost(&u),
            (1_000.0 * 2.0 + 2_000.0 * 8.0 + 300.0 * 0.5) / 1e6,
        );
        // Reasoning larger than output (bad data) is capped, never negative.
        let odd = disjoint_usage(usage(0, 10, 0, 0, 50));
        assert_eq!((odd.output, odd.reasoning), (0, 10));
    }

    #[test]
    fn negative_counters_cost_nothing() {
        let p = ModelCatalog::builtin().get("gpt-4o").unwrap().pricing;
        assert_close(p.cost(&usage(-5, -5, -5, -5, -5)), 0.0);
    }

    #[test]
    fn builtin_catalog_is_valid_and_covers_the_families() {
        let catalog = ModelCatalog::default();
        for m in &catalog {
            m.validate().unwrap();
        }
        for id in [
            "claude-opus-4-5",
            "claude-sonnet-4-5",
            "claude-haiku-4-5",
            "gpt-4.1",
            "gpt-4o",
            "o3",
            "o4-mini",
            "gemini-2.5-pro",
            "gemini-2.5-flash",
            "gpt-5",
            "gpt-5-codex",
            "gpt-5.3-codex",
            "claude-opus-4-8",
            "claude-sonnet-4-6",
            "gemini-3-pro-preview",
            "grok-code-fast-1",
            "kimi-k2.6",
            "glm-4.6",
            "devstral-2512",
        ] {
            assert!(catalog.contains(id), "{id}");
        }
        let ids: Vec<_> = catalog.iter().map(|m| m.id.as_str()).collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert_eq!(ids, sorted);
        assert!(catalog.get("nope").is_none());
    }

    #[test]
    fn toml_overrides_part_of_a_model_and_adds_new_ones() {
        let mut catalog = ModelCatalog::builtin();
        let before = catalog.get("gpt-4o").cloned().unwrap();
        let n = catalog
            .apply_str(
                r#"
                [[models]]
                id = "gpt-4o"
                pricing = { input_per_mtok = 2 }

                [[models]]
                id = "local"
                provider = "ollama"
                context_window = 32768
                max_output_tokens = 8192
                pricing = { input_per_mtok = 0.0, output_per_mtok = 0.0 }
                "#,
                CatalogFormat::Toml,
                Path::new("models.toml"),
            )
            .unwrap();
        assert_eq!(n, 2);
        let gpt = catalog.get("gpt-4o").unwrap();
        assert_close(gpt.pricing.input_per_mtok, 2.0);
        assert_eq!(gpt.pricing.output_per_mtok, before.pricing.output_per_mtok);
        assert_eq!(gpt.context_window, before.context_window);
        let local = catalog.get("local").unwrap();
        assert_eq!(local.name, "local");
        assert_eq!(local.pricing, Pricing::FREE);
    }

    #[test]
    fn json_catalog_is_read_too() {
        let mut catalog = ModelCatalog::empty();
        catalog
            .apply_str(
                r#"{"models":[{"id":"m","provider":"p","name":"M","context_window":1000,
                   "max_output_tokens":100,"pricing":{"input_per_mtok":1,"output_per_mtok":2,
                   "cache_write_per_mtok":3,"cache_read_per_mtok":0.5}}]}"#,
                CatalogFormat::Json,
                Path::new("m.json"),
            )
            .unwrap();
        let m = catalog.get("m").unwrap();
        assert_eq!(m.pricing.cache_read_per_mtok, 0.5);
        assert_eq!(catalog.len(), 1);
    }

    fn apply_err(text: &str, format: CatalogFormat) -> CatalogError {
        let mut catalog = ModelCatalog::builtin();
        let before = catalog.clone();
        let err = catalog
            .apply_str(text, format, Path::new("/home/u/models.toml"))
            .unwrap_err();
        assert_eq!(catalog, before, "a failed file must not change the catalog");
        err
    }

    #[test]
    fn unknown_field_is_a_parse_error_with_path_and_cause() {
        let err = apply_err(
            "[[models]]\nid = \"gpt-4o\"\ncontext_windw = 5\n",
            CatalogFormat::Toml,
        );
        assert!(matches!(err, CatalogError::Toml { .. }));
        assert!(err.to_string().contains("/home/u/models.toml"), "{err}");
        let cause = err.source().unwrap().to_string();
        assert!(cause.contains("context_windw"), "{cause}");

        let err = apply_err(
            r#"{"models":[{"id":"gpt-4o","prize":1}]}"#,
            CatalogFormat::Json,
        );
        assert!(matches!(err, CatalogError::Json { .. }));
        assert!(err.source().unwrap().to_string().contains("prize"));
    }

    #[test]
    fn invalid_values_name_the_entry_and_cause() {
        let err = apply_err(
            "[[models]]\nid = \"gpt-4o\"\n\n[[models]]\nid = \"gpt-4.1\"\npricing = { cache_read_per_mtok = -0.5 }\n",
            CatalogFormat::Toml,
        );
        let CatalogError::InvalidModel {
            entry, id, source, ..
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!((*entry, id.as_str()), (2, "gpt-4.1"));
        assert_eq!(
            *source,
            ModelProblem::InvalidPrice {
                field: "cache_read_per_mtok",
                value: -0.5
            }
        );
        assert!(err.to_string().contains("\"gpt-4.1\""));
        assert!(err.source().unwrap().to_string().contains("non-negative"));

        let err = apply_err(
            "[[models]]\nid = \"gpt-4o\"\ncontext_window = 0\n",
            CatalogFormat::Toml,
        );
        assert!(matches!(
            err,
            CatalogError::InvalidModel {
                source: ModelProblem::ZeroContextWindow,
                ..
            }
        ));
        let err = apply_err(
            "[[models]]\nid = \"gpt-4o\"\nmax_output_tokens = 0\n",
            CatalogFormat::Toml,
        );
        assert!(matches!(
            err,
            CatalogError::InvalidModel {
                source: ModelProblem::ZeroMaxOutput,
                ..
            }
        ));
        let err = apply_err(
            "[[models]]\nid = \"gpt-4o\"\nmax_output_tokens = 200000\n",
            CatalogFormat::Toml,
        );
        assert!(matches!(
            err,
            CatalogError::InvalidModel {
                source: ModelProblem::MaxOutputExceedsWindow { .. },
                ..
            }
        ));
        let err = apply_err(
            "[[models]]\nid = \"new\"\nprovider = \"x\"\ncontext_window = 10\n",
            CatalogFormat::Toml,
        );
        assert!(matches!(
            err,
            CatalogError::InvalidModel {
                source: ModelProblem::MissingField {
                    field: "max_output_tokens"
                },
                ..
            }
        ));
        let err = apply_err(
            "[[models]]\nid = \"gpt-4o\"\n[[models]]\nid = \"gpt-4o\"\n",
            CatalogFormat::Toml,
        );
        assert!(matches!(
            err,
            CatalogError::InvalidModel {
                entry: 2,
                source: ModelProblem::DuplicateId,
                ..
            }
        ));
        let err = apply_err(
            "[[models]]\nid = \"gpt-4o\"\ncontext_window = -1\n",
            CatalogFormat::Toml,
        );
        assert!(matches!(err, CatalogError::Toml { .. }));
        let err = apply_err(
            r#"{"models":[{"id":"gpt-4o","pricing":{"input_per_mtok":"cheap"}}]}"#,
            CatalogFormat::Json,
        );
        assert!(matches!(err, CatalogError::Json { .. }));
    }

    #[test]
    fn files_are_chosen_by_extension() {
        let dir = tempfile::tempdir().unwrap();
        let toml_path = dir.path().join("models.TOML");
        std::fs::write(
            &toml_path,
            "[[models]]\nid = \"o3\"\nname = \"o3 (mine)\"\n",
        )
        .unwrap();
        let catalog = ModelCatalog::load(&toml_path).unwrap();
        assert_eq!(catalog.get("o3").unwrap().name, "o3 (mine)");

        let json_path = dir.path().join("models.json");
        std::fs::write(
            &json_path,
            r#"{"models":[{"id":"o3","max_output_tokens":1000}]}"#,
        )
        .unwrap();
        assert_eq!(
            ModelCatalog::load(&json_path)
                .unwrap()
                .get("o3")
                .unwrap()
                .max_output_tokens,
            1000
        );

        let yaml = dir.path().join("models.yaml");
        std::fs::write(&yaml, "").unwrap();
        assert!(matches!(
            ModelCatalog::load(&yaml),
            Err(CatalogError::UnsupportedFormat { .. })
        ));

        let missing = dir.path().join("missing.toml");
        let err = ModelCatalog::load(&missing).unwrap_err();
        assert!(matches!(err, CatalogError::Read { .. }));
        assert!(err.to_string().contains("missing.toml"));
    }

    #[test]
    fn exported_toml_round_trips() {
        let catalog = ModelCatalog::builtin();
        let text = catalog.to_toml_string().unwrap();
        let mut back = ModelCatalog::empty();
        back.apply_str(&text, CatalogFormat::Toml, Path::new("x.toml"))
            .unwrap();
        assert_eq!(back, catalog);
    }

    #[test]
    fn insert_validates() {
        let mut catalog = ModelCatalog::empty();
        let mut m = ModelCatalog::builtin().get("o3").cloned().unwrap();
        m.pricing.output_per_mtok = f64::NAN;
        assert!(matches!(
            catalog.insert(m.clone()),
            Err(ModelProblem::InvalidPrice { .. })
        ));
        m.pricing.output_per_mtok = 8.0;
        assert_eq!(catalog.insert(m.clone()).unwrap(), None);
        assert_eq!(
            catalog.insert(m).unwrap().map(|m| m.id),
            Some("o3".to_owned())
        );
    }
}
