//! One open connection as the table sees it: whether it showed a key, how far each of
//! its requests is, since when it has been idle — and, from that, how readily it is shed.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// One open connection.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(super) id: u64,
    pub(super) epoch: Instant,
    /// Its socket's peer is a trusted proxy: each request names the client.
    pub(super) from_proxy: bool,
    /// The connection sent a request with an accepted key.
    authenticated: AtomicBool,
    /// Requests whose body is still arriving.
    receiving: AtomicU32,
    /// Requests being answered (body in, response not yet sent to its end).
    serving: AtomicU32,
    /// Requests that read a running turn's events:
    /// not timed out as idle, but shed like an idle connection.
    watching: AtomicU32,
    /// When the connection last had no request in flight (or started watching), in ms
    /// after `epoch`.
    idle_since_ms: AtomicU64,
    pub(super) evicted: CancellationToken,
}

/// Why a connection was shed, or not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shed {
    /// Its address already holds the most connections one address may, all with a key
    /// or being answered.
    AddressLimit,
    /// The table is full and every connection in it is answering a request.
    Full,
    /// Made room for a new connection: it never showed a key.
    Unauthenticated,
    /// Made room for a new connection: idle (or reading a turn's events), though its
    /// client has a key.
    Idle,
}

impl Shed {
    /// The label of `buddy_connections_shed_total`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Shed::AddressLimit => "address_limit",
            Shed::Full => "full",
            Shed::Unauthenticated => "unauthenticated",
            Shed::Idle => "idle",
        }
    }

    /// Why a connection of `rank` was shed.
    pub(super) fn of_rank(rank: u8) -> Self {
        if rank < 2 {
            Shed::Unauthenticated
        } else {
            Shed::Idle
        }
    }
}

impl Slot {
    pub(super) fn new(id: u64, epoch: Instant, from_proxy: bool) -> Self {
        Slot {
            id,
            epoch,
            from_proxy,
            authenticated: AtomicBool::new(false),
            receiving: AtomicU32::new(0),
            serving: AtomicU32::new(0),
            watching: AtomicU32::new(0),
            idle_since_ms: AtomicU64::new(ms_since(epoch)),
            evicted: CancellationToken::new(),
        }
    }

    fn mark_idle_now(&self) {
        self.idle_since_ms
            .store(ms_since(self.epoch), Ordering::Relaxed);
    }

    /// The client sent a request with an accepted key on this connection.
    pub(crate) fn authenticate(&self) {
        self.authenticated.store(true, Ordering::Relaxed);
    }

    /// Whether the client sent a request with an accepted key on this connection.
    pub(crate) fn authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Relaxed)
    }

    /// A request arrived (its body may still be on its way).
    pub(crate) fn request_started(&self) {
        self.receiving.fetch_add(1, Ordering::AcqRel);
    }

    /// A request's body is in: from now on it is being answered.
    pub(crate) fn body_received(&self) {
        self.serving.fetch_add(1, Ordering::AcqRel);
        self.receiving.fetch_sub(1, Ordering::AcqRel);
    }

    /// A request being answered turned out to read a running turn's events: it may be
    /// shed from now on, as if idle since now.
    pub(crate) fn started_watching(&self) {
        self.watching.fetch_add(1, Ordering::AcqRel);
        self.serving.fetch_sub(1, Ordering::AcqRel);
        self.mark_idle_now();
    }

    /// A request ended in `stage`.
    pub(crate) fn request_ended(&self, stage: Stage) {
        let counter = match stage {
            Stage::Receiving => &self.receiving,
            Stage::Serving => &self.serving,
            Stage::Watching => &self.watching,
        };
        counter.fetch_sub(1, Ordering::AcqRel);
        self.mark_idle_now();
    }

    fn busy(&self) -> bool {
        self.receiving.load(Ordering::Acquire) > 0
            || self.serving.load(Ordering::Acquire) > 0
            || self.watching.load(Ordering::Acquire) > 0
    }

    /// How much longer the connection may stay idle within `limit`; `None` while a
    /// request is in flight.
    pub(crate) fn idle_left(&self, limit: Duration) -> Option<Duration> {
        if self.busy() {
            return None;
        }
        let idle = ms_since(self.epoch).saturating_sub(self.idle_since_ms.load(Ordering::Relaxed));
        Some(limit.saturating_sub(Duration::from_millis(idle)))
    }

    /// Resolves when the table sheds this connection to make room for another.
    pub(crate) async fn evicted(&self) {
        self.evicted.cancelled().await;
    }

    /// Whether the table shed this connection.
    #[cfg(test)]
    pub(crate) fn is_evicted(&self) -> bool {
        self.evicted.is_cancelled()
    }

    /// Lower goes first, then the longest idle; `None` is never shed (a request is being
    /// answered). Without a key: waiting (0), sending a body (1); with one: idle or
    /// watching (2), sending a body (3).
    pub(super) fn rank(&self) -> Option<(u8, u64)> {
        if self.serving.load(Ordering::Acquire) > 0 {
            return None;
        }
        let receiving = self.receiving.load(Ordering::Acquire) > 0;
        let rank = match (self.authenticated(), receiving) {
            (false, false) => 0,
            (false, true) => 1,
            (true, false) => 2,
            (true, true) => 3,
        };
        Some((rank, self.idle_since_ms.load(Ordering::Relaxed)))
    }
}

/// Where a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Its body is still arriving.
    Receiving,
    /// It is being answered.
    Serving,
    /// It reads a running turn's events.
    Watching,
}

fn ms_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}
