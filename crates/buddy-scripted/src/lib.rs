//! buddy's offline world — scenarios (built into the binary), the scripted model that
//! plays them, their stub tools, the runner that checks a scenario's expected outcome,
//! the OpenAI-compatible mock model server and the loop benchmark — so that everything
//! buddy does can be run and measured without a real model.

pub mod bench_loops;
mod clock;
pub mod library;
pub mod mock_server;
mod provider;
mod render;
mod rules;
pub mod run;
mod scenario;
mod stub_skill;
pub mod tools;

pub use clock::{ClockKind, SimClock};
pub use provider::ScriptedProvider;
pub use rules::{CallTemplate, Condition, ErrorTemplate, ReplyTemplate, Rule};
pub use scenario::{
    Expectation, Scenario, ScenarioError, ScenarioTool, StubResult, StubTool, TimedResult,
};
pub use stub_skill::StubSkill;
