//! The tasks a sub-agent's calls become, recorded with the calling turn's (its store):
//! under the key `{caller's call}/{tool}/{call}` (a grandchild's under its caller's, and
//! so on), so that after a crash the top-level turn, finding its agent call open, waits
//! again on the tasks its sub-agents were waiting on.

use std::sync::Arc;

use buddy_core::{BoxFuture, RecordedTask, TaskLog};

/// The separator of a child task's key.
const SEP: char = '/';

/// A sub-agent's task log: its calls' tasks go to `inner` under `key`.
#[derive(Debug)]
pub(crate) struct ChildTasks {
    key: String,
    inner: Arc<dyn TaskLog>,
}

impl ChildTasks {
    /// The log of the sub-agent that agent call `call_id` of a turn recording in `inner`
    /// runs.
    pub(crate) fn of_call(call_id: &str, inner: Arc<dyn TaskLog>) -> Arc<dyn TaskLog> {
        Arc::new(ChildTasks {
            key: call_id.to_owned(),
            inner,
        })
    }
}

impl TaskLog for ChildTasks {
    fn created<'a>(&'a self, call_id: &'a str, task: &'a RecordedTask) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let key = format!("{}{SEP}{call_id}", self.key);
            self.inner.created(&key, task).await;
        })
    }

    fn for_call(&self, name: &str) -> Option<Arc<dyn TaskLog>> {
        Some(Arc::new(ChildTasks {
            key: format!("{}{SEP}{name}", self.key),
            inner: Arc::clone(&self.inner),
        }))
    }
}

/// The tasks recorded for the sub-agents of agent call `call_id` among `recorded` (by
/// key), as (the tool, the call, the task), in key order.
pub(crate) fn of_agent_call<'a>(
    call_id: &str,
    recorded: impl Iterator<Item = (&'a String, &'a RecordedTask)>,
) -> Vec<(String, String, RecordedTask)> {
    let prefix = format!("{call_id}{SEP}");
    let mut found: Vec<(String, String, RecordedTask)> = recorded
        .filter(|(key, _)| key.starts_with(&prefix))
        .filter_map(|(key, task)| {
            let mut parts = key.rsplitn(3, SEP);
            let call = parts.next()?;
            let tool = parts.next()?;
            parts.next()?;
            Some((tool.to_owned(), call.to_owned(), task.clone()))
        })
        .collect();
    found.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Debug, Default)]
    struct Kept(Mutex<Vec<String>>);

    impl TaskLog for Kept {
        fn created<'a>(&'a self, call_id: &'a str, _: &'a RecordedTask) -> BoxFuture<'a, ()> {
            Box::pin(async move { self.0.lock().unwrap().push(call_id.to_owned()) })
        }
    }

    fn task(id: &str) -> RecordedTask {
        RecordedTask {
            server: "s".into(),
            task_id: id.into(),
        }
    }

    #[tokio::test]
    async fn a_sub_agents_tasks_are_kept_under_its_callers_call_and_found_again() {
        let store = Arc::new(Kept::default());
        let child = ChildTasks::of_call("a1", Arc::clone(&store) as Arc<dyn TaskLog>);
        let per_call = child.for_call("export").unwrap();
        per_call.created("c7", &task("t1")).await;
        // A grandchild, started by the child's agent call b3.
        let grandchild = ChildTasks::of_call("b3", Arc::clone(&child));
        grandchild
            .for_call("fetch")
            .unwrap()
            .created("c9", &task("t2"))
            .await;
        let keys = store.0.lock().unwrap().clone();
        assert_eq!(keys, ["a1/export/c7", "a1/b3/fetch/c9"]);
        let recorded: std::collections::HashMap<String, RecordedTask> = keys
            .iter()
            .cloned()
            .zip([task("t1"), task("t2")])
            .chain([("a10/export/c1".to_owned(), task("other"))])
            .collect();
        assert_eq!(
            of_agent_call("a1", recorded.iter()),
            [
                ("export".to_owned(), "c7".to_owned(), task("t1")),
                ("fetch".to_owned(), "c9".to_owned(), task("t2")),
            ]
        );
        assert!(of_agent_call("a2", recorded.iter()).is_empty());
    }
}
