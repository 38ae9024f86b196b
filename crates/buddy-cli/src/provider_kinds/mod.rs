//! Provider kinds as backends: each kind (OpenAI, Anthropic, the scripted world) says
//! once how a session and the server build it, and a registry maps a declared
//! provider's kind to its backend, so no caller branches on the kind.

mod scripted;

use std::path::Path;
use std::sync::Arc;

use buddy_core::{Provider, ProviderError};
use buddy_providers::{ProviderConfig, ProviderKind};
use buddy_scripted::Scenario;

use buddy_scripted::ScenarioError;

use crate::config::BuddyConfig;

pub use scripted::{ModelsError, ScenarioModel, ScriptedBackend, scenario_models};

/// A provider could not be chosen or built.
#[derive(Debug, thiserror::Error)]
pub enum KindError {
    /// No provider has this name, and it is no kind.
    #[error(
        "no provider named `{name}` ({declared}): add a [providers.{name}] table to buddy.toml \
         (`buddy init` writes one for a local server it finds), or name a kind: openai, anthropic, scripted"
    )]
    UnknownProvider { name: String, declared: String },
    /// No backend is registered for a kind.
    #[error("no backend builds providers of kind `{0}`")]
    NoBackend(&'static str),
    /// `--scenario` with a provider that plays none.
    #[error(
        "--scenario plays the scripted model; it cannot be combined with the {kind} provider `{name}`"
    )]
    ScenarioWithHttp { kind: String, name: String },
    /// An HTTP provider without a model.
    #[error(
        "provider `{name}` needs a model: pass --model or set `model` under [providers.{name}]"
    )]
    NoModel { name: String },
    /// A provider could not be built.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// A scenario is unreadable or invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// `--scenario` names neither a file nor a built-in scenario.
    #[error(transparent)]
    ScenarioNotFound(#[from] buddy_scripted::library::LibraryError),
}

