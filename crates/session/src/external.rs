//! Sessions that another agent recorded, as an importer of its history writes them:
//! [`SessionService::upsert_external_tx`] and [`SessionService::add_usage_at_tx`], with
//! [`SessionService::exists_tx`] for an importer choosing a free id.
//!
//! An importer reads the same conversation again as it grows, so it writes a session
//! however often it sees it, with the source's own id, times, parent and end. Times come
//! from the source, never from the clock: importing old history must not make it look
//! recent.

use scribe_db::queries as q;
use scribe_db::{Reads, Tx};
use scribe_pubsub::EventKind;
use serde_json::Value;

use crate::error::{Result, SessionError};
use crate::service::{SessionService, free_title, load};
use crate::session::{Session, SessionKind, json_text};
use crate::title::normalize_optional_title;
use crate::usage::UsageDelta;

/// A session as another agent's history shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalSession {
    /// The id to store it under.
    pub id: String,
    /// Its parent, which must already be stored (`None` while it is not).
    pub parent_session_id: Option<String>,
    /// What it is (a sub-agent's run is [`SessionKind::Task`]).
    pub kind: SessionKind,
    /// The agent that recorded it (`claude-code`, `codex` …; not empty).
    pub source: String,
    /// The working directory.
    pub directory: Option<String>,
    /// The title the source gave it; normalized, and when another session holds it, the
    /// next free title of its lineage (`t #2`) is used.
    pub title: Option<String>,
    /// The model it used most.
    pub model: Option<String>,
    /// Model settings as JSON.
    pub model_config: Option<Value>,
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// The provider that billed it.
    pub billing_provider: Option<String>,
    /// The provider's API base URL.
    pub billing_base_url: Option<String>,
    /// Whether the cost is reported by the source, estimated, or unknown (`None` keeps
    /// the stored value, as for every optional field of a stored session).
    pub cost_status: Option<String>,
    /// Where the cost figures came from.
    pub cost_source: Option<String>,
    /// The version of the prices its cost was estimated with (`None` keeps the stored
    /// value).
    pub pricing_version: Option<String>,
    /// When it started (ms).
    pub created_at: i64,
    /// Its last activity (ms); the stored value never moves backwards.
    pub updated_at: i64,
    /// When it ended, if the source says.
    pub ended_at: Option<i64>,
    /// Why it ended.
    pub end_reason: Option<String>,
}

