//! The scripted world as a provider backend: a session plays one scenario (named, or
//! the built-in offline assistant); the server offers every scenario as a model
//! (`scripted:<name>`). The only place that knows the scripted kind.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use buddy_core::{Provider, ProviderError};
use buddy_providers::{ProviderConfig, ProviderKind};
use buddy_scripted::library::{LibraryError, builtin, default_scenario, find, scenario_files};
use buddy_scripted::{Scenario, ScenarioError, ScriptedProvider};

use super::{Chosen, Env, KindError, ProviderBackend, SessionProvider, SessionWants};

/// buddy's offline scripted model, registered as the fallback provider kind.
pub struct ScriptedBackend;

impl ProviderBackend for ScriptedBackend {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Scripted
    }

    fn session(
        &self,
        chosen: &Chosen,
        wants: &SessionWants<'_>,
        _env: Env<'_>,
    ) -> Result<SessionProvider, KindError> {
        if let (Some(model), false) = (wants.model, wants.named) {
            (wants.notify)(&format!(
                "buddy: --model {model} names no provider, so buddy's built-in scripted model answers \
                 (under that name); pass --provider (openai, anthropic or one in buddy.toml) to call {model}"
            ));
        }
        let scenario = match wants.scenario.or(chosen.config.scenario.as_deref()) {
            Some(path) => find(path)?,
            None => default_scenario()?,
        };
        let model = wants
            .model
            .map_or_else(|| format!("scripted:{}", scenario.name), str::to_owned);
        let provider = Arc::new(ScriptedProvider::new(Arc::new(scenario.clone())));
        Ok(SessionProvider {
            provider,
            model,
            scenario: Some(scenario),
        })
    }

    fn served(
        &self,
        _name: &str,
        _declared: &ProviderConfig,
        _env: Env<'_>,
    ) -> Result<Option<Arc<dyn Provider>>, ProviderError> {
        Ok(None)
    }

    /// The scripted model costs nothing unless buddy.toml prices it, whatever name it
    /// answers under (`--model gpt-4o` must not bill it at gpt-4o's list price).
    fn list_priced(&self) -> bool {
        false
    }

    fn nothing_to_probe(&self) -> Option<&'static str> {
        Some("scripted: buddy's offline model, nothing to probe (name one: --provider NAME)")
    }
}

/// One scenario the server offers as a model.
pub struct ScenarioModel {
    /// The scenario (its tools, policy and system prompt go with every turn).
    pub scenario: Scenario,
    /// Shared across turns, so call ids stay unique in a conversation.
    pub provider: Arc<ScriptedProvider>,
}

/// Every scenario the server offers, by name: the built-in ones (embedded in the
/// binary), then a scenarios directory's, which replace built-ins of the same name.
pub fn scenario_models(dir: Option<&Path>) -> Result<BTreeMap<String, ScenarioModel>, ModelsError> {
    let mut models = BTreeMap::new();
    let mut add = |scenario: Scenario| {
        let provider = Arc::new(ScriptedProvider::new(Arc::new(scenario.clone())));
        models.insert(scenario.name.clone(), ScenarioModel { scenario, provider });
    };
    add(default_scenario()?);
    for scenario in builtin()? {
        add(scenario);
    }
    if let Some(dir) = dir.filter(|d| d.is_dir()) {
        for file in scenario_files(dir)? {
            add(Scenario::load(&file)?);
        }
    }
    Ok(models)
}

/// The server's scenarios could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
    /// A scenario file is unreadable or invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The scenarios directory could not be listed.
    #[error(transparent)]
    Library(#[from] LibraryError),
}
