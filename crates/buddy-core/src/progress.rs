//! What a running tool call tells about itself before its result: progress (an MCP
//! server's `notifications/progress`) and the status of the task behind it (an MCP
//! task's `working`, `input_required`, …). The engine turns it into `tool_progress`
//! events, rate-limited; it is never part of the model's history.

use serde::{Deserialize, Serialize};

/// One update of a running call. Each field it sets replaces the call's last value of
/// that field; the ones it leaves `None` keep theirs, but for the message, which a new
/// status always replaces.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Work done so far (grows with each update, in the server's units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<f64>,
    /// The work there is in all, when the server knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// What the server says it is doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The status of the task running the call (`working`, `input_required`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl Progress {
    /// `self` with the fields `newer` sets replaced by its values.
    pub fn merged(mut self, newer: Progress) -> Progress {
        if newer.progress.is_some() {
            self.progress = newer.progress;
        }
        if newer.total.is_some() {
            self.total = newer.total;
        }
        // A new status comes with its own message (or none): the old one told of the
        // old status.
        if newer.message.is_some() || newer.status.is_some() {
            self.message = newer.message;
        }
        if newer.status.is_some() {
            self.status = newer.status;
        }
        self
    }
}

/// Where a running call reports its progress; the engine hands one to every call
/// ([`crate::SkillContext::progress`]). `report` never blocks: the engine coalesces
/// updates that come faster than it passes them on.
pub trait ProgressSink: std::fmt::Debug + Send + Sync {
    /// Notes `update` for the call.
    fn report(&self, update: Progress);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_replaces_only_the_fields_it_sets() {
        let first = Progress {
            progress: Some(3.0),
            total: Some(10.0),
            message: Some("copying".into()),
            status: None,
        };
        let status = Progress {
            status: Some("working".into()),
            ..Progress::default()
        };
        let merged = first.clone().merged(status);
        assert_eq!(merged.progress, Some(3.0));
        assert_eq!(merged.status.as_deref(), Some("working"));
        assert_eq!(merged.message, None, "the new status has no message");
        let later = merged.merged(Progress {
            progress: Some(4.0),
            message: Some("indexing".into()),
            ..Progress::default()
        });
        assert_eq!(
            later,
            Progress {
                progress: Some(4.0),
                total: Some(10.0),
                message: Some("indexing".into()),
                status: Some("working".into()),
            }
        );
    }
}