impl SessionService {
    /// Creates session `external.id` as given, or brings a stored one up to date: title,
    /// directory, model and settings, cost status, parent, kind and end take the given
    /// values; `updated_at` the later of the stored and the given one. Counters and usage
    /// are untouched (messages move the counters; add usage with
    /// [`SessionService::add_usage_at_tx`]). Returns the session and whether it was created.
    ///
    /// Inside the caller's transaction; queues `created` for a new session and `updated`
    /// for a stored one that changed. Errors: an empty id or source
    /// ([`SessionError::InvalidInput`]), an id or source longer than
    /// [`scribe_db::ids::MAX_ID_BYTES`] ([`SessionError::IdTooLong`]), a parent that is not stored
    /// ([`SessionError::NotFound`]), an unusable title ([`SessionError::InvalidTitle`],
    /// [`SessionError::TitleTooLong`]).
    pub fn upsert_external_tx(
        &self,
        tx: &mut Tx<'_>,
        external: &ExternalSession,
    ) -> Result<(Session, bool)> {
        let e = external;
        if e.id.trim().is_empty() || e.source.trim().is_empty() {
            return Err(SessionError::InvalidInput(
                "an imported session needs an id and a source".to_owned(),
            ));
        }
        scribe_db::ids::check_id("session", &e.id)?;
        scribe_db::ids::check_id("source", &e.source)?;
        if let Some(parent) = &e.parent_session_id
            && !tx.q().session_exists(parent)?
        {
            return Err(SessionError::not_found("parent session", parent.as_str()));
        }
        let existing = tx.q().get_session(&e.id)?;
        let title = match normalize_optional_title(e.title.as_deref())? {
            None => None,
            Some(title) => Some(free_title(tx, &title, &e.id)?),
        };
        crate::service::ensure_storable_texts(
            tx,
            &e.id,
            e.directory.as_deref(),
            e.system_prompt.as_deref(),
            e.model.as_deref(),
        )?;
        let model_config = json_text(e.model_config.as_ref());
        let Some(row) = existing else {
            tx.q().import_session(&q::ImportSessionParams {
                id: &e.id,
                parent_session_id: e.parent_session_id.as_deref(),
                kind: e.kind.as_str(),
                source: &e.source,
                user_id: None,
                directory: e.directory.as_deref(),
                title: title.as_deref(),
                model: e.model.as_deref(),
                model_config: model_config.as_deref(),
                system_prompt: e.system_prompt.as_deref(),
                permission: None,
                api_call_count: 0,
                input_tokens: 0,
                output_tokens: 0,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                reasoning_tokens: 0,
                estimated_cost_usd: 0.0,
                actual_cost_usd: None,
                billing_provider: e.billing_provider.as_deref(),
                billing_base_url: e.billing_base_url.as_deref(),
                billing_mode: None,
                cost_status: e.cost_status.as_deref(),
                cost_source: e.cost_source.as_deref(),
                pricing_version: e.pricing_version.as_deref(),
                created_at: e.created_at,
                updated_at: e.updated_at.max(e.created_at),
                ended_at: e.ended_at,
                end_reason: e.end_reason.as_deref(),
                archived_at: None,
            })?;
            let session = load(tx, &e.id)?;
            self.announce(tx, EventKind::Created, &session);
            return Ok((session, true));
        };
        let current = Session::try_from(row)?;
        // A title the session already holds in the same lineage (`t #2` for `t`) stays.
        let title = match (&title, &current.title) {
            (Some(_), Some(held)) if title_matches(held, e.title.as_deref()) => Some(held.clone()),
            (Some(new), _) => Some(new.clone()),
            (None, held) => held.clone(),
        };
        let updated_at = current.updated_at.max(e.updated_at);
        let fields_changed = title != current.title
            || (e.directory.is_some() && e.directory != current.directory)
            || (e.model.is_some() && e.model != current.model)
            || (e.model_config.is_some() && e.model_config != current.model_config)
            || (e.system_prompt.is_some() && e.system_prompt != current.system_prompt)
            || (e.billing_provider.is_some() && e.billing_provider != current.billing_provider)
            || (e.billing_base_url.is_some() && e.billing_base_url != current.billing_base_url)
            || (e.cost_status.is_some() && e.cost_status != current.cost_status)
            || (e.cost_source.is_some() && e.cost_source != current.cost_source)
            || (e.pricing_version.is_some() && e.pricing_version != current.pricing_version);
        if fields_changed {
            let pick = |new: &Option<String>, old: &Option<String>| new.clone().or(old.clone());
            let model_config = json_text(e.model_config.as_ref().or(current.model_config.as_ref()));
            let permission = json_text(current.permission.as_ref());
            tx.q().update_session(&q::UpdateSessionParams {
                title: title.as_deref(),
                directory: pick(&e.directory, &current.directory).as_deref(),
                model: pick(&e.model, &current.model).as_deref(),
                model_config: model_config.as_deref(),
                system_prompt: pick(&e.system_prompt, &current.system_prompt).as_deref(),
                permission: permission.as_deref(),
                summary_message_id: current.summary_message_id.as_deref(),
                billing_provider: pick(&e.billing_provider, &current.billing_provider).as_deref(),
                billing_base_url: pick(&e.billing_base_url, &current.billing_base_url).as_deref(),
                billing_mode: current.billing_mode.as_deref(),
                cost_status: pick(&e.cost_status, &current.cost_status).as_deref(),
                cost_source: pick(&e.cost_source, &current.cost_source).as_deref(),
                pricing_version: pick(&e.pricing_version, &current.pricing_version).as_deref(),
                now: updated_at,
                id: &e.id,
            })?;
        }
        let parent = e
            .parent_session_id
            .clone()
            .or(current.parent_session_id.clone());
        let (ended_at, end_reason) = match e.ended_at {
            Some(_) => (e.ended_at, e.end_reason.clone()),
            None => (current.ended_at, current.end_reason.clone()),
        };
        let link_changed = parent != current.parent_session_id
            || e.kind != current.kind
            || ended_at != current.ended_at
            || end_reason != current.end_reason;
        if link_changed {
            tx.q()
                .update_external_session(&q::UpdateExternalSessionParams {
                    parent_session_id: parent.as_deref(),
                    kind: e.kind.as_str(),
                    ended_at,
                    end_reason: end_reason.as_deref(),
                    updated_at,
                    id: &e.id,
                })?;
        }
        // The counter triggers moved updated_at to the new messages' times (before V23
        // the sessions_touch trigger to the database's clock): put it where the source
        // says it is.
        tx.q()
            .restore_session_updated_at(&q::RestoreSessionUpdatedAtParams {
                updated_at,
                id: &e.id,
            })?;
        let session = load(tx, &e.id)?;
        if session != current {
            self.announce(tx, EventKind::Updated, &session);
        }
        Ok((session, false))
    }

