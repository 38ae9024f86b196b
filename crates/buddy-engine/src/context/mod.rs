//! Context: counting tokens per model, the window each model has, and trimming a
//! history to fit it without ever breaking it.

pub(crate) mod budget;
mod counter;
pub mod shed;
mod trim;
mod windows;

pub use counter::{
    BpeCounter, COUNT_FORMULA, EstimateCounter, TokenCounter, count_key, counter_for_model,
};
pub use trim::{Fitted, LOW_WATER_PERCENT, Overflow, fit, fit_stepped};
pub use windows::{default_reserve, default_window};
