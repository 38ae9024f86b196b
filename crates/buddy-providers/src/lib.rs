//! buddy-providers: the models buddy can drive.
//!
//! Today: the [`scripted`] model, a deterministic offline model driven by JSON
//! scenarios, used by the demo, the tests and the benchmarks.

pub mod scripted;

pub use scripted::{Scenario, ScenarioError, ScriptedProvider};