    /// Adds `delta` to session `id` atomically, as [`SessionService::add_usage_tx`] does
    /// (a zero delta adds nothing), and sets its `updated_at` to `last_activity` (ms): the
    /// importer knows when the conversation last moved; the clock and the counter
    /// triggers (which move it to the time of the write) do not. Inside the caller's
    /// transaction; returns the session as it now is and queues `updated` (an importer
    /// calls this once per session it wrote to, so the event carries the counters its
    /// messages moved too).
    pub fn add_usage_at_tx(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        delta: &UsageDelta,
        last_activity: i64,
    ) -> Result<Session> {
        delta.validate()?;
        let before = load(tx, id)?;
        let target = last_activity.max(before.created_at);
        let zero = delta.tokens.is_zero()
            && delta.api_calls == 0
            && delta.tool_calls == 0
            && delta.cost_usd == 0.0
            && delta.actual_cost_usd.is_none();
        if !zero {
            tx.q()
                .add_session_usage_delta(&q::AddSessionUsageDeltaParams {
                    input_tokens: delta.tokens.input,
                    output_tokens: delta.tokens.output,
                    cache_read_tokens: delta.tokens.cache_read,
                    cache_write_tokens: delta.tokens.cache_write,
                    reasoning_tokens: delta.tokens.reasoning,
                    api_call_count: delta.api_calls,
                    tool_call_count: delta.tool_calls,
                    estimated_cost_usd: delta.cost_usd,
                    now: target,
                    id,
                })?;
        }
        if let Some(actual) = delta.actual_cost_usd {
            tx.q()
                .add_session_actual_cost(&q::AddSessionActualCostParams {
                    actual_cost_usd: actual,
                    now: target,
                    id,
                })?;
        }
        tx.q()
            .restore_session_updated_at(&q::RestoreSessionUpdatedAtParams {
                updated_at: target,
                id,
            })?;
        let session = load(tx, id)?;
        self.announce(tx, EventKind::Updated, &session);
        Ok(session)
    }

    /// Whether session `id` is stored, as `tx` sees it (an importer keeps the source's
    /// id only when no other session has it).
    pub fn exists_tx(tx: &mut dyn Reads, id: &str) -> Result<bool> {
        Ok(tx.reads().session_exists(id)?)
    }
}

/// Whether `held` is `wanted` or a numbered member of its lineage.
fn title_matches(held: &str, wanted: Option<&str>) -> bool {
    let Some(Ok(Some(wanted))) = wanted.map(|w| normalize_optional_title(Some(w))) else {
        return false;
    };
    let (base, _) = crate::title::split_lineage(held);
    held == wanted || base == wanted
}
