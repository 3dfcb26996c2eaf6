//! Cost of imported usage: the source's own figure where it reports one, otherwise an
//! estimate from Scribe's pricing catalog (`scribe_agent::models`), and where neither is
//! possible the tokens are kept and the cost is said to be unknown.
//!
//! Every message records where its cost came from as bits ([`REPORTED`], [`ESTIMATED`],
//! [`UNKNOWN`]); a session ORs its messages' bits, and its `cost_status` says it in words:
//! `reported`, `estimated`, `reported+estimated`, `partial` (some usage has no price) or
//! `unknown` (none has).

use scribe_agent::models::{Model, ModelCatalog};
use scribe_message::TokenUsage;

use crate::record::MessageRec;

/// The cost is the source's own figure.
pub const REPORTED: u8 = 1;
/// The cost is estimated from the pricing catalog.
pub const ESTIMATED: u8 = 2;
/// Some usage is of a model the catalog does not price: its cost is not counted.
pub const UNKNOWN: u8 = 4;

/// Prices usage with a model catalog.
#[derive(Debug, Clone)]
pub struct Pricer {
    catalog: ModelCatalog,
}

impl Default for Pricer {
    fn default() -> Self {
        Pricer::new(ModelCatalog::builtin())
    }
}

impl Pricer {
    /// A pricer over `catalog`.
    pub fn new(catalog: ModelCatalog) -> Self {
        Pricer { catalog }
    }

    /// The catalog model a source's model name means: the name itself, or without a
    /// `provider/` prefix, a `-YYYYMMDD` / `@YYYYMMDD` date, or a `-latest` suffix
    /// (`claude-sonnet-4-20250514` is `claude-sonnet-4`).
    pub fn model(&self, name: &str) -> Option<&Model> {
        let name = name.trim();
        let name = name.rsplit('/').next().unwrap_or(name);
        if let Some(m) = self.catalog.get(name) {
            return Some(m);
        }
        let undated = strip_date(name);
        let base = undated.strip_suffix("-latest").unwrap_or(undated);
        self.catalog.get(base)
    }

    /// The version of its prices: a digest of every model's id and prices (FNV-1a), so
    /// two catalogs that price alike have the same version. Stored with the sessions it
    /// priced (`pricing_version`); usage left without a price is looked at again only
    /// under another version ([`crate::sink::Sink::reprice`]).
    pub fn version(&self) -> String {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                hash ^= u64::from(*b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        };
        for m in &self.catalog {
            eat(m.id.as_bytes());
            eat(&[0]);
            let p = m.pricing;
            for price in [
                p.input_per_mtok,
                p.output_per_mtok,
                p.cache_write_per_mtok,
                p.cache_read_per_mtok,
            ] {
                eat(&price.to_bits().to_le_bytes());
            }
        }
        format!("catalog-{hash:016x}")
    }

    /// What `usage` of `model` costs, when the catalog knows the model.
    pub fn estimate(&self, model: Option<&str>, usage: &TokenUsage) -> Option<f64> {
        self.model(model?).map(|m| m.cost(usage))
    }

    /// Sets `rec`'s cost and cost bits: the reported cost, else the estimate, else 0 with
    /// [`UNKNOWN`] (only when it has usage; a message without tokens costs nothing).
    pub fn apply(&self, rec: &mut MessageRec) {
        let usage = rec.message.usage;
        if let Some(cost) = rec.reported_cost.filter(|c| c.is_finite() && *c >= 0.0) {
            rec.message.cost_usd = cost;
            rec.cost_flags = REPORTED;
            return;
        }
        if usage.is_zero() {
            rec.message.cost_usd = 0.0;
            rec.cost_flags = 0;
            return;
        }
        match self.estimate(rec.message.model.as_deref(), &usage) {
            Some(cost) => {
                rec.message.cost_usd = cost;
                rec.cost_flags = ESTIMATED;
            }
            None => {
                rec.message.cost_usd = 0.0;
                rec.cost_flags = UNKNOWN;
            }
        }
    }
}

fn strip_date(name: &str) -> &str {
    for sep in ['-', '@'] {
        if let Some((head, tail)) = name.rsplit_once(sep)
            && tail.len() == 8
            && tail.bytes().all(|b| b.is_ascii_digit())
        {
            return head;
        }
    }
    name
}

/// `cost_status` of a session whose messages' cost bits OR to `flags`.
pub fn status(flags: u8) -> Option<&'static str> {
    let known = flags & (REPORTED | ESTIMATED);
    Some(match (known, flags & UNKNOWN != 0) {
        (0, false) => return None,
        (0, true) => "unknown",
        (_, true) => "partial",
        (REPORTED, false) => "reported",
        (ESTIMATED, false) => "estimated",
        _ => "reported+estimated",
    })
}

/// `cost_source` of such a session: the agent, the catalog, or both.
pub fn source(flags: u8, agent: &str) -> Option<String> {
    match (flags & REPORTED != 0, flags & ESTIMATED != 0) {
        (true, true) => Some(format!("{agent}+pricing-catalog")),
        (true, false) => Some(agent.to_owned()),
        (false, true) => Some("pricing-catalog".to_owned()),
        (false, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dated_and_prefixed_names_find_their_model() {
        let p = Pricer::default();
        assert_eq!(
            p.model("claude-sonnet-4-20250514").map(|m| m.id.as_str()),
            Some("claude-sonnet-4")
        );
        assert_eq!(
            p.model("anthropic/claude-opus-4-1").map(|m| m.id.as_str()),
            Some("claude-opus-4-1")
        );
        assert_eq!(
            p.model("openai/gpt-5.3-codex").map(|m| m.id.as_str()),
            Some("gpt-5.3-codex")
        );
        assert!(p.model("gpt-5.6-luna").is_none());
        assert!(p.model("<synthetic>").is_none());
        assert_eq!(status(0), None);
        assert_eq!(status(ESTIMATED), Some("estimated"));
        assert_eq!(status(ESTIMATED | UNKNOWN), Some("partial"));
        assert_eq!(status(UNKNOWN), Some("unknown"));
        assert_eq!(status(REPORTED | ESTIMATED), Some("reported+estimated"));
    }
}
