//! A server's progress, routed to the call it belongs to: `notifications/progress` by
//! the request's progress token (rmcp puts one on every request), `notifications/tasks`
//! by task id. What comes for a token or task not yet routed (a fast server can notify
//! before the caller has its request's token) is held, bounded, and handed over when
//! the route is made.
//!
//! rmcp hands each notification to a task of its own, so on a multi-threaded runtime
//! they are handled out of order, and some after the call's answer. MCP's progress
//! only grows: an update whose progress is not above the last one passed on is stale
//! and dropped (under the table's lock, so the sink sees them in order), and a call
//! that got progress waits, briefly, for its route to go quiet before it ends
//! ([`Route::settle`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use buddy_core::{Progress, ProgressSink};
use rmcp::model::{ProgressNotificationParam, ProgressToken, Task};

/// Updates held for routes not made yet; older ones are dropped first.
const HELD: usize = 32;

/// How often a call that got progress checks that no more is coming, and how many
/// quiet checks in a row end the wait.
const SETTLE_TICK: Duration = Duration::from_millis(2);
const QUIET_TICKS: u32 = 2;
/// The longest a call waits for its progress to go quiet.
const SETTLE_MAX: Duration = Duration::from_millis(100);

/// What a notification names its call by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RouteKey {
    Token(ProgressToken),
    Task(String),
}

/// Where one call's updates go, and what it passed on.
struct Routed {
    sink: Arc<dyn ProgressSink>,
    /// The progress last passed on: a lower or equal one is stale.
    last: Option<f64>,
    /// Updates that came for it, stale ones included.
    received: u64,
}

impl Routed {
    fn pass(&mut self, update: Progress) {
        self.received += 1;
        if let Some(progress) = update.progress {
            if self.last.is_some_and(|last| progress <= last) {
                return;
            }
            self.last = Some(progress);
        }
        self.sink.report(update);
    }
}

#[derive(Default)]
struct Table {
    routes: HashMap<RouteKey, Routed>,
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
    routes: Arc<ProgressRoutes>,
    key: RouteKey,
}

impl Route {
    fn received(&self) -> u64 {
        let table = self.routes.lock();
        table.routes.get(&self.key).map_or(0, |r| r.received)
    }

    /// Waits, at most [`SETTLE_MAX`], until no update came for [`QUIET_TICKS`] checks
    /// in a row — only when the call got progress at all: notifications rmcp had not
    /// handled yet when the answer came are passed on before the call ends.
    pub(crate) async fn settle(&self) {
        let mut seen = self.received();
        if seen == 0 {
            return;
        }
        let started = tokio::time::Instant::now();
        let mut quiet = 0;
        while quiet < QUIET_TICKS && started.elapsed() < SETTLE_MAX {
            tokio::time::sleep(SETTLE_TICK).await;
            let now = self.received();
            quiet = if now == seen { quiet + 1 } else { 0 };
            seen = now;
        }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes.lock().routes.remove(&self.key);
    }
}

impl ProgressRoutes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // Every change is one insert, remove or count: a panic elsewhere leaves it usable.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Passes `update` to the call routed at `key` (unless stale), or holds it until
    /// one is. The sink is told under the lock: two updates handled at once reach it
    /// in the order they were judged.
    pub(crate) fn deliver(&self, key: RouteKey, update: Progress) {
        let mut table = self.lock();
        match table.routes.get_mut(&key) {
            Some(routed) => routed.pass(update),
            None => {
                if table.held.len() == HELD {
                    table.held.pop_front();
                }
                table.held.push_back((key, update));
            }
        }
    }
}

/// Routes what comes for `key` to `sink` (with what was held for it) until the returned
/// [`Route`] is dropped.
pub(crate) fn route(
    routes: &Arc<ProgressRoutes>,
    key: RouteKey,
    sink: Arc<dyn ProgressSink>,
) -> Route {
    let mut table = routes.lock();
    let (mine, others): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut table.held)
        .into_iter()
        .partition(|(k, _)| *k == key);
    table.held = others;
    let mut routed = Routed {
        sink,
        last: None,
        received: 0,
    };
    for (_, update) in mine {
        routed.pass(update);
    }
    table.routes.insert(key.clone(), routed);
    drop(table);
    Route {
        routes: Arc::clone(routes),
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
    fn an_update_before_its_route_is_held_a_stale_one_and_one_after_it_dropped() {
        let routes = Arc::new(ProgressRoutes::default());
        let token = RouteKey::Token(ProgressToken(NumberOrString::Number(7)));
        routes.deliver(token.clone(), at(1.0));
        routes.deliver(RouteKey::Task("other".into()), at(9.0));
        let seen = Arc::new(Seen::default());
        let route = route(&routes, token.clone(), seen.clone());
        routes.deliver(token.clone(), at(3.0));
        // Handled late (rmcp's tasks run in any order): stale, dropped.
        routes.deliver(token.clone(), at(2.0));
        assert_eq!(route.received(), 3);
        drop(route);
        routes.deliver(token.clone(), at(4.0));
        let got: Vec<Option<f64>> = seen.0.lock().unwrap().iter().map(|p| p.progress).collect();
        assert_eq!(got, [Some(1.0), Some(3.0)]);
        // The update for the other task is still held; the late one is held too.
        assert_eq!(routes.lock().held.len(), 2);
    }
}
