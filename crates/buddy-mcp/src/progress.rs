//! A server's progress, routed to the call it belongs to: `notifications/progress` by
//! the request's progress token (rmcp puts one on every request), `notifications/tasks`
//! and `tasks/get` answers by task id. What comes for a token or task not yet routed (a
//! fast server can notify before the caller has its request's token) is held, bounded,
//! and handed over when the route is made.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use buddy_core::{Progress, ProgressSink};
use rmcp::model::{ProgressNotificationParam, ProgressToken, Task};

/// Updates held for routes not made yet; older ones are dropped first.
const HELD: usize = 32;

/// What a notification names its call by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RouteKey {
    Token(ProgressToken),
    Task(String),
}

#[derive(Default)]
struct Table {
    routes: HashMap<RouteKey, Arc<dyn ProgressSink>>,
    held: VecDeque<(RouteKey, Progress)>,
}

/// The routes of one server connection.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    table: Mutex<Table>,
}

impl std::fmt::Debug for ProgressRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressRoutes")
    }
}

/// Takes a route away when the call that made it ends (or is dropped).
pub(crate) struct Route {
    routes: Arc<crate::handler::Notes>,
    key: RouteKey,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes.progress.lock().routes.remove(&self.key);
    }
}

impl ProgressRoutes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // Every change is one insert or remove: a panic elsewhere leaves it usable.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Passes `update` to the call routed at `key`, or holds it until one is.
    pub(crate) fn deliver(&self, key: RouteKey, update: Progress) {
        let sink = {
            let mut table = self.lock();
            match table.routes.get(&key) {
                Some(sink) => Arc::clone(sink),
                None => {
                    if table.held.len() == HELD {
                        table.held.pop_front();
                    }
                    table.held.push_back((key, update));
                    return;
                }
            }
        };
        sink.report(update);
    }
}

/// Routes what comes for `key` to `sink` (with what was held for it) until the returned
/// [`Route`] is dropped.
pub(crate) fn route(
    notes: &Arc<crate::handler::Notes>,
    key: RouteKey,
    sink: Arc<dyn ProgressSink>,
) -> Route {
    let held: Vec<Progress> = {
        let mut table = notes.progress.lock();
        table.routes.insert(key.clone(), Arc::clone(&sink));
        let (mine, others) = std::mem::take(&mut table.held)
            .into_iter()
            .partition(|(k, _)| *k == key);
        table.held = others;
        mine.into_iter().map(|(_, update)| update).collect()
    };
    for update in held {
        sink.report(update);
    }
    Route {
        routes: Arc::clone(notes),
        key,
    }
}

/// A progress notification as buddy's update.
pub(crate) fn of_notification(params: &ProgressNotificationParam) -> Progress {
    Progress {
        progress: Some(params.progress),
        total: params.total,
        message: params.message.clone().filter(|m| !m.is_empty()),
        status: None,
    }
}

/// A task's status (and its message) as buddy's update.
pub(crate) fn of_task(task: &Task) -> Progress {
    let status = serde_json::to_value(task.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned));
    Progress {
        status,
        message: task.status_message.clone().filter(|m| !m.is_empty()),
        ..Progress::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    #[derive(Debug, Default)]
    struct Seen(Mutex<Vec<Progress>>);

    impl ProgressSink for Seen {
        fn report(&self, update: Progress) {
            self.0.lock().unwrap().push(update);
        }
    }

    fn at(n: f64) -> Progress {
        Progress {
            progress: Some(n),
            ..Progress::default()
        }
    }

    #[test]
    fn an_update_before_its_route_is_held_and_one_after_it_is_dropped() {
        let notes = Arc::new(crate::handler::Notes::default());
        let token = RouteKey::Token(ProgressToken(NumberOrString::Number(7)));
        notes.progress.deliver(token.clone(), at(1.0));
        notes
            .progress
            .deliver(RouteKey::Task("other".into()), at(9.0));
        let seen = Arc::new(Seen::default());
        let route = route(&notes, token.clone(), seen.clone());
        notes.progress.deliver(token.clone(), at(2.0));
        drop(route);
        notes.progress.deliver(token.clone(), at(3.0));
        let got: Vec<Option<f64>> = seen.0.lock().unwrap().iter().map(|p| p.progress).collect();
        assert_eq!(got, [Some(1.0), Some(2.0)]);
        // The update for the other task is still held; the late one is held too.
        assert_eq!(notes.progress.lock().held.len(), 2);
    }
}
