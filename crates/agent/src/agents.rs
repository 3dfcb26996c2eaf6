//! Agent definitions: [`AgentConfig`] (model, system prompt, allowed tools,
//! step limit, compaction settings, default permission rules) and the
//! [`AgentRegistry`] a runner picks them from by name.

use std::collections::{BTreeMap, BTreeSet};

use crate::compaction::CompactionConfig;
use crate::permission::Ruleset;

/// One agent: who answers, with what, and how far it may go.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// The name prompts and the `task` tool refer to it by.
    pub name: String,
    /// What it is for (shown to a parent agent choosing a sub-agent).
    pub description: String,
    /// Its model; `None`: the session's.
    pub model: Option<String>,
    /// Its system prompt; `None`: the session's.
    pub system_prompt: Option<String>,
    /// The tools it may call; `None`: every registered tool (and `task`).
    pub tools: Option<BTreeSet<String>>,
    /// The most model calls one prompt may make before the loop stops with
    /// finish reason `max_steps`.
    pub max_steps: usize,
    /// When and how its conversations are compacted.
    pub compaction: CompactionConfig,
    /// Rules applied before the session's own (which win on conflicts).
    pub permission: Ruleset,
}

impl AgentConfig {
    /// An agent called `name` with every tool, 25 steps and default compaction.
    pub fn new(name: impl Into<String>) -> AgentConfig {
        AgentConfig {
            name: name.into(),
            description: String::new(),
            model: None,
            system_prompt: None,
            tools: None,
            max_steps: 25,
            compaction: CompactionConfig::default(),
            permission: Ruleset::default(),
        }
    }

    /// Sets the description.
    pub fn with_description(mut self, description: impl Into<String>) -> AgentConfig {
        self.description = description.into();
        self
    }

    /// Sets the model.
    pub fn with_model(mut self, model: impl Into<String>) -> AgentConfig {
        self.model = Some(model.into());
        self
    }

    /// Sets the system prompt.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> AgentConfig {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Limits the tools to `tools`.
    pub fn with_tools<S: Into<String>>(
        mut self,
        tools: impl IntoIterator<Item = S>,
    ) -> AgentConfig {
        self.tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the step limit (at least 1).
    pub fn with_max_steps(mut self, max_steps: usize) -> AgentConfig {
        self.max_steps = max_steps.max(1);
        self
    }

    /// Sets the compaction settings.
    pub fn with_compaction(mut self, compaction: CompactionConfig) -> AgentConfig {
        self.compaction = compaction;
        self
    }

    /// Sets the default permission rules.
    pub fn with_permission(mut self, permission: Ruleset) -> AgentConfig {
        self.permission = permission;
        self
    }

    /// Whether the agent may call `tool`.
    pub fn allows(&self, tool: &str) -> bool {
        self.tools.as_ref().is_none_or(|t| t.contains(tool))
    }
}

/// The agents a runner knows, with a default for prompts that name none.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRegistry {
    agents: BTreeMap<String, AgentConfig>,
    default: String,
}

impl Default for AgentRegistry {
    fn default() -> Self {
        AgentRegistry::new(AgentConfig::new("build"))
    }
}

impl AgentRegistry {
    /// A registry whose default (and only) agent is `default`.
    pub fn new(default: AgentConfig) -> AgentRegistry {
        let name = default.name.clone();
        AgentRegistry {
            agents: BTreeMap::from([(name.clone(), default)]),
            default: name,
        }
    }

    /// Adds (or replaces) an agent.
    pub fn with(mut self, agent: AgentConfig) -> AgentRegistry {
        self.agents.insert(agent.name.clone(), agent);
        self
    }

    /// The agent called `name`, or [`AgentError::UnknownAgent`](crate::AgentError::UnknownAgent).
    pub(crate) fn agent(&self, name: &str) -> Result<AgentConfig, crate::AgentError> {
        self.get(name)
            .cloned()
            .ok_or_else(|| crate::AgentError::UnknownAgent(name.to_owned()))
    }

    /// The agent called `name`.
    pub fn get(&self, name: &str) -> Option<&AgentConfig> {
        self.agents.get(name)
    }

    /// The default agent's name.
    pub fn default_name(&self) -> &str {
        &self.default
    }

    /// Every agent, by name.
    pub fn iter(&self) -> impl Iterator<Item = &AgentConfig> + '_ {
        self.agents.values()
    }
}