/// Reads an environment variable (callers and tests choose the source).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Which provider a command asked for on its command line, and the overrides it gave.
#[derive(Clone, Debug, Default)]
pub struct ProviderChoice {
    /// `--provider`: a `[providers.NAME]` of buddy.toml, or a kind.
    pub provider: Option<String>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--no-stream`.
    pub no_stream: bool,
    /// `--tool-choice-auto`.
    pub tool_choice_auto: bool,
    /// `--no-stream-options`.
    pub no_stream_options: bool,
    /// `--assistant-content-empty-string`.
    pub assistant_content_empty_string: bool,
    /// `--output-limit-field`.
    pub output_limit_field: Option<buddy_providers::OutputLimitField>,
}

/// The provider a command uses: its name and its configuration with the overrides applied.
#[derive(Clone, Debug)]
pub struct Chosen {
    /// Its name in buddy.toml, the kind named on the command line, or the fallback's.
    pub name: String,
    /// Its declaration (or a kind's defaults), with the command line's overrides.
    pub config: ProviderConfig,
}

/// What a session asks of its provider beyond the chosen declaration.
pub struct SessionWants<'a> {
    /// `--model`.
    pub model: Option<&'a str>,
    /// `--scenario`.
    pub scenario: Option<&'a Path>,
    /// True when a provider was named (`--provider` or `default_provider`).
    pub named: bool,
    /// Where a backend's word to the person goes (stderr, for the commands).
    pub notify: &'a dyn Fn(&str),
    /// A person is at the terminal: an HTTP MCP server that asks for OAuth sends them to
    /// the browser (otherwise its error says to run `buddy mcp login`).
    pub attended: bool,
}

/// A session's provider as its backend built it.
pub struct SessionProvider {
    /// The provider turns call.
    pub provider: Arc<dyn Provider>,
    /// The model name turns ask for (and policy patterns match).
    pub model: String,
    /// The scenario it plays, when it plays one (its tools, prompt, system and policy).
    pub scenario: Option<Scenario>,
}

/// One kind of provider: how a session and the server build it.
pub trait ProviderBackend: Send + Sync {
    /// The kind this backend builds.
    fn kind(&self) -> ProviderKind;

    /// Builds the provider for one `run` or `chat` session.
    fn session(
        &self,
        chosen: &Chosen,
        wants: &SessionWants<'_>,
        env: Env<'_>,
    ) -> Result<SessionProvider, KindError>;

    /// Builds a declared provider for the server; `None` when the server offers this
    /// kind another way (the scripted world serves every scenario as a model).
    fn served(
        &self,
        name: &str,
        declared: &ProviderConfig,
        env: Env<'_>,
    ) -> Result<Option<Arc<dyn Provider>>, ProviderError>;

    /// True when buddy's built-in list prices apply to its models.
    fn list_priced(&self) -> bool {
        true
    }

    /// For `buddy doctor`: why there is nothing to probe, when there is nothing.
    fn nothing_to_probe(&self) -> Option<&'static str> {
        None
    }
}

/// A provider reached over HTTP (OpenAI Chat Completions or Anthropic Messages).
struct HttpBackend(ProviderKind);

impl ProviderBackend for HttpBackend {
    fn kind(&self) -> ProviderKind {
        self.0
    }

    fn session(
        &self,
        chosen: &Chosen,
        wants: &SessionWants<'_>,
        env: Env<'_>,
    ) -> Result<SessionProvider, KindError> {
        let name = &chosen.name;
        if wants.scenario.is_some() {
            return Err(KindError::ScenarioWithHttp {
                kind: chosen.config.kind.display_name().to_owned(),
                name: name.clone(),
            });
        }
        let model = wants
            .model
            .map(str::to_owned)
            .or_else(|| chosen.config.model.clone())
            .ok_or_else(|| KindError::NoModel { name: name.clone() })?;
        let provider = chosen.config.build_http(name, env)?;
        Ok(SessionProvider {
            provider,
            model,
            scenario: None,
        })
    }

    fn served(
        &self,
        name: &str,
        declared: &ProviderConfig,
        env: Env<'_>,
    ) -> Result<Option<Arc<dyn Provider>>, ProviderError> {
        declared.build_http(name, env).map(Some)
    }
}

/// Every provider kind buddy can build, and the one used when none is named.
pub struct Backends {
    kinds: Vec<Box<dyn ProviderBackend>>,
    /// Used when neither the command line nor buddy.toml names a provider.
    fallback: Box<dyn ProviderBackend>,
}

impl Default for Backends {
    fn default() -> Self {
        Backends {
            kinds: vec![
                Box::new(HttpBackend(ProviderKind::Openai)),
                Box::new(HttpBackend(ProviderKind::Anthropic)),
            ],
            fallback: Box::new(ScriptedBackend),
        }
    }
}

impl Backends {
    /// The backend of `kind`.
    pub fn get(&self, kind: ProviderKind) -> Result<&dyn ProviderBackend, KindError> {
        std::iter::once(&self.fallback)
            .chain(&self.kinds)
            .find(|b| b.kind() == kind)
            .map(|b| &**b)
            .ok_or(KindError::NoBackend(kind.as_str()))
    }

    /// The provider named on the command line or in buddy.toml, or the fallback (the
    /// scripted model), with the command line's overrides applied.
    pub fn choose(
        &self,
        config: &BuddyConfig,
        choice: &ProviderChoice,
    ) -> Result<Chosen, KindError> {
        let Some(name) = choice
            .provider
            .clone()
            .or_else(|| config.default_provider.clone())
        else {
            let kind = self.fallback.kind();
            return Ok(Chosen {
                name: kind.as_str().to_owned(),
                config: ProviderConfig::of_kind(kind),
            });
        };
        let mut chosen = match (config.providers.get(&name), ProviderKind::parse(&name)) {
            (Some(declared), _) => declared.clone(),
            (None, Some(kind)) => ProviderConfig::of_kind(kind),
            (None, None) => {
                let known: Vec<&str> = config.providers.keys().map(String::as_str).collect();
                let declared = if known.is_empty() {
                    "no buddy.toml declares any provider".to_owned()
                } else {
                    format!("buddy.toml declares [{}]", known.join(", "))
                };
                return Err(KindError::UnknownProvider { name, declared });
            }
        };
        if let Some(url) = &choice.base_url {
            chosen.base_url = Some(url.clone());
        }
        if choice.no_stream {
            chosen.stream = false;
        }
        chosen.compat.tool_choice_auto |= choice.tool_choice_auto;
        chosen.compat.no_stream_options |= choice.no_stream_options;
        chosen.compat.assistant_content_empty_string |= choice.assistant_content_empty_string;
        if let Some(field) = choice.output_limit_field {
            chosen.compat.output_limit_field = Some(field);
        }
        Ok(Chosen {
            name,
            config: chosen,
        })
    }
}
